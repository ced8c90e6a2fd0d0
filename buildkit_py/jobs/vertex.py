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
from dataclasses import dataclass, replace
from typing import Any

from ..catalog.matrix import Tpu, arch, load_machines, load_matrix
from ..config import Config, Fallback, Hyperparameters, JobConfig, Pool
from ..errors import ConfigError, ResolutionError, show
from ..launcher import launchers
from ..launcher.constants import AUTO_PROCESSES, EXPECT_GPUS_ENV, EXPECT_TPU_ENV, PROCESSES_ENV
from ..oci.refs import DOCKER_HUB, ImageRef, parse_ref, registry_host
from ..patterns import lazy_pattern
from ..pipeline.plan import tpu_named
from ..resources import LAUNCHER_MODULE
from ..version import __version__

TARGETS = ("vertex", "loopback")  # loopback: an API on this machine (a fake, an emulator): loopback images allowed
DEFAULT_REGION = "us-central1"
CPU_MACHINE = "n1-standard-4"
REDUCTION_SERVER_IMAGE = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
REDUCTION_SERVER_MACHINE = "n1-highcpu-16"
MAX_NAME = 128
_STAMP = "%Y%m%d_%H%M%S"
LABEL_VERSION, LABEL_DIGEST, LABEL_GIT = "buildkit-py-version", "image-sha256", "git-commit"
LABEL_LOCK = "buildkit-lock-sha256"  # the buildkit.lock section the image was built from
_SCALES = {"linear": "UNIT_LINEAR_SCALE", "log": "UNIT_LOG_SCALE", "reverse_log": "UNIT_REVERSE_LOG_SCALE"}
_LOOPBACK_NAMES = ("localhost", "host.docker.internal")


def _vcpus(machine_type: str) -> int | None:
    last = machine_type.rsplit("-", 1)[-1]
    return int(last) if last.isdigit() else None


def check_machine(machine_type: str, accelerator: str | None, count: int, field: str) -> None:
    """Does Vertex AI offer this machine with this many of these GPUs? ConfigError (exit 2) if not."""
    m = load_machines()
    source = "(base_images/machines.yaml)"
    if machine_type in m.fixed:
        gpu, built_in = m.fixed[machine_type]
        if accelerator is None or count == 0:
            raise ConfigError(f"{machine_type} comes with {built_in} {gpu}: set accelerator_type {gpu} and "
                              f"accelerator_count {built_in} {source}", field=field)
        if accelerator != gpu or count != built_in:
            others = [t for t, (g, _) in m.fixed.items() if g == accelerator] + \
                     (list(m.n1_types[:1]) if accelerator in m.attached else [])
            hint = f"; {accelerator} runs on {', '.join(others)}" if others else ""
            raise ConfigError(f"{machine_type} has {built_in} {gpu}, not {count} {show(accelerator)}{hint} {source}",
                              field=field)
        return
    if accelerator is not None and count > 0:
        if machine_type not in m.n1_types or accelerator not in m.attached:
            fits = [t for t, (g, _) in m.fixed.items() if g == accelerator]
            where = f"on {', '.join(fits)}" if fits else ("on N1 machines (" + ", ".join(m.n1_types[:3]) + ", ...)"
                                                          if accelerator in m.attached else "nowhere we know of")
            raise ConfigError(f"{show(machine_type)} takes no {show(accelerator)}: it runs {where} {source}", field=field)
        counts = m.attached[accelerator]
        if count not in counts:
            raise ConfigError(f"{count} x {accelerator} is not offered: counts {', '.join(map(str, counts))} {source}",
                              field=field)
        vcpus = _vcpus(machine_type)
        if vcpus is not None and vcpus > counts[count]:
            fewer = [c for c, most in counts.items() if most >= vcpus]
            raise ConfigError(f"{machine_type} has {vcpus} vCPUs: with {accelerator} that needs "
                              f"{' or '.join(map(str, fewer)) or 'more'} GPUs, not {count} {source}", field=field)
        return
    if machine_type.split("-", 1)[0] not in m.cpu_families and machine_type not in m.n1_types:
        raise ConfigError(f"{show(machine_type)} is not a machine type for custom training without GPUs: families "
                          f"{', '.join(m.cpu_families)} {source}", field=field)


def default_machine(accelerator: str | None, count: int, field: str) -> str:
    m = load_machines()
    if accelerator is None or count == 0:
        return CPU_MACHINE
    fixed = [t for t, spec in m.fixed.items() if spec == (accelerator, count)]
    if fixed:
        return fixed[0]
    offered = [f"{t} ({n})" for t, (g, n) in m.fixed.items() if g == accelerator]
    if offered:
        raise ConfigError(f"{count} x {accelerator} is not offered; machines with it: {', '.join(offered)} "
                          "(base_images/machines.yaml)", field=field)
    if accelerator in m.attached and count in m.attached[accelerator]:
        # the biggest standard N1 the count allows, up to 8 vCPUs per GPU (a usual data-loading need)
        limit = min(m.attached[accelerator][count], 8 * count)
        return max((t for t in m.n1_types if t.startswith("n1-standard-") and (_vcpus(t) or 0) <= limit),
                   key=lambda t: _vcpus(t) or 0)
    return CPU_MACHINE  # check_machine then says where the accelerator runs


def default_count(machine_type: str | None, accelerator: str | None) -> int:
    fixed = load_machines().fixed.get(machine_type or "")
    if fixed:
        return fixed[1]
    return 1 if accelerator else 0


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


def _machine_spec(pool: Pool, reservation: dict | None) -> dict:
    return {"machineType": pool.machine_type, "acceleratorType": pool.accelerator_type if pool.accelerator_count else None,
            "acceleratorCount": pool.accelerator_count or None, "tpuTopology": pool.tpu_topology,
            "reservationAffinity": reservation}


def _resolve_pool(pool: Pool, field: str) -> Pool:
    """Defaults filled in (machine from the accelerator; accelerator and count from the machine), then checked."""
    fixed = load_machines().fixed.get(pool.machine_type or "")
    if fixed and pool.accelerator_type is None and pool.accelerator_count is None:
        pool = replace(pool, accelerator_type=fixed[0], accelerator_count=fixed[1])
    count = pool.accelerator_count if pool.accelerator_count is not None else default_count(pool.machine_type,
                                                                                            pool.accelerator_type)
    machine = pool.machine_type or default_machine(pool.accelerator_type, count, f"{field}.accelerator_count")
    if count and pool.accelerator_type is None:
        raise ConfigError(f"accelerator_count {count} needs an accelerator_type", field=f"{field}.accelerator_type")
    check_machine(machine, pool.accelerator_type, count, f"{field}.machine_type")
    return replace(pool, machine_type=machine, accelerator_count=count)


def check_pool(pool: Pool, field: str) -> None:
    """ConfigError (exit 2) unless Vertex AI offers the pool's machine with its accelerators, TPU or GPU, as the job
    will be checked: for a job file, said where the file wrote them."""
    tpu = _tpu_of(pool)
    if tpu is not None:
        _resolve_tpu_pool(pool, tpu, field)
    else:
        _resolve_pool(pool, field)


def _tpu_of(pool: Pool) -> Tpu | None:
    """The TPU a pool asks for: its accelerator_type, else the TPU its machine type comes with."""
    matrix = load_matrix()
    if pool.accelerator_type is not None:
        return tpu_named(matrix, pool.accelerator_type, "job.accelerator_type")
    return next((t for t in matrix.tpus.values() if pool.machine_type in t.machines), None)


def _resolve_tpu_pool(pool: Pool, tpu: Tpu, field: str) -> tuple[Pool, int]:
    """A TPU VM pool checked against base_images/tpus.yaml: (the pool with its machine type,
    topology and count filled in, the chips of its machine)."""
    source = "(base_images/tpus.yaml)"
    offered = ", ".join(f"{m.name} ({m.chips} chip{'s' if m.chips > 1 else ''}"
                        f"{', topology ' + m.topology if m.topology else ''})"
                        for m in tpu.machines.values())
    name = pool.machine_type or min(tpu.machines.values(), key=lambda m: m.chips).name
    machine = tpu.machines.get(name)
    if machine is None:
        raise ConfigError(f"{show(name)} is not a machine type for {tpu.name}: {offered} {source}",
                          field=f"{field}.machine_type")
    if pool.replica_count not in (None, 1):
        raise ConfigError(f"replica_count {pool.replica_count}: a TPU VM job runs exactly one replica on Vertex AI "
                          f"(one {name}); drop replica_count or set it to 1", field=f"{field}.replica_count")
    count = pool.accelerator_count
    if machine.accelerator_count is None and count:
        raise ConfigError(f"accelerator_count {count}: {name} comes with {machine.chips} {tpu.name} chip(s) and Vertex AI "
                          f"takes no acceleratorCount for it; drop accelerator_count {source}",
                          field=f"{field}.accelerator_count")
    if machine.accelerator_count is not None and count not in (None, machine.accelerator_count):
        raise ConfigError(f"accelerator_count {count}: {name} with {tpu.name} takes accelerator_count "
                          f"{machine.accelerator_count} {source}", field=f"{field}.accelerator_count")
    topology = pool.tpu_topology or machine.topology
    if topology != machine.topology:
        allowed = f"its topology is {machine.topology}" if machine.topology else "it takes none"
        raise ConfigError(f"tpu_topology {show(pool.tpu_topology)} does not fit {name}: {allowed} (one host; larger "
                          f"slices need several replicas, which a TPU VM job cannot have); machine types: {offered} "
                          f"{source}", field=f"{field}.tpu_topology")
    return replace(pool, machine_type=name, accelerator_type=tpu.name, accelerator_count=machine.accelerator_count,
                   tpu_topology=topology), machine.chips


def build_job(config: Config, job: JobConfig, *, target: str = "vertex", now: _dt.datetime | None = None,
              revision: str | None = None, check_accelerator=None,
              fallback: Fallback | None = None, lock_digest: str | None = None,
              image_platform: str | None = None) -> VertexJob:
    """The job resource. check_accelerator(accelerator) -> notes raises when the image has no kernels
    for the GPU; fallback replaces the chief's accelerator, machine, region or strategy; image_platform: the
    platform of the image built from this config (its plan's: GB200's make it linux/arm64), else the config's."""
    if target not in TARGETS:
        raise ConfigError(f"{show(target)} is not allowed: one of {', '.join(TARGETS)}", field="--target")
    now = now or _dt.datetime.now(_dt.UTC)
    notes: list[str] = []
    chief = replace(job.chief, accelerator_type=job.chief.accelerator_type or config.accelerator)
    strategy = job.strategy
    if fallback is not None:
        switched = fallback.accelerator_type is not None and fallback.accelerator_type != chief.accelerator_type
        chief = replace(chief, accelerator_type=fallback.accelerator_type or chief.accelerator_type,
                        accelerator_count=fallback.accelerator_count or (None if switched else chief.accelerator_count),
                        machine_type=fallback.machine_type or (None if switched else chief.machine_type))
        strategy = fallback.strategy or strategy
    tpu = _tpu_of(chief)
    chips = 0
    if tpu is not None:
        # Vertex AI runs a TPU VM job as one worker pool with one replica.
        for key in ("workers", "parameter_servers", "reduction_server", "evaluators"):
            if getattr(job, key) is not None:
                raise ConfigError(f"a TPU VM job ({tpu.name}) has exactly one worker pool with one replica on Vertex AI: "
                                  f"drop job.{key}", field=f"job.{key}")
        chief, chips = _resolve_tpu_pool(chief, tpu, "job")
    elif chief.tpu_topology is not None:
        raise ConfigError(f"tpu_topology {show(chief.tpu_topology)} goes with a TPU machine type; this job has no TPU "
                          "(set accelerator_type to a TPU, e.g. TPU_V5_LITEPOD)", field="job.tpu_topology")
    else:
        chief = _resolve_pool(chief, "job")
    if job.max_wait_duration is not None and strategy != "FLEX_START":
        raise ConfigError("max_wait_duration goes with strategy FLEX_START (how long to wait for capacity)",
                          field="job.max_wait_duration")

    package = job.python_package
    image_text = package.executor if package else job.image
    if package and "==" in package.executor:
        from ..catalog.executors import resolve_executor  # the catalog is read only for catalog executors

        if tpu is not None:
            raise ConfigError(f"the prebuilt executors are for CPUs and GPUs; on {tpu.name} give an executor image built "
                              f"with accelerator: {tpu.name}", field="job.python_package.executor")
        try:
            image_text = resolve_executor(package.executor, gpu=bool(chief.accelerator_count),
                                          region=(fallback and fallback.region) or job.region).uri
        except (ConfigError, ResolutionError) as exc:  # restated under the config key
            raise ConfigError(str(exc).removeprefix("--executor: "), field="job.python_package.executor") from None
    if image_text is None:
        raise ConfigError("no image: pass --image (the pushed trainer image, e.g. from `buildkit-py build --push`) or set "
                          "job.image", field="--image")
    ref = pullable(image_text, target, "job.python_package.executor" if package else "--image")
    wanted = load_machines().platform(chief.machine_type)
    # A multi-platform image (an index) runs where any of its platforms does.
    built_for = config.platforms or tuple(filter(None, (image_platform or config.platform,)))
    if built_for and not package and wanted not in {arch(p) for p in built_for}:
        raise ConfigError(f"the image is built for {', '.join(built_for)}; {chief.machine_type} runs {wanted}",
                          field="platform")
    if (chief.accelerator_count or tpu) and check_accelerator is not None and not package:
        notes.extend(check_accelerator(chief.accelerator_type))
    elif tpu:
        notes.append(f"the image is not resolved from this config: its TPU build for {tpu.name} is not checked")
    if chief.accelerator_count and chief.accelerator_count > 1 and not tpu:
        notes.append(f"{chief.accelerator_count} GPUs on one machine: NCCL passes data between them through /dev/shm, "
                     "which a CustomJob cannot size; if NCCL fails with shared-memory errors, set env NCCL_SHM_DISABLE=1 "
                     "(slower, over sockets)")

    notes += _secret_notes(job.env, job.args or ())

    def container(pool: Pool, ranked: bool = False) -> dict:
        env = [{"name": k, "value": v} for k, v in job.env if k not in (EXPECT_GPUS_ENV, EXPECT_TPU_ENV, PROCESSES_ENV)]
        env.append({"name": EXPECT_GPUS_ENV, "value": "0" if tpu else str(pool.accelerator_count or 0)})
        if tpu:  # the launcher checks that this many TPU chips are visible
            env.append({"name": EXPECT_TPU_ENV, "value": str(chips)})
        if ranked and processes is not None:  # the launcher starts them (servers and evaluators run one)
            env.append({"name": PROCESSES_ENV, "value": str(processes)})
        if package:
            return {"pythonPackageSpec": {"executorImageUri": str(ref), "packageUris": list(package.package_uris),
                                          "pythonModule": package.module, "args": list(job.args or ()), "env": env}}
        # A command replaces the image's ENTRYPOINT (the launcher): keep the launcher in front so its checks run.
        command = ["python", "-m", LAUNCHER_MODULE, "--", *job.command] if job.command else None
        return {"containerSpec": {"imageUri": str(ref), "command": command,
                                  "args": list(job.args) if job.args is not None else None, "env": env}}

    reservation = None
    if job.reservation:
        reservation = {"reservationAffinityType": job.reservation.type, "key": job.reservation.key,
                       "values": list(job.reservation.values)}

    def spec(pool: Pool, replicas: int, runs: dict) -> dict:
        disk = {"bootDiskType": pool.boot_disk_type, "bootDiskSizeGb": pool.boot_disk_size_gb}
        return {"machineSpec": _machine_spec(pool, reservation), "replicaCount": str(replicas), "diskSpec": disk, **runs}

    total = chief.replica_count or 1
    workers = job.workers
    if workers is not None and workers.replica_count is not None and chief.replica_count is not None \
            and workers.replica_count != total - 1:
        raise ConfigError(f"replica_count {total} means {total - 1} workers, but workers.replica_count is "
                          f"{workers.replica_count}: give one of them", field="job.workers.replica_count")
    n_workers = workers.replica_count if workers is not None and workers.replica_count is not None else total - 1
    worker_pool = _resolve_pool(_inherit(workers, chief), "job.workers") if n_workers else None
    processes, field = asked_processes(config, job.processes_per_node, "--processes-per-node")
    if processes is not None and package is not None and "==" in package.executor:
        raise ConfigError(f"Google's prebuilt executor {package.executor} runs one process per machine, without "
                          "buildkit-py's launcher: build an executor with it (buildkit-py executor build) or drop "
                          f"{field}", field=field)
    gpus = min(p.accelerator_count or 0 for p in (chief, worker_pool) if p is not None)
    per_node = processes_per_node(config, processes, field, job.command, 1 + n_workers, gpus, tpu, chief.machine_type)
    if per_node > 1 or 1 + n_workers > 1:
        notes.append(f"world size {(1 + n_workers) * per_node}: {1 + n_workers} machine(s) x {per_node} trainer "
                     "process(es)")
    pools: list[dict] = [spec(chief, 1, container(chief, ranked=True))]
    if worker_pool is not None:
        pools.append(spec(worker_pool, n_workers, container(worker_pool, ranked=True)))
    second = job.parameter_servers or job.reduction_server
    if second is not None or job.evaluators is not None:
        pools += [{}] * (2 - len(pools))
    if job.parameter_servers is not None:
        pool = _resolve_pool(_inherit(job.parameter_servers, chief, gpus=False), "job.parameter_servers")
        pools.append(spec(pool, pool.replica_count or 1, container(pool)))
    elif job.reduction_server is not None:
        pool = replace(job.reduction_server, machine_type=job.reduction_server.machine_type or REDUCTION_SERVER_MACHINE)
        pool = _resolve_pool(pool, "job.reduction_server")
        if pool.accelerator_count:
            raise ConfigError("reduction servers run on CPUs: drop accelerator_type and accelerator_count",
                              field="job.reduction_server")
        pools.append(spec(pool, pool.replica_count or 1, {"containerSpec": {"imageUri": REDUCTION_SERVER_IMAGE}}))
    if job.evaluators is not None:
        pools += [{}] * (3 - len(pools))
        pool = _resolve_pool(_inherit(job.evaluators, chief), "job.evaluators")
        pools.append(spec(pool, pool.replica_count or 1, container(pool)))

    scheduling = {"timeout": _duration(job.timeout), "restartJobOnWorkerRestart": job.restart_job_on_worker_restart,
                  "strategy": strategy, "maxWaitDuration": _duration(job.max_wait_duration),
                  "disableRetries": job.disable_retries}
    custom = {"workerPoolSpecs": pools, "scheduling": scheduling, "serviceAccount": job.service_account,
              "network": job.network, "baseOutputDirectory": {"outputUriPrefix": job.base_output_directory}
              if job.base_output_directory else None, "tensorboard": job.tensorboard,
              "enableWebAccess": job.enable_web_access}
    labels = dict(job.labels)
    labels.setdefault(LABEL_VERSION, __version__.replace(".", "-"))
    if ref.digest and ref.digest.startswith("sha256:"):
        labels.setdefault(LABEL_DIGEST, ref.digest.removeprefix("sha256:")[:63])  # a label value holds 63 characters
    if revision:
        labels.setdefault(LABEL_GIT, revision.lower()[:63])
    if lock_digest:
        labels.setdefault(LABEL_LOCK, lock_digest.removeprefix("sha256:")[:63])
    if len(labels) > 64:
        raise ConfigError("with buildkit-py's lineage labels there are more than 64 labels: drop some", field="job.labels")
    name = job.name or display_name(_name_base(config), now)
    if config.hyperparameters is not None:
        resource = {"displayName": name, **_study(config.hyperparameters), "trialJobSpec": custom, "labels": labels}
        kind = "hyperparameterTuningJobs"
    else:
        resource = {"displayName": name, "jobSpec": custom, "labels": labels}
        kind = "customJobs"
    if tpu is not None:
        return VertexJob(kind, _prune(resource), ref, tpu.name, chips, chief.machine_type, strategy, tuple(notes))
    return VertexJob(kind, _prune(resource), ref, chief.accelerator_type if chief.accelerator_count else None,
                     chief.accelerator_count or 0, chief.machine_type, strategy, tuple(notes), 1 + n_workers, per_node)


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


def processes_per_node(config: Config, asked: int | str | None, field: str, command: tuple[str, ...],
                       machines: int, gpus: int, tpu: Tpu | None = None, machine: str = "the machine") -> int:
    """How many trainer processes each of `machines` runs: asked (a number or auto, from field), else what the
    command's own distributed launcher starts (command: the job's, else the trainer's), else one. Refused where the
    command's launcher contradicts the job, or where a machine has fewer GPUs (gpus: the fewest of any machine)."""
    trainer = config.trainer
    words = command or (trainer.command if trainer is not None and trainer.command else ())
    launch = launchers.find(words, root=str(config.root))
    if launch is not None:
        problem = launchers.contradiction(launch, machines, asked)
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


def _inherit(pool: Pool | None, chief: Pool, *, gpus: bool = True) -> Pool:
    """A pool's machines default to the chief's (parameter servers: without its GPUs)."""
    pool = pool or Pool()
    if pool.machine_type or pool.accelerator_type:
        return pool
    return replace(pool, machine_type=chief.machine_type if gpus else CPU_MACHINE,
                   accelerator_type=chief.accelerator_type if gpus else None,
                   accelerator_count=chief.accelerator_count if gpus else 0,
                   boot_disk_type=pool.boot_disk_type or chief.boot_disk_type,
                   boot_disk_size_gb=pool.boot_disk_size_gb or chief.boot_disk_size_gb)


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
