"""Reading the config document: buildkit.yaml (or [tool.buildkit-py] in pyproject.toml) with where each value stands,
and the errors that name a value by its field and file:line."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, show
from ..fsutil import MAX_NESTING, asked_once, consult, inside, read_text, read_toml, too_deep
from ..patterns import lazy_pattern

CONFIG_FILES = ("buildkit.yaml", "buildkit.yml")
PYPROJECT_TABLE = "buildkit-py"
DOCUMENT_SOURCE = "(config dict)"  # where the errors of a config given as a mapping (the Python API) point
DEFAULTS_SOURCE = "(defaults)"  # the source of a config no file gives: every key its default
_KEY = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_-]{0,63}", re.ASCII)


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


# For another format read by the config's rules (gcloud's job config): its fields named as the config's are.
field_name = _dotted
field_error = _err


def find_config(directory: Path) -> Path | None:
    for name in CONFIG_FILES:
        consult(directory / name)
        if (directory / name).is_file():
            return directory / name
    pyproject = directory / "pyproject.toml"
    consult(pyproject)
    if pyproject.is_file() and isinstance(_tool_table(pyproject), dict):
        return pyproject
    return None


def _tool_table(path: Path) -> Any:
    """[tool.buildkit-py] of a pyproject.toml, or None when it has none."""
    tool = read_toml(path, "pyproject.toml").get("tool")
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
    # The open containers, each [its path, the key or index of its next child, whether it is a mapping awaiting a
    # key]: what a refusal names the field by (trainer.module[0][0]...), as a parsed document's value is named.
    open_: list[list] = []
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        mark = event.start_mark
        where = f"{filename}:{mark.line + 1}:{mark.column + 1}"
        top = open_[-1] if open_ else None
        if top is not None and top[2] is True and isinstance(event, yaml.ScalarEvent):
            top[1], top[2] = event.value, False  # a key: the path of the value after it
            continue
        field = _dotted((*top[0], top[1])) if top is not None else None
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise ConfigError("YAML anchors and aliases (&name, *name) are not supported: write the value out",
                              where=where, field=field)
        if getattr(event, "tag", None) is not None:  # plain values carry none; `!!int`, `!x`, `!!python/...` do
            raise ConfigError(f"YAML tags ({show(event.tag)}) are not supported: write a plain value", where=where,
                              field=field)
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(open_) >= MAX_NESTING:
                raise ConfigError(too_deep(MAX_NESTING), where=where, field=field)
            path = (*top[0], top[1]) if top is not None else ()
            open_.append([path, 0, True if isinstance(event, yaml.MappingStartEvent) else None])
            continue
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            open_.pop()
            top = open_[-1] if open_ else None
        if top is not None and isinstance(event, (yaml.ScalarEvent, yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            if top[2] is None:
                top[1] += 1  # a sequence's next item
            else:
                top[2] = True  # a mapping's value ended: a key comes next


def read_yaml(path: Path, what: str) -> tuple[Any, dict[tuple, str]]:
    """A YAML document with the tags, anchors and depth _check_events refuses, and where each value stands
    ("file:line:col" by path of keys and indexes)."""
    raw = _read_yaml(path, what)
    return raw.data, raw.positions


def _read_yaml(path: Path, what: str = "config file") -> _Raw:
    """The document parsed once a command (inference reads it for the keys it leaves alone, the config stage for
    their values): each caller gets its own copy, which load_config's flag overrides may change."""
    text = read_text(path, what)
    raw: _Raw = asked_once(("yaml", str(path), text), lambda: _parse_yaml(text, path))  # type: ignore[assignment]
    return _Raw(copy.deepcopy(raw.data), raw.source, dict(raw.positions), dict(raw.scalars))


def _parse_yaml(text: str, path: Path) -> _Raw:
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


def load_raw(config_path: Path | None, directory: Path, document: Mapping[str, Any] | None = None) -> tuple[_Raw, Path]:
    """Read the config document (or take the one given as a mapping: the Python API's config dict); returns it
    and the context root."""
    try:
        if config_path is not None and not config_path.is_file():
            state = "is not a file" if config_path.exists() else "does not exist"
            raise ConfigError(f"config file {show(str(config_path))} {state}", field="--config")
        if not directory.is_dir():
            raise ConfigError(f"{show(str(directory))} is not a directory", field="--dir")
    except OSError as exc:  # a name too long, a loop of symlinks
        field_name = "--config" if config_path is not None else "--dir"
        raise ConfigError(f"{show(str(config_path or directory))}: {exc.strerror or exc}", field=field_name) from None
    if document is not None:
        if not isinstance(document, Mapping) or not all(isinstance(key, str) for key in document):
            raise ConfigError(f"{show(document)} is not allowed: a mapping of config keys (strings) to values, or a path",
                              field="config")
        return _Raw(data=dict(document), source=DOCUMENT_SOURCE), directory.resolve()
    path = config_path or find_config(directory)
    if path is None:
        return _Raw(data={}, source=DEFAULTS_SOURCE), directory.resolve()
    if config_path is None:  # found, not named: a repository's link must not make buildkit-py read another file
        inside(directory, path, "config file")
    if path.name == "pyproject.toml":
        table = _tool_table(path)
        if table is None:
            raise ConfigError(f"no [tool.{PYPROJECT_TABLE}] table", where=str(path))
        source = f"{path} [tool.{PYPROJECT_TABLE}]"
        return _Raw(data=dict(table), source=source), path.parent.resolve()
    return _read_yaml(path), path.parent.resolve()
