"""One error hierarchy: every failure the user can cause or meet has a message and an exit code."""

from __future__ import annotations

import re

from .patterns import lazy_pattern

SHOWN_CHARS = 120  # a 70,000-character value is named by its start and its length
REFUSAL_CHARS = 1500  # a refusal is one line a terminal shows whole: what it quotes is cut short past this
SHOWN_DEPTH = 8  # nesting shown before "..."; a value nested thousands deep is never walked whole
MASK = "***"
_MASK_REACH = 4096  # characters of a long value read for credentials before it is cut to what is shown

# userinfo of a URL (https://user:token@host, https://token@host; https:/ too, as a path made of a URL keeps it) up to
# its last "@", as URL parsers read it (a password may hold an unencoded "@"), and the query parameters that carry keys
_USERINFO = lazy_pattern(r"(?<=[A-Za-z0-9+.-])(?P<slashes>:/{1,2})(?P<user>[^/@\s:]{0,2048})(?P<password>:[^/\s]{0,2048})?@")
# An image reference's userinfo, which has no scheme: `user:password@host/repo:tag` before any host, a lone
# `token@host/repo` only before a registry's host (a dot, a port or localhost, as Docker tells a registry from a
# name: `name@linux/amd64` is a platform, not a login). At the start of a value or after a space, quote or bracket;
# pasted into the middle of a reference (after / : or @), either form only before a registry's host.
_REGISTRY_HOST = r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?::[0-9]{1,5})?|[A-Za-z0-9-]+:[0-9]{1,5}|localhost)/"
_REF_USERINFO = lazy_pattern(r"(?<![^\s'\"(\[=,])(?P<user>[^\s/@:'\"]+)(?:(?P<password>:[^\s/@'\"]+)"
                           r"@(?=[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?::[0-9]{1,5})?/)|"
                           rf"@(?={_REGISTRY_HOST}))|"
                           rf"(?<=[/:@])(?P<inner>[^\s/@:'\"]+)(?P<secret>:[^\s/@'\"]+)?@(?={_REGISTRY_HOST})")
_QUERY_SECRET = lazy_pattern(r"(?i)(?P<key>[?&](?:access_token|token|key|api_key|apikey|password|passwd|secret|sig|signature|"
                           r"x-goog-signature|x-goog-credential)=)(?!\*\*\*)[^&#\s]+")  # (?!***): masking a message twice keeps it


def mask_credentials(text: str) -> str:
    """`text` with every URL's password (or lone token in the user part) and key-carrying query value
    replaced by ***: what a user would not paste into a bug report."""
    def userinfo(m: re.Match) -> str:
        found = m.groupdict()
        slashes, user = found.get("slashes") or "", found.get("user") or found.get("inner")
        if found.get("password") is not None or found.get("secret") is not None:
            return f"{slashes}{user}:{MASK}@"
        return f"{slashes}{MASK}@"

    masked = _REF_USERINFO.sub(userinfo, _USERINFO.sub(userinfo, text))
    return _QUERY_SECRET.sub(lambda m: m.group("key") + MASK, masked)


def _bounded_repr(value: object, budget: int) -> str:
    """repr() of `value` written until `budget` characters, containers walked with an explicit
    stack to SHOWN_DEPTH levels: no recursion, and no work past what is shown."""
    out: list[str] = []
    size = 0
    stack: list[object] = [(value, 0)]
    while stack and size <= budget:
        item = stack.pop()
        if isinstance(item, str) and item.__class__ is _Token:
            piece = item
        else:
            obj, depth = item
            opened = _OPEN.get(type(obj))
            if opened is None:
                piece = _leaf(obj, budget - size)
            elif depth >= SHOWN_DEPTH:
                piece = opened[0] + "..." + opened[1]
            else:
                parts: list[object] = [_Token(opened[0])]
                entries = list(obj.items()) if isinstance(obj, dict) else list(obj)
                for i, entry in enumerate(entries[: budget - size]):  # never more entries than characters left
                    if i:
                        parts.append(_Token(", "))
                    if isinstance(obj, dict):
                        parts += [(entry[0], depth + 1), _Token(": "), (entry[1], depth + 1)]
                    else:
                        parts.append((entry, depth + 1))
                if isinstance(obj, tuple) and len(entries) == 1:
                    parts.append(_Token(","))
                if not entries and isinstance(obj, (set, frozenset)):
                    parts = [_Token(f"{type(obj).__name__}(")]
                parts.append(_Token(opened[1] if entries or not isinstance(obj, (set, frozenset)) else ")"))
                stack.extend(reversed(parts))
                continue
        out.append(piece)
        size += len(piece)
    return "".join(out)


class _Token(str):
    """Punctuation on _bounded_repr's stack, told apart from a user's string."""


_OPEN = {list: ("[", "]"), tuple: ("(", ")"), dict: ("{", "}"), set: ("{", "}"), frozenset: ("frozenset({", "})")}


def _leaf(value: object, budget: int) -> str:
    if isinstance(value, str):
        # masked before it is cut, so a cut cannot leave half a password unmasked
        return repr(mask_credentials(value[: budget + _MASK_REACH])[: budget + SHOWN_CHARS])
    if isinstance(value, (bytes, bytearray)):
        return repr(bytes(value[:budget]))
    if isinstance(value, (bool, int, float, complex, type(None))):
        try:
            return repr(value)
        except ValueError:  # an int past Python's digit limit for str()
            return f"<an int of {value.bit_length()} bits>"
    try:
        text = repr(value)
    except Exception:  # a user's object whose repr fails or recurses: named by its type
        return f"<{type(value).__name__}>"
    return mask_credentials(text[: budget + _MASK_REACH])[: budget + SHOWN_CHARS].encode("ascii", "backslashreplace").decode()


def show(value: object) -> str:
    """A user's value in a message: one line, escaped (repr), so control characters, line separators
    and terminal escapes stay visible and inert, credentials masked, nesting and length bounded."""
    text = _bounded_repr(value, SHOWN_CHARS)
    if len(text) > SHOWN_CHARS:
        if isinstance(value, str):
            size = f"{len(value)} characters"
        elif isinstance(value, (list, tuple, dict, set, frozenset)):
            size = f"{len(value)} entries"
        else:
            size = type(value).__name__
        text = f"{text[:SHOWN_CHARS]}... ({size})"
    return text


def terminal_line(text: str, *, lines: bool = True) -> str:
    """A message for a terminal: its lines kept (lines=False: a line break escaped too, for what must stay one line,
    as a file named `a\\nRUN x` in a report), every other control, format or separator character escaped (ESC
    cannot move the cursor, U+202E cannot reverse a line), credentials masked."""
    kept = "\n\t" if lines else "\t"
    return mask_credentials("".join(
        ch if ch in kept or ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
        for ch in text))


def shown_name(name: object) -> str:
    """A file name or path in a message: as it is, unless it holds spaces at an end or characters a terminal would
    act on, or is too long to read (a path can run to 4,096 bytes); then as show() writes it."""
    if isinstance(name, str) and name.isprintable() and name == name.strip() and len(name) <= SHOWN_CHARS:
        return name
    return show(name)


class BuildkitError(Exception):
    """Base of all errors buildkit-py reports to the user (never a traceback)."""

    exit_code = 1

    def __init__(self, message: str):
        message = mask_credentials(message)  # whatever a message quotes (a path made of a URL, a service's answer)
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


_BREAKS = lazy_pattern(r"[\r\n\u2028\u2029]+")
_POINTER = lazy_pattern(r"[\s^~]*")  # packaging's and tomllib's caret line under the text they quote


def one_line(text: str) -> str:
    """A refusal on one line: a third-party message (packaging's, a parser's) quoted into it keeps its words, not
    its line breaks or the pointer line under the input."""
    if not _BREAKS.search(text):
        return text
    return " ".join(part.strip() for part in _BREAKS.split(text) if not _POINTER.fullmatch(part))


def quoted(text: object, limit: int = 600) -> str:
    """A service's or library's text inside a message: on one line, every control or format character escaped (a
    third party's message can quote a user's marker as it is), credentials masked, cut short at `limit`."""
    out = terminal_line(str(text), lines=False).replace("\t", "\\t")  # a service's tab would align nothing here
    return out if len(out) <= limit else out[:limit] + "..."


class ConfigError(BuildkitError):
    """The config (file or flags) is malformed or names something not allowed: said on one line."""

    exit_code = 2

    def __init__(self, message: str, *, field: str | None = None, where: str | None = None):
        prefix = ""
        if where:
            prefix += f"{where}: "
        if field:
            prefix += f"{field}: "
        # A key or a file name may hold a line break too; what packaging or a parser says may quote a raw control.
        super().__init__(quoted(one_line(prefix + message), REFUSAL_CHARS))
        self.detail = quoted(one_line(message), REFUSAL_CHARS)  # without the position and field, to restate elsewhere
        self.field = field
        self.where = where


class StaleLockError(ConfigError):
    """Another tool's lock no longer matches the project file it was made from."""


class ResolutionError(BuildkitError):
    """The config is well-formed but no base image / wheel combination satisfies it."""

    exit_code = 2


class DataError(BuildkitError):
    """The version tables in base_images/ are malformed (a bug in the shipped data)."""

    exit_code = 3


class RenderError(BuildkitError):
    """A template could not be rendered (missing block, syntax error in a user template)."""

    exit_code = 4


class ContextError(BuildkitError):
    """The build context is unsafe (secrets in it) or unreadable."""

    exit_code = 2


class EngineError(BuildkitError):
    """No usable Docker engine or BuildKit client."""

    exit_code = 5


class BuildError(BuildkitError):
    """The image build failed."""

    exit_code = 6


class ImportCheckError(BuildError):
    """The image cannot import a module the trainer imports: the build's import check stopped it."""


class RegistryError(BuildkitError):
    """Authentication or push to a registry failed."""

    exit_code = 7


class StageError(BuildkitError):
    """A package could not be uploaded to its stage (a bucket or a directory): the registry's exit code."""

    exit_code = 7


class RunError(BuildkitError):
    """A local run could not start its containers."""

    exit_code = 8


class PackageIndexError(BuildkitError):
    """The package index (PyPI or the user's mirror) could not be read (`matrix check|refresh`), or no access token
    could be had for an Artifact Registry index (build, lock)."""

    exit_code = 9

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status  # the HTTP status, when the index answered


class ServiceError(BuildkitError):
    """A Google Cloud API (Vertex AI, Cloud Build) could not be reached, or refused the request (its message, one line)."""

    exit_code = 10

    def __init__(self, message: str, *, status: str | None = None, http_status: int | None = None,
                 transient: bool = False):
        super().__init__(message)
        self.status = status  # google.rpc.Code name (RESOURCE_EXHAUSTED...), when the service answered
        self.http_status = http_status
        self.transient = transient  # a timeout, a dropped connection, a 5xx: trying again may help


class AttestationError(BuildkitError):
    """`verify`: the image's SBOM or provenance is missing, or does not match the image, the other attestation or the
    lock; the line names the digest or the package."""

    exit_code = 11


class WaitInterrupted(BuildkitError):
    """Ctrl-C while following a job: the job keeps running; the message says how to cancel it."""

    exit_code = 130


class OutputError(BuildkitError):
    """A result could not be written where the user asked."""

    exit_code = 2
