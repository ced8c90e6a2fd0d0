"""autopackage: from a trainer directory, with or without a buildkit.yaml, to a running job.

What a config file does not say is inferred from the directory (the module or script, the
requirements, the framework pin found in them); flags still win over both. The stages (infer,
render, build, push, run or submit) are timed, and each says what it reused.
"""

from __future__ import annotations

import re
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .config import find_config, load_raw
from .errors import ConfigError, show
from .fsutil import read_text
from .matrix import Matrix, load_matrix
from .progress import Reporter

# Where a trainer is looked for, in order: Vertex AI's package layout, then a lone script.
PACKAGE_TASK = "task.py"
SCRIPTS = ("task.py", "train.py", "main.py")
REQUIREMENTS = "requirements.txt"
_MODULE_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


@dataclass(frozen=True)
class Inferred:
    """What autopackage found in the directory; `overrides` are the config keys it sets (only keys the
    config file leaves unset)."""

    directory: Path
    config_file: Path | None
    trainer: str | None = None  # "module trainer.task" or "script train.py"; None: the config's
    requirements: str | None = None
    pip: tuple[str, ...] = ()  # pyproject.toml [project] dependencies
    framework: str | None = None  # the pin found in the requirements, e.g. torch==2.5.1
    framework_from: str | None = None  # where: requirements.txt:3
    notes: tuple[str, ...] = ()
    overrides: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict:
        return {"directory": str(self.directory), "config": str(self.config_file) if self.config_file else None,
                "trainer": self.trainer, "requirements": self.requirements, "pip": list(self.pip),
                "framework": self.framework, "framework_from": self.framework_from, "notes": list(self.notes),
                "config_keys": {k: v for k, v in self.overrides}}


def _requirement_lines(path: Path, label: str) -> Iterator[tuple[str, Requirement]]:
    """(where, requirement) for each requirement line; options (-r, --index-url) and what pip alone
    understands (URLs, editable paths) are left to pip."""
    for number, line in enumerate(read_text(path, label).splitlines(), 1):
        text = line.split(" #", 1)[0].strip()
        if not text or text.startswith(("#", "-")):
            continue
        try:
            yield f"{label}:{number}", Requirement(text)
        except InvalidRequirement:
            continue


def _framework_of(matrix: Matrix, requirement: Requirement) -> str | None:
    name = canonicalize_name(requirement.name)
    for fw in matrix.frameworks.values():
        if name in {canonicalize_name(n) for n in (fw.name, fw.wheel_package, *fw.aliases) if n}:
            return fw.name
    return None


def _pin(matrix: Matrix, found: list[tuple[str, Requirement]]) -> tuple[str | None, str | None, tuple[str, ...]]:
    """The framework pin among the requirements: (torch==2.5.1, where, notes). Two different pins: exit 2."""
    pins: list[tuple[str, str]] = []
    notes: list[str] = []
    for where, req in found:
        name = _framework_of(matrix, req)
        if name is None:
            continue
        exact = [s.version for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
        if exact:
            pins.append((f"{name}=={exact[0]}", where))
        else:
            pins.append((name, where))
            notes.append(f"{req} ({where}) is not pinned: the framework is pinned to the release that resolves "
                         "(see `resolve`), write it as ==VERSION to keep it")
    distinct = {p for p, _ in pins}
    if len(distinct) > 1:
        (a, wa), (b, wb) = pins[0], next(p for p in pins if p[0] != pins[0][0])
        raise ConfigError(f"conflicting framework pins: {show(a)} ({wa}) and {show(b)} ({wb}); keep one",
                          field="framework")
    return (pins[0][0], pins[0][1], tuple(notes)) if pins else (None, None, ())


def _trainer(directory: Path) -> tuple[dict, str]:
    if (directory / "trainer" / PACKAGE_TASK).is_file():
        return {"module": "trainer.task"}, "module trainer.task"
    packages = sorted(p.parent.name for p in directory.glob(f"*/{PACKAGE_TASK}")
                      if (p.parent / "__init__.py").is_file() and _MODULE_PART.fullmatch(p.parent.name))
    if len(packages) == 1:
        return {"module": f"{packages[0]}.task"}, f"module {packages[0]}.task"
    for script in SCRIPTS:
        if (directory / script).is_file():
            return {"script": script}, f"script {script}"
    looked = (f"trainer/{PACKAGE_TASK}, one PACKAGE/{PACKAGE_TASK} beside a PACKAGE/__init__.py"
              + (f" (found several: {', '.join(packages)})" if packages else "") + ", or a script "
              + ", ".join(SCRIPTS))
    raise ConfigError(f"no trainer found in {show(str(directory))}: looked for {looked}; or set `trainer:` "
                      "(module or script) in buildkit.yaml, or pass --module", field="DIR")


def _pyproject_dependencies(path: Path) -> list[str]:
    try:
        document = tomllib.loads(read_text(path, "pyproject.toml"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", where=str(path)) from None
    deps = (document.get("project") or {}).get("dependencies") if isinstance(document.get("project"), dict) else None
    if deps is not None and not (isinstance(deps, list) and all(isinstance(d, str) for d in deps)):
        raise ConfigError(f"[project] dependencies must be a list of strings, not {show(deps)}", where=str(path))
    return deps or []


def infer(directory: Path, config_path: Path | None, flags: dict[str, Any]) -> Inferred:
    """What the directory says about the keys neither the config file nor a flag sets. A framework pin in
    the requirements that disagrees with the config's (or --framework): exit 2 naming both."""
    raw, _ = load_raw(config_path, directory)
    config_file = config_path or find_config(directory)
    given = set(raw.data) | {k for k, v in flags.items() if v is not None}
    where_set = {k: ("--" + k.replace("_", "-") if k in flags and flags[k] is not None else str(config_file))
                 for k in given}
    overrides: dict[str, Any] = {}
    trainer = None
    if "trainer" not in given:
        overrides["trainer"], trainer = _trainer(directory)
    matrix = load_matrix()
    found: list[tuple[str, Requirement]] = []
    requirements = raw.data.get("requirements") if isinstance(raw.data.get("requirements"), str) else None
    if "requirements" not in given and (directory / REQUIREMENTS).is_file():
        requirements = overrides["requirements"] = REQUIREMENTS
    if requirements and (directory / requirements).is_file():
        found += _requirement_lines(directory / requirements, requirements)
    pip: list[str] = []
    if "pip" not in given and (directory / "pyproject.toml").is_file():
        pip = _pyproject_dependencies(directory / "pyproject.toml")
        if pip:
            overrides["pip"] = pip
    for i, text in enumerate(pip):
        try:
            found.append((f"pyproject.toml dependencies[{i}]", Requirement(text)))
        except InvalidRequirement:
            continue
    framework, framework_from, notes = _pin(matrix, found)
    if framework is not None:
        if "framework" in given:
            configured = str(flags.get("framework") or raw.data.get("framework"))
            name, _, version = configured.partition("==")
            if matrix.framework(name) is not None and matrix.framework(name).name != framework.partition("==")[0]:
                notes += (f"framework {configured} ({where_set['framework']}) is kept; {framework} ({framework_from}) "
                          "is installed from the requirements on top of it",)
            elif version and "==" in framework and version != framework.partition("==")[2]:
                raise ConfigError(f"conflicting framework pins: {show(configured)} ({where_set['framework']}) and "
                                  f"{show(framework)} ({framework_from}); make them agree", field="framework")
        else:
            overrides["framework"] = framework
    # Removed APIs (issue 18, item 8): one note per framework API the trainer's code uses that a later
    # release removed (base_images/removed_apis.yaml), naming the call and the pin that keeps it.
    from .api_usage import directory_notes

    notes += directory_notes(directory)
    return Inferred(directory.resolve(), config_file, trainer, requirements if requirements else None, tuple(pip),
                    framework, framework_from, notes, tuple(overrides.items()))


def config_text(inferred: Inferred) -> str:
    """buildkit.yaml for --write-config: what was inferred, as config keys."""
    import yaml

    header = "# Written by `autopackage --write-config` from what it inferred; edit freely.\n"
    return header + yaml.safe_dump(dict(inferred.overrides), sort_keys=False)


@dataclass(frozen=True)
class Stage:
    name: str
    seconds: float
    detail: str
    reused: bool = False

    def to_dict(self) -> dict:
        return {"stage": self.name, "seconds": round(self.seconds, 3), "detail": self.detail, "reused": self.reused}


@dataclass
class Stages:
    """The pipeline's stages as they finish, each reported the moment it ends."""

    reporter: Reporter
    done: list[Stage] = field(default_factory=list)

    @contextmanager
    def stage(self, name: str) -> Iterator[list]:
        """`with stages.stage("build") as out: ... out[:] = [detail, reused]`."""
        out: list = [name, False]
        start = time.monotonic()
        yield out
        done = Stage(name, time.monotonic() - start, out[0], bool(out[1]))
        self.done.append(done)
        self.reporter.message(f"[{done.name} {done.seconds:.2f}s] {done.detail}")
