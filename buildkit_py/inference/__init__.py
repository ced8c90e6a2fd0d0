"""Inference: what a trainer directory says about the config keys neither its config file nor a flag sets, each value
with where it was found, read without running the trainer. One module a thing it reads: the directory's layout, the
trainer's own distribution, its requirements, its code's imports, the framework those decide, and a legacy AI Platform
job's module and runtime. `infer` calls one step for each, and each step takes the frozen results of those before it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from ..catalog.matrix import load_matrix
from ..errors import ConfigError, mask_credentials, show
from ..sources.imports import Needed
from .distribution import declared_package, installed_package
from .frameworks import choose_framework, cpu_build, framework_setting
from .given import read_given
from .imported import added_imports, undeclared_imports
from .layout import asked_python, top_dockerfile, trainer_of, unused_dockerfiles
from .legacy import legacy_trainer, runtime_pins, runtime_python, unrecorded
from .requirements import Source, declared_requirements, pip_entries


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


@dataclass(frozen=True)
class Asked:
    """What a command asks of inference beside the directory.
    strict: an import that no declared requirement covers exits 2 instead of being added. dockerfile: the directory's
    own Dockerfile is built as it is, so nothing else is inferred (with_launcher: the launcher in front of its
    ENTRYPOINT/CMD). prefer: (NAME==VERSION, why) the releases a legacy runtimeVersion ran, each taken where the
    trainer's requirements and imports leave that release open (an import nothing declares gets it as its pin); (NAME,
    why) where the runtime shipped NAME in a release not recorded. module: the legacy file's pythonModule, the trainer
    where the config names none. legacy_gpu: the GPUs a legacy job's master asks for ("NVIDIA_TESLA_T4 x1"), refused
    beside a CPU-only framework build unless a flag sets gpu or accelerator. run_hooks: a computed install_requires is
    read by running the trainer's metadata hook in a container; without it (a dry run) nothing of the trainer runs and
    Inferred.metadata says "not computed"."""

    strict: bool = False
    dockerfile: bool = False
    with_launcher: bool = False
    prefer: tuple[tuple[str, str], ...] = ()
    module: str | None = None
    legacy_gpu: str | None = None
    run_hooks: bool = False


def infer(directory: Path, config_path: Path | None, flags: dict[str, Any], asked: Asked = Asked()) -> Inferred:
    """What the directory says about the keys neither the config file nor a flag sets. A framework pin in
    the requirements that disagrees with the config's (or --framework): exit 2 naming both."""
    strict, prefer, module, legacy_gpu = asked.strict, asked.prefer, asked.module, asked.legacy_gpu
    given = read_given(directory, config_path, flags)
    if asked.dockerfile:
        return _as_it_is(directory, given.config_file, asked.with_launcher)
    # A legacy job's module that is not here refuses before the trainer's own package is read (its metadata hook run).
    legacy = legacy_trainer(directory, module) if "trainer" not in given and module is not None else None
    # The trainer's own package (what gcloud's `pip install .` installed): its console scripts may name the trainer.
    own = declared_package(directory, asked.run_hooks)
    trainer = legacy or trainer_of(directory, given, own.entry_points or {})
    matrix = load_matrix()
    declared = declared_requirements(directory, given, own, matrix)
    installed = installed_package(own, given)
    configured = matrix.framework(given.framework.partition("==")[0])
    imports = undeclared_imports(directory, given, trainer.value, declared, own.key, matrix, strict)
    python = asked_python(directory, given, own.python_requires, trainer.python or declared.python, matrix)
    runtime = runtime_pins(prefer)
    found = [*declared.parsed, *((w, Requirement(d)) for d, w in imports.missing.items())]  # declared, then imported
    if python.version is None:
        python = runtime_python(matrix, given, imports.missing, found, runtime)
    choice = choose_framework(matrix, found, python, imports.removed, prefer)
    chosen = choice.pin.partition("==")[0] if choice else None
    cpu = cpu_build(matrix, given, choice, declared.parsed, declared.options, legacy_gpu)
    added = added_imports(matrix, given, imports, chosen, python, runtime)
    pip = pip_entries(given, [*declared.pip, *added.pip])
    setting = framework_setting(matrix, given, choice, configured, found, imports.removed, unrecorded(runtime, choice))
    dockerfile_here, unused = unused_dockerfiles(directory)
    # Each step's notes and config keys in the order the steps ran: the order they are shown and written in.
    steps = (trainer, installed, declared, python, cpu, pip, setting)
    notes = (*trainer.notes, *own.notes, *declared.notes, *installed.notes, *imports.notes, *python.notes, *cpu.notes,
             *added.notes, *pip.notes, *setting.notes, *unused)
    overrides = dict(kv for step in steps for kv in step.overrides)
    return Inferred(directory.resolve(), given.config_file, trainer.said, declared.file, pip.entries, setting.framework,
                    setting.framework_from, notes, tuple(overrides.items()), (*declared.sources, *added.sources), own.name,
                    setting.reason, dockerfile_here, imports.reached, own.metadata)


def _as_it_is(directory: Path, config_file: Path | None, with_launcher: bool) -> Inferred:
    """--dockerfile: the directory's own Dockerfile built as it is, so nothing is inferred."""
    found = top_dockerfile(directory)
    if found is None:
        raise ConfigError(f"there is no Dockerfile (or Containerfile) in {show(str(directory))} to build as it is",
                          field="--dockerfile")
    launcher = ("the launcher (accelerator checks, cluster set-up) is added in front of its own ENTRYPOINT/CMD"
                if with_launcher else "the image has no buildkit-py launcher (accelerator checks, cluster set-up; "
                "--with-launcher adds it); the trainer runs as the Dockerfile's ENTRYPOINT/CMD says")
    return Inferred(directory.resolve(), config_file, notes=(f"building {found} as it is: nothing is inferred; {launcher}",),
                    dockerfile=found)


def config_text(inferred: Inferred) -> str:
    """buildkit.yaml for --write-config: what was inferred, as config keys."""
    import yaml

    header = "# Written by `autopackage --write-config` from what it inferred; edit freely.\n"
    return header + yaml.safe_dump(dict(inferred.overrides), sort_keys=False)
