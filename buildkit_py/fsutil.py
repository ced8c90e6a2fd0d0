"""Reading the user's text files with one clear error, and writes that never leave a half-written file."""

from __future__ import annotations

import codecs
import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from .errors import ConfigError, OutputError, show

CACHE_ENV = "BUILDKIT_PY_CACHE_DIR"  # where buildkit-py keeps what it can make again (default: ~/.cache/buildkit-py)
# At the root of every run and study output directory buildkit-py makes: a build context leaves such a directory
# out wherever it lies (an --output inside the trainer directory), as it does a virtual environment.
OUTPUT_MARKER = ".buildkit-py-output"
MAX_TEXT_FILE = 1 << 20  # config files, templates, ignore and requirements files are small; a bigger one is a mistake

_WIDE_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
              (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


# The paths the stages from config to Dockerfile read or looked for, while a kept recipe (recipe.py) is being made.
_CONSULTED: ContextVar[dict[str, str] | None] = ContextVar("buildkit_py_consulted", default=None)


@contextmanager
def consulted() -> Iterator[dict[str, str]]:
    """Collect every path that consult() is given in this block (this thread only), with its signature as it was
    then: what the block's result depends on, besides its arguments and the environment."""
    paths: dict[str, str] = {}
    token = _CONSULTED.set(paths)
    try:
        yield paths
    finally:
        _CONSULTED.reset(token)


def consult(path: Path | str) -> None:
    """PATH is about to be read or looked for (a file that is not there counts as much as one that is)."""
    paths = _CONSULTED.get()
    if paths is not None:
        name = os.path.abspath(path)
        if name not in paths:
            paths[name] = signature(name)


def signature(path: str) -> str:
    """What PATH is now, as far as a reader can tell: where its symlinks lead, its kind and mode, and a file's
    content digest; or why it cannot be read. Equal signatures read the same."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
        if not stat.S_ISREG(st.st_mode):
            return f"{real}\0{stat.S_IFMT(st.st_mode):o}"
        with open(real, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as exc:
        return f"{real}\0error {exc.errno}"
    return f"{real}\0{st.st_mode:o}\0{digest}"


def leads_outside(path: str | os.PathLike[str], real_root: Path) -> bool:
    """Whether PATH, after every symlink and "..", lies outside REAL_ROOT (resolved already). The trainer directory's
    boundary: one rule for the build context and for every file buildkit-py reads there."""
    return not Path(os.path.realpath(path)).is_relative_to(real_root)


def inside(root: Path, path: Path, what: str) -> Path:
    """PATH, a file of the trainer directory ROOT, refused where a symlink or ".." takes it outside ROOT: a cloned
    repository must not have buildkit-py read, show or send the user's other files."""
    if leads_outside(path, root.resolve()):
        named = Path(os.path.abspath(path))
        shown = named.relative_to(os.path.abspath(root)) if named.is_relative_to(os.path.abspath(root)) else named
        raise ConfigError(f"the {what} leads outside the trainer directory (to {show(os.path.realpath(path))}); "
                          f"buildkit-py reads only files inside {show(str(root))}: put the file itself there",
                          where=str(shown))
    return path


def read_text(path: Path, what: str, *, limit: int = MAX_TEXT_FILE, root: Path | None = None) -> str:
    """A UTF-8 text file (a UTF-8 BOM is dropped), or ConfigError naming the file and what is wrong. With root
    (the trainer directory), a file that leads outside it is refused before it is opened."""
    if root is not None:
        inside(root, path, what)
    consult(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read the {what}: {exc.strerror or exc}", where=str(path)) from None
    if len(data) > limit:
        raise ConfigError(f"the {what} is larger than {limit // 1024} KiB; is it the right file?", where=str(path))
    for bom, name in _WIDE_BOMS:
        if data.startswith(bom):
            raise ConfigError(f"the {what} is encoded as {name}; save it as UTF-8", where=str(path))
    nul = data.find(b"\0")
    if nul >= 0:
        raise ConfigError(f"the {what} has a NUL byte at offset {nul}: it is not a text file", where=str(path))
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"the {what} is not valid UTF-8 (byte {exc.start}: {data[exc.start:exc.start + 1]!r}); "
                          "save it as UTF-8", where=str(path)) from None


def write_atomic(path: Path, text: str) -> None:
    """Write beside the target, then rename over it: readers see the old or the new file."""
    if path.is_dir():
        raise OutputError(f"{str(path)!r} is a directory; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:64]}.", dir=path.parent)
    except OSError as exc:
        raise OutputError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cache_dir() -> Path:
    """Build environments, sdists, run outputs and compiled templates: all of it can be deleted."""
    return Path(os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "buildkit-py")


def make_output_dir(path: Path) -> None:
    """Create a run or study output directory and mark it as buildkit-py's, so that builds leave it out. A
    directory that already holds other files is not marked: it may be the user's own, which builds must keep."""
    path.mkdir(parents=True, exist_ok=True)
    marker = path / OUTPUT_MARKER
    if not marker.exists() and not any(path.iterdir()):
        marker.write_text("Outputs of a buildkit-py run or study. buildkit-py leaves this directory out of build "
                          "contexts; delete this file to have it sent.\n", encoding="utf-8")


def kept_text(folder: str, text: str, suffix: str) -> Path:
    """A generated file for a build context, named by its content under the cache's folder."""
    path = cache_dir() / folder / (hashlib.sha256(text.encode()).hexdigest() + suffix)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    consult(path)  # a build context takes it: a kept recipe naming it holds while it is there
    return path
