"""Reaching the Docker engine: one place that says clearly which engine it tried."""

from __future__ import annotations

import json
import os
import urllib.parse

from ..errors import EngineError

DEFAULT_HOST = "unix:///var/run/docker.sock"  # where Docker's clients look when DOCKER_HOST is unset


def engine_host() -> str:
    return os.environ.get("DOCKER_HOST") or f"{DEFAULT_HOST} (default)"


def engine_may_answer() -> bool:
    """Whether an engine may answer, without asking it: its unix socket exists (any other DOCKER_HOST is tried)."""
    host = os.environ.get("DOCKER_HOST") or DEFAULT_HOST
    return not host.startswith("unix://") or os.path.exists(host.removeprefix("unix://"))


def socket_call(method: str, path: str, timeout: float = 30.0) -> tuple[int, dict | list | None] | None:
    """The status and JSON answer of one call to the engine's API over its unix socket, with the standard library:
    the Docker SDK's import alone (0.1 s) is a code edit's budget. None where DOCKER_HOST is not a unix socket
    (tcp, ssh, TLS: the SDK's business)."""
    host = os.environ.get("DOCKER_HOST") or DEFAULT_HOST
    if not host.startswith("unix://"):
        return None
    import socket

    from .http1 import Connection
    from .transport import USER_AGENT

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn = None
    try:
        sock.settimeout(timeout)
        sock.connect(host.removeprefix("unix://"))
        conn = Connection("localhost", 0, timeout, authority="localhost", sock=sock)
        answer = conn.request(method, path, {"User-Agent": USER_AGENT}, None)
    except OSError as exc:
        raise EngineError(f"cannot reach the Docker engine at DOCKER_HOST={engine_host()}: {exc}") from None
    finally:
        (sock if conn is None else conn).close()  # the connection closes the socket it was given
    try:
        return answer.status, json.loads(answer.content) if answer.content else None
    except ValueError:
        return answer.status, None


def image_path(name: str) -> str:
    """An image name in an engine API path, as the engine's own clients write it."""
    return "/images/" + urllib.parse.quote(name, safe="/:@")


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
