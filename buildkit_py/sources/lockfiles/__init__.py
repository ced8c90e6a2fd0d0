"""Lock files other tools write, taken as the image's requirements: uv.lock, pylock.toml (PEP 751), poetry.lock and
Pipfile.lock. Each becomes hash-pinned requirement lines of the packages it locks for the image's Python and platform
(markers evaluated here; uv.lock's dependency graph walked from the project), so the image installs exactly the locked
releases. A lock is first held against the project file it was made from (pyproject.toml, Pipfile): one that no longer
matches it is named, never used. Nothing is run and nothing is fetched.

The package: which files are locks and which reader reads each (`locked`), and the export of a lock's packages as
requirement lines (`export`). The readers: `uv`, `pylock` (PEP 751), `poetry`, `pipenv`; what they share (`common`:
the locked distribution, the image's markers, the lock's fields checked) and the project files they are held against
(`project`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ...errors import ConfigError
from ...fsutil import consult, inside, kept_text
from ...patterns import lazy_pattern
from .common import Locked, environment
from .pipenv import _pipenv
from .poetry import _poetry
from .pylock import _pylock
from .uv import _uv

# The names each tool writes, in the order autopackage prefers them when a directory has several.
LOCK_FILES = ("uv.lock", "pylock.toml", "poetry.lock", "Pipfile.lock")
_PYLOCK = lazy_pattern(r"pylock\.[^./\\]+\.toml", re.ASCII)  # PEP 751's named locks: pylock.<name>.toml
CONTEXT_FILE = ".buildkit-py/requirements-locked.txt"  # the exported lines' place in the build context


def is_lock_file(name: str) -> bool:
    base = PurePosixPath(name).name
    return base in LOCK_FILES or bool(_PYLOCK.fullmatch(base))


@dataclass(frozen=True)
class Exported:
    """A lock file's packages for one image: the requirement lines, where they are in the build context and on this
    machine, and (requirement, where) of each for messages."""

    origin: str  # the lock file, relative to the trainer directory
    context: str  # CONTEXT_FILE
    source: Path  # the exported file on this machine (named by its content)
    pins: tuple[tuple[str, str], ...]  # ("torch==2.5.1", "uv.lock:88")


_READERS = {"uv.lock": _uv, "poetry.lock": _poetry, "Pipfile.lock": _pipenv}


def locked(root: Path, name: str, python: str, platform: str, extras: tuple[str, ...] = (),
           groups: tuple[str, ...] = ()) -> list[Locked]:
    """The distributions the lock file `name` (relative to root) installs on CPython `python` for `platform`, with the
    project's `extras` and dependency `groups` (uv.lock, poetry.lock)."""
    consult(root / name)
    base = PurePosixPath(name).name
    reader = _READERS.get(base, _pylock)
    folder = (root / name).parent  # its project file is beside it
    for read in (base, "pyproject.toml", "Pipfile"):  # what a reader opens: inside the trainer directory
        inside(root, folder / read, read)
    if reader in (_uv, _poetry):
        return reader(folder, base, environment(python, platform), extras, groups)
    if extras or groups:
        raise ConfigError(f"{name}: requirements_extras and requirements_groups choose what a uv.lock or poetry.lock "
                          f"installs; {base} holds one set", field="requirements_extras" if extras else
                          "requirements_groups")
    return reader(folder, base, environment(python, platform))


def export(root: Path, name: str, python: str, platform: str, extras: tuple[str, ...] = (),
           groups: tuple[str, ...] = ()) -> Exported:
    """The lock's packages for the image as a requirements file (hash-pinned), kept under its content."""
    found = locked(root, name, python, platform, extras, groups)
    # The indexes the lock took packages from beside PyPI (PyTorch's cu126 for torch==2.6.0+cu126): the install reads
    # them as the lock's resolver did.
    indexes = "".join(f"--extra-index-url {u}\n" for u in dict.fromkeys(p.index for p in found if p.index))
    text = f"# {name}: the packages it locks for Python {python} ({platform}), exported by buildkit-py\n" + \
        indexes + "".join(p.line + "\n" for p in found)
    path = kept_text("locks", text, ".txt")
    return Exported(name, CONTEXT_FILE, path, tuple((p.requirement, p.where) for p in found))


def found_in(directory: Path) -> str | None:
    """The lock file of a trainer directory, in LOCK_FILES order (then pylock.<name>.toml)."""
    for name in LOCK_FILES:
        if (directory / name).is_file() and not (directory / name).is_symlink():
            return name
    named = sorted(p.name for p in directory.glob("pylock.*.toml") if _PYLOCK.fullmatch(p.name) and p.is_file())
    return named[0] if named else None
