"""Where the shipped data lives: inside the wheel (buildkit_py/templates, buildkit_py/base_images,
mapped there by pyproject.toml) or, in a source checkout, at the top level beside the package."""

from __future__ import annotations

from pathlib import Path

from .errors import DataError

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise DataError(f"buildkit-py is installed without its {name}/ folder (looked beside {_PACKAGE})")


LAUNCHER_CONTEXT_DIR = ".buildkit-py/launcher"  # where builds place the launcher in the context
LAUNCHER_MODULE = "buildkit_launcher"  # its package name inside images


def launcher_sources() -> list[tuple[str, Path]]:
    """(path in the build context, source file) for every file of the launcher package."""
    return [(f"{LAUNCHER_CONTEXT_DIR}/{p.name}", p) for p in sorted((_PACKAGE / "launcher").glob("*.py"))]
