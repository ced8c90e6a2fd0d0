"""Registry credentials and pushes.

Credentials come from the first provider that has some for the registry: explicit env
variables, Google Application Default Credentials for Artifact Registry / Container Registry
(a fresh token before every push), Docker Hub env variables, then the docker config with its
credential helpers. They are handed to the engine per push and never stored or logged.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .engine import engine_client
from .errors import RegistryError
from .progress import Reporter
from .refs import DOCKER_HUB, ImageRef

ENV_USERNAME = "BUILDKIT_PY_REGISTRY_USERNAME"
ENV_PASSWORD = "BUILDKIT_PY_REGISTRY_PASSWORD"
DOCKERHUB_USERNAME = "DOCKERHUB_USERNAME"
DOCKERHUB_TOKEN = "DOCKERHUB_TOKEN"
DOCKERHUB_CONFIG_KEY = "https://index.docker.io/v1/"
GOOGLE_USERNAME = "oauth2accesstoken"
GOOGLE_SCOPE = "https://www.googleapis.com/auth/cloud-platform"

_TRANSIENT = ("connection refused", "connection reset", "timeout", "timed out", "eof", "temporarily unavailable",
              "502", "503", "504", "500 internal", "tls handshake", "broken pipe", "no route")
_AUTH = ("unauthorized", "authentication required", "denied", "forbidden", "401", "403")


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)
    source: str = ""

    def auth_config(self) -> dict[str, str]:
        return {"username": self.username, "password": self.password}


@dataclass(frozen=True)
class PushResult:
    image: str  # repository@digest
    tag: str
    digest: str
    size: int | None


class AuthProvider(Protocol):
    def credentials(self, registry: str) -> Credentials | None: ...


def is_google_registry(registry: str) -> bool:
    return registry.endswith("-docker.pkg.dev") or registry == "gcr.io" or registry.endswith(".gcr.io")


@dataclass
class EnvProvider:
    """BUILDKIT_PY_REGISTRY_USERNAME / _PASSWORD: for any registry (CI secrets)."""

    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    def credentials(self, registry: str) -> Credentials | None:
        user, password = self.env.get(ENV_USERNAME), self.env.get(ENV_PASSWORD)
        if user and password:
            return Credentials(user, password, f"${ENV_USERNAME}/${ENV_PASSWORD}")
        return None


@dataclass
class GoogleProvider:
    """Artifact Registry (LOCATION-docker.pkg.dev) and gcr.io: an access token from Application
    Default Credentials, refreshed at every call because tokens last one hour."""

    credentials_factory: Callable[[], Any] | None = None  # returns google.auth credentials

    def _google_credentials(self) -> Any:
        if self.credentials_factory:
            return self.credentials_factory()
        try:
            import google.auth
            from google.auth.exceptions import DefaultCredentialsError
        except ImportError:
            raise RegistryError("pushing to Google registries needs google-auth: pip install google-auth") from None
        try:
            creds, _ = google.auth.default(scopes=[GOOGLE_SCOPE])
        except DefaultCredentialsError as exc:
            raise RegistryError(
                f"no Google Application Default Credentials ({exc}); run `gcloud auth application-default login` "
                "or set GOOGLE_APPLICATION_CREDENTIALS"
            ) from None
        return creds

    def credentials(self, registry: str) -> Credentials | None:
        if not is_google_registry(registry):
            return None
        creds = self._google_credentials()
        try:
            from google.auth.transport.requests import Request
        except ImportError:  # a test's credentials need no transport
            Request = None  # noqa: N806
        try:
            creds.refresh(Request() if Request else None)
        except Exception as exc:  # google.auth raises several types; all mean "no token"
            raise RegistryError(f"could not refresh the Google access token for {registry}: {exc}") from None
        return Credentials(GOOGLE_USERNAME, creds.token, "Google Application Default Credentials")


@dataclass
class DockerHubEnvProvider:
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    def credentials(self, registry: str) -> Credentials | None:
        user, token = self.env.get(DOCKERHUB_USERNAME), self.env.get(DOCKERHUB_TOKEN)
        if registry == DOCKER_HUB and user and token:
            return Credentials(user, token, f"${DOCKERHUB_USERNAME}/${DOCKERHUB_TOKEN}")
        return None


@dataclass
class DockerConfigProvider:
    """The docker CLI's config.json: credHelpers, credsStore, then inline auths."""

    path: Path | None = None

    def _config(self) -> dict:
        path = self.path or Path(os.environ.get("DOCKER_CONFIG", Path.home() / ".docker")) / "config.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise RegistryError(f"cannot read the docker config {path}: {exc}") from None

    def credentials(self, registry: str) -> Credentials | None:
        config = self._config()
        key = DOCKERHUB_CONFIG_KEY if registry == DOCKER_HUB else registry
        helper = config.get("credHelpers", {}).get(key) or config.get("credsStore")
        if helper:
            found = _credential_helper(helper, key)
            if found:
                return found
        entry = config.get("auths", {}).get(key) or config.get("auths", {}).get(f"https://{key}")
        if entry and entry.get("auth"):
            user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
            return Credentials(user, password, "docker config auths")
        return None


def _credential_helper(helper: str, server: str) -> Credentials | None:
    program = f"docker-credential-{helper}"
    try:
        proc = subprocess.run([program, "get"], input=server, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise RegistryError(f"the docker config names credential helper {program}, which is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise RegistryError(f"credential helper {program} did not answer in 60 s") from None
    if proc.returncode != 0:
        return None  # helpers exit 1 with "credentials not found"
    data = json.loads(proc.stdout)
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


def _classify(message: str) -> str:
    text = message.lower()
    if any(word in text for word in _AUTH):
        return "auth"
    if any(word in text for word in _TRANSIENT):
        return "transient"
    return "fatal"


def _push_once(client, ref: ImageRef, creds: Credentials | None, reporter: Reporter) -> PushResult:
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
                raise RegistryError(chunk.get("errorDetail", {}).get("message") or chunk.get("error"))
            detail = chunk.get("progressDetail") or {}
            if detail.get("current") is not None:
                reporter.push_progress(chunk.get("id", ""), detail["current"], detail.get("total"), chunk.get("status", ""))
            elif chunk.get("status") and chunk.get("id"):
                reporter.push_status(chunk["id"], chunk["status"])
            aux = chunk.get("aux") or {}
            if aux.get("Digest"):
                result = PushResult(f"{ref.repository}@{aux['Digest']}", ref.tag or "latest", aux["Digest"], aux.get("Size"))
    except APIError as exc:
        raise RegistryError(str(exc.explanation or exc)) from None
    except RequestException as exc:
        raise RegistryError(f"connection to the engine failed: {exc}") from None
    if result is None:
        raise RegistryError("the engine finished the push without reporting a digest")
    return result


def push(
    ref: ImageRef,
    reporter: Reporter,
    *,
    client=None,
    providers: Iterable[AuthProvider] | None = None,
    attempts: int = 4,
    backoff: float = 1.0,
) -> PushResult:
    """Push a local image by its tag; retry transient failures with exponential back-off."""
    if not ref.tag:
        raise RegistryError(f"{ref} has no tag to push")
    client = client or engine_client()
    providers = list(providers) if providers is not None else default_providers()
    last = ""
    for attempt in range(1, attempts + 1):
        creds = credentials_for(ref.registry, providers)  # fresh each try: tokens expire
        try:
            result = _push_once(client, ref, creds, reporter)
            reporter.message(f"pushed {ref} as {result.digest}")
            return result
        except RegistryError as exc:
            last = exc.message
            kind = _classify(last)
            if kind == "auth":
                who = f"the credentials from {creds.source}" if creds else "an anonymous push (no credentials found)"
                raise RegistryError(f"{ref.registry} refused {who}: {last}") from None
            if kind == "fatal" or attempt == attempts:
                break
            delay = backoff * 2 ** (attempt - 1)
            reporter.message(f"push of {ref} failed ({last}); retry {attempt}/{attempts - 1} in {delay:.0f} s")
            time.sleep(delay)
    raise RegistryError(f"could not push {ref} after {attempt} attempt(s): {last}")
