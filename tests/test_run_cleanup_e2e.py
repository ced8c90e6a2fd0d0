"""A run the engine refuses leaves no container behind (the test engine has no GPU runtime)."""

from __future__ import annotations

import json
import subprocess

from conftest import run_cli

STANDIN = "buildkit-py/standin:bookworm"


def containers(testenv: dict[str, str]) -> set[str]:
    proc = subprocess.run([testenv["BUILDKIT_DOCKER"], "ps", "-aq", "--no-trunc"], capture_output=True, text=True,
                          env={"DOCKER_HOST": testenv["DOCKER_HOST"]}, check=True)
    return set(proc.stdout.split())


def mounts(testenv: dict[str, str], ids: set[str]) -> list[str]:
    if not ids:
        return []
    proc = subprocess.run([testenv["BUILDKIT_DOCKER"], "inspect", *ids], capture_output=True, text=True,
                          env={"DOCKER_HOST": testenv["DOCKER_HOST"]})
    return [m["Source"] for c in json.loads(proc.stdout or "[]") for m in c.get("Mounts", [])]


def test_run_with_gpus_on_an_engine_without_gpu_runtime_fails_and_leaves_no_container(testenv, tmp_path):
    before = containers(testenv)
    out = tmp_path / "out"
    for _ in range(2):  # every attempt: none left behind, not one per attempt
        proc = run_cli("run", STANDIN, "--gpus", "1", "--output", str(out), "--", "true", env=testenv)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        assert "the engine refused to run" in proc.stderr and "gpu" in proc.stderr.lower(), proc.stderr
    # Other sessions may share the engine: a container of this run is one that mounts this test's output directory.
    left = [m for m in mounts(testenv, containers(testenv) - before) if m.startswith(str(out))]
    assert left == []
