"""A TensorFlow 1.15 CPU image is built on Python 3.7 (issue 28) on the real engine: python:3.7-slim-bookworm is the
testenv's stand-in with this machine's CPython 3.7, the wheels (tensorflow 1.15.5, protobuf) stand-ins on a loopback
index. uv, the venv, the import check and the launcher (PID 1 of the container: the supervisor) all run on 3.7."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml
from test_build_e2e import docker
from test_lock_e2e import cli, make_wheel

from conftest import CA_BUNDLE

PY37 = "python:3.7-slim-bookworm"


def test_a_tensorflow_1_15_cpu_image_builds_on_python_3_7_and_runs_its_trainer(testenv, index, tmp_path):
    if docker(testenv, "image", "inspect", PY37, check=False).returncode != 0:
        pytest.skip(f"no CPython 3.7 on this machine, so scripts/testenv.sh made no {PY37} stand-in")
    make_wheel(index.directory, "tensorflow", "1.15.5", module_text="VERSION = '1.15.5'\n")
    make_wheel(index.directory, "protobuf", "3.19.6", module_text="")
    root = tmp_path / "tf1"
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text(
        "import os, sys\nimport tensorflow as tf\n"
        "print('tf', tf.VERSION, '%d.%d' % sys.version_info[:2], 'pid', os.getppid())\n")
    (root / "pip.conf").write_text(f"[global]\nextra-index-url = {index.url}\n")
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
