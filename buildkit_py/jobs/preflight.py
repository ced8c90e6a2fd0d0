"""The checks `buildkit-py plan` (and `submit` before it sends anything) runs, like a terraform plan:
the image's manifest in its registry (a real HEAD, with the registry's credentials), its platform,
the accelerator and machine fit, strategy and wait, the staging bucket, the console URL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..catalog.machines import load_machines
from ..catalog.matrix import load_matrix
from ..errors import BuildkitError, ConfigError
from ..oci.refs import ImageRef
from ..oci.remote import Manifest
from ..oci.remote import manifest as registry_manifest
from .vertex import VertexJob

# A registry that cannot be read from here may still serve the job's machines (VPC Service Controls, a registry
# reachable only from Google's network): the way on, with what it costs.
SKIP_IMAGE_CHECK = "--skip-image-check"
UNREACHABLE_HINT = (f"; if the job's machines can pull it but this machine cannot reach the registry, pass "
                    f"{SKIP_IMAGE_CHECK} (the image is then neither checked nor pinned by digest)")


@dataclass(frozen=True)
class Check:
    """One preflight check: its name, whether it passed (None: only information), the detail, a failure's exit code."""

    name: str
    ok: bool | None  # None: information, or not checkable from here
    detail: str
    exit_code: int = 0  # of the failure, when ok is False

    def to_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


def manifest(ref: ImageRef) -> Manifest:
    """The image's manifest in its registry (registry.manifest), an error saying how a job may go on without it."""
    return registry_manifest(ref, UNREACHABLE_HINT)


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
    wanted = load_machines().platform(job.machine_type)

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
        # what the plan could not tell, or found against the GPU where the job's file has the last word: not "ok"
        fit = [n for n in job.notes if any(said in n for said in ("not recorded", "not checked", "says otherwise"))]
        checked = f"the image is resolved for {job.accelerator}" if tpu else \
            f"the image's CUDA build has kernels for {job.accelerator}"
        checks.append(Check("accelerator", None if fit else True, fit[0] if fit else checked))
    if not tpu:
        each = f"{job.processes_per_node} trainer process{'es' if job.processes_per_node > 1 else ''}"
        checks.append(Check("world", True, f"world size {job.world_size}: {job.machines} machine"
                                           f"{'s' if job.machines > 1 else ''} x {each}" + (
                                               f" (fits {job.accelerator_count} GPU(s) each)" if job.accelerator else "")))
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
