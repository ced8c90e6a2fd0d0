"""Lock files other tools write, taken as the image's requirements: uv.lock, pylock.toml (PEP 751), poetry.lock and
Pipfile.lock. Each becomes hash-pinned requirement lines of the packages it locks for the image's Python and platform
(markers evaluated here; uv.lock's dependency graph walked from the project), so the image installs exactly the locked
releases. A lock is first held against the project file it was made from (pyproject.toml, Pipfile): one that no longer
matches it is named, never used. Nothing is run and nothing is fetched."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import ConfigError, StaleLockError, show
from ..fsutil import consult, inside, kept_text, parse_toml
from ..patterns import lazy_pattern
from .pip_config import without_credentials
from .requirements import parse_problem

# The names each tool writes, in the order autopackage prefers them when a directory has several.
LOCK_FILES = ("uv.lock", "pylock.toml", "poetry.lock", "Pipfile.lock")
_PYLOCK = lazy_pattern(r"pylock\.[^./\\]+\.toml", re.ASCII)  # PEP 751's named locks: pylock.<name>.toml
_HASH = lazy_pattern(r"sha256:[0-9a-f]{64}", re.ASCII)
_PYPI = lazy_pattern(r"https?://(?:pypi\.org|pypi\.python\.org)/simple/?", re.ASCII)
_MACHINES = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}
CONTEXT_FILE = ".buildkit-py/requirements-locked.txt"  # the exported lines' place in the build context


def is_lock_file(name: str) -> bool:
    base = PurePosixPath(name).name
    return base in LOCK_FILES or bool(_PYLOCK.fullmatch(base))


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


@dataclass(frozen=True)
class Exported:
    """A lock file's packages for one image: the requirement lines, where they are in the build context and on this
    machine, and (requirement, where) of each for messages."""

    origin: str  # the lock file, relative to the trainer directory
    context: str  # CONTEXT_FILE
    source: Path  # the exported file on this machine (named by its content)
    pins: tuple[tuple[str, str], ...]  # ("torch==2.5.1", "uv.lock:88")


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


# -- the formats --------------------------------------------------------------------------------------------------


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


def _direct(url: str, where: str) -> str:
    """A URL or VCS reference for `NAME @ URL`: one word, nothing a requirements file would read as an option."""
    if not re.fullmatch(r"(?:git\+)?(?:https?|ssh|file)://[^\s\\#]+", url, re.ASCII):
        raise ConfigError(f"{where}: {show(url)} is not a URL the image can install from")
    if without_credentials(url) != url:  # the exported lines are a file of the build context, copied into a layer
        raise ConfigError(f"{where}: a URL with credentials (not shown); the lock's packages are installed from a "
                          "file copied into the image, where anyone who pulls it reads them: keep the login out of the "
                          "lock and give it as pip_index_url or pip_conf (the build passes them as secrets)")
    return url


def _pylock(root: Path, name: str, env: dict[str, str]) -> list[Locked]:
    data, text = _toml(root / name, name)
    packages = _tables(data.get("packages"), name, "[[packages]]")
    if "lock-version" not in data:
        raise ConfigError(f"{name}: no lock-version: not a PEP 751 lock")
    where = {i: f"{name}:{n}" for i, (n, _) in enumerate(_lines_of(text, "packages"))}
    out = []
    for index, package in enumerate(packages):
        at = where.get(index, name)
        if not _applies(package.get("marker"), env, at, "lock_file"):
            continue
        pkg = _name(package.get("name"), at)
        if "directory" in package:
            directory = _table(package["directory"], at, "directory")
            if str(directory.get("path", "")).strip("/") in ("", "."):
                continue  # the project itself: its code is copied, its metadata installed by trainer_package
            raise ConfigError(f"{at}: {pkg} comes from the directory {show(directory.get('path'))}, which the image "
                              "cannot install from the lock")
        version = _version(package["version"], at) if "version" in package else ""
        files = ([_table(package["sdist"], at, "sdist")] if "sdist" in package else []) + \
            _tables(package.get("wheels"), at, "wheels")
        digests = [_table(f.get("hashes", {}), at, "hashes") for f in files]
        hashes = _hashes([f"sha256:{d['sha256']}" for d in digests if "sha256" in d], at)
        if "vcs" in package:
            vcs = _table(package["vcs"], at, "vcs")
            kind, url = _text(vcs.get("type", "git"), at, "vcs.type"), _text(vcs.get("url"), at, "vcs.url")
            commit = _text(vcs.get("commit-id"), at, "vcs.commit-id")
            out.append(Locked(pkg, version, (), _direct(f"{kind}+{url}@{commit}", at), at))
        elif "archive" in package:
            archive = _table(package["archive"], at, "archive")
            digest = _table(archive.get("hashes", {}), at, "archive.hashes")
            out.append(Locked(pkg, version, _hashes([f"sha256:{digest['sha256']}"] if "sha256" in digest else [], at),
                              _direct(_text(archive.get("url"), at, "archive.url"), at), at))
        elif not version:
            raise ConfigError(f"{at}: {pkg} has no version")
        else:
            out.append(Locked(pkg, version, hashes, None, at))
    return out


def _poetry(root: Path, name: str, env: dict[str, str], extras: tuple[str, ...] = (),
            groups: tuple[str, ...] = ()) -> list[Locked]:
    data, text = _toml(root / name, name)
    packages = _tables(data.get("package"), name, "[[package]]")
    _table(data.get("metadata"), name, "[metadata]")
    where = {i: f"{name}:{n}" for i, (n, _) in enumerate(_lines_of(text, "package"))}
    # An extra installs the optional packages the lock's [extras] table names for it ("torch (>=2.0)": the name first).
    table = {canonicalize_name(str(k)): v for k, v in _table(data.get("extras", {}), name, "[extras]").items()}
    for extra in extras:
        if canonicalize_name(extra) not in table:
            raise ConfigError(f"{name}: the project has no extra {show(extra)} in the lock; it has "
                              f"{', '.join(sorted(table)) or 'none'}", field="requirements_extras")
    optional_in = {canonicalize_name(str(item).split()[0]) for extra in extras
                   for item in (table.get(canonicalize_name(extra)) or []) if str(item).strip()}
    in_force = {"main", *groups}
    out = []
    locked: dict[str, list[str]] = {}
    for index, package in enumerate(packages):
        at = where.get(index, name)
        pkg = _name(package.get("name"), at)
        version = _version(package.get("version"), at)
        locked.setdefault(canonicalize_name(pkg), []).append(version)
        package_groups = package.get("groups", [package.get("category", "main")])
        if not isinstance(package_groups, list) or not in_force & set(map(str, package_groups)):
            continue  # a dev/test group not installed: not the trainer's runtime
        if package.get("optional") is True and canonicalize_name(pkg) not in optional_in:
            continue  # an extra not installed
        markers = package.get("markers")
        if isinstance(markers, dict):  # per group: the package applies where one group in force says so
            said = [markers.get(g) for g in in_force if g in markers] or [None]
            if not any(_applies(m, env, at) for m in said):
                continue
        elif not _applies(markers, env, at):
            continue
        source = _table(package.get("source", {}), at, "source")
        hashes = _hashes([f["hash"] for f in _tables(package.get("files"), at, "files") if "hash" in f], at)
        kind = source.get("type")
        if kind == "git":
            commit = _text(source.get("resolved_reference") or source.get("reference"), at, "source.resolved_reference")
            out.append(Locked(pkg, version, (), _direct(f"git+{_text(source.get('url'), at, 'source.url')}@{commit}", at),
                              at))
        elif kind == "url":
            out.append(Locked(pkg, version, hashes, _direct(_text(source.get("url"), at, "source.url"), at), at))
        elif kind in ("directory", "file"):
            if str(source.get("url", "")).strip("/") in ("", "."):
                continue
            raise ConfigError(f"{at}: {pkg} comes from the {kind} {show(source.get('url'))}, which the image cannot "
                              "install from the lock")
        else:  # PyPI, or a source (index) the project names: pip_conf/pip_index_url give the image that index
            out.append(Locked(pkg, version, hashes, None, at))
    declared = _project_dependencies(root)
    if declared is not None:
        _refuse_stale(name, declared[1], _unmatched(declared[0], locked), "run `poetry lock`")
    return out


def _pipenv(root: Path, name: str, env: dict[str, str]) -> list[Locked]:
    path = root / name
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}: cannot be read ({exc})") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ConfigError(f"{name}: not JSON ({exc})") from None
    default = _table(_table(data, name, "the file").get("default"), name, '"default"')
    lines = text.splitlines()
    out = []
    locked: dict[str, list[str]] = {}
    for pkg, entry in default.items():
        number = next((n for n, line in enumerate(lines, 1) if line.strip().startswith(json.dumps(pkg) + ":")), 0)
        at = f"{name}:{number}" if number else name
        pkg = _name(pkg, at)
        entry = _table(entry, at, pkg)
        pinned = entry.get("version")
        if pinned is not None and not (isinstance(pinned, str) and pinned.startswith("==")):
            raise ConfigError(f"{at}: {pkg} has no ==version: {show(pinned)}")
        version = _version(pinned[2:], at) if pinned else ""
        locked.setdefault(canonicalize_name(pkg), []).append(version or "(a URL or git)")
        if not _applies(entry.get("markers"), env, at):
            continue
        if entry.get("path") is not None or entry.get("editable"):
            if str(entry.get("path", "")).strip("/") in ("", "."):
                continue
            raise ConfigError(f"{at}: {pkg} comes from the path {show(entry.get('path'))}, which the image cannot "
                              "install from the lock")
        hashes_given = entry.get("hashes") or []
        if not isinstance(hashes_given, list):
            raise ConfigError(f"{at}: hashes must be a list, got {show(hashes_given)}")
        hashes = _hashes(hashes_given, at)
        if entry.get("git"):
            ref = _text(entry.get("ref"), at, "ref")
            out.append(Locked(pkg, version, (), _direct(f"git+{_text(entry['git'], at, 'git')}@{ref}", at), at))
        elif entry.get("file"):
            out.append(Locked(pkg, version, hashes, _direct(_text(entry["file"], at, "file"), at), at))
        elif not version:
            raise ConfigError(f"{at}: {pkg} has no ==version")
        else:
            out.append(Locked(pkg, version, hashes, None, at))
    pipfile = root / "Pipfile"
    if pipfile.is_file():
        declared, _ = _toml(pipfile, "Pipfile")
        packages = _table(declared.get("packages", {}), "Pipfile", "[packages]")
        problems = _unmatched(_table_requirements(packages, "Pipfile [packages]"), locked)
        _refuse_stale(name, "Pipfile", problems, "run `pipenv lock`")
    return out


_READERS = {"uv.lock": _uv, "poetry.lock": _poetry, "Pipfile.lock": _pipenv}


def locked(root: Path, name: str, python: str, platform: str, extras: tuple[str, ...] = (),
           groups: tuple[str, ...] = ()) -> list[Locked]:
    """The distributions the lock file `name` (relative to root) installs on CPython `python` for `platform`, with the
    project's `extras` and dependency `groups` (uv.lock, poetry.lock)."""
    consult(root / name)
    base = PurePosixPath(name).name
    reader = _READERS.get(base, _pylock)
    folder = (root / name).parent  # its project file is beside it
    for read in (base, "pyproject.toml", "Pipfile"):  # what a reader opens: inside the trainer directory
        inside(root, folder / read, read)
    if reader in (_uv, _poetry):
        return reader(folder, base, environment(python, platform), extras, groups)
    if extras or groups:
        raise ConfigError(f"{name}: requirements_extras and requirements_groups choose what a uv.lock or poetry.lock "
                          f"installs; {base} holds one set", field="requirements_extras" if extras else
                          "requirements_groups")
    return reader(folder, base, environment(python, platform))


def export(root: Path, name: str, python: str, platform: str, extras: tuple[str, ...] = (),
           groups: tuple[str, ...] = ()) -> Exported:
    """The lock's packages for the image as a requirements file (hash-pinned), kept under its content."""
    found = locked(root, name, python, platform, extras, groups)
    # The indexes the lock took packages from beside PyPI (PyTorch's cu126 for torch==2.6.0+cu126): the install reads
    # them as the lock's resolver did.
    indexes = "".join(f"--extra-index-url {u}\n" for u in dict.fromkeys(p.index for p in found if p.index))
    text = f"# {name}: the packages it locks for Python {python} ({platform}), exported by buildkit-py\n" + \
        indexes + "".join(p.line + "\n" for p in found)
    path = kept_text("locks", text, ".txt")
    return Exported(name, CONTEXT_FILE, path, tuple((p.requirement, p.where) for p in found))


def found_in(directory: Path) -> str | None:
    """The lock file of a trainer directory, in LOCK_FILES order (then pylock.<name>.toml)."""
    for name in LOCK_FILES:
        if (directory / name).is_file() and not (directory / name).is_symlink():
            return name
    named = sorted(p.name for p in directory.glob("pylock.*.toml") if _PYLOCK.fullmatch(p.name) and p.is_file())
    return named[0] if named else None
