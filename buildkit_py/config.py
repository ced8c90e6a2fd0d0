"""The config model: buildkit.yaml or [tool.buildkit-py] in pyproject.toml, plus flag overrides.

Loading is the only I/O here; the result is a frozen, validated Config. Every error names the
file position (YAML) or the flag, the field, the value (escaped) and what is allowed. Flags go
through the same validators as the file, so a value is refused the same way wherever it comes from.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from packaging.requirements import InvalidRequirement, Requirement

from .builders import BUILDERS
from .errors import ConfigError, show
from .fsutil import read_text
from .refs import ImageRef, parse_ref

CONFIG_FILES = ("buildkit.yaml", "buildkit.yml")
PYPROJECT_TABLE = "buildkit-py"

# Sizes: every rendered Dockerfile line stays far below BuildKit's 64 KiB line limit, and no
# value is big enough to be anything but a mistake.
MAX_TEXT = 4096  # any single string
MAX_ENV_VALUE_BYTES = 16384  # ENV values: escaping can double them on their line
MAX_ENV_ENTRIES = 1000
MAX_LIST_BYTES = 8192  # pip and system_packages share one RUN line each; quoting can grow a pip entry 5x
MAX_ARGS_JSON_BYTES = 16384  # CMD is one JSON line
MAX_YAML_DEPTH = 16

_FRAMEWORK = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,63})(?:==(?P<version>[0-9A-Za-z][0-9A-Za-z.+!-]{0,63}))?",
                        re.ASCII)
_CUDA = re.compile(r"[0-9]{1,2}\.[0-9]{1,2}(?:\.[0-9]{1,3})?", re.ASCII)
_PYTHON = re.compile(r"3\.[0-9]{1,2}", re.ASCII)
_DEBIAN_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]{1,127}(?:=[A-Za-z0-9.+:~-]{1,127})?", re.ASCII)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}", re.ASCII)
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*", re.ASCII)
_PATH = re.compile(r"[A-Za-z0-9._@+/ -]+", re.ASCII)  # no $, quotes, globs: COPY expands them
_MIRROR_URL = re.compile(r"https?://[A-Za-z0-9._~:/?#\[\]!&()*+,;=%-]+", re.ASCII)
_INDEX_URL = re.compile(r"https?://[!-~]+", re.ASCII)  # printable ASCII: credentials allowed, no space or line break
_PLATFORM = re.compile(r"[a-z0-9]+/[a-z0-9_]+(?:/v?[0-9a-z]+)?", re.ASCII)
_BUILD_NETWORKS = ("default", "host", "none")  # what BuildKit's RUN steps accept
_PATTERN = re.compile(r"[^\x00-\x1f\x7f]{1,1024}")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}", re.ASCII)


@dataclass(frozen=True)
class FrameworkRequest:
    name: str  # as written (aliases are resolved by the matrix)
    version: str | None  # None: the newest known release; "nightly": a nightly build

    @property
    def is_none(self) -> bool:
        return self.name == "none"

    def __str__(self) -> str:
        return self.name if self.version is None else f"{self.name}=={self.version}"


@dataclass(frozen=True)
class Trainer:
    module: str | None = None
    script: str | None = None  # POSIX path relative to the context root
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config:
    root: Path  # the build context: the directory of the config file
    source: str  # where the config came from, for messages
    framework: FrameworkRequest = FrameworkRequest("none", None)
    cuda: str | None = None
    python: str | None = None
    gpu: bool | None = None  # None: the framework decides
    base_image: str | None = None
    system_packages: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()
    requirements: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    hypertune: bool = True
    trainer: Trainer | None = None
    template: str | None = None
    image: str | None = None  # the repository the content and git tags go on
    python_mirror: str | None = None  # where uv downloads standalone Pythons (UV_PYTHON_INSTALL_MIRROR)
    # How to build: each also a flag of the same name.
    tags: tuple[str, ...] = ()
    platform: str | None = None  # default: linux/amd64 for CUDA images, the engine's own otherwise
    network: str | None = None
    ca_cert: Path | None = None  # default: the bundle named by PIP_CERT, REQUESTS_CA_BUNDLE or SSL_CERT_FILE
    pip_index_url: str | None = field(default=None, repr=False)  # may carry credentials: a secret pip.conf
    pip_conf: Path | None = None
    builder: str = "auto"
    allow_secrets: tuple[str, ...] = ()
    allow_large: tuple[str, ...] = ()


@dataclass
class _Raw:
    """A parsed config document: values plus where each came from."""

    data: dict[str, Any]
    source: str
    positions: dict[tuple, str] = field(default_factory=dict)  # path -> "file:line:col" or "--flag"
    scalars: dict[tuple, str] = field(default_factory=dict)  # path -> YAML scalar text
    flags: set[str] = field(default_factory=set)  # keys whose value came from a flag

    def where(self, path: tuple) -> str:
        while path and path not in self.positions:
            path = path[:-1]
        return self.positions.get(path, self.source)

    def text(self, path: tuple, value: Any) -> Any:
        """A scalar as the user wrote it (YAML reads 3.10 as the float 3.1)."""
        return self.scalars.get(path, value)


# ---------------------------------------------------------------------------------------------
# Reading files


def find_config(directory: Path) -> Path | None:
    for name in CONFIG_FILES:
        if (directory / name).is_file():
            return directory / name
    pyproject = directory / "pyproject.toml"
    if pyproject.is_file() and isinstance(_tool_table(pyproject), dict):
        return pyproject
    return None


def _tool_table(path: Path) -> Any:
    """[tool.buildkit-py] of a pyproject.toml, or None when it has none."""
    try:
        document = tomllib.loads(read_text(path, "pyproject.toml"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", where=str(path)) from None
    tool = document.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        raise ConfigError(f"[tool] must be a table, not {show(tool)}", where=str(path))
    table = tool.get(PYPROJECT_TABLE)
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"[tool.{PYPROJECT_TABLE}] must be a table of keys, not {show(table)}", where=str(path))
    return table


def _check_events(text: str, filename: str) -> None:
    """Refuse what a config never needs and an attacker uses: tags (object construction, type
    tricks), anchors and aliases (billion-laughs expansion, cycles), deep nesting."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        mark = event.start_mark
        where = f"{filename}:{mark.line + 1}:{mark.column + 1}"
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise ConfigError("YAML anchors and aliases (&name, *name) are not supported: write the value out",
                              where=where)
        if getattr(event, "tag", None) is not None:  # plain values carry none; `!!int`, `!x`, `!!python/...` do
            raise ConfigError(f"YAML tags ({show(event.tag)}) are not supported: write a plain value", where=where)
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise ConfigError(f"nested deeper than {MAX_YAML_DEPTH} levels", where=where)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def _read_yaml(path: Path) -> _Raw:
    text = read_text(path, "config file")
    try:
        _check_events(text, str(path))
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"invalid YAML: {exc.problem or exc.context}", where=loc) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", where=str(path)) from None
    raw = _Raw(data={}, source=str(path))
    if node is None:
        return raw
    data = _construct(node, (), raw, str(path))
    if not isinstance(data, dict):
        raise ConfigError("the top level must be a mapping of keys to values", where=raw.where(()))
    raw.data = data
    return raw


def _construct(node: yaml.Node, path: tuple, raw: _Raw, filename: str) -> Any:
    raw.positions[path] = f"{filename}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            where = f"{filename}:{key_node.start_mark.line + 1}:{key_node.start_mark.column + 1}"
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError("keys must be plain strings", field=_dotted(path), where=where)
            key = key_node.value
            if key in out:
                raise ConfigError("this key is given twice", field=_dotted(path + (key,)), where=where)
            out[key] = _construct(value_node, path + (key,), raw, filename)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(item, path + (i,), raw, filename) for i, item in enumerate(node.value)]
    raw.scalars[path] = node.value
    try:
        return yaml.constructor.SafeConstructor().construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, OverflowError):  # looks like a date, but is none (2024-13-45)
        return node.value


def load_raw(config_path: Path | None, directory: Path) -> tuple[_Raw, Path]:
    """Read the config document; returns it and the context root."""
    try:
        if config_path is not None and not config_path.is_file():
            state = "is not a file" if config_path.exists() else "does not exist"
            raise ConfigError(f"config file {show(str(config_path))} {state}", field="--config")
        if not directory.is_dir():
            raise ConfigError(f"{show(str(directory))} is not a directory", field="--dir")
    except OSError as exc:  # a name too long, a loop of symlinks
        field_name = "--config" if config_path is not None else "--dir"
        raise ConfigError(f"{show(str(config_path or directory))}: {exc.strerror or exc}", field=field_name) from None
    path = config_path or find_config(directory)
    if path is None:
        return _Raw(data={}, source="(defaults)"), directory.resolve()
    if path.name == "pyproject.toml":
        table = _tool_table(path)
        if table is None:
            raise ConfigError(f"no [tool.{PYPROJECT_TABLE}] table", where=str(path))
        source = f"{path} [tool.{PYPROJECT_TABLE}]"
        return _Raw(data=dict(table), source=source), path.parent.resolve()
    return _read_yaml(path), path.parent.resolve()


# ---------------------------------------------------------------------------------------------
# Validation


def _dotted(path: tuple) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and _KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:  # a user's key: escaped, so it cannot forge a field name or a terminal escape
            out += f"[{show(part)}]"
    return out


def _err(raw: _Raw, path: tuple, message: str) -> ConfigError:
    return ConfigError(message, field=_dotted(path), where=raw.where(path))


def _unknown_key(raw: _Raw, path: tuple, key: Any, allowed: list[str]) -> ConfigError:
    close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return _err(raw, path + (key,), f"unknown key; {hint}allowed keys: {', '.join(sorted(allowed))}")


def _bad_character(text: str) -> str | None:
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
    reason = _bad_character(value)
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


def _framework(raw, path, value) -> FrameworkRequest:
    allowed = "use NAME==VERSION (e.g. torch==2.5.1), NAME==nightly, NAME alone for the newest known release, or none"
    text = _string(raw, path, value).strip()
    match = _FRAMEWORK.fullmatch(text)
    if not match:
        raise _err(raw, path, f"{show(text)} is not allowed: {allowed}")
    name = match["name"].lower()
    if name == "none" and match["version"]:
        raise _err(raw, path, f"{show(text)} is not allowed: 'none' takes no version")
    return FrameworkRequest(name, match["version"])


def _inside(raw: _Raw, path: tuple, text: str, target: Path, root: Path) -> None:
    """The file, after every symlink, must be a regular file inside the trainer directory."""
    try:
        real = target.resolve(strict=True)
        inside = real.is_relative_to(root.resolve())
        is_file = real.is_file()
    except (OSError, RuntimeError) as exc:  # missing, a symlink loop, a name too long
        raise _err(raw, path, f"file {show(text)} not found in {root} ({getattr(exc, 'strerror', None) or exc})") from None
    if not inside:
        raise _err(raw, path, f"{show(text)} leads outside {root} (to {real}); the file must be inside the trainer directory")
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
    try:
        ok = target.is_file()
    except OSError as exc:
        raise _err(raw, path, f"{show(text)} cannot be read: {exc.strerror or exc}") from None
    if not ok:
        raise _err(raw, path, f"{show(text)} is not a file")
    return target.absolute()


def ca_bundle_problem(path: Path) -> str | None:
    """Why a file cannot serve as a CA bundle, or None: PEM certificates and nothing secret."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(16 << 20)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if b"PRIVATE KEY" in head:
        return "it holds a private key; a CA bundle holds certificates only"
    if b"-----BEGIN CERTIFICATE-----" not in head and b"-----BEGIN TRUSTED CERTIFICATE-----" not in head:
        return "it holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
    return None


def _ca_cert(raw: _Raw, path: tuple, value: Any, root: Path) -> Path:
    target = _host_file(raw, path, value, root)
    problem = ca_bundle_problem(target)
    if problem:
        raise _err(raw, path, f"{show(str(value))} is not a CA bundle: {problem}")
    return target


def _pip_conf(raw: _Raw, path: tuple, value: Any, root: Path) -> Path:
    target = _host_file(raw, path, value, root)
    try:
        read_text(target, "pip.conf")
    except ConfigError as exc:
        raise _err(raw, path, exc.message) from None
    return target


def _index_url(raw: _Raw, path: tuple, value: Any) -> str:
    text = _string(raw, path, value, secret=True)
    if not _INDEX_URL.fullmatch(text):
        # Never echo it: the URL may carry a password.
        raise _err(raw, path, "the value is not allowed: an http(s) URL of printable ASCII without spaces "
                              "(percent-encode other characters in credentials)")
    return text


def _mirror_url(raw: _Raw, path: tuple, value: Any) -> str:
    text = _string(raw, path, value, secret=True)
    if not _MIRROR_URL.fullmatch(text):
        raise _err(raw, path, "the value is not allowed: an http(s) URL without spaces, quotes or credentials")
    return text


def _pip_requirement(raw, path, value) -> str:
    text = _string(raw, path, value).strip()
    if text.startswith("-"):
        raise _err(raw, path, f"{show(text)} is not allowed: give a PEP 508 requirement (options go in a requirements file)")
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        raise _err(raw, path, f"{show(text)} is not a valid PEP 508 requirement: {str(exc)[:200]}") from None
    return text


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


def _trainer(raw, path, value, root: Path) -> Trainer:
    if not isinstance(value, dict):
        raise _err(raw, path, f"{show(value)} must be a mapping with module or script, and args")
    allowed = ["module", "script", "args"]
    for key in value:
        if key not in allowed:
            raise _unknown_key(raw, path, key, allowed)
    if ("module" in value) == ("script" in value):
        raise _err(raw, path, "give exactly one of module (python -m MODULE) or script (a .py file)")
    module = script = None
    if "module" in value:
        module = _pattern(raw, path + ("module",), value["module"], _MODULE, "a dotted Python module name, e.g. trainer.task")
        if len(module) > 255:
            raise _err(raw, path + ("module",), f"{show(module)} is too long: at most 255 characters")
    else:
        script = _relative_file(raw, path + ("script",), value["script"], root)
        if not script.endswith(".py"):
            raise _err(raw, path + ("script",), f"{show(script)} is not allowed: a script must be a .py file")
    args = []
    given = value.get("args")
    for i, arg in enumerate(_list(raw, path + ("args",), [] if given is None else given)):
        args.append(_scalar_text(raw, path + ("args", i), arg))
    if len(json.dumps(args)) > MAX_ARGS_JSON_BYTES:
        raise _err(raw, path + ("args",), f"the arguments are too long for the image's CMD: at most {MAX_ARGS_JSON_BYTES} "
                                          "bytes as JSON; pass long values at run time")
    return Trainer(module=module, script=script, args=tuple(args))


def _image(raw, path, value) -> str:
    ref = _ref(raw, path, value)
    text = str(value)
    if ref.tag or ref.digest:
        raise _err(raw, path, f"{show(text)} is not allowed: give the repository only; "
                              "buildkit-py adds the content and git tags (more tags: tags / --tag)")
    return ref.repository


def _tag(raw, path, value) -> str:
    return str(_ref(raw, path, value, allow_digest=False))


def _validators(root: Path) -> dict[str, Callable[[_Raw, tuple, Any], Any]]:
    patterns = "fnmatch patterns of context paths, e.g. keys/*.pem"
    return {
        "framework": _framework,
        "cuda": lambda r, p, v: _pattern(r, p, v, _CUDA, "a CUDA version like 12.4 or 12.4.1", allow_numbers=True),
        "python": lambda r, p, v: _pattern(r, p, v, _PYTHON, "a Python version like 3.11", allow_numbers=True),
        "gpu": _bool,
        "base_image": lambda r, p, v: str(_ref(r, p, v)),
        "system_packages": lambda r, p, v: _strings(
            r, p, v, lambda r2, p2, v2: _pattern(r2, p2, v2, _DEBIAN_PACKAGE, "a Debian package name, optionally =VERSION"),
            total_bytes=MAX_LIST_BYTES * 2),
        "pip": lambda r, p, v: _strings(r, p, v, _pip_requirement, total_bytes=MAX_LIST_BYTES),
        "requirements": lambda r, p, v: _relative_file(r, p, v, root, "requirements file"),
        "env": _env,
        "hypertune": _bool,
        "trainer": lambda r, p, v: _trainer(r, p, v, root),
        "template": lambda r, p, v: _relative_file(r, p, v, root, "template"),
        "image": _image,
        "python_mirror": _mirror_url,
        "tags": lambda r, p, v: _strings(r, p, v, _tag),
        "platform": lambda r, p, v: _pattern(r, p, v, _PLATFORM, "OS/ARCH[/VARIANT], e.g. linux/amd64 or linux/arm64"),
        "network": lambda r, p, v: _choice(r, p, v, _BUILD_NETWORKS),
        "ca_cert": lambda r, p, v: _ca_cert(r, p, v, root),
        "pip_index_url": _index_url,
        "pip_conf": lambda r, p, v: _pip_conf(r, p, v, root),
        "builder": lambda r, p, v: _choice(r, p, v, BUILDERS),
        "allow_secrets": lambda r, p, v: _strings(r, p, v, lambda r2, p2, v2: _pattern(r2, p2, v2, _PATTERN, patterns)),
        "allow_large": lambda r, p, v: _strings(r, p, v, lambda r2, p2, v2: _pattern(r2, p2, v2, _PATTERN, patterns)),
    }


KEYS = tuple(_validators(Path(".")))
_FLAG_NAMES = {"tags": "--tag", "allow_secrets": "--allow-secret", "allow_large": "--allow-large"}


def flag_name(key: str) -> str:
    """The command-line flag that sets a config key."""
    return _FLAG_NAMES.get(key) or "--" + key.replace("_", "-")


def load_config(
    config_path: Path | None = None,
    directory: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> Config:
    """Read, merge flag overrides over the file, validate; raise ConfigError on any bad value."""
    raw, root = load_raw(config_path, directory or Path.cwd())
    for key, value in (overrides or {}).items():
        if value is not None and value != ():
            raw.data[key] = value
            raw.positions[(key,)] = flag_name(key)
            raw.scalars = {p: t for p, t in raw.scalars.items() if p[:1] != (key,)}
            raw.flags.add(key)
    validators = _validators(root)
    values: dict[str, Any] = {}
    for key, value in raw.data.items():
        if key not in validators:
            raise _unknown_key(raw, (), key, list(validators))
        if value is None:
            continue  # an empty YAML value means "use the default"
        values[key] = validators[key](raw, (key,), value)
    if values.get("pip_index_url") and values.get("pip_conf"):
        raise _err(raw, ("pip_index_url",), "give pip_index_url or pip_conf, not both")
    return Config(root=root, source=raw.source, **values)


def default_ca_bundle(env: dict[str, str] | None = None) -> Path | None:
    """The CA bundle the user's shell names (PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE), checked
    like --ca-cert; the first that names an existing file wins."""
    env = dict(os.environ) if env is None else env
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        value = env.get(name)
        if value and Path(value).is_file():
            problem = ca_bundle_problem(Path(value))
            if problem:
                raise ConfigError(f"{show(value)} is not a CA bundle: {problem}", field=f"${name}")
            return Path(value)
    return None
