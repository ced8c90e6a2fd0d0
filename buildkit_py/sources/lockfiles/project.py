"""The project files a lock was made from (pyproject.toml's [project] or Poetry's table, Pipfile's [packages]),
read as requirements, and a lock that no longer matches them refused as stale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ...errors import ConfigError, StaleLockError, show
from ..requirements import parse_problem
from .common import _toml


def _project_dependencies(root: Path) -> tuple[list[Requirement], str] | None:
    """The dependencies pyproject.toml declares ([project], else Poetry's table), and where."""
    path = root / "pyproject.toml"
    if not path.is_file():
        return None
    data, _ = _toml(path, "pyproject.toml")
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    declared = project.get("dependencies")
    if isinstance(declared, list):
        return _requirements(declared, "pyproject.toml [project] dependencies"), "pyproject.toml [project] dependencies"
    poetry = (data.get("tool") or {}).get("poetry") if isinstance(data.get("tool"), dict) else None
    if isinstance(poetry, dict) and isinstance(poetry.get("dependencies"), dict):
        where = "pyproject.toml [tool.poetry.dependencies]"
        return _table_requirements(poetry["dependencies"], where), where
    return None


def _declared_sets(root: Path) -> dict[str, set[tuple[str, str]]] | None:
    """Each set of requirements pyproject.toml's [project] declares, as a lock records them: "" for the dependencies,
    "extra:NAME" for each optional-dependencies extra, "group:NAME" for each dependency group (PEP 735); (name,
    specifier) pairs. None: no [project] dependencies."""
    path = root / "pyproject.toml"
    if not path.is_file():
        return None
    data, _ = _toml(path, "pyproject.toml")
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    if not isinstance(project.get("dependencies"), list):
        return None

    def pairs(values: Any, where: str) -> set[tuple[str, str]]:
        items = [v for v in values if isinstance(v, str)] if isinstance(values, list) else []  # include-group: tables
        return {(canonicalize_name(r.name), str(r.specifier)) for r in _requirements(items, where)}

    sets = {"": pairs(project["dependencies"], "pyproject.toml [project] dependencies")}
    optional = project.get("optional-dependencies")
    for extra, values in (optional.items() if isinstance(optional, dict) else ()):
        sets[f"extra:{canonicalize_name(str(extra))}"] = pairs(values, f"pyproject.toml optional-dependencies.{extra}")
    groups = data.get("dependency-groups")
    for group, values in (groups.items() if isinstance(groups, dict) else ()):
        sets[f"group:{canonicalize_name(str(group))}"] = pairs(values, f"pyproject.toml dependency-groups.{group}")
    return sets


def _requirements(values: list[Any], where: str) -> list[Requirement]:
    out = []
    for value in values:
        try:
            out.append(Requirement(str(value)))
        except InvalidRequirement as exc:
            raise ConfigError(f"{where}: {show(value)} is not a requirement ({parse_problem(exc)})") from None
    return out


def _table_requirements(table: dict, where: str) -> list[Requirement]:
    """Poetry's and Pipenv's `name = "spec"` tables as requirements: the name always, the specifier where it is one
    PEP 440 reads (Poetry's ^ and ~ ranges are not: only the name is held against the lock)."""
    out = []
    for name, spec in table.items():
        if canonicalize_name(str(name)) == "python":
            continue
        text = spec if isinstance(spec, str) else spec.get("version", "*") if isinstance(spec, dict) else "*"
        try:
            specifier = "" if text in ("*", "") else str(SpecifierSet(str(text)))
        except InvalidSpecifier:
            specifier = ""
        try:
            out.append(Requirement(f"{name}{specifier}"))
        except InvalidRequirement:
            raise ConfigError(f"{where}: {show(name)} is not a distribution name") from None
    return out


def _unmatched(declared: list[Requirement], locked: dict[str, list[str]]) -> list[str]:
    """What the project declares that the lock does not hold: a name it lacks, or a release outside the range."""
    found = []
    for requirement in declared:
        versions = locked.get(canonicalize_name(requirement.name))
        if not versions:
            found.append(f"{requirement} is not in it")
        elif requirement.specifier and not any(_contains(requirement.specifier, v) for v in versions):
            found.append(f"{requirement} is locked at {', '.join(versions)}")
    return found


def _contains(specifier: SpecifierSet, version: str) -> bool:
    try:
        return specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return True  # a URL or git: held by name only


def _refuse_stale(shown: str, project: str, problems: list[str], fix: str) -> None:
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise StaleLockError(f"{shown} does not match {project}: {'; '.join(problems[:3])}{more}; {fix}, or set "
                          "requirements: to another file")
