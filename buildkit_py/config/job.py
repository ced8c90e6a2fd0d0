"""The Vertex AI job: `job:` (its pools, reservation, python_package, scheduling), gcloud's --worker-pool-spec, and
`fallbacks:`, the alternatives tried for capacity (buildkit_py/jobs/vertex.py builds the spec)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..errors import ConfigError, show
from ..flags import job_flag_name
from ..patterns import lazy_pattern
from .reading import _err, _Raw
from .values import (
    _ACCELERATOR,
    _ACCELERATOR_RULE,
    _MODULE,
    MAX_ARGS_JSON_BYTES,
    _bool,
    _choice,
    _duration,
    _env,
    _int,
    _list,
    _mapping,
    _pattern,
    _processes,
    _ref,
    _scalar_text,
    _string,
    _strings,
)

_MACHINE_TYPE = lazy_pattern(r"[a-z][a-z0-9]{0,15}(?:-[a-z0-9]{1,16}){1,3}", re.ASCII)
_TPU_TOPOLOGY = lazy_pattern(r"[1-9][0-9]{0,2}(?:x[1-9][0-9]{0,2}){1,2}", re.ASCII)  # chips per axis, "2x2", "2x2x1"
_REGION = lazy_pattern(r"[a-z]{2,20}-[a-z]{2,20}[0-9]{1,2}", re.ASCII)
_PROJECT = lazy_pattern(r"[a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20}", re.ASCII)  # an id or a number
_DISPLAY_NAME = lazy_pattern(r"[A-Za-z][A-Za-z0-9_.-]{0,127}", re.ASCII)
_LABEL_KEY = lazy_pattern(r"[a-z][a-z0-9_-]{0,62}", re.ASCII)  # Google Cloud labels, in ASCII
_LABEL_VALUE = lazy_pattern(r"[a-z0-9_-]{0,63}", re.ASCII)
_GCS_URI = lazy_pattern(r"gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](?:/[A-Za-z0-9._~@+=,:/-]{0,1000})?", re.ASCII)
_SERVICE_ACCOUNT = lazy_pattern(r"[A-Za-z0-9._+-]{1,64}@[a-z0-9.-]{1,253}", re.ASCII)
_VPC = lazy_pattern(r"projects/[0-9]{1,20}/global/networks/[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?", re.ASCII)
_TENSORBOARD = lazy_pattern(r"projects/[a-z0-9-]{1,30}/locations/[a-z0-9-]{1,40}/tensorboards/[0-9]{1,20}", re.ASCII)
_RESERVATION = lazy_pattern(r"[A-Za-z0-9._/-]{1,512}", re.ASCII)
BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")
STRATEGIES = ("STANDARD", "SPOT", "FLEX_START")
RESERVATION_TYPES = ("ANY_RESERVATION", "NO_RESERVATION", "SPECIFIC_RESERVATION")
MAX_LABELS = 64
MAX_REPLICAS = 1000
MAX_ACCELERATORS = 16


@dataclass(frozen=True)
class Pool:
    """One worker pool's machines; in `job` itself the chief's (pool 0)."""

    machine_type: str | None = None
    accelerator_type: str | None = None
    accelerator_count: int | None = None
    replica_count: int | None = None
    boot_disk_type: str | None = None
    boot_disk_size_gb: int | None = None
    tpu_topology: str | None = None  # machineSpec.tpuTopology, for TPU machine types that take one


@dataclass(frozen=True)
class Reservation:
    """`job.reservation`: the reservation affinity of the job's machines (its type, and the label key and values)."""

    type: str
    key: str | None = None
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class PythonPackage:
    """`job.python_package`: a PythonPackageSpec: the executor image, the package URIs and the module to run."""

    executor: str  # an image reference, or NAME==VERSION of Google's prebuilt training images
    package_uris: tuple[str, ...]
    module: str


@dataclass(frozen=True)
class JobConfig:
    """`job:`: the Vertex AI job's settings: name, project, region, worker pools, command, scheduling and outputs."""

    name: str | None = None  # the display name; default <base>_<YYYYMMDD_HHMMSS>
    project: str | None = None
    region: str | None = None
    image: str | None = None
    chief: Pool = Pool()
    reservation: Reservation | None = None
    workers: Pool | None = None  # pool 1 (default: the chief's machines)
    parameter_servers: Pool | None = None  # pool 2
    reduction_server: Pool | None = None  # pool 2, Google's reduction server image
    evaluators: Pool | None = None  # pool 3
    command: tuple[str, ...] = ()
    args: tuple[str, ...] | None = None  # None: the image's default trainer args
    env: tuple[tuple[str, str], ...] = ()
    processes_per_node: int | str | None = None  # this job's, over trainer.processes_per_node
    python_package: PythonPackage | None = None
    timeout: int | None = None  # seconds
    restart_job_on_worker_restart: bool | None = None
    strategy: str | None = None
    max_wait_duration: int | None = None  # seconds
    disable_retries: bool | None = None
    service_account: str | None = None
    network: str | None = None
    base_output_directory: str | None = None
    staging_bucket: str | None = None
    tensorboard: str | None = None
    enable_web_access: bool | None = None
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Fallback:
    """An alternative tried, in order, when the service refuses the job for capacity or quota."""

    accelerator_type: str | None = None
    accelerator_count: int | None = None
    machine_type: str | None = None
    region: str | None = None
    strategy: str | None = None


_POOL_FIELDS: dict[str, Callable[[_Raw, tuple, Any], Any]] = {
    "machine_type": lambda r, p, v: _pattern(r, p, v, _MACHINE_TYPE, "a Compute Engine machine type, e.g. n1-standard-8"),
    "accelerator_type": lambda r, p, v: _pattern(r, p, v, _ACCELERATOR, _ACCELERATOR_RULE),
    "accelerator_count": lambda r, p, v: _int(r, p, v, 0, MAX_ACCELERATORS),
    "replica_count": lambda r, p, v: _int(r, p, v, 1, MAX_REPLICAS),
    "boot_disk_type": lambda r, p, v: _choice(r, p, v, BOOT_DISK_TYPES),
    "boot_disk_size_gb": lambda r, p, v: _int(r, p, v, 100, 64000),
    "tpu_topology": lambda r, p, v: _pattern(r, p, v, _TPU_TOPOLOGY, "TPU chips per axis, e.g. 2x2 or 2x2x1"),
}


def _pool(raw: _Raw, path: tuple, value: Any) -> Pool:
    data = _mapping(raw, path, value, list(_POOL_FIELDS), "machine_type, accelerator_type, accelerator_count, replica_count, "
                                                          "boot_disk_type, boot_disk_size_gb, tpu_topology")
    return Pool(**{k: _POOL_FIELDS[k](raw, path + (k,), v) for k, v in data.items()})


def _reservation(raw: _Raw, path: tuple, value: Any) -> Reservation:
    data = _mapping(raw, path, value, ["type", "key", "values"], "type, key and values")
    kind = _choice(raw, path + ("type",), data.get("type"), RESERVATION_TYPES) if "type" in data else None
    if kind is None:
        raise _err(raw, path, f"type is required: one of {', '.join(RESERVATION_TYPES)}")
    key = _pattern(raw, path + ("key",), data["key"], _RESERVATION, "a label key, e.g. compute.googleapis.com/reservation-name") \
        if "key" in data else None
    values = _strings(raw, path + ("values",), data.get("values", []),
                      lambda r, p, v: _pattern(r, p, v, _RESERVATION, "a reservation name or projects/P/zones/Z/reservations/R"))
    if (kind == "SPECIFIC_RESERVATION") != bool(key and values):
        raise _err(raw, path, "key and values go with type SPECIFIC_RESERVATION, and only with it")
    return Reservation(kind, key, values)


def _labels(raw: _Raw, path: tuple, value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise _err(raw, path, f"{show(value)} must be a mapping of key: value")
    if len(value) > MAX_LABELS:
        raise _err(raw, path, f"{len(value)} labels are too many: at most {MAX_LABELS}")
    out = []
    for key, item in value.items():
        if not isinstance(key, str) or not _LABEL_KEY.fullmatch(key) or key.startswith("goog"):
            raise _err(raw, path + (key,), f"{show(key)} is not allowed: a label key is 1-63 lowercase ASCII letters, digits, "
                                           "'_' and '-', starting with a letter, not starting with 'goog'")
        text = _scalar_text(raw, path + (key,), item)
        if not _LABEL_VALUE.fullmatch(text):
            raise _err(raw, path + (key,), f"{show(text)} is not allowed: a label value is 0-63 lowercase ASCII letters, "
                                           "digits, '_' and '-'")
        out.append((key, text))
    return tuple(out)


def _python_package(raw: _Raw, path: tuple, value: Any) -> PythonPackage:
    data = _mapping(raw, path, value, ["executor", "package_uris", "module"], "executor, package_uris and module")
    missing = [k for k in ("executor", "package_uris", "module") if k not in data]
    if missing:
        raise _err(raw, path, f"{', '.join(missing)} required: an executor image (or NAME==VERSION), gs:// package URIs "
                              "and the module to run")
    executor = _string(raw, path + ("executor",), data["executor"])
    if "==" not in executor:  # NAME==VERSION is looked up in the executor catalog when the spec is made
        executor = str(_ref(raw, path + ("executor",), executor))
    uris = _strings(raw, path + ("package_uris",), data["package_uris"],
                    lambda r, p, v: _pattern(r, p, v, _GCS_URI, "a gs://BUCKET/OBJECT URI (Vertex AI reads packages from "
                                                                "Cloud Storage; `buildkit-py package --stage gs://...`)"))
    if not uris:
        raise _err(raw, path + ("package_uris",), "give at least one gs:// package URI")
    module = _pattern(raw, path + ("module",), data["module"], _MODULE, "a dotted Python module name, e.g. trainer.task")
    return PythonPackage(executor, uris, module)


def _args(raw: _Raw, path: tuple, value: Any) -> tuple[str, ...]:
    args = tuple(_scalar_text(raw, path + (i,), v) for i, v in enumerate(_list(raw, path, value)))
    if len(json.dumps(args)) > MAX_ARGS_JSON_BYTES:
        raise _err(raw, path, f"the arguments are too long: at most {MAX_ARGS_JSON_BYTES} bytes as JSON")
    return args


_JOB_FIELDS: dict[str, Callable[[_Raw, tuple, Any], Any]] = {
    "name": lambda r, p, v: _pattern(r, p, v, _DISPLAY_NAME, "a display name: ASCII letters, digits, '_', '.' and '-', "
                                                           "starting with a letter, at most 128 characters"),
    "project": lambda r, p, v: _pattern(r, p, v, _PROJECT, "a Google Cloud project id (6-30 lowercase letters, digits and "
                                                         "'-', starting with a letter) or number", allow_numbers=True),
    "region": lambda r, p, v: _pattern(r, p, v, _REGION, "a Google Cloud region, e.g. us-central1 or europe-west4"),
    "image": lambda r, p, v: str(_ref(r, p, v)),
    **_POOL_FIELDS,
    "reservation": _reservation,
    "workers": _pool,
    "parameter_servers": _pool,
    "reduction_server": _pool,
    "evaluators": _pool,
    "command": _args,
    "args": _args,
    "env": _env,
    "processes_per_node": _processes,
    "python_package": _python_package,
    "timeout": _duration,
    "restart_job_on_worker_restart": _bool,
    "strategy": lambda r, p, v: _choice(r, p, v, STRATEGIES),
    "max_wait_duration": _duration,
    "disable_retries": _bool,
    "service_account": lambda r, p, v: _pattern(r, p, v, _SERVICE_ACCOUNT, "a service account email, e.g. "
                                                "trainer@PROJECT.iam.gserviceaccount.com"),
    "network": lambda r, p, v: _pattern(r, p, v, _VPC, "a VPC network: projects/PROJECT_NUMBER/global/networks/NAME"),
    "base_output_directory": lambda r, p, v: _pattern(r, p, v, _GCS_URI, "a gs://BUCKET/PATH URI"),
    "staging_bucket": lambda r, p, v: _pattern(r, p, v, _GCS_URI, "a gs://BUCKET[/PATH] URI"),
    "tensorboard": lambda r, p, v: _pattern(r, p, v, _TENSORBOARD, "projects/P/locations/L/tensorboards/ID"),
    "enable_web_access": _bool,
    "labels": _labels,
}
JOB_KEYS = tuple(_JOB_FIELDS)


def _job(raw: _Raw, path: tuple, value: Any) -> JobConfig:
    data = _mapping(raw, path, value, list(_JOB_FIELDS), "job settings")
    values = {k: _JOB_FIELDS[k](raw, path + (k,), v) for k, v in data.items()}
    chief = Pool(**{k: values.pop(k) for k in list(values) if k in _POOL_FIELDS})
    if "parameter_servers" in values and "reduction_server" in values:
        raise _err(raw, path + ("reduction_server",), "give parameter_servers or reduction_server (both use pool 2), not both")
    if "python_package" in values and ("image" in values or "command" in values):
        raise _err(raw, path + ("python_package",), "a python_package job runs on its executor: drop image and command")
    return JobConfig(chief=chief, **values)


def check_job_key(raw: _Raw, path: tuple, key: str, value: Any) -> Any:
    """A key under `job:` read from another format (gcloud's job config), checked by its validator and named at
    that file's own field and line."""
    return _JOB_FIELDS[key](raw, path, value)


def job_flag(key: str, value: Any) -> Any:
    """A job setting given as a flag (--machine-type...), checked by the validator of the config key."""
    raw = _Raw(data={}, source=job_flag_name(key), positions={("job", key): job_flag_name(key)}, flags={"job"})
    return _JOB_FIELDS[key](raw, ("job", key), value)


# gcloud's --worker-pool-spec keys that buildkit-py's job takes, as the pool keys they set
_SPEC_KEYS = {"machine-type": "machine_type", "replica-count": "replica_count", "accelerator-type": "accelerator_type",
              "accelerator-count": "accelerator_count"}
# gcloud's keys for what buildkit-py decides itself: the image it built, or the executor and package of --mode package
_SPEC_IMAGE_KEYS = ("container-image-uri", "executor-image-uri", "output-image-uri", "python-module", "script",
                    "local-package-path", "requirements", "extra-dirs", "extra-packages")
POOL_ORDER = ("chief", "workers", "parameter_servers", "evaluators")  # Vertex AI's pools 0-3


def worker_pool_specs(specs: tuple[str, ...] | list[str]) -> dict[str, Pool | None]:
    """gcloud's --worker-pool-spec values, one per pool in Vertex AI's order, as the job's pools: they replace the
    config's pools as a whole (an empty spec leaves that pool out). The chief's replica_count is the total, as in
    `job:`."""
    flag = job_flag_name("worker_pool_specs")
    if not isinstance(specs, (list, tuple)) or not all(isinstance(s, str) for s in specs):
        raise ConfigError(f"{show(specs)} is not allowed: a list of specs like machine-type=n1-standard-8,"
                          "replica-count=1", field=flag)
    if not 0 < len(specs) <= len(POOL_ORDER):
        raise ConfigError(f"{len(specs)} specs: give one to {len(POOL_ORDER)} (chief, workers, parameter servers, "
                          "evaluators)", field=flag)
    pools: dict[str, Pool | None] = {}
    for index, (spec, name) in enumerate(zip(specs, POOL_ORDER, strict=False)):
        where = f"{flag} #{index + 1} ({name})"
        data: dict[str, Any] = {}
        for item in spec.split(",") if spec.strip() else []:
            key, equals, value = item.partition("=")
            key = key.strip()
            if key in _SPEC_IMAGE_KEYS:
                raise ConfigError(f"{show(key)}: buildkit-py runs the image it built (or --image) in every pool; "
                                  "drop it (for an executor and a package: autopackage --mode package)", field=where)
            if key not in _SPEC_KEYS or not equals:
                raise ConfigError(f"{show(item)} is not allowed: KEY=VALUE with KEY one of {', '.join(_SPEC_KEYS)}",
                                  field=where)
            if _SPEC_KEYS[key] in data:
                raise ConfigError(f"{show(key)} is given twice", field=where)
            text = value.strip()
            data[_SPEC_KEYS[key]] = int(text) if key.endswith("-count") and text.isdigit() else text
        raw = _Raw(data={}, source=where, positions={("job", name): where}, flags={"job"})
        pools[name] = _pool(raw, ("job", name), data) if data else None
    chief = pools["chief"]
    if chief is None:
        raise ConfigError("the first spec is the chief's (pool 0): it cannot be empty", field=f"{flag} #1 (chief)")
    if chief.replica_count not in (None, 1):
        raise ConfigError(f"replica-count={chief.replica_count}: pool 0 runs the one chief; give the workers in a "
                          "second spec", field=f"{flag} #1 (chief)")
    workers = pools.get("workers")
    total = 1 + (workers.replica_count or 1 if workers is not None else 0)
    pools["chief"] = replace(chief, replica_count=total)
    return {name: pools.get(name) for name in POOL_ORDER}


_FALLBACK_FIELDS = {k: _JOB_FIELDS[k] for k in ("accelerator_type", "accelerator_count", "machine_type", "region", "strategy")}


def _fallbacks(raw: _Raw, path: tuple, value: Any) -> tuple[Fallback, ...]:
    out = []
    for i, item in enumerate(_list(raw, path, value, limit=10)):
        data = _mapping(raw, path + (i,), item, list(_FALLBACK_FIELDS), ", ".join(_FALLBACK_FIELDS))
        if not data:
            raise _err(raw, path + (i,), f"an alternative sets at least one of {', '.join(_FALLBACK_FIELDS)}")
        out.append(Fallback(**{k: _FALLBACK_FIELDS[k](raw, path + (i, k), v) for k, v in data.items()}))
    return tuple(out)
