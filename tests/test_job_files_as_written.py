"""Job files as people wrote them: gcloud `--config` files (--job-config) and legacy AI Platform files
(--from-aiplatform) with what their authors' scripts filled in left unfilled. A flag fills or overrides any field,
placeholders included (`{IMAGE_URI}` unquoted is the YAML mapping {IMAGE_URI: null}), with a note naming what it
replaced; YAML null (every entry commented out) is empty where a list or a mapping belongs; a TrainingInput written
without its `trainingInput:` wrapper is read as the TrainingInput it is. Every job is parsed with the official
aiplatform_v1 types; every refusal is one line, exit 2, naming the field."""

from __future__ import annotations

import json

import pytest
from google.cloud import aiplatform_v1
from google.protobuf import json_format

from buildkit_py import cli
from conftest import run_cli

IMAGE = "us-docker.pkg.dev/p/r/trainer:v1"


def job(capsys, path, *argv: str, flag: str = "--job-config") -> tuple[int, str, str]:
    code = cli.main(["job", "--dir", str(path.parent), flag, str(path), "--json", "--name", "train", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def custom_job(out: str) -> aiplatform_v1.CustomJob:
    message = aiplatform_v1.CustomJob.pb(aiplatform_v1.CustomJob())
    json_format.ParseDict(json.loads(out), message)  # unknown or misspelled fields fail
    return aiplatform_v1.CustomJob.wrap(message)


def notes(err: str) -> list[str]:
    return [line.split("note: ", 1)[1] for line in err.splitlines() if line.startswith("note: ")]


def refused(code: int, err: str) -> str:
    """The one line of a refusal (exit 2, no traceback)."""
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


def pool_env(pool) -> dict[str, str]:
    return {e.name: e.value for e in pool.container_spec.env if not e.name.startswith("BUILDKIT_PY_")}


# ---------------------------------------------------------------------------------------------
# gcloud ai custom-jobs create --config

PLACEHOLDER = """\
# The repository's submit.sh: sed "s|{IMAGE_URI}|$IMAGE_URI|" job.yaml > /tmp/job.yaml
workerPoolSpecs:
  - machineSpec:
      machineType: n1-standard-8
      acceleratorType: NVIDIA_TESLA_T4
      acceleratorCount: 1
    replicaCount: 1
    containerSpec:
      imageUri: {IMAGE_URI}
      args: ["--epochs=3"]
"""


def test_an_unquoted_braced_placeholder_is_replaced_by_the_image_flag(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("IMAGE_URI", raising=False)
    path = tmp_path / "job.yaml"
    path.write_text(PLACEHOLDER)
    code, out, err = job(capsys, path, "--image", IMAGE)
    assert code == 0, err
    (pool,) = custom_job(out).job_spec.worker_pool_specs
    assert pool.container_spec.image_uri == IMAGE and list(pool.container_spec.args) == ["--epochs=3"]
    assert pool.machine_spec.accelerator_type.name == "NVIDIA_TESLA_T4"
    assert "workerPoolSpecs[0].containerSpec.imageUri: {IMAGE_URI} replaced by --image" in notes(err), err


def test_an_unquoted_braced_placeholder_is_filled_from_the_environment(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("IMAGE_URI", IMAGE)
    path = tmp_path / "job.yaml"
    path.write_text(PLACEHOLDER)
    code, out, err = job(capsys, path)
    assert code == 0, err
    assert custom_job(out).job_spec.worker_pool_specs[0].container_spec.image_uri == IMAGE
    assert any("IMAGE_URI filled from the environment" in n for n in notes(err)), err


def test_an_unset_placeholder_without_its_flag_names_the_variable_and_the_flag(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("IMAGE_URI", raising=False)
    path = tmp_path / "job.yaml"
    path.write_text(PLACEHOLDER)
    line = refused(*job(capsys, path)[::2])
    assert "job.yaml:9:17: workerPoolSpecs[0].containerSpec.imageUri" in line, line
    assert "IMAGE_URI" in line and "export IMAGE_URI=" in line and "pass --image" in line, line


@pytest.mark.parametrize("written", ["{MACHINE}", "${MACHINE}", "'{MACHINE}'"])
def test_any_scalar_placeholder_is_filled_by_its_flag(capsys, tmp_path, monkeypatch, written):
    monkeypatch.delenv("MACHINE", raising=False)
    path = tmp_path / "job.yaml"
    path.write_text(PLACEHOLDER.replace("machineType: n1-standard-8", f"machineType: {written}"))
    code, out, err = job(capsys, path, "--image", IMAGE, "--machine-type", "n1-standard-16")
    assert code == 0, err
    assert custom_job(out).job_spec.worker_pool_specs[0].machine_spec.machine_type == "n1-standard-16"
    shown = written.strip("'")
    assert f"workerPoolSpecs[0].machineSpec.machineType: {shown} replaced by --machine-type" in notes(err), err
    line = refused(*job(capsys, path, "--image", IMAGE)[::2])
    assert "workerPoolSpecs[0].machineSpec.machineType" in line and "MACHINE" in line and "--machine-type" in line


def test_a_value_the_file_wrote_is_replaced_by_the_flag_and_said(capsys, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(PLACEHOLDER.replace("{IMAGE_URI}", "us-docker.pkg.dev/p/r/old:v0")
                    + "scheduling: {strategy: SPOT}\nserviceAccount: old@p.iam.gserviceaccount.com\n")
    code, out, err = job(capsys, path, "--image", IMAGE, "--machine-type", "n1-highmem-16", "--strategy", "STANDARD",
                         "--service-account", "new@p.iam.gserviceaccount.com", "--args=--epochs=9")
    assert code == 0, err
    made = custom_job(out)
    (pool,) = made.job_spec.worker_pool_specs
    assert pool.container_spec.image_uri == IMAGE and pool.machine_spec.machine_type == "n1-highmem-16"
    assert list(pool.container_spec.args) == ["--epochs=9"] and made.job_spec.scheduling.strategy.name == "STANDARD"
    assert made.job_spec.service_account == "new@p.iam.gserviceaccount.com"
    said = notes(err)
    for fragment in ("workerPoolSpecs[0].containerSpec.imageUri: 'us-docker.pkg.dev/p/r/old:v0' replaced by --image",
                     "workerPoolSpecs[0].machineSpec.machineType: 'n1-standard-8' replaced by --machine-type",
                     "scheduling.strategy: 'SPOT' replaced by --strategy",
                     "serviceAccount: 'old@p.iam.gserviceaccount.com' replaced by --service-account",
                     "workerPoolSpecs[0].containerSpec.args: ['--epochs=3'] replaced by --args"):
        assert fragment in said, (fragment, said)


EMPTY_IMAGE = """\
workerPoolSpecs:
  - machineSpec: {machineType: n1-standard-8}
    replicaCount: 1
    containerSpec:
      imageUri:
      args: ["--epochs=3"]
"""


def test_an_empty_image_is_filled_by_the_image_flag(capsys, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(EMPTY_IMAGE)
    code, out, err = job(capsys, path, "--image", IMAGE)
    assert code == 0, err
    assert custom_job(out).job_spec.worker_pool_specs[0].container_spec.image_uri == IMAGE
    assert "workerPoolSpecs[0].containerSpec.imageUri: empty (YAML null); --image fills it" in notes(err), err


def test_an_empty_image_without_the_flag_says_what_is_allowed_and_the_flag(capsys, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(EMPTY_IMAGE)
    line = refused(*job(capsys, path)[::2])
    assert "job.yaml:5:" in line and "workerPoolSpecs[0].containerSpec.imageUri" in line, line
    assert "empty (YAML null) is not allowed: an image reference" in line and "pass --image" in line, line


def test_env_with_every_entry_commented_out_is_no_env(capsys, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(EMPTY_IMAGE.replace('      args: ["--epochs=3"]\n', "      env:\n        # - name: WANDB_MODE\n"
                                        "        #   value: offline\n      args: [--x]\n"))
    code, out, err = job(capsys, path, "--image", IMAGE)
    assert code == 0, err
    (pool,) = custom_job(out).job_spec.worker_pool_specs
    assert pool_env(pool) == {} and list(pool.container_spec.args) == ["--x"]


def test_null_args_are_no_args(capsys, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(EMPTY_IMAGE.replace('args: ["--epochs=3"]', "args:"))
    code, out, err = job(capsys, path, "--image", IMAGE)
    assert code == 0, err
    assert list(custom_job(out).job_spec.worker_pool_specs[0].container_spec.args) == []


POOL = "workerPoolSpecs:\n  - machineSpec: {machineType: n1-standard-8}\n"
WITH_IMAGE = POOL + f"    containerSpec: {{imageUri: {IMAGE}}}\n"


@pytest.mark.parametrize("text", [
    WITH_IMAGE + "    diskSpec:\n", WITH_IMAGE + "scheduling:\n", WITH_IMAGE + "baseOutputDirectory:\n",
    WITH_IMAGE + "serviceAccount:\nnetwork:\n", WITH_IMAGE + "    replicaCount:\n",
    POOL + f"    containerSpec:\n      imageUri: {IMAGE}\n      command:\n      env:\n        - {{name: A}}\n"
           "        - {name: B, value: }\n",
], ids=["diskSpec", "scheduling", "baseOutputDirectory", "serviceAccount-network", "replicaCount", "command-env"])
def test_null_lists_and_mappings_are_empty_and_null_optional_scalars_unset(capsys, tmp_path, text):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    code, out, err = job(capsys, path)
    assert code == 0, err
    made = custom_job(out)
    (pool,) = made.job_spec.worker_pool_specs
    assert pool.container_spec.image_uri == IMAGE and pool.replica_count == 1 and not made.job_spec.service_account
    if "env" in text:
        assert pool_env(pool) == {"A": "", "B": ""} and list(pool.container_spec.command) == []


def test_a_tuning_file_with_null_labels_and_a_placeholder_name(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("RUN", raising=False)
    path = tmp_path / "hp.yaml"
    path.write_text("displayName: {RUN}\nlabels:\nstudySpec:\n  metrics: [{metricId: accuracy, goal: MAXIMIZE}]\n"
                    "  parameters:\n    - {parameterId: lr, doubleValueSpec: {minValue: 0.001, maxValue: 0.1}}\n"
                    "maxTrialCount: 4\ntrialJobSpec:\n  workerPoolSpecs:\n    machineSpec: {machineType: n1-standard-4}\n"
                    "    containerSpec: {imageUri: {IMAGE_URI}}\n")
    code, out, err = job(capsys, path, "--image", IMAGE)  # --name train is given: it fills displayName
    assert code == 0, err
    made = aiplatform_v1.HyperparameterTuningJob.from_json(out)
    assert made.display_name == "train" and made.max_trial_count == 4
    assert made.trial_job_spec.worker_pool_specs[0].container_spec.image_uri == IMAGE
    assert "displayName: {RUN} replaced by --name" in notes(err), err


def test_a_placeholder_where_a_mapping_belongs_stays_a_mapping(capsys, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("workerPoolSpecs:\n  - machineSpec: {MACHINE_SPEC}\n    containerSpec: {imageUri: " + IMAGE + "}\n")
    line = refused(*job(capsys, path)[::2])
    assert "workerPoolSpecs[0].machineSpec.MACHINE_SPEC" in line and "is not a field here" in line, line


# ---------------------------------------------------------------------------------------------
# gcloud ai-platform jobs submit training --config (legacy AI Platform)

TRAINING_INPUT = """\
scaleTier: CUSTOM
masterType: n1-standard-8
masterConfig:
  acceleratorConfig:
    count: 1
    type: NVIDIA_TESLA_T4
workerCount: 2
args: [--epochs, "3", --batch-size, "64"]
region: us-central1
"""
WRAPPED = "trainingInput:\n" + "".join(f"  {line}\n" for line in TRAINING_INPUT.splitlines())


def test_an_unwrapped_training_input_is_the_same_job_as_the_wrapped_one(capsys, tmp_path):
    (tmp_path / "wrapped.yaml").write_text(WRAPPED)
    (tmp_path / "unwrapped.yaml").write_text(TRAINING_INPUT)
    code, wrapped, err = job(capsys, tmp_path / "wrapped.yaml", "--image", IMAGE, flag="--from-aiplatform")
    assert code == 0, err
    assert not any("wrapper" in n for n in notes(err))
    code, unwrapped, err = job(capsys, tmp_path / "unwrapped.yaml", "--image", IMAGE, flag="--from-aiplatform")
    assert code == 0, err
    assert json.loads(unwrapped) == json.loads(wrapped)
    assert any("a TrainingInput without its trainingInput: wrapper" in n and "read as the trainingInput it is" in n
               for n in notes(err)), err
    pools = custom_job(unwrapped).job_spec.worker_pool_specs
    assert [p.replica_count for p in pools] == [1, 2]
    assert pools[0].machine_spec.accelerator_type.name == "NVIDIA_TESLA_T4" and pools[0].machine_spec.accelerator_count == 1
    assert list(pools[0].container_spec.args) == ["--epochs", "3", "--batch-size", "64"]


def test_an_unwrapped_package_job_keeps_its_runtime_and_python(capsys, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("scaleTier: BASIC_GPU\nruntimeVersion: '2.11'\npythonVersion: '3.7'\npythonModule: trainer.task\n"
                    "packageUris: [gs://bkt/trainer-0.1.tar.gz]\nhyperparameters:\n  goal: MAXIMIZE\n"
                    "  hyperparameterMetricTag: accuracy\n  maxTrials: 2\n  params:\n"
                    "    - {parameterName: lr, type: DOUBLE, minValue: 0.001, maxValue: 0.1, scaleType: UNIT_LOG_SCALE}\n")
    code, out, err = job(capsys, path, "--image", IMAGE, flag="--from-aiplatform")
    assert code == 0, err
    made = aiplatform_v1.HyperparameterTuningJob.from_json(out)
    assert made.study_spec.parameters[0].parameter_id == "lr" and made.max_trial_count == 2
    assert any("tensorflow==2.11.0 on Python 3.7" in n for n in notes(err)), err  # '2.11' as written, not 2.1


@pytest.mark.parametrize("text, fragments", [
    ("user: {name: root, shell: /bin/bash}\n", ["not an AI Platform Training config"]),
    ("jobId: x\nlabels: {team: ml}\n", ["not an AI Platform Training config"]),
    ("", ["not an AI Platform Training config"]),
    ("workerPoolSpecs: [{machineSpec: {machineType: n1-standard-8}}]\n",
     ["not an AI Platform Training config", "--job-config"]),
    # a Vertex AI job file with TrainingInput's names beside its own (args): refused, not read as a plain job
    ("args: [--epochs, '3']\nworkerPoolSpecs:\n  - machineSpec: {machineType: a2-highgpu-1g}\n",
     ["workerPoolSpecs is a Vertex AI job's field", "pass it as --job-config", "config.yaml:3:"]),
    ("studySpec: {metrics: []}\nscaleTier: BASIC\n", ["studySpec is a Vertex AI job's field"]),
    ("trainingInput:\n  scaleTier: BASIC\nmasterType: n1-standard-8\n",
     ["trainingInput", "masterType stand at the top level beside trainingInput", "under trainingInput"]),
    ("trainingInput:\nscaleTier: CUSTOM\nmasterType: n1-standard-8\n",
     ["scaleTier, masterType", "beside trainingInput (which is empty)", "config.yaml:2:"]),
])
def test_a_file_that_is_neither_or_mixes_both_is_refused(capsys, tmp_path, text, fragments):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    line = refused(*job(capsys, path, "--image", IMAGE, flag="--from-aiplatform")[::2])
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert "/bin/bash" not in line  # parsed, never echoed


def test_legacy_placeholders_and_values_are_replaced_by_flags(capsys, tmp_path, monkeypatch):
    for name in ("IMAGE_URI", "REGION"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "config.yaml"
    path.write_text(WRAPPED.replace("  region: us-central1\n", "  region: {REGION}\n")
                    .replace("  masterConfig:\n", "  masterConfig:\n    imageUri: {IMAGE_URI}\n"))
    line = refused(*job(capsys, path, flag="--from-aiplatform")[::2])
    assert "trainingInput.masterConfig.imageUri" in line and "IMAGE_URI" in line and "pass --image" in line, line
    code, out, err = job(capsys, path, "--image", IMAGE, "--region", "europe-west4", "--machine-type", "n1-highmem-8",
                         "--accelerator-type", "NVIDIA_TESLA_V100", flag="--from-aiplatform")
    assert code == 0, err
    made = custom_job(out)
    chief = made.job_spec.worker_pool_specs[0]
    assert chief.container_spec.image_uri == IMAGE and chief.machine_spec.machine_type == "n1-highmem-8"
    assert chief.machine_spec.accelerator_type.name == "NVIDIA_TESLA_V100" and chief.machine_spec.accelerator_count == 1
    said = notes(err)
    for fragment in ("trainingInput.masterConfig.imageUri: {IMAGE_URI} replaced by --image",
                     "trainingInput.region: {REGION} replaced by --region",
                     "trainingInput.masterType: 'n1-standard-8' replaced by --machine-type",
                     "trainingInput.masterConfig.acceleratorConfig.type: 'NVIDIA_TESLA_T4' replaced by --accelerator-type"):
        assert fragment in said, (fragment, said)


def test_legacy_nulls_are_empty_or_unset(capsys, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("jobId:\nlabels:\ntrainingInput:\n  scaleTier: BASIC\n  masterConfig:\n  args:\n  region:\n"
                    "  scheduling:\n  runtimeVersion:\n")
    code, out, err = job(capsys, path, "--image", IMAGE, flag="--from-aiplatform")
    assert code == 0, err
    (pool,) = custom_job(out).job_spec.worker_pool_specs
    assert pool.machine_spec.machine_type == "n1-standard-4" and list(pool.container_spec.args) == []


def test_a_legacy_empty_image_and_an_empty_master_machine(capsys, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("trainingInput:\n  scaleTier: CUSTOM\n  masterType:\n  masterConfig:\n    imageUri:\n")
    line = refused(*job(capsys, path, "--machine-type", "n1-standard-8", flag="--from-aiplatform")[::2])
    assert "trainingInput.masterConfig.imageUri" in line and "empty (YAML null) is not allowed" in line, line
    assert "pass --image" in line, line
    line = refused(*job(capsys, path, "--image", IMAGE, flag="--from-aiplatform")[::2])
    assert "trainingInput.masterType" in line and "(it is empty)" in line and "--machine-type" in line, line
    code, out, err = job(capsys, path, "--image", IMAGE, "--machine-type", "n1-standard-8", flag="--from-aiplatform")
    assert code == 0, err
    assert custom_job(out).job_spec.worker_pool_specs[0].machine_spec.machine_type == "n1-standard-8"
    said = notes(err)
    assert "trainingInput.masterConfig.imageUri: empty (YAML null); --image fills it" in said, said
    assert "trainingInput.masterType: empty (YAML null); --machine-type fills it" in said, said


# ---------------------------------------------------------------------------------------------
# The real command line


def test_the_command_line_takes_a_placeholder_file_and_refuses_a_bad_one(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(PLACEHOLDER)
    proc = run_cli("job", "--dir", str(tmp_path), "--job-config", str(path), "--image", IMAGE, "--json")
    assert proc.returncode == 0, proc.stderr
    assert custom_job(proc.stdout).job_spec.worker_pool_specs[0].container_spec.image_uri == IMAGE
    assert "{IMAGE_URI} replaced by --image" in proc.stderr
    proc = run_cli("job", "--dir", str(tmp_path), "--job-config", str(path), "--json")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "IMAGE_URI" in proc.stderr and "--image" in proc.stderr
    (tmp_path / "config.yaml").write_text("trainingInput:\nscaleTier: CUSTOM\n")
    proc = run_cli("job", "--dir", str(tmp_path), "--from-aiplatform", str(tmp_path / "config.yaml"), "--image", IMAGE)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "beside trainingInput" in proc.stderr, proc.stderr
