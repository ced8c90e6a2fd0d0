"""A legacy AI Platform Training `config.yaml` (gcloud ai-platform jobs submit training --config) as
the config keys of the equivalent Vertex AI job. AI Platform Training was shut down on 2025-01-31.

What the conversion cannot carry over is reported field by field; `--job-dir` stays an argument
(the trainer reads it as before, the launcher passes it through) and also becomes the job's
base output directory, so AIP_MODEL_DIR points below it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..catalog.resources import read_data, resource_dir
from ..config import METRIC_TAG, field_name, load_raw, param_name, validate_keys
from ..errors import ConfigError, show, shown_name
from ..flags import job_flag_name
from ..patterns import lazy_pattern

# Legacy machine names (AI Platform "legacy machine types") -> Compute Engine type and GPUs.
# K80s are gone from Vertex AI: those map to T4 and are reported.
LEGACY_MACHINES: dict[str, tuple[str, str | None, int]] = {
    "standard": ("n1-standard-4", None, 0),
    "large_model": ("n1-highmem-8", None, 0),
    "complex_model_s": ("n1-highcpu-16", None, 0),  # was n1-highcpu-8, which Vertex AI training does not offer
    "complex_model_m": ("n1-highcpu-16", None, 0),
    "complex_model_l": ("n1-highcpu-32", None, 0),
    "standard_gpu": ("n1-standard-8", "NVIDIA_TESLA_K80", 1),
    "complex_model_m_gpu": ("n1-standard-16", "NVIDIA_TESLA_K80", 4),
    "complex_model_l_gpu": ("n1-standard-32", "NVIDIA_TESLA_K80", 8),
    "standard_p100": ("n1-standard-8", "NVIDIA_TESLA_P100", 1),
    "complex_model_m_p100": ("n1-standard-16", "NVIDIA_TESLA_P100", 4),
    "standard_v100": ("n1-standard-8", "NVIDIA_TESLA_V100", 1),
    "large_model_v100": ("n1-highmem-8", "NVIDIA_TESLA_V100", 1),
    "complex_model_m_v100": ("n1-standard-16", "NVIDIA_TESLA_V100", 4),
    "complex_model_l_v100": ("n1-standard-32", "NVIDIA_TESLA_V100", 8),
}
# Predefined scale tiers: (master, workers, worker count, parameter servers, their count).
SCALE_TIERS: dict[str, tuple[str, str | None, int, str | None, int]] = {
    "BASIC": ("standard", None, 0, None, 0),
    "BASIC_GPU": ("standard_gpu", None, 0, None, 0),
    "STANDARD_1": ("complex_model_s", "complex_model_s", 4, "standard", 3),
    "PREMIUM_1": ("complex_model_m", "complex_model_m", 19, "large_model", 11),
}
RETIRED_GPUS = {"NVIDIA_TESLA_K80": "NVIDIA_TESLA_T4"}
_SCALES = {"UNIT_LINEAR_SCALE": "linear", "UNIT_LOG_SCALE": "log", "UNIT_REVERSE_LOG_SCALE": "reverse_log"}
_TYPES = {"DOUBLE": "DOUBLE", "INTEGER": "INTEGER", "CATEGORICAL": "CATEGORICAL", "DISCRETE": "DISCRETE"}
_ALGORITHMS = {"GRID_SEARCH": "GRID_SEARCH", "RANDOM_SEARCH": "RANDOM_SEARCH",
               "ALGORITHM_UNSPECIFIED": "ALGORITHM_UNSPECIFIED", "BAYESIAN_OPTIMIZATION": "ALGORITHM_UNSPECIFIED"}


@dataclass(frozen=True)
class Given:
    """Flags given beside the legacy file: they fill and override it, as gcloud's --master-machine-type,
    --master-accelerator and --master-image-uri did (each already checked by its config key's validator)."""

    machine_type: str | None = None
    accelerator_type: str | None = None
    accelerator_count: int | None = None
    image: str | None = None
    region: str | None = None
    name: str | None = None
    service_account: str | None = None
    network: str | None = None
    args: tuple[str, ...] | None = None
    timeout: int | None = None
    autopackage: bool = False  # autopackage builds the image that runs the trainer (--from-aiplatform there)


@dataclass(frozen=True)
class Runtime:
    """What a runtimeVersion gave the trainer (base_images/aiplatform_runtimes.yaml)."""

    version: str
    framework: str  # NAME==VERSION, e.g. tensorflow==2.11.0
    python: str  # the job's pythonVersion, else the runtime's newest Python
    others: tuple[str, ...] = ()  # the other frameworks it shipped: NAME==VERSION, or NAME where not recorded

    @property
    def preferred(self) -> tuple[tuple[str, str], ...]:
        """(NAME==VERSION or NAME, why) for autopackage's inference: the releases this runtime gave a trainer."""
        return tuple((pin, f"runtimeVersion {self.version} ran {pin}" if "==" in pin else
                      f"runtimeVersion {self.version} shipped {pin}") for pin in (self.framework, *self.others))


@dataclass(frozen=True)
class Conversion:
    """A legacy AI Platform config.yaml converted: the Vertex AI config keys, the fields left behind, notes, its
    runtime and trainer module."""

    values: dict[str, Any]  # validated config keys: job, hyperparameters
    not_converted: tuple[str, ...]  # "trainingInput.FIELD: why", one per field left behind
    notes: tuple[str, ...]
    runtime: Runtime | None = None
    module: str | None = None  # trainingInput.pythonModule: the trainer module the legacy job ran


RUNTIMES_FILE = "aiplatform_runtimes.yaml"


def master_gpus(conversion: Conversion) -> str | None:
    """The GPUs the legacy job's master asks for, as words ("NVIDIA_TESLA_T4 x1"); None: none."""
    chief = conversion.values["job"].chief
    if chief.accelerator_type and chief.accelerator_count:
        return f"{chief.accelerator_type} x{chief.accelerator_count} (trainingInput master)"
    return None


def runtime_table() -> dict[str, dict]:
    return read_data(resource_dir("base_images") / RUNTIMES_FILE)["runtimes"]


def _shipped() -> list[str]:
    return read_data(resource_dir("base_images") / RUNTIMES_FILE)["shipped"]


class _Converter:
    def __init__(self, source: str):
        self.source = source
        self.left: list[str] = []
        self.notes: list[str] = []
        self.emptied: set[tuple] = set()  # the scalars written empty (YAML null): unset

    def leave(self, field: str, why: str) -> None:
        self.left.append(f"{field}: {why}")

    def bad(self, field: str, value: Any, allowed: str) -> ConfigError:
        return ConfigError(f"{show(value)} is not allowed: {allowed}", field=field, where=self.source)

    def mapping(self, value: Any, field: str) -> dict:
        if not isinstance(value, dict):
            raise self.bad(field, value, "a mapping")
        return value

    def gpus(self, machine: str, accelerator: str | None, count: int, field: str) -> dict:
        # AI Platform's Cloud TPU ran as a cloud_tpu worker beside the master VM; Vertex AI runs a TPU VM as
        # the one pool of the job, so the cluster does not carry over field by field.
        if machine == "cloud_tpu" or (isinstance(accelerator, str) and accelerator.startswith("TPU_")):
            raise ConfigError(f"{show(accelerator or machine)}: legacy Cloud TPU jobs (a cloud_tpu worker beside the "
                              "master) are not converted; write the Vertex AI TPU VM job by hand: accelerator: TPU_V2, "
                              "TPU_V3, TPU_V5_LITEPOD or TPU_V6E with job.machine_type from base_images/tpus.yaml, "
                              "one pool, one replica", field=field, where=self.source)
        if accelerator in RETIRED_GPUS:
            self.notes.append(f"{field}: {accelerator} is retired on Vertex AI; using {RETIRED_GPUS[accelerator]}")
            accelerator = RETIRED_GPUS[accelerator]
        out: dict[str, Any] = {"machine_type": machine}
        if accelerator and count:
            out.update(accelerator_type=accelerator, accelerator_count=count)
        return out

    def machine(self, name: Any, config: Any, field: str, given_type: str | None = None) -> dict:
        """A machine type (legacy name or Compute Engine type) with its *Config's acceleratorConfig; given_type: the
        GPU --accelerator-type gives (the master's), where the acceleratorConfig names none."""
        if not isinstance(name, str):
            raise self.bad(field, name, "a machine type name")
        machine, accelerator, count = LEGACY_MACHINES.get(name, (name, None, 0))
        if config is not None:
            config = self.mapping(config, field.replace("Type", "Config"))
            accel = config.get("acceleratorConfig")
            if accel is not None:
                where = f"{field.replace('Type', 'Config')}.acceleratorConfig"
                accel = self.mapping(accel, where)
                accelerator, count = accel.get("type", given_type), accel.get("count", 1)
                if accelerator is None:
                    flag = " or pass --accelerator-type" if field == "trainingInput.masterType" else ""
                    raise ConfigError(f"an acceleratorConfig needs the GPU's type: set {where}.type (e.g. NVIDIA_TESLA_T4)"
                                      f"{flag}", field=f"{where}.type", where=self.source)
                if isinstance(count, str) and count.isdigit():
                    count = int(count)
        return self.gpus(machine, accelerator, count, field)


_DOLLAR = lazy_pattern(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", re.ASCII)
_BRACED = lazy_pattern(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", re.ASCII)
_NAME = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def braced(value: Any) -> str | None:
    """`{NAME}` written unquoted where a string belongs, which YAML reads as the mapping {NAME: None}: the placeholder
    as written ("{NAME}"); None for any other value."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, item),) = value.items()
        if item is None and isinstance(key, str) and _NAME.fullmatch(key):
            return "{" + key + "}"
    return None


def placeholders(value: Any) -> tuple[list[str], bool]:
    """The variables a string names: a value that is only `{NAME}` (whole, True), else each `${VAR}` in it."""
    if not isinstance(value, str):
        return [], False
    whole = _BRACED.fullmatch(value)
    return ([whole[1]], True) if whole else (_DOLLAR.findall(value), False)


def substituted(value: str, whole: bool) -> str:
    """The string with its placeholders filled from the environment (each one set)."""
    names, _ = placeholders(value)
    return os.environ[names[0]] if whole else _DOLLAR.sub(lambda m: os.environ[m.group(1)], value)


def written(value: Any) -> str:
    """A value a flag replaced, for a note: a placeholder as written, anything else escaped and bounded."""
    if value is None:
        return "empty (YAML null)"
    if isinstance(value, str) and (_BRACED.fullmatch(value) or _DOLLAR.fullmatch(value)):
        return value
    return show(value)


# What each legacy field holds, by its key: a mapping or a list reads YAML null (every entry commented out) as empty;
# a scalar read as null is unset, unless a flag gives it; `{NAME}` unquoted is a placeholder only where a scalar is.
_LEGACY_MAPPINGS = {"trainingInput", "masterConfig", "workerConfig", "parameterServerConfig", "evaluatorConfig",
                    "acceleratorConfig", "hyperparameters", "scheduling", "labels", "encryptionConfig"}
_LEGACY_LISTS = {"args", "packageUris", "containerCommand", "containerArgs", "params", "discreteValues",
                 "categoricalValues"}
_LEGACY_ENTRIES = {"params"}  # lists of mappings
_LEGACY_SCALARS = {"jobId", "scaleTier", "masterType", "workerType", "parameterServerType", "evaluatorType", "workerCount",
                   "parameterServerCount", "evaluatorCount", "pythonModule", "region", "jobDir", "runtimeVersion",
                   "pythonVersion", "network", "serviceAccount", "enableWebAccess", "useChiefInTfConfig", "imageUri",
                   "type", "count", "maxRunningTime", "maxWaitTime", "goal", "hyperparameterMetricTag", "maxTrials",
                   "maxParallelTrials", "maxFailedTrials", "algorithm", "enableTrialEarlyStopping",
                   "resumePreviousJobId", "parameterName", "minValue", "maxValue", "scaleType", "kmsKeyName",
                   "tpuTfVersion"}
# The config key (and so the flag) that replaces a legacy field: the flag fills it, or overrides what the file wrote.
_LEGACY_FLAGS = {("jobId",): "name", ("trainingInput", "masterType"): "machine_type",
                 ("trainingInput", "masterConfig", "acceleratorConfig", "type"): "accelerator_type",
                 ("trainingInput", "masterConfig", "acceleratorConfig", "count"): "accelerator_count",
                 ("trainingInput", "masterConfig", "imageUri"): "image", ("trainingInput", "region"): "region",
                 ("trainingInput", "serviceAccount"): "service_account", ("trainingInput", "network"): "network",
                 ("trainingInput", "args"): "args", ("trainingInput", "masterConfig", "containerArgs"): "args",
                 ("trainingInput", "scheduling", "maxRunningTime"): "timeout"}
# A scalar that cannot be left empty: what it holds.
_LEGACY_REQUIRED = {("trainingInput", "masterConfig", "imageUri"): "an image reference, e.g. "
                                                                   "us-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG"}
TRAINING_INPUT_KEYS = frozenset({
    "scaleTier", "masterType", "masterConfig", "workerType", "workerConfig", "workerCount", "parameterServerType",
    "parameterServerConfig", "parameterServerCount", "evaluatorType", "evaluatorConfig", "evaluatorCount", "args",
    "jobDir", "packageUris", "pythonModule", "runtimeVersion", "pythonVersion", "region", "serviceAccount", "network",
    "enableWebAccess", "scheduling", "hyperparameters", "useChiefInTfConfig", "encryptionConfig"})


def field_kind(path: tuple, entries: set[str], mappings: set[str], lists: set[str], scalars: set[str]) -> str:
    """mapping, list, scalar, or item (of a list of scalars), by the field's key in a job file's tables (entries: the
    lists of mappings); other: a key the converter does not read (kept as written: it is refused or reported)."""
    last = path[-1] if path else None
    if isinstance(last, int):
        return "mapping" if path[-2] in entries else "item"
    if last in mappings:
        return "mapping"
    if last in lists:
        return "list"
    return "scalar" if last in scalars else "other"


def _kind(path: tuple) -> str:
    return field_kind(path, _LEGACY_ENTRIES, _LEGACY_MAPPINGS, _LEGACY_LISTS, _LEGACY_SCALARS)


def _read(conv: _Converter, raw: Any, value: Any, path: tuple, given: Given) -> Any:
    """The legacy file as it is read: each placeholder (`${VAR}`, `{NAME}`) filled from the environment, as the
    repository's script did; a field a flag gives dropped (the flag fills it: applying flags is the caller's), with a
    note naming what it replaced; YAML null read as empty (a mapping or a list) or unset (a scalar). A placeholder left
    unset, or an empty field that cannot be, is refused naming the field and the flag that replaces it."""
    kind = _kind(path)
    text = braced(value) if kind in ("scalar", "item") else None
    value = value if text is None else text
    names, whole = placeholders(value)
    field = field_name(path)
    key = _LEGACY_FLAGS.get(path)
    flag = job_flag_name(key) if key else None
    unfilled = value is None or bool(names)
    if key is not None and getattr(given, key) is not None:
        if key == "machine_type" and not unfilled and value in LEGACY_MACHINES and LEGACY_MACHINES[value][2]:
            # A legacy name carries its GPUs: they stay, the flag gives the machine (settings_for applies it).
            _, gpu, count = LEGACY_MACHINES[value]
            conv.notes.append(f"{field}: {written(value)} replaced by {flag} (its GPUs, {gpu} x{count}, stay)")
            return value
        conv.notes.append(f"{field}: empty (YAML null); {flag} fills it" if value is None
                          else f"{field}: {written(value)} replaced by {flag}")
        raw.scalars.pop(path, None)
        return _DROPPED
    if key == "image" and unfilled and given.autopackage:
        conv.notes.append(f"{field}: {written(value)}: the image autopackage builds runs the trainer (--image names "
                          "where it goes)")
        return _DROPPED
    if value is None:
        if kind in ("mapping", "list"):
            return {} if kind == "mapping" else []
        if kind == "scalar":
            if path in _LEGACY_REQUIRED:
                raise ConfigError(f"empty (YAML null) is not allowed: {_LEGACY_REQUIRED[path]}; write it"
                                  + (f", or pass {flag}" if flag else ""), field=field, where=conv.source)
            conv.emptied.add(path)
            return _DROPPED  # unset
        return None  # a list's item, or a field not read: as written, for its own check or report
    if isinstance(value, dict):
        out = {}
        for item_key, item in value.items():
            made = _read(conv, raw, item, (*path, item_key), given)
            if made is not _DROPPED:
                out[item_key] = made
        return out
    if isinstance(value, list):
        return [_read(conv, raw, item, (*path, i), given) for i, item in enumerate(value)]
    if not names:
        return value
    unset = [v for v in names if v not in os.environ]
    if not unset:
        shown = ", ".join(n if whole else "${" + n + "}" for n in names)
        conv.notes.append(f"{field}: {shown} expanded from the environment")
        raw.scalars.pop(path, None)  # the value as written is the placeholder: the expanded one stands
        return substituted(value, whole)
    missing = unset[0] if whole else "${" + unset[0] + "}"
    raise ConfigError(f"{show(value)} names {missing}, which is not set in the environment (the repository's "
                      f"submit script set it): export {unset[0]}=..." + (f", or pass {flag}" if flag else
                                                                         ", or write the value in the file"),
                      field=field, where=conv.source)


_DROPPED = object()  # a field a flag gives, or a scalar left empty


def _shaped(conv: _Converter, raw: Any) -> None:
    """The file as a Job resource (trainingInput, jobId, labels): a TrainingInput written without its wrapper (the
    REST body as it is) is read as the trainingInput it is; a file that is neither is refused."""
    data = raw.data
    loose = [key for key in data if key in TRAINING_INPUT_KEYS]
    if "trainingInput" in data:
        if loose:
            empty = " (which is empty)" if data["trainingInput"] is None else ""
            raise ConfigError(f"TrainingInput's fields {', '.join(loose)} stand at the top level beside trainingInput"
                              f"{empty}: write them under trainingInput (indented), or write the file as the "
                              "TrainingInput alone, without trainingInput", field="trainingInput",
                              where=raw.where((loose[0],)))
        if data["trainingInput"] is None:  # every field commented out
            data["trainingInput"] = {}
        if not isinstance(data["trainingInput"], dict):
            # Parsed, never echoed: a file the user points at by mistake (or a repository's script does) may be anything.
            raise ConfigError("not an AI Platform Training config: it has no trainingInput mapping (the file `gcloud "
                              "ai-platform jobs submit training --config` takes)", field="--from-aiplatform",
                              where=raw.source)
        return
    vertex = [key for key in ("workerPoolSpecs", "studySpec", "trialJobSpec") if key in data]
    if vertex:  # its machines, disks and args would be left behind: a plain job, said as a conversion
        raise ConfigError(f"not an AI Platform Training config: {vertex[0]} is a Vertex AI job's field (the file "
                          "`gcloud ai custom-jobs create --config` takes): pass it as --job-config",
                          field="--from-aiplatform", where=raw.where((vertex[0],)))
    if not loose:
        raise ConfigError("not an AI Platform Training config: it has no trainingInput mapping (the file `gcloud "
                          "ai-platform jobs submit training --config` takes) nor any of TrainingInput's fields "
                          "(scaleTier, masterType, args...)", field="--from-aiplatform", where=raw.source)
    job_keys = ("jobId", "labels")
    moved = {key for key in data if key not in job_keys}
    raw.data = {**{k: v for k, v in data.items() if k in job_keys},
                "trainingInput": {k: v for k, v in data.items() if k in moved}}
    for table in (raw.positions, raw.scalars):
        rekeyed = {(("trainingInput", *path) if path and path[0] in moved else path): item for path, item in table.items()}
        table.clear()
        table.update(rekeyed)
    if () in raw.positions:
        raw.positions[("trainingInput",)] = raw.positions[()]
    conv.notes.append(f"the file is a TrainingInput without its trainingInput: wrapper ({', '.join(loose[:4])}"
                      f"{'...' if len(loose) > 4 else ''} at the top level, the REST body as it is): read as the "
                      "trainingInput it is")


def convert(path: Path, given: Given = Given()) -> Conversion:
    """The legacy file as config keys; given flags fill what it leaves out (a CUSTOM tier's master machine,
    the image of a package job). Applying them over the result is the caller's (api.jobs._job_settings)."""
    try:
        raw, _ = load_raw(path, path.parent)
    except ConfigError as exc:
        if exc.field not in ("--config", "--dir"):
            raise
        raise ConfigError(exc.detail, field="--from-aiplatform", where=exc.where) from None
    conv = _Converter(raw.source)
    _shaped(conv, raw)
    data = raw.data = _read(conv, raw, raw.data, (), given)
    for key in data:
        if key not in ("trainingInput", "labels", "jobId"):
            conv.leave(shown_name(key), "not part of a training job's config")
    ti = conv.mapping(data.get("trainingInput", {}), "trainingInput")
    job: dict[str, Any] = {}
    if "jobId" in data:
        job["name"] = data["jobId"]
    if "labels" in data:
        job["labels"] = data["labels"]
    job.update(_machines(conv, ti, given))
    _master(conv, ti, job)
    runtime = _runtime(conv, raw, ti)
    _package(conv, raw, ti, job, given, runtime)
    _settings(conv, ti, job)
    values = {"job": job}
    if ti.get("hyperparameters") == {}:  # every field commented out: no study
        conv.notes.append("trainingInput.hyperparameters: empty: a job, not a tuning job")
    elif "hyperparameters" in ti:
        values["hyperparameters"] = _hyperparameters(conv, raw, conv.mapping(ti["hyperparameters"],
                                                                             "trainingInput.hyperparameters"))
    module = data.get("trainingInput", {}).get("pythonModule") if isinstance(data.get("trainingInput"), dict) else None
    return Conversion(validate_keys(values, raw.source), tuple(conv.left), tuple(conv.notes), runtime,
                      module if isinstance(module, str) else None)


def _machines(conv: _Converter, ti: dict, given: Given) -> dict[str, Any]:
    """The scale tier (or a CUSTOM tier's machine types and counts) as the job's chief and pools."""
    master = ti.get("masterType", given.machine_type)
    tier = ti.get("scaleTier", "BASIC" if master is None else "CUSTOM")
    if tier == "CUSTOM":
        if master is None:
            empty = " (it is empty)" if ("trainingInput", "masterType") in conv.emptied else ""
            raise ConfigError(f"scaleTier CUSTOM needs a master machine type{empty}: set trainingInput.masterType or "
                              "pass --machine-type (gcloud's --master-machine-type)", field="trainingInput.masterType",
                              where=conv.source)
        chief = conv.machine(master, ti.get("masterConfig"), "trainingInput.masterType", given.accelerator_type)
        pools = {}
        for legacy, key in (("worker", "workers"), ("parameterServer", "parameter_servers"), ("evaluator", "evaluators")):
            count = ti.get(f"{legacy}Count", 0)
            count = int(count) if isinstance(count, str) and count.isdigit() else count
            if count:
                machine = ti.get(f"{legacy}Type", master)
                pools[key] = {**conv.machine(machine, ti.get(f"{legacy}Config"), f"trainingInput.{legacy}Type"),
                              "replica_count": count}
    elif tier in SCALE_TIERS:
        master, worker, workers, ps, n_ps = SCALE_TIERS[tier]
        chief = conv.machine(master, ti.get("masterConfig"), "trainingInput.scaleTier", given.accelerator_type)
        pools = {}
        if workers:
            pools["workers"] = {**conv.machine(worker, None, "trainingInput.scaleTier"), "replica_count": workers}
        if n_ps:
            pools["parameter_servers"] = {**conv.machine(ps, None, "trainingInput.scaleTier"), "replica_count": n_ps}
    else:
        raise conv.bad("trainingInput.scaleTier", tier, f"one of {', '.join(SCALE_TIERS)} or CUSTOM (TPU tiers have no "
                                                        "GPU job equivalent)")
    return {**chief, **pools}


def _master(conv: _Converter, ti: dict, job: dict[str, Any]) -> None:
    """The master's image, command and arguments (with --job-dir, which the trainer keeps reading)."""
    master_config = ti.get("masterConfig") if isinstance(ti.get("masterConfig"), dict) else {}
    for key in master_config:
        if key not in ("acceleratorConfig", "imageUri", "containerCommand", "containerArgs"):
            conv.leave(f"trainingInput.masterConfig.{shown_name(key)}", "no Vertex AI equivalent buildkit-py sets")
    if "imageUri" in master_config:
        job["image"] = master_config["imageUri"]
    if "containerCommand" in master_config:
        job["command"] = master_config["containerCommand"]
    args = list(ti.get("args") or master_config.get("containerArgs") or [])
    if "jobDir" in ti:
        # The trainer keeps reading --job-dir; AIP_MODEL_DIR (base output directory + /model) points below it too.
        args += ["--job-dir", ti["jobDir"]]
        job["base_output_directory"] = ti["jobDir"]
    if args:
        job["args"] = args


def _package(conv: _Converter, raw: Any, ti: dict, job: dict[str, Any], given: Given, runtime: Runtime | None) -> None:
    """A package job (packageUris, pythonModule): the prebuilt image of its runtime version runs it, unless an image
    of the trainer does (--image, autopackage)."""
    packaged = "packageUris" in ti or "pythonModule" in ti
    if packaged and (given.image is not None or given.autopackage):
        # gcloud's --master-image-uri: the image (e.g. autopackage's build of the trainer) runs the trainer itself.
        image = f"the image {given.image} (--image)" if given.image else "the image autopackage builds"
        conv.notes.append(f"trainingInput.packageUris/pythonModule: {image} runs the trainer instead of the packages on "
                          "a runtime image")
    elif packaged:
        version = runtime.version if runtime else raw.text(("trainingInput", "runtimeVersion"), ti.get("runtimeVersion"))
        if "image" in job:
            raise conv.bad("trainingInput.packageUris", ti.get("packageUris"), "packages or masterConfig.imageUri, not both")
        if not version:
            raise ConfigError("a package job (packageUris, pythonModule) needs trainingInput.runtimeVersion: it picks the "
                              "prebuilt image; or pass --image with an image of the trainer (buildkit-py autopackage "
                              "--from-aiplatform builds one)", field="trainingInput.runtimeVersion", where=conv.source)
        # A runtime version is the TensorFlow release it shipped; Vertex's prebuilt images are per framework.
        job["python_package"] = {"executor": f"tensorflow=={version}", "package_uris": ti.get("packageUris"),
                                 "module": ti.get("pythonModule")}
        conv.notes.append(f"runtimeVersion {version} -> the prebuilt TensorFlow {version} training image; name another "
                          "executor (job.python_package.executor) for scikit-learn or XGBoost trainers")


def _settings(conv: _Converter, ti: dict, job: dict[str, Any]) -> None:
    """Region, service account, network, web access and the time limit; what has no Vertex AI equivalent is said."""
    for key, target in (("region", "region"), ("serviceAccount", "service_account"), ("network", "network"),
                        ("enableWebAccess", "enable_web_access")):
        if key in ti:
            job[target] = ti[key]
    scheduling = ti.get("scheduling")
    if isinstance(scheduling, dict):
        if "maxRunningTime" in scheduling:
            job["timeout"] = str(scheduling["maxRunningTime"])
        for key in scheduling:
            if key != "maxRunningTime":
                conv.leave(f"trainingInput.scheduling.{shown_name(key)}", "Vertex AI's scheduling has no equivalent")
    known = TRAINING_INPUT_KEYS - {"useChiefInTfConfig", "encryptionConfig"}
    why = {"useChiefInTfConfig": "Vertex AI always names the first pool 'chief' in TF_CONFIG",
           "encryptionConfig": "customer-managed encryption keys are not set by buildkit-py",
           "workerConfig": "handled with workerType", "evaluatorConfig": "handled with evaluatorType"}
    for key in ti:
        if key not in known:
            conv.leave(f"trainingInput.{shown_name(key)}", why.get(key, "no Vertex AI equivalent buildkit-py sets"))

def _runtime(conv: _Converter, raw: Any, ti: dict) -> Runtime | None:
    """runtimeVersion and pythonVersion as the framework release and Python the runtime gave the trainer."""
    if "runtimeVersion" not in ti:
        if "pythonVersion" in ti:
            conv.leave("trainingInput.pythonVersion", "goes with a runtimeVersion; the image's own Python runs")
        return None
    # As written: YAML reads 2.10 as the number 2.1.
    version = str(raw.text(("trainingInput", "runtimeVersion"), ti["runtimeVersion"]))
    table = runtime_table()
    row = table.get(version)
    if row is None:
        conv.notes.append(f"runtimeVersion {show(version)} is not in base_images/{RUNTIMES_FILE} (known: "
                          f"{', '.join(table)}): no framework is taken from it")
        return None
    pythons = tuple(row["python"])
    python = pythons[-1]
    if "pythonVersion" in ti:
        python = str(raw.text(("trainingInput", "pythonVersion"), ti["pythonVersion"]))
        if python not in pythons:
            raise conv.bad("trainingInput.pythonVersion", python, f"a Python runtime {version} had: {', '.join(pythons)}")
    framework = f"tensorflow=={row['tensorflow']}"
    recorded = row.get("frameworks", {})
    others = tuple(f"{name}=={recorded[name]}" if name in recorded else name for name in _shipped())
    conv.notes.append(f"runtimeVersion {version}"
                      + (f", pythonVersion {python}" if "pythonVersion" in ti else f" (Python {python}, its newest)")
                      + f": AI Platform ran {framework} on Python {python}"
                      + "".join(f", with {pin}" for pin in others if "==" in pin) + f" (base_images/{RUNTIMES_FILE})")
    return Runtime(version, framework, python, others)


def _hyperparameters(conv: _Converter, raw: Any, hp: dict) -> dict:
    field = "trainingInput.hyperparameters"
    out: dict[str, Any] = {"goal": hp.get("goal"), "metric": hp.get("hyperparameterMetricTag", "training/hptuning/metric"),
                           "max_trials": hp.get("maxTrials", 1), "parallel_trials": hp.get("maxParallelTrials", 1)}
    tag = out["metric"]
    if not isinstance(tag, str) or not METRIC_TAG.fullmatch(tag):
        # AI Platform took any tag; Vertex AI's StudySpec.MetricSpec.metric_id allows no whitespace, and buildkit-py
        # keeps to the characters a tag file name and a label can hold.
        raise conv.bad(f"{field}.hyperparameterMetricTag", tag,
                       "a string of ASCII letters, digits, _ . / - (at most 128; Vertex AI's metric_id allows no "
                       "whitespace): rename the tag here and where the trainer reports it (hypertune's "
                       "report_hyperparameter_tuning_metric(hyperparameter_metric_tag=...))")
    if "maxFailedTrials" in hp:
        out["max_failed_trials"] = hp["maxFailedTrials"]
    if "algorithm" in hp:
        if hp["algorithm"] not in _ALGORITHMS:
            raise conv.bad(f"{field}.algorithm", hp["algorithm"], ", ".join(_ALGORITHMS))
        out["algorithm"] = _ALGORITHMS[hp["algorithm"]]
        if hp["algorithm"] == "BAYESIAN_OPTIMIZATION":
            conv.notes.append(f"{field}.algorithm BAYESIAN_OPTIMIZATION: Vertex AI's default algorithm (Bayesian) is used")
    for key in hp:
        if key not in ("goal", "hyperparameterMetricTag", "maxTrials", "maxParallelTrials", "maxFailedTrials", "algorithm",
                       "params"):
            conv.leave(f"{field}.{shown_name(key)}", "Vertex AI's study spec has no equivalent buildkit-py sets")
    params = []
    for i, p in enumerate(hp.get("params") or []):
        p = conv.mapping(p, f"{field}.params[{i}]")
        kind = p.get("type")
        if kind not in _TYPES:
            raise conv.bad(f"{field}.params[{i}].type", kind, ", ".join(_TYPES))
        if "parameterName" not in p:
            raise ConfigError("each parameter needs its parameterName (the trainer's --NAME)",
                              field=f"{field}.params[{i}].parameterName", where=conv.source)
        # Checked here too, so that an error names the legacy field and its line.
        name = param_name(raw, ("trainingInput", "hyperparameters", "params", i, "parameterName"), p["parameterName"])
        item: dict[str, Any] = {"name": name, "type": kind}
        if "minValue" in p:
            item["min"] = p["minValue"]
        if "maxValue" in p:
            item["max"] = p["maxValue"]
        at = f"{field}.params[{i}]"
        if kind == "DISCRETE":
            values = p.get("discreteValues")
            if isinstance(values, list) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values) \
                    and values != sorted(values):
                conv.notes.append(f"{at}.discreteValues {show(values)}: the service takes them in increasing order: "
                                  f"sorted to {show(sorted(values))}")
                values = sorted(values)
            item["values"] = values
        if kind == "CATEGORICAL":
            item["values"] = p.get("categoricalValues")
            if "categoricalValues" not in p and isinstance(p.get("discreteValues"), list):
                # A CATEGORICAL parameter takes categoricalValues; each trial receives the category as a string.
                values = [("True" if v else "False") if isinstance(v, bool) else str(v) for v in p["discreteValues"]]
                conv.notes.append(f"{at}: a CATEGORICAL parameter takes categoricalValues, not discreteValues: "
                                  f"{show(p['discreteValues'])} become the strings {show(values)}, which each trial "
                                  f"receives as --{name}=VALUE")
                item["values"] = values
        scale = p.get("scaleType")
        if scale in _SCALES and kind != "CATEGORICAL":
            item["scale"] = _SCALES[scale]
        elif scale not in (None, "NONE") and kind != "CATEGORICAL":
            raise conv.bad(f"{field}.params[{i}].scaleType", scale, ", ".join([*_SCALES, "NONE"]))
        params.append(item)
    out["params"] = params
    return out
