"""The checks `buildkit-py plan` (and `submit` before it sends anything) runs, like a terraform plan:
the image's manifest in its registry (a real HEAD, with the registry's credentials), its platform,
the accelerator and machine fit, strategy and wait, the staging bucket, the console URL.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import BuildkitError, ConfigError, RegistryError
from ..matrix import load_matrix
from ..refs import ImageRef
from ..registry import RegistryClient
from .vertex import VertexJob, load_machines

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
_ACCEPT = ", ".join((OCI_INDEX, DOCKER_LIST, "application/vnd.oci.image.manifest.v1+json",
                     "application/vnd.docker.distribution.manifest.v2+json"))
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)
# A registry that cannot be read from here may still serve the job's machines (VPC Service Controls, a registry
# reachable only from Google's network): the way on, with what it costs.
SKIP_IMAGE_CHECK = "--skip-image-check"
UNREACHABLE_HINT = (f"; if the job's machines can pull it but this machine cannot reach the registry, pass "
                    f"{SKIP_IMAGE_CHECK} (the image is then neither checked nor pinned by digest)")


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


def manifest(ref: ImageRef) -> Manifest:
    """HEAD the image's manifest; then read the platforms it runs on (the index, or the config blob)."""
    registry = RegistryClient(ref)
    reference = ref.digest or ref.tag or "latest"
    try:
        head = registry.request("HEAD", f"manifests/{reference}", {"Accept": _ACCEPT})
    except RegistryError as exc:  # unreachable, or no credentials here
        raise RegistryError(f"{exc}{UNREACHABLE_HINT}") from None
    if head.status_code == 404:
        raise RegistryError(f"{ref} is not in {ref.registry}: push it first (buildkit-py build --push)")
    if head.status_code in (401, 403):
        raise RegistryError(f"{ref.registry} refused to show {ref} ({head.status_code}): check the credentials"
                            + UNREACHABLE_HINT)
    if head.status_code != 200:
        raise RegistryError(f"{ref.registry} answered HEAD of {ref} with HTTP {head.status_code}{UNREACHABLE_HINT}")
    digest = ref.digest or head.headers.get("Docker-Content-Digest", "")
    media = head.headers.get("Content-Type", "").split(";")[0]
    body = registry.request("GET", f"manifests/{digest or reference}", {"Accept": _ACCEPT})
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
        blob = registry.request("GET", f"blobs/{config}", {"Accept": "*/*"}) if _DIGEST.fullmatch(config) else None
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


def image_checks(job: VertexJob, ref: ImageRef, *, skip: bool = False) -> tuple[list[Check], str | None]:
    """The manifest and platform checks, and the digest to pin the spec to (skip: neither, said in both)."""
    if skip:
        why = f"not checked ({SKIP_IMAGE_CHECK})"
        return [Check("image", None, f"{why}: {ref} is sent by tag, not pinned by digest"),
                Check("platform", None, f"{why}: the manifest was not read")], None
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
    tpu = job.accelerator in load_matrix().tpus
    gpus = f"{job.accelerator_count} x {job.accelerator}" if job.accelerator else "no GPU"
    data = "base_images/tpus.yaml" if tpu else "base_images/machines.yaml"
    checks = [Check("machine", True, f"{job.machine_type} with {gpus}{' chips' if tpu else ''} ({data})")]
    if job.accelerator:
        fit = [n for n in job.notes if "not recorded" in n or "not checked" in n]
        checked = f"the image is resolved for {job.accelerator}" if tpu else \
            f"the image's CUDA build has kernels for {job.accelerator}"
        checks.append(Check("accelerator", None if fit else True, fit[0] if fit else checked))
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
