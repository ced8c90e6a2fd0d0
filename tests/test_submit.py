"""plan, submit, cancel against a loopback server that behaves like the Vertex AI API (tests/vertex_loopback.py):
tokens come from google-auth through a service-account key file whose token_uri points at it; images are
checked against the real loopback registries (one with htpasswd auth)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import requests
from google.cloud import aiplatform_v1
from vertex_loopback import new_key_file, status

from buildkit_py import cli
from buildkit_py.errors import ServiceError
from buildkit_py.jobs import pipeline as jobs_pipeline
from buildkit_py.jobs import submit as jobs_submit
from buildkit_py.launcher.constants import EXPECT_GPUS_ENV
from conftest import REPO, socket_closed

REGISTRY = os.environ.get("BUILDKIT_TEST_REGISTRY", "127.0.0.1:5000")
AUTH_REGISTRY = os.environ.get("BUILDKIT_TEST_AUTH_REGISTRY", "127.0.0.1:5001")
AUTH = ("tester", "s3cret-pass")  # scripts/testenv.sh
REPO_NAME = "vertex-submit-test/trainer"
CONFIG = """\
framework: torch==2.5.1
accelerator: NVIDIA_TESLA_T4
trainer: {module: trainer.task}
job:
  project: fake-project
  region: us-central1
  labels: {team: ml}
"""


def push_image(registry: str, repo: str, tag: str, arch: str = "amd64", auth=None) -> str:
    """A minimal image (a config blob, no layers) pushed through the registry's HTTP API; its digest."""
    base = f"http://{registry}/v2/{repo}"
    config = json.dumps({"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": []},
                         "config": {"Labels": {"test": tag}}}).encode()
    digest = "sha256:" + hashlib.sha256(config).hexdigest()
    upload = requests.post(f"{base}/blobs/uploads/", auth=auth, timeout=30)
    upload.raise_for_status()
    location = upload.headers["Location"]
    location = location if location.startswith("http") else f"http://{registry}{location}"
    requests.put(location, params={"digest": digest}, data=config, auth=auth, timeout=30).raise_for_status()
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": len(config),
                           "digest": digest}, "layers": []}
    answer = requests.put(f"{base}/manifests/{tag}", data=json.dumps(manifest), auth=auth, timeout=30,
                          headers={"Content-Type": manifest["mediaType"]})
    answer.raise_for_status()
    return answer.headers["Docker-Content-Digest"]


@pytest.fixture(scope="module")
def images():
    try:
        return {"amd64": push_image(REGISTRY, REPO_NAME, "amd64"), "arm64": push_image(REGISTRY, REPO_NAME, "arm64", "arm64"),
                "auth": push_image(AUTH_REGISTRY, REPO_NAME, "amd64", auth=AUTH)}
    except requests.RequestException as exc:
        pytest.fail(f"the loopback registries are not up (scripts/testenv.sh up): {exc}")


@pytest.fixture
def trainer(project):
    return project({"buildkit.yaml": CONFIG, "trainer/__init__.py": "", "trainer/task.py": "print('hi')\n"})


def main(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def image(tag: str = "amd64", registry: str = REGISTRY) -> str:
    return f"{registry}/{REPO_NAME}:{tag}"


def submit_args(trainer, *extra: str) -> list[str]:
    return ["submit", "--dir", str(trainer), "--target", "loopback", "--image", image(), "--poll", "0.01", *extra]


def test_submit_waits_through_the_states_with_a_token_from_the_key_files_token_uri(fake, images, trainer, capsys):
    code, out, err = main(capsys, *submit_args(trainer, "--wait"))
    assert code == 0, err
    assert [line.split()[1] for line in out.splitlines() if line.startswith("state ")] == [
        "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"]
    (name,) = fake.jobs
    assert f"name    {name}" in out
    assert "console https://console.cloud.google.com/agent-platform/locations/us-central1/training/1000?project=fake-project" \
        in out
    assert fake.tokens, "google-auth fetched no token from the key file's token_uri"
    assert ("POST", "/v1/projects/fake-project/locations/us-central1/customJobs") in fake.calls
    body = fake.bodies[0]
    job = aiplatform_v1.CustomJob.from_json(json.dumps(body))  # strict: unknown fields would fail
    container = job.job_spec.worker_pool_specs[0].container_spec
    assert container.image_uri == f"{image()}@{images['amd64']}"  # pinned to the digest the registry gave
    assert {e.name: e.value for e in container.env}[EXPECT_GPUS_ENV] == "1"
    assert job.labels["image-sha256"] == images["amd64"].removeprefix("sha256:")[:63]
    assert len(job.labels[jobs_submit.REQUEST_LABEL]) == 32


def test_a_failed_job_exits_1_with_its_error(fake, images, trainer, capsys):
    fake.states = ("JOB_STATE_PENDING", "JOB_STATE_FAILED")
    code, out, err = main(capsys, *submit_args(trainer, "--wait", "--json"))
    assert code == 1
    assert json.loads(out)["state"] == "JOB_STATE_FAILED"
    assert "exited with a non-zero status of 1" in err
    assert "state JOB_STATE_FAILED" in err  # with --json, the changes go to stderr


def test_a_create_whose_answer_is_lost_is_found_by_its_request_id_not_sent_twice(fake, images, trainer, capsys):
    fake.refuse = ["drop"]
    code, out, err = main(capsys, *submit_args(trainer, "--json"))
    assert code == 0, err
    assert len(fake.jobs) == 1
    listed = [c for c in fake.calls if c == ("GET", "/v1/projects/fake-project/locations/us-central1/customJobs")]
    assert listed, "the request id was not looked up before the retry"
    assert [c[0] for c in fake.calls].count("POST") == 1
    assert json.loads(out)["name"] in fake.jobs


def test_capacity_refusals_try_the_fallbacks_in_order(fake, images, project, capsys):
    root = project({"buildkit.yaml": CONFIG + """\
fallbacks:
  - {accelerator_type: NVIDIA_L4, region: europe-west4}
  - {strategy: SPOT}
""", "trainer/__init__.py": "", "trainer/task.py": ""})
    quota = status(429, "RESOURCE_EXHAUSTED", "The following quota metrics exceed quota limits: "
                   "aiplatform.googleapis.com/custom_model_training_nvidia_t4_gpus",
                   {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{"subject": "project:fake-project", "description": "T4 GPUs in us-central1: 0"}]})
    stockout = status(400, "FAILED_PRECONDITION", "The zone does not have enough resources available to fulfill the "
                      "request. Try a different zone, or try again later.")
    fake.refuse = [quota, stockout]
    code, out, err = main(capsys, *submit_args(root))
    assert code == 0, err
    assert [b["jobSpec"]["workerPoolSpecs"][0]["machineSpec"].get("acceleratorType") for b in fake.bodies] == [
        "NVIDIA_TESLA_T4", "NVIDIA_L4", "NVIDIA_TESLA_T4"]
    assert fake.bodies[1]["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machineType"] == "g2-standard-4"
    assert fake.bodies[2]["jobSpec"]["scheduling"]["strategy"] == "SPOT"
    assert [p for m, p in fake.calls if m == "POST"][1] == "/v1/projects/fake-project/locations/europe-west4/customJobs"
    assert sum(line.startswith("refused ") for line in out.splitlines()) == 2 and "T4 GPUs in us-central1: 0" in out


@pytest.mark.parametrize("answer, expected", [
    (status(403, "PERMISSION_DENIED", "Permission 'aiplatform.customJobs.create' denied on resource "
            "'//aiplatform.googleapis.com/projects/fake-project/locations/us-central1' (or it may not exist).",
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "IAM_PERMISSION_DENIED",
             "domain": "aiplatform.googleapis.com", "metadata": {"permission": "aiplatform.customJobs.create"}}),
     ["403 PERMISSION_DENIED", "reason IAM_PERMISSION_DENIED (permission=aiplatform.customJobs.create)",
      "roles/aiplatform.user"]),
    (status(400, "INVALID_ARGUMENT", "List of found errors:\t1.Field: job_spec.worker_pool_specs[0].machine_spec; "
            "Message: Machine type is not supported.",
            {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [
                {"field": "job_spec.worker_pool_specs[0].machine_spec", "description": "Machine type is not supported."}]}),
     ["400 INVALID_ARGUMENT", "field job_spec.worker_pool_specs[0].machine_spec: Machine type is not supported.", "\\t"]),
    (status(429, "RESOURCE_EXHAUSTED", "Quota exceeded for aiplatform.googleapis.com/custom_model_training_cpus"),
     ["429 RESOURCE_EXHAUSTED", "fallbacks"]),
])
def test_google_errors_are_one_line_with_their_own_exit_code(fake, images, trainer, capsys, answer, expected):
    fake.refuse = [answer]
    code, out, err = main(capsys, *submit_args(trainer))
    assert code == 10
    assert len(err.strip().splitlines()) == 1, err
    for fragment in expected:
        assert fragment in err
    assert not fake.jobs


def test_an_unreachable_api_has_its_own_exit_code(fake, images, trainer, capsys, monkeypatch):
    with socket_closed() as url:
        monkeypatch.setenv(jobs_submit.ENDPOINT_ENV, url)
        code, out, err = main(capsys, *submit_args(trainer))
    assert code == 10
    assert "cannot reach the Vertex AI API" in err and "Traceback" not in err


def test_a_refused_token_is_one_line(fake, images, trainer, capsys, tmp_path):
    (tmp_path / "other").mkdir()
    _, other_public = new_key_file(tmp_path / "other", f"{fake.url}/token")
    fake.public_key = other_public  # the token endpoint verifies with another key than the one that signs
    code, out, err = main(capsys, *submit_args(trainer))
    assert code == 10
    assert "could not get an access token" in err and "invalid_grant" in err
    assert len(err.strip().splitlines()) == 1
    assert not fake.bodies


def test_cancel_by_name(fake, images, trainer, capsys):
    code, out, _ = main(capsys, *submit_args(trainer, "--json"))
    name = json.loads(out)["name"]
    code, out, err = main(capsys, "cancel", name)
    assert code == 0, err
    assert out.strip() == f"cancel requested for {name}: now JOB_STATE_CANCELLED"
    assert ("POST", f"/v1/{name}:cancel") in fake.calls
    code, out, err = main(capsys, "cancel", "1000", "--project", "fake-project", "--region", "us-central1", "--json")
    assert code == 0 and json.loads(out) == {"name": name, "state": "JOB_STATE_CANCELLED"}


def interrupt_while_following(fake, args: list[str]) -> tuple[str, str]:
    """Run `buildkit-py ARGS` until the fake has the resource, then Ctrl-C it: (its name, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "buildkit_py", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not fake.jobs and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    (name,) = fake.jobs
    assert proc.returncode == 130, err
    return name, err


def test_ctrl_c_while_waiting_leaves_the_job_and_says_how_to_cancel(fake, images, trainer):
    fake.states = ("JOB_STATE_PENDING",)  # never ends
    name, err = interrupt_while_following(fake, submit_args(trainer, "--wait"))
    assert f"buildkit-py cancel {name}" in err and "keeps running" in err
    assert "Traceback" not in err
    assert fake.jobs[name]["state"] != "JOB_STATE_CANCELLED"


def test_hyperparameter_tuning_job_goes_to_its_collection(fake, images, project, capsys):
    root = project({"buildkit.yaml": CONFIG + """\
hyperparameters:
  metric: accuracy
  goal: MAXIMIZE
  max_trials: 4
  parallel_trials: 2
  algorithm: RANDOM_SEARCH
  params:
    - {name: lr, type: DOUBLE, min: 0.001, max: 0.1, scale: log}
""", "trainer/__init__.py": "", "trainer/task.py": ""})
    code, out, err = main(capsys, *submit_args(root, "--json"))
    assert code == 0, err
    assert json.loads(out)["name"].startswith("projects/fake-project/locations/us-central1/hyperparameterTuningJobs/")
    job = aiplatform_v1.HyperparameterTuningJob.from_json(json.dumps(fake.bodies[0]))
    assert job.study_spec.parameters[0].scale_type == aiplatform_v1.StudySpec.ParameterSpec.ScaleType.UNIT_LOG_SCALE


def test_plan_checks_the_image_in_its_registry(fake, images, trainer, capsys):
    code, out, err = main(capsys, "plan", "--dir", str(trainer), "--target", "loopback", "--image", image(), "--json")
    assert code == 0, err
    plan = json.loads(out)
    checks = {c["name"]: c for c in plan["checks"]}
    assert checks["image"]["ok"] and images["amd64"] in checks["image"]["detail"]
    assert checks["platform"]["ok"] and checks["machine"]["ok"]
    assert plan["request"]["url"] == f"{fake.url}/v1/projects/fake-project/locations/us-central1/customJobs"
    aiplatform_v1.CustomJob.from_json(json.dumps(plan["request"]["body"]))
    assert not fake.calls  # a plan sends nothing to the API
    code, out, err = main(capsys, "submit", "--dry-run", "--dir", str(trainer), "--target", "loopback", "--image", image())
    assert code == 0 and "Vertex AI plan: POST" in out and "ok    image" in out


def test_plan_fails_for_an_arm64_image_and_a_missing_one(fake, images, trainer, capsys):
    code, out, err = main(capsys, "plan", "--dir", str(trainer), "--target", "loopback", "--image", image("arm64"))
    assert code == 2
    assert "FAIL  platform" in out and "linux/arm64" in out and "--platform linux/amd64" in out
    code, out, err = main(capsys, "submit", "--dir", str(trainer), "--target", "loopback", "--image", image("nope"))
    assert code == 7
    assert "nothing was sent" in err and "push it first" in err and ":latest" not in err
    code, out, err = main(capsys, "submit", "--dir", str(trainer), "--target", "loopback", "--image",
                          f"{REGISTRY}/{REPO_NAME}")  # a repository without its tag: :latest, which build never pushes
    assert code == 7 and "(no tag given, so :latest;" in err and "print image-uri" in err, err
    assert not fake.calls


def test_plan_fails_for_an_amd64_image_on_an_a4x_job(fake, images, project, capsys):
    """A4X machines (GB200) run Arm CPUs: an amd64 image is refused before anything is sent, naming the platform."""
    root = project({"buildkit.yaml": CONFIG.replace("torch==2.5.1", "torch==2.9.1").replace("NVIDIA_TESLA_T4", "NVIDIA_GB200"),
                    "trainer/__init__.py": "", "trainer/task.py": "print('hi')\n"})
    code, out, err = main(capsys, "plan", "--dir", str(root), "--target", "loopback", "--image", image("amd64"),
                          "--machine-type", "a4x-highgpu-4g", "--accelerator-type", "NVIDIA_GB200", "--accelerator-count", "4")
    assert code == 2, out + err
    assert "FAIL  platform" in out and "a4x-highgpu-4g runs linux/arm64" in out and "--platform linux/arm64" in out
    assert not fake.calls


def test_plan_authenticates_to_the_registry_with_its_credentials(fake, images, trainer, capsys, monkeypatch):
    args = ["plan", "--dir", str(trainer), "--target", "loopback", "--image", image("amd64", AUTH_REGISTRY), "--json"]
    code, out, _ = main(capsys, *args)
    assert code == 7 and "wants credentials" in out
    monkeypatch.setenv("BUILDKIT_PY_REGISTRY_USERNAME", AUTH[0])
    monkeypatch.setenv("BUILDKIT_PY_REGISTRY_PASSWORD", AUTH[1])
    code, out, err = main(capsys, *args)
    assert code == 0, out + err
    assert images["auth"] in json.loads(out)["request"]["body"]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"]


@pytest.mark.parametrize("endpoint", ["http://example.com", "ftp://127.0.0.1", "https://h/v1/path", "https://a b"])
def test_bad_endpoints_exit_2(fake, images, trainer, capsys, endpoint):
    code, out, err = main(capsys, *submit_args(trainer, "--api-endpoint", endpoint))
    assert code == 2 and "--api-endpoint" in err
    assert not fake.calls


def test_the_vertex_target_refuses_loopback_images_before_sending(fake, trainer, capsys):
    code, out, err = main(capsys, "submit", "--dir", str(trainer), "--image", image())
    assert code == 2 and "Vertex AI cannot reach" in err
    assert not fake.calls


# --- training pipelines (submit --pipeline): the job, then its model uploaded with a serving image --------

PIPELINE_CONFIG = CONFIG + "  base_output_directory: gs://bucket/runs\n"


@pytest.fixture
def pipeline_trainer(project):
    return project({"buildkit.yaml": PIPELINE_CONFIG, "trainer/__init__.py": "", "trainer/task.py": ""})


def pipeline_args(root, *extra: str) -> list[str]:
    return submit_args(root, "--pipeline", "--serving-image", image("serving"), *extra)


@pytest.fixture
def serving(images):
    return push_image(REGISTRY, REPO_NAME, "serving")


def test_a_pipeline_is_followed_to_the_model_it_uploaded(fake, images, serving, pipeline_trainer, capsys):
    code, out, err = main(capsys, *pipeline_args(pipeline_trainer, "--wait"))
    assert code == 0, err
    assert [line.split()[1] for line in out.splitlines() if line.startswith("state ")] == [
        "PIPELINE_STATE_PENDING", "PIPELINE_STATE_RUNNING", "PIPELINE_STATE_SUCCEEDED"]
    (name,) = fake.jobs
    assert name == "projects/fake-project/locations/us-central1/trainingPipelines/1000"
    assert "model   projects/fake-project/locations/us-central1/models/5000" in out.splitlines()
    assert ("POST", "/v1/projects/fake-project/locations/us-central1/trainingPipelines") in fake.calls
    body = fake.bodies[0]
    parsed = aiplatform_v1.TrainingPipeline.from_json(json.dumps(body))  # strict: unknown fields would fail
    assert parsed.training_task_definition.endswith("/custom_task_1.0.0.yaml")
    spec = aiplatform_v1.CustomJobSpec.from_json(json.dumps(body["trainingTaskInputs"]))
    assert spec.worker_pool_specs[0].container_spec.image_uri == f"{image()}@{images['amd64']}"  # pinned
    assert parsed.model_to_upload.container_spec.image_uri == image("serving")
    assert parsed.model_to_upload.labels["image-sha256"] == images["amd64"].removeprefix("sha256:")[:63]
    assert len(parsed.labels[jobs_submit.REQUEST_LABEL]) == 32  # the pipeline is created once, whatever happens


def test_a_pipeline_in_json_and_a_failed_one_exits_1(fake, images, serving, pipeline_trainer, capsys):
    code, out, err = main(capsys, *pipeline_args(pipeline_trainer, "--wait", "--json"))
    assert code == 0, err
    result = json.loads(out)
    assert result["state"] == "PIPELINE_STATE_SUCCEEDED" and result["model"].endswith("/models/5000")
    fake.pipeline_states = ("PIPELINE_STATE_RUNNING", "PIPELINE_STATE_FAILED")
    code, out, err = main(capsys, *pipeline_args(pipeline_trainer, "--wait", "--json"))
    assert code == 1
    assert json.loads(out)["state"] == "PIPELINE_STATE_FAILED" and json.loads(out)["model"] is None
    assert "exited with a non-zero status of 1" in err


def test_cancel_a_pipeline_by_name(fake, images, serving, pipeline_trainer, capsys):
    code, out, err = main(capsys, *pipeline_args(pipeline_trainer, "--json"))
    assert code == 0, err
    name = json.loads(out)["name"]
    code, out, err = main(capsys, "cancel", name)
    assert code == 0, err
    assert out.strip() == f"cancel requested for {name}: now PIPELINE_STATE_CANCELLED"
    assert ("POST", f"/v1/{name}:cancel") in fake.calls


def test_plan_a_pipeline_checks_the_serving_image_too(fake, images, serving, pipeline_trainer, capsys):
    code, out, err = main(capsys, "plan", "--dir", str(pipeline_trainer), "--target", "loopback", "--image", image(),
                          "--pipeline", "--serving-image", image("serving"), "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["request"]["url"] == f"{fake.url}/v1/projects/fake-project/locations/us-central1/trainingPipelines"
    checks = {c["name"]: c for c in plan["checks"]}
    assert checks["serving"]["ok"] and serving in checks["serving"]["detail"]
    aiplatform_v1.TrainingPipeline.from_json(json.dumps(plan["request"]["body"]))
    code, out, err = main(capsys, *submit_args(pipeline_trainer, "--pipeline", "--serving-image", image("absent")))
    assert code == 7 and "check serving failed" in err and "push it first" in err
    assert not fake.calls


def test_ctrl_c_while_following_a_pipeline_leaves_it_running(fake, images, serving, pipeline_trainer):
    fake.pipeline_states = ("PIPELINE_STATE_RUNNING",)  # never ends
    name, err = interrupt_while_following(fake, pipeline_args(pipeline_trainer, "--wait"))
    assert f"buildkit-py cancel {name}" in err and "the training pipeline keeps running" in err
    assert fake.jobs[name]["state"] == "PIPELINE_STATE_RUNNING"


def test_the_loopback_api_refuses_what_the_service_refuses_in_a_pipeline(fake):
    client = jobs_submit.Client(fake.url, "fake-project", "us-central1", jobs_submit.default_credentials()[0])
    spec = {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                                 "containerSpec": {"imageUri": image()}}]}
    good = {"displayName": "p", "trainingTaskDefinition": jobs_pipeline.CUSTOM_TASK, "trainingTaskInputs": spec,
            "modelToUpload": {"displayName": "m", "containerSpec": {"imageUri": image("serving")}}}
    for bad, fragment in (({**good, "trainingTaskDefinition": jobs_pipeline.SCHEMAS + "custom_task_9.yaml"},
                           "field training_task_definition"),
                          ({**good, "trainingTaskInputs": {**spec, "workerPoolSpecz": []}}, "field training_task_inputs"),
                          (good, "field model_to_upload.artifact_uri")):  # no baseOutputDirectory, no artifactUri
        with pytest.raises(ServiceError) as caught:
            client.create("trainingPipelines", bad)
        assert caught.value.http_status == 400 and "INVALID_ARGUMENT" in str(caught.value) and fragment in str(caught.value)
    assert not fake.jobs


def test_a_pipeline_whose_create_answer_is_lost_is_found_by_its_request_id(fake, images, serving, pipeline_trainer,
                                                                           capsys):
    fake.refuse = ["drop"]
    code, out, err = main(capsys, *pipeline_args(pipeline_trainer, "--json"))
    assert code == 0, err
    assert list(fake.jobs) == [json.loads(out)["name"]]
    assert ("GET", "/v1/projects/fake-project/locations/us-central1/trainingPipelines") in fake.calls
    assert [c[0] for c in fake.calls].count("POST") == 1


# --- a registry this machine cannot reach (VPC Service Controls, Google's network only): --skip-image-check ------

def test_an_unreachable_registry_stops_plan_and_submit_naming_the_flag(fake, trainer, capsys):
    with socket_closed() as url:
        unreachable = image("amd64", url.removeprefix("http://"))
        code, out, err = main(capsys, "plan", "--dir", str(trainer), "--target", "loopback", "--image", unreachable)
        assert code == 7 and "FAIL  image" in out and "cannot reach the registry" in out and "--skip-image-check" in out
        code, out, err = main(capsys, "submit", "--dir", str(trainer), "--target", "loopback", "--image", unreachable)
    assert code == 7 and "nothing was sent" in err and "--skip-image-check" in err
    assert not fake.calls


def test_skip_image_check_submits_by_tag_and_warns(fake, trainer, capsys):
    with socket_closed() as url:
        unreachable = image("amd64", url.removeprefix("http://"))
        code, out, err = main(capsys, "plan", "--dir", str(trainer), "--target", "loopback", "--image", unreachable,
                              "--skip-image-check", "--json")
        assert code == 0, err
        plan = json.loads(out)
        assert plan["request"]["body"]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"] == unreachable
        checks = {c["name"]: c for c in plan["checks"]}
        assert checks["image"]["ok"] is None and "not checked" in checks["image"]["detail"]
        assert "warning:" in err and "was not checked" in err and "not pinned by digest" in err
        assert plan["warnings"] and not fake.calls
        args = [unreachable if a == image() else a for a in submit_args(trainer, "--skip-image-check", "--json")]
        code, out, err = main(capsys, *args)
    assert code == 0, err
    assert "was not checked" in err and json.loads(out)["warnings"]
    container = fake.bodies[0]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert container["imageUri"] == unreachable  # by tag: nothing to pin it to



def test_autopackage_goes_on_past_a_registry_only_the_engine_reaches(fake, tmp_path, capsys, monkeypatch, testenv):
    """This machine's requests go through a proxy that is down, the engine's do not (it has its own network
    settings): the image is pushed by the engine, and only --skip-image-check lets the job be submitted."""
    root = tmp_path / "quick"
    shutil.copytree(REPO / "examples" / "quickstart", root, ignore=shutil.ignore_patterns("__pycache__"))
    with (root / "buildkit.yaml").open("a") as config:
        config.write("job: {project: fake-project, region: us-central1}\n")
    registry = "localhost:" + REGISTRY.rsplit(":", 1)[1]  # the same registry, under a name the proxy is not bypassed for
    with socket_closed() as dead_proxy:
        for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
            monkeypatch.setenv(name, dead_proxy)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # the loopback Vertex AI API and its token endpoint
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        monkeypatch.setenv("BUILDKIT_PY_DOCKER", testenv["BUILDKIT_DOCKER"])
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        args = ["autopackage", str(root), "--target", "loopback", "--image", f"{registry}/skip-check/quick", "--network",
                "host", "--progress", "plain"]
        code, out, err = main(capsys, *args)
        assert code == 7 and "nothing was sent" in err and "--skip-image-check" in err, err[-3000:]
        assert not fake.calls
        code, out, err = main(capsys, *args, "--skip-image-check")
    assert code == 0, err[-3000:]
    assert "was not checked" in err and "not pinned by digest" in err
    (body,) = fake.bodies
    uri = body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"]
    assert uri.startswith(f"{registry}/skip-check/quick:bk-") and "@sha256:" not in uri
    assert re.search(r"^push +\d+\.\d+s +pushed ", out, re.M), out
