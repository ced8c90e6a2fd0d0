"""The checks `buildkit-py plan` (and `submit` before it sends anything) runs, like a terraform plan:
the image's manifest in its registry (a real HEAD, with the registry's credentials), its platform,
the accelerator and machine fit, strategy and wait, the staging bucket, the console URL.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import BuildkitError, ConfigError, RegistryError, show
from ..refs import DOCKER_HUB, ImageRef, is_loopback_host, registry_host
from ..registry import credentials_for
from .vertex import VertexJob, load_machines

TIMEOUT = 30.0
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
_ACCEPT = ", ".join((OCI_INDEX, DOCKER_LIST, "application/vnd.oci.image.manifest.v1+json",
                     "application/vnd.docker.distribution.manifest.v2+json"))
_CHALLENGE = re.compile(r'([A-Za-z_]+)="([^"]*)"', re.ASCII)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: information, or not checkable from here
    detail: str
    exit_code: int = 0  # of the failure, when ok is False

    def to_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True)
class Manifest:
    digest: str
    media_type: str
    platforms: tuple[str, ...]  # os/arch[/variant] the image runs on


class _Registry:
    """The registry HTTP API v2 for one repository: anonymous, basic or bearer-token auth as the
    registry's challenge asks, with the credentials registry.py finds for it."""

    def __init__(self, ref: ImageRef):
        import requests

        self.ref = ref
        self.requests = requests
        self.session = requests.Session()
        host = "registry-1.docker.io" if ref.registry == DOCKER_HUB else ref.registry
        loopback = is_loopback_host(registry_host(host))
        # Docker talks plain http to loopback registries (insecure by default); so do we.
        self.base = f"{'http' if loopback else 'https'}://{host}/v2/{ref.path}"
        self.auth: dict[str, str] = {}

    def get(self, method: str, path: str, accept: str) -> object:
        for _ in range(2):
            try:
                response = self.session.request(method, f"{self.base}/{path}", headers={"Accept": accept, **self.auth},
                                                timeout=TIMEOUT)
            except self.requests.exceptions.RequestException as exc:
                raise RegistryError(f"cannot reach the registry {self.ref.registry}: {type(exc).__name__}") from None
            if response.status_code != 401 or self.auth:
                return response
            self.auth = self._authorize(response.headers.get("WWW-Authenticate", ""))
        return response

    def _authorize(self, challenge: str) -> dict[str, str]:
        creds = credentials_for(self.ref.registry)
        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "basic":
            if creds is None:
                raise RegistryError(f"{self.ref.registry} wants credentials and none were found (set "
                                    "BUILDKIT_PY_REGISTRY_USERNAME/_PASSWORD, docker login, or Google ADC)")
            pair = base64.b64encode(f"{creds.username}:{creds.password}".encode()).decode()
            return {"Authorization": f"Basic {pair}"}
        if scheme != "bearer":
            raise RegistryError(f"{self.ref.registry} asks for an authentication buildkit-py does not speak: "
                                f"{show(challenge[:100])}")
        params = dict(_CHALLENGE.findall(challenge))
        realm = params.pop("realm", "")
        if not realm.startswith(("https://", "http://127.", "http://localhost")):
            raise RegistryError(f"{self.ref.registry} names a token service that is not https: {show(realm[:100])}")
        params.setdefault("scope", f"repository:{self.ref.path}:pull")
        auth = (creds.username, creds.password) if creds else None
        try:
            answer = self.session.get(realm, params=params, auth=auth, timeout=TIMEOUT)
            token = answer.json().get("token") or answer.json().get("access_token") if answer.ok else None
        except (self.requests.exceptions.RequestException, ValueError, AttributeError):
            token = None
        if not token:
            raise RegistryError(f"{self.ref.registry}'s token service refused a pull token for {self.ref.path}"
                                + ("" if creds else " (no credentials found for it)"))
        return {"Authorization": f"Bearer {token}"}


def manifest(ref: ImageRef) -> Manifest:
    """HEAD the image's manifest; then read the platforms it runs on (the index, or the config blob)."""
    registry = _Registry(ref)
    reference = ref.digest or ref.tag or "latest"
    head = registry.get("HEAD", f"manifests/{reference}", _ACCEPT)
    if head.status_code == 404:
        raise RegistryError(f"{ref} is not in {ref.registry}: push it first (buildkit-py build --push)")
    if head.status_code in (401, 403):
        raise RegistryError(f"{ref.registry} refused to show {ref} ({head.status_code}): check the credentials")
    if head.status_code != 200:
        raise RegistryError(f"{ref.registry} answered HEAD of {ref} with HTTP {head.status_code}")
    digest = ref.digest or head.headers.get("Docker-Content-Digest", "")
    media = head.headers.get("Content-Type", "").split(";")[0]
    body = registry.get("GET", f"manifests/{digest or reference}", _ACCEPT)
    try:
        data = body.json()
    except ValueError:
        data = {}
    platforms: list[str] = []
    if media in (OCI_INDEX, DOCKER_LIST) or "manifests" in data:
        for item in data.get("manifests") or []:
            p = item.get("platform") or {}
            if p.get("os") and p.get("architecture") and p.get("os") != "unknown":  # unknown: attestations
                platforms.append("/".join(filter(None, (p["os"], p["architecture"], p.get("variant")))))
    else:
        config = (data.get("config") or {}).get("digest", "")
        blob = registry.get("GET", f"blobs/{config}", "*/*") if _DIGEST.fullmatch(config) else None
        try:
            info = blob.json() if blob is not None and blob.status_code == 200 else {}
        except ValueError:
            info = {}
        if info.get("os") and info.get("architecture"):
            platforms.append("/".join(filter(None, (info["os"], info["architecture"], info.get("variant")))))
    if not _DIGEST.fullmatch(digest):
        raise RegistryError(f"{ref.registry} gave no sha256 digest for {ref}")
    return Manifest(digest, media, tuple(platforms))


def _run(name: str, check: Callable[[], Check]) -> Check:
    try:
        return check()
    except BuildkitError as exc:
        return Check(name, False, str(exc), exc.exit_code)


def image_checks(job: VertexJob, ref: ImageRef) -> tuple[list[Check], str | None]:
    """The manifest and platform checks, and the digest to pin the spec to."""
    found: list[Manifest] = []

    def present() -> Check:
        found.append(manifest(ref))
        return Check("image", True, f"{ref.repository}@{found[0].digest} is in its registry ({found[0].media_type})")

    checks = [_run("image", present)]
    if not found:
        return checks + [Check("platform", None, "not checked: the manifest could not be read")], None
    wanted = "linux/arm64" if job.machine_type in load_machines().arm64 else "linux/amd64"

    def platform() -> Check:
        platforms = found[0].platforms
        if not platforms:
            return Check("platform", None, f"not recorded in the manifest; {job.machine_type} needs {wanted}")
        if not any(p == wanted or p.startswith(wanted + "/") for p in platforms):
            raise ConfigError(f"{ref} is built for {', '.join(platforms)}; {job.machine_type} runs {wanted}: build with "
                              f"--platform {wanted}", field="platform")
        return Check("platform", True, f"{wanted} (the image has {', '.join(platforms)})")

    return checks + [_run("platform", platform)], found[0].digest


def job_checks(job: VertexJob, *, project: str, region: str, staging: str | None, console: str) -> list[Check]:
    gpus = f"{job.accelerator_count} x {job.accelerator}" if job.accelerator else "no GPU"
    checks = [Check("machine", True, f"{job.machine_type} with {gpus} (base_images/machines.yaml)")]
    if job.accelerator:
        fit = [n for n in job.notes if "not recorded" in n or "not checked" in n]
        checks.append(Check("accelerator", None if fit else True,
                            fit[0] if fit else f"the image's CUDA build has kernels for {job.accelerator}"))
    strategy = job.strategy or "STANDARD"
    waits = {"STANDARD": "on-demand VMs: starts when capacity is there, else fails",
             "SPOT": "Spot VMs: cheaper, can be preempted at any time (the job restarts)",
             "FLEX_START": "Dynamic Workload Scheduler: queued until capacity frees up, up to max_wait_duration"}
    checks.append(Check("strategy", None, f"{strategy}: {waits[strategy]}"))
    checks.append(Check("staging", None, f"{staging} (not read from here: the job's service account must be able to "
                                         "write it)" if staging else "none: job.staging_bucket / base_output_directory "
                                                                     "unset, so AIP_MODEL_DIR is unset"))
    checks.append(Check("target", None, f"project {project}, region {region}"))
    checks.append(Check("console", None, console))
    return checks
