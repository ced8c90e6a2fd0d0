"""The cluster contract against the documented CLUSTER_SPEC and TF_CONFIG shapes."""

from __future__ import annotations

import json

import pytest

from buildkit_py.launcher.cluster import ClusterError, job_dir, parse, torch_env

POOLS = {
    "workerpool0": ["chief-0:2222"],
    "workerpool1": ["worker-0:2222", "worker-1:2222", "worker-2:2222"],
    "workerpool2": ["ps-0:2222", "ps-1:2222"],
    "workerpool3": ["eval-0:2222"],
}


def vertex(task_type: str, index: int) -> dict[str, str]:
    spec = {"cluster": POOLS, "environment": "cloud", "task": {"type": task_type, "index": index, "trial": "1"},
            "job": json.dumps({"worker_pool_specs": []})}
    return {"CLUSTER_SPEC": json.dumps(spec)}


@pytest.mark.parametrize("task_type, index, rank", [
    ("workerpool0", 0, "0"), ("workerpool1", 0, "1"), ("workerpool1", 2, "3"),
])
def test_ranks_from_cluster_spec(task_type, index, rank):
    env = vertex(task_type, index)
    added, log = torch_env(parse(env), env)
    assert added == {"MASTER_ADDR": "chief-0", "MASTER_PORT": "2222", "WORLD_SIZE": "4", "RANK": rank}
    assert "of 4 ranks" in log[0]


@pytest.mark.parametrize("task_type, role", [("workerpool2", "server"), ("workerpool3", "evaluator")])
def test_servers_and_evaluators_are_not_ranks(task_type, role):
    env = vertex(task_type, 0)
    added, log = torch_env(parse(env), env)
    assert "RANK" not in added and "WORLD_SIZE" not in added and added["MASTER_ADDR"] == "chief-0"
    assert any(f"is a {role}, not a rank" in line for line in log)


def test_tf_config_with_chief_workers_ps_and_evaluator():
    tf = {"cluster": {"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"], "ps": ["p:2222"], "evaluator": ["e:2222"]},
          "task": {"type": "worker", "index": 1}, "environment": "cloud"}
    env = {"TF_CONFIG": json.dumps(tf)}
    added, _ = torch_env(parse(env), env)
    assert added == {"MASTER_ADDR": "c", "MASTER_PORT": "2222", "WORLD_SIZE": "3", "RANK": "2"}


def test_legacy_master_name_and_cluster_spec_preferred():
    tf = {"cluster": {"master": ["m:2222"], "worker": ["w:2222"]}, "task": {"type": "master", "index": 0}}
    env = {"TF_CONFIG": json.dumps(tf)}
    assert torch_env(parse(env), env)[0]["RANK"] == "0"
    both = {**vertex("workerpool1", 0), **env}
    assert parse(both).source == "CLUSTER_SPEC"


def test_already_set_variables_are_kept():
    env = {**vertex("workerpool1", 0), "MASTER_PORT": "29500", "RANK": "7"}
    added, log = torch_env(parse(env), env)
    assert "MASTER_PORT" not in added and "RANK" not in added and added["MASTER_ADDR"] == "chief-0"
    assert "kept as already set: MASTER_PORT, RANK" in log


def test_single_machine_sets_nothing():
    assert parse({}) is None and torch_env(None, {}) == ({}, [])


@pytest.mark.parametrize("raw, fragment", [
    ("not json", "not the documented JSON shape"),
    ('{"task": {"type": "workerpool0"}}', "not the documented JSON shape"),
    ('{"cluster": {}, "task": {"type": "bogus"}}', "unknown task type 'bogus'"),
])
def test_malformed_specs(raw, fragment):
    with pytest.raises(ClusterError, match=fragment):
        parse({"CLUSTER_SPEC": raw})


def test_job_dir_forms():
    assert job_dir(["--epochs", "3", "--job-dir", "gs://b/j"]) == "gs://b/j"
    assert job_dir(["--job-dir=gs://b/k"]) == "gs://b/k"
    assert job_dir(["--epochs", "3"]) is None
