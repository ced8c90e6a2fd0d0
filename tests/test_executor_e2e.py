"""Executor images on the real engine: an image with the framework, hypertune and the launcher but no trainer,
running a packaged trainer the way Vertex AI runs a PythonPackageSpec. Also the catalog of Google's prebuilt
training images and the run command's checks (no engine needed for those)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_build_e2e import docker

from conftest import REPO, run_cli

QUICKSTART = REPO / "examples" / "quickstart"
REPOSITORY = "127.0.0.1:5000/bkpy-executor/e2e"
PROBE = "import os, sys\nprint('probe PYTHONPATH=' + os.environ.get('PYTHONPATH', ''), sys.argv[1:], flush=True)\n"


def cli_env(testenv) -> dict:
    return {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]}


def executor_build(testenv, root: Path):
    proc = run_cli("executor", "build", "--config", str(root / "buildkit.yaml"), "--image", REPOSITORY,
                   "--network", "host", "--progress", "plain", "--json", env=cli_env(testenv))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def package(root: Path, out: Path) -> dict:
    proc = run_cli("package", str(root), "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("executor") / "quickstart"
    shutil.copytree(QUICKSTART, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture(scope="module")
def executor(testenv, quickstart) -> dict:
    return executor_build(testenv, quickstart)


def test_packaged_quickstart_runs_on_the_executor_with_args_and_reports_its_metric(testenv, quickstart, executor,
                                                                                 tmp_path):
    image = executor["tags"][0]
    config = json.loads(docker(testenv, "image", "inspect", image).stdout)[0]["Config"]
    assert config["Entrypoint"] == ["python", "-m", "buildkit_launcher", "--"] and not config["Cmd"]
    listing = docker(testenv, "run", "--rm", "--network", "none", "--entrypoint", "python", image, "-c",
                     "import os, hypertune, buildkit_launcher; print(sorted(os.listdir('/app')))")
    assert listing.stdout.strip() == "[]", "an executor image holds no trainer code"

    sdist = package(quickstart, tmp_path / "dist")
    out = tmp_path / "out"
    proc = run_cli("run", "--config", str(quickstart / "buildkit.yaml"), "--executor", image, "--package", sdist["path"],
                   "--module", "trainer.task", "--output", str(out), "--json", "--", "--epochs", "40", env=testenv)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    assert result["metrics"][-1]["global_step"] == "40" and float(result["metrics"][-1]["rmse"]) < 1.0
    assert json.loads((out / "model" / "model.json").read_text())["w"] > 1.0
    assert "installed /buildkit-py/packages/0/quickstart-0.0.0.tar.gz" in proc.stderr

    # A one-line code edit: a new sdist (new digest), the same executor image, nothing built.
    task = quickstart / "trainer" / "task.py"
    task.write_text(task.read_text().replace('print(f"trained: ', 'print(f"trained (edited): '))
    edited = package(quickstart, tmp_path / "dist")
    assert edited["sha256"] != sdist["sha256"]
    again = executor_build(testenv, quickstart)
    assert again["built"] is False and again["image_id"] == executor["image_id"]
    proc = run_cli("run", "--config", str(quickstart / "buildkit.yaml"), "--executor", image, "--package",
                   edited["path"], "--output", str(tmp_path / "out2"), "--", "--epochs", "5", env=testenv)
    assert proc.returncode == 0 and "trained (edited): " in proc.stderr, proc.stderr[-4000:]


def test_gs_uri_through_the_gcs_mount_and_an_unfetchable_one(testenv, quickstart, executor, tmp_path):
    image = executor["tags"][0]
    sdist = package(quickstart, tmp_path / "dist")
    mounted = tmp_path / "gcs" / "bkpy-bucket" / "pkgs"
    mounted.mkdir(parents=True)
    shutil.copy(sdist["path"], mounted)
    ca = Path(testenv.get("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt"))
    proc = docker(testenv, "run", "--rm", "--network", "host", "-v", f"{tmp_path / 'gcs'}:/gcs:ro",
                  "-v", f"{ca}:/run/secrets/buildkit-ca:ro", "-e", "PIP_CERT=/run/secrets/buildkit-ca",
                  "-e", "BUILDKIT_PY_PACKAGE_URIS=gs://bkpy-bucket/pkgs/quickstart-0.0.0.tar.gz",
                  "-e", "BUILDKIT_PY_PYTHON_MODULE=trainer.task", image, "--epochs", "7", check=False)
    assert proc.returncode == 0 and "trained" in proc.stdout and "rmse=" in proc.stdout, proc.stderr[-3000:]

    proc = run_cli("run", "--config", str(quickstart / "buildkit.yaml"), "--executor", image, "--package",
                   "gs://bkpy-no-such-bucket/pkgs/quickstart-0.0.0.tar.gz", "--output", str(tmp_path / "out"), env=testenv)
    assert proc.returncode == 30, proc.stderr[-3000:]
    assert "cannot fetch gs://bkpy-no-such-bucket/pkgs/quickstart-0.0.0.tar.gz" in proc.stderr
    assert "google-cloud-storage is not installed" in proc.stderr


def test_a_catalog_executor_runs_with_the_launcher_mounted(testenv, executor, tmp_path):
    # Google's image cannot be pulled here: our executor stands in under its name. The run mounts the
    # launcher and makes it the entrypoint, since Google's images do not ship it.
    google = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest"
    root = tmp_path / "probe"
    (root / "probe").mkdir(parents=True)
    (root / "probe" / "__init__.py").write_text("")
    (root / "probe" / "main.py").write_text(PROBE)
    (root / "buildkit.yaml").write_text("hypertune: false\ntrainer: {module: probe.main}\n")
    sdist = package(root, tmp_path / "dist")
    docker(testenv, "tag", executor["tags"][0], google)
    try:
        proc = run_cli("run", "--dir", str(root), "--executor", "torch==2.4", "--no-gpu", "--region", "us-central1",
                       "--package", sdist["path"], "--output", str(tmp_path / "out"), "--", "x", env=testenv)
    finally:
        docker(testenv, "rmi", google, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "probe PYTHONPATH=/opt/buildkit-py ['x']" in proc.stderr


@pytest.mark.parametrize("argv, fragment, field", [
    (["--executor", "torch==9.9", "--package", str(REPO / "README.md")], "has no prebuilt training image; known: torch 2.4",
     "--executor"),
    (["--executor", "img:1"], "needs at least one --package", "--package"),
    (["--package", "x.tar.gz"], "needs --executor", "--package"),
    (["img:1", "--executor", "img:2", "--package", "x.tar.gz"], "not both", "--executor"),
    (["--executor", "img:1", "--package", "/nonexistent/x.tar.gz"], "is not a file", "--package[0]"),
    (["--executor", "img:1", "--package", "a.tar.gz,b.tar.gz"], "commas", "--package[0]"),
    (["--executor", "Bad Image", "--package", str(REPO / "README.md")], "", "--executor"),
    (["--executor", "torch==2.4", "--region", "Europe West", "--package", str(REPO / "README.md")], "region",
     "--region"),
])
def test_run_with_an_executor_checks_its_input_before_the_engine(tmp_path, argv, fragment, field):
    proc = run_cli("run", "--config", str(QUICKSTART / "buildkit.yaml"), *argv,
                   env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert proc.returncode == 2, proc.stderr
    assert fragment in proc.stderr and field in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_the_catalog_picks_the_regional_image():
    proc = run_cli("executor", "list", "torch", "--region", "europe-west4", "--json")
    assert proc.returncode == 0, proc.stderr
    found = {(e["version"], e["gpu"]): e["uri"] for e in json.loads(proc.stdout)}
    assert found[("2.4", True)] == "europe-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"
    assert found[("2.4", False)] == "europe-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest"
    proc = run_cli("executor", "list", "sklearn", "--region", "southamerica-east1", "--json")
    assert {e["uri"].split("/")[0] for e in json.loads(proc.stdout)} == {"us-docker.pkg.dev"}
    proc = run_cli("executor", "list", "jax")
    assert proc.returncode == 2 and "known: torch" in proc.stderr
