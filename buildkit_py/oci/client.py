"""The distribution API's client: a registry's token challenge answered, requests tried again where a later try
may pass, refusals said alike; blob uploads, and more tags for a pushed image."""


from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildkitError, OutputError, RegistryError, show
from ..fsutil import asked_once, cache_dir, in_background, write_atomic
from ..patterns import lazy_pattern
from ..progress import HtmlRepr, Reporter
from .credentials import AuthProvider, Credentials, credentials_for, default_providers
from .media import MANIFEST_TYPES
from .refs import DOCKER_HUB, ImageRef, is_loopback_host, registry_host


@dataclass(frozen=True)
class PushResult(HtmlRepr):
    """A pushed tag: repository@digest, the tag, the digest and the size the registry holds."""

    image: str  # repository@digest
    tag: str
    digest: str
    size: int | None


def retry_delay(attempt: int, backoff: float, max_delay: float, retry_after: float | None = None,
                rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait after failed attempt ATTEMPT (1-based): exponential, capped, with jitter
    (half fixed, half random, so parallel pushes spread out), and never less than the wait the
    registry asked for."""
    base = min(max_delay, backoff * 2 ** (attempt - 1))
    delay = base / 2 + rand() * base / 2
    return max(delay, retry_after) if retry_after is not None else delay


HTTP_TIMEOUT = 30.0


_CHALLENGE = lazy_pattern(r'([A-Za-z_]+)="([^"]*)"', re.ASCII)


def _basic(creds: Credentials) -> dict[str, str]:
    from ..clients.transport import basic_token

    return {"Authorization": "Basic " + basic_token(creds.username, creds.password)}


class Unreachable(RegistryError):
    """The registry did not answer (refused or reset connection, timeout): a try again may pass."""


# Challenges one request may meet: its own, answered once, and those of logins other connections made meanwhile
# (one answered for a pull, say, when this request pushes).
_CHALLENGES = 4


class _Login:
    """The credentials a client and its forks send (a header, replaced whole when a challenge is answered) and
    where they came from; the lock lets one connection at a time answer a challenge. early: the registry's
    remembered challenge was answered before the first request (or found wanting): done once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.header: dict[str, str] = {}
        self.source: str | None = None
        self.early = False


def _challenge_parts(challenge: str, path: str) -> tuple[str, dict[str, str]]:
    """A WWW-Authenticate challenge's scheme (lower case) and parameters; one that names no scope is for pulls of the
    repository PATH."""
    params = dict(_CHALLENGE.findall(challenge))
    params.setdefault("scope", f"repository:{path}:pull")
    return challenge.split(" ", 1)[0].lower(), params


def _challenge_path(registry: str) -> Path:
    return cache_dir() / "registry-challenges" / (hashlib.sha256(registry.encode()).hexdigest()[:32] + ".json")


def _remembered(registry: str, path: str) -> str | None:
    """The challenge REGISTRY gave last (its scheme, token service and the actions it asked for), as a challenge for
    the repository PATH; None when none is kept or it cannot be read."""
    try:
        kept = json.loads(_challenge_path(registry).read_text(encoding="utf-8"))
        scheme, params, actions = kept["scheme"], kept["params"], kept["actions"]
        if scheme == "basic":
            return "Basic"
        if scheme != "bearer" or not isinstance(params, dict) or not isinstance(actions, str):
            return None
        fields = {**{str(k): str(v) for k, v in params.items()}, "scope": f"repository:{path}:{actions}"}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return "Bearer " + ",".join(f'{k}="{v}"' for k, v in fields.items() if '"' not in k + v)


def _remember(registry: str, path: str, challenge: str) -> None:
    """Keep what a challenge REGISTRY gave says (no credential, no token: the scheme, the token service, the
    actions its scope asked for on PATH), so that the next command answers it before its first request."""
    scheme, params = _challenge_parts(challenge, path)
    repository, _, actions = params.pop("scope").rpartition(":")
    if scheme not in ("basic", "bearer") or scheme == "bearer" and repository != f"repository:{path}":
        return
    target = _challenge_path(registry)
    try:
        kept = target.read_text(encoding="utf-8")
        before = json.loads(kept).get("actions")
    except (OSError, ValueError, AttributeError):
        kept, before = "", ""
    # The actions of every challenge kept (a push meets "pull" at its first HEAD, "pull,push" at its upload): the
    # next command's token is asked for all it may need.
    wanted = set(actions.split(",")) | (set(before.split(",")) if isinstance(before, str) else set())
    text = json.dumps({"scheme": scheme, "params": params if scheme == "bearer" else {},
                       "actions": ",".join(sorted(a for a in wanted if a))}, sort_keys=True)
    try:
        if kept != text:
            write_atomic(target, text)
    except (OSError, OutputError):
        pass  # only a head start: the next command meets the challenge again


class _Sessions:
    """What a command asks a repository ahead, while it stages and packs its files: upload sessions for the blobs to
    come, each on a connection of its own (a small blob then costs one request, its PUT, on an open connection),
    and whether blobs it relies on are still there. Shared by every client of one repository in a command, as the
    login is."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: list[Callable[[], tuple[RegistryClient, str] | None]] = []
        self.blobs: dict[str, Callable[[], dict[str, bool]]] = {}  # blobs asked for ahead: each one's answers


AHEAD_MAX = 4 << 20  # bytes: a blob up to this size takes a session started ahead, sent without asking for it first
BLOB_CHECKS = 4  # connections that ask at once whether the layers the registry should have are still there


class RegistryClient:
    """The registry HTTP API v2 for one repository: anonymous, basic or bearer-token auth as the registry's
    challenge asks (the scope it names: pull, or pull and push), with the credentials this module finds."""

    def __init__(self, ref: ImageRef, providers: Iterable[AuthProvider] | None = None):
        from ..clients.transport import Transport

        self.ref, self.providers = ref, providers
        self.transport = Transport(HTTP_TIMEOUT)
        host = "registry-1.docker.io" if ref.registry == DOCKER_HUB else ref.registry
        # Docker talks plain http to loopback registries (insecure by default); so do we.
        self.origin = f"{'http' if is_loopback_host(registry_host(host)) else 'https'}://{host}"
        self.base = f"{self.origin}/v2/{ref.path}"
        # With the credentials found here, every client of this repository in one command shares a login (a full
        # build's attestations, a code edit's head start); a client given its own providers has its own.
        self._login = _Login() if providers is not None else asked_once(("registry login", ref.registry, ref.path),
                                                                         _Login)
        self._sessions = _Sessions() if providers is not None else asked_once(
            ("upload sessions", ref.registry, ref.path), _Sessions)

    @property
    def credentials_source(self) -> str | None:
        """Where the credentials sent came from; None: none sent."""
        return self._login.source

    def fork(self) -> RegistryClient:
        """A client for the same repository on a connection of its own, for requests made at the same time as this
        one's; it shares this one's login: a challenge either answers (a first request's, a token that expired)
        is answered for both, so a push over many connections asks the token service once, not once for each."""
        other = RegistryClient(self.ref, self.providers)
        other._login, other._sessions = self._login, self._sessions
        return other

    def open_uploads(self, count: int) -> None:
        """Start COUNT upload sessions now, for blobs to come (a code edit's layer, config and attestations): the
        small blobs upload_blob() sends take them; those not taken are cancelled by cancel_uploads()."""
        with self._sessions.lock:
            self._sessions.pending += [in_background(_open_session, self.fork()) for _ in range(count)]

    def uploads_ahead(self) -> bool:
        """Whether a session started ahead is left (taken_upload() may still find none: another blob took it)."""
        with self._sessions.lock:
            return bool(self._sessions.pending)

    def taken_upload(self) -> tuple[RegistryClient, str] | None:
        """A session started ahead (the client whose connection started it, and its Location), waited for where it
        is still being started; None where none is left or it could not be started."""
        with self._sessions.lock:
            waiting = self._sessions.pending.pop(0) if self._sessions.pending else None
        return waiting() if waiting is not None else None

    def check_blobs(self, digests: Sequence[str]) -> None:
        """Ask now, over a few connections at once, whether the registry still has these blobs (a code edit's lower
        layers, while its files are staged): has_blob() then answers from what was asked."""
        with self._sessions.lock:
            new = [d for d in dict.fromkeys(digests) if d not in self._sessions.blobs]
            for i in range(min(BLOB_CHECKS, len(new))):
                waiting = in_background(_heads, self.fork(), new[i::BLOB_CHECKS])
                self._sessions.blobs.update(dict.fromkeys(new[i::BLOB_CHECKS], waiting))

    def has_blob(self, digest: str) -> bool:
        """Whether the registry has the blob: as check_blobs() asked, else asked now."""
        with self._sessions.lock:
            waiting = self._sessions.blobs.get(digest)
        try:
            answers = waiting() if waiting is not None else {}
        except RegistryError:
            answers = {}  # asked again here, where a failure is the caller's to say
        found = answers.get(digest)
        return found if found is not None else send(self, "HEAD", f"blobs/{digest}", {}).status_code == 200

    def cancel_uploads(self) -> None:
        """Cancel the sessions started ahead that no blob took, all at once (an edit whose blobs each took one has
        none left to wait for)."""
        cancelling = []
        while (taken := self.taken_upload()) is not None:
            cancelling.append(in_background(_cancel, *taken))
        for waiting in cancelling:
            waiting()

    def request(self, method: str, path: str, headers: dict[str, str], data: bytes | None = None):
        """The response; a 401 is answered once with the credentials its challenge asks for. PATH is relative
        to the repository, or a Location the registry gave (absolute, or from its root)."""
        url = path if path.startswith(("http://", "https://")) else self.origin + path if path.startswith("/") \
            else f"{self.base}/{path}"
        # Credentials go to the registry only, never to a host its Location names (a storage redirect).
        same = url.startswith(self.origin + "/")
        login, answered = self._login, False
        if not login.early:
            self._answer_early()
        for _ in range(_CHALLENGES):
            sent = login.header
            try:
                response = self.transport.request(method, url, {**headers, **(sent if same else {})}, data)
            except OSError as exc:
                raise Unreachable(f"cannot reach the registry {self.ref.registry}: {exc}") from None
            if response.status_code != 401:
                return response
            with login.lock:
                if login.header is sent:  # no other connection answered a challenge since this request went
                    if answered:
                        return response  # credentials got for this very request, refused: said by the caller
                    challenge = response.headers.get("WWW-Authenticate", "")
                    login.header, answered = self._authorize(challenge), True
                    _remember(self.ref.registry, self.ref.path, challenge)
        return response

    def log_in_ahead(self) -> None:
        """Answer the registry's remembered challenge on a thread of its own while the command does its own work (a
        code edit loads the fast path and stages its files meanwhile): the first requests wait for it only where
        they come before it ends."""
        if not self._login.early:
            in_background(self._answer_early)  # what it finds is the login's; a failure is met again by the requests

    def _answer_early(self) -> None:
        """Answer the registry's remembered challenge before the first request (its 401 is a round trip every
        connection would wait for); one that no longer holds (a token service that refuses, credentials gone)
        leaves the challenge to be met as it comes."""
        with self._login.lock:  # the connections that start meanwhile wait here for what it gives
            if self._login.early:
                return
            challenge = _remembered(self.ref.registry, self.ref.path)
            try:
                if challenge is not None:
                    self._login.header = self._authorize(challenge)
            except RegistryError:
                self._login.source = None
            finally:
                self._login.early = True

    def _authorize(self, challenge: str) -> dict[str, str]:
        creds = credentials_for(self.ref.registry, self.providers)
        self._login.source = creds.source if creds else None
        scheme, params = _challenge_parts(challenge, self.ref.path)
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
        realm = params.pop("realm", "")
        if not realm.startswith(("https://", "http://127.", "http://localhost")):
            raise RegistryError(f"{self.ref.registry} names a token service that is not https: {show(realm[:100])}")
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


def _open_session(client: RegistryClient) -> tuple[RegistryClient, str] | None:
    try:
        started = send(client, "POST", "blobs/uploads/", {"Content-Length": "0"})
    except RegistryError:
        return None  # met again, and said, by the blob's own session
    location = started.headers.get("Location", "")
    return (client, location) if started.status_code == 202 and location else None


def _heads(client: RegistryClient, digests: Sequence[str]) -> dict[str, bool]:
    return {d: send(client, "HEAD", f"blobs/{d}", {}).status_code == 200 for d in digests}


def _cancel(client: RegistryClient, location: str) -> None:
    try:
        client.request("DELETE", location, {})
    except RegistryError:
        pass  # the registry drops an abandoned session in time


def _put_blob(client: RegistryClient, location: str, digest: str, data: bytes):
    return client.request("PUT", location + ("&" if "?" in location else "?") + f"digest={digest}",
                          {"Content-Type": "application/octet-stream", "Content-Length": str(len(data))}, data)


def upload_blob(client: RegistryClient, ref: ImageRef, digest: str, data: bytes, *, new: bool = False,
                likely_new: bool = False, seen: bool = False) -> bool:
    """Upload a blob unless the registry has it; True when it was sent. new: the blob names what was just pushed (an
    attestation of a new image), so the registry cannot have it: not asked first. likely_new (a code layer, a
    config just made): asked while the upload session starts, so that a new blob costs no round trip for the
    question (one the registry has costs a session, cancelled). A failed upload starts again from a new upload
    session (the failed one may be gone). A small blob takes a session started ahead (open_uploads) where one is
    left: a new or likely new one goes up at once, unasked (a registry that has it takes it again); one SEEN before
    (this machine appended it before: the registry likely has it) is asked for first, and left unsent."""
    if (new or likely_new) and len(data) <= AHEAD_MAX and client.uploads_ahead():
        if seen and not new and client.has_blob(digest):
            return False
        ahead = client.taken_upload()
    else:
        ahead = None
    if ahead is not None:
        # On the connection that started the session, which CLIENT keeps for its next requests (a manifest's PUT).
        opener, location = ahead
        client.transport, opener.transport = opener.transport, client.transport
        try:
            put = _put_blob(client, location, digest, data)
        except Unreachable:
            put = None
        if put is not None and put.status_code in (201, 204):
            return True  # else tried again from a session of its own, which says what fails
    asked = in_background(send, client.fork(), "HEAD", f"blobs/{digest}", {}) if likely_new and not new else None
    if not new and asked is None and send(client, "HEAD", f"blobs/{digest}", {}).status_code == 200:
        return False
    attempt = 0
    while True:
        attempt += 1
        started = send(client, "POST", "blobs/uploads/", {"Content-Length": "0"})
        check_answer(client, started, ref, "a blob upload", (202,))
        location = started.headers.get("Location", "")
        if not location:
            raise RegistryError(f"{ref.registry} started a blob upload without a Location")
        if asked is not None and asked().status_code == 200:
            try:
                client.request("DELETE", location, {})
            except RegistryError:
                pass  # the registry drops an abandoned session in time
            return False
        asked = None
        try:
            put = _put_blob(client, location, digest, data)
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
