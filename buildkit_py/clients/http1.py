"""One HTTP/1.1 connection, on sockets alone: a request written whole, its answer read whole (a Content-Length body,
a chunked one, or one that ends with the connection). http.client would do as much, but it loads the email
package to read headers (about 15 ms of every registry command's start-up, as much as a code edit's whole upload);
so would h11. What the registry API and the engine's socket need, no more: no 1xx but skipping them, no trailers
kept, no request body but bytes."""

from __future__ import annotations

import socket
from typing import Any

MAX_LINE = 65536  # http.client's limits: a longer status or header line is no HTTP server's
MAX_HEADERS = 100
_NO_BODY = frozenset((204, 304))


class ProtocolError(OSError):
    """The server's answer is not HTTP/1.x as the connection reads it."""


class Disconnected(ConnectionError):
    """The server closed the connection before answering: a kept-alive one it had dropped (another try may pass)."""


class Headers:
    """An answer's headers in their order; get() and [] look a name up without regard to case ([] gives None for
    a name not there, as http.client's headers do)."""

    def __init__(self, items: list[tuple[str, str]]):
        self._items = items

    def get(self, name: str, default: Any = None) -> Any:
        lower = name.lower()
        return next((v for k, v in self._items if k.lower() == lower), default)

    def __getitem__(self, name: str) -> str | None:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def items(self) -> list[tuple[str, str]]:
        return list(self._items)

    def get_all(self, name: str) -> list[str]:
        lower = name.lower()
        return [v for k, v in self._items if k.lower() == lower]

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


class Answer:
    """A response read whole: status, reason, headers, body, and whether the server will close the connection."""

    def __init__(self, status: int, reason: str, headers: Headers, content: bytes, will_close: bool):
        self.status, self.reason, self.headers, self.content, self.will_close = status, reason, headers, content, will_close


def _checked(text: str, what: str) -> str:
    # A CR or LF in a header or the target would start another header or request (header injection).
    if any(c in text for c in "\r\n\0"):
        raise ValueError(f"the request's {what} holds a line break or NUL: {text[:80]!r}")
    return text


class Connection:
    """A kept-alive connection to HOST:PORT (made at the first request), whose requests name AUTHORITY as their Host:
    TLS with CONTEXT, through a proxy's CONNECT tunnel to TUNNEL ((host, port, the headers the proxy wants)); or on a
    socket already connected (SOCK: the engine's unix socket)."""

    def __init__(self, host: str, port: int, timeout: float, *, authority: str, context: Any = None,
                 tunnel: tuple[str, int, dict[str, str]] | None = None, sock: socket.socket | None = None):
        self.host, self.port, self.timeout, self.authority = host, port, timeout, _checked(authority, "Host")
        self.context, self.tunnel = context, tunnel
        self.sock = sock
        self._reader = sock.makefile("rb") if sock is not None else None

    def _connect(self) -> None:
        # An ASCII name as bytes: a str one goes through the idna codec, whose import alone costs a millisecond.
        sock = socket.create_connection((self.host.encode() if self.host.isascii() else self.host, self.port),
                                        self.timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request is written whole: send it now
            server = self.host
            if self.tunnel is not None:
                server = self._open_tunnel(sock)
            if self.context is not None:
                sock = self.context.wrap_socket(sock, server_hostname=server)
        except BaseException:
            sock.close()
            raise
        self.sock, self._reader = sock, sock.makefile("rb")

    def _open_tunnel(self, sock: socket.socket) -> str:
        host, port, headers = self.tunnel or ("", 0, {})
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        lines = [f"CONNECT {_checked(target, 'tunnel')} HTTP/1.1", f"Host: {target}",
                 *(f"{_checked(k, 'header name')}: {_checked(v, 'header')}" for k, v in headers.items())]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        reader = sock.makefile("rb")
        try:
            status, reason, _, _ = self._head(reader)
        finally:
            reader.close()
        if status != 200:
            raise ProtocolError(f"the proxy refused the tunnel to {target}: {status} {reason}")
        return host

    def request(self, method: str, target: str, headers: dict[str, str], body: bytes | None) -> Answer:
        """Send the request and read the answer whole. Raises Disconnected where the server closed the connection
        without a word, ProtocolError for an answer that is not HTTP, OSError for the rest."""
        if self.sock is None:
            self._connect()
        assert self.sock is not None and self._reader is not None
        names = {k.lower() for k in headers}
        lines = [f"{method} {_checked(target, 'target')} HTTP/1.1", f"Host: {self.authority}"]
        if "accept-encoding" not in names:
            lines.append("Accept-Encoding: identity")  # a body read as sent
        lines += [f"{_checked(k, 'header name')}: {_checked(str(v), 'header')}" for k, v in headers.items()]
        if body is not None and "content-length" not in names:
            lines.append(f"Content-Length: {len(body)}")
        try:
            self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        except UnicodeEncodeError:
            raise ValueError("a request header holds a character that is not Latin-1") from None
        while True:
            status, reason, items, version = self._head(self._reader)
            if not 100 <= status < 200:
                break  # 100 Continue and the like: the answer follows
        found = Headers(items)
        content, to_close = self._body(method, status, found)
        connection = (found.get("Connection") or "").lower()
        will_close = to_close or "close" in connection or (version == "HTTP/1.0" and "keep-alive" not in connection)
        if will_close:
            self.close()
        return Answer(status, reason, found, content, will_close)

    @staticmethod
    def _head(reader) -> tuple[int, str, list[tuple[str, str]], str]:
        line = reader.readline(MAX_LINE + 1)
        if not line:
            raise Disconnected("the server closed the connection without an answer")
        if len(line) > MAX_LINE:
            raise ProtocolError("the status line is too long")
        version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise ProtocolError(f"not an HTTP/1.x answer: {line[:80]!r}")
        items: list[tuple[str, str]] = []
        while True:
            raw = reader.readline(MAX_LINE + 1)
            if len(raw) > MAX_LINE:
                raise ProtocolError("a header line is too long")
            if raw in (b"\r\n", b"\n", b""):
                break
            text = raw.decode("latin-1").rstrip("\r\n")
            if text[:1] in (" ", "\t") and items:  # an obsolete folded line continues the header before it
                items[-1] = (items[-1][0], items[-1][1] + " " + text.strip())
                continue
            name, colon, value = text.partition(":")
            if not colon:
                raise ProtocolError(f"not a header line: {raw[:80]!r}")
            items.append((name.strip(), value.strip()))
            if len(items) > MAX_HEADERS:
                raise ProtocolError(f"more than {MAX_HEADERS} headers")
        return int(code), reason, items, version

    def _body(self, method: str, status: int, headers: Headers) -> tuple[bytes, bool]:
        """The body, and whether it ended with the connection."""
        reader = self._reader
        if method == "HEAD" or status in _NO_BODY:
            return b"", False
        if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
            parts = []
            while True:
                size_line = reader.readline(MAX_LINE + 1)
                try:
                    size = int(size_line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise ProtocolError(f"not a chunk size: {size_line[:40]!r}") from None
                if size == 0:
                    while reader.readline(MAX_LINE + 1) not in (b"\r\n", b"\n", b""):
                        pass  # trailers: none is kept
                    return b"".join(parts), False
                parts.append(self._exactly(size))
                reader.readline(MAX_LINE + 1)  # the chunk's CRLF
        length = headers.get("Content-Length")
        if length is not None:
            try:
                size = int(length)
            except ValueError:
                raise ProtocolError(f"not a Content-Length: {length[:40]!r}") from None
            if size < 0:
                raise ProtocolError(f"not a Content-Length: {length[:40]!r}")
            return self._exactly(size), False
        return reader.read(), True  # ends with the connection

    def _exactly(self, size: int) -> bytes:
        data = self._reader.read(size)
        if len(data) != size:
            raise ProtocolError(f"the connection ended {size - len(data)} bytes before the body did")
        return data

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None
