"""Reaching the Docker engine: one place that says clearly which engine it tried."""

from __future__ import annotations

import os
import subprocess

from .errors import EngineError


def _host() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock (default)"


def engine_client():
    """A Docker SDK client for DOCKER_HOST, pinged."""
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env(timeout=600)  # long pushes of big layers must not time out
        client.ping()
    except DockerException as exc:
        raise EngineError(f"cannot reach the Docker engine at DOCKER_HOST={_host()}: {exc}") from None
    return client


def check_engine(client_path: str) -> None:
    """The same check through a docker CLI, before a CLI build starts."""
    try:
        proc = subprocess.run(
            [client_path, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        raise EngineError(f"the Docker engine at DOCKER_HOST={_host()} did not answer in 30 s") from None
    if proc.returncode != 0 or not proc.stdout.strip():
        detail = (proc.stderr.strip().splitlines() or ["no answer"])[-1]
        raise EngineError(f"cannot reach the Docker engine at DOCKER_HOST={_host()}: {detail}")
