"""The shape of buildkit_py's imports, read with `ast` (nothing imported): no circles, and no import from a lower floor
up to a higher one, so that the house cannot knot again unnoticed (issue 30).

Every import counts, at module level or inside a function; those under `if TYPE_CHECKING:` do not (they tie nothing
at run time). An import up the floors is allowed only where its line, or the line above it, has a comment with "up:"
saying why (a lazy import that keeps start-up fast is a fair reason)."""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "buildkit_py"

# The floors, bottom to top: a module may import its own floor and those below it. Names are modules of buildkit_py
# ("__init__" is the package itself); a name stands for its submodules too, and the longest name that fits a module
# places it ("builders.names" in a floor below the other builders). Above the ground, the floors follow the data (docs/concepts.md):
# config -> plan -> render -> lock -> stage -> build or append -> push -> job, the API that composes the stages, and
# the command line.
FLOORS: list[tuple[str, set[str]]] = [
    # Imported by every floor: the version, the errors and their exit codes, flags' names, files, progress (and
    # results as HTML in notebooks), patterns compiled on first use, and the in-container launcher (standard library only).
    # (pipeline/__init__.py holds a docstring alone: its modules have floors of their own, below.)
    ("ground", {"version", "errors", "flags", "fsutil", "progress", "launcher", "patterns",
                "pipeline"}),
    # What the tool talks to: HTTP, the Docker engine, Google Cloud (credentials, REST APIs, staging buckets), and
    # registries with the images they hold (oci/, image references included).
    ("clients", {"clients", "google", "oci"}),
    # The formats and tables the stages read: requirements and lock files, index settings, the version matrix,
    # executors, system libraries, a trainer's imports and entry points, what a build is asked and gives back.
    ("formats", {"sources", "catalog", "pipeline.buildtypes", "pipeline.names"}),
    # The config package (config/: the document read, each section's keys checked) and the builder names it may
    # choose (builders/names.py: a table, loading none).
    ("config", {"config", "builders.names"}),
    # What the trainer needs, inferred from its files (the inference package), first in the data's story: it reads
    # through the readers below (sources/, the config file's reader) and goes up twice, each said: the render
    # stage's .dockerignore, and the trainer's build backend for its computed metadata.
    ("inference", {"inference"}),
    ("plan", {"pipeline.plan"}),
    ("render", {"pipeline.render"}),
    ("lock", {"pipeline.lock", "pipeline.uv", "pipeline.resolution"}),
    # The project staged: the build context (listed, copied, hashed), the recipe, the trainer as a package.
    ("stage", {"pipeline.context", "pipeline.recipe", "pipeline.packaging", "pipeline.backend"}),
    # An image built by a backend, or a code-only edit appended in the registry.
    ("build/append", {"builders", "pipeline.fastpath"}),
    # (attest: the SBOM and provenance of what build and fastbuild pushed, attached and verified)
    ("push", {"pipeline.attest", "pipeline.build", "pipeline.fastbuild", "pipeline.publish", "pipeline.variant_builds"}),
    ("job", {"jobs"}),
    # Commands beside the pipeline: generated CI and Make files, the doctor, the matrix's maintenance.
    ("tools", {"tools", "catalog.index_metadata"}),
    ("api", {"api", "__init__"}),
    ("cli", {"cli", "__main__"}),
]


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, e.g. buildkit_py.jobs.vertex
    target: str  # the imported module of buildkit_py
    line: int
    said_up: bool  # the line, or the one above it, says "up:" in a comment


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(modules: dict[str, Path]) -> list[Import]:
    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges = []
    for module, path in modules.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text)
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = {known(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                full = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
                targets = {known(f"{full}.{alias.name}") or known(full) for alias in node.names}
            else:
                continue
            said = any("up:" in line.partition("#")[2] for line in lines[max(node.lineno - 2, 0):node.lineno])
            edges += [Import(module, t, node.lineno, said) for t in sorted(filter(None, targets)) if t != module]
    return edges


def _relative(module: str) -> str:
    return module.removeprefix("buildkit_py").removeprefix(".") or "__init__"


def _fits(name: str, entry: str) -> bool:
    """Whether a name of FLOORS stands for the module (its name relative to the package)."""
    if entry.endswith(".*"):
        return name.startswith(entry[:-1])
    return name == entry or name.startswith(entry + ".")


def _floor(module: str) -> int | None:
    """The floor of a module: that of the longest name of the table that fits it."""
    fitting = [(len(entry), number) for number, (_, names) in enumerate(FLOORS) for entry in names
               if _fits(_relative(module), entry)]
    return max(fitting)[1] if fitting else None


def _show(module: str) -> str:
    return module.removeprefix("buildkit_py.")


def test_every_module_stands_on_one_floor():
    modules = [_relative(m) for m in sorted(_modules())]
    homeless = [m for m in modules if _floor(f"buildkit_py.{m}") is None]
    assert not homeless, f"modules on no floor (add each to one of FLOORS): {', '.join(homeless)}"
    names = [name for _, floor in FLOORS for name in floor]
    assert len(names) == len(set(names)), "a name stands on one floor"
    stale = [n for n in names if not any(_fits(m, n) for m in modules)]
    assert not stale, f"names of FLOORS that are no module: {', '.join(stale)}"


def test_no_import_runs_up_the_floors_unless_a_comment_says_why():
    up = sorted(f"{_show(i.source)} -> {_show(i.target)} (line {i.line})" for i in _imports(_modules())
                if (_floor(i.target) or 0) > (_floor(i.source) or 0) and not i.said_up)  # no floor: the test above
    assert not up, ("imports up the floors (move what is shared down, or say why in an `# up: ...` comment):\n"
                    + "\n".join(up))
    said = sorted(f"{_show(i.source)} -> {_show(i.target)}" for i in _imports(_modules())
                  if (_floor(i.target) or 0) > (_floor(i.source) or 0) and i.said_up)
    assert len(said) <= 2, "more than 2 imports up the floors, even said (move what they share down):\n" + "\n".join(said)


def test_no_import_circles():
    graph: dict[str, set[str]] = {}
    for i in _imports(_modules()):
        graph.setdefault(i.source, set()).add(i.target)
    circles: list[str] = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            circles.append(" -> ".join(map(_show, path[path.index(module):] + [module])))
        elif module not in done:
            for target in sorted(graph.get(module, ())):
                visit(target, path + [module])
            done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_the_api_type_checking_names_are_its_runtime_table():
    """api/__init__.py names each public name twice: in _MODULES, which __getattr__ loads from at run time, and under
    TYPE_CHECKING for type checkers and editors. Both say the same names, each from the same module."""
    tree = ast.parse((PACKAGE / "api" / "__init__.py").read_text(encoding="utf-8"))
    table = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.AnnAssign | ast.Assign)
                 and "_MODULES" in ast.unparse(node.target if isinstance(node, ast.AnnAssign) else node.targets[0]))
    runtime = {(module, name) for module, names in table.items() for name in names}
    block = next(node for node in tree.body if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
    typing = {("." * node.level + (node.module or ""), alias.asname or alias.name)
              for node in ast.walk(block) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert sorted(typing - runtime) == [], "imported for type checkers, not where _MODULES finds them at run time"
    assert sorted(runtime - typing) == [], "in _MODULES, not imported from there for type checkers"


def test_the_version_is_the_one_the_wheel_gets():
    from buildkit_py.version import __version__

    with (REPO / "pyproject.toml").open("rb") as f:
        assert tomllib.load(f)["project"]["version"] == __version__


def test_every_module_says_what_it_holds():
    """Each room says what it is for in its first line (issue 30): a module without a docstring is refused."""
    silent = [_relative(name) for name, path in sorted(_modules().items())
              if not (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "").strip()]
    assert not silent, f"modules without a docstring: {', '.join(silent)}"


def test_every_package_is_in_the_wheel():
    """A folder of modules the wheel leaves out is an API an installed tool cannot import (pyproject lists them)."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(path.parent.relative_to(REPO).parts) for path in PACKAGE.rglob("__init__.py")
             if "__pycache__" not in path.parts}
    assert found <= listed, f"packages pyproject.toml does not list: {', '.join(sorted(found - listed))}"


# Where each kind of shared name is defined; anywhere else, a literal one is a second definition.
NAME_HOMES = {"oci.media": ("application/vnd.oci.", "application/vnd.docker."),
              "pipeline.names": ("dev.buildkit-py.", "org.opencontainers.image.")}
_NAME_LIKE = re.compile(r"[a-z0-9.+/-]+")


def test_media_types_and_label_names_are_defined_once():
    """An OCI or Docker media type is oci/media.py's, a label or annotation name pipeline/names.py's: a literal one
    (or f"{LABEL_PREFIX}.x") elsewhere is a copy that can drift."""
    prefixes = {p: home for home, ps in NAME_HOMES.items() for p in ps}
    copies = []
    for name, path in sorted(_modules().items()):
        module = _relative(name)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        for node in ast.walk(tree):
            text = None
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                text = node.value
            elif isinstance(node, ast.JoinedStr) and len(node.values) > 1 and isinstance(node.values[0], ast.FormattedValue) \
                    and isinstance(node.values[0].value, ast.Name) and node.values[0].value.id == "LABEL_PREFIX" \
                    and isinstance(node.values[1], ast.Constant) and str(node.values[1].value).startswith("."):
                text = "dev.buildkit-py" + str(node.values[1].value)
            home = next((h for p, h in prefixes.items() if text and text.startswith(p) and _NAME_LIKE.fullmatch(text)),
                        None)
            if home is not None and module != home:
                copies.append(f"{module}:{node.lineno}: {text} (defined in {home})")
    assert not copies, "names defined twice:\n" + "\n".join(copies)


def test_the_package_top_holds_the_ground_alone():
    """Modules directly in buildkit_py/ are the ground floor and the public progress module; everything else lives in
    the folder of its floor (issue 42: at most 8)."""
    flat = sorted(path.stem for path in PACKAGE.glob("*.py"))
    assert len(flat) <= 8, f"{len(flat)} modules directly in buildkit_py/: {', '.join(flat)}"


# ---------------------------------------------------------------------------------------------
# Room sizes (issue 42): a module over 600 lines, a function over 80 or a signature over 7 parameters holds more
# than one idea: split it along its ideas. None is over today; a room that must stand over a limit for a while is
# listed below, and a listed one that fits again fails until it is taken off the list.
MAX_MODULE_LINES, MAX_FUNCTION_LINES, MAX_PARAMETERS = 600, 80, 7
OVER_MODULE: set[str] = set()
OVER_FUNCTION: set[str] = set()
OVER_PARAMETERS: set[str] = set()


def _rooms() -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Lines per module, lines per function and parameters per function (self and cls not counted), by dotted
    name relative to the package; a nested function is named after its outer one."""
    modules, functions, parameters = {}, {}, {}
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        module = _relative(name)
        modules[module] = text.count("\n")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                key = f"{module}.{node.name}"
                args = node.args
                count = len(args.posonlyargs + args.args + args.kwonlyargs) + bool(args.vararg) + bool(args.kwarg)
                count -= bool(args.args and args.args[0].arg in ("self", "cls"))
                functions[key] = max(functions.get(key, 0), node.end_lineno - node.lineno + 1)
                parameters[key] = max(parameters.get(key, 0), count)
    return modules, functions, parameters


@pytest.mark.parametrize("kind", ["module", "function", "parameters"])
def test_rooms_stay_under_their_limits(kind):
    modules, functions, parameters = _rooms()
    measured, limit, listed = {"module": (modules, MAX_MODULE_LINES, OVER_MODULE),
                               "function": (functions, MAX_FUNCTION_LINES, OVER_FUNCTION),
                               "parameters": (parameters, MAX_PARAMETERS, OVER_PARAMETERS)}[kind]
    over = {name for name, size in measured.items() if size > limit}
    assert sorted(over - listed) == [], f"over {limit} ({kind}): split along its ideas"
    assert sorted(listed - over) == [], f"listed as over {limit} ({kind}) but it fits now: take it off the list"
