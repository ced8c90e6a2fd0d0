"""The one door into the pipeline: typed options in, typed results out.

The command line, `autopackage`, and the generated Makefile and CI files call only this module.
Every function validates all of its input before it reaches an engine, a registry or the
network, and reports failures as the errors of buildkit_py.errors (each with its exit code).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import build as _build
from . import doctor as _doctor
from . import registry
from .build import BuildOptions, BuildResult
from .config import Config, load_config
from .errors import ConfigError, ResolutionError, show
from .fsutil import write_atomic
from .jobs.local import RunResult, run_local
from .matrix import load_matrix
from .plan import Plan, make_plan
from .progress import Reporter
from .refs import parse_ref
from .registry import PushResult
from .render import render_dockerfile, render_project_dockerignore
from .resources import LAUNCHER_CONTEXT_DIR, launcher_sources

MAX_GPUS = 16  # the most GPUs one Vertex AI machine has
MAX_WORKERS = 64  # local runs start one container per worker

__all__ = [
    "BuildOptions", "BuildResult", "DockerfileResult", "Project", "PushResult", "RunOptions", "RunResult",
    "Versions", "build", "dockerfile", "doctor", "load", "push", "resolve", "run", "versions",
]


@dataclass(frozen=True)
class Project:
    """Where the trainer and its config are, and the config keys set by flags (None: not set)."""

    config: Path | None = None  # buildkit.yaml or pyproject.toml (default: found in directory)
    directory: Path | None = None  # the trainer directory (default: the config's, else the working directory)
    overrides: tuple[tuple[str, Any], ...] = ()


def load(project: Project) -> Config:
    directory = project.directory or (project.config.parent if project.config else Path.cwd())
    return load_config(project.config, directory, dict(project.overrides))


def resolve(project: Project) -> Plan:
    return make_plan(load(project))


@dataclass(frozen=True)
class DockerfileResult:
    dockerfile: str
    dockerignore: str
    written: tuple[Path, ...] = ()  # the Dockerfile, its .dockerignore and the launcher directory, when written

    def to_dict(self) -> dict:
        if self.written:
            return dict(zip(("dockerfile", "dockerignore", "launcher"), map(str, self.written), strict=True))
        return {"dockerfile": self.dockerfile, "dockerignore": self.dockerignore}


def dockerfile(project: Project, output: Path | None = None) -> DockerfileResult:
    """The Dockerfile and its .dockerignore; with output, also written there (and the launcher,
    which the Dockerfile copies, into the trainer directory)."""
    config = load(project)
    text = render_dockerfile(make_plan(config), root=config.root)
    ignore = render_project_dockerignore(config.root)
    if output is None:
        return DockerfileResult(text, ignore)
    # BuildKit reads <Dockerfile>.dockerignore before the context's own .dockerignore.
    ignore_path = output.with_name(output.name + ".dockerignore")
    write_atomic(output, text)
    write_atomic(ignore_path, ignore)
    for rel, source in launcher_sources():
        write_atomic(config.root / rel, source.read_text(encoding="utf-8"))
    return DockerfileResult(text, ignore, (output, ignore_path, config.root / LAUNCHER_CONTEXT_DIR))


@dataclass(frozen=True)
class SeriesVersions:
    series: str
    releases: tuple[str, ...]
    cuda: tuple[str, ...]
    python: tuple[str, ...]


@dataclass(frozen=True)
class Versions:
    frameworks: tuple[tuple[str, tuple[SeriesVersions, ...]], ...]

    def to_dict(self) -> dict:
        return {name: {s.series: {"releases": list(s.releases), "cuda": list(s.cuda), "python": list(s.python)}
                       for s in series} for name, series in self.frameworks}


def versions(framework: str | None = None) -> Versions:
    matrix = load_matrix()
    names = [framework] if framework is not None else sorted(matrix.frameworks)
    out = []
    for name in names:
        fw = matrix.framework(name)
        if fw is None:
            raise ResolutionError(f"framework: unknown framework {show(name)}; known: {', '.join(sorted(matrix.frameworks))}")
        series = fw.series + ((fw.nightly,) if fw.nightly else ())
        out.append((fw.name, tuple(SeriesVersions(s.series, tuple(s.releases), tuple(s.cuda), tuple(s.python))
                                   for s in series)))
    return Versions(tuple(out))


def build(project: Project, options: BuildOptions, reporter: Reporter) -> BuildResult:
    _check_build_options(options)
    return _build.build(load(project), options, reporter)


def _check_build_options(options: BuildOptions) -> None:
    if options.docker is not None:
        path = Path(options.docker)
        try:
            usable = path.is_file() and os.access(path, os.X_OK)
        except (OSError, ValueError):
            usable = False
        if not usable:
            raise ConfigError(f"{show(options.docker)} is not an executable file (a docker client)", field="--docker")


def push(ref: str, reporter: Reporter) -> PushResult:
    return registry.push(parse_ref(ref, field="REF", allow_digest=False), reporter)


def doctor(gpus: int | None = None) -> list[_doctor.Finding]:
    if gpus is not None:
        _count("--gpus", gpus, MAX_GPUS)
    return _doctor.diagnose(gpus)


@dataclass(frozen=True)
class RunOptions:
    image: str | None = None  # default: build the project's image first
    gpus: int = 0
    workers: int = 0
    output: Path | None = None
    args: tuple[str, ...] = ()  # replace the image's default trainer args
    build: BuildOptions = field(default_factory=BuildOptions)


def run(project: Project, options: RunOptions, reporter: Reporter) -> RunResult:
    """Run the image the way Vertex AI runs it, on this machine (building it first when no image is given)."""
    _count("--gpus", options.gpus, MAX_GPUS)
    _count("--workers", options.workers, MAX_WORKERS)
    for i, arg in enumerate(options.args):
        if "\0" in arg:
            raise ConfigError(f"{show(arg)} is not allowed: NUL characters cannot be passed to a process", field=f"ARGS[{i}]")
    if options.output is not None and options.output.exists() and not options.output.is_dir():
        raise ConfigError(f"{show(str(options.output))} exists and is not a directory", field="--output")
    _check_build_options(options.build)
    # Host networking by default, for the build's RUN steps and the containers alike: workers
    # rendezvous over loopback, and engines without a bridge (CI's) can still run them.
    config = load(project)
    network = config.network or "host"
    if options.image is not None:
        image = str(parse_ref(options.image, field="IMAGE"))
    else:
        image = _build.build(replace(config, network=network), options.build, reporter).tags[0]
    return run_local(image, workers=options.workers, gpus=options.gpus, output=options.output, args=options.args,
                     reporter=reporter, network=network)


def _count(name: str, value: int, limit: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ConfigError(f"{show(value)} is not allowed: a whole number from 0 to {limit}", field=name)
