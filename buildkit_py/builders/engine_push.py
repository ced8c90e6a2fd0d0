"""The Docker engine's push of a built image, for the builder that builds into the engine.

Push failures arrive as the engine's text (it passes no HTTP status or headers from the registry). They are
classified by what that text states explicitly: the registry's error code (distribution's errcode, written by the
engine as lowercase words, "name invalid: ..."), the engine's HTTP status phrases ("received unexpected HTTP
status: 503 ...", "error parsing HTTP 429 response body"), the engine API's own status, and Go's network error
texts."""


from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..clients.engine import engine_client
from ..errors import EngineError, RegistryError
from ..oci.client import PushResult, retry_delay
from ..oci.credentials import AuthProvider, Credentials, credentials_for, default_providers
from ..oci.refs import ImageRef
from ..patterns import lazy_pattern
from ..progress import Reporter

AUTH, TRANSIENT, FATAL = "auth", "transient", "fatal"


MAX_RETRY_AFTER = 300.0  # a registry asking for a longer wait gets a clear error, not a hung build


@dataclass(frozen=True)
class PushFailure:
    """One failed push, as the engine reported it, and what to do about it."""

    message: str  # the engine's text on one line
    kind: str  # AUTH: stop and blame the credentials; TRANSIENT: retry; FATAL: stop
    reason: str  # the registry error code, "HTTP 503", or the network failure
    retry_after: float | None = None  # seconds, when the text asks for a wait
    hint: str = ""  # what to do, where the engine's text does not say


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


@dataclass(frozen=True)
class Retry:
    """How a push tries again: ATTEMPTS in all, with capped exponential back-off (and jitter), waiting with SLEEP."""

    attempts: int = 4
    backoff: float = 1.0
    max_delay: float = 30.0
    sleep: Callable[[float], None] = time.sleep


def push(ref: ImageRef, reporter: Reporter, *, client=None, providers: Iterable[AuthProvider] | None = None,
         retry: Retry = Retry()) -> PushResult:
    """Push a local image by its tag. Auth failures and refusals stop at once; rate limits, 5xx
    and network failures are retried as RETRY says."""
    attempts = retry.attempts
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
        delay = retry_delay(attempt, retry.backoff, retry.max_delay, outcome.retry_after)
        reporter.message(f"push of {ref} failed ({outcome.message}); retry {attempt}/{attempts - 1} in {delay:.3g} s")
        retry.sleep(delay)
    raise RegistryError(f"could not push {ref} after {attempt} attempt(s): {outcome.message}")
