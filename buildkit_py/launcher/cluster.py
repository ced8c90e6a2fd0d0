"""The training service's cluster contract -> the variables PyTorch's rendezvous reads.

Vertex AI sets CLUSTER_SPEC (worker pools 0-3); AI Platform Training and TensorFlow set
TF_CONFIG (chief/master, worker, ps, evaluator). The chief (pool 0) is rank 0 and its first
address is the master; pool 1 index i is rank i + 1; parameter servers, reduction servers and
evaluators take no rank.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

POOL_ROLES = {
    "workerpool0": "chief", "chief": "chief", "master": "chief",
    "workerpool1": "worker", "worker": "worker",
    "workerpool2": "server", "ps": "server",
    "workerpool3": "evaluator", "evaluator": "evaluator",
}
PASS_THROUGH = ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR")
DIST_VARS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")


class ClusterError(Exception):
    pass


@dataclass(frozen=True)
class Cluster:
    source: str  # "CLUSTER_SPEC" | "TF_CONFIG"
    role: str  # chief | worker | server | evaluator
    task_type: str
    task_index: int
    chief: tuple[str, ...]
    workers: tuple[str, ...]
    other: dict = field(default_factory=dict)

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


def _pools(cluster: dict, names: tuple[str, ...]) -> tuple[str, ...]:
    for name in names:
        if cluster.get(name):
            return tuple(cluster[name])
    return ()


def parse(env: dict[str, str]) -> Cluster | None:
    """The cluster from CLUSTER_SPEC (preferred) or TF_CONFIG; None on a single machine."""
    for source in ("CLUSTER_SPEC", "TF_CONFIG"):
        raw = env.get(source)
        if not raw:
            continue
        try:
            spec = json.loads(raw)
            cluster, task = spec["cluster"], spec.get("task") or {}
            task_type, index = str(task.get("type", "")), int(task.get("index", 0))
        except (ValueError, KeyError, TypeError) as exc:
            raise ClusterError(f"{source} is not the documented JSON shape: {exc}") from None
        role = POOL_ROLES.get(task_type)
        if role is None:
            raise ClusterError(f"{source}: unknown task type {task_type!r}; known: {', '.join(sorted(POOL_ROLES))}")
        return Cluster(
            source=source,
            role=role,
            task_type=task_type,
            task_index=index,
            chief=_pools(cluster, ("workerpool0", "chief", "master")),
            workers=_pools(cluster, ("workerpool1", "worker")),
        )
    return None


def torch_env(cluster: Cluster | None, env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Variables to add (never overriding what is already set) and log lines saying why."""
    if cluster is None:
        return {}, []
    if not cluster.chief:
        raise ClusterError(f"{cluster.source} has no chief (workerpool0 / chief) address")
    host, _, port = cluster.chief[0].rpartition(":")
    rank = cluster.rank
    log = [f"{cluster.source}: {cluster.task_type}[{cluster.task_index}] of {cluster.world_size} ranks"]
    if rank is None:
        log.append(f"{cluster.task_type} is a {cluster.role}, not a rank: RANK and WORLD_SIZE are not set")
        wanted = {"MASTER_ADDR": host or cluster.chief[0], "MASTER_PORT": port}
    else:
        wanted = {"MASTER_ADDR": host or cluster.chief[0], "MASTER_PORT": port,
                  "WORLD_SIZE": str(cluster.world_size), "RANK": str(rank)}
    added = {k: v for k, v in wanted.items() if v and k not in env}
    kept = [k for k in wanted if k in env]
    if kept:
        log.append("kept as already set: " + ", ".join(kept))
    return added, log


def job_dir(args: list[str]) -> str | None:
    """AI Platform Training's legacy `--job-dir DIR` / `--job-dir=DIR` argument."""
    for i, arg in enumerate(args):
        if arg == "--job-dir" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--job-dir="):
            return arg.split("=", 1)[1]
    return None
