from __future__ import annotations

import base64
import json
import os
import stat

import pytest

from buildkit_py.errors import RegistryError
from buildkit_py.registry import (
    DOCKERHUB_CONFIG_KEY,
    GOOGLE_USERNAME,
    Credentials,
    DockerConfigProvider,
    DockerHubEnvProvider,
    EnvProvider,
    GoogleProvider,
    credentials_for,
    is_google_registry,
)


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
    assert first.username == GOOGLE_USERNAME and first.password == "ya29.token-1"
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
    assert credentials_for("us-docker.pkg.dev", [EnvProvider({}), google, env]).username == GOOGLE_USERNAME
    assert credentials_for("127.0.0.1:5000", [EnvProvider({}), google]) is None
