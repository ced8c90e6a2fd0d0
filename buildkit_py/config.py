"""The config model: buildkit.yaml or [tool.buildkit-py] in pyproject.toml, plus flag overrides.

Loading is the only I/O here; the result is a frozen, validated Config. Every error names the
file position (YAML), the field, the value and what is allowed.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from packaging.requirements import InvalidRequirement, Requirement

from .errors import ConfigError
from .refs import parse_ref

CONFIG_FILES = ("buildkit.yaml", "buildkit.yml")
PYPROJECT_TABLE = "buildkit-py"

_FRAMEWORK = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:==(?P<version>[0-9A-Za-z][0-9A-Za-z.+!-]*))?$")
_CUDA = re.compile(r"^\d{1,2}\.\d{1,2}(?:\.\d{1,3})?$")
_PYTHON = re.compile(r"^3\.\d{1,2}$")
_DEBIAN_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+(?:=[A-Za-z0-9.+:~-]+)?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_PATH = re.compile(r"^[A-Za-z0-9._@+/ -]+$")  # no $, quotes, globs: COPY expands them
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


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
    image: str | None = None


@dataclass
class _Raw:
    """A parsed config document: values plus where each came from."""

    data: dict[str, Any]
    source: str
    positions: dict[tuple, str] = field(default_factory=dict)  # path -> "file:line:col"
    scalars: dict[tuple, str] = field(default_factory=dict)  # path -> YAML scalar text

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
    if pyproject.is_file() and PYPROJECT_TABLE in _read_toml(pyproject).get("tool", {}):
        return pyproject
    return None


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", where=str(path)) from None


def _read_yaml(path: Path) -> _Raw:
    text = path.read_text(encoding="utf-8")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"invalid YAML: {exc.problem or exc.context}", where=loc) from None
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
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError("keys must be plain strings", where=raw.positions[path])
            key = key_node.value
            if key in out:
                where = f"{filename}:{key_node.start_mark.line + 1}:{key_node.start_mark.column + 1}"
                raise ConfigError("this key is given twice", field=_dotted(path + (key,)), where=where)
            out[key] = _construct(value_node, path + (key,), raw, filename)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(item, path + (i,), raw, filename) for i, item in enumerate(node.value)]
    raw.scalars[path] = node.value
    return yaml.constructor.SafeConstructor().construct_object(node, deep=True)


def load_raw(config_path: Path | None, directory: Path) -> tuple[_Raw, Path]:
    """Read the config document; returns it and the context root."""
    path = config_path or find_config(directory)
    if path is None:
        return _Raw(data={}, source="(defaults)"), directory.resolve()
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist", field="--config")
    if path.name == "pyproject.toml":
        table = _read_toml(path).get("tool", {}).get(PYPROJECT_TABLE)
        if table is None:
            raise ConfigError(f"no [tool.{PYPROJECT_TABLE}] table", where=str(path))
        source = f"{path} [tool.{PYPROJECT_TABLE}]"
        return _Raw(data=table, source=source), path.parent.resolve()
    return _read_yaml(path), path.parent.resolve()


# ---------------------------------------------------------------------------------------------
# Validation


def _dotted(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _err(raw: _Raw, path: tuple, message: str) -> ConfigError:
    return ConfigError(message, field=_dotted(path), where=raw.where(path))


def _unknown_key(raw: _Raw, path: tuple, key: str, allowed: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return _err(raw, path + (key,), f"unknown key; {hint}allowed keys: {', '.join(sorted(allowed))}")


def _string(raw: _Raw, path: tuple, value: Any, *, allow_numbers: bool = False) -> str:
    if allow_numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = raw.text(path, str(value))
    if not isinstance(value, str):
        raise _err(raw, path, f"{value!r} must be a string (quote it)")
    return value


def _pattern(raw, path, value, regex: re.Pattern, allowed: str, *, allow_numbers=False) -> str:
    text = _string(raw, path, value, allow_numbers=allow_numbers)
    if not regex.match(text):
        raise _err(raw, path, f"{text!r} is not allowed: {allowed}")
    return text


def _bool(raw: _Raw, path: tuple, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _err(raw, path, f"{value!r} must be true or false")
    return value


def _list(raw: _Raw, path: tuple, value: Any) -> list:
    if not isinstance(value, list):
        raise _err(raw, path, f"{value!r} must be a list")
    return value


def _framework(raw, path, value) -> FrameworkRequest:
    allowed = "use NAME==VERSION (e.g. torch==2.5.1), NAME==nightly, NAME alone for the newest known release, or none"
    text = _string(raw, path, value).strip()
    match = _FRAMEWORK.match(text)
    if not match:
        raise _err(raw, path, f"{text!r} is not allowed: {allowed}")
    name = match["name"].lower()
    if name == "none" and match["version"]:
        raise _err(raw, path, f"{text!r} is not allowed: 'none' takes no version")
    return FrameworkRequest(name, match["version"])


def _relative_file(raw: _Raw, path: tuple, value: Any, root: Path) -> str:
    text = _string(raw, path, value)
    if not _PATH.match(text):
        raise _err(raw, path, f"{text!r} is not allowed: a path is letters, digits, spaces and . _ @ + - /")
    pure = PurePosixPath(text)
    if pure.is_absolute() or ".." in pure.parts or "\\" in text:
        raise _err(raw, path, f"{text!r} is not allowed: use a relative path inside {root} with '/' separators")
    if not (root / pure).is_file():
        raise _err(raw, path, f"file {text!r} not found in {root}")
    return str(pure)


def _pip_requirement(raw, path, value) -> str:
    text = _string(raw, path, value).strip()
    if _CONTROL.search(text) or text.startswith("-"):
        raise _err(raw, path, f"{text!r} is not allowed: give a PEP 508 requirement (options go in a requirements file)")
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        raise _err(raw, path, f"{text!r} is not a valid PEP 508 requirement: {exc}") from None
    return text


def _env(raw, path, value) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise _err(raw, path, f"{value!r} must be a mapping of NAME: value")
    out = []
    for name, item in value.items():
        key_path = path + (name,)
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise _err(raw, key_path, f"{name!r} is not allowed: names are letters, digits and '_', not starting with a digit")
        if item is None or isinstance(item, (dict, list)):
            raise _err(raw, key_path, f"{item!r} must be a string, number or boolean")
        text = raw.text(key_path, item if isinstance(item, str) else str(item))
        if _CONTROL.search(text) or text.endswith("\\"):
            raise _err(
                raw, key_path,
                f"{text!r} is not allowed: values are one line without control characters "
                "and do not end with a backslash",
            )
        out.append((name, text))
    return tuple(out)


def _trainer(raw, path, value, root: Path) -> Trainer:
    if not isinstance(value, dict):
        raise _err(raw, path, f"{value!r} must be a mapping with module or script, and args")
    allowed = ["module", "script", "args"]
    for key in value:
        if key not in allowed:
            raise _unknown_key(raw, path, key, allowed)
    if ("module" in value) == ("script" in value):
        raise _err(raw, path, "give exactly one of module (python -m MODULE) or script (a .py file)")
    module = script = None
    if "module" in value:
        module = _pattern(raw, path + ("module",), value["module"], _MODULE, "a dotted Python module name, e.g. trainer.task")
    else:
        script = _relative_file(raw, path + ("script",), value["script"], root)
        if not script.endswith(".py"):
            raise _err(raw, path + ("script",), f"{script!r} is not allowed: a script must be a .py file")
    args = []
    for i, arg in enumerate(_list(raw, path + ("args",), value.get("args", []))):
        if isinstance(arg, (dict, list)) or arg is None:
            raise _err(raw, path + ("args", i), f"{arg!r} must be a string")
        text = raw.text(path + ("args", i), arg if isinstance(arg, str) else str(arg))
        if "\x00" in text:
            raise _err(raw, path + ("args", i), "NUL characters are not allowed")
        args.append(text)
    return Trainer(module=module, script=script, args=tuple(args))


def _validators(root: Path) -> dict[str, Callable[[_Raw, tuple, Any], Any]]:
    return {
        "framework": _framework,
        "cuda": lambda r, p, v: _pattern(r, p, v, _CUDA, "a CUDA version like 12.4 or 12.4.1", allow_numbers=True),
        "python": lambda r, p, v: _pattern(r, p, v, _PYTHON, "a Python version like 3.11", allow_numbers=True),
        "gpu": _bool,
        "base_image": lambda r, p, v: str(parse_ref(_string(r, p, v), field=_dotted(p))),
        "system_packages": lambda r, p, v: tuple(
            _pattern(r, p + (i,), item, _DEBIAN_PACKAGE, "a Debian package name, optionally =VERSION")
            for i, item in enumerate(_list(r, p, v))
        ),
        "pip": lambda r, p, v: tuple(_pip_requirement(r, p + (i,), item) for i, item in enumerate(_list(r, p, v))),
        "requirements": lambda r, p, v: _relative_file(r, p, v, root),
        "env": _env,
        "hypertune": _bool,
        "trainer": lambda r, p, v: _trainer(r, p, v, root),
        "template": lambda r, p, v: _relative_file(r, p, v, root),
        "image": lambda r, p, v: str(parse_ref(_string(r, p, v), field=_dotted(p))),
    }


KEYS = tuple(_validators(Path(".")))


def load_config(
    config_path: Path | None = None,
    directory: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> Config:
    """Read, merge flag overrides over the file, validate; raise ConfigError on any bad value."""
    raw, root = load_raw(config_path, directory or Path.cwd())
    for key, value in (overrides or {}).items():
        if value is not None:
            raw.data[key] = value
            raw.positions[(key,)] = f"--{key.replace('_', '-')}"
            raw.scalars.pop((key,), None)
    validators = _validators(root)
    values: dict[str, Any] = {}
    for key, value in raw.data.items():
        if key not in validators:
            raise _unknown_key(raw, (), str(key), list(validators))
        if value is None:
            continue  # an empty YAML value means "use the default"
        values[key] = validators[key](raw, (key,), value)
    return Config(root=root, source=raw.source, **values)
