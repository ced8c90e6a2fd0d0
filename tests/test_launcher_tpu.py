"""The launcher's TPU checks against a stand-in device layout (BUILDKIT_PY_DEV_DIR): the chips as
/dev/accelN (TPU v2-v4) or /dev/vfio/N beside /dev/vfio/vfio (v5e, v5p, v6e), and the runtime
library as a real shared object or a file that is not one."""

from __future__ import annotations

import _ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from buildkit_py.launcher.constants import (
    DEV_DIR_ENV,
    EXPECT_GPUS_ENV,
    EXPECT_TPU_ENV,
    SKIP_GPU_CHECK_ENV,
    SKIP_TPU_CHECK_ENV,
    SYS_DIR_ENV,
    TPU_NOT_VISIBLE,
    TPU_RUNTIME_ENV,
    TPU_RUNTIME_MISSING,
    TPU_TYPE_ENV,
    USAGE,
)
from buildkit_py.launcher.tpu import ELF_MACHINES, ET_DYN
from conftest import REPO

REAL_SO = _ctypes.__file__  # a real 64-bit shared object of this machine, standing in for libtpu.so
# The trainer prints the TPU variables it sees: the launcher must add none.
TRAINER = ("python3", "-c", "import os; print('trainer ran', sorted(k for k in os.environ if k.startswith('TPU')))")


def stand_in(root: Path, accel: int = 0, vfio: int = 0, container: bool = True) -> Path:
    """A /dev with the chip nodes of a TPU VM (regular files: the checks read names only), beside
    an empty sysfs (sys/)."""
    (root / "sys").mkdir()
    dev = root / "dev"
    dev.mkdir()
    for i in range(accel):
        (dev / f"accel{i}").write_bytes(b"")
    if vfio or container:
        (dev / "vfio").mkdir()
        for i in range(vfio):
            (dev / "vfio" / str(i)).write_bytes(b"")
        if container:
            (dev / "vfio" / "vfio").write_bytes(b"")
    (dev / "null").write_bytes(b"")  # other device nodes are no chips
    (dev / "accel").mkdir()  # nor is the kernel's accel class directory
    return dev


def elf_header(cls: int = 2, kind: int = ET_DYN, machine: int | None = None) -> bytes:
    machine = ELF_MACHINES[os.uname().machine] if machine is None else machine
    return (b"\x7fELF" + bytes([cls, 1, 1, 0]) + bytes(8) + kind.to_bytes(2, "little") + machine.to_bytes(2, "little")
            + bytes(44))


def launch(env: dict[str, str], *command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "buildkit_py.launcher", "--", *(command or TRAINER)],
                          capture_output=True, text=True, env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), **env})


def tpu_env(dev: Path, chips: str = "4", tpu_type: str | None = "TPU_V5_LITEPOD", runtime: str | None = REAL_SO,
            **extra) -> dict[str, str]:
    env = {DEV_DIR_ENV: str(dev), SYS_DIR_ENV: str(dev.parent / "sys"), EXPECT_TPU_ENV: chips, **extra}
    if tpu_type is not None:
        env[TPU_TYPE_ENV] = tpu_type
    if runtime is not None:
        env[TPU_RUNTIME_ENV] = runtime
    return env


def warnings(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("buildkit-py launcher: warning: ")]


@pytest.mark.parametrize("tpu_type, accel, vfio, nodes", [
    ("TPU_V5_LITEPOD", 0, 4, [f"vfio/{i}" for i in range(4)]),
    ("TPU_V6E", 0, 8, [f"vfio/{i}" for i in range(8)]),
    ("TPU_V2", 4, 0, [f"accel{i}" for i in range(4)]),
    (None, 4, 0, [f"accel{i}" for i in range(4)]),  # an image that does not name its TPU: either layout
    (None, 0, 4, [f"vfio/{i}" for i in range(4)]),
])
def test_chips_and_runtime_present(tmp_path, tpu_type, accel, vfio, nodes):
    dev = stand_in(tmp_path, accel=accel, vfio=vfio)
    proc = launch(tpu_env(dev, tpu_type=tpu_type))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "trainer ran []\n"  # nothing TPU_* set for the runtime
    what = f"{tpu_type} chip(s)" if tpu_type else "TPU chip(s)"
    assert f"{len(nodes)} {what} visible ({', '.join(f'{dev}/{n}' for n in nodes)}); TPU runtime {REAL_SO}" in proc.stderr
    assert f"GPU checks skipped: a TPU job ({EXPECT_TPU_ENV} set) with no GPU requested" in proc.stderr
    assert warnings(proc) == []


@pytest.mark.parametrize("tpu_type, accel, vfio, fragment", [
    ("TPU_V5_LITEPOD", 0, 1, "asked for 4 TPU_V5_LITEPOD chip(s) (BUILDKIT_PY_EXPECT_TPU_CHIPS=4) but 1 is visible in "
                             "this container ({dev}/vfio/0)"),
    ("TPU_V5_LITEPOD", 0, 0, "but 0 are visible in this container (no /dev/vfio/N under {dev})"),
    ("TPU_V3", 2, 0, "asked for 4 TPU_V3 chip(s) (BUILDKIT_PY_EXPECT_TPU_CHIPS=4) but 2 are visible"),
    (None, 0, 0, "(no /dev/accelN or /dev/vfio/N under {dev})"),
])
def test_too_few_chips_fail_fast_with_what_to_do(tmp_path, tpu_type, accel, vfio, fragment):
    dev = stand_in(tmp_path, accel=accel, vfio=vfio)
    proc = launch(tpu_env(dev, tpu_type=tpu_type))
    assert proc.returncode == TPU_NOT_VISIBLE, proc.stderr
    assert fragment.format(dev=dev) in proc.stderr and "trainer ran" not in proc.stdout
    assert "run the job on a TPU VM machine type with 4" in proc.stderr and "--privileged" in proc.stderr
    give = {"TPU_V5_LITEPOD": "--device /dev/vfio/N for each chip and --device /dev/vfio/vfio",
            "TPU_V3": "--device /dev/accelN for each chip"}.get(tpu_type, "--device /dev/accelN for each chip (TPU v2-v4)")
    assert give in proc.stderr and f"{SKIP_TPU_CHECK_ENV}=1 skips this check" in proc.stderr


@pytest.mark.parametrize("chips, code", [(4, 0), (5, TPU_NOT_VISIBLE)])
def test_a_vfio_group_of_another_device_is_no_chip(tmp_path, chips, code):
    """As on a host where a DPU's management function is bound to vfio-pci (ray-project/ray#65034)."""
    dev = stand_in(tmp_path, vfio=4)
    (dev / "vfio" / "96").write_bytes(b"")
    for group, vendor in [(0, "0x1ae0"), (1, "0x1ae0"), (2, "0x1ae0"), (3, "0x1ae0"), (96, "0x15b3")]:
        device = tmp_path / "sys" / "kernel" / "iommu_groups" / str(group) / "devices" / f"0000:00:{group + 4:02x}.0"
        device.mkdir(parents=True)
        (device / "vendor").write_text(vendor + "\n")
    proc = launch(tpu_env(dev, chips=str(chips)))
    assert proc.returncode == code, proc.stderr
    assert f"({', '.join(f'{dev}/vfio/{i}' for i in range(4))})" in proc.stderr and "vfio/96" not in proc.stderr


def test_vfio_groups_without_the_vfio_container_node(tmp_path):
    dev = stand_in(tmp_path, vfio=4, container=False)
    proc = launch(tpu_env(dev))
    assert proc.returncode == TPU_NOT_VISIBLE
    assert f"but not {dev}/vfio/vfio, the VFIO node the TPU runtime opens" in proc.stderr
    assert "--device /dev/vfio/vfio" in proc.stderr


def test_more_chips_than_asked_for_pass(tmp_path):
    proc = launch(tpu_env(stand_in(tmp_path, vfio=8), chips="1"))
    assert proc.returncode == 0 and "8 TPU_V5_LITEPOD chip(s) visible" in proc.stderr, proc.stderr


def test_a_machine_with_another_tpu_generation_warns(tmp_path):
    dev = stand_in(tmp_path, accel=4)
    proc = launch(tpu_env(dev, tpu_type="TPU_V5_LITEPOD"))
    assert proc.returncode == 0, proc.stderr
    assert len(warnings(proc)) == 1
    assert "chips are /dev/accelN nodes, but the image was built for TPU_V5_LITEPOD, whose chips are /dev/vfio/N" in \
        warnings(proc)[0]


@pytest.mark.parametrize("content, fragment", [
    (None, "cannot be read (No such file or directory)"),
    (b"version https://git-lfs.github.com/spec/v1\n", "is not an ELF shared object (it starts with b'version https://"),
    (b"", "is not an ELF shared object (it starts with b'')"),
    (elf_header()[:12], "is a truncated ELF file (12 bytes)"),
    (elf_header(cls=1), "is a 32-bit ELF file"),
    (elf_header(kind=2), "is an ELF file of type 2, not a shared object (type 3)"),
    (elf_header(machine=21), "is built for ELF machine 21, not this"),  # EM_PPC64
    ("directory", "cannot be read (Is a directory)"),
])
def test_the_image_runtime_missing_or_not_a_shared_object(tmp_path, content, fragment):
    dev = stand_in(tmp_path, vfio=4)
    runtime = tmp_path / "libtpu.so"
    if content == "directory":
        runtime.mkdir()
    elif content is not None:
        runtime.write_bytes(content)
    proc = launch(tpu_env(dev, runtime=str(runtime)))
    assert proc.returncode == TPU_RUNTIME_MISSING, proc.stderr
    assert f"the TPU runtime {TPU_RUNTIME_ENV}={str(runtime)!r} {fragment}" in proc.stderr
    assert "rebuild it with accelerator: TPU_V5_LITEPOD in buildkit.yaml" in proc.stderr
    assert "trainer ran" not in proc.stdout and "Traceback" not in proc.stderr


def test_a_synthetic_header_of_this_machine_passes(tmp_path):
    """The stand-in header of the e2e test, against the same reading as the real library above."""
    runtime = tmp_path / "libtpu.so"
    runtime.write_bytes(elf_header())
    proc = launch(tpu_env(stand_in(tmp_path, vfio=4), runtime=str(runtime)))
    assert proc.returncode == 0 and f"TPU runtime {runtime}" in proc.stderr, proc.stderr


def test_tpu_library_path_is_what_the_frameworks_load(tmp_path):
    dev = stand_in(tmp_path, vfio=4)
    missing = str(tmp_path / "none" / "libtpu.so")
    # The user's TPU_LIBRARY_PATH wins over the image's library, as in JAX, PyTorch/XLA and TensorFlow.
    proc = launch(tpu_env(dev, runtime=missing, TPU_LIBRARY_PATH=REAL_SO))
    assert proc.returncode == 0 and f"TPU runtime {REAL_SO}" in proc.stderr, proc.stderr
    assert proc.stdout == "trainer ran ['TPU_LIBRARY_PATH']\n"  # passed through, nothing added
    proc = launch(tpu_env(dev, TPU_LIBRARY_PATH=missing))
    assert proc.returncode == TPU_RUNTIME_MISSING
    assert f"the TPU runtime TPU_LIBRARY_PATH={missing!r} cannot be read" in proc.stderr
    assert f"point TPU_LIBRARY_PATH at a libtpu.so, or unset it so the framework loads the image's own libtpu " \
           f"({TPU_RUNTIME_ENV}={REAL_SO})" in proc.stderr
    # Set but empty: JAX and PyTorch/XLA would load "" (TensorFlow alone falls back to libtpu.so).
    proc = launch(tpu_env(dev, TPU_LIBRARY_PATH=""))
    assert proc.returncode == TPU_RUNTIME_MISSING and "TPU_LIBRARY_PATH is set but empty" in proc.stderr


@pytest.mark.parametrize("extra, fragment", [
    ({}, f"TPU runtime not checked ({TPU_RUNTIME_ENV} and TPU_LIBRARY_PATH unset)"),
    ({"TPU_LIBRARY_PATH": "libtpu.so"}, "TPU runtime 'libtpu.so' not checked (TPU_LIBRARY_PATH names no path"),
])
def test_a_runtime_that_cannot_be_checked_is_said(tmp_path, extra, fragment):
    proc = launch(tpu_env(stand_in(tmp_path, vfio=4), runtime=None, **extra))
    assert proc.returncode == 0 and fragment in proc.stderr, proc.stderr


def test_nothing_tpu_related_happens_without_a_tpu(tmp_path):
    dev = stand_in(tmp_path)  # no chips, and a runtime that does not exist
    for chips in ("", "0", " "):
        env = tpu_env(dev, chips=chips, runtime=str(tmp_path / "missing.so"), **{SKIP_GPU_CHECK_ENV: "1"})
        proc = launch(env, "python3", "-c", "print('trainer ran')")
        assert proc.returncode == 0 and proc.stdout == "trainer ran\n" and "TPU" not in proc.stderr, proc.stderr


def test_the_skip_switches(tmp_path):
    dev = stand_in(tmp_path)  # no chips
    skipped = launch(tpu_env(dev, **{SKIP_TPU_CHECK_ENV: "1"}))
    assert skipped.returncode == 0 and f"TPU checks skipped ({SKIP_TPU_CHECK_ENV}=1)" in skipped.stderr
    # The GPU switch skips the GPU checks only: the TPU job's missing chips still stop it.
    gpu_only = launch(tpu_env(dev, **{SKIP_GPU_CHECK_ENV: "1"}))
    assert gpu_only.returncode == TPU_NOT_VISIBLE and "GPU checks skipped" in gpu_only.stderr


def test_a_job_expecting_gpus_and_a_tpu_runs_both_checks(tmp_path):
    dev = stand_in(tmp_path, vfio=4)
    proc = launch(tpu_env(dev, **{EXPECT_GPUS_ENV: "1", "BUILDKIT_PY_NVML_LIBRARY": str(tmp_path / "missing.so")}))
    assert proc.returncode == 10 and "no NVIDIA driver is visible" in proc.stderr


@pytest.mark.parametrize("name, value", [
    (EXPECT_TPU_ENV, "four"),
    (EXPECT_TPU_ENV, "-4"),
    (EXPECT_TPU_ENV, "٤"),  # Arabic-Indic four: isdigit() and int() accept it
    (EXPECT_TPU_ENV, "²"),
    (TPU_TYPE_ENV, "v5litepod-4"),
    (TPU_TYPE_ENV, "TPU_V5 LITEPOD"),
    (SKIP_TPU_CHECK_ENV, "yes"),
])
def test_bad_values_are_usage_errors(tmp_path, name, value):
    proc = launch({**tpu_env(stand_in(tmp_path, vfio=4)), name: value})
    assert proc.returncode == USAGE, proc.stderr
    assert f"{name}={value!r}" in proc.stderr and "allowed:" in proc.stderr and "Traceback" not in proc.stderr


def test_another_process_holding_a_chip_is_a_warning(tmp_path):
    dev = stand_in(tmp_path, vfio=4)
    holder = subprocess.Popen([sys.executable, "-c", f"f = open({str(dev / 'vfio' / '2')!r}); print('open', flush=True); "
                               "import time; time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "open\n"
        proc = launch(tpu_env(dev))
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 0, proc.stderr
    assert len(warnings(proc)) == 1
    assert f"process {holder.pid} (python" in warnings(proc)[0] and f"has {dev}/vfio/2 open" in warnings(proc)[0]
    assert "'TPU in use'" in warnings(proc)[0]
