"""The engine API over its unix socket with the standard library: the real engine's answers, and what an engine
that is not there, or answers nonsense, makes of a call."""

from __future__ import annotations

import socket
import threading

import pytest

from buildkit_py.builders.engine_images import EngineImages
from buildkit_py.clients.engine import image_path, socket_call
from buildkit_py.errors import EngineError
from buildkit_py.oci.refs import parse_ref


def test_the_real_engine_answers_over_its_socket(testenv, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", testenv["DOCKER_HOST"])
    status, body = socket_call("GET", "/version")
    assert status == 200 and body["ApiVersion"]
    images = EngineImages()
    assert images.image_id(parse_ref("buildkit-py-no-such/image:never")) is None
    images.untag(parse_ref("buildkit-py-no-such/image:never"))  # a name that is not there: nothing to do


def test_other_hosts_are_left_to_the_sdk(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:2375")
    assert socket_call("GET", "/version") is None


def test_a_socket_nobody_serves_is_an_engine_error_naming_the_host(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    with pytest.raises(EngineError, match=f"DOCKER_HOST=unix://{tmp_path}/docker.sock"):
        socket_call("GET", "/version")


def test_a_refusal_is_said_with_the_engines_message(tmp_path, monkeypatch):
    path = tmp_path / "e.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)

    def answer() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        body = b'{"message":"conflict: image is being used by stopped container \\u001b[31m"}'
        conn.sendall(b"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    with pytest.raises(EngineError) as err:
        EngineImages().untag(parse_ref("127.0.0.1:5000/a/b:latest"))
    assert "the engine kept 127.0.0.1:5000/a/b:latest: HTTP 409" in str(err.value)
    assert "\x1b" not in str(err.value)
    server.close()


def test_image_names_are_quoted_as_path_segments():
    assert image_path("127.0.0.1:5000/a/b:tag") == "/images/127.0.0.1:5000/a/b:tag"
    assert image_path("a/b@sha256:00") == "/images/a/b@sha256:00"
    assert image_path("a b?x#y") == "/images/a%20b%3Fx%23y"
