"""Vertex AI job specs: a CustomJob, or a HyperparameterTuningJob around one, as the v1 REST API
takes them (camelCase JSON), from the config's `job`, `hyperparameters` and the flags.

Everything here is checked before a request is made: display names and labels by Vertex's rules,
machine type x accelerator type x count (base_images/machines.yaml), the image's CUDA build against
the accelerator (plan.check_accelerator), and images the service cannot pull.
"""

from __future__ import annotations

import copy
import datetime as _dt
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..catalog.machines import arch, load_machines
from ..catalog.resources import LAUNCHER_MODULE
from ..catalog.tpu import Tpu
from ..config import Config, Fallback, Hyperparameters, JobConfig, Pool
from ..errors import ConfigError, ResolutionError, show
from ..launcher import launchers
from ..launcher.constants import AUTO_PROCESSES, EXPECT_GPUS_ENV, EXPECT_TPU_ENV, PROCESSES_ENV
from ..oci.refs import DOCKER_HUB, ImageRef, parse_ref, registry_host
from ..patterns import lazy_pattern
from ..version import __version__
from .machines import inherit, machine_spec, resolve_pool, resolve_tpu_pool, tpu_of

TARGETS = ("vertex", "loopback")  # loopback: an API on this machine (a fake, an emulator): loopback images allowed
DEFAULT_REGION = "us-central1"
REDUCTION_SERVER_IMAGE = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
REDUCTION_SERVER_MACHINE = "n1-highcpu-16"
MAX_NAME = 128
_STAMP = "%Y%m%d_%H%M%S"
LABEL_VERSION, LABEL_DIGEST, LABEL_GIT = "buildkit-py-version", "image-sha256", "git-commit"
LABEL_LOCK = "buildkit-lock-sha256"  # the buildkit.lock section the image was built from
_SCALES = {"linear": "UNIT_LINEAR_SCALE", "log": "UNIT_LOG_SCALE", "reverse_log": "UNIT_REVERSE_LOG_SCALE"}
_LOOPBACK_NAMES = ("localhost", "host.docker.internal")


def display_name(base: str, now: _dt.datetime) -> str:
    """Vertex's convention for generated names: <base>_<YYYYMMDD_HHMMSS>, letters, digits and '_',
    starting with a letter, at most 128 characters."""
    clean = re.sub(r"[^A-Za-z0-9_]+", "_", base, flags=re.ASCII).strip("_") or "job"
    if not clean[0].isalpha():
        clean = "job_" + clean
    stamp = now.astimezone(_dt.UTC).strftime(_STAMP)
    return f"{clean[:MAX_NAME - len(stamp) - 1]}_{stamp}"


def pullable(text: str, target: str, field: str) -> ImageRef:
    """The image reference, refused when the service cannot pull it (loopback hosts, no host)."""
    ref = parse_ref(text, field=field)
    if target != "vertex":
        return ref
    first = text.split("/", 1)[0] if "/" in text else ""
    if ref.registry == DOCKER_HUB and "." not in first and ":" not in first and first != "localhost":
        raise ConfigError(f"{show(text)} names no registry host, so it means Docker Hub; push the image where Vertex AI "
                          "can pull it, e.g. us-central1-docker.pkg.dev/PROJECT/REPO/IMAGE", field=field)
    host = registry_host(ref.registry)
    try:
        loopback = ipaddress.ip_address(host).is_loopback or ipaddress.ip_address(host).is_unspecified
    except ValueError:
        loopback = host.lower() in _LOOPBACK_NAMES
    if loopback:
        raise ConfigError(f"{show(text)} is on {ref.registry}, which Vertex AI cannot reach; push it to Artifact Registry "
                          "(LOCATION-docker.pkg.dev/PROJECT/REPO/IMAGE), or use --target loopback for an API on this "
                          "machine", field=field)
    return ref


@dataclass(frozen=True)
class VertexJob:
    """A Vertex AI job as the REST API takes it (a CustomJob or HyperparameterTuningJob), with its image, accelerator,
    machines and notes."""

    kind: str  # customJobs | hyperparameterTuningJobs (the REST collection)
    resource: dict  # the CustomJob or HyperparameterTuningJob, as the REST API takes it
    image: ImageRef  # the trainer or executor image
    accelerator: str | None
    accelerator_count: int
    machine_type: str
    strategy: str | None
    notes: tuple[str, ...] = ()
    machines: int = 1  # the ranked machines: the chief and the workers
    processes_per_node: int = 1  # trainer processes on each, as counted for the machine type

    @property
    def world_size(self) -> int:
        return self.machines * self.processes_per_node

    @property
    def display_name(self) -> str:
        return self.resource["displayName"]

    def custom_job_spec(self) -> dict:
        return self.resource["jobSpec"] if self.kind == "customJobs" else self.resource["trialJobSpec"]


def _duration(seconds: int | None) -> str | None:
    return None if seconds is None else f"{seconds}s"


def _prune(value: Any) -> Any:
    """Drops unset fields (None, empty lists and mappings), so the spec shows only what is asked for;
    an empty worker pool stays ({}), since the pool's index gives its role."""
    if isinstance(value, dict):
        pruned = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v is not None and v != [] and v != {}}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


@dataclass(frozen=True)
class Built:
    """What the image built from this config tells its job: the platform it is for (its plan's: GB200's make it
    linux/arm64; None: the config's), the check of an accelerator against its kernels (check_accelerator(name) ->
    notes, raising when the image has none for the GPU), and the lineage the job's labels record."""

    platform: str | None = None
    check_accelerator: Callable[[str], tuple[str, ...]] | None = None
    revision: str | None = None  # the trainer directory's git revision
    lock_digest: str | None = None  # the buildkit.lock section the image was built from


@dataclass(frozen=True)
class _Chief:
    """The job's chief pool, resolved (a fallback's accelerator and machine applied), the strategy, and its TPU."""

    pool: Pool  # resolved: machine type, accelerators
    strategy: str | None
    tpu: Tpu | None
    chips: int  # a TPU VM's chips, which the launcher checks are visible


def build_job(config: Config, job: JobConfig, *, target: str = "vertex", now: _dt.datetime | None = None,
              fallback: Fallback | None = None, built: Built = Built()) -> VertexJob:
    """The job resource. fallback replaces the chief's accelerator, machine, region or strategy; built: what the image
    built from this config tells the job."""
    if target not in TARGETS:
        raise ConfigError(f"{show(target)} is not allowed: one of {', '.join(TARGETS)}", field="--target")
    chief = _chief(config, job, fallback)
    ref = _job_image(config, job, chief, target, fallback, built.platform)
    notes = _accelerator_notes(job, chief, built.check_accelerator) + _secret_notes(job.env, job.args or ())
    pools = _Pools(config, job, chief, ref)
    if pools.per_node > 1 or pools.machines > 1:
        notes.append(f"world size {pools.machines * pools.per_node}: {pools.machines} machine(s) x {pools.per_node} "
                     "trainer process(es)")
    scheduling = {"timeout": _duration(job.timeout), "restartJobOnWorkerRestart": job.restart_job_on_worker_restart,
                  "strategy": chief.strategy, "maxWaitDuration": _duration(job.max_wait_duration),
                  "disableRetries": job.disable_retries}
    custom = {"workerPoolSpecs": pools.specs(), "scheduling": scheduling, "serviceAccount": job.service_account,
              "network": job.network, "baseOutputDirectory": {"outputUriPrefix": job.base_output_directory}
              if job.base_output_directory else None, "tensorboard": job.tensorboard,
              "enableWebAccess": job.enable_web_access}
    labels = _labels(job, ref, built)
    name = job.name or display_name(_name_base(config), now or _dt.datetime.now(_dt.UTC))
    if config.hyperparameters is not None:
        resource = {"displayName": name, **_study(config.hyperparameters), "trialJobSpec": custom, "labels": labels}
        kind = "hyperparameterTuningJobs"
    else:
        resource = {"displayName": name, "jobSpec": custom, "labels": labels}
        kind = "customJobs"
    pool, tpu = chief.pool, chief.tpu
    if tpu is not None:
        return VertexJob(kind, _prune(resource), ref, tpu.name, chief.chips, pool.machine_type, chief.strategy,
                         tuple(notes))
    return VertexJob(kind, _prune(resource), ref, pool.accelerator_type if pool.accelerator_count else None,
                     pool.accelerator_count or 0, pool.machine_type, chief.strategy, tuple(notes), pools.machines,
                     pools.per_node)


def _chief(config: Config, job: JobConfig, fallback: Fallback | None) -> _Chief:
    """The chief's pool, resolved (the fallback's accelerator, machine and strategy in place of the job's; a TPU's
    topology), and the job's scheduling strategy."""
    chief = replace(job.chief, accelerator_type=job.chief.accelerator_type or config.accelerator)
    strategy = job.strategy
    if fallback is not None:
        switched = fallback.accelerator_type is not None and fallback.accelerator_type != chief.accelerator_type
        chief = replace(chief, accelerator_type=fallback.accelerator_type or chief.accelerator_type,
                        accelerator_count=fallback.accelerator_count or (None if switched else chief.accelerator_count),
                        machine_type=fallback.machine_type or (None if switched else chief.machine_type))
        strategy = fallback.strategy or strategy
    tpu = tpu_of(chief)
    chips = 0
    if tpu is not None:
        # Vertex AI runs a TPU VM job as one worker pool with one replica.
        for key in ("workers", "parameter_servers", "reduction_server", "evaluators"):
            if getattr(job, key) is not None:
                raise ConfigError(f"a TPU VM job ({tpu.name}) has exactly one worker pool with one replica on Vertex AI: "
                                  f"drop job.{key}", field=f"job.{key}")
        chief, chips = resolve_tpu_pool(chief, tpu, "job")
    elif chief.tpu_topology is not None:
        raise ConfigError(f"tpu_topology {show(chief.tpu_topology)} goes with a TPU machine type; this job has no TPU "
                          "(set accelerator_type to a TPU, e.g. TPU_V5_LITEPOD)", field="job.tpu_topology")
    else:
        chief = resolve_pool(chief, "job")
    if job.max_wait_duration is not None and strategy != "FLEX_START":
        raise ConfigError("max_wait_duration goes with strategy FLEX_START (how long to wait for capacity)",
                          field="job.max_wait_duration")
    return _Chief(chief, strategy, tpu, chips)


def _job_image(config: Config, job: JobConfig, chief: _Chief, target: str, fallback: Fallback | None,
               platform: str | None) -> ImageRef:
    """The trainer image (or a Python package's executor, a catalog one resolved for the machine and region), where
    the job may pull it from, built for a platform the chief's machine runs."""
    package, tpu = job.python_package, chief.tpu
    image_text = package.executor if package else job.image
    if package and "==" in package.executor:
        from ..catalog.executors import resolve_executor  # the catalog is read only for catalog executors

        if tpu is not None:
            raise ConfigError(f"the prebuilt executors are for CPUs and GPUs; on {tpu.name} give an executor image built "
                              f"with accelerator: {tpu.name}", field="job.python_package.executor")
        try:
            image_text = resolve_executor(package.executor, gpu=bool(chief.pool.accelerator_count),
                                          region=(fallback and fallback.region) or job.region).uri
        except (ConfigError, ResolutionError) as exc:  # restated under the config key
            raise ConfigError(str(exc).removeprefix("--executor: "), field="job.python_package.executor") from None
    if image_text is None:
        raise ConfigError("no image: pass --image (the pushed trainer image, e.g. from `buildkit-py build --push`) or set "
                          "job.image", field="--image")
    ref = pullable(image_text, target, "job.python_package.executor" if package else "--image")
    wanted = load_machines().platform(chief.pool.machine_type)
    # A multi-platform image (an index) runs where any of its platforms does.
    built_for = config.platforms or tuple(filter(None, (platform or config.platform,)))
    if built_for and not package and wanted not in {arch(p) for p in built_for}:
        raise ConfigError(f"the image is built for {', '.join(built_for)}; {chief.pool.machine_type} runs {wanted}",
                          field="platform")
    return ref


def _accelerator_notes(job: JobConfig, chief: _Chief, check: Callable[[str], tuple[str, ...]] | None) -> list[str]:
    """What the chief's accelerators say of the image: its kernels checked for them, NCCL's shared memory."""
    pool, tpu, notes = chief.pool, chief.tpu, []
    if (pool.accelerator_count or tpu) and check is not None and not job.python_package:
        notes.extend(check(pool.accelerator_type))
    elif tpu:
        notes.append(f"the image is not resolved from this config: its TPU build for {tpu.name} is not checked")
    if pool.accelerator_count and pool.accelerator_count > 1 and not tpu:
        notes.append(f"{pool.accelerator_count} GPUs on one machine: NCCL passes data between them through /dev/shm, "
                     "which a CustomJob cannot size; if NCCL fails with shared-memory errors, set env NCCL_SHM_DISABLE=1 "
                     "(slower, over sockets)")
    return notes


class _Pools:
    """The job's worker pools: the chief, the workers (the ranked machines, each running per_node trainer
    processes), then parameter servers or a reduction server, and evaluators, each in its fixed place."""

    def __init__(self, config: Config, job: JobConfig, chief: _Chief, ref: ImageRef) -> None:
        self.job, self.chief, self.ref = job, chief, ref
        total = chief.pool.replica_count or 1
        workers = job.workers
        if workers is not None and workers.replica_count is not None and chief.pool.replica_count is not None \
                and workers.replica_count != total - 1:
            raise ConfigError(f"replica_count {total} means {total - 1} workers, but workers.replica_count is "
                              f"{workers.replica_count}: give one of them", field="job.workers.replica_count")
        self.workers = workers.replica_count if workers is not None and workers.replica_count is not None else total - 1
        self.worker_pool = resolve_pool(inherit(workers, chief.pool), "job.workers") if self.workers else None
        package = job.python_package
        self.processes, field = asked_processes(config, job.processes_per_node, "--processes-per-node")
        if self.processes is not None and package is not None and "==" in package.executor:
            raise ConfigError(f"Google's prebuilt executor {package.executor} runs one process per machine, without "
                              "buildkit-py's launcher: build an executor with it (buildkit-py executor build) or drop "
                              f"{field}", field=field)
        self.gpus = min(p.accelerator_count or 0 for p in (chief.pool, self.worker_pool) if p is not None)
        self.machines = 1 + self.workers
        self.per_node = processes_per_node(config, self.processes, field, job.command,
                                           Machines(self.machines, self.gpus, chief.tpu, chief.pool.machine_type))
        r = job.reservation
        self.reservation = {"reservationAffinityType": r.type, "key": r.key, "values": list(r.values)} if r else None
        # An executor image has none of the config's image settings: its trainer args and env go in the spec, as a
        # built image's CMD and ENV would give them (job.args and job.env still win).
        self.package_args = tuple(job.args) if job.args is not None else (config.trainer.args if config.trainer else ())
        given = {k for k, _ in job.env}
        self.package_env = tuple((k, v) for k, v in config.env if k not in given)

    def container(self, pool: Pool, ranked: bool = False) -> dict:
        job, tpu = self.job, self.chief.tpu
        env = [{"name": k, "value": v} for k, v in job.env if k not in (EXPECT_GPUS_ENV, EXPECT_TPU_ENV, PROCESSES_ENV)]
        env.append({"name": EXPECT_GPUS_ENV, "value": "0" if tpu else str(pool.accelerator_count or 0)})
        if tpu:  # the launcher checks that this many TPU chips are visible
            env.append({"name": EXPECT_TPU_ENV, "value": str(self.chief.chips)})
        if ranked and self.processes is not None:  # the launcher starts them (servers and evaluators run one)
            env.append({"name": PROCESSES_ENV, "value": str(self.processes)})
        package = job.python_package
        if package:
            return {"pythonPackageSpec": {"executorImageUri": str(self.ref), "packageUris": list(package.package_uris),
                                          "pythonModule": package.module, "args": list(self.package_args),
                                          "env": [{"name": k, "value": v} for k, v in self.package_env] + env}}
        # A command replaces the image's ENTRYPOINT (the launcher): keep the launcher in front so its checks run.
        command = ["python", "-m", LAUNCHER_MODULE, "--", *job.command] if job.command else None
        return {"containerSpec": {"imageUri": str(self.ref), "command": command,
                                  "args": list(job.args) if job.args is not None else None, "env": env}}

    def spec(self, pool: Pool, replicas: int, runs: dict) -> dict:
        disk = {"bootDiskType": pool.boot_disk_type, "bootDiskSizeGb": pool.boot_disk_size_gb}
        return {"machineSpec": machine_spec(pool, self.reservation), "replicaCount": str(replicas), "diskSpec": disk,
                **runs}

    def specs(self) -> list[dict]:
        job, chief = self.job, self.chief.pool
        pools: list[dict] = [self.spec(chief, 1, self.container(chief, ranked=True))]
        if self.worker_pool is not None:
            pools.append(self.spec(self.worker_pool, self.workers, self.container(self.worker_pool, ranked=True)))
        second = job.parameter_servers or job.reduction_server
        if second is not None or job.evaluators is not None:
            pools += [{}] * (2 - len(pools))
        if job.parameter_servers is not None:
            pool = resolve_pool(inherit(job.parameter_servers, chief, gpus=False), "job.parameter_servers")
            pools.append(self.spec(pool, pool.replica_count or 1, self.container(pool)))
        elif job.reduction_server is not None:
            pool = replace(job.reduction_server, machine_type=job.reduction_server.machine_type or REDUCTION_SERVER_MACHINE)
            pool = resolve_pool(pool, "job.reduction_server")
            if pool.accelerator_count:
                raise ConfigError("reduction servers run on CPUs: drop accelerator_type and accelerator_count",
                                  field="job.reduction_server")
            pools.append(self.spec(pool, pool.replica_count or 1, {"containerSpec": {"imageUri": REDUCTION_SERVER_IMAGE}}))
        if job.evaluators is not None:
            pools += [{}] * (3 - len(pools))
            pool = resolve_pool(inherit(job.evaluators, chief), "job.evaluators")
            pools.append(self.spec(pool, pool.replica_count or 1, self.container(pool)))
        return pools


def _labels(job: JobConfig, ref: ImageRef, built: Built) -> dict[str, str]:
    """The job's labels, with buildkit-py's lineage beside them: its version, the image's digest, the git revision
    and the lock's digest (each cut to the 63 characters a label value holds)."""
    labels = dict(job.labels)
    labels.setdefault(LABEL_VERSION, __version__.replace(".", "-"))
    if ref.digest and ref.digest.startswith("sha256:"):
        labels.setdefault(LABEL_DIGEST, ref.digest.removeprefix("sha256:")[:63])
    if built.revision:
        labels.setdefault(LABEL_GIT, built.revision.lower()[:63])
    if built.lock_digest:
        labels.setdefault(LABEL_LOCK, built.lock_digest.removeprefix("sha256:")[:63])
    if len(labels) > 64:
        raise ConfigError("with buildkit-py's lineage labels there are more than 64 labels: drop some", field="job.labels")
    return labels


# A variable named for a secret, with a value that is not a Secret Manager name nor a file's path.
_SECRET_NAME = lazy_pattern(r"(?i)(?:^|_)(?:PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?)(?:$|_)")
_NOT_A_SECRET = lazy_pattern(r"(?i)projects/[^/]+/secrets/.+|/.*|gs://.*|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|[0-9]+|true|false|")


def _secret_notes(env: tuple[tuple[str, str], ...], args: tuple[str, ...]) -> list[str]:
    """A note for each variable or argument whose value looks like a credential: the job's spec holds it as written,
    for anyone who can read the job to see. The value still goes where the user put it."""
    from ..errors import mask_credentials
    from ..pipeline.context import secret_reason

    def why(value: str) -> str | None:
        reason = secret_reason(value.encode("utf-8", "replace"))
        return (f"its value looks like a {reason}" if reason else
                "its value is a URL with a password or key" if mask_credentials(value) != value else None)

    found = [(f"env {name}", why(value) or ("its name says it holds a secret" if _SECRET_NAME.search(name) and
                                            not _NOT_A_SECRET.fullmatch(value) else None)) for name, value in env]
    found += [(f"args[{i}]", why(value)) for i, value in enumerate(args)]
    return [f"{what}: {reason}; the job's spec holds it as written, for anyone who can view the job to read: keep it in "
            "Secret Manager and read it at start (gcloud secrets versions access, or google-cloud-secret-manager)"
            for what, reason in found if reason]


def asked_processes(config: Config, given: int | str | None, flag: str) -> tuple[int | str | None, str]:
    """The processes per machine asked for, and the field that asked: the flag's (given), else the config's."""
    if given is not None:
        return given, flag
    trainer = config.trainer
    return (trainer.processes_per_node if trainer is not None else None), "trainer.processes_per_node"


@dataclass(frozen=True)
class Machines:
    """The ranked machines of a job (or the containers of a local run): how many, the GPUs of the one with fewest, the
    TPU they are, and how a message names one."""

    count: int
    gpus: int
    tpu: Tpu | None = None
    name: str = "the machine"


def processes_per_node(config: Config, asked: int | str | None, field: str, command: tuple[str, ...],
                       machines: Machines) -> int:
    """How many trainer processes each machine runs: asked (a number or auto, from field), else what the command's
    own distributed launcher starts (command: the job's, else the trainer's), else one. Refused where the command's
    launcher contradicts the job, or where a machine has fewer GPUs."""
    gpus, tpu, machine = machines.gpus, machines.tpu, machines.name
    trainer = config.trainer
    words = command or (trainer.command if trainer is not None and trainer.command else ())
    launch = launchers.find(words, root=str(config.root))
    if launch is not None:
        problem = launchers.contradiction(launch, machines.count, asked)
        if problem:
            raise ConfigError(problem, field="job.command" if command else "trainer.command")
    if tpu is not None:
        if asked is not None:
            raise ConfigError(f"a TPU VM job runs one trainer process per host, which JAX spreads over its chips: drop "
                              f"{field}", field=field)
        return 1
    wanted = asked if asked is not None else (launchers.declared_per_node(launch) if launch is not None else 1)
    if isinstance(wanted, int) and gpus and wanted > gpus:
        raise ConfigError(f"{wanted} processes per machine, but {machine} has {gpus} GPU(s): at most {gpus}, or auto "
                          "(one per GPU)", field=field)
    if wanted == AUTO_PROCESSES or wanted is None:  # None: accelerate's count, in a config file of its own
        return gpus or 1
    return wanted


def pin(job: VertexJob, digest: str) -> VertexJob:
    """The job with its image named by the digest its registry holds (what plan's preflight found): every pool that
    runs it, the job and the image-sha256 label, as build_job gives them to an image named by digest (which stays as
    it is)."""
    if job.image.digest:
        return job
    pinned = replace(job.image, digest=digest)
    resource = copy.deepcopy(job.resource)
    for pool in (resource.get("jobSpec") or resource.get("trialJobSpec") or {}).get("workerPoolSpecs", []):
        for spec, key in (("containerSpec", "imageUri"), ("pythonPackageSpec", "executorImageUri")):
            if (pool.get(spec) or {}).get(key) == str(job.image):  # not a reduction server's image
                pool[spec][key] = str(pinned)
    if digest.startswith("sha256:") and LABEL_DIGEST not in resource.get("labels", {}):
        labels: dict[str, str] = {}
        for key, value in resource.get("labels", {}).items():  # where build_job puts it: after the version
            labels[key] = value
            if key == LABEL_VERSION:
                labels[LABEL_DIGEST] = digest.removeprefix("sha256:")[:63]  # a label value holds 63 characters
        if len(labels) > 64:
            raise ConfigError("with buildkit-py's lineage labels there are more than 64 labels: drop some",
                              field="job.labels")
        resource["labels"] = labels
    return replace(job, resource=resource, image=pinned)


def _name_base(config: Config) -> str:
    if config.package and config.package.name:
        return config.package.name
    return config.root.name or "job"


def _study(hp: Hyperparameters) -> dict:
    if hp.algorithm == "GRID_SEARCH":
        doubles = [p.name for p in hp.params if p.type == "DOUBLE"]
        if doubles:
            raise ConfigError(f"GRID_SEARCH cannot search DOUBLE parameters ({', '.join(doubles)}): make them DISCRETE",
                              field="hyperparameters.algorithm")
    params = []
    for p in hp.params:
        item: dict[str, Any] = {"parameterId": p.name, "scaleType": _SCALES.get(p.scale or "")}
        if p.type == "DOUBLE":
            item["doubleValueSpec"] = {"minValue": float(p.min), "maxValue": float(p.max)}
        elif p.type == "INTEGER":
            item["integerValueSpec"] = {"minValue": str(p.min), "maxValue": str(p.max)}  # int64: a string in JSON
        elif p.type == "CATEGORICAL":
            item["categoricalValueSpec"] = {"values": list(p.values)}
        else:
            item["discreteValueSpec"] = {"values": [float(v) for v in p.values]}
        params.append(item)
    study = {"metrics": [{"metricId": hp.metric, "goal": hp.goal}], "parameters": params,
             "algorithm": None if hp.algorithm == "ALGORITHM_UNSPECIFIED" else hp.algorithm}
    return {"studySpec": study, "maxTrialCount": hp.max_trials, "parallelTrialCount": hp.parallel_trials,
            "maxFailedTrialCount": hp.max_failed_trials}


def console_url(project: str, region: str, job_id: str) -> str:
    """Where the Cloud console shows the job (the path google-cloud-aiplatform 2.x prints)."""
    return f"https://console.cloud.google.com/agent-platform/locations/{region}/training/{job_id}?project={project}"
