"""`buildkit-py job`: Vertex AI CustomJob / HyperparameterTuningJob specs, each parsed with the official
google.cloud.aiplatform_v1 types (strict: an unknown or misspelled field fails), and the refusals."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
import yaml
from google.cloud import aiplatform_v1
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buildkit_py import cli
from buildkit_py.catalog.resources import LAUNCHER_MODULE
from buildkit_py.config import load_config
from buildkit_py.errors import ConfigError, ResolutionError
from buildkit_py.jobs import pipeline, vertex
from buildkit_py.launcher.constants import EXPECT_GPUS_ENV

IMAGE = "us-central1-docker.pkg.dev/proj/repo/trainer:v1"
SERVING = "us-central1-docker.pkg.dev/proj/repo/serve:v1"
TORCH = "framework: torch==2.5.1\ntrainer: {module: trainer.task}\n"


def parse(resource: dict, kind: str = "customJobs"):
    """The official type's strict parser (json_format.ParseDict refuses unknown fields)."""
    cls = aiplatform_v1.CustomJob if kind == "customJobs" else aiplatform_v1.HyperparameterTuningJob
    message = cls.pb(cls())
    json_format.ParseDict(resource, message)
    return cls.wrap(message)


def make(project, text: str, **kwargs) -> vertex.VertexJob:
    root = project({"buildkit.yaml": text, "trainer/__init__.py": "", "trainer/task.py": ""})
    config = load_config(root / "buildkit.yaml", root)
    return vertex.build_job(config, config.job, **kwargs)


def job_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["job", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_parser_is_strict():
    with pytest.raises(json_format.ParseError):
        parse({"displayName": "x", "jobSpec": {"workerPoolSpecs": [{"replicaCount": "1", "containerSpecc": {}}]}})


def test_a_distributed_job_with_every_setting(project):
    job = make(project, TORCH + f"""\
accelerator: NVIDIA_TESLA_V100
job:
  name: census_v2
  image: {IMAGE}@sha256:{"a" * 64}
  accelerator_count: 4
  machine_type: n1-standard-32
  replica_count: 3
  boot_disk_type: pd-ssd
  boot_disk_size_gb: 200
  reservation: {{type: SPECIFIC_RESERVATION, key: compute.googleapis.com/reservation-name, values: [my-res]}}
  parameter_servers: {{replica_count: 2}}
  evaluators: {{machine_type: n1-standard-8, replica_count: 1}}
  command: [python, -m, trainer.task]
  args: [--epochs, 3]
  env: {{NCCL_DEBUG: INFO}}
  timeout: 2d
  restart_job_on_worker_restart: true
  strategy: SPOT
  disable_retries: false
  service_account: trainer@proj.iam.gserviceaccount.com
  network: projects/123456/global/networks/default
  base_output_directory: gs://bucket/out
  tensorboard: projects/proj/locations/us-central1/tensorboards/123
  enable_web_access: true
  labels: {{team: ml, cost-center: "42"}}
""", built=vertex.Built(revision="abc123def456-dirty"))
    assert job.kind == "customJobs"
    typed = parse(job.resource)
    pools = typed.job_spec.worker_pool_specs
    assert [p.replica_count for p in pools] == [1, 2, 2, 1]
    chief = pools[0]
    assert chief.machine_spec.accelerator_type.name == "NVIDIA_TESLA_V100" and chief.machine_spec.accelerator_count == 4
    assert chief.machine_spec.reservation_affinity.values == ["my-res"]
    assert chief.disk_spec.boot_disk_size_gb == 200
    assert list(chief.container_spec.command) == ["python", "-m", LAUNCHER_MODULE, "--", "python", "-m", "trainer.task"]
    assert list(chief.container_spec.args) == ["--epochs", "3"]
    assert {e.name: e.value for e in chief.container_spec.env} == {"NCCL_DEBUG": "INFO", EXPECT_GPUS_ENV: "4"}
    assert pools[2].machine_spec.accelerator_count == 0  # parameter servers: CPUs
    assert {e.name: e.value for e in pools[2].container_spec.env}[EXPECT_GPUS_ENV] == "0"
    assert typed.job_spec.scheduling.timeout.total_seconds() == 2 * 86400
    assert typed.job_spec.scheduling.strategy.name == "SPOT"
    assert typed.job_spec.base_output_directory.output_uri_prefix == "gs://bucket/out"
    assert typed.display_name == "census_v2"
    assert dict(typed.labels) == {"team": "ml", "cost-center": "42", "buildkit-py-version": "0-1-0",
                                  "image-sha256": "a" * 63, "git-commit": "abc123def456-dirty"}
    assert any("/dev/shm" in n for n in job.notes)


def test_a_reduction_server_and_python_package(project):
    job = make(project, """\
framework: none
job:
  python_package: {executor: "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest",
                   package_uris: [gs://bkt/pkg/trainer-0.1.tar.gz], module: trainer.task}
  accelerator_type: NVIDIA_L4
  replica_count: 2
  reduction_server: {replica_count: 4}
""")
    pools = parse(job.resource).job_spec.worker_pool_specs
    assert pools[0].machine_spec.machine_type == "g2-standard-4"  # the L4 machine, count from the machine
    assert pools[0].python_package_spec.python_module == "trainer.task"
    assert list(pools[0].python_package_spec.package_uris) == ["gs://bkt/pkg/trainer-0.1.tar.gz"]
    assert pools[2].container_spec.image_uri == vertex.REDUCTION_SERVER_IMAGE and pools[2].replica_count == 4


def test_a_python_package_job_gets_the_configs_trainer_args_and_env(project):
    """An executor image has no CMD or ENV of the config's: the spec carries them, job.args and job.env winning."""
    package = ('python_package: {executor: "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest", '
               "package_uris: [gs://bkt/pkg/trainer-0.1.tar.gz], module: trainer.task}")
    config = ("framework: none\ntrainer: {module: trainer.task, args: [--epochs, '5']}\n"
              "env: {DATA_DIR: /data, SEED: '1'}\njob:\n  " + package + "\n")
    spec = parse(make(project, config).resource).job_spec.worker_pool_specs[0].python_package_spec
    assert list(spec.args) == ["--epochs", "5"]
    env = {e.name: e.value for e in spec.env}
    assert env["DATA_DIR"] == "/data" and env["SEED"] == "1" and env["BUILDKIT_PY_EXPECT_GPUS"] == "0"
    spec = parse(make(project, config + "  args: [--epochs, '9']\n  env: {SEED: '2'}\n").resource
                 ).job_spec.worker_pool_specs[0].python_package_spec
    assert list(spec.args) == ["--epochs", "9"] and [e.value for e in spec.env if e.name == "SEED"] == ["2"]


def test_evaluators_alone_keep_their_pool_index(project):
    job = make(project, f"framework: none\njob: {{image: {IMAGE}, evaluators: {{replica_count: 1}}}}\n")
    pools = job.resource["jobSpec"]["workerPoolSpecs"]
    assert pools[1] == {} and pools[2] == {} and pools[3]["replicaCount"] == "1"
    parse(job.resource)


def test_hyperparameter_tuning_job(project):
    job = make(project, f"""\
framework: none
job: {{image: {IMAGE}}}
hyperparameters:
  metric: val/accuracy
  goal: MAXIMIZE
  max_trials: 20
  parallel_trials: 4
  max_failed_trials: 3
  algorithm: GRID_SEARCH
  params:
    - {{name: layers, type: INTEGER, min: 1, max: 8, scale: linear}}
    - {{name: opt, type: CATEGORICAL, values: [adam, sgd]}}
    - {{name: lr, type: DISCRETE, values: [0.001, 0.01, 0.1], scale: log}}
""")
    assert job.kind == "hyperparameterTuningJobs"
    typed = parse(job.resource, job.kind)
    study = typed.study_spec
    assert study.metrics[0].metric_id == "val/accuracy" and study.metrics[0].goal.name == "MAXIMIZE"
    assert study.algorithm.name == "GRID_SEARCH"
    assert [p.parameter_id for p in study.parameters] == ["layers", "opt", "lr"]
    assert study.parameters[0].integer_value_spec.max_value == 8
    assert list(study.parameters[2].discrete_value_spec.values) == [0.001, 0.01, 0.1]
    assert study.parameters[2].scale_type.name == "UNIT_LOG_SCALE"
    assert (typed.max_trial_count, typed.parallel_trial_count, typed.max_failed_trial_count) == (20, 4, 3)
    assert typed.trial_job_spec.worker_pool_specs[0].container_spec.image_uri == IMAGE


@pytest.mark.parametrize("machine, accelerator, count", [
    (m, g, n) for m, (g, n) in vertex.load_machines().fixed.items()] + [
    ("n1-standard-4", "NVIDIA_TESLA_T4", 1), ("n1-standard-96", "NVIDIA_TESLA_V100", 8), ("n1-highmem-16", "NVIDIA_TESLA_P100", 2),
    ("n1-standard-8", None, 0), ("e2-standard-4", None, 0), ("n2-highmem-32", None, 0)])
def test_every_machine_in_the_data_makes_a_valid_spec(project, machine, accelerator, count):
    acc = f", accelerator_type: {accelerator}, accelerator_count: {count}" if accelerator else ""
    job = make(project, f"framework: none\njob: {{image: {IMAGE}, machine_type: {machine}{acc}}}\n")
    spec = parse(job.resource).job_spec.worker_pool_specs[0].machine_spec
    assert spec.machine_type == machine and spec.accelerator_count == count
    if accelerator:
        assert spec.accelerator_type.name == accelerator  # a name the official enum knows


@pytest.mark.parametrize("settings, fragment", [
    ("machine_type: a2-highgpu-1g, accelerator_type: NVIDIA_TESLA_T4", "a2-highgpu-1g has 1 NVIDIA_TESLA_A100"),
    ("machine_type: g2-standard-4, accelerator_count: 0", "comes with 1 NVIDIA_L4"),
    ("accelerator_type: NVIDIA_TESLA_T4, accelerator_count: 3", "counts 1, 2, 4"),
    ("machine_type: n1-standard-96, accelerator_type: NVIDIA_TESLA_V100, accelerator_count: 1", "needs 8 GPUs"),
    ("accelerator_type: NVIDIA_H100_80GB, accelerator_count: 3", "a3-highgpu-1g (1)"),
    ("machine_type: e2-standard-4, accelerator_type: NVIDIA_L4", "runs on g2-standard-4"),
    ("machine_type: zz-standard-4", "families"),
    ("accelerator_count: 1", "needs an accelerator_type"),
    ("max_wait_duration: 1h", "FLEX_START"),
    ("parameter_servers: {replica_count: 1}, reduction_server: {replica_count: 1}", "not both"),
    ("replica_count: 3, workers: {replica_count: 5}", "give one of them"),
])
def test_machine_and_scheduling_refusals_name_the_field(project, settings, fragment):
    with pytest.raises(ConfigError) as exc:
        make(project, f"framework: none\njob: {{image: {IMAGE}, {settings}}}\n")
    assert fragment in str(exc.value) and "job" in str(exc.value)


@pytest.mark.parametrize("image, pull", [
    ("127.0.0.1:5000/t:v1", False), ("localhost:5000/t:v1", False), ("[::1]:5000/t:v1", False), ("trainer:v1", False),
    ("library/python:3.11", False), ("0.0.0.0:5000/t:v1", False), ("europe-docker.pkg.dev/p/r/t:v1", True),
    ("gcr.io/p/t@sha256:" + "b" * 64, True), ("docker.io/library/python:3.11", True)])
def test_images_vertex_cannot_pull_are_refused(image, pull):
    if pull:
        assert vertex.pullable(image, "vertex", "--image")
    else:
        with pytest.raises(ConfigError, match="--image"):
            vertex.pullable(image, "vertex", "--image")
        assert vertex.pullable(image, "loopback", "--image")


def test_generated_names_follow_the_convention():
    now = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    assert vertex.display_name("my-trainer.v2", now) == "my_trainer_v2_20260304_050607"
    assert vertex.display_name("2fast", now) == "job_2fast_20260304_050607"
    long = vertex.display_name("x" * 500, now)
    assert len(long) == 128 and long.endswith("_20260304_050607")
    for name in (long, vertex.display_name("ü€", now)):
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,127}", name, re.ASCII)


@pytest.mark.parametrize("key, value, fragment", [
    ("labels", {"Team": "x"}, "label key"), ("labels", {"goog-x": "x"}, "goog"), ("labels", {"a": "UPPER"}, "label value"),
    ("labels", {f"k{i}": "v" for i in range(65)}, "at most 64"), ("name", "9lives", "starting with a letter"),
    ("name", "x" * 129, "at most 128"), ("timeout", "31d", "at most 30d"), ("timeout", "1w", "90m or 7d"),
    ("strategy", "LOW_COST", "STANDARD, SPOT, FLEX_START"), ("region", "us central1", "us-central1"),
    ("accelerator_count", 17, "0 to 16"), ("replica_count", 0, "1 to 1000"), ("boot_disk_size_gb", 50, "100 to 64000"),
    ("base_output_directory", "s3://b/x", "gs://"), ("network", "default", "projects/PROJECT_NUMBER"),
    ("service_account", "me", "service account"), ("imagee", "x", "did you mean 'image'"),
    ("python_package", {"executor": "x==1"}, "package_uris, module required"),
])
def test_bad_job_settings_exit_2_naming_the_field(project, capsys, key, value, fragment):
    text = yaml.safe_dump({"framework": "none", "job": {"image": IMAGE, key: value}})
    root = project({"buildkit.yaml": text})
    code, out, err = job_cli(capsys, "--dir", str(root))
    assert code == 2, err
    assert fragment in err and "Traceback" not in err
    assert f"job.{key}" in err


@pytest.mark.parametrize("hp, fragment", [
    ({"goal": "MAXIMIZE", "max_trials": 1, "parallel_trials": 1, "params": []}, "metric required"),
    ({"metric": "m", "goal": "UP", "max_trials": 1, "parallel_trials": 1, "params": [{"name": "a", "type": "DOUBLE"}]},
     "MAXIMIZE, MINIMIZE"),
    ({"metric": "m", "goal": "MAXIMIZE", "max_trials": 2, "parallel_trials": 3, "params": []}, "1 to 2"),
    ({"metric": "m", "goal": "MAXIMIZE", "max_trials": 1, "parallel_trials": 1,
      "params": [{"name": "a", "type": "DOUBLE", "min": 0, "max": 1, "scale": "log"}]}, "min > 0"),
    ({"metric": "m", "goal": "MAXIMIZE", "max_trials": 1, "parallel_trials": 1,
      "params": [{"name": "a", "type": "DOUBLE", "min": 2, "max": 1}]}, "less than min"),
    ({"metric": "m", "goal": "MAXIMIZE", "max_trials": 1, "parallel_trials": 1,
      "params": [{"name": "a", "type": "DISCRETE", "values": [2, 1]}]}, "must increase"),
    ({"metric": "m", "goal": "MAXIMIZE", "max_trials": 1, "parallel_trials": 1,
      "params": [{"name": "a", "type": "CATEGORICAL", "values": ["x"], "scale": "log"}]}, "has no scale"),
    ({"metric": "m", "goal": "MAXIMIZE", "max_trials": 1, "parallel_trials": 1,
      "params": [{"name": "a", "type": "INTEGER", "min": 1, "max": 2}, {"name": "a", "type": "INTEGER", "min": 1, "max": 2}]},
     "given twice"),
    ({"metric": "m", "goal": "MAXIMIZE", "max_trials": 1, "parallel_trials": 1, "algorithm": "GRID_SEARCH",
      "params": [{"name": "a", "type": "DOUBLE", "min": 1, "max": 2}]}, "make them DISCRETE"),
])
def test_bad_hyperparameters_exit_2(project, capsys, hp, fragment):
    root = project({"buildkit.yaml": yaml.safe_dump({"framework": "none", "job": {"image": IMAGE}, "hyperparameters": hp})})
    code, out, err = job_cli(capsys, "--dir", str(root))
    assert code == 2, err
    assert fragment in err and "hyperparameters" in err


def test_job_command_flags_override_the_config_and_write_files(project, capsys, tmp_path):
    root = project({"buildkit.yaml": TORCH + "accelerator: NVIDIA_TESLA_T4\njob: {machine_type: n1-standard-4}\n",
                    "trainer/__init__.py": "", "trainer/task.py": ""})
    code, out, err = job_cli(capsys, "--dir", str(root), "--image", IMAGE, "--machine-type", "n1-standard-16",
                             "--accelerator-count", "2", "--replica-count", "4", "--name", "run_1", "--json")
    assert code == 0, err
    typed = parse(json.loads(out))
    assert typed.display_name == "run_1"
    assert [p.replica_count for p in typed.job_spec.worker_pool_specs] == [1, 3]
    assert typed.job_spec.worker_pool_specs[1].machine_spec.machine_type == "n1-standard-16"
    code, out, err = job_cli(capsys, "--dir", str(root), "--image", IMAGE)
    assert code == 0 and parse(yaml.safe_load(out)).job_spec.worker_pool_specs[0].machine_spec.machine_type == "n1-standard-4"
    code, out, err = job_cli(capsys, "--dir", str(root), "--image", IMAGE, "-o", str(tmp_path / "job.json"))
    assert code == 0 and out == "" and "wrote" in err
    parse(json.loads((tmp_path / "job.json").read_text()))
    with pytest.raises(SystemExit) as exc:
        job_cli(capsys, "--dir", str(root), "--image", IMAGE, "--accelerator-count", "x")
    assert exc.value.code == 2 and "--accelerator-count: invalid int value" in capsys.readouterr().err


def test_the_accelerator_is_checked_against_the_images_cuda_build(project, capsys):
    root = project({"buildkit.yaml": "framework: scikit-learn\ngpu: false\ntrainer: {module: trainer.task}\n",
                    "trainer/__init__.py": "", "trainer/task.py": ""})
    code, out, err = job_cli(capsys, "--dir", str(root), "--image", IMAGE, "--accelerator-type", "NVIDIA_L4")
    assert code == 2 and "built for CPU" in err
    code, out, err = job_cli(capsys, "--dir", str(root), "--image", IMAGE)
    assert code == 0, err


def test_the_configs_platform_must_be_the_machines(project, capsys):
    root = project({"buildkit.yaml": "framework: none\nplatform: linux/arm64\n"})
    code, out, err = job_cli(capsys, "--dir", str(root), "--image", IMAGE)
    assert code == 2 and "platform: the image is built for linux/arm64; n1-standard-4 runs linux/amd64" in err
    code, out, err = job_cli(capsys, "--dir", str(root), "--image", IMAGE, "--machine-type", "a4x-highgpu-4g")
    assert code == 0, err


def test_an_image_resolved_for_gb200_is_arm64_and_runs_only_on_a4x(project, capsys):
    """No platform given: GB200 makes the config's image linux/arm64 (A4X runs Arm CPUs); the job's GPU comes from
    the config, so an x86 machine is refused for it."""
    root = project({"buildkit.yaml": "framework: torch==2.9.1\naccelerator: NVIDIA_GB200\ntrainer: {module: trainer.task}\n",
                    "trainer/__init__.py": "", "trainer/task.py": ""})
    code, out, err = job_cli(capsys, "--dir", str(root), "--image", IMAGE, "--machine-type", "n1-standard-4")
    assert code == 2 and "it runs on a4x-highgpu-4g" in err
    code, out, err = job_cli(capsys, "--dir", str(root), "--image", IMAGE, "--machine-type", "a4x-highgpu-4g",
                             "--accelerator-type", "NVIDIA_GB200", "--accelerator-count", "4")
    assert code == 0, err


def test_no_image_is_refused(project, capsys):
    root = project({"buildkit.yaml": "framework: none\n"})
    code, out, err = job_cli(capsys, "--dir", str(root))
    assert code == 2 and "--image" in err


def test_a_gpu_machine_alone_brings_its_gpus(project):
    job = make(project, f"framework: none\njob: {{image: {IMAGE}, machine_type: a3-highgpu-8g}}\n")
    spec = parse(job.resource).job_spec.worker_pool_specs[0]
    assert (spec.machine_spec.accelerator_type.name, spec.machine_spec.accelerator_count) == ("NVIDIA_H100_80GB", 8)
    assert {e.name: e.value for e in spec.container_spec.env}[EXPECT_GPUS_ENV] == "8"


HOSTILE = st.lists(st.one_of(st.characters(exclude_categories=("Cs",)),
                             st.sampled_from(list("\n\r\x00\u2028\x1b\"'$`\\{}") + ["${HOME}", "$(id)", "{{ 7*7 }}"])),
                   max_size=30).map("".join)
PLACES = [(key, lambda t, key=key: {key: [t] if key in ("command", "args") else t})
          for key in ("name", "project", "region", "image", "machine_type", "accelerator_type", "boot_disk_type", "command",
                      "args", "timeout", "strategy", "max_wait_duration", "service_account", "network",
                      "base_output_directory", "staging_bucket", "tensorboard", "tpu_topology")] + [
    # The training pipeline's model section (job --pipeline): every field, and label keys and values.
    (f"model.{key}", lambda t, key=key: {"model": {key: {"k": t} if key == "labels" else t}})
    for key in ("serving_image", "name", "description", "artifact_uri", "labels")] + [
    ("model label key", lambda t: {"model": {"labels": {t: "x"}}}),
    ("env value", lambda t: {"env": {"A": t}}), ("env name", lambda t: {"env": {t: "x"}}),
    ("label key", lambda t: {"labels": {t: "x"}}), ("label value", lambda t: {"labels": {"k": t}}),
    ("reservation", lambda t: {"reservation": {"type": "SPECIFIC_RESERVATION", "key": t, "values": [t]}}),
    ("package uri", lambda t: {"python_package": {"executor": IMAGE, "package_uris": [t], "module": "m"}}),
    ("hyperparameter", lambda t: {"hp": {"metric": t, "goal": "MAXIMIZE", "max_trials": 1, "parallel_trials": 1,
                                         "params": [{"name": "a", "type": "CATEGORICAL", "values": [t]}]}}),
    # Vertex AI's parameter_id: anything but whitespace; each trial then gets --NAME=value
    ("hyperparameter name", lambda t: {"hp": {"metric": "m", "goal": "MAXIMIZE", "max_trials": 1, "parallel_trials": 1,
                                              "params": [{"name": t, "type": "INTEGER", "min": 1, "max": 2}]}}),
]


@pytest.mark.parametrize("place", PLACES, ids=[p[0] for p in PLACES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=HOSTILE)
def test_hostile_job_values_are_refused_or_stay_inert(tmp_path_factory, place, text):
    name, where = place
    values = where(text)
    data = {"framework": "none", "job": {"image": IMAGE, **{k: v for k, v in values.items() if k not in ("hp", "model")}}}
    if "hp" in values:
        data["hyperparameters"] = values["hp"]
    if "model" in values:  # a pipeline around the job, with the hostile text in one model field
        data["job"]["base_output_directory"] = "gs://bucket/out"
        data["model"] = {"serving_image": SERVING, **values["model"]}
    root = tmp_path_factory.mktemp("hostile")
    (root / "buildkit.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    try:
        config = load_config(root / "buildkit.yaml", root)
        job = vertex.build_job(config, config.job)
        if "model" in values:
            job = pipeline.build_pipeline(job, config.model, None, region=None, target="vertex")
    except (ConfigError, ResolutionError) as exc:
        assert exc.exit_code == 2
        return
    if "model" in values:
        message = aiplatform_v1.TrainingPipeline.pb(aiplatform_v1.TrainingPipeline())
        json_format.ParseDict(job.resource, message)  # strict: an unknown field fails
        parse({"displayName": "x", "jobSpec": job.resource["trainingTaskInputs"]})  # the custom task's inputs
    else:
        parse(job.resource, job.kind)  # what is accepted is a valid spec, the text a JSON string in it
    assert not any(ch in json.dumps(job.resource, ensure_ascii=False) for ch in "\n\r\x00\u2028\x1b")


@pytest.mark.parametrize("pools", [
    "  image: {image}\n  replica_count: 3\n  reduction_server: {{replica_count: 2}}\n",
    "  python_package: {{executor: \"{image}\", package_uris: [gs://bkt/p.tar.gz], module: trainer.task}}\n"])
def test_a_job_pinned_to_its_digest_is_the_job_made_from_the_image_by_digest(project, pools):
    """plan makes the job once and pins it (vertex.pin): the same resource as one made from IMAGE@DIGEST, the
    reduction server's own image untouched, the digest label where the build puts it."""
    digest = "sha256:" + "b" * 64
    now = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)
    image = "us-docker.pkg.dev/proj-1/repo/trainer:v1"
    made = make(project, "framework: none\naccelerator: NVIDIA_L4\njob:\n" + pools.format(image=image),
                now=now, built=vertex.Built(revision="abc123"))
    pinned = vertex.pin(made, digest)
    by_digest = make(project, "framework: none\naccelerator: NVIDIA_L4\njob:\n" + pools.format(image=f"{image}@{digest}"),
                     now=now, built=vertex.Built(revision="abc123"))
    assert pinned == by_digest
    assert json.dumps(pinned.resource) == json.dumps(by_digest.resource)  # the labels in the same order too
    assert vertex.pin(pinned, "sha256:" + "c" * 64) == pinned  # named by digest: stays
    assert f"{image}@{digest}" in json.dumps(pinned.resource) and f'"{image}"' not in json.dumps(pinned.resource)
