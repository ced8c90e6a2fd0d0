"""Uses of framework APIs that later releases removed (base_images/removed_apis.yaml), found in the
trainer's parsed modules (autopackage parses the files the image gets once, for this and its import
scan): `tf.estimator.X` where `import tensorflow as tf`, `from tensorflow import estimator`,
`import tensorflow.contrib.slim`, `from tensorflow.contrib import layers`."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..catalog.resources import read_data, resource_dir
from ..errors import ConfigError, DataError, shown_name
from ..fsutil import parse_python


@dataclass(frozen=True)
class RemovedApi:
    """A framework API that a release removed (removed_apis.yaml): its dotted name, that release, and the source."""

    api: str  # dotted name: "tensorflow.estimator"
    framework: str
    removed_in: str
    source: str


@dataclass(frozen=True)
class RemovedUse:
    """A use of a removed framework API in the trainer's code, and where it is."""

    api: RemovedApi
    where: str  # "trainer/task.py:12"


def removed_apis() -> tuple[RemovedApi, ...]:
    data = read_data(resource_dir("base_images") / "removed_apis.yaml")
    items = data.get("apis") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise DataError("removed_apis.yaml: 'apis' must be a list")
    out = []
    keys = ("api", "framework", "removed_in", "source")
    for item in items:
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in keys):
            raise DataError(f"removed_apis.yaml: {item!r} needs api, framework, removed_in and source")
        out.append(RemovedApi(item["api"], item["framework"], item["removed_in"], item["source"]))
    return tuple(out)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _used_names(tree: ast.AST) -> list[tuple[str, int]]:
    """Fully qualified dotted names the module refers to, with their lines."""
    aliases: dict[str, str] = {}
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
                found.append((alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                found.append((f"{node.module}.{alias.name}", node.lineno))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (name := _dotted(node)):
            head, _, rest = name.partition(".")
            if head in aliases:
                found.append((f"{aliases[head]}.{rest}", node.lineno))
    return found


def find_removed(sources: dict[str, str], apis: tuple[RemovedApi, ...] | None = None) -> tuple[RemovedUse, ...]:
    """The removed APIs the sources (path -> text) use; unparsable files are skipped (the build reports them)."""
    trees = {}
    for path, text in sources.items():
        try:
            trees[path] = parse_python(text, path)
        except (SyntaxError, ValueError, ConfigError):
            continue
    return removed_uses(trees, apis)


def removed_uses(trees: dict[str, ast.AST], apis: tuple[RemovedApi, ...] | None = None) -> tuple[RemovedUse, ...]:
    """The removed APIs the parsed modules (path -> AST) use, the first use of each (by path, then line)."""
    apis = removed_apis() if apis is None else apis
    seen: dict[str, RemovedUse] = {}
    for path, tree in sorted(trees.items()):
        for name, line in _used_names(tree):
            for api in apis:
                if (name == api.api or name.startswith(api.api + ".")) and api.api not in seen:
                    seen[api.api] = RemovedUse(api, f"{shown_name(str(path))}:{line}")
    return tuple(seen.values())


def notes(uses: tuple[RemovedUse, ...]) -> tuple[str, ...]:
    return tuple(f"{u.where} uses {u.api.api}, which {u.api.framework} removed in {u.api.removed_in} ({u.api.source}): "
                 f"pin {u.api.framework}<{u.api.removed_in} or that call breaks" for u in uses)
