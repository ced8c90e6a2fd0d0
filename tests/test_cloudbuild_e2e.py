"""--builder cloudbuild end to end, with no engine on this machine: context -> upload (loopback storage) -> Cloud Build
(a loopback stand-in that parses every request with the official types and really builds on the test engine) ->
push (loopback registry) -> digest; secrets only from the stand-in's Secret Manager."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from cloudbuild_loopback import CloudBuildStandIn, service_disabled
from gcs_loopback import GcsServer
from google.cloud.devtools import cloudbuild_v1
from test_build_e2e import docker
from vertex_loopback import FakeVertex, new_key_file

from conftest import CA_BUNDLE, REPO, assert_secrets_absent, run_cli, secret_inputs

PROJECT = "fake-project"
BUCKET = f"{PROJECT}_cloudbuild"
CA_VERSION = f"projects/{PROJECT}/secrets/ca/versions/1"
PIP_VERSION = f"projects/{PROJECT}/secrets/pip-conf/versions/latest"


def proxy_ca() -> bytes:
    """The TLS-intercepting proxy's CA, the last certificate of the machine's bundle (a Secret Manager value holds
    at most 64 KiB: a company CA, not a whole system bundle)."""
    text = Path(CA_BUNDLE).read_text()
    return text[text.rindex("-----BEGIN CERTIFICATE-----"):].encode()


@pytest.fixture
def cloud(testenv, tmp_path):
    """Token endpoint (the Vertex fake), storage and Cloud Build stand-ins, and the CLI's environment: no engine."""
    secrets, pip_conf = secret_inputs(tmp_path, "Tok3n-" + uuid.uuid4().hex[:12])
    with FakeVertex() as vertex, GcsServer({BUCKET}) as gcs:
        key, vertex.public_key = new_key_file(tmp_path, f"{vertex.url}/token")
        standin = CloudBuildStandIn(gcs, {"DOCKER_HOST": testenv["DOCKER_HOST"]}, vertex.tokens,
                                    {CA_VERSION: proxy_ca(), PIP_VERSION: pip_conf.read_bytes()})
        with standin:
            env = {**{k: v for k, v in testenv.items() if k != "DOCKER_HOST"},
                   "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "GOOGLE_APPLICATION_CREDENTIALS": str(key),
                   "STORAGE_EMULATOR_HOST": gcs.url, "BUILDKIT_PY_CLOUDBUILD_ENDPOINT": standin.url,
                   "BUILDKIT_PY_API_ENDPOINT": vertex.url}
            yield {"standin": standin, "gcs": gcs, "vertex": vertex, "env": env, "secrets": secrets}


@pytest.fixture
def trainer(tmp_path) -> Path:
    root = tmp_path / "trainer"
    shutil.copytree(REPO / "examples" / "quickstart", root, ignore=shutil.ignore_patterns("__pycache__"))
    with open(root / "buildkit.yaml", "a") as handle:
        handle.write(f"builder: cloudbuild\nnetwork: host\ncloudbuild:\n  project: {PROJECT}\n"
                     f"  ca_cert_secret: {CA_VERSION}\n  pip_conf_secret: {PIP_VERSION}\n")
    return root


def build(cloud, root: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli("build", "--config", str(root / "buildkit.yaml"), "--progress", "plain", "--json", *args,
                   env=cloud["env"])


def test_builds_on_cloud_build_pushes_and_reports_the_digest_with_no_engine_here(testenv, cloud, trainer, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    image = f"{registry}/e2e/cloudbuild-{uuid.uuid4().hex[:8]}"
    proc = build(cloud, trainer, "--image", image, "--tag", f"{image}:v1", "--push")
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    standin, gcs = cloud["standin"], cloud["gcs"]

    # The request: parsed by the official types, BuildKit, the repository's registry cache, Secret Manager by name.
    (body,) = standin.bodies
    parsed = cloudbuild_v1.Build.from_json(json.dumps(body))
    step = parsed.steps[0]
    assert "DOCKER_BUILDKIT=1" in step.env and f"--cache-from {image}:buildcache" in step.args[1]
    assert {s.version_name for s in parsed.available_secrets.secret_manager} == {CA_VERSION, PIP_VERSION}
    assert list(parsed.images) == [*result["tags"], f"{image}:buildcache"]
    # The context went up once, named by its digest.
    (context,) = [name for (bucket, name) in gcs.objects if name.startswith("buildkit-py/contexts/")]
    assert context == body["source"]["storageSource"]["object"] and context.endswith(".tar.gz")

    # The digest the build reports is the registry's, and the build's answer parses as a Build.
    (built,) = standin.builds.values()
    assert cloudbuild_v1.Build.from_json(json.dumps(built)).status == cloudbuild_v1.Build.Status.SUCCESS
    digest = built["results"]["images"][0]["digest"]
    assert [p["digest"] for p in result["pushed"]] == [digest, digest]
    assert result["pushed"][0]["image"] == f"{image}@{digest}"
    printed = run_cli("print", "digest", "--config", str(trainer / "buildkit.yaml"), "--image", image, env=cloud["env"])
    assert printed.stdout.strip() == f"{image}@{digest}", printed.stderr
    assert "Cloud Build" in proc.stderr and "Step #0" in proc.stderr, "status and log lines stream as progress"
    assert proc.stderr.count("FETCHSOURCE") == proc.stderr.count("\nDONE\n") == 1, "each log line once"

    # The image runs; no secret in the request, the logs, the output or any layer.
    docker(testenv, "pull", result["pushed"][0]["image"])
    run = docker(testenv, "run", "--rm", "--network", "host", result["pushed"][0]["image"])
    assert "trained: w=" in run.stdout
    saved = tmp_path / "image.tar"
    docker(testenv, "save", "-o", str(saved), result["pushed"][0]["image"])
    logs = b"".join(v for (b, n), v in gcs.objects.items() if "logs" in n).decode()
    assert_secrets_absent(cloud["secrets"], (json.dumps(standin.bodies), logs, proc.stdout + proc.stderr), saved)

    # Unchanged: the content tag is in the registry, so nothing is uploaded or built.
    uploads = gcs.uploads
    again = build(cloud, trainer, "--image", image, "--push")
    assert again.returncode == 0, again.stderr[-4000:]
    assert len(standin.bodies) == 1 and gcs.uploads == uploads
    assert json.loads(again.stdout)["built"] is False
    assert json.loads(again.stdout)["pushed"][0]["digest"] == digest


def test_a_failed_build_names_the_step_and_its_last_lines(testenv, cloud, trainer):
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/e2e/cloudbuild-fail-{uuid.uuid4().hex[:8]}"
    with open(trainer / "buildkit.yaml", "a") as handle:
        handle.write('pip: ["buildkit-py-no-such-package-zz==1.0"]\n')
    proc = build(cloud, trainer, "--image", image, "--push")
    assert proc.returncode != 0
    assert "FAILURE" in proc.stderr and "buildkit-py-no-such-package-zz" in proc.stderr.splitlines()[-1] + proc.stderr
    assert "Traceback" not in proc.stderr


def test_api_errors_are_one_line_naming_what_to_enable(testenv, cloud, trainer):
    cloud["standin"].refuse[PROJECT] = service_disabled(PROJECT)
    proc = build(cloud, trainer, "--image", f"{testenv['BUILDKIT_TEST_REGISTRY']}/e2e/cloudbuild-off", "--push")
    assert proc.returncode == 10, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "Cloud Build refused" in ln]
    assert "gcloud services enable cloudbuild.googleapis.com --project fake-project" in line


def test_bad_settings_exit_2_before_anything_is_uploaded(testenv, cloud, trainer):
    proc = build(cloud, trainer, "--image", f"{testenv['BUILDKIT_TEST_REGISTRY']}/e2e/x", "--cloudbuild-bucket", "No_Caps")
    assert proc.returncode == 2 and "--cloudbuild-bucket" in proc.stderr
    # A loopback registry is refused when the build runs on Google's side.
    env = {**cloud["env"], "BUILDKIT_PY_CLOUDBUILD_ENDPOINT": "https://cloudbuild.googleapis.com"}
    proc = run_cli("build", "--config", str(trainer / "buildkit.yaml"), "--image", "127.0.0.1:5000/x", env=env)
    assert proc.returncode == 2 and "Cloud Build cannot push to 127.0.0.1:5000" in proc.stderr
    assert cloud["gcs"].uploads == 0 and not cloud["standin"].bodies


def slow(trainer: Path) -> None:
    """A step that takes a minute (new text each run: never cached)."""
    (trainer / "Dockerfile.j2").write_text("{% extends base_template %}{% block labels %}{{ super() }}\n"
                                           f"RUN sleep 60 # {uuid.uuid4().hex}\n{{% endblock %}}")
    with open(trainer / "buildkit.yaml", "a") as handle:
        handle.write("template: Dockerfile.j2\n")


@pytest.mark.parametrize("variants, answer_delay", [(0, 0.0), (0, 6.0), (2, 0.0)],
                         ids=["one", "while-created", "all-variants"])
def test_ctrl_c_cancels_every_build(testenv, cloud, trainer, variants, answer_delay):
    """while-created: the Ctrl-C comes while the create request waits for its answer, the build already running."""
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/e2e/cloudbuild-cancel-{uuid.uuid4().hex[:8]}"
    slow(trainer)
    cloud["standin"].answer_delay = answer_delay
    if variants:
        with open(trainer / "buildkit.yaml", "a") as handle:
            handle.write("variants:\n" + "".join(f"  - {{name: v{i}}}\n" for i in range(variants)))
    env = {"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"], "HOME": str(REPO / ".testenv"), **cloud["env"]}
    proc = subprocess.Popen([sys.executable, "-m", "buildkit_py", "build", "--config", str(trainer / "buildkit.yaml"),
                             "--image", image, "--progress", "plain", *(["--all-variants"] if variants else [])],
                            env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while sum(b["status"] == "WORKING" for b in cloud["standin"].builds.values()) < max(variants, 1):
        assert time.monotonic() < deadline and proc.poll() is None, "the builds did not start"
        time.sleep(0.2)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and time.monotonic() - started < 30
    builds = cloud["standin"].builds
    assert sorted(cloud["standin"].cancelled) == sorted(builds) and len(builds) == max(variants, 1)
    assert all(b["status"] == "CANCELLED" for b in builds.values())
    assert all(f"Cloud Build {build_id} cancelled" in err for build_id in builds)


def test_all_variants_start_at_once_and_one_failure_hides_no_other(testenv, cloud, trainer):
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/e2e/cloudbuild-variants-{uuid.uuid4().hex[:8]}"
    with open(trainer / "buildkit.yaml", "a") as handle:
        handle.write('variants:\n  - {name: good}\n  - {name: bad, pip: ["buildkit-py-no-such-package-zz==1.0"]}\n')
    proc = build(cloud, trainer, "--all-variants", "--image", image, "--push")
    assert proc.returncode != 0
    builds = sorted(cloud["standin"].builds.values(), key=lambda b: b["createTime"])
    assert len(builds) == 2
    assert builds[1]["createTime"] < builds[0]["finishTime"], "the second build started before the first ended"
    assert {b["status"] for b in builds} == {"SUCCESS", "FAILURE"}
    good = next(b for b in builds if b["status"] == "SUCCESS")["results"]["images"][0]["digest"]
    assert f"variant good: built {image}@{good}" in proc.stderr
    assert "variant bad: failed: the build failed" in proc.stderr
    assert "[good] " in proc.stderr and "[bad] " in proc.stderr, "each variant's progress carries its name"


def test_autopackage_builds_on_cloud_build_and_submits_with_no_engine_nor_buildah(testenv, cloud, tmp_path):
    trainer = tmp_path / "quick"
    shutil.copytree(REPO / "examples" / "quickstart", trainer, ignore=shutil.ignore_patterns("__pycache__", "*.yaml"))
    tools = tmp_path / "bin"  # this machine's PATH without docker or buildah: git only
    tools.mkdir()
    (tools / "git").symlink_to(shutil.which("git"))
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/e2e/cloudbuild-autopkg-{uuid.uuid4().hex[:8]}"
    proc = run_cli("autopackage", str(trainer), "--builder", "cloudbuild", "--network", "host", "--image", image,
                   "--cloudbuild-ca-cert-secret", CA_VERSION, "--project", PROJECT, "--target", "loopback", "--wait",
                   "--poll", "0.01", "--json", env={**cloud["env"], "PATH": str(tools)})
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    (built,) = cloud["standin"].builds.values()
    digest = built["results"]["images"][0]["digest"]
    (job,) = cloud["vertex"].bodies
    # context -> upload -> Cloud Build -> push -> digest -> the job pinned to it
    assert job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"] == f"{out['image']}@{digest}"
    assert out["submitted"]["state"] == "JOB_STATE_SUCCEEDED"


def test_executor_build_on_cloud_build_with_json_progress(testenv, cloud, trainer):
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/e2e/cloudbuild-executor-{uuid.uuid4().hex[:8]}"
    proc = run_cli("executor", "build", "--config", str(trainer / "buildkit.yaml"), "--image", image, "--push",
                   "--progress", "json", "--json", env=cloud["env"])
    assert proc.returncode == 0, proc.stderr[-4000:]
    events = [json.loads(line) for line in proc.stderr.splitlines()]
    assert any(e["event"] == "build" and e["line"].startswith("Step #0") for e in events)
    assert any(e["event"] == "message" and e["text"].endswith(": SUCCESS") for e in events)
    (built,) = cloud["standin"].builds.values()
    assert json.loads(proc.stdout)["pushed"][0]["digest"] == built["results"]["images"][0]["digest"]


def test_a_build_past_its_timeout_is_stopped_and_reported(testenv, cloud, trainer):
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/e2e/cloudbuild-timeout-{uuid.uuid4().hex[:8]}"
    slow(trainer)  # a step that takes longer than the build may
    started = time.monotonic()
    proc = build(cloud, trainer, "--image", image, "--cloudbuild-timeout", "3s")
    assert time.monotonic() - started < 50, "the build was stopped at its timeout"
    assert proc.returncode != 0
    (built,) = cloud["standin"].builds.values()
    assert built["timeout"] == "3s" and built["status"] == "TIMEOUT"
    assert "the build failed (Cloud Build" in proc.stderr and "TIMEOUT" in proc.stderr


@pytest.mark.parametrize("refusal, hint", [
    ((403, {"error": {"code": 403, "status": "PERMISSION_DENIED", "message": "The caller does not have permission"}}),
     "(roles/cloudbuild.builds.editor) on project fake-project"),
    ((429, {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded for quota metric "
                      "'Concurrent builds'"}}), "Cloud Build quota exhausted in fake-project"),
], ids=["permission", "quota"])
def test_refusals_are_one_line_naming_what_to_grant(testenv, cloud, trainer, refusal, hint):
    cloud["standin"].refuse[PROJECT] = refusal
    proc = build(cloud, trainer, "--image", f"{testenv['BUILDKIT_TEST_REGISTRY']}/e2e/cloudbuild-refused", "--push")
    assert proc.returncode == 10, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "Cloud Build refused" in ln]
    assert hint in line and "Vertex" not in line and "Traceback" not in proc.stderr
