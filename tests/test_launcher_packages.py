"""The launcher's package path (Vertex AI's PythonPackageSpec): fetch, pip-install into the running
environment with its own pip configuration, hand off to `python -m MODULE ARGS`; failures have exit codes
of their own and name the URI. Real processes: a virtual environment, pip, a loopback HTTP server and the
loopback Cloud Storage server."""

from __future__ import annotations

import functools
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import venv
from pathlib import Path

import pytest
from gcs_loopback import GcsServer

from buildkit_py.catalog.resources import launcher_sources
from buildkit_py.launcher.constants import (
    PACKAGE_CACHE_ENV,
    PACKAGE_FETCH_FAILED,
    PACKAGE_INSTALL_FAILED,
    PACKAGE_URIS_ENV,
    PYTHON_MODULE_ENV,
    SKIP_GPU_CHECK_ENV,
    USAGE,
)
from buildkit_py.launcher.packages import MARKER
from buildkit_py.pipeline.packaging import SETUPTOOLS_REQUIREMENT
from conftest import LoopbackServer, run_cli

TRAINER = """import os, sys
print("trainer ran with", sys.argv[1:], "from", sys.prefix, flush=True)
sys.exit(int(os.environ.get("TRAINER_EXIT", "0")))
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("launcher-packages")
    launcher = base / "launcher" / "buildkit_launcher"
    launcher.mkdir(parents=True)
    for _, source in launcher_sources():
        shutil.copy(source, launcher / source.name)
    trainer = base / "tinytrainer"
    (trainer / "tiny").mkdir(parents=True)
    (trainer / "tiny" / "__init__.py").write_text("")
    (trainer / "tiny" / "task.py").write_text(TRAINER)
    (trainer / "buildkit.yaml").write_text("hypertune: false\ntrainer: {module: tiny.task}\n")
    proc = run_cli("package", str(trainer), "--out", str(base / "dist"), "--json")
    assert proc.returncode == 0, proc.stderr
    # The build backend the sdist names, as a local wheel: installs run with PIP_NO_INDEX and find this.
    links = base / "links"
    pip = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d",
                          str(links), SETUPTOOLS_REQUIREMENT], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-2000:]
    return {"base": base, "launcher": launcher.parent, "sdist": json.loads(proc.stdout), "links": links}


@pytest.fixture
def env_dir(tmp_path) -> Path:
    """A fresh environment per test (the host's packages visible, pip among them); installs land in it."""
    path = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(path)
    return path


def launch(setup, env_dir, uris: str | None, module: str | None = "tiny.task", args=("--epochs", "3"), **extra):
    env = {"PATH": os.environ["PATH"], "HOME": str(env_dir), "PYTHONPATH": str(setup["launcher"]),
           SKIP_GPU_CHECK_ENV: "1", "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(setup["links"]),
           PACKAGE_CACHE_ENV: str(env_dir / "cache"), **extra}
    if uris is not None:
        env[PACKAGE_URIS_ENV] = uris
    if module is not None:
        env[PYTHON_MODULE_ENV] = module
    return subprocess.run([str(env_dir / "bin" / "python"), "-m", "buildkit_launcher", "--", *args],
                          capture_output=True, text=True, env=env, timeout=300)


def test_a_local_package_is_installed_then_the_module_runs_with_the_args(setup, env_dir):
    sdist = setup["sdist"]
    proc = launch(setup, env_dir, sdist["path"], TRAINER_EXIT="3")
    assert proc.returncode == 3, proc.stderr  # the trainer's own exit code
    assert f"trainer ran with ['--epochs', '3'] from {env_dir}" in proc.stdout
    assert f"installed {sdist['path']}" in proc.stderr and sdist["sha256"][:16] in proc.stderr
    assert json.loads((env_dir / MARKER).read_text()) == [sdist["sha256"]]
    assert list((env_dir / "lib").glob("python3*/site-packages/tiny/task.py")), "installed into the running environment"

    # A restart finds the same digests installed and does not run pip again.
    again = launch(setup, env_dir, "file://" + sdist["path"], PIP_FIND_LINKS=str(env_dir / "nowhere"))
    assert again.returncode == 0 and "packages already installed" in again.stderr, again.stderr


def test_http_download_is_kept_under_its_digest(setup, env_dir):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(Path(setup["sdist"]["path"]).parent))
    handler.log_message = lambda *a: None
    server = LoopbackServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        proc = launch(setup, env_dir, f"{base}/tinytrainer-0.0.0.tar.gz")
        missing = launch(setup, env_dir, f"{base}/nope-1.0.tar.gz")
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0 and "trainer ran with" in proc.stdout, proc.stderr
    kept = env_dir / "cache" / setup["sdist"]["sha256"] / "tinytrainer-0.0.0.tar.gz"
    assert kept.read_bytes() == Path(setup["sdist"]["path"]).read_bytes()
    assert missing.returncode == PACKAGE_FETCH_FAILED and f"{base}/nope-1.0.tar.gz: HTTP 404" in missing.stderr


def test_gs_uri_through_the_storage_client(setup, env_dir):
    data = Path(setup["sdist"]["path"]).read_bytes()
    with GcsServer({"bkpy-bucket"}) as gcs:
        gcs.objects[("bkpy-bucket", "pkgs/abc/tinytrainer-0.0.0.tar.gz")] = data
        proc = launch(setup, env_dir, "gs://bkpy-bucket/pkgs/abc/tinytrainer-0.0.0.tar.gz", STORAGE_EMULATOR_HOST=gcs.url)
        missing = launch(setup, env_dir, "gs://bkpy-bucket/pkgs/none.tar.gz", STORAGE_EMULATOR_HOST=gcs.url)
    assert proc.returncode == 0 and "trainer ran with" in proc.stdout, proc.stderr
    assert missing.returncode == PACKAGE_FETCH_FAILED
    assert "cannot fetch gs://bkpy-bucket/pkgs/none.tar.gz" in missing.stderr and "NotFound" in missing.stderr


@pytest.mark.parametrize("uri, fragment", [
    ("/nonexistent/tiny-1.0.tar.gz", "no such file"),
    ("file://otherhost/tiny-1.0.tar.gz", "this machine's files only"),
    ("ftp://mirror/tiny-1.0.tar.gz", "the schemes are"),
    ("gs://Not_A_Bucket/x.tar.gz", "not gs://BUCKET/OBJECT"),
])
def test_an_unfetchable_uri_has_its_own_exit_code_and_is_named(setup, env_dir, uri, fragment):
    proc = launch(setup, env_dir, uri)
    assert proc.returncode == PACKAGE_FETCH_FAILED, proc.stderr
    assert f"cannot fetch {uri}" in proc.stderr and fragment in proc.stderr and "trainer ran" not in proc.stdout


def test_a_package_pip_cannot_install_names_the_uri_and_shows_pips_error(setup, env_dir, tmp_path):
    broken = tmp_path / "broken-1.0.tar.gz"
    with tarfile.open(broken, "w:gz") as tar:
        for name, text in (("broken-1.0/setup.py", "raise SystemExit('boom: this package does not build')\n"),
                           ("broken-1.0/PKG-INFO", "Metadata-Version: 2.1\nName: broken\nVersion: 1.0\n")):
            info = tarfile.TarInfo(name)
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text.encode()))
    proc = launch(setup, env_dir, f"{setup['sdist']['path']},{broken}")
    assert proc.returncode == PACKAGE_INSTALL_FAILED, proc.stderr
    assert f"pip could not install {setup['sdist']['path']}, {broken}" in proc.stderr
    assert "boom: this package does not build" in proc.stderr and "trainer ran" not in proc.stdout
    assert not (env_dir / MARKER).exists()


def test_the_install_uses_the_environments_pip_configuration(setup, env_dir, tmp_path):
    empty = tmp_path / "empty-links"
    empty.mkdir()
    proc = launch(setup, env_dir, setup["sdist"]["path"], PIP_FIND_LINKS=str(empty))
    assert proc.returncode == PACKAGE_INSTALL_FAILED
    assert "setuptools" in proc.stderr and "no matching distribution" in proc.stderr.lower()


@pytest.mark.parametrize("uris, module, fragment", [
    ("/x.tar.gz", None, f"{PYTHON_MODULE_ENV} is not"),
    ("/x.tar.gz", "tiny.task;id", "not a dotted Python module name"),
    ("/x.tar.gz", "tiny..task", "not a dotted Python module name"),
])
def test_a_malformed_spec_is_a_usage_error(setup, env_dir, uris, module, fragment):
    proc = launch(setup, env_dir, uris, module)
    assert proc.returncode == USAGE and fragment in proc.stderr, proc.stderr


def test_without_a_module_the_launcher_runs_the_command_as_before(setup, env_dir):
    proc = launch(setup, env_dir, None, None, args=(sys.executable, "-c", "print('plain command')"))
    assert proc.returncode == 0 and "plain command" in proc.stdout, proc.stderr
