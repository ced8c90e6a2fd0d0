"""`buildkit-py make`: the generated buildkit.mk, its quoting, and `make image run` / `make push` on the real engine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import REPO, run_cli

EXAMPLE = REPO / "examples" / "make-trainer"
TARGETS = ("image", "push", "package", "job", "submit", "tune", "run", "clean")


def make(root: Path, testenv: dict, *targets: str, **variables: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **testenv, "PYTHONPATH": str(REPO), "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]}
    args = [f"{k}={v}" for k, v in {"BUILDKIT": f"{sys.executable} -m buildkit_py",
                                     "BUILDKIT_FLAGS": "--network host --progress plain", **variables}.items()]
    return subprocess.run(["make", "-C", str(root), *targets, *args], capture_output=True, text=True, env=env,
                          timeout=900)


@pytest.fixture
def trainer(tmp_path) -> Path:
    root = tmp_path / "make-trainer"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", ".buildkit-py", "buildkit-output"))
    return root


def test_the_example_includes_the_current_generated_file():
    proc = run_cli("make", "--config", str(EXAMPLE / "buildkit.yaml"), cwd=EXAMPLE)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (EXAMPLE / "buildkit.mk").read_text(), "regenerate: buildkit-py make -o buildkit.mk"
    assert "include buildkit.mk" in (EXAMPLE / "Makefile").read_text()


def test_every_target_runs_one_command_of_ours_and_variables_are_overridable(project):
    root = project({"buildkit.yaml": "framework: none\nimage: 127.0.0.1:5000/team/trainer\ntrainer: {module: trainer.task}\n"
                                     "variants: [{name: cpu}, {name: big, env: {SIZE: '2'}}]\n",
                    "trainer/task.py": ""})
    out = root / "buildkit.mk"
    proc = run_cli("make", "--config", str(root / "buildkit.yaml"), "-o", str(out), "--json", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"path": str(out)}
    text = out.read_text()
    for variable in ("BUILDKIT_CONFIG ?= buildkit.yaml", "IMAGE ?= 127.0.0.1:5000/team/trainer", "TAG ?=", "REGION ?=",
                     "BUILDKIT_FLAGS ?="):
        assert variable + "\n" in text
    # `make -n` prints each target's commands without running them; `push` asks `print image-tag` for its stamp.
    bk = root / "bk"
    bk.write_text('#!/bin/sh\n[ "$1" = print ] && echo bk-0123456789abcdef\n')
    bk.chmod(0o755)
    for target in TARGETS + ("image-cpu", "image-big", "image-all"):
        dry = subprocess.run(["make", "-n", "-f", str(out), target, f"BUILDKIT={bk}", "IMAGE=reg.example/x",
                              "TAG=reg.example/x:v2", "BUILDKIT_FLAGS=--network host"], capture_output=True, text=True, cwd=root)
        assert dry.returncode == 0, dry.stderr
        lines = [ln.replace(str(bk), "bk") for ln in dry.stdout.splitlines() if ln.strip() and not ln.startswith("make")]
        if target == "clean":
            assert lines == ["rm -rf .buildkit-py/make"]
            continue
        if target == "tune":
            assert dry.returncode == 0 and "hyperparameters" in lines[0]  # this config has none
            continue
        if target in ("push", "submit"):
            built = "bk build --push --config buildkit.yaml --image reg.example/x --tag reg.example/x:v2 --network host"
            assert lines[:2] == [built, "mkdir -p .buildkit-py/make && touch .buildkit-py/make/pushed-bk-0123456789abcdef"]
            lines = lines[2:]
            if target == "push":
                assert lines == []
                continue
        if target in ("job", "submit"):
            assert lines == [f'bk {target} --config buildkit.yaml --image "$(bk print image-uri --config buildkit.yaml '
                             '--image reg.example/x --tag reg.example/x:v2 --network host)"  '], lines
            continue
        assert lines[0].startswith(f"bk {target if target in ('package', 'run') else 'build'} "), (target, lines)
        if target != "package":
            assert "--image reg.example/x" in lines[0] and "--network host" in lines[0], (target, lines)
        if target.startswith("image-") and target != "image-all":
            assert f"--variant {target[len('image-'):]}" in lines[0]


def test_a_value_that_is_not_a_plain_word_is_refused_with_exit_2(project):
    root = project({"my config.yaml": "framework: none\ntrainer: {module: trainer.task}\n", "trainer/task.py": ""})
    proc = run_cli("make", "--config", str(root / "my config.yaml"), cwd=root)
    assert proc.returncode == 2 and "--config" in proc.stderr and "'my config.yaml'" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_print_gives_single_values(project):
    root = project({"buildkit.yaml": "framework: none\nimage: 127.0.0.1:5000/team/trainer\ntrainer: {module: trainer.task}\n",
                    "trainer/task.py": ""})
    values = {}
    for name in ("image-uri", "image-tag", "image", "content-digest", "python", "framework", "base-image"):
        proc = run_cli("print", name, "--config", str(root / "buildkit.yaml"), "--json")
        assert proc.returncode == 0, proc.stderr
        values.update(json.loads(proc.stdout))
    assert values["image-uri"] == f"127.0.0.1:5000/team/trainer:{values['image-tag']}"
    assert values["image-tag"] == "bk-" + values["content-digest"][:16]
    assert values["image"] == "127.0.0.1:5000/team/trainer" and values["framework"] == "none"
    plain = run_cli("print", "image-tag", "--config", str(root / "buildkit.yaml"))
    assert plain.stdout == values["image-tag"] + "\n"
    bad = run_cli("print", "nonsense", "--config", str(root / "buildkit.yaml"))
    assert bad.returncode == 2 and "'nonsense'" in bad.stderr and "image-uri" in bad.stderr


def test_make_image_run_then_push_only_when_inputs_changed(testenv, trainer):
    started = time.monotonic()
    proc = make(trainer, testenv, "image", "run", "ARGS=--epochs 50")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "trained: w=" in proc.stdout + proc.stderr
    print(f"make image run: {time.monotonic() - started:.1f}s")

    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/make/trainer-{uuid.uuid4().hex[:8]}"
    first = make(trainer, testenv, "push", f"IMAGE={image}")
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    assert "build --push" in first.stdout
    tag = run_cli("print", "image-tag", "--config", str(trainer / "buildkit.yaml"), env=testenv).stdout.strip()
    tags = json.loads(subprocess.run(["curl", "-s", f"http://{image.split('/', 1)[0]}/v2/{image.split('/', 1)[1]}/tags/list"],
                                     capture_output=True, text=True).stdout)["tags"]
    assert tag in tags
    # Same inputs: the push target finds its stamp and runs no build.
    again = make(trainer, testenv, "push", f"IMAGE={image}")
    assert again.returncode == 0 and "build --push" not in again.stdout, again.stdout
    # A code change is a new content tag: built and pushed again.
    task = trainer / "trainer" / "task.py"
    task.write_text(task.read_text() + f"\n# {uuid.uuid4().hex}\n")
    changed = make(trainer, testenv, "push", f"IMAGE={image}")
    assert changed.returncode == 0 and "build --push" in changed.stdout, (changed.stdout + changed.stderr)[-3000:]
