"""A hyperparameter tuning study run on this machine, the way Vertex AI runs one.

Each trial is a local run (jobs/local.py) of the built image with CLOUD_ML_TRIAL_ID, its own output
directory and metric file, and its parameters appended as `--name=value`, exactly as the service
passes them. The metric is what the service reads: the last value reported for the metric tag in
the cloudml-hypertune file. GRID_SEARCH and RANDOM_SEARCH are done here; the service's default
(ALGORITHM_UNSPECIFIED, Bayesian) through optuna's TPE sampler when the `tune` extra is installed,
else as random search, said in the result's notes.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..clients.engine import engine_client
from ..config import Hyperparameters, Param
from ..errors import ConfigError, RunError
from ..fsutil import make_output_dir
from ..pipeline.names import STUDY_LABEL
from ..progress import HtmlRepr, Reporter
from .local import LocalRun, RunResult, run_local

TRIAL_ENV = "CLOUD_ML_TRIAL_ID"


@dataclass(frozen=True)
class Trial(HtmlRepr):
    """One trial of a study: its parameters, state, metric, time, outputs and error."""

    id: str
    params: tuple[tuple[str, Any], ...]
    state: str  # SUCCEEDED | FAILED
    metric: float | None = None
    seconds: float = 0.0
    output_dir: str = ""
    exit_code: int | None = None
    error: str | None = None

    def to_dict(self) -> dict:
        return {"id": self.id, "params": dict(self.params), "state": self.state, "metric": self.metric,
                "seconds": round(self.seconds, 3), "output_dir": self.output_dir, "exit_code": self.exit_code,
                "error": self.error}


@dataclass(frozen=True)
class Study(HtmlRepr):
    """A study run here: its trials and the best of them (best) by the metric and goal."""

    metric: str
    goal: str
    algorithm: str  # what actually searched (e.g. "optuna TPE")
    trials: tuple[Trial, ...]
    state: str  # SUCCEEDED | FAILED (too many failed trials) | STOPPED
    output_dir: str
    notes: tuple[str, ...] = ()

    @property
    def best(self) -> Trial | None:
        """The succeeded trial with the best metric (None when none succeeded)."""
        done = [t for t in self.trials if t.state == "SUCCEEDED" and t.metric is not None]
        if not done:
            return None
        pick = max if self.goal == "MAXIMIZE" else min
        return pick(done, key=lambda t: t.metric)

    def to_dict(self) -> dict:
        best = self.best
        return {"metric": self.metric, "goal": self.goal, "algorithm": self.algorithm, "state": self.state,
                "output_dir": self.output_dir, "trials": [t.to_dict() for t in self.trials],
                "best": best.to_dict() if best else None, "notes": list(self.notes)}


def arg_value(value: Any) -> str:
    """A parameter as the service writes it after `--name=`: integers without a fraction."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


def _grid_values(p: Param) -> list:
    if p.type == "INTEGER":
        if p.max - p.min >= 10000:
            raise ConfigError(f"GRID_SEARCH over {p.name}: {p.min}..{p.max} has too many values; use DISCRETE values",
                              field="hyperparameters.algorithm")
        return list(range(int(p.min), int(p.max) + 1))
    if p.type == "DOUBLE":
        raise ConfigError(f"GRID_SEARCH cannot search DOUBLE parameters ({p.name}): make them DISCRETE",
                          field="hyperparameters.algorithm")
    return list(p.values)


def check_search(hp: Hyperparameters) -> None:
    """Refuse a study this machine cannot search (a grid over a DOUBLE or a huge range) before an image is built."""
    if hp.algorithm == "GRID_SEARCH":
        for p in hp.params:
            _grid_values(p)


def _sample(p: Param, rng: random.Random) -> Any:
    if p.type in ("CATEGORICAL", "DISCRETE"):
        return rng.choice(p.values)
    low, high = float(p.min), float(p.max)
    if p.scale == "log":
        x = math.exp(rng.uniform(math.log(low), math.log(high)))
    elif p.scale == "reverse_log":  # dense near max
        x = high + low - math.exp(rng.uniform(math.log(low), math.log(high)))
    else:
        x = rng.uniform(low, high)
    return int(round(min(max(x, low), high))) if p.type == "INTEGER" else x


class _Suggester:
    """The next trial's parameters, told each finished trial's metric (only the Bayesian search uses it)."""

    def __init__(self, hp: Hyperparameters, seed: int | None):
        self.hp = hp
        self.rng = random.Random(seed)
        self.notes: list[str] = []
        self.grid: Iterator[tuple] | None = None
        self.optuna = None
        self.pending: dict[str, Any] = {}
        if hp.algorithm == "GRID_SEARCH":
            self.grid = itertools.product(*(_grid_values(p) for p in hp.params))
            self.name = "grid search"
        elif hp.algorithm == "RANDOM_SEARCH":
            self.name = "random search"
        else:
            try:
                import optuna
            except ImportError:
                self.name = "random search"
                self.notes.append("the service's default search is Bayesian; locally that needs optuna "
                                  "(pip install 'buildkit-py[tune]'): random search was used instead")
                return
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            self.optuna = optuna
            direction = "maximize" if hp.goal == "MAXIMIZE" else "minimize"
            self.study = optuna.create_study(direction=direction, sampler=optuna.samplers.TPESampler(seed=seed))
            self.name = "optuna TPE (Bayesian)"

    def next(self, trial_id: str) -> tuple[tuple[str, Any], ...] | None:
        if self.grid is not None:
            values = next(self.grid, None)
            return None if values is None else tuple(zip((p.name for p in self.hp.params), values, strict=True))
        if self.optuna is None:
            return tuple((p.name, _sample(p, self.rng)) for p in self.hp.params)
        trial = self.study.ask()
        self.pending[trial_id] = trial
        out = []
        for p in self.hp.params:
            if p.type in ("CATEGORICAL", "DISCRETE"):
                out.append((p.name, trial.suggest_categorical(p.name, list(p.values))))
            elif p.type == "INTEGER":
                out.append((p.name, trial.suggest_int(p.name, int(p.min), int(p.max), log=p.scale == "log")))
            else:
                out.append((p.name, trial.suggest_float(p.name, float(p.min), float(p.max), log=p.scale == "log")))
        return tuple(out)

    def tell(self, trial: Trial) -> None:
        if self.optuna is None:
            return
        asked = self.pending.pop(trial.id)
        if trial.state == "SUCCEEDED":
            self.study.tell(asked, trial.metric)
        else:
            self.study.tell(asked, state=self.optuna.trial.TrialState.FAIL)


def metric_value(result: RunResult, tag: str) -> float | None:
    """The last value reported for the tag, as the service reads the hypertune file."""
    for record in reversed(result.metrics):
        if tag in record:
            try:
                value = float(record[tag])
            except (TypeError, ValueError):
                return None
            return value if math.isfinite(value) else None
    return None


@dataclass(frozen=True)
class TrialRun:
    """How each trial's container runs: the trainer's arguments (the parameters are appended to them; none: the
    image's CMD, as the service does), its network and GPUs, the seconds it may take, and the trainer processes its
    launcher starts."""

    network: str
    args: tuple[str, ...] = ()
    gpus: int = 0
    timeout: float | None = None
    processes_per_node: int | str | None = None


def run_study(image: str, hp: Hyperparameters, trial: TrialRun, *, output: Path, reporter: Reporter,
              seed: int | None = None) -> Study:
    """Run up to max_trials trials, parallel_trials at once; stop scheduling when more than max_failed_trials
    have failed. On Ctrl-C every trial container of the study is removed, then KeyboardInterrupt goes on."""
    args, network, gpus, timeout = trial.args, trial.network, trial.gpus, trial.timeout
    processes_per_node = trial.processes_per_node
    suggester = _Suggester(hp, seed)
    if not args:  # the service appends the parameters to the container's args: the image's CMD by default
        from docker.errors import ImageNotFound

        try:
            args = tuple(engine_client().images.get(image).attrs["Config"].get("Cmd") or ())
        except ImageNotFound:
            raise RunError(f"image {image!r} is not in the engine; build it first (buildkit-py build)") from None
    try:
        make_output_dir(output)  # marked first, so that a build meanwhile leaves the whole study out
    except OSError as exc:
        raise RunError(f"cannot create the output directory {str(output)!r}: {exc.strerror or exc}") from None
    study_id = f"study_{time.strftime('%Y%m%d_%H%M%S')}_{time.time_ns() % 10**6:06d}"
    trials: list[Trial] = []

    def one(trial_id: str, params: tuple[tuple[str, Any], ...]) -> Trial:
        start = time.monotonic()
        out = output / f"trial-{trial_id}"
        try:
            result = run_local(LocalRun(image, out, gpus=gpus, network=network,
                                        args=args + tuple(f"--{name}={arg_value(v)}" for name, v in params),
                                        env=((TRIAL_ENV, trial_id),), labels=((STUDY_LABEL, study_id),),
                                        timeout=timeout, processes_per_node=processes_per_node), reporter)
        except RunError as exc:
            return Trial(trial_id, params, "FAILED", None, time.monotonic() - start, str(out), None, str(exc))
        value = metric_value(result, hp.metric)
        error = (f"stopped after the trial timeout of {timeout:g}s" if result.timed_out
                 else f"exit code {result.exit_code}" if result.exit_code
                 else None if value is not None else f"no value reported for the metric {hp.metric!r}")
        return Trial(trial_id, params, "FAILED" if error else "SUCCEEDED", value, time.monotonic() - start,
                     result.output_dir, result.exit_code, error)

    state = "SUCCEEDED"
    pool = ThreadPoolExecutor(max_workers=hp.parallel_trials, thread_name_prefix="trial")
    running: dict[Future, str] = {}
    started = 0
    try:
        while True:
            # As the service: the study fails once max_failed_trials have failed (unset or 0: never, here).
            if hp.max_failed_trials and sum(t.state == "FAILED" for t in trials) >= hp.max_failed_trials:
                state = "FAILED"
            while state == "SUCCEEDED" and started < hp.max_trials \
                    and len(running) < hp.parallel_trials:
                trial_id = str(started + 1)
                params = suggester.next(trial_id)
                if params is None:  # the grid is exhausted
                    break
                started += 1
                running[pool.submit(one, trial_id, params)] = trial_id
                reporter.message(f"trial {trial_id} started: " + " ".join(f"--{n}={arg_value(v)}" for n, v in params))
            if not running:
                break
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in done:
                running.pop(future)
                trial = future.result()
                trials.append(trial)
                suggester.tell(trial)
                shown = f"{hp.metric}={trial.metric:g}" if trial.metric is not None else trial.error
                reporter.message(f"trial {trial.id} {trial.state} in {trial.seconds:.1f}s: {shown}  "
                                 f"[{sum(t.state == 'SUCCEEDED' for t in trials)} done, "
                                 f"{sum(t.state == 'FAILED' for t in trials)} failed, {len(running)} running]")
    except KeyboardInterrupt:
        _remove_containers(study_id)
        pool.shutdown(wait=True, cancel_futures=True)
        _remove_containers(study_id)  # one a trial started while the first removal ran
        raise
    pool.shutdown(wait=True)
    trials.sort(key=lambda t: int(t.id))
    study = Study(hp.metric, hp.goal, suggester.name, tuple(trials), state, str(output), tuple(suggester.notes))
    return replace(study, state="FAILED") if state == "SUCCEEDED" and study.best is None else study


def _remove_containers(study_id: str) -> None:
    from docker.errors import APIError

    client = engine_client()
    for container in client.containers.list(all=True, filters={"label": f"{STUDY_LABEL}={study_id}"}):
        try:
            container.remove(force=True)
        except APIError:
            pass  # removed by its own run meanwhile
