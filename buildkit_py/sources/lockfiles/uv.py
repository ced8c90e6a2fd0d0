"""uv.lock: its dependency graph walked from the project, with the extras and dependency groups asked for, to the
packages the image installs; the lock held against pyproject.toml as `uv lock --check` does."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from ...errors import ConfigError, show
from ...patterns import lazy_pattern
from .common import _EXTRA_TEST, Locked, _applies, _direct, _hashes, _lines_of, _name, _table, _tables, _text, _toml, _version
from .project import _declared_sets, _refuse_stale

_PYPI = lazy_pattern(r"https?://(?:pypi\.org|pypi\.python\.org)/simple/?", re.ASCII)


def _uv(root: Path, name: str, env: dict[str, str], extras: tuple[str, ...] = (),
        groups: tuple[str, ...] = ()) -> list[Locked]:
    data, text = _toml(root / name, name)
    packages = _tables(data.get("package"), name, "[[package]]")
    if not packages:
        raise ConfigError(f"{name}: no [[package]] tables: not a uv lock")
    where = {i: f"{name}:{n}" for i, (n, _) in enumerate(_lines_of(text, "package"))}
    names = [canonicalize_name(_name(p.get("name"), where.get(i, name))) for i, p in enumerate(packages)]
    sources = [_table(p.get("source", {}), where.get(i, name), "source") for i, p in enumerate(packages)]
    roots = [i for i, source in enumerate(sources) if source.get("editable") == "." or source.get("virtual") == "."]
    if not roots:
        raise ConfigError(f"{name}: no package of the project itself (source editable or virtual \".\"): the lock was "
                          "not made for this directory")
    at = where.get(roots[0], name)
    project = names[roots[0]]
    _check_uv_metadata(root, name, at, _table(packages[roots[0]].get("metadata", {}), at, "metadata"))
    wanted_extras = tuple(canonicalize_name(e) for e in extras)
    wanted_groups = tuple(canonicalize_name(g) for g in groups)
    # The extras and groups in force, as uv's markers name them: plain, and as its conflict sets encode them
    # (extra-<length of the project's name>-<project>-<extra>).
    chosen_markers = frozenset([*wanted_extras, *(f"extra-{len(project)}-{project}-{e}" for e in wanted_extras),
                                *(f"group-{len(project)}-{project}-{g}" for g in wanted_groups)])
    root_package = packages[roots[0]]
    optional = _table(root_package.get("optional-dependencies", {}), at, "optional-dependencies")
    development = {canonicalize_name(k): v for k, v in
                   _table(root_package.get("dev-dependencies", {}), at, "dev-dependencies").items()}
    for kind, asked, table in (("extra", wanted_extras, optional), ("dependency group", wanted_groups, development)):
        known = {canonicalize_name(k) for k in table}
        missing = [a for a in asked if a not in known]
        if missing:
            raise ConfigError(f"{name}: the project has no {kind} {show(missing[0])} in the lock; it has "
                              f"{', '.join(sorted(known)) or 'none'}", field="requirements_extras" if kind == "extra"
                              else "requirements_groups")
    chosen: set[int] = set()
    todo: list[tuple[int, tuple[str, ...]]] = [(i, wanted_extras) for i in roots]
    seen: set[tuple[int, tuple[str, ...]]] = set()
    group_edges = [e for g in wanted_groups for e in _tables(development.get(g), at, f"dev-dependencies.{g}")]
    while todo:
        index, asked = todo.pop()
        if (index, asked) in seen:
            continue
        seen.add((index, asked))
        if index not in roots:
            chosen.add(index)
        at = where.get(index, name)
        package = packages[index]
        edges = list(_tables(package.get("dependencies"), at, "dependencies"))
        optional = {canonicalize_name(k): v for k, v in
                    _table(package.get("optional-dependencies", {}), at, "optional-dependencies").items()}
        for extra in asked:
            edges += _tables(optional.get(canonicalize_name(extra)), at, f"optional-dependencies.{extra}")
        if index == roots[0]:  # the project's dependency groups in force
            edges += group_edges
        for edge in edges:
            if not _applies(edge.get("marker"), env, at, chosen=chosen_markers):
                continue
            candidate = _locked_candidate(edge, packages, names, sources, env, chosen_markers, at)
            extra = edge.get("extra") or []
            if not isinstance(extra, list) or not all(isinstance(e, str) for e in extra):
                raise ConfigError(f"{at}: the extras of {show(edge.get('name'))} must be a list of names")
            todo.append((candidate, tuple(extra)))
    return [_uv_package(packages[index], sources[index], where.get(index, name)) for index in sorted(chosen)]


def _uv_package(package: dict, source: dict, at: str) -> Locked:
    """One chosen [[package]] of a uv lock: its version, hashes and where it comes from (an index, a URL, git)."""
    version = _version(package.get("version"), at)
    files = ([_table(package["sdist"], at, "sdist")] if "sdist" in package else []) + \
        _tables(package.get("wheels"), at, "wheels")
    hashes = _hashes([f["hash"] for f in files if "hash" in f], at)
    pkg = _name(package.get("name"), at)
    if "git" in source:
        url, _, commit = _text(source["git"], at, "source.git").partition("#")
        return Locked(pkg, version, (), _direct(f"git+{url.split('?')[0]}@{commit}", at), at)
    if "url" in source:
        return Locked(pkg, version, hashes, _direct(_text(source["url"], at, "source.url"), at), at)
    if "registry" in source:
        registry = _text(source["registry"], at, "source.registry")
        return Locked(pkg, version, hashes, None, at, None if _PYPI.fullmatch(registry) else _direct(registry, at))
    raise ConfigError(f"{at}: {pkg} comes from {show(source)}, a local path the image cannot install from the "
                      "lock; publish it to an index, or make it part of the trainer directory")


def _locked_candidate(edge: dict, packages: list[dict], names: list[str], sources: list[dict], env: dict[str, str],
                      chosen: frozenset[str], at: str) -> int:
    """The locked package an edge names: by name, and by version and source where the lock holds several (a fork:
    one package locked at several versions or from several indexes, for different markers); the one whose
    resolution-markers hold for the image where the edge leaves it open."""
    wanted = canonicalize_name(_name(edge.get("name"), at))
    candidates = [i for i, n in enumerate(names) if n == wanted and
                  ("version" not in edge or str(packages[i].get("version")) == str(edge["version"])) and
                  ("source" not in edge or sources[i] == edge["source"])]
    if len(candidates) > 1:
        fitting = [i for i in candidates if any(_applies(m, env, at, chosen=chosen) for m in
                                                (packages[i].get("resolution-markers") or [""]))]
        candidates = fitting if len(fitting) == 1 else candidates
    if len(candidates) != 1:
        raise ConfigError(f"{at}: the dependency {show(edge.get('name'))} names "
                          f"{'no' if not candidates else 'more than one'} locked package: run `uv lock`")
    return candidates[0]


def _check_uv_metadata(root: Path, name: str, at: str, metadata: dict) -> None:
    """What `uv lock --check` holds: the project's requirements, each extra's and each dependency group's, as the lock
    recorded them; a lock is stale only where a declared set differs."""
    declared = _declared_sets(root)
    if declared is None:
        return
    recorded: dict[str, set[tuple[str, str]]] = {"": set()}

    def entry(item: Any, where: str) -> tuple[str, str, Any]:
        table = _table(item, where, "requirement")
        specifier = table.get("specifier") or ""
        try:
            return canonicalize_name(_name(table.get("name"), where)), str(SpecifierSet(str(specifier))), table.get("marker")
        except InvalidSpecifier:
            raise ConfigError(f"{where}: requires-dist specifier {show(specifier)} is not PEP 440") from None

    for item in _tables(metadata.get("requires-dist"), at, "metadata.requires-dist"):
        n, spec, marker = entry(item, at)
        extras = {canonicalize_name(m.group(3)) for m in _EXTRA_TEST.finditer(str(marker or "")) if m.group(1) == "=="}
        for key in ([f"extra:{e}" for e in extras] or [""]):
            recorded.setdefault(key, set()).add((n, spec))
    for group, items in _table(metadata.get("requires-dev", {}), at, "metadata.requires-dev").items():
        for item in _tables(items, at, f"metadata.requires-dev.{group}"):
            n, spec, _ = entry(item, at)
            recorded.setdefault(f"group:{canonicalize_name(str(group))}", set()).add((n, spec))
    problems = []
    for key in sorted(set(declared) | set(recorded)):
        now, then = declared.get(key, set()), recorded.get(key, set())
        if key.startswith("group:") and "requires-dev" not in metadata:
            continue  # a lock written before uv recorded groups: nothing to hold them against
        label = f" ({key.replace(':', ' ')})" if key else ""
        problems += [f"{n}{spec} is declared{label}, the lock has {_recorded(n, then)}" for n, spec in sorted(now - then)]
        problems += [f"the lock has {n}{spec}{label}, no longer declared" for n, spec in sorted(then - now)
                     if n not in {m for m, _ in now}]
    _refuse_stale(name, "pyproject.toml [project] dependencies", problems, "run `uv lock`")


def _recorded(name: str, recorded: set[tuple[str, str]]) -> str:
    found = [f"{n}{s}" for n, s in sorted(recorded) if n == name]
    return ", ".join(found) if found else "no such requirement"
