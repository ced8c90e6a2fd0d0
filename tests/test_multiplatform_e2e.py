"""A real two-platform image on the loopback registry (issue 32, part 2): linux/amd64 and linux/arm64 built by
the engine's BuildKit one platform per build (arm64 under qemu-user-static, which scripts/testenv.sh registers),
each pushed into the content tag's repository, one index naming both PUT under every tag; attestations on the
index and on each platform's manifest; a failed platform pushes no index.

The base is an index too, as nvidia/cuda and python are: the amd64 and arm64 stand-ins pushed to the loopback
registry and named by one index (this machine pulls from nowhere else)."""

from __future__ import annotations

import io
import json
import shutil
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from google.cloud.devtools import cloudbuild_v1
from test_build_e2e import build, docker
from test_cloudbuild_e2e import cloud  # noqa: F401 - the Cloud Build stand-in's fixture

from buildkit_py.errors import RegistryError
from buildkit_py.oci.media import DOCKER_LIST, MANIFEST_TYPES
from buildkit_py.oci.refs import parse_ref
from buildkit_py.oci.remote import manifest, put_index
from buildkit_py.progress import Reporter
from conftest import REPO, run_cli

QUICKSTART = REPO / "examples" / "quickstart"
AMD64_BASE = "buildkit-py/standin:bookworm"


def registry_get(registry: str, path: str, method: str = "GET"):
    request = urllib.request.Request(f"http://{registry}/v2/{path}", method=method, headers={"Accept": MANIFEST_TYPES})
    return urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30)


def pushed_digest(testenv, image: str, ref: str) -> str:
    docker(testenv, "tag", image, ref)
    out = docker(testenv, "push", ref).stdout
    return next(w for line in out.splitlines() if "digest: " in line for w in line.split() if w.startswith("sha256:"))


@pytest.fixture(scope="module")
def multi_base(testenv) -> str:
    """REGISTRY/multiplatform/standin:bookworm: an index of the amd64 and arm64 stand-ins."""
    arm = testenv.get("BUILDKIT_TEST_ARM64_BASE")
    if not arm or docker(testenv, "image", "inspect", arm, check=False).returncode != 0:
        pytest.skip("no arm64 stand-in: scripts/testenv.sh makes one where qemu-user-static emulation can be set up")
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    pushed = [(p, pushed_digest(testenv, image, f"{registry}/multiplatform/standin:{p.split('/')[1]}"))
              for p, image in (("linux/amd64", AMD64_BASE), ("linux/arm64", arm))]
    index = parse_ref(f"{registry}/multiplatform/standin:bookworm")
    put_index([index], pushed, Reporter(io.StringIO()), providers=[])
    return str(index)


def trainer(tmp_path: Path, name: str, **keys) -> Path:
    root = tmp_path / name
    shutil.copytree(QUICKSTART, root, ignore=shutil.ignore_patterns("__pycache__"))
    config = yaml.safe_load((root / "buildkit.yaml").read_text())
    (root / "buildkit.yaml").write_text(yaml.safe_dump({**config, **keys}))
    return root


def test_an_index_refuses_an_image_of_another_platform(testenv):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    digest = pushed_digest(testenv, AMD64_BASE, f"{registry}/multiplatform/wrong:amd64")
    ref = parse_ref(f"{registry}/multiplatform/wrong:both")
    with pytest.raises(RegistryError, match=r"the linux/arm64 build made a linux/amd64 image .*: its base image has no "
                                            r"linux/arm64 image"):
        put_index([ref], [("linux/amd64", digest), ("linux/arm64", digest)], Reporter(io.StringIO()), providers=[])
    tags = json.load(registry_get(registry, "multiplatform/wrong/tags/list"))["tags"]
    assert tags == ["amd64"]  # nothing PUT


def test_two_platforms_build_push_one_index_and_run(testenv, multi_base, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    root = trainer(tmp_path, "multi", base_image=multi_base, platform=["linux/amd64", "linux/arm64"],
                   image=f"{registry}/multiplatform/quickstart")
    proc = build(testenv, root, "--push")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "note: linux/arm64 is built under emulation (qemu-aarch64, binfmt_misc)" in proc.stderr
    result = json.loads(proc.stdout)
    amd64, arm64 = result["platforms"]
    assert (amd64["platform"], arm64["platform"]) == ("linux/amd64", "linux/arm64")
    content = result["tags"][0]
    assert amd64["tag"] == f"{content}-linux-amd64" and arm64["tag"] == f"{content}-linux-arm64"
    index_digest = result["pushed"][0]["digest"]
    assert {p["digest"] for p in result["pushed"]} == {index_digest}
    # The registry holds one index under the content tag, naming each platform's manifest with its platform.
    got = registry_get(registry, f"multiplatform/quickstart/manifests/{content.rsplit(':', 1)[1]}")
    assert got.headers["Content-Type"] == DOCKER_LIST and got.headers["Docker-Content-Digest"] == index_digest
    listed = json.load(got)["manifests"]
    assert [m["digest"] for m in listed] == [amd64["digest"], arm64["digest"]]
    assert [(m["platform"]["os"], m["platform"]["architecture"]) for m in listed] == [("linux", "amd64"),
                                                                                     ("linux", "arm64")]
    # `print` names the index: the tag the build gave it and the digest the registry holds.
    config = str(root / "buildkit.yaml")
    assert run_cli("print", "image-uri", "--config", config, env=testenv).stdout.strip() == content
    assert run_cli("print", "digest", "--config", config, env=testenv).stdout.strip() == \
        f"{registry}/multiplatform/quickstart@{index_digest}"
    # What `plan` reads: the index's platforms (the job's machines' platform must be among them).
    assert [p.split("/")[:2] for p in manifest(parse_ref(content)).platforms] == [["linux", "amd64"], ["linux", "arm64"]]
    # The SBOM and provenance are attached to the index's digest, and each platform's manifest has its own, which
    # verify reads back (the platform's own content label, base and packages).
    assert len(result["attestations"]) == 6
    listed_for_index = json.load(registry_get(registry, "multiplatform/quickstart/manifests/"
                                                        f"{index_digest.replace(':', '-')}"))["manifests"]
    # (<=: a registry kept from an earlier run lists that run's too, its command line naming another directory)
    assert {a["digest"] for a in result["attestations"][:2]} <= {m["digest"] for m in listed_for_index}
    provenances = set()
    for each in (amd64, arm64):
        verified = run_cli("verify", f"{registry}/multiplatform/quickstart@{each['digest']}", "--json", env=testenv)
        assert verified.returncode == 0, verified.stderr[-2000:]
        found = json.loads(verified.stdout)
        assert found["image"] == f"{registry}/multiplatform/quickstart@{each['digest']}"
        provenances.add(found["provenance"])
    assert len(provenances) == 2  # each names its own platform, base and content
    # Each platform's image runs the trainer: arm64's under qemu.
    for image, machine in ((amd64["tag"], "x86_64"), (arm64["tag"], "aarch64")):
        ran = docker(testenv, "run", "--rm", "--network", "none", "--entrypoint", "python", image, "-c",
                     "import platform; print(platform.machine())")
        assert ran.stdout.strip() == machine
        assert "trained: w=" in docker(testenv, "run", "--rm", "--network", "none", image).stdout
    # Built again by the engine: every platform is up to date, and the same index is pushed.
    again = build(testenv, root, "--push", "--no-fast-path")
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["pushed"][0]["digest"] == index_digest
    assert again.stderr.count("is up to date") == 2


def test_a_failed_platform_pushes_no_index(testenv, multi_base, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    # A requirement only arm64 asks for, and no index has: the arm64 build fails, after amd64's passed.
    root = trainer(tmp_path, "broken", base_image=multi_base, platform="linux/amd64,linux/arm64",
                   image=f"{registry}/multiplatform/broken",
                   pip=["buildkit-py-no-such-package==1.0; platform_machine == 'aarch64'"])
    proc = build(testenv, root, "--push", "--offline")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "buildkit-py-no-such-package" in proc.stderr
    with pytest.raises(urllib.error.HTTPError):  # nothing pushed: no platform's image, no index
        registry_get(registry, "multiplatform/broken/tags/list")


def test_a_code_edit_is_appended_to_every_platform_and_equals_a_full_build(testenv, multi_base, tmp_path):
    from test_fastpath_e2e import _compared_config, image

    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    fast_repo, full_repo = "multiplatform/edit", "multiplatform/edit-full"
    root = trainer(tmp_path, "edit", base_image=multi_base, platform=["linux/amd64", "linux/arm64"],
                   image=f"{registry}/{fast_repo}")
    cache = {"BUILDKIT_PY_CACHE_DIR": str(tmp_path / "cache")}
    first = build(testenv, root, "--push", env=cache)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stderr.count("no previous image: full build") == 2
    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write("\n# a one-line edit\n")
    # No engine: each platform's code layer is appended in the registry, and a new index written.
    fast = build(testenv, root, "--push", env={**cache, "DOCKER_HOST": "unix:///nonexistent.sock"})
    assert fast.returncode == 0, fast.stderr[-3000:]
    assert fast.stderr.count("appended the code layer") == 2 and "building " not in fast.stderr
    fast_result = json.loads(fast.stdout)
    full = build(testenv, root, "--push", "--no-fast-path", "--image", f"{registry}/{full_repo}",
                 env={"BUILDKIT_PY_CACHE_DIR": str(tmp_path / "cache-full")})
    assert full.returncode == 0, full.stderr[-3000:]
    full_result = json.loads(full.stdout)
    tag = fast_result["tags"][0].rsplit(":", 1)[1]
    assert full_result["tags"][0].endswith(":" + tag)  # the same content tag: the same contexts both ways
    fast_index = json.load(registry_get(registry, f"{fast_repo}/manifests/{tag}"))
    full_index = json.load(registry_get(registry, f"{full_repo}/manifests/{tag}"))
    assert [m["platform"] for m in fast_index["manifests"]] == [m["platform"] for m in full_index["manifests"]]
    # Manifest by manifest: the base's and the install steps' layers are the very same blobs, the code layer holds
    # the same entries, the configs say the same.
    for suffix in ("linux-amd64", "linux-arm64"):
        fast_manifest, fast_config, fast_files = image(registry, fast_repo, f"{tag}-{suffix}")
        full_manifest, full_config, full_files = image(registry, full_repo, f"{tag}-{suffix}")
        assert fast_manifest["mediaType"] == full_manifest["mediaType"]
        assert [x["digest"] for x in fast_manifest["layers"][:-1]] == [x["digest"] for x in full_manifest["layers"][:-1]]
        assert fast_files == full_files, suffix
        assert _compared_config(fast_config) == _compared_config(full_config)
        assert (fast_config["os"], fast_config["architecture"]) == (full_config["os"], full_config["architecture"])
    assert [p["digest"] for p in fast_result["platforms"]] == [m["digest"] for m in fast_index["manifests"]]


@pytest.mark.skipif(shutil.which("buildah") is None, reason="buildah is not installed (scripts/testenv.sh installs it)")
def test_buildah_builds_each_platform_and_the_index_is_an_oci_one(testenv, multi_base, tmp_path):
    from buildkit_py.oci.media import OCI_INDEX, OCI_MANIFEST

    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    root = trainer(tmp_path, "buildah", base_image=multi_base, platform=["linux/amd64", "linux/arm64"],
                   image=f"{registry}/multiplatform/buildah", builder="buildah")
    proc = build(testenv, root, "--push", "--no-attest", env={"BUILDKIT_PY_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stderr.count("(buildah)") == 2  # one push per platform, by buildah
    result = json.loads(proc.stdout)
    got = registry_get(registry, f"multiplatform/buildah/manifests/{result['tags'][0].rsplit(':', 1)[1]}")
    # buildah pushes OCI manifests: the index is an OCI image index naming them with their platforms.
    assert got.headers["Content-Type"] == OCI_INDEX
    listed = json.load(got)["manifests"]
    assert [m["mediaType"] for m in listed] == [OCI_MANIFEST, OCI_MANIFEST]
    assert [m["platform"]["architecture"] for m in listed] == ["amd64", "arm64"]
    assert [m["digest"] for m in listed] == [p["digest"] for p in result["platforms"]]


def test_cloud_build_builds_each_platform_and_the_index_is_written_from_here(testenv, cloud, multi_base,  # noqa: F811
                                                                            tmp_path):
    from test_cloudbuild_e2e import CA_VERSION, PIP_VERSION, PROJECT

    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    repository = f"multiplatform/cloud-{uuid.uuid4().hex[:8]}"
    root = trainer(tmp_path, "cloud", base_image=multi_base, platform=["linux/amd64", "linux/arm64"],
                   image=f"{registry}/{repository}", builder="cloudbuild", network="host",
                   cloudbuild={"project": PROJECT, "ca_cert_secret": CA_VERSION, "pip_conf_secret": PIP_VERSION})
    proc = run_cli("build", "--config", str(root / "buildkit.yaml"), "--progress", "plain", "--json", "--push",
                   env=cloud["env"])
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    # One Cloud Build per platform, each request as the service parses it, each building its own Dockerfile for its
    # platform; the arm64 one registers qemu first where the worker lacks it.
    amd64, arm64 = cloud["standin"].bodies
    scripts = [cloudbuild_v1.Build.from_json(json.dumps(b)).steps[0].args[1] for b in (amd64, arm64)]
    assert "--platform linux/amd64" in scripts[0] and "--platform linux/arm64" in scripts[1]
    assert "binfmt" not in scripts[0]
    assert ("[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || docker run --privileged --rm tonistiigi/binfmt "
            "--install arm64") in scripts[1].replace("$$", "$")
    digests = [b["results"]["images"][0]["digest"] for b in cloud["standin"].builds.values()]
    assert [p["digest"] for p in result["platforms"]] == digests
    tag = result["tags"][0].rsplit(":", 1)[1]
    got = registry_get(registry, f"{repository}/manifests/{tag}")
    assert [m["digest"] for m in json.load(got)["manifests"]] == digests
    # The index's SBOM and provenance, and each platform's.
    assert got.headers["Docker-Content-Digest"] == result["pushed"][0]["digest"] and len(result["attestations"]) == 6


def test_lock_pins_each_platform_and_the_locked_index_verifies(testenv, multi_base, index, tmp_path):
    from test_lock_e2e import cli, make_wheel

    from conftest import CA_BUNDLE

    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    make_wheel(index.directory, "bkpin", "1.0", "locked")
    root = trainer(tmp_path, "locked", base_image=multi_base, platform=["linux/amd64", "linux/arm64"],
                   image=f"{registry}/multiplatform/locked", pip=["bkpin"], hypertune=False)
    (root / "pip.conf").write_text(f"[global]\nextra-index-url = {index.url}\n")
    with open(root / "buildkit.yaml", "a") as handle:
        handle.write("pip_conf: pip.conf\n")
    config = str(root / "buildkit.yaml")
    locked = cli(testenv, "lock", "--config", config, "--ca-cert", CA_BUNDLE)
    assert locked.returncode == 0, locked.stderr[-3000:]
    sections = yaml.safe_load((root / "buildkit.lock").read_text())["images"]
    assert list(sections) == ["_base@linux/amd64", "_base@linux/arm64"]
    # Each platform's base is its own manifest of the base's index.
    listed = {m["platform"]["architecture"]: m["digest"]
              for m in json.load(registry_get(registry, "multiplatform/standin/manifests/bookworm"))["manifests"]}
    assert [s["base"]["digest"] for s in sections.values()] == [listed["amd64"], listed["arm64"]]
    assert [s["platform"] for s in sections.values()] == ["linux/amd64", "linux/arm64"]
    assert all([p["name"] for p in s["packages"]] == ["bkpin"] for s in sections.values())
    assert cli(testenv, "lock", "--check", "--config", config).returncode == 0

    proc = build(testenv, root, "--push", "--locked", "--ca-cert", CA_BUNDLE)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    for image, arch in ((p["tag"], p["platform"].split("/")[1]) for p in result["platforms"]):
        labels = json.loads(docker(testenv, "image", "inspect", image).stdout)[0]["Config"]["Labels"]
        assert labels["org.opencontainers.image.base.digest"] == listed[arch]
        assert "bkpin 1.0 locked" in docker(testenv, "run", "--rm", "--network", "none", "--entrypoint", "python",
                                            image, "-c", "import bkpin; print('bkpin', bkpin.VERSION, bkpin.MARKER)").stdout
    verified = cli(testenv, "verify", result["tags"][0], "--lock", str(root / "buildkit.lock"))
    assert verified.returncode == 0, verified.stderr[-3000:]


def test_without_push_each_platform_is_tagged_here_and_tags_must_share_a_repository(testenv, multi_base, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    root = trainer(tmp_path, "local", base_image=multi_base, platform=["linux/amd64", "linux/arm64"],
                   image=f"{registry}/multiplatform/local")
    proc = build(testenv, root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["pushed"] == [] and result["image_id"] == ""
    assert result["tags"] == [p["tag"] for p in result["platforms"]] and all(p["digest"] is None for p in result["platforms"])
    assert "a multi-platform image is an index in a registry: --push pushes each platform" in proc.stderr
    for p in result["platforms"]:
        arch = json.loads(docker(testenv, "image", "inspect", p["tag"]).stdout)[0]["Architecture"]
        assert arch == p["platform"].split("/")[1]
    # An index names manifests of its own repository only: a tag elsewhere is refused before anything is built.
    proc = build(testenv, root, "--push", "--tag", f"{registry}/multiplatform/elsewhere:v1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"buildkit-py: error: tags: '{registry}/multiplatform/elsewhere:v1' is in another "
                           "repository than"), last
    assert "building " not in proc.stderr
