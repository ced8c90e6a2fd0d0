"""Where the shipped data lives: inside the wheel (buildkit_py/templates, buildkit_py/base_images,
mapped there by pyproject.toml) or, in a source checkout, at the top level beside the package."""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..fsutil import cache_dir

_PACKAGE = Path(__file__).resolve().parents[1]  # buildkit_py/, of which catalog/ is a part


def resource_dir(name: str) -> Path:
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise DataError(f"buildkit-py is installed without its {name}/ folder (looked beside {_PACKAGE})")


def read_data(path: Path, what: str | None = None) -> Any:
    """A YAML file of ours: base_images/ or the matrix overlay we write (the user's files go through
    config.py's checks instead)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {what or path}: {exc}") from None
    try:
        kept = _parsed_path(raw)
        return marshal.loads(kept.read_bytes())
    except (OSError, RuntimeError, EOFError, ValueError, TypeError):
        pass  # not parsed before, a damaged copy, or no cache directory (no home): parsed now
    import yaml  # only when the parsed form is not kept

    # libyaml's loader reads the shipped tables about 9x faster than the pure-Python one (about 90 ms
    # of every command's start-up); PyYAML's wheels include it, a source build may not.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(raw.decode("utf-8"), Loader=loader)  # noqa: S506 (a safe loader)
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise DataError(f"cannot read {what or path}: {exc}") from None
    _keep(raw, data)
    return data


def _parsed_path(raw: bytes) -> Path:
    """Where the parsed form of a data file with these bytes is kept: even libyaml's loader builds the objects
    in Python, about 15 ms of every command that plans; marshal loads them in well under 1. Keyed by the bytes
    and the interpreter (marshal's format is its own), so an edited file or another Python parses again."""
    key = hashlib.sha256(raw + f"|{sys.version}|{marshal.version}".encode()).hexdigest()[:40]
    return cache_dir() / "data" / f"{key}.marshal"


def _keep(raw: bytes, data: Any) -> None:
    """Write the parsed form for the next run; a cache that cannot be written (or data marshal cannot hold,
    such as a date) only makes that run parse again."""
    try:
        blob = marshal.dumps(data)
        path = _parsed_path(raw)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except (OSError, RuntimeError, ValueError):
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(blob)
        os.replace(tmp, path)  # readers see the whole file or none
    except OSError:
        Path(tmp).unlink(missing_ok=True)


LAUNCHER_CONTEXT_DIR = ".buildkit-py/launcher"  # where builds place the launcher in the context
LAUNCHER_MODULE = "buildkit_launcher"  # its package name inside images


def launcher_sources() -> list[tuple[str, Path]]:
    """(path in the build context, source file) for every file of the launcher package."""
    return [(f"{LAUNCHER_CONTEXT_DIR}/{p.name}", p) for p in sorted((_PACKAGE / "launcher").glob("*.py"))]
