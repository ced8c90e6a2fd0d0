"""tune --local on the real engine: a trainer whose metric depends on a hyperparameter finds the expected best."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from buildkit_py.config import Hyperparameters, Param
from buildkit_py.errors import ConfigError
from buildkit_py.fsutil import OUTPUT_MARKER
from buildkit_py.jobs.local import RunResult
from buildkit_py.jobs.tune import _Suggester, arg_value, metric_value
from conftest import REPO, run_cli

TASK = '''import argparse, json, os, sys, time
import hypertune
p = argparse.ArgumentParser()
p.add_argument("--x", type=float, required=True)
p.add_argument("--opt", default="sgd")
p.add_argument("--fail1", action="store_true")
p.add_argument("--hang2", action="store_true")
p.add_argument("--hang1", action="store_true")
a = p.parse_args()
ht = hypertune.HyperTune()
ht.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="loss", metric_value=1000.0, global_step=0)
if a.fail1 and a.x == 1:
    sys.exit(3)
if (a.hang2 and a.x == 2) or a.hang1:
    time.sleep(300)
loss = (a.x - 3) ** 2 + (0.5 if a.opt == "sgd" else 0.0)
ht.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="loss", metric_value=loss, global_step=1)
with open(os.path.join(os.environ["AIP_MODEL_DIR"], "trial.json"), "w") as f:
    json.dump({"trial": os.environ["CLOUD_ML_TRIAL_ID"], "argv": sys.argv[1:],
               "metric_file": os.environ["CLOUD_ML_HP_METRIC_FILE"]}, f)
'''

STUDY = """framework: none
python: "3.11"
trainer:
  module: trainer.task
hyperparameters:
  metric: loss
  goal: MINIMIZE
  max_trials: {max_trials}
  parallel_trials: 2
  {extra}
  algorithm: {algorithm}
  params:
    - {{name: x, type: DISCRETE, values: [1, 2, 3, 4, 5]}}
    - {{name: opt, type: CATEGORICAL, values: [adam, sgd]}}
"""


@pytest.fixture
def trainer(project):
    def make(algorithm: str, max_trials: int, extra: str = "") -> str:
        root = project({"trainer/__init__.py": "", "trainer/task.py": TASK,
                        "buildkit.yaml": STUDY.format(algorithm=algorithm, max_trials=max_trials, extra=extra)})
        return str(root)
    return make


def tune(testenv, root, *args):
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]}
    return run_cli("tune", "--local", "--dir", root, "--image", "tune-e2e/trainer", *args, env=env)


def test_grid_search_finds_the_best_and_each_trial_gets_what_the_service_gives(testenv, trainer, tmp_path):
    out = tmp_path / "study"
    proc = tune(testenv, trainer("GRID_SEARCH", 10), "--output", str(out), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    study = json.loads(proc.stdout)
    assert study["state"] == "SUCCEEDED" and len(study["trials"]) == 10 and study["algorithm"] == "grid search"
    best = study["best"]
    assert best["params"] == {"x": 3, "opt": "adam"} and best["metric"] == 0.0  # the last value, not the first 1000
    for trial in study["trials"]:
        seen = json.loads((out / f"trial-{trial['id']}" / "model" / "trial.json").read_text())
        assert seen["trial"] == trial["id"]  # CLOUD_ML_TRIAL_ID
        assert seen["argv"] == [f"--x={trial['params']['x']}", f"--opt={trial['params']['opt']}"]  # as the service
        assert trial["metric"] == (trial["params"]["x"] - 3) ** 2 + (0.5 if trial["params"]["opt"] == "sgd" else 0)
    table = tune(testenv, trainer("GRID_SEARCH", 2), "--output", str(tmp_path / "t"))
    assert table.returncode == 0 and "best    trial" in table.stdout and "SUCCEEDED" in table.stdout


def test_random_and_bayesian_search_report_the_best_of_their_trials(testenv, trainer, tmp_path):
    for algorithm, name in (("RANDOM_SEARCH", "random search"), ("ALGORITHM_UNSPECIFIED", "optuna TPE (Bayesian)")):
        proc = tune(testenv, trainer(algorithm, 4), "--output", str(tmp_path / algorithm), "--seed", "1", "--json")
        assert proc.returncode == 0, proc.stderr[-3000:]
        study = json.loads(proc.stdout)
        assert study["algorithm"] == name and len(study["trials"]) == 4
        assert study["best"]["metric"] == min(t["metric"] for t in study["trials"])


def test_failed_and_hung_trials_count_against_max_failed_trials(testenv, trainer, tmp_path):
    root = trainer("GRID_SEARCH", 10, "max_failed_trials: 3")
    start = time.monotonic()
    proc = tune(testenv, root, "--output", str(tmp_path / "f"), "--trial-timeout", "8", "--json", "--", "--fail1",
                "--hang2")
    study = json.loads(proc.stdout)
    assert proc.returncode == 1 and study["state"] == "FAILED", proc.stderr[-2000:]
    failed = [t for t in study["trials"] if t["state"] == "FAILED"]
    assert all("timeout" in t["error"] if t["params"]["x"] == 2 else "exit code 3" in t["error"] for t in failed)
    # Grid order, two at a time: both x=1 trials fail, both x=2 trials hang and are stopped; with the
    # third failure the study ends and no further trial starts.
    assert [t["params"]["x"] for t in study["trials"]] == [1, 1, 2, 2] and len(failed) == 4
    assert time.monotonic() - start < 120


def test_tune_without_a_study_or_without_local_exits_2(trainer, project):
    root = project({"trainer/task.py": "", "buildkit.yaml": "framework: none\n"})
    proc = run_cli("tune", "--local", "--dir", str(root), "some/image:tag")
    assert proc.returncode == 2 and "hyperparameters" in proc.stderr
    proc = run_cli("tune", "--dir", str(root))
    assert proc.returncode == 2 and "--local" in proc.stderr
    proc = run_cli("tune", "--local", "--dir", trainer("GRID_SEARCH", 2), "--trial-timeout", "0", "x/y:z")
    assert proc.returncode == 2 and "--trial-timeout" in proc.stderr
    # a grid this machine cannot search is refused before the image is built (no engine here: it would fail later)
    root = project({"trainer/task.py": "", "buildkit.yaml": STUDY.format(algorithm="GRID_SEARCH", max_trials=2, extra="")
                    .replace("type: DISCRETE, values: [1, 2, 3, 4, 5]", "type: DOUBLE, min: 0.1, max: 1.0")})
    proc = run_cli("tune", "--local", "--dir", str(root), env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert proc.returncode == 2 and "GRID_SEARCH cannot search DOUBLE parameters (x)" in proc.stderr, proc.stderr
    assert "building" not in proc.stderr


def test_ctrl_c_stops_every_trial_container(testenv, trainer, tmp_path):
    root = trainer("GRID_SEARCH", 4)
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
           "HOME": str(REPO / ".testenv")}
    docker = [testenv["BUILDKIT_DOCKER"], "ps", "-a", "-q", "--filter", "label=dev.buildkit-py.study"]

    def studies() -> set[str]:
        return set(subprocess.run(docker, capture_output=True, text=True, env=env).stdout.split())

    before = studies()  # another test's study containers, still being removed, are not this study's
    # Its output goes to a file: a cold build's progress fills a pipe nobody reads, and the trials' log lines
    # would then wait on it (as would the removal after Ctrl-C).
    log = tmp_path / "tune.log"
    # --hang1: every trial hangs, so two containers run when Ctrl-C comes
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "buildkit_py", "tune", "--local", "--dir", root, "--image",
                                 "tune-e2e/trainer", "--output", str(tmp_path / "c"), "--", "--hang1"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(studies() - before) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            code = None
        assert code == 130, log.read_text()[-3000:]
    finally:
        proc.kill()
    assert studies() - before == set()


def test_search_pieces_without_an_engine(monkeypatch):
    params = (Param("lr", "DOUBLE", 1e-4, 1e-1, (), "log"), Param("layers", "INTEGER", 1, 4), Param("opt", "CATEGORICAL",
                                                                                                values=("adam", "sgd")))
    hp = Hyperparameters("loss", "MINIMIZE", 50, 2, params)
    monkeypatch.setitem(sys.modules, "optuna", None)  # not installed: the default search falls back, and says so
    fallback = _Suggester(hp, seed=3)
    assert fallback.name == "random search" and "optuna" in fallback.notes[0]
    for _ in range(50):
        values = dict(fallback.next("1"))
        assert 1e-4 <= values["lr"] <= 1e-1 and values["layers"] in (1, 2, 3, 4) and values["opt"] in ("adam", "sgd")
    with pytest.raises(ConfigError, match="DOUBLE"):
        _Suggester(replace(hp, algorithm="GRID_SEARCH"), None)
    assert [arg_value(v) for v in (32.0, 0.5, 3, "adam")] == ["32", "0.5", "3", "adam"]
    result = RunResult("j", "/o", {}, [{"loss": "9"}, {"other": "1"}, {"loss": "0.25"}, {"acc": "1"}])
    assert metric_value(result, "loss") == 0.25 and metric_value(result, "missing") is None


def test_a_study_in_or_out_of_the_trainer_directory_leaves_its_content_tag_alone(testenv, trainer, tmp_path_factory):
    """Outputs default to the cache dir; an --output inside the trainer directory is marked and left out of the
    next build's context: same content tag, nothing rebuilt."""
    root = Path(trainer("GRID_SEARCH", 2))
    cache = tmp_path_factory.mktemp("cache")
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "BUILDKIT_PY_CACHE_DIR": str(cache)}
    flags = ("--dir", str(root), "--image", "tune-e2e/outputs", "--network", "host", "--json")
    first = run_cli("build", *flags, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    before = sorted(root.rglob("*"))

    default = run_cli("tune", "--local", *flags, env=env)
    assert default.returncode == 0, default.stderr[-3000:]
    assert Path(json.loads(default.stdout)["output_dir"]).parent == cache / "runs"
    assert sorted(root.rglob("*")) == before  # nothing written into the trainer directory

    inside = run_cli("tune", "--local", *flags, "--output", str(root / "my-study"), env=env)
    assert inside.returncode == 0, inside.stderr[-3000:]
    assert (root / "my-study" / OUTPUT_MARKER).is_file()
    assert (root / "my-study" / "trial-1" / "model" / "trial.json").is_file()

    again = run_cli("build", *flags, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["built"] is False
    assert json.loads(again.stdout)["tags"][0] == json.loads(first.stdout)["tags"][0]
    assert f"my-study/ left out: it holds outputs of buildkit-py runs ({OUTPUT_MARKER})" in again.stderr
