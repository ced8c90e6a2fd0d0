"""Registry credentials and pushes.

Credentials come from the first provider that has some for the registry: explicit env
variables, Google Application Default Credentials for Artifact Registry / Container Registry
(a fresh token before every push), Docker Hub env variables, then the docker config with its
credential helpers. They are handed to the engine per push and never stored or logged: no
message or repr in this module contains a password, token or helper output.

Push failures arrive as the engine's text (it passes no HTTP status or headers from the
registry). They are classified by what that text states explicitly: the registry's error code
(distribution's errcode, written by the engine as lowercase words, "name invalid: ..."), the
engine's HTTP status phrases ("received unexpected HTTP status: 503 ...", "error parsing HTTP
429 response body"), the engine API's own status, and Go's network error texts.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import random
import re
import selectors
import signal
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .engine import engine_client
from .errors import BuildkitError, EngineError, RegistryError, show
from .notebook import HtmlRepr
from .patterns import lazy_pattern
from .progress import Reporter
from .refs import DOCKER_HUB, ImageRef, is_loopback_host, registry_host

ENV_USERNAME = "BUILDKIT_PY_REGISTRY_USERNAME"
ENV_PASSWORD = "BUILDKIT_PY_REGISTRY_PASSWORD"
DOCKERHUB_USERNAME = "DOCKERHUB_USERNAME"
DOCKERHUB_TOKEN = "DOCKERHUB_TOKEN"
DOCKERHUB_CONFIG_KEY = "https://index.docker.io/v1/"

HELPER_TIMEOUT = 60.0
HELPER_OUTPUT_MAX = 64 * 1024  # a credential is a few KiB (a JWT); more is a broken helper
_HELPER_NAME = lazy_pattern(r"[A-Za-z0-9][A-Za-z0-9._-]*", re.ASCII)  # a program name, never a path

AUTH, TRANSIENT, FATAL = "auth", "transient", "fatal"
MAX_RETRY_AFTER = 300.0  # a registry asking for a longer wait gets a clear error, not a hung build


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)
    source: str = ""

    def auth_config(self) -> dict[str, str]:
        return {"username": self.username, "password": self.password}


@dataclass(frozen=True)
class PushResult(HtmlRepr):
    """A pushed tag: repository@digest, the tag, the digest and the size the registry holds."""

    image: str  # repository@digest
    tag: str
    digest: str
    size: int | None


@dataclass(frozen=True)
class PushFailure:
    """One failed push, as the engine reported it, and what to do about it."""

    message: str  # the engine's text on one line
    kind: str  # AUTH: stop and blame the credentials; TRANSIENT: retry; FATAL: stop
    reason: str  # the registry error code, "HTTP 503", or the network failure
    retry_after: float | None = None  # seconds, when the text asks for a wait
    hint: str = ""  # what to do, where the engine's text does not say


class AuthProvider(Protocol):
    def credentials(self, registry: str) -> Credentials | None: ...


def is_google_registry(registry: str) -> bool:
    return registry.endswith("-docker.pkg.dev") or registry == "gcr.io" or registry.endswith(".gcr.io")


def _env_pair(env: dict[str, str], user_key: str, secret_key: str) -> tuple[str, str] | None:
    user, secret = env.get(user_key), env.get(secret_key)
    if bool(user) != bool(secret):
        given, missing = (user_key, secret_key) if user else (secret_key, user_key)
        raise RegistryError(f"${given} is set but ${missing} is not: set both, or neither")
    return (user, secret) if user and secret else None


@dataclass
class EnvProvider:
    """BUILDKIT_PY_REGISTRY_USERNAME / _PASSWORD: for any registry (CI secrets)."""

    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    def credentials(self, registry: str) -> Credentials | None:
        pair = _env_pair(self.env, ENV_USERNAME, ENV_PASSWORD)
        return Credentials(*pair, f"${ENV_USERNAME}/${ENV_PASSWORD}") if pair else None


@dataclass
class GoogleProvider:
    """Artifact Registry (LOCATION-docker.pkg.dev) and gcr.io: an access token from Application
    Default Credentials, refreshed at every call because tokens last one hour."""

    credentials_factory: Callable[[], Any] | None = None  # returns google.auth credentials

    def _google_credentials(self) -> Any:
        if self.credentials_factory:
            return self.credentials_factory()
        from . import adc

        return adc.default(RegistryError)[0]

    def credentials(self, registry: str) -> Credentials | None:
        if not is_google_registry(registry):
            return None
        from . import adc

        token = adc.token(self._google_credentials(), RegistryError, f"for {registry}", fresh=True)
        return Credentials(adc.TOKEN_LOGIN, token, "Google Application Default Credentials")


@dataclass
class DockerHubEnvProvider:
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    def credentials(self, registry: str) -> Credentials | None:
        if registry != DOCKER_HUB:
            return None
        pair = _env_pair(self.env, DOCKERHUB_USERNAME, DOCKERHUB_TOKEN)
        return Credentials(*pair, f"${DOCKERHUB_USERNAME}/${DOCKERHUB_TOKEN}") if pair else None


_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number",
               bool: "a boolean", type(None): "null"}


@dataclass
class DockerConfigProvider:
    """The docker CLI's config.json: credHelpers, credsStore, then inline auths."""

    path: Path | None = None

    def _path(self) -> Path:
        return self.path or Path(os.environ.get("DOCKER_CONFIG", Path.home() / ".docker")) / "config.json"

    def _config(self, path: Path) -> dict:
        # Error messages name the file and the place, never the content: it holds secrets.
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise RegistryError(f"cannot read the docker config {path}: {exc.strerror}") from None
        try:
            config = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise RegistryError(f"the docker config {path} is not UTF-8 (a bad byte at offset {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise RegistryError(
                f"the docker config {path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
            ) from None
        self._expect(path, "the top level", config, dict)
        for key, kind in (("auths", dict), ("credHelpers", dict), ("credsStore", str)):
            if key in config:
                self._expect(path, show(key), config[key], kind)
        return config

    @staticmethod
    def _expect(path: Path, where: str, value: object, kind: type) -> None:
        if not isinstance(value, kind):
            raise RegistryError(f"the docker config {path}: {where} must be {_JSON_TYPES[kind]}, "
                                f"not {_JSON_TYPES.get(type(value), type(value).__name__)}")

    def credentials(self, registry: str) -> Credentials | None:
        path = self._path()
        config = self._config(path)
        key = DOCKERHUB_CONFIG_KEY if registry == DOCKER_HUB else registry
        helper = config.get("credHelpers", {}).get(key) or config.get("credsStore")
        if helper:
            self._expect(path, f"the credential helper for {show(key)}", helper, str)
            if not _HELPER_NAME.fullmatch(helper):
                raise RegistryError(f"the docker config {path} names credential helper {show(helper)}: a helper is "
                                    "a name (docker-credential-NAME on PATH), ASCII letters, digits, '.', '_', '-'")
            found = _credential_helper(helper, key)
            if found:
                return found
        auths = config.get("auths", {})
        entry_key = key if key in auths else f"https://{key}"
        entry = auths.get(entry_key)
        if entry is None:
            return None
        where = f"auths[{show(entry_key)}]"
        self._expect(path, where, entry, dict)
        encoded = entry.get("auth")
        if not encoded:
            return None
        self._expect(path, f"{where}.auth", encoded, str)
        try:
            user, colon, password = base64.b64decode(encoded, validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            colon = ""
        if not colon:
            raise RegistryError(f"the docker config {path}: {where}.auth is not base64 of USER:PASSWORD in UTF-8; "
                                f"log in again with `docker login {key}`")
        return Credentials(user, password, f"docker config {path}")


def _run_helper(program: str, server: str) -> tuple[int, bytes]:
    """Run `PROGRAM get` with SERVER on stdin: its exit code and stdout plus stderr, bounded in
    time and size (a broken helper that hangs or floods must not hang or exhaust buildkit-py)."""
    try:
        proc = subprocess.Popen([program, "get"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
    except FileNotFoundError:
        raise RegistryError(f"the docker config names credential helper {program}, which is not on PATH") from None
    except OSError as exc:
        raise RegistryError(f"cannot run credential helper {program}: {exc.strerror}") from None
    with proc, selectors.DefaultSelector() as sel:
        try:
            proc.stdin.write(server.encode())  # a few bytes: fits the pipe even if never read
            proc.stdin.close()
        except BrokenPipeError:
            pass
        sel.register(proc.stdout, selectors.EVENT_READ)
        output = bytearray()
        deadline = time.monotonic() + HELPER_TIMEOUT
        problem = None
        while sel.get_map() and problem is None:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                problem = f"did not answer in {HELPER_TIMEOUT:.0f} s"
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                sel.unregister(proc.stdout)
            output += chunk
            if len(output) > HELPER_OUTPUT_MAX:
                problem = f"printed more than {HELPER_OUTPUT_MAX // 1024} KiB"
        if problem is None:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                problem = f"did not exit in {HELPER_TIMEOUT:.0f} s"
        if problem is not None:
            proc.kill()
            raise RegistryError(f"credential helper {program} {problem}")
    return proc.returncode, bytes(output)


def _credential_helper(helper: str, server: str) -> Credentials | None:
    program = f"docker-credential-{helper}"
    code, output = _run_helper(program, server)
    if code < 0:
        raise RegistryError(f"credential helper {program} was killed by {signal.Signals(-code).name}")
    text = output.decode("utf-8", errors="replace").strip()
    if code != 0:
        # docker-credential-helpers' ErrCredentialsNotFound: no credentials for this server.
        if "credentials not found" in text:
            return None
        # Its error line helps, unless it looks like data (a credential) rather than a message.
        first = text.splitlines()[0] if text else ""
        said = f": {show(first)}" if first and not any(c in first for c in "{}\"") else ""
        raise RegistryError(f"credential helper {program} failed with exit code {code}{said}")
    try:
        data = json.loads(output.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise RegistryError(f"credential helper {program} printed {len(output)} bytes that are not JSON; "
                            'the protocol expects {"Username": ..., "Secret": ...}') from None
    bad = [k for k in ("Username", "Secret") if not (isinstance(data, dict) and isinstance(data.get(k), str))]
    if bad:
        raise RegistryError(f"credential helper {program} answered JSON without {' and '.join(bad)} as strings; "
                            'the protocol expects {"Username": ..., "Secret": ...}')
    if not data["Secret"]:
        return None
    return Credentials(data["Username"], data["Secret"], f"credential helper {program}")


def default_providers() -> list[AuthProvider]:
    return [EnvProvider(), GoogleProvider(), DockerHubEnvProvider(), DockerConfigProvider()]


def credentials_for(registry: str, providers: Iterable[AuthProvider] | None = None) -> Credentials | None:
    for provider in providers if providers is not None else default_providers():
        found = provider.credentials(registry)
        if found:
            return found
    return None


# ---------------------------------------------------------------------------------------------
# Classifying push failures

# distribution's errcode registry (registry/api/errcode/register.go and registry/api/v2): the
# engine writes a code as lowercase words, alone or followed by ": MESSAGE".
_ERROR_CODES = {
    "UNAUTHORIZED": AUTH, "DENIED": AUTH,
    "TOOMANYREQUESTS": TRANSIENT, "UNAVAILABLE": TRANSIENT,
    **dict.fromkeys((
        "UNKNOWN",  # also what a 4xx with a body that is not JSON becomes
        "UNSUPPORTED", "DIGEST_INVALID", "SIZE_INVALID", "RANGE_INVALID", "NAME_INVALID", "TAG_INVALID",
        "NAME_UNKNOWN", "MANIFEST_UNKNOWN", "MANIFEST_INVALID", "MANIFEST_UNVERIFIED", "MANIFEST_BLOB_UNKNOWN",
        "BLOB_UNKNOWN", "BLOB_UPLOAD_UNKNOWN", "BLOB_UPLOAD_INVALID", "PAGINATION_NUMBER_INVALID",
    ), FATAL),
}
_CODE_LINE = lazy_pattern(
    "(" + "|".join(sorted((c.lower().replace("_", " ") for c in _ERROR_CODES), key=len, reverse=True))
    + r")(?::\s.*)?", re.ASCII | re.DOTALL,
)
_WRAP = lazy_pattern(r": ")  # where Go joins a context and the error it wraps
# The engine's phrases that carry the registry's HTTP status (distribution's client errors).
_STATUS_PHRASE = lazy_pattern(
    r"received unexpected HTTP status: ([1-5][0-9][0-9])\b|error parsing HTTP ([1-5][0-9][0-9]) response body",
    re.ASCII,
)
# Engine sentences without a code: the registry wants credentials the engine does not have.
_AUTH_SENTENCES = ("no basic auth credentials", "authorization server did not include a token in the response")
# Go's network errors that will not go away by waiting, with what to do instead.
_FATAL_NETWORK = (
    ("no such host", "the registry host name does not resolve"),
    ("server gave HTTP response to HTTPS client",
     "the registry speaks plain HTTP: add it to the engine's insecure-registries"),
    ("x509: ", "the engine does not trust the registry's TLS certificate"),
)
# Go's network errors that may pass (connection failures and timeouts).
_TRANSIENT_NETWORK = lazy_pattern(
    r"connect: connection refused|connection reset by peer|broken pipe|i/o timeout|TLS handshake timeout"
    r"|Client\.Timeout exceeded|timeout awaiting response headers|context deadline exceeded|no route to host"
    r"|network is unreachable|Temporary failure in name resolution|server misbehaving|http2: server sent GOAWAY"
    r"|use of closed network connection|(?:^|: )(?:unexpected )?EOF\Z",
    re.ASCII,
)
# A wait the registry asked for, when its text carries one ("... retry after 30 seconds"); the
# engine passes no Retry-After header, so this is all that can be honoured.
_RETRY_AFTER = lazy_pattern(
    r"retry[-_ ]?after[:= ]\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?)?\b",
    re.ASCII | re.IGNORECASE,
)
_SEVERITY = (AUTH, FATAL, TRANSIENT)  # with several errors in one message, the first of these wins


def _status_kind(status: int) -> str:
    if status in (401, 403):
        return AUTH
    if status in (408, 429) or (500 <= status <= 599 and status != 501):  # 501: the method is not implemented
        return TRANSIENT
    return FATAL


def _classify_line(line: str) -> tuple[str, str, str] | None:
    """(kind, reason, hint) for one error line, or None when it states nothing we know."""
    # A code starting the line; else an explicit status; else a code after a ": " where Go
    # wrapped the error in context ("pushing manifest: tag invalid").
    code = _CODE_LINE.fullmatch(line)
    if not code:
        status = _STATUS_PHRASE.search(line)
        if status:
            number = int(status.group(1) or status.group(2))
            return _status_kind(number), f"HTTP {number}", ""
        code = next(filter(None, (_CODE_LINE.fullmatch(line, m.end()) for m in _WRAP.finditer(line))), None)
    if code:
        name = code.group(1).upper().replace(" ", "_")
        return _ERROR_CODES[name], name, ""
    if any(s in line for s in _AUTH_SENTENCES):
        return AUTH, "no credentials", ""
    for text, hint in _FATAL_NETWORK:
        if text in line:
            return FATAL, text.strip(": "), hint
    network = _TRANSIENT_NETWORK.search(line)
    if network:
        return TRANSIENT, network.group(0).removeprefix(": "), ""
    return None


def _retry_after(text: str) -> float | None:
    found = _RETRY_AFTER.search(text)
    if not found:
        return None
    unit = (found.group(2) or "s").lower()
    scale = 0.001 if unit.startswith(("ms", "milli")) else 60.0 if unit.startswith("m") else 1.0
    return float(found.group(1)) * scale


def classify_push_error(message: str, status: int | None = None) -> PushFailure:
    """What the engine's error text says about a failed push; STATUS is the engine API's HTTP
    status when the failure was an API error rather than a line in the push stream."""
    # "errors:\nA\nB\n" is distribution's list of several errors.
    lines = [ln.strip() for ln in message.strip().splitlines()]
    lines = [ln for ln in lines if ln and ln != "errors:"] or [message.strip()]
    one_line = "; ".join(lines)
    found = [c for c in map(_classify_line, lines) if c]
    if not found and status is not None:
        found = [(_status_kind(status), f"engine HTTP {status}", "")]
    if not found:
        return PushFailure(one_line, FATAL, "unrecognized")
    kind, reason, hint = min(found, key=lambda c: _SEVERITY.index(c[0]))
    return PushFailure(one_line, kind, reason, _retry_after(one_line) if kind == TRANSIENT else None, hint)


def retry_delay(attempt: int, backoff: float, max_delay: float, retry_after: float | None = None,
                rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait after failed attempt ATTEMPT (1-based): exponential, capped, with jitter
    (half fixed, half random, so parallel pushes spread out), and never less than the wait the
    registry asked for."""
    base = min(max_delay, backoff * 2 ** (attempt - 1))
    delay = base / 2 + rand() * base / 2
    return max(delay, retry_after) if retry_after is not None else delay


# ---------------------------------------------------------------------------------------------
# Pushing


def _push_once(client, ref: ImageRef, creds: Credentials | None, reporter: Reporter) -> PushResult | PushFailure:
    from docker.errors import APIError
    from requests.exceptions import RequestException

    result = None
    try:
        stream = client.api.push(
            ref.repository, tag=ref.tag, stream=True, decode=True, auth_config=creds.auth_config() if creds else None
        )
        for chunk in stream:
            # Push failures arrive inside an HTTP 200 stream, as errorDetail.
            if "errorDetail" in chunk or "error" in chunk:
                return classify_push_error(str((chunk.get("errorDetail") or {}).get("message") or chunk.get("error")))
            detail = chunk.get("progressDetail") or {}
            if detail.get("current") is not None:
                reporter.push_progress(chunk.get("id", ""), detail["current"], detail.get("total"), chunk.get("status", ""))
            elif chunk.get("status") and chunk.get("id"):
                reporter.push_status(chunk["id"], chunk["status"])
            aux = chunk.get("aux") or {}
            if aux.get("Digest"):
                result = PushResult(f"{ref.repository}@{aux['Digest']}", ref.tag or "latest", aux["Digest"], aux.get("Size"))
    except APIError as exc:
        return classify_push_error(str(exc.explanation or exc), exc.status_code)
    except RequestException as exc:
        raise EngineError(f"the connection to the Docker engine failed during the push of {ref}: {exc}") from None
    if result is None:
        raise RegistryError(f"the engine finished the push of {ref} without reporting a digest")
    return result


def push(
    ref: ImageRef,
    reporter: Reporter,
    *,
    client=None,
    providers: Iterable[AuthProvider] | None = None,
    attempts: int = 4,
    backoff: float = 1.0,
    max_delay: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
) -> PushResult:
    """Push a local image by its tag. Auth failures and refusals stop at once; rate limits, 5xx
    and network failures are retried, ATTEMPTS in all, with capped exponential back-off."""
    if not ref.tag:
        raise RegistryError(f"{ref} has no tag to push")
    client = client or engine_client()
    providers = list(providers) if providers is not None else default_providers()
    for attempt in range(1, attempts + 1):
        creds = credentials_for(ref.registry, providers)  # fresh each try: tokens expire
        outcome = _push_once(client, ref, creds, reporter)
        if isinstance(outcome, PushResult):
            reporter.message(f"pushed {ref} as {outcome.digest}")
            return outcome
        if outcome.kind == AUTH:
            who = f"the credentials from {creds.source}" if creds else "an anonymous push (no credentials found)"
            raise RegistryError(f"{ref.registry} refused {who}: {outcome.message}")
        if outcome.kind == FATAL:
            raise RegistryError(f"could not push {ref}: {outcome.message}" + (f"; {outcome.hint}" if outcome.hint else ""))
        if attempt == attempts:
            break
        if outcome.retry_after is not None and outcome.retry_after > MAX_RETRY_AFTER:
            raise RegistryError(f"could not push {ref}: {ref.registry} asks to retry after {outcome.retry_after:.0f} s, "
                                f"longer than buildkit-py waits ({MAX_RETRY_AFTER:.0f} s): {outcome.message}")
        delay = retry_delay(attempt, backoff, max_delay, outcome.retry_after)
        reporter.message(f"push of {ref} failed ({outcome.message}); retry {attempt}/{attempts - 1} in {delay:.3g} s")
        sleep(delay)
    raise RegistryError(f"could not push {ref} after {attempt} attempt(s): {outcome.message}")


# ---------------------------------------------------------------------------------------------
# More tags for a pushed image: its manifest under another tag, through the registry's HTTP API

HTTP_TIMEOUT = 30.0
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MANIFEST_TYPES = ", ".join((OCI_INDEX, DOCKER_LIST, "application/vnd.oci.image.manifest.v1+json",
                            "application/vnd.docker.distribution.manifest.v2+json"))
_SHA256 = lazy_pattern(r"sha256:[0-9a-f]{64}", re.ASCII)
_CHALLENGE = lazy_pattern(r'([A-Za-z_]+)="([^"]*)"', re.ASCII)


def _basic(creds: Credentials) -> dict[str, str]:
    from .transport import basic_token

    return {"Authorization": "Basic " + basic_token(creds.username, creds.password)}


class Unreachable(RegistryError):
    """The registry did not answer (refused or reset connection, timeout): a try again may pass."""


class RegistryClient:
    """The registry HTTP API v2 for one repository: anonymous, basic or bearer-token auth as the registry's
    challenge asks (the scope it names: pull, or pull and push), with the credentials this module finds."""

    def __init__(self, ref: ImageRef, providers: Iterable[AuthProvider] | None = None):
        from .transport import Transport

        self.ref, self.providers = ref, providers
        self.transport = Transport(HTTP_TIMEOUT)
        host = "registry-1.docker.io" if ref.registry == DOCKER_HUB else ref.registry
        # Docker talks plain http to loopback registries (insecure by default); so do we.
        self.origin = f"{'http' if is_loopback_host(registry_host(host)) else 'https'}://{host}"
        self.base = f"{self.origin}/v2/{ref.path}"
        self.auth: dict[str, str] = {}
        self.credentials_source: str | None = None  # where the credentials sent came from; None: none sent

    def fork(self) -> RegistryClient:
        """A client for the same repository with the credentials this one holds, on its own connections: for
        requests made at the same time as this one's."""
        other = RegistryClient(self.ref, self.providers)
        other.auth, other.credentials_source = dict(self.auth), self.credentials_source
        return other

    def request(self, method: str, path: str, headers: dict[str, str], data: bytes | None = None):
        """The response; a 401 is answered once with the credentials its challenge asks for. PATH is relative
        to the repository, or a Location the registry gave (absolute, or from its root)."""
        url = path if path.startswith(("http://", "https://")) else self.origin + path if path.startswith("/") \
            else f"{self.base}/{path}"
        # Credentials go to the registry only, never to a host its Location names (a storage redirect).
        same = url.startswith(self.origin + "/")
        for _ in range(2):
            try:
                response = self.transport.request(method, url, {**headers, **(self.auth if same else {})}, data)
            except OSError as exc:
                raise Unreachable(f"cannot reach the registry {self.ref.registry}: {exc}") from None
            if response.status_code != 401:
                return response
            self.auth = self._authorize(response.headers.get("WWW-Authenticate", ""))
        return response

    def _authorize(self, challenge: str) -> dict[str, str]:
        creds = credentials_for(self.ref.registry, self.providers)
        self.credentials_source = creds.source if creds else None
        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "basic":
            if creds is None:
                raise RegistryError(f"{self.ref.registry} wants credentials and none were found (set "
                                    "BUILDKIT_PY_REGISTRY_USERNAME/_PASSWORD, docker login, or Google ADC)")
            return _basic(creds)
        if not challenge:
            raise RegistryError(f"{self.ref.registry} answered HTTP 401 without saying how to authenticate "
                                "(no WWW-Authenticate header)")
        if scheme != "bearer":
            raise RegistryError(f"{self.ref.registry} asks for an authentication buildkit-py does not speak: "
                                f"{show(challenge[:100])}")
        params = dict(_CHALLENGE.findall(challenge))
        realm = params.pop("realm", "")
        if not realm.startswith(("https://", "http://127.", "http://localhost")):
            raise RegistryError(f"{self.ref.registry} names a token service that is not https: {show(realm[:100])}")
        params.setdefault("scope", f"repository:{self.ref.path}:pull")
        try:
            answer = self.transport.request(
                "GET", realm + ("&" if "?" in realm else "?") + urllib.parse.urlencode(params), _basic(creds) if creds else {})
            token = (answer.json().get("token") or answer.json().get("access_token")) if answer.ok else None
        except (OSError, ValueError, AttributeError):
            token = None
        if not token:
            raise RegistryError(f"{self.ref.registry}'s token service refused a token for {params['scope']}"
                                + ("" if creds else " (no credentials found for it)"))
        return {"Authorization": f"Bearer {token}"}


# ---------------------------------------------------------------------------------------------
# Requests of an append (pipeline/fastpath) or an attachment (referrers): tried again where a later try may pass,
# refusals said alike


def json_object(data: bytes, what: str, error: type[RegistryError] | type[BuildkitError] = RegistryError) -> dict:
    """A JSON object a registry gave (a manifest, a config, an attestation), or ERROR naming WHAT it is not."""
    try:
        value = json.loads(data)
    except ValueError:
        raise error(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise error(f"{what} is not a JSON object")
    return value


def refusal(response) -> str:
    return f"HTTP {response.status_code}: {show(response.text[:300])}"


def check_answer(client: RegistryClient, response, ref: ImageRef, action: str, ok: Iterable[int]) -> None:
    if response.status_code in ok:
        return
    if response.status_code in (401, 403):  # said as the engine's push says it
        who = (f"the credentials from {client.credentials_source}" if client.credentials_source
               else "an anonymous request (no credentials found)")
        raise RegistryError(f"{ref.registry} refused {who}: {action} for {ref.repository} ({refusal(response)})")
    raise RegistryError(f"{ref.registry} refused {action} for {ref.repository} ({refusal(response)})")


ATTEMPTS = 4  # as the engine's push: a rate limit, a 5xx or a dropped connection is tried again, with back-off
BACKOFF, MAX_WAIT = 0.5, 30.0
TRANSIENT_STATUSES = frozenset((408, 429, 500, 502, 503, 504))


def send(client: RegistryClient, method: str, path: str, headers: dict[str, str], data: bytes | None = None,
         attempts: int = ATTEMPTS):
    """One request, tried again where the registry's answer (or its silence) says that a later try may pass."""
    attempt = 0
    while True:
        attempt += 1
        wait = None
        try:
            response = client.request(method, path, headers, data)
        except Unreachable:
            if attempt >= attempts:
                raise
        else:
            if response.status_code not in TRANSIENT_STATUSES or attempt >= attempts:
                return response
            asked = response.headers.get("Retry-After", "")
            wait = float(asked) if asked.isdigit() and int(asked) <= MAX_WAIT else None
        time.sleep(retry_delay(attempt, BACKOFF, MAX_WAIT, wait))


def upload_blob(client: RegistryClient, ref: ImageRef, digest: str, data: bytes, *, new: bool = False) -> bool:
    """Upload a blob unless the registry has it; True when it was sent. new: the blob names what was just pushed (an
    attestation of a new image), so the registry cannot have it: not asked first. A failed upload starts again
    from a new upload session (the failed one may be gone)."""
    if not new and send(client, "HEAD", f"blobs/{digest}", {}).status_code == 200:
        return False
    attempt = 0
    while True:
        attempt += 1
        started = send(client, "POST", "blobs/uploads/", {"Content-Length": "0"})
        check_answer(client, started, ref, "a blob upload", (202,))
        location = started.headers.get("Location", "")
        if not location:
            raise RegistryError(f"{ref.registry} started a blob upload without a Location")
        try:
            put = client.request("PUT", location + ("&" if "?" in location else "?") + f"digest={digest}",
                                 {"Content-Type": "application/octet-stream", "Content-Length": str(len(data))}, data)
        except Unreachable:
            if attempt == ATTEMPTS:
                raise
        else:
            if put.status_code not in TRANSIENT_STATUSES or attempt == ATTEMPTS:
                check_answer(client, put, ref, f"blob {digest}", (201, 204))
                return True
        time.sleep(retry_delay(attempt, BACKOFF, MAX_WAIT))


def add_tags(pushed: PushResult, refs: Sequence[ImageRef], reporter: Reporter,
             providers: Iterable[AuthProvider] | None = None) -> tuple[PushResult, ...]:
    """Tag an image already pushed (as `pushed`) under more tags of the same repository: its manifest, read
    once by digest, is PUT under each tag, so no layer is sent or checked again (an engine push of another
    tag checks every layer). Raises RegistryError at the first tag the registry refuses."""
    if not refs:
        return ()
    providers = list(providers) if providers is not None else default_providers()
    client = RegistryClient(refs[0], providers)
    got = client.request("GET", f"manifests/{pushed.digest}", {"Accept": MANIFEST_TYPES})
    body = got.content
    if got.status_code != 200:
        raise RegistryError(f"{refs[0].registry} answered the read of manifest {pushed.digest} with HTTP {got.status_code}")
    if "sha256:" + hashlib.sha256(body).hexdigest() != pushed.digest:  # what is tagged must be what was pushed
        raise RegistryError(f"{refs[0].registry} gave back another manifest than {pushed.digest}")
    media = got.headers.get("Content-Type", "").split(";")[0]
    results = []
    for ref in refs:
        put = client.request("PUT", f"manifests/{ref.tag}", {"Content-Type": media}, body)
        if put.status_code not in (200, 201):
            raise RegistryError(f"{ref.registry} refused the tag {ref} (HTTP {put.status_code}): {show(put.text[:300])}")
        reporter.message(f"tagged {ref} as {pushed.digest} in the registry")
        results.append(PushResult(f"{ref.repository}@{pushed.digest}", ref.tag or "latest", pushed.digest, len(body)))
    return tuple(results)



# ---------------------------------------------------------------------------------------------
# What an image is in its registry: its manifest's digest and the platforms it runs on

@dataclass(frozen=True)
class Manifest:
    digest: str
    media_type: str
    platforms: tuple[str, ...]  # os/arch[/variant] the image runs on


def manifest(ref: ImageRef, hint: str = "") -> Manifest:
    """HEAD the image's manifest; then read the platforms it runs on (the index, or the config blob). hint: what
    ends the error when the registry cannot be reached or read from here."""
    registry = RegistryClient(ref)
    reference = ref.digest or ref.tag or "latest"
    try:
        head = registry.request("HEAD", f"manifests/{reference}", {"Accept": MANIFEST_TYPES})
    except RegistryError as exc:  # unreachable, or no credentials here
        raise RegistryError(f"{exc}{hint}") from None
    if head.status_code == 404:
        raise RegistryError(f"{ref} is not in {ref.registry}: push it first (buildkit-py build --push)")
    if head.status_code in (401, 403):
        raise RegistryError(f"{ref.registry} refused to show {ref} ({head.status_code}): check the credentials" + hint)
    if head.status_code != 200:
        raise RegistryError(f"{ref.registry} answered HEAD of {ref} with HTTP {head.status_code}{hint}")
    digest = ref.digest or head.headers.get("Docker-Content-Digest", "")
    media = head.headers.get("Content-Type", "").split(";")[0]
    body = registry.request("GET", f"manifests/{digest or reference}", {"Accept": MANIFEST_TYPES})
    try:
        data = body.json()
    except ValueError:
        data = {}
    platforms: list[str] = []
    if media in (OCI_INDEX, DOCKER_LIST) or "manifests" in data:
        for item in data.get("manifests") or []:
            p = item.get("platform") or {}
            if p.get("os") and p.get("architecture") and p.get("os") != "unknown":  # unknown: attestations
                platforms.append("/".join(filter(None, (p["os"], p["architecture"], p.get("variant")))))
    else:
        config = (data.get("config") or {}).get("digest", "")
        blob = registry.request("GET", f"blobs/{config}", {"Accept": "*/*"}) if _SHA256.fullmatch(config) else None
        try:
            info = blob.json() if blob is not None and blob.status_code == 200 else {}
        except ValueError:
            info = {}
        if info.get("os") and info.get("architecture"):
            platforms.append("/".join(filter(None, (info["os"], info["architecture"], info.get("variant")))))
    if not _SHA256.fullmatch(digest):
        raise RegistryError(f"{ref.registry} gave no sha256 digest for {ref}")
    return Manifest(digest, media, tuple(platforms))


# ---------------------------------------------------------------------------------------------
# A multi-platform image: an index of the platforms' manifests, assembled in the registry

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


@dataclass(frozen=True)
class IndexEntry:
    """One platform's manifest in an index: the OCI descriptor's fields (image-spec descriptor.md, image-index.md)."""

    platform: str  # os/arch[/variant], as the image's config says it
    digest: str
    media_type: str
    size: int


def read_entry(client: RegistryClient, ref: ImageRef, digest: str, platform: str) -> IndexEntry:
    """The manifest pushed as DIGEST, as an index names it, its platform read from the image's config: a build for
    PLATFORM whose config says another (a base image of the wrong architecture) is refused, not indexed under it."""
    got = send(client, "GET", f"manifests/{digest}", {"Accept": MANIFEST_TYPES})
    check_answer(client, got, ref, f"the read of manifest {digest}", (200,))
    body = got.content
    if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
        raise RegistryError(f"{ref.registry} gave back another manifest than {digest}")
    media = got.headers.get("Content-Type", "").split(";")[0]
    config = (json_object(body, f"the manifest {digest}").get("config") or {}).get("digest", "")
    if media not in (DOCKER_MANIFEST, OCI_MANIFEST) or not _SHA256.fullmatch(config):
        raise RegistryError(f"{ref}@{digest} is not an image manifest ({show(media)}): an index names images")
    blob = send(client, "GET", f"blobs/{config}", {"Accept": "*/*"})
    check_answer(client, blob, ref, f"the read of config {config}", (200,))
    info = json_object(blob.content, f"the image config {config}")
    found = "/".join(str(info.get(k)) for k in ("os", "architecture") if info.get(k))
    wanted = "/".join(platform.split("/")[:2])
    if found != wanted:
        raise RegistryError(f"the {platform} build made a {found or 'platformless'} image ({ref}@{digest}): its base "
                            f"image has no {platform} image (a stand-in imported for another architecture?)")
    variant = info.get("variant") if isinstance(info.get("variant"), str) else None
    return IndexEntry(found + (f"/{variant}" if variant else ""), digest, media, len(body))


def index_bytes(entries: Sequence[IndexEntry]) -> tuple[bytes, str]:
    """The index naming ENTRIES, and its media type: a Docker manifest list where every entry is a Docker manifest
    (what `docker buildx` and the engine's pushes make of those), else an OCI image index. Compact JSON in a fixed
    key order, so the same platforms' manifests always make the same index digest."""
    media = DOCKER_LIST if all(e.media_type == DOCKER_MANIFEST for e in entries) else OCI_INDEX

    def platform(text: str) -> dict[str, str]:
        os_, arch, *variant = text.split("/")
        return {"architecture": arch, "os": os_} | ({"variant": variant[0]} if variant else {})

    document = {"schemaVersion": 2, "mediaType": media, "manifests": [
        {"mediaType": e.media_type, "digest": e.digest, "size": e.size, "platform": platform(e.platform)}
        for e in entries]}
    return json.dumps(document, separators=(",", ":")).encode(), media


def put_index(refs: Sequence[ImageRef], pushed: Sequence[tuple[str, str]], reporter: Reporter,
              providers: Iterable[AuthProvider] | None = None) -> tuple[tuple[PushResult, ...], tuple[IndexEntry, ...]]:
    """The index of the platforms' manifests, (platform, digest) each as pushed into the repository of REFS, PUT
    under every ref (all in that repository: an index names only manifests of its own). Each manifest is read and
    checked first, so nothing is PUT unless every platform's image is there and is of its platform."""
    client = RegistryClient(refs[0], providers)
    entries = tuple(read_entry(client, refs[0], digest, platform) for platform, digest in pushed)
    body, media = index_bytes(entries)
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    results = []
    for ref in refs:
        put = send(client, "PUT", f"manifests/{ref.tag or 'latest'}", {"Content-Type": media}, body)
        check_answer(client, put, ref, f"the index {ref}", (200, 201))
        if put.headers.get("Docker-Content-Digest", digest) != digest:
            raise RegistryError(f"{ref.registry} stored the index {ref} as {put.headers['Docker-Content-Digest']}, "
                                f"not {digest}")
        reporter.message(f"pushed the index {ref}@{digest} ({', '.join(e.platform for e in entries)})")
        results.append(PushResult(f"{ref.repository}@{digest}", ref.tag or "latest", digest, len(body)))
    return tuple(results), entries
