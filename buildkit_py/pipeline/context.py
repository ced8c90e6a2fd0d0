"""The build context: which files BuildKit gets, a refusal when secrets are among them, and a staged copy.

BuildKit is handed a directory that holds only the included files, so the image never depends on how
a builder reads .dockerignore, and the digest names exactly what was sent: it can tag the image.
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import BinaryIO

from ..errors import ContextError, show, shown_name
from ..fsutil import KEPT_FILE_BYTES, OUTPUT_MARKER, keep, keeping, kept, leads_outside
from ..patterns import lazy_pattern

HEAD_BYTES = 64 * 1024  # secrets are recognised by a prefix: a 50 GB dataset costs one small read
# Datasets and checkpoints belong in a bucket the trainer reads at run time: in the image they are re-sent on
# every build and pulled by every worker. Code and configs stay far below this (GitHub refuses files above it).
LARGE_FILE_BYTES = 100 * 1024 * 1024
MAX_PATTERN_CHARS = 64 * 1024  # Docker's line reader (a Go bufio.Scanner) stops there too; a path is 4096 bytes at most
# Python's re backtracks where Go's regexp does not: each "**" between names multiplies the worst-case time of a
# match by the path's depth. Four keep a 40-deep path in milliseconds; real patterns use one or two.
MAX_DOUBLE_STARS = 4
FIXED_MTIME = 315532800  # 1980-01-01, the earliest time every archive format (zip included) can hold
# A checkout's code is a few levels deep and some thousands of files; past these it is data, or a trap.
MAX_DEPTH = 256
MAX_FILES = 200_000
SHOWN_LINKS = 20  # a vendored tree can hold hundreds of links: name enough to find the culprit
DIGEST_SCHEME = b"buildkit-py context v1\n"  # a change to what the digest covers must change every digest
_GONE = (FileNotFoundError, NotADirectoryError)  # a file deleted (or its directory deleted or replaced) since listed


# .dockerignore matching, as moby/patternmatcher (used by BuildKit and the Docker CLI) does it.

_REGEX_SPECIALS = frozenset(".+()|{}$")  # special to a regex, plain to filepath.Match
# What patternmatcher writes as "(.*/)?": any run of directories. Segment by segment, so that a pattern with
# several "**" backtracks over a path's depth, not over its every character (Go's regexp never backtracks).
_ANY_DIRS = "(?:[^/\n]*/)*"


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
                if not regex.endswith(_ANY_DIRS):  # "**/**/" means "**/": one group, not two that backtrack
                    regex += _ANY_DIRS
                    if regex.count(_ANY_DIRS) > MAX_DOUBLE_STARS:
                        raise ContextError(f".dockerignore pattern {show(line)} has more than {MAX_DOUBLE_STARS} "
                                           '"**" between names; buildkit-py matches at most that many in one pattern')
                kind = "regex"
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
                raise ContextError(f".dockerignore pattern {show(line)} ends in a backslash that escapes nothing")
            regex, kind, i = regex + re.escape(text[i]), "regex", i + 1
        elif ch == "[":
            regex, kind = regex + ch, "regex"
            if text.startswith("^", i):  # negates, as in Go
                regex, i = regex + "^", i + 1
            members, i = _class(text, i, line)
            regex += members
        elif ch == "]":
            regex, kind = regex + ch, "regex"
        else:
            regex += "\\" + ch if ch in _REGEX_SPECIALS else ch
    try:
        return _Pattern(text, negated, kind, re.compile(regex))
    except re.error as exc:
        raise ContextError(f".dockerignore pattern {show(line)} is invalid: {exc.msg}") from None


def _class(text: str, i: int, line: str) -> tuple[str, int]:
    """A [...] class from just after its "[" (and "^"): its regex up to the "]" that closes it, and the index
    after that.

    patternmatcher passes a class to Go's regexp as written, but for "?", "*" and "**", which become "[^/]",
    "[^/]*" and "(.*/)?" there too (so the "]" of "[^/]" closes the class). Go reads each character as a
    member, and a "-" between two members as a range. Each member is escaped here, so that Python's re reads
    it as Go does: unescaped, it would take "[", "--", "&&", "~~" or "||" for set operations, and warn."""
    regex, start = "", i
    can_range = ends_range = False  # a member may start a range unless it ends one
    while i < len(text):
        ch = text[i]
        if ch == "]" and i > start:  # a "]" first in a class is a member, in Go as in Python
            return regex + ch, i + 1
        if text.startswith("[:", i):
            raise ContextError(f".dockerignore pattern {show(line)} has a POSIX class such as [:alpha:], which "
                               "buildkit-py does not support; list the characters or a range, e.g. [a-zA-Z]")
        i += 1
        if ch == "-" and can_range and i < len(text) and text[i] != "]":
            regex, can_range, ends_range = regex + ch, False, True
            continue
        closes = ""
        if ch == "*" and text.startswith("*", i):
            i += 2 if text.startswith("/", i + 1) else 1
            members = "(.*/)?" if i < len(text) else ".*"
        elif ch in "*?":
            members, closes = "[^/", "]*" if ch == "*" else "]"
        elif ch == "\\":
            if i == len(text):
                raise ContextError(f".dockerignore pattern {show(line)} ends in a backslash that escapes nothing")
            members, i = text[i], i + 1
        else:
            members = ch
        for member in members:
            regex += re.escape(member)
            can_range, ends_range = not ends_range, False
        if closes:
            return regex + closes, i
    return regex, i  # unterminated: re.compile says so


def _parse_ignore(ignore_text: str) -> list[_Pattern]:
    patterns: list[_Pattern] = []
    for line in ignore_text.removeprefix("\ufeff").split("\n"):
        if line.startswith("#") or not line.strip():  # only a "#" in the first column starts a comment
            continue
        if len(line) > MAX_PATTERN_CHARS:
            raise ContextError(f".dockerignore line {show(line)} is longer than {MAX_PATTERN_CHARS} characters")
        if "\0" in line:
            raise ContextError(f".dockerignore pattern {show(line)} has a NUL character, which no path can hold; "
                               "is the file text?")
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


def _matching(path: str, patterns: Sequence[_Pattern]) -> int:
    """The patterns that match the path itself, one bit each (pattern i is bit i)."""
    return sum(1 << i for i, pattern in enumerate(patterns) if pattern.matches(path))


def _excluded(hits: int, patterns: Sequence[_Pattern], *, excluded: bool = False) -> bool:
    """The last pattern that matches the path or one of its parent directories decides (hits: those patterns,
    the parents' carried down the walk, so that a deep path costs no more than a shallow one); `excluded` is the
    state when none matches."""
    for i, pattern in enumerate(patterns):
        # A pattern that could only confirm the current state need not be tried.
        if pattern.negated == excluded and hits >> i & 1:
            excluded = not pattern.negated
    return excluded


def _may_reinclude(directory: str, patterns: Sequence[_Pattern], min_depth: int = 0) -> bool:
    """Whether some "!" pattern could match this excluded directory, a parent of it or anything below it;
    with `min_depth`, only a pattern that reaches at least that many parts deep counts."""
    parts = directory.split("/")
    return any(p.negated and _may_reach(p.text, parts, min_depth) for p in patterns)


def _may_reach(text: str, parts: list[str], min_depth: int) -> bool:
    if "[" in text or "\\" in text:  # a class or an escape may hide a "/": cannot split safely, so assume yes
        return True
    pieces = text.split("/")
    if len(pieces) < min_depth and "**" not in text:
        return False
    for piece, part in zip(pieces, parts, strict=False):
        if "**" in piece:
            return True
        regex = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in piece)
        if not re.fullmatch(regex, part):
            return False
    return True


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


def _walk(root: Path, patterns: Sequence[_Pattern], notes: list[str]) -> Iterator[tuple[str, os.DirEntry[str]]]:
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
        except _GONE:
            if not folder:
                raise
            notes.append(f"{shown_name(folder)}/ was deleted while the build context was listed: left out")
            continue
        why = None if not folder or env_depth else _left_out_tree(entries)  # not the root: that is what the user named
        if why:
            env_depth, env_hits = folder.count("/") + 1, _matching(folder, patterns)
            if not _may_reinclude(folder, patterns, env_depth):
                if why.startswith("outputs"):  # an environment is plainly one; outputs might have been meant to ship
                    notes.append(f"{shown_name(folder)}/ left out: it holds {why} ({OUTPUT_MARKER}); "
                                 f'a "!{shown_name(folder)}" line in .dockerignore keeps it')
                continue
        for entry in entries:
            rel = f"{folder}/{entry.name}" if folder else entry.name
            own = _matching(rel, patterns)
            excluded = _excluded(hits | own, patterns) or (
                env_depth > 0 and _excluded(env_hits | own, patterns, excluded=True))
            if entry.is_dir(follow_symlinks=False):
                # .git and .venv hold most of the files in a checkout: never walked unless a "!" may reach in.
                if not excluded or _may_reinclude(rel, patterns, env_depth):
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
            # A FIFO, socket or device is left out: it has no content an image could hold, and reading a FIFO
            # would wait for a writer. Docker's context archive leaves sockets out too.


def _os_error(exc: OSError) -> ContextError:
    where = shown_name(os.fsdecode(exc.filename)) if exc.filename is not None else "the build context"
    return ContextError(f"cannot read {where}: {exc.strerror or exc}")


def included_files(root: Path, ignore_text: str, notes: list[str] | None = None) -> list[str]:
    """Regular files and symlinks the ignore list keeps, sorted; a kept symlink leading out of root is refused.
    What else is left out (buildkit-py's outputs, a directory deleted meanwhile) is added to notes."""
    patterns = _parse_ignore(ignore_text)
    files: list[str] = []
    escaping: list[str] = []
    try:
        real_root = root.resolve()
        for rel, entry in _walk(real_root, patterns, [] if notes is None else notes):
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
    return sorted(files)


# Secrets: recognised by name, or by the first HEAD_BYTES of a regular file. A content rule needs the shape
# of a key or the structure of a credential file, never a keyword alone: a README that mentions
# aws_secret_access_key, a dataset JSON with a "type" field or code that parses PEM headers is no secret.

_NAMED_SECRETS = {
    ".netrc": "netrc credentials",
    "_netrc": "netrc credentials",  # its name on Windows
    ".pypirc": "PyPI credentials",
    ".git-credentials": "git credentials",
    ".dockercfg": "docker credentials",
    ".envrc": "direnv environment file",
    "application_default_credentials.json": "Google application default credentials",
    "id_rsa": "private key",
    "id_dsa": "private key",
    "id_ecdsa": "private key",
    "id_ed25519": "private key",
    "id_ecdsa_sk": "private key",
    "id_ed25519_sk": "private key",
}
_NAMED_PATHS = {".aws/credentials": "AWS credentials", ".docker/config.json": "docker credentials"}
_KEY_SUFFIXES = frozenset({".pem", ".key", ".p12", ".pfx"})
# A BEGIN line followed by key material (also inside a JSON string, where the line break is written "\n").
_PEM_PRIVATE_KEY = lazy_pattern(rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:\s|\\[rn])*[A-Za-z0-9+/]{4}")
_PUTTY_KEY = b"PuTTY-User-Key-File-"
_GOOGLE_TYPE = lazy_pattern(rb'"type"\s*:\s*"(service_account|authorized_user|external_account|'
                          rb'external_account_authorized_user|impersonated_service_account|gdch_service_account)"')
_GOOGLE_SECRET = lazy_pattern(rb'"(?:private_key|refresh_token|client_secret)"\s*:\s*"[^"\s]')
_GOOGLE_REASONS = {b"service_account": "service-account key JSON",
                   b"authorized_user": "Google user credentials (refresh token)"}
_DOCKER_AUTHS = lazy_pattern(rb'"auths"\s*:\s*\{')
_DOCKER_INLINE = lazy_pattern(rb'"(?:auth|identitytoken|password)"\s*:\s*"[^"\s]')
# In the lower-cased head, as aws_secret_access_key, AWS_SECRET_ACCESS_KEY (env) or SecretAccessKey (the
# CLI's JSON) are written; the value is read from the original. A literal first keeps the search fast.
_AWS_SECRET_NAMED = lazy_pattern(rb"secret_?access_?key[\"']?\s*[=:]\s*[\"']?([a-z0-9/+]{40})(?![a-z0-9/+])")
_AWS_KEY_ID = lazy_pattern(rb"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])")
_AWS_SECRET_SHAPE = lazy_pattern(rb"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
# Prefixed token formats; every one starts with a literal, so a search skips ahead as fast as `in` does.
_TOKENS = (
    (re.compile(rb"gh[pousr]_[A-Za-z0-9]{36}(?![A-Za-z0-9_])"), "GitHub token"),
    (re.compile(rb"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}(?![A-Za-z0-9_])"), "GitHub token"),
    (re.compile(rb"pypi-AgE[IN][A-Za-z0-9_-]{50,}"), "PyPI token"),
    (re.compile(rb"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"), "Google API key"),
    (re.compile(rb"xox[bpoa]-[0-9]{8,}-[0-9A-Za-z-]{8,}"), "Slack token"),
    (re.compile(rb"hf_[A-Za-z]{34}(?![A-Za-z0-9_])"), "Hugging Face token"),
    (re.compile(rb"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}"), "OpenAI API key"),
    (re.compile(rb"sk-ant-(?:api|admin)[0-9]{2}-[A-Za-z0-9_-]{80,}"), "Anthropic API key"),
    (re.compile(rb"AccountKey=[A-Za-z0-9+/]{86}=="), "Azure storage account key"),
)


def find_secrets(root: Path, files: Iterable[str], *, missing_ok: bool = False) -> list[tuple[str, str]]:
    """(path, reason) for each file that looks like a credential, in the order given; with missing_ok, a file
    gone since it was listed is passed over (the build context leaves it out when it reads it)."""
    findings: list[tuple[str, str]] = []
    for rel in files:
        reason = _name_reason(rel) or _content_reason(root / rel, missing_ok)
        if reason:
            findings.append((rel, reason))
    return findings


def _name_reason(rel: str) -> str | None:
    name = posixpath.basename(rel)
    if name == ".env" or name.startswith(".env."):
        return "dotenv file"
    for tail, reason in _NAMED_PATHS.items():
        if rel == tail or rel.endswith("/" + tail):
            return reason
    return _NAMED_SECRETS.get(name)


# pip.conf / pip.ini / requirements files: an index URL whose user-info carries a password.
_PIP_INDEX_KEY = lazy_pattern(rb"(?im)^\s*(?:index-url|extra-index-url|--index-url|--extra-index-url|-i)\b")
_URL_CREDENTIALS = lazy_pattern(rb"https?://[^\s/:@]+:[^\s/@]+@")
# A requirement by URL (PEP 508 `NAME @ URL`: a config's pip entry, setup.py, pyproject.toml) whose URL has credentials.
_REQUIREMENT_CREDENTIALS = lazy_pattern(rb"@\s*https?://[^\s/:@]+:[^\s/]+@")


def _content_reason(path: Path, missing_ok: bool = False) -> str | None:
    head = _head(path, missing_ok)
    if head is None:
        return None
    suffix = path.suffix.lower()
    google = _GOOGLE_TYPE.search(head)
    if google and _GOOGLE_SECRET.search(head):
        kind = google.group(1)
        return _GOOGLE_REASONS.get(kind, f"Google {kind.decode()} credentials")
    if _DOCKER_AUTHS.search(head) and _DOCKER_INLINE.search(head):
        return "docker credentials"
    if suffix in {".p12", ".pfx"} and _is_pkcs12(head):
        return "PKCS#12 key store"
    if head.startswith(_PUTTY_KEY):
        return "PuTTY private key"
    if suffix in _KEY_SUFFIXES and b"PRIVATE KEY" in head:
        return "private key"
    if _URL_CREDENTIALS.search(head) and _PIP_INDEX_KEY.search(head):
        return "package index URL with credentials"
    if _REQUIREMENT_CREDENTIALS.search(head):
        return "requirement URL with credentials"
    return secret_reason(head)


def secret_reason(data: bytes) -> str | None:
    """What in data looks like a credential by its own shape (a private key, an AWS secret key, a prefixed token),
    wherever it is written: a file's head, a job's environment value."""
    if _PEM_PRIVATE_KEY.search(data):
        return "private key"
    if _aws_secret(data):
        return "AWS secret access key"
    return next((reason for token, reason in _TOKENS if token.search(data)), None)


def _aws_secret(head: bytes) -> bool:
    """A secret access key after its name, or an access key id with a secret-shaped string beside it.
    The example keys of AWS's documentation all say EXAMPLE; a git hash (40 hex digits) has no capitals."""
    def real(value: bytes) -> bool:
        return b"EXAMPLE" not in value and value != value.lower() and value != value.upper()

    named = _AWS_SECRET_NAMED.finditer(head.lower())
    if any(real(head[m.start(1):m.end(1)]) for m in named):
        return True
    return _AWS_KEY_ID.search(head) is not None and any(real(m.group()) for m in _AWS_SECRET_SHAPE.finditer(head))


def _open_regular(path: Path) -> BinaryIO | None:
    """A regular file opened for reading; None for anything else. The open neither follows a link nor waits
    on a FIFO, in case the file was swapped for one since it was listed."""
    if not stat.S_ISREG(path.lstat().st_mode):
        return None
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def _head(path: Path, missing_ok: bool = False) -> bytes | None:
    """The start of a regular file; None for a symlink, whose target is checked where it is a file."""
    found = kept(path)
    if found is not None:
        return found[1][:HEAD_BYTES]
    try:
        handle = _open_regular(path)
        if handle is None:
            return None
        with handle:
            st = os.fstat(handle.fileno())
            whole = keeping(st.st_size)  # a small file whole in a command: the snapshot takes it from here
            data = handle.read(KEPT_FILE_BYTES + 1 if whole else HEAD_BYTES)  # keep() takes it only if it ended there
        if whole:
            keep(path, st.st_mode, data)
        return data[:HEAD_BYTES]
    except OSError as exc:
        if missing_ok and isinstance(exc, _GONE):
            return None
        raise ContextError(f"cannot read {shown_name(str(path))}: {exc.strerror or exc}") from None


def _is_pkcs12(head: bytes) -> bool:
    """DER PKCS#12: a SEQUENCE whose first element is INTEGER 3, the PFX version."""
    if len(head) < 2 or head[0] != 0x30:
        return False
    start = 2 + (head[1] - 0x80 if head[1] > 0x80 else 0)  # long-form lengths take extra bytes
    return head[start : start + 3] == b"\x02\x01\x03"


def find_large_files(root: Path, files: Iterable[str], *, missing_ok: bool = False) -> list[tuple[str, int]]:
    """(path, size) for each regular file over LARGE_FILE_BYTES, in the order given. The apparent size counts
    (a sparse file is sent and stored in full), and a symlink's target counts where it is itself a file. With
    missing_ok, a file gone since it was listed is passed over."""
    large: list[tuple[str, int]] = []
    for rel in files:
        try:
            info = (root / rel).lstat()
        except OSError as exc:
            if missing_ok and isinstance(exc, _GONE):
                continue
            raise ContextError(f"cannot read {shown_name(str(root / rel))}: {exc.strerror or exc}") from None
        if stat.S_ISREG(info.st_mode) and info.st_size > LARGE_FILE_BYTES:
            large.append((rel, info.st_size))
    return large


def _size(n: int) -> str:
    """A size as a refusal shows it: each is over LARGE_FILE_BYTES, so in MiB or GiB."""
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _refuse(secrets: list[tuple[str, str]], allow_secrets: Sequence[str],
            large: list[tuple[str, int]], allow_large: Sequence[str]) -> None:
    """One error for every secret and every large file not allowed by a pattern, so one run shows them all."""
    problems: list[str] = []
    blocked = [(path, reason) for path, reason in secrets if not any(fnmatchcase(path, p) for p in allow_secrets)]
    if blocked:
        listing = "\n".join(f"  {shown_name(path)}  ({reason})" for path, reason in blocked)
        problems.append(
            "the build context has files that look like secrets; they would be copied into the image:\n"
            f"{listing}\n"
            "Add them to .dockerignore to leave them out, or, if one is meant to ship, "
            "allow it explicitly with --allow-secret PATTERN."
        )
    too_big = [(path, size) for path, size in large if not any(fnmatchcase(path, p) for p in allow_large)]
    if too_big:
        problems.append(_large_problem([f"  {shown_name(path)}  ({_size(size)})" for path, size in too_big]))
    if problems:
        raise ContextError("\n".join(problems))


def _large_problem(lines: list[str]) -> str:
    return (f"the build context has files over {LARGE_FILE_BYTES >> 20} MiB; they would be sent to the builder "
            "and copied into the image:\n" + "\n".join(lines) + "\n"
            "Add them to .dockerignore and read them at run time (a bucket, or a mounted directory), or, "
            "if one is meant to ship, allow it explicitly with --allow-large PATTERN.")


# Snapshots: each file is read once, and its hash is taken from the very bytes that are copied, so the digest
# names exactly what the builder gets, however the files change meanwhile (a build's own log in the directory).


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
    reader = io.BytesIO(found[1]) if found is not None else _open_regular(source)
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
                raise ContextError(_large_problem([f"  {shown_name(rel)}  (grew past {LARGE_FILE_BYTES >> 20} MiB "
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
    _refuse(find_secrets(real_root, files, missing_ok=True), allow_secrets,
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
        except _GONE:
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
