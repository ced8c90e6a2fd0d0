"""What must not enter an image: files that look like secrets (by name or by their first bytes) and very large
files, refused with what to do unless allowed."""


from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from ...errors import ContextError, shown_name
from ...fsutil import KEPT_FILE_BYTES, keep, keeping, kept
from ...patterns import lazy_pattern
from ...sources.walk import GONE, open_regular

HEAD_BYTES = 64 * 1024  # secrets are recognised by a prefix: a 50 GB dataset costs one small read


# Datasets and checkpoints belong in a bucket the trainer reads at run time: in the image they are re-sent on
# every build and pulled by every worker. Code and configs stay far below this (GitHub refuses files above it).
LARGE_FILE_BYTES = 100 * 1024 * 1024


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


def _head(path: Path, missing_ok: bool = False) -> bytes | None:
    """The start of a regular file; None for a symlink, whose target is checked where it is a file."""
    found = kept(path)
    if found is not None:
        return found[1][:HEAD_BYTES]
    try:
        handle = open_regular(path)
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
        if missing_ok and isinstance(exc, GONE):
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
            if missing_ok and isinstance(exc, GONE):
                continue
            raise ContextError(f"cannot read {shown_name(str(root / rel))}: {exc.strerror or exc}") from None
        if stat.S_ISREG(info.st_mode) and info.st_size > LARGE_FILE_BYTES:
            large.append((rel, info.st_size))
    return large


def _size(n: int) -> str:
    """A size as a refusal shows it: each is over LARGE_FILE_BYTES, so in MiB or GiB."""
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def refuse(secrets: list[tuple[str, str]], allow_secrets: Sequence[str],
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
        problems.append(large_problem([f"  {shown_name(path)}  ({_size(size)})" for path, size in too_big]))
    if problems:
        raise ContextError("\n".join(problems))


def large_problem(lines: list[str]) -> str:
    return (f"the build context has files over {LARGE_FILE_BYTES >> 20} MiB; they would be sent to the builder "
            "and copied into the image:\n" + "\n".join(lines) + "\n"
            "Add them to .dockerignore and read them at run time (a bucket, or a mounted directory), or, "
            "if one is meant to ship, allow it explicitly with --allow-large PATTERN.")
