"""What the job calls are asked and give back: JobOptions and SubmitOptions (with their checks), and the results of
job, plan, submit, logs and cancel."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError, show
from ..progress import HtmlRepr

# Imported where used, for start-up time (see this package's docstring).
if TYPE_CHECKING:
    from ..jobs import preflight, vertex
    from ..jobs.logs import LogLine


@dataclass(frozen=True)
class JobOptions:
    """The job's flags; each overrides the config key of the same name under `job:`."""

    image: str | None = None
    name: str | None = None
    # The job settings of flags.JOB_FLAGS, named as their keys under `job:`, checked by the same validators.
    machine_type: str | None = None
    accelerator_type: str | None = None
    accelerator_count: int | None = None
    replica_count: int | None = None  # total: one chief (pool 0) and N-1 workers (pool 1)
    worker_pool_specs: tuple[str, ...] = ()  # gcloud's --worker-pool-spec form, one per pool: replace the config's pools
    processes_per_node: int | str | None = None  # a number, or auto: one per GPU
    args: tuple[str, ...] | None = None
    strategy: str | None = None
    max_wait_duration: str | int | None = None  # seconds, or 30m, 2h...
    timeout: str | int | None = None
    service_account: str | None = None
    network: str | None = None
    base_output_directory: str | None = None
    labels: dict[str, str] | None = None  # each overrides the config's label of its key
    project: str | None = None
    region: str | None = None
    target: str = "vertex"  # or loopback: an API on this machine, where loopback images are allowed
    from_aiplatform: Path | None = None  # a legacy AI Platform config.yaml instead of the config's job
    job_config: Path | None = None  # gcloud's job config file (custom-jobs or hp-tuning-jobs create --config), the same
    # A TrainingPipeline: the job, then the model uploaded to the Model Registry with a serving image.
    pipeline: bool = False
    serving_image: str | None = None  # overrides model.serving_image: an image, or NAME==VERSION of a prebuilt one
    model_name: str | None = None  # overrides model.name


@dataclass(frozen=True)
class SubmitOptions:
    """How plan, submit and cancel talk to the Vertex AI API: their flags (each keyword sets the field of its name)."""

    api_endpoint: str | None = None  # default: $BUILDKIT_PY_API_ENDPOINT, else https://REGION-aiplatform.googleapis.com
    wait: bool = False
    poll_interval: float = 15.0  # seconds between state reads while waiting
    timeout: float = 60.0  # seconds per request
    # For a registry this machine cannot reach (VPC Service Controls, Google's network only): plan and submit skip
    # the manifest HEAD, so the image is neither checked nor pinned by digest (the job names its tag); said as a warning.
    skip_image_check: bool = False
    # While waiting, the job's own lines from Cloud Logging as it runs (and a failed job's last lines).
    stream_logs: bool = True
    logging_endpoint: str | None = None  # default: $BUILDKIT_PY_LOGGING_ENDPOINT, else https://logging.googleapis.com


def check_submit_options(options: SubmitOptions) -> None:
    from ..jobs.preflight import SKIP_IMAGE_CHECK

    if not isinstance(options.skip_image_check, bool):
        raise ConfigError(f"{show(options.skip_image_check)} is not allowed: true or false", field=SKIP_IMAGE_CHECK)
    if not isinstance(options.stream_logs, bool):
        raise ConfigError(f"{show(options.stream_logs)} is not allowed: true or false", field="--no-logs")


def check_poll(submit_options: SubmitOptions) -> None:
    if not 0 < submit_options.poll_interval <= 3600 or not 0 < submit_options.timeout <= 600:
        raise ConfigError("poll interval and timeout: seconds, more than 0 (at most 3600 and 600)", field="--poll")


@dataclass(frozen=True)
class JobResult(HtmlRepr):
    """The job resource (a CustomJob or HyperparameterTuningJob), as text, and what a legacy file left behind."""

    job: vertex.VertexJob
    text: str  # the resource as JSON or YAML
    not_converted: tuple[str, ...] = ()  # legacy fields left behind (--from-aiplatform)
    notes: tuple[str, ...] = ()
    written: Path | None = None

    def to_dict(self) -> dict:
        return self.job.resource  # the CustomJob / HyperparameterTuningJob itself


@dataclass(frozen=True)
class PlanResult(HtmlRepr):
    """What submit would send (method, URL, the job) and each check with its result."""

    job: vertex.VertexJob  # pinned to the image's digest when the registry gave one
    method: str
    url: str
    project: str
    region: str
    checks: tuple[preflight.Check, ...]
    warnings: tuple[str, ...] = ()  # what was not checked and why

    @property
    def failed(self) -> tuple[preflight.Check, ...]:
        """The checks that failed: submit sends nothing while there is one."""
        return tuple(c for c in self.checks if c.ok is False)

    def to_dict(self) -> dict:
        return {"request": {"method": self.method, "url": self.url, "body": self.job.resource},
                "checks": [c.to_dict() for c in self.checks], "notes": list(self.job.notes), "ok": not self.failed,
                "warnings": list(self.warnings)}


@dataclass(frozen=True)
class SubmitResult(HtmlRepr):
    """The submitted job: its resource name, console URL and state (its last, with wait)."""

    name: str  # projects/P/locations/R/customJobs/ID
    console_url: str
    state: str
    tried: tuple[str, ...] = ()  # alternatives refused for capacity or quota before this one, with the reason
    error: str | None = None  # the job's error, when it failed
    model: str | None = None  # a pipeline's uploaded model (projects/P/locations/R/models/ID), once it succeeded
    warnings: tuple[str, ...] = ()  # the plan's, and why the job's log could not be read while waiting
    last_lines: tuple[LogLine, ...] = ()  # with wait: the job's last lines (what a failure shows)

    @property
    def failed(self) -> bool:
        """The job (or pipeline) ended failed, cancelled or expired."""
        return self.state in ("JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED", "PIPELINE_STATE_FAILED",
                              "PIPELINE_STATE_CANCELLED")

    def to_dict(self) -> dict:
        return {"name": self.name, "console_url": self.console_url, "state": self.state, "tried": list(self.tried),
                "error": self.error, "model": self.model, "warnings": list(self.warnings),
                "last_lines": [line.to_dict() for line in self.last_lines]}


@dataclass(frozen=True)
class LogsResult(HtmlRepr):
    """A job's log: its lines (with follow, the last ones: every line went to on_line as it came), its state and
    its error when it failed."""

    name: str
    state: str
    lines: tuple[LogLine, ...]
    error: str | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "state": self.state, "error": self.error,
                "lines": [line.to_dict() for line in self.lines]}


@dataclass(frozen=True)
class CancelResult(HtmlRepr):
    """The job asked to cancel, and its state after the request."""

    name: str
    state: str

    def to_dict(self) -> dict:
        return {"name": self.name, "state": self.state}
