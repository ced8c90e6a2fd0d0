"""The trainer's imports, read with `ast` (nothing executed): the import statements of a module, the distribution
that provides an import name (base_images/import_names.yaml), and the import closure of the trainer's entry point,
the third-party modules the build's import check imports in the image (buildkit_launcher.imports).

Inference (autopackage) reads every file the image gets for what the requirements leave out; the build's check takes
only what the entry point reaches (its own modules followed, transitively), since a helper script the job never runs
must not stop the build.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildError, ConfigError, ImportCheckError, shown_name
from ..fsutil import parse_python
from ..launcher.constants import IMPORT_CHECKING_MARKER, IMPORT_FAILED_MARKER, IMPORTS_CONTEXT_FILE
from ..patterns import lazy_pattern

# An import inside `try:` whose handler catches one of these is optional: the code runs without it.
_CAUGHT = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


@dataclass(frozen=True)
class ImportNames:
    """import_names.yaml: each import name's distribution, Python 2 modules' Python 3 names, and default backends."""

    names: dict[str, str]  # import name (dotted) -> distribution
    same: frozenset[str]  # import names that are their distribution's name
    python2: dict[str, str]  # Python 2 standard-library module -> the Python 3 module that replaces it
    backends: dict[str, str]  # distribution -> the framework it runs on by default without installing it

    def distribution(self, name: str) -> str | None:
        """The distribution of a dotted import name: the longest prefix in the table's names, else a top-level
        name that is its distribution's."""
        parts = name.split(".")
        for n in range(len(parts), 0, -1):
            if ".".join(parts[:n]) in self.names:
                return self.names[".".join(parts[:n])]
        return parts[0] if parts[0] in self.same else None


def import_names() -> ImportNames:
    from ..catalog.resources import read_data, resource_dir

    data = read_data(resource_dir("base_images") / "import_names.yaml", "base_images/import_names.yaml")
    return ImportNames(dict(data["names"]), frozenset(data["same"]), dict(data["python2"]), dict(data["backends"]))


@dataclass(frozen=True)
class Statement:
    """One import statement: `import a.b` is (a.b, (), 0); `from .x import y, z` is (x, (y, z), 1)."""

    module: str  # "" for `from . import y`
    names: tuple[str, ...]
    level: int
    line: int

    @property
    def text(self) -> str:
        if not self.names and not self.level:
            return f"import {self.module}"
        shown = ", ".join(self.names[:3]) + (", ..." if len(self.names) > 3 else "")
        return f"from {'.' * self.level}{self.module} import {shown}"


def _optional(handlers: list[ast.ExceptHandler]) -> bool:
    for h in handlers:
        types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        if h.type is None or any(isinstance(t, ast.Name) and t.id in _CAUGHT for t in types):
            return True
    return False


def _type_checking(test: ast.AST) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


# A branch on the interpreter or the OS (`if sys.version_info < (3, 8): import importlib_metadata`, `if sys.platform ==
# "win32": import winreg`): either side may be the one that never runs in the image, so neither is required.
_INTERPRETER = {("sys", "version_info"), ("sys", "version"), ("sys", "platform"), ("sys", "implementation"),
                ("os", "name"), ("platform", "system"), ("platform", "python_version"), ("platform", "machine")}


def _on_interpreter(test: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and (n.value.id, n.attr) in _INTERPRETER
               for n in ast.walk(test))


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")  # the fields of a node that hold statements


def statements(tree: ast.AST) -> Iterator[Statement]:
    """Each import the module may run, in no particular order: those guarded by `except ImportError` (the code runs
    without them), under `if TYPE_CHECKING:` (never at run time) and in a branch on the interpreter's version or the OS
    left out."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            yield from (Statement(alias.name, (), 0, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield Statement(node.module or "", tuple(a.name for a in node.names if a.name != "*"), node.level, node.lineno)
        elif isinstance(node, ast.Try):
            stack += [] if _optional(node.handlers) else node.body
            stack += [child for part in (node.handlers, node.orelse, node.finalbody) for child in part]
        elif isinstance(node, ast.If) and _type_checking(node.test):
            stack += node.orelse
        elif isinstance(node, ast.If) and _on_interpreter(node.test):
            continue
        else:  # imports are statements: only the blocks of statements are walked, not the expressions (most nodes)
            stack += [child for name in _BLOCKS for child in getattr(node, name, ())]


@dataclass(frozen=True)
class Needed:
    """A third-party module the trainer's entry point reaches, as the check imports it."""

    module: str
    names: tuple[str, ...]  # `from module import names`: a name that is no attribute is imported as a submodule
    where: str  # the first place it is imported, "trainer/task.py:4"
    distribution: str | None  # what provides it (import_names.yaml); None: no known distribution

    def to_dict(self) -> dict:
        return {"module": self.module, "names": list(self.names), "where": self.where, "provides": self.distribution}


@dataclass(frozen=True)
class ImportSet:
    """The import check's modules: what the build writes into the context (IMPORTS_CONTEXT_FILE) and, for its error
    messages, where each is imported."""

    needed: tuple[Needed, ...]

    def file_bytes(self) -> bytes:
        """The check's input: modules and names only, sorted, so that the layer changes when the imports do, not
        when a line moves."""
        return json.dumps([[n.module, sorted(n.names)] for n in self.needed], separators=(",", ":")).encode() + b"\n"

    def find(self, module: str) -> Needed | None:
        return next((n for n in self.needed if n.module == module), None)


def _module_files(module: str, root: str, files: frozenset[str]) -> list[str] | None:
    """The files `import module` runs from a sys.path entry `root` (relative, "" the top): each package's __init__.py
    on the way and the module itself; None when the top-level name is not in `root` (a namespace package is, with no
    file to run)."""
    parts = module.split(".")
    prefix = f"{root}/" if root else ""
    top = prefix + parts[0]
    if f"{top}.py" not in files and not any(f.startswith(top + "/") for f in files):
        return None
    found = []
    for i in range(1, len(parts) + 1):
        path = prefix + "/".join(parts[:i])
        for candidate in (f"{path}/__init__.py", f"{path}.py"):
            if candidate in files:
                found.append(candidate)
                break
    return found


def entry_file(module: str | None, script: str | None, files: frozenset[str], package_dir: str | None = None) -> list[str]:
    """The files the trainer's command runs first: the script, or the module's (with its packages' __init__.py, and a
    package's __main__.py), at the top or in the packages' folder."""
    if script is not None:
        return [script] if script in files else []
    if module is None:
        return []
    for root in ([package_dir] if package_dir else []) + [""]:
        found = _module_files(module, root, files)
        if found is not None:
            main = (f"{root}/" if root else "") + module.replace(".", "/") + "/__main__.py"
            return found + ([main] if main in files else [])
    return []


def closure(module: str | None, script: str | None, files: Iterable[str], parse: Callable[[str], ast.AST | None],
            table: ImportNames, *, package_dir: str | None = None) -> ImportSet:
    """The third-party modules the trainer's entry point reaches: its imports, and those of each of the trainer's own
    modules it imports, transitively. `parse` gives a file's module, or None where it does not parse (Python 2 code,
    said by inference). Left out as inference leaves them: the standard library, Python 2's renamed modules and
    implicit relative imports (said, not refused), and imports naming the trainer's own modules."""
    listed = frozenset(f for f in files if f.endswith(".py") and not f.startswith(".buildkit-py/"))
    script_dir = script.rpartition("/")[0] if script and "/" in script else None
    # A script's folder is first on its sys.path; PYTHONPATH holds the packages' folder (a src layout), then the top.
    roots = ([script_dir] if script_dir else []) + ([package_dir] if package_dir else []) + [""]
    stdlib = frozenset(sys.stdlib_module_names)
    queue = entry_file(module, script, listed, package_dir)
    seen = set(queue)
    needed: dict[str, tuple[set[str], str]] = {}

    def own(name: str) -> list[str] | None:
        for root in roots:
            found = _module_files(name, root, listed)
            if found is not None:
                return found
        return None

    def follow(paths: Iterable[str]) -> None:
        for path in paths:
            if path not in seen:
                seen.add(path)
                queue.append(path)

    while queue:
        rel = queue.pop(0)
        tree = parse(rel)
        if tree is None:
            continue
        folder = package = rel.rpartition("/")[0]
        for st in sorted(statements(tree), key=lambda s: s.line):
            if st.level:  # relative: the trainer's own package
                base = package.split("/") if package else []
                base = base[:len(base) - (st.level - 1)] if st.level > 1 else base
                target = "/".join(base + (st.module.split(".") if st.module else []))
                names = [f"{target}/{n}" if target else n for n in st.names] + ([target] if target else [])
                follow(f for n in names for f in (f"{n}.py", f"{n}/__init__.py") if f in listed)
                continue
            top = st.module.split(".")[0]
            if not top or top in stdlib or top == "__future__" or top in table.python2:
                continue
            mine = own(st.module)
            if mine is not None:
                follow(mine)
                follow(f for sub in st.names for f in (own(f"{st.module}.{sub}") or ()))
                continue
            if folder and folder != script_dir and (f"{folder}/{top}.py" in listed or f"{folder}/{top}/__init__.py" in listed):
                continue  # Python 2's implicit relative import: inference says so
            names, _ = needed.setdefault(st.module, (set(), f"{shown_name(rel)}:{st.line}"))
            names.update(st.names)
    return ImportSet(tuple(Needed(m, tuple(sorted(names)), where, _provider(table, m, names))
                           for m, (names, where) in sorted(needed.items())))


def _provider(table: ImportNames, module: str, names: Iterable[str]) -> str | None:
    """The specific names first, as inference reads them: `from google.cloud import storage` is google-cloud-storage."""
    return next((d for n in sorted(names) if (d := table.distribution(f"{module}.{n}"))), None) or table.distribution(module)


_FAILED = lazy_pattern(re.escape(IMPORT_FAILED_MARKER) + r" ([A-Za-z0-9_.]+): (.*)")
_CHECKING = lazy_pattern(re.escape(IMPORT_CHECKING_MARKER) + r" ([A-Za-z0-9_.]+)")


def import_failure(exc: BuildError, imports: ImportSet | None, ubuntu: str | None) -> BuildError:
    """The build's error restated where the import check failed: each module with the file:line that imports it, the
    error's last line and the fix; any other failure as it is. ubuntu: the base's Ubuntu release (None: Debian), for
    the name of a system package to add."""
    lines = str(exc).splitlines()
    failed = [m.groups() for m in map(_FAILED.search, lines) if m]
    if imports is None or not any(_CHECKING.search(line) for line in lines):
        return exc
    if not failed:  # the process died inside an import (a crash in native code): the last module it named
        last = [m.group(1) for m in map(_CHECKING.search, lines) if m][-1]
        failed = [(last, "the image's Python died while importing it (see the output above)")]
    shown = []
    for module, error in failed[:10]:
        found = imports.find(module)
        where = f" ({found.where})" if found else ""
        shown.append(f"  {module}{where}: {error[:300]}; {_fix(module, error, found, ubuntu)}")
    more = f"\n  ... and {len(failed) - 10} more" if len(failed) > 10 else ""
    return ImportCheckError(f"the image cannot import what the trainer imports ({len(failed)} module(s)); the build "
                            "stopped before the code layer, nothing was tagged:\n" + "\n".join(shown) + more
                            + "\n(import_check: false, or --no-import-check, builds without this check)")


def _fix(module: str, error: str, found: Needed | None, ubuntu: str | None) -> str:
    from ..catalog.syslibs import library_named, system_libraries

    library = library_named(error)
    if library is not None:
        package = system_libraries().package(library, ubuntu)
        return (f"add the system package that provides {library} to system_packages"
                + (f" ({package})" if package else " (apt-file search " + library + ")"))
    if error.startswith("ModuleNotFoundError") and found is not None and found.distribution:
        return (f"no installed distribution provides it: add {found.distribution} to requirements.txt (or the "
                "config's pip)")
    if error.startswith("ModuleNotFoundError"):
        return ("no known distribution provides it (base_images/import_names.yaml): add the one that does to "
                "requirements.txt, or, if it is the trainer's own code, put it in the trainer directory")
    return ("its own import raises this in the image: pin a release of "
            + (found.distribution if found and found.distribution else "it")
            + " that supports the image's Python and framework")


def staged_imports(module: str | None, script: str | None, package_dir: str | None, directory: Path,
                   files: Iterable[str]) -> ImportSet:
    """The closure of a staged build context (`directory` holding `files`): the files are parsed from the staged
    copy, the bytes the build gets."""
    def parse(rel: str) -> ast.AST | None:
        try:
            return parse_python((directory / rel).read_bytes(), rel)
        except (SyntaxError, ValueError, OSError, ConfigError):
            return None

    return closure(module, script, files, parse, import_names(), package_dir=package_dir)


__all__ = ["IMPORTS_CONTEXT_FILE", "ImportNames", "import_failure", "ImportSet", "Needed", "Statement", "closure", "entry_file",
           "import_names", "staged_imports", "statements"]
