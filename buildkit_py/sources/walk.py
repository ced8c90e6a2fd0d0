"""The walk of the trainer directory: the files the ignore patterns let in, without following links out of it,
with bounds on depth and count."""


from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from ..errors import ContextError, shown_name
from ..fsutil import OUTPUT_MARKER, TREE, asked_once, consult_listing, leads_outside
from .ignore import IgnorePattern, is_excluded, matching_patterns, may_reinclude, parse_ignore

# A checkout's code is a few levels deep and some thousands of files; past these it is data, or a trap.
MAX_DEPTH = 256


MAX_FILES = 200_000


SHOWN_LINKS = 20  # a vendored tree can hold hundreds of links: name enough to find the culprit


GONE = (FileNotFoundError, NotADirectoryError)  # a file deleted (or its directory deleted or replaced) since listed


def _left_out_tree(entries: Iterable[os.DirEntry[str]]) -> str | None:
    """Why a directory is left out whatever its name: a Python virtual environment (pyvenv.cfg, which venv,
    virtualenv and uv write), a conda environment, or run or study outputs of buildkit-py (its marker file)."""
    for e in entries:
        if e.name == "pyvenv.cfg" and e.is_file(follow_symlinks=False):
            return "a Python environment"
        if e.name == "conda-meta" and e.is_dir(follow_symlinks=False):
            return "a conda environment"
        if e.name == OUTPUT_MARKER and e.is_file(follow_symlinks=False):
            return "outputs of buildkit-py runs"
    return None


def _walk(root: Path, patterns: Sequence[IgnorePattern], notes: list[str]) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Kept files and symlinks; directories are not followed through links, and skipped when nothing in them can be kept.

    An environment or an output directory of buildkit-py is left out wherever it is and whatever its name (a
    trainer's package may well be called env/ or build/), unless a "!" pattern names it or something inside it:
    a "!" that re-includes a parent directory does not bring back the environment within. Outputs left out, and
    a directory deleted while it is listed, are told in notes."""
    # (directory, depth of the environment it lies in (0 when none), the patterns matching it or a parent, and
    # those matching it or a parent inside that environment)
    pending = [("", 0, 0, 0)]
    kept = 0
    while pending:
        folder, env_depth, hits, env_hits = pending.pop()
        try:
            # A string, not root / folder: pathlib splits the whole path again for each directory.
            with os.scandir(os.path.join(root, folder)) as scan:
                entries = list(scan)
            consult_listing(os.path.join(root, folder))  # a file added here may change what inference finds
        except GONE:
            if not folder:
                raise
            notes.append(f"{shown_name(folder)}/ was deleted while the build context was listed: left out")
            continue
        why = None if not folder or env_depth else _left_out_tree(entries)  # not the root: that is what the user named
        if why:
            env_depth, env_hits = folder.count("/") + 1, matching_patterns(folder, patterns)
            if not may_reinclude(folder, patterns, env_depth):
                if why.startswith("outputs"):  # an environment is plainly one; outputs might have been meant to ship
                    notes.append(f"{shown_name(folder)}/ left out: it holds {why} ({OUTPUT_MARKER}); "
                                 f'a "!{shown_name(folder)}" line in .dockerignore keeps it')
                continue
        for entry in entries:
            rel = f"{folder}/{entry.name}" if folder else entry.name
            own = matching_patterns(rel, patterns)
            excluded = is_excluded(hits | own, patterns) or (
                env_depth > 0 and is_excluded(env_hits | own, patterns, excluded=True))
            if entry.is_dir(follow_symlinks=False):
                # .git and .venv hold most of the files in a checkout: never walked unless a "!" may reach in.
                if not excluded or may_reinclude(rel, patterns, env_depth):
                    if rel.count("/") >= MAX_DEPTH:  # rel is one deeper than that count
                        raise ContextError(f"{shown_name(rel)} is more than {MAX_DEPTH} directories deep: buildkit-py "
                                           f"walks trees at most {MAX_DEPTH} deep; add it to .dockerignore")
                    pending.append((rel, env_depth, hits | own, env_hits | own))
            elif not excluded and (entry.is_symlink() or entry.is_file(follow_symlinks=False)):
                kept += 1
                if kept > MAX_FILES:
                    raise ContextError(f"the trainer directory holds more than {MAX_FILES} files to send (at "
                                       f"{shown_name(rel)}): buildkit-py takes at most {MAX_FILES}; add the data to "
                                       ".dockerignore and read it at run time (a bucket, or a mounted directory)")
                yield rel, entry


def _os_error(exc: OSError) -> ContextError:
    where = shown_name(os.fsdecode(exc.filename)) if exc.filename is not None else "the build context"
    return ContextError(f"cannot read {where}: {exc.strerror or exc}")


def included_files(root: Path, ignore_text: str, notes: list[str] | None = None) -> list[str]:
    """Regular files and symlinks the ignore list keeps, sorted; a kept symlink leading out of root is refused.
    What else is left out (buildkit-py's outputs, a directory deleted meanwhile) is added to notes. The tree is walked
    once a command for the same ignore list (inference's imports, the build context, the trainer's package): a
    file the command writes under root (fsutil.forget) makes the next call walk again."""
    key = (TREE, os.path.realpath(root), ignore_text)
    files, said = asked_once(key, lambda: _included(root, ignore_text))  # type: ignore[misc]
    if notes is not None:
        notes.extend(said)
    return list(files)


def _included(root: Path, ignore_text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    notes: list[str] = []
    patterns = parse_ignore(ignore_text)
    files: list[str] = []
    escaping: list[str] = []
    try:
        real_root = root.resolve()
        for rel, entry in _walk(real_root, patterns, notes):
            if entry.is_symlink() and leads_outside(entry.path, real_root):
                escaping.append(f"  {shown_name(rel)} -> {shown_name(os.readlink(entry.path))}")
            files.append(rel)
    except OSError as exc:
        raise _os_error(exc) from None
    if escaping:
        more = f"\n  ... and {len(escaping) - SHOWN_LINKS} more" if len(escaping) > SHOWN_LINKS else ""
        raise ContextError(
            f"the build context has symlinks that lead outside {root}; the builder cannot send what they point to:\n"
            + "\n".join(escaping[:SHOWN_LINKS])
            + more
            + "\nAdd them to .dockerignore, or replace them with the files they point to."
        )
    return tuple(sorted(files)), tuple(notes)


def open_regular(path: Path) -> BinaryIO | None:
    """A regular file opened for reading; None for anything else. The open neither follows a link nor waits
    on a FIFO, in case the file was swapped for one since it was listed."""
    if not stat.S_ISREG(path.lstat().st_mode):
        return None
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")
