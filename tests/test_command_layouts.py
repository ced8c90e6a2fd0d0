"""Trainer layouts in the shapes real repositories use, one for each place a repository says how it runs its trainer,
checked with `autopackage --dry-run --json`; and a kept command (a data step, a conda wrapper, a package folder with a
hyphen) built on the engine and run."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


def dry(root, *args: str) -> dict:
    proc = run_cli("autopackage", str(root), "--dry-run", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["inferred"]


SRC_PKG = {"src/segm/__init__.py": "", "src/segm/train.py": "def train():\n    print('TRAINED')\n", "src/segm/eval.py": ""}
PYPROJECT = ('[project]\nname = "segm"\nversion = "0.1.0"\n[project.scripts]\ntrain = "segm.train:train"\n'
             '[tool.setuptools.packages.find]\nwhere = ["src"]\n')


@pytest.mark.parametrize("files, trainer, said", [
    # a console script run through a shell, in a src/ layout
    ({**SRC_PKG, "pyproject.toml": PYPROJECT,
      "docker/Dockerfile": 'FROM python:3.11\nCOPY . /app\nENTRYPOINT ["sh", "-c", "train"]\n'},
     {"module": "segm.train", "function": "train", "package_dir": "src"}, "docker/Dockerfile:3"),
    # a wrapper script whose Python command comes from the job config's args
    ({"trainer/__init__.py": "", "trainer/fit.py": "", "trainer/other.py": "",
      "run.sh": '#!/bin/bash\nset -e\ngsutil cp gs://b/data.csv /tmp/d.csv\npython3 "$@"\ngsutil cp model.pkl gs://b/m/\n',
      "dockerfiles/Dockerfile": 'FROM python:3.10\nWORKDIR /srv\nCOPY . .\nENTRYPOINT ["/srv/run.sh"]\n',
      "job.yaml": "workerPoolSpecs:\n  - machineSpec: {machineType: n1-standard-4}\n    replicaCount: 1\n    containerSpec:\n"
                  "      imageUri: gcr.io/p/t\n      args: [\"-m\", \"trainer.fit\", \"--epochs\", \"3\"]\n"},
     {"command": ["bash", "/app/run.sh", "-m", "trainer.fit", "--epochs", "3"], "module": "trainer.fit"},
     "dockerfiles/Dockerfile:4"),
    # a job config with command and args, the image a plain Python one
    ({"trainer/__init__.py": "", "trainer/fit.py": "", "trainer/task.py": "",
      "config/job.yaml": "workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-8}\n  replicaCount: 1\n"
                         "  containerSpec:\n    imageUri: IMAGE\n    command: [python3, -m, trainer.fit]\n"
                         "    args: [--lr, '0.01']\n"},
     {"module": "trainer.fit", "args": ["--lr", "0.01"]}, "config/job.yaml:6"),
    # a Kubeflow Pipelines component whose command names the module, its inputs placeholders
    ({"components/__init__.py": "", "components/train_op.py": "", "trainer/__init__.py": "", "trainer/task.py": "",
      "component.yaml": "name: Train\ninputs:\n- {name: data}\nimplementation:\n  container:\n    image: IMAGE\n"
                        "    command: [python3, -m, components.train_op]\n    args: [--data, {inputValue: data}]\n"},
     {"module": "components.train_op"}, "component.yaml:"),
    # a Makefile target that trains, beside one that evaluates
    ({"model/__init__.py": "", "model/train_model.py": "", "model/evaluate.py": "",
      "Makefile": "PY ?= python3\n\neval:\n\t$(PY) -m model.evaluate\n\ntrain: data\n\t@echo training\n"
                  "\t$(PY) -m model.train_model --epochs $${EPOCHS:-5}\n"},
     {"module": "model.train_model", "args": ["--epochs", "5"]}, "Makefile:8"),
    # a README code block with a prompt
    ({"code/train_net.py": "", "code/utils.py": "",
      "README.md": "# Net\n\n```bash\n$ pip install -r requirements.txt\n$ python code/train_net.py --batch 64\n```\n"},
     {"script": "code/train_net.py", "args": ["--batch", "64"]}, "README.md:5"),
    # a namespace package: no __init__.py in src/ nor src/training/
    ({"src/training/train.py": "", "src/training/data.py": "",
      "Dockerfile.training": 'FROM python:3.11\nCOPY . /app\nWORKDIR /app\nCMD ["python", "-m", "src.training.train"]\n',
      "Dockerfile.prediction": 'FROM python:3.11\nCOPY . /app\nCMD ["python", "-m", "src.serve"]\n'},
     {"module": "src.training.train"}, "Dockerfile.training:4"),
    # a submit script that keeps the module in a shell variable
    ({"seg/__init__.py": "", "seg/train.py": "", "seg/infer.py": "",
      "scripts/submit.sh": 'module=seg.train\nJOB="seg_$(date +%s)"\ngcloud ai-platform jobs submit training "$JOB" \\\n'
                           '  --package-path seg --module-name "$module" --region us-central1\n'},
     {"module": "seg.train"}, "scripts/submit.sh:4"),
    # conda run in a training Dockerfile, a serving one beside it
    ({"gym-rl/__init__.py": "", "gym-rl/task.py": "", "gym-rl/agent.py": "",
      "Dockerfile.train": 'FROM continuumio/miniconda3\nCOPY . /work\nWORKDIR /work\n'
                          'ENTRYPOINT ["conda", "run", "--no-capture-output", "-n", "rl", "python", "-m", "gym-rl.task"]\n',
      "Dockerfile.serve": 'FROM python:3.11\nCMD ["python", "-m", "gym-rl.serve"]\n'},
     {"module": "gym-rl.task"}, "Dockerfile.train:4"),
    # tasks.py (invoke) runs the trainer
    ({"net/__init__.py": "", "net/fit.py": "", "net/plots.py": "",
      "tasks.py": "from invoke import task\n\n@task\ndef train(c):\n    c.run('python -m net.fit --config cfg.yaml')\n"},
     {"module": "net.fit", "args": ["--config", "cfg.yaml"]}, "tasks.py:5"),
])
def test_each_place_a_repository_says_how_it_runs(project, files, trainer, said):
    inferred = dry(project(files))
    assert inferred["config_keys"]["trainer"] == trainer, inferred
    assert f"named by {said}" in inferred["trainer"], inferred["trainer"]


def test_several_trainers_are_ranked_by_evidence(project):
    root = project({"trainer/__init__.py": "", "trainer/model.py": "", "trainer/model_hpt.py": "",
                    "run.remote.sh": "gcloud ml-engine jobs submit training j --module-name trainer.model\n",
                    "run.local.sh": "gcloud ml-engine local train --module-name trainer.model\n",
                    "run.remote.hptune.sh": "gcloud ml-engine jobs submit training j --module-name trainer.model_hpt\n",
                    "README.md": "```\ngcloud ml-engine jobs submit training j --module-name trainer.model_hpt\n```\n"})
    inferred = dry(root)
    assert inferred["config_keys"]["trainer"] == {"module": "trainer.model"}, inferred
    assert any("trainer.model_hpt" in n and "--module trainer.model_hpt picks it" in n for n in inferred["notes"])


def test_an_ambiguous_repository_is_refused_naming_what_it_saw(project):
    root = project({"a/__init__.py": "", "a/fit.py": "", "b/__init__.py": "", "b/fit.py": "",
                    "Dockerfile": 'FROM python:3.11\nCMD ["sh", "-c", "python -m elsewhere.main"]\n',
                    "one.sh": "python -m a.fit\n", "two.sh": "python -m b.fit\n"})
    proc = run_cli("autopackage", str(root), "--dry-run")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "module a.fit (one.sh:1: --module a.fit)" in proc.stderr and "module b.fit (two.sh:1: --module b.fit)" \
        in proc.stderr, proc.stderr
    (root / "one.sh").unlink()
    (root / "two.sh").unlink()
    proc = run_cli("autopackage", str(root), "--dry-run")
    assert proc.returncode == 2 and "Seen and set aside: Dockerfile:2 runs" in proc.stderr \
        and "module elsewhere.main is not in this directory" in proc.stderr, proc.stderr


def test_a_kept_command_renders_behind_the_launcher(project):
    root = project({"pkg/__init__.py": "", "pkg/train.py": "print('T')\n",
                    "Dockerfile": 'FROM python:3.11\nCOPY . /app\nCMD ["sh", "-c", "dvc pull && python -m pkg.train"]\n'})
    inferred = dry(root)
    assert inferred["config_keys"]["trainer"] == {"command": ["sh", "-c", "dvc pull && python -m pkg.train"],
                                                  "module": "pkg.train"}
    (root / "buildkit.yaml").write_text(json.dumps({"trainer": inferred["config_keys"]["trainer"]}))
    proc = run_cli("dockerfile", "--config", str(root / "buildkit.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert 'ENTRYPOINT ["python", "-m", "buildkit_launcher", "--", "sh", "-c", "dvc pull && python -m pkg.train"]' \
        in proc.stdout, proc.stdout


@pytest.mark.parametrize("trainer, field", [
    ({"command": "sh -c train"}, "trainer.command"),
    ({"command": []}, "trainer.command"),
    ({"command": [""]}, "trainer.command[0]"),
    ({"command": ["sh", "a\x00b"]}, "trainer.command[1]"),
    ({"command": ["x"] * 300}, "trainer.command"),
    ({"command": ["sh"], "module": "pkg.train", "script": "t.py"}, "trainer"),
    ({"command": [{"a": 1}]}, "trainer.command[0]"),
    ({"command": ["x" * 20000]}, "trainer.command"),
])
def test_a_bad_trainer_command_is_refused(project, trainer, field):
    root = project({"pkg/__init__.py": "", "pkg/train.py": "", "t.py": ""})
    (root / "buildkit.yaml").write_text(json.dumps({"trainer": trainer}))
    proc = run_cli("dockerfile", "--config", str(root / "buildkit.yaml"))
    assert proc.returncode == 2 and field in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_kept_command_builds_and_runs(project, testenv, tmp_path):
    """A data step before the trainer, a conda environment the image lacks, a package folder with a hyphen: built on
    the engine (the import check imports gym-rl.task's closure), then run behind the launcher."""
    root = project({"gym-rl/__init__.py": "", "gym-rl/task.py": "import sys\nimport json\nprint('TASK', sys.argv[1:])\n",
                    "Dockerfile.train": 'FROM python:3.11\nCOPY . /code\nWORKDIR /code\n'
                                        'ENTRYPOINT ["sh", "-c", "cp -r gym-rl /tmp/data && ls /tmp/data && conda run -n rl '
                                        'python -m gym-rl.task --epochs 2"]\n'})
    inferred = dry(root)
    assert inferred["config_keys"]["trainer"]["command"] == [
        "sh", "-c", "cp -r gym-rl /tmp/data && ls /tmp/data && python -m gym-rl.task --epochs 2"], inferred
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_cli("autopackage", str(root), "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["run"]["exit_code"] == 0, proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert "task.py" in out and "TASK ['--epochs', '2']" in out, out[-2000:]
