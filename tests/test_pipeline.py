"""`buildkit-py job --pipeline`: Vertex AI TrainingPipelines around the custom (or tuning) job, each parsed with
the official google.cloud.aiplatform_v1 types (strict: an unknown or misspelled field fails), and the refusals.
Submitting and following them is in test_submit.py (loopback API), the one-command chain in test_autopackage.py."""

from __future__ import annotations

import json
import re

import pytest
from google.cloud import aiplatform_v1
from google.protobuf import json_format

from buildkit_py import cli
from buildkit_py.jobs import pipeline
from conftest import run_cli

IMAGE = "us-central1-docker.pkg.dev/proj/repo/trainer:v1"
CONFIG = f"""\
framework: torch==2.4.1
trainer: {{module: trainer.task}}
job:
  image: {IMAGE}
  region: europe-west4
  base_output_directory: gs://bucket/runs
  labels: {{team: ml}}
"""
TUNING = """\
hyperparameters:
  metric: accuracy
  goal: MAXIMIZE
  max_trials: 4
  parallel_trials: 2
  params:
    - {name: lr, type: DOUBLE, min: 0.001, max: 0.1, scale: log}
"""


def strict(cls, data: dict):
    message = cls.pb(cls())
    json_format.ParseDict(data, message)  # unknown fields: ParseError
    return cls.wrap(message)


def parse(resource: dict) -> tuple[aiplatform_v1.TrainingPipeline, object]:
    """The TrainingPipeline, and its training task's inputs parsed as the task definition says."""
    parsed = strict(aiplatform_v1.TrainingPipeline, resource)
    inputs = resource["trainingTaskInputs"]
    if resource["trainingTaskDefinition"] == pipeline.CUSTOM_TASK:
        return parsed, strict(aiplatform_v1.CustomJobSpec, inputs)
    assert set(inputs) <= {"studySpec", "maxTrialCount", "parallelTrialCount", "maxFailedTrialCount", "trialJobSpec"}
    return parsed, strict(aiplatform_v1.HyperparameterTuningJob, {"displayName": "x", **inputs})


def job(capsys, root, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["job", "--dir", str(root), "--json", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.fixture
def trainer(project):
    def make(config: str = CONFIG):
        return project({"buildkit.yaml": config, "trainer/__init__.py": "", "trainer/task.py": ""})
    return make


def test_a_custom_task_pipeline_uploads_the_model_with_the_prebuilt_image_for_the_release(trainer, capsys):
    root = trainer(CONFIG + "model:\n  name: census\n  description: Census income\n  labels: {stage: dev}\n")
    code, out, err = job(capsys, root, "--pipeline")
    assert code == 0, err
    resource = json.loads(out)
    parsed, inputs = parse(resource)
    assert parsed.training_task_definition == \
        "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
    assert inputs.worker_pool_specs[0].container_spec.image_uri == IMAGE
    assert inputs.base_output_directory.output_uri_prefix == "gs://bucket/runs"
    model = parsed.model_to_upload
    # europe-west4 is served from the europe repository; torch 2.4.1 by the 2.4 image, on CPUs
    assert model.container_spec.image_uri == "europe-docker.pkg.dev/vertex-ai/prediction/pytorch-cpu.2-4:latest"
    assert model.display_name == "census" and model.description == "Census income"
    assert not model.artifact_uri  # the service takes baseOutputDirectory/model
    assert model.labels["stage"] == "dev" and model.labels["buildkit-py-version"]
    assert parsed.labels["team"] == "ml" and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*_[0-9]{8}_[0-9]{6}", parsed.display_name)
    assert "gs://bucket/runs/model/ (AIP_MODEL_DIR)" in err and "pytorch-cpu.2-4" in err


def test_a_tuning_pipeline_takes_the_study_and_trial_spec(trainer, capsys):
    code, out, err = job(capsys, trainer(CONFIG + TUNING), "--pipeline", "--model-name", "tuned")
    assert code == 0, err
    parsed, inputs = parse(json.loads(out))
    assert parsed.training_task_definition.endswith("/hyperparameter_tuning_task_1.0.0.yaml")
    assert inputs.max_trial_count == 4 and inputs.study_spec.metrics[0].metric_id == "accuracy"
    assert inputs.trial_job_spec.base_output_directory.output_uri_prefix == "gs://bucket/runs"
    assert parsed.model_to_upload.display_name == "tuned"
    assert "the best trial's model is uploaded from under gs://bucket/runs/" in err


def test_serving_images_by_name_version_by_reference_and_on_gpus(trainer, capsys):
    root = trainer(CONFIG.replace("torch==2.4.1", "tensorflow==2.15.1") + "model: {serving_gpu: true}\n")
    code, out, _ = job(capsys, root, "--pipeline")
    assert code == 0
    assert json.loads(out)["modelToUpload"]["containerSpec"]["imageUri"] == \
        "europe-docker.pkg.dev/vertex-ai/prediction/tf2-gpu.2-15:latest"
    code, out, _ = job(capsys, trainer(), "--pipeline", "--serving-image", "sklearn==1.5", "--region", "asia-east1")
    assert code == 0  # an alias of the framework's name, and the region's repository
    assert json.loads(out)["modelToUpload"]["containerSpec"]["imageUri"] == \
        "asia-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest"
    own = "us-docker.pkg.dev/proj/serving/server@sha256:" + "b" * 64
    code, out, _ = job(capsys, trainer(), "--pipeline", "--serving-image", own)
    assert code == 0 and json.loads(out)["modelToUpload"]["containerSpec"]["imageUri"] == own


def test_an_artifact_uri_replaces_the_output_directory(trainer, capsys):
    config = CONFIG.replace("  base_output_directory: gs://bucket/runs\n", "") + "model: {artifact_uri: gs://bucket/exported}\n"
    code, out, err = job(capsys, trainer(config), "--pipeline")
    assert code == 0, err
    resource = json.loads(out)
    assert resource["modelToUpload"]["artifactUri"] == "gs://bucket/exported"
    assert "baseOutputDirectory" not in resource["trainingTaskInputs"]
    parse(resource)


@pytest.mark.parametrize("config, argv, field, fragment", [
    # no serving image: no prebuilt one for the release, none for a config without a framework
    (CONFIG.replace("2.4.1", "2.5.1"), (), "model.serving_image", "torch 2.5.1 has no prebuilt prediction image"),
    (CONFIG.replace("torch==2.4.1", "none"), (), "model.serving_image", "--serving-image IMAGE"),
    (CONFIG, ("--serving-image", "torch==9.9"), "model.serving_image", "known: tensorflow 2.15"),
    (CONFIG + "model: {serving_image: 'scikit-learn==1.5', serving_gpu: true}\n", (), "model.serving_gpu",
     "CPU prediction images only"),
    # not a valid reference; one the service cannot pull
    (CONFIG, ("--serving-image", "Server:latest x"), "--serving-image", "'Server:latest x'"),
    (CONFIG, ("--serving-image", "127.0.0.1:5000/server:v1"), "model.serving_image", "Vertex AI cannot reach"),
    # no place to upload the model from
    (CONFIG.replace("  base_output_directory: gs://bucket/runs\n", ""), (), "job.base_output_directory", "AIP_MODEL_DIR"),
    (CONFIG + TUNING + "model: {artifact_uri: gs://bucket/exported}\n", (), "model.artifact_uri", "best trial"),
    (CONFIG + "model: {artifact_uri: /local/dir}\n", (), "model.artifact_uri", "gs://BUCKET/PATH"),
    (CONFIG + "model: {nmae: x}\n", (), "model.nmae", "did you mean 'name'"),
    (CONFIG + "model: {labels: {Stage: dev}}\n", (), "model.labels.Stage", "label key"),
    (CONFIG, ("--model-name", "9lives"), "--model-name", "starting with a letter"),
])
def test_bad_pipelines_exit_2_naming_the_field(trainer, capsys, config, argv, field, fragment):
    code, out, err = job(capsys, trainer(config), "--pipeline", *argv)
    assert code == 2, err
    assert field in err and fragment in err, err
    assert len(err.strip().splitlines()) == 1 and not out


def test_model_flags_go_with_pipeline_and_file_errors_carry_their_position(trainer, capsys):
    code, _, err = job(capsys, trainer(), "--serving-image", "torch==2.4")
    assert code == 2 and "--serving-image" in err and "add --pipeline" in err
    root = trainer(CONFIG + "model:\n  serving_gpu: yes please\n")
    code, _, err = job(capsys, root, "--pipeline")
    assert code == 2 and "buildkit.yaml:9:16:" in err and "model.serving_gpu" in err


def test_a_pipeline_cannot_run_locally(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": ""})
    proc = run_cli("autopackage", str(root), "--target", "local", "--pipeline", "--dry-run")
    assert proc.returncode == 2, proc.stderr
    assert "--pipeline" in proc.stderr and "--target vertex" in proc.stderr and "Traceback" not in proc.stderr


def test_the_catalog_lists_latest_tagged_images_with_dates():
    catalog = pipeline.load_catalog()
    assert set(catalog.frameworks) == {"tensorflow", "torch", "scikit-learn", "xgboost"}
    for entries in catalog.frameworks.values():
        for entry in entries:
            assert entry.support_ends <= entry.available_until
            for image in filter(None, (entry.cpu, entry.gpu)):
                assert image.endswith(entry.version.replace(".", "-"))
