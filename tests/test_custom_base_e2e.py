"""Custom base images end to end: Python comes from the base, else from the distro's archive, else
a standalone build through uv fetched from the package index; nothing else is pulled.

This machine reaches only the package indexes (PyPI, deb.debian.org) and loopback: no ghcr.io,
no Docker Hub. The stand-in bases are local images under company-like names (nothing to pull),
so a build that passes here needed no registry but the base's own.
"""

from __future__ import annotations

import http.server
import json
import re
import shutil
import threading
from pathlib import Path

import pytest
import yaml
from test_build_e2e import build, docker

from buildkit_py.config import load_config
from buildkit_py.pipeline.plan import make_plan
from buildkit_py.pipeline.render import render_dockerfile
from conftest import REPO, LoopbackServer, hadolint

QUICKSTART = REPO / "examples" / "quickstart"
WITH_PYTHON = "buildkit-py/standin:bookworm"  # python3.11 with venv and pip (scripts/testenv.sh)
NO_PYTHON = "buildkit-py/standin:bookworm-nopython"  # debootstrap minbase: no Python at all


def quickstart(tmp_path: Path, name: str, **keys) -> Path:
    """The quickstart trainer, with `keys` added to its buildkit.yaml."""
    root = tmp_path / name
    shutil.copytree(QUICKSTART, root, ignore=shutil.ignore_patterns("__pycache__"))
    config = yaml.safe_load((root / "buildkit.yaml").read_text())
    (root / "buildkit.yaml").write_text(yaml.safe_dump({**config, "image": f"custom-base-e2e/{name}", **keys}))
    return root


def company_base(testenv, standin: str, ref: str) -> str:
    docker(testenv, "tag", standin, ref)
    return ref


def dockerfile(root: Path) -> str:
    config = load_config(root / "buildkit.yaml")
    return render_dockerfile(make_plan(config), root=config.root)


def built_image(testenv, root: Path) -> tuple[str, str]:
    proc = build(testenv, root)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)["tags"][0], proc.stderr


def venv_python(testenv, image: str) -> dict:
    probe = "import json, sys; print(json.dumps({'version': list(sys.version_info[:2]), 'base': sys.base_prefix}))"
    run = docker(testenv, "run", "--rm", "--network", "none", "--entrypoint", "/opt/venv/bin/python", image, "-c", probe)
    return json.loads(run.stdout)


def trains(testenv, image: str) -> bool:
    run = docker(testenv, "run", "--rm", "--network", "none", image)
    return "trained: w=" in run.stdout and "rmse=" in run.stdout


@pytest.mark.parametrize("case", sorted(p.name for p in (REPO / "tests" / "cases").iterdir()))
def test_no_image_but_the_base_is_named(case):
    root = REPO / "tests" / "cases" / case
    config = load_config(root / "buildkit.yaml").each_platform()[0]  # a multi-platform case: its first platform's
    base = make_plan(config).base_image
    text = render_dockerfile(make_plan(config), root=config.root)
    froms = [line.split()[1:] for line in text.splitlines() if line.startswith("FROM ")]
    stages = [f[2] for f in froms if len(f) == 3 and f[1] == "AS"]
    # The base, then only the Dockerfile's own stages (a trainer's compiled extensions build in one): nothing else pulled.
    assert froms[0][0] == base and all(f[0] in stages for f in froms[1:]), froms
    assert "ghcr.io" not in text
    assert all(ref in stages for ref in re.findall(r"--from=(\S+)", text))


def test_python_mirror_is_one_quoted_shell_word(project):
    mirror = "https://m.example.internal/pbs?a=1&b=(2);c=*"  # every shell-active character the config allows
    root = project({"trainer/__init__.py": "", "trainer/task.py": "", "buildkit.yaml": yaml.safe_dump({
        "framework": "none", "python": "3.12", "base_image": "registry.example.internal/base/os:1",
        "python_mirror": mirror, "trainer": {"module": "trainer.task"}})})
    text = dockerfile(root)
    assert f"UV_PYTHON_INSTALL_MIRROR='{mirror}' " in text
    assert hadolint(text) == ""


def test_base_with_python_uses_it_and_pulls_nothing_else(testenv, tmp_path):
    base = company_base(testenv, WITH_PYTHON, "registry.example.internal/base/python:3.11")
    root = quickstart(tmp_path, "present", base_image=base)
    text = dockerfile(root)
    assert "ghcr.io" not in text and "docker.io" not in text
    assert [line for line in text.splitlines() if line.startswith("FROM ")] == [f"FROM {base}"]

    image, log = built_image(testenv, root)
    # Neither apt nor uv's standalone build ran for Python (uv itself runs: it installs the packages).
    assert "deb.debian.org" not in log and "Installed Python" not in log
    assert venv_python(testenv, image) == {"version": [3, 11], "base": "/usr"}
    assert trains(testenv, image)


def test_base_without_python_gets_it_from_the_distro_archive(testenv, tmp_path):
    base = company_base(testenv, NO_PYTHON, "registry.example.internal/base/debian:bookworm-minimal")
    assert docker(testenv, "run", "--rm", "--network", "none", base, "sh", "-c", "command -v python3",
                  check=False).returncode != 0
    root = quickstart(tmp_path, "from-archive", base_image=base)

    image, _ = built_image(testenv, root)
    assert venv_python(testenv, image) == {"version": [3, 11], "base": "/usr"}
    status = docker(testenv, "run", "--rm", "--network", "none", "--entrypoint", "dpkg-query", image,
                    "-W", "-f", "${Status}", "python3.11-venv").stdout
    assert status == "install ok installed"
    assert trains(testenv, image)


class _Mirror(http.server.BaseHTTPRequestHandler):
    """A python_mirror on loopback that has no builds: it records what uv asks for."""

    requests: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.requests.append(self.path)
        self.send_error(404)

    def log_message(self, *args):
        pass


@pytest.fixture
def mirror():
    _Mirror.requests = []
    server = LoopbackServer(("127.0.0.1", 0), _Mirror)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/python-build-standalone", _Mirror.requests
    server.shutdown()
    server.server_close()


def test_python_missing_from_the_archive_comes_through_uv_from_the_index_and_the_mirror(testenv, tmp_path, mirror):
    # Bookworm's archive has no python3.12: python3-pip from the archive fetches uv from PyPI, and
    # uv asks python_mirror for the standalone build. The stand-in mirror has none (the real
    # builds are out of reach here), so the build stops there, with uv's own error.
    url, requests = mirror
    base = company_base(testenv, NO_PYTHON, "registry.example.internal/base/debian:bookworm-minimal")
    root = quickstart(tmp_path, "standalone", base_image=base, python="3.12", python_mirror=url)
    assert "ghcr.io" not in dockerfile(root)

    proc = build(testenv, root)
    assert proc.returncode == 6, proc.stderr[-4000:]
    assert "Successfully installed uv-0.13.0" in proc.stderr
    assert len(requests) == 1 and requests[0].startswith("/python-build-standalone/"), requests
    assert "/cpython-3.12." in requests[0] and "linux-gnu" in requests[0]
    assert f"Failed to download `{url}/" in proc.stderr


def test_base_without_apt_or_python_stops_with_what_was_missing(testenv, tmp_path):
    base = "registry.example.internal/base/noapt:1"
    (tmp_path / "noapt-base").mkdir()
    (tmp_path / "noapt-base" / "Dockerfile").write_text(f"FROM {NO_PYTHON}\nRUN rm /usr/bin/apt-get\n")
    docker(testenv, "build", "--network", "none", "-t", base, str(tmp_path / "noapt-base"))
    root = quickstart(tmp_path, "noapt", base_image=base)

    proc = build(testenv, root)
    assert proc.returncode == 6, proc.stderr[-4000:]
    assert (f"buildkit-py: the base image {base} has no python3.11 with its venv module, no apt-get to install one, "
            "and no python3 with pip") in proc.stderr
