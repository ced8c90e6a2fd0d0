"""The training service's cluster contract -> the variables PyTorch's rendezvous reads.

Vertex AI sets CLUSTER_SPEC (worker pools 0-3); AI Platform Training and TensorFlow set
TF_CONFIG (chief/master, worker, ps, evaluator). The chief (pool 0) is rank 0 and its first
address is the master; pool 1 index i is rank i + 1; parameter servers, reduction servers and
evaluators take no rank. Without a chief (TensorFlow's MultiWorkerMirroredStrategy) worker 0
is the master and worker i is rank i.

The spec is checked before anything is derived from it: a malformed one fails with the field,
the value and what is allowed, never a traceback.
"""

from __future__ import annotations

import re
from collections import namedtuple

POOL_ROLES = {
    "workerpool0": "chief", "chief": "chief", "master": "chief",
    "workerpool1": "worker", "worker": "worker",
    "workerpool2": "server", "ps": "server",
    "workerpool3": "evaluator", "evaluator": "evaluator",
}
PASS_THROUGH = ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR")
DIST_VARS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")
_PORT = re.compile(r"[0-9]{1,5}", re.ASCII)
_INDEX = re.compile(r"[0-9]{1,9}", re.ASCII)


class ClusterError(Exception):
    pass


class Cluster(namedtuple("Cluster", "source role task_type task_index chief workers")):
    """source: "CLUSTER_SPEC" | "TF_CONFIG"; role: chief | worker | server | evaluator;
    task_type: str; task_index: int; chief, workers: tuples of "host:port", checked.
    (A namedtuple, as the launcher's records are: see nvml.py.)"""

    __slots__ = ()

    @property
    def world_size(self) -> int:
        return len(self.chief) + len(self.workers)

    @property
    def rank(self) -> int | None:
        if self.role == "chief":
            return self.task_index
        if self.role == "worker":
            return len(self.chief) + self.task_index
        return None

    @property
    def master(self) -> tuple[str, str] | None:
        """(host, port) of rank 0; None for a lone evaluator or server."""
        first = (self.chief or self.workers)[:1]
        return split(first[0]) if first else None

    @property
    def hosts(self) -> tuple[str, ...]:
        """The ranked machines' hosts, in rank order."""
        return tuple(split(a)[0] for a in self.chief + self.workers)


def split(address: str) -> tuple[str, str]:
    host, _, port = address.rpartition(":")
    return (host[1:-1] if host.startswith("[") and host.endswith("]") else host), port  # [IPv6]:port


def join(host: str, port: str) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _address(field: str, value: str) -> ClusterError | None:
    host, colon, port = value.rpartition(":")
    if colon and host and _PORT.fullmatch(port) and 1 <= int(port) <= 65535:
        return None
    return ClusterError(f"{field}: {_show(value)} is not an address; allowed: 'host:port' with a port of 1-65535")


def _pools(source: str, cluster: object) -> dict[str, tuple[str, ...]]:
    if not isinstance(cluster, dict):
        raise ClusterError(f"{source}: cluster: {_show(cluster)} is not an object; allowed: an object of pools, "
                           'like {"workerpool0": ["host:2222"]}')
    pools = {}
    for name, pool in cluster.items():
        field = f"{source}: cluster.{name}"
        if not isinstance(pool, list) or not all(isinstance(a, str) for a in pool):
            raise ClusterError(f"{field}: {_show(pool)} is not a pool; allowed: a list of 'host:port' strings")
        for i, address in enumerate(pool):
            error = _address(f"{field}[{i}]", address)
            if error:
                raise error
        pools[name] = tuple(pool)
    return pools


def _task(source: str, task: object, pools: dict[str, tuple[str, ...]]) -> tuple[str, int]:
    if not isinstance(task, dict):
        raise ClusterError(f"{source}: task: {_show(task)} is not an object; allowed: "
                           '{"type": POOL, "index": N}')
    task_type = task.get("type")
    if not isinstance(task_type, str) or task_type not in POOL_ROLES:
        raise ClusterError(f"{source}: task.type: {_show(task_type)} is not a task type; allowed: "
                           f"{', '.join(sorted(POOL_ROLES))}")
    index = task.get("index", 0)
    # JSON gives ints; TensorFlow also accepts digit strings. bool is an int subclass: refused.
    if isinstance(index, str) and _INDEX.fullmatch(index):
        index = int(index)
    if type(index) is not int or index < 0:
        raise ClusterError(f"{source}: task.index: {_show(index)} is not an index; allowed: an integer >= 0")
    pool = pools.get(task_type)
    if POOL_ROLES[task_type] == "evaluator" and not pool:
        return task_type, index  # TensorFlow's evaluator is not part of the training cluster
    if pool is None:
        raise ClusterError(f"{source}: task.type: {task_type!r} has no pool in cluster; pools: "
                           f"{', '.join(sorted(pools)) or 'none'}")
    if index >= len(pool):
        raise ClusterError(f"{source}: task.index: {index} is beyond cluster.{task_type}; allowed: "
                           + (f"0-{len(pool) - 1}" if pool else "none, the pool is empty"))
    return task_type, index


def _first(pools: dict[str, tuple[str, ...]], names: tuple[str, ...]) -> tuple[str, ...]:
    return next((pools[n] for n in names if pools.get(n)), ())


def parse(env: dict[str, str]) -> Cluster | None:
    """The cluster from CLUSTER_SPEC (preferred) or TF_CONFIG; None on a single machine."""
    for source in ("CLUSTER_SPEC", "TF_CONFIG"):
        raw = env.get(source, "")
        if not raw.strip():
            continue
        import json

        try:
            spec = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise ClusterError(f"{source}: {_show(raw)} is not JSON ({exc}); allowed: "
                               '{"cluster": {POOL: ["host:port", ...]}, "task": {"type": POOL, "index": N}}') from None
        if not isinstance(spec, dict):
            raise ClusterError(f"{source}: {_show(spec)} is not a JSON object; allowed: "
                               '{"cluster": {...}, "task": {...}}')
        pools = _pools(source, spec.get("cluster"))
        task_type, index = _task(source, spec.get("task"), pools)
        return Cluster(
            source=source,
            role=POOL_ROLES[task_type],
            task_type=task_type,
            task_index=index,
            chief=_first(pools, ("workerpool0", "chief", "master")),
            workers=_first(pools, ("workerpool1", "worker")),
        )
    return None


def torch_env(cluster: Cluster | None, env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Variables to add (never overriding what is already set) and log lines saying why."""
    if cluster is None:
        return {}, []
    log = [f"{cluster.source}: {cluster.task_type}[{cluster.task_index}] of {cluster.world_size} ranks"]
    if cluster.master is None:  # a lone evaluator or server: ranks always have their own pool's address
        return {}, log + [f"{cluster.task_type} ({cluster.role}) takes no rank and the cluster has no chief or worker: "
                          "nothing set"]
    host, port = cluster.master
    rank = cluster.rank
    wanted = {"MASTER_ADDR": host, "MASTER_PORT": port}
    if rank is None:
        log.append(f"{cluster.task_type} ({cluster.role}) takes no rank: RANK and WORLD_SIZE are not set")
    else:
        wanted.update(WORLD_SIZE=str(cluster.world_size), RANK=str(rank))
    added = {k: v for k, v in wanted.items() if k not in env}
    kept = [k for k in wanted if k in env]
    if kept:
        log.append("kept as already set: " + ", ".join(kept))
    return added, log


def node_env(cluster: Cluster | None, env: dict[str, str], tpu: bool) -> dict[str, str]:
    """For a ranked machine: Kubeflow's PET_* variables, which torchrun reads as its flags' defaults (so a torchrun in
    the repository's own script finds the cluster too), and the coordinator JAX's initialize() reads (with the
    process count and id under the names trainers pass it). A TPU slice's JAX is left to its runtime. Never
    overrides what is already set."""
    if cluster is None or cluster.rank is None or cluster.master is None:
        return {}
    host, port = cluster.master
    nodes, rank = str(cluster.world_size), str(cluster.rank)
    wanted = {"PET_NNODES": nodes, "PET_NODE_RANK": rank, "PET_MASTER_ADDR": host, "PET_MASTER_PORT": port}
    if not tpu:
        wanted.update(JAX_COORDINATOR_ADDRESS=join(host, port), JAX_NUM_PROCESSES=nodes, JAX_PROCESS_ID=rank)
    return {k: v for k, v in wanted.items() if k not in env}


def job_dir(args: list[str]) -> str | None:
    """AI Platform Training's legacy `--job-dir DIR` / `--job-dir=DIR` argument."""
    for i, arg in enumerate(args):
        if arg == "--job-dir" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--job-dir="):
            return arg.split("=", 1)[1]
    return None
