"""The build context: which files BuildKit gets, a refusal when secrets are among them, and a staged copy.

BuildKit is handed a directory that holds only the included files, so the image never depends on how
a builder reads .dockerignore, and the digest names exactly what was sent: it can tag the image.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from .errors import ContextError

HEAD_BYTES = 64 * 1024  # secrets are recognised by a prefix: a 50 GB dataset costs one small read
FIXED_MTIME = 315532800  # 1980-01-01, the earliest time every archive format (zip included) can hold
SHOWN_LINKS = 20  # a vendored tree can hold hundreds of links: name enough to find the culprit
DIGEST_SCHEME = b"buildkit-py context v1\n"  # a change to what the digest covers must change every digest


@dataclass(frozen=True)
class BuildContext:
    directory: Path  # the staged context directory (contains only the included files)
    dockerfile: Path  # the Dockerfile, outside `directory` (a sibling in the same temp dir)
    files: tuple[str, ...]  # included files, POSIX paths relative to the root, sorted
    digest: str  # sha256 hex of the Dockerfile text and every included file's path, mode and content


# .dockerignore matching, as moby/patternmatcher (used by BuildKit and the Docker CLI) does it.

_REGEX_SPECIALS = frozenset(".+()|{}$")  # special to a regex, plain to filepath.Match


@dataclass(frozen=True)
class _Pattern:
    text: str  # cleaned, without the leading "!"
    negated: bool
    kind: str  # "exact", "prefix", "suffix" or "regex": patternmatcher's shortcuts, quirks included
    regex: re.Pattern[str]

    def matches(self, path: str) -> bool:
        if self.kind == "exact":
            return path == self.text
        if self.kind == "prefix":
            return path.startswith(self.text[:-2])
        if self.kind == "suffix":
            suffix = self.text[2:]
            return path.endswith(suffix) or (suffix.startswith("/") and path == suffix[1:])
        return self.regex.fullmatch(path) is not None


def _go_clean(path: str) -> str:
    """Go's filepath.Clean: normpath, except that Go keeps no POSIX "//" root."""
    cleaned = posixpath.normpath(path)
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def _compile(text: str, negated: bool, line: str) -> _Pattern:
    """Translate one cleaned pattern to a regex and a match kind, as patternmatcher's compile does."""
    regex, kind, i = "", "exact", 0
    while i < len(text):
        start, ch = i, text[i]
        i += 1
        if text.startswith("**", start):
            i += 2 if text.startswith("/", i + 1) else 1  # "**/" means the same as "**"
            if i < len(text):
                regex, kind = regex + "(.*/)?", "regex"  # any number of directories, none included
            elif kind == "exact":
                kind = "prefix"
            else:
                regex, kind = regex + ".*", "regex"
            if start == 0:
                kind = "suffix"
        elif ch in "*?":
            regex, kind = regex + ("[^/]*" if ch == "*" else "[^/]"), "regex"
        elif ch == "\\":
            if i == len(text):
                raise ContextError(f".dockerignore pattern {line!r} ends in a backslash that escapes nothing")
            regex, kind, i = regex + re.escape(text[i]), "regex", i + 1
        elif ch in "[]":
            regex, kind = regex + ch, "regex"  # classes pass through: [^...] negates, as in Go
        else:
            regex += "\\" + ch if ch in _REGEX_SPECIALS else ch
    try:
        return _Pattern(text, negated, kind, re.compile(regex))
    except re.error as exc:
        raise ContextError(f".dockerignore pattern {line!r} is invalid: {exc.msg}") from None


def _parse_ignore(ignore_text: str) -> list[_Pattern]:
    patterns: list[_Pattern] = []
    for line in ignore_text.removeprefix("\ufeff").split("\n"):
        if line.startswith("#") or not line.strip():  # only a "#" in the first column starts a comment
            continue
        body = line.strip()
        negated = body.startswith("!")
        if negated:
            body = body[1:].strip()
            if not body:
                raise ContextError('.dockerignore has a lone "!": an exception must name what it re-includes')
        body = _go_clean(body)
        if len(body) > 1 and body.startswith("/"):  # patterns are relative to the context root
            body = body[1:]
        patterns.append(_compile(body, negated, line.strip()))
    return patterns


def _excluded(path: str, patterns: Sequence[_Pattern]) -> bool:
    """The last pattern that matches the path or one of its parent directories decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for pattern in patterns:
        # A pattern that could only confirm the current state need not be tried.
        if pattern.negated == excluded and any(pattern.matches(c) for c in candidates):
            excluded = not pattern.negated
    return excluded


def _may_reinclude(directory: str, patterns: Sequence[_Pattern]) -> bool:
    """Whether some "!" pattern could match this excluded directory, a parent of it or anything below it."""
    parts = directory.split("/")
    return any(p.negated and _may_reach(p.text, parts) for p in patterns)


def _may_reach(text: str, parts: list[str]) -> bool:
    if "[" in text or "\\" in text:  # a class or an escape may hide a "/": cannot split safely, so assume yes
        return True
    for piece, part in zip(text.split("/"), parts, strict=False):
        if "**" in piece:
            return True
        regex = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in piece)
        if not re.fullmatch(regex, part):
            return False
    return True


def _walk(root: Path, patterns: Sequence[_Pattern]) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Kept files and symlinks; directories are not followed through links, and skipped when nothing in them can be kept."""
    pending = [""]
    while pending:
        folder = pending.pop()
        with os.scandir(root / folder) as entries:
            for entry in entries:
                rel = f"{folder}/{entry.name}" if folder else entry.name
                excluded = _excluded(rel, patterns)
                if entry.is_dir(follow_symlinks=False):
                    # .git and .venv hold most of the files in a checkout: never walked unless a "!" may reach in.
                    if not excluded or _may_reinclude(rel, patterns):
                        pending.append(rel)
                elif not excluded and (entry.is_symlink() or entry.is_file(follow_symlinks=False)):
                    yield rel, entry


def included_files(root: Path, ignore_text: str) -> list[str]:
    """Regular files and symlinks the ignore list keeps, sorted; a kept symlink leading out of root is refused."""
    patterns = _parse_ignore(ignore_text)
    real_root = root.resolve()
    files: list[str] = []
    escaping: list[str] = []
    try:
        for rel, entry in _walk(real_root, patterns):
            if entry.is_symlink() and not Path(os.path.realpath(entry.path)).is_relative_to(real_root):
                escaping.append(f"  {rel} -> {os.readlink(entry.path)}")
            files.append(rel)
    except OSError as exc:
        raise ContextError(f"cannot read the build context: {exc}") from None
    if escaping:
        more = f"\n  ... and {len(escaping) - SHOWN_LINKS} more" if len(escaping) > SHOWN_LINKS else ""
        raise ContextError(
            f"the build context has symlinks that lead outside {root}; the builder cannot send what they point to:\n"
            + "\n".join(escaping[:SHOWN_LINKS])
            + more
            + "\nAdd them to .dockerignore, or replace them with the files they point to."
        )
    return sorted(files)


# Secrets: recognised by name, or by the first HEAD_BYTES of a regular file.

_NAMED_SECRETS = {
    ".netrc": "netrc credentials",
    ".pypirc": "PyPI credentials",
    ".git-credentials": "git credentials",
    ".dockercfg": "docker credentials",
    "id_rsa": "private key",
    "id_dsa": "private key",
    "id_ecdsa": "private key",
    "id_ed25519": "private key",
}
_KEY_SUFFIXES = frozenset({".pem", ".key", ".p12", ".pfx"})
_PEM_PRIVATE_KEY = re.compile(rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_SERVICE_ACCOUNT = re.compile(rb'"type"\s*:\s*"service_account"')
_DOCKER_AUTHS = re.compile(rb'"auths"\s*:')


def find_secrets(root: Path, files: Iterable[str]) -> list[tuple[str, str]]:
    """(path, reason) for each file that looks like a credential, in the order given."""
    findings: list[tuple[str, str]] = []
    for rel in files:
        reason = _name_reason(rel) or _content_reason(root / rel)
        if reason:
            findings.append((rel, reason))
    return findings


def _name_reason(rel: str) -> str | None:
    name = posixpath.basename(rel)
    if name == ".env" or name.startswith(".env."):
        return "dotenv file"
    if rel == ".docker/config.json" or rel.endswith("/.docker/config.json"):
        return "docker credentials"
    return _NAMED_SECRETS.get(name)


def _content_reason(path: Path) -> str | None:
    head = _head(path)
    if head is None:
        return None
    suffix = path.suffix.lower()
    if suffix == ".json" and _SERVICE_ACCOUNT.search(head) and b'"private_key"' in head:
        return "service-account key JSON"
    if path.name == "config.json" and _DOCKER_AUTHS.search(head):
        return "docker credentials"
    if suffix in {".p12", ".pfx"} and _is_pkcs12(head):
        return "PKCS#12 key store"
    if (suffix in _KEY_SUFFIXES and b"PRIVATE KEY" in head) or _PEM_PRIVATE_KEY.search(head):
        return "private key"
    return None


def _head(path: Path) -> bytes | None:
    """The start of a regular file; None for a symlink, whose target is checked where it is a file."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return None
        with path.open("rb") as handle:
            return handle.read(HEAD_BYTES)
    except OSError as exc:
        raise ContextError(f"cannot read {path}: {exc.strerror}") from None


def _is_pkcs12(head: bytes) -> bool:
    """DER PKCS#12: a SEQUENCE whose first element is INTEGER 3, the PFX version."""
    if len(head) < 2 or head[0] != 0x30:
        return False
    start = 2 + (head[1] - 0x80 if head[1] > 0x80 else 0)  # long-form lengths take extra bytes
    return head[start : start + 3] == b"\x02\x01\x03"


def _refuse_secrets(findings: list[tuple[str, str]], allow: Sequence[str]) -> None:
    blocked = [(path, reason) for path, reason in findings if not any(fnmatchcase(path, p) for p in allow)]
    if blocked:
        listing = "\n".join(f"  {path}  ({reason})" for path, reason in blocked)
        raise ContextError(
            "the build context has files that look like secrets; they would be copied into the image:\n"
            f"{listing}\n"
            "Add them to .dockerignore to leave them out, or, if one is meant to ship, "
            "allow it explicitly with --allow-secret PATTERN."
        )


# Staging.


def _record(kind: str, path: str, content_sha256: str) -> bytes:
    # NUL cannot occur in a path and the hash has a fixed length, so records cannot run into each other.
    return kind.encode() + b"\0" + os.fsencode(path) + b"\0" + content_sha256.encode() + b"\n"


def _stage_entry(source: Path, target: Path) -> tuple[str, str]:
    """Copy one file or symlink with a normalised mode and a fixed mtime; return its kind and content hash."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_symlink():
        # Relative, so it resolves inside the staged copy wherever the original pointed (inside root).
        link = os.path.relpath(os.path.realpath(source), source.parent)
        os.symlink(link, target)
        os.utime(target, (FIXED_MTIME, FIXED_MTIME), follow_symlinks=False)
        return "link", hashlib.sha256(os.fsencode(link)).hexdigest()
    # Only the exec bit carries over (as git keeps it): the image must not depend on the checkout's umask.
    mode = 0o755 if source.stat().st_mode & stat.S_IXUSR else 0o644
    content = hashlib.sha256()
    with source.open("rb") as reader, target.open("xb") as writer:
        while chunk := reader.read(1 << 20):
            writer.write(chunk)
            content.update(chunk)
    target.chmod(mode)
    os.utime(target, (FIXED_MTIME, FIXED_MTIME))
    return f"{mode:o}", content.hexdigest()


def _settle_directories(directory: Path) -> None:
    """Fixed mode and mtime for every staged directory, once nothing more is written into them."""
    for folder, _, _ in os.walk(directory):
        os.chmod(folder, 0o755)
        os.utime(folder, (FIXED_MTIME, FIXED_MTIME))


def _stage(root: Path, tmp: Path, files: list[str], dockerfile_text: str,
           extras: Sequence[tuple[str, Path]] = ()) -> BuildContext:
    directory = tmp / "context"
    digest = hashlib.sha256(DIGEST_SCHEME)
    digest.update(_record("dockerfile", "Dockerfile", hashlib.sha256(dockerfile_text.encode()).hexdigest()))
    try:
        directory.mkdir()
        for rel in files:
            kind, content = _stage_entry(root / rel, directory / rel)
            digest.update(_record(kind, rel, content))
        for rel, source in extras:
            kind, content = _stage_entry(source, directory / rel)
            digest.update(_record(kind, rel, content))
        _settle_directories(directory)
        dockerfile = tmp / "Dockerfile"
        dockerfile.write_text(dockerfile_text, encoding="utf-8")
    except OSError as exc:
        raise ContextError(f"cannot stage the build context: {exc}") from None
    return BuildContext(directory, dockerfile, tuple(files) + tuple(rel for rel, _ in extras), digest.hexdigest())


@contextmanager
def staged_context(
    root: Path, dockerfile_text: str, ignore_text: str, *, allow_secrets: Sequence[str] = (),
    extras: Sequence[tuple[str, Path]] = (),
) -> Iterator[BuildContext]:
    """Check the context, stage it in a temp dir and yield it; the temp dir is removed however the block ends.
    `extras` are (path in the context, source file) pairs that buildkit-py adds; they replace a
    project file at the same path."""
    replaced = {rel for rel, _ in extras}
    files = [rel for rel in included_files(root, ignore_text) if rel not in replaced]
    real_root = root.resolve()
    _refuse_secrets(find_secrets(real_root, files), allow_secrets)  # before any temp dir exists
    tmp = Path(tempfile.mkdtemp(prefix="buildkit-py-"))
    try:
        yield _stage(real_root, tmp, files, dockerfile_text, extras)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
