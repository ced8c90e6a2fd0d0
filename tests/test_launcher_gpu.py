"""The launcher's GPU checks against a stand-in NVML (tests/data/fake_nvml.c, built with gcc):
the same C interface as libnvidia-ml.so.1, with devices and versions set per test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from buildkit_py.config import load_config
from buildkit_py.launcher.constants import (
    COMPAT_DRIVER_ENV,
    CUDA_ARCHS_ENV,
    CUDA_COMPAT_DIR_ENV,
    EXPECT_GPUS_ENV,
    FORWARD_COMPAT_ENV,
    MIN_DRIVER_ENV,
)
from buildkit_py.launcher.gpu import arch_supports, cuda_visible
from buildkit_py.launcher.nvml import Device
from buildkit_py.pipeline.plan import make_plan
from buildkit_py.pipeline.render import render_dockerfile
from conftest import REPO

BRANCHES = "535,570,580,590,595,610,615"  # base_images/cuda.yaml, as the Dockerfile sets it


def launch(env: dict[str, str], *command: str, check: bool = False, path: str = str(REPO)) -> subprocess.CompletedProcess:
    args = ["--check"] if check else ["--", *(command or ("python3", "-c", "print('trainer ran')"))]
    return subprocess.run(
        [sys.executable, "-m", "buildkit_py.launcher", *args],
        capture_output=True, text=True, env={"PATH": os.environ["PATH"], "PYTHONPATH": path, **env},
    )


def gpu_env(fake_nvml, **extra) -> dict[str, str]:
    return {"BUILDKIT_PY_NVML_LIBRARY": fake_nvml, "CUDA_VERSION": "12.4.1", **extra}


def warnings(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("buildkit-py launcher: warning: ")]


def test_success_prints_one_summary_and_runs_the_trainer(fake_nvml, tmp_path):
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="2", FAKE_NVML_COUNT="2", BUILDKIT_PY_SHM_PATH=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "trainer ran\n"
    summary = proc.stderr.splitlines()[0]
    assert "2 GPU(s) visible (NVIDIA H100 80GB HBM3, 79.6 GiB each)" in summary
    assert "driver 550.54.15 (CUDA 12.4) >= image CUDA 12.4.1" in summary
    assert warnings(proc) == []


def test_no_driver_library_when_gpus_were_requested(tmp_path):
    proc = launch({"BUILDKIT_PY_NVML_LIBRARY": str(tmp_path / "missing.so"), "BUILDKIT_PY_EXPECT_GPUS": "1"})
    assert proc.returncode == 10
    assert "no NVIDIA driver is visible" in proc.stderr and "--gpus all" in proc.stderr
    assert "trainer ran" not in proc.stdout


def test_cpu_run_proceeds_when_no_gpu_was_requested(tmp_path):
    proc = launch({"BUILDKIT_PY_NVML_LIBRARY": str(tmp_path / "missing.so")})
    assert proc.returncode == 0 and "running on CPU" in proc.stderr and proc.stdout == "trainer ran\n"


def test_driver_not_loaded(fake_nvml):
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", FAKE_NVML_INIT="9"))
    assert proc.returncode == 11 and "Driver Not Loaded" in proc.stderr


def test_fewer_gpus_than_expected(fake_nvml):
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="8", FAKE_NVML_COUNT="4"))
    assert proc.returncode == 12 and "asked for 8 GPU(s) but 4 are visible" in proc.stderr


# The driver rule (NVIDIA's "CUDA Compatibility" guide), with the data the Dockerfile sets from
# base_images/cuda.yaml: CUDA_VERSION, its release's own driver, the floor of its major.
@pytest.mark.parametrize("cuda, min_driver, floor, driver, driver_cuda, code, fragment", [
    # Between the floor and the release's own driver: minor-version compatibility, a warning.
    ("12.8.1", "570.124.06", "525.60.13", "550.54.15", "12040", 0, "wants driver >= 570.124.06; it runs under CUDA "
                                                                     "minor-version compatibility (CUDA 12.x runs on "
                                                                     "drivers >= 525.60.13)"),
    ("12.4.1", "550.54.15", "525.60.13", "535.183.01", "12020", 0, "wants driver >= 550.54.15; it runs under CUDA "
                                                                   "minor-version compatibility"),
    # Below the floor of the image's major: refused.
    ("13.0.3", "580.65.06", "580.65.06", "575.57.08", "12090", 13, "driver 575.57.08 supports CUDA up to 12.9, but this "
                                                                   "image is built on CUDA 13.0.3: it needs driver >= "
                                                                   "580.65.06"),
    ("12.8.1", "570.124.06", "525.60.13", "520.61.05", "11080", 13, "minor-version compatibility does not reach (CUDA "
                                                                    "12.x runs on drivers >= 525.60.13)"),
    # A driver newer than the image: backward compatibility, nothing to say.
    ("11.8.0", "520.61.05", "450.80.02", "580.65.06", "13000", 0, None),
])
def test_driver_rule(fake_nvml, tmp_path, cuda, min_driver, floor, driver, driver_cuda, code, fragment):
    env = gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", CUDA_VERSION=cuda, BUILDKIT_PY_MIN_DRIVER=min_driver,
                  BUILDKIT_PY_COMPAT_DRIVER=floor, BUILDKIT_PY_FORWARD_COMPAT_BRANCHES=BRANCHES,
                  BUILDKIT_PY_CUDA_COMPAT_DIR=str(tmp_path), FAKE_NVML_DRIVER=driver, FAKE_NVML_CUDA=driver_cuda)
    proc = launch(env)
    assert proc.returncode == code, proc.stderr
    assert ("trainer ran" in proc.stdout) == (code == 0)
    if fragment is None:
        assert warnings(proc) == [] and f"driver {driver} (CUDA 13.0) >= image CUDA {cuda}" in proc.stderr
    elif code == 0:
        assert len(warnings(proc)) == 1 and fragment in warnings(proc)[0] and "PTX JIT" in warnings(proc)[0]
        assert f"< image CUDA {cuda}: minor-version compatibility" in proc.stderr
    else:
        assert f"error: the NVIDIA driver {driver}" in proc.stderr and fragment in proc.stderr


@pytest.mark.parametrize("driver, driver_cuda, cuda, code", [
    ("535.183.01", "12020", "12.8.1", 0),  # same major: never refused, a warning
    ("575.57.08", "12090", "13.0.3", 13),  # an older major: refused, as before
])
def test_image_without_the_recorded_floor(fake_nvml, tmp_path, driver, driver_cuda, cuda, code):
    """Images built before BUILDKIT_PY_COMPAT_DRIVER existed: the CUDA major is all that is known."""
    env = gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", CUDA_VERSION=cuda, BUILDKIT_PY_MIN_DRIVER="570.26",
                  BUILDKIT_PY_CUDA_COMPAT_DIR=str(tmp_path), FAKE_NVML_DRIVER=driver, FAKE_NVML_CUDA=driver_cuda)
    proc = launch(env)
    assert proc.returncode == code, proc.stderr
    if code:
        assert f"driver {driver} supports CUDA up to 12.9" in proc.stderr and "needs driver >= 570.26" in proc.stderr
    else:
        assert "runs on a CUDA 12 driver" in warnings(proc)[0]


@pytest.fixture
def compat_dir(tmp_path) -> Path:
    """An image's /usr/local/cuda/compat: cuda-compat-13-0 ships the 580.65.06 user-mode driver."""
    directory = tmp_path / "compat"
    directory.mkdir()
    (directory / "libcuda.so.580.65.06").write_bytes(b"")
    (directory / "libcuda.so.1").symlink_to("libcuda.so.580.65.06")
    return directory


# Forward compatibility: a 13.0 image with cuda-compat on a 12.x driver.
@pytest.mark.parametrize("driver, driver_cuda, brand, branches, code, fragment", [
    ("570.133.20", "12080", "14", BRANCHES, 0, None),  # H100-class part on a supported branch
    ("535.183.01", "12020", "2", BRANCHES, 0, None),  # Tesla brand (V100, T4), LTS branch 535
    ("570.133.20", "12080", "5", BRANCHES, 13, "serves data-center GPUs only, not NVIDIA H100"),  # GeForce brand
    ("575.57.08", "12090", "14", BRANCHES, 13, "does not support driver branch 575 (supported: 535, 570, 580"),
    ("570.133.20", "12080", "14", None, 13, f"({FORWARD_COMPAT_ENV} unset)"),  # image built before the data
])
def test_forward_compatibility(fake_nvml, compat_dir, driver, driver_cuda, brand, branches, code, fragment):
    env = gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", CUDA_VERSION="13.0.3", BUILDKIT_PY_MIN_DRIVER="580.65.06",
                  BUILDKIT_PY_COMPAT_DRIVER="580.65.06", BUILDKIT_PY_CUDA_COMPAT_DIR=str(compat_dir),
                  FAKE_NVML_DRIVER=driver, FAKE_NVML_CUDA=driver_cuda, FAKE_NVML_BRAND=brand,
                  LD_LIBRARY_PATH="/usr/local/nvidia/lib64",
                  **({FORWARD_COMPAT_ENV: branches} if branches else {}))
    proc = launch(env, "python3", "-c", "import os; print(os.environ['LD_LIBRARY_PATH'])")
    assert proc.returncode == code, proc.stderr
    if code == 0:
        assert warnings(proc) == []
        assert f"forward compatibility through {compat_dir}/libcuda.so.580.65.06" in proc.stderr
        # The trainer's loader finds the compat libcuda before the host's.
        assert proc.stdout == f"{compat_dir}:/usr/local/nvidia/lib64\n"
    else:
        assert "forward compatibility does not apply" in proc.stderr and fragment in proc.stderr


def test_a_trainer_the_compat_library_was_added_for_starts_in_a_fresh_interpreter(fake_nvml, compat_dir, tmp_path):
    """The loader reads LD_LIBRARY_PATH when a process starts: once the launcher has added the
    cuda-compat directory, a Python trainer cannot run in the launcher's own interpreter."""
    script = tmp_path / "trainer.py"
    script.write_text("import os, sys\n"
                      "print(os.environ.get('LD_LIBRARY_PATH'), any(m.endswith('launcher.handoff') for m in sys.modules))\n")
    env = gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", CUDA_VERSION="13.0.3", BUILDKIT_PY_MIN_DRIVER="580.65.06",
                  BUILDKIT_PY_COMPAT_DRIVER="580.65.06", BUILDKIT_PY_CUDA_COMPAT_DIR=str(compat_dir),
                  FAKE_NVML_DRIVER="570.133.20", FAKE_NVML_CUDA="12080", FAKE_NVML_BRAND="14",
                  BUILDKIT_PY_FORWARD_COMPAT_BRANCHES=BRANCHES)
    added = launch(env, sys.executable, str(script))
    assert added.returncode == 0 and added.stdout == f"{compat_dir} False\n", added.stderr
    unchanged = launch({**env, "FAKE_NVML_DRIVER": "580.65.06", "FAKE_NVML_CUDA": "13000"}, sys.executable, str(script))
    assert unchanged.returncode == 0 and unchanged.stdout == "None True\n", unchanged.stderr


@pytest.mark.parametrize("library, min_driver, fragment", [
    # As on the H100 test machine: an nvidia/cuda 13.0 image's compat library, on a newer 580 driver.
    ("libcuda.so.580.95.05", "", "libcuda.so.580.95.05 is not from a newer driver branch than the driver's"),
    ("libcuda.so.590.44.01", "595.45.04", "libcuda.so.590.44.01 is older than this CUDA's own driver 595.45.04"),
])
def test_compat_library_that_cannot_serve(fake_nvml, tmp_path, library, min_driver, fragment):
    (tmp_path / library).write_bytes(b"")
    env = gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", CUDA_VERSION="13.2.1", BUILDKIT_PY_MIN_DRIVER=min_driver,
                  BUILDKIT_PY_COMPAT_DRIVER="580.65.06", BUILDKIT_PY_FORWARD_COMPAT_BRANCHES=BRANCHES,
                  BUILDKIT_PY_CUDA_COMPAT_DIR=str(tmp_path), FAKE_NVML_DRIVER="580.159.04", FAKE_NVML_CUDA="13000")
    proc = launch(env)
    assert proc.returncode == 0 and "minor-version compatibility" in proc.stderr, proc.stderr
    assert f"forward compatibility does not apply (the image's {fragment})" in warnings(proc)[0]


def test_forward_compatibility_for_a_newer_minor_and_a_compat_dir_already_on_the_path(fake_nvml, tmp_path):
    """A 12.8 image's cuda-compat (570.124.06) on the LTS 535 driver: full 12.8, no warning."""
    (tmp_path / "libcuda.so.570.124.06").write_bytes(b"")
    env = gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", CUDA_VERSION="12.8.1", BUILDKIT_PY_MIN_DRIVER="570.124.06",
                  BUILDKIT_PY_COMPAT_DRIVER="525.60.13", BUILDKIT_PY_FORWARD_COMPAT_BRANCHES=BRANCHES,
                  BUILDKIT_PY_CUDA_COMPAT_DIR=str(tmp_path), LD_LIBRARY_PATH=str(tmp_path),
                  FAKE_NVML_DRIVER="535.183.01", FAKE_NVML_CUDA="12020")
    proc = launch(env, "python3", "-c", "import os; print(os.environ['LD_LIBRARY_PATH'])")
    assert proc.returncode == 0 and warnings(proc) == [], proc.stderr
    assert "forward compatibility through" in proc.stderr and "added" not in proc.stderr
    assert proc.stdout == f"{tmp_path}\n"


def test_image_env_from_cuda_yaml_drives_the_driver_rule(fake_nvml, tmp_path):
    """base_images/cuda.yaml -> Plan -> the Dockerfile's ENV -> the launcher: the names and values
    the tool writes are the ones the launcher reads."""
    config = load_config(REPO / "tests" / "cases" / "torch-gpu" / "buildkit.yaml")
    plan = make_plan(config)
    path = tmp_path / "Dockerfile"
    path.write_text(render_dockerfile(plan, root=config.root))
    image_env = {k: v for k, v in DockerfileParser(path=str(path)).envs.items() if k.startswith("BUILDKIT_PY_")}
    assert image_env == {MIN_DRIVER_ENV: plan.min_driver, COMPAT_DRIVER_ENV: "525.60.13", FORWARD_COMPAT_ENV: BRANCHES,
                         CUDA_ARCHS_ENV: ",".join(plan.cuda_archs)}
    env = {**image_env, "BUILDKIT_PY_NVML_LIBRARY": fake_nvml, "CUDA_VERSION": plan.cuda, EXPECT_GPUS_ENV: "1",
           CUDA_COMPAT_DIR_ENV: str(tmp_path)}
    older = launch({**env, "FAKE_NVML_DRIVER": "535.104.05", "FAKE_NVML_CUDA": "12020"}, check=True)
    assert older.returncode == 0 and f"wants driver >= {plan.min_driver}" in warnings(older)[0], older.stderr
    below_floor = launch({**env, "FAKE_NVML_DRIVER": "520.61.05", "FAKE_NVML_CUDA": "11080"}, check=True)
    assert below_floor.returncode == 13, below_floor.stderr


def test_newer_driver_than_the_image_is_fine(fake_nvml):
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", CUDA_VERSION="11.8.0", FAKE_NVML_CUDA="13000"))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("visible", ["void", "none"])
def test_nvidia_visible_devices_hiding_gpus(fake_nvml, visible):
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", NVIDIA_VISIBLE_DEVICES=visible))
    assert proc.returncode == 15 and "hides every GPU" in proc.stderr


def devices(count: int) -> tuple[Device, ...]:
    return tuple(Device(i, "GPU", f"GPU-00000000-0000-0000-0000-{i:012d}", 0, (9, 0), 14) for i in range(count))


# CUDA's reading of CUDA_VISIBLE_DEVICES (CUDA programming guide, "CUDA Environment Variables").
@pytest.mark.parametrize("value, count, used, stopped", [
    ("0,1", 2, [0, 1], False),
    ("2,1", 4, [2, 1], False),  # the order of the list is CUDA's order
    ("0,2,-1,1", 4, [0, 2], True),  # an invalid entry ends the list: the devices before it are used
    ("0,5", 2, [0], True),  # an index beyond the devices is invalid too
    ("-1", 2, [], True),  # the usual "CPU only"
    ("", 2, [], True),
    (" 1 , 0", 2, [1, 0], False),
    ("1gpu", 2, [1], False),  # read like strtoul: leading digits
    ("0,0", 2, [], True),  # a device named twice leaves none
    ("²", 2, [], True),  # '²'.isdigit() is True; it is no index
    ("٣", 4, [], True),  # nor is an Arabic-Indic three
    ("GPU-00000000-0000-0000-0000-000000000001", 2, [1], False),
    ("GPU-00000000", 1, [0], False),  # a unique prefix
    ("GPU-0000", 2, [], True),  # an ambiguous prefix names no device
    ("GPU-00000000-0000-0000-0000-000000000001,0", 2, [1], True),  # the first entry sets the kind
])
def test_cuda_visible_devices_parsing(value, count, used, stopped):
    chosen, why = cuda_visible(value, devices(count))
    assert [d.index for d in chosen] == used
    assert (why is not None) == stopped


def test_mig_instances_are_taken_as_named():
    chosen, why = cuda_visible("MIG-5c89852c-d268-c3f3-1b07-005d5ae1dc3f,MIG-9f4bd1a4-0000-0000-0000-000000000000",
                               devices(1))
    assert len(chosen) == 2 and why is None


@pytest.mark.parametrize("visible, expected, count, code, fragment", [
    ("-1", "0", "2", 0, "CUDA_VISIBLE_DEVICES='-1' hides every GPU from CUDA; no GPU requested: running on CPU"),
    ("", None, "2", 0, "CUDA_VISIBLE_DEVICES='' hides every GPU from CUDA; no GPU requested: running on CPU"),
    ("-1", "1", "2", 15, "CUDA_VISIBLE_DEVICES='-1' leaves 0 of this container's 2 GPU(s) to CUDA"),
    ("", "2", "2", 15, "CUDA_VISIBLE_DEVICES='' leaves 0 of this container's 2 GPU(s) to CUDA"),
    ("1", "2", "4", 15, "CUDA_VISIBLE_DEVICES='1' leaves 1 of this container's 4 GPU(s) to CUDA, but the job asked for 2"),
    ("0,5", "2", "2", 15, "('5' names no GPU in this container (2 GPU(s), indices 0-1), so CUDA uses only the "
                          "entries before it), but the job asked for 2"),
    ("0,0", "1", "2", 15, "'0' names a GPU a second time, so CUDA sees none"),
    ("0,2,-1,1", "2", "4", 0, "warning: CUDA_VISIBLE_DEVICES='0,2,-1,1': '-1' names no GPU in this container (4 GPU(s), "
                              "indices 0-3), so CUDA uses only the entries before it (0, 2)"),
])
def test_cuda_visible_devices_exit_codes(fake_nvml, visible, expected, count, code, fragment):
    env = gpu_env(fake_nvml, FAKE_NVML_COUNT=count, CUDA_VISIBLE_DEVICES=visible,
                  **({EXPECT_GPUS_ENV: expected} if expected else {}))
    proc = launch(env)
    assert proc.returncode == code, proc.stderr
    assert fragment in proc.stderr
    assert ("trainer ran" in proc.stdout) == (code == 0)


def test_cpu_only_run_ignores_an_old_driver(fake_nvml):
    """CUDA_VISIBLE_DEVICES=-1 with no GPU requested: the driver does not matter."""
    env = gpu_env(fake_nvml, CUDA_VISIBLE_DEVICES="-1", CUDA_VERSION="13.0.3", FAKE_NVML_DRIVER="520.61.05",
                  FAKE_NVML_CUDA="11080")
    proc = launch(env)
    assert proc.returncode == 0 and proc.stdout == "trainer ran\n", proc.stderr


@pytest.mark.parametrize("name, value", [
    (EXPECT_GPUS_ENV, "²"),
    (EXPECT_GPUS_ENV, "١"),  # Arabic-Indic one: isdigit() and int() both accept it
    (EXPECT_GPUS_ENV, "-1"),
    (EXPECT_GPUS_ENV, "1.5"),
    (EXPECT_GPUS_ENV, "9" * 5000),  # int() refuses over 4300 digits
    ("BUILDKIT_PY_SKIP_GPU_CHECK", "yes"),
    ("BUILDKIT_PY_LAUNCHER_QUIET", "true"),
    ("BUILDKIT_PY_PROBE", "pytorch"),
    (MIN_DRIVER_ENV, "５７０.124.06"),  # fullwidth digits
    (COMPAT_DRIVER_ENV, "525.⁶⁰.13"),
    (FORWARD_COMPAT_ENV, "535,٥٧٠"),
])
def test_bad_switch_values_are_usage_errors(fake_nvml, name, value):
    proc = launch(gpu_env(fake_nvml, **{name: value}))
    assert proc.returncode == 21, proc.stderr
    assert f"{name}={value!r}" in proc.stderr and "allowed:" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("extra, fragment", [
    ({"CUDA_VERSION": "¹²"}, "CUDA_VERSION='¹²' is not a CUDA version (like 12.4.1): the driver check is skipped"),
    ({"CUDA_VERSION": "12.٤"}, "the driver check is skipped"),
    ({"NV_CUDNN_VERSION": "⁹.1"}, "NV_CUDNN_VERSION='⁹.1' is not a version (like 9.14.0.64-1): cuDNN is not checked"),
    # A driver string that is no version (the stand-in copies it as UTF-8 bytes): the CUDA major decides.
    ({"FAKE_NVML_DRIVER": "５５０.54", "CUDA_VERSION": "12.8.1", "BUILDKIT_PY_COMPAT_DRIVER": "525.60.13"},
     "runs on a CUDA 12 driver"),
])
def test_unicode_in_values_the_launcher_does_not_own_never_crashes(fake_nvml, extra, fragment):
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", **extra))
    assert proc.returncode == 0 and proc.stdout == "trainer ran\n", proc.stderr
    assert any(fragment in w for w in warnings(proc)), proc.stderr


def test_quiet_still_shows_warnings(fake_nvml, tmp_path):
    env = gpu_env(fake_nvml, BUILDKIT_PY_LAUNCHER_QUIET="1", CUDA_VERSION="12.8.1", BUILDKIT_PY_CUDA_COMPAT_DIR=str(tmp_path))
    proc = launch(env)
    assert proc.returncode == 0 and proc.stderr.splitlines() == warnings(proc) and len(warnings(proc)) == 1


def test_unknown_option_is_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "buildkit_py.launcher", "--chek"], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO)})
    assert proc.returncode == 21 and "unknown option '--chek'" in proc.stderr


@pytest.mark.parametrize("version", ["9.1.0.70", "9.14.0.64-1"])  # the second as nvidia/cuda 13.0 images set it
def test_cudnn_declared_but_missing(fake_nvml, version):
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", NV_CUDNN_VERSION=version))
    assert proc.returncode == 16 and "libcudnn.so.9 does not load" in proc.stderr


def fake_framework(root: Path, name: str, source: str) -> str:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(source)
    return f"{root}:{REPO}"


def fake_torch(root: Path, arches: list[str]) -> str:
    """A torch module with the attributes the probe reads, on a capability 12.0 GPU."""
    return fake_framework(root, "torch", (
        "__version__ = '2.5.1+cu124'\n"
        "class version:\n    cuda = '12.4'\n"
        "class cuda:\n"
        "    is_available = staticmethod(lambda: True)\n"
        "    device_count = staticmethod(lambda: 1)\n"
        f"    get_arch_list = staticmethod(lambda: {arches!r})\n"
        "    get_device_capability = staticmethod(lambda i: (12, 0))\n"
        "    get_device_name = staticmethod(lambda i: 'NVIDIA RTX PRO 6000')\n"
    ))


@pytest.mark.parametrize("arches, code", [
    (["sm_80", "sm_90"], 14),
    (["sm_80", "sm_90a", "compute_90a"], 14),  # arch-specific PTX does not carry to newer GPUs
    (["sm_80", "compute_80"], 0),  # plain PTX JIT-compiles for any newer GPU
])
def test_framework_probe_reads_the_arch_list(fake_nvml, tmp_path, arches, code):
    env = gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", BUILDKIT_PY_PROBE="torch")
    proc = launch(env, check=True, path=fake_torch(tmp_path, arches))
    assert proc.returncode == code, proc.stderr
    if code:
        assert f"is sm_120, but torch 2.5.1+cu124 was built for {', '.join(arches)}" in proc.stderr


def test_framework_probe_on_a_framework_that_does_not_import(fake_nvml, tmp_path):
    path = fake_framework(tmp_path, "tensorflow", "raise ImportError('libcudart.so.12: cannot open shared object file')")
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", BUILDKIT_PY_PROBE="tensorflow"), check=True, path=path)
    assert proc.returncode == 17 and "BUILDKIT_PY_PROBE=tensorflow but tensorflow does not import" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_skip_switch(tmp_path):
    env = {"BUILDKIT_PY_NVML_LIBRARY": str(tmp_path / "missing.so"), "BUILDKIT_PY_EXPECT_GPUS": "1",
           "BUILDKIT_PY_SKIP_GPU_CHECK": "1"}
    assert launch(env).returncode == 0


def test_cluster_env_reaches_the_trainer():
    spec = '{"cluster": {"workerpool0": ["10.0.0.2:2222"], "workerpool1": ["10.0.0.3:2222"]}, ' \
           '"task": {"type": "workerpool1", "index": 0}}'
    proc = launch({"CLUSTER_SPEC": spec}, "python3", "-c",
                  "import os; print(*(os.environ[k] for k in ('MASTER_ADDR', 'MASTER_PORT', 'WORLD_SIZE', 'RANK')))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["10.0.0.2", "2222", "2", "1"]


def test_bad_cluster_spec_has_its_own_exit_code():
    proc = launch({"CLUSTER_SPEC": '{"cluster": {"workerpool0": ["a:1"]}, "task": {"type": "workerpool0", "index": 1e400}}'})
    assert proc.returncode == 20 and "CLUSTER_SPEC: task.index: inf is not an index" in proc.stderr
    assert "Traceback" not in proc.stderr and "trainer ran" not in proc.stdout


# The trainer's handler must not print: SIGTERM can land while the main thread is inside
# print(flush=True) holding stdout's lock, and a print from the handler then raises "reentrant
# call". os.write has no lock.
SIGTERM_TRAINER = (
    "import os, signal, time\n"
    "def on_term(*_):\n"
    "    os.write(1, b'got SIGTERM\\n')\n"
    "    os._exit({code})\n"
    "signal.signal(signal.SIGTERM, on_term)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def test_exit_code_and_signals_pass_to_the_trainer(tmp_path):
    assert launch({}, "python3", "-c", "raise SystemExit(3)").returncode == 3
    # Not PID 1: the launcher execs, so the trainer has the launcher's PID and gets SIGTERM itself.
    script = tmp_path / "trainer.py"
    script.write_text(SIGTERM_TRAINER.format(code=42))
    proc = subprocess.Popen([sys.executable, "-m", "buildkit_py.launcher", "--", sys.executable, str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO)})
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert out == "got SIGTERM\n" and proc.returncode == 42


def test_supervisor_forwards_signals_and_returns_the_code(tmp_path):
    script = tmp_path / "trainer.py"
    script.write_text(SIGTERM_TRAINER.format(code=7))
    code = f"from buildkit_py.launcher.handoff import supervise; raise SystemExit(supervise([{sys.executable!r}, {str(script)!r}]))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO)})
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert out == "got SIGTERM\n" and proc.returncode == 7


@pytest.mark.parametrize("pid_1", [False, True])
def test_a_trainer_that_cannot_run_is_exit_127(tmp_path, pid_1):
    missing = str(tmp_path / "no-such-trainer")
    if pid_1:  # the supervisor's path, without being PID 1
        code = f"from buildkit_py.launcher.handoff import supervise; raise SystemExit(supervise([{missing!r}]))"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO)})
    else:
        proc = launch({}, missing)
    assert proc.returncode == 127 and f"cannot run {missing!r}" in proc.stderr and "Traceback" not in proc.stderr


# The architecture rule: BUILDKIT_PY_CUDA_ARCHS (the framework build's list, set by the Dockerfile)
# against the compute capability NVML reports, without importing the framework.
TORCH_291_CU128 = "sm_70,sm_75,sm_80,sm_86,sm_90,sm_100,sm_120"  # base_images/frameworks/torch.yaml
TORCH_215 = "sm_75,sm_80,sm_86,sm_90,sm_100,sm_120"


@pytest.mark.parametrize("archs, capability, runs", [
    (("sm_70", "sm_80", "sm_90"), (9, 0), "sm_90"),
    (("sm_80", "sm_86"), (8, 9), "sm_86"),  # a cubin runs on later minors of its major (L4 on sm_86)
    (("sm_75", "sm_80"), (7, 0), None),  # but not on an earlier minor (V100 on sm_75)
    (("sm_80", "sm_100"), (9, 0), None),  # nor on another major
    (("sm_80", "compute_80"), (9, 0), "compute_80"),  # PTX is JIT-compiled for any newer GPU
    (("sm_80", "compute_80"), (12, 0), "compute_80"),
    (("sm_75", "sm_80", "compute_100"), (9, 0), None),  # PTX newer than the GPU cannot run
    (("sm_90", "compute_90"), (9, 0), "sm_90"),  # a cubin is preferred to JIT
    (("sm_90a",), (9, 0), "sm_90a"),  # arch-specific: exactly 9.0
    (("sm_90a", "compute_90a"), (10, 0), None),
    (("sm_100f",), (10, 3), "sm_100f"),  # family-specific: later minors of the family
    (("compute_100f",), (12, 0), None),
    (("sm_37", "sm_50"), (3, 7), "sm_37"),
    (("bogus", "sm_9"), (9, 0), None),
])
def test_arch_rule(archs, capability, runs):
    assert arch_supports(archs, capability) == runs


def arch_env(fake_nvml, archs, cc="9.0", name="NVIDIA H100 80GB HBM3", **extra):
    return gpu_env(fake_nvml, **{"BUILDKIT_PY_EXPECT_GPUS": "1", "BUILDKIT_PY_CUDA_ARCHS": archs, "FAKE_NVML_CC": cc,
                                 "FAKE_NVML_NAME": name, **extra})


def test_arch_check_passes_on_a_gpu_the_build_has_kernels_for(fake_nvml):
    proc = launch(arch_env(fake_nvml, TORCH_291_CU128))
    assert proc.returncode == 0, proc.stderr
    assert "architecture sm_90 runs sm_90" in proc.stderr and proc.stdout == "trainer ran\n"


def test_arch_check_refuses_a_build_without_kernels_for_the_gpu(fake_nvml):
    proc = launch(arch_env(fake_nvml, "sm_75,sm_80,sm_86,sm_100,sm_120", FAKE_NVML_COUNT="2",
                           BUILDKIT_PY_EXPECT_GPUS="2"))
    assert proc.returncode == 14 and "trainer ran" not in proc.stdout
    assert ("error: GPU 0 (NVIDIA H100 80GB HBM3) is sm_90 (compute capability 9.0), but this image's framework build "
            "carries sm_75, sm_80, sm_86, sm_100, sm_120: no cubin sm_90 and no PTX of compute capability 9.0 or lower "
            "to JIT-compile") in proc.stderr


@pytest.mark.parametrize("cc, name, archs, code", [
    ("7.0", "Tesla V100-SXM2-16GB", TORCH_215, 14),  # torch 2.15 has no CUDA 12 build: no sm_70
    ("7.0", "Tesla V100-SXM2-16GB", TORCH_291_CU128, 0),
    ("8.9", "NVIDIA L4", TORCH_215, 0),
    ("12.0", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "sm_80,sm_90,compute_90", 0),
    ("6.0", "Tesla P100-PCIE-16GB", "sm_75,sm_80,compute_80", 14),
    ("8.6", "NVIDIA A10", "sm_87,sm_90,compute_90", 14),  # sm_87 does not run on 8.6: a cubin needs minor <= the GPU's
])
def test_arch_check_per_gpu(fake_nvml, cc, name, archs, code):
    proc = launch(arch_env(fake_nvml, archs, cc=cc, name=name))
    assert proc.returncode == code, proc.stderr
    if code:
        major, minor = cc.split(".")
        assert f"({name}) is sm_{major}{minor}" in proc.stderr
        cubins = f"sm_{major}0" if minor == "0" else f"sm_{major}0 to sm_{major}{minor}"
        assert f"no cubin {cubins} and no PTX of compute capability {cc} or lower" in proc.stderr, proc.stderr


def test_arch_check_reads_what_the_dockerfile_sets(fake_nvml):
    """The plan's launcher_env, as the rendered ENV sets it, on a V100."""
    from pathlib import Path as _Path

    from buildkit_py.config import Config, FrameworkRequest

    for version, accelerator, code in (("2.9.1", "NVIDIA_TESLA_V100", 0), ("2.15.0", None, 14)):
        plan = make_plan(Config(root=_Path("."), source="test", framework=FrameworkRequest("torch", version),
                                accelerator=accelerator))
        env = dict(plan.launcher_env)
        assert CUDA_ARCHS_ENV in env
        proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", FAKE_NVML_CC="7.0", FAKE_NVML_NAME="Tesla V100",
                              FAKE_NVML_DRIVER="580.126.20", FAKE_NVML_CUDA="13000", CUDA_VERSION=plan.cuda, **env),
                      check=True)
        assert proc.returncode == code, (version, proc.stderr)


def test_arch_check_takes_milliseconds(fake_nvml):
    proc = launch(arch_env(fake_nvml, TORCH_291_CU128), check=True)
    assert proc.returncode == 0, proc.stderr
    seconds = float(proc.stderr.split("checks passed in ")[1].split(" s")[0])
    assert seconds < 0.5  # the framework probe takes seconds (2.7 s with torch on an H100)


@pytest.mark.parametrize("value", ["sm_90;sm_80", "sm_٩0", "90", "sm_90,compute"])
def test_malformed_arch_list_is_a_usage_error(fake_nvml, value):
    proc = launch(arch_env(fake_nvml, value))
    assert proc.returncode == 21 and "BUILDKIT_PY_CUDA_ARCHS=" in proc.stderr and "Traceback" not in proc.stderr


def test_no_arch_list_means_no_arch_check(fake_nvml):
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", FAKE_NVML_CC="3.0"))
    assert proc.returncode == 0 and "architecture" not in proc.stderr


@pytest.mark.parametrize("shm, count, fragment", [
    ("/proc", "2", "/proc is 0 MiB; NCCL needs at least 1024 MiB"),  # a filesystem of no size: as small as it gets
    ("/nonexistent-shm", "2", "is not mounted"),
    ("/proc", "1", None),  # one GPU: NCCL needs no shared memory between GPUs
])
def test_small_shared_memory_warns_multi_gpu_jobs(fake_nvml, shm, count, fragment):
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS=count, FAKE_NVML_COUNT=count, BUILDKIT_PY_SHM_PATH=shm))
    assert proc.returncode == 0 and proc.stdout == "trainer ran\n", proc.stderr
    found = [w for w in warnings(proc) if "NCCL" in w]
    assert (fragment is None and not found) or (found and fragment in found[0]), proc.stderr

