"""Local runs: the image (or sdists on an executor image) run on this machine as Vertex AI runs it, and doctor."""

from __future__ import annotations

import tempfile
import urllib.parse
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config, job_flag
from ..errors import ConfigError, show
from ..fsutil import reads_once
from ..oci.refs import parse_ref
from ..pipeline.build import BuildOptions, _secrets, build_config, secret_sources
from ..progress import Reporter
from .builds import check_build_options
from .project import (
    MAX_GPUS,
    MAX_WORKERS,
    Progress,
    Project,
    Source,
    arguments,
    check_count,
    load,
    options_of,
    reporting,
    runs_dir,
    with_trainer,
)

# Imported where used, for start-up time (see this package's docstring).
if TYPE_CHECKING:
    from ..jobs.local import RunResult
    from ..tools import doctor as _doctor


def doctor(gpus: int | None = None) -> list[_doctor.Finding]:
    """The launcher's GPU and cluster checks on this machine, and the build tools (with gpus: that many usable)."""
    from ..tools import doctor as _doctor

    if gpus is not None:
        check_count("--gpus", gpus, MAX_GPUS)
    return _doctor.diagnose(gpus)


@dataclass(frozen=True)
class RunOptions:
    """How `run` runs the trainer here: its flags (each keyword of run() sets the field of its name)."""

    image: str | None = None  # default: build the project's image first
    gpus: int = 0
    workers: int = 0
    processes_per_node: int | str | None = None  # in each container (auto: one per GPU); default trainer.processes_per_node
    output: Path | None = None  # default: a directory under ~/.cache/buildkit-py/runs, outside the trainer directory
    args: tuple[str, ...] = ()  # replace the image's default trainer args
    build: BuildOptions = field(default_factory=BuildOptions)
    # A PythonPackageSpec instead of a trainer image: an executor (an image, or NAME==VERSION from the
    # catalog of Google's prebuilt images), the packages to install at start and the module to run.
    executor: str | None = None
    packages: tuple[str, ...] = ()
    module: str | None = None  # default: the config's trainer
    region: str | None = None  # picks the catalog image's regional repository
    legacy: bool = False  # as AI Platform Training ran it: TF_CONFIG (master, worker, ps) and --job-dir
    parameter_servers: int = 0  # ps tasks, with legacy


@reads_once
def run(source: Source = None, /, options: RunOptions | None = None, *, progress: Progress = None,
        **settings: Any) -> RunResult:
    """Run the image the way Vertex AI runs it, on this machine (building it first when no image is given):
    CLUSTER_SPEC, the AIP_* directories, the hypertune metric file. The result holds each container's exit code
    and the metrics reported.

    source: a Project, the trainer directory or config file, a config dict, or None (the working directory).
    options: RunOptions; its fields, and its build's, may also be keywords (image= is the image to run,
    gpus=, workers=, args=[...], push=...).
    progress: as build's.
    settings: config keys as their flags set them, config, dir, variant.
    """
    project, options = arguments("run", source, settings, options_of(options, RunOptions, "options"), takes=("options", "progress"))
    check_run_options(options)
    with reporting(progress) as reporter:
        return _run(project, options, reporter)


def _run(project: Project, options: RunOptions, reporter: Reporter) -> RunResult:
    """run() once its options are checked."""
    from ..jobs.local import LocalRun, run_local

    if options.executor is not None or options.packages:
        return _run_packages(project, options, reporter)
    # Host networking by default, for the build's RUN steps and the containers alike: workers
    # rendezvous over loopback, and engines without a bridge (CI's) can still run them.
    config = load(project)
    network = config.network or "host"
    if options.image is not None:
        image = str(parse_ref(options.image, field="IMAGE"))
    else:
        image = build_config(replace(config, network=network), options.build, reporter).tags[0]
    processes = local_processes(config, options.processes_per_node, options.workers, options.gpus)
    return run_local(LocalRun(image, options.output or runs_dir(config), workers=options.workers, gpus=options.gpus,
                              args=options.args, network=network, legacy=options.legacy,
                              parameter_servers=options.parameter_servers, processes_per_node=processes), reporter)


def local_processes(config: Config, given: int | str | None, workers: int, gpus: int) -> int | str | None:
    """What each container's launcher is asked to start, checked as a job's would be (--processes-per-node, else
    trainer.processes_per_node): against the command's own launcher and the GPUs each container gets."""
    from ..jobs.vertex import Machines, asked_processes, processes_per_node

    asked, field = asked_processes(config, given, "--processes-per-node")
    processes_per_node(config, asked, field, (), Machines(1 + workers, gpus, name=f"each container (--gpus {gpus})"))
    return asked


def check_run_options(options: RunOptions) -> None:
    check_count("--gpus", options.gpus, MAX_GPUS)
    check_count("--workers", options.workers, MAX_WORKERS)
    check_count("--ps", options.parameter_servers, MAX_WORKERS)
    if options.processes_per_node is not None:
        try:
            job_flag("processes_per_node", options.processes_per_node)  # the job's validator
        except ConfigError as exc:  # named by run's own flag: a local run has no job key
            raise ConfigError(exc.detail, field="--processes-per-node") from None
    if options.parameter_servers and not options.legacy:
        raise ConfigError("parameter servers are AI Platform Training's: add --legacy (Vertex AI runs them in pool 2 "
                          "of a job; see `buildkit-py job`)", field="--ps")
    for i, arg in enumerate(options.args):
        if "\0" in arg:
            raise ConfigError(f"{show(arg)} is not allowed: NUL characters cannot be passed to a process", field=f"ARGS[{i}]")
    if options.output is not None and options.output.exists() and not options.output.is_dir():
        raise ConfigError(f"{show(str(options.output))} exists and is not a directory", field="--output")
    check_build_options(options.build)


def _run_packages(project: Project, options: RunOptions, reporter: Reporter) -> RunResult:
    if options.image is not None:
        raise ConfigError(f"give an IMAGE or --executor, not both (IMAGE is {show(options.image)})", field="--executor")
    if options.executor is None:
        raise ConfigError("--package needs --executor IMAGE (or NAME==VERSION of a prebuilt training image)",
                          field="--package")
    if not options.packages:
        raise ConfigError("--executor needs at least one --package (an sdist: a path, file://, https:// or gs:// URI)",
                          field="--package")
    return run_sdists(load(with_trainer(project, options.module)), options, reporter)


def run_sdists(config: Config, options: RunOptions, reporter: Reporter) -> RunResult:
    """The sdists (options.packages) on the executor image, for a config already loaded (with --module applied)."""
    from ..catalog.executors import is_spec, resolve_executor
    from ..jobs.local import LocalRun, package_run, run_local
    from ..pipeline.packaging import SCRIPT_MODULE, refuse_function

    trainer = config.trainer
    refuse_function(trainer)
    module = trainer.module if trainer and trainer.module else SCRIPT_MODULE if trainer else None
    if module is None:
        raise ConfigError("no module to run: pass --module (e.g. trainer.task) or set trainer in the config", field="--module")
    packages = tuple(_package_uri(p, i) for i, p in enumerate(options.packages))
    catalog = is_spec(options.executor)
    if catalog:
        image = resolve_executor(options.executor, gpu=config.gpu, region=options.region).uri
    else:
        image = str(parse_ref(options.executor, field="--executor"))
    network = config.network or "host"
    with tempfile.TemporaryDirectory(prefix="buildkit-py-secrets-") as tmp:
        spec = package_run(packages, module, _secrets(secret_sources(config), Path(tmp)), mount_launcher=catalog)
        # No ARGS: the config's trainer args, as an image's CMD would give them.
        args = options.args or (trainer.args if trainer else ())
        processes = local_processes(config, options.processes_per_node, options.workers, options.gpus)
        return run_local(LocalRun(image, options.output or runs_dir(config), workers=options.workers,
                                  gpus=options.gpus, args=args, network=network, package=spec,
                                  processes_per_node=processes), reporter)


def _package_uri(text: str, index: int) -> str:
    """A package as the run passes it: a remote URI as given, a local file (path or file://) by its absolute path."""
    where = f"--package[{index}]"
    if any(ord(c) < 0x21 or ord(c) == 0x7F or c == "," for c in text):
        raise ConfigError(f"{show(text)} is not allowed: spaces, commas and control characters", field=where)
    if text.startswith(("gs://", "https://", "http://")):
        return text
    if "://" in text and not text.startswith("file://"):
        raise ConfigError(f"{show(text)}: the schemes are gs://, https://, http:// and file://, or a path", field=where)
    path = Path(urllib.parse.unquote(text[len("file://"):]) if text.startswith("file://") else text)
    if not path.is_file():
        raise ConfigError(f"{show(text)} is not a file (build one with `buildkit-py package`)", field=where)
    return str(path.resolve())
