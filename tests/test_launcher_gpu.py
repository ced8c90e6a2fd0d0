"""The launcher's GPU checks against a stand-in NVML (tests/data/fake_nvml.c, built with gcc):
the same C interface as libnvidia-ml.so.1, with devices and versions set per test."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO

FAKE_SOURCE = REPO / "tests" / "data" / "fake_nvml.c"


@pytest.fixture(scope="session")
def fake_nvml(tmp_path_factory) -> str:
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "a C compiler is needed to build the stand-in NVML"
    out = tmp_path_factory.mktemp("nvml") / "libnvidia-ml.so.1"
    subprocess.run([gcc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(out), str(FAKE_SOURCE)], check=True)
    return str(out)


def launch(env: dict[str, str], *command: str, check: bool = False) -> subprocess.CompletedProcess:
    args = ["--check"] if check else ["--", *(command or ("python3", "-c", "print('trainer ran')"))]
    return subprocess.run(
        [sys.executable, "-m", "buildkit_py.launcher", *args],
        capture_output=True, text=True, env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), **env},
    )


def gpu_env(fake_nvml, **extra) -> dict[str, str]:
    return {"BUILDKIT_PY_NVML_LIBRARY": fake_nvml, "CUDA_VERSION": "12.4.1", **extra}


def test_success_prints_one_summary_and_runs_the_trainer(fake_nvml):
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="2", FAKE_NVML_COUNT="2"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "trainer ran\n"
    summary = proc.stderr.splitlines()[0]
    assert "2 GPU(s) visible (NVIDIA H100 80GB HBM3, 79.6 GiB each)" in summary
    assert "driver 550.54.15 (CUDA 12.4) >= image CUDA 12.4.1" in summary


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


def test_driver_too_old_names_the_driver_needed(fake_nvml):
    env = gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", CUDA_VERSION="12.8.1", BUILDKIT_PY_MIN_DRIVER="570.26",
                  FAKE_NVML_DRIVER="535.183.01", FAKE_NVML_CUDA="12020")
    proc = launch(env)
    assert proc.returncode == 13
    assert "driver 535.183.01 supports CUDA up to 12.2" in proc.stderr and "needs driver >= 570.26" in proc.stderr


def test_newer_driver_than_the_image_is_fine(fake_nvml):
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", CUDA_VERSION="11.8.0", FAKE_NVML_CUDA="13000"))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("visible, code, fragment", [
    ("void", 15, "hides every GPU"),
    ("none", 15, "hides every GPU"),
])
def test_nvidia_visible_devices_hiding_gpus(fake_nvml, visible, code, fragment):
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", NVIDIA_VISIBLE_DEVICES=visible))
    assert proc.returncode == code and fragment in proc.stderr


def test_cuda_visible_devices_narrows_and_must_exist(fake_nvml):
    narrowed = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="2", FAKE_NVML_COUNT="4", CUDA_VISIBLE_DEVICES="1"))
    assert narrowed.returncode == 12 and "but 1 are visible" in narrowed.stderr
    by_uuid = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", FAKE_NVML_COUNT="2",
                             CUDA_VISIBLE_DEVICES="GPU-00000000-0000-0000-0000-000000000001"))
    assert by_uuid.returncode == 0, by_uuid.stderr
    missing = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", FAKE_NVML_COUNT="2", CUDA_VISIBLE_DEVICES="0,5"))
    assert missing.returncode == 15 and "names '5'" in missing.stderr


def test_cudnn_declared_but_missing(fake_nvml):
    proc = launch(gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", NV_CUDNN_VERSION="9.1.0.70"))
    assert proc.returncode == 16 and "libcudnn.so.9 does not load" in proc.stderr


def test_framework_probe_reports_missing_arch(fake_nvml, tmp_path):
    # A torch module with the attributes the probe reads: built for sm_80/sm_90 only.
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "__version__ = '2.5.1+cu124'\n"
        "class version:\n    cuda = '12.4'\n"
        "class cuda:\n"
        "    is_available = staticmethod(lambda: True)\n"
        "    device_count = staticmethod(lambda: 1)\n"
        "    get_arch_list = staticmethod(lambda: ['sm_80', 'sm_90'])\n"
        "    get_device_capability = staticmethod(lambda i: (12, 0))\n"
        "    get_device_name = staticmethod(lambda i: 'NVIDIA RTX PRO 6000')\n"
    )
    env = gpu_env(fake_nvml, BUILDKIT_PY_EXPECT_GPUS="1", BUILDKIT_PY_PROBE="torch")
    proc = subprocess.run([sys.executable, "-m", "buildkit_py.launcher", "--check"], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "PYTHONPATH": f"{tmp_path}:{REPO}", **env})
    assert proc.returncode == 14 and "is sm_120, but torch 2.5.1+cu124 was built for sm_80, sm_90" in proc.stderr


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
    proc = launch({"CLUSTER_SPEC": "{oops"})
    assert proc.returncode == 20 and "CLUSTER_SPEC" in proc.stderr


def test_exit_code_and_signals_pass_to_the_trainer(tmp_path):
    assert launch({}, "python3", "-c", "raise SystemExit(3)").returncode == 3
    # Not PID 1: the launcher execs, so the trainer has the launcher's PID and gets SIGTERM itself.
    script = tmp_path / "trainer.py"
    script.write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('got SIGTERM', flush=True), sys.exit(42)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-m", "buildkit_py.launcher", "--", sys.executable, str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO)})
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert "got SIGTERM" in out and proc.returncode == 42


def test_supervisor_forwards_signals_and_returns_the_code(tmp_path):
    script = tmp_path / "trainer.py"
    script.write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('child got SIGTERM', flush=True), sys.exit(7)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    code = f"from buildkit_py.launcher.handoff import supervise; raise SystemExit(supervise([{sys.executable!r}, {str(script)!r}]))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO)})
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert "child got SIGTERM" in out and proc.returncode == 7
