"""The trainer directory's shape: where the trainer is (what a training Dockerfile's ENTRYPOINT/CMD or a submit command
names, the package's console scripts, then the layouts known: Vertex AI's package, a script, a src layout), the Python
the repository asks for, and the Dockerfiles it holds."""

from __future__ import annotations

import keyword
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from ..catalog.matrix import Matrix
from ..catalog.reading import version_key
from ..errors import ConfigError, show, shown_name
from ..fsutil import read_text
from ..patterns import lazy_pattern
from .given import Given

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..sources.entrypoints import Declared, SetAside

# Where a trainer is looked for, in order: Vertex AI's package layout, a lone script at the top, then
# a script in one folder (trainer/train.py without __init__.py: run as a script, its folder first on
# sys.path, as `python trainer/train.py` runs it).
PACKAGE_TASK = "task.py"
SCRIPTS = ("task.py", "train.py", "main.py")

_MODULE_PART = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
# A part of a module as `python -m` finds it: a folder or file name, hyphens allowed (the import system does not check)
_RUN_PART = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_-]*", re.ASCII)
# Files the job never runs: a folder of their own, or named as pytest collects them.
TEST_FILE = lazy_pattern(r"(?:^|/)(?:tests?/|conftest\.py$|test_[^/]*\.py$|[^/]*_test\.py$)")
_DOCKERFILE_NAME = lazy_pattern(r"(?:Dockerfile|dockerfile|Containerfile)(?:\.[\w.-]+)?|[\w.-]+\.(?:Dockerfile|dockerfile)",
                                re.ASCII)
_TRAINING_SCRIPT = lazy_pattern(r"(?:^|_)train(?:_|$|ing|er)", re.ASCII | re.IGNORECASE)
_MAIN_GUARD = lazy_pattern(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", re.MULTILINE)
MAX_SCANNED = 2000  # .py files read for imports, and paths looked at in one glob; a bigger tree is not a trainer


@dataclass(frozen=True)
class Trainer:
    """The trainer as the config will have it, and what finding it said."""

    value: Any  # the config's `trainer` value: inferred, or as the config or a flag sets it
    said: str | None  # how it was found ("module trainer.task (named by Dockerfile:7)"); None: the config's
    python: tuple[str, str] | None = None  # the Python a training Dockerfile's FROM names, and where
    notes: tuple[str, ...] = ()
    overrides: tuple[tuple[str, Any], ...] = ()


def trainer_of(directory: Path, given: Given, entry_points: dict[str, list[str]]) -> Trainer:
    """The trainer where the config and the flags name none, with what its training Dockerfile installs and sets."""
    if "trainer" in given:
        return Trainer(given.flags.get("trainer") or given.data.get("trainer"), None)
    value, said, notes, from_dockerfile = _trainer(directory, entry_points)
    if from_dockerfile is None:
        return Trainer(value, said, None, tuple(notes), (("trainer", value),))
    taken, overrides = _from_dockerfile(from_dockerfile, given)
    return Trainer(value, said, from_dockerfile.python, (*notes, *taken), (("trainer", value), *overrides))


def _script_file(directory: Path, rel: str) -> bool:
    if len(rel) > 1000 or rel.startswith("/") or ".." in rel.split("/"):
        return False
    try:
        path = directory / rel
        return path.is_file() and not path.is_symlink()
    except OSError:
        return False


def _trainer(directory: Path, entry_points: dict[str, list[str]]) -> tuple[dict, str, list[str], Declared | None]:
    """The trainer (its config value and how it was found), notes, and the training Dockerfile it came from: first
    what the repository declares, ranked by evidence (entrypoints.choose), then the package's console scripts, then the
    layouts known."""
    from ..sources.entrypoints import Context, choose, declared_entries, says_train

    def is_module(name: str) -> bool:
        return _module_root(directory, name) is not None

    def is_script(rel: str) -> bool:
        return _script_file(directory, rel)

    scripts = _console_scripts(entry_points, is_module)
    ctx = Context(directory, is_module, is_script, {n: (m, f) for n, m, f in scripts})
    found = declared_entries(directory, ctx)
    chosen, others = choose(found)
    # A README's `python -m pkg.pipeline` or `python submit.py` says less than a layout Vertex AI packages
    weak = (chosen.kind == "docs" and not says_train(chosen.name)) if chosen else bool(others) and all(
        d.kind == "docs" for d in others)
    if weak:
        try:
            value, said = _layout_trainer(directory)
        except ConfigError:
            pass
        else:
            named = _distinct([*([chosen] if chosen else []), *others])
            return value, said, ["the repository's documents also name " + "; ".join(f"{d.name} ({d.where})" for d in
                                 named[:3]) + f", which do not say they train: {said} is the known layout's"], None
    if chosen is None and others:
        raise ConfigError("the repository names several trainers, with nothing to tell which one trains: "
                          + "; ".join(f"{d.name} ({d.where}: {d.flag})" for d in _distinct(others)[:6])
                          + "; pass the flag of the one to run, or set `trainer:` in buildkit.yaml", field="DIR")
    if chosen is not None:
        return _declared_trainer(directory, chosen, others)
    # The package's console scripts: where no layout is known, the one that trains; and where the layout's module is
    # a script's and has no __main__ block, `python -m` would only define its function: the function is called.
    training = [s for s in scripts if "train" in s[0].lower() or "train" in s[1].lower()] if len(scripts) > 1 else scripts
    try:
        value, said = _layout_trainer(directory, ctx.set_aside)
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


def _distinct(found: list[Declared]) -> list[Declared]:
    return list({d.name: d for d in reversed(found)}.values())[::-1]


def _declared_trainer(directory: Path, chosen: Declared, others: list[Declared]) -> tuple[dict, str, list[str], Declared]:
    notes = []
    if chosen.command is not None:
        entry = f"; {chosen.name.split(' (')[0]} in it serves the import check and the fast path" \
            if (chosen.module or chosen.script) else ""
        notes.append(f"{chosen.where} runs more than one Python entry ({_what_more(chosen)}): the image runs the "
                     f"repository's command {show(shlex.join(chosen.command))} behind the launcher{entry}")
    for change in chosen.changes:
        notes.append(f"{chosen.where}: {change}")
    if chosen.fixed and chosen.command is None:
        notes.append(f"{chosen.where}: the ENTRYPOINT passes {show(' '.join(chosen.fixed))} to the trainer itself: they "
                     "stay before the job's args (trainer.command)")
    if chosen.args:
        notes.append(f"{chosen.where} passes {show(' '.join(chosen.args))} to the trainer: they are its default "
                     "arguments (trainer.args; a job's args replace them)")
    if chosen.also:
        # --dockerfile builds the top-level Dockerfile only: another one is to be put there first
        named = chosen.where.split(":")[0]
        build_it = "(--dockerfile --with-launcher)" if named == top_dockerfile(directory) else \
            f"(copy {named} to ./Dockerfile, then --dockerfile --with-launcher)"
        notes.append(f"{chosen.where} also runs {'; '.join(chosen.also)}, which the generated image does not: it "
                     f"installs at build time; do the rest in the trainer, or build that Dockerfile as it is {build_it}")
    if others:
        notes.append("the repository names other trainers too, not used: "
                     + "; ".join(f"{d.name} ({d.where}; {d.flag} picks it)" for d in _distinct(others)[:5]))
    value = chosen.trainer
    entry = chosen.module
    if entry and _module_root(directory, entry):
        value |= {"package_dir": _module_root(directory, entry)}
    how = f", {chosen.how}" if chosen.how else ""
    if chosen.command is not None and (chosen.module or chosen.script):
        said = f"{chosen.name}, run by the repository's command (named by {chosen.where}{how})"
    elif chosen.command is not None:
        said = f"the repository's command {show(shlex.join(chosen.command))[:120]} (named by {chosen.where}{how})"
    else:
        said = f"{chosen.name} (named by {chosen.where}{how})"
    return value, said, notes, chosen


def _what_more(chosen: Declared) -> str:
    if chosen.launcher:
        return f"launched by {chosen.launcher}"
    if chosen.module is None and chosen.script is None:
        return "no Python entry of this directory"
    return "a chain of stages or a data step"


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


_PYTHON_VERSION_FILE = lazy_pattern(r"\s*(?:cpython-|python-?)?(3\.[0-9]+)(?:\.[0-9]+)?\b", re.ASCII | re.IGNORECASE)


@dataclass(frozen=True)
class Python:
    """The image's Python as far as inference knows it."""

    version: Any  # as the config or a flag sets it, or inferred; None: the plan's default
    asked_by: str | None = None  # where the repository asks for it (.python-version:1), where that decided it
    notes: tuple[str, ...] = ()
    overrides: tuple[tuple[str, Any], ...] = ()


def asked_python(directory: Path, given: Given, python_requires: tuple[str, str] | None,
                 from_python: tuple[str, str] | None, matrix: Matrix) -> Python:
    """The Python the config or a flag sets, else the one the repository asks for."""
    python = given.flags.get("python") or given.data.get("python")
    hint = None if python else _python_hint(directory, python_requires, from_python, matrix)
    if hint is None:
        return Python(python)
    python, where = hint
    floor = matrix.distros.min_python
    if version_key(python) < version_key(floor):  # a Python older than any image's (the launcher's floor)
        return Python(floor, where, (f"{where} asks for Python {python}, which no image can have (the launcher runs on "
                                     f"Python {floor} and newer, base_images/distros.yaml): Python {floor}, the "
                                     "closest one that can",), (("python", floor),))
    return Python(python, where, (f"Python {python}: what {where} asks for",), (("python", python),))


def _python_hint(directory: Path, python_requires: tuple[str, str] | None, from_python: tuple[str, str] | None,
                 matrix: Matrix) -> tuple[str, str] | None:
    """The Python the repository asks for, and where: `.python-version`, a training Dockerfile's FROM python:X.Y,
    then requires-python / python_requires (the default Python where it allows it, else the newest an image has)."""
    version_file = directory / ".python-version"
    if version_file.is_file() and not version_file.is_symlink():
        found = _PYTHON_VERSION_FILE.match(read_text(version_file, ".python-version")[:200])
        if found:
            return found.group(1), ".python-version:1"
    if from_python is not None:
        return from_python
    if python_requires is None:
        return None
    text, where = python_requires
    try:
        allowed = SpecifierSet(text)
    except InvalidSpecifier:
        return None  # pip ignores it too; the build says nothing of it
    images = matrix.distros.cpu_python
    if allowed.contains(matrix.distros.default_python + ".0"):
        return None  # the default fits: nothing to say
    fits = [p for p in images if allowed.contains(p + ".0")]
    return (max(fits, key=version_key), f"{where} ({text})") if fits else None


def _from_dockerfile(found: Declared, given: Given) -> tuple[list[str], list[tuple[str, Any]]]:
    """What the training Dockerfile installs and sets that the generated image takes: its apt-get packages and its
    plain ENV, where the config leaves system_packages and env unset; the notes and the config keys."""
    notes, overrides = [], []
    if found.apt and "system_packages" not in given:
        overrides.append(("system_packages", list(found.apt)))
        notes.append(f"{found.where.split(':')[0]} installs {', '.join(found.apt)} with apt-get: system_packages")
    if found.env and "env" not in given:
        overrides.append(("env", dict(found.env)))
        notes.append(f"{found.where.split(':')[0]} sets {', '.join(k for k, _ in found.env)}: env")
    return notes, overrides


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


def _layout_trainer(directory: Path, set_aside: Sequence[SetAside] = ()) -> tuple[dict, str]:
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
    # One script at the top whose name says it trains (train_model.py, model_train_run.py), tests left out.
    training = sorted(p.name for p in directory.glob("*.py") if _TRAINING_SCRIPT.search(p.stem)
                      and not TEST_FILE.search(p.name) and p.is_file() and not p.is_symlink())
    if len(training) == 1:
        return {"script": training[0]}, f"script {training[0]} (the one script at the top whose name says it trains)"
    looked = (f"trainer/{PACKAGE_TASK}, one PACKAGE/{PACKAGE_TASK} beside a PACKAGE/__init__.py"
              + (f" (found several: {', '.join(packages)})" if packages else "") + ", a script "
              + ", ".join(SCRIPTS) + ", or one in a single folder"
              + (f" (found several: {', '.join(in_folders)})" if in_folders else "")
              + ", a module or script a training Dockerfile's ENTRYPOINT/CMD runs or a submit command or Vertex AI SDK "
              "call names"
              + ", or one package module with `if __name__ == \"__main__\"`"
              + (f" (found several: {', '.join(guarded)})" if len(guarded) > 1 else ""))
    seen = "; ".join(f"{a.where} runs {show(a.what)}: {a.why}" for a in list(dict.fromkeys(set_aside))[:8])
    looked += f". Seen and set aside: {seen}" if seen else ""
    own = top_dockerfile(directory)
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
        if module_file(base, module) or module_file(base, f"{module}.__main__"):
            return root
    return None


def module_file(directory: Path, module: str) -> bool:
    parts = module.split(".")
    if len(module) > 200 or not all(_RUN_PART.fullmatch(p) for p in parts):
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
            if (path.name == "__init__.py" or TEST_FILE.search(rel) or not _MODULE_PART.fullmatch(path.stem)
                    or path.is_symlink() or not path.is_file()):
                continue
            if _has_main_block(directory, path):
                found.append(f"{package}.{path.stem}")
    return found


def top_dockerfile(directory: Path) -> str | None:
    for name in ("Dockerfile", "dockerfile", "Containerfile"):
        if (directory / name).is_file():
            return name
    return None


def _other_dockerfiles(directory: Path) -> list[str]:
    """Dockerfiles that --dockerfile does not build: in a folder (trainer/Dockerfile, built with `-f trainer/Dockerfile
    .`) or named NAME.Dockerfile / Dockerfile.NAME (cpu.Dockerfile, dockerfile/train.Dockerfile)."""
    top = top_dockerfile(directory)
    found = []
    for pattern in ("*", "*/*"):
        for path in sorted(directory.glob(pattern))[:MAX_SCANNED]:
            name = path.name
            if (_DOCKERFILE_NAME.fullmatch(name) and path.is_file() and path.relative_to(directory).as_posix() != top
                    and not any(part.startswith(".") for part in path.relative_to(directory).parts)):
                found.append(path.relative_to(directory).as_posix())
    return found


def unused_dockerfiles(directory: Path) -> tuple[str | None, tuple[str, ...]]:
    """The Dockerfile at the directory's top, and notes on each Dockerfile here that the rendered image does not use."""
    dockerfile = top_dockerfile(directory)
    notes = []
    if dockerfile:
        notes.append(f"{dockerfile} in the trainer directory is not used: autopackage renders its own Dockerfile; "
                     f"pass --dockerfile to build {dockerfile} as it is instead")
    others = _other_dockerfiles(directory)
    if others:
        notes.append(f"{len(others)} other Dockerfile(s) here are not used: {', '.join(map(shown_name, others[:5]))}"
                     f"{' ...' if len(others) > 5 else ''}; autopackage renders its own Dockerfile (--dockerfile builds "
                     "only a Dockerfile at the directory's top, as it is)")
    return dockerfile, tuple(notes)
