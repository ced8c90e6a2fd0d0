"""The entry point a trainer repository declares (buildkit_py/sources/entrypoints/), found by autopackage before the
layouts it knows: Dockerfile ENTRYPOINT/CMD in each form and place, submit commands, Vertex AI SDK calls."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


def dry(root, *args: str) -> dict:
    proc = run_cli("autopackage", str(root), "--dry-run", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["inferred"]


PACKAGE = {"mypkg/__init__.py": "", "mypkg/training/__init__.py": "", "mypkg/training/train.py": "print(1)\n"}


@pytest.mark.parametrize("name, text, trainer, args", [
    ("Dockerfile", 'FROM python:3.10\nWORKDIR /app\nCOPY . .\nENTRYPOINT ["python", "-m", "mypkg.training.train"]\n',
     {"module": "mypkg.training.train"}, None),
    ("Dockerfile.gpu", 'FROM nvidia/cuda:12.4.1-base-ubuntu22.04\nCOPY . /code\nWORKDIR /code\n'
                       'ENTRYPOINT ["python3", "-u", "-m", "mypkg.training.train"]\nCMD ["--epochs", "5"]\n',
     {"module": "mypkg.training.train", "args": ["--epochs", "5"]}, "--epochs 5"),
    ("docker/trainer.dockerfile", 'FROM python:3.9-slim\nWORKDIR /opt/app\nCOPY src/ /opt/app/src/\n'
                                  'CMD ["python", "-u", "src/models/train_model.py"]\n',
     {"script": "src/models/train_model.py"}, None),
    # a shell-form ENTRYPOINT's arguments are the trainer's own (it takes no CMD nor job args): they stay
    ("dockerfiles/train_model.dockerfile", "FROM python:3.9\nWORKDIR /w\nCOPY . /w\n"
                                           "ENTRYPOINT python src/models/train_model.py --data gs://b/d\n",
     {"command": ["python", "src/models/train_model.py", "--data", "gs://b/d"], "script": "src/models/train_model.py"},
     None),
    # an exec-form ENTRYPOINT's own arguments stay before the job's; CMD's are the defaults a job's replace
    ("Dockerfile", 'FROM python:3.10\nCOPY . /app\nENTRYPOINT ["python", "-m", "mypkg.training.train", "train"]\n'
                   'CMD ["--epochs", "5"]\n',
     {"command": ["python", "-m", "mypkg.training.train", "train"], "module": "mypkg.training.train",
      "args": ["--epochs", "5"]}, "--epochs 5"),
    ("Dockerfile.training", 'FROM python:3.9\nCOPY . /app\nWORKDIR /app\n'
                            'CMD ["sh", "-c", "dvc pull data/raw && python src/models/train_model.py"]\n',
     {"command": ["sh", "-c", "dvc pull data/raw && python src/models/train_model.py"],
      "script": "src/models/train_model.py"}, None),
    # a CMD set before the ENTRYPOINT in the same stage stays (BuildKit resets only an inherited one)
    ("Dockerfile", 'FROM python:3.10\nCOPY . /app\nCMD ["--steps", "5"]\nENTRYPOINT ["python", "-m", "mypkg.training.train"]\n',
     {"module": "mypkg.training.train", "args": ["--steps", "5"]}, "--steps 5"),
    # a heredoc's body is a script, not instructions
    ("Dockerfile", 'FROM python:3.10\nRUN <<EOF\nENTRYPOINT ["python", "serve.py"]\nEOF\nCOPY . /app\n'
                   'ENTRYPOINT ["python", "-m", "mypkg.training.train"]\n', {"module": "mypkg.training.train"}, None),
])
def test_a_training_dockerfile_names_the_trainer(project, name, text, trainer, args):
    root = project({**PACKAGE, "src/models/train_model.py": "print(2)\n", "trainer/__init__.py": "",
                    "trainer/task.py": "print(3)\n", "Dockerfile.serving": 'FROM python:3.10\nCMD ["python", "serve.py"]\n',
                    "serve.py": "", name: text})
    inferred = dry(root)
    assert inferred["config_keys"]["trainer"] == trainer, inferred
    line = len(text.rstrip("\n").split("\n")) - (1 if "\nCMD [\"--epochs" in text else 0)
    assert f"(named by {name}:{line}" in inferred["trainer"], inferred["trainer"]
    notes = " | ".join(inferred["notes"])
    assert (f"passes {args!r} to the trainer" in notes) == (args is not None), notes
    if "dvc pull" in text:  # a data step before the trainer: the repository's command is kept
        assert "the image runs the repository's command" in notes, notes
    elif "command" in trainer:
        fixed = " ".join(trainer["command"][3 if "-m" in trainer["command"] else 2:])
        assert f"the ENTRYPOINT passes {fixed!r} to the trainer itself" in notes, notes


def test_a_dockerfile_in_a_subfolder_and_a_script_it_copies_elsewhere_name_the_trainer(project):
    """docker/train/Dockerfile (a folder per image, as MLOps course repositories keep them; docker/api/ is not a
    training one), whose ENTRYPOINT runs a wrapper it copied from docker/train/ to its work directory: the wrapper is
    followed where it is here, over the Makefile's several scripts."""
    root = project({**PACKAGE, "mypkg/predict.py": "print(4)\n",
                    "Makefile": "train:\n\tpython mypkg/training/train.py\npredict:\n\tpython mypkg/predict.py\n",
                    "docker/api/Dockerfile": 'FROM python:3.11\nCOPY . /srv\nENTRYPOINT ["python", "mypkg/predict.py"]\n',
                    "docker/train/Dockerfile": "FROM python:3.11-slim\nWORKDIR /work\nCOPY mypkg/ mypkg/\n"
                                              "COPY ./docker/train/entrypoint.sh .\nENTRYPOINT [\"./entrypoint.sh\"]\n",
                    "docker/train/entrypoint.sh": "#!/bin/sh\nset -e\nexec python -u mypkg/training/train.py \"$@\"\n"})
    inferred = dry(root)
    assert inferred["config_keys"]["trainer"] == {"script": "mypkg/training/train.py"}, inferred
    assert "(named by docker/train/Dockerfile:5" in inferred["trainer"] and "entrypoint.sh" in inferred["trainer"]


def test_a_submit_command_in_a_script_outranks_the_scripts_own_python_lines(project):
    """runner.sh runs an analysis locally, submit.sh submits the trainer: the submit command names what the cloud
    job runs, as an SDK call in code does."""
    root = project({"trainer/__init__.py": "", "trainer/train.py": "print(1)\n", "analysis.py": "print(2)\n",
                    "runner.sh": "#!/bin/sh\npython3 analysis.py -r q1\n",
                    "submit.sh": "#!/bin/sh\ngcloud ai-platform jobs submit training j1 --package-path trainer/ \\\n"
                                 "  --module-name trainer.train --region us-central1\n"})
    inferred = dry(root)
    assert inferred["config_keys"]["trainer"] == {"module": "trainer.train"}, inferred
    assert "(named by submit.sh:" in inferred["trainer"]
    # Vertex AI runs a submitted shell script with bash: the trainer is what it runs, with its arguments.
    root.joinpath("submit.sh").write_text("#!/bin/sh\ngcloud ai custom-jobs local-run --executor-image-uri=x "
                                          "--local-package-path=. --script=train.sh\n")
    root.joinpath("train.sh").write_text("#!/bin/bash\npython trainer/train.py --epochs 3\n")
    inferred = dry(root)
    assert inferred["config_keys"]["trainer"] == {"script": "trainer/train.py", "args": ["--epochs", "3"]}, inferred
    assert "(named by submit.sh:2, through train.sh)" in inferred["trainer"], inferred["trainer"]


def test_a_wrapper_whose_edits_span_lines_runs_as_written(project):
    """A wrapper the Dockerfile copies to its work directory cds there and runs the trainer: the edit (`cd /root` is
    /app in the generated image) would make a script of several lines, which no command word may hold, so the
    wrapper runs as written, said, and the dry run goes on."""
    root = project({"main.py": "print(1)\n",
                    "scripts/run.sh": "#!/bin/bash\ncd /root/\ndvc pull data\npython main.py \"$@\"\necho done\n",
                    "Dockerfile": "FROM python:3.11\nWORKDIR /root\nCOPY . /root\nCOPY scripts/run.sh /root/run.sh\n"
                                  "ENTRYPOINT [\"/root/run.sh\"]\n"})
    inferred = dry(root)
    assert inferred["config_keys"]["trainer"] == {"command": ["bash", "/app/scripts/run.sh"], "script": "main.py"}, inferred
    assert any("has several lines, which a command cannot pass inline; it runs as written" in n for n in inferred["notes"])


def test_a_packages_build_metadata_names_no_trainer(project):
    """An .egg-info left by `python setup.py sdist` lists every file of the package in SOURCES.txt (a line mentioning
    gcloud_job.py reads as docs with commands): none of them is declared a trainer by it."""
    root = project({"setup.py": "from setuptools import setup\nsetup(name='t', packages=['trainer'])\n",
                    "trainer/__init__.py": "", "trainer/task.py": "print(1)\n", "trainer/gcloud_job.py": "print(2)\n",
                    "trainer.egg-info/SOURCES.txt": "setup.py\ntrainer/__init__.py\ntrainer/gcloud_job.py\n"
                                                    "trainer/task.py\n"})
    inferred = dry(root)
    assert inferred["config_keys"]["trainer"] == {"module": "trainer.task"}, inferred
    assert "egg-info" not in " ".join(inferred["notes"])


@pytest.mark.parametrize("file, text, trainer", [
    ("README.md", "```\ngcloud ai-platform jobs submit training $JOB --module-name trainer.train \\\n"
                  "  --package-path trainer/\n```\n",
     {"module": "trainer.train"}),
    ("scripts/submit.sh", "gcloud ai custom-jobs create --region=us-central1 \\\n"
                          "  --worker-pool-spec=machine-type=n1-standard-4,replica-count=1,executor-image-uri=X,"
                          "python-module=trainer.model_keras\n", {"module": "trainer.model_keras"}),
    ("Makefile", "submit:\n\tgcloud ai custom-jobs create --worker-pool-spec=machine-type=n1-standard-4,script=train_script.py\n",
     {"script": "train_script.py"}),
    ("pipeline/submit.py", "from google.cloud import aiplatform\njob = aiplatform.CustomPythonPackageTrainingJob(\n"
                           "    display_name='x', python_package_gcs_uri='gs://b/p.tar.gz',\n"
                           "    python_module_name=\"trainer.train\", container_uri='X')\n", {"module": "trainer.train"}),
    ("vertex/run.py", "worker_pool_specs = [{\"machine_spec\": {}, \"python_package_spec\": {\n"
                      "    \"executor_image_uri\": 'X', \"package_uris\": [], \"python_module\": \"trainer.model_keras\"}}]\n",
     {"module": "trainer.model_keras"}),
    ("launch.py", "job = aiplatform.CustomTrainingJob(display_name='x', script_path='train_script.py', container_uri='X')\n",
     {"script": "train_script.py"}),
])
def test_a_submit_command_or_sdk_call_names_the_trainer(project, file, text, trainer):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "print(1)\n", "trainer/train.py": "print(2)\n",
                    "trainer/model_keras.py": "print(3)\n", "train_script.py": "print(4)\n", file: text})
    inferred = dry(root)
    assert inferred["config_keys"]["trainer"] == trainer, inferred
    assert f"(named by {file}:" in inferred["trainer"]


def test_a_dockerfile_wins_over_a_submit_command_and_an_ambiguous_repository_is_refused(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "", "trainer/train.py": "", "trainer/other.py": "",
                    "submit.sh": "gcloud ai-platform jobs submit training j --module-name trainer.train\n",
                    "Dockerfile": 'FROM python:3.10\nCOPY . /app\nWORKDIR /app\nENTRYPOINT ["python", "-m", "trainer.other"]\n'})
    inferred = dry(root)
    assert inferred["config_keys"]["trainer"] == {"module": "trainer.other"}
    assert any("other trainers too, not used: module trainer.train (submit.sh:1; --module trainer.train picks it)" in n
               for n in inferred["notes"]), inferred["notes"]
    (root / "Dockerfile.gpu").write_text('FROM python:3.10\nCOPY . /app\nWORKDIR /app\nCMD ["python", "-m", "trainer.task"]\n')
    proc = run_cli("autopackage", str(root), "--dry-run")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "the repository names several trainers, with nothing to tell which one trains: module trainer.other " \
           "(Dockerfile:4: --module trainer.other); module trainer.task (Dockerfile.gpu:4: --module trainer.task)" \
           in proc.stderr, proc.stderr
    (root / "buildkit.yaml").write_text("trainer:\n  module: trainer.train\n")  # the config settles it
    assert dry(root)["config_keys"] == {} or "trainer" not in dry(root)["config_keys"]


def test_what_is_not_a_file_here_is_not_a_declaration(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "",
                    "Dockerfile": 'FROM python:3.10\nRUN git clone https://x/y.git /y\nCMD ["python", "-m", "y.train"]\n',
                    "notes.md": "--module-name not.here and script=../outside.py\n"})
    inferred = dry(root)
    assert inferred["config_keys"]["trainer"] == {"module": "trainer.task"}  # the layout, as before
    assert inferred["trainer"] == "module trainer.task"


def test_the_python_the_repository_asks_for(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "", ".python-version": "3.10.14\n"})
    inferred = dry(root)
    assert inferred["config_keys"]["python"] == "3.10" and "Python 3.10: what .python-version:1 asks for" in inferred["notes"]
    (root / ".python-version").unlink()
    (root / "Dockerfile").write_text('FROM python:3.9-slim AS base\nWORKDIR /app\nCOPY . .\nCMD ["python", "-m", "trainer.task"]\n')
    assert dry(root)["config_keys"]["python"] == "3.9"
    (root / "Dockerfile").unlink()
    (root / "setup.py").write_text("from setuptools import setup\nsetup(name='t', version='1', python_requires='>=3.8,<3.11')\n")
    inferred = dry(root)
    assert inferred["config_keys"]["python"] == "3.10", inferred  # the newest an image has inside the range
    assert "Python 3.10: what setup.py:python_requires (>=3.8,<3.11) asks for" in inferred["notes"]
    (root / "setup.py").write_text("from setuptools import setup\nsetup(name='t', version='1', python_requires='>=3.8')\n")
    assert "python" not in dry(root)["config_keys"]  # the default fits: nothing to say
    # A framework pin and the hint that contradict each other are named together; a flag wins over the hint.
    (root / ".python-version").write_text("3.9\n")
    (root / "requirements.txt").write_text("torch==2.9.1\n")
    proc = run_cli("autopackage", str(root), "--dry-run")
    assert proc.returncode == 2 and "python: .python-version:1 asks for Python 3.9, and torch==2.9.1 (requirements.txt:1) has " \
        "wheels for Python 3.10" in proc.stderr, proc.stderr
    assert dry(root, "--python", "3.11")["config_keys"].get("python") is None


def test_what_the_training_dockerfile_installs_and_sets_informs_the_image(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "",
                    "Dockerfile": "FROM python:3.10-slim\n"
                                  "RUN apt-get update && apt-get install -y --no-install-recommends libsndfile1 \\\n"
                                  "    ffmpeg=7:5.1.6-0+deb12u1 python3-dev git && rm -rf /var/lib/apt/lists/*\n"
                                  "ENV DATA_DIR=/data MODEL_NAME=\"resnet 50\" PATH=/opt/conda/bin:$PATH PYTHONPATH=/x\n"
                                  "ENV LEGACY_STYLE value here\n"
                                  "WORKDIR /app\nCOPY . .\nENTRYPOINT [\"python\", \"-m\", \"trainer.task\"]\n"})
    out = json.loads(run_cli("autopackage", str(root), "--dry-run", "--json").stdout)
    keys = out["inferred"]["config_keys"]
    assert keys["system_packages"] == ["libsndfile1", "ffmpeg", "git"], keys
    assert keys["env"] == {"DATA_DIR": "/data", "MODEL_NAME": "resnet 50", "LEGACY_STYLE": "value here"}, keys
    assert keys["python"] == "3.10"
    assert out["plan"]["env"]["MODEL_NAME"] == "resnet 50" and "git" in out["plan"]["system_packages"]
    (root / "buildkit.yaml").write_text("system_packages: [curl]\nenv: {A: b}\n")  # the config's own win
    keys = dry(root)["config_keys"]
    assert "system_packages" not in keys and "env" not in keys


def test_a_src_layout_puts_its_packages_on_the_path(project, testenv, tmp_path):
    root = project({"src/mypkg/__init__.py": "", "src/mypkg/__main__.py": "from mypkg import model\nprint('SRC', model.NAME)\n",
                    "src/mypkg/model.py": "import json\nNAME = 'ok'\n", "README.md": "python -m mypkg\n"})
    inferred = dry(root)
    assert inferred["config_keys"]["trainer"] == {"module": "mypkg", "package_dir": "src"}, inferred
    assert inferred["imports"] == [] and inferred["pip"] == []  # mypkg is the trainer's own, under src/
    (root / "src" / "mypkg" / "__main__.py").unlink()
    (root / "src" / "mypkg" / "task.py").write_text("from mypkg import model\nprint('SRC', model.NAME)\n")
    (root / "Dockerfile").write_text('FROM python:3.11\nCOPY . /app\nWORKDIR /app\nENV PYTHONPATH=/app/src\n'
                                     'CMD ["python", "-m", "mypkg.task"]\n')
    assert dry(root)["config_keys"]["trainer"] == {"module": "mypkg.task", "package_dir": "src"}
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_cli("autopackage", str(root), "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["run"]["exit_code"] == 0 and "SRC ok" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("value", ["..", "../outside", "/abs", "a\nb", "x" * 300, "nothere"])
def test_a_package_dir_outside_or_missing_is_refused(project, value):
    root = project({"src/mypkg/__init__.py": "", "src/mypkg/task.py": ""})
    (root / "buildkit.yaml").write_text(json.dumps({"trainer": {"module": "mypkg.task", "package_dir": value}}))
    proc = run_cli("dockerfile", "--dir", str(root))
    assert proc.returncode == 2 and "trainer.package_dir" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
