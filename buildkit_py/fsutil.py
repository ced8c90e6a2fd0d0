"""Reading the user's text files with one clear error, and writes that never leave a half-written file."""

from __future__ import annotations

import codecs
import functools
import hashlib
import os
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import ConfigError, OutputError, show

T = TypeVar("T")

if TYPE_CHECKING:
    import ast

CACHE_ENV = "BUILDKIT_PY_CACHE_DIR"  # where buildkit-py keeps what it can make again (default: ~/.cache/buildkit-py)
# At the root of every run and study output directory buildkit-py makes: a build context leaves such a directory
# out wherever it lies (an --output inside the trainer directory), as it does a virtual environment.
OUTPUT_MARKER = ".buildkit-py-output"
MAX_TEXT_FILE = 1 << 20  # config files, templates, ignore and requirements files are small; a bigger one is a mistake
# Nesting in a config, a TOML file or an API keyword: a config nests 4 levels (variants[0].trainer.args[0]); deeper is a
# mistake or an attack on the recursion of a parser or a walk.
MAX_NESTING = 16
# Python's own parser gives up (RecursionError, MemoryError) some thousands of levels down, never fewer than this.
PYTHON_NESTING = 1000
# Values walked in one document or keyword: a 1 MiB file holds fewer; an API caller's list shared at every level (a
# billion laughs made of Python objects) is stopped here.
MAX_VALUES = 1_000_000
PATH_BYTES = 4096  # PATH_MAX: the longest path a system call takes
NAME_BYTES = 255  # NAME_MAX: the longest file name

_WIDE_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
              (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


# The paths the stages from config to Dockerfile read or looked for, while a kept recipe (recipe.py) is being made.
_CONSULTED: ContextVar[_Consulted | None] = ContextVar("buildkit_py_consulted", default=None)


# What one command has read (real path -> (st_mode, the file's bytes)), and what it asked git: each input is read
# once per command however many stages look at it, and every stage sees the same bytes (a file saved mid-command
# cannot give the plan one version and the build context another). Only small files are kept (KEPT_FILE_BYTES each,
# KEPT_BYTES in all); bigger ones are streamed from disk where they are needed.
_READS: ContextVar[_Reads | None] = ContextVar("buildkit_py_reads", default=None)
KEPT_FILE_BYTES = MAX_TEXT_FILE
KEPT_BYTES = 256 << 20


class _Reads:
    def __init__(self) -> None:
        self.files: dict[str, tuple[int, bytes]] = {}
        self.size = 0
        self.answers: dict[tuple, object] = {}


@contextmanager
def one_read() -> Iterator[None]:
    """The block is one command: within it each file is opened once (see _READS); a block inside another shares it."""
    if _READS.get() is not None:
        yield
        return
    token = _READS.set(_Reads())
    try:
        yield
    finally:
        _READS.reset(token)


def reads_once(function: Callable) -> Callable:
    """A command of the API: its stages read each input once (one_read)."""
    @functools.wraps(function)
    def command(*args, **kwargs):
        with one_read():
            return function(*args, **kwargs)
    return command


def kept(path: str | os.PathLike[str]) -> tuple[int, bytes] | None:
    """(st_mode, bytes) of a file this command has read already; None."""
    reads = _READS.get()
    return None if reads is None else reads.files.get(os.path.realpath(path))


def keeping(size: int) -> bool:
    """Whether a file of this size is kept when a command reads it (see _READS)."""
    return _READS.get() is not None and size <= KEPT_FILE_BYTES


def keep(path: str | os.PathLike[str], mode: int, data: bytes) -> None:
    """Remember a whole small file this command read, for its other stages."""
    reads = _READS.get()
    if reads is not None and len(data) <= KEPT_FILE_BYTES and reads.size + len(data) <= KEPT_BYTES:
        name = os.path.realpath(path)
        if name not in reads.files:
            reads.files[name] = (mode, data)
            reads.size += len(data)


TREE = "tree"  # asked_once keys (TREE, a directory's real path, ...): an answer about the files under that directory


def forget(path: str | os.PathLike[str]) -> None:
    """The command wrote PATH: a later read of it reads the new file, and a later walk of a directory above it sees
    it."""
    reads = _READS.get()
    if reads is not None:
        real = os.path.realpath(path)
        found = reads.files.pop(real, None)
        reads.size -= len(found[1]) if found else 0
        for key in [k for k in reads.answers if k[0] == TREE and real.startswith(k[1].rstrip(os.sep) + os.sep)]:
            del reads.answers[key]


def asked_once(key: tuple, ask: Callable[[], object]) -> object:
    """What ask() answers, asked once per command (a question about the inputs, such as git's state)."""
    reads = _READS.get()
    if reads is None:
        return ask()
    if key not in reads.answers:
        reads.answers[key] = ask()
    return reads.answers[key]


def read_small(path: str | os.PathLike[str], limit: int) -> tuple[int, bytes]:
    """(st_mode, at most limit + 1 bytes) of a file, opened once per command: a file of at most limit bytes is kept."""
    found = kept(path)
    if found is not None:
        return found[0], found[1][:limit + 1]
    with open(path, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        data = handle.read(limit + 1)
    if len(data) <= limit and stat.S_ISREG(mode):
        keep(path, mode, data)
    return mode, data


def read_whole(path: str | os.PathLike[str]) -> bytes:
    """A whole file, opened once per command where it is small enough to keep (a CA bundle, a requirements file):
    one over the kept size is read whole each time it is asked for."""
    _, data = read_small(path, KEPT_FILE_BYTES)
    return data if len(data) <= KEPT_FILE_BYTES else Path(path).read_bytes()


class _Consulted(dict):
    """What a consulted() block collects: path -> signature; listings: directories' names count too."""

    listings = False


@contextmanager
def consulted(*, listings: bool = False) -> Iterator[dict[str, str]]:
    """Collect every path that consult() is given in this block (this thread only), with its signature as it was
    then: what the block's result depends on, besides its arguments and the environment. listings: also each
    directory the trainer's walk lists, by its names (consult_listing): a dry run's output changes with a file
    added anywhere inference looks; a build's recipe does not (the fast path checks the imports it serves)."""
    paths = _Consulted()
    paths.listings = listings
    token = _CONSULTED.set(paths)
    try:
        yield paths
    finally:
        _CONSULTED.reset(token)


def consult(path: Path | str, *, by_stat: bool = False, written: bool = False) -> None:
    """PATH is about to be read or looked for (a file that is not there counts as much as one that is).
    by_stat: a big file that its size and mtime stand for (a program run, not read: hashing it would cost more
    than the command). written: the block has just written PATH (a cache it looked for first): it counts as it is
    now."""
    _record((_BY_STAT if by_stat else "") + os.path.abspath(path), written)


def consult_listing(path: Path | str) -> None:
    """Directory PATH has just been listed: with consulted(listings=True), its names count."""
    paths = _CONSULTED.get()
    if paths is not None and paths.listings:
        _record(_LISTING + os.path.abspath(path), False)


def _record(name: str, written: bool) -> None:
    paths = _CONSULTED.get()
    if paths is not None and (written or name not in paths):
        paths[name] = signature(name)


# consult(by_stat=True)'s and consult_listing's paths: no absolute path starts so.
_BY_STAT, _LISTING = "stat:", "list:"


def signature(path: str) -> str:
    """What PATH is now, as far as a reader can tell: where its symlinks lead, its kind and mode, and a file's
    content digest (a "stat:" path: its size and mtime; a "list:" directory: its names); or why it cannot be read.
    Equal signatures read the same."""
    how, _, rest = path.partition(":") if path.startswith((_BY_STAT, _LISTING)) else ("", "", path)
    real = os.path.realpath(rest)
    try:
        st = os.stat(real)
        if how == "stat":
            return f"{real}\0{st.st_mode:o}\0{st.st_size}\0{st.st_mtime_ns}"
        if how == "list":
            names = "\0".join(sorted(os.listdir(real)))
            return f"{real}\0{st.st_mode:o}\0{hashlib.sha256(names.encode('utf-8', 'surrogateescape')).hexdigest()}"
        if not stat.S_ISREG(st.st_mode):
            return f"{real}\0{stat.S_IFMT(st.st_mode):o}"
        if keeping(st.st_size):  # the stage that reads it next reads no more
            _, data = read_small(real, KEPT_FILE_BYTES)
            digest = hashlib.sha256(data).hexdigest()
        else:
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
        _, data = read_small(path, limit)
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


def nesting_problem(value: object, limit: int = MAX_NESTING) -> str | None:
    """Why a parsed document or a keyword's value nests too deep (or holds too many values), or None: walked with a
    stack, never recursing; a value that holds itself ends at the limit."""
    stack = [(value, 0)]
    walked = 0
    while stack:
        item, depth = stack.pop()
        walked += 1
        if walked > MAX_VALUES:
            return f"more than {MAX_VALUES} values in all"
        if isinstance(item, (dict, list, tuple, set, frozenset)):
            if depth >= limit:
                return too_deep(limit)
            stack += [(child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)]
    return None


def too_deep(limit: int) -> str:
    return f"nested too deep: more than {limit} levels"


def parse_toml(text: str, where: str) -> dict:
    """A TOML document, or ConfigError naming the file: its syntax, or nesting past MAX_NESTING levels (tomllib
    recurses into arrays and inline tables; dotted keys nest without it)."""
    import tomllib

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", where=where) from None
    except RecursionError:  # tomllib gives up hundreds of levels down, past MAX_NESTING
        raise ConfigError(too_deep(MAX_NESTING), where=where) from None
    problem = nesting_problem(document)
    if problem:
        raise ConfigError(problem, where=where)
    return document


def read_toml(path: Path, what: str, *, root: Path | None = None) -> dict:
    """A TOML file read as read_text reads it (inside root, when given), parsed by parse_toml once a command (a
    pyproject.toml is read by the config, inference, the lock files' checks and packaging): each caller gets its own
    copy."""
    import copy

    text = read_text(path, what, root=root)
    return copy.deepcopy(asked_once(("toml", str(path), text), lambda: parse_toml(text, str(path))))


def parse_python(text: str | bytes, filename: str) -> ast.Module:
    """A Python module's AST (SyntaxError as ast.parse raises it), or ConfigError naming the file where the parser
    gives up on nesting (an expression of 100,000 terms): Python could not run that file either."""
    import ast  # here, for start-up time

    try:
        return ast.parse(text, filename=filename)
    except (RecursionError, MemoryError):  # MemoryError: the parser's own stack, not the machine's memory
        raise ConfigError(too_deep(PYTHON_NESTING) + " (Python's parser gives up)", where=filename) from None


def path_problem(value: str) -> str | None:
    """Why a path the user gives cannot name a file on this system, or None: said before any work, instead of
    the OSError or UnicodeEncodeError of the first system call."""
    if not value or "\0" in value:
        return "a path, not empty, without NUL characters"
    try:
        data = os.fsencode(value)
    except UnicodeEncodeError:
        return "a path of valid Unicode (it holds a lone surrogate)"
    if len(data) > PATH_BYTES:
        return f"a path of at most {PATH_BYTES} bytes"
    if any(len(part) > NAME_BYTES for part in data.split(b"/")):
        return f"a path whose every name is at most {NAME_BYTES} bytes"
    return None


@functools.cache
def _new_file_mode() -> int:
    """What open() gives a new file under this process's umask (mkstemp's 0600 would make every written file private):
    read once, before any thread of ours creates files."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, text: str) -> None:
    """Write beside the target, then rename over it: readers see the old or the new file, with the old file's mode
    (else a new file's under the umask)."""
    try:
        if path.is_dir():
            raise OutputError(f"{show(str(path))} is a directory; give a file name")
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            mode = _new_file_mode()
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:64]}.", dir=path.parent)
    except (OSError, ValueError) as exc:  # ValueError: a name the system cannot encode
        raise OutputError(f"cannot write {show(str(path))}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(text)
        os.replace(tmp, path)
        forget(path)  # what this command read of the old file is not what the next stage must see
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError(f"cannot write {show(str(path))}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_private(path: Path, data: bytes) -> Path:
    """A new file only its owner can read (a secret for a build or a resolver): refused if the name is taken, so
    that nothing already there, a link above all, is written through."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


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


def in_background(function: Callable[..., T], *args) -> Callable[[], T]:
    """Run FUNCTION in a daemon thread (one that Ctrl-C does not wait for); the returned call waits for its
    result or raises its exception."""
    outcome: dict[str, Any] = {}
    context = copy_context()  # the command's: what it has read and asked (fsutil.one_read)

    def work() -> None:
        try:
            outcome["value"] = context.run(function, *args)
        except BaseException as exc:  # handed to the caller's thread, which decides
            outcome["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()

    def result() -> T:
        thread.join()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    return result
