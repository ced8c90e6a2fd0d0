"""Are the GPUs the job asked for visible and usable? Checked through NVML in well under a
second, before the trainer starts, so a misconfigured job fails at once with a reason.

Environment (set by buildkit-py's job specs, local runs and the image):
  BUILDKIT_PY_EXPECT_GPUS   GPUs the job asked for; 0 or unset: a CPU run may proceed
  CUDA_VERSION              the image's CUDA (nvidia/cuda images set it)
  BUILDKIT_PY_MIN_DRIVER    the driver the image's CUDA needs (set by buildkit-py's Dockerfile)
  NV_CUDNN_VERSION          the image's cuDNN (nvidia/cuda cudnn images set it)
  BUILDKIT_PY_PROBE         "torch" or "tensorflow": also ask the framework (slower: it imports it)
"""

from __future__ import annotations

import ctypes
import importlib
import os
from dataclasses import dataclass

from . import nvml

# Exit codes, one per failure, so a job's status says which check failed.
NO_DRIVER = 10
NVML_FAILED = 11
TOO_FEW_GPUS = 12
DRIVER_TOO_OLD = 13
ARCH_UNSUPPORTED = 14
VISIBLE_DEVICES = 15
CUDNN_MISSING = 16
FRAMEWORK_NO_GPU = 17


class CheckFailed(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Report:
    summary: str


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def _expected(env: dict[str, str]) -> int:
    raw = env.get("BUILDKIT_PY_EXPECT_GPUS", "").strip() or "0"
    if not raw.isdigit():
        raise CheckFailed(TOO_FEW_GPUS, f"BUILDKIT_PY_EXPECT_GPUS={raw!r} is not a number of GPUs")
    return int(raw)


def _visible(env: dict[str, str], info: nvml.DriverInfo, expected: int) -> list[nvml.Device]:
    """The devices CUDA will use: NVML's list narrowed by CUDA_VISIBLE_DEVICES."""
    nvidia = env.get("NVIDIA_VISIBLE_DEVICES")
    if expected and nvidia is not None and nvidia.strip().lower() in ("", "void", "none"):
        raise CheckFailed(VISIBLE_DEVICES, f"NVIDIA_VISIBLE_DEVICES={nvidia!r} hides every GPU from this container, "
                                           f"but the job asked for {expected}")
    cuda = env.get("CUDA_VISIBLE_DEVICES")
    if cuda is None:
        return list(info.devices)
    chosen = []
    for item in (p.strip() for p in cuda.split(",") if p.strip()):
        if item.isdigit() and int(item) < len(info.devices):
            chosen.append(info.devices[int(item)])
        elif item.startswith(("GPU-", "MIG-")) and any(d.uuid.startswith(item) for d in info.devices):
            chosen.append(next(d for d in info.devices if d.uuid.startswith(item)))
        else:
            raise CheckFailed(VISIBLE_DEVICES, f"CUDA_VISIBLE_DEVICES={cuda!r} names {item!r}, but this container sees "
                                               f"{len(info.devices)} GPU(s) (indices 0-{len(info.devices) - 1})")
    return chosen


def _driver(env: dict[str, str], info: nvml.DriverInfo) -> str:
    image = env.get("CUDA_VERSION", "")
    if not image:
        return f"driver {info.driver_version} (CUDA {info.cuda_version[0]}.{info.cuda_version[1]})"
    wanted = _version(image)[:2]
    if info.cuda_version < wanted:
        needed = env.get("BUILDKIT_PY_MIN_DRIVER")
        need = f"driver >= {needed}" if needed else f"a driver for CUDA {wanted[0]}.{wanted[1]} or newer"
        raise CheckFailed(
            DRIVER_TOO_OLD,
            f"the NVIDIA driver {info.driver_version} supports CUDA up to {info.cuda_version[0]}.{info.cuda_version[1]}, "
            f"but this image is built on CUDA {image}: it needs {need} (or an image with an older CUDA: set cuda in "
            "buildkit.yaml)",
        )
    return f"driver {info.driver_version} (CUDA {info.cuda_version[0]}.{info.cuda_version[1]}) >= image CUDA {image}"


def _cudnn(env: dict[str, str]) -> str | None:
    version = env.get("NV_CUDNN_VERSION")
    if not version:
        return None
    major = version.split(".")[0]
    try:
        ctypes.CDLL(f"libcudnn.so.{major}")
    except OSError as exc:
        raise CheckFailed(
            CUDNN_MISSING, f"the image declares cuDNN {version} but libcudnn.so.{major} does not load: {exc}"
        ) from None
    return f"cuDNN {version}"


def _probe(framework: str, devices: list[nvml.Device]) -> str:
    """Ask the framework itself: it may lack kernels for this GPU's architecture."""
    if framework == "torch":
        torch = importlib.import_module("torch")
        if not torch.cuda.is_available():
            raise CheckFailed(FRAMEWORK_NO_GPU, f"torch {torch.__version__} sees no CUDA device "
                                                f"(built for CUDA {torch.version.cuda})")
        arches = torch.cuda.get_arch_list()
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(i)
            native = f"sm_{major}{minor}"
            # PTX for an older arch of the same major JIT-compiles for this GPU.
            ptx = [a for a in arches if a.startswith("compute_") and int(a[8:]) <= major * 10 + minor]
            if native not in arches and not ptx:
                raise CheckFailed(ARCH_UNSUPPORTED, f"GPU {i} ({torch.cuda.get_device_name(i)}) is {native}, but torch "
                                                    f"{torch.__version__} was built for {', '.join(arches)}: choose a "
                                                    "newer torch/CUDA (buildkit-py versions torch)")
        return f"torch {torch.__version__} CUDA OK on {torch.cuda.device_count()} device(s)"
    if framework == "tensorflow":
        tf = importlib.import_module("tensorflow")
        gpus = tf.config.list_physical_devices("GPU")
        if len(gpus) < len(devices):
            raise CheckFailed(FRAMEWORK_NO_GPU, f"tensorflow {tf.__version__} sees {len(gpus)} GPU(s) of {len(devices)}")
        return f"tensorflow {tf.__version__} sees {len(gpus)} GPU(s)"
    return f"no probe for {framework!r}"


def check(env: dict[str, str] | None = None) -> Report:
    """Raise CheckFailed with its exit code, or return the one-line summary."""
    env = dict(os.environ) if env is None else env
    expected = _expected(env)
    try:
        info = nvml.query()
    except nvml.NvmlError as exc:
        if not expected:
            return Report("no GPU requested (BUILDKIT_PY_EXPECT_GPUS unset or 0); running on CPU")
        if exc.code is None:
            raise CheckFailed(NO_DRIVER, f"the job asked for {expected} GPU(s) but no NVIDIA driver is visible in this "
                                         f"container ({exc}); start it with --gpus all / the NVIDIA container runtime, "
                                         "or on a machine with GPUs attached") from None
        raise CheckFailed(NVML_FAILED, f"the NVIDIA driver does not answer: {exc}") from None
    devices = _visible(env, info, expected)
    if len(devices) < expected:
        raise CheckFailed(TOO_FEW_GPUS, f"the job asked for {expected} GPU(s) but {len(devices)} are visible "
                                        f"({', '.join(d.name for d in devices) or 'none'})")
    parts = [f"{len(devices)} GPU(s) visible"]
    if devices:
        names = sorted({d.name for d in devices})
        parts[0] += f" ({', '.join(names)}, {devices[0].memory_total / 2**30:.1f} GiB each)"
    parts.append(_driver(env, info))
    cudnn = _cudnn(env)
    if cudnn:
        parts.append(cudnn)
    probe = env.get("BUILDKIT_PY_PROBE")
    if probe and devices:
        parts.append(_probe(probe, devices))
    return Report("; ".join(parts))
