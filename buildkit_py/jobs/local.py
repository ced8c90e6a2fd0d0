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

from ..catalog.resources import LAUNCHER_MODULE, launcher_sources
from ..clients.engine import engine_client
from ..errors import RunError
from ..fsutil import make_output_dir
from ..launcher.constants import EXPECT_GPUS_ENV, PACKAGE_URIS_ENV, PROCESSES_ENV, PYTHON_MODULE_ENV
from ..pipeline.build import CA_SECRET, PIP_CONF_SECRET
from ..pipeline.names import JOB_LABEL
from ..progress import HtmlRepr, Reporter

MOUNT = "/buildkit-output"
LOCAL_SHM_SIZE = "16g"
PACKAGES_MOUNT = "/buildkit-py/packages"  # local package files, read-only
SECRETS_MOUNT = "/run/secrets"  # the CA bundle and pip.conf, where builds mount them too
LAUNCHER_MOUNT = "/opt/buildkit-py"  # the launcher, for executor images that do not ship it (Google's)


@dataclass(frozen=True)
class Task:
    """One container of a local run: its pool (workerpool0/workerpool1, or the legacy master/worker/ps) and index."""

    pool: str  # workerpool0 | workerpool1
    index: int

    @property
    def name(self) -> str:
        return f"{self.pool}-{self.index}"


@dataclass(frozen=True)
class RunResult(HtmlRepr):
    """A local run: its job ID, output directory, each container's exit code and the metrics reported."""

    job_id: str
    output_dir: str
    exit_codes: dict[str, int]
    metrics: list[dict] = field(default_factory=list)
    timed_out: bool = False  # stopped at the timeout

    @property
    def exit_code(self) -> int:
        return next((c for c in self.exit_codes.values() if c), 0)

    def to_dict(self) -> dict:
        return {"job_id": self.job_id, "output_dir": self.output_dir, "exit_codes": self.exit_codes,
                "exit_code": self.exit_code, "metrics": self.metrics, "timed_out": self.timed_out}


@dataclass(frozen=True)
class PackageRun:
    """Vertex AI's PythonPackageSpec for a local run. The service hands an executor image its package URIs
    and module; here the launcher reads them from the environment, local files mounted read-only."""

    package_uris: tuple[str, ...]  # as the container sees them
    python_module: str
    mounts: tuple[tuple[str, str], ...] = ()  # (host path, container path), read-only
    env: tuple[tuple[str, str], ...] = ()
    entrypoint: tuple[str, ...] | None = None  # replaces the image's, for images without the launcher


def package_run(packages: tuple[str, ...], module: str, secrets: tuple[tuple[str, Path], ...], *,
                mount_launcher: bool = False) -> PackageRun:
    """Local files become read-only mounts; gs:// and https:// URIs pass as they are. The CA bundle and pip.conf
    are mounted as files with PIP_CERT / PIP_CONFIG_FILE, the way builds pass them: never part of an image."""
    uris, mounts = [], []
    for i, package in enumerate(packages):
        if package.startswith(("gs://", "https://", "http://")):
            uris.append(package)
            continue
        host = Path(package)
        inside = f"{PACKAGES_MOUNT}/{i}/{host.name}"
        mounts.append((str(host.resolve()), inside))
        uris.append(inside)
    env = {CA_SECRET: "PIP_CERT", PIP_CONF_SECRET: "PIP_CONFIG_FILE"}
    for secret, path in secrets:
        mounts.append((str(path), f"{SECRETS_MOUNT}/{secret}"))
    extra = [(env[s], f"{SECRETS_MOUNT}/{s}") for s, _ in secrets if s in env]
    entrypoint = None
    if mount_launcher:
        source = Path(launcher_sources()[0][1]).parent
        mounts.append((str(source), f"{LAUNCHER_MOUNT}/{LAUNCHER_MODULE}"))
        extra.append(("PYTHONPATH", LAUNCHER_MOUNT))
        entrypoint = ("python", "-m", LAUNCHER_MODULE, "--")
    return PackageRun(tuple(uris), module, tuple(mounts), tuple(extra), entrypoint)


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


def tf_config(tasks: list[Task], ports: dict[str, int], task: Task, job_id: str) -> str:
    """AI Platform Training's TF_CONFIG: master, worker and ps roles, the job as an object."""
    pools: dict[str, list[str]] = {}
    for t in tasks:
        pools.setdefault(t.pool, []).append(f"127.0.0.1:{ports[t.name]}")
    return json.dumps({"cluster": pools, "environment": "cloud", "task": {"type": task.pool, "index": task.index},
                       "job": {"job_name": job_id}})


def legacy_tasks(workers: int, parameter_servers: int) -> list[Task]:
    return [Task("master", 0)] + [Task("worker", i) for i in range(workers)] + [Task("ps", i) for i in range(parameter_servers)]


def task_env(tasks: list[Task], ports: dict[str, int], task: Task, job_id: str, gpus: int,
             legacy: bool = False) -> dict[str, str]:
    chief = task == tasks[0]
    metrics = f"{MOUNT}/hypertune/output.metrics" if chief else f"{MOUNT}/hypertune/{task.name}.metrics"
    cluster = ({"TF_CONFIG": tf_config(tasks, ports, task, job_id)} if legacy
               else {"CLUSTER_SPEC": cluster_spec(tasks, ports, task, job_id)})
    return {
        **cluster,
        "CLOUD_ML_JOB_ID": job_id,
        "AIP_MODEL_DIR": f"{MOUNT}/model/",
        "AIP_CHECKPOINT_DIR": f"{MOUNT}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{MOUNT}/logs/",
        "CLOUD_ML_HP_METRIC_FILE": metrics,
        EXPECT_GPUS_ENV: str(gpus),
    }


@dataclass(frozen=True)
class LocalRun:
    """One local run of an image: what `run`, `autopackage --target local` and each tuning trial hand the engine."""

    image: str
    output: Path
    workers: int = 0
    gpus: int = 0
    args: tuple[str, ...] = ()
    network: str = "host"
    package: PackageRun | None = None
    legacy: bool = False  # as AI Platform Training ran it: TF_CONFIG with master, worker and ps, `--job-dir` last
    parameter_servers: int = 0
    env: tuple[tuple[str, str], ...] = ()  # added to every container's environment
    labels: tuple[tuple[str, str], ...] = ()  # added to every container's labels
    timeout: float | None = None  # past it the containers are killed (RunResult.timed_out)
    processes_per_node: int | str | None = None  # trainer processes in each container, as a job's machine runs them


def run_local(run: LocalRun, reporter: Reporter) -> RunResult:
    """Run the chief (and the workers), stream their logs, and always remove the containers."""
    from docker.errors import APIError, ImageNotFound

    image, args, legacy = run.image, run.args, run.legacy
    client = engine_client()
    job_id = f"local_{time.strftime('%Y%m%d_%H%M%S')}_{time.time_ns() % 10**6:06d}"
    out = _output_dir(run)
    tasks = legacy_tasks(run.workers, run.parameter_servers) if legacy else [Task("workerpool0", 0)] + [
        Task("workerpool1", i) for i in range(run.workers)]
    ports = dict(zip([t.name for t in tasks], free_ports(len(tasks)), strict=True))
    shared = _Shared.of(run, out)
    containers = []
    try:
        if legacy:  # the service appended the job directory to the trainer's arguments (the image's CMD by default)
            args = (*(args or client.images.get(image).attrs["Config"].get("Cmd") or ()), f"--job-dir={MOUNT}/")
        for task in tasks:
            # Created, then started: a start the engine refuses (no GPU runtime) leaves a container that the
            # finally below removes, where containers.run would raise before handing it over.
            settings = dict(name=f"{job_id}-{task.name}".replace("_", "-"),
                            environment={**task_env(tasks, ports, task, job_id, run.gpus, legacy), **shared.env},
                            network_mode=run.network, volumes=shared.volumes,
                            labels={**dict(run.labels), JOB_LABEL: job_id}, **shared.kwargs)
            try:
                container = client.containers.create(image, list(args) or None, **settings)
            except ImageNotFound:  # an image only in its registry: pulled, as containers.run pulls it
                client.images.pull(image)
                container = client.containers.create(image, list(args) or None, **settings)
            containers.append((task, container))
            container.start()
            reporter.message(f"started {task.name} of {job_id}")
        ended = _wait(containers, run.timeout, reporter)
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
    return RunResult(job_id, str(out), ended.codes, read_metrics(out / "hypertune" / "output.metrics", reporter),
                     ended.timed_out)


def _output_dir(run: LocalRun) -> Path:
    """The run's output directory, made with the folders the job's AIP_* variables name."""
    out = run.output.resolve()
    try:
        make_output_dir(out)
        for sub in ("model", "checkpoints", "logs", "hypertune"):
            (out / sub).mkdir(parents=True, exist_ok=True)
        # hypertune appends: an earlier run's metrics in the same --output would be read as this run's
        for stale in (out / "hypertune").glob("*.metrics"):
            stale.unlink()
    except OSError as exc:
        raise RunError(f"cannot create the output directory {str(out)!r}: {exc.strerror or exc}") from None
    return out


@dataclass(frozen=True)
class _Shared:
    """What every container of the run gets: the mounts, the environment beside each task's, the engine's other
    settings (a package run's entrypoint, GPUs with NCCL's shared memory)."""

    volumes: dict
    env: dict[str, str]
    kwargs: dict

    @classmethod
    def of(cls, run: LocalRun, out: Path) -> _Shared:
        from docker.types import DeviceRequest

        volumes = {str(out): {"bind": MOUNT, "mode": "rw"}}
        env: dict[str, str] = dict(run.env)
        if run.processes_per_node is not None:
            env[PROCESSES_ENV] = str(run.processes_per_node)
        kwargs: dict = {}
        package = run.package
        if package:
            volumes.update({host: {"bind": inside, "mode": "ro"} for host, inside in package.mounts})
            env.update({PACKAGE_URIS_ENV: ",".join(package.package_uris), PYTHON_MODULE_ENV: package.python_module,
                        **dict(package.env)})
            if package.entrypoint:
                kwargs["entrypoint"] = list(package.entrypoint)
        if run.gpus:
            kwargs["device_requests"] = [DeviceRequest(count=run.gpus, capabilities=[["gpu"]])]
            kwargs["shm_size"] = LOCAL_SHM_SIZE  # NCCL between GPUs; tmpfs takes memory only as it is used
        return cls(volumes, env, kwargs)


@dataclass(frozen=True)
class _Ended:
    """How a local run's containers ended: each task's exit code, and whether the timeout stopped them."""

    codes: dict[str, int]  # each task's exit code
    timed_out: bool


def _wait(containers: list, timeout: float | None, reporter: Reporter) -> _Ended:
    """Each container's exit code, their logs streamed meanwhile; past the timeout every container is killed."""
    import requests
    from docker.errors import APIError

    threads = [threading.Thread(target=_stream, args=(c, t.name, reporter), daemon=True) for t, c in containers]
    for thread in threads:
        thread.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    codes, timed_out = {}, False
    # Parameter servers serve until the job ends: AI Platform ended it when the master and workers had.
    for t, c in sorted(containers, key=lambda tc: tc[0].pool == "ps"):
        if t.pool == "ps" and not any(codes.values()):
            c.reload()
            if c.status == "running":
                c.kill()
                codes[t.name] = 0
                reporter.message(f"stopped {t.name}: the master and workers are done")
                continue
        try:
            codes[t.name] = c.wait(timeout=None if deadline is None else max(deadline - time.monotonic(), 0.01))["StatusCode"]
        except requests.exceptions.RequestException:  # the engine's wait outlived the timeout
            timed_out = True
            for _, other in containers:
                try:
                    other.kill()
                except APIError:
                    pass  # already ended
            codes[t.name] = c.wait()["StatusCode"]
    for thread in threads:
        thread.join(timeout=5)
    return _Ended(codes, timed_out)


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
