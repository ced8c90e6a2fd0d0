"""The job settings every job command takes (flags.JOB_FLAGS): defined once, the same through job, plan, submit and
autopackage and the Python API, checked by the config key's validator, hostile values refused naming the flag."""

from __future__ import annotations

import json

import pytest
import yaml
from google.cloud import aiplatform_v1
from test_submit import CONFIG as SUBMIT_CONFIG

import buildkit_py as bk
from buildkit_py import api, cli
from buildkit_py.errors import ConfigError
from buildkit_py.flags import JOB_FLAGS

IMAGE = "us-docker.pkg.dev/p/r/trainer:v1"
# test_submit's trainer, with an env label the flags override and a cluster they replace
CONFIG = SUBMIT_CONFIG.replace("labels: {team: ml}", "labels: {team: ml, env: dev}") + \
    '  replica_count: 4\n  args: ["--from-config"]\n'

# One good value per flag, as the command line takes it, and what it makes of the CustomJob
GOOD = {
    "machine_type": ("n1-highmem-8", lambda j: j.job_spec.worker_pool_specs[0].machine_spec.machine_type == "n1-highmem-8"),
    "accelerator_type": ("NVIDIA_L4", lambda j: j.job_spec.worker_pool_specs[0].machine_spec.accelerator_type.name == "NVIDIA_L4"),
    "accelerator_count": ("2", lambda j: j.job_spec.worker_pool_specs[0].machine_spec.accelerator_count == 2),
    "replica_count": ("3", lambda j: j.job_spec.worker_pool_specs[1].replica_count == 2),
    "worker_pool_specs": ("machine-type=n1-standard-8,accelerator-type=NVIDIA_TESLA_T4,accelerator-count=1",
                          lambda j: len(j.job_spec.worker_pool_specs) == 1),
    "args": ("--epochs=3,--lr,0.1", lambda j: list(j.job_spec.worker_pool_specs[0].container_spec.args) == [
        "--epochs=3", "--lr", "0.1"]),
    "processes_per_node": ("auto", lambda j: {"name": "BUILDKIT_PY_PROCESSES_PER_NODE", "value": "auto"} in [
        {"name": e.name, "value": e.value} for e in j.job_spec.worker_pool_specs[0].container_spec.env]),
    "strategy": ("SPOT", lambda j: j.job_spec.scheduling.strategy.name == "SPOT"),
    "max_wait_duration": ("30m", lambda j: j.job_spec.scheduling.max_wait_duration.total_seconds() == 1800),
    "timeout": ("2h", lambda j: j.job_spec.scheduling.timeout.total_seconds() == 7200),
    "service_account": ("trainer@fake-project.iam.gserviceaccount.com",
                        lambda j: j.job_spec.service_account == "trainer@fake-project.iam.gserviceaccount.com"),
    "network": ("projects/123/global/networks/vpc", lambda j: j.job_spec.network == "projects/123/global/networks/vpc"),
    "base_output_directory": ("gs://bucket/runs",
                              lambda j: j.job_spec.base_output_directory.output_uri_prefix == "gs://bucket/runs"),
    "labels": ("env=prod,owner=me", lambda j: (j.labels["env"], j.labels["owner"], j.labels["team"]) == (
        "prod", "me", "ml")),
}
API_VALUES = {"accelerator_count": 2, "replica_count": 3, "args": ("--epochs=3", "--lr", "0.1"),
              "worker_pool_specs": (GOOD["worker_pool_specs"][0],), "labels": {"env": "prod", "owner": "me"}}


@pytest.fixture
def trainer(project):
    return project({"buildkit.yaml": CONFIG, "trainer/__init__.py": "", "trainer/task.py": ""})


def cli_job(capsys, trainer, *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(["job", "--dir", str(trainer), "--image", IMAGE, "--json", *argv])
    except SystemExit as exc:  # argparse's refusal
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_the_table_covers_every_job_setting_and_names_each_jobs_key():
    assert set(GOOD) == {f.key for f in JOB_FLAGS}
    assert all(f.key in {x.name for x in api.JobOptions.__dataclass_fields__.values()} for f in JOB_FLAGS)


@pytest.mark.parametrize("key", sorted(GOOD))
def test_each_flag_sets_its_job_setting_through_the_cli_and_the_api_alike(capsys, trainer, key):
    flag = next(f.flag for f in JOB_FLAGS if f.key == key)
    value, check = GOOD[key]
    extra = ["--strategy=FLEX_START"] if key == "max_wait_duration" else []
    code, out, err = cli_job(capsys, trainer, f"{flag}={value}", *extra)
    assert code == 0, err
    job = aiplatform_v1.CustomJob.from_json(out)  # the official type: strict
    assert check(job), out
    through_api = bk.job(trainer, api.JobOptions(image=IMAGE, **{key: API_VALUES.get(key, value)},
                                                 **({"strategy": "FLEX_START"} if extra else {})))
    assert yaml.safe_load(through_api.text)["jobSpec"] == json.loads(out)["jobSpec"]


HOSTILE = ["x\ny", "a\u2028b", "z" * 70_000, "\udcff\udcfe", ""]


@pytest.mark.parametrize("key", sorted(set(GOOD) - {"args"}))
@pytest.mark.parametrize("value", HOSTILE, ids=["newline", "u2028", "70k", "invalid-utf8", "empty"])
def test_hostile_values_exit_2_naming_the_flag_on_one_bounded_line(capsys, trainer, key, value):
    flag = next(f for f in JOB_FLAGS if f.key == key)
    code, out, err = cli_job(capsys, trainer, f"{flag.flag}={value}")
    if value == "" and flag.form in ("labels", "list"):
        assert code == 0, err  # an empty list: no labels added
        return
    lines = err.strip().splitlines()
    assert code == 2 and flag.flag in lines[-1], err
    assert len(lines[-1]) < 1000 and "\u2028" not in err and "\udcff" not in err and "Traceback" not in err


@pytest.mark.parametrize("bad", [{"accelerator_count": "2"}, {"labels": ["env=prod"]}, {"args": "--epochs"},
                                 {"worker_pool_specs": "machine-type=n1-standard-8"}, {"timeout": 1.5}])
def test_the_api_refuses_a_wrong_type_naming_the_keyword(trainer, bad):
    with pytest.raises(ConfigError) as caught:
        bk.job(trainer, api.JobOptions(image=IMAGE, **bad))
    assert next(iter(bad)).replace("_", "") in caught.value.message.replace("_", "").replace("-", "") or \
        next(f.flag for f in JOB_FLAGS if f.key == next(iter(bad))) in caught.value.message


@pytest.mark.parametrize("specs, fragment", [
    (["machine-type=n1-standard-8,container-image-uri=gcr.io/x/y"], "runs the image it built"),
    (["machine-type=n1-standard-8,replica-count=2"], "pool 0 runs the one chief"),
    (["machine-type=n1-standard-8,machine-type=n1-standard-4"], "given twice"),
    (["machine-type=n1-standard-8,disk=1"], "KEY=VALUE with KEY one of"),
    ([""], "cannot be empty"),
    (["machine-type=n1-standard-8"] * 5, "give one to 4"),
])
def test_worker_pool_specs_in_gcloud_form_are_checked(capsys, trainer, specs, fragment):
    code, out, err = cli_job(capsys, trainer, *[f"--worker-pool-spec={s}" for s in specs])
    assert code == 2 and fragment in err and "--worker-pool-spec" in err, err


def test_worker_pool_specs_replace_the_configs_pools_in_vertex_order(capsys, trainer):
    code, out, err = cli_job(capsys, trainer, "--worker-pool-spec=machine-type=n1-standard-8",
                             "--worker-pool-spec=machine-type=n1-standard-4,replica-count=2",
                             "--worker-pool-spec=machine-type=n1-highmem-2,replica-count=1")
    assert code == 0, err
    pools = aiplatform_v1.CustomJob.from_json(out).job_spec.worker_pool_specs
    assert [(p.machine_spec.machine_type, p.replica_count) for p in pools] == [
        ("n1-standard-8", 1), ("n1-standard-4", 2), ("n1-highmem-2", 1)]


def test_autopackage_takes_the_same_flags(capsys, project):
    root = project({"buildkit.yaml": CONFIG, "trainer/__init__.py": "", "trainer/task.py": "print('hi')\n"})
    code = cli.main(["autopackage", str(root), "--target", "vertex", "--dry-run", "--json", "--image", IMAGE.split(":")[0],
                     "--machine-type", "n1-highmem-8", "--labels", "env=prod", "--strategy", "SPOT"])
    out, err = capsys.readouterr()
    assert code == 0, err
    job = aiplatform_v1.CustomJob.from_json(json.dumps(json.loads(out)["job"]))  # the official type: strict
    assert job.job_spec.worker_pool_specs[0].machine_spec.machine_type == "n1-highmem-8"
    assert job.job_spec.scheduling.strategy.name == "SPOT" and job.labels["env"] == "prod"
    code = cli.main(["autopackage", str(root), "--target", "vertex", "--dry-run", "--image", IMAGE.split(":")[0],
                     "--strategy", "CHEAP"])
    assert code == 2 and "--strategy" in capsys.readouterr().err
