"""The checks every base_images/ table's loader shares: a document read as a mapping, typed and patterned values
(whole-string ASCII), and versions as packaging Versions that fail as data errors.

The loaders (matrix, tpu, machines) read their own tables with these; nothing here knows a table.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from ..errors import DataError, show
from ..patterns import lazy_pattern
from .resources import read_data

# The overlay is user-side data that reaches requirement strings and labels: every value is
# checked whole-string in ASCII, as config values are.
_RELEASE = lazy_pattern(r"[0-9]+(?:\.[0-9]+){0,3}(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?", re.ASCII)
_PYTHON = lazy_pattern(r"3\.[0-9]{1,2}", re.ASCII)


def version_key(version: str) -> Version:
    try:
        return Version(version)
    except InvalidVersion:
        raise DataError(f"base_images/: {version!r} is not a version") from None


def _load(path: Path, what: str | None = None) -> dict:
    data = read_data(path, what)
    if not isinstance(data, dict):
        raise DataError(f"{what or path}: the top level must be a mapping")
    return data


def _need(data: dict, key: str, kind: type, where: str) -> Any:
    if key not in data or not isinstance(data[key], kind):
        raise DataError(f"{where}: {key!r} must be a {kind.__name__}")
    return data[key]


def _strings(values: Any, where: str, pattern: re.Pattern | None = None) -> tuple[str, ...]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise DataError(f"{where}: expected a list of quoted strings, got {show(values)}")
    for value in values:
        if pattern is not None and not pattern.fullmatch(value):
            raise DataError(f"{where}: {show(value)} is not allowed here")
    return tuple(values)


def _text(data: dict, key: str, where: str, pattern: re.Pattern, default: str | None = None) -> str | None:
    value = data.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise DataError(f"{where}: {key} {show(value)} is not allowed here")
    return value
