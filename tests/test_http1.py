"""The HTTP/1.1 connection the registry client and the engine probe use (clients/http1.py), against a server that
answers each request with bytes written here: every way an answer's body may end, what a kept-alive connection does
after each, and answers that are not HTTP."""

from __future__ import annotations

import socket
import threading

import pytest

from buildkit_py.clients.http1 import Connection, Disconnected, Headers, ProtocolError
from buildkit_py.clients.transport import Transport, TransportError


class Scripted:
    """A loopback server: the connection it accepts gets ANSWERS, one per request read (its head and a
    Content-Length body), then is closed; what each request was is kept in `requests`."""

    def __init__(self, *answers: bytes):
        self.answers, self.requests = list(answers), []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn, conn.makefile("rb") as reader:
            for answer in self.answers:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(
                    b"content-length:")), 0)
                self.requests.append(head + reader.read(length))
                conn.sendall(answer)

    def connection(self) -> Connection:
        return Connection("127.0.0.1", self.port, 5, authority=f"127.0.0.1:{self.port}")


def test_bodies_by_length_and_by_chunks_keep_the_connection_for_the_next_request():
    server = Scripted(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nDocker-Content-Digest: sha256:ab\r\n\r\nhello",
                      b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
                      b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: x\r\n\r\n",
                      b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
    conn = server.connection()
    first = conn.request("GET", "/v2/", {"User-Agent": "t"}, None)
    assert (first.status, first.reason, first.content, first.will_close) == (200, "OK", b"hello", False)
    assert first.headers["docker-content-digest"] == first.headers.get("Docker-Content-Digest") == "sha256:ab"
    second = conn.request("PUT", "/v2/x", {"Content-Type": "application/json"}, b'{"a":1}')
    assert (second.status, second.content, second.will_close) == (201, b"abcde", False)
    assert conn.request("DELETE", "/v2/y", {}, None).content == b""
    sent = server.requests
    assert sent[0].startswith(b"GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % server.port)
    assert b"Accept-Encoding: identity\r\n" in sent[0] and b"Content-Length" not in sent[0]
    assert sent[1].endswith(b"Content-Length: 7\r\n\r\n{\"a\":1}")


def test_head_and_no_content_answers_have_no_body_whatever_their_length_says():
    server = Scripted(b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", b"HTTP/1.1 304 Not Modified\r\n\r\n",
                      b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    conn = server.connection()
    assert conn.request("HEAD", "/v2/blobs/a", {}, None).content == b""
    assert conn.request("GET", "/v2/a", {}, None).status == 304
    assert conn.request("GET", "/v2/b", {}, None).content == b"ok"  # the connection was left at the right byte


def test_a_body_that_ends_with_the_connection_and_answers_that_close_it():
    server = Scripted(b"HTTP/1.0 200 OK\r\nX-A: 1\r\n   folded\r\n\r\nuntil the end")
    answer = server.connection().request("GET", "/", {}, None)
    assert (answer.content, answer.will_close) == (b"until the end", True)
    assert answer.headers.get("x-a") == "1 folded"
    server = Scripted(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    conn = server.connection()
    assert conn.request("GET", "/", {}, None).will_close and conn.sock is None


def test_an_interim_answer_is_skipped():
    server = Scripted(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nLocation: /up/1\r\nContent-Length: 0\r\n\r\n")
    answer = server.connection().request("POST", "/v2/x/blobs/uploads/", {}, b"")
    assert (answer.status, answer.headers["Location"]) == (202, "/up/1")


@pytest.mark.parametrize("answer, said", [
    (b"SSH-2.0-OpenSSH_9.2\r\n", "not an HTTP/1.x answer"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "5 bytes before the body did"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", "not a Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "not a chunk size"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "not a header line"),
])
def test_an_answer_that_is_not_http_is_a_protocol_error(answer, said):
    with pytest.raises(ProtocolError, match=said):
        Scripted(answer).connection().request("GET", "/", {}, None)


def test_a_connection_closed_without_an_answer_is_disconnected():
    server = Scripted()  # accepts, reads nothing, closes
    with pytest.raises((Disconnected, ConnectionResetError, BrokenPipeError)):
        server.connection().request("GET", "/", {}, None)


@pytest.mark.parametrize("headers, target", [({"Authorization": "Bearer a\r\nX-Evil: 1"}, "/"),
                                             ({"X-A\r\nB": "v"}, "/"), ({}, "/a b\r\nX: y")])
def test_a_line_break_in_a_header_or_the_target_is_refused_before_anything_is_sent(headers, target):
    server = Scripted(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    with pytest.raises(ValueError, match="line break"):
        server.connection().request("GET", target, headers, None)
    assert server.requests == []


def test_the_transport_says_a_refused_header_as_a_transport_error():
    server = Scripted(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    with pytest.raises(TransportError, match="line break"):
        Transport(5).request("GET", f"http://127.0.0.1:{server.port}/v2/", {"Authorization": "a\nb"})


def test_headers_are_looked_up_without_regard_to_case_and_keep_their_order():
    headers = Headers([("Link", "<a>"), ("content-type", "x"), ("LINK", "<b>")])
    assert headers.get("Content-Type") == headers["CONTENT-TYPE"] == "x"
    assert headers.get_all("link") == ["<a>", "<b>"] and headers.get("Link") == "<a>"
    assert headers["missing"] is None and headers.get("missing", "d") == "d"
    assert "content-type" in headers and "missing" not in headers
    assert headers.items()[0] == ("Link", "<a>")
