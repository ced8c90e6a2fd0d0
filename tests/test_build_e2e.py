"""End to end on a real Docker engine with BuildKit and real registries on loopback."""

from __future__ import annotations

import base64
import http.server
import importlib
import io
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import CA_BUNDLE, REPO, LoopbackServer, assert_secrets_absent, run_cli, secret_inputs

QUICKSTART = REPO / "examples" / "quickstart"
AUTH_USER, AUTH_PASSWORD = "tester", "s3cret-pass"


@pytest.fixture
def quickstart(tmp_path) -> Path:
    root = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def docker(testenv, *args, check=True) -> subprocess.CompletedProcess:
    return subprocess.run([testenv["BUILDKIT_DOCKER"], *args], capture_output=True, text=True, check=check,
                          env={"DOCKER_HOST": testenv["DOCKER_HOST"], "PATH": "/usr/bin:/bin"})


def assert_compiled(testenv, image: str, module: str) -> None:
    """MODULE, installed by an install step, has its .pyc in the image (the step's bytecode helper ran), and the
    helper, mounted for the step alone, is not left where the step saw it."""
    code = (f"import os, {module}; print(os.path.isfile({module}.__cached__), "
            "os.path.exists('/tmp/buildkit-py/bytecode.py'))")
    shown = docker(testenv, "run", "--rm", "--network", "none", "--entrypoint", "/opt/venv/bin/python", image, "-c", code)
    assert shown.stdout.split() == ["True", "False"], shown.stdout + shown.stderr


def quickstart_tags(testenv) -> list[str]:
    """The engine's buildkit-py/quickstart tags and the image each names, in an order of their own: the engine lists
    images by creation time, which an image the fast path appended shares with the image it was appended to."""
    return sorted(docker(testenv, "images", "--filter", "reference=buildkit-py/quickstart",
                         "--format", "{{.Repository}}:{{.Tag}} {{.ID}}").stdout.splitlines())


def build(testenv, root: Path, *args, env=None) -> subprocess.CompletedProcess:
    return run_cli("build", "--config", str(root / "buildkit.yaml"), "--network", "host", "--progress", "plain",
                   "--json", *args, env={**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], **(env or {})})


def layers(testenv, ref: str) -> list[str]:
    return json.loads(docker(testenv, "image", "inspect", ref).stdout)[0]["RootFS"]["Layers"]


def tempdirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("buildkit-py-*")}


def test_quickstart_builds_runs_pushes_and_pulls_back_by_digest(testenv, quickstart, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    proc = build(testenv, quickstart, "--tag", f"{registry}/e2e/quickstart:latest", "--push")
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    assert any(t.startswith(f"{registry}/e2e/quickstart:bk-") for t in result["tags"])
    pushed = result["pushed"][-1]
    assert pushed["image"].startswith(f"{registry}/e2e/quickstart@sha256:") and pushed["size"] > 0
    # Where the build's time went: the engine's build (none where the engine had the image), its push, the
    # attestations; none of them is the fast path's.
    assert list(result["stages"]) == ["build"] * result["built"] + ["push", "attest"]
    assert all(s > 0 for s in result["stages"].values())
    assert result["fast_path"] is None

    # The trainer runs as the ENTRYPOINT and reports its metric through cloudml-hypertune.
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    run = docker(testenv, "run", "--rm", "--network", "host", "-v", f"{metrics}:/tmp/hypertune", pushed["image"])
    assert "trained: w=" in run.stdout and "rmse=" in run.stdout
    line = json.loads((metrics / "output.metrics").read_text().splitlines()[-1])
    assert line["global_step"] == "300" and float(line["rmse"]) < 0.2

    # Pull back by digest from the registry: same image.
    docker(testenv, "rmi", pushed["image"], check=False)
    docker(testenv, "pull", pushed["image"])
    pulled = json.loads(docker(testenv, "image", "inspect", pushed["image"]).stdout)[0]["Id"]
    assert pulled == result["image_id"]
    tags = json.loads(subprocess.run(["curl", "-s", f"http://{registry}/v2/e2e/quickstart/tags/list"],
                                     capture_output=True, text=True).stdout)["tags"]
    assert "latest" in tags and any(t.startswith("bk-") for t in tags)

    # `buildkit-py push REF` pushes an existing local tag and prints the same digest.
    again = run_cli("push", f"{registry}/e2e/quickstart:latest", "--json", "--progress", "json", env=testenv)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["digest"] == pushed["digest"]
    events = [json.loads(line) for line in again.stderr.splitlines()]
    assert events[-1]["event"] == "message" and "pushed" in events[-1]["text"]

    # The config's env value reaches the container exactly.
    env = json.loads(docker(testenv, "image", "inspect", pushed["image"]).stdout)[0]["Config"]["Env"]
    assert "QUICKSTART_SEED=7" in env and "PYTHONPATH=/app" in env


def test_same_inputs_same_tag_and_no_rebuild_then_code_edit_rebuilds_only_the_code_layer(testenv, quickstart):
    # Content of its own: an image the engine kept from an earlier run may sit on lower layers built before a
    # cache prune, which the edited build below would not share.
    (quickstart / "run-id.txt").write_text(uuid.uuid4().hex)
    first = json.loads(build(testenv, quickstart).stdout)
    assert first["built"] is True
    again = build(testenv, quickstart)
    assert again.returncode == 0, again.stderr[-3000:]
    again = json.loads(again.stdout)
    assert again["tags"][0] == first["tags"][0] and again["built"] is False

    task = quickstart / "trainer" / "task.py"
    edit = f"edited {uuid.uuid4().hex[:8]}"  # unique: the engine keeps images between runs
    task.write_text(task.read_text().replace('print(f"trained:', f'print(f"trained ({edit}):'))
    edited = build(testenv, quickstart)
    assert edited.returncode == 0, edited.stderr[-3000:]
    edited = json.loads(edited.stdout)
    assert edited["built"] is True and edited["tags"][0] != first["tags"][0]
    before, after = layers(testenv, first["tags"][0]), layers(testenv, edited["tags"][0])
    assert len(before) == len(after)
    assert before[:-1] == after[:-1] and before[-1] != after[-1]
    run = docker(testenv, "run", "--rm", "--network", "host", edited["tags"][0])
    assert f"trained ({edit}):" in run.stdout


def test_auth_registry_refuses_a_wrong_password_and_accepts_the_right_one(testenv, quickstart):
    target = f"{testenv['BUILDKIT_TEST_AUTH_REGISTRY']}/e2e/private:v1"
    wrong = build(testenv, quickstart, "--tag", target, "--push",
                  env={"BUILDKIT_PY_REGISTRY_USERNAME": AUTH_USER, "BUILDKIT_PY_REGISTRY_PASSWORD": "wrong-pass"})
    assert wrong.returncode == 7
    assert "refused the credentials from $BUILDKIT_PY_REGISTRY_USERNAME" in wrong.stderr
    assert "wrong-pass" not in wrong.stderr + wrong.stdout
    right = build(testenv, quickstart, "--tag", target, "--push",
                  env={"BUILDKIT_PY_REGISTRY_USERNAME": AUTH_USER, "BUILDKIT_PY_REGISTRY_PASSWORD": AUTH_PASSWORD})
    assert right.returncode == 0, right.stderr[-3000:]
    assert json.loads(right.stdout)["pushed"][-1]["digest"].startswith("sha256:")
    assert AUTH_PASSWORD not in right.stderr + right.stdout


def test_secrets_never_reach_the_image_or_the_logs(testenv, quickstart, tmp_path):
    secrets, pip_conf = secret_inputs(tmp_path, "Tok3n-" + "9f8e7d6c5b4a")
    (quickstart / "buildkit.yaml").write_text((quickstart / "buildkit.yaml").read_text() + "pip: [\"six==1.16.0\"]\n")
    proc = build(testenv, quickstart, "--ca-cert", CA_BUNDLE, "--pip-conf", str(pip_conf),
                 "--no-cache")
    assert proc.returncode == 0, proc.stderr[-4000:]
    ref = json.loads(proc.stdout)["tags"][0]
    assert_compiled(testenv, ref, "six")
    history = docker(testenv, "history", "--no-trunc", ref).stdout
    config = docker(testenv, "image", "inspect", ref).stdout
    saved = tmp_path / "image.tar"
    docker(testenv, "save", "-o", str(saved), ref)
    assert_secrets_absent(secrets, (proc.stdout + proc.stderr, history, config), saved)


class _Index(http.server.BaseHTTPRequestHandler):
    """A package index on loopback with no packages: it records what is asked and with which credentials."""

    seen: list[tuple[str, str]] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.seen.append((self.path, self.headers.get("Authorization", "")))
        self.send_error(404)

    def log_message(self, *args):
        pass


def test_uv_reads_the_index_and_credentials_of_the_pip_conf(testenv, quickstart, tmp_path):
    """The build's installer gets the pip.conf's index as the uv.toml secret: its requests reach that
    index with the credentials (pip itself skips an http index it is not told to trust)."""
    server = LoopbackServer(("127.0.0.1", 0), _Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Index.seen = []
    try:
        pip_conf = tmp_path / "pip.conf"
        pip_conf.write_text(f"[global]\nextra-index-url = http://tester:Idx-{uuid.uuid4().hex[:8]}@127.0.0.1:"
                            f"{server.server_address[1]}/simple\n")
        (quickstart / "buildkit.yaml").write_text((quickstart / "buildkit.yaml").read_text() + "pip: [\"six==1.16.0\"]\n")
        proc = build(testenv, quickstart, "--ca-cert", CA_BUNDLE, "--pip-conf", str(pip_conf), "--no-cache")
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, proc.stderr[-4000:]
    token = pip_conf.read_text().split("tester:")[1].split("@")[0]
    auth = "Basic " + base64.b64encode(f"tester:{token}".encode()).decode()
    assert ("/simple/six/", auth) in _Index.seen, _Index.seen
    assert token not in proc.stdout + proc.stderr


def test_failed_build_leaves_no_tag_no_temp_dir_no_container(testenv, quickstart):
    (quickstart / "requirements.txt").write_text("this-package-does-not-exist-buildkit-py==0.0.1\n")
    (quickstart / "buildkit.yaml").write_text((quickstart / "buildkit.yaml").read_text() + "requirements: requirements.txt\n")
    before_dirs = tempdirs()
    before_images = quickstart_tags(testenv)
    proc = build(testenv, quickstart)
    assert proc.returncode == 6 and "the build failed" in proc.stderr
    assert "this-package-does-not-exist" in proc.stderr  # the failing step's output is shown, not swallowed
    assert quickstart_tags(testenv) == before_images
    assert tempdirs() == before_dirs
    assert docker(testenv, "ps", "-aq").stdout.strip() == ""


def test_secret_in_context_is_refused(testenv, quickstart):
    key = {"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n"}
    (quickstart / "sa-key.json").write_text(json.dumps(key))
    proc = build(testenv, quickstart)
    assert proc.returncode == 2 and "sa-key.json" in proc.stderr
    allowed = build(testenv, quickstart, "--allow-secret", "sa-key.json", "--tag", "buildkit-py/allowed:1")
    assert allowed.returncode == 0, allowed.stderr[-2000:]


def test_legacy_builder_builds_without_buildkit_features(testenv, quickstart):
    (quickstart / "buildkit.yaml").write_text((quickstart / "buildkit.yaml").read_text() + "hypertune: false\n")
    proc = build(testenv, quickstart, "--builder", "legacy", "--ca-cert", "/etc/ssl/certs/ca-certificates.crt")
    assert proc.returncode == 6 and "cannot pass secrets" in proc.stderr
    proc = run_cli("build", "--config", str(quickstart / "buildkit.yaml"), "--network", "host", "--builder", "legacy",
                   "--json", env={**testenv, "PIP_CERT": "", "REQUESTS_CA_BUNDLE": "", "SSL_CERT_FILE": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = docker(testenv, "run", "--rm", "--network", "host", json.loads(proc.stdout)["tags"][0])
    assert "trained: w=" in run.stdout


def test_engine_unreachable_is_one_clear_error(quickstart):
    proc = run_cli("build", "--config", str(quickstart / "buildkit.yaml"),
                   env={"DOCKER_HOST": "unix:///nonexistent/docker.sock", "BUILDKIT_PY_DOCKER": "/usr/bin/docker"})
    assert proc.returncode == 5
    assert "unix:///nonexistent/docker.sock" in proc.stderr and "Traceback" not in proc.stderr


def test_invalid_tag_quotes_the_rule(testenv, quickstart):
    proc = build(testenv, quickstart, "--tag", "127.0.0.1:5000/Bad/Name:v1")
    assert proc.returncode == 2 and "must be lowercase" in proc.stderr


def test_registry_down_is_retried_then_reported(testenv, quickstart):
    import io
    import os

    from buildkit_py.builders.engine_push import Retry, push
    from buildkit_py.clients.engine import engine_client
    from buildkit_py.errors import RegistryError
    from buildkit_py.oci.refs import parse_ref
    from buildkit_py.progress import Reporter

    ref = json.loads(build(testenv, quickstart).stdout)["tags"][0]
    down = parse_ref("127.0.0.1:5999/e2e/down:v1")
    docker(testenv, "tag", ref, str(down))
    stream = io.StringIO()
    old = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = testenv["DOCKER_HOST"]
    try:
        with pytest.raises(RegistryError) as err:
            push(down, Reporter(stream), client=engine_client(), providers=[], retry=Retry(attempts=3, backoff=0.05))
    finally:
        os.environ.pop("DOCKER_HOST") if old is None else os.environ.__setitem__("DOCKER_HOST", old)
    assert "after 3 attempt(s)" in str(err.value) and "connection refused" in str(err.value)
    assert stream.getvalue().count("retry") == 2


def test_ctrl_c_during_a_build_leaves_nothing_behind(testenv, quickstart):
    import os
    import signal
    import sys
    import time

    # A step that takes a while, so the interrupt lands mid-build: apt fetches from the archive (an
    # install from uv's warm cache can finish within the second).
    (quickstart / "buildkit.yaml").write_text((quickstart / "buildkit.yaml").read_text() + "system_packages: [curl]\n")
    before_dirs = tempdirs()
    before_images = quickstart_tags(testenv)
    env = {**os.environ, **testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "buildkit_py", "build", "--config", str(quickstart / "buildkit.yaml"), "--network", "host",
         "--progress", "plain", "--no-cache"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True,
    )
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "RUN" in line and "apt-get" in line:
            break
    time.sleep(1)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole foreground group
    rest = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, "".join(seen) + rest
    assert "interrupted" in rest
    assert quickstart_tags(testenv) == before_images
    assert tempdirs() == before_dirs
    assert docker(testenv, "ps", "-aq").stdout.strip() == ""


# A build log in the trainer directory (`buildkit-py build > build.log 2>&1`), written for the whole build.
APPENDER = """import sys, time
with open(sys.argv[1], "ab", buffering=0) as log:
    step = 0
    while True:
        log.write(b"step %d\\n" % step)
        step += 1
        time.sleep(0.002)
"""
BUILDERS = {  # the legacy builder passes no secrets, so it runs without a CA bundle and cloudml-hypertune
    "buildkit": ((), {}),
    "legacy": (("--builder", "legacy"), {"PIP_CERT": "", "REQUESTS_CA_BUNDLE": "", "SSL_CERT_FILE": ""}),
}


def file_in_image(testenv, image: str, path: str) -> bytes:
    return subprocess.run([testenv["BUILDKIT_DOCKER"], "run", "--rm", "--network", "none", "--entrypoint", "cat", image,
                           path], capture_output=True, check=True, env={"DOCKER_HOST": testenv["DOCKER_HOST"]}).stdout


@pytest.mark.parametrize("backend", BUILDERS)
def test_a_file_written_during_the_whole_build_ships_as_read_and_the_tag_names_those_bytes(testenv, quickstart, backend):
    flags, env = BUILDERS[backend]
    if backend == "legacy":
        (quickstart / "buildkit.yaml").write_text((quickstart / "buildkit.yaml").read_text() + "hypertune: false\n")
    log = quickstart / "build.log"
    writer = subprocess.Popen([sys.executable, "-c", APPENDER, str(log)])
    try:
        while not log.exists() or log.stat().st_size < 1000:  # writing before the build starts
            time.sleep(0.01)
        proc = build(testenv, quickstart, *flags, env=env)
    finally:
        writer.kill()
        writer.wait()
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    shipped, final = file_in_image(testenv, result["tags"][0], "/app/build.log"), log.read_bytes()
    assert len(shipped) >= 1000 and final.startswith(shipped) and len(final) > len(shipped)  # it grew after the read
    labels = json.loads(docker(testenv, "image", "inspect", result["tags"][0]).stdout)[0]["Config"]["Labels"]
    assert labels["dev.buildkit-py.content-digest"] == result["content_digest"]
    assert result["tags"][0].endswith(f":bk-{result['content_digest'][:16]}")
    # The digest is that of the bytes in the image: with the log holding just them, a fresh hash gives it again.
    log.write_bytes(shipped)
    printed = run_cli("print", "content-digest", "--config", str(quickstart / "buildkit.yaml"), *flags,
                      env={**testenv, **env})
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.strip() == result["content_digest"]


@pytest.mark.parametrize("size", ["small", "large"])
def test_a_file_deleted_between_listing_and_reading_is_left_out_with_a_note(testenv, quickstart, monkeypatch, size):
    """In-process, so that the deletion lands exactly between the listing and the staging of each file. A small file
    was read whole when it was listed (each input is read once per command): it ships as read. A file over
    fsutil.KEPT_FILE_BYTES is read where it is staged: deleted by then, it is left out with a note."""
    from buildkit_py import api
    from buildkit_py.fsutil import KEPT_FILE_BYTES
    from buildkit_py.pipeline import fastbuild

    build_module = importlib.import_module("buildkit_py.pipeline.build")  # bk.build is the API's call of that name
    from buildkit_py.progress import Reporter

    for key, value in testenv.items():
        monkeypatch.setenv(key, value)
    (quickstart / "notes.txt").write_text("to be deleted" if size == "small" else "n" * (KEPT_FILE_BYTES + 1))
    (quickstart / "kept.txt").write_text(uuid.uuid4().hex)  # unique: the engine keeps images between runs
    real = fastbuild.staged

    def delete_then_stage(listing):
        assert "notes.txt" in [rel for rel, _, _ in listing.sources]
        (quickstart / "notes.txt").unlink()
        return real(listing)

    monkeypatch.setattr(fastbuild, "staged", delete_then_stage)
    project = api.Project(config=quickstart / "buildkit.yaml", overrides=(("network", "host"),))
    log = io.StringIO()
    result = api.build(project, api.BuildOptions(docker=testenv["BUILDKIT_DOCKER"]), progress=Reporter(log))
    assert result.built
    listed = docker(testenv, "run", "--rm", "--network", "none", "--entrypoint", "ls", result.tags[0], "/app").stdout
    labels = json.loads(docker(testenv, "image", "inspect", result.tags[0]).stdout)[0]["Config"]["Labels"]
    assert labels["dev.buildkit-py.content-digest"] == result.content_digest
    config = api.load(project)
    now = build_module.planned_refs(build_module.make_recipe(config, build_module.prepare(config)))[1]
    if size == "small":  # the bytes the listing read: in the image, and in the tag, which no longer names the directory
        assert "kept.txt" in listed.split() and "notes.txt" in listed.split()
        assert "was deleted" not in log.getvalue() and now != result.content_digest
        return
    assert "buildkit-py: note: notes.txt was deleted while the build context was read: left out" in log.getvalue()
    assert "kept.txt" in listed.split() and "notes.txt" not in listed.split()
    # What the tag names is the context without the file, as a fresh hash of the directory now says.
    assert now == result.content_digest
