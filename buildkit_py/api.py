"""The one door into the pipeline: typed options in, typed results out.

The command line, `autopackage`, and the generated Makefile and CI files call only this module.
Every function validates all of its input before it reaches an engine, a registry or the
network, and reports failures as the errors of buildkit_py.errors (each with its exit code).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import shutil
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from . import build as _build
from . import lock as _lock
from .build import BuildOptions, BuildResult
from .builders import builder_class
from .config import (
    Config,
    JobConfig,
    cloudbuild_flag_name,
    default_ca_bundle,
    distribution_name,
    job_flag,
    load_config,
    pep440_version,
)
from .errors import BuildkitError, ConfigError, RegistryError, ResolutionError, ServiceError, WaitInterrupted, show
from .fsutil import cache_dir, read_text, write_atomic
from .launcher.gpu import arch_supports
from .lock import LockOptions, LockResult
from .matrix import SHIPPED, load_matrix, version_key
from .plan import Plan, accelerator_named, check_accelerator, closest_python, make_plan, tpu_named, tpu_releases, usable_python
from .progress import Reporter
from .refs import parse_ref
from .render import render_dockerfile, render_project_dockerignore
from .resources import LAUNCHER_CONTEXT_DIR, launcher_sources

# The modules below cost a command that does not use them (`dockerfile` must start in well under
# 0.3 s): each is imported in the functions that need it. tests/test_startup.py keeps it so.
if TYPE_CHECKING:
    from . import autopackage as _autopackage
    from . import doctor as _doctor
    from . import index_metadata
    from .executors import Executor
    from .jobs import aiplatform, preflight, vertex
    from .jobs import tune as jobs_tune
    from .jobs.local import RunResult
    from .packaging import Sdist
    from .registry import PushResult
    from .staging import Staged

MAX_GPUS = 16  # the most GPUs one Vertex AI machine has
MAX_WORKERS = 64  # local runs start one container per worker

__all__ = [
    "BuildOptions", "BuildResult", "DockerfileResult", "Executor", "MatrixOptions", "PackageOptions", "PackageResult",
    "Project", "PushResult", "RunOptions", "RunResult", "Versions", "build", "dockerfile", "doctor", "executor_build",
    "executors", "load", "matrix_check", "matrix_refresh", "package", "push", "resolve", "run", "versions",
    "GeneratedFile", "PRINTABLE", "VariantsResult", "build_variants", "ci", "make", "print_value", "variant_configs",
    "CancelResult", "JobOptions", "JobResult", "PlanResult", "SubmitOptions", "SubmitResult", "cancel", "job", "plan",
    "submit", "AutopackageOptions", "AutopackageResult", "autopackage", "TuneOptions", "tune", "LockOptions", "LockResult",
    "lock", "cloudbuild_flag_name",
]

# Types re-exported from modules imported on first use (see above).
_LAZY_EXPORTS = {"Executor": ".executors", "PushResult": ".registry", "RunResult": ".jobs.local"}


def __getattr__(name: str) -> Any:
    if name in _LAZY_EXPORTS:
        return getattr(importlib.import_module(_LAZY_EXPORTS[name], __package__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Project:
    """Where the trainer and its config are, and the config keys set by flags (None: not set)."""

    config: Path | None = None  # buildkit.yaml or pyproject.toml (default: found in directory)
    directory: Path | None = None  # the trainer directory (default: the config's, else the working directory)
    overrides: tuple[tuple[str, Any], ...] = ()
    variant: str | None = None  # one of the config's variants (its overrides applied, its name in the tags)


def load(project: Project) -> Config:
    directory = project.directory or (project.config.parent if project.config else Path.cwd())
    config = load_config(project.config, directory, dict(project.overrides))
    variants = variant_configs(config)
    if project.variant is None:
        return config
    found = [v for v in variants if v.variant == project.variant]
    if not found:
        known = ", ".join(v.variant or "" for v in variants) or "none (the config has no variants: key)"
        raise ConfigError(f"{show(project.variant)} is not a variant of {config.source}; variants: {known}", field="--variant")
    return found[0]


def variant_configs(config: Config) -> list[Config]:
    """Each variant's config, every one checked to resolve: a variant that does not is named."""
    out = []
    for i, variant in enumerate(config.variants):
        derived = config.with_variant(variant)
        try:
            make_plan(derived)
        except (ConfigError, ResolutionError) as exc:
            raise ConfigError(f"variant {show(variant.name)} does not resolve: {exc}", field=f"variants[{i}]",
                              where=config.source) from None
        out.append(derived)
    return out


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
    plan = _lock.apply(config, make_plan(config), locked=False)
    text = render_dockerfile(plan, root=config.root)
    ignore = render_project_dockerignore(config.root)
    if output is None:
        return DockerfileResult(text, ignore)
    # BuildKit reads <Dockerfile>.dockerignore before the context's own .dockerignore.
    ignore_path = output.with_name(output.name + ".dockerignore")
    write_atomic(output, text)
    write_atomic(ignore_path, ignore)
    for rel, source in launcher_sources() + ([(plan.lock.requirements, plan.lock.source)] if plan.lock else []):
        write_atomic(config.root / rel, source.read_text(encoding="utf-8"))
    return DockerfileResult(text, ignore, (output, ignore_path, config.root / LAUNCHER_CONTEXT_DIR))


@dataclass(frozen=True)
class SeriesVersions:
    series: str
    releases: tuple[str, ...]
    cuda: tuple[str, ...]
    python: tuple[str, ...]
    default_cuda: str | None = None
    source: str = SHIPPED  # or the overlay file (index metadata)
    verified: tuple[tuple[str, str], ...] = ()  # CUDA -> what a real GPU machine reported
    tpu: str | None = None  # listed for a TPU: what its TPU build installs, "jax[tpu]"


@dataclass(frozen=True)
class Versions:
    frameworks: tuple[tuple[str, tuple[SeriesVersions, ...]], ...]
    accelerator: str | None = None  # the listing keeps only the builds with kernels for it

    def to_dict(self) -> dict:
        return {name: {s.series + ("" if s.source == SHIPPED else " (index metadata)"): {
            "releases": list(s.releases), "cuda": list(s.cuda), "python": list(s.python),
            "default_cuda": s.default_cuda, "source": s.source, "verified": dict(s.verified)}
            | ({"tpu": s.tpu} if s.tpu else {}) for s in series}
            for name, series in self.frameworks}


def versions(framework: str | None = None, accelerator: str | None = None) -> Versions:
    """The known releases; with an accelerator, only the releases and CUDA variants whose build has
    kernels for it (as resolution would choose among them)."""
    matrix = load_matrix()
    tpu = tpu_named(matrix, accelerator, "--accelerator") if accelerator is not None else None
    wanted = accelerator_named(matrix, accelerator, "--accelerator") if accelerator is not None and not tpu else None
    tagged = {r.minor for r in matrix.cuda}
    names = [framework] if framework is not None else sorted(matrix.frameworks)
    out = []
    for name in names:
        fw = matrix.framework(name)
        if fw is None:
            raise ResolutionError(f"framework: unknown framework {show(name)}; known: {', '.join(sorted(matrix.frameworks))}")
        listed = []
        for s in fw.series + ((fw.nightly,) if fw.nightly else ()):
            if tpu is not None:  # the releases with a TPU build the service documents for it, and their Pythons
                fits = set(tpu_releases(fw, tpu))
                builds = [fw.tpu.build(r, s.for_release(r).python) for r in s.releases if r in fits] if fw.tpu else []
                floor = tpu.min.get("python", "3")
                python = sorted({p for b in builds if b for p in b.python if version_key(p) >= version_key(floor)},
                                key=version_key)
                if builds and fw.tpu:
                    listed.append(SeriesVersions(s.series, tuple(r for r in s.releases if r in fits), (), tuple(python),
                                                 None, s.origin, (), fw.tpu.requirement + (
                                                     f" + {builds[0].companion.split('==')[0]}" if builds[0].companion
                                                     else "")))
                continue
            releases, cuda = list(s.releases), list(s.cuda)
            if wanted is not None:
                fits = {r: [c for c in s.for_release(r).cuda
                            if c in tagged and arch_supports(s.for_release(r).archs_for(c) or (), wanted.capability)]
                        for r in s.releases or ("nightly",)}
                releases = [r for r in s.releases if fits[r]]
                cuda = sorted({c for r in fits.values() for c in r}, key=version_key)
                if not cuda:
                    continue
            default = s.default_cuda if s.default_cuda in cuda else (cuda[-1] if cuda and wanted else s.default_cuda)
            listed.append(SeriesVersions(s.series, tuple(releases), tuple(cuda), tuple(s.python), default, s.origin,
                                         s.verified))
        out.append((fw.name, tuple(listed)))
    return Versions(tuple(out), tpu.name if tpu else wanted.name if wanted else None)


@dataclass(frozen=True)
class MatrixOptions:
    frameworks: tuple[str, ...] = ()  # default: all
    timeout: float | None = None  # seconds per request (None: index_metadata.TIMEOUT)


def _package_index(project: Project, options: MatrixOptions) -> index_metadata.Index:
    """The config's pip_index_url (or --pip-index-url), else $PIP_INDEX_URL, else PyPI; the CA
    bundle of the build (--ca-cert, PIP_CERT...) verifies it."""
    from . import index_metadata

    timeout = index_metadata.TIMEOUT if options.timeout is None else options.timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 300:
        raise ConfigError(f"{show(timeout)} is not allowed: seconds, more than 0 and at most 300", field="--timeout")
    config = load(project)
    url = config.pip_index_url or os.environ.get("PIP_INDEX_URL") or index_metadata.DEFAULT_INDEX
    return index_metadata.Index(url, timeout=float(timeout), ca_file=config.ca_cert or default_ca_bundle())


def matrix_check(project: Project, options: MatrixOptions) -> index_metadata.MatrixReport:
    """base_images/ against the index's metadata: missing releases, Pythons without wheels, default
    CUDA/cuDNN that the default wheel's pins contradict."""
    from . import index_metadata

    return index_metadata.run(load_matrix(), _package_index(project, options), options.frameworks)


def matrix_refresh(project: Project, options: MatrixOptions) -> index_metadata.MatrixReport:
    """matrix_check, and the releases missing from the data written to the user's overlay, which
    resolution then reads (flagged as known from index metadata)."""
    from . import index_metadata

    return index_metadata.run(load_matrix(), _package_index(project, options), options.frameworks, refresh=True)


def build(project: Project, options: BuildOptions, reporter: Reporter) -> BuildResult:
    _check_build_options(options)
    return _build.build(load(project), options, reporter)


@dataclass(frozen=True)
class VariantsResult:
    builds: tuple[tuple[str, BuildResult], ...]  # (variant name, its build), in config order

    def to_dict(self) -> dict:
        return {"variants": {name: result.to_dict() for name, result in self.builds}}


def build_variants(project: Project, options: BuildOptions, reporter: Reporter) -> VariantsResult:
    """Every variant of the config, one after the other on one builder: their common layers are built once."""
    _check_build_options(options)
    configs = variant_configs(load(replace(project, variant=None)))
    if not configs:
        raise ConfigError("the config has no variants: add `variants:` (a list of named overrides, e.g. "
                          "[{name: cu126, cuda: '12.6'}]) or build without it", field="--all-variants")
    if all(getattr(builder_class(c.builder), "remote", False) for c in configs):  # each on a machine of its own, at once
        from .variant_builds import build_at_once

        return VariantsResult(build_at_once(configs, options, reporter))
    return VariantsResult(tuple((c.variant or "", _build.build(c, options, reporter)) for c in configs))


def lock(project: Project, options: _lock.LockOptions) -> _lock.LockResult:
    """Write buildkit.lock for the config and each of its variants (or, with check, say what makes it stale)."""
    for name in options.upgrade_packages:
        _lock.check_package_name(name)
    config = load(replace(project, variant=None))
    plans = [(c, make_plan(c)) for c in [config, *variant_configs(config)]]
    return _lock.lock(config, plans, options)


def _lock_digest(config: Config) -> str:
    plan = _build._inputs(config, builder_class(config.builder).supports_secrets)[0]
    if plan.lock is None:
        raise ConfigError(f"the build of this config is not locked: no current {_lock.LOCK_NAME} beside it "
                          "(`buildkit-py lock` writes one)", field="NAME")
    return plan.lock.digest


def _check_build_options(options: BuildOptions) -> None:
    if not isinstance(options.fast_path, bool):
        raise ConfigError(f"{show(options.fast_path)} is not allowed: true or false", field="--no-fast-path")
    if options.docker is not None:
        path = Path(options.docker)
        try:
            usable = path.is_file() and os.access(path, os.X_OK)
        except (OSError, ValueError):
            usable = False
        if not usable:
            raise ConfigError(f"{show(options.docker)} is not an executable file (a docker client)", field="--docker")
    if options.cache_ref is not None:
        parse_ref(options.cache_ref, field="--cache-ref", allow_digest=False)


def push(ref: str, reporter: Reporter) -> PushResult:
    from .builders.engine_images import EngineImages

    return _build.push_image(EngineImages().push, [parse_ref(ref, field="REF", allow_digest=False)], reporter)[0]


def doctor(gpus: int | None = None) -> list[_doctor.Finding]:
    from . import doctor as _doctor

    if gpus is not None:
        _count("--gpus", gpus, MAX_GPUS)
    return _doctor.diagnose(gpus)


@dataclass(frozen=True)
class RunOptions:
    image: str | None = None  # default: build the project's image first
    gpus: int = 0
    workers: int = 0
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


def run(project: Project, options: RunOptions, reporter: Reporter) -> RunResult:
    """Run the image the way Vertex AI runs it, on this machine (building it first when no image is given)."""
    from .jobs.local import run_local

    _check_run_options(options)
    if options.executor is not None or options.packages:
        return _run_packages(project, options, reporter)
    # Host networking by default, for the build's RUN steps and the containers alike: workers
    # rendezvous over loopback, and engines without a bridge (CI's) can still run them.
    config = load(project)
    network = config.network or "host"
    if options.image is not None:
        image = str(parse_ref(options.image, field="IMAGE"))
    else:
        image = _build.build(replace(config, network=network), options.build, reporter).tags[0]
    return run_local(image, workers=options.workers, gpus=options.gpus, output=options.output or _runs_dir(config),
                     args=options.args, reporter=reporter, network=network, legacy=options.legacy,
                     parameter_servers=options.parameter_servers)


def _check_run_options(options: RunOptions) -> None:
    _count("--gpus", options.gpus, MAX_GPUS)
    _count("--workers", options.workers, MAX_WORKERS)
    _count("--ps", options.parameter_servers, MAX_WORKERS)
    if options.parameter_servers and not options.legacy:
        raise ConfigError("parameter servers are AI Platform Training's: add --legacy (Vertex AI runs them in pool 2 "
                          "of a job; see `buildkit-py job`)", field="--ps")
    for i, arg in enumerate(options.args):
        if "\0" in arg:
            raise ConfigError(f"{show(arg)} is not allowed: NUL characters cannot be passed to a process", field=f"ARGS[{i}]")
    if options.output is not None and options.output.exists() and not options.output.is_dir():
        raise ConfigError(f"{show(str(options.output))} exists and is not a directory", field="--output")
    _check_build_options(options.build)


def _run_packages(project: Project, options: RunOptions, reporter: Reporter) -> RunResult:
    if options.image is not None:
        raise ConfigError(f"give an IMAGE or --executor, not both (IMAGE is {show(options.image)})", field="--executor")
    if options.executor is None:
        raise ConfigError("--package needs --executor IMAGE (or NAME==VERSION of a prebuilt training image)",
                          field="--package")
    if not options.packages:
        raise ConfigError("--executor needs at least one --package (an sdist: a path, file://, https:// or gs:// URI)",
                          field="--package")
    overrides = project.overrides + ((("trainer", {"module": options.module}),) if options.module else ())
    return _run_sdists(load(replace(project, overrides=overrides)), options, reporter)


def _run_sdists(config: Config, options: RunOptions, reporter: Reporter) -> RunResult:
    """The sdists (options.packages) on the executor image, for a config already loaded (with --module applied)."""
    from .executors import is_spec, resolve_executor
    from .jobs.local import package_run, run_local
    from .packaging import SCRIPT_MODULE

    trainer = config.trainer
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
        spec = package_run(packages, module, _build._secrets(config, Path(tmp)), mount_launcher=catalog)
        # No ARGS: the config's trainer args, as an image's CMD would give them.
        args = options.args or (trainer.args if trainer else ())
        return run_local(image, workers=options.workers, gpus=options.gpus, output=options.output or _runs_dir(config),
                         args=args, reporter=reporter, network=network, package=spec)


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


@dataclass(frozen=True)
class PackageOptions:
    module: str | None = None  # default: the config's trainer
    script: str | None = None  # a single script, packaged as Vertex AI's SDK packages one
    name: str | None = None  # default: the config's package.name, else the directory's name
    version: str | None = None  # default: the config's package.version, else 0.0.0
    out: Path | None = None  # default: ./dist
    stage: str | None = None  # gs://BUCKET/PREFIX, file:///DIR or a directory


@dataclass(frozen=True)
class PackageResult:
    sdist: Sdist
    staged: Staged | None

    @property
    def uri(self) -> str:
        return self.staged.uri if self.staged else self.sdist.path.resolve().as_uri()

    def to_dict(self) -> dict:
        return {**self.sdist.to_dict(), "uri": self.uri, "uploaded": self.staged.uploaded if self.staged else None}


def package(project: Project, options: PackageOptions) -> PackageResult:
    """The trainer as a reproducible sdist (checked: the module is in it), staged when asked."""
    from .packaging import build_sdist
    from .staging import parse_stage, stage

    if options.module and options.script:
        raise ConfigError("give --module or --script, not both", field="--script")
    name = distribution_name(options.name, "--name") if options.name is not None else None
    version = pep440_version(options.version, "--version") if options.version is not None else None
    where = parse_stage(options.stage) if options.stage is not None else None
    trainer = {"module": options.module} if options.module else {"script": options.script} if options.script else None
    config = load(replace(project, overrides=project.overrides + ((("trainer", trainer),) if trainer else ())))
    pins = _lock.pins(config, make_plan(config)) if _lock.lock_path(config).is_file() else {}
    sdist = build_sdist(config, options.out or Path("dist"), name=name, version=version, pins=pins)
    return PackageResult(sdist, stage(sdist.path, sdist.sha256, where) if where else None)


def executor_build(project: Project, options: BuildOptions, reporter: Reporter) -> BuildResult:
    """An executor image: the config's framework, Python, packages, hypertune and the launcher, without trainer
    code. The build context holds only the launcher (and the requirements file and template the config names),
    so a trainer's code edits never change it."""
    _check_build_options(options)
    return _executor_build(load(project), options, reporter)


def _executor_build(config: Config, options: BuildOptions, reporter: Reporter) -> BuildResult:
    """executor_build() for a config already loaded."""
    with tempfile.TemporaryDirectory(prefix="buildkit-py-executor-") as tmp:
        root = Path(tmp)
        # buildkit.lock too, when there is one: the executor installs the locked packages from the locked base.
        locked = _lock.LOCK_NAME if _lock.lock_path(config).is_file() else None
        for rel in filter(None, (config.requirements, config.template, locked)):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(config.root / rel, root / rel)
        image = config.image or (None if config.tags else "buildkit-py/executor")
        executor = replace(config, root=root, executor=True, trainer=None, image=image)
        return _build.build(executor, options, reporter)


def executors(framework: str | None = None, region: str | None = None) -> list[Executor]:
    """Google's prebuilt training images (base_images/executors.yaml), in the region's repository."""
    from .executors import catalog_entries

    return catalog_entries(framework, region=region)


def _digest(config: Config) -> str:
    """repository@digest of the content tag as the engine recorded its push."""
    ref = _build.planned_refs(config, git=False)[0][0]
    if getattr(builder_class(config.builder), "remote", False):  # pushed where it was built: the registry knows
        from .jobs import preflight

        return f"{ref.repository}@{preflight.manifest(ref).digest}"
    from docker.errors import ImageNotFound

    from .engine import engine_client

    try:
        digests = engine_client().images.get(str(ref)).attrs.get("RepoDigests") or []
    except ImageNotFound:
        digests = []
    found = [d for d in digests if d.startswith(ref.repository + "@")]
    if not found:
        raise RegistryError(f"{ref} has not been pushed from this engine: run `buildkit-py build --push` (make push) "
                            "first; a daemonless build prints its digest in `build --push --json`")
    return found[0]


# What `buildkit-py print NAME` gives: one value for Make and shell scripts.
PRINTABLE: dict[str, Any] = {
    "image-uri": lambda c: str(_build.planned_refs(c, git=False)[0][0]),
    "image-tag": lambda c: _build.planned_refs(c, git=False)[0][0].tag,
    "image": lambda c: _build.planned_refs(c, git=False)[0][0].repository,
    "tags": lambda c: " ".join(map(str, _build.planned_refs(c)[0])),
    "content-digest": lambda c: _build.planned_refs(c, git=False)[1],
    "lock-digest": _lock_digest,
    "digest": _digest,
    "base-image": lambda c: make_plan(c).base_image,
    "cuda": lambda c: make_plan(c).cuda or "",
    "python": lambda c: make_plan(c).python.version,
    "framework": lambda c: make_plan(c).framework.requirement if make_plan(c).framework else "none",
    "variants": lambda c: " ".join(v.name for v in c.variants),
}


def print_value(project: Project, name: str) -> str:
    if name not in PRINTABLE:
        raise ConfigError(f"{show(name)} is not a value buildkit-py prints; one of {', '.join(PRINTABLE)}", field="NAME")
    return PRINTABLE[name](load(project))


@dataclass(frozen=True)
class GeneratedFile:
    text: str
    written: Path | None = None

    def to_dict(self) -> dict:
        return {"path": str(self.written)} if self.written else {"text": self.text}


def _generated(text: str, output: Path | None) -> GeneratedFile:
    if output is not None:
        write_atomic(output, text)
    return GeneratedFile(text, output)


def make(project: Project, output: Path | None = None) -> GeneratedFile:
    """buildkit.mk: Make targets that each run one buildkit-py command, for `include buildkit.mk`."""
    from .makefile import render_makefile

    config = load(project)
    return _generated(render_makefile(config, project.config, output.parent if output else Path.cwd()), output)


def ci(project: Project, flavour: str, output: Path | None = None) -> GeneratedFile:
    """A CI pipeline (github, cloudbuild or gitlab) that builds every variant with a registry cache and pushes."""
    from .ci import CI_FLAVOURS, render_ci

    if flavour not in CI_FLAVOURS:
        raise ConfigError(f"{show(flavour)} is not a CI flavour buildkit-py writes; one of {', '.join(CI_FLAVOURS)}",
                          field="FLAVOUR")
    config = load(project)
    return _generated(render_ci(config, project.config, flavour), output)


def _count(name: str, value: int, limit: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ConfigError(f"{show(value)} is not allowed: a whole number from 0 to {limit}", field=name)


# ---------------------------------------------------------------------------------------------
# Vertex AI jobs: the spec, the preflight plan, submission, cancellation

@dataclass(frozen=True)
class JobOptions:
    """The job's flags; each overrides the config key of the same name under `job:`."""

    image: str | None = None
    name: str | None = None
    machine_type: str | None = None
    accelerator_type: str | None = None
    accelerator_count: int | None = None
    replica_count: int | None = None  # total: one chief (pool 0) and N-1 workers (pool 1)
    project: str | None = None
    region: str | None = None
    target: str = "vertex"  # or loopback: an API on this machine, where loopback images are allowed
    from_aiplatform: Path | None = None  # a legacy AI Platform config.yaml instead of the config's job
    # A TrainingPipeline: the job, then the model uploaded to the Model Registry with a serving image.
    pipeline: bool = False
    serving_image: str | None = None  # overrides model.serving_image: an image, or NAME==VERSION of a prebuilt one
    model_name: str | None = None  # overrides model.name


@dataclass(frozen=True)
class SubmitOptions:
    api_endpoint: str | None = None  # default: $BUILDKIT_PY_API_ENDPOINT, else https://REGION-aiplatform.googleapis.com
    wait: bool = False
    poll_interval: float = 15.0  # seconds between state reads while waiting
    timeout: float = 60.0  # seconds per request
    # For a registry this machine cannot reach (VPC Service Controls, Google's network only): plan and submit skip
    # the manifest HEAD, so the image is neither checked nor pinned by digest (the job names its tag); said as a warning.
    skip_image_check: bool = False


def _check_submit_options(options: SubmitOptions) -> None:
    from .jobs.preflight import SKIP_IMAGE_CHECK

    if not isinstance(options.skip_image_check, bool):
        raise ConfigError(f"{show(options.skip_image_check)} is not allowed: true or false", field=SKIP_IMAGE_CHECK)


@dataclass(frozen=True)
class JobResult:
    job: vertex.VertexJob
    text: str  # the resource as JSON or YAML
    not_converted: tuple[str, ...] = ()  # legacy fields left behind (--from-aiplatform)
    notes: tuple[str, ...] = ()
    written: Path | None = None

    def to_dict(self) -> dict:
        return self.job.resource  # the CustomJob / HyperparameterTuningJob itself


@dataclass(frozen=True)
class PlanResult:
    job: vertex.VertexJob  # pinned to the image's digest when the registry gave one
    method: str
    url: str
    project: str
    region: str
    checks: tuple[preflight.Check, ...]
    warnings: tuple[str, ...] = ()  # what was not checked and why

    @property
    def failed(self) -> tuple[preflight.Check, ...]:
        return tuple(c for c in self.checks if c.ok is False)

    def to_dict(self) -> dict:
        return {"request": {"method": self.method, "url": self.url, "body": self.job.resource},
                "checks": [c.to_dict() for c in self.checks], "notes": list(self.job.notes), "ok": not self.failed,
                "warnings": list(self.warnings)}


@dataclass(frozen=True)
class SubmitResult:
    name: str  # projects/P/locations/R/customJobs/ID
    console_url: str
    state: str
    tried: tuple[str, ...] = ()  # alternatives refused for capacity or quota before this one, with the reason
    error: str | None = None  # the job's error, when it failed
    model: str | None = None  # a pipeline's uploaded model (projects/P/locations/R/models/ID), once it succeeded
    warnings: tuple[str, ...] = ()  # the plan's

    @property
    def failed(self) -> bool:
        return self.state in ("JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED", "PIPELINE_STATE_FAILED",
                              "PIPELINE_STATE_CANCELLED")

    def to_dict(self) -> dict:
        return {"name": self.name, "console_url": self.console_url, "state": self.state, "tried": list(self.tried),
                "error": self.error, "model": self.model, "warnings": list(self.warnings)}


@dataclass(frozen=True)
class CancelResult:
    name: str
    state: str

    def to_dict(self) -> dict:
        return {"name": self.name, "state": self.state}


def _job_settings(project: Project, options: JobOptions) -> tuple[Config, JobConfig, tuple[str, ...], tuple[str, ...]]:
    """The config, and its job with the flags applied (each checked by its config key's validator)."""
    return _settings(load(project), options)


def _settings(config: Config, options: JobOptions) -> tuple[Config, JobConfig, tuple[str, ...], tuple[str, ...]]:
    """_job_settings for a config already loaded: the job with the flags (and a legacy file's job) applied."""
    left: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    flags = {key: job_flag(key, getattr(options, key)) for key in
             ("image", "name", "project", "region", "machine_type", "accelerator_type", "accelerator_count", "replica_count")
             if getattr(options, key) is not None}
    if options.from_aiplatform is not None:
        config, left, notes = _legacy_config(config, options.from_aiplatform, flags)
    settings = config.job or JobConfig()
    chief = {k: flags.pop(k) for k in list(flags) if k in ("machine_type", "accelerator_type", "accelerator_count",
                                                              "replica_count")}
    return config, replace(settings, chief=replace(settings.chief, **chief), **flags), left, notes


# What a legacy file decides as a whole: its cluster (every pool's machines and GPUs) and what runs on it.
_LEGACY_WHOLE = ("chief", "workers", "parameter_servers", "reduction_server", "evaluators", "python_package", "image",
                 "command")


def _legacy_config(config: Config, path: Path, flags: dict) -> tuple[Config, tuple[str, ...], tuple[str, ...]]:
    """The config with the legacy file's job: the file decides its machines, GPUs and image; the local config's
    job only fills the settings the file leaves out (project, service account, env...), as do flags."""
    from .jobs import aiplatform

    given = aiplatform.Given(**{k: flags.get(k) for k in ("machine_type", "accelerator_type", "accelerator_count", "image")})
    conversion = aiplatform.convert(path, given)
    legacy: JobConfig = conversion.values["job"]
    local = config.job or JobConfig()
    filled = {}
    for item in fields(JobConfig):
        value = getattr(legacy, item.name)
        if item.name in _LEGACY_WHOLE or value != item.default:
            continue
        if item.name == "image" and legacy.python_package is not None:
            continue
        if getattr(local, item.name) != item.default:
            filled[item.name] = getattr(local, item.name)
    if legacy.labels and local.labels:  # both kept, the legacy file's value where a key is in both
        filled["labels"] = tuple({**dict(local.labels), **dict(legacy.labels)}.items())
    notes = list(conversion.notes)
    if filled:
        notes.append(f"from {config.source}: {', '.join(f'job.{k}' for k in filled)} (the legacy file leaves them out)")
    hyperparameters = conversion.values.get("hyperparameters")
    if hyperparameters is None and config.hyperparameters is not None:
        hyperparameters = config.hyperparameters
        notes.append(f"hyperparameters from {config.source} (the legacy file has none): a tuning job")
    if "image" in flags and legacy.python_package is not None:
        legacy = replace(legacy, python_package=None)  # the image runs the trainer (noted by the conversion)
    config = replace(config, job=replace(legacy, **filled), hyperparameters=hyperparameters)
    return config, conversion.not_converted, tuple(notes)


def _vertex_job(config: Config, settings: JobConfig, options: JobOptions, build_plan: Plan | None = None,
                **kwargs) -> vertex.VertexJob:
    """build_plan: the config's plan where the caller has it already (autopackage), else resolved here when needed."""
    from .jobs import vertex

    # Resolved once, for the GPU check and the serving image.
    planned = functools.cache(lambda: build_plan or make_plan(config))
    check = None
    if config.source != "(defaults)" and config.trainer is not None:  # an image built from this config
        def check(accelerator: str) -> tuple[str, ...]:
            try:
                return check_accelerator(planned(), accelerator)
            except ResolutionError as exc:
                if options.from_aiplatform is None:
                    raise
                # A legacy job is judged by what it says: its GPUs stand, the local config's build is only a remark.
                return (f"the legacy job runs on {accelerator}, but {config.source} says otherwise: {exc}; an image "
                        "built from that config would not use the GPU as the job expects",)
    if not options.pipeline and (options.serving_image is not None or options.model_name is not None):
        raise ConfigError("the serving image and model name are a training pipeline's: add --pipeline",
                          field="--serving-image" if options.serving_image is not None else "--model-name")
    # The lock the config's image is built from (none for an image not built from it, or built unlocked).
    locked = _lock.apply(config, planned(), locked=False).lock if check is not None else None
    made = vertex.build_job(config, settings, target=options.target, revision=_build.git_revision(config.root),
                            check_accelerator=check, lock_digest=locked.digest if locked else None, **kwargs)
    if not options.pipeline:
        return made
    from .config import ModelConfig, model_flag
    from .jobs import pipeline as jobs_pipeline

    flags = {"serving_image": ("--serving-image", options.serving_image), "name": ("--model-name", options.model_name)}
    model = replace(config.model or ModelConfig(),
                    **{k: model_flag(k, value, flag) for k, (flag, value) in flags.items() if value is not None})
    framework = None
    if model.serving_image is None and not config.framework.is_none:  # the prebuilt image for the trainer's release
        installed = planned().framework
        framework = (installed.name, installed.version) if installed else None
    fallback = kwargs.get("fallback")
    return jobs_pipeline.build_pipeline(made, model, framework, region=(fallback and fallback.region) or settings.region,
                                        target=options.target)


def job(project: Project, options: JobOptions, output: Path | None = None, as_json: bool = False) -> JobResult:
    """The Vertex AI CustomJob (or HyperparameterTuningJob) for the config and flags, checked; nothing is sent.
    As YAML, or JSON; written to output when given."""
    config, settings, left, notes = _job_settings(project, options)
    made = _vertex_job(config, settings, options)
    text = json.dumps(made.resource, indent=2) + "\n" if as_json else yaml.safe_dump(made.resource, sort_keys=False)
    if output is not None:
        write_atomic(output, text)
    return JobResult(made, text, left, notes, output)


def _project_id(settings: JobConfig) -> str:
    from .jobs import submit as jobs_submit

    if settings.project:
        return settings.project
    for name in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"):
        if os.environ.get(name):
            return job_flag("project", os.environ[name])
    try:
        _, found = jobs_submit.default_credentials()
    except ServiceError:
        found = None  # said below: the project is what is missing here
    if not found:
        raise ConfigError("no project: pass --project, set job.project or GOOGLE_CLOUD_PROJECT (or use credentials "
                          "that name one)", field="--project")
    return job_flag("project", found)


def plan(project: Project, options: JobOptions, submit_options: SubmitOptions = SubmitOptions()) -> PlanResult:
    """What submit would send, and each check with its result: the image in its registry (a HEAD against it),
    its platform, accelerator and machine fit, strategy, staging, the console URL."""
    _check_submit_options(submit_options)
    config, settings, _, _ = _job_settings(project, options)
    return _plan_job(config, settings, options, submit_options)


def _plan_job(config: Config, settings: JobConfig, options: JobOptions, submit_options: SubmitOptions,
              build_plan: Plan | None = None) -> PlanResult:
    """plan() for a config already loaded and its job settings (_settings)."""
    from .jobs import preflight, vertex
    from .jobs import submit as jobs_submit

    planned = _vertex_job(config, settings, options, build_plan)
    region = settings.region or vertex.DEFAULT_REGION
    project_id = _project_id(settings)
    ref = parse_ref(planned.image, field="--image")
    checks, digest = preflight.image_checks(planned, ref, skip=submit_options.skip_image_check)
    warnings = (f"{ref} was not checked ({preflight.SKIP_IMAGE_CHECK}): this machine did not look for it in {ref.registry}, "
                "and the job names it by tag, not pinned by digest: a tag pushed again later changes what runs",
                ) if submit_options.skip_image_check else ()
    if digest:
        planned = _vertex_job(config, settings, options, build_plan, digest=digest)
    if options.pipeline:
        from .jobs import pipeline as jobs_pipeline

        checks.append(jobs_pipeline.serving_check(planned))
    base = jobs_submit.api_endpoint(submit_options.api_endpoint, region, dict(os.environ))
    url = f"{base}/v1/projects/{project_id}/locations/{region}/{planned.kind}"
    console = vertex.console_url(project_id, region, "ID")
    checks += preflight.job_checks(planned, project=project_id, region=region, console=console.replace("ID", "<job id>"),
                                   staging=settings.staging_bucket or settings.base_output_directory)
    return PlanResult(planned, "POST", url, project_id, region, tuple(checks), warnings)


def submit(project: Project, options: JobOptions, submit_options: SubmitOptions = SubmitOptions(),
           on_state: Callable[[str, dict], None] | None = None) -> SubmitResult:
    """Check (as plan), then create the job; on a refusal for capacity or quota, the config's `fallbacks:` in
    order. With wait, follow its state to the end (on_state at each change)."""
    _check_poll(submit_options)
    _check_submit_options(submit_options)
    config, settings, _, _ = _job_settings(project, options)
    return _submit_planned(config, settings, options, submit_options, _plan_job(config, settings, options, submit_options),
                           on_state)


def _check_poll(submit_options: SubmitOptions) -> None:
    if not 0 < submit_options.poll_interval <= 3600 or not 0 < submit_options.timeout <= 600:
        raise ConfigError("poll interval and timeout: seconds, more than 0 (at most 3600 and 600)", field="--poll")


def _submit_planned(config: Config, settings: JobConfig, options: JobOptions, submit_options: SubmitOptions,
                    planned: PlanResult, on_state: Callable[[str, dict], None] | None = None,
                    build_plan: Plan | None = None) -> SubmitResult:
    """submit() once its plan is made: nothing is loaded or planned again."""
    from .jobs import submit as jobs_submit
    from .jobs import vertex

    if planned.failed:
        first = planned.failed[0]
        error = BuildkitError(f"nothing was sent: check {first.name} failed: {first.detail}")
        error.exit_code = first.exit_code  # the failed check's own (2: bad input, 7: registry...)
        raise error
    credentials, _ = jobs_submit.default_credentials()
    tried: list[str] = []
    digest = _digest_of(planned.job.image)
    alternatives = (None, *config.fallbacks)
    for i, fallback in enumerate(alternatives):
        attempt = planned.job if fallback is None else _vertex_job(config, settings, options, build_plan, digest=digest,
                                                                    fallback=fallback)
        region = (fallback and fallback.region) or planned.region
        base = jobs_submit.api_endpoint(submit_options.api_endpoint, region, dict(os.environ))
        client = jobs_submit.Client(base, planned.project, region, credentials, timeout=submit_options.timeout)
        try:
            created = client.create(attempt.kind, attempt.resource)
            break
        except ServiceError as exc:
            if not jobs_submit.is_capacity(exc) or i == len(alternatives) - 1:
                raise
            tried.append(f"{attempt.accelerator or 'CPU'} {attempt.machine_type} {region} "
                         f"{attempt.strategy or 'STANDARD'}: {exc}")
    name = str(created.get("name", ""))
    try:
        _, _, _, job_id = jobs_submit.parse_name(name)
    except ConfigError:
        raise ServiceError(f"the Vertex AI API at {client.base} created a job but answered no job name: {show(name)}") from None
    result = SubmitResult(name, vertex.console_url(planned.project, region, job_id), str(created.get("state")), tuple(tried),
                          warnings=planned.warnings)
    if not submit_options.wait:
        return result
    what = "the training pipeline" if options.pipeline else "the job"
    try:
        final = client.wait(name, on_state or (lambda state, job: None), poll=submit_options.poll_interval)
    except KeyboardInterrupt:
        raise WaitInterrupted(f"stopped following {name}; {what} keeps running. Cancel it with: "
                              f"buildkit-py cancel {name}") from None
    result = replace(result, state=str(final.get("state")), error=jobs_submit.job_error(final))
    if options.pipeline and result.state == "PIPELINE_STATE_SUCCEEDED":
        from .jobs import pipeline as jobs_pipeline

        model = jobs_pipeline.uploaded_model(final)
        if model is None:
            raise ServiceError(f"{name} succeeded but names no uploaded model (modelToUpload.name): see "
                               f"{result.console_url}")
        result = replace(result, model=model)
    return result


def _digest_of(image: str | None) -> str | None:
    return parse_ref(image, field="--image").digest if image else None


def cancel(name: str, submit_options: SubmitOptions = SubmitOptions(), *, project: str | None = None,
           region: str | None = None) -> CancelResult:
    """Ask the service to cancel the job; it ends in JOB_STATE_CANCELLED (or had already ended). NAME is the
    resource name submit prints, or a custom job's ID with project and region."""
    from .jobs import submit as jobs_submit

    if "/" not in name and project is not None and region is not None:
        name = f"projects/{job_flag('project', project)}/locations/{job_flag('region', region)}/customJobs/{name}"
    project_id, region, _, _ = jobs_submit.parse_name(name)
    base = jobs_submit.api_endpoint(submit_options.api_endpoint, region, dict(os.environ))
    credentials, _ = jobs_submit.default_credentials()
    client = jobs_submit.Client(base, project_id, region, credentials, timeout=submit_options.timeout)
    client.cancel(name)
    return CancelResult(name, str(client.get(name).get("state")))


# ---------------------------------------------------------------------------------------------
# autopackage: a trainer directory to a running job in one command

AUTOPACKAGE_TARGETS = ("local", "vertex", "loopback")  # loopback: a Vertex AI API on this machine (tests)
AUTOPACKAGE_MODES = ("container", "package")


@dataclass(frozen=True)
class AutopackageOptions:
    # local: build, push to the image's registry when it names one, run here with the cloud's env; vertex: build,
    # push and submit. Default: vertex when a project is configured (job.project, $GOOGLE_CLOUD_PROJECT), else local.
    target: str | None = None
    mode: str = "container"  # or package: an sdist of the trainer on an executor image (framework, no trainer code)
    dry_run: bool = False  # infer and plan; nothing is built, pushed, run or written
    write_config: bool = False  # save what was inferred as buildkit.yaml (the only write into the trainer directory)
    strict: bool = False  # an import no declared requirement covers exits 2 instead of being added
    dockerfile: bool = False  # build the trainer directory's own Dockerfile as it is, instead of rendering one
    with_launcher: bool = False  # with dockerfile: the launcher runs first, then the Dockerfile's own command
    build: BuildOptions = field(default_factory=BuildOptions)
    gpus: int = 0
    output: Path | None = None  # default: a directory under ~/.cache/buildkit-py/runs, outside the trainer directory
    args: tuple[str, ...] = ()  # the local run's trainer args (a job's are job.args)
    job: JobOptions = field(default_factory=JobOptions)  # with vertex: project, region...; image and target are set here
    submit: SubmitOptions = field(default_factory=SubmitOptions)


@dataclass(frozen=True)
class AutopackageResult:
    inferred: _autopackage.Inferred
    stages: tuple[_autopackage.Stage, ...]
    image: str
    plan: Plan
    next_steps: tuple[str, ...] = ()  # with dry_run: what would happen
    run: RunResult | None = None
    written: Path | None = None
    submitted: SubmitResult | None = None

    @property
    def exit_code(self) -> int:
        return self.run.exit_code if self.run else 1 if self.submitted and self.submitted.failed else 0

    def to_dict(self) -> dict:
        return {"inferred": self.inferred.to_dict(), "image": self.image, "plan": self.plan.to_dict(),
                "stages": [s.to_dict() for s in self.stages], "next": list(self.next_steps),
                "run": self.run.to_dict() if self.run else None, "written": str(self.written) if self.written else None,
                "submitted": self.submitted.to_dict() if self.submitted else None}


def _runs_dir(config: Config, kind: str = "run") -> Path:
    """Where a run's or a study's outputs go unless --output names a place: under the cache dir, outside the
    trainer directory, whose next build would send them (and get a new content tag)."""
    when = f"{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**6:06d}"  # two runs in one second apart
    return cache_dir() / "runs" / f"{_build._slug(config.root.name)}-{kind}-{when}"


def _legacy_build(project: Project, directory: Path, inferred: _autopackage.Inferred, conversion: aiplatform.Conversion,
                  reporter: Reporter) -> tuple[tuple[str, Any], ...]:
    """The config keys a legacy config.yaml gives the image where the trainer directory, its config and the
    flags leave them out: the runtime's framework and Python, the master's GPU, masterConfig.imageUri's
    repository. The legacy job's GPU wins over a local `gpu: false` (the job is judged by what it says)."""
    from .config import load_raw

    raw, _ = load_raw(project.config, directory)
    flagged = {k for k, v in project.overrides if v is not None}
    inferred_keys = dict(inferred.overrides)
    given = set(raw.data) | flagged | set(inferred_keys)
    out: dict[str, Any] = {}
    notes = []
    runtime = conversion.runtime
    # The trainer's own pin wins; an import or open range took the runtime's release already (infer's prefer).
    declared = inferred_keys.get("framework")
    if runtime is not None and declared not in (None, runtime.framework) and "framework" not in set(raw.data) | flagged:
        notes.append(f"runtimeVersion {runtime.version} ran {runtime.framework}; the trainer declares {declared}: "
                     "building that")
    if runtime is not None and "framework" not in set(raw.data) | flagged and declared in (None, runtime.framework):
        out["framework"] = runtime.framework
        name, _, version = runtime.framework.partition("==")
        matrix = load_matrix()
        known = matrix.framework(name)
        series = next((x.for_release(version) for x in known.series if version in x.releases), None) if known else None
        if series is None:  # the plan's error names the releases the version data has
            notes.append(f"{runtime.framework} (what runtimeVersion {runtime.version} ran) is not in the version data; set "
                         "framework: (or --framework) to build another release")
        elif "python" not in given and (usable := usable_python(matrix, series)):
            # The runtime's Python where the wheels exist for it and an image can have it (the launcher's floor).
            out["python"] = closest_python(runtime.python, usable)
            if out["python"] != runtime.python:
                notes.append(f"AI Platform ran {runtime.framework} on Python {runtime.python}; buildkit-py images have "
                             f"Python >= {matrix.distros.min_python} and its wheels are for Python "
                             f"{', '.join(series.python)}: building with {out['python']}, the closest")
        # No usable Python (TensorFlow 1.15-2.1): the plan refuses the release with its real options.
    chief = conversion.values["job"].chief
    if chief.accelerator_type and chief.accelerator_count and not {"gpu", "accelerator"} & flagged:
        said = {k: raw.data[k] for k in ("gpu", "accelerator") if k in raw.data}
        out.update(accelerator=chief.accelerator_type, gpu=True)
        if said.get("gpu") is False or said.get("accelerator", chief.accelerator_type) != chief.accelerator_type:
            notes.append(f"the legacy job runs on {chief.accelerator_type}; {raw.source} says "
                         f"{', '.join(f'{k}: {json.dumps(v)}' for k, v in said.items())}: the image is built for the job's GPU")
    image = conversion.values["job"].image
    if image and "image" not in given:
        out["image"] = parse_ref(image, field="trainingInput.masterConfig.imageUri").repository
        notes.append(f"masterConfig.imageUri {image}: the image built from {directory} goes to {out['image']} (set "
                     "image: or --image to push it elsewhere)")
    for note in (*conversion.notes, *notes):
        reporter.message(f"note: {note}")
    return tuple(out.items())


def autopackage(project: Project, options: AutopackageOptions, reporter: Reporter) -> AutopackageResult:
    """Infer what the config leaves out, then render, build, push (when the image names a registry) and run."""
    from . import autopackage as _autopackage
    from .jobs import preflight
    from .jobs.local import run_local
    from .packaging import build_sdist

    if options.target is not None and options.target not in AUTOPACKAGE_TARGETS:
        raise ConfigError(f"{show(options.target)} is not a target; one of {', '.join(AUTOPACKAGE_TARGETS)}",
                          field="--target")
    if options.mode not in AUTOPACKAGE_MODES:
        raise ConfigError(f"{show(options.mode)} is not a mode; one of {', '.join(AUTOPACKAGE_MODES)}", field="--mode")
    _count("--gpus", options.gpus, MAX_GPUS)
    _check_build_options(options.build)
    for name, value in (("--strict", options.strict), ("--dockerfile", options.dockerfile),
                        ("--with-launcher", options.with_launcher)):
        if not isinstance(value, bool):
            raise ConfigError(f"{show(value)} is not allowed: true or false", field=name)
    if options.with_launcher and not options.dockerfile:
        raise ConfigError("--with-launcher adds the launcher to the directory's own Dockerfile: give it with "
                          "--dockerfile (rendered images always have it)", field="--with-launcher")
    if options.dockerfile and options.mode != "container":
        raise ConfigError("--dockerfile builds the directory's Dockerfile into a trainer image; --mode package runs an "
                          "sdist on an executor image instead: give one of them", field="--dockerfile")
    _check_submit_options(options.submit)
    directory = project.directory or (project.config.parent if project.config else Path.cwd())
    conversion = None
    if options.job.from_aiplatform is not None:  # its errors before any inference
        from .jobs import aiplatform

        # The image autopackage builds runs the trainer: a package job (packageUris, pythonModule) needs no runtime image.
        conversion = aiplatform.convert(options.job.from_aiplatform, aiplatform.Given(autopackage=True))
    stages = _autopackage.Stages(reporter)
    with stages.stage("infer") as out:
        runtime = conversion.runtime if conversion is not None else None
        inferred = _autopackage.infer(directory, project.config, dict(project.overrides), strict=options.strict,
                                      dockerfile=options.dockerfile, with_launcher=options.with_launcher,
                                      prefer=runtime.preferred if runtime else (),
                                      module=conversion.module if conversion is not None else None,
                                      legacy_gpu=aiplatform.master_gpus(conversion) if conversion is not None else None)
        out[0] = ", ".join(f"{k} {json.dumps(v)}" for k, v in inferred.overrides) or "nothing: the config says it all"
        out[1] = not inferred.overrides
    for note in inferred.notes:
        reporter.message(f"note: {note}")
    written = None
    own_dockerfile = read_text(directory / inferred.dockerfile, "Dockerfile") if options.dockerfile else None
    if own_dockerfile is not None and options.with_launcher:
        from .render import render_with_launcher

        own_dockerfile = render_with_launcher(own_dockerfile, str(directory / inferred.dockerfile))
    if options.write_config and not options.dry_run:
        if inferred.config_file is not None:
            raise ConfigError(f"{show(str(inferred.config_file))} exists: autopackage writes a config only where there "
                              "is none", field="--write-config")
        written = directory / "buildkit.yaml"
        write_atomic(written, _autopackage.config_text(inferred))
    legacy: tuple[tuple[str, Any], ...] = ()
    if conversion is not None:
        legacy = _legacy_build(project, directory, inferred, conversion, reporter)
    project = replace(project, directory=directory, overrides=legacy + inferred.overrides + project.overrides)
    loaded = load(project)  # the only load: each stage below gets what the one before resolved
    config = replace(loaded, network=loaded.network or "host")  # as `run`: workers rendezvous over loopback
    target = options.target or ("vertex" if options.job.project or (config.job and config.job.project) or any(
        os.environ.get(n) for n in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT")) else "local")
    with stages.stage("render") as out:
        # Planned and rendered once (with buildkit.lock's pins when a current lock is there): the content tag's digest
        # and the build hash the same text, and the build's context gets the same locked requirements.
        planned, dockerfile, _ = _build._inputs(config, builder_class(config.builder).supports_secrets, own_dockerfile,
                                                make_plan(config))
        refs, _ = _build.planned_refs(config, dockerfile, planned, git=False)  # refs[0] only: the content tag
        fw = planned.framework
        out[0] = (f"{planned.base_image}, framework {fw.requirement if fw else 'none'}"
                  f"{' from ' + fw.index_url if fw and fw.index_url else ''}, "
                  + (f"image {refs[0]}" if options.mode == "container" else "an executor image and an sdist of the trainer"))
        if own_dockerfile is not None:
            out[0] = f"{inferred.dockerfile} as it is{' with the launcher' if options.with_launcher else ''}, image {refs[0]}"
    pushes = refs[0].registry != "docker.io"  # a registry named in the image; Docker Hub is never pushed to unasked
    if target != "local":
        if options.mode == "package":
            raise ConfigError("--mode package submits only from `buildkit-py submit`: stage the sdist with "
                              "`buildkit-py package --stage gs://...` and set job.python_package", field="--mode")
        if not pushes:
            raise ConfigError(f"--target {target} needs the image in a registry the service pulls from: pass --image "
                              "REGION-docker.pkg.dev/PROJECT/REPO/NAME (or set image:)", field="--image")
        if options.args:
            raise ConfigError(f"trainer arguments after `--` are for a local run; a job's are `job.args` "
                              f"(got {show(list(options.args))})", field="ARGS")
        job_options = replace(options.job, image=str(refs[0]), target=target)
        job_config, settings, _, _ = _settings(loaded, job_options)
        _vertex_job(job_config, settings, job_options, planned)  # the spec's errors before any build
    elif options.job.pipeline:
        raise ConfigError("a training pipeline runs on Vertex AI and uploads the model to its Model Registry: use "
                          "--target vertex (or loopback for a Vertex AI API on this machine); without --pipeline, "
                          "autopackage runs the trainer here", field="--pipeline")
    if options.dry_run:
        what = "a training pipeline (the job, then the model's upload)" if options.job.pipeline else "it"
        last = ("run it here as Vertex AI runs it (CLUSTER_SPEC, AIP_* directories, hypertune metric file)"
                if target == "local" else f"submit {what} to the {target} API after `plan`'s checks")
        steps = (f"build {refs[0]}", f"push {refs[0]}" if pushes else "no push: the image names no registry (--image)",
                 last)
        return AutopackageResult(inferred, tuple(stages.done), str(refs[0]), planned, steps, written=written)
    with stages.stage("build") as out:
        if options.mode == "package":
            built = _executor_build(config, replace(options.build, push=False), reporter)  # network: host, as `run`
            refs = [parse_ref(built.tags[0], field="--tag")]
            pushes = refs[0].registry != "docker.io"
        else:
            built = _build.build(config, replace(options.build, push=False), reporter, dockerfile, planned)
        out[:] = [f"{built.tags[0]} built" if built.built else f"image {built.tags[0]} already built: not rebuilt",
                  not built.built]
    if pushes:
        with stages.stage("push") as out:
            # --skip-image-check: this machine's requests do not reach the registry (the engine's may): no lookup.
            present = False
            if not options.submit.skip_image_check:
                try:
                    preflight.manifest(refs[0])
                    present = True
                except RegistryError:
                    pass  # not there, or not readable from here: pushed
            if present:
                out[:] = [f"image {refs[0]} already in the registry: not pushed", True]
            else:
                builder = builder_class(config.builder).create(options.build.docker)
                pushed = _build.push_image(builder.push, [parse_ref(t, field="--tag") for t in built.tags], reporter)
                out[0] = f"pushed {pushed[0].image}" + "".join(f", tagged {p.tag}" for p in pushed[1:])
    if target != "local":
        with stages.stage("submit") as out:
            if built.tags[0] != job_options.image:  # the files changed during the build: the job runs what was built
                job_options = replace(job_options, image=built.tags[0])
                job_config, settings, _, _ = _settings(loaded, job_options)
            _check_poll(options.submit)
            submitted = _submit_planned(job_config, settings, job_options, options.submit,
                                        _plan_job(job_config, settings, job_options, options.submit, planned),
                                        lambda state, job: reporter.message(f"state {state}"), planned)
            out[0] = f"{submitted.name} {submitted.state}: {submitted.console_url}" + (
                f"; model {submitted.model}" if submitted.model else "")
        return AutopackageResult(inferred, tuple(stages.done), built.tags[0], planned, written=written,
                                 submitted=submitted)
    if options.mode == "package":
        with stages.stage("package") as out:
            sdist = build_sdist(config, cache_dir() / "sdists")  # byte-identical for the same files: left as it is
            out[0] = f"sdist {sdist.path} ({sdist.size} bytes, sha256 {sdist.sha256[:16]}), module {sdist.module}"
    with stages.stage("run") as out:
        run_options = RunOptions(gpus=options.gpus, output=options.output or _runs_dir(config), args=options.args,
                                 build=options.build)
        if options.mode == "package":
            run_options = replace(run_options, executor=built.tags[0], packages=(str(sdist.path),))
            _check_run_options(run_options)
            ran = _run_sdists(loaded, run_options, reporter)
        else:
            ran = run_local(built.tags[0], gpus=options.gpus, output=run_options.output, args=options.args,
                            reporter=reporter, network=config.network)
        out[0] = f"job {ran.job_id}: exit code {ran.exit_code}; outputs in {ran.output_dir}"
    return AutopackageResult(inferred, tuple(stages.done), built.tags[0], planned, run=ran, written=written)


# ---------------------------------------------------------------------------------------------
# tune --local: the config's hyperparameter study, run on this machine

MAX_TRIAL_TIMEOUT = 7 * 24 * 3600  # the service's longest job timeout


@dataclass(frozen=True)
class TuneOptions:
    image: str | None = None  # default: build the project's image first
    build: BuildOptions = field(default_factory=BuildOptions)
    gpus: int = 0  # per trial
    output: Path | None = None  # default: a directory under ~/.cache/buildkit-py/runs; one trial-N directory each
    args: tuple[str, ...] = ()  # the trainer's args before the parameters (default: the image's)
    trial_timeout: float | None = None  # seconds (default: the config's job.timeout; none: no limit)
    seed: int | None = None  # for random search and optuna's sampler


def tune(project: Project, options: TuneOptions, reporter: Reporter) -> jobs_tune.Study:
    """Run the config's `hyperparameters` study with the image, trials as local runs (see jobs/tune.py)."""
    from .jobs import tune as jobs_tune

    _count("--gpus", options.gpus, MAX_GPUS)
    timeout = options.trial_timeout
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not 0 < timeout <= MAX_TRIAL_TIMEOUT):
        raise ConfigError(f"{show(timeout)} is not allowed: seconds, more than 0 and at most {MAX_TRIAL_TIMEOUT}",
                          field="--trial-timeout")
    if options.output is not None and options.output.exists() and not options.output.is_dir():
        raise ConfigError(f"{show(str(options.output))} exists and is not a directory", field="--output")
    _check_build_options(options.build)
    config = load(project)
    if config.hyperparameters is None:
        raise ConfigError(f"{config.source} has no `hyperparameters:` study (metric, goal, max_trials, "
                          "parallel_trials, params) to run", field="hyperparameters")
    network = config.network or "host"
    if options.image is not None:
        image = str(parse_ref(options.image, field="IMAGE"))
    else:
        image = _build.build(replace(config, network=network), options.build, reporter).tags[0]
    output = (options.output or _runs_dir(config, "study")).resolve()
    return jobs_tune.run_study(image, config.hyperparameters, args=options.args, output=output, reporter=reporter,
                               network=network, gpus=options.gpus, seed=options.seed,
                               timeout=timeout if timeout is not None else (config.job.timeout if config.job else None))
