"""TPU images and TPU VM jobs (issue 14, points 1 and 2): the data against the official client,
resolution to a Python base with the framework's TPU build, the image's launcher env, the job spec
parsed with google.cloud.aiplatform_v1, and every refusal as exit 2 naming the field."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from google.cloud import aiplatform_v1
from google.cloud.aiplatform_v1.types import AcceleratorType
from google.protobuf import json_format

from buildkit_py import api, cli
from buildkit_py.catalog.matrix import load_matrix
from buildkit_py.config import load_config
from buildkit_py.errors import ConfigError, ResolutionError
from buildkit_py.jobs import vertex
from buildkit_py.launcher.constants import EXPECT_GPUS_ENV, EXPECT_TPU_ENV, TPU_RUNTIME_ENV, TPU_TYPE_ENV
from buildkit_py.pipeline.plan import check_accelerator, make_plan

IMAGE = "us-central1-docker.pkg.dev/proj/repo/trainer:v1"
TRAINER = "trainer: {module: trainer.task}\n"


def configure(project, text: str):
    root = project({"buildkit.yaml": text + TRAINER, "trainer/__init__.py": "", "trainer/task.py": ""})
    return load_config(root / "buildkit.yaml", root)


def cli_run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def parse(resource: dict, cls=aiplatform_v1.CustomJob):
    """The official type's strict parser: an unknown or misspelled field fails."""
    message = cls.pb(cls())
    json_format.ParseDict(resource, message)
    return cls.wrap(message)


# --- data -------------------------------------------------------------------------------------


def test_tpu_names_match_the_official_enum():
    matrix = load_matrix()
    official = {a.name for a in AcceleratorType}
    for tpu in matrix.tpus.values():
        assert (tpu.name in official) == tpu.in_client, tpu.name
    assert {"TPU_V2", "TPU_V3", "TPU_V5_LITEPOD"} <= set(matrix.tpus)
    assert not set(matrix.tpus) & set(matrix.accelerators)  # a TPU is never taken for a GPU


def test_topologies_hold_the_machine_s_chips():
    for tpu in load_matrix().tpus.values():
        for machine in tpu.machines.values():
            if machine.topology:
                assert math.prod(map(int, machine.topology.split("x"))) == machine.chips, machine


# --- images -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "requirement", "python", "runtime", "companion"), [
    ("framework: jax==0.8.3\naccelerator: TPU_V5_LITEPOD\n", "jax[tpu]==0.8.3", "3.11",
     "/opt/venv/lib/python3.11/site-packages/libtpu/libtpu.so", None),
    ("framework: torch==2.8.0\naccelerator: TPU_V6E\n", "torch==2.8.0", "3.11",
     "/opt/venv/lib/python3.11/site-packages/libtpu/libtpu.so", "torch_xla[tpu]==2.8.1"),
    ("framework: tensorflow==2.20.0\naccelerator: TPU_V5_LITEPOD\n", "tensorflow-tpu==2.20.0", "3.11",
     "/lib/libtpu.so", None),
    ("framework: jax\naccelerator: TPU_V6E\n", "jax[tpu]==0.12.0.1", "3.12",
     "/opt/venv/lib/python3.12/site-packages/libtpu/libtpu.so", None),
])
def test_a_tpu_image_is_a_python_base_with_the_tpu_build(project, text, requirement, python, runtime, companion):
    plan = make_plan(configure(project, text))
    assert plan.base_kind == "tpu" and plan.template == "tpu.Dockerfile.j2"
    assert plan.base_image == f"python:{python}-slim-bookworm" and not plan.gpu
    assert plan.cuda is None and plan.cudnn is None and plan.min_driver is None
    assert plan.framework.requirement == requirement and not plan.framework.bundles_cuda
    env = dict(plan.launcher_env)
    assert env == {TPU_TYPE_ENV: plan.tpu, TPU_RUNTIME_ENV: runtime}
    assert plan.tpu_companion == companion and (companion is None or companion in plan.pip)
    if runtime == "/lib/libtpu.so":  # TensorFlow's: the wheel's libtpu linked where TensorFlow loads it
        assert plan.tpu_link == f"/opt/venv/lib/python{python}/site-packages/libtpu/libtpu.so"
    labels = dict(plan.labels)
    assert labels["dev.buildkit-py.tpu"] == plan.tpu and json.loads(labels["dev.buildkit-py.plan"])["tpu"] == plan.tpu


def test_torch_comes_from_the_cpu_index_on_a_tpu(project):
    plan = make_plan(configure(project, "framework: torch==2.9.0\naccelerator: TPU_V5_LITEPOD\n"))
    assert plan.framework.index_url == "https://download.pytorch.org/whl/cpu"  # not the CUDA wheels


def test_the_dockerfile_links_libtpu_for_tensorflow_only(capsys, project):
    for text, linked in (("framework: tensorflow==2.19.1\naccelerator: TPU_V6E\n", True),
                         ("framework: jax==0.8.3\naccelerator: TPU_V6E\n", False)):
        root = project({"buildkit.yaml": text + TRAINER, "trainer/__init__.py": "", "trainer/task.py": ""})
        code, out, err = cli_run(capsys, "dockerfile", "--dir", str(root))
        assert code == 0, err
        assert ("RUN ln -s /opt/venv/lib/python3.11/site-packages/libtpu/libtpu.so /lib/libtpu.so" in out) == linked
        assert "nvidia/cuda" not in out and f'{TPU_TYPE_ENV}="TPU_V6E"' in out


@pytest.mark.parametrize(("text", "fragments"), [
    # the service's documented floors, naming what works
    ("framework: jax==0.4.30\naccelerator: TPU_V6E\n", ["framework:", "jax >= 0.4.37", "0.12.0.1"]),
    ("framework: tensorflow==2.13.0\naccelerator: TPU_V5_LITEPOD\n", ["framework:", "tensorflow >= 2.15", "2.20.0, 2.19.1"]),
    ("framework: torch==2.7.0\naccelerator: TPU_V6E\npython: \"3.9\"\n", ["python:", "Python >= 3.10", "use 3.10, 3.11"]),
    # releases without a TPU build from the package index
    ("framework: tensorflow==2.18.0\naccelerator: TPU_V5_LITEPOD\n", ["framework:", "no TPU build", "2.20.0"]),
    ("framework: torch==2.15.0\naccelerator: TPU_V5_LITEPOD\n", ["framework:", "no TPU build", "2.9.0, 2.8.0, 2.7.0"]),
    ("framework: jax==nightly\naccelerator: TPU_V5_LITEPOD\n", ["framework:", "no nightly TPU build"]),
    # a GPU build asked for a TPU
    ("framework: jax\naccelerator: TPU_V5_LITEPOD\ngpu: true\n", ["gpu:", "is a TPU"]),
    ("framework: jax\naccelerator: TPU_V5_LITEPOD\ncuda: \"12.4\"\n", ["cuda:", "drop cuda"]),
    ("framework: jax\naccelerator: TPU_V5_LITEPOD\ncuda_flavor: devel\n", ["cuda_flavor:", "drop cuda_flavor"]),
    ("framework: torch==2.8.0+cu128\naccelerator: TPU_V5_LITEPOD\n", ["framework:", "cu128 build", "2.8.0"]),
    ("framework: jax\naccelerator: TPU_V5_LITEPOD\npip: [\"jax[cuda12]\"]\n", ["pip:", "'jax[cuda12]'", "CUDA build"]),
    ("framework: torch\naccelerator: TPU_V6E\nbase_image: nvidia/cuda:12.4.1-base-ubuntu22.04\n", ["base_image:"]),
    # frameworks without a TPU build leave the TPU unused
    ("framework: scikit-learn\naccelerator: TPU_V5_LITEPOD\n", ["framework:", "no TPU build", "jax, tensorflow, torch"]),
    ("framework: none\naccelerator: TPU_V2\n", ["framework:", "unused"]),
    # names
    ("framework: jax\naccelerator: TPU_V4_POD\n", ["accelerator:", "not offered", "TPU_V5_LITEPOD"]),
    ("framework: jax\naccelerator: TPU_V9\n", ["accelerator:", "'TPU_V9'", "TPU_V6E"]),
])
def test_impossible_tpu_images_exit_2_naming_what_works(capsys, project, text, fragments):
    root = project({"buildkit.yaml": text + TRAINER, "trainer/__init__.py": "", "trainer/task.py": ""})
    code, out, err = cli_run(capsys, "dockerfile", "--dir", str(root))
    assert code == 2, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_versions_lists_what_fits_a_tpu():
    v6e = api.versions("torch", "TPU_V6E").to_dict()["torch"]
    assert [r for s in v6e.values() for r in s["releases"]] == ["2.7.0", "2.8.0", "2.9.0"]
    assert v6e["2.7"]["python"] == ["3.10", "3.11"]  # 3.9 has a wheel; v6e needs 3.10+
    assert v6e["2.8"]["tpu"] == "torch + torch_xla[tpu]" and v6e["2.8"]["cuda"] == []
    tf = api.versions("tensorflow", "TPU_V5_LITEPOD").to_dict()["tensorflow"]
    assert [r for s in tf.values() for r in s["releases"]] == ["2.19.1", "2.20.0"]
    jax = api.versions("jax", "TPU_V5_LITEPOD").to_dict()["jax"]
    assert "0.5.0" not in jax["0.5"]["releases"] and "0.5.1" in jax["0.5"]["releases"]  # 0.5.0 needs libtpu-nightly
    assert api.versions("xgboost", "TPU_V5_LITEPOD").to_dict() == {"xgboost": {}}
    with pytest.raises(ResolutionError, match="not offered"):
        api.versions("jax", "TPU_V4_POD")


def test_versions_cli_on_a_tpu(capsys):
    code, out, err = cli_run(capsys, "versions", "tensorflow", "--accelerator", "TPU_V5_LITEPOD")
    assert code == 0, err
    assert "releases 2.20.0; TPU build tensorflow-tpu" in out and "CUDA" not in out


# --- jobs -------------------------------------------------------------------------------------


def make_job(project, text: str, **kwargs) -> vertex.VertexJob:
    config = configure(project, text)
    return vertex.build_job(config, config.job, **kwargs)


def env_of(pool) -> dict[str, str]:
    return {e.name: e.value for e in pool.container_spec.env}


def test_a_v5e_job_is_one_pool_one_replica_with_its_topology(project):
    job = make_job(project, f"framework: jax\naccelerator: TPU_V5_LITEPOD\njob:\n  image: {IMAGE}\n"
                            "  machine_type: ct5lp-hightpu-4t\n",
                   built=vertex.Built(check_accelerator=lambda a: check_accelerator(make_plan(configure(
                       project, "framework: jax\naccelerator: TPU_V5_LITEPOD\n")), a)))
    parsed = parse(job.resource)
    (pool,) = parsed.job_spec.worker_pool_specs
    assert pool.replica_count == 1
    assert pool.machine_spec.machine_type == "ct5lp-hightpu-4t" and pool.machine_spec.tpu_topology == "2x2"
    assert pool.machine_spec.accelerator_count == 0  # the machine type carries the chips
    assert env_of(pool)[EXPECT_TPU_ENV] == "4" and env_of(pool)[EXPECT_GPUS_ENV] == "0"
    assert (job.accelerator, job.accelerator_count, job.machine_type) == ("TPU_V5_LITEPOD", 4, "ct5lp-hightpu-4t")


def test_a_v2_job_names_the_accelerator_and_its_count(project):
    job = make_job(project, f"framework: jax\naccelerator: TPU_V2\njob:\n  image: {IMAGE}\n")
    (pool,) = parse(job.resource).job_spec.worker_pool_specs
    assert pool.machine_spec.machine_type == "cloud-tpu"
    assert pool.machine_spec.accelerator_type == AcceleratorType.TPU_V2 and pool.machine_spec.accelerator_count == 8
    assert pool.machine_spec.tpu_topology == "" and env_of(pool)[EXPECT_TPU_ENV] == "4"


def test_the_machine_type_alone_names_the_tpu(project):
    job = make_job(project, f"framework: jax\naccelerator: TPU_V6E\njob:\n  image: {IMAGE}\n"
                            "  machine_type: ct6e-standard-8t\n  accelerator_type: null\n")
    (pool,) = parse(job.resource).job_spec.worker_pool_specs
    assert pool.machine_spec.tpu_topology == "2x4" and env_of(pool)[EXPECT_TPU_ENV] == "8"


def test_a_tuning_job_on_a_tpu_parses(project):
    job = make_job(project, f"""framework: jax\naccelerator: TPU_V5_LITEPOD\njob:\n  image: {IMAGE}
hyperparameters:
  metric: loss
  goal: MINIMIZE
  max_trials: 4
  parallel_trials: 2
  params:
    - {{name: lr, type: DOUBLE, min: 0.001, max: 0.1, scale: log}}
""")
    parsed = parse(job.resource, aiplatform_v1.HyperparameterTuningJob)
    (pool,) = parsed.trial_job_spec.worker_pool_specs
    assert pool.machine_spec.tpu_topology == "1x1"


@pytest.mark.parametrize(("job_text", "field", "fragment"), [
    ("  replica_count: 2\n", "job.replica_count", "exactly one replica"),
    ("  workers: {replica_count: 1}\n", "job.workers", "exactly one worker pool"),
    ("  evaluators: {replica_count: 1}\n", "job.evaluators", "exactly one worker pool"),
    ("  reduction_server: {replica_count: 1}\n", "job.reduction_server", "exactly one worker pool"),
    ("  machine_type: ct5lp-hightpu-4t\n  tpu_topology: 4x4\n", "job.tpu_topology", "its topology is 2x2"),
    ("  machine_type: cloud-tpu\n", "job.machine_type", "ct5lp-hightpu-1t (1 chip, topology 1x1)"),
    ("  machine_type: ct5lp-hightpu-8t\n  accelerator_count: 8\n", "job.accelerator_count", "drop accelerator_count"),
])
def test_tpu_jobs_the_service_refuses_exit_2(project, job_text, field, fragment):
    with pytest.raises(ConfigError) as caught:
        make_job(project, f"framework: jax\naccelerator: TPU_V5_LITEPOD\njob:\n  image: {IMAGE}\n{job_text}")
    assert caught.value.exit_code == 2 and caught.value.field == field
    assert fragment in str(caught.value)


def test_topology_without_a_tpu_and_a_wrong_v2_count(project):
    with pytest.raises(ConfigError, match="goes with a TPU machine type"):
        make_job(project, f"framework: jax\njob:\n  image: {IMAGE}\n  tpu_topology: 2x2\n")
    with pytest.raises(ConfigError, match="takes accelerator_count 8"):
        make_job(project, f"framework: jax\naccelerator: TPU_V3\njob:\n  image: {IMAGE}\n  accelerator_count: 4\n")


@pytest.mark.parametrize(("text", "argv", "fragment"), [
    # the image is resolved for another TPU, or for a GPU
    ("framework: jax\naccelerator: TPU_V5_LITEPOD\n", ["--accelerator-type", "TPU_V6E"], "is built for TPU_V5_LITEPOD"),
    ("framework: torch==2.5.1\n", ["--accelerator-type", "TPU_V5_LITEPOD"], "has no TPU build (a GPU image)"),
    ("framework: jax\naccelerator: TPU_V5_LITEPOD\n", ["--accelerator-type", "NVIDIA_L4"], "is built for TPU_V5_LITEPOD"),
    ("framework: jax\naccelerator: TPU_V5_LITEPOD\njob:\n  tpu_topology: \"2x2\\n\"\n", [], "job.tpu_topology"),
])
def test_the_job_checks_the_image_s_tpu(capsys, project, text, argv, fragment):
    root = project({"buildkit.yaml": text + TRAINER, "trainer/__init__.py": "", "trainer/task.py": ""})
    code, out, err = cli_run(capsys, "job", "--dir", str(root), "--image", IMAGE, *argv)
    assert code == 2, err
    assert fragment in err and "Traceback" not in err


def test_the_job_cli_prints_a_tpu_spec(capsys, project):
    root = project({"buildkit.yaml": "framework: tensorflow==2.20.0\naccelerator: TPU_V6E\n" + TRAINER
                    + "job:\n  machine_type: ct6e-standard-4t\n", "trainer/__init__.py": "", "trainer/task.py": ""})
    code, out, err = cli_run(capsys, "job", "--dir", str(root), "--image", IMAGE)
    assert code == 0, err
    (pool,) = parse(yaml.safe_load(out)).job_spec.worker_pool_specs
    assert pool.machine_spec.tpu_topology == "2x2" and env_of(pool)[EXPECT_TPU_ENV] == "4"


def test_legacy_cloud_tpu_configs_are_refused_with_a_way_forward(capsys, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-8", "workerType": "cloud_tpu", "workerCount": 1,
        "workerConfig": {"acceleratorConfig": {"type": "TPU_V2", "count": 8}}}}))
    code, out, err = cli_run(capsys, "job", "--dir", str(tmp_path), "--from-aiplatform", str(path), "--image", IMAGE)
    assert code == 2, err
    assert "legacy Cloud TPU jobs" in err and "TPU_V5_LITEPOD" in err and "Traceback" not in err


def test_resolve_shows_the_tpu_build(capsys, project):
    root = project({"buildkit.yaml": "framework: torch==2.8.0\naccelerator: TPU_V5_LITEPOD\n" + TRAINER,
                    "trainer/__init__.py": "", "trainer/task.py": ""})
    code, out, err = cli_run(capsys, "resolve", "--dir", str(root))
    assert code == 0, err
    assert "TPU extra   torch_xla[tpu]==2.8.1" in out
    assert "libtpu      /opt/venv/lib/python3.11/site-packages/libtpu/libtpu.so" in out and "CUDA        none" in out


def test_preflight_reports_the_tpu_pairing(project):
    from buildkit_py.jobs.preflight import job_checks

    text = "framework: jax\naccelerator: TPU_V6E\n"
    checked = make_job(project, text + f"job:\n  image: {IMAGE}\n",
                       built=vertex.Built(check_accelerator=lambda a: check_accelerator(make_plan(configure(project, text)),
                                                                                        a)))
    unchecked = make_job(project, text + f"job:\n  image: {IMAGE}\n")  # an image not resolved from this config
    for job, ok, fragment in ((checked, True, "the image is resolved for TPU_V6E"),
                              (unchecked, None, "TPU build for TPU_V6E is not checked")):
        checks = {c.name: c for c in job_checks(job, project="p", region="us-central1", staging=None, console="u")}
        assert "ct6e-standard-1t with 1 x TPU_V6E chips (base_images/tpus.yaml)" in checks["machine"].detail
        assert checks["accelerator"].ok is ok and fragment in checks["accelerator"].detail
