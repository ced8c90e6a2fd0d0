"""The engine's BuildKit drops a build's gRPC stream now and then under load ("rpc error: code = Internal desc =
unexpected EOF"): the BuildKit builder runs that build once more, and only that failure. A stand-in docker client
(a shell script) answers as the engine's client does."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from buildkit_py.builders.base import BuildRequest
from buildkit_py.builders.buildkit_cli import BuildkitCliBuilder, DockerClient
from buildkit_py.errors import BuildError
from buildkit_py.progress import Reporter

DROPPED = "#5 ERROR: rpc error: code = Internal desc = unexpected EOF"


def client(tmp_path: Path, *failures: str) -> tuple[DockerClient, Path]:
    """A docker client whose Nth build prints failures[N] and exits 1, then builds (writes the --iidfile)."""
    runs = tmp_path / "runs"
    script = tmp_path / "docker"
    cases = "".join(f'{i}) echo "{line}"; exit 1;;\n' for i, line in enumerate(failures, 1))
    script.write_text(f"#!/bin/sh\necho run >> {runs}\nn=$(wc -l < {runs})\ncase $n in\n{cases}esac\n"
                      'while [ $# -gt 0 ]; do [ "$1" = --iidfile ] && echo sha256:built > "$2"; shift; done\n')
    script.chmod(0o755)
    return DockerClient(str(script), "builtin"), runs


def build(tmp_path: Path, docker: DockerClient) -> tuple[str, str]:
    (tmp_path / "ctx").mkdir(exist_ok=True)
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    said = io.StringIO()
    built = BuildkitCliBuilder(docker).build(BuildRequest(tmp_path / "ctx", tmp_path / "Dockerfile"), Reporter(said))
    return built, said.getvalue()


def test_a_dropped_session_is_built_once_more(tmp_path):
    docker, runs = client(tmp_path, DROPPED)
    built, said = build(tmp_path, docker)
    assert built == "sha256:built" and len(runs.read_text().splitlines()) == 2
    assert "dropped the build's connection" in said


def test_a_session_dropped_twice_fails_with_buildkits_words(tmp_path):
    docker, runs = client(tmp_path, DROPPED, DROPPED)
    with pytest.raises(BuildError, match="unexpected EOF"):
        build(tmp_path, docker)
    assert len(runs.read_text().splitlines()) == 2


def test_another_failure_is_not_built_again(tmp_path):
    docker, runs = client(tmp_path, "#7 ERROR: process did not complete successfully: exit code: 1")
    with pytest.raises(BuildError):
        build(tmp_path, docker)
    assert len(runs.read_text().splitlines()) == 1
