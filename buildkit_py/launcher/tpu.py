"""Are the TPU chips the job asked for visible in this container, and is the TPU runtime (libtpu)
there for the framework to load? Checked from the file system in milliseconds, before the trainer
starts; libtpu itself is never loaded here, since it takes the chips for the process that loads it.
Nothing is set: the TPU runtime and the frameworks set their own TPU_* variables.

Where a Cloud TPU VM exposes its chips, one device node per chip:
  - TPU v2, v3, v4: /dev/accel0, /dev/accel1, ...
  - TPU v5e, v5p, v6e: /dev/vfio/0, /dev/vfio/1, ... (one VFIO group per chip), beside the VFIO
    container node /dev/vfio/vfio, which the runtime opens as well.
  Sources (read 2026-11-22): Google's tpu-info (github.com/AI-Hypercomputer/cloud-accelerator-
  diagnostics, tpu_info/device.py: chip_path() is /dev/vfio/N for v5e, v5p, v6e and 7x, else
  /dev/accelN, one chip per PCI device of Google's vendor id 0x1ae0); Ray's TPU accelerator
  manager (counts /dev/accel*, else the numeric entries of /dev/vfio; ray-project/ray#65105 lists
  /dev/vfio/0-3 and /dev/vfio/vfio on a v6e host, and two groups per chip on TPU7x, a type Vertex
  AI does not offer; #65034: a group of another device bound to vfio-pci is no chip, so a group
  counts when sysfs shows a device of vendor 0x1ae0 in it, or shows nothing about it);
  marin-community/marin#3858 (containers get v5p/v6e chips through --device /dev/vfio/N, v4
  chips through --device /dev/accelN).
The runtime: JAX, PyTorch/XLA and TensorFlow load TPU_LIBRARY_PATH when it is set (jax/_src/
xla_bridge.py _get_tpu_library_path; torch_xla/__init__.py _setup_tpu_vm_library_path;
TensorFlow's FindAndLoadTpuLibrary, which otherwise dlopens "libtpu.so", hence Google's
/lib/libtpu.so for TensorFlow), else their own libtpu, whose path the image records in
BUILDKIT_PY_TPU_RUNTIME. It must be a 64-bit ELF shared object for this machine.
"""

from __future__ import annotations

import os
import re

from .constants import (
    DEFAULT_DEV_DIR,
    DEFAULT_SYS_DIR,
    DEV_DIR_ENV,
    EXPECT_TPU_ENV,
    SKIP_TPU_CHECK_ENV,
    SYS_DIR_ENV,
    TPU_NOT_VISIBLE,
    TPU_RUNTIME_ENV,
    TPU_RUNTIME_MISSING,
    TPU_TYPE_ENV,
    USAGE,
)
from .gpu import CheckFailed, Report, requested

ACCEL = "/dev/accelN"
VFIO = "/dev/vfio/N"
LAYOUTS = {  # the accelerator types of base_images/tpus.yaml -> where their chips are
    "TPU_V2": ACCEL,
    "TPU_V3": ACCEL,
    "TPU_V4_POD": ACCEL,
    "TPU_V5_LITEPOD": VFIO,
    "TPU_V6E": VFIO,
}
GIVE = {ACCEL: "--device /dev/accelN for each chip", VFIO: "--device /dev/vfio/N for each chip and --device /dev/vfio/vfio"}
GOOGLE_PCI_VENDOR = "0x1ae0"
LIBRARY_PATH_ENV = "TPU_LIBRARY_PATH"  # the frameworks' own variable (see above): read, never set
_TYPE = re.compile(r"TPU_[A-Z0-9_]{1,32}", re.ASCII)
_ACCEL = re.compile(r"accel([0-9]{1,4})", re.ASCII)
_GROUP = re.compile(r"[0-9]{1,6}", re.ASCII)
# ELF e_machine of the architectures TPU VMs run (System V ABI: EM_X86_64, EM_AARCH64).
ELF_MACHINES = {"x86_64": 62, "aarch64": 183}
ET_DYN = 3


def _listing(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


def _tpu_group(sysfs: str, group: int) -> bool:
    """Whether VFIO group `group` holds a TPU: a device of Google's vendor id in its IOMMU group,
    or a group sysfs does not show (then nothing says otherwise)."""
    devices = os.path.join(sysfs, "kernel", "iommu_groups", str(group), "devices")
    vendors = []
    for name in _listing(devices):
        try:
            with open(os.path.join(devices, name, "vendor"), encoding="ascii", errors="replace") as handle:
                vendors.append(handle.read().strip())
        except OSError:
            continue
    return not vendors or GOOGLE_PCI_VENDOR in vendors


def chips(dev: str, sysfs: str) -> dict[str, list[str]]:
    """The chip nodes under dev, by layout, in index order."""
    accel = sorted((int(_ACCEL.fullmatch(name).group(1)), name) for name in _listing(dev) if _ACCEL.fullmatch(name))
    groups = sorted(int(name) for name in _listing(os.path.join(dev, "vfio")) if _GROUP.fullmatch(name))
    groups = [group for group in groups if _tpu_group(sysfs, group)]
    return {ACCEL: [os.path.join(dev, name) for _, name in accel],
            VFIO: [os.path.join(dev, "vfio", str(group)) for group in groups]}


def _holders(paths: list[str]) -> list[str]:
    """Warnings for other processes that have a chip open: libtpu gives the chips to one process.
    Reads /proc/*/fd of the processes this one can see: in a container, its own few."""
    wanted = {os.path.realpath(p) for p in paths}
    found = []
    for pid in _listing("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        for fd in _listing(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target in wanted:
                try:
                    with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
                        name = handle.read().strip()
                except OSError:
                    name = "?"
                found.append(f"process {pid} ({name}) has {target} open: the TPU runtime gives the chips to one "
                             "process, so the trainer's fails with 'TPU in use' while that one runs; stop it first")
                break
    return found


def _elf_problem(head: bytes) -> str | None:
    """Why the file starting with head is no 64-bit ELF shared object for this machine, or None."""
    if head[:4] != b"\x7fELF":
        return f"is not an ELF shared object (it starts with {head[:16]!r})"
    if len(head) < 20:
        return f"is a truncated ELF file ({len(head)} bytes)"
    if head[4] != 2:
        return "is a 32-bit ELF file; the TPU runtime is 64-bit"
    order = "little" if head[5] == 1 else "big"
    kind = int.from_bytes(head[16:18], order)
    if kind != ET_DYN:
        return f"is an ELF file of type {kind}, not a shared object (type {ET_DYN})"
    machine = os.uname().machine
    built, here = int.from_bytes(head[18:20], order), ELF_MACHINES.get(machine)
    if here is not None and built != here:
        return f"is built for ELF machine {built}, not this {machine} machine ({here})"
    return None


def _runtime(env: dict[str, str], tpu_type: str) -> str:
    """The summary part for the runtime library; CheckFailed (19) when it cannot be loaded. Values
    are taken as they are, as the frameworks open them."""
    image = env.get(TPU_RUNTIME_ENV, "")
    user = env.get(LIBRARY_PATH_ENV)
    own = "the framework loads the image's own libtpu" + (f" ({TPU_RUNTIME_ENV}={image})" if image else "")
    if user == "":  # e.g. `export TPU_LIBRARY_PATH="${TPU_LIBRARY_PATH:-}"` in a start script
        raise CheckFailed(TPU_RUNTIME_MISSING, f"{LIBRARY_PATH_ENV} is set but empty: JAX and PyTorch/XLA take it as the "
                                               f"library's path and load nothing; unset it, so {own}")
    if user is not None:
        source, path = LIBRARY_PATH_ENV, user
        fix = f"point {LIBRARY_PATH_ENV} at a libtpu.so, or unset it so {own}"
    elif image:
        source, path = TPU_RUNTIME_ENV, image
        fix = (f"the image's TPU build is broken or incomplete: rebuild it with accelerator: {tpu_type or 'TPU_...'} "
               "in buildkit.yaml (the framework's TPU build brings libtpu), or set "
               f"{LIBRARY_PATH_ENV} to a libtpu.so the image has")
    else:
        return f"TPU runtime not checked ({TPU_RUNTIME_ENV} and {LIBRARY_PATH_ENV} unset)"
    if "/" not in path:
        return f"TPU runtime {path!r} not checked ({source} names no path: the loader searches for it)"
    try:
        with open(path, "rb") as handle:
            head = handle.read(20)
    except OSError as exc:
        raise CheckFailed(TPU_RUNTIME_MISSING, f"the TPU runtime {source}={path!r} cannot be read ({exc.strerror}), so "
                                               f"the framework cannot use the TPU: {fix}") from None
    problem = _elf_problem(head)
    if problem:
        raise CheckFailed(TPU_RUNTIME_MISSING, f"the TPU runtime {source}={path!r} {problem}, so the framework cannot "
                                               f"load it: {fix}")
    return f"TPU runtime {path}"


def check(env: dict[str, str]) -> Report:
    """Raise CheckFailed with its exit code (18 chips, 19 runtime, 21 a bad value), or return the
    summary and warnings."""
    expected = requested(env, EXPECT_TPU_ENV, "TPU chips", "no TPU is expected")
    if not expected:
        return Report(f"no TPU requested ({EXPECT_TPU_ENV}=0)")
    tpu_type = env.get(TPU_TYPE_ENV, "").strip()
    if tpu_type and not _TYPE.fullmatch(tpu_type):
        raise CheckFailed(USAGE, f"{TPU_TYPE_ENV}={tpu_type!r} is not a TPU accelerator type; allowed: TPU_ and capitals, "
                                 f"digits or _, like {', '.join(LAYOUTS)} (buildkit-py's Dockerfile sets it)")
    layout = LAYOUTS.get(tpu_type)
    dev = env.get(DEV_DIR_ENV) or DEFAULT_DEV_DIR
    found = chips(dev, env.get(SYS_DIR_ENV) or DEFAULT_SYS_DIR)
    order = ([layout] if layout else []) + [ACCEL, VFIO]  # the image's layout first, else either
    kind = next((k for k in order if found[k]), layout)
    nodes = found[kind] if kind else []
    what = f"{tpu_type} chip(s)" if tpu_type else "TPU chip(s)"
    give = GIVE[kind] if kind else f"{GIVE[ACCEL]} (TPU v2-v4), or {GIVE[VFIO]} (TPU v5e, v5p, v6e)"
    container = os.path.join(dev, "vfio", "vfio")
    if kind == VFIO and nodes and not os.path.exists(container):
        raise CheckFailed(TPU_NOT_VISIBLE, f"the container has {', '.join(nodes)} but not {container}, the VFIO node "
                                           f"the TPU runtime opens to reach the chips: start it with {GIVE[VFIO]}, or "
                                           "--privileged")
    if len(nodes) < expected:
        seen = ", ".join(nodes) or f"no {kind or f'{ACCEL} or {VFIO}'} under {dev}"
        raise CheckFailed(TPU_NOT_VISIBLE, f"the job asked for {expected} {what} ({EXPECT_TPU_ENV}={expected}) but "
                                           f"{len(nodes)} {'is' if len(nodes) == 1 else 'are'} visible in this container "
                                           f"({seen}): run the job on a TPU VM machine type with {expected} {what} "
                                           "(base_images/tpus.yaml lists them), or when you start the container "
                                           f"yourself on a TPU VM, give it the chips: {give}, or --privileged "
                                           f"({SKIP_TPU_CHECK_ENV}=1 skips this check)")
    warnings = []
    if layout and kind != layout:
        warnings.append(f"this machine's TPU chips are {kind} nodes, but the image was built for {tpu_type}, whose chips "
                        f"are {layout}: the framework's TPU build may not support this TPU; build the image for it "
                        "(accelerator in buildkit.yaml)")
    warnings += _holders(nodes)
    summary = f"{len(nodes)} {what} visible ({', '.join(nodes)}); {_runtime(env, tpu_type)}"
    return Report(summary, tuple(warnings))
