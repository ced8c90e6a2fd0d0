"""--job-config: the file `gcloud ai custom-jobs create --config` or `gcloud ai hp-tuning-jobs create --config` takes,
as the job. Every result is parsed with the official aiplatform_v1 types (strict)."""

from __future__ import annotations

import json

import pytest
from google.cloud import aiplatform_v1

from buildkit_py import cli

IMAGE = "us-docker.pkg.dev/p/r/trainer:v1"
CONFIG = """\
framework: torch==2.5.1
accelerator: NVIDIA_TESLA_T4
trainer: {module: trainer.task}
job: {project: fake-project, labels: {team: ml}}
"""
CUSTOM = """\
# gcloud ai custom-jobs create --region=us-central1 --display-name=train --config=job.yaml
workerPoolSpecs:
  - machineSpec:
      machineType: n1-standard-8
      acceleratorType: NVIDIA_TESLA_T4
      acceleratorCount: 1
    replicaCount: 1
    diskSpec: {bootDiskType: pd-ssd, bootDiskSizeGb: 200}
    containerSpec:
      imageUri: ${IMAGE_URI}
      args: ["--epochs=3", "--data=${DATA}"]
      env: [{name: WANDB_MODE, value: offline}]
  - machineSpec: {machineType: n1-standard-8, acceleratorType: NVIDIA_TESLA_T4, acceleratorCount: 1}
    replicaCount: 2
    containerSpec: {imageUri: "${IMAGE_URI}", args: ["--epochs=3", "--data=${DATA}"]}
scheduling: {timeout: 7200s, strategy: SPOT}
serviceAccount: trainer@fake-project.iam.gserviceaccount.com
baseOutputDirectory: {outputUriPrefix: gs://bucket/out}
enableDashboardAccess: true
"""
TUNING = """\
studySpec:
  metrics: [{metricId: accuracy, goal: MAXIMIZE}]
  parameters:
    - {parameterId: lr, doubleValueSpec: {minValue: 0.0001, maxValue: 0.1}, scaleType: UNIT_LOG_SCALE}
    - {parameterId: layers, integerValueSpec: {minValue: 1, maxValue: 4}}
    - {parameterId: opt, categoricalValueSpec: {values: [adam, sgd]}}
  algorithm: RANDOM_SEARCH
maxTrialCount: 8
parallelTrialCount: 2
trialJobSpec:
  workerPoolSpecs:
    machineSpec: {machineType: n1-standard-4, acceleratorType: NVIDIA_TESLA_T4, acceleratorCount: 1}
    replicaCount: 1
    containerSpec: {imageUri: "{IMAGE_URI}", args: ["--steps=100"]}
"""


@pytest.fixture
def trainer(project):
    return project({"buildkit.yaml": CONFIG, "trainer/__init__.py": "", "trainer/task.py": "", "job.yaml": CUSTOM,
                    "hp.yaml": TUNING})


def job(capsys, root, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["job", "--dir", str(root), "--json", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_custom_job_file_is_the_job_with_the_image_built_and_its_placeholders_filled(capsys, trainer, monkeypatch):
    monkeypatch.setenv("DATA", "gs://bucket/data")
    monkeypatch.delenv("IMAGE_URI", raising=False)
    code, out, err = job(capsys, trainer, "--job-config", str(trainer / "job.yaml"), "--image", IMAGE)
    assert code == 0, err
    made = aiplatform_v1.CustomJob.from_json(out)
    pools = made.job_spec.worker_pool_specs
    assert [(p.machine_spec.machine_type, p.replica_count) for p in pools] == [("n1-standard-8", 1), ("n1-standard-8", 2)]
    assert pools[0].disk_spec.boot_disk_size_gb == 200 and pools[0].container_spec.image_uri == IMAGE
    assert list(pools[1].container_spec.args) == ["--epochs=3", "--data=gs://bucket/data"]
    assert {e.name: e.value for e in pools[0].container_spec.env}["WANDB_MODE"] == "offline"
    assert made.job_spec.scheduling.timeout.total_seconds() == 7200 and made.job_spec.scheduling.strategy.name == "SPOT"
    assert made.job_spec.base_output_directory.output_uri_prefix == "gs://bucket/out"
    assert made.labels["team"] == "ml"  # the local config fills what the file leaves out
    assert "not converted: enableDashboardAccess" in err and "DATA filled from the environment" in err


def test_flags_override_the_file(capsys, trainer, monkeypatch):
    monkeypatch.setenv("DATA", "d")
    code, out, err = job(capsys, trainer, "--job-config", str(trainer / "job.yaml"), "--image", IMAGE,
                         "--machine-type", "n1-highmem-16", "--strategy", "STANDARD", "--args=--epochs=9")
    assert code == 0, err
    made = aiplatform_v1.CustomJob.from_json(out)
    assert made.job_spec.worker_pool_specs[0].machine_spec.machine_type == "n1-highmem-16"
    assert made.job_spec.scheduling.strategy.name == "STANDARD"
    assert list(made.job_spec.worker_pool_specs[0].container_spec.args) == ["--epochs=9"]


def test_an_unset_placeholder_names_the_flag_that_replaces_it_at_its_line(capsys, trainer, monkeypatch):
    monkeypatch.delenv("IMAGE_URI", raising=False)
    monkeypatch.delenv("DATA", raising=False)
    code, out, err = job(capsys, trainer, "--job-config", str(trainer / "job.yaml"))
    assert code == 2 and "job.yaml:10:17: workerPoolSpecs[0].containerSpec.imageUri" in err and "pass --image" in err
    code, out, err = job(capsys, trainer, "--job-config", str(trainer / "job.yaml"), "--image", IMAGE)
    assert code == 2 and "job.yaml:11:" in err and "export DATA=" in err, err


def test_a_tuning_job_file_is_the_study_and_its_trial_job(capsys, trainer):
    code, out, err = job(capsys, trainer, "--job-config", str(trainer / "hp.yaml"), "--image", IMAGE)
    assert code == 0, err
    made = aiplatform_v1.HyperparameterTuningJob.from_json(out)
    assert made.max_trial_count == 8 and made.parallel_trial_count == 2
    assert made.study_spec.metrics[0].metric_id == "accuracy" and made.study_spec.algorithm.name == "RANDOM_SEARCH"
    params = {p.parameter_id: p for p in made.study_spec.parameters}
    assert params["lr"].scale_type.name == "UNIT_LOG_SCALE" and params["lr"].double_value_spec.max_value == 0.1
    assert list(params["opt"].categorical_value_spec.values) == ["adam", "sgd"]
    assert made.trial_job_spec.worker_pool_specs[0].container_spec.image_uri == IMAGE


@pytest.mark.parametrize("text, fragment", [
    ("workerPoolSpecs:\n  - machineSpec: {machineTyp: n1-standard-8}\n", "job.yaml:2:31: workerPoolSpecs[0].machineSpec."
                                                                          "machineTyp"),
    ("workerPoolSpecs:\n  - machineSpec: {machineType: n1}\n", "job.yaml:2:32"),
    ("workerPoolSpecs:\n  - machineSpec: {machineType: n1-standard-8}\n    replicaCount: 3\n", "pool 0 runs the one chief"),
    ("workerPoolSpecs: []\n", "one to 4 worker pool specs"),
    ("root:x:0:0:root:/root:/bin/bash\n", "the top level must be a mapping"),
    ("user: {name: root, shell: /bin/bash}\n", "not a gcloud job config"),
    ("studySpec: {metrics: []}\ntrialJobSpec: {workerPoolSpecs: [{machineSpec: {machineType: n1-standard-4}}]}\n",
     "one metric"),
])
def test_a_wrong_file_is_refused_at_its_line_in_one_line(capsys, trainer, text, fragment):
    (trainer / "job.yaml").write_text(text)
    code, out, err = job(capsys, trainer, "--job-config", str(trainer / "job.yaml"), "--image", IMAGE)
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert "root:/root" not in err  # parsed, never echoed


def test_one_job_file_at_a_time_and_no_pool_flags_beside_it(capsys, trainer):
    code, _, err = job(capsys, trainer, "--job-config", str(trainer / "hp.yaml"), "--from-aiplatform",
                       str(trainer / "job.yaml"), "--image", IMAGE)
    assert code == 2 and "not both" in err
    code, _, err = job(capsys, trainer, "--job-config", str(trainer / "hp.yaml"), "--image", IMAGE,
                       "--worker-pool-spec", "machine-type=n1-standard-4")
    assert code == 2 and "decides the job's pools" in err


def test_autopackage_takes_the_file_and_runs_the_image_it_builds(capsys, trainer, monkeypatch):
    monkeypatch.setenv("DATA", "d")
    monkeypatch.delenv("IMAGE_URI", raising=False)
    (trainer / "trainer" / "task.py").write_text("print('hi')\n")
    code = cli.main(["autopackage", str(trainer), "--target", "vertex", "--dry-run", "--json", "--image",
                     "us-docker.pkg.dev/p/r/trainer", "--job-config", str(trainer / "job.yaml")])
    out, err = capsys.readouterr()
    assert code == 0, err
    made = aiplatform_v1.CustomJob.from_json(json.dumps(json.loads(out)["job"]))
    assert made.job_spec.worker_pool_specs[1].replica_count == 2
    assert made.job_spec.worker_pool_specs[0].container_spec.image_uri.startswith("us-docker.pkg.dev/p/r/trainer:bk-")
