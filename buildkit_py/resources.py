"""Where the shipped data lives: inside the wheel (buildkit_py/templates, buildkit_py/base_images,
mapped there by pyproject.toml) or, in a source checkout, at the top level beside the package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import DataError

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise DataError(f"buildkit-py is installed without its {name}/ folder (looked beside {_PACKAGE})")


# libyaml's loader reads the shipped tables about 9x faster than the pure-Python one (about 90 ms
# of every command's start-up); PyYAML's wheels include it, a source build may not.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_data(path: Path, what: str | None = None) -> Any:
    """A YAML file of ours: base_images/ or the matrix overlay we write (the user's files go through
    config.py's checks instead)."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)  # noqa: S506 (a safe loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise DataError(f"cannot read {what or path}: {exc}") from None


LAUNCHER_CONTEXT_DIR = ".buildkit-py/launcher"  # where builds place the launcher in the context
LAUNCHER_MODULE = "buildkit_launcher"  # its package name inside images


def launcher_sources() -> list[tuple[str, Path]]:
    """(path in the build context, source file) for every file of the launcher package."""
    return [(f"{LAUNCHER_CONTEXT_DIR}/{p.name}", p) for p in sorted((_PACKAGE / "launcher").glob("*.py"))]
