"""`buildkit-py job --from-aiplatform config.yaml`: a legacy AI Platform Training config as the equivalent
Vertex AI job, parsed with the official aiplatform_v1 types; every field left behind is reported."""

from __future__ import annotations

import json

import pytest
import yaml
from google.cloud import aiplatform_v1
from google.protobuf import json_format

from buildkit_py import cli
from conftest import REPO

IMAGE = "us-central1-docker.pkg.dev/proj/repo/trainer:v1"
SAMPLE = REPO / "examples" / "legacy" / "config.yaml"


def convert(capsys, path, *extra: str) -> tuple[int, str, str]:
    code = cli.main(["job", "--dir", str(path.parent), "--from-aiplatform", str(path), "--json", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def strict(resource: dict, cls):
    message = cls.pb(cls())
    json_format.ParseDict(resource, message)  # unknown or misspelled fields fail
    return cls.wrap(message)


def test_the_sample_converts_to_a_tuning_job(capsys):
    code, out, err = convert(capsys, SAMPLE, "--image", IMAGE)
    assert code == 0, err
    job = strict(json.loads(out), aiplatform_v1.HyperparameterTuningJob)
    assert job.display_name == "census_training"
    assert job.labels["team"] == "forecasting"
    study = job.study_spec
    assert study.metrics[0].metric_id == "accuracy" and study.algorithm.name == "RANDOM_SEARCH"
    assert [(p.parameter_id, p.scale_type.name) for p in study.parameters] == [
        ("learning_rate", "UNIT_LOG_SCALE"), ("hidden_layers", "UNIT_LINEAR_SCALE"),
        ("optimizer", "SCALE_TYPE_UNSPECIFIED"), ("batch_size", "SCALE_TYPE_UNSPECIFIED")]
    assert list(study.parameters[2].categorical_value_spec.values) == ["adam", "sgd"]
    assert (job.max_trial_count, job.parallel_trial_count, job.max_failed_trial_count) == (8, 2, 2)
    pools = job.trial_job_spec.worker_pool_specs
    assert [p.replica_count for p in pools] == [1, 2, 1]
    assert pools[0].machine_spec.accelerator_type.name == "NVIDIA_TESLA_T4"
    assert pools[2].machine_spec.machine_type == "n1-standard-4"  # legacy "standard"
    args = list(pools[0].container_spec.args)
    assert args[-2:] == ["--job-dir", "gs://census-bucket/jobs/census_training"]  # the trainer keeps its --job-dir
    assert job.trial_job_spec.base_output_directory.output_uri_prefix == "gs://census-bucket/jobs/census_training"
    assert job.trial_job_spec.scheduling.timeout.total_seconds() == 7200
    left = [line for line in err.splitlines() if line.startswith("not converted: ")]
    assert [line.split(":")[1].strip() for line in left] == [
        "trainingInput.scheduling.maxWaitTime", "trainingInput.useChiefInTfConfig",
        "trainingInput.hyperparameters.enableTrialEarlyStopping"]


def test_scale_tiers_packages_and_retired_gpus(capsys, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"trainingInput": {
        "scaleTier": "STANDARD_1", "region": "europe-west4", "packageUris": ["gs://bkt/trainer-0.1.tar.gz"],
        "pythonModule": "trainer.task", "runtimeVersion": "2.13", "pythonVersion": "3.7",
        "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_K80", "count": 1}},
        "encryptionConfig": {"kmsKeyName": "k"}}}))
    code, out, err = convert(capsys, path)
    assert code == 0, err
    job = strict(json.loads(out), aiplatform_v1.CustomJob)
    pools = job.job_spec.worker_pool_specs
    assert [p.replica_count for p in pools] == [1, 4, 3]
    assert pools[0].machine_spec.accelerator_type.name == "NVIDIA_TESLA_T4"  # K80 retired
    assert pools[0].python_package_spec.python_module == "trainer.task"
    assert "tf-gpu.2-13" in pools[0].python_package_spec.executor_image_uri  # Google's prebuilt image (the catalog)
    assert "europe-docker.pkg.dev" in pools[0].python_package_spec.executor_image_uri  # the region's repository
    assert "K80 is retired" in err and "encryptionConfig" in err
    path.write_text(path.read_text().replace("'2.13'", "'1.15'"))
    code, out, err = convert(capsys, path)
    assert code == 2 and "job.python_package.executor" in err and "tensorflow==1.15" in err


def test_basic_tier_is_one_cpu_machine(capsys, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("trainingInput:\n  scaleTier: BASIC\n  masterConfig: {imageUri: " + IMAGE + "}\n  args: [--x, '1']\n")
    code, out, err = convert(capsys, path)
    assert code == 0, err
    job = strict(json.loads(out), aiplatform_v1.CustomJob)
    (pool,) = job.job_spec.worker_pool_specs
    assert pool.machine_spec.machine_type == "n1-standard-4" and pool.machine_spec.accelerator_count == 0
    assert pool.container_spec.image_uri == IMAGE and list(pool.container_spec.args) == ["--x", "1"]


@pytest.mark.parametrize("training_input, fragment", [
    ({"scaleTier": "BASIC_TPU"}, "scaleTier"),
    ({"scaleTier": "CUSTOM"}, "masterType"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-8", "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4",
                                                                                                 "count": 3}}},
     "counts 1, 2, 4"),
    ({"masterType": "n1-standard-4", "region": "Mars"}, "job.region"),
    ({"hyperparameters": {"goal": "MAXIMIZE", "params": [{"parameterName": "a", "type": "FLOAT"}]}}, "DOUBLE"),
    ({"masterType": "standard", "masterConfig": {"imageUri": "127.0.0.1:5000/t:v1"}}, "cannot reach"),
    ("not a mapping", "trainingInput"),
])
def test_bad_legacy_configs_exit_2_naming_the_field(capsys, tmp_path, training_input, fragment):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"trainingInput": training_input}))
    code, out, err = convert(capsys, path, "--image", IMAGE) if "imageUri" not in str(training_input) else convert(capsys, path)
    assert code == 2, err
    assert fragment in err and "Traceback" not in err
