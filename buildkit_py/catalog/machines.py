"""The machines a job runs on: the platforms (linux/amd64, linux/arm64), the GPUs Vertex AI offers with their
compute capabilities (accelerators.yaml), and which machine types take which GPUs and run Arm CPUs (machines.yaml).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import DataError
from .reading import _load, _need
from .resources import read_data, resource_dir

AMD64, ARM64 = "linux/amd64", "linux/arm64"


def arch(platform: str | None) -> str | None:
    """OS/ARCH of a platform, its variant dropped (linux/arm64/v8 is linux/arm64); None stays None."""
    return "/".join(platform.split("/")[:2]) if platform else None


@dataclass(frozen=True)
class Accelerator:
    """A GPU Vertex AI offers (accelerators.yaml): its accelerator type, CUDA compute capability and GPU name."""

    name: str  # Vertex AI's accelerator type, "NVIDIA_TESLA_V100"
    capability: tuple[int, int]  # CUDA compute capability, (7, 0)
    gpu: str

    @property
    def sm(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}"


def _accelerators(root: Path) -> dict[str, Accelerator]:
    data = _need(_load(root / "accelerators.yaml"), "accelerators", dict, "accelerators.yaml")
    out = {}
    for name, item in data.items():
        where = f"accelerators.yaml: {name}"
        capability = _need(item, "capability", str, where)
        if not re.fullmatch(r"[0-9]{1,2}\.[0-9]", capability, re.ASCII):
            raise DataError(f"{where}: capability must be a quoted \"major.minor\" like \"7.0\"")
        major, minor_ = capability.split(".")
        out[name] = Accelerator(name, (int(major), int(minor_)), _need(item, "gpu", str, where))
    return out


@dataclass(frozen=True)
class Machines:
    """base_images/machines.yaml: which machine types take which GPUs, and which run Arm CPUs."""

    attached: dict[str, dict[int, int]]  # N1: accelerator -> count -> most vCPUs
    n1_types: tuple[str, ...]
    fixed: dict[str, tuple[str, int]]  # machine type -> (accelerator, count)
    cpu_families: tuple[str, ...]
    arm64: tuple[str, ...]

    def platform(self, machine_type: str) -> str:
        """The platform an image must have to run on this machine type."""
        return ARM64 if machine_type in self.arm64 else AMD64

    def machines_with(self, accelerator: str) -> tuple[str, ...]:
        """The machine types that offer this GPU (N1 types for the GPUs they attach)."""
        fixed = tuple(m for m, (gpu, _) in self.fixed.items() if gpu == accelerator)
        return fixed + (self.n1_types if accelerator in self.attached else ())

    def accelerator_platform(self, accelerator: str) -> str | None:
        """The platform every machine type with this GPU runs (GB200: only A4X, Arm CPUs); None: no machine
        type in the data offers it, or its machines differ."""
        platforms = {self.platform(m) for m in self.machines_with(accelerator)}
        return platforms.pop() if len(platforms) == 1 else None


@lru_cache(maxsize=1)
def load_machines() -> Machines:
    path = resource_dir("base_images") / "machines.yaml"
    data = read_data(path)
    try:
        attached = {a: {int(c): int(v) for c, v in counts.items()} for a, counts in data["attached"].items()}
        fixed = {m: next(iter(spec.items())) for m, spec in data["fixed"].items()}
        return Machines(attached, tuple(data["n1_types"]), fixed, tuple(data["cpu_families"]), tuple(data["arm64"]))
    except (KeyError, TypeError, ValueError, AttributeError, StopIteration) as exc:
        raise DataError(f"malformed {path}: {exc}") from None
