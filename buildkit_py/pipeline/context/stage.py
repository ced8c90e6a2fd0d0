"""The listing of a build context, its digest, and the staged copy BuildKit is handed."""


from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import BinaryIO

from ...errors import ContextError, shown_name
from ...fsutil import kept
from ...sources.walk import GONE, included_files, open_regular
from .secrets import LARGE_FILE_BYTES, find_large_files, find_secrets, large_problem, refuse

FIXED_MTIME = 315532800  # 1980-01-01, the earliest time every archive format (zip included) can hold


DIGEST_SCHEME = b"buildkit-py context v1\n"  # a change to what the digest covers must change every digest


def _record(kind: str, path: str, content_sha256: str) -> bytes:
    # NUL cannot occur in a path and the hash has a fixed length, so records cannot run into each other.
    return kind.encode() + b"\0" + os.fsencode(path) + b"\0" + content_sha256.encode() + b"\n"


def _link_target(source: Path) -> str:
    # Relative, so it resolves inside the staged copy wherever the original pointed (inside root).
    return os.path.relpath(os.path.realpath(source), source.parent)


def _read_regular(rel: str, source: Path, limit: int | None, writer: BinaryIO | None) -> tuple[str, str]:
    """A regular file's kind (its normalised mode) and the hash of the bytes read; with writer, those bytes are
    copied there too. Past limit bytes (a file that grew since its size was checked) it stops and refuses."""
    found = kept(source)  # read whole already in this command (its head, the plan): the same bytes, not the file's now
    reader = io.BytesIO(found[1]) if found is not None else open_regular(source)
    if reader is None:
        raise ContextError(f"{shown_name(rel)} changed while the build context was read: it is no longer a regular file")
    # Only the exec bit carries over (as git keeps it): the image must not depend on the checkout's umask.
    content = hashlib.sha256()
    read = 0
    with reader:
        mode = 0o755 if (found[0] if found is not None else os.fstat(reader.fileno()).st_mode) & stat.S_IXUSR else 0o644
        # One byte past the limit is enough to know: a log that keeps growing is not read to its end.
        while chunk := reader.read(1 << 20 if limit is None else min(1 << 20, limit + 1 - read)):
            read += len(chunk)
            if limit is not None and read > limit:
                raise ContextError(large_problem([f"  {shown_name(rel)}  (grew past {LARGE_FILE_BYTES >> 20} MiB "
                                                   "while the build context was read)"]))
            if writer is not None:
                writer.write(chunk)
            content.update(chunk)
    return f"{mode:o}", content.hexdigest()


def _take(rel: str, source: Path, limit: int | None, target: Path | None) -> tuple[str, str]:
    """Read one file or symlink once: its kind and content hash; with target, copied there with a normalised
    mode and a fixed mtime."""
    if source.is_symlink():
        link = _link_target(source)
        if target is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(link, target)
            os.utime(target, (FIXED_MTIME, FIXED_MTIME), follow_symlinks=False)
        return "link", hashlib.sha256(os.fsencode(link)).hexdigest()
    if target is None:
        return _read_regular(rel, source, limit, None)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with target.open("xb") as writer:
            kind, content = _read_regular(rel, source, limit, writer)
    except BaseException:
        target.unlink(missing_ok=True)  # a file gone before its first byte leaves no empty copy behind
        raise
    target.chmod(int(kind, 8))
    os.utime(target, (FIXED_MTIME, FIXED_MTIME))
    return kind, content


def _write_generated(directory: Path, rel: str, data: bytes) -> tuple[str, str, str]:
    target = directory / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    target.chmod(0o644)
    os.utime(target, (FIXED_MTIME, FIXED_MTIME))
    return rel, "644", hashlib.sha256(data).hexdigest()


def _settle_directories(directory: Path) -> None:
    """Fixed mode and mtime for every staged directory, once nothing more is written into them."""
    for folder, _, _ in os.walk(directory):
        os.chmod(folder, 0o755)
        os.utime(folder, (FIXED_MTIME, FIXED_MTIME))


@dataclass(frozen=True)
class ContextListing:
    """The listed and checked context (secrets and large files refused), no content read yet but the heads that
    the secret check reads."""

    dockerfile_text: str
    # (path in the context, source, the byte limit while reading it: None where --allow-large lifts it)
    sources: tuple[tuple[str, Path, int | None], ...]
    notes: tuple[str, ...]  # what the listing left out beyond the ignore rules, and why


@dataclass(frozen=True)
class Snapshot:
    """What was read, once per file: the files, the digest of exactly those bytes, and notes on what was left out."""

    files: tuple[str, ...]  # POSIX paths relative to the root, sorted; the files buildkit-py adds last
    digest: str  # sha256 hex of the Dockerfile text and every file's path, kind (mode or link) and content
    notes: tuple[str, ...]
    # (path, kind, content sha256) per file, as the digest covers them: what the fast path compares step by step
    entries: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class BuildContext:
    """A staged build context: the directory of the snapshot's files, the Dockerfile beside it, and the snapshot."""

    directory: Path  # the staged context directory (contains only the snapshot's files)
    dockerfile: Path  # the Dockerfile, outside `directory` (a sibling in the same temp dir)
    snapshot: Snapshot  # its digest names this directory's content


def add_generated(ctx: BuildContext, rel: str, data: bytes) -> BuildContext:
    """The staged context with a file made from its files (the import check's module list). Being a function of the
    staged files, it needs no place in the digest; the snapshot's entries hold it, for the fast path's comparison."""
    entry = _write_generated(ctx.directory, rel, data)
    _settle_directories(ctx.directory)
    return replace(ctx, snapshot=replace(ctx.snapshot, entries=ctx.snapshot.entries + (entry,)))


def list_context(
    root: Path, dockerfile_text: str, ignore_text: str, *, allow_secrets: Sequence[str] = (),
    allow_large: Sequence[str] = (), extras: Sequence[tuple[str, Path]] = (),
) -> ContextListing:
    """List and check the context. Secrets and files over LARGE_FILE_BYTES are refused, before a byte of content
    is read past a file's head, unless a pattern of allow_secrets / allow_large matches them. `extras` are
    (path in the context, source file) pairs that buildkit-py adds; they replace a project file at the same
    path."""
    replaced = {rel for rel, _ in extras}
    notes: list[str] = []
    files = [rel for rel in included_files(root, ignore_text, notes) if rel not in replaced]
    real_root = root.resolve()
    refuse(find_secrets(real_root, files, missing_ok=True), allow_secrets,
            find_large_files(real_root, files, missing_ok=True), allow_large)
    sources = [(rel, real_root / rel, None if any(fnmatchcase(rel, p) for p in allow_large) else LARGE_FILE_BYTES)
               for rel in files]
    return ContextListing(dockerfile_text, tuple(sources + [(rel, path, None) for rel, path in extras]), tuple(notes))


def _snapshot(listing: ContextListing, directory: Path | None) -> Snapshot:
    """Read every listed file once, hashing it and, with directory, copying it there. A file gone since the
    listing is left out with a note: the digest covers what was read, and that alone."""
    digest = hashlib.sha256(DIGEST_SCHEME)
    digest.update(_record("dockerfile", "Dockerfile", hashlib.sha256(listing.dockerfile_text.encode()).hexdigest()))
    files, notes, entries = [], list(listing.notes), []
    for rel, source, limit in listing.sources:
        try:
            kind, content = _take(rel, source, limit, None if directory is None else directory / rel)
        except GONE:
            notes.append(f"{shown_name(rel)} was deleted while the build context was read: left out")
            continue
        except OSError as exc:
            raise ContextError(f"cannot {'read' if directory is None else 'stage'} {shown_name(rel)}: "
                               f"{exc.strerror or exc}") from None
        digest.update(_record(kind, rel, content))
        files.append(rel)
        entries.append((rel, kind, content))
    return Snapshot(tuple(files), digest.hexdigest(), tuple(notes), tuple(entries))


def hash_context(listing: ContextListing) -> Snapshot:
    """The digest a build would give now, nothing copied: for the tags of an image not being built."""
    return _snapshot(listing, None)


@contextmanager
def staged(listing: ContextListing) -> Iterator[BuildContext]:
    """Copy the listed files into a temp dir, hashing what is copied, and yield it; the temp dir is removed
    however the block ends."""
    try:
        tmp = Path(tempfile.mkdtemp(prefix="buildkit-py-"))
    except OSError as exc:
        raise ContextError(f"cannot make a temp dir for the build context: {exc.strerror or exc}") from None
    try:
        directory = tmp / "context"
        try:
            directory.mkdir()
            snapshot = _snapshot(listing, directory)
            _settle_directories(directory)
            dockerfile = tmp / "Dockerfile"
            dockerfile.write_text(listing.dockerfile_text, encoding="utf-8")
        except OSError as exc:
            raise ContextError(f"cannot stage the build context in {tmp}: {exc.strerror or exc}") from None
        yield BuildContext(directory, dockerfile, snapshot)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
