"""Uses of framework APIs that later releases removed (base_images/removed_apis.yaml), found in the
trainer's Python files by their AST (nothing executed): `tf.estimator.X` where `import tensorflow as
tf`, `from tensorflow import estimator`, `import tensorflow.contrib.slim`, `from tensorflow.contrib
import layers`."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import DataError
from .resources import read_data, resource_dir


@dataclass(frozen=True)
class RemovedApi:
    api: str  # dotted name: "tensorflow.estimator"
    framework: str
    removed_in: str
    source: str


@dataclass(frozen=True)
class RemovedUse:
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
    """The removed APIs the sources (path -> text) use, first use of each; unparsable files are skipped
    (the build reports them)."""
    apis = removed_apis() if apis is None else apis
    seen: dict[str, RemovedUse] = {}
    for path, text in sorted(sources.items()):
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for name, line in _used_names(tree):
            for api in apis:
                if (name == api.api or name.startswith(api.api + ".")) and api.api not in seen:
                    seen[api.api] = RemovedUse(api, f"{path}:{line}")
    return tuple(seen.values())


def notes(uses: tuple[RemovedUse, ...]) -> tuple[str, ...]:
    return tuple(f"{u.where} uses {u.api.api}, which {u.api.framework} removed in {u.api.removed_in} ({u.api.source}): "
                 f"pin {u.api.framework}<{u.api.removed_in} or that call breaks" for u in uses)


def directory_uses(directory: Path, limit: int = 2000) -> tuple[RemovedUse, ...]:
    """find_removed() for the trainer's own .py files (hidden and virtual-environment folders skipped)."""
    sources = {}
    # os.walk with the skipped folders pruned, stopped at `limit` files: a huge tree (data, a virtual
    # environment) is never walked to its end.
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("venv", "site-packages", "node_modules"))
        for name in sorted(f for f in files if f.endswith(".py")):
            if len(sources) >= limit:
                return find_removed(sources)
            path = Path(root) / name
            if path.is_symlink() or not path.is_file():
                continue  # a FIFO would block the read; a link may point out of the directory
            try:
                sources[path.relative_to(directory).as_posix()] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
    return find_removed(sources)
