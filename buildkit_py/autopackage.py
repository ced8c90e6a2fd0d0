"""autopackage: from a trainer directory, with or without a buildkit.yaml, to a running job.

What a config file does not say is inferred from the directory (the module or script, the
requirements, the framework pin found in them); flags still win over both.
"""

from __future__ import annotations

import ast
import json
import keyword
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from .api_usage import notes as removed_notes
from .api_usage import removed_uses
from .config import bad_character, find_config, load_raw
from .errors import ConfigError, mask_credentials, show, shown_name
from .fsutil import PYTHON_NESTING, inside, parse_python, read_text, read_toml, too_deep
from .imports import Needed, closure, import_names, statements
from .lockfiles import found_in, is_lock_file, locked
from .matrix import Framework, Matrix, gpu_python, load_matrix, usable_python, version_key
from .requirements_file import local_path

if TYPE_CHECKING:
    from .entrypoints import Declared

# Where a trainer is looked for, in order: Vertex AI's package layout, a lone script at the top, then
# a script in one folder (trainer/train.py without __init__.py: run as a script, its folder first on
# sys.path, as `python trainer/train.py` runs it).
PACKAGE_TASK = "task.py"
SCRIPTS = ("task.py", "train.py", "main.py")
REQUIREMENTS = "requirements.txt"
_MODULE_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
# The framework that decides the base when several are declared: the frameworks whose GPU builds fix the
# CUDA base first, the one a trainer trains with before those listed beside it for helpers (metrics,
# tf.data or TensorBoard beside torch, a boosting baseline, scikit-learn's metrics); frameworks not
# listed follow by name. The others stay plain requirements, installed from the index as declared.
FRAMEWORK_ORDER = ("torch", "tensorflow", "jax", "xgboost", "scikit-learn")
# pip's per-requirement options, after the requirement on the same line.
_PER_REQUIREMENT = re.compile(r"\s+--(?:hash|config-settings|global-option|install-option)(?:=|\s).*$")
_SELF = {".", "./", "file:.", "file:./"}
# PyPI's own simple index, which requirements files of AI Platform's samples name beside `-e .`: the image's
# installer uses it anyway, so the option says nothing (pypi.python.org redirects to pypi.org).
_PYPI_INDEX = re.compile(r"https?://pypi\.(?:python\.)?org/simple/?", re.ASCII | re.IGNORECASE)
_SELF_EXTRAS = re.compile(r"(?:file:)?\./?\[[^\]]*\]")
_TEST_FILE = re.compile(r"(?:^|/)(?:tests?/|conftest\.py$|test_[^/]*\.py$|[^/]*_test\.py$)")
MAX_REQUIREMENT = 4096  # characters of one requirement line; longer is not a requirement (URLs with hashes fit)
_DOCKERFILE_NAME = re.compile(r"(?:Dockerfile|dockerfile|Containerfile)(?:\.[\w.-]+)?|[\w.-]+\.(?:Dockerfile|dockerfile)", re.ASCII)
_MAIN_GUARD = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", re.MULTILINE)
MAX_SCANNED = 2000  # .py files read for imports; a bigger tree is not a trainer


@dataclass(frozen=True)
class Source:
    """One requirement autopackage found, and where: requirements.txt:3, setup.py:install_requires[2],
    setup.cfg:[options] install_requires[0], pyproject.toml:[project] dependencies[1], the metadata hook's
    Requires-Dist, or an import (`import pandas` in train.py:4)."""

    requirement: str
    source: str

    def to_dict(self) -> dict:
        return {"requirement": self.requirement, "source": self.source}


@dataclass(frozen=True)
class Inferred:
    """What autopackage found in the directory; `overrides` are the config keys it sets (only keys the
    config file leaves unset)."""

    directory: Path
    config_file: Path | None
    trainer: str | None = None  # "module trainer.task" or "script train.py"; None: the config's
    requirements: str | None = None
    pip: tuple[str, ...] = ()  # what autopackage adds to the image's packages (declared dependencies, imports)
    framework: str | None = None  # the pin found in the requirements, e.g. torch==2.5.1
    framework_from: str | None = None  # where: requirements.txt:3
    notes: tuple[str, ...] = ()
    overrides: tuple[tuple[str, Any], ...] = ()
    sources: tuple[Source, ...] = ()  # every requirement found, with where it came from
    package: str | None = None  # the trainer's own distribution (setup.py, setup.cfg, pyproject.toml): not installed
    framework_reason: str | None = None  # why this framework decides the base, when several are declared
    dockerfile: str | None = None  # a Dockerfile in the directory (relative path)
    imports: tuple[Needed, ...] = ()  # what the build's import check imports (the entry point's closure), and from what
    metadata: str | None = None  # the trainer package's computed metadata: "computed", "not computed" (dry run)

    def to_dict(self) -> dict:
        return masked_credentials({"directory": str(self.directory), "config": str(self.config_file) if self.config_file else None,
                "trainer": self.trainer, "requirements": self.requirements, "pip": list(self.pip),
                "framework": self.framework, "framework_from": self.framework_from,
                "framework_reason": self.framework_reason, "sources": [s.to_dict() for s in self.sources],
                "package": self.package, "dockerfile": self.dockerfile, "imports": [n.to_dict() for n in self.imports],
                "notes": list(self.notes), "metadata": self.metadata,
                "config_keys": {k: v for k, v in self.overrides}})


def masked_credentials(data: dict) -> dict:
    """The dict with every URL's credentials masked in its strings (a requirement the trainer declares may carry
    them): what --json prints goes to logs as much as a message does."""
    return json.loads(mask_credentials(json.dumps(data)))


_NOT_COMPUTED = ("the trainer's dependencies are computed by its setup.py (PEP 517 metadata hook); a dry run runs "
                 "none of the trainer's code, so its metadata was not computed")


# ---------------------------------------------------------------------------------------------
# Requirements files


@dataclass(frozen=True)
class _RequirementsFile:
    lines: tuple[tuple[str, str], ...]  # (requirement text as pip takes it, where)
    options: tuple[tuple[str, str, str], ...]  # (option, value, where) that uv honours in the copied file
    installs_self: str | None  # where a line installs the trainer itself (-e ., .)
    included: tuple[str, ...]  # files named by -r: the copied file cannot reach them
    hashed: str | None = None  # where a line asks for hash checking (--hash, --require-hashes)


def _refuse_extras(text: str, where: str) -> None:
    raise ConfigError(f"{show(text)} installs the trainer with extras: autopackage installs the trainer's declared "
                      "dependencies, not those of its extras; list the extras' requirements in the file instead of "
                      "the line", where=where)


def _read_requirements(directory: Path, name: str) -> _RequirementsFile:
    """Every line of a requirements file and of the files it includes (-r) checked as pip would read it: an
    invalid requirement, an option the image's installer cannot honour from a file copied alone, and a local path
    exit 2 naming the line."""
    from .requirements_file import KEPT_OPTIONS, asks_hashes, included_lines
    from .requirements_file import option as option_of

    lines: list[tuple[str, str]] = []
    options: list[tuple[str, str, str]] = []
    installs_self = None
    read, included = included_lines(directory, name, ("-r", "--requirement"))
    hashed = next((where for text, where, _ in read if asks_hashes(text)), None)
    for text, where, _ in read:
        _checked_text(text, where)
        if text.startswith("-"):
            option, value = option_of(text)
            if option in ("-e", "--editable") and value in _SELF:
                installs_self = installs_self or where
            elif option in ("-e", "--editable") and _SELF_EXTRAS.fullmatch(value):
                _refuse_extras(text, where)
            elif option in ("-e", "--editable") and "://" not in value:
                raise ConfigError(f"{show(text)} installs {show(value)} from this machine: the requirements file is "
                                  "copied into the image alone, without other directories; publish the package to an "
                                  "index, or move its code into the trainer directory", where=where)
            elif option in ("-e", "--editable"):
                lines.append((value, where))
            elif option in ("-f", "--find-links") and value.startswith(("https://", "http://")):
                options.append((option, value, where))
            elif option in ("-f", "--find-links"):
                raise ConfigError(f"{show(text)}: a local find-links directory is not in the image when the requirements "
                                  "file (copied alone) is installed; serve the wheels from an index (pip_index_url, "
                                  "pip_conf) or an http(s) find-links URL", where=where)
            elif option == "--trusted-host":
                raise ConfigError(f"{show(text)}: uv, which installs the image's packages, ignores --trusted-host; serve "
                                  "the index over https and give its CA bundle with ca_cert (or PIP_CERT)", where=where)
            elif option in ("-c", "--constraint"):
                raise ConfigError(f"{show(text)}: a constraints file is not copied with the requirements file; pin the "
                                  "versions in the requirements file itself", where=where)
            elif option in KEPT_OPTIONS:
                options.append((option, value, where))
            else:
                raise ConfigError(f"{show(text)}: the option {show(option)} is not one autopackage can pass to the "
                                  f"image's installer; allowed: {', '.join(sorted(KEPT_OPTIONS))}, -r, -f URL, -e .",
                                  where=where)
            continue
        text = _PER_REQUIREMENT.sub("", text)
        if _SELF_EXTRAS.fullmatch(text):
            _refuse_extras(text, where)
        if text in _SELF:
            installs_self = installs_self or where
            continue
        try:
            Requirement(text)
        except InvalidRequirement as exc:
            if "://" in text:  # a URL pip installs (an archive or VCS link): left to the installer
                lines.append((text, where))
                continue
            if local_path(text):
                raise ConfigError(f"{show(text)} is a path on this machine: the requirements file is copied into the "
                                  "image alone; publish the package to an index, or move its code into the trainer "
                                  "directory", where=where) from None
            raise ConfigError(f"{show(text)} is not a valid requirement (PEP 508/440): {_one_line(exc)}; current pip "
                              f"refuses it too{_meant(text)}", where=where) from None
        lines.append((text, where))
    return _RequirementsFile(tuple(lines), tuple(options), installs_self, included, hashed)


# ---------------------------------------------------------------------------------------------
# The trainer's own package: setup.py, setup.cfg, pyproject.toml


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
        raise ConfigError(f"setup.cfg does not parse: {str(exc)[:300]}", where=str(path)) from None
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
class _Own:
    """The trainer directory's own distribution."""

    name: str | None
    deps: list[tuple[str, str]]  # (requirement, where)
    notes: list[str]
    version: str | None = None  # None: computed by its build, not read
    entry_points: dict[str, list[str]] | None = None  # group -> entries; None: computed by its build, not read
    compiled: str | None = None  # where the package declares compiled parts (setup.py:12 (Extension))
    python_requires: tuple[str, str] | None = None  # (requires-python / python_requires, where)
    metadata: str | None = None  # "computed" (by the metadata hook), "not computed" (a dry run); None: read as written


def _declared(directory: Path, run_hook: bool) -> _Own:
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
        return _Own(name if isinstance(name, str) and name else None, [], notes, None, None, compiled, python_requires,
                    metadata="not computed")
    if computed:
        from .packaging import declared_metadata

        meta = declared_metadata(directory)
        name, version, entry_points = meta.name, meta.version, _entry_points(meta.entry_points)
        deps = [(d, f"metadata hook (prepare_metadata_for_build_wheel):Requires-Dist[{i}]")
                for i, d in enumerate(meta.requires)]
        notes.append("the trainer's dependencies are computed by its build: read through the PEP 517 metadata hook "
                     "in a container without network that holds only a copy of the trainer's files (nothing of it runs "
                     "here or in the image)")
    return _Own(name if isinstance(name, str) and name else None, deps, notes,
                version if isinstance(version, str) and version else None,
                {} if entry_points is _UNSET else entry_points if isinstance(entry_points, dict) else None, compiled,
                python_requires, "computed" if computed else None)


# ---------------------------------------------------------------------------------------------
# The framework


def _framework_of(matrix: Matrix, requirement: Requirement) -> str | None:
    name = canonicalize_name(requirement.name)
    for fw in matrix.frameworks.values():
        if name in {canonicalize_name(n) for n in (fw.name, fw.wheel_package, *fw.aliases) if n}:
            return fw.name
    return None


def _release_pythons(matrix: Matrix, pin: str) -> list[str]:
    """The Pythons an image can have that the release's wheels support (NAME==VERSION); [] where it is not known."""
    name, _, version = pin.partition("==")
    fw = matrix.framework(name)
    series = next((s.for_release(version) for s in fw.series if version in s.releases), None) if fw else None
    return usable_python(matrix, series) if series else []


def _listed(releases: list[str], shown: int = 12) -> str:
    ordered = sorted(releases, key=version_key, reverse=True)
    return ", ".join(ordered[:shown]) + (f" and {len(ordered) - shown} older" if len(ordered) > shown else "")


@dataclass(frozen=True)
class _Choice:
    pin: str  # torch==2.5.1, or torch (unpinned: the plan resolves the newest)
    where: str
    spec: SpecifierSet
    reason: str | None
    notes: tuple[str, ...]


def _by_framework(matrix: Matrix, found: Sequence[tuple[str, Requirement]]) -> dict[str, list[tuple[str, Requirement]]]:
    by_fw: dict[str, list[tuple[str, Requirement]]] = {}
    for where, req in found:
        name = _framework_of(matrix, req)
        if name is not None:
            by_fw.setdefault(name, []).append((where, req))
    return by_fw


def _deciding(frameworks: Sequence[str] | dict) -> str:
    """The framework that decides the base among several, by FRAMEWORK_ORDER, then by name."""
    rank = {n: i for i, n in enumerate(FRAMEWORK_ORDER)}
    return min(frameworks, key=lambda n: (rank.get(n, len(rank)), n))


def _pin(matrix: Matrix, found: list[tuple[str, Requirement]], python: str | None,
         limits: Sequence[tuple[str, Requirement]] = (), prefer: Sequence[tuple[str, str]] = ()) -> _Choice | None:
    """The framework that decides the base, by FRAMEWORK_ORDER, pinned to the newest known release inside
    every range declared for it (for the image's Python when it is set). Two different exact pins, or a range
    no known release meets: exit 2. `limits` narrow a framework that is not pinned exactly (the code uses an
    API later releases removed); a `prefer` entry (NAME==VERSION, why) is taken where nothing pins the release and it
    lies inside the range (what a legacy runtimeVersion ran)."""
    by_fw = _by_framework(matrix, found)
    if not by_fw:
        return None
    chosen = _deciding(by_fw)
    declared = by_fw[chosen]
    where = ", ".join(w for w, _ in declared)
    exact = [(s.version, w) for w, r in declared for s in r.specifier if s.operator in ("==", "===") and "*" not in s.version]
    for version, w in exact[1:]:
        if Version(version) != Version(exact[0][0]):
            raise ConfigError(f"conflicting framework pins: {show(f'{chosen}=={exact[0][0]}')} ({exact[0][1]}) and "
                              f"{show(f'{chosen}=={version}')} ({w}); keep one", field="framework")
    spec = SpecifierSet()
    for _, req in declared:
        spec &= req.specifier
    reason = None
    if len(by_fw) > 1:
        others = [n for n in by_fw if n != chosen]
        reason = (f"{chosen} decides the base image ({' > '.join(FRAMEWORK_ORDER)}); "
                  f"{', '.join(others)} {'stays a plain requirement' if len(others) == 1 else 'stay plain requirements'}")
    fw = matrix.framework(chosen)
    if exact:
        version = exact[0][0]
        if not spec.contains(version, prereleases=True):
            raise ConfigError(f"conflicting framework requirements: {show(chosen + '==' + version)} is outside "
                              f"{show(chosen + str(spec))} ({where})", field="framework")
        # A local version label (torch==2.5.1+cpu) names a build of the release, which the plan's index choice makes.
        public = Version(version).public if _parses(f"x=={version}") and "+" in version else version
        return _Choice(f"{chosen}=={public}", where, spec, reason, ())
    known = [(s, r) for s in fw.series for r in s.releases] if fw else []
    narrowed = [(w, r) for w, r in limits if r.name == chosen]
    limited = spec
    for _, req in narrowed:
        limited &= req.specifier
    # A limit that leaves no known release is dropped: the declared range stands and the note names the call.
    if narrowed and any(limited.contains(r) for _, r in known):
        spec = limited
    else:
        narrowed = []
    limit_notes = tuple(f"{w}: {chosen}{r.specifier} keeps it" for w, r in narrowed)
    wanted = next(((pin, why) for pin, why in prefer if pin.partition("==")[0] == chosen and "==" in pin), None)
    if wanted is not None:
        version = wanted[0].partition("==")[2]
        if spec.contains(version, prereleases=True):
            return _Choice(wanted[0], where, spec, reason, (*limit_notes, f"{chosen} ({where}): {version}, {wanted[1]}"))
    if not str(spec) and python is None:  # with the image's Python known, its newest known release is taken below
        return _Choice(chosen, where, spec, reason, (
            f"{chosen} ({where}) is not pinned: the framework is pinned to the release that resolves (see `resolve`), "
            "write it as ==VERSION to keep it",))
    inside = [r for s, r in known if spec.contains(r) and (python is None or python in s.for_release(r).python)]
    if not inside:
        for_python = f" for Python {python}" if python else ""
        raise ConfigError(
            f"no known {chosen} release inside {show(chosen + str(spec))} ({where}){for_python}; known: "
            f"{_listed([r for _, r in known]) or 'none'} (buildkit-py versions {chosen}); change the range, or pin a "
            "known release with --framework", field="framework")
    picked = max(inside, key=version_key)
    return _Choice(f"{chosen}=={picked}", where, spec, reason, (*limit_notes,
        f"{chosen}{spec} ({where}): {picked}, the newest known release {'inside the range' if str(spec) else 'of it'}"
        f"{' for Python ' + python if python else ''}",))


def _cpu_index_urls(fw: Framework) -> tuple[str, ...]:
    """The framework's CPU-only indexes: a cpu_index_url that is not also its GPU index (PyTorch's
    download.pytorch.org/whl/cpu; jax's one index serves both)."""
    found = []
    for series in (*fw.series, *([fw.nightly] if fw.nightly else [])):
        spec = series.install
        if spec.cpu_index_url and spec.cpu_index_url != spec.gpu_index_url:
            found.append(spec.cpu_index_url.rstrip("/"))
    return tuple(dict.fromkeys(found))


def _cpu_only(matrix: Matrix, chosen: str, parsed: Sequence[tuple[str, Requirement]],
              options: Sequence[tuple[str, str, str]]) -> list[str]:
    """Where the trainer declares the CPU-only build of the framework that decides the base, each as
    "where: what" (base_images/cpu_builds.yaml; an index option naming the framework's CPU index)."""
    from .resources import read_data, resource_dir

    data = read_data(resource_dir("base_images") / "cpu_builds.yaml", "base_images/cpu_builds.yaml")
    rules = data["frameworks"].get(chosen) or {}
    distributions = {canonicalize_name(d) for d in rules.get("distributions", ())}
    extras, labels = set(rules.get("extras", ())), set(rules.get("local_versions", ()))
    found = []
    for where, req in parsed:
        if _framework_of(matrix, req) != chosen:
            continue
        local = [Version(s.version).local for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version
                 and _parses(f"x=={s.version}")]
        if canonicalize_name(req.name) in distributions:
            found.append(f"{where}: {req.name} is the CPU-only build of {chosen}")
        elif req.extras & extras:
            found.append(f"{where}: {req.name}[{','.join(sorted(req.extras & extras))}] installs {chosen} for CPU only")
        elif any(lv and lv.split(".")[0] in labels for lv in local):
            found.append(f"{where}: {req} is a CPU-only wheel of {chosen} (local version +{local[0]})")
    fw = matrix.framework(chosen)
    cpu_indexes = _cpu_index_urls(fw) if fw else ()
    for option, value, where in options:
        url = value.rstrip("/")
        if any(url == i or url.startswith(i + "/") for i in cpu_indexes):
            found.append(f"{where}: {option} {value} is {chosen}'s CPU-only index")
    return found


# ---------------------------------------------------------------------------------------------
# Imports


@dataclass(frozen=True)
class _Scan:
    found: dict[str, str]  # distribution -> first place it is imported
    unknown: dict[str, str]  # import without a known distribution -> first place
    notes: tuple[str, ...]  # Python 2 code: files that do not parse, implicit relative imports


@dataclass(frozen=True)
class _Code:
    """The trainer's Python files, read and parsed once (AST, nothing executed) for the import scan and the removed-API
    scan: the .py files the image gets (the build context's ignore rules), tests and setup.py left out (the job never
    runs them), at most MAX_SCANNED."""

    listed: tuple[str, ...]  # every file the image gets
    trees: dict[str, ast.AST]  # .py file -> its module
    unparsed: dict[str, str]  # .py file -> "line N: why", for each that does not parse as Python 3


def _read_code(directory: Path) -> _Code:
    from .context import included_files
    from .render import render_project_dockerignore

    listed = tuple(included_files(directory, render_project_dockerignore(directory)))
    files = [f for f in listed if f.endswith(".py") and not _TEST_FILE.search(f) and f != "setup.py"]
    trees: dict[str, ast.AST] = {}
    unparsed: dict[str, str] = {}
    for rel in files[:MAX_SCANNED]:
        try:
            text = read_text(directory / rel, "Python file")
        except ConfigError:
            continue
        try:
            trees[rel] = parse_python(text, rel)
        except SyntaxError as exc:
            unparsed[rel] = f"line {exc.lineno}: {exc.msg}"  # the file fails where it runs, with Python's own message
        except ConfigError as exc:  # nested past what Python's parser takes: it cannot run the file either
            unparsed[rel] = exc.detail
        except ValueError:
            continue
    return _Code(listed, trees, unparsed)


def _scan_imports(directory: Path, code: _Code, script_dir: str | None, package_dir: str | None = None) -> _Scan:
    """The trainer's third-party imports in `code`; dropped: the standard library and the trainer's own top-level
    modules and packages (and, for a script in a folder, that folder's: it is first on the script's sys.path). Python 2
    code is said, not refused: a file that does not parse, and `import model` inside trainer/ meaning trainer/model.py
    (Python 2's implicit relative import, which Python 3 takes as a top-level name)."""
    table = import_names()
    listed = code.listed
    own = {f.split("/")[0].removesuffix(".py") for f in listed}
    for folder in (package_dir, script_dir):  # a src layout's packages and a script's neighbours are its own too
        own |= {f[len(folder) + 1:].split("/")[0].removesuffix(".py") for f in listed if folder and f.startswith(folder + "/")}
    siblings: dict[str, set[str]] = {}  # folder -> the module and package names in it
    for f in listed:
        folder, _, rest = f.rpartition("/")
        while folder:
            siblings.setdefault(folder, set()).add(rest.split("/")[0].removesuffix(".py"))
            folder, _, tail = folder.rpartition("/")
            rest = f"{tail}/{rest}"
    found: dict[str, str] = {}
    unknown: dict[str, str] = {}
    unparsed = code.unparsed  # their imports are not read: said below
    relative: dict[str, str] = {}
    renamed: dict[str, str] = {}
    by_name: dict[str, str] = {}  # imports naming the trainer directory itself
    for rel, tree in code.trees.items():
        folder = rel.rpartition("/")[0]
        for st in statements(tree):
            if st.level:
                continue  # the trainer's own package
            names = (*(f"{st.module}.{n}" for n in st.names), st.module)
            statement, line = st.text, st.line
            top = st.module.split(".")[0]
            if top in sys.stdlib_module_names or top in own or top == "__future__":
                continue
            if top in table.python2:
                renamed.setdefault(f"{shown_name(rel)}:{line}", f"`{statement}`: Python 3 has {table.python2[top]}")
                continue
            if top == directory.resolve().name and top not in own:
                by_name.setdefault(f"{shown_name(rel)}:{line}", f"`{statement}`")
                continue
            if folder and folder != script_dir and top in siblings.get(folder, ()):
                relative.setdefault(f"{shown_name(rel)}:{line}", f"`{statement}` means {shown_name(folder)}/{top}")
                continue
            *specific, module = names
            dists = {d for n in specific if (d := table.distribution(n))} or {table.distribution(module)}
            for dist in dists:
                if dist is None:
                    unknown.setdefault(module if top == "google" else top, f"{shown_name(rel)}:{line}")
                else:
                    found.setdefault(dist, f"{statement} ({shown_name(rel)}:{line})")
    def places(found: dict[str, str]) -> str:  # the first three, "where: what"
        return "; ".join(f"{w}: {what}" for w, what in list(found.items())[:3]) + (" ..." if len(found) > 3 else "")

    notes = []
    if unparsed:
        notes.append(f"{len(unparsed)} Python file(s) do not parse as Python 3, and fail where they run (Python 2 code?): "
                     f"{', '.join(f'{f} ({why})' for f, why in list(unparsed.items())[:3])}"
                     f"{' ...' if len(unparsed) > 3 else ''}; their imports are not read")
    if relative:
        notes.append(f"{len(relative)} import(s) of a module beside the importing file, as Python 2 read them (implicit "
                     f"relative imports): {places(relative)}; Python 3 fails there with ModuleNotFoundError: write "
                     "`from . import NAME` (or `from PACKAGE import NAME`)")
    if by_name:
        notes.append(f"{len(by_name)} import(s) name the trainer directory itself ({shown_name(directory.resolve().name)}): "
                     f"{places(by_name)}; the image copies the directory's contents to its work directory, so no package "
                     "of that name exists there: import from the directory's own packages instead (`from trainer import "
                     "model`)")
    if renamed:
        notes.append(f"{len(renamed)} import(s) of Python 2 standard-library modules that Python 3 renamed or removed "
                     f"(PEP 3108): {places(renamed)}; the trainer fails there until it is ported")
    return _Scan(found, unknown, tuple(notes))


# ---------------------------------------------------------------------------------------------
# The trainer


def _script_file(directory: Path, rel: str) -> bool:
    if len(rel) > 1000 or rel.startswith("/") or ".." in rel.split("/"):
        return False
    try:
        path = directory / rel
        return path.is_file() and not path.is_symlink()
    except OSError:
        return False


def _trainer(directory: Path, entry_points: dict[str, list[str]]) -> tuple[dict, str, list[str], Declared | None]:
    """The trainer (its config value and how it was found), notes, and the Python its Dockerfile's FROM names: first
    what the repository declares (a training Dockerfile's ENTRYPOINT/CMD, then a submit command or Vertex AI SDK call,
    then the package's console scripts), then the layouts known."""
    from .entrypoints import choose, dockerfile_entries, submitted_entries

    def is_module(name: str) -> bool:
        return _module_root(directory, name) is not None

    def is_script(rel: str) -> bool:
        return _script_file(directory, rel)

    found = [*dockerfile_entries(directory, is_module, is_script), *submitted_entries(directory, is_module, is_script)]
    chosen, others = choose(found)
    if chosen is None and others:
        raise ConfigError("the repository names several trainers: " + "; ".join(f"{d.name} ({d.where})" for d in others[:6])
                          + "; set `trainer:` (module or script) in buildkit.yaml, or pass --module or --script",
                          field="DIR")
    if chosen is not None:
        notes = []
        if chosen.args:
            notes.append(f"{chosen.where} passes {show(' '.join(chosen.args))} to the trainer: they are its default "
                         "arguments (trainer.args; a job's args replace them)")
        if chosen.also:
            notes.append(f"{chosen.where} also runs {'; '.join(map(show, chosen.also))}, which the generated image does "
                         "not: do it in the trainer, or build that Dockerfile as it is (--dockerfile --with-launcher)")
        if others:
            notes.append("the repository names other trainers too, not used: "
                         + "; ".join(f"{d.name} ({d.where})" for d in others[:5]))
        value = chosen.trainer | ({"package_dir": "src"} if chosen.module and _module_root(directory, chosen.module) else {})
        return value, f"{chosen.name} (named by {chosen.where})", notes, chosen
    # The package's console scripts: where no layout is known, the one that trains; and where the layout's module is
    # a script's and has no __main__ block, `python -m` would only define its function: the function is called.
    scripts = _console_scripts(entry_points, is_module)
    training = [s for s in scripts if "train" in s[0].lower() or "train" in s[1].lower()] if len(scripts) > 1 else scripts
    try:
        value, said = _layout_trainer(directory)
    except ConfigError:
        if len(training) != 1:
            raise
        return _script_trainer(directory, training[0], scripts)
    called = [s for s in scripts if s[1] == value.get("module") and not _guarded(directory, s[1])]
    if called:
        return _script_trainer(directory, called[0], scripts)
    listed = [f"{n} = {m}:{f}" for n, m, f in scripts]
    return value, said, ([f"the package's console scripts are not the trainer ({', '.join(listed)}): {said} is; set "
                          "`trainer: {module: M, function: F}` for one of them"] if listed else []), None


def _script_trainer(directory: Path, script: tuple[str, str, str],
                    scripts: list[tuple[str, str, str]]) -> tuple[dict, str, list[str], None]:
    name, module, function = script
    value = {"module": module, "function": function} | ({"package_dir": "src"} if _module_root(directory, module) else {})
    others = [f"{n} = {m}:{f}" for n, m, f in scripts if n != name]
    return value, f"module {module}, function {function} (the package's console script {name})", \
        ([f"the package's other console scripts, not used: {', '.join(others)}"] if others else []), None


def _guarded(directory: Path, module: str) -> bool:
    """Does the module's file run something under `if __name__ == "__main__"`."""
    return _has_main_block(directory, directory.joinpath(*module.split(".")).with_suffix(".py"))


def _has_main_block(directory: Path, path: Path) -> bool:
    try:
        return bool(_MAIN_GUARD.search(read_text(path, "Python file", root=directory)))
    except ConfigError:
        return False


def _console_scripts(entry_points: dict[str, list[str]], is_module: Callable[[str], bool]) -> list[tuple[str, str, str]]:
    """(name, module, function) of the package's console scripts whose module is one of the directory's."""
    found = []
    for entry in entry_points.get("console_scripts", []):
        name, _, target = entry.partition("=")
        module, _, function = target.split("[")[0].strip().partition(":")
        if name.strip() and function.isidentifier() and is_module(module) and not keyword.iskeyword(function):
            found.append((name.strip(), module, function))
    return found


_PYTHON_VERSION_FILE = re.compile(r"\s*(?:cpython-|python-?)?(3\.[0-9]+)(?:\.[0-9]+)?\b", re.ASCII | re.IGNORECASE)


def _python_hint(directory: Path, own: _Own, from_python: tuple[str, str] | None, matrix: Matrix) -> tuple[str, str] | None:
    """The Python the repository asks for, and where: `.python-version`, a training Dockerfile's FROM python:X.Y,
    then requires-python / python_requires (the default Python where it allows it, else the newest an image has)."""
    version_file = directory / ".python-version"
    if version_file.is_file() and not version_file.is_symlink():
        found = _PYTHON_VERSION_FILE.match(read_text(version_file, ".python-version")[:200])
        if found:
            return found.group(1), ".python-version:1"
    if from_python is not None:
        return from_python
    if own.python_requires is None:
        return None
    text, where = own.python_requires
    try:
        allowed = SpecifierSet(text)
    except InvalidSpecifier:
        return None  # pip ignores it too; the build says nothing of it
    images = matrix.distros.cpu_python
    if allowed.contains(matrix.distros.default_python + ".0"):
        return None  # the default fits: nothing to say
    fits = [p for p in images if allowed.contains(p + ".0")]
    return (max(fits, key=version_key), f"{where} ({text})") if fits else None


def _from_dockerfile(found: Declared, given: set[str], overrides: dict[str, Any]) -> list[str]:
    """What the training Dockerfile installs and sets that the generated image takes: its apt-get packages and its
    plain ENV, where the config leaves system_packages and env unset."""
    notes = []
    if found.apt and "system_packages" not in given:
        overrides["system_packages"] = list(found.apt)
        notes.append(f"{found.where.split(':')[0]} installs {', '.join(found.apt)} with apt-get: system_packages")
    if found.env and "env" not in given:
        overrides["env"] = dict(found.env)
        notes.append(f"{found.where.split(':')[0]} sets {', '.join(k for k, _ in found.env)}: env")
    return notes


def _src_layout(directory: Path) -> tuple[dict, str] | None:
    """A src layout's trainer: src/trainer/task.py, one src/PKG/task.py, or one src/PKG/__main__.py; its packages'
    folder goes on PYTHONPATH (trainer.package_dir)."""
    src = directory / "src"
    if not src.is_dir() or src.is_symlink():
        return None
    for pattern, module in ((f"trainer/{PACKAGE_TASK}", "{}.task"), (f"*/{PACKAGE_TASK}", "{}.task"), ("*/__main__.py", "{}")):
        found = sorted(p.parent.name for p in src.glob(pattern)
                       if (p.parent / "__init__.py").is_file() and _MODULE_PART.fullmatch(p.parent.name))
        if len(found) == 1:
            name = module.format(found[0])
            return {"module": name, "package_dir": "src"}, f"module {name} (a src layout: src/ on PYTHONPATH)"
    return None


def _layout_trainer(directory: Path) -> tuple[dict, str]:
    if (directory / "trainer" / PACKAGE_TASK).is_file():
        return {"module": "trainer.task"}, "module trainer.task"
    packages = sorted(p.parent.name for p in directory.glob(f"*/{PACKAGE_TASK}")
                      if (p.parent / "__init__.py").is_file() and _MODULE_PART.fullmatch(p.parent.name))
    if len(packages) == 1:
        return {"module": f"{packages[0]}.task"}, f"module {packages[0]}.task"
    for script in SCRIPTS:
        if (directory / script).is_file():
            return {"script": script}, f"script {script}"
    # A script in a folder that is no package: run as a script, as its README's `python trainer/train.py` does.
    in_folders = sorted(f"{p.parent.name}/{p.name}" for s in SCRIPTS for p in directory.glob(f"*/{s}")
                        if not (p.parent / "__init__.py").is_file() and not p.parent.name.startswith(".")
                        and not (p.parent / "pyvenv.cfg").exists())
    folders = {s.split("/")[0] for s in in_folders}
    if len(folders) == 1:
        script = min(in_folders, key=lambda s: SCRIPTS.index(s.split("/")[1]))
        return {"script": script}, f"script {script}"
    # A package one level down (ltgpred/trainer/task.py beside both folders' __init__.py), as the module path it is.
    nested = sorted(f"{p.parent.parent.name}.{p.parent.name}.task" for p in directory.glob(f"*/*/{PACKAGE_TASK}")
                    if (p.parent / "__init__.py").is_file() and (p.parent.parent / "__init__.py").is_file()
                    and _MODULE_PART.fullmatch(p.parent.name) and _MODULE_PART.fullmatch(p.parent.parent.name))
    if len(nested) == 1 and not packages and not in_folders:
        return {"module": nested[0]}, f"module {nested[0]}"
    src = _src_layout(directory)
    if src is not None:
        return src
    guarded = _main_modules(directory)
    if len(guarded) == 1:
        return {"module": guarded[0]}, f"module {guarded[0]} (the package's one module with `if __name__ == \"__main__\"`)"
    looked = (f"trainer/{PACKAGE_TASK}, one PACKAGE/{PACKAGE_TASK} beside a PACKAGE/__init__.py"
              + (f" (found several: {', '.join(packages)})" if packages else "") + ", a script "
              + ", ".join(SCRIPTS) + ", or one in a single folder"
              + (f" (found several: {', '.join(in_folders)})" if in_folders else "")
              + ", a module or script a training Dockerfile's ENTRYPOINT/CMD runs or a submit command or Vertex AI SDK "
              "call names"
              + ", or one package module with `if __name__ == \"__main__\"`"
              + (f" (found several: {', '.join(guarded)})" if len(guarded) > 1 else ""))
    own = _dockerfile(directory)
    notebooks = sorted(shown_name(p.relative_to(directory).as_posix())
                       for p in [*directory.glob("*.ipynb"), *directory.glob("*/*.ipynb")])
    raise ConfigError(f"no trainer found in {show(str(directory))}: looked for {looked}; or set `trainer:` "
                      "(module or script) in buildkit.yaml, or pass --module or --script"
                      + (f"; or build its {own} as it is with --dockerfile" if own else "")
                      + (f"; a notebook is not a trainer ({', '.join(notebooks[:3])}): export its training code with "
                         "`jupyter nbconvert --to script`" if notebooks else ""), field="DIR")


def _module_root(directory: Path, module: str) -> str | None:
    """Where `python -m module` finds the module: "" (the directory's top) or the src layout's `src`; None: nowhere."""
    for root in ("", "src"):
        base = directory / root if root else directory
        if _module_file(base, module) or _module_file(base, f"{module}.__main__"):
            return root
    return None


def _module_file(directory: Path, module: str) -> bool:
    parts = module.split(".")
    if len(module) > 200 or not all(_MODULE_PART.fullmatch(p) for p in parts):
        return False  # no module of a trainer; a name too long for the file system would raise
    try:
        return (directory.joinpath(*parts[:-1]) / f"{parts[-1]}.py").is_file()
    except OSError:
        return False


def _main_modules(directory: Path) -> list[str]:
    """Modules of the directory's top-level packages that run something under `if __name__ == "__main__"` (tests left
    out): a package whose entry point is trainer/trainer.py or trainer/flow.py rather than task.py."""
    found = []
    for init in sorted(directory.glob("*/__init__.py")):
        package = init.parent.name
        if not _MODULE_PART.fullmatch(package):
            continue
        for path in sorted(init.parent.glob("*.py"))[:MAX_SCANNED]:
            rel = path.relative_to(directory).as_posix()
            if (path.name == "__init__.py" or _TEST_FILE.search(rel) or not _MODULE_PART.fullmatch(path.stem)
                    or path.is_symlink() or not path.is_file()):
                continue
            if _has_main_block(directory, path):
                found.append(f"{package}.{path.stem}")
    return found


def _dockerfile(directory: Path) -> str | None:
    for name in ("Dockerfile", "dockerfile", "Containerfile"):
        if (directory / name).is_file():
            return name
    return None


def _other_dockerfiles(directory: Path) -> list[str]:
    """Dockerfiles that --dockerfile does not build: in a folder (trainer/Dockerfile, built with `-f trainer/Dockerfile
    .`) or named NAME.Dockerfile / Dockerfile.NAME (cpu.Dockerfile, dockerfile/train.Dockerfile)."""
    top = _dockerfile(directory)
    found = []
    for pattern in ("*", "*/*"):
        for path in sorted(directory.glob(pattern))[:MAX_SCANNED]:
            name = path.name
            if (_DOCKERFILE_NAME.fullmatch(name) and path.is_file() and path.relative_to(directory).as_posix() != top
                    and not any(part.startswith(".") for part in path.relative_to(directory).parts)):
                found.append(path.relative_to(directory).as_posix())
    return found


# ---------------------------------------------------------------------------------------------
# Inference


def _own_package(found: _Own, given: set[str], where_set: dict[str, str], overrides: dict[str, Any]) -> str:
    """What becomes of the trainer's own distribution where gcloud ran `pip install .`: its declared dependencies are
    installed, its code is the copied code on PYTHONPATH, and its metadata (dist-info, entry points, console scripts)
    is installed before the code layer (`trainer_package`) where its version and entry points are read; the note."""
    said = (f"the trainer directory is the package {show(found.name)}: where gcloud ran `pip install .`, its declared "
            "dependencies are installed and its code is copied into the image, importable on PYTHONPATH")
    if "trainer_package" in given:
        return f"{said}; trainer_package ({where_set['trainer_package']}) says what is installed of its metadata"
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
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+", re.ASCII)
_VERSION_HEAD = re.compile(r"^v?((?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*)", re.ASCII | re.IGNORECASE)
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+", re.ASCII)


def _setuptools_name(name: str) -> str | None:
    from .config import _DIST_NAME

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


# An invalid specifier with one obvious meaning, as old pip took it: `xgboost=0.72.1`, `numpy=>1.20`, `pandas =< 2`.
_ONE_MEANING = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*(?:\[[A-Za-z0-9,._ -]*\])?)\s*(=>|=<|=)\s*([0-9][A-Za-z0-9.*+!_-]*)",
                          re.ASCII)
_OPERATOR = {"=": "==", "=>": ">=", "=<": "<="}


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]


def _meant(text: str) -> str:
    """The corrected line to copy, where the invalid one has one obvious meaning; else ""."""
    found = _ONE_MEANING.fullmatch(text.strip())
    if found is None:
        return ""
    fixed = f"{found.group(1)}{_OPERATOR[found.group(2)]}{found.group(3)}"
    return f"; write {show(fixed)}" if _parses(fixed) else ""


@dataclass(frozen=True)
class _BadName:
    use: str  # the distribution to install instead
    why: str
    fails: str  # install | missing | unrelated
    after: Version | None  # only releases after this one are broken


def _bad_names() -> dict[str, _BadName]:
    from .errors import DataError
    from .resources import read_data, resource_dir

    data = read_data(resource_dir("base_images") / "requirement_names.yaml", "base_images/requirement_names.yaml")
    names = data.get("names") if isinstance(data, dict) else None
    if not isinstance(names, dict):
        raise DataError("base_images/requirement_names.yaml: `names` must be a mapping")
    found = {}
    for name, row in names.items():
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("use", "why", "fails", "source")):
            raise DataError(f"base_images/requirement_names.yaml: {name} needs use, why, fails and source")
        found[canonicalize_name(name)] = _BadName(row["use"], row["why"], row["fails"],
                                                  Version(row["after"]) if row.get("after") else None)
    return found


def _renamed(table: dict[str, _BadName], lines: Sequence[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[str]]:
    """The requirements with each name known not to install replaced by what to install instead (a renamed project
    keeps its version specifier; a placeholder's versions mean nothing for the real one), and a note for each; a name
    that installs an unrelated project is only said."""
    out, notes = [], []
    for text, where in lines:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            out.append((text, where))  # a URL line: installed as written
            continue
        bad = table.get(canonicalize_name(requirement.name))
        broken = bad is not None and (bad.after is None or any(
            v > bad.after for v in (Version(x.version) for x in requirement.specifier if "*" not in x.version
                                    and x.operator in ("==", "===", ">=", ">", "~="))) or not requirement.specifier)
        if bad is None or not broken:
            out.append((text, where))
            continue
        if bad.fails == "unrelated":
            notes.append(f"{where}: {requirement.name} installs a different project from the one its import name "
                         f"suggests ({bad.why}); if the trainer means {bad.use}, write that")
            out.append((text, where))
            continue
        fixed = Requirement(text)
        fixed.name = bad.use
        if bad.after is None:
            fixed.specifier = SpecifierSet()
        fixed_text = str(fixed)
        notes.append(f"{where}: {show(text)} cannot be installed ({bad.why}): {fixed_text} is installed instead "
                     "(base_images/requirement_names.yaml); write that in the file")
        out.append((fixed_text, where))
    return out, notes


def _checked_text(text: str, where: str) -> None:
    bad = bad_character(text)
    if bad:
        raise ConfigError(f"{show(text)}: {bad}", where=where)
    if len(text) > MAX_REQUIREMENT:
        raise ConfigError(f"{show(text)} is {len(text)} characters long: at most {MAX_REQUIREMENT} for one requirement",
                          where=where)


def _requirement(text: str, where: str) -> Requirement | None:
    """A declared requirement, or None for a URL line pip takes as it is; invalid: exit 2 naming where."""
    _checked_text(text, where)
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        if "://" in text:
            return None
        raise ConfigError(f"{show(text)} is not a valid requirement (PEP 508/440): {_one_line(exc)}{_meant(text)}",
                          where=where) from None


def infer(directory: Path, config_path: Path | None, flags: dict[str, Any], *, strict: bool = False,
          dockerfile: bool = False, with_launcher: bool = False, prefer: Sequence[tuple[str, str]] = (),
          module: str | None = None, legacy_gpu: str | None = None, run_hooks: bool = False) -> Inferred:
    """What the directory says about the keys neither the config file nor a flag sets. A framework pin in
    the requirements that disagrees with the config's (or --framework): exit 2 naming both. strict: an
    import that no declared requirement covers exits 2 instead of being added. dockerfile: the directory's
    own Dockerfile is built as it is, so nothing else is inferred. prefer: (NAME==VERSION, why) the releases a
    legacy runtimeVersion ran, each taken where the trainer's requirements and imports leave that release open (an import
    nothing declares gets it as its pin); (NAME, why) where the runtime shipped NAME in a release not recorded. module: the
    legacy file's pythonModule, the trainer where the config names none. legacy_gpu: the GPUs a legacy job's master
    asks for ("NVIDIA_TESLA_T4 x1"), refused beside a CPU-only framework build unless a flag sets gpu or accelerator.
    run_hooks: a computed install_requires is read by running the trainer's metadata hook in a container; without it
    (a dry run) nothing of the trainer runs and Inferred.metadata says "not computed"."""
    raw, _ = load_raw(config_path, directory)
    config_file = config_path or find_config(directory)
    if dockerfile:
        found = _dockerfile(directory)
        if found is None:
            raise ConfigError(f"there is no Dockerfile (or Containerfile) in {show(str(directory))} to build as it is",
                              field="--dockerfile")
        launcher = ("the launcher (accelerator checks, cluster set-up) is added in front of its own ENTRYPOINT/CMD"
                    if with_launcher else "the image has no buildkit-py launcher (accelerator checks, cluster set-up; "
                    "--with-launcher adds it); the trainer runs as the Dockerfile's ENTRYPOINT/CMD says")
        return Inferred(directory.resolve(), config_file, notes=(f"building {found} as it is: nothing is inferred; {launcher}",),
                        dockerfile=found)
    given = set(raw.data) | {k for k, v in flags.items() if v is not None}
    where_set = {k: ("--" + k.replace("_", "-") if k in flags and flags[k] is not None else str(config_file))
                 for k in given}
    overrides: dict[str, Any] = {}
    notes: list[str] = []
    trainer = None
    from_python = None  # the Python a training Dockerfile's FROM names
    if "trainer" not in given and module is not None:  # the legacy file's pythonModule: the module its job ran
        if not _module_file(directory, module):
            raise ConfigError(f"{show(module)} (trainingInput.pythonModule) is not a module in {show(str(directory))}: no "
                              f"{show(module.replace('.', '/') + '.py')} there; give the trainer directory the legacy job "
                              "packaged, or --module", field="--from-aiplatform")
        overrides["trainer"], trainer = {"module": module}, f"module {module} (trainingInput.pythonModule)"
    # Declared: the trainer's own package (what gcloud's `pip install .` installed), its console scripts a trainer.
    own_package = _declared(directory, run_hooks)
    if "trainer" not in given and module is None:
        overrides["trainer"], trainer, said, from_dockerfile = _trainer(directory, own_package.entry_points or {})
        notes += said
        if from_dockerfile is not None:
            from_python = from_dockerfile.python
            notes += _from_dockerfile(from_dockerfile, given, overrides)
    matrix = load_matrix()

    # Declared: the requirements file.
    package, declared = own_package.name, own_package.deps
    own = canonicalize_name(package) if package else None
    notes += own_package.notes
    requirements = raw.data.get("requirements") if isinstance(raw.data.get("requirements"), str) else None
    lock = found_in(directory)
    if "requirements" not in given and (directory / REQUIREMENTS).is_file():
        requirements = REQUIREMENTS
        if lock:
            notes.append(f"{lock} is here too: the image installs {REQUIREMENTS}; `requirements: {lock}` installs exactly "
                         "the lock's packages instead")
    elif "requirements" not in given and lock:
        requirements = lock
    if requirements and is_lock_file(requirements) and (directory / requirements).is_file():
        # Another tool's lock: its pins (for the default Python: the plan exports them for the image's) decide the
        # framework; what the project file declares is in the lock.
        pins = locked(directory, requirements, matrix.distros.default_python, str(flags.get("platform") or
                                                                                   raw.data.get("platform") or
                                                                                   "linux/amd64"))
        read = _RequirementsFile(tuple((p.requirement, p.where) for p in pins), (), None, ())
        if declared:
            notes.append(f"the trainer package's dependencies are installed as {requirements} locks them")
            declared = []
        notes.append(f"{requirements}: the image installs exactly the {len(pins)} packages it locks (hashes checked)")
    else:
        read = _read_requirements(directory, requirements) if requirements and (directory / requirements).is_file() else None
    # Names known not to install (base_images/requirement_names.yaml) are replaced, each said; the file's own lines
    # cannot be changed in the copied file, so a file with one joins the config's pip entries, as `-e .` does.
    bad_names = _bad_names()
    declared, said = _renamed(bad_names, declared)
    notes += said
    renamed_lines, said = _renamed(bad_names, list(read.lines) if read else [])
    notes += said
    renamed = [w for (t, w), (new, _) in zip(read.lines if read else (), renamed_lines, strict=True) if t != new]
    if read is not None and renamed and "requirements" in given:
        raise ConfigError(f"{show(requirements)} ({where_set['requirements']}) names a distribution that cannot be "
                          f"installed ({renamed[0]}: {said[0]}); the file is copied into the image as it is: fix the line",
                          field="requirements")
    if read is not None:
        read = replace(read, lines=tuple(renamed_lines))
    sources = [Source(t, w) for t, w in (read.lines if read else ())] + [Source(t, w) for t, w in declared]
    extra: list[tuple[str, str]] = list(declared)  # what autopackage adds to `pip`
    if read is not None and (read.installs_self or read.included or renamed):
        what = (f"installs the trainer itself ({read.installs_self})" if read.installs_self
                else f"includes {', '.join(read.included)}" if read.included
                else f"names a distribution that cannot be installed ({', '.join(renamed[:3])})")
        if "requirements" in given:
            raise ConfigError(f"{show(requirements)} ({where_set['requirements']}) {what}, which the image's install of "
                              "the file, copied alone, cannot do; leave `requirements` unset and autopackage installs its "
                              "requirements and the trainer's declared dependencies", field="requirements")
        if read.hashed:  # the config's pip entries are install arguments, which take no hashes
            raise ConfigError(f"the line asks for hash checking (--hash, --require-hashes), and {show(requirements)} "
                              f"{what}: its lines would join the config's pip entries, which carry no hashes; keep the "
                              "hash-pinned requirements in a file without `-e .` or `-r` (the image installs such a file "
                              "as it is, hashes checked: `requirements:` in buildkit.yaml), or pin the image's packages "
                              "with `buildkit-py lock`",
                              where=read.hashed)
        if read.installs_self and package is None:
            raise ConfigError(f"{read.installs_self}: the line installs the trainer directory as a package, but it has no "
                              "setup.py, setup.cfg or pyproject.toml [project] to install", where=str(directory))
        pypi = [(o, v, w) for o, v, w in read.options if o in ("-i", "--index-url") and _PYPI_INDEX.fullmatch(v)]
        notes += [f"{w}: {o} {v} is PyPI's own index, which the image installs from by default: the line is dropped"
                  for o, v, w in pypi]
        kept = [o for o in read.options if o not in pypi]
        if kept:
            option, value, where = kept[0]
            raise ConfigError(f"{show(option + ' ' + value)}: a requirements file that {what.split(' (')[0]} is installed "
                              "through the config's `pip` entries, which take no index options; give the index with "
                              "pip_index_url (or --pip-index-url), or a pip_conf file for several", where=where)
        extra = list(read.lines) + extra
        notes.append(f"{requirements} {what}: its requirements join the config's pip entries, since the file, copied "
                     "into the image alone, cannot be installed as it is")
    elif read is not None and "requirements" not in given:
        overrides["requirements"] = requirements
    if package:
        extra = [(t, w) for t, w in extra if not (_parses(t) and canonicalize_name(Requirement(t).name) == own)]
        notes.append(_own_package(own_package, given, where_set, overrides))
    if own_package.compiled and "build_extensions" not in given:
        overrides["build_extensions"] = True
        notes.append(f"the trainer package has compiled parts ({own_package.compiled}): copying its source cannot work, so "
                     "they are built as `pip install .` builds them, in a stage of their own (build_extensions: true), "
                     "and the compiled modules are copied beside its code; a code edit takes the full build, which "
                     "rebuilds them")
    parsed = [(s.source, r) for s in sources if (r := _requirement(s.requirement, s.source)) is not None]
    parsed = [(w, r) for w, r in parsed if canonicalize_name(r.name) != own]

    # Imported, not declared.
    trainer_value = overrides.get("trainer") or flags.get("trainer") or raw.data.get("trainer")
    script = trainer_value.get("script") if isinstance(trainer_value, dict) else None
    script_dir = script.rsplit("/", 1)[0] if isinstance(script, str) and "/" in script else None
    package_dir = trainer_value.get("package_dir") if isinstance(trainer_value, dict) else None
    package_dir = package_dir if isinstance(package_dir, str) else None
    code = _read_code(directory)
    scan = _scan_imports(directory, code, script_dir, package_dir)
    module = trainer_value.get("module") if isinstance(trainer_value, dict) else None
    entry = script if isinstance(script, str) else (f"{package_dir}/" if package_dir else "") + module.replace(".", "/") \
        + ".py" if isinstance(module, str) else None
    if entry in code.unparsed and code.unparsed[entry].startswith(too_deep(PYTHON_NESTING)):
        raise ConfigError(f"{show(entry)}, the trainer's entry point: {code.unparsed[entry]}; Python cannot run it "
                          "either", where=str(directory / entry))
    if entry in code.unparsed:  # the job would die at its first line: no image is worth building
        raise ConfigError(f"{show(entry)}, the trainer's entry point, does not parse as Python 3 ({code.unparsed[entry]}): "
                          "Python 2 code must be ported before an image can run it (2to3 or "
                          "python-modernize, then `buildkit-py run` to try it)", where=str(directory / entry))
    imported, unknown = scan.found, scan.unknown
    notes += scan.notes
    # What the build's import check will import: the entry point's import closure, each with what provides it.
    reached = closure(module if isinstance(module, str) else None, script if isinstance(script, str) else None,
                      code.listed, code.trees.get, import_names(), package_dir=package_dir).needed
    declared_names = {canonicalize_name(r.name) for _, r in parsed} | {canonicalize_name(t) for t in _config_pip(raw)}
    configured_text = str(flags.get("framework") or raw.data.get("framework") or "")
    configured_fw = matrix.framework(configured_text.partition("==")[0])
    for w, r in parsed:  # a framework declared by another of its names (tensorflow-gpu==2.3.0) declares its import
        fw_name = _framework_of(matrix, r)
        fw = matrix.framework(fw_name) if fw_name else None
        if fw is None:
            continue
        names = {canonicalize_name(n) for n in (fw.name, fw.package) if n}
        declared_names |= names
        if canonicalize_name(r.name) not in names:
            matched = [s for s in fw.series if any(r.specifier.contains(x, prereleases=True) for x in s.releases)]
            builds = [fw.gpu_series(s) for s in matched]
            replaced = bool(matched) and all(b is not None and r.name in b.replaces for b in builds)
            notes.append(f"{w}: {r.name} is another distribution name of {fw.name}: the image's framework is {fw.name}, "
                         f"and the line, where it is installed as written, adds {r.name} beside it (the same code twice; "
                         f"tensorflow-gpu has no release after 2.11); write {fw.name}{r.specifier} instead"
                         + (f" (a GPU image installs {builds[0].install.package} in their place and leaves the line "
                            "out)" if replaced else ""))
    if configured_fw is not None:  # the config's framework is installed: its import is declared
        declared_names |= {canonicalize_name(n) for n in (configured_fw.name, configured_fw.package)}
    if raw.data.get("hypertune", True) is not False:
        declared_names.add(canonicalize_name(matrix.tools.hypertune_requirement.partition("==")[0]))
    missing = {d: w for d, w in sorted(imported.items())
               if canonicalize_name(d) not in declared_names and canonicalize_name(d) != own}
    # A library that runs on a framework it does not install (Keras 3): with no framework declared or imported, its
    # default backend is the framework, or the image dies at its import.
    table = import_names()
    backend_of = None  # the framework added as a library's backend
    frameworks = [r for _, r in parsed if _framework_of(matrix, r)] + [d for d in missing if _framework_of(matrix, Requirement(d))]
    if not frameworks and "framework" not in given and not configured_fw:
        for lib, backend in table.backends.items():
            where = imported.get(lib) or next((w for w, r in parsed if canonicalize_name(r.name) == lib), None)
            if where:
                missing[backend] = f"{lib} runs on a backend it does not install: {where}"
                backend_of = backend
                break
    if strict and (missing or unknown):
        listed = [f"{d} ({w})" for d, w in missing.items()] + [f"{n} ({w}: no known distribution)" for n, w in unknown.items()]
        raise ConfigError("the trainer imports what its requirements do not declare: " + "; ".join(listed)
                          + "; add them to requirements.txt (or the config's pip)", field="--strict")
    python = flags.get("python") or raw.data.get("python")
    hint = None if python else _python_hint(directory, own_package, from_python, matrix)
    if hint is not None:
        python, where = hint
        overrides["python"] = python
        where_set["python"] = where
        notes.append(f"Python {python}: what {where} asks for")
    # Removed APIs (base_images/removed_apis.yaml): a framework the requirements leave open gets the newest
    # release that still has what the code calls; an exact pin is kept, and the note names the call that breaks.
    removed = removed_uses(code.trees)
    limits = [(f"{u.where} uses {u.api.api} (removed in {u.api.removed_in})", Requirement(f"{u.api.framework}<{u.api.removed_in}"))
              for u in removed]
    runtime_pins = {canonicalize_name(pin.partition("==")[0]): (pin, why) for pin, why in prefer}
    found = parsed + [(w, Requirement(d)) for d, w in missing.items()]
    deciding = _by_framework(matrix, found)
    deciding_name = _deciding(deciding) if deciding else None
    if python is None:  # a plain import the legacy runtime gave a release of: the oldest Python an image can have with
        # it, and that some release of the deciding framework has (on a GPU image, one an nvidia/cuda image can have)
        framework = matrix.framework(deciding_name) if deciding_name else None
        also = {p for s in framework.series for p in usable_python(matrix, s)} if framework else None
        asked = flags.get("gpu") if flags.get("gpu") is not None else raw.data.get("gpu")
        if asked is True or (asked is None and framework is not None and framework.gpu):
            also = {p for p in also if gpu_python(matrix, p)} if also is not None else None
        python = next((fits[0] for d in missing if _framework_of(matrix, Requirement(d)) != deciding_name
                       and "==" in (ran := runtime_pins.get(canonicalize_name(d), ("",)))[0]
                       and (fits := [p for p in _release_pythons(matrix, ran[0]) if also is None or p in also])), None)
        if python is not None:
            overrides["python"] = python
    choice = _pin(matrix, found,
                  str(python) if python is not None else None, limits, prefer)
    fits = _release_pythons(matrix, choice.pin) if hint is not None and choice is not None and "==" in choice.pin else []
    if fits and python not in fits:
        raise ConfigError(f"{hint[1]} asks for Python {python}, and {choice.pin} ({choice.where}) has wheels for Python "
                          f"{', '.join(fits)}: make them agree (or pass --python)", field="python")
    chosen = choice.pin.partition("==")[0] if choice else None
    if chosen and (cpu := _cpu_only(matrix, chosen, parsed, read.options if read else ())):
        flagged = {k for k, v in flags.items() if v is not None}
        gpu_value = flags.get("gpu") if "gpu" in flagged else raw.data.get("gpu")
        accelerator = flags.get("accelerator") if "accelerator" in flagged else raw.data.get("accelerator")
        asked = (f"gpu: true ({where_set['gpu']})" if gpu_value is True else
                 f"accelerator {accelerator} ({where_set['accelerator']})"
                 if isinstance(accelerator, str) and not accelerator.upper().startswith("TPU") else
                 f"the legacy job's {legacy_gpu}" if legacy_gpu and not {"gpu", "accelerator"} & flagged else None)
        if asked:
            raise ConfigError(f"{cpu[0]}, but {asked} asks for a GPU, which that build cannot use; declare {chosen} "
                              "itself (its GPU build) to train on the GPU, or drop the GPU for a CPU job",
                              field="framework")
        if "gpu" not in given:
            overrides["gpu"] = False
            notes.append(f"{'; '.join(cpu)}: the image is built for CPU (gpu: false; base_images/cpu_builds.yaml)")
    for dist, where in missing.items():
        sources.append(Source(dist, where))
        if dist == chosen and "framework" not in given:
            notes.append(f"{dist} is the framework: {where}, by default on {dist}" if dist == backend_of
                         else f"{dist} is imported ({where}) but not declared: it is the framework")
            continue
        ran = runtime_pins.get(canonicalize_name(dist))
        unpinned = None  # why the runtime's release of the import is not the image's
        if ran and "==" in ran[0]:  # the release the legacy runtime gave the import, where the image's Python has it
            if str(python) in _release_pythons(matrix, ran[0]):
                extra.append((ran[0], where))
                notes.append(f"{dist} is imported ({where}) but not declared: added to the image's packages as "
                             f"{ran[0]}, {ran[1]}" + (f" (on Python {python}, which its wheels support)"
                                                      if overrides.get("python") == python else ""))
                continue
            unpinned = (f"{ran[1]}, which has no wheels for Python {python} in the version data (buildkit-py versions "
                        f"{dist}): {dist} is added unpinned")
        elif ran:
            unpinned = (f"{ran[1]}: which {dist} release it had is not recorded (base_images/aiplatform_runtimes.yaml); "
                        "pin the one the trainer's saved models need in requirements.txt")
        extra.append((dist, where))
        notes.append(f"{dist} is imported ({where}) but not declared: added to the image's packages")
        notes += [unpinned] if unpinned else []
    checked = {n.module.split(".")[0] for n in reached}
    for name, where in sorted(unknown.items()):
        fate = ("the build's import check stops there unless a requirement installs it" if name.split(".")[0] in checked
                else "the image may fail at that import")
        notes.append(f"{name} is imported ({where}), and no declared requirement or known distribution provides it "
                     f"(base_images/import_names.yaml): {fate}; add its distribution to requirements.txt (--strict "
                     "refuses this)")

    pip = list(dict.fromkeys(t for t, _ in extra))
    if pip and "pip" in given:
        listed = {canonicalize_name(Requirement(t).name) for t in _config_pip(raw)}
        left = [t for t in pip if not _parses(t) or canonicalize_name(Requirement(t).name) not in listed]
        if left:
            notes.append(f"the config sets pip ({where_set['pip']}), so these requirements found here are not installed: "
                         f"{', '.join(left)}; add them to it")
        pip = []
    elif pip:
        overrides["pip"] = pip

    framework = framework_from = reason = None
    if choice is not None:
        framework, framework_from, reason = choice.pin, choice.where, choice.reason
        notes += [*choice.notes, *([reason] if reason else [])]
        ran = runtime_pins.get(canonicalize_name(chosen))
        if ran and "==" not in ran[0] and not any(x.operator in ("==", "===") for x in choice.spec):
            notes.append(f"{ran[1]}: which {chosen} release it had is not recorded (base_images/aiplatform_runtimes.yaml); "
                         f"building {framework}: pin the one the trainer's saved models need in requirements.txt")
        if "framework" in given:
            version = configured_text.partition("==")[2]
            if configured_fw is not None and configured_fw.name != chosen:
                notes.append(f"framework {configured_text} ({where_set['framework']}) is kept; {framework} "
                             f"({framework_from}) is installed from the requirements on top of it")
            elif version and _parses(f"x=={version}") and not choice.spec.contains(version, prereleases=True):
                declared_as = f"{chosen}{choice.spec}" if len(choice.spec) != 1 else framework
                raise ConfigError(f"conflicting framework pins: {show(configured_text)} ({where_set['framework']}) and "
                                  f"{show(declared_as)} ({framework_from}); make them agree", field="framework")
        else:
            overrides["framework"] = framework
    effective = configured_text if "framework" in given else framework
    if effective:  # the release the image gets, where it lacks what the code calls
        name, _, version = effective.partition("==")
        known_fw = matrix.framework(name)
        notes += removed_notes(tuple(u for u in removed if known_fw and u.api.framework == known_fw.name and (
            not _parses(f"x=={version}") or not version or Version(version) >= Version(u.api.removed_in))))
    # A framework installed as a plain requirement beside the chosen one (scikit-learn beside tensorflow) gets the
    # release its line asks for: the note names the call unless an exact pin predates the removal.
    chosen_fw = matrix.framework(effective.partition("==")[0]) if effective else None
    plain = parsed + [(w, Requirement(d)) for d, w in missing.items()]
    for use in removed:
        if chosen_fw is not None and use.api.framework == chosen_fw.name:
            continue
        lines = [r for _, r in plain if _framework_of(matrix, r) == use.api.framework]
        exact = [Version(x.version) for r in lines for x in r.specifier if x.operator == "==" and "*" not in x.version]
        if lines and not (exact and all(v < Version(use.api.removed_in) for v in exact)):
            notes += removed_notes((use,))
    dockerfile = _dockerfile(directory)
    if dockerfile:
        notes.append(f"{dockerfile} in the trainer directory is not used: autopackage renders its own Dockerfile; "
                     f"pass --dockerfile to build {dockerfile} as it is instead")
    others = _other_dockerfiles(directory)
    if others:
        notes.append(f"{len(others)} other Dockerfile(s) here are not used: {', '.join(map(shown_name, others[:5]))}"
                     f"{' ...' if len(others) > 5 else ''}; autopackage renders its own Dockerfile (--dockerfile builds "
                     "only a Dockerfile at the directory's top, as it is)")
    return Inferred(directory.resolve(), config_file, trainer, requirements, tuple(pip), framework, framework_from,
                    tuple(notes), tuple(overrides.items()), tuple(sources), package, reason, dockerfile, reached,
                    own_package.metadata)


def _parses(text: str) -> bool:
    try:
        Requirement(text)
    except InvalidRequirement:
        return False
    return True


def _config_pip(raw) -> list[str]:
    pip = raw.data.get("pip")
    return [p for p in pip if isinstance(p, str) and _parses(p)] if isinstance(pip, list) else []


def config_text(inferred: Inferred) -> str:
    """buildkit.yaml for --write-config: what was inferred, as config keys."""
    import yaml

    header = "# Written by `autopackage --write-config` from what it inferred; edit freely.\n"
    return header + yaml.safe_dump(dict(inferred.overrides), sort_keys=False)
