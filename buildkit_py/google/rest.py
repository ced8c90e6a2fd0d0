"""What the clients of Google's REST APIs (Vertex AI, Cloud Logging, Cloud Build) share: the base URL a flag or the
environment may change, Application Default Credentials and their access tokens, and Google's error shape on one line."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..errors import ConfigError, ServiceError, show
from ..errors import quoted as _clean  # the services' text on one line
from ..oci.refs import is_loopback_host
from ..patterns import lazy_pattern
from . import adc

_URL = lazy_pattern(r"(https?)://([A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:]{2,45}\])(?::([0-9]{1,5}))?/?", re.ASCII)


def service_endpoint(given: str | None, env: dict[str, str], *, flag: str, env_name: str, default: str) -> str:
    """A Google API's base URL: the flag, else the environment variable, else the default.
    Plain http only to this machine: a bearer token never crosses a network unencrypted."""
    text, field = (given, flag) if given is not None else (env.get(env_name), f"${env_name}")
    if not text:
        return default
    match = _URL.fullmatch(text) if len(text) <= 300 else None
    if not match or (match[3] and not 0 < int(match[3]) < 65536):
        raise ConfigError(f"{show(text)} is not allowed: https://HOST[:PORT] (no path), or http:// to a loopback "
                          "address", field=field)
    if match[1] == "http" and not is_loopback_host(match[2].strip("[]").lower()):
        raise ConfigError(f"{show(text)} is not allowed: plain http only to a loopback address (127.0.0.1, [::1], "
                          "localhost); use https", field=field)
    return text.rstrip("/")


T = TypeVar("T")
SERVER_ERRORS = (500, 502, 503, 504)  # a retry may find the service well again


def retrying(attempt: Callable[[], T], *, retries: int, backoff: float,
             before_retry: Callable[[], T | None] | None = None) -> T:
    """attempt(), tried again up to `retries` times after a transient ServiceError (a timeout, a dropped connection,
    a 429 or a 5xx), waiting backoff, then twice as long each time; before_retry may find the result meanwhile (a
    create that did arrive)."""
    for n in range(retries + 1):
        try:
            return attempt()
        except ServiceError as exc:
            if not exc.transient or n == retries:
                raise
        time.sleep(backoff * 2 ** n)
        if before_retry is not None:
            found = before_retry()
            if found is not None:
                return found
    raise AssertionError("unreachable")


def default_credentials() -> tuple[Any, str | None]:
    """(google-auth credentials, their project) from Application Default Credentials."""
    return adc.default(ServiceError)


def access_token(credentials: Any) -> str:
    """A current access token of google-auth credentials, refreshed when it has expired."""
    return adc.token(credentials, ServiceError, "from the credentials")


def error_line(http_status: int, body: str, hints: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """Google's error shape (google.rpc.Status with its details) as one line, and its status name; hints: what to do
    about a refusal, by its status (each service has its own)."""
    try:
        error = json.loads(body)["error"]
        if not isinstance(error, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        return f"HTTP {http_status}: {_clean(body[:300]) or 'no message'}", None
    status = error.get("status") if isinstance(error.get("status"), str) else None
    parts = [f"{http_status} {_clean(status or '')}".strip() + f": {_clean(error.get('message', ''))}"]
    for detail in error.get("details") or []:
        if not isinstance(detail, dict):
            continue
        kind = str(detail.get("@type", "")).rsplit("/", 1)[-1]
        if kind == "google.rpc.BadRequest":
            parts += [f"field {_clean(v.get('field'))}: {_clean(v.get('description'))}"
                      for v in detail.get("fieldViolations") or [] if isinstance(v, dict)]
        elif kind == "google.rpc.QuotaFailure":
            parts += [f"quota {_clean(v.get('subject'))}: {_clean(v.get('description'))}"
                      for v in detail.get("violations") or [] if isinstance(v, dict)]
        elif kind == "google.rpc.ErrorInfo":
            meta = detail.get("metadata") if isinstance(detail.get("metadata"), dict) else {}
            extra = ", ".join(f"{_clean(k)}={_clean(v)}" for k, v in sorted(meta.items()))
            parts.append(f"reason {_clean(detail.get('reason'))}" + (f" ({extra})" if extra else ""))
    hint = (hints or {}).get(status or "")
    if hint:
        parts.append(hint)
    return "; ".join(parts), status
