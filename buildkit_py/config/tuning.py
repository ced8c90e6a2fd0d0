"""`hyperparameters:`: a tuning study, which makes the job a HyperparameterTuningJob (buildkit_py/jobs/tune.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import show
from ..patterns import lazy_pattern
from .reading import _err, _Raw
from .values import _choice, _int, _list, _mapping, _number, _pattern, _scalar_text, _string

METRIC_TAG = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_./-]{0,127}", re.ASCII)
GOALS = ("MAXIMIZE", "MINIMIZE")
ALGORITHMS = ("ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH")  # unspecified: the service's default
PARAM_TYPES = ("DOUBLE", "INTEGER", "CATEGORICAL", "DISCRETE")
SCALES = ("linear", "log", "reverse_log")


@dataclass(frozen=True)
class Param:
    """One parameter of a tuning study: its name, type, and range (min, max, scale) or values."""

    name: str
    type: str
    min: float | int | None = None
    max: float | int | None = None
    values: tuple = ()
    scale: str | None = None


@dataclass(frozen=True)
class Hyperparameters:
    """`hyperparameters:`: a tuning study: the metric and goal, trial counts, parameters and search algorithm."""

    metric: str
    goal: str
    max_trials: int
    parallel_trials: int
    params: tuple[Param, ...]
    max_failed_trials: int | None = None
    algorithm: str = "ALGORITHM_UNSPECIFIED"


def _hyperparameters(raw: _Raw, path: tuple, value: Any) -> Hyperparameters:
    keys = ["metric", "goal", "max_trials", "parallel_trials", "max_failed_trials", "algorithm", "params"]
    data = _mapping(raw, path, value, keys, ", ".join(keys))
    missing = [k for k in ("metric", "goal", "max_trials", "parallel_trials", "params") if k not in data]
    if missing:
        raise _err(raw, path, f"{', '.join(missing)} required")
    metric = _pattern(raw, path + ("metric",), data["metric"], METRIC_TAG, "the metric's tag as the trainer reports it "
                                                                      "(ASCII letters, digits, _ . / -)")
    goal = _choice(raw, path + ("goal",), data["goal"], GOALS)
    max_trials = _int(raw, path + ("max_trials",), data["max_trials"], 1, 10000)
    parallel = _int(raw, path + ("parallel_trials",), data["parallel_trials"], 1, max_trials)
    failed = _int(raw, path + ("max_failed_trials",), data["max_failed_trials"], 0, max_trials) \
        if "max_failed_trials" in data else None
    algorithm = _choice(raw, path + ("algorithm",), data["algorithm"], ALGORITHMS) if "algorithm" in data \
        else "ALGORITHM_UNSPECIFIED"
    params = tuple(_param(raw, path + ("params", i), v) for i, v in enumerate(_list(raw, path + ("params",), data["params"],
                                                                                    limit=100)))
    if not params:
        raise _err(raw, path + ("params",), "give at least one parameter")
    names = [p.name for p in params]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise _err(raw, path + ("params", i, "name"), f"{show(name)} is given twice")
    return Hyperparameters(metric, goal, max_trials, parallel, params, failed, algorithm)


def check_hyperparameters(raw: _Raw, path: tuple, value: Any) -> Hyperparameters:
    """`hyperparameters:` read from another format, named at that file's field and line."""
    return _hyperparameters(raw, path, value)


PARAM_NAME_RULE = ("a parameter name: Vertex AI's parameter_id, without whitespace, and passed to each trial as "
                   "--NAME=value, so without '=' and not starting with '-'; at most 255 characters, e.g. batch-size")


def param_name(raw: _Raw, path: tuple, value: Any) -> str:
    """Vertex AI's rule (StudySpec.ParameterSpec.parameter_id: no whitespace, unique; google-cloud-aiplatform
    aiplatform_v1/types/study.py) and what keeps `--NAME=value` one flag: '=' would split it elsewhere, a leading
    '-' makes it `---NAME`; invisible format characters (isprintable) could make a name look like another."""
    name = _string(raw, path, value, limit=255)
    if not name or name.startswith("-") or "=" in name or not name.isprintable() or any(ch.isspace() for ch in name):
        raise _err(raw, path, f"{show(name)} is not allowed: {PARAM_NAME_RULE}")
    return name


def _param(raw: _Raw, path: tuple, value: Any) -> Param:
    data = _mapping(raw, path, value, ["name", "type", "min", "max", "values", "scale"], "name, type, min, max, values, scale")
    if "name" not in data or "type" not in data:
        raise _err(raw, path, "name and type are required")
    name = param_name(raw, path + ("name",), data["name"])
    kind = _choice(raw, path + ("type",), data["type"], PARAM_TYPES)
    scale = _choice(raw, path + ("scale",), data["scale"], SCALES) if "scale" in data else None
    ranged = kind in ("DOUBLE", "INTEGER")
    wrong = [k for k in (("values",) if ranged else ("min", "max")) if k in data]
    if wrong:
        raise _err(raw, path + (wrong[0],), f"a {kind} parameter takes {'min and max' if ranged else 'values'}, "
                                            f"not {wrong[0]}")
    if kind == "CATEGORICAL" and scale:
        raise _err(raw, path + ("scale",), "a CATEGORICAL parameter has no scale")
    if ranged:
        if "min" not in data or "max" not in data:
            raise _err(raw, path, f"a {kind} parameter needs min and max")
        check = (lambda p, v: _int(raw, p, v, -(2**53), 2**53)) if kind == "INTEGER" else (lambda p, v: _number(raw, p, v))
        low, high = check(path + ("min",), data["min"]), check(path + ("max",), data["max"])
        if low > high:
            raise _err(raw, path + ("max",), f"{show(high)} is less than min {show(low)}")
        if scale in ("log", "reverse_log") and low <= 0:
            raise _err(raw, path + ("min",), f"{show(low)} is not allowed: a {scale} scale needs min > 0")
        return Param(name, kind, low, high, (), scale)
    items = _list(raw, path + ("values",), data.get("values", []), limit=1000)
    if not items:
        raise _err(raw, path + ("values",), f"a {kind} parameter needs a list of values")
    if kind == "CATEGORICAL":
        values = tuple(_scalar_text(raw, path + ("values", i), v, limit=256) for i, v in enumerate(items))
    else:
        values = tuple(_number(raw, path + ("values", i), v) for i, v in enumerate(items))
        if list(values) != sorted(set(values)):
            raise _err(raw, path + ("values",), "DISCRETE values must increase, each given once")
        if scale in ("log", "reverse_log") and values[0] <= 0:
            raise _err(raw, path + ("values",), f"a {scale} scale needs values > 0")
    return Param(name, kind, None, None, values, scale)
