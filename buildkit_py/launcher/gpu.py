"""Are the GPUs the job asked for visible and usable? Checked through NVML in well under a
second, before the trainer starts, so a misconfigured job fails at once with a reason.

The variables it reads are named in constants.py. Every value is parsed with ASCII-only
patterns: str.isdigit() accepts '²' and other Unicode digits that int() then refuses.

The driver rule follows NVIDIA's "CUDA Compatibility" guide:
  - the driver supports the image's CUDA (NVML's CUDA version >= CUDA_VERSION): pass;
  - else forward compatibility: the image's cuda-compat libcuda is newer than the driver, the
    driver's branch is one cuda-compat supports and every GPU is a data-center part: pass, and
    the compat directory is put on the trainer's library path if the runtime has not done so;
  - else minor-version compatibility: a driver >= the floor of the image's CUDA major
    (BUILDKIT_PY_COMPAT_DRIVER) runs it, except PTX JIT of newer code and newer driver
    features: pass with a warning;
  - else exit 13. An image built before the floor was recorded has no BUILDKIT_PY_COMPAT_DRIVER:
    then a driver of the image's CUDA major passes with the warning, an older major fails.

The architecture rule compares each GPU's compute capability (NVML) with the framework build's
architectures the image records (BUILDKIT_PY_CUDA_ARCHS), without importing the framework:
exit 14 when no cubin runs on the GPU and no PTX can be JIT-compiled for it (arch_supports).

ctypes, glob and importlib are imported where they are used, and NVML is not loaded for a CPU run
in a container without an NVIDIA device: this runs at every container start.
"""

from __future__ import annotations

import os
import re
from collections import namedtuple

from . import nvml
from .constants import (
    ARCH_UNSUPPORTED,
    COMPAT_DRIVER_ENV,
    CUDA_ARCHS_ENV,
    CUDA_COMPAT_DIR_ENV,
    CUDA_VERSION_ENV,
    CUDA_VISIBLE_ENV,
    CUDNN_MISSING,
    CUDNN_VERSION_ENV,
    DEFAULT_CUDA_COMPAT_DIR,
    DEFAULT_DEV_DIR,
    DEFAULT_SHM_PATH,
    DEV_DIR_ENV,
    DRIVER_TOO_OLD,
    EXPECT_GPUS_ENV,
    FORWARD_COMPAT_ENV,
    FRAMEWORK_NO_GPU,
    MIN_DRIVER_ENV,
    NO_DRIVER,
    NVIDIA_VISIBLE_ENV,
    NVML_FAILED,
    NVML_LIBRARY_ENV,
    PROBE_ENV,
    SHM_MIN_BYTES,
    SHM_PATH_ENV,
    TOO_FEW_GPUS,
    USAGE,
    VISIBLE_DEVICES,
)

PROBES = ("torch", "tensorflow")
_COUNT = re.compile(r"[0-9]{1,6}", re.ASCII)
_VERSION = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9})*", re.ASCII)
# strtoul, as CUDA reads an index: leading digits, the rest of the entry ignored ("1gpu" is 1).
_ORDINAL = re.compile(r"\+?([0-9]{1,9})", re.ASCII)
# NV_CUDNN_VERSION as nvidia/cuda images set it: "9.14.0.64-1" (the package's Debian revision last).
_CUDNN_VERSION = re.compile(r"([0-9]{1,9})(?:\.[0-9]{1,9})*(?:-[0-9A-Za-z.+~]{1,32})?", re.ASCII)
_COMPAT_LIBRARY = re.compile(r"libcuda\.so\.([0-9]{1,9}(?:\.[0-9]{1,9})+)", re.ASCII)
# An architecture as torch.cuda.get_arch_list() names it: the digits are the major version and
# one minor digit (sm_120 is 12.0); an `a` suffix is arch-specific, `f` family-specific.
_ARCH = re.compile(r"(sm|compute)_([0-9]{1,2})([0-9])([af]?)", re.ASCII)


class CheckFailed(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class Report(namedtuple("Report", "summary warnings gpus", defaults=((), 0))):
    """summary: str; warnings: tuple of str; gpus: how many CUDA sees. (Records are namedtuples: see nvml.py.)"""

    __slots__ = ()


class ImageDrivers(namedtuple("ImageDrivers", "min_driver floor branches")):
    """What the image says about drivers (set by buildkit-py's Dockerfile), parsed: min_driver and
    floor, version tuples or None; branches, a frozenset of driver branches or None."""

    __slots__ = ()


def parse_version(text: str) -> tuple[int, ...] | None:
    """'550.54.15' -> (550, 54, 15); None unless ASCII digits and dots."""
    text = text.strip()
    return tuple(int(p) for p in text.split(".")) if _VERSION.fullmatch(text) else None


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def requested(env: dict[str, str], name: str = EXPECT_GPUS_ENV, what: str = "GPUs",
             unset: str = "a CPU run may proceed") -> int:
    """The count a job asked for in the variable name (0 when unset); a usage error otherwise."""
    raw = env.get(name, "")
    if not raw.strip():
        return 0
    if not _COUNT.fullmatch(raw.strip()):
        raise CheckFailed(USAGE, f"{name}={raw!r} is not a number of {what}; allowed: 0, 1, 2, ... (unset or 0: {unset})")
    return int(raw)


def _driver_switch(env: dict[str, str], name: str) -> tuple[int, ...] | None:
    raw = env.get(name, "")
    if not raw.strip():
        return None
    version = parse_version(raw)
    if version is None:
        raise CheckFailed(USAGE, f"{name}={raw!r} is not a driver version; allowed: digits and dots, like "
                                 "525.60.13 (buildkit-py's Dockerfile sets it from base_images/cuda.yaml)")
    return version


def _image_drivers(env: dict[str, str]) -> ImageDrivers:
    return ImageDrivers(_driver_switch(env, MIN_DRIVER_ENV), _driver_switch(env, COMPAT_DRIVER_ENV), _branches(env))


def _branches(env: dict[str, str]) -> frozenset[int] | None:
    raw = env.get(FORWARD_COMPAT_ENV)
    if raw is None:
        return None
    items = [p.strip() for p in raw.split(",") if p.strip()]
    if not all(_COUNT.fullmatch(p) for p in items):
        raise CheckFailed(USAGE, f"{FORWARD_COMPAT_ENV}={raw!r} is not a list of driver branches; allowed: "
                                 "numbers separated by commas, like 535,570,580")
    return frozenset(int(p) for p in items)


def arch_supports(archs: tuple[str, ...] | list[str], capability: tuple[int, int]) -> str | None:
    """The entry of archs that runs on a GPU of this compute capability, or None. CUDA's rules
    (CUDA Programming Guide, binary and PTX compatibility; family-specific targets from CUDA
    12.9): a cubin sm_XY runs on every X.y with y >= Y (same major only), sm_XYf likewise,
    sm_XYa only on X.Y; PTX compute_XY is JIT-compiled by the driver for any GPU of capability
    >= X.Y, also of a later major; compute_XYf only within major X (y >= Y), compute_XYa only
    on X.Y. The entry CUDA would load is named: a cubin before PTX, the closest first."""
    found = []
    for arch in archs:
        match = _ARCH.fullmatch(arch)
        if not match:
            continue
        kind, built, suffix = match.group(1), (int(match.group(2)), int(match.group(3))), match.group(4)
        if suffix == "a":
            ok = built == capability
        elif kind == "sm" or suffix == "f":
            ok = built[0] == capability[0] and built[1] <= capability[1]
        else:
            ok = built <= capability
        if ok:  # a cubin before PTX, then the closest to the GPU
            found.append((kind != "sm", -built[0], -built[1], arch))
    return min(found)[-1] if found else None


def _archs(env: dict[str, str]) -> tuple[str, ...] | None:
    raw = env.get(CUDA_ARCHS_ENV, "")
    items = tuple(p.strip() for p in raw.split(",") if p.strip())
    if not items:
        return None
    if not all(_ARCH.fullmatch(p) for p in items):
        raise CheckFailed(USAGE, f"{CUDA_ARCHS_ENV}={raw!r} is not a list of GPU architectures; allowed: sm_XY or "
                                 "compute_XY entries (optionally ending in a or f) separated by commas, like "
                                 "sm_80,sm_90,compute_90 (buildkit-py's Dockerfile sets it from base_images/frameworks/)")
    return items


def _arch_check(archs: tuple[str, ...], devices: list[nvml.Device]) -> str:
    """Exit 14 unless every GPU can run the framework build; the summary part otherwise."""
    used = []
    for device in devices:
        major, minor = device.capability
        entry = arch_supports(archs, device.capability)
        if entry is None:
            # a cubin runs on its own major version at its minor or above: sm_X0 up to this GPU's sm_XY would do
            cubins = f"sm_{major}0" if minor == 0 else f"sm_{major}0 to sm_{major}{minor}"
            raise CheckFailed(
                ARCH_UNSUPPORTED,
                f"GPU {device.index} ({device.name}) is sm_{major}{minor} (compute capability {major}.{minor}), but this "
                f"image's framework build carries {', '.join(archs)}: no cubin {cubins} and no PTX of compute capability "
                f"{major}.{minor} or lower to JIT-compile, so the GPU would not be used; build the image for this "
                "GPU (set accelerator in buildkit.yaml; buildkit-py versions FRAMEWORK --accelerator NAME lists the "
                "releases that fit)",
            )
        used.append(f"sm_{major}{minor} runs {entry}")
    return "architecture " + ", ".join(sorted(set(used)))


def cuda_visible(raw: str, devices: tuple[nvml.Device, ...]) -> tuple[list[nvml.Device | str], str | None]:
    """The devices CUDA enumerates under CUDA_VISIBLE_DEVICES=raw, read as CUDA reads it (and
    torch.cuda mirrors): indices, or GPU-/MIG- UUID prefixes as the first entry decides; the first
    entry that names no device ends the list and the ones before it are used (so -1 or an empty
    value means none); naming a device twice leaves none. MIG instances are kept as their names,
    since NVML's GPU list cannot confirm them. Returns the devices and why the list ended early.
    (Compared with the driver's own cuInit + cuDeviceGetCount on an H100: 16 values, all alike.)"""
    entries = [e.strip() for e in raw.split(",")]
    kind = entries[0][:4] if entries[0].startswith(("GPU-", "MIG-")) else None
    chosen: list[nvml.Device | str] = []
    where = f"{len(devices)} GPU(s), indices 0-{len(devices) - 1}" if len(devices) > 1 else f"{len(devices)} GPU(s)"
    for entry in entries:
        found: nvml.Device | str | None = None
        if kind == "MIG-" and entry.startswith("MIG-"):
            found = entry
        elif kind == "GPU-" and entry.startswith("GPU-"):
            matches = [d for d in devices if d.uuid.startswith(entry)]
            found = matches[0] if len(matches) == 1 else None  # an ambiguous prefix names no device
        elif kind is None and _ORDINAL.match(entry):
            index = int(_ORDINAL.match(entry).group(1))
            found = devices[index] if index < len(devices) else None
        if found is None:
            return chosen, f"{entry!r} names no GPU in this container ({where}), so CUDA uses only the entries before it"
        if found in chosen:
            return [], f"{entry!r} names a GPU a second time, so CUDA sees none"
        chosen.append(found)
    return chosen, None


def _label(device: nvml.Device | str) -> str:
    return device.name if isinstance(device, nvml.Device) else "MIG instance"


def _compat_library(directory: str) -> tuple[str, tuple[int, ...]] | None:
    """The newest libcuda.so.<driver version> of the image's cuda-compat package."""
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    matches = [(_COMPAT_LIBRARY.fullmatch(name), name) for name in names]
    found = [(tuple(int(p) for p in m.group(1).split(".")), name) for m, name in matches if m]
    if not found:
        return None
    version, name = max(found)
    return os.path.join(directory, name), version


def _forward_compat(env: dict[str, str], info: nvml.DriverInfo, devices: list[nvml.Device | str],
                    image: ImageDrivers) -> tuple[str | None, str]:
    """The cuda-compat libcuda that runs the image's CUDA on this driver, or None and why not."""
    directory = env.get(CUDA_COMPAT_DIR_ENV) or DEFAULT_CUDA_COMPAT_DIR
    found = _compat_library(directory)
    if found is None:
        return None, f"the image has no cuda-compat library in {directory}"
    path, version = found
    name = os.path.basename(path)
    others = sorted({d.name for d in devices if isinstance(d, nvml.Device) and not d.datacenter})
    if others:
        return None, f"the image's {name} serves data-center GPUs only, not {', '.join(others)}"
    branches = image.branches
    if branches is None:
        return None, f"the image does not name the driver branches its {name} supports ({FORWARD_COMPAT_ENV} unset)"
    driver = parse_version(info.driver_version)
    if driver is None or driver[0] not in branches:
        return None, (f"the image's {name} does not support driver branch {driver[0] if driver else '?'} "
                      f"(supported: {', '.join(map(str, sorted(branches)))})")
    if version[0] <= driver[0]:
        return None, f"the image's {name} is not from a newer driver branch than the driver's"
    if image.min_driver and version < image.min_driver:
        return None, f"the image's {name} is older than this CUDA's own driver {env[MIN_DRIVER_ENV].strip()}"
    return path, ""


def _on_loader_path(env: dict[str, str], directory: str) -> bool:
    if directory in env.get("LD_LIBRARY_PATH", "").split(":"):
        return True
    import glob

    # The NVIDIA container toolkit's enable-cuda-compat hook lists it in /etc/ld.so.conf.d.
    for conf in glob.glob("/etc/ld.so.conf.d/*.conf"):
        try:
            with open(conf, encoding="utf-8", errors="replace") as handle:
                if directory in handle.read().split():
                    return True
        except OSError:
            continue
    return False


def _driver(env: dict[str, str], info: nvml.DriverInfo, devices: list[nvml.Device | str],
            image: ImageDrivers) -> tuple[str, list[str]]:
    """The driver part of the summary, and warnings; CheckFailed when the image cannot run."""
    have = f"driver {info.driver_version} (CUDA {_dotted(info.cuda_version)})"
    cuda = env.get(CUDA_VERSION_ENV, "")
    if not cuda:
        return have, []
    wanted = parse_version(cuda)
    if wanted is None or len(wanted) < 2:
        return have, [f"{CUDA_VERSION_ENV}={cuda!r} is not a CUDA version (like 12.4.1): the driver check is skipped"]
    if info.cuda_version >= wanted[:2]:
        return f"{have} >= image CUDA {cuda}", []
    library, why_not = _forward_compat(env, info, devices, image)
    if library:
        directory = os.path.dirname(library)
        summary = f"{have} < image CUDA {cuda}: forward compatibility through {library}"
        if not _on_loader_path(env, directory):
            env["LD_LIBRARY_PATH"] = ":".join(p for p in (directory, env.get("LD_LIBRARY_PATH")) if p)
            summary += f" (added {directory} to LD_LIBRARY_PATH)"
        return summary, []
    # Messages quote the variables as set: parsing drops the zero of "570.124.06".
    need = f"driver >= {env[MIN_DRIVER_ENV].strip()}" if image.min_driver else f"a driver for CUDA {_dotted(wanted[:2])} or newer"
    driver = parse_version(info.driver_version)
    if image.floor is not None and driver is not None:
        minor_ok, rule = driver >= image.floor, f"CUDA {wanted[0]}.x runs on drivers >= {env[COMPAT_DRIVER_ENV].strip()}"
    else:  # an image without the recorded floor: the same CUDA major is all that is known
        minor_ok, rule = info.cuda_version[0] == wanted[0], f"CUDA {wanted[0]}.x runs on a CUDA {wanted[0]} driver"
    if not minor_ok:
        raise CheckFailed(
            DRIVER_TOO_OLD,
            f"the NVIDIA driver {info.driver_version} supports CUDA up to {_dotted(info.cuda_version)}, but this image "
            f"is built on CUDA {cuda}: it needs {need}; minor-version compatibility does not reach ({rule}) and "
            f"forward compatibility does not apply ({why_not}); use a newer driver, or an image with an older CUDA "
            "(set cuda in buildkit.yaml)",
        )
    warning = (f"the NVIDIA driver {info.driver_version} supports CUDA up to {_dotted(info.cuda_version)}, older than "
               f"this image's CUDA {cuda}, which wants {need}; it runs under CUDA minor-version compatibility "
               f"({rule}), where code that needs PTX JIT compilation, or features of newer drivers, fails; forward "
               f"compatibility does not apply ({why_not})")
    return f"{have} < image CUDA {cuda}: minor-version compatibility", [warning]


def _cudnn(env: dict[str, str]) -> tuple[str | None, list[str]]:
    version = env.get(CUDNN_VERSION_ENV)
    if not version:
        return None, []
    parsed = _CUDNN_VERSION.fullmatch(version.strip())
    if parsed is None:
        return None, [f"{CUDNN_VERSION_ENV}={version!r} is not a version (like 9.14.0.64-1): cuDNN is not checked"]
    library = f"libcudnn.so.{int(parsed.group(1))}"
    import ctypes

    try:
        ctypes.CDLL(library)
    except OSError as exc:
        raise CheckFailed(CUDNN_MISSING, f"the image declares cuDNN {version} but {library} does not load: {exc}") from None
    return f"cuDNN {version}", []


def _import(framework: str):
    import importlib

    try:
        return importlib.import_module(framework)
    except Exception as exc:  # a broken install raises anything from ImportError to OSError
        raise CheckFailed(FRAMEWORK_NO_GPU, f"{PROBE_ENV}={framework} but {framework} does not import: {exc}") from None


def _probe(framework: str, devices: list[nvml.Device | str]) -> str:
    """Ask the framework itself: it may lack kernels for this GPU's architecture."""
    if framework == "torch":
        torch = _import("torch")
        if not torch.cuda.is_available():
            raise CheckFailed(FRAMEWORK_NO_GPU, f"torch {torch.__version__} sees no CUDA device "
                                                f"(built for CUDA {torch.version.cuda})")
        arches = torch.cuda.get_arch_list()
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(i)
            native = f"sm_{major}{minor}"
            if arch_supports(arches, (major, minor)) is None:
                raise CheckFailed(ARCH_UNSUPPORTED, f"GPU {i} ({torch.cuda.get_device_name(i)}) is {native}, but torch "
                                                    f"{torch.__version__} was built for {', '.join(arches)}: choose a "
                                                    "newer torch/CUDA (buildkit-py versions torch)")
        return f"torch {torch.__version__} CUDA OK on {torch.cuda.device_count()} device(s)"
    tf = _import("tensorflow")
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) < len(devices):
        raise CheckFailed(FRAMEWORK_NO_GPU, f"tensorflow {tf.__version__} sees {len(gpus)} GPU(s) of {len(devices)}")
    return f"tensorflow {tf.__version__} sees {len(gpus)} GPU(s)"


def _nvidia_devices(env: dict[str, str]) -> bool:
    """Whether the container has the node NVML talks to the driver through: /dev/nvidiactl (the
    NVIDIA container runtime adds it with any GPU), or /dev/dxg on WSL 2."""
    directory = env.get(DEV_DIR_ENV) or DEFAULT_DEV_DIR
    return any(os.path.exists(os.path.join(directory, name)) for name in ("nvidiactl", "dxg"))


def check(env: dict[str, str] | None = None) -> Report:
    """Raise CheckFailed with its exit code, or return the summary and warnings. May add the
    cuda-compat directory to env's LD_LIBRARY_PATH (see _driver)."""
    env = dict(os.environ) if env is None else env
    expected = requested(env)
    image = _image_drivers(env)
    archs = _archs(env)
    probe = env.get(PROBE_ENV, "")
    if probe and probe not in PROBES:
        raise CheckFailed(USAGE, f"{PROBE_ENV}={probe!r} is not a framework probe; allowed: {', '.join(PROBES)}")
    cpu_run = Report(f"no GPU requested ({EXPECT_GPUS_ENV} unset or 0); running on CPU")
    library = env.get(NVML_LIBRARY_ENV)
    if not expected and not library and not _nvidia_devices(env):
        return cpu_run  # what NVML would come to, without loading it
    try:
        info = nvml.query(library or nvml.DEFAULT_LIBRARY)
    except nvml.NvmlError as exc:
        if not expected:
            return cpu_run
        if exc.code is None:
            raise CheckFailed(NO_DRIVER, f"the job asked for {expected} GPU(s) but no NVIDIA driver is visible in this "
                                         f"container ({exc}); start it with --gpus all / the NVIDIA container runtime, "
                                         "or on a machine with GPUs attached") from None
        raise CheckFailed(NVML_FAILED, f"the NVIDIA driver does not answer: {exc}") from None
    nvidia = env.get(NVIDIA_VISIBLE_ENV)
    if expected and nvidia is not None and nvidia.strip().lower() in ("", "void", "none"):
        raise CheckFailed(VISIBLE_DEVICES, f"{NVIDIA_VISIBLE_ENV}={nvidia!r} hides every GPU from this container, "
                                           f"but the job asked for {expected}")
    if len(info.devices) < expected:
        raise CheckFailed(TOO_FEW_GPUS, f"the job asked for {expected} GPU(s) but {len(info.devices)} are visible "
                                        f"({', '.join(d.name for d in info.devices) or 'none'})")
    warnings: list[str] = []
    devices: list[nvml.Device | str] = list(info.devices)
    raw = env.get(CUDA_VISIBLE_ENV)
    if raw is not None:
        devices, why = cuda_visible(raw, info.devices)
        if len(devices) < expected:
            raise CheckFailed(VISIBLE_DEVICES, f"{CUDA_VISIBLE_ENV}={raw!r} leaves {len(devices)} of this container's "
                                               f"{len(info.devices)} GPU(s) to CUDA"
                                               + (f" ({why})" if why else "")
                                               + f", but the job asked for {expected}")
        if devices and why:
            used = ", ".join(str(d.index) if isinstance(d, nvml.Device) else d for d in devices)
            warnings.append(f"{CUDA_VISIBLE_ENV}={raw!r}: {why} ({used})")
    if not devices:  # only when none was requested: the checks above refuse fewer than expected
        hidden = f"{CUDA_VISIBLE_ENV}={raw!r} hides every GPU from CUDA" if info.devices else "the driver lists no GPU"
        return Report(f"{hidden}; no GPU requested: running on CPU")
    physical = [d for d in devices if isinstance(d, nvml.Device)]
    parts = [f"{len(devices)} GPU(s) visible ({', '.join(sorted(set(map(_label, devices))))}"
             + (f", {physical[0].memory_total / 2**30:.1f} GiB each)" if physical else ")")]
    driver, notes = _driver(env, info, devices, image)
    parts.append(driver)
    warnings += notes
    if archs is not None:
        # MIG instances carry their parent's architecture: without a physical device in the
        # list, every GPU of the container is checked.
        parts.append(_arch_check(archs, physical or list(info.devices)))
    cudnn, notes = _cudnn(env)
    parts += [cudnn] if cudnn else []
    warnings += notes
    if probe:
        parts.append(_probe(probe, devices))
    if len(devices) > 1:
        warnings += _shared_memory(env)
    return Report("; ".join(parts), tuple(warnings), len(devices))


def visible(env: dict[str, str]) -> int:
    """How many GPUs CUDA sees, without the checks (they were skipped): 0 where no driver answers."""
    if not env.get(NVML_LIBRARY_ENV) and not _nvidia_devices(env):
        return 0
    try:
        info = nvml.query(env.get(NVML_LIBRARY_ENV) or nvml.DEFAULT_LIBRARY)
    except nvml.NvmlError:
        return 0
    raw = env.get(CUDA_VISIBLE_ENV)
    return len(cuda_visible(raw, info.devices)[0] if raw is not None else info.devices)


def _shared_memory(env: dict[str, str]) -> list[str]:
    """A warning when /dev/shm is smaller than NCCL needs for GPUs talking inside one machine."""
    path = env.get(SHM_PATH_ENV) or DEFAULT_SHM_PATH
    try:
        stat = os.statvfs(path)
    except OSError:
        return [f"{path} is not mounted: NCCL cannot use shared memory between this machine's GPUs"]
    size = stat.f_blocks * stat.f_frsize
    if size >= SHM_MIN_BYTES:
        return []
    return [f"{path} is {size / 2**20:.0f} MiB; NCCL needs at least {SHM_MIN_BYTES >> 20} MiB between this machine's "
            "GPUs: start the container with --shm-size=16g or --ipc=host (buildkit-py run does), or set "
            "NCCL_SHM_DISABLE=1 to fall back to slower transports"]
