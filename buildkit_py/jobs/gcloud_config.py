"""The file a team gives `gcloud ai custom-jobs create --config` (a CustomJobSpec) or `gcloud ai hp-tuning-jobs
create --config` (studySpec, trialJobSpec and the trial counts), as the config keys of the same job.

Every value is checked by its config key's validator at the file's own field and line; a key the API does not
have is refused there (the service would refuse it too), one the job cannot carry (NFS mounts, a persistent
resource...) is listed as not converted. Placeholders are filled from the environment: `${VAR}` anywhere, and a
value that is only `{NAME}` (gcloud's documentation writes `{IMAGE_URI}`, which YAML reads unquoted as the mapping
{IMAGE_URI: null}); one left unset is refused naming the flag that replaces the field, unless that flag is given.
A flag given beside the file fills or overrides the field it replaces (a note names what it replaced). YAML null
(every entry commented out) is empty where a list or a mapping belongs, unset where a scalar does (the image
excepted: it is refused unless --image gives it). The image is the one buildkit-py built or --image names: the
file's imageUri stands only where neither is given.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..config import POOL_ORDER, JobConfig, Pool, check_hyperparameters, check_job_key, field_error, field_name, load_raw
from ..errors import ConfigError, show, shown_name
from ..flags import job_flag_name
from .aiplatform import _SCALES, Conversion, braced, field_kind, placeholders, substituted, written
from .machines import check_pool
from .vertex import REDUCTION_SERVER_IMAGE

FLAG = "--job-config"
# What each part of the file may hold: a known key not converted says why; any other key is refused.
_SPEC_KEYS = {"workerPoolSpecs", "scheduling", "serviceAccount", "network", "baseOutputDirectory", "tensorboard",
              "enableWebAccess"}
_SPEC_LEFT = {"persistentResourceId": "a persistent resource is not set by buildkit-py",
              "reservedIpRanges": "reserved IP ranges are not set by buildkit-py",
              "pscInterfaceConfig": "Private Service Connect is not set by buildkit-py",
              "protectedArtifactLocationId": "not set by buildkit-py", "enableDashboardAccess": "not set by buildkit-py",
              "experiment": "experiments are not set by buildkit-py", "experimentRun": "not set by buildkit-py",
              "models": "not set by buildkit-py"}
_POOL_KEYS = {"machineSpec", "replicaCount", "diskSpec", "containerSpec", "pythonPackageSpec"}
_POOL_LEFT = {"nfsMounts": "NFS mounts are not set by buildkit-py"}
_TUNING_KEYS = {"studySpec", "trialJobSpec", "maxTrialCount", "parallelTrialCount", "maxFailedTrialCount",
                "displayName", "labels"}
_TUNING_LEFT = {"encryptionSpec": "customer-managed encryption keys are not set by buildkit-py"}
_VALUE_SPECS = {"doubleValueSpec": "DOUBLE", "integerValueSpec": "INTEGER", "categoricalValueSpec": "CATEGORICAL",
                "discreteValueSpec": "DISCRETE"}
# What each field holds, by its key: a mapping or a list reads YAML null (every entry commented out) as empty; a
# scalar read as null is unset, unless a flag gives it; `{NAME}` unquoted is a placeholder only where a scalar is.
_MAPPINGS = {"machineSpec", "diskSpec", "containerSpec", "pythonPackageSpec", "scheduling", "baseOutputDirectory",
             "studySpec", "trialJobSpec", "labels", "doubleValueSpec", "integerValueSpec", "categoricalValueSpec",
             "discreteValueSpec"}
_LISTS = {"workerPoolSpecs", "env", "args", "command", "packageUris", "metrics", "parameters", "values"}
_ENTRIES = {"workerPoolSpecs", "env", "metrics", "parameters"}  # lists of mappings
_SCALARS = {"imageUri", "executorImageUri", "pythonModule", "machineType", "acceleratorType", "acceleratorCount",
            "tpuTopology", "bootDiskType", "bootDiskSizeGb", "replicaCount", "serviceAccount", "network", "tensorboard",
            "enableWebAccess", "outputUriPrefix", "timeout", "restartJobOnWorkerRestart", "strategy", "disableRetries",
            "maxWaitDuration", "displayName", "maxTrialCount", "parallelTrialCount", "maxFailedTrialCount", "metricId",
            "goal", "parameterId", "scaleType", "minValue", "maxValue", "algorithm", "name", "value"}
# A scalar that cannot be left empty: what it holds.
_REQUIRED = {"imageUri": "an image reference, e.g. us-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG"}
# The job key (and so the flag) that replaces a field: of the job's spec, of any pool, of the chief's pool (0).
_SPEC_FLAGS = {("serviceAccount",): "service_account", ("network",): "network",
               ("baseOutputDirectory", "outputUriPrefix"): "base_output_directory", ("scheduling", "timeout"): "timeout",
               ("scheduling", "strategy"): "strategy", ("scheduling", "maxWaitDuration"): "max_wait_duration"}
_POOL_FLAGS = {("containerSpec", "imageUri"): "image", ("containerSpec", "args"): "args",
               ("pythonPackageSpec", "args"): "args"}
_CHIEF_FLAGS = {("machineSpec", "machineType"): "machine_type", ("machineSpec", "acceleratorType"): "accelerator_type",
                ("machineSpec", "acceleratorCount"): "accelerator_count"}


def _kind(path: tuple) -> str:
    return field_kind(path, _ENTRIES, _MAPPINGS, _LISTS, _SCALARS)


class _Reader:
    def __init__(self, raw: Any, given: dict[str, Any]):
        self.raw, self.given = raw, given
        self.left: list[str] = []
        self.notes: list[str] = []

    def fail(self, path: tuple, message: str) -> ConfigError:
        return field_error(self.raw, path, message)

    def mapping(self, value: Any, path: tuple, known: set[str], left: dict[str, str]) -> dict:
        if not isinstance(value, dict):
            raise self.fail(path, f"{show(value)} is not allowed: a mapping")
        for key in value:
            if key in left:
                self.left.append(f"{field_name((*path, key))}: {left[key]}")
            elif key not in known:
                raise self.fail((*path, key), f"{shown_name(key)} is not a field here; allowed: "
                                              f"{', '.join(sorted(known | set(left)))}")
        return {k: v for k, v in value.items() if k in known}

    def replaced_by(self, path: tuple, value: Any) -> str | None:
        """The job key whose flag replaces the field at path (its value: a placeholder is filled by the flag)."""
        tuning = "studySpec" in self.raw.data or "trialJobSpec" in self.raw.data
        if tuning and path == ("displayName",):
            return "name"
        rest = path[1:] if tuning and path[:1] == ("trialJobSpec",) else path
        if rest[:1] != ("workerPoolSpecs",) or len(rest) < 2:
            return _SPEC_FLAGS.get(rest)
        index, part = (rest[1], rest[2:]) if isinstance(rest[1], int) else (0, rest[1:])  # one pool: a mapping
        if part == ("containerSpec", "imageUri") and value == REDUCTION_SERVER_IMAGE:
            return None  # Google's reduction server runs in pool 2, whatever the trainer's image
        if part in _POOL_FLAGS:
            return _POOL_FLAGS[part]  # every pool runs the job's image and arguments
        if part in _CHIEF_FLAGS and (index == 0 or value is None or placeholders(value)[0]):
            return _CHIEF_FLAGS[part]  # another pool's machine left to fill takes the chief's
        return None

    def read(self, value: Any, path: tuple) -> Any:
        """A value as the converter reads it: placeholders filled, YAML null as empty or unset; _UNSET for a field
        dropped (a flag gives it, or a scalar left empty). A dict or a list is walked further."""
        kind = _kind(path)
        text = braced(value) if kind in ("scalar", "item") else None
        value = value if text is None else text
        key = self.replaced_by(path, value)
        flag = job_flag_name(key) if key else None
        field = field_name(path)
        if key is not None and self.given.get(key) is not None:
            self.notes.append(f"{field}: empty (YAML null); {flag} fills it" if value is None
                              else f"{field}: {written(value)} replaced by {flag}")
            self.raw.scalars.pop(path, None)
            return _UNSET
        if value is None:
            if kind in ("mapping", "list"):
                return {} if kind == "mapping" else []
            if kind == "scalar":
                if path[-1] in _REQUIRED:
                    raise self.fail(path, f"empty (YAML null) is not allowed: {_REQUIRED[path[-1]]}; write it"
                                          + (f", or pass {flag}" if flag else ""))
                return _UNSET  # unset
            return None  # a list's item, or a field not read: as written, for its own check
        return self.filled(value, path, flag)

    def filled(self, value: Any, path: tuple, flag: str | None) -> Any:
        """A string with its placeholders filled from the environment; one unset is refused naming the flag."""
        names, whole = placeholders(value)
        if not names:
            return value
        unset = [n for n in names if n not in os.environ]
        if not unset:
            self.notes.append(f"{field_name(path)}: {', '.join(names)} filled from the environment")
            self.raw.scalars.pop(path, None)  # the value as written is the placeholder: the filled one stands
            return substituted(value, whole)
        raise self.fail(path, f"{show(value)} names {unset[0]}, which is not set in the environment: export "
                              f"{unset[0]}=..." + (f", or pass {flag}" if flag else ", or write the value in the file"))

    def walk(self, value: dict) -> dict:
        """The document as the converter reads it (read), iteratively (the YAML reader bounds its nesting)."""
        out: dict = {}
        queue = deque([(value, out, ())])  # in document order: the first unset placeholder is the one named
        while queue:
            source, target, at = queue.popleft()
            items = source.items() if isinstance(source, dict) else enumerate(source)
            for key, item in items:
                made = self.read(item, (*at, key))
                if made is _UNSET:
                    continue
                if isinstance(made, (dict, list)):
                    inner: dict | list = {} if isinstance(made, dict) else []
                    queue.append((made, inner, (*at, key)))
                    made = inner
                if isinstance(target, dict):
                    target[key] = made
                else:
                    target.append(made)
        return out


_UNSET = object()


def convert(path: Path, given: dict[str, Any]) -> Conversion:
    """The file as config keys (job, and hyperparameters for a tuning job's file); given: the job flags set beside
    it, by config key (they fill and override it: applying them is the caller's)."""
    try:
        raw, _ = load_raw(path, path.parent)
    except ConfigError as exc:
        if exc.field not in ("--config", "--dir"):
            raise
        raise ConfigError(exc.detail, field=FLAG, where=exc.where) from None
    reader = _Reader(raw, given)
    data = reader.walk(raw.data)
    tuning = "studySpec" in data or "trialJobSpec" in data
    if not data or not (tuning or "workerPoolSpecs" in data):
        raise ConfigError("not a gcloud job config: it has no workerPoolSpecs (the CustomJobSpec `gcloud ai "
                          "custom-jobs create --config` takes) nor studySpec and trialJobSpec (`gcloud ai "
                          "hp-tuning-jobs create --config`)", field=FLAG, where=raw.source)
    values: dict[str, Any] = {}
    if tuning:
        top = reader.mapping(data, (), _TUNING_KEYS, _TUNING_LEFT)
        if "trialJobSpec" not in top or "studySpec" not in top:
            raise reader.fail((), "a tuning job's file needs both studySpec and trialJobSpec")
        job = _job(reader, top["trialJobSpec"], ("trialJobSpec",))
        values["hyperparameters"] = _study(reader, top)
        named = {key: check_job_key(raw, (name,), key, top[name]) for name, key in (("displayName", "name"),
                                                                                     ("labels", "labels")) if name in top}
        job = replace(job, **named)
    else:
        job = _job(reader, data, ())
    values["job"] = job
    return Conversion(values, tuple(reader.left), tuple(reader.notes))


def _job(reader: _Reader, value: Any, at: tuple) -> JobConfig:
    raw = reader.raw
    spec = reader.mapping(value, at, _SPEC_KEYS, _SPEC_LEFT)
    pools = spec.get("workerPoolSpecs")
    if isinstance(pools, dict):  # gcloud takes one pool written as a mapping
        pools = [pools]
    if not isinstance(pools, list) or not 0 < len(pools) <= len(POOL_ORDER):
        raise reader.fail((*at, "workerPoolSpecs"), f"{show(pools)} is not allowed: one to {len(POOL_ORDER)} worker pool "
                                                   "specs (chief, workers, parameter servers, evaluators)")
    made: dict[str, Pool] = {}
    chief_run: dict[str, Any] = {}
    for index, pool in enumerate(pools):
        where = (*at, "workerPoolSpecs", index)
        pool = reader.mapping(pool, where, _POOL_KEYS, _POOL_LEFT)
        if not pool:
            if index == 0:
                raise reader.fail(where, "the first pool is the chief's: it cannot be empty")
            continue  # an empty pool keeps the pools after it in place, as gcloud allows
        machine = reader.mapping(pool.get("machineSpec", {}), (*where, "machineSpec"),
                                 {"machineType", "acceleratorType", "acceleratorCount", "tpuTopology"},
                                 {"reservationAffinity": "set job.reservation instead"})
        disk = reader.mapping(pool.get("diskSpec", {}), (*where, "diskSpec"), {"bootDiskType", "bootDiskSizeGb"}, {})
        keys = {"machine_type": ("machineSpec", "machineType"), "accelerator_type": ("machineSpec", "acceleratorType"),
                "accelerator_count": ("machineSpec", "acceleratorCount"), "tpu_topology": ("machineSpec", "tpuTopology"),
                "boot_disk_type": ("diskSpec", "bootDiskType"), "boot_disk_size_gb": ("diskSpec", "bootDiskSizeGb")}
        parts = {"machineSpec": machine, "diskSpec": disk}
        found = {key: check_job_key(raw, (*where, part, name), key, parts[part][name])
                 for key, (part, name) in keys.items() if name in parts[part]}
        _check_machine(reader, (*where, "machineSpec"), machine, found)
        count = check_job_key(raw, (*where, "replicaCount"), "replica_count", pool.get("replicaCount", 1))
        run = _run(reader, pool, where)
        name = POOL_ORDER[index]
        if index == 0:
            if count != 1:
                raise reader.fail((*where, "replicaCount"), f"{count}: pool 0 runs the one chief; the workers are "
                                                            "the second pool")
            chief_run = run
        elif index == 2 and run.get("image") == REDUCTION_SERVER_IMAGE:
            name, run = "reduction_server", {}
        else:
            for key, item in run.items():
                if key != "image" and item != chief_run.get(key):
                    reader.left.append(f"{field_name((*where, 'containerSpec', key))}: a pool's own {key}; every pool "
                                       "runs the chief's")
        made[name] = Pool(**found, replica_count=count)
    workers = made.get("workers")
    chief = replace(made.pop("chief"), replica_count=1 + (workers.replica_count or 1 if workers else 0))
    return JobConfig(chief=chief, **made, **chief_run, **_settings(reader, spec, at))


def _check_machine(reader: _Reader, at: tuple, machine: dict, found: dict[str, Any]) -> None:
    """A pool's machine as the file wrote it (a machine type, its accelerators), checked as the job's will be but
    refused naming the file's line; unless a flag replaces a part of it, or the pool leaves its machine to the chief's
    (then the job's check names the flag or the chief)."""
    if "machine_type" not in found or any(reader.replaced_by((*at[:-1], *part), machine.get(part[1])) in reader.given
                                          for part in _CHIEF_FLAGS):
        return
    try:
        check_pool(Pool(**found), "job.machine_type")
    except ConfigError as exc:
        raise reader.fail(at, exc.detail) from None


def _run(reader: _Reader, pool: dict, where: tuple) -> dict[str, Any]:
    """What a pool runs, as job keys: image, command, args, env; or python_package."""
    raw = reader.raw
    if "containerSpec" in pool and "pythonPackageSpec" in pool:
        raise reader.fail(where, "a pool runs a containerSpec or a pythonPackageSpec, not both")
    if "pythonPackageSpec" in pool:
        at = (*where, "pythonPackageSpec")
        package = reader.mapping(pool["pythonPackageSpec"], at, {"executorImageUri", "packageUris", "pythonModule",
                                                                 "args", "env"}, {})
        out: dict[str, Any] = {"python_package": check_job_key(raw, at, "python_package", {
            "executor": package.get("executorImageUri"), "package_uris": package.get("packageUris"),
            "module": package.get("pythonModule")})}
    else:
        at = (*where, "containerSpec")
        package = reader.mapping(pool.get("containerSpec", {}), at, {"imageUri", "command", "args", "env"}, {})
        out = {}
        if "imageUri" in package:
            out["image"] = check_job_key(raw, (*at, "imageUri"), "image", package["imageUri"])
        if "command" in package:
            out["command"] = check_job_key(raw, (*at, "command"), "command", package["command"])
    if "args" in package:
        out["args"] = check_job_key(raw, (*at, "args"), "args", package["args"])
    if "env" in package:
        env = package["env"]
        if not isinstance(env, list) or not all(isinstance(e, dict) and set(e) <= {"name", "value"} and "name" in e
                                                for e in env):
            raise reader.fail((*at, "env"), f"{show(env)} is not allowed: a list of {{name: NAME, value: VALUE}}")
        out["env"] = check_job_key(raw, (*at, "env"), "env", {e["name"]: e.get("value", "") for e in env})
    return out


def _settings(reader: _Reader, spec: dict, at: tuple) -> dict[str, Any]:
    raw = reader.raw
    out: dict[str, Any] = {}
    for name, key in (("serviceAccount", "service_account"), ("network", "network"), ("tensorboard", "tensorboard"),
                      ("enableWebAccess", "enable_web_access")):
        if name in spec:
            out[key] = check_job_key(raw, (*at, name), key, spec[name])
    if "baseOutputDirectory" in spec:
        base = reader.mapping(spec["baseOutputDirectory"], (*at, "baseOutputDirectory"), {"outputUriPrefix"}, {})
        if "outputUriPrefix" in base:
            out["base_output_directory"] = check_job_key(raw, (*at, "baseOutputDirectory", "outputUriPrefix"),
                                                         "base_output_directory", base["outputUriPrefix"])
    if "scheduling" in spec:
        where = (*at, "scheduling")
        scheduling = reader.mapping(spec["scheduling"], where, {"timeout", "restartJobOnWorkerRestart", "strategy",
                                                                "disableRetries", "maxWaitDuration"}, {})
        for name, key in (("timeout", "timeout"), ("restartJobOnWorkerRestart", "restart_job_on_worker_restart"),
                          ("strategy", "strategy"), ("disableRetries", "disable_retries"),
                          ("maxWaitDuration", "max_wait_duration")):
            if name in scheduling:
                value = scheduling[name]
                if key in ("timeout", "max_wait_duration") and isinstance(value, str) and value.endswith("s") \
                        and value[:-1].isdigit():
                    value = int(value[:-1])  # the API's Duration: "3600s"
                out[key] = check_job_key(raw, (*where, name), key, value)
    return out


def _study(reader: _Reader, top: dict) -> Any:
    """studySpec and the trial counts as the config's hyperparameters."""
    at = ("studySpec",)
    study = reader.mapping(top["studySpec"], at, {"metrics", "parameters", "algorithm"},
                           {"observationNoise": "not set by buildkit-py",
                            "measurementSelectionType": "not set by buildkit-py",
                            "decayCurveStoppingSpec": "early stopping is not set by buildkit-py",
                            "medianAutomatedStoppingSpec": "early stopping is not set by buildkit-py",
                            "convexAutomatedStoppingSpec": "early stopping is not set by buildkit-py"})
    metrics = study.get("metrics")
    if not isinstance(metrics, list) or len(metrics) != 1:
        raise reader.fail((*at, "metrics"), f"{show(metrics)} is not allowed: one metric (metricId and goal); "
                                            "buildkit-py's studies have one")
    metric = reader.mapping(metrics[0], (*at, "metrics", 0), {"metricId", "goal"}, {"safetyConfig": "not set"})
    params = []
    for i, item in enumerate(study.get("parameters") or []):
        where = (*at, "parameters", i)
        param = reader.mapping(item, where, {"parameterId", "scaleType", *_VALUE_SPECS},
                               {"conditionalParameterSpecs": "conditional parameters are not set by buildkit-py"})
        kinds = [k for k in _VALUE_SPECS if k in param]
        if len(kinds) != 1:
            raise reader.fail(where, f"a parameter has one of {', '.join(_VALUE_SPECS)}")
        values = reader.mapping(param[kinds[0]], (*where, kinds[0]), {"minValue", "maxValue", "values"},
                                {"defaultValue": "not set by buildkit-py"})
        made = {"name": param.get("parameterId"), "type": _VALUE_SPECS[kinds[0]]}
        for name, key in (("minValue", "min"), ("maxValue", "max"), ("values", "values")):
            if name in values:
                made[key] = values[name]
        if "scaleType" in param and param["scaleType"] != "SCALE_TYPE_UNSPECIFIED":
            if param["scaleType"] not in _SCALES:
                raise reader.fail((*where, "scaleType"), f"{show(param['scaleType'])} is not allowed: one of "
                                                         f"{', '.join(_SCALES)}")
            made["scale"] = _SCALES[param["scaleType"]]
        params.append(made)
    hyperparameters = {"metric": metric.get("metricId"), "goal": metric.get("goal"),
                       "max_trials": top.get("maxTrialCount", 1), "parallel_trials": top.get("parallelTrialCount", 1),
                       "params": params}
    if "maxFailedTrialCount" in top:
        hyperparameters["max_failed_trials"] = top["maxFailedTrialCount"]
    if "algorithm" in study:
        hyperparameters["algorithm"] = study["algorithm"]
    return check_hyperparameters(reader.raw, at, hyperparameters)
