"""The daemonless backend: buildah builds the same Dockerfile (cache and secret mounts) with the same tags and
labels, pushes to the loopback registry, exports its layer cache there, and leaves no secret in the image."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from test_build_e2e import APPENDER, assert_compiled, docker

from buildkit_py.builders import BUILDERS, BuildahBuilder, BuildkitCliBuilder, LegacyBuilder, builder_class
from conftest import CA_BUNDLE, REPO, assert_secrets_absent, run_cli, secret_inputs


@pytest.fixture
def trainer(tmp_path) -> Path:
    root = tmp_path / "trainer"
    shutil.copytree(REPO / "examples" / "quickstart", root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def build(testenv, root: Path, *args) -> subprocess.CompletedProcess:
    # No DOCKER_HOST: buildah needs no engine.
    env = {k: v for k, v in testenv.items() if k != "DOCKER_HOST"}
    return run_cli("build", "--builder", "buildah", "--config", str(root / "buildkit.yaml"), "--network", "host",
                   "--progress", "plain", "--json", *args, env=env)


def buildah(*args: str) -> str:
    return subprocess.run(["buildah", *args], capture_output=True, text=True, check=True).stdout


def test_same_tags_labels_and_push_as_buildkit_and_no_secret_in_the_image(testenv, trainer, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    image = f"{registry}/e2e/buildah-{uuid.uuid4().hex[:8]}"
    secrets, pip_conf = secret_inputs(tmp_path, "Tok3n-" + "b0a1c2d3e4f5")
    (trainer / "buildkit.yaml").write_text((trainer / "buildkit.yaml").read_text() + 'pip: ["six==1.16.0"]\n')
    proc = build(testenv, trainer, "--image", image, "--tag", f"{image}:v1", "--push", "--no-cache",
                 "--ca-cert", CA_BUNDLE, "--pip-conf", str(pip_conf))
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    # The same content tag BuildKit would give: the same Dockerfile and files.
    expected = run_cli("print", "image-tag", "--config", str(trainer / "buildkit.yaml"), "--image", image,
                       "--pip-conf", str(pip_conf), env=testenv).stdout.strip()
    assert result["tags"] == [f"{image}:{expected}", f"{image}:v1"]
    pushed = result["pushed"][0]
    assert pushed["image"].startswith(f"{image}@sha256:") and pushed["digest"] == result["pushed"][1]["digest"]

    # The pushed image runs on the Docker engine, with buildkit-py's labels.
    docker(testenv, "pull", pushed["image"])
    inspect = json.loads(docker(testenv, "image", "inspect", pushed["image"]).stdout)[0]
    assert inspect["Config"]["Labels"]["dev.buildkit-py.content-digest"] == result["content_digest"]
    run = docker(testenv, "run", "--rm", "--network", "host", pushed["image"])
    assert "trained: w=" in run.stdout
    assert_compiled(testenv, pushed["image"], "six")

    # Checked as for BuildKit: logs, history, config and every file of every layer.
    history = docker(testenv, "history", "--no-trunc", pushed["image"]).stdout
    saved = tmp_path / "image.tar"
    docker(testenv, "save", "-o", str(saved), pushed["image"])
    assert_secrets_absent(secrets, (proc.stdout + proc.stderr, history, json.dumps(inspect)), saved)


def test_cache_is_pushed_and_every_layer_but_the_code_is_reused(testenv, trainer):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    image = f"{registry}/e2e/buildah-cache-{uuid.uuid4().hex[:8]}"
    cache = f"{image}-cache:buildcache"
    first = build(testenv, trainer, "--image", image, "--cache-ref", cache, "--push")
    assert first.returncode == 0, first.stderr[-4000:]
    listed = subprocess.run(["curl", "-s", "--noproxy", "*", f"http://{registry}/v2/{image.split('/', 1)[1]}-cache/tags/list"],
                            capture_output=True, text=True).stdout
    assert json.loads(listed)["tags"], "buildah pushed no cache layers"

    # buildah 1.28 (Debian 12) exports its layer cache to the registry but does not take layers from it into
    # an empty storage: what is proven here is the reuse of every layer but the code on the same runner.
    task = trainer / "trainer" / "task.py"
    task.write_text(task.read_text() + f"\n# a new commit {uuid.uuid4().hex}\n")
    second = build(testenv, trainer, "--image", image, "--cache-ref", cache)
    assert second.returncode == 0, second.stderr[-4000:]
    steps = re.split(r"\n(?:buildkit-py: )?STEP \d+/\d+: ", second.stderr)
    code = [s for s in steps if s.startswith("COPY . /app")]
    runs = [s for s in steps if s.startswith("RUN ")]
    assert len(code) == 1 and "Using cache" not in code[0]
    assert runs and all("Using cache" in s for s in runs), second.stderr[-4000:]


def test_backends_are_chosen_by_name_from_one_registry():
    from buildkit_py.builders import CloudBuildBuilder

    assert BUILDERS == ("auto", "buildkit", "legacy", "buildah", "cloudbuild")
    assert [builder_class(name) for name in BUILDERS] == [BuildkitCliBuilder, BuildkitCliBuilder, LegacyBuilder, BuildahBuilder,
                                                          CloudBuildBuilder]
    # The buildah backend renders the BuildKit Dockerfile (mounts): the content tag is the same for both.
    assert BuildahBuilder.supports_secrets and BuildkitCliBuilder.supports_secrets and not LegacyBuilder.supports_secrets


def test_missing_buildah_says_how_to_install_it(trainer, tmp_path):
    proc = run_cli("build", "--builder", "buildah", "--config", str(trainer / "buildkit.yaml"),
                   env={"PATH": str(tmp_path), "BUILDKIT_PY_BUILDAH": ""})
    assert proc.returncode == 5, proc.stderr
    assert "buildah" in proc.stderr and "apt-get install buildah" in proc.stderr and "Traceback" not in proc.stderr


def test_a_file_written_during_the_whole_build_ships_as_read_and_the_tag_names_those_bytes(testenv, trainer):
    log = trainer / "build.log"
    writer = subprocess.Popen([sys.executable, "-c", APPENDER, str(log)])
    try:
        while not log.exists() or log.stat().st_size < 1000:
            time.sleep(0.01)
        proc = build(testenv, trainer, "--image", f"buildkit-py/buildah-log-{uuid.uuid4().hex[:8]}")
    finally:
        writer.kill()
        writer.wait()
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    container = buildah("from", "--pull-never", result["tags"][0]).strip()
    try:
        shipped = (Path(buildah("mount", container).strip()) / "app/build.log").read_bytes()
    finally:
        buildah("rm", container)
    final = log.read_bytes()
    assert len(shipped) >= 1000 and final.startswith(shipped) and len(final) > len(shipped)
    labels = json.loads(buildah("inspect", "--type", "image", result["tags"][0]))["OCIv1"]["config"]["Labels"]
    assert labels["dev.buildkit-py.content-digest"] == result["content_digest"]
    log.write_bytes(shipped)
    printed = run_cli("print", "content-digest", "--builder", "buildah", "--config", str(trainer / "buildkit.yaml"),
                      env=testenv)
    assert printed.stdout.strip() == result["content_digest"], printed.stderr
