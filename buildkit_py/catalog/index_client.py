"""The package index as `matrix check|refresh` reads it: a PEP 503/691 simple API (PyPI or the user's mirror), its
project pages (JSON, else HTML anchors) and the wheels' core metadata (PEP 658/714 `.metadata` files, else the
wheel's own METADATA read with HTTP range requests).

Everything the index sends is untrusted: sizes are capped, and credentials go only to the index's own host, never
into messages.
"""

from __future__ import annotations

import email.parser
import html.parser
import json
import re
import ssl
import struct
import urllib.error
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from ..clients.transport import USER_AGENT, basic_token
from ..errors import PackageIndexError, show

DEFAULT_INDEX = "https://pypi.org/simple/"
TIMEOUT = 20.0  # seconds per request
MAX_PAGE = 32 << 20  # a project page (torch's is ~0.4 MB)
MAX_METADATA = 4 << 20
TAIL = 64 << 10  # the end of a wheel read first: the zip's central directory is there
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


@dataclass(frozen=True)
class IndexFile:
    """One file of a project's index page: its name, URL and Requires-Python, and its .metadata and yanked flags."""

    filename: str
    url: str
    requires_python: str | None
    metadata: bool  # the index serves <url>.metadata (PEP 658/714)
    yanked: bool


class _Links(html.parser.HTMLParser):
    """PEP 503 anchors with their data- attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, dict[str, str | None]]] = []
        self._href: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href, self._text = dict(attrs), []

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append(("".join(self._text).strip(), self._href))
            self._href = None


class Index:
    """One package index (a PEP 503/691 simple API), read with timeouts and size caps."""

    def __init__(self, url: str, *, timeout: float = TIMEOUT, ca_file: Path | None = None):
        try:
            parts = urllib.parse.urlsplit(url)
            netloc = _host(parts)
        except ValueError:  # a bad port or IPv6 literal
            netloc = ""
        if parts.scheme not in ("http", "https") or not netloc:
            raise PackageIndexError(f"the index URL must be an http(s) URL with a host, got {show(_public(url))}")
        self._auth = None
        if parts.username is not None:  # credentials go only to the index's own host, never into messages
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            self._auth = "Basic " + basic_token(user, password)
        self.url = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/") + "/", "", ""))
        self._host = netloc
        self.timeout = timeout
        try:
            self._context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
        except (OSError, ssl.SSLError) as exc:
            raise PackageIndexError(f"cannot use the CA bundle {ca_file}: {exc}") from None

    def _get(self, url: str, headers: dict[str, str], limit: int) -> tuple[bytes, int, dict[str, str]]:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise PackageIndexError(f"the index links to {show(url[:200])}, not an http(s) URL")
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **headers})
        if self._auth and parts.netloc == self._host:
            request.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._context) as response:
                body = response.read(limit + 1)
                if len(body) > limit:
                    raise PackageIndexError(f"{_public(url)} sent more than {limit} bytes; refused")
                return body, response.status, {k.lower(): v for k, v in response.headers.items()}
        except urllib.error.HTTPError as exc:
            raise PackageIndexError(f"{_public(url)} answered HTTP {exc.code} {exc.reason}", status=exc.code) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PackageIndexError(f"cannot reach the package index at {_public(url)}: {reason} (timeout "
                                    f"{self.timeout:g} s); check the network, or set pip_index_url / PIP_INDEX_URL "
                                    "to a reachable mirror") from None

    def files(self, project: str) -> list[IndexFile] | None:
        """The project's files, or None when the index does not have the project."""
        url = urllib.parse.urljoin(self.url, canonicalize_name(project) + "/")
        try:
            body, _, headers = self._get(url, {"Accept": ACCEPT}, MAX_PAGE)
        except PackageIndexError as exc:
            if exc.status == 404:
                return None
            raise
        kind = headers.get("content-type", "").split(";")[0].strip()
        text = body.decode("utf-8", errors="replace")
        if kind == "application/vnd.pypi.simple.v1+json":
            try:
                return self._from_json(url, json.loads(text))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise PackageIndexError(f"{_public(url)} sent a malformed PEP 691 page: {exc}") from None
        return self._from_html(url, text)

    @staticmethod
    def _from_json(url: str, data: dict) -> list[IndexFile]:
        out = []
        for item in data["files"]:
            meta = item.get("core-metadata", item.get("dist-info-metadata"))
            out.append(IndexFile(str(item["filename"]), urllib.parse.urljoin(url, str(item["url"])),
                                 item.get("requires-python"), bool(meta), bool(item.get("yanked"))))
        return out

    @staticmethod
    def _from_html(url: str, text: str) -> list[IndexFile]:
        parser = _Links()
        parser.feed(text)
        out = []
        for name, attrs in parser.links:
            href = attrs.get("href")
            if not href:
                continue
            meta = attrs.get("data-core-metadata", attrs.get("data-dist-info-metadata"))
            out.append(IndexFile(name, urllib.parse.urljoin(url, href).split("#", 1)[0], attrs.get("data-requires-python"),
                                 meta is not None and meta != "false", "data-yanked" in attrs))
        return out

    def metadata(self, file: IndexFile) -> email.message.Message:
        """The wheel's core metadata: the .metadata file, else read from the wheel by range requests."""
        if file.metadata:
            body, _, _ = self._get(file.url + ".metadata", {}, MAX_METADATA)
        else:
            body = self._metadata_from_wheel(file)
        return email.parser.BytesParser().parsebytes(body)

    def _range(self, url: str, start: int, end: int | None, limit: int) -> tuple[bytes, int]:
        """Bytes start..end (end None: the last -start bytes) and the file's size."""
        spec = f"bytes={start}" if end is None else f"bytes={start}-{end}"  # "bytes=-65536": the last bytes
        body, status, headers = self._get(url, {"Range": spec}, limit)
        match = re.fullmatch(r"bytes [0-9]+-[0-9]+/([0-9]+)", headers.get("content-range", ""), re.ASCII)
        if status != 206 or not match:
            raise PackageIndexError(f"{_public(url)}: the index serves no metadata files (PEP 658) and does not answer "
                                    "range requests, so the wheel's metadata cannot be read without downloading it")
        return body, int(match.group(1))

    def _metadata_from_wheel(self, file: IndexFile) -> bytes:
        where = f"{file.filename} ({_public(file.url)})"
        try:
            return self._read_zip_metadata(file, where)
        except (struct.error, zlib.error, IndexError, ValueError) as exc:  # the bytes the index sent are no wheel
            raise PackageIndexError(f"{where} is not a readable wheel: {exc}") from None

    def _read_zip_metadata(self, file: IndexFile, where: str) -> bytes:
        tail, size = self._range(file.url, -TAIL, None, TAIL)
        base = size - len(tail)
        end = tail.rfind(b"PK\x05\x06")
        if end < 0 or end + 22 > len(tail):
            raise PackageIndexError(f"{where} is not a zip file")
        cd_size, cd_offset = struct.unpack("<II", tail[end + 12:end + 20])
        locator = end - 20
        if (cd_offset == 0xFFFFFFFF or cd_size == 0xFFFFFFFF) and locator >= 0 and tail[locator:locator + 4] == b"PK\x06\x07":
            record = struct.unpack("<Q", tail[locator + 8:locator + 16])[0]
            if record < base:
                raise PackageIndexError(f"{where}: zip64 record outside the bytes read")
            cd_size, cd_offset = struct.unpack("<QQ", tail[record - base + 40:record - base + 56])
        if cd_size > MAX_PAGE:
            raise PackageIndexError(f"{where}: a central directory of {cd_size} bytes; refused")
        directory = (tail[cd_offset - base:cd_offset - base + cd_size] if cd_offset >= base
                     else self._range(file.url, cd_offset, cd_offset + cd_size - 1, cd_size)[0])
        i = 0
        while i + 46 <= len(directory) and directory[i:i + 4] == b"PK\x01\x02":
            method, = struct.unpack("<H", directory[i + 10:i + 12])
            compressed, = struct.unpack("<I", directory[i + 20:i + 24])
            name_len, extra_len, comment_len = struct.unpack("<HHH", directory[i + 28:i + 34])
            offset, = struct.unpack("<I", directory[i + 42:i + 46])
            name = directory[i + 46:i + 46 + name_len].decode("utf-8", errors="replace")
            i += 46 + name_len + extra_len + comment_len
            if re.fullmatch(r"[^/]+\.dist-info/METADATA", name) and compressed <= MAX_METADATA:
                # The local header repeats the name; its extra field may differ from the directory's.
                span = 30 + name_len + extra_len + compressed + 4096
                head, _ = self._range(file.url, offset, offset + span - 1, span)
                if head[:4] != b"PK\x03\x04":
                    raise PackageIndexError(f"{where}: no zip entry at the offset its directory names")
                local_name, local_extra = struct.unpack("<HH", head[26:30])
                data = head[30 + local_name + local_extra:30 + local_name + local_extra + compressed]
                if len(data) != compressed:
                    raise PackageIndexError(f"{where}: METADATA is cut short")
                if method == 0:
                    return data
                if method == 8:
                    inflater = zlib.decompressobj(-15)
                    out = inflater.decompress(data, MAX_METADATA)
                    if inflater.unconsumed_tail:
                        raise PackageIndexError(f"{where}: METADATA larger than {MAX_METADATA} bytes; refused")
                    return out
                raise PackageIndexError(f"{where}: METADATA compressed with zip method {method}")
        raise PackageIndexError(f"{where} has no .dist-info/METADATA")


def _host(parts: urllib.parse.SplitResult) -> str:
    """host[:port] without credentials (IPv6 literals in brackets)."""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return host + (f":{parts.port}" if parts.port else "") if host else ""


def _public(url: str) -> str:
    """A URL without its credentials, for messages and reports."""
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.username is None and parts.password is None:
            return url
        return urllib.parse.urlunsplit((parts.scheme, _host(parts), parts.path, parts.query, ""))
    except ValueError:
        return "(an unparsable URL)"
