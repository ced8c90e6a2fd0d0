"""Images of old releases on the real engine (issue 28), the wheels stand-ins on a loopback index: a TensorFlow 1.15
CPU image on Python 3.7 (python:3.7-slim-bookworm is the testenv's stand-in with this machine's CPython 3.7: uv, the
venv, the import check and the PID-1 launcher all run on 3.7), and NVIDIA's TensorFlow 1.15 build for GPUs."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml
from test_build_e2e import docker
from test_lock_e2e import cli, make_wheel

from conftest import CA_BUNDLE

PY37 = "python:3.7-slim-bookworm"


def trainer(root, index, task: str):
    """trainer/task.py of `task`, and a pip.conf adding the loopback index."""
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text(task)
    (root / "pip.conf").write_text(f"[global]\nextra-index-url = {index.url}\n")
    return root


def test_a_tensorflow_1_15_cpu_image_builds_on_python_3_7_and_runs_its_trainer(testenv, index, tmp_path):
    if docker(testenv, "image", "inspect", PY37, check=False).returncode != 0:
        pytest.skip(f"no CPython 3.7 on this machine, so scripts/testenv.sh made no {PY37} stand-in")
    make_wheel(index.directory, "tensorflow", "1.15.5", module_text="VERSION = '1.15.5'\n")
    make_wheel(index.directory, "protobuf", "3.19.6", module_text="")
    root = trainer(tmp_path / "tf1", index, "import os, sys\nimport tensorflow as tf\n"
                   "print('tf', tf.VERSION, '%d.%d' % sys.version_info[:2], 'pid', os.getppid())\n")
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/py37-e2e/tf1-{uuid.uuid4().hex[:8]}"
    (root / "buildkit.yaml").write_text(yaml.safe_dump({
        "framework": "tensorflow==1.15.5", "gpu": False, "hypertune": False, "trainer": {"module": "trainer.task"},
        "pip_conf": "pip.conf"}))
    built = cli(testenv, "build", "--config", str(root / "buildkit.yaml"), "--image", image, "--network", "host",
                "--progress", "plain", "--json", "--ca-cert", CA_BUNDLE)
    assert built.returncode == 0, built.stderr[-4000:]
    result = json.loads(built.stdout)
    plan, ref = result["plan"], result["tags"][0]
    assert (plan["base_image"], plan["python"]["version"]) == (PY37, "3.7"), plan
    assert plan["framework"]["requirement"] == "tensorflow==1.15.5" and "protobuf<3.20" in plan["pip"]
    ran = docker(testenv, "run", "--rm", "--network", "none", ref)
    # The trainer runs in a child of the launcher, which is PID 1 of the container (the supervisor).
    assert ran.stdout.strip().splitlines()[-1] == "tf 1.15.5 3.7 pid 1", ran.stdout + ran.stderr


PY38 = "buildkit-py/standin:python3.8"  # scripts/testenv.sh: the stand-in with this machine's CPython 3.8


def test_nvidias_tensorflow_1_15_installs_in_place_of_the_trainers_tensorflow_gpu_line(testenv, index, tmp_path):
    """A TensorFlow 1.15 GPU image on the engine: NVIDIA's build (a stand-in cp38 linux_x86_64 wheel, its index a
    loopback mirror through framework_index_url) is the framework; the trainer's `tensorflow-gpu==1.15.5` line, which
    only Google's cp37 wheels serve, is overridden away in the image's install; the import check and the trainer import
    NVIDIA's tensorflow. The base is a Python 3.8 stand-in (no nvidia/cuda 12.1 Ubuntu 20.04 base here)."""
    from test_resolution import _platform_wheel

    if docker(testenv, "image", "inspect", PY38, check=False).returncode != 0:
        pytest.skip(f"no CPython 3.8 on this machine, so scripts/testenv.sh made no {PY38} stand-in")
    _platform_wheel(index.directory, "nvidia_tensorflow", "1.15.5+nv23.3", "cp38-cp38-linux_x86_64", "tensorflow")
    make_wheel(index.directory, "bkpin", "1.0")
    root = trainer(tmp_path / "tf1gpu", index, "import importlib.metadata as m, sys\nimport tensorflow as tf, bkpin\n"
                   "print('tf', tf.__version__, m.version('nvidia-tensorflow'), bkpin.VERSION, '%d.%d' % sys.version_info[:2])\n")
    (root / "requirements.txt").write_text("tensorflow-gpu==1.15.5\nbkpin==1.0\n")
    (root / "buildkit.yaml").write_text(yaml.safe_dump({
        "framework": "tensorflow==1.15.5", "gpu": True, "cuda": "12.1", "base_image": PY38, "hypertune": False,
        "framework_index_url": index.url, "requirements": "requirements.txt", "pip_conf": "pip.conf",
        "trainer": {"module": "trainer.task"}}))
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/py38-e2e/tf1gpu-{uuid.uuid4().hex[:8]}"
    built = cli(testenv, "build", "--config", str(root / "buildkit.yaml"), "--image", image, "--network", "host",
                "--progress", "plain", "--json", "--ca-cert", CA_BUNDLE)
    assert built.returncode == 0, built.stderr[-4000:]
    result = json.loads(built.stdout)
    assert result["plan"]["framework"]["requirement"] == "nvidia-tensorflow==1.15.5+nv23.3"
    assert result["plan"]["framework"]["index_url"] == index.url
    ran = docker(testenv, "run", "--rm", "--network", "none", "-e", "BUILDKIT_PY_EXPECT_GPUS=0", result["tags"][0])
    assert ran.stdout.strip().splitlines()[-1] == "tf 1.15.5 1.15.5+nv23.3 1.0 3.8", ran.stdout + ran.stderr
