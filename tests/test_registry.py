from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import stat
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler

import pytest

from buildkit_py.builders.engine_push import AUTH, FATAL, TRANSIENT, Retry, classify_push_error, push
from buildkit_py.errors import RegistryError
from buildkit_py.google import adc
from buildkit_py.oci.client import retry_delay
from buildkit_py.oci.credentials import (
    DOCKERHUB_CONFIG_KEY,
    Credentials,
    DockerConfigProvider,
    DockerHubEnvProvider,
    EnvProvider,
    GoogleProvider,
    credentials_for,
    is_google_registry,
)
from buildkit_py.oci.refs import ImageRef, parse_ref
from buildkit_py.progress import Reporter
from conftest import LoopbackServer, run_cli


class RefreshingCredentials:
    """Models google.auth.credentials.Credentials: refresh(request) sets a new .token."""

    def __init__(self):
        self.refreshes = 0
        self.token = None

    def refresh(self, request):
        self.refreshes += 1
        self.token = f"ya29.token-{self.refreshes}"


@pytest.mark.parametrize("host, google", [
    ("us-central1-docker.pkg.dev", True), ("europe-west4-docker.pkg.dev", True), ("gcr.io", True),
    ("eu.gcr.io", True), ("docker.io", False), ("127.0.0.1:5000", False), ("ghcr.io", False),
])
def test_google_registries(host, google):
    assert is_google_registry(host) is google


def test_google_provider_uses_oauth2accesstoken_and_refreshes_every_time():
    creds = RefreshingCredentials()
    provider = GoogleProvider(credentials_factory=lambda: creds)
    first = provider.credentials("us-central1-docker.pkg.dev")
    second = provider.credentials("us-central1-docker.pkg.dev")
    assert first.username == adc.TOKEN_LOGIN and first.password == "ya29.token-1"
    assert second.password == "ya29.token-2" and creds.refreshes == 2
    assert provider.credentials("127.0.0.1:5000") is None


def test_google_provider_without_adc_says_how_to_fix(monkeypatch, tmp_path):
    pytest.importorskip("google.auth")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(RegistryError, match="gcloud auth application-default login|GOOGLE_APPLICATION_CREDENTIALS"):
        GoogleProvider().credentials("us-docker.pkg.dev")


def test_env_provider_for_any_registry_and_dockerhub_env():
    env = {"BUILDKIT_PY_REGISTRY_USERNAME": "ci", "BUILDKIT_PY_REGISTRY_PASSWORD": "pw"}
    found = EnvProvider(env).credentials("127.0.0.1:5001")
    assert (found.username, found.password) == ("ci", "pw") and "BUILDKIT_PY_REGISTRY_USERNAME" in found.source
    hub = DockerHubEnvProvider({"DOCKERHUB_USERNAME": "me", "DOCKERHUB_TOKEN": "dckr_pat_x"})
    assert hub.credentials("docker.io").password == "dckr_pat_x"
    assert hub.credentials("ghcr.io") is None


def test_password_never_in_repr():
    assert "hunter2" not in repr(Credentials("u", "hunter2", "x"))


def test_docker_config_auths(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"auths": {
        "127.0.0.1:5001": {"auth": base64.b64encode(b"tester:s3cret:with:colons").decode()},
        DOCKERHUB_CONFIG_KEY: {"auth": base64.b64encode(b"hubuser:hubtoken").decode()},
    }}))
    provider = DockerConfigProvider(config)
    assert provider.credentials("127.0.0.1:5001").password == "s3cret:with:colons"
    assert provider.credentials("docker.io").username == "hubuser"
    assert provider.credentials("ghcr.io") is None


def test_docker_config_credential_helper(tmp_path, monkeypatch):
    helper = tmp_path / "bin" / "docker-credential-fake"
    helper.parent.mkdir()
    # A real helper process speaking the docker-credential-helpers protocol (server URL on stdin).
    helper.write_text('#!/bin/sh\nread server\n[ "$1" = get ] || exit 2\n'
                      'if [ "$server" = "registry.example.com" ]; then\n'
                      '  printf \'{"ServerURL":"%s","Username":"helper-user","Secret":"helper-secret"}\' "$server"\n'
                      'else echo "credentials not found in native keychain"; exit 1; fi\n')
    helper.chmod(helper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{helper.parent}{os.pathsep}{os.environ['PATH']}")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"credHelpers": {"registry.example.com": "fake"}, "credsStore": "fake"}))
    provider = DockerConfigProvider(config)
    found = provider.credentials("registry.example.com")
    assert (found.username, found.password) == ("helper-user", "helper-secret")
    assert provider.credentials("other.example.com") is None


def test_missing_credential_helper_is_a_clear_error(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"credsStore": "nonexistent-helper"}))
    with pytest.raises(RegistryError, match="docker-credential-nonexistent-helper, which is not on PATH"):
        DockerConfigProvider(config).credentials("ghcr.io")


def test_first_provider_with_credentials_wins():
    env = EnvProvider({"BUILDKIT_PY_REGISTRY_USERNAME": "a", "BUILDKIT_PY_REGISTRY_PASSWORD": "b"})
    google = GoogleProvider(credentials_factory=RefreshingCredentials)
    assert credentials_for("us-docker.pkg.dev", [EnvProvider({}), google, env]).username == adc.TOKEN_LOGIN
    assert credentials_for("127.0.0.1:5000", [EnvProvider({}), google]) is None


# ---------------------------------------------------------------------------------------------
# Broken credentials: a RegistryError naming the helper or file, never a traceback or the secret.

SECRET = "hunter2-SECRET-value"


def helper_on_path(tmp_path, monkeypatch, script: str, name: str = "broken") -> DockerConfigProvider:
    helper = tmp_path / "bin" / f"docker-credential-{name}"
    helper.parent.mkdir(exist_ok=True)
    helper.write_text("#!/bin/sh\n" + script)
    helper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{helper.parent}{os.pathsep}{os.environ['PATH']}")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"credsStore": name}))
    return DockerConfigProvider(config)


@pytest.mark.parametrize("script, expected", [
    ("echo 'this is not json'\n", "printed 17 bytes that are not JSON"),
    ("printf '\\377\\376 not utf-8'\n", "that are not JSON"),
    (f"echo '{{\"Username\": \"u\", \"Password\": \"{SECRET}\"}}'\n", "without Secret as strings"),
    (f"echo '[\"u\", \"{SECRET}\"]'\n", "without Username and Secret as strings"),
    (f"echo '{{\"Username\": 5, \"Secret\": \"{SECRET}\"}}'\n", "without Username as strings"),
    ("kill -SEGV $$\n", "was killed by SIGSEGV"),
    ("exec yes\n", "printed more than 64 KiB"),
    ("echo 'keychain is locked'; exit 3\n", "failed with exit code 3: 'keychain is locked'"),
    (f"echo '{{\"Secret\": \"{SECRET}\"}}'; exit 4\n", "failed with exit code 4"),
])
def test_a_broken_credential_helper_is_a_clear_error(tmp_path, monkeypatch, script, expected):
    provider = helper_on_path(tmp_path, monkeypatch, script)
    with pytest.raises(RegistryError) as err:
        provider.credentials("registry.example.com")
    assert "docker-credential-broken" in str(err.value) and expected in str(err.value)
    assert SECRET not in str(err.value)


def test_a_hanging_credential_helper_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr("buildkit_py.oci.credentials.HELPER_TIMEOUT", 0.5)
    provider = helper_on_path(tmp_path, monkeypatch, "exec sleep 30\n")
    with pytest.raises(RegistryError, match="docker-credential-broken did not answer in 0 s"):
        provider.credentials("registry.example.com")


def test_a_credential_helper_that_cannot_run(tmp_path, monkeypatch):
    provider = helper_on_path(tmp_path, monkeypatch, "exit 0\n")
    (tmp_path / "bin" / "docker-credential-broken").chmod(0o644)
    with pytest.raises(RegistryError, match="cannot run credential helper docker-credential-broken: Permission denied"):
        provider.credentials("registry.example.com")


def test_a_credential_helper_name_is_never_a_path(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"credHelpers": {"ghcr.io": "../../../bin/sh"}}))
    with pytest.raises(RegistryError, match=r"names credential helper '../../../bin/sh': a helper is a name"):
        DockerConfigProvider(config).credentials("ghcr.io")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize("content, expected", [
    (b"[]", "the top level must be an object, not an array"),
    (b'{"auths": ["127.0.0.1:5001"]}', "'auths' must be an object, not an array"),
    (b'{"credHelpers": "pass"}', "'credHelpers' must be an object, not a string"),
    (b'{"credsStore": 5}', "'credsStore' must be a string, not a number"),
    (b'{"credHelpers": {"127.0.0.1:5001": true}}', "credential helper for '127.0.0.1:5001' must be a string"),
    (json.dumps({"auths": {"127.0.0.1:5001": f"tester:{SECRET}"}}).encode(),
     "auths['127.0.0.1:5001'] must be an object, not a string"),
    (json.dumps({"auths": {"127.0.0.1:5001": {"auth": 12}}}).encode(), "auths['127.0.0.1:5001'].auth must be a string"),
    (json.dumps({"auths": {"127.0.0.1:5001": {"auth": f"{SECRET}!!"}}}).encode(), "is not base64 of USER:PASSWORD"),
    (json.dumps({"auths": {"127.0.0.1:5001": {"auth": b64(SECRET.encode())}}}).encode(), "is not base64 of USER:PASSWORD"),
    (json.dumps({"auths": {"https://127.0.0.1:5001": {"auth": b64(b"\xfftester:" + SECRET.encode())}}}).encode(),
     "auths['https://127.0.0.1:5001'].auth is not base64 of USER:PASSWORD in UTF-8"),
    (b'{"auths": {"127.0.0.1:5001": {"auth": "' + SECRET.encode() + b'"', "is not valid JSON"),
    (b'{"auths": {"127.0.0.1:5001": {"auth": "\xff' + SECRET.encode() + b'"}}}', "is not UTF-8 (a bad byte at offset 39)"),
])
def test_a_broken_docker_config_is_a_clear_error(tmp_path, content, expected):
    config = tmp_path / "config.json"
    config.write_bytes(content)
    with pytest.raises(RegistryError) as err:
        DockerConfigProvider(config).credentials("127.0.0.1:5001")
    assert str(err.value).startswith(f"the docker config {config}")
    assert expected in str(err.value) and SECRET not in str(err.value)


def test_half_a_credential_pair_is_an_error():
    with pytest.raises(RegistryError, match=r"\$BUILDKIT_PY_REGISTRY_USERNAME is set but \$BUILDKIT_PY_REGISTRY_PASSWORD"):
        EnvProvider({"BUILDKIT_PY_REGISTRY_USERNAME": "ci"}).credentials("ghcr.io")
    with pytest.raises(RegistryError, match=r"\$DOCKERHUB_TOKEN is set but \$DOCKERHUB_USERNAME is not"):
        DockerHubEnvProvider({"DOCKERHUB_TOKEN": SECRET}).credentials("docker.io")


# ---------------------------------------------------------------------------------------------
# Classifying push failures: the engine's texts (captured from Docker 20.10 against distribution
# registries) by error code and explicit HTTP status, never by digits found anywhere.

@pytest.mark.parametrize("message, status, kind, reason", [
    ("unauthorized: authentication required", None, AUTH, "UNAUTHORIZED"),
    ("unauthorized: incorrect username or password", None, AUTH, "UNAUTHORIZED"),
    ("denied: requested access to the resource is denied", None, AUTH, "DENIED"),
    ("no basic auth credentials", None, AUTH, "no credentials"),
    ('error parsing HTTP 403 response body: unexpected end of JSON input: ""', None, AUTH, "HTTP 403"),
    ("toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating "
     "and upgrading: https://www.docker.com/increase-rate-limit", None, TRANSIENT, "TOOMANYREQUESTS"),
    ("error parsing HTTP 429 response body: invalid character 's' looking for beginning of value: \"slow down\"",
     None, TRANSIENT, "HTTP 429"),
    ("unavailable: service unavailable", None, TRANSIENT, "UNAVAILABLE"),
    ("received unexpected HTTP status: 503 Service Unavailable", None, TRANSIENT, "HTTP 503"),
    ("received unexpected HTTP status: 500 Internal Server Error", None, TRANSIENT, "HTTP 500"),
    ('Get "http://127.0.0.1:5999/v2/": dial tcp 127.0.0.1:5999: connect: connection refused', None, TRANSIENT,
     "connect: connection refused"),
    ('Get "https://registry.example.com/v2/": net/http: TLS handshake timeout', None, TRANSIENT, "TLS handshake timeout"),
    ('Put "https://registry.example.com/v2/x/blobs/uploads/1": EOF', None, TRANSIENT, "EOF"),
    ("read tcp 127.0.0.1:40000->127.0.0.1:5000: read: connection reset by peer", None, TRANSIENT,
     "connection reset by peer"),
    ("name invalid: invalid repository name", None, FATAL, "NAME_INVALID"),
    ("name unknown", None, FATAL, "NAME_UNKNOWN"),
    ("unsupported", None, FATAL, "UNSUPPORTED"),
    ("blob upload unknown: blob upload unknown to registry", None, FATAL, "BLOB_UPLOAD_UNKNOWN"),
    ("errors:\ntag invalid\nmanifest invalid\n", None, FATAL, "TAG_INVALID"),
    # Go wraps errors as "context: error": a code right after a ": " counts too.
    ("[DEPRECATED] support for pushing manifest v2 schema1 images has been removed. More information at "
     "https://docs.docker.com/registry/spec/deprecated-schema-v1/: tag invalid", None, FATAL, "TAG_INVALID"),
    ("failed commit on ref \"manifest-sha256:ab\": unexpected status: 401 Unauthorized: unauthorized: "
     "authentication required", None, AUTH, "UNAUTHORIZED"),
    ("pushing layer: denied-team/unknown-project is not a code here", None, FATAL, "unrecognized"),
    ("errors:\nmanifest invalid: manifest invalid\ndenied: requested access to the resource is denied\n", None, AUTH,
     "DENIED"),
    ("error parsing HTTP 400 response body: invalid character 'b' looking for beginning of value: "
     "\"bad request: connection refused\"", None, FATAL, "HTTP 400"),
    # Digits and words inside a message decide nothing: a digest with 401, a 503 in a name.
    ("manifest invalid: sha256:4010403050340140104010401040104010401040104010401040104010401040", None, FATAL,
     "MANIFEST_INVALID"),
    ("unknown: image 127.0.0.1:5000/team401/denied-503:v401 is unauthorized-looking but not", None, FATAL, "UNKNOWN"),
    ("An image does not exist locally with the tag: 127.0.0.1:5000/x401", None, FATAL, "unrecognized"),
    ('Get "https://nowhere.invalid/v2/": dial tcp: lookup nowhere.invalid: no such host', None, FATAL, "no such host"),
    ('Get "https://127.0.0.1:5000/v2/": http: server gave HTTP response to HTTPS client', None, FATAL,
     "server gave HTTP response to HTTPS client"),
    # An API error from the engine itself: its status decides when the text does not.
    ("An image does not exist locally with the tag: x", 404, FATAL, "engine HTTP 404"),
    ("Service Unavailable", 503, TRANSIENT, "engine HTTP 503"),
    ("unauthorized: authentication required", 500, AUTH, "UNAUTHORIZED"),
])
def test_push_errors_are_classified(message, status, kind, reason):
    failure = classify_push_error(message, status)
    assert (failure.kind, failure.reason) == (kind, reason)
    assert "\n" not in failure.message


@pytest.mark.parametrize("message, seconds", [
    ("toomanyrequests: too many requests, retry after 3 seconds", 3.0),
    ("toomanyrequests: rate limited; Retry-After: 20", 20.0),
    ("unavailable: service unavailable, retry after 1.5s", 1.5),
    ("toomanyrequests: retry after 2 minutes", 120.0),
    ("toomanyrequests: retry-after=250ms", 0.25),
    ("toomanyrequests: too many requests", None),
    ("denied: retry after 3 seconds", None),  # only a retryable failure has a wait
])
def test_a_retry_after_hint_in_the_text_is_read(message, seconds):
    assert classify_push_error(message).retry_after == seconds


def test_retry_delay_is_exponential_capped_and_jittered():
    lowest = [retry_delay(n, 1.0, 30.0, rand=lambda: 0.0) for n in range(1, 8)]
    highest = [retry_delay(n, 1.0, 30.0, rand=lambda: 1.0) for n in range(1, 8)]
    assert highest == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert lowest == [h / 2 for h in highest]
    assert retry_delay(1, 1.0, 30.0, retry_after=12.0) == 12.0  # the registry's wait wins
    assert retry_delay(6, 1.0, 30.0, retry_after=2.0, rand=lambda: 1.0) == 30.0


# ---------------------------------------------------------------------------------------------
# Pushes through the real engine. The loopback registries answer 401 (htpasswd) and 200; the
# statuses that cannot be had from them on demand (429, 503, 400) come from a scripted registry:
# a loopback HTTP server speaking just enough of the registry API for the engine's push (ping,
# blob HEAD and upload, manifest PUT), with scripted answers to the manifest PUT.

AUTH_USER, AUTH_PASSWORD = "tester", "s3cret-pass"


class ScriptedRegistry:
    def __init__(self, answers: list[tuple[int, dict | str]]):
        self.answers = list(answers)  # (status, errcode JSON or plain text) per manifest PUT; then 201
        self.manifest_puts = 0
        self.uploads: dict[str, bytes] = {}  # upload id -> data so far
        self.blobs: dict[str, int] = {}  # digest -> size
        registry = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                    return self.rfile.read(int(self.headers.get("Content-Length") or 0))
                data = b""
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    data += self.rfile.read(size)
                    self.rfile.readline()
                while self.rfile.readline() not in (b"\r\n", b""):  # trailers
                    pass
                return data

            def reply(self, status: int, body: bytes = b"", headers: dict | None = None):
                self.send_response(status)
                headers = {"Docker-Distribution-API-Version": "registry/2.0", "Content-Length": str(len(body)),
                           **(headers or {})}
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_GET(self):  # the /v2/ ping
                self.reply(200, b"{}", {"Content-Type": "application/json"})

            def do_HEAD(self):  # does a blob exist
                digest = self.path.rsplit("/", 1)[-1]
                if digest not in registry.blobs:
                    return self.reply(404)
                self.reply(200, headers={"Docker-Content-Digest": digest, "Content-Length": str(registry.blobs[digest]),
                                         "Content-Type": "application/octet-stream"})

            def upload_id(self) -> str:
                return urllib.parse.urlsplit(self.path).path.rsplit("/", 1)[-1]

            def do_POST(self):  # start a blob upload
                self.body()
                upload = str(len(registry.uploads) + 1)
                registry.uploads[upload] = b""
                self.reply(202, headers={"Location": self.path.split("?")[0] + upload, "Range": "0-0",
                                         "Docker-Upload-UUID": upload})

            def do_PATCH(self):
                upload = self.upload_id()
                registry.uploads[upload] += self.body()
                self.reply(202, headers={"Location": self.path, "Docker-Upload-UUID": upload,
                                         "Range": f"0-{max(len(registry.uploads[upload]) - 1, 0)}"})

            def do_PUT(self):
                body = self.body()
                if "/blobs/uploads/" in self.path:  # the end of an upload: ?digest=...
                    digest = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["digest"][0]
                    registry.blobs[digest] = len(registry.uploads[self.upload_id()] + body)
                    return self.reply(201, headers={"Docker-Content-Digest": digest, "Location": self.path})
                registry.manifest_puts += 1
                if not registry.answers:
                    digest = "sha256:" + hashlib.sha256(body).hexdigest()
                    return self.reply(201, headers={"Docker-Content-Digest": digest})
                status, answer = registry.answers.pop(0)
                if isinstance(answer, dict):
                    self.reply(status, json.dumps({"errors": [answer]}).encode(), {"Content-Type": "application/json"})
                else:
                    self.reply(status, answer.encode(), {"Content-Type": "text/html"})

        self.server = LoopbackServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def engine(testenv):
    import docker
    from test_refs import tiny_image

    client = docker.DockerClient(base_url=testenv["DOCKER_HOST"], timeout=120)
    image = tiny_image(client, "registry-test/base", "v1")
    yield client, image
    client.api.remove_image(image, force=True)  # and every tag the tests gave it
    client.close()


def tagged(engine, target: str) -> ImageRef:
    client, image = engine
    ref = parse_ref(target)
    assert client.api.tag(image, ref.repository, ref.tag)
    return ref


class Sleeps(list):
    """The back-off's sleep, recorded instead of slept."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_rate_limit_is_retried_after_the_wait_it_asks_for(engine):
    with ScriptedRegistry([(429, {"code": "TOOMANYREQUESTS", "message": "too many requests, retry after 2 seconds"})]) \
            as registry:
        ref = tagged(engine, f"{registry.host}/registry-test/limited:v1")
        out, sleeps = io.StringIO(), Sleeps()
        result = push(ref, Reporter(out), client=engine[0], providers=[], retry=Retry(sleep=sleeps))
    assert result.digest.startswith("sha256:") and registry.manifest_puts == 2
    assert len(sleeps) == 1 and sleeps[0] >= 2.0
    assert "toomanyrequests: too many requests, retry after 2 seconds); retry 1/3" in out.getvalue()


def test_server_errors_are_retried_then_reported(engine):
    with ScriptedRegistry([(503, "<html>down for maintenance</html>")] * 5) as registry:
        ref = tagged(engine, f"{registry.host}/registry-test/down:v1")
        out, sleeps = io.StringIO(), Sleeps()
        with pytest.raises(RegistryError) as err:
            push(ref, Reporter(out), client=engine[0], providers=[],
                 retry=Retry(attempts=4, backoff=1.0, max_delay=3.0, sleep=sleeps))
    assert registry.manifest_puts == 4
    assert str(err.value) == f"could not push {ref} after 4 attempt(s): received unexpected HTTP status: 503 Service Unavailable"
    assert len(sleeps) == 3 and 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0 and 1.5 <= sleeps[2] <= 3.0


# The engine 20.10 writes some codes without their message, and answers TAG_INVALID and
# MANIFEST_INVALID by retrying once with a schema1 manifest, which it can no longer make.
@pytest.mark.parametrize("status, answer, puts, expected", [
    (401, {"code": "UNAUTHORIZED", "message": "authentication required"}, 1,
     "refused an anonymous push (no credentials found): unauthorized"),
    (403, {"code": "DENIED", "message": "requested access to the resource is denied"}, 1,
     "refused an anonymous push (no credentials found): denied"),
    (400, {"code": "NAME_INVALID", "message": "invalid repository name"}, 1, ": name invalid"),
    (400, {"code": "TAG_INVALID", "message": "manifest tag did not match URI"}, 1,
     "[DEPRECATED] support for pushing manifest v2 schema1 images has been removed."),
    (400, {"code": "MANIFEST_INVALID", "message": "manifest invalid"}, 1, ": manifest invalid"),
    (405, {"code": "UNSUPPORTED", "message": "The operation is unsupported."}, 1, ": unsupported"),
    (400, "<html>bad request</html>", 1, "error parsing HTTP 400 response body"),
    (429, {"code": "TOOMANYREQUESTS", "message": "retry after 3600 seconds"}, 1, "asks to retry after 3600 s"),
])
def test_refusals_stop_at_the_first_attempt(engine, status, answer, puts, expected):
    with ScriptedRegistry([(status, answer)] * 4) as registry:
        ref = tagged(engine, f"{registry.host}/registry-test/refused:v1")
        sleeps = Sleeps()
        with pytest.raises(RegistryError) as err:
            push(ref, Reporter(io.StringIO()), client=engine[0], providers=[], retry=Retry(sleep=sleeps))
    assert expected in str(err.value)
    assert (registry.manifest_puts, sleeps) == (puts, [])


def test_cli_push_refused_with_400_exits_7_without_traceback(engine, testenv):
    with ScriptedRegistry([(400, {"code": "NAME_INVALID", "message": "invalid repository name"})]) as registry:
        ref = tagged(engine, f"{registry.host}/registry-test/cli:v1")
        proc = run_cli("push", str(ref), env=testenv)
    assert proc.returncode == 7, proc.stderr
    assert proc.stderr.splitlines()[-1] == f"buildkit-py: error: could not push {ref}: name invalid"
    assert "Traceback" not in proc.stderr and registry.manifest_puts == 1


def test_push_of_a_tag_that_is_not_local_fails_at_once(engine, testenv):
    ref = parse_ref(f"{testenv['BUILDKIT_TEST_REGISTRY']}/registry-test/absent:never-built")
    sleeps = Sleeps()
    with pytest.raises(RegistryError, match="does not exist locally") as err:
        push(ref, Reporter(io.StringIO()), client=engine[0], providers=[], retry=Retry(sleep=sleeps))
    assert sleeps == [] and "after" not in str(err.value)


def manifest_digest(host: str, path: str, tag: str, user: str, password: str) -> str:
    request = urllib.request.Request(f"http://{host}/v2/{path}/manifests/{tag}", method="HEAD", headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json",
        "Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode(),
    })
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["Docker-Content-Digest"]


def test_auth_registry_refuses_an_anonymous_push_at_once(engine, testenv, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))  # an empty docker config: no credentials anywhere
    ref = tagged(engine, f"{testenv['BUILDKIT_TEST_AUTH_REGISTRY']}/registry-test/anonymous:v1")
    sleeps = Sleeps()
    with pytest.raises(RegistryError) as err:
        push(ref, Reporter(io.StringIO()), client=engine[0], providers=[EnvProvider({}), DockerConfigProvider()],
             retry=Retry(sleep=sleeps))
    assert str(err.value) == (f"{ref.registry} refused an anonymous push (no credentials found): "
                              "no basic auth credentials")
    assert sleeps == []


def test_docker_config_auths_push_to_the_auth_registry(engine, testenv, tmp_path, monkeypatch):
    host = testenv["BUILDKIT_TEST_AUTH_REGISTRY"]
    (tmp_path / "config.json").write_text(json.dumps(
        {"auths": {host: {"auth": base64.b64encode(f"{AUTH_USER}:{AUTH_PASSWORD}".encode()).decode()}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    ref = tagged(engine, f"{host}/registry-test/from-config:v1")
    out = io.StringIO()
    result = push(ref, Reporter(out), client=engine[0], providers=[DockerConfigProvider()])
    assert result.digest == manifest_digest(host, "registry-test/from-config", "v1", AUTH_USER, AUTH_PASSWORD)
    assert AUTH_PASSWORD not in out.getvalue() + repr(result)


def test_credential_helper_push_to_the_auth_registry(engine, testenv, tmp_path, monkeypatch):
    host = testenv["BUILDKIT_TEST_AUTH_REGISTRY"]
    provider = helper_on_path(tmp_path, monkeypatch, (
        'read server\n[ "$1" = get ] || exit 2\n'
        f'[ "$server" = "{host}" ] || {{ echo "credentials not found in native keychain"; exit 1; }}\n'
        f'printf \'{{"ServerURL":"%s","Username":"{AUTH_USER}","Secret":"{AUTH_PASSWORD}"}}\' "$server"\n'
    ), name="loopback")
    ref = tagged(engine, f"{host}/registry-test/from-helper:v1")
    out = io.StringIO()
    result = push(ref, Reporter(out), client=engine[0], providers=[provider])
    assert result.digest == manifest_digest(host, "registry-test/from-helper", "v1", AUTH_USER, AUTH_PASSWORD)
    assert AUTH_PASSWORD not in out.getvalue() + repr(result)
