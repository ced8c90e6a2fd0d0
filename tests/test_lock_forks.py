"""uv.lock and poetry.lock with everything they can hold (issue 39): forked resolutions (one package locked at two
versions under different markers), extras and dependency groups, written by the real uv against a loopback index of
stand-in wheels; the extras a repository's own Dockerfile installs are the image's; a lock is stale only where a
declared set differs, and a stale lock autopackage found gives way to what the project declares."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from test_lock_e2e import Index, make_wheel

from buildkit_py.errors import ConfigError, StaleLockError
from buildkit_py.pipeline.uv import uv_binary
from buildkit_py.sources.lockfiles import export
from conftest import run_cli


@pytest.fixture
def index(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name, version in (("bkpin", "1.0"), ("bkpin", "1.1"), ("bkdev", "1.0"), ("bktrain", "1.0")):
        make_wheel(wheels, name, version)
    served = Index(wheels)
    yield served
    served.close()


def project(root: Path, index: Index, body: str) -> Path:
    """A project locked by uv itself."""
    (root / "trainer").mkdir(parents=True, exist_ok=True)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text("import bkpin\n")
    (root / "pyproject.toml").write_text(textwrap.dedent('''\
        [project]
        name = "forkapp"
        version = "0.1.0"
        requires-python = ">=3.10"
        ''') + textwrap.dedent(body))
    env = {"UV_INDEX_URL": index.url, "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([uv_binary(), "lock", "--quiet"], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return root


EXTRAS = '''\
    dependencies = []

    [project.optional-dependencies]
    cpu = ["bkpin==1.0"]
    gpu = ["bkpin==1.1"]

    [dependency-groups]
    train = ["bktrain"]
    dev = ["bkdev"]

    [tool.uv]
    conflicts = [[{ extra = "cpu" }, { extra = "gpu" }]]
    '''


def pins(root: Path, *args, **kwargs) -> list[str]:
    return [p for p, _ in export(root, "uv.lock", *args, **kwargs).pins]


def test_conflicting_extras_fork_the_lock_and_each_extra_gets_its_own_release(index, tmp_path):
    root = project(tmp_path / "app", index, EXTRAS)
    text = (root / "uv.lock").read_text()
    assert text.count('[[package]]\nname = "bkpin"') == 2  # a fork: one package locked at two versions
    assert pins(root, "3.11", "linux/amd64") == []  # the base set: no extra, no group
    assert pins(root, "3.11", "linux/amd64", extras=("gpu",)) == ["bkpin==1.1"]
    assert pins(root, "3.11", "linux/amd64", extras=("cpu",)) == ["bkpin==1.0"]
    assert pins(root, "3.11", "linux/amd64", extras=("gpu",), groups=("train",)) == ["bkpin==1.1", "bktrain==1.0"]
    with pytest.raises(ConfigError, match="requirements_extras: uv.lock: the project has no extra 'tpu' in the lock; "
                                          "it has cpu, gpu"):
        export(root, "uv.lock", "3.11", "linux/amd64", extras=("tpu",))


def test_markers_fork_one_package_by_python_and_the_images_python_takes_its_branch(index, tmp_path):
    root = project(tmp_path / "app", index, '''\
        dependencies = ["bkpin==1.0; python_version < '3.12'", "bkpin==1.1; python_version >= '3.12'"]
        ''')
    assert "resolution-markers" in (root / "uv.lock").read_text()
    assert pins(root, "3.11", "linux/amd64") == ["bkpin==1.0"]
    assert pins(root, "3.12", "linux/amd64") == ["bkpin==1.1"]


def test_a_lock_is_stale_only_where_a_declared_set_differs(index, tmp_path):
    root = project(tmp_path / "app", index, EXTRAS)
    export(root, "uv.lock", "3.11", "linux/amd64", extras=("gpu",))  # extras and groups declared as locked: current
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('gpu = ["bkpin==1.1"]', 'gpu = ["bkpin>=1.1"]'))
    with pytest.raises(StaleLockError, match=r"bkpin>=1.1 is declared \(extra gpu\), the lock has bkpin==1.1"):
        export(root, "uv.lock", "3.11", "linux/amd64", extras=("gpu",))


def test_the_extra_the_repositorys_gpu_dockerfile_installs_is_the_images(index, tmp_path):
    root = project(tmp_path / "app", index, EXTRAS)
    (root / "Dockerfile.cpu").write_text("FROM python:3.12-slim\nRUN uv sync --frozen --no-dev --extra cpu\n")
    (root / "Dockerfile.gpu").write_text("FROM nvidia/cuda:12.6.3-base-ubuntu22.04\n"
                                         "RUN uv sync --frozen --no-dev --extra gpu --group train\n")
    proc = run_cli("autopackage", str(root), "--dry-run", "--json", "--offline", "--framework", "none")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    keys = out["inferred"]["config_keys"]
    assert keys["requirements"] == "uv.lock" and keys["requirements_extras"] == ["gpu"]
    assert keys["requirements_groups"] == ["train"]
    assert "Dockerfile.gpu installs uv.lock with its extra gpu, group train: the image does too (the GPU build's; " \
           "Dockerfile.cpu installs others)" in proc.stderr
    assert {r["requirement"] for r in out["requirements"]} >= {"bkpin==1.1", "bktrain==1.0"}


def test_a_stale_lock_autopackage_found_gives_way_to_what_the_project_declares(index, tmp_path):
    root = project(tmp_path / "app", index, '''\
        dependencies = ["bkpin==1.0"]
        ''')
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"bkpin==1.0"', '"bkpin==1.1"'))
    proc = run_cli("autopackage", str(root), "--dry-run", "--json", "--offline", "--framework", "none")
    assert proc.returncode == 0, proc.stderr
    assert "uv.lock does not match pyproject.toml [project] dependencies: bkpin==1.1 is declared, the lock has " \
           "bkpin==1.0: the image installs what the project declares instead" in proc.stderr
    out = json.loads(proc.stdout)
    assert "requirements" not in out["inferred"]["config_keys"] and "bkpin==1.1" in out["inferred"]["pip"]
    # Named by the config, the lock is what the user asked for: refused.
    (root / "buildkit.yaml").write_text("framework: none\nrequirements: uv.lock\ntrainer: {module: trainer.task}\n")
    proc = run_cli("autopackage", str(root), "--dry-run", "--json", "--offline")
    assert proc.returncode == 2 and "uv.lock does not match" in proc.stderr and "Traceback" not in proc.stderr


POETRY_GROUPS_LOCK = '''\
# This file is automatically @generated by Poetry 2.1.3 and should not be changed by hand.

[[package]]
name = "bkpin"
version = "1.0"
description = ""
optional = false
python-versions = "*"
groups = ["main"]
files = [
    {file = "bkpin-1.0-py3-none-any.whl", hash = "sha256:%(h)s"},
]

[[package]]
name = "bktrain"
version = "1.0"
description = ""
optional = false
python-versions = "*"
groups = ["train"]
markers = {train = "python_version >= \\"3.10\\""}
files = [
    {file = "bktrain-1.0-py3-none-any.whl", hash = "sha256:%(h)s"},
]

[[package]]
name = "bkdev"
version = "1.0"
description = ""
optional = true
python-versions = "*"
groups = ["main"]
files = [
    {file = "bkdev-1.0-py3-none-any.whl", hash = "sha256:%(h)s"},
]

[extras]
cuda = ["bkdev (>=1.0)"]

[metadata]
lock-version = "2.1"
python-versions = "^3.10"
content-hash = "0000"
'''


def test_poetry_groups_and_extras_are_installed_where_asked(tmp_path):
    """poetry.lock as Poetry 2 writes it: a package of a non-main group (with a marker per group), an optional one that
    an [extras] entry names."""
    (tmp_path / "poetry.lock").write_text(POETRY_GROUPS_LOCK % {"h": "1" * 64})
    (tmp_path / "pyproject.toml").write_text('[tool.poetry]\nname = "x"\n[tool.poetry.dependencies]\n'
                                             'python = "^3.10"\nbkpin = "1.0"\n')

    def names(*args, **kwargs):
        return [p for p, _ in export(tmp_path, "poetry.lock", *args, **kwargs).pins]

    assert names("3.11", "linux/amd64") == ["bkpin==1.0"]
    assert names("3.11", "linux/amd64", groups=("train",)) == ["bkpin==1.0", "bktrain==1.0"]
    assert names("3.9", "linux/amd64", groups=("train",)) == ["bkpin==1.0"]  # the group's marker
    assert names("3.11", "linux/amd64", extras=("cuda",)) == ["bkpin==1.0", "bkdev==1.0"]
    with pytest.raises(ConfigError, match="requirements_extras: poetry.lock: the project has no extra 'gpu'"):
        export(tmp_path, "poetry.lock", "3.11", "linux/amd64", extras=("gpu",))


def test_an_extra_a_build_names_that_the_lock_lacks_is_said_and_the_lock_installs_without_it(index, tmp_path):
    root = project(tmp_path / "app", index, EXTRAS)
    (root / "Dockerfile").write_text("FROM python:3.12-slim\nRUN uv sync --frozen --extra tpu\n")
    proc = run_cli("autopackage", str(root), "--dry-run", "--json", "--offline", "--framework", "none")
    assert proc.returncode == 0, proc.stderr
    assert "Dockerfile names what the lock does not hold (uv.lock: the project has no extra 'tpu' in the lock; it has " \
           "cpu, gpu): the image installs the lock without extras or groups" in proc.stderr
    assert "requirements_extras" not in json.loads(proc.stdout)["inferred"]["config_keys"]
