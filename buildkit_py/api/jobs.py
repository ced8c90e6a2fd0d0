"""Vertex AI jobs: the spec, the preflight plan, submission (their options and results: api/jobtypes.py; a
submitted job followed, its log and its cancellation: api/following.py)."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import yaml

from ..config import Config, Fallback, JobConfig, job_flag, worker_pool_specs
from ..config.reading import DEFAULTS_SOURCE
from ..errors import BuildkitError, ConfigError, ResolutionError, ServiceError, WaitInterrupted, show
from ..flags import JOB_FLAGS, job_flag_name
from ..fsutil import reads_once, write_atomic
from ..pipeline.build import git_revision, prepare
from ..pipeline.plan import Plan, check_accelerator
from .following import follow_job
from .jobtypes import (
    JobOptions,
    JobResult,
    PlanResult,
    SubmitOptions,
    SubmitResult,
    check_poll,
    check_submit_options,
)
from .project import Progress, Project, Source, arguments, checked, load, options_of, output_file, reporting

# Imported where used, for start-up time (see this package's docstring).
if TYPE_CHECKING:
    from ..jobs import aiplatform, vertex
    from ..jobs.logs import LogLine


@dataclass(frozen=True)
class JobSettings:
    """The config and its job with the flags (and a job file's job) applied; of a job file, what was left out of the
    conversion and the notes it made."""

    config: Config
    job: JobConfig
    left: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _job_settings(project: Project, options: JobOptions) -> JobSettings:
    """The config, and its job with the flags applied (each checked by its config key's validator)."""
    return settings_for(load(project), options)


def settings_for(config: Config, options: JobOptions) -> JobSettings:
    """_job_settings for a config already loaded: the job with the flags (and a legacy file's job) applied."""
    left: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    keys = ("image", "name", "project", "region", *(f.key for f in JOB_FLAGS if f.key != "worker_pool_specs"))
    flags = {key: job_flag(key, getattr(options, key)) for key in keys if getattr(options, key) is not None}
    pools = worker_pool_specs(options.worker_pool_specs) if options.worker_pool_specs else {}
    if options.from_aiplatform is not None and options.job_config is not None:
        raise ConfigError("give one job file: a legacy AI Platform config.yaml or gcloud's job config, not both",
                          field="--job-config")
    if options.from_aiplatform is not None or options.job_config is not None:
        if pools:
            raise ConfigError("the job file decides the job's pools: give its machines as --machine-type and the "
                              "other flags, or drop the file", field=job_flag_name("worker_pool_specs"))
        config, left, notes = _file_config(config, _converted(options, flags), flags)
    settings = config.job or JobConfig()
    chief = {k: flags.pop(k) for k in list(flags) if k in ("machine_type", "accelerator_type", "accelerator_count",
                                                              "replica_count")}
    if "labels" in flags:  # the config's labels stay where the flag gives no value for their key
        flags["labels"] = tuple({**dict(settings.labels), **dict(flags["labels"])}.items())
    if pools:
        settings = replace(settings, reduction_server=None, **pools)
    return JobSettings(config, replace(settings, chief=replace(settings.chief, **chief), **flags), left, notes)


# What a legacy file decides as a whole: its cluster (every pool's machines and GPUs) and what runs on it.
_LEGACY_WHOLE = ("chief", "workers", "parameter_servers", "reduction_server", "evaluators", "python_package", "image",
                 "command")


def _converted(options: JobOptions, flags: dict) -> aiplatform.Conversion:
    """The job file (--from-aiplatform or --job-config) as config keys; the flags given fill what it leaves out."""
    if options.job_config is not None:
        from ..jobs import gcloud_config

        return gcloud_config.convert(options.job_config, flags)
    from ..jobs import aiplatform

    given = aiplatform.Given(**{k: flags.get(k) for k in ("machine_type", "accelerator_type", "accelerator_count", "image",
                                                          "region", "name", "service_account", "network", "args",
                                                          "timeout")})
    return aiplatform.convert(options.from_aiplatform, given)


def _file_config(config: Config, conversion: aiplatform.Conversion,
                 flags: dict) -> tuple[Config, tuple[str, ...], tuple[str, ...]]:
    """The config with a job file's job: the file decides its machines, GPUs and image; the local config's
    job only fills the settings the file leaves out (project, service account, env...), as do flags."""
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
        notes.append(f"from {config.source}: {', '.join(f'job.{k}' for k in filled)} (the job file leaves them out)")
    hyperparameters = conversion.values.get("hyperparameters")
    if hyperparameters is None and config.hyperparameters is not None:
        hyperparameters = config.hyperparameters
        notes.append(f"hyperparameters from {config.source} (the job file has none): a tuning job")
    if "image" in flags and legacy.python_package is not None:
        legacy = replace(legacy, python_package=None)  # the image runs the trainer (noted by the conversion)
    config = replace(config, job=replace(legacy, **filled), hyperparameters=hyperparameters)
    return config, conversion.not_converted, tuple(notes)


@dataclass(frozen=True)
class JobDraft:
    """The job stage's hand-off: the CustomJob or tuning job made once, its image by tag, and the plan of that image
    (asked for by the GPU check, the lock label and a pipeline's serving image). plan_job pins it to the digest the
    registry holds; a fallback's job is made from the same plan."""

    made: vertex.VertexJob
    image_plan: Callable[[], Plan]


def image_plan(config: Config) -> Callable[[], Plan]:
    """The plan (lock applied) of the image the config builds, prepared when first asked for, and only once: a job
    whose image was not built by this command."""
    return functools.cache(lambda: prepare(job_platform(config)))


def job_platform(config: Config) -> Config:
    """The config of the image a job runs: for a multi-platform image, the platform its accelerator's machines run,
    else linux/amd64 (Vertex AI's CPU machines), else its first; the job names the index, and each machine pulls its
    own platform's manifest from it."""
    if not config.multi_platform:
        return config
    from ..catalog.machines import arch, load_machines

    accelerator = (config.job.chief.accelerator_type if config.job else None) or config.accelerator
    wanted = (load_machines().accelerator_platform(accelerator) if accelerator else None) or "linux/amd64"
    return next((c for c in config.each_platform() if arch(c.platform) == wanted), config.each_platform()[0])


def vertex_job(config: Config, settings: JobConfig, options: JobOptions, draft: JobDraft, *,
               digest: str | None = None) -> vertex.VertexJob:
    """The job as it is sent (a training pipeline around it with --pipeline), its image pinned to digest when given."""
    from ..jobs import vertex

    return _finished(config, settings, options, vertex.pin(draft.made, digest) if digest else draft.made,
                     draft.image_plan, None)


def draft_job(config: Config, settings: JobConfig, options: JobOptions, planned: Callable[[], Plan],
              fallback: Fallback | None = None) -> JobDraft:
    """The CustomJob or tuning job, its image by tag; planned: the image's plan (image_plan, or the plan of the
    image this command built)."""
    from ..jobs import vertex

    check = None
    if config.source != DEFAULTS_SOURCE and config.trainer is not None:  # an image built from this config
        def check(accelerator: str) -> tuple[str, ...]:
            try:
                return check_accelerator(planned(), accelerator)
            except ResolutionError as exc:
                if options.from_aiplatform is None and options.job_config is None:
                    raise
                # A legacy job is judged by what it says: its GPUs stand, the local config's build is only a remark.
                return (f"the legacy job runs on {accelerator}, but {config.source} says otherwise: {exc}; an image "
                        "built from that config would not use the GPU as the job expects",)
    if not options.pipeline and (options.serving_image is not None or options.model_name is not None):
        raise ConfigError("the serving image and model name are a training pipeline's: add --pipeline",
                          field="--serving-image" if options.serving_image is not None else "--model-name")
    # The plan of the config's image: its lock (none for an image not built from it, or built unlocked), its platform.
    image = planned() if check is not None else None
    locked = image.lock if image else None
    built = vertex.Built(image.platform if image else None, check, git_revision(config.root),
                         locked.digest if locked else None)
    return JobDraft(vertex.build_job(config, settings, target=options.target, fallback=fallback, built=built), planned)


def _finished(config: Config, settings: JobConfig, options: JobOptions, made: vertex.VertexJob,
              planned: Callable[[], Plan], fallback: Fallback | None) -> vertex.VertexJob:
    """The job as it is sent: a training pipeline around it with --pipeline."""
    if not options.pipeline:
        return made
    from ..config import ModelConfig, model_flag
    from ..jobs import pipeline as jobs_pipeline

    flags = {"serving_image": ("--serving-image", options.serving_image), "name": ("--model-name", options.model_name)}
    model = replace(config.model or ModelConfig(),
                    **{k: model_flag(k, value, flag) for k, (flag, value) in flags.items() if value is not None})
    framework = None
    if model.serving_image is None and not config.framework.is_none:  # the prebuilt image for the trainer's release
        installed = planned().framework
        framework = (installed.name, installed.version) if installed else None
    return jobs_pipeline.build_pipeline(made, model, framework, region=(fallback and fallback.region) or settings.region,
                                        target=options.target)


@reads_once
def job(source: Source = None, /, options: JobOptions | None = None, output: str | os.PathLike | None = None,
        as_json: bool = False, **settings: Any) -> JobResult:
    """The Vertex AI CustomJob (or HyperparameterTuningJob) for the config and flags, checked; nothing is sent.
    As YAML, or JSON; written to output when given.

    source: a Project, the trainer directory or config file, a config dict, or None (the working directory).
    options: JobOptions; its fields may also be keywords (image= is the job's image, machine_type=,
    accelerator_type=, project=, region=...).
    settings: config keys as their flags set them, config, dir, variant.
    """
    project, options = arguments("job", source, settings, options_of(options, JobOptions, "options"),
                                 takes=("options", "output", "as_json"))
    output = output_file(output, "output")
    as_json = checked(as_json, "bool", "as_json")
    found = _job_settings(project, options)
    config, job_settings = found.config, found.job
    made = vertex_job(config, job_settings, options, draft_job(config, job_settings, options, image_plan(config)))
    text = json.dumps(made.resource, indent=2) + "\n" if as_json else yaml.safe_dump(made.resource, sort_keys=False)
    if output is not None:
        write_atomic(output, text)
    return JobResult(made, text, found.left, found.notes, output)


def _project_id(settings: JobConfig) -> str:
    from ..jobs import submit as jobs_submit

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


@reads_once
def plan(source: Source = None, /, options: JobOptions | None = None, submit_options: SubmitOptions | None = None,
         **settings: Any) -> PlanResult:
    """What submit would send, and each check with its result: the image in its registry (a HEAD against it),
    its platform, accelerator and machine fit, strategy, staging, the console URL.

    source, options, settings: as job's; submit_options: SubmitOptions, or its fields as keywords
    (api_endpoint=, timeout=, skip_image_check=).
    """
    project, options, submit_options = arguments("plan", source, settings, options_of(options, JobOptions, "options"),
                                                 options_of(submit_options, SubmitOptions, "submit_options"),
                                                 takes=("options", "submit_options"))
    check_submit_options(submit_options)
    found = _job_settings(project, options)
    config, job_settings = found.config, found.job
    return plan_job(config, job_settings, options, submit_options,
                    draft_job(config, job_settings, options, image_plan(config)))


def plan_job(config: Config, settings: JobConfig, options: JobOptions, submit_options: SubmitOptions,
             draft: JobDraft) -> PlanResult:
    """plan() for a config already loaded, its job settings (settings_for) and the job made of them: checked, then
    pinned to what the registry holds."""
    from ..jobs import preflight, vertex
    from ..jobs import submit as jobs_submit

    made = draft.made
    region = settings.region or vertex.DEFAULT_REGION
    project_id = _project_id(settings)
    ref = made.image
    checks, digest = preflight.image_checks(made, ref, skip=submit_options.skip_image_check)
    warnings = (f"{ref} was not checked ({preflight.SKIP_IMAGE_CHECK}): this machine did not look for it in {ref.registry}, "
                "and the job names it by tag, not pinned by digest: a tag pushed again later changes what runs",
                ) if submit_options.skip_image_check else ()
    planned = vertex_job(config, settings, options, draft, digest=digest)
    if options.pipeline:
        from ..jobs import pipeline as jobs_pipeline

        checks.append(jobs_pipeline.serving_check(planned))
    base = jobs_submit.api_endpoint(submit_options.api_endpoint, region, dict(os.environ))
    url = f"{base}/v1/projects/{project_id}/locations/{region}/{planned.kind}"
    console = vertex.console_url(project_id, region, "ID")
    checks += preflight.job_checks(planned, project=project_id, region=region, console=console.replace("ID", "<job id>"),
                                   staging=settings.staging_bucket or settings.base_output_directory)
    return PlanResult(planned, "POST", url, project_id, region, tuple(checks), warnings)


@reads_once
def submit(source: Source = None, /, options: JobOptions | None = None, submit_options: SubmitOptions | None = None,
           on_state: Callable[[str, dict], None] | None = None, *, on_line: Callable[[LogLine], None] | None = None,
           progress: Progress = None, **settings: Any) -> SubmitResult:
    """Check (as plan), then create the job; on a refusal for capacity or quota, the config's `fallbacks:` in
    order. With wait=True, follow its state to the end: the result then holds the last state (and the job's error).

    source, options, submit_options, settings: as plan's (wait=, poll_interval= too).
    on_state: called with (state, job resource) at each change while waiting; default: progress shows it.
    on_line: called with each line of the job's log while waiting (stream_logs); default: progress shows it.
    progress: as build's (the job's states and log lines).
    """
    project, options, submit_options = arguments("submit", source, settings, options_of(options, JobOptions, "options"),
                                                 options_of(submit_options, SubmitOptions, "submit_options"),
                                                 takes=("options", "submit_options", "on_state", "on_line", "progress"))
    on_state = checked(on_state, "Callable[[str, dict], None] | None", "on_state")
    on_line = checked(on_line, "Callable[[LogLine], None] | None", "on_line")
    check_poll(submit_options)
    check_submit_options(submit_options)
    found = _job_settings(project, options)
    config, job_settings = found.config, found.job
    draft = draft_job(config, job_settings, options, image_plan(config))
    planned = plan_job(config, job_settings, options, submit_options, draft)
    with reporting(progress) as reporter:
        return submit_planned(config, job_settings, options, submit_options, draft, planned, Watchers(
            on_state or (lambda state, job: reporter.job_state(str(job.get("name", "")), state)),
            on_line or reporter.job_log))


def _fallback_job(config: Config, settings: JobConfig, options: JobOptions, draft: JobDraft, fallback: Fallback,
                  digest: str | None) -> vertex.VertexJob:
    """The job on a fallback's machine, region or strategy, for the same image (pinned as the first was)."""
    from ..jobs import vertex

    made = draft_job(config, settings, options, draft.image_plan, fallback).made
    return _finished(config, settings, options, vertex.pin(made, digest) if digest else made, draft.image_plan,
                     fallback)


@dataclass(frozen=True)
class Watchers:
    """What is told while submit waits on the job: each change of its state (state, job resource), each log line."""

    on_state: Callable[[str, dict], None] | None = None
    on_line: Callable[[LogLine], None] | None = None


def submit_planned(config: Config, settings: JobConfig, options: JobOptions, submit_options: SubmitOptions,
                   draft: JobDraft, planned: PlanResult, watchers: Watchers = Watchers()) -> SubmitResult:
    """submit() once its plan is made: nothing is loaded or planned again (a fallback's job is made from the draft's
    image plan)."""
    on_state, on_line = watchers.on_state, watchers.on_line
    from ..jobs import submit as jobs_submit
    from ..jobs import vertex

    if planned.failed:
        first = planned.failed[0]
        error = BuildkitError(f"nothing was sent: check {first.name} failed: {first.detail}")
        error.exit_code = first.exit_code  # the failed check's own (2: bad input, 7: registry...)
        raise error
    credentials, _ = jobs_submit.default_credentials()
    tried: list[str] = []
    digest = planned.job.image.digest
    alternatives = (None, *config.fallbacks)
    for i, fallback in enumerate(alternatives):
        attempt = planned.job if fallback is None else _fallback_job(config, settings, options, draft, fallback, digest)
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
        final, last, warned = follow_job(client, name, submit_options, on_state or (lambda state, job: None), on_line)
    except KeyboardInterrupt:
        raise WaitInterrupted(f"stopped following {name}; {what} keeps running. Cancel it with: "
                              f"buildkit-py cancel {name}") from None
    result = replace(result, state=str(final.get("state")), error=jobs_submit.job_error(final), last_lines=last,
                     warnings=result.warnings + warned)
    if options.pipeline and result.state == "PIPELINE_STATE_SUCCEEDED":
        from ..jobs import pipeline as jobs_pipeline

        model = jobs_pipeline.uploaded_model(final)
        if model is None:
            raise ServiceError(f"{name} succeeded but names no uploaded model (modelToUpload.name): see "
                               f"{result.console_url}")
        result = replace(result, model=model)
    return result

