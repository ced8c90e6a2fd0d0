"""The Vertex AI v1 REST API: create, get, list, cancel jobs and training pipelines; wait on one; fall back on
capacity.

Credentials are Application Default Credentials through google-auth (GOOGLE_APPLICATION_CREDENTIALS
honoured: a service-account key file's token_uri says where tokens come from). A create request
carries a client-generated id in a label; before a create is retried after a timeout or a dropped
connection, the jobs with that label are looked up, so nothing is submitted twice.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, ServiceError, show
from ..errors import quoted as _clean  # the services' text on one line
from ..google import rest as google_api
from ..google.rest import SERVER_ERRORS, access_token, service_endpoint
from ..google.rest import default_credentials as default_credentials  # the API's job calls take it from here
from ..patterns import lazy_pattern

ENDPOINT_ENV = "BUILDKIT_PY_API_ENDPOINT"
REQUEST_LABEL = "buildkit-py-request"  # the client-generated id of a create request
END_STATES = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED",
              "JOB_STATE_PARTIALLY_SUCCEEDED", "PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED",
              "PIPELINE_STATE_CANCELLED")
KINDS = ("customJobs", "hyperparameterTuningJobs", "trainingPipelines")
RETRIES = 4  # a create or get is tried this many more times after a timeout, dropped connection or 5xx
_NAME = lazy_pattern(r"projects/([a-z0-9-]{1,30})/locations/([a-z0-9-]{1,40})/(customJobs|hyperparameterTuningJobs|"
                   r"trainingPipelines)/([0-9A-Za-z_-]{1,64})", re.ASCII)
_CAPACITY = lazy_pattern(r"resources? (?:are |is )?(?:not |un)available|enough resources|stockout|capacity|quota|"
                       r"ZONE_RESOURCE_POOL_EXHAUSTED", re.ASCII | re.IGNORECASE)


def api_endpoint(given: str | None, region: str, env: dict[str, str]) -> str:
    """The API's base URL: --api-endpoint, else $BUILDKIT_PY_API_ENDPOINT, else the regional endpoint."""
    return service_endpoint(given, env, flag="--api-endpoint", env_name=ENDPOINT_ENV,
                            default=f"https://{region}-aiplatform.googleapis.com")


def parse_name(text: str, field: str = "NAME") -> tuple[str, str, str, str]:
    """projects/P/locations/R/customJobs/ID -> (project, region, kind, id)."""
    match = _NAME.fullmatch(text) if len(text) <= 300 else None
    if not match:
        raise ConfigError(f"{show(text)} is not a job name: projects/PROJECT/locations/REGION/customJobs/ID (or "
                          "hyperparameterTuningJobs/ID, trainingPipelines/ID), as `buildkit-py submit` prints it", field=field)
    return match[1], match[2], match[3], match[4]


_CONSOLE = lazy_pattern(r"https://console\.cloud\.google\.com/(?:vertex-ai|agent-platform)/locations/([a-z0-9-]{1,40})/"
                      r"training/([0-9A-Za-z_-]{1,64})(?:/[A-Za-z0-9_/-]*)?\?(?:[^#]*&)?project=([a-z0-9-]{1,30})(?:[&#].*)?",
                      re.ASCII)


@dataclass(frozen=True)
class JobReference:
    """A job the user names: its project, region and ID, and its kind where the name says it."""

    project: str
    region: str
    job_id: str
    kind: str | None = None  # customJobs, hyperparameterTuningJobs, trainingPipelines; None: look it up

    def name(self, kind: str) -> str:
        return f"projects/{self.project}/locations/{self.region}/{kind}/{self.job_id}"


def job_reference(text: str, project: str | None, region: str | None, field: str = "JOB") -> JobReference:
    """A job as `submit` prints it (its resource name or console URL), or its ID with --project and --region."""
    if text.startswith("https://"):
        match = _CONSOLE.fullmatch(text) if len(text) <= 600 else None
        if not match:
            raise ConfigError(f"{show(text)} is not a job's console URL: https://console.cloud.google.com/vertex-ai/"
                              "locations/REGION/training/ID?project=PROJECT, as `buildkit-py submit` prints it",
                              field=field)
        return JobReference(match[3], match[1], match[2])
    if "/" in text:
        found_project, found_region, kind, job_id = parse_name(text, field)
        return JobReference(found_project, found_region, job_id, kind)
    if project is None or region is None:
        raise ConfigError(f"{show(text)} is a bare job ID: give --project and --region too, or the job's name or "
                          "console URL as `buildkit-py submit` prints it", field=field)
    if not (text.isascii() and text.replace("-", "").replace("_", "").isalnum() and 0 < len(text) <= 64):
        raise ConfigError(f"{show(text)} is not a job ID: the digits that end the job's name", field=field)
    from ..config import job_flag

    return JobReference(job_flag("project", project), job_flag("region", region), text)


# What to do about a refusal of Vertex AI, by its status.
_HINTS = {"PERMISSION_DENIED": "the credentials' account needs the Vertex AI User role (roles/aiplatform.user) on the "
                               "project, and the API enabled",
          "UNAUTHENTICATED": "refresh the credentials: gcloud auth application-default login",
          "RESOURCE_EXHAUSTED": "quota or capacity: ask for more quota, or give `fallbacks:` to try other GPUs, "
                                "regions or strategies",
          "NOT_FOUND": "check the project, region and name"}


def error_line(http_status: int, body: str, hints: bool = True) -> tuple[str, str | None]:
    """Google's error shape (google.rpc.Status with its details) as one line, and its status name; hints: with what
    to do about it on Vertex AI."""
    return google_api.error_line(http_status, body, _HINTS if hints else None)


def is_capacity(error: ServiceError) -> bool:
    """A refusal for capacity or quota at creation (what `fallbacks:` are for)."""
    return error.status == "RESOURCE_EXHAUSTED" or (error.http_status in (400, 409, 429) and error.status != "PERMISSION_DENIED"
                                                    and bool(_CAPACITY.search(error.message)))


@dataclass
class Client:
    """One project and region of the Vertex AI API."""

    base: str  # https://REGION-aiplatform.googleapis.com, or --api-endpoint
    project: str
    region: str
    credentials: Any
    timeout: float = 60.0
    backoff: float = 1.0  # seconds before the first retry, doubled each time

    def __post_init__(self) -> None:
        import requests

        self._requests = requests
        self._session = requests.Session()

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    def url(self, path: str) -> str:
        return f"{self.base}/v1/{path}"

    def _call(self, method: str, path: str, *, body: dict | None = None, params: dict | None = None) -> Any:
        """One request: the decoded JSON, or ServiceError (transient=True on the error when a retry may help)."""
        headers = {"Authorization": f"Bearer {access_token(self.credentials)}", "Accept": "application/json"}
        try:
            response = self._session.request(method, self.url(path), json=body, params=params, headers=headers,
                                             timeout=self.timeout, allow_redirects=False)
        except self._requests.exceptions.RequestException as exc:
            raise ServiceError(f"cannot reach the Vertex AI API at {self.base}: {_clean(type(exc).__name__)}: "
                               f"{_clean(exc, 300)}", transient=True) from None
        if response.status_code >= 300:
            line, status = error_line(response.status_code, response.text)
            raise ServiceError(f"Vertex AI refused {method} {path}: {line}", status=status,
                               http_status=response.status_code, transient=response.status_code in SERVER_ERRORS)
        try:
            return response.json() if response.content else {}
        except ValueError:
            raise ServiceError(f"the Vertex AI API at {self.base} answered {method} {path} with something not JSON") from None

    def _retrying(self, attempt: Callable[[], Any], before_retry: Callable[[], Any] | None = None) -> Any:
        return google_api.retrying(attempt, retries=RETRIES, backoff=self.backoff, before_retry=before_retry)

    def create(self, kind: str, resource: dict) -> dict:
        """Create the job once, whatever happens to the connection: the request id label finds a job an
        earlier attempt created before its answer was lost."""
        request_id = uuid.uuid4().hex
        body = {**resource, "labels": {**resource.get("labels", {}), REQUEST_LABEL: request_id}}
        path = f"{self.parent}/{kind}"

        def lookup() -> dict | None:
            try:
                found = self.find(kind, request_id)
            except ServiceError as exc:
                if exc.transient:
                    return None  # still unreachable: the create is retried, and looked up again before the next
                raise
            return found

        return self._retrying(lambda: self._call("POST", path, body=body), lookup)

    def find(self, kind: str, request_id: str) -> dict | None:
        params = {"filter": f'labels.{REQUEST_LABEL}="{request_id}"'}
        listed = self._call("GET", f"{self.parent}/{kind}", params=params)
        jobs = listed.get(kind) or [] if isinstance(listed, dict) else []
        return jobs[0] if jobs else None

    def get(self, name: str) -> dict:
        return self._retrying(lambda: self._call("GET", name))

    def cancel(self, name: str) -> None:
        self._retrying(lambda: self._call("POST", f"{name}:cancel", body={}))

    def lookup(self, ref: JobReference) -> dict:
        """The job a reference names; one that gives no kind is looked for as each kind in turn."""
        for kind in (ref.kind,) if ref.kind else KINDS:
            try:
                return self.get(ref.name(kind))
            except ServiceError as exc:
                if exc.http_status != 404 or ref.kind:
                    raise
        raise ServiceError(f"no job {ref.job_id} in project {ref.project}, region {ref.region} (looked for a custom "
                           "job, a tuning job and a training pipeline)", status="NOT_FOUND", http_status=404)

    def watch(self, name: str, on_change: Callable[[str, dict], None]) -> Callable[[], tuple[dict, bool]]:
        """A poll of the job's state: each call reads the job, calls on_change(state, job) when the state changed,
        and answers the job and whether it has ended."""
        state: list[Any] = [None]

        def poll() -> tuple[dict, bool]:
            job = self.get(name)
            if job.get("state") != state[0]:
                state[0] = job.get("state")
                on_change(str(state[0]), job)
            return job, state[0] in END_STATES

        return poll

    def wait(self, name: str, on_change: Callable[[str, dict], None], *, poll: float = 15.0) -> dict:
        """Follow the job until it ends, calling on_change(state, job) at each change of state."""
        read = self.watch(name, on_change)
        while True:
            job, ended = read()
            if ended:
                return job
            time.sleep(poll)


def logged_job_id(job: dict) -> str | None:
    """The ID under which the job's containers log: its own, or a training pipeline's backing custom job's
    (known once the pipeline has started it)."""
    name = str(job.get("name", ""))
    if "/trainingPipelines/" in name:
        metadata = job.get("trainingTaskMetadata") if isinstance(job.get("trainingTaskMetadata"), dict) else {}
        name = str(metadata.get("backingCustomJob") or "")
    match = _NAME.fullmatch(name) if len(name) <= 300 else None
    return match[4] if match and match[3] != "trainingPipelines" else None


def job_error(job: dict) -> str | None:
    """A failed job's error (a google.rpc.Status: code and message), on one line."""
    error = job.get("error")
    if not isinstance(error, dict) or not error:
        return None
    return f"code {_clean(error.get('code', '?'))}: {_clean(error.get('message', ''))}"
