"""The trainer directory's own distribution, as gcloud's `pip install .` installed it: its name, declared
dependencies, version, entry points, requires-python and compiled parts, read from pyproject.toml, setup.cfg and
setup.py without running anything where they state them (else through the PEP 517 metadata hook, in a container); and
what of it the image installs."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..errors import ConfigError, show
from ..fsutil import inside, parse_python, read_text, read_toml
from ..patterns import lazy_pattern
from .given import Given

_NOT_COMPUTED = ("the trainer's dependencies are computed by its setup.py (PEP 517 metadata hook); a dry run runs "
                 "none of the trainer's code, so its metadata was not computed")


def _literal(node: ast.AST | None, names: dict[str, ast.AST], depth: int = 0) -> list[str] | str | None:
    """A list of strings (or a string) that the AST states without running anything: literals, a module-level
    name bound to one, and `+` of those; None for anything computed."""
    if node is None or depth > 8:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_literal(e, names, depth + 1) for e in node.elts]
        return items if all(isinstance(i, str) for i in items) else None  # type: ignore[return-value]
    if isinstance(node, ast.Name):
        return _literal(names.get(node.id), names, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, names, depth + 1), _literal(node.right, names, depth + 1)
        return left + right if isinstance(left, list) and isinstance(right, list) else None
    return None


_UNSET = object()


_SETUP_KEYS = ("name", "install_requires", "version", "entry_points", "python_requires")


def _entry_points(value: Any) -> dict[str, list[str]] | None:
    """Entry points as setuptools takes them (a mapping of group -> entries or an ini text), as group -> entries;
    None for anything else."""
    import configparser

    if isinstance(value, str):
        # Each line whole (its `=` kept), as the option of its group.
        parser = configparser.ConfigParser(interpolation=None, delimiters=("\0",), allow_no_value=True)
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        try:
            parser.read_string(value)
        except configparser.Error:
            return None
        return {g: [e for e in parser[g]] for g in parser.sections()}
    if isinstance(value, dict) and all(isinstance(g, str) for g in value):
        out = {}
        for group, entries in value.items():
            if isinstance(entries, str):
                entries = entries.splitlines()
            if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
                return None
            out[group] = [e.strip() for e in entries if e.strip()]
        return out
    return None


def _setup_py(path: Path) -> dict[str, Any]:
    """name, install_requires, version and entry_points of setup.py's setup() call, read with ast: each a value,
    None when computed, or _UNSET when the call does not pass it."""
    text = read_text(path, "setup.py")
    try:
        tree = parse_python(text, str(path))
    except SyntaxError as exc:
        raise ConfigError(f"setup.py does not parse as Python 3: {exc.msg} (line {exc.lineno}); Python 2 code (which "
                          "AI Platform's runtimes up to 1.15 ran) cannot be read or installed here: port the file to "
                          "Python 3, or remove it and list the trainer's requirements in requirements.txt, or build an "
                          "image of your own Dockerfile (--dockerfile)", where=str(path)) from None
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            names[node.target.id] = node.value
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Name) and n.func.id == "setup") or
        (isinstance(n.func, ast.Attribute) and n.func.attr == "setup"))]
    # Compiled parts: an ext_modules argument, or an extension class or cythonize() called anywhere in the file.
    compiled = next((f"setup.py:{n.lineno} ({_called(n)})" for n in ast.walk(tree) if isinstance(n, ast.Call)
                     and _called(n) in _EXTENSION_CALLS), None)
    compiled = compiled or next((f"setup.py:{k.value.lineno} (ext_modules)" for c in calls for k in c.keywords
                                 if k.arg == "ext_modules"), None)
    if len(calls) != 1 or any(k.arg is None for k in calls[0].keywords):  # setup(**kwargs): only running it tells
        return dict.fromkeys(_SETUP_KEYS) | {"compiled": compiled}
    given = {k.arg: k.value for k in calls[0].keywords}
    found: dict[str, Any] = {"compiled": compiled}
    for key in _SETUP_KEYS:
        node = given.get(key)
        if key not in given:
            found[key] = _UNSET
        elif key == "entry_points":
            found[key] = _entry_points(_literal_map(node, names))
        else:
            value = _literal(node, names)
            found[key] = value if isinstance(value, list if key == "install_requires" else str) else None
    return found


# Calls that make compiled extensions in a setup.py (setuptools, Cython, pybind11, cffi).
_EXTENSION_CALLS = frozenset({"Extension", "cythonize", "Pybind11Extension", "CUDAExtension", "CppExtension"})
# Build backends and build requirements that compile (a pyproject.toml's [build-system]).
_COMPILING_BACKENDS = ("scikit_build_core", "mesonpy", "maturin", "setuptools_rust", "pdm.backend.cython")
_COMPILING_REQUIRES = frozenset({"cython", "pybind11", "scikit-build", "scikit-build-core", "maturin", "meson-python",
                                 "setuptools-rust", "cffi", "nanobind"})


def _called(node: ast.Call) -> str:
    return node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) else ""


def _literal_map(node: ast.AST | None, names: dict[str, ast.AST]) -> Any:
    """A mapping of strings to literals (entry_points={...}), or what _literal reads."""
    if isinstance(node, ast.Name):
        node = names.get(node.id)
    if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
        keys = [_literal(k, names) for k in node.keys]
        return {k: _literal(v, names) for k, v in zip(keys, node.values, strict=True)} \
            if all(isinstance(k, str) for k in keys) else None
    return _literal(node, names)


def _setup_cfg(path: Path) -> tuple[str | None, list[str] | None, Any, Any, tuple[str, str] | None]:
    """(name, install_requires, version, entry_points, python_requires and where) of setup.cfg; install_requires None
    when it is a `file:`
    directive, version None when `attr:` or `file:`; version and entry_points _UNSET when not given."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(read_text(path, "setup.cfg"))
    except configparser.Error as exc:
        line = getattr(exc, "lineno", None)  # configparser's message goes on to quote the line: its first sentence
        said = re.sub(r"^While reading from .*?\]: ", "", str(exc).splitlines()[0])  # the line is in `where`
        raise ConfigError(f"does not parse as an INI file: {said[:300]}",
                          where=f"{path}:{line}" if line else str(path)) from None
    name = parser.get("metadata", "name", fallback=None)
    version: Any = parser.get("metadata", "version", fallback=_UNSET)
    if isinstance(version, str) and version.strip().startswith(("attr:", "file:")):
        version = None
    entry_points: Any = _UNSET
    if parser.has_section("options.entry_points"):
        entry_points = {g: v for g, v in parser.items("options.entry_points")}
        entry_points = None if any(v.strip().startswith("file:") for v in entry_points.values()) \
            else _entry_points(entry_points)
    requires = parser.get("options", "python_requires", fallback=None)
    requires = (requires.strip(), "setup.cfg:[options] python_requires") if requires and requires.strip() else None
    value = parser.get("options", "install_requires", fallback="")
    if value.strip().startswith("file:"):
        return name, None, version, entry_points, requires
    deps = [ln.split(" #", 1)[0].strip() for ln in value.replace(";", "\n;").splitlines()]
    # A marker continues its requirement (`pkg; python_version<"3.9"` may be split by the parser above).
    joined: list[str] = []
    for dep in deps:
        if dep.startswith(";") and joined:
            joined[-1] += dep
        elif dep and not dep.startswith("#"):
            joined.append(dep)
    return name, joined, version, entry_points, requires


def _pyproject(path: Path) -> tuple[str | None, list[str] | None, bool, Any, Any, str | None, tuple[str, str] | None]:
    """(name, [project] dependencies, whether dependencies are dynamic: only the build backend tells, version, entry
    points, where its build compiles, requires-python and where); version and entry points None when dynamic, _UNSET
    when not given."""
    document = read_toml(path, "pyproject.toml")
    project = document.get("project") if isinstance(document.get("project"), dict) else {}
    deps = project.get("dependencies")
    if deps is not None and not (isinstance(deps, list) and all(isinstance(d, str) for d in deps)):
        raise ConfigError(f"[project] dependencies must be a list of strings, not {show(deps)}", where=str(path))
    dynamic = project.get("dynamic") if isinstance(project.get("dynamic"), list) else []
    name = project.get("name") if isinstance(project.get("name"), str) else None
    version = None if "version" in dynamic else project.get("version", _UNSET)
    groups: dict[str, Any] = {"console_scripts": project.get("scripts"), "gui_scripts": project.get("gui-scripts")}
    groups.update(project.get("entry-points") if isinstance(project.get("entry-points"), dict) else {})
    entry_points: Any = _UNSET
    if {"scripts", "gui-scripts", "entry-points"} & set(dynamic):
        entry_points = None
    elif any(v is not None for v in groups.values()):
        tables = {g: v for g, v in groups.items() if v is not None}
        entry_points = _entry_points({g: [f"{k} = {e}" for k, e in v.items()] for g, v in tables.items()}) \
            if all(isinstance(v, dict) and all(isinstance(e, str) for e in v.values()) for v in tables.values()) else None
    requires = project.get("requires-python") if isinstance(project.get("requires-python"), str) else None
    return (name, deps, "dependencies" in dynamic, version, entry_points, _compiling(document.get("build-system")),
            (requires, "pyproject.toml:[project] requires-python") if requires else None)


def _compiling(system: Any) -> str | None:
    """Where a pyproject's [build-system] compiles: a compiling backend or build requirement."""
    if not isinstance(system, dict):
        return None
    backend = system.get("build-backend")
    if isinstance(backend, str) and backend.startswith(_COMPILING_BACKENDS):
        return f"pyproject.toml:[build-system] build-backend {backend}"
    requires = system.get("requires") if isinstance(system.get("requires"), list) else []
    for item in requires:
        try:
            name = canonicalize_name(Requirement(item).name) if isinstance(item, str) else ""
        except InvalidRequirement:
            continue
        if name in _COMPILING_REQUIRES:
            return f"pyproject.toml:[build-system] requires {item}"
    return None


@dataclass(frozen=True)
class Own:
    """The trainer directory's own distribution."""

    name: str | None
    deps: list[tuple[str, str]]  # (requirement, where)
    notes: list[str]
    version: str | None = None  # None: computed by its build, not read
    entry_points: dict[str, list[str]] | None = None  # group -> entries; None: computed by its build, not read
    compiled: str | None = None  # where the package declares compiled parts (setup.py:12 (Extension))
    python_requires: tuple[str, str] | None = None  # (requires-python / python_requires, where)
    metadata: str | None = None  # "computed" (by the metadata hook), "not computed" (a dry run); None: read as written

    @property
    def key(self) -> str | None:
        """The name as distribution names compare (PEP 503)."""
        return canonicalize_name(self.name) if self.name else None


def declared_package(directory: Path, run_hook: bool) -> Own:
    """The trainer's own package: its name, requirements (with where), version and entry points. setup.py and
    setup.cfg are read without running anything where they state them; where the requirements are computed, the
    PEP 517 metadata hook runs, as `pip install .` (what gcloud's autopackaging ran) would, in a container; with
    run_hook False (a dry run) it does not, and `metadata` says so."""
    setup_py, setup_cfg, pyproject = (inside(directory, directory / n, n) for n in ("setup.py", "setup.cfg", "pyproject.toml"))
    name: Any = None
    version: Any = _UNSET
    entry_points: Any = _UNSET
    deps: list[tuple[str, str]] = []
    notes: list[str] = []
    computed = False
    compiled = None
    python_requires = None

    def later(old: Any, new: Any) -> Any:  # a later file's value where it gives one (setup.py wins, as setuptools)
        return old if new is _UNSET else new

    if pyproject.is_file():
        pname, pdeps, dynamic, version, entry_points, compiled, python_requires = _pyproject(pyproject)
        name = pname
        deps = [(d, f"pyproject.toml:[project] dependencies[{i}]") for i, d in enumerate(pdeps or [])]
        computed = dynamic and not setup_py.is_file() and not setup_cfg.is_file()
    if setup_cfg.is_file():
        cname, cdeps, cversion, centry, crequires = _setup_cfg(setup_cfg)
        python_requires = crequires or python_requires
        name = name or cname
        version, entry_points = later(version, cversion), later(entry_points, centry)
        if cdeps is None:
            computed = True
        elif cdeps:
            deps = [(d, f"setup.cfg:[options] install_requires[{i}]") for i, d in enumerate(cdeps)]
    if setup_py.is_file():
        found = _setup_py(setup_py)
        sname, sdeps = found["name"], found["install_requires"]
        compiled = compiled or found["compiled"]
        if isinstance(found["python_requires"], str):
            python_requires = (found["python_requires"], "setup.py:python_requires")
        version, entry_points = later(version, found["version"]), later(entry_points, found["entry_points"])
        if isinstance(sname, str):
            name = sname
        if sdeps is None or (sname is None and not name):
            computed = True
        elif sdeps is not _UNSET:
            deps = [(d, f"setup.py:install_requires[{i}]") for i, d in enumerate(sdeps)]
    if computed and not run_hook:
        # A dry run runs nothing of the trainer: its computed requirements, version and entry points stay unknown.
        notes.append(f"{_NOT_COMPUTED}: the plan assumes the requirements the trainer states elsewhere (requirements "
                     "file, imports) and none of its own; a run without --dry-run reads them in a container")
        return Own(name if isinstance(name, str) and name else None, [], notes, None, None, compiled, python_requires,
                   metadata="not computed")
    if computed:
        # up: computed metadata is what the trainer's own build backend says, run as packaging runs it
        from ..pipeline.backend import declared_metadata

        meta = declared_metadata(directory)
        name, version, entry_points = meta.name, meta.version, _entry_points(meta.entry_points)
        deps = [(d, f"metadata hook (prepare_metadata_for_build_wheel):Requires-Dist[{i}]")
                for i, d in enumerate(meta.requires)]
        notes.append("the trainer's dependencies are computed by its build: read through the PEP 517 metadata hook "
                     "in a container without network that holds only a copy of the trainer's files (nothing of it runs "
                     "here or in the image)")
    return Own(name if isinstance(name, str) and name else None, deps, notes,
               version if isinstance(version, str) and version else None,
               {} if entry_points is _UNSET else entry_points if isinstance(entry_points, dict) else None, compiled,
               python_requires, "computed" if computed else None)


@dataclass(frozen=True)
class Installed:
    """What the image installs of the trainer's own distribution: the notes and the config keys."""

    notes: tuple[str, ...]
    overrides: tuple[tuple[str, Any], ...]


def installed_package(found: Own, given: Given) -> Installed:
    """Its metadata installed before the code layer (trainer_package), and its compiled parts built
    (build_extensions), where the config leaves those unset."""
    notes: list[str] = []
    overrides: dict[str, Any] = {}
    if found.name:
        notes.append(_own_package(found, given, overrides))
    if found.compiled and "build_extensions" not in given:
        overrides["build_extensions"] = True
        notes.append(f"the trainer package has compiled parts ({found.compiled}): copying its source cannot work, so "
                     "they are built as `pip install .` builds them, in a stage of their own (build_extensions: true), "
                     "and the compiled modules are copied beside its code; a code edit takes the full build, which "
                     "rebuilds them")
    return Installed(tuple(notes), tuple(overrides.items()))


def _own_package(found: Own, given: Given, overrides: dict[str, Any]) -> str:
    """What becomes of the trainer's own distribution where gcloud ran `pip install .`: its declared dependencies are
    installed, its code is the copied code on PYTHONPATH, and its metadata (dist-info, entry points, console scripts)
    is installed before the code layer (`trainer_package`) where its version and entry points are read; the note."""
    said = (f"the trainer directory is the package {show(found.name)}: where gcloud ran `pip install .`, its declared "
            "dependencies are installed and its code is copied into the image, importable on PYTHONPATH")
    if "trainer_package" in given:
        return f"{said}; trainer_package ({given.where['trainer_package']}) says what is installed of its metadata"
    if found.metadata == "not computed":
        return f"{said}; its metadata was not computed (dry run): the plan assumes the package itself is not installed"
    missing = [what for what, value in (("version", found.version), ("entry points", found.entry_points))
               if value is None]
    if missing:
        return (f"{said}; its {' and '.join(missing)} are computed by its build and were not read, so the package itself "
                "is not installed (importlib.metadata does not find it, no console scripts): state them in setup.py, "
                "setup.cfg or pyproject.toml, or set trainer_package")
    name, version = _setuptools_name(found.name), _setuptools_version(found.version)
    if name is None or version is None:
        return (f"{said}; its metadata ({show(found.name)} {show(found.version)}) is not a name and version setuptools "
                "can normalise, so the package itself is not installed (importlib.metadata does not find it): fix them in "
                "setup.py, setup.cfg or pyproject.toml, or set trainer_package")
    normalised = [f"{what} {show(old)} as {show(new)}" for what, old, new in
                  (("name", found.name, name), ("version", found.version, version)) if old != new]
    groups = found.entry_points or {}
    value = {"name": name, "version": version, "entry_points": groups}
    overrides["trainer_package"] = value
    scripts = [e.partition("=")[0].strip() for g in ("console_scripts", "gui_scripts") for e in groups.get(g, ())]
    said += (f"; setuptools installs its {' and '.join(normalised)} (its normalisation of what PEP 440 and PEP 508 "
             "do not allow), and so does buildkit-py" if normalised else "")
    return (f"{said}; its metadata ({name} {version}"
            + (f", entry points: {', '.join(groups)}" if groups else "")
            + (f", console scripts: {', '.join(scripts)}" if scripts else "")
            + ") is installed before the code layer, so importlib.metadata finds it and a code edit stays one layer")


# setuptools' own normalisation (setuptools._normalization, 66+): `pip install .` installs a package whose setup() says
# version="UNVERSIONED" or name="my package" under these, with a warning, so they never refuse a build here.
_UNSAFE_NAME = lazy_pattern(r"[^A-Za-z0-9._-]+", re.ASCII)
_VERSION_HEAD = lazy_pattern(r"^v?((?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*)", re.ASCII | re.IGNORECASE)
_NON_ALNUM = lazy_pattern(r"[^A-Za-z0-9]+", re.ASCII)


def _setuptools_name(name: str) -> str | None:
    from ..config.trainer import _DIST_NAME

    safe = _UNSAFE_NAME.sub("-", name.strip())
    return safe if _DIST_NAME.fullmatch(safe) else None


def _setuptools_version(version: str) -> str | None:
    """setuptools' best_effort_version: the version as PEP 440 normalises it, else its numeric head (or 0) as a
    dev release with the rest as a local label: "UNVERSIONED" -> "0.dev0+sanitized.unversioned"."""
    from packaging.version import InvalidVersion

    text = version.strip().replace(" ", ".")
    for attempt in (text, _UNSAFE_NAME.sub("-", text)):
        try:
            return str(Version(attempt))
        except InvalidVersion:
            pass
    head = _VERSION_HEAD.search(text)
    safe, rest = (head.group(1), text[head.end():]) if head else ("0", text)
    local = f"sanitized.{_NON_ALNUM.sub('.', rest).strip('.')}".strip(".")
    try:
        found = str(Version(f"{safe}.dev0+{local}"))
    except InvalidVersion:
        return None
    return found if len(found) <= 64 else None  # the longest version trainer_package takes
