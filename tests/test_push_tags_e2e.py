"""An image is pushed once; its other tags in the same repository are added as manifests through the
registry's HTTP API (no layer sent or checked again), on real registries on loopback (open and htpasswd)."""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from buildkit_py.clients.transport import USER_AGENT
from buildkit_py.errors import RegistryError
from buildkit_py.oci.client import PushResult, add_tags
from buildkit_py.oci.credentials import EnvProvider
from buildkit_py.oci.refs import parse_ref
from buildkit_py.progress import Reporter
from conftest import REPO, run_cli

AUTH_USER, AUTH_PASSWORD = "tester", "s3cret-pass"
MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"


@pytest.fixture
def checkout(tmp_path) -> Path:
    """The quickstart trainer in a git checkout, so a build tags it twice: content tag and git tag."""
    root = tmp_path / "quickstart"
    shutil.copytree(REPO / "examples" / "quickstart", root, ignore=shutil.ignore_patterns("__pycache__"))
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "trainer"]):
        subprocess.run(git + args, check=True, capture_output=True)
    return root


def registry_get(registry: str, path: str, method: str = "GET", auth: tuple[str, str] | None = None):
    request = urllib.request.Request(f"http://{registry}/v2/{path}", method=method, headers={"Accept": MANIFEST_V2})
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    return opener.open(request, timeout=30)


@pytest.mark.parametrize("which", ["BUILDKIT_TEST_REGISTRY", "BUILDKIT_TEST_AUTH_REGISTRY"])
def test_build_push_sends_the_image_once_and_adds_the_git_tag_as_a_manifest(testenv, checkout, which):
    registry = testenv[which]
    auth = (AUTH_USER, AUTH_PASSWORD) if which == "BUILDKIT_TEST_AUTH_REGISTRY" else None
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]}
    if auth:
        env |= {"BUILDKIT_PY_REGISTRY_USERNAME": AUTH_USER, "BUILDKIT_PY_REGISTRY_PASSWORD": AUTH_PASSWORD}
    proc = run_cli("build", "--config", str(checkout / "buildkit.yaml"), "--network", "host", "--progress", "plain",
                   "--json", "--push", "--tag", f"{registry}/pushtags/quickstart", "--tag", f"{registry}/pushtags/other:v1",
                   env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    content, git_tag, other = result["tags"]
    assert git_tag.split(":")[-1].startswith("git-") and other.endswith("/pushtags/other:v1")
    pushed = {p["tag"]: p for p in result["pushed"]}
    assert len(pushed) == 3 and len({p["digest"] for p in pushed.values()}) == 1
    # One engine push to the repository; the git tag by manifest; the other repository by its own push.
    assert proc.stderr.count(f"pushed {registry}/pushtags/quickstart:") == 1
    assert f"tagged {git_tag} as {pushed[content.split(':')[-1]]['digest']} in the registry" in proc.stderr
    assert proc.stderr.count(f"pushed {other} as") == 1
    tags = json.load(registry_get(registry, "pushtags/quickstart/tags/list", auth=auth))["tags"]
    assert {content.split(":")[-1], git_tag.split(":")[-1]} <= set(tags)
    for tag in (content, git_tag, other):
        ref = parse_ref(tag)
        head = registry_get(registry, f"{ref.path}/manifests/{ref.tag}", "HEAD", auth)
        assert head.headers["Docker-Content-Digest"] == result["pushed"][0]["digest"]
    assert AUTH_PASSWORD not in proc.stdout + proc.stderr


def test_add_tags_refuses_a_manifest_the_registry_does_not_have(testenv):
    ref = parse_ref(f"{testenv['BUILDKIT_TEST_REGISTRY']}/pushtags/missing:v1")
    ghost = PushResult(f"{ref.repository}@sha256:{'0' * 64}", "v0", f"sha256:{'0' * 64}", None)
    with pytest.raises(RegistryError, match="read of manifest sha256:0+ with HTTP 404"):
        add_tags(ghost, [ref], Reporter(io.StringIO()), providers=[])


def test_add_tags_with_wrong_credentials_is_refused_without_showing_them(testenv, checkout):
    registry = testenv["BUILDKIT_TEST_AUTH_REGISTRY"]
    ref = parse_ref(f"{registry}/pushtags/quickstart:v2")
    somewhere = PushResult(f"{ref.repository}@sha256:{'1' * 64}", "v1", f"sha256:{'1' * 64}", None)
    wrong = EnvProvider({"BUILDKIT_PY_REGISTRY_USERNAME": AUTH_USER, "BUILDKIT_PY_REGISTRY_PASSWORD": "wrong-pass"})
    with pytest.raises(RegistryError) as caught:
        add_tags(somewhere, [ref], Reporter(io.StringIO()), providers=[wrong])
    assert "HTTP 401" in str(caught.value) and "wrong-pass" not in str(caught.value)
    with pytest.raises(RegistryError, match="wants credentials and none were found"):
        add_tags(somewhere, [ref], Reporter(io.StringIO()), providers=[])  # anonymous


@pytest.fixture
def own_registry(tmp_path):
    """A registry of this test's own, so its access log shows only this test's requests."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from compare import fresh_registry

    with fresh_registry(tmp_path) as (registry, storage):
        yield registry, storage.with_suffix(".log")


def test_autopackage_uploads_the_image_once_and_adds_the_git_tag_as_a_manifest(testenv, checkout, own_registry, tmp_path):
    registry, log = own_registry
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_cli("autopackage", str(checkout), "--target", "local", "--image", f"{registry}/quickstart",
                   "--network", "host", "--progress", "plain", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    push = next(line for line in proc.stdout.splitlines() if line.startswith("push "))
    assert ", tagged git-" in push, push
    # The registry's access log: the engine sent the manifest once (one push); the git tag was a PUT of ours,
    # and the engine never came back to check the layers for a second tag.
    requests = [line for line in log.read_text().splitlines() if '"PUT /v2/quickstart/manifests/' in line]
    engine = [line for line in requests if line.endswith(')"') and '"docker/' in line]
    ours = [line for line in requests if f'"{USER_AGENT}"' in line]
    # Ours besides the tag: the SBOM and provenance by digest, and the referrers tag's index (sha256-<hex>).
    tagged = [line for line in ours if "/manifests/sha256" not in line]
    assert len(engine) == 1 and len(tagged) == 1 and len(ours) == 4, requests
    assert "/manifests/git-" in tagged[0] and "/manifests/bk-" in engine[0]
    tags = json.load(registry_get(registry, "quickstart/tags/list"))["tags"]
    # The image's two tags, and the referrers tag (sha256-<hex>) listing its attestations.
    assert len(tags) == 3 and {t.split("-")[0] for t in tags} == {"git", "bk", "sha256"}, tags


def test_autopackage_moves_a_tag_to_an_image_already_in_the_registry(testenv, checkout, own_registry, tmp_path):
    """A tag given with --tag names what this run made even when the image was pushed before (the content tag's
    manifest is there: not pushed again): back to an earlier edit, v1 moves back to that image."""
    registry, _ = own_registry
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    task = checkout / "trainer" / "task.py"
    original = task.read_text()

    def autopackage() -> str:
        proc = run_cli("autopackage", str(checkout), "--target", "local", "--image", f"{registry}/moved", "--tag",
                       f"{registry}/moved:v1", "--network", "host", "--no-attest", "--progress", "plain", env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return next(line for line in proc.stdout.splitlines() if line.startswith("push "))

    def digest(tag: str) -> str:
        return registry_get(registry, f"moved/manifests/{tag}", method="HEAD").headers["Docker-Content-Digest"]

    autopackage()
    first = digest("v1")
    task.write_text(original + "# an edit\n")
    autopackage()
    assert digest("v1") != first
    task.write_text(original)
    line = autopackage()
    assert "already in the registry: not pushed, tagged " in line and line.endswith(", tagged v1"), line
    assert digest("v1") == first
