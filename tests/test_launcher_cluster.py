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
    assert f"{task_type} ({role}) takes no rank: RANK and WORLD_SIZE are not set" in log


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


GOOD_POOLS = '"cluster": {"workerpool0": ["chief-0:2222"], "workerpool1": ["w-0:2222"]}'


def spec(task: str, cluster: str = GOOD_POOLS) -> str:
    return "{" + cluster + ', "task": ' + task + "}"


# Every malformed shape fails with the field and what is allowed, never a traceback.
@pytest.mark.parametrize("raw, fragment", [
    ("not json", "CLUSTER_SPEC: 'not json' is not JSON"),
    ("[" * 100_000, "is not JSON"),  # deeper than the parser recurses
    (spec('{"type": "workerpool0", "index": ' + "1" * 5000 + "}"), "is not JSON"),  # over int()'s digit limit
    ("[1]", "CLUSTER_SPEC: [1] is not a JSON object"),
    ('"x"', "CLUSTER_SPEC: 'x' is not a JSON object"),
    (spec('{"type": "workerpool0"}', '"cluster": null'), "CLUSTER_SPEC: cluster: None is not an object; allowed: "),
    (spec('{"type": "workerpool0"}', '"cluster": ["a:1"]'), "cluster: ['a:1'] is not an object"),
    ('{"task": {"type": "workerpool0"}}', "cluster: None is not an object"),
    (spec('{"type": "workerpool0"}', '"cluster": {"workerpool0": "a:1"}'),
     "cluster.workerpool0: 'a:1' is not a pool; allowed: a list of 'host:port' strings"),
    (spec('{"type": "workerpool0"}', '"cluster": {"workerpool0": [1]}'), "cluster.workerpool0: [1] is not a pool"),
    (spec('{"type": "workerpool0"}', '"cluster": {"workerpool0": [["a:1"]]}'), "is not a pool"),
    (spec('{"type": "workerpool0"}', '"cluster": {"workerpool0": ["a:1"], "ps": {"a": 1}}'), "cluster.ps: {'a': 1}"),
    (spec('{"type": "workerpool0"}', '"cluster": {"workerpool0": ["chief-0"]}'),
     "cluster.workerpool0[0]: 'chief-0' is not an address; allowed: 'host:port' with a port of 1-65535"),
    (spec('{"type": "workerpool0"}', '"cluster": {"workerpool0": ["a:1", "b:x"]}'), "cluster.workerpool0[1]: 'b:x'"),
    (spec('{"type": "workerpool0"}', '"cluster": {"workerpool0": ["a:0"]}'), "'a:0' is not an address"),
    (spec('{"type": "workerpool0"}', '"cluster": {"workerpool0": ["a:65536"]}'), "'a:65536' is not an address"),
    (spec('{"type": "workerpool0"}', '"cluster": {"workerpool0": ["a:\u00b2"]}'), "'a:²' is not an address"),
    (spec('{"type": "workerpool0"}', '"cluster": {"workerpool0": [":2222"]}'), "':2222' is not an address"),
    (spec('"x"'), "CLUSTER_SPEC: task: 'x' is not an object; allowed: "),
    (spec("null"), "task: None is not an object"),
    (GOOD_POOLS.join("{}"), "task: None is not an object"),
    (spec('{"index": 0}'), "task.type: None is not a task type; allowed: chief, evaluator, master, ps, "),
    (spec('{"type": 5}'), "task.type: 5 is not a task type"),
    (spec('{"type": "bogus"}'), "task.type: 'bogus' is not a task type"),
    (spec('{"type": "workerpool0", "index": 1e400}'), "task.index: inf is not an index; allowed: an integer >= 0"),
    (spec('{"type": "workerpool0", "index": true}'), "task.index: True is not an index"),
    (spec('{"type": "workerpool0", "index": false}'), "task.index: False is not an index"),
    (spec('{"type": "workerpool0", "index": -1}'), "task.index: -1 is not an index"),
    (spec('{"type": "workerpool0", "index": 0.0}'), "task.index: 0.0 is not an index"),
    (spec('{"type": "workerpool0", "index": "1\u00b2"}'), "task.index: '1²' is not an index"),
    (spec('{"type": "workerpool0", "index": null}'), "task.index: None is not an index"),
    (spec('{"type": "workerpool1", "index": 1}'), "task.index: 1 is beyond cluster.workerpool1; allowed: 0-0"),
    (spec('{"type": "workerpool2", "index": 0}'),
     "task.type: 'workerpool2' has no pool in cluster; pools: workerpool0, workerpool1"),
    (spec('{"type": "workerpool0", "index": 0}', '"cluster": {"workerpool0": []}'),
     "task.index: 0 is beyond cluster.workerpool0; allowed: none, the pool is empty"),
])
@pytest.mark.parametrize("source", ["CLUSTER_SPEC", "TF_CONFIG"])
def test_malformed_specs(source, raw, fragment):
    with pytest.raises(ClusterError) as caught:
        parse({source: raw})
    assert fragment.replace("CLUSTER_SPEC", source) in str(caught.value)
    assert len(str(caught.value)) < 400


def test_index_as_digit_string_as_tensorflow_reads_it():
    env = {"CLUSTER_SPEC": spec('{"type": "workerpool1", "index": "0"}')}
    assert torch_env(parse(env), env)[0]["RANK"] == "1"


def test_tf_config_without_a_chief_makes_worker_0_the_master():
    """TensorFlow's MultiWorkerMirroredStrategy: no chief pool, worker 0 leads."""
    tf = {"cluster": {"worker": ["w0:2222", "w1:2222"]}, "task": {"type": "worker", "index": 1}}
    env = {"TF_CONFIG": json.dumps(tf)}
    added, _ = torch_env(parse(env), env)
    assert added == {"MASTER_ADDR": "w0", "MASTER_PORT": "2222", "WORLD_SIZE": "2", "RANK": "1"}


def test_tf_evaluator_outside_the_training_cluster():
    tf = {"cluster": {"chief": ["c:2222"], "worker": ["w:2222"]}, "task": {"type": "evaluator", "index": 0}}
    env = {"TF_CONFIG": json.dumps(tf)}
    added, log = torch_env(parse(env), env)
    assert added == {"MASTER_ADDR": "c", "MASTER_PORT": "2222"} and "evaluator (evaluator) takes no rank" in log[1]


def test_lone_tf_evaluator_sets_nothing():
    env = {"TF_CONFIG": '{"cluster": {}, "task": {"type": "evaluator", "index": 0}}'}
    added, log = torch_env(parse(env), env)
    assert added == {} and "no chief or worker: nothing set" in log[-1]


def test_ipv6_master_address():
    env = {"CLUSTER_SPEC": spec('{"type": "workerpool0", "index": 0}', '"cluster": {"workerpool0": ["[fd00::2]:2222"]}')}
    added, _ = torch_env(parse(env), env)
    assert (added["MASTER_ADDR"], added["MASTER_PORT"]) == ("fd00::2", "2222")


def test_job_dir_forms():
    assert job_dir(["--epochs", "3", "--job-dir", "gs://b/j"]) == "gs://b/j"
    assert job_dir(["--job-dir=gs://b/k"]) == "gs://b/k"
    assert job_dir(["--epochs", "3"]) is None
