"""Reaching the Docker engine: one place that says clearly which engine it tried."""

from __future__ import annotations

import os

from .errors import EngineError

DEFAULT_HOST = "unix:///var/run/docker.sock"  # where Docker's clients look when DOCKER_HOST is unset


def engine_host() -> str:
    return os.environ.get("DOCKER_HOST") or f"{DEFAULT_HOST} (default)"


def engine_may_answer() -> bool:
    """Whether an engine may answer, without asking it: its unix socket exists (any other DOCKER_HOST is tried)."""
    host = os.environ.get("DOCKER_HOST") or DEFAULT_HOST
    return not host.startswith("unix://") or os.path.exists(host.removeprefix("unix://"))


def engine_client():
    """A Docker SDK client for DOCKER_HOST, pinged."""
    import docker
    from docker.errors import DockerException

    client = None
    try:
        client = docker.from_env(timeout=600)  # long pushes of big layers must not time out
        client.ping()
    except DockerException as exc:
        if client is not None:
            client.close()  # its connection pool would leak a socket per failed try
        raise EngineError(f"cannot reach the Docker engine at DOCKER_HOST={engine_host()}: {exc}") from None
    return client
