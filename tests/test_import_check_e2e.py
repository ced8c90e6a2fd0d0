"""The build's import check on the real engine (BuildKit, the legacy builder, buildah): an image that cannot import what
the trainer imports is never tagged, the error names the module, where it is imported and the fix; the system library a
wheel loads is installed from base_images/system_libraries.yaml; a code edit that adds an import leaves the fast path.

Packages come from a loopback index of stand-in wheels (test_lock_e2e.Index): `lightgbm` here is a wheel whose import
loads libgomp.so.1 through ctypes, as the real wheel's lib_lightgbm.so does, which the slim stand-in base lacks."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from test_build_e2e import docker
from test_lock_e2e import Index, make_wheel

from conftest import run_cli

LOADS_LIBGOMP = "import ctypes\n_LIB = ctypes.CDLL('libgomp.so.1')\nVERSION = '99.0.0'\n"


@pytest.fixture
def index(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "lightgbm", "99.0.0", module_text=LOADS_LIBGOMP)  # a release PyPI does not have: the index's wins
    make_wheel(wheels, "bkpy_gompy", "1.0", module_text=LOADS_LIBGOMP)  # loads the same library, and is in no table
    make_wheel(wheels, "bkpy_plain", "1.0", module_text="VERSION = '1.0'\n")
    served = Index(wheels)
    yield served
    served.close()


def trainer(root: Path, index: Index, task: str, requirements: str) -> Path:
    """A trainer whose packages come from the loopback index (PyPI stays the main index: the build fetches uv there)."""
    root.mkdir(parents=True)
    (root / "train.py").write_text(task)
    (root / "requirements.txt").write_text(requirements)
    (root / "pip.conf").write_text(f"[global]\nextra-index-url = {index.url}\n")
    (root / "buildkit.yaml").write_text("trainer:\n  script: train.py\nframework: none\nhypertune: false\n"
                                        "requirements: requirements.txt\npip_conf: pip.conf\n")
    return root


def cli(testenv, *args, env=None):
    return run_cli(*args, env={**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], **(env or {})})


def tags(testenv, repository: str) -> list[str]:
    out = docker(testenv, "images", "--format", "{{.Repository}}:{{.Tag}}", repository).stdout
    return sorted(line for line in out.splitlines() if line)


def test_a_wheels_system_library_is_installed_and_the_image_imports_it(testenv, index, tmp_path):
    root = trainer(tmp_path / "app", index, "import lightgbm\nprint('LIGHTGBM', lightgbm.VERSION)\n",
                   "lightgbm==99.0.0\n")
    resolved = json.loads(cli(testenv, "resolve", "--dir", str(root), "--json").stdout)
    assert "libgomp1" in resolved["system_packages"], resolved
    assert any("lightgbm loads a system library" in n and "libgomp1" in n for n in resolved["notes"]), resolved["notes"]
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/importcheck/gomp-{uuid.uuid4().hex[:8]}"
    proc = cli(testenv, "build", "--dir", str(root), "--image", image, "--network", "host", "--progress", "plain",
               "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "buildkit_launcher.imports /tmp/buildkit-py/imports.json" in proc.stderr  # the step ran (or was cached)
    ref = json.loads(proc.stdout)["tags"][0]
    run = docker(testenv, "run", "--rm", "--network", "host", ref)
    assert "LIGHTGBM 99.0.0" in run.stdout + run.stderr
    # The check's step left nothing in the image: its layer is empty (no scratch home, no byte-code).
    history = docker(testenv, "history", "--no-trunc", "--format", "{{.Size}}\t{{.CreatedBy}}", ref).stdout
    check = [line for line in history.splitlines() if "buildkit_launcher.imports" in line]
    assert len(check) == 1 and check[0].split("\t")[0] in ("0B", "0"), history


@pytest.mark.parametrize("builder", ["buildkit", "buildah"])
def test_an_image_that_cannot_import_the_trainers_imports_is_never_tagged(testenv, index, tmp_path, builder):
    if builder == "buildah" and shutil.which("buildah") is None:
        pytest.fail("buildah is missing: scripts/testenv.sh installs it")
    root = trainer(tmp_path / "app", index,
                   "import bkpy_plain\nfrom helpers import util\n", "bkpy-plain==1.0\nbkpy-gompy==1.0\n")
    (root / "helpers").mkdir()
    (root / "helpers" / "__init__.py").write_text("")
    (root / "helpers" / "util.py").write_text("import bkpy_gompy\nimport zz_nowhere_pkg\n")
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/importcheck/refused-{builder}-{uuid.uuid4().hex[:8]}"
    env = {"DOCKER_HOST": ""} if builder == "buildah" else {}
    error = refused(testenv, root, image, builder, env, 2)
    assert "bkpy_gompy (helpers/util.py:1): OSError: libgomp.so.1: cannot open shared object file" in error, error
    assert "add the system package that provides libgomp.so.1 to system_packages (libgomp1)" in error, error
    assert "zz_nowhere_pkg (helpers/util.py:2): ModuleNotFoundError" in error and "no known distribution" in error
    if builder != "buildah":
        assert tags(testenv, image) == []  # nothing tagged
    # The user's way out, said in the error: without the check the image builds (and would fail where it runs).
    skipped = cli(testenv, "build", "--dir", str(root), "--image", image, "--network", "host", "--builder", builder,
                  "--no-import-check", "--progress", "plain", env=env)
    assert skipped.returncode == 0, skipped.stderr[-3000:]
    assert "import check" not in skipped.stderr and "note: import_check: false: the build does not import" in skipped.stderr


def test_the_legacy_builder_checks_the_imports_too(testenv, tmp_path):
    """The legacy builder passes no secrets (so no CA bundle and no package index here): a trainer without packages."""
    root = tmp_path / "app"
    root.mkdir()
    (root / "train.py").write_text("import json\nimport zz_nowhere_pkg\n")
    (root / "buildkit.yaml").write_text("trainer:\n  script: train.py\nframework: none\nhypertune: false\n")
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/importcheck/legacy-{uuid.uuid4().hex[:8]}"
    error = refused(testenv, root, image, "legacy", {"PIP_CERT": "", "REQUESTS_CA_BUNDLE": "", "SSL_CERT_FILE": ""}, 1)
    assert "zz_nowhere_pkg (train.py:2): ModuleNotFoundError: No module named 'zz_nowhere_pkg'" in error, error
    assert tags(testenv, image) == []


def refused(testenv, root: Path, image: str, builder: str, env: dict, count: int) -> str:
    proc = cli(testenv, "build", "--dir", str(root), "--image", image, "--network", "host", "--builder", builder,
               "--progress", "plain", env=env)
    assert proc.returncode == 6, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    error = proc.stderr[proc.stderr.index("buildkit-py: error:"):]
    assert f"the image cannot import what the trainer imports ({count} module(s))" in error, error
    return error


def test_a_code_edit_that_adds_an_import_leaves_the_fast_path_naming_it(testenv, index, tmp_path):
    root = trainer(tmp_path / "app", index, "import bkpy_plain\nprint('v1')\n", "bkpy-plain==1.0\n")
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/importcheck/fast-{uuid.uuid4().hex[:8]}"
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}

    def push(*args):
        return cli(testenv, "build", "--dir", str(root), "--image", image, "--network", "host", "--push",
                   "--progress", "plain", *args, env=env)

    first = push()
    assert first.returncode == 0, first.stderr[-3000:]
    (root / "train.py").write_text("import json\nimport bkpy_plain\nprint('v2')\n")  # the standard library: no new module
    edit = push("--json")
    assert edit.returncode == 0, edit.stderr[-3000:]
    assert "appended" in edit.stderr or json.loads(edit.stdout).get("timings"), edit.stderr[-2000:]
    (root / "train.py").write_text("import json\nimport bkpy_plain\nimport zz_new_dep\nprint('v3')\n")
    refused = push()
    assert ("the trainer now imports zz_new_dep (train.py:3), which the image was not checked for: full build"
            in refused.stderr), refused.stderr[-3000:]
    assert refused.returncode == 6 and "zz_new_dep (train.py:3): ModuleNotFoundError" in refused.stderr


def test_a_requirements_file_that_includes_others_builds_with_them(testenv, index, tmp_path):
    """requirements: FILE with -r and -c lines (a file in a folder, one above it): each file is copied at its path
    beside it, so the install in the image reads them where the lines say."""
    root = trainer(tmp_path / "app", index, "import bkpy_plain\nprint('PLAIN', bkpy_plain.VERSION)\n",
                   "-r reqs/base.txt\n")
    (root / "reqs").mkdir()
    (root / "reqs" / "base.txt").write_text("-c ../constraints.txt\nbkpy-plain\n")
    (root / "constraints.txt").write_text("bkpy-plain==1.0\n")
    dockerfile = cli(testenv, "dockerfile", "--dir", str(root))
    assert dockerfile.returncode == 0, dockerfile.stderr
    for name in ("requirements.txt", "reqs/base.txt", "constraints.txt"):
        assert f'COPY ["{name}", "/tmp/buildkit-py/requirements/{name}"]' in dockerfile.stdout, dockerfile.stdout
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/importcheck/included-{uuid.uuid4().hex[:8]}"
    proc = cli(testenv, "build", "--dir", str(root), "--image", image, "--network", "host", "--progress", "plain",
               "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = docker(testenv, "run", "--rm", "--network", "host", json.loads(proc.stdout)["tags"][0])
    assert "PLAIN 1.0" in run.stdout + run.stderr
    (root / "reqs" / "base.txt").write_text("bkpy-plain --index-url https://tester:s3cret@example.com/simple\n")
    leaked = cli(testenv, "dockerfile", "--dir", str(root))
    assert leaked.returncode == 2 and "reqs/base.txt:1" in leaked.stderr and "s3cret" not in leaked.stderr, leaked.stderr
