"""The standard-library HTTP client the registry API goes through: redirects, credentials, kept-alive connections
the server dropped, proxies, refusals, against real HTTP servers on loopback."""

from __future__ import annotations

import base64
import http.server
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from buildkit_py.clients.transport import USER_AGENT, Transport, TransportError
from conftest import LoopbackServer


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    close_after = False

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.command, self.path, dict(self.headers), body))
        status, headers, payload = self.routes.get(self.path.split("?")[0], (404, {}, b"no"))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        if self.close_after:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_HEAD = _answer

    def log_message(self, *args) -> None:
        pass


@contextmanager
def server(routes: dict[str, tuple[int, dict[str, str], bytes]], close_after: bool = False) -> Iterator[tuple[str, list]]:
    handler = type("H", (Handler,), {"routes": routes, "seen": [], "close_after": close_after})
    httpd = LoopbackServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler.seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_reads_follow_redirects_and_credentials_stay_with_the_first_host():
    with server({"/blob": (200, {}, b"layer")}) as (storage, storage_seen):
        with server({"/v2/r/blobs/x": (307, {"Location": f"{storage}/blob?sig=1"}, b""),
                     "/same": (302, {"Location": "/v2/r/blobs/x"}, b"")}) as (registry, registry_seen):
            t = Transport(10)
            got = t.request("GET", f"{registry}/same", {"Authorization": "Bearer secret"})
    assert got.status_code == 200 and got.content == b"layer" and got.url == f"{storage}/blob?sig=1"
    assert [h.get("Authorization") for _, _, h, _ in registry_seen] == ["Bearer secret", "Bearer secret"]
    assert storage_seen[0][2].get("Authorization") is None, "the token went to another host"
    assert {h["User-Agent"] for _, _, h, _ in registry_seen + storage_seen} == {USER_AGENT}


def test_writes_follow_only_redirects_that_keep_the_body():
    with server({"/moved": (302, {"Location": "/put"}, b""), "/kept": (307, {"Location": "/put"}, b""),
                 "/put": (201, {}, b"")}) as (base, seen):
        t = Transport(10)
        assert t.request("PUT", f"{base}/moved", {}, b"body").status_code == 302
        assert t.request("PUT", f"{base}/kept", {}, b"body").status_code == 201
    assert [(m, p, b) for m, p, _, b in seen] == [("PUT", "/moved", b"body"), ("PUT", "/kept", b"body"),
                                                  ("PUT", "/put", b"body")]


def test_a_connection_the_server_closed_is_opened_again():
    with server({"/a": (200, {}, b"1")}, close_after=True) as (base, seen):
        t = Transport(10)
        assert [t.request("GET", f"{base}/a").content for _ in range(3)] == [b"1", b"1", b"1"]
    assert len(seen) == 3


def test_clients_reuse_each_others_idle_connections_and_requests_at_once_get_their_own():
    ports: list[int] = []
    gate = threading.Barrier(3, timeout=10)

    class Counting(Handler):
        routes = {"/a": (200, {}, b"1"), "/wait": (200, {}, b"2")}
        seen: list = []

        def _answer(self) -> None:
            ports.append(self.client_address[1])
            if self.path == "/wait":
                gate.wait()  # all three are in flight together
            super()._answer()

        do_GET = _answer

    httpd = LoopbackServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        assert [Transport(10).request("GET", f"{base}/a").content for _ in range(3)] == [b"1"] * 3
        assert len(set(ports)) == 1, "a new client opened a connection while one was idle"
        ports.clear()
        replies: list[bytes] = []
        threads = [threading.Thread(target=lambda: replies.append(Transport(10).request("GET", f"{base}/wait").content))
                   for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert replies == [b"2"] * 3 and len(set(ports)) == 3
        opened = set(ports)
        ports.clear()
        Transport(10).request("GET", f"{base}/a")
        assert len(ports) == 1 and ports[0] in opened  # on one of the three, kept alive
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_refused_connection_and_a_redirect_loop_are_transport_errors():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(TransportError, match="ConnectionRefused"):
        Transport(5).request("GET", f"http://127.0.0.1:{port}/")
    with server({"/loop": (302, {"Location": "/loop"}, b"")}) as (base, _):
        with pytest.raises(TransportError, match="redirects"):
            Transport(5).request("GET", f"{base}/loop")
    with pytest.raises(TransportError, match="not an http"):
        Transport(5).request("GET", "file:///etc/passwd")


def test_plain_http_goes_through_the_proxy_the_environment_names(monkeypatch):
    with server({"http://registry.invalid/v2/": (200, {}, b"via proxy")}) as (proxy, seen):
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        got = Transport(5).request("GET", "http://registry.invalid/v2/")
    assert got.content == b"via proxy" and seen[0][1] == "http://registry.invalid/v2/"


@pytest.fixture
def tls_server(tmp_path):
    """An https server on loopback with its own CA-less self-signed certificate for 127.0.0.1."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    handler = type("H", (Handler,), {"routes": {"/v2/": (200, {}, b"over tls")}, "seen": [], "close_after": False})
    httpd = LoopbackServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{httpd.server_address[1]}", cert
    httpd.shutdown()
    httpd.server_close()


def test_https_is_verified_against_the_ca_bundle_requests_would_use(tls_server, monkeypatch):
    host, cert = tls_server
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
    assert Transport(5).request("GET", f"https://{host}/v2/").content == b"over tls"
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")  # certifi's bundle does not know this certificate
    with pytest.raises(TransportError, match="CERTIFICATE_VERIFY_FAILED"):
        Transport(5).request("GET", f"https://{host}/v2/")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert) + ".missing")
    with pytest.raises(TransportError, match="cannot use the CA bundle"):
        Transport(5).request("GET", f"https://{host}/v2/")


def test_https_goes_through_the_proxy_as_a_tunnel_with_the_proxys_credentials(tls_server, monkeypatch):
    host, cert = tls_server
    tunnels: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def proxy() -> None:
        client, _ = listener.accept()
        request = b""
        while b"\r\n\r\n" not in request:
            request += client.recv(4096)
        tunnels.append(request)
        target_host, _, target_port = request.split(b" ")[1].decode().rpartition(":")
        upstream = socket.create_connection((target_host, int(target_port)))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")

        def pipe(a: socket.socket, b: socket.socket) -> None:
            try:
                while chunk := a.recv(65536):
                    b.sendall(chunk)
            except OSError:
                pass
            finally:
                b.close()

        threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
        pipe(client, upstream)

    threading.Thread(target=proxy, daemon=True).start()
    monkeypatch.setenv("HTTPS_PROXY", f"http://user%40corp:p%3Ass@127.0.0.1:{listener.getsockname()[1]}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
    assert Transport(5).request("GET", f"https://{host}/v2/").content == b"over tls"
    assert tunnels[0].startswith(f"CONNECT {host} HTTP/1.".encode())
    assert f"Proxy-Authorization: Basic {base64.b64encode(b'user@corp:p:ss').decode()}".encode() in tunnels[0]
    listener.close()
