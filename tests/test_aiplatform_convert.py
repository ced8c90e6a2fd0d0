"""`buildkit-py job --from-aiplatform config.yaml`: a legacy AI Platform Training config as the equivalent
Vertex AI job, parsed with the official aiplatform_v1 types; every field left behind is reported."""

from __future__ import annotations

import json

import pytest
import yaml
from google.cloud import aiplatform_v1
from google.protobuf import json_format

from buildkit_py import cli
from buildkit_py.catalog.matrix import load_matrix
from buildkit_py.catalog.reading import version_key
from buildkit_py.jobs.aiplatform import runtime_table
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


# ---------------------------------------------------------------------------------------------
# Issue 18 (legacy part) and issue 19 item 3: realistic legacy files in tests/data/legacy

LEGACY = REPO / "tests" / "data" / "legacy"
T4 = ("--machine-type", "n1-standard-8", "--accelerator-type", "NVIDIA_TESLA_T4", "--accelerator-count", "1")


def notes(err: str) -> list[str]:
    return [line.split("note: ", 1)[1] for line in err.splitlines() if "note: " in line]


def test_hyphenated_parameters_and_a_master_machine_from_flags(capsys):
    code, out, err = convert(capsys, LEGACY / "hptuning_config.yaml", "--image", IMAGE, *T4)
    assert code == 0, err
    job = strict(json.loads(out), aiplatform_v1.HyperparameterTuningJob)
    assert [p.parameter_id for p in job.study_spec.parameters] == ["first-layer-size", "num-layers", "scale-factor",
                                                                   "batch-size"]
    assert job.study_spec.parameters[2].scale_type.name == "UNIT_REVERSE_LOG_SCALE"
    (pool,) = job.trial_job_spec.worker_pool_specs
    assert (pool.machine_spec.machine_type, pool.machine_spec.accelerator_type.name,
            pool.machine_spec.accelerator_count) == ("n1-standard-8", "NVIDIA_TESLA_T4", 1)


def test_a_custom_tier_without_master_says_what_to_set(capsys):
    code, out, err = convert(capsys, LEGACY / "hptuning_config.yaml", "--image", IMAGE)
    assert code == 2
    assert "trainingInput.masterType" in err and "needs a master machine type" in err and "--machine-type" in err
    assert "None" not in err and "Traceback" not in err


def test_flags_override_the_files_machines_and_region(capsys):
    code, out, err = convert(capsys, LEGACY / "config_custom_container.yaml", "--machine-type", "n1-standard-16",
                             "--accelerator-count", "2", "--region", "europe-west4")
    assert code == 0, err
    job = strict(json.loads(out), aiplatform_v1.CustomJob)
    (pool,) = job.job_spec.worker_pool_specs
    assert (pool.machine_spec.machine_type, pool.machine_spec.accelerator_type.name,
            pool.machine_spec.accelerator_count) == ("n1-standard-16", "NVIDIA_TESLA_T4", 2)
    assert pool.container_spec.image_uri.endswith("trainers/census:v3")  # the file's own image


@pytest.mark.parametrize("local", [None, "gpu: false\nframework: none\ntrainer: {module: trainer.task}\n"],
                         ids=["empty-dir", "gpu-false-config"])
def test_a_legacy_gpu_job_is_judged_by_what_it_says(capsys, tmp_path, local):
    path = tmp_path / "config.yaml"
    path.write_text((LEGACY / "config_custom_container.yaml").read_text())
    if local is not None:
        (tmp_path / "buildkit.yaml").write_text(local + "job: {project: census-project, service_account: "
                                                "trainer@census-project.iam.gserviceaccount.com, machine_type: n1-highmem-2}\n")
        (tmp_path / "trainer").mkdir()
        (tmp_path / "trainer" / "task.py").write_text("")
    code, out, err = convert(capsys, path)
    assert code == 0, err
    job = strict(json.loads(out), aiplatform_v1.CustomJob)
    (pool,) = job.job_spec.worker_pool_specs
    # Machines, GPU and image are the legacy file's, whatever the local config says...
    assert (pool.machine_spec.machine_type, pool.machine_spec.accelerator_type.name) == ("n1-standard-8", "NVIDIA_TESLA_T4")
    assert pool.container_spec.image_uri == "us-central1-docker.pkg.dev/legacy-proj/trainers/census:v3"
    if local is None:
        assert not any("says otherwise" in n for n in notes(err))
    else:  # ...which only fills what the file leaves out, and its contradiction is a note
        assert job.job_spec.service_account == "trainer@census-project.iam.gserviceaccount.com"
        assert any("NVIDIA_TESLA_T4" in n and "gpu: false" in n for n in notes(err)), err
        # and plan does not call the GPU fit "ok" beside that note
        code = cli.main(["plan", "--dir", str(tmp_path), "--from-aiplatform", str(path), "--json",
                         "--skip-image-check"])
        out, err = capsys.readouterr()
        assert code == 0, err
        (fit,) = [c for c in json.loads(out)["checks"] if c["name"] == "accelerator"]
        assert fit["ok"] is None and "gpu: false" in fit["detail"], fit


def test_runtime_versions_give_the_framework_and_python_they_ran(capsys):
    code, out, err = convert(capsys, LEGACY / "config_runtime_2_11.yaml")
    assert code == 2 and "tensorflow==2.11 has no prebuilt training image" in err and "executor build" in err, err
    code, out, err = convert(capsys, LEGACY / "config_runtime_2_11.yaml", "--image", IMAGE)
    assert code == 0, err
    assert any("tensorflow==2.11.0 on Python 3.7" in n for n in notes(err)), err  # 2.11 read as written, not 2.1
    code, out, err = convert(capsys, LEGACY / "config_runtime_1_15.yaml", "--image", IMAGE)
    assert code == 0, err
    job = strict(json.loads(out), aiplatform_v1.CustomJob)
    assert job.job_spec.worker_pool_specs[0].machine_spec.accelerator_type.name == "NVIDIA_TESLA_T4"  # BASIC_GPU's K80
    assert any("tensorflow==1.15.5 on Python 3.7" in n for n in notes(err)), err


def test_an_image_flag_replaces_a_package_jobs_runtime_image(capsys):
    code, out, err = convert(capsys, LEGACY / "config_runtime_2_11.yaml", "--image", IMAGE)
    assert code == 0, err
    (pool,) = strict(json.loads(out), aiplatform_v1.CustomJob).job_spec.worker_pool_specs
    assert pool.container_spec.image_uri == IMAGE and not pool.python_package_spec.executor_image_uri
    assert list(pool.container_spec.args)[:2] == ["--train-steps", "1000"]


@pytest.mark.parametrize("name", ["batch size", "lr\u2028x", "a=b", "-lr", "", "x\u200b", "lr\tx", "x" * 70000])
def test_parameter_names_that_would_reshape_a_trial_command_line_exit_2(capsys, tmp_path, name):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"trainingInput": {"masterType": "n1-standard-4", "hyperparameters": {
        "goal": "MAXIMIZE", "params": [{"parameterName": name, "type": "INTEGER", "minValue": 1, "maxValue": 2}]}}},
        allow_unicode=True), encoding="utf-8")
    code, out, err = convert(capsys, path, "--image", IMAGE)
    assert code == 2, err
    assert "trainingInput.hyperparameters.params[0].parameterName" in err and "Traceback" not in err
    assert len(err) < 2000


def test_parameter_names_must_be_unique(capsys, tmp_path):
    path = tmp_path / "config.yaml"
    params = [{"parameterName": "batch-size", "type": "DISCRETE", "discreteValues": [1, 2]} for _ in range(2)]
    path.write_text(yaml.safe_dump({"trainingInput": {"hyperparameters": {"goal": "MAXIMIZE", "params": params}}}))
    code, out, err = convert(capsys, path, "--image", IMAGE)
    assert code == 2 and "given twice" in err, err


def test_our_own_hyperparameters_take_hyphenated_names(capsys, tmp_path):
    (tmp_path / "buildkit.yaml").write_text(yaml.safe_dump({"framework": "none", "job": {"image": IMAGE}, "hyperparameters": {
        "metric": "accuracy", "goal": "MAXIMIZE", "max_trials": 2, "parallel_trials": 1,
        "params": [{"name": "batch-size", "type": "DISCRETE", "values": [32, 64]}]}}))
    code = cli.main(["job", "--dir", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    job = strict(json.loads(out), aiplatform_v1.HyperparameterTuningJob)
    assert job.study_spec.parameters[0].parameter_id == "batch-size"


@pytest.mark.parametrize("value", ["a\nb", "a\u2028b", "x" * 70000, "\udcff\udcfe.yaml", "."])
def test_hostile_from_aiplatform_values_exit_2_naming_the_flag(capsys, tmp_path, value):
    for command in (["job"], ["plan", "--project", "census-project"], ["autopackage", "--dry-run", "--target", "local"]):
        code = cli.main([*command, "--dir", str(tmp_path), "--from-aiplatform", value])
        out, err = capsys.readouterr()
        assert code == 2, (command, err)
        assert "--from-aiplatform" in err and "Traceback" not in err and len(err) < 2000


@pytest.mark.parametrize("content", [b"trainingInput:\n  runtimeVersion: '2.11\\n'\n  masterType: standard\n",
                                     b"trainingInput:\n  pythonVersion: \"3.7\\u2028\"\n  runtimeVersion: '2.11'\n",
                                     b"trainingInput:\n  runtimeVersion: \xff\xfe\n",
                                     b"trainingInput:\n  runtimeVersion: [2, 11]\n  masterType: standard\n",
                                     b"trainingInput:\n  runtimeVersion: '" + b"9" * 70000 + b"'\n  masterType: standard\n"])
def test_hostile_runtime_and_python_versions_are_refused_or_inert(capsys, tmp_path, content):
    path = tmp_path / "config.yaml"
    path.write_bytes(content)
    code, out, err = convert(capsys, path, "--image", IMAGE)
    assert "Traceback" not in err and len(err) < 3000
    if code == 0:  # an unknown runtime is a note, shown escaped and cut
        assert "not in base_images/aiplatform_runtimes.yaml" in err and "\n'" not in err
    else:
        assert code == 2 and ("runtimeVersion" in err or "pythonVersion" in err or "config.yaml" in err), err


def autopackage_dry(capsys, root, legacy) -> tuple[int, dict | None, str]:
    code = cli.main(["autopackage", str(root), "--dry-run", "--target", "local", "--from-aiplatform", str(legacy), "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else None, err


def test_autopackage_builds_for_the_legacy_jobs_gpu_and_image(capsys, tmp_path):
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "__init__.py").write_text("")
    (tmp_path / "trainer" / "task.py").write_text("print('ok')\n")
    (tmp_path / "buildkit.yaml").write_text("gpu: false\nframework: none\n")
    code, result, err = autopackage_dry(capsys, tmp_path, LEGACY / "config_custom_container.yaml")
    assert code == 0, err
    assert result["plan"]["gpu"] is True, result["plan"]  # the job's T4, not the local gpu: false
    assert result["image"].startswith("us-central1-docker.pkg.dev/legacy-proj/trainers/census:")  # imageUri's repository
    assert "gpu: false" in err and "built for the job's GPU" in err


def tf_trainer(root) -> None:
    """The package layout `gcloud ai-platform jobs submit training --package-path trainer/` took."""
    (root / "trainer").mkdir()
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text("import tensorflow as tf\n")


def test_runtime_2_11_on_python_3_7_builds_with_3_8_and_says_why(capsys, tmp_path):
    tf_trainer(tmp_path)
    (tmp_path / "config.yaml").write_text((LEGACY / "config_runtime_2_11.yaml").read_text())
    code, result, err = autopackage_dry(capsys, tmp_path, tmp_path / "config.yaml")
    assert code == 0, err
    plan = result["plan"]
    assert plan["framework"]["version"] == "2.11.0" and plan["python"]["version"] == "3.8", plan
    assert any("on Python 3.7" in n and "Python >= 3.8" in n and "building with 3.8" in n for n in notes(err)), err


def test_runtime_1_15_on_a_gpu_builds_nvidias_tensorflow_1_15_and_says_why(capsys, tmp_path):
    """The GPU job of runtime 1.15 (Python 3.7): Google's 1.15 GPU wheels need CUDA 10.0 and Python 3.7, which no image
    can have; NVIDIA's TensorFlow 1.15 build for Python 3.8 and CUDA 12.1 serves the same code."""
    tf_trainer(tmp_path)
    (tmp_path / "config.yaml").write_text((LEGACY / "config_runtime_1_15.yaml").read_text())
    code, result, err = autopackage_dry(capsys, tmp_path, tmp_path / "config.yaml")
    assert code == 0 and "Traceback" not in err, err
    plan = result["plan"]
    assert plan["framework"]["requirement"] == "nvidia-tensorflow==1.15.5+nv23.3", plan["framework"]
    assert plan["framework"]["index_url"] == "https://pypi.ngc.nvidia.com" and plan["python"]["version"] == "3.8"
    assert plan["base_image"] == "nvidia/cuda:12.1.1-base-ubuntu20.04" and plan["gpu"] is True, plan
    assert plan["framework"]["replaces"] == ["tensorflow", "tensorflow-gpu", "tensorflow-cpu"]
    assert any("on Python 3.7" in n and "nvidia-tensorflow==1.15.5+nv23.3 are for Python 3.8" in n for n in notes(err)), err
    assert any("tensorflow==1.15.5 on a GPU: nvidia-tensorflow==1.15.5+nv23.3" in n and "CUDA 10.0" in n
               for n in plan["notes"]), plan["notes"]


@pytest.mark.parametrize("runtime,python", [(v, p) for v, row in runtime_table().items() for p in row["python"]])
def test_every_runtime_resolves_or_says_why_not(capsys, tmp_path, runtime, python):
    tf_trainer(tmp_path)
    legacy = yaml.safe_load((LEGACY / "config_runtime_2_11.yaml").read_text())
    legacy["trainingInput"].update(runtimeVersion=runtime, pythonVersion=python)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(legacy))
    code, result, err = autopackage_dry(capsys, tmp_path, tmp_path / "config.yaml")
    release = runtime_table()[runtime]["tensorflow"]
    assert f"tensorflow=={release} on Python {python}" in err, err
    if code == 0:  # the release, or on a GPU the build that stands for it (NVIDIA's TensorFlow 1.15)
        fw = load_matrix().framework("tensorflow")
        build = fw.gpu_series(next(s for s in fw.series if release in s.releases))
        assert result["plan"]["framework"]["version"] == (build.releases[0] if build else release), result["plan"]
        assert result["plan"]["gpu"] is True and version_key(result["plan"]["python"]["version"]) >= version_key("3.8")
    else:  # the version data's refusal, naming the release and what builds instead
        last = err.strip().splitlines()[-1]
        assert code == 2 and "Traceback" not in err and f"tensorflow=={release}" in last, err
        assert "nearest release that builds" in last or "gpu: false builds" in last, last


@pytest.mark.parametrize("tag", ["Taxi Model Accuracy", "acc\u2028x", "x" * 70000, 7])
def test_a_metric_tag_vertex_ai_cannot_take_names_the_legacy_field(capsys, tmp_path, tag):
    """AI Platform's sklearn hp_tuning sample reports 'Taxi Model Accuracy': Vertex AI's metric_id takes no whitespace."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"trainingInput": {"masterType": "n1-standard-4", "hyperparameters": {
        "goal": "MAXIMIZE", "hyperparameterMetricTag": tag,
        "params": [{"parameterName": "max-depth", "type": "INTEGER", "minValue": 1, "maxValue": 8}]}}},
        allow_unicode=True), encoding="utf-8")
    code, out, err = convert(capsys, path, "--image", IMAGE)
    assert code == 2, err
    assert "trainingInput.hyperparameters.hyperparameterMetricTag" in err and "Traceback" not in err
    assert "no whitespace" in err and "hyperparameter_metric_tag" in err and len(err) < 2000


def test_autopackage_runs_the_legacy_package_jobs_python_module(capsys, tmp_path):
    """A package job's config (pythonModule, packageUris, no runtime image wanted): autopackage's image runs that module."""
    (tmp_path / "census").mkdir()
    (tmp_path / "census" / "__init__.py").write_text("")
    (tmp_path / "census" / "train_main.py").write_text("import tensorflow as tf\n")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"trainingInput": {
        "scaleTier": "BASIC", "pythonModule": "census.train_main", "packageUris": ["gs://my-bucket/census-0.1.tar.gz"]}}))
    code, result, err = autopackage_dry(capsys, tmp_path, tmp_path / "config.yaml")
    assert code == 0, err  # no runtimeVersion is needed: no prebuilt runtime image runs it
    assert result["inferred"]["config_keys"]["trainer"] == {"module": "census.train_main"}
    assert result["inferred"]["trainer"] == "module census.train_main (trainingInput.pythonModule)"
    assert result["plan"]["entrypoint"][-2:] == ["-m", "census.train_main"]
    assert "the image autopackage builds runs the trainer" in err
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"trainingInput": {"pythonModule": "census.gone"}}))
    code, result, err = autopackage_dry(capsys, tmp_path, tmp_path / "config.yaml")
    assert code == 2 and "Traceback" not in err
    assert "'census.gone' (trainingInput.pythonModule) is not a module" in err and "'census/gone.py'" in err


PLACEHOLDER_JOB = """trainingInput:
  scaleTier: CUSTOM
  masterType: n1-standard-8
  masterConfig:
    imageUri: gcr.io/${PROJECT_ID}/census:${TAG}
  region: ${REGION}
  hyperparameters:
    goal: MAXIMIZE
    hyperparameterMetricTag: accuracy
    maxTrials: 4
    params:
      - parameterName: batch-size
        type: DISCRETE
        discreteValues: [256, 128, 64]
      - parameterName: use-dropout
        type: CATEGORICAL
        discreteValues: [true, false]
"""


def test_legacy_files_as_people_wrote_them(capsys, tmp_path, monkeypatch):
    """${VAR} placeholders the repository's script substituted, decreasing discreteValues, a CATEGORICAL parameter
    given discreteValues of YAML booleans."""
    path = tmp_path / "hptuning_config.yaml"
    path.write_text(PLACEHOLDER_JOB)
    for name in ("PROJECT_ID", "TAG", "REGION"):
        monkeypatch.delenv(name, raising=False)
    code, out, err = convert(capsys, path)
    assert code == 2 and "trainingInput.masterConfig.imageUri" in err and "${PROJECT_ID}" in err and "--image" in err, err
    code, out, err = convert(capsys, path, "--image", IMAGE, "--region", "europe-west4")  # flags replace what is unset
    assert code == 0, err
    job = strict(json.loads(out), aiplatform_v1.HyperparameterTuningJob)
    assert job.trial_job_spec.worker_pool_specs[0].container_spec.image_uri == IMAGE
    batch, dropout = job.study_spec.parameters
    assert list(batch.discrete_value_spec.values) == [64, 128, 256]
    assert list(dropout.categorical_value_spec.values) == ["True", "False"]
    assert "sorted to [64, 128, 256]" in err and "become the strings ['True', 'False']" in err
    assert "--use-dropout=VALUE" in err
    monkeypatch.setenv("PROJECT_ID", "census-proj")
    monkeypatch.setenv("TAG", "v7")
    monkeypatch.setenv("REGION", "us-east1")
    code, out, err = convert(capsys, path)  # set in the environment: expanded, said
    assert code == 0, err
    job = strict(json.loads(out), aiplatform_v1.HyperparameterTuningJob)
    assert job.trial_job_spec.worker_pool_specs[0].container_spec.image_uri == "gcr.io/census-proj/census:v7"
    assert "expanded from the environment" in err
    monkeypatch.delenv("REGION")
    code, _, err = convert(capsys, path)
    assert code == 2 and "trainingInput.region" in err and "export REGION=..., or pass --region" in err, err
