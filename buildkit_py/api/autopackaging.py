"""autopackage: a trainer directory to a running job in one call."""

from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..builders import Backend
from ..catalog.matrix import Framework, FrameworkSeries, Matrix, gpu_python, load_matrix, usable_python
from ..errors import ConfigError, RegistryError, show
from ..flags import JOB_FLAGS
from ..fsutil import cache_dir, read_text, reads_once, write_atomic
from ..oci.client import PushResult, add_tags
from ..oci.refs import DOCKER_HUB, ImageRef, parse_ref
from ..pipeline.build import BuildOptions, build_staged, last_record, make_recipe, planned_refs, prepare_resolved
from ..pipeline.fastbuild import Previous, git_revision, staging
from ..pipeline.plan import Plan, closest_python
from ..pipeline.publish import Made, publish
from ..progress import HtmlRepr, Reporter
from .builds import check_build_options
from .images import executor_build_for
from .jobs import JobDraft, Watchers, draft_job, plan_job, settings_for, submit_planned, vertex_job
from .jobtypes import JobOptions, SubmitOptions, SubmitResult, check_poll, check_submit_options
from .project import (
    MAX_GPUS,
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
from .runs import RunOptions, check_run_options, local_processes, run_sdists
from .timing import Stage, Stages

# Imported where used, for start-up time (see this package's docstring).
if TYPE_CHECKING:
    from ..config import Config, JobConfig
    from ..inference import Inferred
    from ..jobs import aiplatform
    from ..jobs.local import RunResult
    from ..jobs.vertex import VertexJob
    from ..oci.remote import Manifest
    from ..pipeline.buildtypes import BuildResult
    from ..pipeline.fastbuild import Staged
    from ..pipeline.recipe import Recipe
    from ..pipeline.resolution import Resolution, Resolved

AUTOPACKAGE_TARGETS = ("local", "vertex", "loopback")  # loopback: a Vertex AI API on this machine (tests)
AUTOPACKAGE_MODES = ("container", "package")


@dataclass(frozen=True)
class AutopackageOptions:
    """What autopackage does after inferring: its flags (each keyword of autopackage() sets the field of its name;
    image= is the config's image, as --image is)."""

    # local: build, push to the image's registry when it names one, run here with the cloud's env; vertex: build,
    # push and submit. Default: vertex when a project is configured (job.project, $GOOGLE_CLOUD_PROJECT), else local.
    target: str | None = None
    mode: str = "container"  # or package: an sdist of the trainer on an executor image (framework, no trainer code)
    dry_run: bool = False  # infer and plan; nothing is built, pushed, run or written
    write_config: bool = False  # save what was inferred as buildkit.yaml (the only write into the trainer directory)
    strict: bool = False  # an import no declared requirement covers exits 2 instead of being added
    dockerfile: bool = False  # build the trainer directory's own Dockerfile as it is, instead of rendering one
    with_launcher: bool = False  # with dockerfile: the launcher runs first, then the Dockerfile's own command
    module: str | None = None  # the trainer to run (python -m MODULE), where inference would look for one
    script: str | None = None  # or a script of the directory
    build: BuildOptions = field(default_factory=BuildOptions)
    gpus: int = 0
    output: Path | None = None  # default: a directory under ~/.cache/buildkit-py/runs, outside the trainer directory
    args: tuple[str, ...] = ()  # the local run's trainer args (a job's are job.args)
    job: JobOptions = field(default_factory=JobOptions)  # with vertex: project, region...; image and target are set here
    submit: SubmitOptions = field(default_factory=SubmitOptions)


@dataclass(frozen=True)
class AutopackageResult(HtmlRepr):
    """What was inferred, each stage with its time, the image, and the local run or the submitted job."""

    inferred: Inferred
    stages: tuple[Stage, ...]
    image: str
    plan: Plan
    next_steps: tuple[str, ...] = ()  # with dry_run: what would happen
    run: RunResult | None = None
    written: Path | None = None
    submitted: SubmitResult | None = None
    resolution: Resolution | None = None  # the image's requirements as uv resolved them before the build
    job: VertexJob | None = None  # with dry_run and a service target: the job that would be submitted

    @property
    def exit_code(self) -> int:
        """The run's exit code; 1 for a submitted job that failed; else 0."""
        return self.run.exit_code if self.run else 1 if self.submitted and self.submitted.failed else 0

    def to_dict(self) -> dict:
        resolved = self.resolution
        from ..inference import masked_credentials
        from ..sources.requirements import requirement_name

        requirements = [s.to_dict() | {"resolved": resolved.version(name) if resolved and (name := requirement_name(
            s.requirement)) else None} for s in self.inferred.sources]
        return masked_credentials({"inferred": self.inferred.to_dict(), "requirements": requirements,
                "resolution": resolved.to_dict() if resolved else None, "image": self.image, "plan": self.plan.to_dict(),
                "stages": [s.to_dict() for s in self.stages], "next": list(self.next_steps),
                "run": self.run.to_dict() if self.run else None, "written": str(self.written) if self.written else None,
                "submitted": self.submitted.to_dict() if self.submitted else None,
                "job": self.job.resource if self.job else None})


def _legacy_build(project: Project, directory: Path, inferred: Inferred, conversion: aiplatform.Conversion,
                  reporter: Reporter) -> tuple[tuple[str, Any], ...]:
    """The config keys a legacy config.yaml gives the image where the trainer directory, its config and the
    flags leave them out: the runtime's framework and Python, the master's GPU, masterConfig.imageUri's
    repository. The legacy job's GPU wins over a local `gpu: false` (the job is judged by what it says)."""
    from ..config import load_raw

    raw, _ = load_raw(project.config, directory)
    flagged = {k for k, v in project.overrides if v is not None}
    inferred_keys = dict(inferred.overrides)
    given = set(raw.data) | flagged | set(inferred_keys)
    out: dict[str, Any] = {}
    notes = []
    runtime = conversion.runtime
    chief = conversion.values["job"].chief
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
        elif "python" not in given and (usable := _runtime_pythons(
                matrix, known, series, gpu_image := _gpu_image(project, raw.data, chief, known))):
            # The runtime's Python where the wheels exist for it and an image can have it (the launcher's floor; a
            # GPU image's Pythons, those of the build a GPU image installs). None: the plan refuses with the options.
            floor = matrix.distros.standalone_min_python if gpu_image else matrix.distros.min_python
            built = (known.gpu_series(series) if gpu_image else None) or series
            out["python"] = closest_python(runtime.python, usable)
            if out["python"] != runtime.python:
                wheels = f"{built.install.package}=={built.releases[0]}" if built is not series else "its wheels"
                notes.append(f"AI Platform ran {runtime.framework} on Python {runtime.python}; buildkit-py "
                             f"{'GPU ' if gpu_image else ''}images have Python >= {floor} and {wheels} are for Python "
                             f"{', '.join(built.python)}: building with {out['python']}, the closest")
        # No usable Python (TensorFlow 1.0-1.12): the plan refuses the release with its real options.
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


def _gpu_image(project: Project, data: dict, chief: Any, fw: Framework) -> bool:
    """Is the image built for a GPU: a flag, else the legacy job's accelerator, else the config, else the framework's
    default (as the plan decides)."""
    flagged = dict(project.overrides)
    if flagged.get("gpu") is not None:
        return bool(flagged["gpu"])
    if chief.accelerator_type and chief.accelerator_count:
        return True
    return bool(data["gpu"]) if data.get("gpu") is not None else fw.gpu


def _runtime_pythons(matrix: Matrix, fw: Framework, series: FrameworkSeries, gpu_image: bool) -> list[str]:
    """The Pythons an image of this release can have: on a GPU, those of the build installed there (gpu_series)
    that an nvidia/cuda image can have."""
    if not gpu_image:
        return usable_python(matrix, series)
    return [p for p in usable_python(matrix, fw.gpu_series(series) or series) if gpu_python(matrix, p)]


@reads_once
def autopackage(source: Source = None, /, options: AutopackageOptions | None = None, *, progress: Progress = None,
                **settings: Any) -> AutopackageResult:
    """Infer what the config leaves out, then render, build, push (when the image names a registry) and run here,
    or submit (target="vertex"): each stage with its time, what was inferred, the run or the job.

    source: a Project, the trainer directory or its config file, a config dict (its keys apply over the
    directory's config as flags do), or None (the working directory).
    options: AutopackageOptions; its fields, and those of its build, job and submit options, may also be keywords
    (target=, mode=, dry_run=, push=, project=, region=, wait=...).
    progress: as build's (the stages, build steps, push bytes, the job's states).
    settings: config keys as their flags set them (image= names the config's image), config, dir, variant.
    """
    project, options = arguments("autopackage", source, settings, options_of(options, AutopackageOptions, "options"),
                                 takes=("options", "progress"), config_keys=("image",))
    if project.document is not None:  # inference reads the directory's own config: the dict's keys go over it
        project = replace(project, document=None, overrides=(*project.document.items(), *project.overrides))
    project = with_trainer(project, options.module, options.script)
    with reporting(progress) as reporter:
        return _autopackage_with(project, options, reporter)


def _autopackage_with(project: Project, options: AutopackageOptions, reporter: Reporter) -> AutopackageResult:
    """autopackage() with its arguments taken apart: the stages in order, each handing its value to the next."""
    _check(options)
    stages = Stages(reporter)
    found = _infer_stage(project, options, stages, reporter)
    loaded = load(found.project)  # the only load: each stage below gets what the one before resolved
    config = replace(loaded, network=loaded.network or "host")  # as `run`: workers rendezvous over loopback
    target = options.target or ("vertex" if options.job.project or (config.job and config.job.project) or any(
        os.environ.get(n) for n in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT")) else "local")
    with ExitStack() as held:  # the staged context lives until the build has taken it
        prepared, resolution = _resolve_stage(config, found, options, stages)
        # The framework release and Python the resolution chose are the job's config's as much as the build's.
        loaded = replace(loaded, framework=prepared.config.framework, python=prepared.config.python)
        config = prepared.config
        rendered = _render_stage(config, prepared.plan, found, options, stages, held, reporter)
        job = _job_stage(loaded, options, target, rendered)
        if options.dry_run:
            return _dry_run(found, rendered, options, target, stages, resolution, job)
        backend = Backend(config.builder, options.build.docker)  # the build's and the push's, made once
        built = _build_stage(config, options, target, rendered, stages, backend, reporter)
    image = rendered.image if options.mode == "container" else parse_ref(built.tags[0], field="--tag")
    if _pushed(image):
        _push_stage(config, options, image, built, stages, backend, reporter)
    if job is not None:
        submitted = _submit_stage(job, options, stages, reporter)
        return AutopackageResult(found.inferred, tuple(stages.done), built.tags[0], rendered.planned,
                                 written=found.written, submitted=submitted, resolution=resolution)
    ran = _run_stage(loaded, config, options, built, stages, reporter)
    return AutopackageResult(found.inferred, tuple(stages.done), built.tags[0], rendered.planned, run=ran,
                             written=found.written, resolution=resolution)


def _check(options: AutopackageOptions) -> None:
    """The options' own errors, before anything is read."""
    if options.target is not None and options.target not in AUTOPACKAGE_TARGETS:
        raise ConfigError(f"{show(options.target)} is not a target; one of {', '.join(AUTOPACKAGE_TARGETS)}",
                          field="--target")
    if options.mode not in AUTOPACKAGE_MODES:
        raise ConfigError(f"{show(options.mode)} is not a mode; one of {', '.join(AUTOPACKAGE_MODES)}", field="--mode")
    check_count("--gpus", options.gpus, MAX_GPUS)
    check_build_options(options.build)
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
    check_submit_options(options.submit)
    given = {f.key: getattr(options.job, f.key) for f in JOB_FLAGS if getattr(options.job, f.key) not in (None, ())}
    if given:  # checked whatever the target: a local run reads some of them, and none passes unread
        from ..config import job_flag, worker_pool_specs

        for key, value in given.items():
            worker_pool_specs(value) if key == "worker_pool_specs" else job_flag(key, value)


@dataclass(frozen=True)
class _Found:
    """The infer stage's hand-off: what was inferred, the project with it (and a legacy config's keys) applied, the
    config written, and the directory's own Dockerfile as it is built (--dockerfile)."""

    inferred: Inferred
    project: Project
    written: Path | None
    own_dockerfile: str | None


def _infer_stage(project: Project, options: AutopackageOptions, stages: Stages, reporter: Reporter) -> _Found:
    from ..inference import Asked, config_text, infer

    directory = project.directory or (project.config.parent if project.config else Path.cwd())
    conversion = None
    if options.job.from_aiplatform is not None:  # its errors before any inference
        from ..jobs import aiplatform

        # The image autopackage builds runs the trainer: a package job (packageUris, pythonModule) needs no runtime image.
        conversion = aiplatform.convert(options.job.from_aiplatform, aiplatform.Given(autopackage=True))
    with stages.stage("infer") as out:
        runtime = conversion.runtime if conversion is not None else None
        asked = Asked(options.strict, options.dockerfile, options.with_launcher,
                      tuple(runtime.preferred) if runtime else (), conversion.module if conversion is not None else None,
                      aiplatform.master_gpus(conversion) if conversion is not None else None, not options.dry_run)
        inferred = infer(directory, project.config, dict(project.overrides), asked)
        out.detail = (", ".join(f"{k} {json.dumps(v)}" for k, v in inferred.overrides)
                      or "nothing: the config and the flags say it all")
        out.reused = not inferred.overrides
    for note in inferred.notes:
        reporter.message(f"note: {note}")
    written = None
    own_dockerfile = read_text(directory / inferred.dockerfile, "Dockerfile", root=directory) if options.dockerfile else None
    if own_dockerfile is not None and options.with_launcher:
        from ..pipeline.render import render_with_launcher

        own_dockerfile = render_with_launcher(own_dockerfile, str(directory / inferred.dockerfile))
    if options.write_config and inferred.config_file is not None:  # refused in a dry run too: it says what would be
        raise ConfigError(f"{show(str(inferred.config_file))} exists: autopackage writes a config only where there "
                          "is none", field="--write-config")
    if options.write_config and not options.dry_run:
        written = directory / "buildkit.yaml"
        write_atomic(written, config_text(inferred))
    legacy: tuple[tuple[str, Any], ...] = ()
    if conversion is not None:
        legacy = _legacy_build(project, directory, inferred, conversion, reporter)
    project = replace(project, directory=directory, overrides=legacy + inferred.overrides + project.overrides)
    return _Found(inferred, project, written, own_dockerfile)


@dataclass(frozen=True)
class _Rendered:
    """The render stage's hand-off: the plan (lock applied), the recipe, its context staged where this command
    builds it (None: a dry run, or --mode package, which builds an executor instead), and the content tag."""

    planned: Plan
    recipe: Recipe
    staged: Staged | None
    image: ImageRef


def _render_stage(config: Config, planned: Plan, found: _Found, options: AutopackageOptions, stages: Stages,
                  held: ExitStack, reporter: Reporter) -> _Rendered:
    with stages.stage("render") as out:
        # Rendered once from the one plan (with buildkit.lock's pins when a current lock is there): the content tag's
        # digest and the build hash the same text, and the build's context gets the same locked requirements.
        recipe = make_recipe(config, planned, found.own_dockerfile)
        staged = None
        if options.mode == "container" and not options.dry_run:
            # Staged once: the job names the content tag of exactly the files the build then gets.
            staged = held.enter_context(staging(recipe, lambda: git_revision(config.root), reporter, time.perf_counter()))
            image = staged.refs[0]
        else:  # nothing of this recipe is built: its files hashed for the content tag, nothing copied
            image = planned_refs(recipe, git=False)[0][0]
        fw = planned.framework
        out.detail = (f"{planned.base_image}, framework {fw.requirement if fw else 'none'}"
                  f"{' from ' + fw.index_url if fw and fw.index_url else ''}, "
                  + (f"image {image}" if options.mode == "container" else "an executor image and an sdist of the trainer"))
        if found.own_dockerfile is not None:
            out.detail = (f"{found.inferred.dockerfile} as it is{' with the launcher' if options.with_launcher else ''}, "
                      f"image {image}")
    if options.mode == "package":
        from ..pipeline.packaging import refuse_function

        refuse_function(config.trainer)  # the dry run says it too
    return _Rendered(planned, recipe, staged, image)


@dataclass(frozen=True)
class _Job:
    """The job stage's hand-off, for a service target: the job's options and settings, and the job made once from
    the staged tag (its errors before any build); plan pins it to the pushed digest."""

    options: JobOptions
    config: Config
    settings: JobConfig
    draft: JobDraft
    spec: VertexJob


def _job_stage(loaded: Config, options: AutopackageOptions, target: str, rendered: _Rendered) -> _Job | None:
    if target == "local":
        if options.job.pipeline:
            raise ConfigError("a training pipeline runs on Vertex AI and uploads the model to its Model Registry: use "
                              "--target vertex (or loopback for a Vertex AI API on this machine); without --pipeline, "
                              "autopackage runs the trainer here", field="--pipeline")
        return None
    if options.mode == "package":
        raise ConfigError("--mode package submits only from `buildkit-py submit`: stage the sdist with "
                          "`buildkit-py package --stage gs://...` and set job.python_package", field="--mode")
    if not _pushed(rendered.image):
        raise ConfigError(f"--target {target} needs the image in a registry the service pulls from: pass --image "
                          "REGION-docker.pkg.dev/PROJECT/REPO/NAME (or set image:)", field="--image")
    if options.args:
        raise ConfigError(f"trainer arguments after `--` are for a local run; a job's are `job.args` "
                          f"(got {show(list(options.args))})", field="ARGS")
    job_options = replace(options.job, image=str(rendered.image), target=target)
    found = settings_for(loaded, job_options)
    job_config, settings = found.config, found.job
    draft = draft_job(job_config, settings, job_options, lambda: rendered.planned)
    return _Job(job_options, job_config, settings, draft, vertex_job(job_config, settings, job_options, draft))


def _resolve_stage(config: Config, found: _Found, options: AutopackageOptions, stages: Stages
                   ) -> tuple[Resolved, Resolution | None]:
    """The plan, and the image's requirements resolved with it once, before anything is rendered: the framework release
    and Python it chooses where nobody pinned them are what the render, the build and the job take."""
    from ..pipeline.resolution import Resolution

    locked = options.build.locked
    if found.own_dockerfile is not None:
        return (prepare_resolved(config, locked=locked, own_dockerfile=found.own_dockerfile),
                Resolution(False, f"{found.inferred.dockerfile} installs what it says: nothing is resolved for it"))
    if options.mode != "container":
        return prepare_resolved(config, locked=locked, resolve=False), None
    with stages.stage("resolve") as out:
        declared = [(s.requirement, s.source) for s in found.inferred.sources] + [(p, f"{config.source}: pip")
                                                                                for p in config.pip]
        prepared = prepare_resolved(config, locked=locked, offline=options.build.offline, declared=declared)
        resolution = prepared.resolution
        if resolution is None:  # a remote builder resolves where it builds
            resolution = Resolution(False, f"the {config.builder} builder resolves the requirements where it builds")
        out.says(resolution.note + (" (kept from an earlier run)" if resolution.cached else ""), resolution.cached)
    return prepared, resolution


def _dry_run(found: _Found, rendered: _Rendered, options: AutopackageOptions, target: str, stages: Stages,
             resolution: Resolution | None, job: _Job | None) -> AutopackageResult:
    image = rendered.image
    what = "a training pipeline (the job, then the model's upload)" if options.job.pipeline else "it"
    last = ("run it here as Vertex AI runs it (CLUSTER_SPEC, AIP_* directories, hypertune metric file)"
            if target == "local" else f"submit {what} to the {target} API after `plan`'s checks")
    steps = (*([f"write {found.project.directory / 'buildkit.yaml'} (what was inferred)"] if options.write_config else []),
             f"build {image}", f"push {image}" if _pushed(image) else "no push: the image names no registry (--image)",
             last)
    return AutopackageResult(found.inferred, tuple(stages.done), str(image), rendered.planned, steps,
                             written=found.written, resolution=resolution, job=job.spec if job else None)


def _build_stage(config: Config, options: AutopackageOptions, target: str, rendered: _Rendered, stages: Stages,
                 backend: Backend, reporter: Reporter) -> BuildResult:
    with stages.stage("build") as out:
        if rendered.staged is None:  # --mode package: the executor image (network: host, as `run`)
            built = executor_build_for(config, replace(options.build, push=False), reporter)
        else:
            # For the service the build pushes itself: a code-only edit is then appended in the registry (the fast
            # path), with no engine build or push. A local run needs the image in the engine: built there; so does
            # a registry only the engine reaches (--skip-image-check): the engine pushes.
            through_build = _pushed(rendered.image) and target != "local" and not options.submit.skip_image_check
            build_options = replace(options.build, push=through_build)
            built = build_staged(config, build_options, reporter, rendered.staged, backend,
                                 lambda: None,  # resolved by the resolve stage
                                 Previous(last_record(rendered.recipe, build_options)))
        out.says(f"{built.tags[0]} built" if built.built else f"image {built.tags[0]} already built: not rebuilt",
                 not built.built)
    return built


def _push_stage(config: Config, options: AutopackageOptions, image: ImageRef, built: BuildResult, stages: Stages,
                backend: Backend, reporter: Reporter) -> None:
    with stages.stage("push") as out:
        pushed = built.pushed  # the build's own push (a code-only edit: appended in the registry)
        # --skip-image-check: this machine's requests do not reach the registry (the engine's may): no lookup.
        there = None if pushed or options.submit.skip_image_check else _in_registry(image)
        if there is not None:  # the content tag names the content: only the other tags (--tag) may have to move
            more = tuple(parse_ref(t, field="--tag") for t in built.tags[1:])
            tagged = add_tags(PushResult(f"{image.repository}@{there.digest}", image.tag or "latest", there.digest, None),
                              more, reporter)
            out.says(f"image {image} already in the registry: not pushed"
                     + "".join(f", tagged {p.tag}" for p in tagged), True)
            return
        if not pushed:
            refs = tuple(parse_ref(t, field="--tag") for t in built.tags)
            pushed = publish(Made(built, refs, git_revision(config.root)), replace(options.build, push=True), reporter,
                             backend.made()).pushed
        out.detail = f"pushed {pushed[0].image}" + "".join(f", tagged {p.tag}" for p in pushed[1:])


def _submit_stage(job: _Job, options: AutopackageOptions, stages: Stages, reporter: Reporter) -> SubmitResult:
    with stages.stage("submit") as out:
        check_poll(options.submit)
        submitted = submit_planned(job.config, job.settings, job.options, options.submit, job.draft,
                                   plan_job(job.config, job.settings, job.options, options.submit, job.draft),
                                   Watchers(lambda state, spec: reporter.job_state(str(spec.get("name", "")), state),
                                            reporter.job_log))
        out.detail = f"{submitted.name} {submitted.state}: {submitted.console_url}" + (
            f"; model {submitted.model}" if submitted.model else "")
    return submitted


def _run_stage(loaded: Config, config: Config, options: AutopackageOptions, built: BuildResult, stages: Stages,
               reporter: Reporter) -> RunResult:
    """The image run here as Vertex AI runs it; --mode package: the trainer's sdist on the executor image."""
    from ..jobs.local import LocalRun, run_local

    sdist = None
    if options.mode == "package":
        from ..pipeline.packaging import build_sdist

        with stages.stage("package") as out:
            sdist = build_sdist(config, cache_dir() / "sdists")  # byte-identical for the same files: left as it is
            out.detail = f"sdist {sdist.path} ({sdist.size} bytes, sha256 {sdist.sha256[:16]}), module {sdist.module}"
    with stages.stage("run") as out:
        run_options = RunOptions(gpus=options.gpus, output=options.output or runs_dir(config), args=options.args,
                                 build=options.build, processes_per_node=options.job.processes_per_node,
                                 workers=(options.job.replica_count or 1) - 1)
        if sdist is not None:
            run_options = replace(run_options, executor=built.tags[0], packages=(str(sdist.path),))
            check_run_options(run_options)
            ran = run_sdists(loaded, run_options, reporter)
        else:
            workers = (options.job.replica_count or 1) - 1
            processes = local_processes(config, options.job.processes_per_node, workers, options.gpus)
            ran = run_local(LocalRun(built.tags[0], run_options.output, gpus=options.gpus, args=options.args,
                                     network=config.network, workers=workers, processes_per_node=processes), reporter)
        out.detail = f"job {ran.job_id}: exit code {ran.exit_code}; outputs in {ran.output_dir}"
    return ran


def _pushed(image: ImageRef) -> bool:
    """Whether autopackage pushes the image: it names a registry. Docker Hub (no host named) is never pushed to
    unasked."""
    return image.registry != DOCKER_HUB


def _in_registry(ref: ImageRef) -> Manifest | None:
    from ..jobs import preflight

    try:
        return preflight.manifest(ref)
    except RegistryError:
        return None  # not there, or not readable from here: pushed
