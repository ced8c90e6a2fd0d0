"""What the lock readers share: the locked distribution, the image's marker values and a marker's test against
them, and each lock field read and checked (tables, names, versions, hashes, URLs), with where it is for messages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from ...errors import ConfigError, show
from ...fsutil import parse_toml
from ...patterns import lazy_pattern
from ..pip_config import without_credentials

_HASH = lazy_pattern(r"sha256:[0-9a-f]{64}", re.ASCII)
_MACHINES = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}


@dataclass(frozen=True)
class Locked:
    """One locked distribution: pinned from an index with its hashes, or from a URL or a git commit."""

    name: str
    version: str
    hashes: tuple[str, ...]  # "sha256:..."
    direct: str | None  # "git+https://...@COMMIT" or an archive URL: installed as NAME @ direct
    where: str  # "uv.lock:41"
    index: str | None = None  # the index it was locked from, where the lock names one other than PyPI

    @property
    def requirement(self) -> str:
        """As a requirements file names it: NAME==VERSION, or NAME @ URL."""
        return f"{self.name} @ {self.direct}" if self.direct else f"{self.name}=={self.version}"

    @property
    def line(self) -> str:
        return " \\\n    ".join([self.requirement, *(f"--hash={h}" for h in self.hashes)])


def environment(python: str, platform: str) -> dict[str, str]:
    """PEP 508 marker values of the image: CPython `python` on Linux for `platform`."""
    machine = _MACHINES.get(platform, "x86_64")
    return {"python_version": python, "python_full_version": f"{python}.0", "os_name": "posix",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": machine,
            "platform_release": "", "platform_version": "", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "implementation_version": f"{python}.0", "extra": ""}


# uv.lock's markers name the extras and groups in force as `extra == 'NAME'` (several at once, so not one value): read
# as membership of the set of those installed, as PEP 751's `'NAME' in extras` is.
_EXTRA_TEST = lazy_pattern(r"""\bextra\s*(==|!=)\s*(['"])([^'"]*)\2""")


def _applies(marker: Any, env: dict[str, str], where: str, context: str | None = None,
             chosen: frozenset[str] = frozenset()) -> bool:
    if marker in (None, ""):
        return True
    if not isinstance(marker, str):
        raise ConfigError(f"{where}: the marker {show(marker)} is not a string")
    try:
        if context is None and chosen:
            marker = _EXTRA_TEST.sub(lambda m: f"'{m.group(3)}' {'in' if m.group(1) == '==' else 'not in'} extras",
                                     marker)
            context = "lock_file"
        parsed = Marker(marker)
        if context is None:
            return parsed.evaluate(env)
        return parsed.evaluate({**env, "extras": chosen, "dependency_groups": frozenset()}, context)
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName, TypeError) as exc:
        raise ConfigError(f"{where}: the marker {show(marker)} cannot be read ({exc})") from None


def _lines_of(text: str, header: str) -> Iterator[tuple[int, str]]:
    """(line number, name) of each entry under a `[[header]]` table: where a package is, for messages."""
    inside = False
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("["):
            inside = stripped == f"[[{header}]]"
            continue
        found = re.match(r'name\s*=\s*"([^"]+)"', stripped) if inside else None
        if found:
            inside = False
            yield number, found.group(1)


def _table(value: Any, where: str, what: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {what} must be a table, got {show(value)}")
    return value


def _tables(value: Any, where: str, what: str) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ConfigError(f"{where}: {what} must be a list of tables, got {show(value)}")
    return value


def _text(value: Any, where: str, what: str) -> str:
    if not isinstance(value, str) or not value or not value.isprintable():
        raise ConfigError(f"{where}: {what} must be a string, got {show(value)}")
    return value


def _name(value: Any, where: str) -> str:
    text = _text(value, where, "name")
    try:
        parsed = Requirement(text)
    except InvalidRequirement:
        parsed = None
    if parsed is None or parsed.name != text:  # a name alone: no specifier, extras, marker or URL
        raise ConfigError(f"{where}: {show(text)} is not a distribution name")
    return text


def _toml(path: Path, shown: str) -> tuple[dict, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{shown}: cannot be read ({exc})") from None
    return parse_toml(text, shown), text


def _version(value: Any, where: str) -> str:
    try:
        return str(Version(str(value)))
    except InvalidVersion:
        raise ConfigError(f"{where}: version {show(value)} is not a PEP 440 version") from None


def _hashes(values: list[Any], where: str) -> tuple[str, ...]:
    found = []
    for value in values:
        if not isinstance(value, str) or not _HASH.fullmatch(value):
            raise ConfigError(f"{where}: hash {show(value)} is not sha256:<64 hex digits>")
        found.append(value)
    return tuple(dict.fromkeys(found))


def _direct(url: str, where: str) -> str:
    """A URL or VCS reference for `NAME @ URL`: one word, nothing a requirements file would read as an option."""
    if not re.fullmatch(r"(?:git\+)?(?:https?|ssh|file)://[^\s\\#]+", url, re.ASCII):
        raise ConfigError(f"{where}: {show(url)} is not a URL the image can install from")
    if without_credentials(url) != url:  # the exported lines are a file of the build context, copied into a layer
        raise ConfigError(f"{where}: a URL with credentials (not shown); the lock's packages are installed from a "
                          "file copied into the image, where anyone who pulls it reads them: keep the login out of the "
                          "lock and give it as pip_index_url or pip_conf (the build passes them as secrets)")
    return url
