"""A registry behind a token service, on loopback, as Artifact Registry, Docker Hub and GHCR put theirs: a request
without a token the service issued gets a Bearer challenge naming the repository and the actions it needs; the
service (`/token` on the same address) issues a token for any basic credentials, good for the scope asked (a
repository and its actions), and counts how often it is asked.
Its address can stand behind latency.far, which it names in its challenges and Locations (the Host asked for), so
that the token service is as far away as the registry. Used by edit.py (what a login costs a code edit) and by
tests/test_oci_image.py (one login per command)."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class TokenRegistry:
    """The counts (challenged: 401s given; issued: the tokens) and switches (open: every request passes, as for an
    engine's first push; refusing: token requests refused before the service issues again) of one stand-in."""

    def __init__(self) -> None:
        self.issued: list[str] = []
        self.granted: dict[str, str] = {}  # token: the scope it was issued for
        self.challenged = 0
        self.open = False
        self.refusing = 0
        self.address = ""


def _body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() != "chunked":  # an engine's PATCH is chunked
        return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
    data = b""
    while size := int(handler.rfile.readline().split(b";")[0], 16):
        data += handler.rfile.read(size + 2)[:size]
    handler.rfile.readline()
    return data


@contextmanager
def token_registry(upstream: str) -> Iterator[TokenRegistry]:
    """UPSTREAM (HOST:PORT, a plain registry) behind a token service, for the block."""
    state = TokenRegistry()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _reply(self, status: int, headers: dict[str, str], data: bytes) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", headers.get("Content-Length", str(len(data))))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _any(self) -> None:
            body, host = _body(self), self.headers.get("Host", state.address)
            if self.path.startswith("/token?"):
                if state.refusing:
                    state.refusing -= 1
                    self._reply(403, {"Content-Type": "application/json"}, b'{"errors":[]}')
                    return
                scope = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("scope", [""])[0]
                state.issued.append(uuid.uuid4().hex)
                state.granted[state.issued[-1]] = scope
                self._reply(200, {"Content-Type": "application/json"}, json.dumps({"token": state.issued[-1]}).encode())
                return
            name = self.path.removeprefix("/v2/").split("/blobs/")[0].split("/manifests/")[0]
            actions = "pull" if self.command in ("GET", "HEAD") else "pull,push"
            granted = state.granted.get(self.headers.get("Authorization", "").removeprefix("Bearer "), "")
            # A token is good for the repository and the actions its scope named: a pull token's push is challenged.
            if not state.open and not (granted.startswith(f"repository:{name}:") and
                                       set(actions.split(",")) <= set(granted.rsplit(":", 1)[1].split(","))):
                state.challenged += 1
                self._reply(401, {"WWW-Authenticate": f'Bearer realm="http://{host}/token",service="stand-in",'
                                                      f'scope="repository:{name}:{actions}"'}, b"{}")
                return
            connection = http.client.HTTPConnection(upstream, timeout=60)
            connection.request(self.command, self.path, body=body or None, headers={
                k: v for k, v in self.headers.items()
                if k.lower() not in ("authorization", "content-length", "host", "transfer-encoding")})
            answer = connection.getresponse()
            data = answer.read()
            headers = {k: v.replace(f"http://{upstream}/", f"http://{host}/") if k.lower() == "location" else v
                       for k, v in answer.getheaders() if k.lower() not in ("transfer-encoding", "connection")}
            connection.close()
            self._reply(answer.status, headers, data)

        do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _any

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.address = f"127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
