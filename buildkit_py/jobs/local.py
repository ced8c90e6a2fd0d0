"""Run an image the way Vertex AI runs it, on this machine: CLUSTER_SPEC, CLOUD_ML_JOB_ID, the
AIP_* directories on a mounted output directory, the hypertune metric file readable after the
run, and N worker containers on host networking that rendezvous over loopback."""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..engine import engine_client
from ..errors import RunError
from ..launcher.constants import EXPECT_GPUS_ENV
from ..progress import Reporter

MOUNT = "/buildkit-output"


@dataclass(frozen=True)
class Task:
    pool: str  # workerpool0 | workerpool1
    index: int

    @property
    def name(self) -> str:
        return f"{self.pool}-{self.index}"


@dataclass(frozen=True)
class RunResult:
    job_id: str
    output_dir: str
    exit_codes: dict[str, int]
    metrics: list[dict] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return next((c for c in self.exit_codes.values() if c), 0)

    def to_dict(self) -> dict:
        return {"job_id": self.job_id, "output_dir": self.output_dir, "exit_codes": self.exit_codes,
                "exit_code": self.exit_code, "metrics": self.metrics}


def free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def cluster_spec(tasks: list[Task], ports: dict[str, int], task: Task, job_id: str) -> str:
    pools: dict[str, list[str]] = {}
    for t in tasks:
        pools.setdefault(t.pool, []).append(f"127.0.0.1:{ports[t.name]}")
    return json.dumps({"cluster": pools, "environment": "cloud",
                       "task": {"type": task.pool, "index": task.index}, "job": json.dumps({"job_id": job_id})})


def task_env(tasks: list[Task], ports: dict[str, int], task: Task, job_id: str, gpus: int) -> dict[str, str]:
    metrics = f"{MOUNT}/hypertune/output.metrics" if task.pool == "workerpool0" else f"{MOUNT}/hypertune/{task.name}.metrics"
    return {
        "CLUSTER_SPEC": cluster_spec(tasks, ports, task, job_id),
        "CLOUD_ML_JOB_ID": job_id,
        "AIP_MODEL_DIR": f"{MOUNT}/model/",
        "AIP_CHECKPOINT_DIR": f"{MOUNT}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{MOUNT}/logs/",
        "CLOUD_ML_HP_METRIC_FILE": metrics,
        EXPECT_GPUS_ENV: str(gpus),
    }


def run_local(image: str, *, workers: int = 0, gpus: int = 0, output: Path | None = None, args: tuple[str, ...] = (),
              reporter: Reporter, network: str = "host") -> RunResult:
    """Run the chief (and `workers` workers), stream their logs, and always remove the containers."""
    from docker.errors import APIError, ImageNotFound
    from docker.types import DeviceRequest

    client = engine_client()
    job_id = f"local_{time.strftime('%Y%m%d_%H%M%S')}_{time.time_ns() % 10**6:06d}"
    out = (output or Path("buildkit-output") / job_id).resolve()
    try:
        for sub in ("model", "checkpoints", "logs", "hypertune"):
            (out / sub).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunError(f"cannot create the output directory {str(out)!r}: {exc.strerror or exc}") from None
    tasks = [Task("workerpool0", 0)] + [Task("workerpool1", i) for i in range(workers)]
    ports = dict(zip([t.name for t in tasks], free_ports(len(tasks)), strict=True))
    containers = []
    try:
        for task in tasks:
            kwargs = {}
            if gpus:
                kwargs["device_requests"] = [DeviceRequest(count=gpus, capabilities=[["gpu"]])]
            containers.append((task, client.containers.run(
                image, list(args) or None, detach=True, name=f"{job_id}-{task.name}".replace("_", "-"),
                environment=task_env(tasks, ports, task, job_id, gpus), network_mode=network,
                volumes={str(out): {"bind": MOUNT, "mode": "rw"}}, labels={"dev.buildkit-py.job": job_id}, **kwargs,
            )))
            reporter.message(f"started {task.name} of {job_id}")
        threads = [threading.Thread(target=_stream, args=(c, t.name, reporter), daemon=True) for t, c in containers]
        for thread in threads:
            thread.start()
        codes = {t.name: c.wait()["StatusCode"] for t, c in containers}
        for thread in threads:
            thread.join(timeout=5)
    except ImageNotFound:
        raise RunError(f"image {image!r} is not in the engine; build it first (buildkit-py build)") from None
    except APIError as exc:
        raise RunError(f"the engine refused to run {image}: {exc.explanation or exc}") from None
    finally:
        for _, container in containers:
            try:
                container.remove(force=True)
            except APIError:
                pass
    return RunResult(job_id, str(out), codes, read_metrics(out / "hypertune" / "output.metrics", reporter))


def read_metrics(path: Path, reporter: Reporter) -> list[dict]:
    """The JSON lines cloudml-hypertune wrote; a line the trainer garbled is reported and skipped."""
    if not path.is_file():
        return []
    metrics = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        if isinstance(value, dict):
            metrics.append(value)
        else:
            reporter.message(f"{path}:{number}: not a hypertune metric (a JSON object); skipped")
    return metrics


def _stream(container, name: str, reporter: Reporter) -> None:
    pending = b""
    for chunk in container.logs(stream=True, follow=True):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            reporter.build_line(f"[{name}] {line.decode(errors='replace')}")
    if pending:
        reporter.build_line(f"[{name}] {pending.decode(errors='replace')}")
