"""The registry cache the CI files use, proven on real engines: build and push with --cache-ref, then on an
engine with no images and no build cache (a fresh dockerd, as a CI runner has) edit the code and rebuild from the
registry -> every layer but the code comes from the cache."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from test_build_e2e import docker

from conftest import REPO, run_cli

_STEP = re.compile(r"#(\d+) \[(?:[\w.-]+ )?\d+/\d+\] (.*)")


def steps(output: str) -> dict[str, bool]:
    """Each Dockerfile step of BuildKit's plain progress -> whether it came from the cache."""
    names, cached = {}, set()
    for line in output.splitlines():
        line = line.removeprefix("buildkit-py: ").strip()
        match = _STEP.fullmatch(line)
        if match:
            names[match[1]] = match[2]
        elif re.fullmatch(r"#\d+ CACHED", line):
            cached.add(line.split()[0][1:])
    return {name: number in cached for number, name in names.items()}


@pytest.fixture
def fresh_engine(testenv):
    """What a CI runner starts with: a Docker engine of its own with no images and no build cache but the base
    (which a runner pulls). A second engine, so the shared one keeps its images and cache for the other tests."""
    state = Path(tempfile.mkdtemp(prefix="bk-fresh-"))  # short: containerd's socket path must fit in 108 bytes
    sock, pidfile = state / "d.sock", state / "d.pid"
    log = open(state / "dockerd.log", "wb")
    proc = subprocess.Popen(["dockerd", "--data-root", str(state / "root"), "--exec-root", str(state / "exec"),
                             "-H", f"unix://{sock}", "--pidfile", str(pidfile), "--bridge=none", "--iptables=false",
                             "--ip-masq=false"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    env = {**testenv, "DOCKER_HOST": f"unix://{sock}"}
    try:
        for _ in range(300):
            if docker(env, "info", check=False).returncode == 0:
                break
            assert proc.poll() is None, (state / "dockerd.log").read_text()[-3000:]
            time.sleep(0.1)
        base = state / "base.tar"
        docker(testenv, "save", "-o", str(base), "python:3.11-slim-bookworm")
        docker(env, "load", "-i", str(base))
        yield env
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines() if str(state) in line]
        for mount in sorted(mounts, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)


def test_rebuild_on_an_empty_engine_takes_every_layer_but_the_code_from_the_registry(testenv, fresh_engine, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    name = f"cache-{uuid.uuid4().hex[:8]}"
    image, cache = f"{registry}/e2e/{name}", f"{registry}/e2e/{name}-cache:buildcache"
    root = tmp_path / "trainer"
    shutil.copytree(REPO / "examples" / "quickstart", root, ignore=shutil.ignore_patterns("__pycache__"))
    # A pip step of its own, so there is a real dependency layer to take from the cache.
    (root / "buildkit.yaml").write_text((root / "buildkit.yaml").read_text() + 'pip: ["six==1.16.0"]\n')
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]}

    def build(*extra, engine=env):
        started = time.monotonic()
        proc = run_cli("build", "--config", str(root / "buildkit.yaml"), "--image", image, "--cache-ref", cache,
                       "--network", "host", "--progress", "plain", "--json", *extra, env=engine)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return json.loads(proc.stdout), proc.stderr, time.monotonic() - started

    first, _, cold = build("--push", "--no-cache")
    listed = subprocess.run(["curl", "-s", "--noproxy", "*", f"http://{registry}/v2/e2e/{name}-cache/tags/list"],
                            capture_output=True, text=True, check=True).stdout
    tags = json.loads(listed)["tags"]
    assert tags == ["buildcache"]
    assert docker(fresh_engine, "images", "-q", image).stdout.strip() == ""

    task = root / "trainer" / "task.py"
    task.write_text(task.read_text() + f"\n# a new commit {uuid.uuid4().hex}\n")
    second, output, warm = build(engine={**fresh_engine, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]})
    assert second["built"] and second["tags"][0] != first["tags"][0]
    found = steps(output)
    code = [s for s in found if s.startswith("COPY . ")]
    assert len(code) == 1, found
    assert found[code[0]] is False, "the code step must run: the code changed"
    runs = [s for s in found if s.startswith("RUN ")]
    assert runs and all(found[s] for s in runs), found
    # Every step before the code's, but the base image (pulled, not built), is a cache hit from the registry.
    before = [s for s in found if not s.startswith("FROM ") and not steps_after(found, code[0], s) and s not in code]
    assert before and all(found[s] for s in before), found
    assert f"importing cache manifest from {cache}" in output and f"{cache}: not found" not in output
    print(f"registry cache: cold build + push {cold:.1f}s, rebuild on an empty engine from the registry {warm:.1f}s")

    run = docker(fresh_engine, "run", "--rm", "--network", "host", second["tags"][0])
    assert "trained: w=" in run.stdout


def steps_after(found: dict[str, bool], code: str, step: str) -> bool:
    """Steps after the code step depend on it: they run again too."""
    order = list(found)
    return order.index(step) > order.index(code)

