"""No secret reaches an image, a log or a message: credentials in a pip entry's URL go to the build as a secret (a
real build on the engine, a loopback server that wants them), endpoints and lock indexes with credentials are masked or
refused unquoted, and a file given to --from-aiplatform is parsed, never echoed."""

from __future__ import annotations

import base64
import http.server
import json
import shutil
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
from test_lock import main, root, write_lock  # noqa: F401 - root is the lock tests' trainer fixture
from test_lock_e2e import make_wheel

from conftest import REPO, LoopbackServer, assert_secrets_absent, run_cli

QUICKSTART = REPO / "examples" / "quickstart"


class _Private:
    """A file server on loopback that answers only with the right Basic credentials, recording what it was sent."""

    def __init__(self, directory: Path, login: str, password: str):
        expected = "Basic " + base64.b64encode(f"{login}:{password}".encode()).decode()
        self.seen: list[tuple[str, bool]] = []
        seen = self.seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_HEAD(self):  # noqa: N802 (uv asks whether a wheel can be read by ranges)
                self.do_GET(body=False)

            def do_GET(self, body: bool = True):  # noqa: N802 (http.server's name)
                authorised = self.headers.get("Authorization") == expected
                seen.append((self.path, authorised))
                target = directory / self.path.lstrip("/")
                if not authorised:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="private"')
                    self.end_headers()
                    return
                if not target.is_file():
                    self.send_error(404)
                    return
                data = target.read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = LoopbackServer(("127.0.0.1", 0), Handler)
        self.url = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def docker(testenv, *args) -> str:
    return subprocess.run([testenv["BUILDKIT_DOCKER"], *args], capture_output=True, text=True, check=True,
                          env={"DOCKER_HOST": testenv["DOCKER_HOST"], "PATH": "/usr/bin:/bin"}).stdout


def test_a_pip_url_with_credentials_installs_and_its_token_is_nowhere_in_the_image(testenv, tmp_path):
    token = "Tok-" + uuid.uuid4().hex[:12]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = make_wheel(wheels, "bkprivate", "1.0")
    server = _Private(wheels, "bob", token)
    trainer = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, trainer, ignore=shutil.ignore_patterns("__pycache__"))
    entry = f"bkprivate @ http://bob:{token}@{server.url}/{wheel.name}"
    (trainer / "buildkit.yaml").write_text((trainer / "buildkit.yaml").read_text() + f"pip: [{json.dumps(entry)}]\n")
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]}
    build = ("build", "--dir", str(trainer), "--network", "host", "--progress", "plain", "--json", "--no-cache")
    try:
        # The config file itself holds the token: copied with the trainer's files, it would be in the code layer.
        kept = run_cli(*build, env=env)
        (trainer / ".dockerignore").write_text("buildkit.yaml\n")
        dockerfile = run_cli("dockerfile", "--dir", str(trainer))
        plan = run_cli("resolve", "--dir", str(trainer), "--json")
        proc = run_cli(*build, env=env)
    finally:
        server.close()
    assert kept.returncode == 2 and "buildkit.yaml  (requirement URL with credentials)" in kept.stderr, kept.stderr
    assert token not in kept.stdout + kept.stderr
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (f"/{wheel.name}", True) in server.seen, server.seen  # the build sent the credentials: it installed
    assert dockerfile.returncode == 0 and "buildkit-netrc" in dockerfile.stdout, dockerfile.stderr
    assert f"bkprivate @ http://{server.url}/{wheel.name}" in dockerfile.stdout  # the line names the host only
    ref = json.loads(proc.stdout)["tags"][0]
    ran = docker(testenv, "run", "--rm", "--entrypoint", "python", ref, "-c", "import bkprivate; print(bkprivate.VERSION)")
    assert ran.strip() == "1.0"
    saved = tmp_path / "image.tar"
    docker(testenv, "save", "-o", str(saved), ref)
    assert_secrets_absent((token,), (dockerfile.stdout, plan.stdout + plan.stderr, proc.stdout + proc.stderr,
                                     docker(testenv, "history", "--no-trunc", ref),
                                     docker(testenv, "image", "inspect", ref)), saved)


def test_credentials_in_a_copied_requirements_file_exit_2_naming_the_line_not_the_token(project):
    trainer = project({"trainer/__init__.py": "", "trainer/task.py": "",
                    "requirements.txt": "six\n--extra-index-url https://u:Sekrit-77@example.com/simple\n",
                    "buildkit.yaml": "trainer: {module: trainer.task}\nrequirements: requirements.txt\n"})
    proc = run_cli("dockerfile", "--dir", str(trainer))
    assert proc.returncode == 2 and "requirements.txt:2" in proc.stderr and "pip_conf" in proc.stderr, proc.stderr
    assert "Sekrit-77" not in proc.stdout + proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_two_logins_for_one_host_exit_2_without_showing_either(project):
    trainer = project({"trainer/__init__.py": "", "trainer/task.py": "",
                    "buildkit.yaml": "trainer: {module: trainer.task}\npip: ['a @ https://u:Pw-one@h.example/a.whl', "
                                     "'b @ https://u:Pw-two@h.example/b.whl']\n"})
    proc = run_cli("dockerfile", "--dir", str(trainer))
    assert proc.returncode == 2 and "h.example" in proc.stderr, proc.stderr
    assert "Pw-one" not in proc.stderr and "Pw-two" not in proc.stderr


@pytest.mark.parametrize("command", [
    ("submit", "--dry-run", "--image", "us-docker.pkg.dev/proj-123/r/i:1", "--project", "proj-123", "--api-endpoint"),
    ("build", "--builder", "cloudbuild", "--cloudbuild-endpoint"),
])
@pytest.mark.parametrize("endpoint", ["https://user:Hunter2-pw@example.com", "https://user:Hunter@2-pw@example.com/x",
                                      "https://Hunter2-pw@example.com", "http://user:Hunter2-pw@127.0.0.1:1"])
def test_an_endpoint_with_credentials_is_refused_with_the_password_masked(command, endpoint):
    proc = run_cli(*command, endpoint, "--dir", str(QUICKSTART))
    assert proc.returncode == 2, proc.stderr
    assert "Hunter" not in proc.stderr and "2-pw" not in proc.stderr, proc.stderr
    assert "endpoint" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("index", ["https://u:Lock-Sekrit@a.example/simple", "https://Lock-Sekrit@a.example/simple",
                                   "https://u:Lock@Sekrit@a.example/simple", "https://u:Lock Sekrit@a.example/simple"])
def test_a_hand_edited_lock_index_with_credentials_is_refused_unquoted(root, capsys, index):  # noqa: F811
    path = write_lock(root, lambda t: t.replace("http://127.0.0.1:1/simple", json.dumps(index)))
    code, out, err = main(capsys, "dockerfile", "--dir", str(root))
    assert code == 2 and "buildkit.lock:" in err and "index" in err, err
    assert "Lock" not in err.replace("buildkit.lock", "") and "Sekrit" not in err, err
    assert path.read_text().count("Sekrit") == 1  # refused, not rewritten


def test_a_file_that_is_not_an_ai_platform_config_is_refused_in_one_line_never_echoed(tmp_path):
    shadow = tmp_path / "shadow"
    shadow.write_text("root:$6$Shadow-Hash-Value:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n")
    yaml_file = tmp_path / "other.yaml"
    yaml_file.write_text("Private-Key-Name: 1\nsecrets: [a, b]\n")
    lines = tmp_path / "lines.txt"
    lines.write_text("Private line one\nPrivate line two\n")
    for path in (shadow, yaml_file, lines):
        for command in (("job", "--image", "us-docker.pkg.dev/proj-123/r/i:1"), ("autopackage", "--dry-run")):
            where = ("--dir", str(QUICKSTART)) if command[0] == "job" else (str(QUICKSTART),)
            proc = run_cli(*command, *where, "--from-aiplatform", str(path))
            assert proc.returncode == 2, (command, path, proc.stderr)
            assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
            for secret in ("Shadow-Hash", "daemon", "Private", "secrets"):
                assert secret not in proc.stdout + proc.stderr, proc.stderr


def test_lock_resolves_a_pip_url_with_its_credentials_and_never_shows_them(testenv, tmp_path):
    """`lock` hands uv the URL without the credentials and the netrc beside it, as the build does. (A lock of a
    requirement by URL is refused after the resolve, credentials or not: the lock holds pins of an index.)"""
    import yaml
    from test_lock_e2e import cli, push_base

    token = "Tok-" + uuid.uuid4().hex[:12]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = make_wheel(wheels, "bkprivate", "1.0")
    server = _Private(wheels, "bob", token)
    base = push_base(testenv, f"{testenv['BUILDKIT_TEST_REGISTRY']}/nosecrets/base:{uuid.uuid4().hex[:8]}", "nosecrets")
    trainer = tmp_path / "app"
    (trainer / "trainer").mkdir(parents=True)
    (trainer / "trainer" / "task.py").write_text("import bkprivate\n")
    (trainer / "buildkit.yaml").write_text(yaml.safe_dump({
        "framework": "none", "python": "3.11", "base_image": base, "hypertune": False,
        "pip": [f"bkprivate @ http://bob:{token}@{server.url}/{wheel.name}"], "trainer": {"module": "trainer.task"}}))
    try:
        locked = cli(testenv, "lock", "--dir", str(trainer))
    finally:
        server.close()
    assert (f"/{wheel.name}", True) in server.seen, server.seen  # uv sent the credentials
    assert token not in locked.stdout + locked.stderr and "Traceback" not in locked.stderr, locked.stderr
    assert not (trainer / "buildkit.lock").exists() or token not in (trainer / "buildkit.lock").read_text()


@pytest.mark.parametrize("builder, said, code", [("cloudbuild", "Secret Manager", 2), ("legacy", "buildkit-netrc", 6)])
def test_a_builder_that_cannot_take_the_netrc_secret_refuses_before_anything_is_sent(tmp_path, builder, said, code):
    trainer = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, trainer, ignore=shutil.ignore_patterns("__pycache__"))
    (trainer / "buildkit.yaml").write_text((trainer / "buildkit.yaml").read_text()
                                           + "pip: ['p @ https://bob:Build-Sekrit@h.example/p.whl']\n")
    (trainer / ".dockerignore").write_text("buildkit.yaml\n")
    proc = run_cli("build", "--dir", str(trainer), "--builder", builder,
                   env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "GOOGLE_CLOUD_PROJECT": "proj-123"})
    assert proc.returncode == code and said in proc.stderr, proc.stderr  # legacy: as for its other secrets
    assert "Build-Sekrit" not in proc.stdout + proc.stderr


def test_an_inferred_requirement_with_credentials_is_masked_in_the_stages_and_the_json(project):
    trainer = project({"trainer/__init__.py": "", "trainer/task.py": "import six\n",
                       "setup.py": "from setuptools import setup\nsetup(name='t', version='1', packages=['trainer'])\n",
                       "requirements.txt": "six @ https://bob:Ap-Sekrit@h.example/six-1.16.0-py2.py3-none-any.whl\n-e .\n",
                       ".dockerignore": "requirements.txt\n"})
    for extra in ((), ("--json",)):
        proc = run_cli("autopackage", str(trainer), "--dry-run", *extra)
        assert proc.returncode == 0, proc.stderr
        assert "Ap-Sekrit" not in proc.stdout + proc.stderr
        assert "six @ https://bob:***@h.example" in proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["plan"]["pip"] == ["six @ https://h.example/six-1.16.0-py2.py3-none-any.whl"] and out["plan"]["pip_credentials"]


@pytest.mark.parametrize("argv, fragment", [
    (["verify", "user:PASSWORD@host/a/b:1"], "'user:***@host/a/b:1'"),
    (["verify", "ghp_PASSWORD@ghcr.io/org/image:1"], "'***@ghcr.io/org/image:1'"),
    (["verify", "--json", "u:PASSWORD@127.0.0.1:5000/img:1"], "u:***@127.0.0.1:5000/img:1"),
])
def test_a_credential_inside_an_image_reference_is_never_echoed(argv, fragment):
    proc = run_cli(*argv)
    assert proc.returncode == 2 and "PASSWORD" not in proc.stdout + proc.stderr
    assert fragment in proc.stdout + proc.stderr and "Traceback" not in proc.stderr


def test_a_job_config_image_with_a_credential_is_refused_masked(tmp_path):
    (tmp_path / "job.yaml").write_text("workerPoolSpecs:\n  - machineSpec: {machineType: n1-standard-8}\n"
                                       "    replicaCount: 1\n    containerSpec: {imageUri: 'user:PASSWORD@gcr.io/p/i:1'}\n")
    proc = run_cli("job", "--dir", str(tmp_path), "--job-config", str(tmp_path / "job.yaml"))
    assert proc.returncode == 2 and "PASSWORD" not in proc.stdout + proc.stderr
    assert "user:***@gcr.io/p/i:1" in proc.stderr


@pytest.mark.parametrize("text", ["git@github.com:org/repo.git", "torch@https://x.example/t.whl",
                                  "trainer@proj.iam.gserviceaccount.com", "localhost:5000/x@sha256:ab", "a@b",
                                  "_base@linux/amd64, trainer@linux/arm64/v8"])
def test_what_is_no_reference_credential_is_left_as_it_is(text):
    from buildkit_py.errors import mask_credentials

    assert mask_credentials(text) == text


def test_a_secret_in_the_jobs_environment_gets_a_note_naming_secret_manager(tmp_path):
    token = "ghp_" + "a1" * 18
    (tmp_path / "buildkit.yaml").write_text(
        "framework: none\ntrainer: {module: trainer.task}\njob:\n  image: us-central1-docker.pkg.dev/p/r/t:v1\n"
        f"  env: {{GH: {token}, DB_PASSWORD: hunter2, INDEX: 'https://u:pw@h.example/simple', TOKEN_FILE: /run/t, "
        "API_KEY: projects/p/secrets/k/versions/1, NUM_TOKEN_LIMIT: '5', EPOCHS: '3'}\n")
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "task.py").write_text("")
    proc = run_cli("job", "--dir", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    noted = sorted(line.split(":")[1].strip().removeprefix("env ") for line in proc.stderr.splitlines()
                   if line.startswith("note: env "))
    assert noted == ["DB_PASSWORD", "GH", "INDEX"]
    assert "looks like a GitHub token" in proc.stderr and "Secret Manager" in proc.stderr
    assert token not in proc.stderr and "hunter2" not in proc.stderr
    env = json.loads(proc.stdout)["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"]
    assert {"name": "GH", "value": token} in env  # the value still goes where the user put it
