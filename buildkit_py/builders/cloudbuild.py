"""Builds on Google Cloud Build: no engine on this machine. The staged context and Dockerfile go up once per content
digest as a deterministic tar.gz (gs://BUCKET/buildkit-py/contexts/DIGEST.tar.gz); a Cloud Build v1 build runs the
docker builder with BuildKit on them, pushes every tag itself (`images`), and its results give the digest.

Secrets (a CA bundle, pip index credentials) come only from Secret Manager (`availableSecrets`), by version name:
the build step writes them to files outside the context and hands them to BuildKit as secret mounts, so they are in
no request, step argument, substitution, label, layer or log line.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import shlex
import signal
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..config import Config
from ..config.job import _PROJECT  # job.project's rule
from ..errors import BuildError, ConfigError, RegistryError, ServiceError, StageError, show
from ..errors import quoted as _clean
from ..google.adc import TOKEN_LOGIN, Identity
from ..google.rest import SERVER_ERRORS, access_token, default_credentials, error_line, retrying, service_endpoint
from ..oci.client import PushResult, add_tags
from ..oci.refs import ImageRef, is_loopback_host, registry_host
from ..oci.remote import manifest
from ..progress import Reporter
from .base import QEMU_HANDLERS, Builder, BuildRequest, build_failure, dockerfile_build_args

ENDPOINT_ENV = "BUILDKIT_PY_CLOUDBUILD_ENDPOINT"
DEFAULT_ENDPOINT = "https://cloudbuild.googleapis.com"
DEFAULT_REGION = "us-central1"
DEFAULT_TIMEOUT = 3600  # seconds
CONTEXTS = "buildkit-py/contexts"  # object prefix of uploaded contexts
LOGS = "buildkit-py/logs"  # Cloud Build writes log-BUILD_ID.txt under the build's logsBucket
DOCKER_STEP = "gcr.io/cloud-builders/docker"  # Google's docker builder image: a docker CLI next to the build's engine
STEP_ID = "buildkit-py-build"
# Registers qemu for another architecture with binfmt_misc (the way BuildKit's docs give, docs/multi-platform.md).
BINFMT_IMAGE = "tonistiigi/binfmt"
CACHE_TAG = "buildcache"  # the repository's registry cache (BuildKit's inline cache) when no --cache-ref is given
END_STATES = ("SUCCESS", "FAILURE", "INTERNAL_ERROR", "TIMEOUT", "CANCELLED", "EXPIRED")
LOG_LINES = 5000  # kept for the error of a failed build
RETRIES = 3  # a call is tried this many more times after a dropped connection or a 5xx
# Set: every build this process follows is cancelled (Ctrl-C reaches only the main thread, and variants are followed
# in threads of their own).
CANCEL = threading.Event()
# Secret mount id (templates/macros.j2) -> the step's environment variable that Secret Manager fills.
SECRET_ENV = {"buildkit-ca": "BUILDKIT_PY_CA", "buildkit-pip-conf": "BUILDKIT_PY_PIP_CONF",
              "buildkit-uv-conf": "BUILDKIT_PY_UV_CONF"}


@dataclass(frozen=True)
class CloudBuildSettings:
    """Where and how the build runs, defaults resolved (cloudbuild:, then job:, then ADC)."""

    endpoint: str
    project: str
    region: str
    bucket: str
    timeout: int
    machine_type: str | None = None
    disk_size_gb: int | None = None
    worker_pool: str | None = None
    service_account: str | None = None
    secrets: tuple[tuple[str, str], ...] = ()  # (secret mount id, Secret Manager version name)
    # (secret mount id, text) of index settings that hold no credential (an Artifact Registry index's URL, whose
    # token the step mints): written by the step itself.
    index_files: tuple[tuple[str, str], ...] = ()
    credentials: Any = field(default=None, repr=False, compare=False)

    @property
    def identity(self) -> Identity:
        """Who the build's steps act as: what an index's refusal says needs its reader role."""
        if self.service_account:
            return Identity(f"the build's service account {self.service_account}", self.service_account)
        return Identity(f"the default Cloud Build service account of project {self.project}")


def settings(config: Config, endpoint: str | None, env: dict[str, str] | None = None) -> CloudBuildSettings:
    """The build's settings from the config and flags; every problem is a ConfigError before anything is uploaded."""
    from ..sources.pip_config import google_index_hosts, index_pip_conf, uv_config, without_credentials

    env = dict(os.environ) if env is None else env
    cb, job = config.cloudbuild, config.job
    base = service_endpoint(endpoint, env, flag="--cloudbuild-endpoint", env_name=ENDPOINT_ENV, default=DEFAULT_ENDPOINT)
    secrets = []
    # An Artifact Registry index named without credentials holds no secret: the step writes its settings and mints
    # the token with the build's own service account.
    public = config.pip_index_url if config.pip_index_url and without_credentials(config.pip_index_url) == \
        config.pip_index_url and google_index_hosts([config.pip_index_url]) else None
    for mount, key, local in (("buildkit-ca", "ca_cert_secret", config.ca_cert),
                              ("buildkit-pip-conf", "pip_conf_secret", (config.pip_index_url and not public)
                               or config.pip_conf),
                              ("buildkit-uv-conf", "uv_conf_secret", None)):
        version = getattr(cb, key, None) if cb else None
        if version:
            secrets.append((mount, version))
        elif local:  # a file or URL here would have to travel in the request: refused
            raise ConfigError(f"the Cloud Build builder takes no {'CA bundle' if key == 'ca_cert_secret' else 'pip index'} "
                              "from this machine (it would travel in the request): store it in Secret Manager and name "
                              "its version", field=f"cloudbuild.{key}")
    if any(without_credentials(p) != p for p in config.pip):  # the netrc secret is made on this machine
        raise ConfigError("a pip entry's URL has credentials (not shown): the Cloud Build builder takes credentials only "
                          "from Secret Manager: serve the package from an index, put that index with its credentials in a pip.conf "
                          "stored there (cloudbuild.pip_conf_secret) and name the package without a URL", field="pip")
    credentials, adc_project = default_credentials()
    project = (cb and cb.project) or (job and job.project) or env.get("GOOGLE_CLOUD_PROJECT") or adc_project
    if not project:
        raise ConfigError("no project for Cloud Build: set cloudbuild.project (--cloudbuild-project), job.project or "
                          "$GOOGLE_CLOUD_PROJECT", field="cloudbuild.project")
    if not _PROJECT.fullmatch(project):  # from the environment or ADC: it goes into the API's URL path
        raise ConfigError(f"{show(project)} is not a Google Cloud project id or number", field="$GOOGLE_CLOUD_PROJECT")
    region = (cb and cb.region) or (job and job.region) or DEFAULT_REGION
    # Loopback registries only when the build runs on this machine too (the loopback stand-in), as --target loopback.
    if not is_loopback_host(base.split("://", 1)[1].rsplit(":", 1)[0].strip("[]")):
        for key, ref in [("image", config.image), *(("--tag", t) for t in config.tags)]:
            if ref is not None and is_loopback_host(registry_host(ref.registry)):
                raise ConfigError(f"Cloud Build cannot push to {ref.registry}, a registry on this machine: use a "
                                  "registry it reaches (Artifact Registry)", field=key)
    return CloudBuildSettings(
        endpoint=base, project=project, region=region, bucket=(cb and cb.bucket) or f"{project}_cloudbuild",
        timeout=(cb and cb.timeout) or DEFAULT_TIMEOUT, machine_type=cb and cb.machine_type,
        disk_size_gb=cb and cb.disk_size_gb, worker_pool=cb and cb.worker_pool,
        service_account=cb and cb.service_account, secrets=tuple(secrets), credentials=credentials,
        index_files=() if not public or (cb and cb.pip_conf_secret) else (
            ("buildkit-pip-conf", pip_conf := index_pip_conf(public)),
            ("buildkit-uv-conf", uv_config(pip_conf, "pip_index_url"))))


def context_archive(request: BuildRequest, out: Path) -> str:
    """The context (under context/) and the Dockerfile as a tar.gz whose bytes depend only on their content: sorted,
    fixed owner, times and modes as staged; returns its sha256."""
    files = sorted(p for p in request.context_dir.rglob("*"))
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def add(path: Path, name: str) -> None:
            info = tar.gettarinfo(str(path), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if info.isreg():
                with open(path, "rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
        add(request.dockerfile, "Dockerfile")
        for path in files:
            add(path, "context/" + path.relative_to(request.context_dir).as_posix())
    return hashlib.sha256(out.read_bytes()).hexdigest()


def _token_script(hosts: tuple[str, ...]) -> list[str]:
    """Shell lines that ask the metadata server for an access token of the build's service account and write it to
    the netrc secret for each Artifact Registry index: bash's /dev/tcp (the server speaks plain HTTP), so the step
    needs no curl; the token is in no process's arguments (printf is a builtin) and never printed."""
    names = " ".join(shlex.quote(h) for h in hosts)
    return [
        'meta="${GCE_METADATA_HOST:-metadata.google.internal}"; port="${meta##*:}"; [ "$port" != "$meta" ] || port=80',
        'exec 3<>"/dev/tcp/${meta%:*}/$port" || { echo "buildkit-py: the metadata server cannot be reached" >&2; exit 1; }',
        "printf 'GET /computeMetadata/v1/instance/service-accounts/default/token HTTP/1.0\\r\\nHost: %s\\r\\n"
        "Metadata-Flavor: Google\\r\\n\\r\\n' \"$meta\" >&3",
        'answer="$(cat <&3)"; exec 3<&-',
        'token="$(printf %s "$answer" | sed -n \'s/.*"access_token" *: *"\\([^"]*\\)".*/\\1/p\')"',
        'if [ -z "$token" ]; then echo "buildkit-py: the metadata server gave no access token for the build\'s service '
        f'account (the index {", ".join(hosts)})" >&2; exit 1; fi',
        f"for host in {names}; do printf 'machine %s login {TOKEN_LOGIN} password %s\\n' \"$host\" \"$token\"; "
        'done > "$secrets/buildkit-netrc"',
    ]


def build_body(request: BuildRequest, conf: CloudBuildSettings, source_object: str) -> dict:
    """The Build resource (cloudbuild_v1 Build, JSON names) that builds the uploaded context."""
    refs = list(request.tags)
    cache = request.cache_ref or ImageRef(refs[0].registry, refs[0].path, CACHE_TAG)
    # The step's files: the Dockerfile next to context/, each secret in a private temp dir the step makes.
    files = [mount for mount, _ in conf.secrets] + [mount for mount, _ in conf.index_files] \
        + (["buildkit-netrc"] if request.token_hosts else [])
    remote = replace(request, dockerfile=Path("Dockerfile"), secrets=tuple((m, Path(f"$secrets/{m}")) for m in files))
    docker = ["--progress=plain", "--build-arg", "BUILDKIT_INLINE_CACHE=1", "--cache-from", str(cache),
              *dockerfile_build_args(remote)]
    script = ["set -eu", "umask 077", 'secrets="$(mktemp -d)"', 'trap \'rm -rf "$secrets"\' EXIT',
              # A docker CLI from 23 on builds with BuildKit only through buildx; an older one (20.10) has it built in.
              'if docker buildx version >/dev/null 2>&1; then build="docker buildx build --load"; '
              'else build="docker build"; fi']
    for mount, _ in conf.secrets:
        # The value goes from the step's environment to a file outside the context; printf is a shell builtin, so
        # it is in no process's arguments.
        script.append(f'printf %s "${SECRET_ENV[mount]}" > "$secrets/{mount}"')
    for mount, text in conf.index_files:  # no credential in them: they may travel in the step's arguments
        script.append(f'printf %s {shlex.quote(text)} > "$secrets/{mount}"')
    if request.token_hosts:
        script += _token_script(request.token_hosts)
    arch = (request.platform or "linux/amd64").split("/")[1]
    if arch != "amd64":  # Cloud Build's workers are x86-64: another platform's RUN steps need qemu registered
        handler = QEMU_HANDLERS.get(arch, f"qemu-{arch}")
        script.append(f"[ -e /proc/sys/fs/binfmt_misc/{handler} ] || docker run --privileged --rm {BINFMT_IMAGE} "
                      f"--install {shlex.quote(arch)}")
    for ref in [*refs, cache]:
        docker += ["-t", str(ref)]
    docker.append("context")
    # Cloud Build substitutes $NAME in step arguments: $$ keeps a dollar for the shell.
    command = "$build " + " ".join(shlex.quote(a) if "$secrets" not in a else f'"{a}"' for a in docker)
    script.append(command)
    step: dict[str, Any] = {"name": DOCKER_STEP, "id": STEP_ID, "entrypoint": "bash",
                            "args": ["-c", "\n".join(script).replace("$", "$$")], "env": ["DOCKER_BUILDKIT=1"]}
    body: dict[str, Any] = {
        "source": {"storageSource": {"bucket": conf.bucket, "object": source_object}},
        "steps": [step],
        "images": [str(r) for r in [*refs, cache]],
        "timeout": f"{conf.timeout}s",
        "logsBucket": f"gs://{conf.bucket}/{LOGS}",
        "tags": ["buildkit-py"],
        "options": {"logging": "GCS_ONLY"},
    }
    if conf.secrets:
        step["secretEnv"] = [SECRET_ENV[m] for m, _ in conf.secrets]
        body["availableSecrets"] = {"secretManager": [{"versionName": v, "env": SECRET_ENV[m]} for m, v in conf.secrets]}
    if conf.machine_type:
        body["options"]["machineType"] = conf.machine_type
    if conf.disk_size_gb:
        body["options"]["diskSizeGb"] = str(conf.disk_size_gb)
    if conf.worker_pool:
        body["options"]["pool"] = {"name": conf.worker_pool}
    if conf.service_account:
        body["serviceAccount"] = f"projects/{conf.project}/serviceAccounts/{conf.service_account}"
    return body


_HINTS = {
    "SERVICE_DISABLED": "enable the Cloud Build API: gcloud services enable cloudbuild.googleapis.com --project {p}",
    "PERMISSION_DENIED": "grant the caller the Cloud Build Editor role (roles/cloudbuild.builds.editor) on project {p}, "
                         "and the build's service account roles/storage.objectViewer on the bucket, "
                         "roles/artifactregistry.writer on the repository and roles/secretmanager.secretAccessor on "
                         "the secrets",
    "RESOURCE_EXHAUSTED": "Cloud Build quota exhausted in {p}: wait for running builds, or ask for more concurrent-build "
                          "quota (or use a private pool: cloudbuild.worker_pool)",
    "UNAUTHENTICATED": "refresh the credentials: gcloud auth application-default login",
    "NOT_FOUND": "check cloudbuild.project and cloudbuild.region (project {p})",
}


class CloudBuildApi:
    """The part of the Cloud Build v1 REST API a build needs: create, get, cancel (regional builds)."""

    def __init__(self, conf: CloudBuildSettings):
        import requests

        self.conf, self.requests, self.session = conf, requests, requests.Session()

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        return retrying(lambda: self._request(method, path, body), retries=RETRIES, backoff=1.0)

    def _request(self, method: str, path: str, body: dict | None) -> dict:
        url = f"{self.conf.endpoint}/v1/projects/{self.conf.project}/locations/{self.conf.region}/{path}"
        headers = {"Authorization": f"Bearer {access_token(self.conf.credentials)}", "Accept": "application/json"}
        try:
            response = self.session.request(method, url, json=body, headers=headers, timeout=60, allow_redirects=False)
        except self.requests.exceptions.RequestException as exc:
            raise ServiceError(f"cannot reach the Cloud Build API at {self.conf.endpoint}: "
                               f"{_clean(type(exc).__name__)}", transient=True) from None
        if response.status_code >= 300:
            line, status = error_line(response.status_code, response.text)
            reason = "SERVICE_DISABLED" if "SERVICE_DISABLED" in line else status
            hint = _HINTS.get(reason or "")
            raise ServiceError(f"Cloud Build refused {method} {path.split('/')[0]}: "
                               + (hint.format(p=self.conf.project) + f" ({line})" if hint else line),
                               status=status, http_status=response.status_code,
                               transient=response.status_code in SERVER_ERRORS)
        try:
            return response.json() if response.content else {}
        except ValueError:
            raise ServiceError(f"the Cloud Build API at {self.conf.endpoint} answered with something not JSON") from None

    def create(self, body: dict) -> dict:
        """The created build (from the long-running operation's metadata)."""
        operation = self._call("POST", "builds", body)
        build = (operation.get("metadata") or {}).get("build") or {}
        if not build.get("id"):
            raise ServiceError("Cloud Build's answer to builds.create names no build")
        return build

    def get(self, build_id: str) -> dict:
        return self._call("GET", f"builds/{build_id}")

    def cancel(self, build_id: str) -> dict:
        return self._call("POST", f"builds/{build_id}:cancel", {"projectId": self.conf.project, "id": build_id})


@contextlib.contextmanager
def _interrupt_deferred() -> Iterator[list[int]]:
    """A Ctrl-C while the build is being created is held until the request returns: the service may already run the
    build, and only its id (in the answer) lets the interrupt cancel it; a second Ctrl-C does not wait. The list says
    whether one came. Outside the main thread (a variant's build) Ctrl-C never arrives: CANCEL serves there."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum, _frame):
        if held:
            raise KeyboardInterrupt
        held.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, previous)


class CloudBuildBuilder(Builder):
    name = "cloudbuild"
    supports_secrets = True  # from Secret Manager (cloudbuild.*_secret)
    inline_cache = False  # the build step pushes its inline cache under the repository's cache tag itself
    remote = True  # builds and pushes where it runs: the request needs the tags, the builder the Cloud Build settings
    poll_seconds = 2.0

    def __init__(self, conf: CloudBuildSettings | None = None) -> None:
        self.conf = conf
        self._pushed: dict[str, str] = {}  # tag -> digest, pushed by a build of this instance
        self._lines: list[str] = []  # the followed build's log, its last LOG_LINES
        self._storage = None  # the Cloud Storage client that reads the log, made once

    @classmethod
    def create(cls, docker: str | None) -> CloudBuildBuilder:
        return cls()  # nothing on this machine: the credentials and settings are checked with the request

    @staticmethod
    def settings(config: Config, endpoint: str | None) -> CloudBuildSettings:
        return settings(config, endpoint)

    def bound(self, settings: CloudBuildSettings | None) -> CloudBuildBuilder:
        return type(self)(settings)

    def build(self, request: BuildRequest, reporter: Reporter) -> str:
        conf = self.conf
        if conf is None or not request.tags:
            raise BuildError("a Cloud Build build needs its settings and tags")  # a caller's bug, not the user's
        from ..google.storage import to_gcs

        with tempfile.TemporaryDirectory(prefix="buildkit-py-cloudbuild-") as tmp:
            archive = Path(tmp) / "context.tar.gz"
            digest = context_archive(request, archive)
            name = f"{CONTEXTS}/{digest}.tar.gz"
            try:
                staged = to_gcs(archive, digest, conf.bucket, name)
            except StageError as exc:
                raise StageError(f"{exc} (the build context of Cloud Build; the bucket is cloudbuild.bucket)") from None
            reporter.message(f"context {staged.uri} {'uploaded' if staged.uploaded else 'already there: not uploaded'}")
        api = CloudBuildApi(conf)
        with _interrupt_deferred() as interrupted:
            build = api.create(build_body(request, conf, name))
        build_id = build["id"]
        try:
            reporter.message(f"Cloud Build {build_id} in {conf.project}/{conf.region}: {build.get('status', 'QUEUED')}"
                             + (f" ({build['logUrl']})" if build.get("logUrl") else ""))
            if interrupted:
                raise KeyboardInterrupt
            build = self._follow(api, build_id, conf, reporter)
        except KeyboardInterrupt:
            try:
                api.cancel(build_id)
            except ServiceError as exc:
                reporter.message(f"interrupted, but Cloud Build {build_id} could not be cancelled ({exc}): "
                                 f"gcloud builds cancel {build_id} --project {conf.project} --region {conf.region}")
                raise
            reporter.message(f"interrupted: Cloud Build {build_id} cancelled")
            raise
        return self._result(build, request, reporter)

    def _follow(self, api: CloudBuildApi, build_id: str, conf: CloudBuildSettings, reporter: Reporter) -> dict:
        """Poll the build to its end, its status changes and new log lines to the reporter; past its timeout (with
        a margin for queueing) it is cancelled."""
        deadline = time.monotonic() + conf.timeout + 600
        status, offset, pending = None, 0, ""
        self._lines = []
        while True:
            build = api.get(build_id)
            offset, pending = self._log(conf, build, offset, pending, reporter)
            if build.get("status") != status:
                status = build.get("status")
                reporter.message(f"Cloud Build {build_id}: {status}")
            if status in END_STATES:
                if pending:
                    self._emit(pending, reporter)
                return build
            if time.monotonic() > deadline:
                api.cancel(build_id)
                raise BuildError(f"Cloud Build {build_id} ran past its timeout ({conf.timeout} s): cancelled")
            if CANCEL.wait(self.poll_seconds):
                raise KeyboardInterrupt

    def _log(self, conf: CloudBuildSettings, build: dict, offset: int, pending: str,
             reporter: Reporter) -> tuple[int, str]:
        """New bytes of the build's log object (gs://BUCKET/buildkit-py/logs/log-ID.txt) as lines."""
        from google.api_core import exceptions
        from google.cloud import storage

        if self._storage is None:
            self._storage = storage.Client(project=conf.project)
        try:
            blob = self._storage.bucket(conf.bucket).blob(f"{LOGS}/log-{build['id']}.txt")
            data = blob.download_as_bytes(start=offset)  # only what is new
        except exceptions.GoogleAPIError:
            # Not written yet, nothing new (416), or no access to the logs: the statuses still come.
            return offset, pending
        *lines, pending = (pending + data.decode("utf-8", "replace")).split("\n")
        for line in lines:
            self._emit(line, reporter)
        return offset + len(data), pending

    def _emit(self, line: str, reporter: Reporter) -> None:
        self._lines.append(line)
        del self._lines[:-LOG_LINES]
        reporter.build_line(line)

    def _result(self, build: dict, request: BuildRequest, reporter: Reporter) -> str:
        status = build.get("status")
        if status != "SUCCESS":
            # Log lines are prefixed with the step (`Step #0 - "buildkit-py-build": `): the tool's own lines follow.
            own = [ln.split(": ", 1)[1] if ln.startswith("Step #") and ": " in ln else ln for ln in self._lines]
            detail = build.get("statusDetail") or (build.get("failureInfo") or {}).get("detail") or ""
            error = build_failure(f"Cloud Build {build.get('id')}", f"{status}{': ' + detail if detail else ''}", own)
            raise error
        images = {i.get("name"): i.get("digest") for i in (build.get("results") or {}).get("images") or []}
        digest = images.get(str(request.tags[0]))
        if not digest or not digest.startswith("sha256:"):
            raise BuildError(f"Cloud Build {build.get('id')} succeeded but its results name no digest for "
                             f"{request.tags[0]}; nothing is reported as pushed")
        self._pushed = {name: d for name, d in images.items() if name and d}
        reporter.message(f"Cloud Build pushed {request.tags[0].repository}@{digest}")
        return digest

    def image_id(self, ref: ImageRef) -> str | None:
        """The digest of the content tag in the registry: an image built from the same content is not built again.
        A registry that cannot be asked means a build, never an assumed image."""
        try:
            found = manifest(ref)
        except RegistryError:
            return None
        return found.digest or None

    def tag(self, image_id: str, refs: Sequence[ImageRef]) -> None:
        """Tags the build did not push (its image was already in the registry) are added there as manifests."""
        missing = [r for r in refs if self._pushed.get(str(r)) != image_id]
        for repository in dict.fromkeys(r.repository for r in missing):
            same = [r for r in missing if r.repository == repository]
            add_tags(PushResult(f"{repository}@{image_id}", same[0].tag or "", image_id, None), same, _Quiet())

    def push(self, ref: ImageRef, reporter: Reporter) -> PushResult:
        """The image is in the registry already (Cloud Build pushed it): its digest, read back."""
        digest = self._pushed.get(str(ref)) or self.image_id(ref)
        if not digest:
            raise RegistryError(f"{ref} is not in {ref.registry}: the Cloud Build build did not push it")
        return PushResult(f"{ref.repository}@{digest}", str(ref), digest, None)


class _Quiet(Reporter):
    def __init__(self) -> None:
        super().__init__(io.StringIO())
