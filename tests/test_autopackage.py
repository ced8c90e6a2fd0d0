"""autopackage: inference from a trainer directory, bad input, and the pipeline end to end on the real engine."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from google.cloud import aiplatform_v1
from vertex_loopback import FakeVertex, new_key_file

from buildkit_py.cli import autopackage_main
from buildkit_py.inference import config_text, infer
from buildkit_py.jobs.logs import ENDPOINT_ENV as LOGGING_ENDPOINT_ENV
from buildkit_py.jobs.submit import ENDPOINT_ENV
from conftest import REPO, hadolint, run_cli

QUICKSTART = REPO / "examples" / "quickstart"


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def dry(root: Path, *args: str) -> dict:
    proc = run_cli("autopackage", str(root), "--dry-run", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_package_layout_and_torch_pin_from_requirements(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "print(1)\n",
                    "requirements.txt": "# deps\nnumpy>=1.26\ntorch==2.5.1  # the framework\n"})
    before = tree(root)
    out = dry(root)
    inferred = out["inferred"]
    assert inferred["trainer"] == "module trainer.task"
    assert inferred["requirements"] == "requirements.txt"
    assert inferred["framework"] == "torch==2.5.1" and inferred["framework_from"] == "requirements.txt:3"
    assert out["plan"]["framework"]["requirement"] == "torch==2.5.1"
    assert out["plan"]["framework"]["index_url"] == "https://download.pytorch.org/whl/cu124"
    assert [s["stage"] for s in out["stages"]] == ["infer", "resolve", "render"]
    assert out["next"][0].startswith("build buildkit-py/") and out["run"] is None
    assert tree(root) == before  # --dry-run writes nothing


def test_script_and_pyproject_dependencies_unpinned_framework_is_said(project):
    root = project({"train.py": "print(1)\n",
                    "pyproject.toml": '[project]\nname = "t"\nversion = "1"\ndependencies = ["scikit-learn", "pandas"]\n'})
    out = dry(root)
    inferred = out["inferred"]
    assert inferred["trainer"] == "script train.py" and inferred["pip"] == ["scikit-learn", "pandas"]
    assert inferred["framework"] == "scikit-learn" and any("not pinned" in n for n in inferred["notes"])
    assert out["plan"]["framework"]["requirement"].startswith("scikit-learn==")  # pinned to what resolves


def test_config_keys_win_and_flags_win_over_inference(project):
    root = project({"trainer/task.py": "", "other.py": "", "buildkit.yaml": "trainer:\n  script: other.py\n"})
    out = dry(root)
    assert out["inferred"]["trainer"] is None and "trainer" not in out["inferred"]["config_keys"]
    assert out["plan"]["entrypoint"][-1].endswith("/other.py")
    assert dry(root, "--python", "3.12")["plan"]["python"]["version"] == "3.12"


def test_no_trainer_exits_2_saying_what_was_looked_for(project):
    root = project({"README.md": "hi\n", "lib/util.py": ""})
    proc = run_cli("autopackage", str(root), "--dry-run")
    assert proc.returncode == 2, proc.stderr
    assert "no trainer found" in proc.stderr and "trainer/task.py" in proc.stderr and "train.py" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_conflicting_pins_exit_2_naming_both(project):
    root = project({"trainer/task.py": "", "requirements.txt": "torch==2.5.1\n",
                    "buildkit.yaml": "framework: torch==2.4.1\n"})
    proc = run_cli("autopackage", str(root), "--dry-run")
    assert proc.returncode == 2
    assert "'torch==2.4.1'" in proc.stderr and "'torch==2.5.1'" in proc.stderr and "requirements.txt:1" in proc.stderr
    flag = run_cli("autopackage", str(root), "--dry-run", "--framework", "torch==2.5.1", "--json")
    assert flag.returncode == 0, flag.stderr  # the flag agrees with the requirement
    both = project({"requirements.txt": "torch==2.5.1\n", "buildkit.yaml": "framework: torch==2.5.1\n",
                    "pyproject.toml": '[project]\nname = "t"\nversion = "1"\ndependencies = ["torch==2.6.0"]\n'})
    proc = run_cli("autopackage", str(both), "--dry-run")
    assert proc.returncode == 2 and "'torch==2.5.1'" in proc.stderr and "'torch==2.6.0'" in proc.stderr


def test_write_config_text_reads_back_and_a_dry_run_writes_nothing(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "", "requirements.txt": "xgboost==2.1.1\n"})
    proc = run_cli("autopackage", str(root), "--dry-run", "--write-config")
    assert proc.returncode == 0 and not (root / "buildkit.yaml").exists()
    bad = run_cli("autopackage", str(root), "--write-config", "--target", "nowhere")
    assert bad.returncode == 2 and "'nowhere'" in bad.stderr and not (root / "buildkit.yaml").exists()
    (root / "buildkit.yaml").write_text(config_text(infer(root, None, {})), encoding="utf-8")
    again = dry(root)  # the written config says everything: nothing is left to infer
    assert again["inferred"]["config_keys"] == {} and again["plan"]["framework"]["requirement"] == "xgboost==2.1.1"


@pytest.fixture
def trainer_copy(tmp_path):
    root = tmp_path / "quick"
    shutil.copytree(QUICKSTART / "trainer", root / "trainer")  # no buildkit.yaml: everything inferred
    return root


def test_autopackage_builds_pushes_runs_then_reuses_and_rebuilds_after_an_edit(testenv, trainer_copy, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    args = ("autopackage", str(trainer_copy), "--image", f"{registry}/autopkg-e2e/quick", "--json")
    before = tree(trainer_copy)
    proc = run_cli(*args, "--", "--epochs", "50", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert [s["stage"] for s in out["stages"]] == ["infer", "resolve", "render", "build", "push", "run"]
    assert out["run"]["exit_code"] == 0 and float(out["run"]["metrics"][-1]["rmse"]) > 0
    assert out["run"]["metrics"][-1]["global_step"] == "50"  # the trainer args after `--`
    assert out["run"]["output_dir"].startswith(str(tmp_path / "cache"))  # outside the trainer directory
    assert tree(trainer_copy) == before  # nothing written into the user's tree
    again = json.loads(run_cli(*args, env=env).stdout)
    stages = {s["stage"]: s for s in again["stages"]}
    assert stages["build"]["reused"] and "not rebuilt" in stages["build"]["detail"]
    assert stages["push"]["reused"] and "already in the registry: not pushed" in stages["push"]["detail"]
    task = trainer_copy / "trainer" / "task.py"
    task.write_text(task.read_text() + f"# edited {time.time_ns()}\n")  # new content on every test run
    edited = json.loads(run_cli(*args, env=env).stdout)
    stages = {s["stage"]: s for s in edited["stages"]}
    assert not stages["build"]["reused"] and not stages["push"]["reused"] and edited["image"] != out["image"]
    # Inference results saved on request; a second --write-config refuses to overwrite the config.
    saved = run_cli(*args, "--write-config", env=env)
    assert saved.returncode == 0 and "module: trainer.task" in (trainer_copy / "buildkit.yaml").read_text()
    refused = run_cli(*args, "--write-config", env=env)
    assert refused.returncode == 2 and "buildkit.yaml" in refused.stderr


def test_vertex_target_builds_pushes_and_submits_to_the_api(testenv, trainer_copy, tmp_path):
    server = FakeVertex()
    key, server.public_key = new_key_file(tmp_path, f"{server.url}/token")
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "GOOGLE_APPLICATION_CREDENTIALS": str(key),
           ENDPOINT_ENV: server.url, LOGGING_ENDPOINT_ENV: server.url}
    args = ("autopackage", str(trainer_copy), "--image", f"{registry}/autopkg-vertex/quick", "--project", "fake-project")
    with server:
        proc = run_cli(*args, "--target", "loopback", "--wait", "--poll", "0.01", "--json", env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout)
        assert [s["stage"] for s in out["stages"]] == ["infer", "resolve", "render", "build", "push", "submit"]
        assert out["run"] is None and out["submitted"]["state"] == "JOB_STATE_SUCCEEDED"
        (body,) = server.bodies
        container = body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
        assert container["imageUri"].startswith(out["image"] + "@sha256:")  # the pushed image, pinned by digest
        # A configured project makes vertex the default target, which refuses a loopback registry before sending.
        refused = run_cli(*args, env=env)
        assert refused.returncode != 0 and "127.0.0.1" in refused.stderr and len(server.bodies) == 1


def test_a_code_edit_for_the_service_is_appended_in_the_registry_with_no_engine(testenv, trainer_copy, tmp_path):
    """autopackage for the service pushes through the build: after one full build, a code-only edit is a code layer
    appended in the registry (the fast path), which needs no engine at all."""
    server = FakeVertex()
    key, server.public_key = new_key_file(tmp_path, f"{server.url}/token")
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "GOOGLE_APPLICATION_CREDENTIALS": str(key),
           ENDPOINT_ENV: server.url, LOGGING_ENDPOINT_ENV: server.url, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    args = ("autopackage", str(trainer_copy), "--image", f"{registry}/autopkg-fast/quick-{time.time_ns()}", "--project",
            "fake-project", "--target", "loopback", "--json")
    with server:
        first = run_cli(*args, env=env)
        assert first.returncode == 0 and "appended" not in first.stderr, first.stderr[-3000:]
        task = trainer_copy / "trainer" / "task.py"
        task.write_text(task.read_text() + f"# edited {time.time_ns()}\n")
        edited = run_cli(*args, env={**env, "DOCKER_HOST": "unix:///nonexistent/docker.sock"})
        assert edited.returncode == 0 and "appended the code layer" in edited.stderr, edited.stderr[-3000:]
        out = json.loads(edited.stdout)
        stages = {s["stage"]: s for s in out["stages"]}
        assert stages["push"]["detail"].startswith("pushed ") and not stages["push"]["reused"]
        assert out["image"] != json.loads(first.stdout)["image"]
        container = server.bodies[-1]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
        assert container["imageUri"].startswith(out["image"] + "@sha256:")  # the appended image, pinned by digest


def test_vertex_target_with_pipeline_builds_pushes_submits_and_reports_the_uploaded_model(testenv, trainer_copy,
                                                                                          tmp_path):
    (trainer_copy / "buildkit.yaml").write_text("job: {base_output_directory: gs://bucket/quick}\n")
    server = FakeVertex()
    key, server.public_key = new_key_file(tmp_path, f"{server.url}/token")
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "GOOGLE_APPLICATION_CREDENTIALS": str(key),
           ENDPOINT_ENV: server.url, LOGGING_ENDPOINT_ENV: server.url}
    args = ("autopackage", str(trainer_copy), "--image", f"{registry}/autopkg-pipeline/quick", "--project",
            "fake-project", "--target", "loopback", "--pipeline", "--serving-image", "scikit-learn==1.5",
            "--model-name", "quick", "--wait", "--poll", "0.01")
    with server:
        proc = run_cli(*args, "--json", env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout)
        assert [s["stage"] for s in out["stages"]] == ["infer", "resolve", "render", "build", "push", "submit"]
        submitted = out["submitted"]
        assert submitted["state"] == "PIPELINE_STATE_SUCCEEDED"
        assert submitted["name"] == "projects/fake-project/locations/us-central1/trainingPipelines/1000"
        assert submitted["model"] == "projects/fake-project/locations/us-central1/models/5000"
        (body,) = server.bodies
        pipeline = aiplatform_v1.TrainingPipeline.from_json(json.dumps(body))
        spec = aiplatform_v1.CustomJobSpec.from_json(json.dumps(body["trainingTaskInputs"]))
        assert spec.worker_pool_specs[0].container_spec.image_uri.startswith(out["image"] + "@sha256:")
        assert spec.base_output_directory.output_uri_prefix == "gs://bucket/quick"
        assert pipeline.model_to_upload.display_name == "quick"
        assert pipeline.model_to_upload.container_spec.image_uri == \
            "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest"
        text = run_cli(*args, env=env)  # the image is reused; the model is named at the end
        assert text.returncode == 0, text.stderr[-3000:]
        assert text.stdout.splitlines()[-1] == "model   projects/fake-project/locations/us-central1/models/5001"
        # Without an output directory there is nothing to upload: refused before anything is built.
        (trainer_copy / "buildkit.yaml").write_text("job: {}\n")
        refused = run_cli(*args, env=env)
        assert refused.returncode == 2 and "job.base_output_directory" in refused.stderr
        assert "[build " not in refused.stderr and "[render " in refused.stderr and len(server.bodies) == 2


def test_package_mode_runs_an_sdist_on_an_executor_image(testenv, trainer_copy, tmp_path):
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    before = tree(trainer_copy)
    proc = run_cli("autopackage", str(trainer_copy), "--mode", "package", "--image", "autopkg-package/executor", "--json",
                   env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert [s["stage"] for s in out["stages"]] == ["infer", "render", "build", "package", "run"]
    assert out["image"].startswith("autopkg-package/executor:bk-") and out["run"]["exit_code"] == 0
    assert float(out["run"]["metrics"][-1]["rmse"]) > 0
    assert "installed /buildkit-py/packages/0/quick-0.0.0.tar.gz" in proc.stderr  # the launcher installed the sdist
    assert tree(trainer_copy) == before
    for bad, field in ((("--mode", "wheel"), "--mode"), (("--target", "vertex", "--mode", "package"), "--mode")):
        proc = run_cli("autopackage", str(trainer_copy), "--dry-run", *bad, env=env)
        assert proc.returncode == 2 and field in proc.stderr, proc.stderr


def test_the_console_script_is_buildkit_py_autopackage(project, capsys):
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["autopackage"] == "buildkit_py.cli:autopackage_main"
    root = project({"train.py": "print(1)\n"})
    assert autopackage_main([str(root), "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["inferred"]["trainer"] == "script train.py"


# ---------------------------------------------------------------------------------------------
# Real trainer layouts (issue 18): what they declare, what they import, the ranges they pin

def refused(root: Path, *args: str) -> str:
    proc = run_cli("autopackage", str(root), "--dry-run", *args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stderr


def sources(out: dict) -> dict[str, str]:
    return {s["requirement"]: s["source"] for s in out["inferred"]["sources"]}


SETUP_PY = """from setuptools import find_packages, setup

REQUIRED_PACKAGES = ['tensorflow>=2.12,<2.16', 'pandas==2.2.3'] + ['gcsfs']

setup(
    name='trainer',
    version='0.1',
    install_requires=REQUIRED_PACKAGES,
    packages=find_packages(),
    include_package_data=True,
    description='My training application package.'
)
"""


def test_setup_py_required_packages_are_read_without_running_it(project):
    root = project({"setup.py": SETUP_PY, "trainer/__init__.py": "",
                    "trainer/task.py": "import tensorflow as tf\nimport pandas as pd\nimport gcsfs\nfrom trainer import model\n",
                    "trainer/model.py": "import tensorflow as tf\n"})
    out = dry(root)
    inferred = out["inferred"]
    assert inferred["trainer"] == "module trainer.task" and inferred["package"] == "trainer"
    assert sources(out) == {"tensorflow>=2.12,<2.16": "setup.py:install_requires[0]",
                            "pandas==2.2.3": "setup.py:install_requires[1]", "gcsfs": "setup.py:install_requires[2]"}
    assert inferred["framework"] == "tensorflow==2.15.1"  # the newest known inside the range, not 2.21
    assert out["plan"]["framework"]["requirement"].startswith("tensorflow")
    assert "2.15.1" in out["plan"]["framework"]["requirement"]
    assert inferred["config_keys"]["pip"] == REQUIRED_PACKAGES_PIP
    assert any("newest known release inside the range" in n for n in inferred["notes"])
    assert any("package 'trainer'" in n for n in inferred["notes"])


REQUIRED_PACKAGES_PIP = ["tensorflow>=2.12,<2.16", "pandas==2.2.3", "gcsfs"]


def _booby_trapped(project, outside: Path) -> Path:
    """A trainer whose setup.py computes install_requires, reads a file outside its directory into them and writes a
    marker beside that file: what a cloned repository's setup.py could do on the user's machine."""
    (outside / "private.txt").write_text("leaked-private-requirement\n")
    return project({"deps.txt": "six==1.16.0\n",
                    "setup.py": "import os\nfrom setuptools import setup\n"
                                f"OUTSIDE = {str(outside)!r}\n"
                                "deps = open('deps.txt').read().split()\n"
                                "try:\n    deps += open(os.path.join(OUTSIDE, 'private.txt')).read().split()\n"
                                "except OSError:\n    pass\n"
                                "try:\n    open(os.path.join(OUTSIDE, 'marker'), 'w').write('ran')\n"
                                "except OSError:\n    pass\n"
                                "setup(name='computed', version='1', py_modules=['task'], install_requires=deps,\n"
                                "      entry_points={'console_scripts': ['fit = task:main']})\n",
                    "task.py": "import six\nprint('SIX', six.__version__)\n"})


def test_a_dry_run_runs_nothing_of_the_trainer_and_says_its_metadata_was_not_computed(project, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    root = _booby_trapped(project, outside)
    before = tree(root)
    proc = run_cli("autopackage", str(root), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "metadata was not computed" in proc.stderr and "runs none of the trainer's code" in proc.stderr, proc.stderr
    out = dry(root)
    assert not (outside / "marker").exists()
    assert out["inferred"]["metadata"] == "not computed" and out["inferred"]["package"] == "computed"
    # What the plan assumes: the import's distribution, unpinned; the package's own metadata is not installed.
    assert out["inferred"]["pip"] == ["six"] and "trainer_package" not in out["inferred"]["config_keys"]
    assert tree(root) == before


def test_a_computed_install_requires_is_read_in_a_container_that_cannot_reach_this_machine(
        testenv, project, tmp_path_factory):
    """The real run: the metadata hook runs on the engine with only a copy of the trainer (no marker here, the
    outside file unread), and its requirements and entry points still reach the image."""
    outside = tmp_path_factory.mktemp("outside")
    root = _booby_trapped(project, outside)
    before = tree(root)
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"],
           "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("cache"))}
    proc = run_cli("autopackage", str(root), "--image", f"{registry}/autopkg-hook/trainer", "--json", "--target",
                   "local", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert not (outside / "marker").exists()
    assert out["inferred"]["metadata"] == "computed" and out["inferred"]["pip"] == ["six==1.16.0"]
    assert sources(out)["six==1.16.0"].startswith("metadata hook (prepare_metadata_for_build_wheel)")
    assert "leaked-private-requirement" not in proc.stdout + proc.stderr
    assert out["inferred"]["config_keys"]["trainer_package"] == {
        "name": "computed", "version": "1", "entry_points": {"console_scripts": ["fit = task:main"]}}
    assert out["run"]["exit_code"] == 0 and "SIX 1.16.0" in proc.stderr, proc.stderr[-2000:]
    assert tree(root) == before  # built from a copy: no egg-info left in the trainer


def test_setup_cfg_install_requires(project):
    root = project({"setup.cfg": "[metadata]\nname = cfgtrainer\n\n[options]\npackages = find:\ninstall_requires =\n"
                                 "    xgboost==2.1.1\n    numpy; python_version >= \"3.9\"\n",
                    "setup.py": "import setuptools\nsetuptools.setup()\n", "trainer/__init__.py": "", "trainer/task.py": ""})
    out = dry(root)
    assert sources(out) == {"xgboost==2.1.1": "setup.cfg:[options] install_requires[0]",
                            'numpy; python_version >= "3.9"': "setup.cfg:[options] install_requires[1]"}
    assert out["inferred"]["framework"] == "xgboost==2.1.1" and out["inferred"]["package"] == "cfgtrainer"


def test_imports_only_become_the_framework_and_packages(project):
    root = project({"train.py": "import os\nimport torch\nimport pandas as pd\nfrom google.cloud import storage\n"
                                "from sklearn.metrics import f1_score\nimport utils\nimport hypertune\n"
                                "try:\n    import wandb\nexcept ImportError:\n    wandb = None\n",
                    "utils.py": "import yaml\nimport numpy as np\n",
                    "tests/test_train.py": "import pytest\n", ".venv/lib/x.py": "import flask\n"})
    out = dry(root)
    inferred = out["inferred"]
    assert inferred["framework"] == "torch" and out["plan"]["framework"]["requirement"].startswith("torch==")
    assert sorted(inferred["pip"]) == ["google-cloud-storage", "numpy", "pandas", "pyyaml", "scikit-learn"]
    assert sources(out)["google-cloud-storage"] == "from google.cloud import storage (train.py:4)"
    assert sources(out)["pyyaml"] == "import yaml (utils.py:1)"
    assert any(n.startswith("torch is imported (import torch (train.py:2)) but not declared: it is the framework")
               for n in inferred["notes"])
    # Not added: the standard library, the trainer's own module, hypertune (installed), an optional import, tests.
    assert not {"wandb", "pytest", "flask", "utils", "os", "cloudml-hypertune"} & set(inferred["pip"])
    err = refused(root, "--strict")
    assert "--strict" in err and "pandas (import pandas (train.py:3))" in err and "google-cloud-storage" in err
    configured = dry(root, "--framework", "torch==2.5.1")  # the config's framework covers its import
    assert "torch" not in configured["inferred"]["pip"] and "scikit-learn" in configured["inferred"]["pip"]
    assert configured["plan"]["framework"]["requirement"] == "torch==2.5.1"


def test_an_import_with_no_known_distribution_is_said_and_strict_refuses_it(project):
    root = project({"train.py": "import numpy\nimport mysterious_lib\n", "requirements.txt": "numpy==2.1.3\n"})
    out = dry(root)
    assert out["inferred"]["config_keys"]["requirements"] == "requirements.txt" and out["inferred"]["pip"] == []
    assert any(n.startswith("mysterious_lib is imported (train.py:2)") and "import check stops there" in n
               for n in out["inferred"]["notes"])
    assert "mysterious_lib (train.py:2: no known distribution)" in refused(root, "--strict")


def test_a_framework_range_picks_the_newest_known_release_inside_it(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "",
                    "requirements.txt": "torch>=1.13,<2.1\nnumpy\n"})
    out = dry(root)
    from buildkit_py.catalog.matrix import load_matrix
    from buildkit_py.catalog.reading import version_key
    known = [r for r in load_matrix().framework("torch").releases() if version_key("1.13") <= version_key(r) < version_key("2.1")]
    assert out["inferred"]["framework"] == f"torch=={max(known, key=version_key)}"
    assert out["inferred"]["framework_from"] == "requirements.txt:1"
    root.joinpath("requirements.txt").write_text("xgboost<0.5\n")
    err = refused(root)
    assert "no known xgboost release inside 'xgboost<0.5' (requirements.txt:1)" in err and "3.4.1" in err
    root.joinpath("requirements.txt").write_text("torch>=2.5\n")
    err = refused(root, "--python", "3.8")
    assert "for Python 3.8" in err and "'torch>=2.5'" in err


def test_two_frameworks_are_not_refused_the_order_decides(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "",
                    "requirements.txt": "scikit-learn==1.5.2\ntensorflow==2.15.1\n"})
    out = dry(root)
    assert out["inferred"]["framework"] == "tensorflow==2.15.1" and out["inferred"]["framework_from"] == "requirements.txt:2"
    assert out["inferred"]["framework_reason"].startswith("tensorflow decides the base image (torch > tensorflow > jax")
    assert "scikit-learn stays a plain requirement" in out["inferred"]["framework_reason"]
    root.joinpath("requirements.txt").write_text("tensorflow==2.15.1\ntensorflow==2.14.1\n")
    err = refused(root)
    assert "'tensorflow==2.15.1' (requirements.txt:1)" in err and "'tensorflow==2.14.1' (requirements.txt:2)" in err


def test_a_script_in_a_folder_beside_a_dockerfile(project):
    root = project({"trainer/train.py": "import model\nimport numpy\n", "trainer/model.py": "",
                    "Dockerfile": "FROM python:3.11-slim\nCOPY trainer /trainer\nENTRYPOINT [\"python\", \"/trainer/train.py\"]\n",
                    "README.md": "python trainer/train.py\n"})
    out = dry(root)
    assert out["inferred"]["trainer"] == "script trainer/train.py (named by Dockerfile:3)"
    assert out["inferred"]["dockerfile"] == "Dockerfile"
    assert out["plan"]["entrypoint"][-1].endswith("/trainer/train.py")
    assert out["inferred"]["pip"] == ["numpy"]  # model is the script folder's own module
    assert any(n.startswith("Dockerfile in the trainer directory is not used") and "--dockerfile" in n
               for n in out["inferred"]["notes"])
    own = dry(root, "--dockerfile")
    assert own["inferred"]["config_keys"] == {} and "Dockerfile as it is" in own["stages"][-1]["detail"]
    assert own["image"] != out["image"]
    assert "--with-launcher" in refused(root, "--with-launcher")  # only with --dockerfile
    from buildkit_py.pipeline.render import render_with_launcher
    text = render_with_launcher(root.joinpath("Dockerfile").read_text(), "Dockerfile")
    assert text.endswith('ENTRYPOINT ["python3", "-m", "buildkit_launcher", "--", "python", "/trainer/train.py"]\nCMD []\n')
    assert hadolint(text) == ""
    root.joinpath("Dockerfile").write_text("FROM python:3.11-slim\nCMD python train.py\n")
    assert "CMD 'python train.py' is not in exec form" in refused(root, "--dockerfile", "--with-launcher")
    root.joinpath("Dockerfile").write_text("FROM python:3.11-slim\nENTRYPOINT [\"x\"]\nFROM python:3.11-slim\nRUN true\n")
    assert "no ENTRYPOINT or CMD" in refused(root, "--dockerfile", "--with-launcher")
    root.joinpath("Dockerfile").unlink()
    assert "no Dockerfile" in refused(root, "--dockerfile")
    assert "--dockerfile" in refused(root, "--dockerfile", "--mode", "package")


def test_requirements_that_install_the_trainer_itself(project):
    root = project({"setup.py": SETUP_PY.replace("REQUIRED_PACKAGES = [", "REQUIRED_PACKAGES = ['scikit-learn==1.5.2', "),
                    "trainer/__init__.py": "", "trainer/task.py": "import sklearn\n",
                    "requirements.txt": "-e .\ngoogle-cloud-storage>=2  # for the data\n"})
    out = dry(root)
    inferred = out["inferred"]
    assert "requirements" not in inferred["config_keys"]  # the file itself is not installed
    assert inferred["pip"] == ["google-cloud-storage>=2", "scikit-learn==1.5.2", *REQUIRED_PACKAGES_PIP]
    assert "trainer" not in inferred["pip"] and inferred["framework"].startswith("tensorflow==")
    assert any("installs the trainer itself (requirements.txt:1)" in n for n in inferred["notes"])
    root.joinpath("requirements.txt").write_text("--index-url https://mirror.example/simple\n.\n")
    err = refused(root)
    assert "'--index-url https://mirror.example/simple'" in err and "requirements.txt:1" in err and "pip_index_url" in err
    root.joinpath("requirements.txt").write_text("-e .[gpu]\n")
    assert "extras" in refused(root)
    root.joinpath("setup.py").unlink()
    root.joinpath("requirements.txt").write_text("-e .\n")
    assert "no setup.py" in refused(root)


def test_invalid_requirement_lines_exit_2_naming_the_line(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "",
                    "requirements.txt": "numpy\n\n# the framework\ntensorflow>=1.15.*,<2\n"})
    err = refused(root)
    assert "requirements.txt:4" in err and "'tensorflow>=1.15.*,<2'" in err and "not a valid requirement" in err
    for text, fragment in (("--trusted-host pypi.example\nsix\n", "--trusted-host"), ("-c constraints.txt\n", "constraints"),
                           ("-f ./wheels\nsix\n", "find-links"), ("../lib\n", "path on this machine"),
                           ("--use-feature=fast-deps\n", "'--use-feature'")):
        root.joinpath("requirements.txt").write_text(text)
        assert fragment in refused(root), text
    root.joinpath("requirements.txt").write_text("--index-url https://mirror.example/simple\n-r base.txt\n")
    root.joinpath("base.txt").write_text("six==1.16.0\n")
    assert "'--index-url https://mirror.example/simple'" in refused(root)  # an included file goes through pip:
    root.joinpath("requirements.txt").write_text("-r base.txt\n")
    out = dry(root)
    assert out["inferred"]["pip"] == ["six==1.16.0"] and sources(out) == {"six==1.16.0": "base.txt:1"}
    root.joinpath("base.txt").write_text("six==1.16.0 --hash=sha256:" + "a" * 64 + "\n")  # never folded without it
    assert "base.txt:1: the line asks for hash checking" in refused(root)


CONDA_ENVIRONMENT = """name: train
channels: [conda-forge, defaults]
dependencies:
  - python=3.10
  - numpy=1.26
  - conda-forge::scikit-learn>=1.3
  - cudatoolkit=11.8
  - libgcc-ng
  - librosa 0.10.1
  - pip
  - pip:
    - comet-ml
    - -r extra.txt
"""


def test_a_conda_environment_file_is_installed_from_pypi_without_conda(project):
    """environment.yml, where no requirements file is (a `conda run` trainer): its conda packages (conda's version
    forms read as pip's) and its pip section become the image's packages, what only conda has is left out and said,
    and its Python is the one asked for. Beside a requirements file it is only said; a file that is no conda
    environment exits 2 naming the entry."""
    root = project({"train.py": "import numpy\nimport sklearn\nimport librosa\nimport comet_ml\n",
                    "environment.yml": CONDA_ENVIRONMENT,
                    "Dockerfile": 'FROM continuumio/miniconda3\nCOPY . /app\nWORKDIR /app\nRUN conda env create -f '
                                  'environment.yml\nENTRYPOINT ["conda", "run", "-n", "train", "python", "train.py"]\n'})
    out = dry(root)
    inferred = out["inferred"]
    assert inferred["trainer"].startswith("script train.py")
    assert {s: sources(out).get(s) for s in ("numpy==1.26.*", "scikit-learn>=1.3", "librosa==0.10.1", "comet-ml")} == {
        "numpy==1.26.*": "environment.yml:dependencies[1]", "scikit-learn>=1.3": "environment.yml:dependencies[2]",
        "librosa==0.10.1": "environment.yml:dependencies[5]", "comet-ml": "environment.yml:dependencies[7].pip[0]"}
    assert not any(s.startswith(("cudatoolkit", "libgcc", "pip", "python")) for s in sources(out))
    notes = " | ".join(inferred["notes"])
    assert "conda's own packages are left out: cudatoolkit=11.8, libgcc-ng, pip" in notes, notes
    assert "'-r extra.txt' is left out" in notes and "Python 3.10: what environment.yml:dependencies[0] asks for" in notes
    assert out["plan"]["python"]["version"] == "3.10"
    assert not any("no declared requirement" in n for n in inferred["notes"]), notes  # comet_ml: comet-ml, declared
    root.joinpath("requirements.txt").write_text("numpy\n")
    beside = dry(root)["inferred"]
    assert "environment.yml is here too: the image installs requirements.txt" in beside["notes"]
    assert "comet-ml" not in beside["pip"]
    root.joinpath("requirements.txt").unlink()
    for text, field in (("dependencies: numpy\n", "dependencies"), ("dependencies:\n  - {conda: [x]}\n", "dependencies[0]"),
                        ("dependencies:\n  - '!!bad'\n", "dependencies[0]"), ("dependencies:\n  - true\n", "dependencies[0]"),
                        ("dependencies:\n  - pip: [{x: 1}]\n", "dependencies[0].pip[0]")):
        root.joinpath("environment.yml").write_text(text)
        err = refused(root)
        assert field in err and "environment.yml" in err, err


def test_a_release_whose_gpu_builds_need_a_deleted_cuda_builds_for_cpu_unless_a_gpu_is_asked_for(project):
    """xgboost==1.2.0's GPU wheels are CUDA 10.0 builds, whose nvidia/cuda tags NVIDIA deleted: with nothing asking
    for a GPU the image is built for CPU, said; where the config asks for one, the plan's refusal names what builds."""
    root = project({"trainer/__init__.py": "", "trainer/task.py": "import xgboost\n", "requirements.txt": "xgboost==1.2.0\n"})
    out = dry(root)
    inferred = out["inferred"]
    assert inferred["config_keys"]["gpu"] is False and out["plan"]["gpu"] is False
    assert any("has GPU builds for CUDA 10.0 alone" in n and "built for CPU" in n for n in inferred["notes"])
    root.joinpath("buildkit.yaml").write_text("gpu: true\n")
    assert "NVIDIA deleted from Docker Hub" in refused(root)


def test_an_import_the_table_does_not_know_is_declared_by_a_distribution_of_its_own_name(project):
    """`import nlp` beside `nlp==0.4.0`, `import pyvirtualdisplay` beside `PyVirtualDisplay`: nearly every distribution
    names its module, so no note says nothing provides them; an import nothing declares still gets one. And a setup.py
    below the root (src/setup.py beside the package) builds the package: its imports are not the trainer's."""
    root = project({"trainer/__init__.py": "", "trainer/task.py": "import nlp\nimport pyvirtualdisplay\nimport zz_nowhere\n",
                    "requirements.txt": "nlp==0.4.0\nPyVirtualDisplay==0.2.5\n",
                    "src/setup.py": "import setuptools\nsetuptools.setup(name='x')\n"})
    inferred = dry(root)["inferred"]
    said = [n for n in inferred["notes"] if "no declared requirement or known distribution provides it" in n]
    assert [n.split(" is imported")[0] for n in said] == ["zz_nowhere"], said
    assert "setuptools" not in inferred["pip"], inferred["pip"]


def test_a_requirements_file_pip_refuses_gives_way_to_the_package_that_declares_its_dependencies(project):
    """AI Platform installed a package through its setup.py; a requirements.txt beside it that pip refuses outright
    (a typo'd operator, two versions in one) was never what the service installed: the image installs what the
    package declares, said. Without such a package, or where the config names the file, the line ends the command."""
    root = project({"setup.py": "from setuptools import setup\nsetup(name='psp', version='1.0', packages=['psp'],\n"
                                "      install_requires=['six==1.16.0', 'numpy==1.26.4'])\n",
                    "psp/__init__.py": "", "psp/task.py": "import six\nimport numpy\n",
                    "requirements.txt": "numpy>=1.16.4/1.16.6\nsix\n"})
    out = dry(root)
    inferred = out["inferred"]
    assert "requirements" not in inferred["config_keys"] and inferred["pip"] == ["six==1.16.0", "numpy==1.26.4"]
    note = next(n for n in inferred["notes"] if "is left out" in n)
    assert note.startswith("requirements.txt:1: 'numpy>=1.16.4/1.16.6' is not a valid requirement")  # not a path
    assert "setup.py declares" in note
    root.joinpath("requirements.txt").write_text("six\nxgboost=0.72.1\n")
    assert any(n.startswith("requirements.txt:2: 'xgboost=0.72.1'") and "write 'xgboost==0.72.1'" in n
               for n in dry(root)["inferred"]["notes"])
    root.joinpath("buildkit.yaml").write_text("requirements: requirements.txt\n")
    err = refused(root)  # named: the file is what the image must install
    assert "requirements.txt:2" in err and "not a valid requirement" in err
    root.joinpath("buildkit.yaml").unlink()
    root.joinpath("setup.py").unlink()
    err = refused(root)  # nothing else says what the trainer needs
    assert "requirements.txt:2" in err and "'xgboost=0.72.1' is not a valid requirement" in err


def test_a_real_trainer_layout_builds_and_its_image_imports_what_the_trainer_imports(testenv, project, tmp_path):
    """setup.py with REQUIRED_PACKAGES, a requirements file that installs the trainer itself, a script in a folder
    beside its own Dockerfile, imports nobody declared: the image runs the script, whose imports all succeed."""
    root = project({
        "setup.py": "from setuptools import setup\nREQUIRED_PACKAGES = ['six==1.16.0']\n"
                    "setup(name='real-trainer', version='0.1', install_requires=REQUIRED_PACKAGES)\n",
        "requirements.txt": "-e .\n",
        "Dockerfile": "FROM python:3.11-slim-bookworm\nCOPY trainer/model.py /app/\nENTRYPOINT [\"python3\", \"-c\", "
                      "\"import sys; sys.path[:0] = ['/app']; import model; print('OWN DOCKERFILE', model.NAME)\"]\n",
        "trainer/model.py": "NAME = 'model'\n",
        "trainer/train.py": "import six\nimport yaml\nfrom dateutil import parser\nimport model\n"
                            "print('IMPORTED', six.__version__, yaml.__version__, parser.parse('2026-11-24').year, model.NAME)\n",
    })
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_cli("autopackage", str(root), "--image", f"{registry}/autopkg-real/trainer", "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["inferred"]["trainer"] == "script trainer/train.py"
    assert out["inferred"]["pip"] == ["six==1.16.0", "python-dateutil", "pyyaml"]
    assert out["run"]["exit_code"] == 0
    assert "IMPORTED 1.16.0" in proc.stderr and "2026 model" in proc.stderr
    own = run_cli("autopackage", str(root), "--image", f"{registry}/autopkg-real/own", "--dockerfile", "--json", env=env)
    assert own.returncode == 0, own.stderr[-3000:]
    assert json.loads(own.stdout)["run"]["exit_code"] == 0 and "OWN DOCKERFILE model" in own.stderr
    # With the launcher: it runs first, then hands off to the Dockerfile's own command.
    launched = run_cli("autopackage", str(root), "--image", f"{registry}/autopkg-real/own", "--dockerfile",
                       "--with-launcher", "--json", env=env)
    assert launched.returncode == 0, launched.stderr[-3000:]
    out = json.loads(launched.stdout)
    assert out["run"]["exit_code"] == 0 and "OWN DOCKERFILE model" in launched.stderr
    inspect = subprocess.run([testenv["BUILDKIT_DOCKER"], "image", "inspect", out["image"]], capture_output=True, text=True,
                             env={"DOCKER_HOST": testenv["DOCKER_HOST"]}, check=True)
    assert json.loads(inspect.stdout)[0]["Config"]["Entrypoint"][:4] == ["python3", "-m", "buildkit_launcher", "--"]


ESTIMATOR_TASK = "import tensorflow as tf\n\nmodel = tf.estimator.LinearClassifier(feature_columns=[])\n"


def test_code_using_a_removed_api_gets_the_newest_release_that_still_has_it(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": ESTIMATOR_TASK})
    inferred = dry(root)["inferred"]
    assert inferred["framework"] == "tensorflow==2.15.1", inferred  # tf.estimator left TensorFlow in 2.16
    assert any("tensorflow.estimator" in n and "keeps it" in n for n in inferred["notes"]), inferred["notes"]
    (root / "requirements.txt").write_text("tensorflow>=2.10\n")
    assert dry(root)["inferred"]["framework"] == "tensorflow==2.15.1"  # the range and the limit together
    # An exact pin, or a range the limit would empty, is kept, and the note names the call that breaks.
    for declared, pinned in (("tensorflow==2.21.0\n", "tensorflow==2.21.0"), ("tensorflow>=2.16\n", "tensorflow==2.21.0")):
        (root / "requirements.txt").write_text(declared)
        inferred = dry(root)["inferred"]
        assert inferred["framework"] == pinned, inferred
        assert any("trainer/task.py:3 uses tensorflow.estimator" in n and "breaks" in n for n in inferred["notes"]), inferred


def test_a_legacy_runtime_gives_an_imported_framework_its_release(project):
    legacy = REPO / "tests" / "data" / "legacy" / "config_runtime_2_11.yaml"
    root = project({"trainer/__init__.py": "", "trainer/task.py": "import tensorflow as tf\n"})
    out = dry(root, "--target", "local", "--from-aiplatform", str(legacy))
    assert out["inferred"]["framework"] == "tensorflow==2.11.0", out["inferred"]  # not the newest: what 2.11 ran
    assert out["plan"]["framework"]["requirement"] == "tensorflow==2.11.0"
    assert out["plan"]["python"]["version"] == "3.8", out["plan"]["python"]  # its 3.7, raised to the launcher's floor
    (root / "requirements.txt").write_text("tensorflow==2.9.3\n")  # the trainer's own pin wins over the runtime
    assert dry(root, "--target", "local", "--from-aiplatform", str(legacy))["plan"]["framework"]["requirement"] == \
        "tensorflow==2.9.3"


def _counted(monkeypatch, module, name: str) -> list[tuple]:
    """Count the calls of module.name wherever buildkit-py holds it (`from .x import name` copies the reference):
    the arguments of each call, appended to the list returned."""
    original = getattr(module, name)
    calls: list[tuple] = []

    def counting(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    for mod in [m for n, m in list(sys.modules.items()) if n == "buildkit_py" or n.startswith("buildkit_py.")]:
        if getattr(mod, name, None) is original:
            monkeypatch.setattr(mod, name, counting)
    return calls


def test_autopackage_loads_plans_renders_and_parses_each_reference_once(testenv, trainer_copy, tmp_path, monkeypatch,
                                                                         capsys):
    """Every stage runs once per command (issue 20): autopackage passes what it resolved forward instead of
    calling back into the public API, which would load the config, plan and parse the image again."""
    from buildkit_py import api, cli, config
    from buildkit_py.oci import refs
    from buildkit_py.pipeline import render

    plan = importlib.import_module("buildkit_py.pipeline.plan")  # bk.plan is the API's call of that name

    for name in ("buildkit_py.jobs.vertex", "buildkit_py.jobs.submit", "buildkit_py.jobs.preflight",
                 "buildkit_py.jobs.local", "buildkit_py.inference", "buildkit_py.pipeline.packaging", "buildkit_py.oci.client",
                 "buildkit_py.builders.buildkit_cli", "buildkit_py.builders.engine_images"):
        importlib.import_module(name)  # loaded now, so that their references to the counted functions are counted too
    loads = _counted(monkeypatch, api, "load")
    configs = _counted(monkeypatch, config, "load_config")
    plans = _counted(monkeypatch, plan, "make_plan")
    renders = _counted(monkeypatch, render, "render_dockerfile")
    parsed = _counted(monkeypatch, refs, "parse_ref")
    server = FakeVertex()
    key, server.public_key = new_key_file(tmp_path, f"{server.url}/token")
    for name, value in {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"],
                        "GOOGLE_APPLICATION_CREDENTIALS": str(key), ENDPOINT_ENV: server.url,
                        LOGGING_ENDPOINT_ENV: server.url}.items():
        monkeypatch.setenv(name, value)
    with server:
        code = cli.main(["autopackage", str(trainer_copy), "--image", f"{testenv['BUILDKIT_TEST_REGISTRY']}/autopkg-once/quick",
                         "--project", "fake-project", "--target", "loopback", "--wait", "--poll", "0.01", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    assert json.loads(out.out)["submitted"]["state"] == "JOB_STATE_SUCCEEDED" and len(server.bodies) == 1
    counts = {"load": len(loads), "load_config": len(configs), "make_plan": len(plans), "render_dockerfile": len(renders)}
    assert counts == {"load": 1, "load_config": 1, "make_plan": 1, "render_dockerfile": 1}, counts
    # References travel as ImageRef from the config on: the image repository is parsed once, where the config is read;
    # the content tag (text in the public JobOptions.image) where the job's flags are checked and where the job's pull
    # rule reads what was written (a reference naming no host means Docker Hub); the tag pinned by digest never.
    texts = [str(a[0]) for a in parsed]
    repository = f"{testenv['BUILDKIT_TEST_REGISTRY']}/autopkg-once/quick"
    tag = json.loads(out.out)["image"]
    assert sorted(texts) == sorted([repository, tag, tag]), texts


def test_pypi_index_line_beside_install_self_is_dropped_with_a_note(project):
    """AI Platform's samples carry `--index-url https://pypi.python.org/simple/` above `-e .`: PyPI itself, the default."""
    root = project({"setup.py": "from setuptools import setup, find_packages\n"
                                "REQUIRED_PACKAGES = ['scikit-learn==1.5.2', 'pandas']\n"
                                "setup(name='trainer', version='0.1', packages=find_packages(),\n"
                                "      install_requires=REQUIRED_PACKAGES)\n",
                    "trainer/__init__.py": "", "trainer/task.py": "import sklearn\nimport pandas as pd\n",
                    "requirements.txt": "# do not repeat setup.py\n--index-url https://pypi.python.org/simple/\n\n-e .\n"})
    inferred = dry(root)["inferred"]
    assert inferred["pip"] == ["scikit-learn==1.5.2", "pandas"] and inferred["framework"] == "scikit-learn==1.5.2"
    assert any(n.startswith("requirements.txt:2: --index-url https://pypi.python.org/simple/ is PyPI's own index")
               for n in inferred["notes"])
    root.joinpath("requirements.txt").write_text("-i https://pypi.org/simple\n--extra-index-url https://mirror.example/simple\n.\n")
    assert "'--extra-index-url https://mirror.example/simple'" in refused(root)  # another index is still refused by name


def test_module_named_by_a_submit_script_or_the_one_main_guard(project):
    """trainer/ with no task.py: the module its submit script passes to --module-name, else the one with a main guard."""
    root = project({"setup.py": "from setuptools import setup, find_packages\n"
                                "setup(name='flow', version='0.1', packages=find_packages(), install_requires=['pandas'])\n",
                    "trainer/__init__.py": "", "trainer/flow.py": "import pandas\n",
                    "trainer/util.py": "if __name__ == '__main__':\n    print(1)\n",
                    "scripts/submit.sh": "gcloud ai-platform jobs submit training $JOB \\\n  --module-name=trainer.flow \\\n"
                                         "  --package-path=trainer/\n"})
    inferred = dry(root)["inferred"]
    assert inferred["trainer"] == "module trainer.flow (named by scripts/submit.sh:2)"
    assert inferred["config_keys"]["trainer"] == {"module": "trainer.flow"}
    root.joinpath("scripts/submit.sh").unlink()
    assert dry(root)["inferred"]["config_keys"]["trainer"] == {"module": "trainer.util"}  # the one main guard
    root.joinpath("trainer/flow.py").write_text("import pandas\nif __name__ == \"__main__\":\n    pass\n")
    err = refused(root)
    assert "no trainer found" in err and "found several: trainer.flow, trainer.util" in err
    root.joinpath("run.sh").write_text("gcloud ai custom-jobs local-run --python-module trainer.nothere\n")
    assert "no trainer found" in refused(root)  # a module that is no file here is not taken
    root.joinpath("run.sh").write_bytes(b"gcloud ai-platform jobs submit training j --module-name=trainer." + b"a" * 70000
                                        + b"\ngcloud ai-platform jobs submit training j --module-name \xff\n"
                                        b"gcloud ai custom-jobs local-run --python-module=trainer.flow\n")
    assert dry(root)["inferred"]["trainer"] == "module trainer.flow (named by run.sh:3)"


def test_module_or_script_flag_picks_the_trainer_the_refusal_names(project):
    """Where the directory names several trainers (or none), the refusal says to pass --module or --script, and
    autopackage takes them: the trainer is the flag's, nothing is inferred for it."""
    root = project({"trainer/__init__.py": "", "trainer/a.py": "if __name__ == '__main__':\n    pass\n",
                    "trainer/b.py": "if __name__ == '__main__':\n    pass\n", "tools/train_b.py": "print(2)\n"})
    assert "pass --module or --script" in refused(root)
    assert dry(root, "--module", "trainer.b")["plan"]["entrypoint"][-3:] == ["python", "-m", "trainer.b"]
    out = dry(root, "--script", "tools/train_b.py")
    assert out["plan"]["entrypoint"][-1] == "/app/tools/train_b.py" and "trainer" not in out["inferred"]["config_keys"]
    assert "--script: give --module or --script, not both" in refused(root, "--module", "trainer.a", "--script", "x.py")
    assert "--module" in refused(root, "--module", "no such")  # the config key's own check, named by the flag


def test_a_dry_run_with_write_config_says_what_it_would_write_and_writes_nothing(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "print(1)\n"})
    steps = dry(root, "--write-config")["next"]
    assert steps[0] == f"write {root / 'buildkit.yaml'} (what was inferred)", steps
    assert not (root / "buildkit.yaml").exists()
    (root / "buildkit.yaml").write_text("framework: none\n")
    assert "exists: autopackage writes a config only where there is none" in refused(root, "--write-config")


def test_python2_code_is_said_not_crashed_on(project):
    root = project({"trainer/__init__.py": "", "trainer/model.py": "import numpy\n",
                    "trainer/task.py": "import model\nfrom metadata import COLUMNS\nimport tensorflow as tf\n"
                                       "import cPickle as pickle\nfrom official.nlp import optimization\n",
                    "trainer/metadata.py": "COLUMNS = []\n", "trainer/old.py": "print 'hello'\n"})
    inferred = dry(root)["inferred"]
    notes = " ".join(inferred["notes"])
    assert "trainer/old.py (line 1" in notes and "do not parse as Python 3" in notes
    assert "2 import(s) of a module beside the importing file" in notes and "trainer/task.py:1: `import model`" in notes
    assert "from . import NAME" in notes and "model is imported" not in notes  # not taken for a missing distribution
    assert inferred["framework"].startswith("tensorflow") and "numpy" in inferred["pip"]
    assert "trainer/task.py:4: `import cPickle`: Python 3 has pickle" in notes and "cPickle is imported" not in notes
    assert "tf-models-official" in inferred["pip"]  # `official` is TensorFlow Model Garden's distribution
    root.joinpath("setup.py").write_text("from setuptools import setup\nprint 'building'\nsetup(name='t')\n")
    err = refused(root)
    assert "setup.py does not parse as Python 3" in err and "(line 2)" in err and "requirements.txt" in err


def test_an_older_tensorflow_1_pin_builds_nvidias_1_15_on_a_gpu_and_its_own_wheel_on_python_3_7(project):
    """AI Platform's runtime 1.13 trainers pin tensorflow==1.13.1 in setup.py (issue 28): a GPU image gets NVIDIA's
    TensorFlow 1.15 build, saying that 1.15 is the last 1.x; a CPU image the official 1.13.1 wheel on Python 3.7."""
    root = project({"setup.py": "from setuptools import setup, find_packages\n"
                                "REQUIRED_PACKAGES = ['tensorflow==1.13.1']\n"
                                "setup(name='trainer', version='0.1', packages=find_packages(),\n"
                                "      install_requires=REQUIRED_PACKAGES)\n",
                    "trainer/__init__.py": "", "trainer/task.py": "import tensorflow as tf\n"})
    gpu = dry(root)["plan"]
    assert gpu["framework"]["requirement"] == "nvidia-tensorflow==1.15.5+nv23.3" and gpu["python"]["version"] == "3.8"
    assert any("tensorflow 1.15 is the last 1.x series, and code written for 1.13 runs on it" in n for n in gpu["notes"])
    cpu = dry(root, "--no-gpu")["plan"]
    assert cpu["framework"]["requirement"] == "tensorflow==1.13.1" and cpu["base_image"] == "python:3.7-slim-bookworm"
    proc = run_cli("versions", "tensorflow")
    assert proc.returncode == 0 and "1.10     releases 1.10.0, 1.10.1; CUDA 9.0" in proc.stdout
    (root / "setup.py").write_text((root / "setup.py").read_text().replace("1.13.1", "1.10.1"))
    # Wheels for Python 3.6 at most: on CPU as on a GPU, the line's last release (1.15) on the Python it has.
    out = dry(root, "--no-gpu")
    assert out["plan"]["framework"]["requirement"] == "tensorflow==1.15.5" and out["plan"]["python"]["version"] == "3.7"
    assert any("tensorflow==1.10.1: tensorflow==1.15.5 (Python 3.7) is installed instead" in n
               for n in out["plan"]["notes"]), out["plan"]["notes"]


def test_dockerfiles_in_folders_or_named_x_dockerfile_are_said(project):
    """Vertex AI samples keep trainer/Dockerfile (built with -f) or cpu.Dockerfile/gpu.Dockerfile beside the code."""
    root = project({"trainer/__init__.py": "", "trainer/task.py": "import torch\n",
                    "trainer/Dockerfile": "FROM pytorch/pytorch\nCOPY . /app\n",
                    "docker/gpu.Dockerfile": "FROM tensorflow/tensorflow:latest-gpu\n", "requirements.txt": "torch==2.5.1\n"})
    inferred = dry(root)["inferred"]
    assert inferred["dockerfile"] is None
    assert any(n.startswith("2 other Dockerfile(s) here are not used: docker/gpu.Dockerfile, trainer/Dockerfile")
               for n in inferred["notes"])
    for path in ("trainer/task.py", "trainer/__init__.py", "docker/gpu.Dockerfile", "trainer/Dockerfile", "requirements.txt"):
        root.joinpath(path).unlink()
    root.joinpath("Dockerfile").write_text("FROM python:3.12-slim\n")
    err = refused(root)  # only a Dockerfile and no trainer: the refusal offers to build it
    assert "no trainer found" in err and "build its Dockerfile as it is with --dockerfile" in err
    root.joinpath("Dockerfile").unlink()
    root.joinpath("train.ipynb").write_text('{"cells": [], "nbformat": 4}\n')
    err = refused(root)
    assert "a notebook is not a trainer (train.ipynb)" in err and "nbconvert --to script" in err


def test_tensorflow_gpu_is_the_tensorflow_framework_not_a_second_unpinned_one(project):
    """Legacy trainers pin tensorflow-gpu: it is the framework (and its release), not `import tensorflow` undeclared."""
    root = project({"trainer/__init__.py": "", "trainer/task.py": "import tensorflow as tf\n",
                    "requirements.txt": "tensorflow-gpu==2.8.0\npandas\n"})
    inferred = dry(root)["inferred"]
    assert inferred["framework"] == "tensorflow==2.8.0" and inferred["framework_from"] == "requirements.txt:1"
    assert not any("tensorflow is imported" in n for n in inferred["notes"])
    assert any(n.startswith("requirements.txt:1: tensorflow-gpu is another distribution name of tensorflow")
               and "write tensorflow==2.8.0 instead" in n for n in inferred["notes"])
    root.joinpath("requirements.txt").write_text("tensorflow-gpu==1.15.5\n")
    out = dry(root)  # a GPU image: NVIDIA's 1.15 build stands for tensorflow-gpu, whose line is left out
    assert out["plan"]["framework"]["requirement"] == "nvidia-tensorflow==1.15.5+nv23.3"
    assert "tensorflow-gpu" in out["plan"]["framework"]["replaces"]
    assert any("a GPU image installs nvidia-tensorflow in their place and leaves the line out" in n
               for n in out["inferred"]["notes"])


def test_a_removed_api_of_a_framework_beside_the_chosen_one_is_named(project):
    """AI Platform's xgboost sample: tensorflow decides the base, scikit-learn==1.0.2 beside it, and the code still
    imports sklearn.externals.joblib (gone since 0.23)."""
    root = project({"setup.py": "from setuptools import setup, find_packages\n"
                                "REQUIRED_PACKAGES = ['tensorflow==2.8.0', 'scikit-learn==1.0.2', 'xgboost==1.5.2']\n"
                                "setup(name='trainer', version='0.1', packages=find_packages(),\n"
                                "      install_requires=REQUIRED_PACKAGES)\n",
                    "trainer/__init__.py": "",
                    "trainer/task.py": "import tensorflow as tf\nfrom xgboost import XGBClassifier\n"
                                       "from sklearn.externals import joblib\n"})
    inferred = dry(root)["inferred"]
    assert inferred["framework"] == "tensorflow==2.8.0"
    assert any(n.startswith("trainer/task.py:3 uses sklearn.externals.joblib, which scikit-learn removed in 0.23")
               for n in inferred["notes"])
    root.joinpath("trainer/task.py").write_text("import tensorflow as tf\nimport joblib\n")
    assert not any("sklearn.externals" in n for n in dry(root)["inferred"]["notes"])


def test_the_code_is_read_once_for_imports_and_removed_apis_as_the_image_gets_it(project, monkeypatch):
    """One pass over the files the image gets, tests left out: code the build context ignores (.dockerignore, a
    virtual environment) or tests never narrow the framework; each module is read once; MAX_SCANNED stops the pass."""
    from buildkit_py.inference import imported  # the code pass: its reads and its MAX_SCANNED
    root = project({"trainer/__init__.py": "", "trainer/task.py": "import tensorflow as tf\nfrom trainer import model\n",
                    "trainer/model.py": "import tensorflow as tf\ntf.estimator.Estimator\n",
                    "tests/test_model.py": "import tensorflow as tf\ntf.contrib.layers\n",
                    "old/legacy.py": "import tensorflow as tf\ntf.contrib.slim\nimport lightgbm\n",
                    ".venv/lib/x.py": "import tensorflow.contrib\n", ".dockerignore": "old/\n"})
    reads: list[str] = []
    original = imported.read_text

    def counting(path, what):
        reads.append(Path(path).relative_to(root).as_posix())
        return original(path, what)

    monkeypatch.setattr(imported, "read_text", counting)
    inferred = infer(root, None, {})
    assert inferred.framework == "tensorflow==2.15.1", inferred  # trainer/model.py's estimator: not tests/ or old/
    assert not any("contrib" in n or "lightgbm" in n for n in inferred.notes), inferred.notes
    code = [r for r in reads if r.endswith(".py")]
    assert sorted(code) == ["trainer/__init__.py", "trainer/model.py", "trainer/task.py"], reads
    monkeypatch.setattr(imported, "MAX_SCANNED", 1)
    reads.clear()
    infer(root, None, {})
    assert len([r for r in reads if r.endswith(".py")]) == 1, reads


def test_a_fifo_named_like_a_module_does_not_hang_the_inference(project):
    import os

    root = project({"trainer/__init__.py": "", "trainer/run.py": "import numpy\nif __name__ == '__main__':\n    pass\n"})
    os.mkfifo(root / "trainer" / "pipe.py")
    os.mkfifo(root / "submit.sh")
    import threading

    found = []
    worker = threading.Thread(target=lambda: found.append(infer(root, None, {})), daemon=True)
    worker.start()
    worker.join(60)  # a FIFO opened for reading blocks until a writer comes: never
    assert found and found[0].trainer.startswith("module trainer.run")


def test_keras_alone_gets_its_default_backend_as_the_framework(project):
    """Keras 3 installs no backend: a trainer importing only keras would die at `import keras` without tensorflow."""
    root = project({"train.py": "import keras\nfrom keras import layers\n"})
    inferred = dry(root)["inferred"]
    assert inferred["framework"] == "tensorflow" and "keras" in inferred["pip"]
    assert any("keras runs on a backend it does not install" in n for n in inferred["notes"])
    root.joinpath("requirements.txt").write_text("keras\ntorch==2.5.1\n")  # a backend is declared: it stays
    assert dry(root)["inferred"]["framework"] == "torch==2.5.1"
    root.joinpath("train.py").write_text("from transformers import Trainer\n")
    root.joinpath("requirements.txt").write_text("transformers\ndatasets\n")  # a declared library, no framework
    inferred = dry(root)["inferred"]
    assert inferred["framework"] == "torch" and any("transformers runs on a backend" in n for n in inferred["notes"])


def test_a_task_module_in_a_nested_package(project):
    root = project({"setup.py": "from setuptools import setup, find_packages\n"
                                "setup(name='ltg', version='0.1', packages=find_packages(), install_requires=['torch==2.5.1'])\n",
                    "ltgpred/__init__.py": "", "ltgpred/trainer/__init__.py": "", "ltgpred/trainer/task.py": "import torch\n",
                    "ltgpred/preproc/__init__.py": "", "ltgpred/preproc/make.py": "import numpy\n"})
    inferred = dry(root)["inferred"]
    assert inferred["config_keys"]["trainer"] == {"module": "ltgpred.trainer.task"}
    assert inferred["framework"] == "torch==2.5.1"


def test_an_import_through_the_trainer_directorys_own_name_is_said(tmp_path):
    root = tmp_path / "babyweight"
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "model.py").write_text("import tensorflow as tf\n")
    (root / "trainer" / "task.py").write_text("from babyweight.trainer import model\n")
    inferred = dry(root)["inferred"]
    notes = " ".join(inferred["notes"])
    assert "1 import(s) name the trainer directory itself (babyweight): trainer/task.py:1" in notes
    assert "babyweight is imported" not in notes and inferred["framework"].startswith("tensorflow")


def test_an_entry_point_that_is_python_2_exits_2_other_python_2_files_are_noted(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "print 'training'\n", "trainer/util.py": "x = 1\n"})
    proc = run_cli("autopackage", str(root), "--dry-run", "--target", "local")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "trainer/task.py" in proc.stderr and "entry point" in proc.stderr and "line 1" in proc.stderr, proc.stderr
    (root / "trainer" / "task.py").write_text("print('training')\n")
    (root / "trainer" / "util.py").write_text("print 'helper'\n")  # may never be imported: said, not refused
    inferred = dry(root, "--target", "local")["inferred"]
    assert any("trainer/util.py (line 1" in n for n in inferred["notes"]), inferred["notes"]


def test_a_tensorflow_1_15_trainer_with_tf_contrib_builds_nvidias_1_15_and_no_removed_api_is_said(project):
    """A runtime-1.15 trainer (tf.contrib, tf.estimator): both are in 1.15, so nothing is said of removed APIs; on a
    GPU the image installs NVIDIA's 1.15 build on Python 3.8, on a CPU the official wheel on Python 3.7."""
    root = project({"trainer/__init__.py": "", "requirements.txt": "tensorflow==1.15.5\n",
                    "trainer/task.py": "import tensorflow as tf\nfrom tensorflow.contrib import layers\n\n"
                                       "def main():\n    tf.estimator.RunConfig()\n\n"
                                       "if __name__ == '__main__':\n    main()\n"})
    out = dry(root)
    assert out["inferred"]["framework"] == "tensorflow==1.15.5" and out["inferred"]["framework_from"] == "requirements.txt:1"
    assert not any("removed in" in n for n in out["inferred"]["notes"]), out["inferred"]["notes"]
    assert out["plan"]["framework"]["requirement"] == "nvidia-tensorflow==1.15.5+nv23.3"
    assert (out["plan"]["python"]["version"], out["plan"]["cuda"]) == ("3.8", "12.1.1")
    cpu = dry(root, "--no-gpu")["plan"]
    assert (cpu["framework"]["requirement"], cpu["python"]["version"]) == ("tensorflow==1.15.5", "3.7")
    assert "protobuf<3.20" in cpu["pip"]


CONSOLE_SCRIPTS = {
    "pyproject.toml": '[project]\nname = "mypkg"\nversion = "0.1.0"\ndependencies = []\n[project.scripts]\n'
                      'mypkg-train = "mypkg.train:main"\nmypkg-eval = "mypkg.evaluate:run"\n',
    "mypkg/__init__.py": "",
    "mypkg/train.py": "import sys\n\ndef main():\n    print('TRAINED', sys.argv[1:])\n    return 3\n",
    "mypkg/evaluate.py": "def run():\n    pass\n",
}


def test_a_console_script_is_the_trainer_called_as_pip_would_call_it(testenv, project, tmp_path):
    """[project.scripts] mypkg-train = "mypkg.train:main", with no __main__ block and no known layout (issue 28): the
    image calls main() and exits with what it returns; the other script is named, not used."""
    root = project(CONSOLE_SCRIPTS)
    out = dry(root)
    assert out["inferred"]["config_keys"]["trainer"] == {"module": "mypkg.train", "function": "main"}
    assert out["inferred"]["trainer"] == "module mypkg.train, function main (the package's console script mypkg-train)"
    assert any("other console scripts, not used: mypkg-eval = mypkg.evaluate:run" in n for n in out["inferred"]["notes"])
    assert out["plan"]["import_check"]["module"] == "mypkg.train"
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_cli("autopackage", str(root), "--image", f"{testenv['BUILDKIT_TEST_REGISTRY']}/autopkg-console/app",
                   "--json", env=env)
    assert "TRAINED []" in proc.stderr, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["run"]["exit_code"] == 3  # main()'s return value, as sys.exit takes it
    # In package mode a prebuilt container runs `python -m MODULE`: the function would never be called.
    assert "trainer.function: a prebuilt container runs `python -m mypkg.train`" in refused(root, "--mode", "package")


def test_several_console_scripts_name_the_one_that_trains_or_leave_the_layout(project):
    root = project({**CONSOLE_SCRIPTS, "pyproject.toml": CONSOLE_SCRIPTS["pyproject.toml"].replace(
        'mypkg-train = "mypkg.train:main"', 'fit = "mypkg.fit:main"'), "mypkg/fit.py": "def main():\n    pass\n",
        "trainer/__init__.py": "", "trainer/task.py": "print(1)\n"})
    out = dry(root)  # neither script says train: the layout's trainer, and the scripts are named
    assert out["inferred"]["trainer"] == "module trainer.task"
    assert any("console scripts are not the trainer (fit = mypkg.fit:main, mypkg-eval = mypkg.evaluate:run)" in n
               for n in out["inferred"]["notes"])


def test_the_layouts_module_is_called_through_its_console_script_when_it_has_no_main_block(project):
    """trainer/task.py defines main() and nothing calls it: `python -m trainer.task` would run nothing, so the package's
    console script for it is how it runs; with a __main__ block, `python -m` stays (what AI Platform ran)."""
    setup = ("from setuptools import setup, find_packages\nsetup(name='t', version='1', packages=find_packages(),\n"
             "      entry_points={'console_scripts': ['t-train = trainer.task:main']})\n")
    root = project({"setup.py": setup, "trainer/__init__.py": "", "trainer/task.py": "def main():\n    print('run')\n"})
    assert dry(root)["inferred"]["config_keys"]["trainer"] == {"module": "trainer.task", "function": "main"}
    (root / "trainer" / "task.py").write_text("def main():\n    print('run')\n\n\nif __name__ == '__main__':\n    main()\n")
    out = dry(root)
    assert out["inferred"]["config_keys"]["trainer"] == {"module": "trainer.task"}
    assert any("console scripts are not the trainer (t-train = trainer.task:main)" in n for n in out["inferred"]["notes"])


def test_autopackage_local_runs_each_replica_with_its_processes(testenv, tmp_path):
    """--replica-count and --processes-per-node in a local run: 2 machines x 2 processes, ranked as a job's."""
    root = tmp_path / "dist"
    shutil.copytree(REPO / "examples" / "distributed" / "trainer", root / "trainer")  # inferred, no buildkit.yaml
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_cli("autopackage", str(root), "--target", "local", "--replica-count", "2", "--processes-per-node", "2",
                   "--json", "--progress", "plain", "--", "--steps", "2", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["run"]["exit_codes"] == {"workerpool0-0": 0, "workerpool1-0": 0}
    for rank in range(4):  # step 1 sums (r + 2) over ranks 0..3
        assert f"rank {rank}/4 step 1: global sum 14" in proc.stderr
    bad = run_cli("autopackage", str(root), "--target", "local", "--processes-per-node", "many", "--dry-run", env=env)
    assert bad.returncode == 2 and "--processes-per-node" in bad.stderr and "Traceback" not in bad.stderr
