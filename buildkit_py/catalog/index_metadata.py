"""`buildkit-py matrix check|refresh`: base_images/ against the package index's own metadata.

Reads the simple API (PEP 691 JSON, else PEP 503 HTML) of PyPI or the user's mirror, the
wheels' core metadata (PEP 658/714 `.metadata` files where the index serves them, else the
wheel's own METADATA read with HTTP range requests, a few kilobytes of each wheel), and:
verifies every listed release exists with the Pythons listed (from the cpXY tags of its Linux
x86_64 wheels, or Requires-Python for py3 wheels); derives the default CUDA and cuDNN from the
nvidia-*/cuda-toolkit pins of the default wheel; lists releases missing from the data. `refresh`
writes the missing releases to the user's overlay (matrix.overlay_path()), which resolution reads.

Everything the index sends is untrusted: sizes are capped, names and versions parsed with
`packaging`, values checked by the overlay loader's patterns before they are written.
"""

from __future__ import annotations

import datetime
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..clients.transport import USER_AGENT, basic_token
from ..errors import ConfigError, OutputError, PackageIndexError, ResolutionError, show
from ..fsutil import write_atomic
from ..patterns import lazy_pattern
from .matrix import OVERLAY_ENV, SHIPPED, Framework, FrameworkSeries, Matrix, load_matrix, overlay_path, version_key
from .resources import resource_dir

DEFAULT_INDEX = "https://pypi.org/simple/"
TIMEOUT = 20.0  # seconds per request
WORKERS = 8  # metadata requests in flight
MAX_PAGE = 32 << 20  # a project page (torch's is ~0.4 MB)
MAX_METADATA = 4 << 20
TAIL = 64 << 10  # the end of a wheel read first: the zip's central directory is there
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
# What Requires-Python of py3 wheels is checked against. Wheels for older Pythons (TensorFlow 1.15's
# cp35/cp36) are not counted: no image has them, and the data lists 3.7 at the oldest (to say so).
PYTHONS = tuple(f"3.{n}" for n in range(7, 16))
_LINUX_X86_64 = lazy_pattern(r"manylinux(?:1|2010|2014|_[0-9]+_[0-9]+)_x86_64|linux_x86_64", re.ASCII)
_CP = lazy_pattern(r"cp3([0-9]{1,2})", re.ASCII)
_CU = lazy_pattern(r"-cu([0-9]{2})", re.ASCII)


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    requires_python: str | None
    metadata: bool  # the index serves <url>.metadata (PEP 658/714)
    yanked: bool


@dataclass(frozen=True)
class Finding:
    framework: str
    release: str | None
    kind: str  # missing-release, not-on-index, yanked, python, cuda, cudnn, extra-python
    message: str
    problem: bool  # the data contradicts the index (extra-python is only information)


@dataclass(frozen=True)
class MatrixReport:
    index: str  # without credentials
    findings: tuple[Finding, ...]
    checked: tuple[tuple[str, int], ...]  # framework -> releases compared
    overlay: str | None = None  # the file `refresh` wrote
    added: tuple[tuple[str, str], ...] = ()  # (framework, release) written to the overlay

    @property
    def problems(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.problem)

    def to_dict(self) -> dict:
        return {"index": self.index, "checked": dict(self.checked),
                "findings": [f.__dict__ for f in self.findings], "problems": len(self.problems),
                "overlay": self.overlay, "added": [{"framework": f, "release": r} for f, r in self.added]}


# ---------------------------------------------------------------------------------------------
# The index


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


# ---------------------------------------------------------------------------------------------
# What the files say


@dataclass
class _Release:
    wheels: list[tuple[IndexFile, tuple[str, ...]]] = field(default_factory=list)  # Linux x86_64 wheels, Pythons
    yanked: bool = True  # until a file that is not yanked is seen
    tagged: bool = False  # the Pythons come from cpXY tags (not only from a py3 wheel's Requires-Python)


def _releases(files: list[IndexFile]) -> dict[Version, _Release]:
    out: dict[Version, _Release] = {}
    for file in files:
        try:
            _, version, _, tags = parse_wheel_filename(file.filename)
        except InvalidWheelFilename:
            continue
        if version.is_prerelease or version.is_devrelease or version.local:
            continue
        pythons = set()
        for tag in tags:
            cp = _CP.fullmatch(tag.interpreter)
            if (cp and int(cp.group(1)) >= version_key(PYTHONS[0]).minor and tag.abi in (tag.interpreter, tag.interpreter + "m")
                    and _LINUX_X86_64.fullmatch(tag.platform)):
                pythons.add(f"3.{cp.group(1)}")  # cp37m is 3.7's ABI; cp313t (free-threaded) is not counted
            elif tag.interpreter == "py3" and tag.abi == "none" and (tag.platform == "any"
                                                                      or _LINUX_X86_64.fullmatch(tag.platform)):
                pythons.update(_requires_python(file.requires_python))
        if not pythons:
            continue
        entry = out.setdefault(version, _Release())
        entry.wheels.append((file, tuple(sorted(pythons, key=version_key))))
        entry.yanked = entry.yanked and file.yanked
        entry.tagged = entry.tagged or any(_CP.fullmatch(tag.interpreter) for tag in tags)
    return out


def _requires_python(spec: str | None) -> set[str]:
    try:
        allowed = SpecifierSet(spec or "")
    except InvalidSpecifier:
        return set()
    return {p for p in PYTHONS if allowed.contains(p + ".0", prereleases=True)}


def _pythons(release: _Release) -> tuple[str, ...]:
    return tuple(sorted({p for _, ps in release.wheels for p in ps}, key=version_key))


def _default_wheel(release: _Release) -> tuple[IndexFile, str]:
    """The wheel a Linux x86_64 pip picks for the newest Python (GPU builds are manylinux_2_28 where
    a CPU-only manylinux2014 sibling exists, as xgboost has), and that Python."""
    file, pythons = max(release.wheels, key=lambda w: (version_key(w[1][-1]), "_2_28" in w[0].filename))
    return file, pythons[-1]


def _pinned(requirement: Requirement) -> tuple[Version, bool] | None:
    """The version a requirement pins (exact) or starts from (a floor, as jax's plugins pin)."""
    for op in ("==", "===", "~=", ">="):
        for spec in requirement.specifier:
            if spec.operator == op:
                try:
                    return Version(spec.version.rstrip(".*")), op in ("==", "===")
                except InvalidVersion:
                    return None
    return None


@dataclass(frozen=True)
class _Cuda:
    cuda: str | None  # "12.8", or only the major ("13") when nothing says the minor
    cudnn: str | None  # "9.10"
    chase: tuple[tuple[str, str, frozenset[str]], ...] = ()  # (package, version, extras) to read next
    floor: bool = False  # the CUDA pin is a lower bound: pip installs the newest of that major

    def contradicts(self, expected: str) -> bool:
        """Does the data's default CUDA disagree with these pins?"""
        if self.cuda is None:
            return False
        if "." not in self.cuda or self.floor:
            same_major = expected.split(".")[0] == self.cuda.split(".")[0]
            return not same_major or ("." in self.cuda and version_key(expected) < version_key(self.cuda))
        return expected != self.cuda


def _cuda_of(requires: list[str], python: str, extras: frozenset[str]) -> _Cuda:
    """CUDA and cuDNN from nvidia-*/cuda-toolkit pins active on Linux x86_64 with these extras."""
    cuda = cudnn = major = None
    floor = False
    chase = []
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        env = {"platform_system": "Linux", "sys_platform": "linux", "platform_machine": "x86_64",
               "python_version": python, "python_full_version": python + ".0", "os_name": "posix"}
        if req.marker and not any(req.marker.evaluate({**env, "extra": e}) for e in (extras or {""})):
            continue
        name = canonicalize_name(req.name)
        pinned = _pinned(req)
        if name in ("cuda-toolkit", "nvidia-cuda-runtime") or re.fullmatch(r"nvidia-cuda-runtime-cu[0-9]+", name):
            if pinned and len(pinned[0].release) >= 2:
                cuda, floor = f"{pinned[0].release[0]}.{pinned[0].release[1]}", not pinned[1]
        elif re.fullmatch(r"nvidia-cudnn-cu[0-9]+", name):
            if pinned and len(pinned[0].release) >= 2:
                cudnn = f"{pinned[0].release[0]}.{pinned[0].release[1]}"
        elif name.startswith("nvidia-") and (cu := _CU.search(name)):
            major = major or str(int(cu.group(1)))
        elif req.extras and pinned is not None:  # jax[cuda12] -> jax-cuda12-plugin[with-cuda]
            chase.append((name, str(pinned[0]), frozenset(req.extras)))
    return _Cuda(cuda or major, cudnn, tuple(chase), floor)


# ---------------------------------------------------------------------------------------------
# The check


class _Checker:
    def __init__(self, index: Index):
        self.index = index
        self._files: dict[str, list[IndexFile] | None] = {}

    def files(self, project: str) -> list[IndexFile] | None:
        if project not in self._files:
            self._files[project] = self.index.files(project)
        return self._files[project]

    def derive(self, fw: Framework, series: FrameworkSeries | None, release: _Release) -> _Cuda:
        """The default CUDA and cuDNN of a release, from its default wheel's pins (and, for an
        extra that installs a plugin, the plugin's pins)."""
        file, python = _default_wheel(release)
        meta = self.index.metadata(file)
        requires = meta.get_all("Requires-Dist") or []
        spec = (series or fw.series[-1]).install
        extras: frozenset[str] = frozenset()
        if spec.gpu_extra:
            provided = {canonicalize_name(e) for e in meta.get_all("Provides-Extra") or []}
            if "{" in spec.gpu_extra and "cuda" in provided:
                extra = "cuda"  # jax's own default among its cudaNN extras
            else:
                default = (series.default_cuda if series else None) or (series.cuda[-1] if series and series.cuda else "12")
                extra = canonicalize_name(spec.gpu_extra.format(cuda_major=default.split(".")[0], cuda_nodot=""))
            extras = frozenset({extra} & provided)
        found = _cuda_of(requires, python, extras)
        if found.cudnn is None and found.chase:
            package, version, plugin_extras = found.chase[0]
            plugin = self.files(package)
            parsed = _releases(plugin or []).get(Version(version))
            if parsed:
                wheel, py = _default_wheel(parsed)
                inner = _cuda_of(self.index.metadata(wheel).get_all("Requires-Dist") or [], py, plugin_extras)
                found = _Cuda(inner.cuda or found.cuda, inner.cudnn, (), inner.floor if inner.cuda else found.floor)
        return found

    def releases(self, fw: Framework) -> tuple[dict[Version, _Release], dict[Version, _Release]] | None:
        """The framework package's releases, and those of the package whose wheels tell the
        Pythons (jaxlib for jax); None when the index does not have the framework."""
        package = self.files(fw.package)
        if package is None:
            return None
        wheels = package if fw.wheel_package == fw.package else (self.files(fw.wheel_package) or [])
        return _releases(package), _releases(wheels)

    def check(self, fw: Framework) -> tuple[list[Finding], list[tuple[str, str, _Release]], int]:
        """Findings, the releases missing from the data (series label, release, what the index says)
        and how many releases were compared."""
        findings: list[Finding] = []
        both = self.releases(fw)
        if both is None:
            return [Finding(fw.name, None, "not-on-index", f"the index has no project {fw.package}", True)], [], 0
        index, wheel_index = both
        shipped = [(s, r) for s in fw.series if s.origin == SHIPPED for r in s.releases]
        listed = {Version(r) for _, r in shipped}
        for series, release in shipped:
            found = index.get(Version(release))
            applied = series.for_release(release)
            if found is None:
                close = sorted(str(v) for v in index if v.base_version == Version(release).base_version)
                hint = f" (the index has {', '.join(close)})" if close else ""
                findings.append(Finding(fw.name, release, "not-on-index",
                                        f"{fw.name}=={release} has no Linux x86_64 wheel on the index{hint}", True))
                continue
            if found.yanked:
                findings.append(Finding(fw.name, release, "yanked", f"{fw.name}=={release} is yanked on the index", True))
            if Version(release) not in wheel_index:  # jax 0.4.37 installs jaxlib 0.4.36
                findings.append(Finding(fw.name, release, "extra-python", f"{fw.name}=={release}: {fw.wheel_package} has "
                                        f"no {release}, so its Pythons are not checked", False))
                continue
            wheels = wheel_index[Version(release)]
            absent = [p for p in applied.python if p not in _pythons(wheels)]
            extra = [p for p in _pythons(wheels) if p not in applied.python] if wheels.tagged else []
            if absent:
                findings.append(Finding(fw.name, release, "python", f"{fw.name}=={release}: the data lists Python "
                                        f"{', '.join(absent)}, but {fw.wheel_package} {release} has no wheel for it", True))
            if extra:
                findings.append(Finding(fw.name, release, "extra-python", f"{fw.name}=={release}: {fw.wheel_package} "
                                        f"also has wheels for Python {', '.join(extra)}", False))
        oldest = min(listed) if listed else Version("0")
        missing = [(f"{v.major}.{v.minor}", str(v), wheel_index.get(v, r)) for v, r in sorted(index.items())
                   if v > oldest and v not in listed and not r.yanked]
        for _, release, found in missing:
            findings.append(Finding(fw.name, release, "missing-release", f"{fw.name}=={release} is on the index "
                                    f"(Python {', '.join(_pythons(found))}) but not in base_images/frameworks/{fw.source}",
                                    True))
        return findings, missing, len(shipped)

    def check_cuda(self, fw: Framework) -> list[Finding]:
        """The newest release of each GPU series: its default wheel's CUDA/cuDNN against the data."""
        both = self.releases(fw) if fw.gpu else None
        index = both[0] if both else {}
        jobs = []
        for series in fw.series:
            if series.origin != SHIPPED or not series.cuda or not fw.gpu:
                continue
            release = max(series.releases, key=version_key)
            found = index.get(Version(release))
            if found is not None:
                jobs.append((series.for_release(release), release, found))
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            derived = list(pool.map(lambda job: self.derive(fw, job[0], job[2]), jobs))
        findings = []
        for (series, release, _), got in zip(jobs, derived, strict=True):
            expected = series.default_cuda or series.cuda[-1]
            if got.contradicts(expected):
                pins = f"CUDA {got.cuda} or newer" if got.floor else f"CUDA {got.cuda}"
                findings.append(Finding(fw.name, release, "cuda", f"{fw.name}=={release}: the default wheel's pins say "
                                        f"{pins}, the data's default is {expected}", True))
            if got.cudnn and series.cudnn and series.install.bundles_cuda and got.cudnn != series.cudnn:
                findings.append(Finding(fw.name, release, "cudnn", f"{fw.name}=={release}: the default wheel's pins say "
                                        f"cuDNN {got.cudnn}, the data says {series.cudnn}", True))
        return findings


def _derive_all(checker: _Checker, fw: Framework, missing: list[tuple[str, str, _Release]]) -> list[_Cuda]:
    """The default CUDA and cuDNN of each missing release (read in parallel)."""
    if not fw.gpu:
        return [_Cuda(None, None) for _ in missing]
    index = checker.releases(fw)[0]
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(lambda m: checker.derive(fw, None, index[Version(m[1])]), missing))


def _overlay_series(fw: Framework, missing: list[tuple[str, str, _Release]], derived: list[_Cuda],
                    matrix: Matrix) -> list[dict]:
    tagged = [r.minor for r in matrix.cuda]
    groups: dict[str, dict] = {}
    for (label, release, found), got in zip(missing, derived, strict=True):
        entry = groups.setdefault(label, {"series": label, "releases": [], "python": list(_pythons(found))})
        entry["releases"].append(release)
        entry["python"] = sorted(set(entry["python"]) & set(_pythons(found)), key=version_key)
        cuda = got.cuda
        if cuda and "." not in cuda:  # only the major is known (xgboost's NCCL pin): its oldest tagged minor
            cuda = next((m for m in tagged if m.split(".")[0] == cuda), None)
        if fw.gpu and cuda and cuda in tagged:
            entry.update(cuda=[cuda], default_cuda=cuda)
            if got.cudnn:
                entry["cudnn"] = got.cudnn
    return [g for g in groups.values() if g["python"]]


def run(matrix: Matrix | None, index: Index, frameworks: tuple[str, ...] = (), refresh: bool = False,
        overlay: Path | None = None) -> MatrixReport:
    matrix = matrix or load_matrix()
    names = []
    for name in frameworks or tuple(sorted(matrix.frameworks)):
        fw = matrix.framework(name)
        if fw is None:
            raise ResolutionError(f"FRAMEWORK: unknown framework {show(name)}; known: {', '.join(sorted(matrix.frameworks))}")
        names.append(fw.name)
    checker = _Checker(index)
    findings: list[Finding] = []
    checked = []
    written: dict[str, list[dict]] = {}
    added = []
    for name in names:
        fw = matrix.frameworks[name]
        found, missing, count = checker.check(fw)
        findings += found
        findings += checker.check_cuda(fw)
        checked.append((name, count))
        if refresh and missing:
            entries = _overlay_series(fw, missing, _derive_all(checker, fw, missing), matrix)
            if entries:
                written[name] = entries
                added += [(name, r) for e in entries for r in e["releases"]]
    path = None
    if refresh:
        path = overlay or overlay_path()
        _write_overlay(path, index, written)
    return MatrixReport(index.url, tuple(findings), tuple(checked), str(path) if path else None, tuple(added))


def _write_overlay(path: Path, index: Index, entries: dict[str, list[dict]]) -> None:
    shipped = resource_dir("base_images").resolve()
    if path.resolve().is_relative_to(shipped.parent):
        raise ConfigError(f"the overlay {path} would be written inside buildkit-py's installation ({shipped.parent}); "
                          "set it to a file of your own", field=f"${OVERLAY_ENV} / $XDG_CONFIG_HOME")
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    document = {"generated": stamp, "index": index.url, "frameworks": entries}
    header = ("# Written by `buildkit-py matrix refresh` from the package index's metadata: releases newer than\n"
              "# buildkit-py's shipped data. Resolution reads it and says so; refresh again rather than edit it.\n")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, header + yaml.safe_dump(document, sort_keys=False))
    except OSError as exc:
        raise OutputError(f"cannot write the overlay {path}: {exc.strerror or exc}") from None
    # Read back through the loader: what it refuses, resolution would refuse.
    load_matrix(overlay=path)
