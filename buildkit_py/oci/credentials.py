"""Registry credentials: the first provider that has some for the registry gives them (explicit env variables,
Google Application Default Credentials for Artifact Registry and Container Registry, Docker Hub env variables, then
the docker config with its credential helpers). They are never stored or logged: no message or repr in this module
contains a password, token or helper output."""


from __future__ import annotations

import base64
import binascii
import json
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import RegistryError, show
from ..patterns import lazy_pattern
from .refs import DOCKER_HUB

ENV_USERNAME = "BUILDKIT_PY_REGISTRY_USERNAME"


ENV_PASSWORD = "BUILDKIT_PY_REGISTRY_PASSWORD"


DOCKERHUB_USERNAME = "DOCKERHUB_USERNAME"


DOCKERHUB_TOKEN = "DOCKERHUB_TOKEN"


DOCKERHUB_CONFIG_KEY = "https://index.docker.io/v1/"


HELPER_TIMEOUT = 60.0


HELPER_OUTPUT_MAX = 64 * 1024  # a credential is a few KiB (a JWT); more is a broken helper


_HELPER_NAME = lazy_pattern(r"[A-Za-z0-9][A-Za-z0-9._-]*", re.ASCII)  # a program name, never a path


@dataclass(frozen=True)
class Credentials:
    """A registry login: the username, the password or token (never shown), and where it came from."""

    username: str
    password: str = field(repr=False)
    source: str = ""

    def auth_config(self) -> dict[str, str]:
        return {"username": self.username, "password": self.password}


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
        from ..google import adc

        return adc.default(RegistryError)[0]

    def credentials(self, registry: str) -> Credentials | None:
        if not is_google_registry(registry):
            return None
        from ..google import adc

        token = adc.token(self._google_credentials(), RegistryError, f"for {registry}", fresh=True)
        return Credentials(adc.TOKEN_LOGIN, token, "Google Application Default Credentials")


@dataclass
class DockerHubEnvProvider:
    """DOCKERHUB_USERNAME / DOCKERHUB_TOKEN: for Docker Hub only."""

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
