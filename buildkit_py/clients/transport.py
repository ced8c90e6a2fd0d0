"""HTTP/1.1 for the registry API on the standard library (http1.py: importing `requests`, or http.client's email
package, costs a code-only edit as much as its whole upload). Kept-alive connections per origin, shared by the
process's clients; TLS verified against
the CA bundle that `requests` would use (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, else certifi's); HTTP(S)_PROXY and
NO_PROXY as `requests` reads them; redirects followed for reads, with no credentials sent to another host."""

from __future__ import annotations

import json
import os
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any

from ..version import __version__
from .http1 import Connection, Disconnected, Headers

USER_AGENT = f"buildkit-py/{__version__}"  # every request this tool makes says who sends it
MAX_REDIRECTS = 5
_REDIRECTS = frozenset((301, 302, 303, 307, 308))


class TransportError(OSError):
    """No answer: refused, reset or timed-out connection, bad TLS, a redirect loop."""


@dataclass(frozen=True)
class Response:
    """An HTTP response, read whole: status, headers, body, and the URL that answered."""

    status_code: int
    headers: Headers  # case-insensitive .get
    content: bytes
    url: str

    @property
    def ok(self) -> bool:
        return self.status_code < 400

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


def basic_token(user: str, password: str) -> str:
    """The base64 `user:password` of HTTP Basic authentication (and of a Docker auth file's `auth`)."""
    import base64

    return base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _ca_file() -> str | None:
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        if os.environ.get(name):
            return os.environ[name]
    try:
        import certifi
    except ImportError:
        return None  # the system's store
    return certifi.where()


def _proxy(scheme: str, host: str) -> str | None:
    if not any(k.lower() in ("http_proxy", "https_proxy", "all_proxy") for k in os.environ):
        return None  # the common case, without urllib.request's imports
    import urllib.request

    if urllib.request.proxy_bypass(host):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(scheme) or proxies.get("all")


def unreachable(urls: list[str] | tuple[str, ...], seconds: float) -> str | None:
    """Why none of these URLs' servers (or the proxy each goes through) takes a connection: each refused it or could
    not be looked up, all tried at once, within `seconds`; None where one took it, where one had not answered by
    then, or where there is nothing to try (a file: index). What a resolver would find after its retries (5 s and
    more) is known here in milliseconds."""
    import socket

    origins = {}
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return None
        proxy = _proxy(parts.scheme, parts.hostname)
        target = urllib.parse.urlsplit(proxy) if proxy else parts
        try:
            port = _port(target, target.scheme)
        except TransportError:
            return None  # a port the resolver reads its own way
        origins[(target.hostname or "", port)] = None
    if not origins:
        return None
    answered = threading.Event()
    failures: dict[tuple[str, int], str] = {}

    def attempt(origin: tuple[str, int]) -> None:
        try:
            socket.create_connection(origin, timeout=seconds).close()
            answered.set()
        except OSError as exc:
            failures[origin] = exc.strerror or type(exc).__name__
            if len(failures) == len(origins):
                answered.set()

    for origin in origins:
        threading.Thread(target=attempt, args=(origin,), daemon=True).start()
    # Not answered in time is not known to be unreachable (a slow lookup, a far index): the resolver finds out.
    if not answered.wait(seconds) or len(failures) < len(origins):
        return None
    host, port = next(iter(origins))
    return f"{host}:{port}: {failures[(host, port)]}"


def _port(parts: urllib.parse.SplitResult, scheme: str) -> int:
    try:
        return parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise TransportError(f"not a port: {parts.netloc[:100]}") from None


class _Pool:
    """The process's idle kept-alive connections, by origin and the settings they were opened with (proxy, CA
    bundle): a request takes one or opens its own, and hands it back once answered. Requests made at once each get
    a connection; the next ones reuse them warm, whichever client sends them (an append's attestations go out on
    the connections its image went up on, with no new handshake)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[tuple, list[tuple[Connection, dict[str, str] | None]]] = {}
        self._tls: dict[str | None, Any] = {}  # CA bundle -> its SSL context, made once

    def take(self, key: tuple) -> tuple[Connection, dict[str, str] | None] | None:
        with self._lock:
            idle = self._idle.get(key)
            return idle.pop() if idle else None

    def give(self, key: tuple, entry: tuple[Connection, dict[str, str] | None]) -> None:
        with self._lock:
            self._idle.setdefault(key, []).append(entry)

    def tls(self, cafile: str | None) -> Any:
        with self._lock:
            if cafile not in self._tls:
                import ssl

                try:
                    self._tls[cafile] = ssl.create_default_context(cafile=cafile)
                except (OSError, ssl.SSLError) as exc:
                    raise TransportError(f"cannot use the CA bundle {cafile}: {exc}") from None
            return self._tls[cafile]


_POOL = _Pool()


class Transport:
    """HTTP requests on the process's kept-alive connections (_Pool); safe to use from several threads at once."""

    def __init__(self, timeout: float):
        self.timeout = timeout

    def _connection(self, scheme: str, netloc: str) -> tuple[tuple, tuple[Connection, dict[str, str] | None]]:
        """The pool's key and a connection for it: (the connection, for plain http through a proxy the headers the
        proxy wants (its request lines then name the whole URL); None: straight to the host, or tunnelled)."""
        proxy = _proxy(scheme, netloc.rsplit(":", 1)[0])
        cafile = _ca_file() if scheme == "https" else None
        key = (scheme, netloc, proxy, cafile)
        entry = _POOL.take(key)
        if entry is not None:
            entry[0].timeout = self.timeout
            if entry[0].sock is not None:
                entry[0].sock.settimeout(self.timeout)
            return key, entry
        proxy_auth: dict[str, str] = {}
        target = urllib.parse.urlsplit(f"//{netloc}")
        host, port = target.hostname or "", _port(target, scheme)
        if proxy:
            parts = urllib.parse.urlsplit(proxy)
            if parts.username is not None:
                proxy_auth = {"Proxy-Authorization": "Basic " + basic_token(urllib.parse.unquote(parts.username),
                                                                            urllib.parse.unquote(parts.password or ""))}
            via, via_port = parts.hostname or "", _port(parts, parts.scheme or "http")
            if scheme == "https":  # a tunnel through the proxy, TLS inside it to the registry
                conn = Connection(via, via_port, self.timeout, authority=netloc, context=_POOL.tls(cafile),
                                  tunnel=(host, port, proxy_auth))
            else:  # plain http: the proxy is asked for the whole URL
                conn = Connection(via, via_port, self.timeout, authority=netloc)
            return key, (conn, proxy_auth if scheme == "http" else None)
        conn = Connection(host, port, self.timeout, authority=netloc,
                          context=_POOL.tls(cafile) if scheme == "https" else None)
        return key, (conn, None)

    def _once(self, method: str, url: str, headers: dict[str, str], data: bytes | None) -> Response:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise TransportError(f"not an http(s) URL: {url[:200]}")
        key, entry = self._connection(parts.scheme, parts.netloc)
        conn, via_proxy = entry
        target = url if via_proxy is not None else urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
        headers = {**headers, **(via_proxy or {})}
        body = data if data is not None else (b"" if method in ("POST", "PUT", "PATCH") else None)
        for attempt in (1, 2):
            try:
                answer = conn.request(method, target, headers, body)
                break
            except (Disconnected, BrokenPipeError, ConnectionResetError) as exc:
                conn.close()  # a kept-alive connection the server had closed: once more on a new one
                if attempt == 2:
                    raise TransportError(f"{type(exc).__name__}: {exc}") from None
            except (OSError, ValueError) as exc:  # ValueError: a header that would split the request
                conn.close()
                raise TransportError(f"{type(exc).__name__}: {exc}") from None
        if not answer.will_close:
            _POOL.give(key, entry)
        return Response(answer.status, answer.headers, answer.content, url)

    def request(self, method: str, url: str, headers: dict[str, str] | None = None, data: bytes | None = None) -> Response:
        """The answer, after redirects: reads follow every kind; writes follow only 307/308 (which keep the body).
        Authorization is not sent to another origin than the first."""
        headers = {"User-Agent": USER_AGENT, **(headers or {})}
        origin = urllib.parse.urlsplit(url)[:2]
        for _ in range(MAX_REDIRECTS + 1):
            response = self._once(method, url, headers, data)
            location = response.headers.get("Location")
            follows = method in ("GET", "HEAD") or response.status_code in (307, 308)
            if response.status_code not in _REDIRECTS or not location or not follows:
                return response
            url = urllib.parse.urljoin(url, location)
            if urllib.parse.urlsplit(url)[:2] != origin:
                headers.pop("Authorization", None)
        raise TransportError(f"more than {MAX_REDIRECTS} redirects")
