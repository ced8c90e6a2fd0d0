"""The kinds of value every section's keys are made of: strings, patterns, choices, numbers, durations, lists,
mappings, files, image references, environment variables. The config's modules share these; the leading underscore
keeps them out of the config's names for the rest of buildkit-py."""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ConfigError, show
from ..fsutil import consult, leads_outside, read_text
from ..launcher.constants import AUTO_PROCESSES, MAX_PROCESSES_PER_NODE
from ..oci.refs import ImageRef, parse_ref
from ..patterns import lazy_pattern
from .reading import _dotted, _err, _Raw

# Sizes: every rendered Dockerfile line stays far below BuildKit's 64 KiB line limit, and no
# value is big enough to be anything but a mistake.
MAX_TEXT = 4096  # any single string
MAX_ENV_VALUE_BYTES = 16384  # ENV values: escaping can double them on their line
MAX_ENV_ENTRIES = 1000
MAX_ARGS_JSON_BYTES = 16384  # CMD is one JSON line

# The patterns of the kinds below (environment names, paths in the trainer directory), and two that more than one
# section checks: a Python module (trainer, python_package) and an accelerator (the top-level key, a pool's).
_ENV_NAME = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_]{0,254}", re.ASCII)
_MODULE = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*", re.ASCII)
_PATH = lazy_pattern(r"[A-Za-z0-9._@+/ -]+", re.ASCII)  # no $, quotes, globs: COPY expands them
_ACCELERATOR = lazy_pattern(r"[A-Z][A-Z0-9_]{0,63}", re.ASCII)  # Vertex AI's names; the data says which exist
_ACCELERATOR_RULE = "a Vertex AI accelerator type in capitals, e.g. NVIDIA_TESLA_T4, NVIDIA_L4 or TPU_V5_LITEPOD"
_DURATION = lazy_pattern(r"([0-9]{1,7})([smhd]?)", re.ASCII)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_DURATION = 30 * 86400  # seconds


def _unknown_key(raw: _Raw, path: tuple, key: Any, allowed: list[str]) -> ConfigError:
    close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return _err(raw, path + (key,), f"unknown key; {hint}allowed keys: {', '.join(sorted(allowed))}")


def bad_character(text: str) -> str | None:
    """Why a character of this text may not appear in any config value, or None."""
    for ch in text:
        category = unicodedata.category(ch)
        if ch == "\0":
            return "NUL characters are not allowed"
        if category == "Cs":
            return "the value is not valid Unicode (an undecodable byte?)"
        if category in ("Cc", "Zl", "Zp") and ch != "\t":
            return f"control characters and line breaks ({show(ch)}) are not allowed"
    return None


def _string(raw: _Raw, path: tuple, value: Any, *, allow_numbers: bool = False, limit: int = MAX_TEXT,
            secret: bool = False) -> str:
    """secret: the value may carry a password, so messages never quote it."""
    if allow_numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = raw.text(path, str(value))
    shown = "the value" if secret else show(value)
    if not isinstance(value, str):
        raise _err(raw, path, f"{shown} must be a string (quote it)")
    if len(value) > limit:
        raise _err(raw, path, f"{shown} is too long: at most {limit} characters")
    reason = bad_character(value)
    if reason:
        raise _err(raw, path, f"{shown} is not allowed: {reason}")
    return value


def _ref(raw: _Raw, path: tuple, value: Any, *, allow_digest: bool = True) -> ImageRef:
    try:
        return parse_ref(_string(raw, path, value), field=_dotted(path), allow_digest=allow_digest)
    except ConfigError as exc:  # restated with the file position
        raise _err(raw, path, exc.detail) from None


def _pattern(raw, path, value, regex: re.Pattern, allowed: str, *, allow_numbers=False) -> str:
    text = _string(raw, path, value, allow_numbers=allow_numbers)
    if not regex.fullmatch(text):
        raise _err(raw, path, f"{show(text)} is not allowed: {allowed}")
    return text


def _choice(raw, path, value, choices: tuple[str, ...]) -> str:
    text = _string(raw, path, value)
    if text not in choices:
        raise _err(raw, path, f"{show(text)} is not allowed: one of {', '.join(choices)}")
    return text


def _bool(raw: _Raw, path: tuple, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _err(raw, path, f"{show(value)} must be true or false")
    return value


def _list(raw: _Raw, path: tuple, value: Any, *, limit: int = 1000) -> list:
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list):
        raise _err(raw, path, f"{show(value)} must be a list")
    if len(value) > limit:
        raise _err(raw, path, f"a list of {len(value)} entries is too long: at most {limit}")
    return value


def _scalar_text(raw: _Raw, path: tuple, value: Any, *, limit: int = MAX_TEXT) -> str:
    """A string, number or boolean, as the user wrote it."""
    if value is None or isinstance(value, (dict, list, tuple)) or not isinstance(value, (str, int, float, bool)):
        raise _err(raw, path, f"{show(value)} must be a string, number or boolean")
    text = raw.text(path, value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value))
    return _string(raw, path, text, limit=limit)


def _strings(raw, path, value, item: Callable[[_Raw, tuple, Any], str], *, total_bytes: int | None = None) -> tuple:
    items = tuple(item(raw, path + (i,), v) for i, v in enumerate(_list(raw, path, value)))
    size = sum(len(v.encode()) + 1 for v in items)
    if total_bytes is not None and size > total_bytes:
        raise _err(raw, path, f"the list is {size} bytes long; at most {total_bytes}: put long lists in a requirements file")
    return items


def _int(raw: _Raw, path: tuple, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _err(raw, path, f"{show(value)} is not allowed: a whole number from {low} to {high}")
    return value


def _processes(raw: _Raw, path: tuple, value: Any) -> int | str:
    """Trainer processes per machine: a number, or auto (one per GPU the machine has); a flag's text is read too."""
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,4}", value.strip(), re.ASCII):
        value = int(value.strip())
    if value == AUTO_PROCESSES or (not isinstance(value, bool) and isinstance(value, int)
                                   and 1 <= value <= MAX_PROCESSES_PER_NODE):
        return value
    raise _err(raw, path, f"{show(value)} is not allowed: a number of processes from 1 to {MAX_PROCESSES_PER_NODE}, "
                          f"or {AUTO_PROCESSES} (one per GPU of the machine)")


def _number(raw: _Raw, path: tuple, value: Any) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) > 1e300:
        raise _err(raw, path, f"{show(value)} is not allowed: a finite number")
    return value


def _duration(raw: _Raw, path: tuple, value: Any) -> int:
    allowed = f"seconds (a whole number) or a number with s, m, h or d, e.g. 90m or 7d; at most {MAX_DURATION // 86400}d"
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    match = _DURATION.fullmatch(_string(raw, path, value, limit=64))
    seconds = int(match[1]) * _UNITS[match[2]] if match else -1
    if not 0 < seconds <= MAX_DURATION:
        raise _err(raw, path, f"{show(value)} is not allowed: {allowed}")
    return seconds


def _mapping(raw: _Raw, path: tuple, value: Any, allowed: list[str], what: str) -> dict:
    if not isinstance(value, dict):
        raise _err(raw, path, f"{show(value)} must be a mapping of {what}")
    for key in value:
        if key not in allowed:
            raise _unknown_key(raw, path, key, allowed)
    return {k: v for k, v in value.items() if v is not None}


def _inside(raw: _Raw, path: tuple, text: str, target: Path, root: Path) -> None:
    """The file, after every symlink, must be a regular file inside the trainer directory."""
    consult(target)
    try:
        real = target.resolve(strict=True)
        outside = leads_outside(real, root.resolve())
        is_file = real.is_file()
    except (OSError, RuntimeError) as exc:  # missing, a symlink loop, a name too long
        raise _err(raw, path, f"file {show(text)} not found in {root} ({getattr(exc, 'strerror', None) or exc})") from None
    if outside:
        raise _err(raw, path, f"{show(text)} leads outside {root} (to {show(str(real))}); the file must be inside the "
                              "trainer directory")
    if not is_file:
        raise _err(raw, path, f"{show(text)} is not a regular file")


def _relative_file(raw: _Raw, path: tuple, value: Any, root: Path, what: str | None = None) -> str:
    text = _string(raw, path, value)
    if not _PATH.fullmatch(text):
        raise _err(raw, path, f"{show(text)} is not allowed: a path is letters, digits, spaces and . _ @ + - /")
    pure = PurePosixPath(text)
    if pure.is_absolute() or ".." in pure.parts or any(len(p) > 255 for p in pure.parts):
        raise _err(raw, path, f"{show(text)} is not allowed: use a relative path inside {root} with '/' separators "
                              "(names of at most 255 characters)")
    _inside(raw, path, text, root / pure, root)
    if what:  # a file buildkit-py reads: refuse what it cannot decode now, naming the field
        try:
            read_text(root / pure, what)
        except ConfigError as exc:
            raise _err(raw, path, exc.message) from None
    return str(pure)


def _host_file(raw: _Raw, path: tuple, value: Any, root: Path) -> Path:
    """A file on the build machine, passed to the build as a secret: a flag (typed by the user)
    may name any file, relative to the working directory; the config file (which a pull request
    can change) only one inside the trainer directory, or a build step could read the host's files."""
    text = _string(raw, path, value)
    if path[0] not in raw.flags:
        _inside(raw, path, text, root / text, root)
    target = (Path.cwd() if path[0] in raw.flags else root) / text
    consult(target)
    try:
        ok = target.is_file()
    except OSError as exc:
        raise _err(raw, path, f"{show(text)} cannot be read: {exc.strerror or exc}") from None
    if not ok:
        raise _err(raw, path, f"{show(text)} is not a file")
    return target.absolute()


def _env(raw, path, value) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise _err(raw, path, f"{show(value)} must be a mapping of NAME: value")
    if len(value) > MAX_ENV_ENTRIES:
        raise _err(raw, path, f"{len(value)} variables are too many: at most {MAX_ENV_ENTRIES}")
    out = []
    for name, item in value.items():
        key_path = path + (name,)
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise _err(raw, key_path, f"{show(name)} is not allowed: names are ASCII letters, digits and '_', "
                                      "not starting with a digit, at most 255 characters")
        text = _scalar_text(raw, key_path, item, limit=MAX_ENV_VALUE_BYTES)
        if len(text.encode()) > MAX_ENV_VALUE_BYTES:
            raise _err(raw, key_path, f"{show(text)} is too long: at most {MAX_ENV_VALUE_BYTES} bytes")
        if text.endswith("\\"):
            # Docker accepts it, but hadolint misreads the line: refuse it rather than emit a file lint fails.
            raise _err(raw, key_path, f"{show(text)} is not allowed: a value may not end with a backslash")
        out.append((name, text))
    return tuple(out)
