"""What the trainer's code imports, read once from the files the image gets (AST, nothing executed): the distributions
its imports need that no requirement declares (added to the image's packages, or refused with --strict), the imports no
known distribution provides, what the build's import check imports, and the calls of framework APIs that later
releases removed. Python 2 code is said, not refused, unless it is the entry point."""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..catalog.matrix import Matrix
from ..errors import ConfigError, show, shown_name
from ..fsutil import PYTHON_NESTING, parse_python, read_text, too_deep
from ..sources.imports import Needed, closure, import_names, statements
from .api_usage import RemovedUse, removed_uses
from .frameworks import declared_frameworks, framework_of
from .given import Given
from .layout import MAX_SCANNED, TEST_FILE, Python
from .legacy import imported_release
from .requirements import Requirements, Source, config_pip


@dataclass(frozen=True)
class _Scan:
    """What the trainer's imports need: the distributions found, the imports no known distribution provides, notes."""

    found: dict[str, str]  # distribution -> first place it is imported
    unknown: dict[str, str]  # import without a known distribution -> first place
    notes: tuple[str, ...]  # Python 2 code: files that do not parse, implicit relative imports


@dataclass(frozen=True)
class _Code:
    """The trainer's Python files, read and parsed once (AST, nothing executed) for the import scan and the removed-API
    scan: the .py files the image gets (the build context's ignore rules), tests and every setup.py left out (the job
    never runs them), at most MAX_SCANNED."""

    listed: tuple[str, ...]  # every file the image gets
    trees: dict[str, ast.AST]  # .py file -> its module
    unparsed: dict[str, str]  # .py file -> "line N: why", for each that does not parse as Python 3


def _read_code(directory: Path) -> _Code:
    # up: the files the build context gets are the render stage's .dockerignore (a template) applied by the walk
    from ..pipeline.render import render_project_dockerignore
    from ..sources.walk import included_files

    listed = tuple(included_files(directory, render_project_dockerignore(directory)))
    # A setup.py anywhere (src/setup.py beside the package) builds the package; the job never runs it.
    files = [f for f in listed if f.endswith(".py") and not TEST_FILE.search(f) and f.rsplit("/", 1)[-1] != "setup.py"]
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


@dataclass(frozen=True)
class Imports:
    """What the code imports that the requirements leave out, and what the build's import check imports."""

    missing: dict[str, str]  # distribution -> where it is imported (or whose backend it is), declared nowhere
    unknown: dict[str, str]  # import without a known distribution -> where
    backend: str | None  # the framework added as a library's backend (Keras 3 imported alone)
    reached: tuple[Needed, ...]  # the entry point's import closure, each with what provides it
    removed: tuple[RemovedUse, ...]  # calls of framework APIs that later releases removed
    notes: tuple[str, ...]


def undeclared_imports(directory: Path, given: Given, trainer: Any, declared: Requirements, own: str | None,
                       matrix: Matrix, strict: bool) -> Imports:
    """The code's imports against what is declared: the requirements, the config's pip entries and framework, and
    hypertune. An entry point that does not parse, or (strict) an import nothing declares: exit 2."""
    script = trainer.get("script") if isinstance(trainer, dict) else None
    script_dir = script.rsplit("/", 1)[0] if isinstance(script, str) and "/" in script else None
    package_dir = trainer.get("package_dir") if isinstance(trainer, dict) else None
    package_dir = package_dir if isinstance(package_dir, str) else None
    code = _read_code(directory)
    scan = _scan_imports(directory, code, script_dir, package_dir)
    module = trainer.get("module") if isinstance(trainer, dict) else None
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
    table = import_names()
    # What the build's import check will import: the entry point's import closure, each with what provides it.
    reached = closure(module if isinstance(module, str) else None, script if isinstance(script, str) else None,
                      code.listed, code.trees.get, table, package_dir=package_dir).needed
    parsed = declared.parsed
    framework_names, said = declared_frameworks(matrix, parsed)
    declared_names = ({canonicalize_name(r.name) for _, r in parsed} | {canonicalize_name(t) for t in config_pip(given)}
                      | framework_names)
    configured = matrix.framework(given.framework.partition("==")[0])  # as infer finds it: given and matrix tell it
    if configured is not None:  # the config's framework is installed: its import is declared
        declared_names |= {canonicalize_name(n) for n in (configured.name, configured.package)}
    if given.data.get("hypertune", True) is not False:
        declared_names.add(canonicalize_name(matrix.tools.hypertune_requirement.partition("==")[0]))
    missing = {d: w for d, w in sorted(imported.items())
               if canonicalize_name(d) not in declared_names and canonicalize_name(d) != own}
    # A distribution the table does not know is found by its own name: `import nlp` beside `nlp==0.4.0`,
    # `import pyvirtualdisplay` beside `PyVirtualDisplay`, as nearly every distribution names its module.
    unknown = {n: w for n, w in unknown.items() if canonicalize_name(n.split(".")[0]) not in declared_names}
    # A library that runs on a framework it does not install (Keras 3): with no framework declared or imported, its
    # default backend is the framework, or the image dies at its import.
    backend_of = None  # the framework added as a library's backend
    frameworks = [r for _, r in parsed if framework_of(matrix, r)] + [d for d in missing if framework_of(matrix, Requirement(d))]
    if not frameworks and "framework" not in given and not configured:
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
    return Imports(missing, unknown, backend_of, reached, removed_uses(code.trees), (*scan.notes, *said))


@dataclass(frozen=True)
class Added:
    """What the image gets for the imports nothing declares."""

    sources: tuple[Source, ...]
    pip: tuple[tuple[str, str], ...]  # (requirement, where) to add to the config's pip entries
    notes: tuple[str, ...]


def added_imports(matrix: Matrix, given: Given, imports: Imports, chosen: str | None, python: Python,
                  runtime: Mapping[str, tuple[str, str]]) -> Added:
    """Each import nothing declares added to the image's packages (the framework that decides the base aside), at the
    release the legacy runtime gave it where the image's Python has that; a note on each import no known distribution
    provides."""
    sources, pip, notes = [], [], []
    for dist, where in imports.missing.items():
        sources.append(Source(dist, where))
        if dist == chosen and "framework" not in given:
            notes.append(f"{dist} is the framework: {where}, by default on {dist}" if dist == imports.backend
                         else f"{dist} is imported ({where}) but not declared: it is the framework")
            continue
        pin, why = imported_release(matrix, runtime, dist, python)
        if pin is not None:
            pip.append((pin, where))
            notes.append(f"{dist} is imported ({where}) but not declared: added to the image's packages as {pin}, {why}")
            continue
        pip.append((dist, where))
        notes.append(f"{dist} is imported ({where}) but not declared: added to the image's packages")
        notes += [why] if why else []
    checked = {n.module.split(".")[0] for n in imports.reached}
    for name, where in sorted(imports.unknown.items()):
        fate = ("the build's import check stops there unless a requirement installs it" if name.split(".")[0] in checked
                else "the image may fail at that import")
        notes.append(f"{name} is imported ({where}), and no declared requirement or known distribution provides it "
                     f"(base_images/import_names.yaml): {fate}; add its distribution to requirements.txt (--strict "
                     "refuses this)")
    return Added(tuple(sources), tuple(pip), tuple(notes))
