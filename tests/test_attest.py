"""SBOM and provenance attached to pushed images (issue 32): made from a recipe, pushed to the loopback registry (no
referrers API: the tag schema) and to a stand-in that has the referrers API, read back by `verify`; a swapped SBOM,
an image that is not the provenance's and a lock that is not the image's are refused; hostile flags and keys exit 2.
No engine: the image is a small manifest written through the registry API."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
import threading
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from buildkit_py import api
from buildkit_py.errors import AttestationError, BuildkitError
from buildkit_py.oci.client import PushResult, RegistryClient, send, upload_blob
from buildkit_py.oci.media import EMPTY_MEDIA_TYPE, OCI_INDEX, OCI_MANIFEST
from buildkit_py.oci.referrers import tag_for
from buildkit_py.oci.refs import parse_ref
from buildkit_py.pipeline import attest
from buildkit_py.pipeline.buildtypes import BuildOptions, BuildResult
from buildkit_py.pipeline.lock import LOCKED_REQUIREMENTS, Lock, LockedImage, LockedPackage
from buildkit_py.pipeline.recipe import Recipe
from buildkit_py.progress import Reporter
from conftest import LoopbackServer, run_cli

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
BASE_DIGEST = "sha256:" + "b" * 64
TOKEN = "s3cr3t-index-token"


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def fetch(registry: str, path: str, accept: str = OCI_INDEX) -> tuple[int, bytes, dict]:
    request = urllib.request.Request(f"http://{registry}/v2/{path}", headers={"Accept": accept})
    try:
        with _OPENER.open(request, timeout=30) as answer:
            return answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def locked_image(packages: tuple[LockedPackage, ...]) -> LockedImage:
    return LockedImage(None, "3.11", "linux/amd64", "127.0.0.1:5000/attest/base:1", BASE_DIGEST, ("https://pypi.org/simple",),
                       (("config", "sha256:" + "c" * 64), ("plan", "sha256:" + "d" * 64), ("template", "sha256:" + "e" * 64)),
                       packages)


PACKAGES = (LockedPackage("numpy", "2.1.0", ("sha256:" + "1" * 64, "sha256:" + "2" * 64)),
            LockedPackage("typing_extensions", "4.12.2", ("sha256:" + "3" * 64,)))


def recipe(root: Path, section: LockedImage | None, *, variant: str | None = None) -> Recipe:
    """A recipe as make_recipe leaves it, locked to SECTION (or not locked: pins from the plan)."""
    plan: dict = {"base_image": section.base_image if section else "python:3.11-slim-bookworm", "ubuntu": None,
                  "system_packages": ["libgomp1"], "python": {"apt_packages": []}, "hypertune": "cloudml-hypertune==0.1.0.dev6",
                  "pip": ["six==1.16.0", "requests>=2", f"private @ https://user:{TOKEN}@example.com/p.whl"],
                  "framework": {"requirement": "torch==2.5.1", "index_url": f"https://user:{TOKEN}@download.example/cpu"},
                  "requirements": None, "lock": None, "requirements_export": None}
    if section is not None:
        source = root / "locked.txt"
        source.write_text(section.requirements)
        plan["lock"] = {"base_digest": section.base_digest, "digest": section.digest, "requirements": LOCKED_REQUIREMENTS,
                        "source": str(source)}
    (root / "buildkit.yaml").write_text("framework: none\n")
    return Recipe(root=root, dockerfile="FROM base\nCOPY . /app\n", ignore="", plan=plan, notes=(),
                  image=None, tags=(), variant=variant, builder="buildkit", remote=False, platform="linux/amd64",
                  secrets_digest="", allow_secrets=(), allow_large=(), extras=())


def push_image(registry: str, path: str, labels: dict[str, str]) -> str:
    """A small image (one layer, a config with LABELS) pushed through the registry API; its manifest digest."""
    ref = parse_ref(f"{registry}/{path}:v1")
    client = RegistryClient(ref)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        data = uuid.uuid4().hex.encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    layer = gzip.compress(raw.getvalue(), mtime=0)
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": labels},
                         "rootfs": {"type": "layers", "diff_ids": [sha(raw.getvalue())]}}).encode()
    for blob in (layer, config):
        upload_blob(client, ref, sha(blob), blob)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(config),
                                      "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": sha(layer),
                                       "size": len(layer)}]}).encode()
    put = send(client, "PUT", "manifests/v1", {"Content-Type": OCI_MANIFEST}, manifest)
    assert put.status_code == 201, put.text
    return sha(manifest)


PUSH = BuildOptions(push=True)


def pushed(root: Path, registry: str, section: LockedImage | None, content: str = "f" * 64,
           options: BuildOptions = PUSH, **kw) -> tuple[BuildResult, str]:
    """An image pushed and attested as build() attests it; (result, repository)."""
    path = f"attest/{uuid.uuid4().hex[:10]}"
    labels = {"dev.buildkit-py.content-digest": content}
    if section is not None:
        labels["dev.buildkit-py.lock-digest"] = section.digest
    digest = push_image(registry, path, labels)
    repository = f"{registry}/{path}"
    result = BuildResult("sha256:" + "0" * 64, (f"{repository}:v1",), True, content, recipe(root, section, **kw),
                         (PushResult(f"{repository}@{digest}", "v1", digest, None),))
    return attest.attested(result, [parse_ref(f"{repository}:v1")], options, Reporter(io.StringIO()),
                           "abc123def456"), repository


# ---------------------------------------------------------------------------------------------
# The documents


def test_the_sbom_lists_the_lock_exactly_and_is_the_same_bytes_every_time(tmp_path):
    section = locked_image(PACKAGES)
    made = recipe(tmp_path, section)
    first = attest.sbom(made, "127.0.0.1:5000/a/b", "sha256:" + "9" * 64)
    assert first == attest.sbom(made, "127.0.0.1:5000/a/b", "sha256:" + "9" * 64)
    document = json.loads(first)
    assert document["bomFormat"] == "CycloneDX" and document["specVersion"] == "1.5"
    assert re.fullmatch(r"urn:uuid:[0-9a-f-]{36}", document["serialNumber"])
    assert document["metadata"]["component"]["version"] == "sha256:" + "9" * 64
    python = {c["purl"]: c for c in document["components"] if c.get("purl", "").startswith("pkg:pypi/")}
    assert set(python) == {"pkg:pypi/numpy@2.1.0", "pkg:pypi/typing-extensions@4.12.2"}
    assert [h["content"] for h in python["pkg:pypi/numpy@2.1.0"]["hashes"]] == ["1" * 64, "2" * 64]
    base = "pkg:oci/base@sha256%3A" + "b" * 64 + "?repository_url=127.0.0.1:5000/attest/base"
    assert {"pkg:deb/debian/libgomp1", base} <= {c.get("purl") for c in document["components"]}
    assert document["compositions"][0]["aggregate"] == "complete"
    assert attest.lock_differences(document, [(p.name, p.version, p.hashes) for p in PACKAGES]) == []
    assert attest.sbom(made, "127.0.0.1:5000/a/b", "sha256:" + "8" * 64) != first  # another image, another SBOM


def test_unlocked_sbom_names_the_plans_pins_as_incomplete_and_no_credentials(tmp_path):
    document = json.loads(attest.sbom(recipe(tmp_path, None), "r/i", "sha256:" + "9" * 64))
    purls = {c["purl"] for c in document["components"] if c.get("purl", "").startswith("pkg:pypi/")}
    assert {"pkg:pypi/torch@2.5.1", "pkg:pypi/six@1.16.0", "pkg:pypi/cloudml-hypertune@0.1.0.dev6", "pkg:pypi/requests",
            "pkg:pypi/private"} == purls
    assert document["compositions"][0]["aggregate"] == "incomplete"
    assert TOKEN not in json.dumps(document)


def test_the_provenance_is_an_in_toto_slsa_statement_without_credentials(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["buildkit-py", "build", "--push", "--pip-index-url",
                                     f"https://user:{TOKEN}@index.example/simple?token={TOKEN}"])
    section = locked_image(PACKAGES)
    built = attest.Built(parse_ref("127.0.0.1:5000/a/b"), "sha256:" + "9" * 64, ("v1",), "f" * 64, "abc123def456", "buildkit")
    statement = json.loads(attest.provenance(recipe(tmp_path, section), built, "sha256:" + "7" * 64))
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert statement["subject"] == [{"name": "127.0.0.1:5000/a/b", "digest": {"sha256": "9" * 64}}]
    definition, run = statement["predicate"]["buildDefinition"], statement["predicate"]["runDetails"]
    deps = {d["name"]: d for d in definition["resolvedDependencies"]}
    assert deps["base"]["digest"] == {"sha256": "b" * 64}
    assert deps["buildkit.lock"]["digest"] == {"sha256": section.digest.removeprefix("sha256:")}
    assert deps["buildkit.yaml"]["digest"] == {"sha256": hashlib.sha256(b"framework: none\n").hexdigest()}
    assert definition["externalParameters"]["source"] == {"revision": "abc123def456"}
    assert run["builder"]["id"].endswith("/buildkit") and run["byproducts"][0]["digest"] == {"sha256": "7" * 64}
    assert TOKEN not in json.dumps(statement), json.dumps(statement)


def test_the_referrers_tag_is_the_specs():
    assert tag_for("sha256:" + "a" * 64) == "sha256-" + "a" * 64


# ---------------------------------------------------------------------------------------------
# The loopback registry: distribution 2.8, no referrers API (the tag schema)


def test_attached_through_the_tag_schema_and_verified(testenv, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    section = locked_image(PACKAGES)
    result, repository = pushed(tmp_path, registry, section)
    assert [a.listed for a in result.attestations] == ["tag schema", "tag schema"]
    digest = result.pushed[0].digest
    status, body, _ = fetch(registry, f"{repository.split('/', 1)[1]}/manifests/{tag_for(digest)}")
    assert status == 200
    index = json.loads(body)
    assert index["mediaType"] == OCI_INDEX
    assert {m["artifactType"] for m in index["manifests"]} == {attest.SBOM_TYPE, attest.PROVENANCE_TYPE}
    artifact = json.loads(fetch(registry, f"{repository.split('/', 1)[1]}/manifests/{index['manifests'][0]['digest']}",
                                OCI_MANIFEST)[1])
    assert artifact["subject"]["digest"] == digest and artifact["config"]["mediaType"] == EMPTY_MEDIA_TYPE
    assert result.to_dict()["attestations"][0]["digest"] == index["manifests"][0]["digest"]

    # Attached again: the same artifacts, the index not rewritten.
    again = attest.attested(BuildResult(**{**result.__dict__, "attestations": ()}), [parse_ref(f"{repository}:v1")],
                            BuildOptions(push=True), Reporter(io.StringIO()), "abc123def456")
    assert again.attestations == result.attestations
    assert fetch(registry, f"{repository.split('/', 1)[1]}/manifests/{tag_for(digest)}")[1] == body

    lock = tmp_path / "buildkit.lock"
    lock.write_text(Lock(lock, (section,)).text())
    verified = api.verify(f"{repository}:v1", lock=lock, progress="quiet")
    assert verified.image == f"{repository}@{digest}" and verified.listed == "tag schema" and verified.packages == 2
    proc = run_cli("verify", f"{repository}@{digest}", "--lock", str(lock), "--json", env=testenv)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["sbom"] == verified.sbom


def test_no_attest_attaches_nothing_and_verify_says_so(testenv, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    result, repository = pushed(tmp_path, registry, None, options=BuildOptions(push=True, attest=False))
    assert result.attestations == ()
    proc = run_cli("verify", f"{repository}:v1", env=testenv)
    assert proc.returncode == 11 and "has no SBOM and no provenance of buildkit-py" in proc.stderr, proc.stderr
    assert "--no-attest" in proc.stderr and "Traceback" not in proc.stderr


def _swap_sbom(registry: str, repository: str, digest: str, data: bytes) -> None:
    """What an attacker with push rights does: another SBOM artifact, put in the tag schema's index in place of ours."""
    ref = parse_ref(f"{repository}:v1")
    client = RegistryClient(ref)
    path = repository.split("/", 1)[1]
    index = json.loads(fetch(registry, f"{path}/manifests/{tag_for(digest)}")[1])
    entry = next(m for m in index["manifests"] if m["artifactType"] == attest.SBOM_TYPE)
    artifact = json.loads(fetch(registry, f"{path}/manifests/{entry['digest']}", OCI_MANIFEST)[1])
    upload_blob(client, ref, sha(data), data)
    artifact["layers"] = [{"mediaType": attest.SBOM_TYPE, "digest": sha(data), "size": len(data)}]
    body = json.dumps(artifact).encode()
    assert send(client, "PUT", f"manifests/{sha(body)}", {"Content-Type": OCI_MANIFEST}, body).status_code == 201
    entry.update(digest=sha(body), size=len(body))
    body = json.dumps(index).encode()
    assert send(client, "PUT", f"manifests/{tag_for(digest)}", {"Content-Type": OCI_INDEX}, body).status_code == 201


def test_a_swapped_sbom_is_refused(testenv, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    section = locked_image(PACKAGES)
    result, repository = pushed(tmp_path, registry, section)
    digest = result.pushed[0].digest
    document = json.loads(fetch(registry, f"{repository.split('/', 1)[1]}/blobs/{result.attestations[0].blob}")[1])
    for component in document["components"]:
        if component["name"] == "numpy":
            component["version"] = "1.0.0"
    _swap_sbom(registry, repository, digest, json.dumps(document).encode())
    proc = run_cli("verify", f"{repository}:v1", env=testenv)
    assert proc.returncode == 11 and "is not the one the provenance names" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_sbom_that_is_not_the_locks_is_refused_naming_the_package(testenv, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    built_from = locked_image(PACKAGES)
    result, repository = pushed(tmp_path, registry, built_from)
    other = locked_image((LockedPackage("numpy", "2.2.0", ("sha256:" + "4" * 64,)),) + PACKAGES[1:])
    lock = tmp_path / "other.lock"
    lock.write_text(Lock(lock, (other,)).text())
    with pytest.raises(AttestationError) as caught:
        api.verify(f"{repository}:v1", lock=lock, progress="quiet")
    assert "not this buildkit.lock" in str(caught.value)
    # The same section digest but other packages in the SBOM: the package is named.
    document = json.loads(attest.sbom(recipe(tmp_path, other), repository, result.pushed[0].digest))
    problems = attest.lock_differences(document, [(p.name, p.version, p.hashes) for p in built_from.packages])
    assert problems == ["numpy: the SBOM says version '2.2.0', the lock 2.1.0"]


def test_an_unlocked_image_checked_against_a_lock_is_said_to_be_unlocked(testenv, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    _, repository = pushed(tmp_path, registry, None)
    lock = tmp_path / "buildkit.lock"
    lock.write_text(Lock(lock, (locked_image(PACKAGES),)).text())
    with pytest.raises(AttestationError) as caught:
        api.verify(f"{repository}:v1", lock=lock, progress="quiet")
    assert "the image was built unlocked" in str(caught.value) and "None" not in str(caught.value)


def test_an_image_whose_labels_are_not_the_provenances_is_refused(testenv, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    result, repository = pushed(tmp_path, registry, None)
    # The same attestations moved onto another image (its content label differs).
    other = push_image(registry, repository.split("/", 1)[1], {"dev.buildkit-py.content-digest": "e" * 64})
    moved = BuildResult(**{**result.__dict__, "attestations": (),
                           "pushed": (PushResult(f"{repository}@{other}", "v1", other, None),)})
    attest.attested(moved, [parse_ref(f"{repository}:v1")], BuildOptions(push=True), Reporter(io.StringIO()), None)
    with pytest.raises(AttestationError) as caught:
        api.verify(f"{repository}@{other}", progress="quiet")
    assert "dev.buildkit-py.content-digest" in str(caught.value)


# ---------------------------------------------------------------------------------------------
# A registry with the referrers API: a stand-in in front of the loopback registry (distribution-spec 1.1's
# OCI-Subject header on a manifest PUT with a subject, and GET /v2/<name>/referrers/<digest>)


class ReferrersRegistry(LoopbackServer):
    daemon_threads = True

    def __init__(self, upstream: str):
        self.upstream, self.listed, self.seen = upstream, {}, []
        super().__init__(("127.0.0.1", 0), _Referrers)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class _Referrers(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _answer(self, status: int, body: bytes, headers: dict) -> None:
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _any(self) -> None:
        server: ReferrersRegistry = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        server.seen.append((self.command, self.path))
        match = re.fullmatch(r"/v2/(.+)/referrers/(sha256:[0-9a-f]{64})(\?.*)?", self.path)
        if match and self.command == "GET":
            entries = server.listed.get((match.group(1), match.group(2)), [])
            index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode()
            return self._answer(200, index, {"Content-Type": OCI_INDEX})
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
        request = urllib.request.Request(f"http://{server.upstream}{self.path}", data=body if body else None,
                                         method=self.command, headers=headers)
        try:
            with _OPENER.open(request, timeout=30) as answer:
                status, data, answered = answer.status, answer.read(), dict(answer.headers)
        except urllib.error.HTTPError as exc:
            status, data, answered = exc.code, exc.read(), dict(exc.headers)
        manifest = re.fullmatch(r"/v2/(.+)/manifests/[^/]+", self.path)
        if manifest and self.command == "PUT" and status == 201:
            sent = json.loads(body)
            if isinstance(sent.get("subject"), dict):
                entry = {"mediaType": sent["mediaType"], "digest": sha(body), "size": len(body),
                         "artifactType": sent.get("artifactType") or sent["config"]["mediaType"]}
                if sent.get("annotations"):
                    entry["annotations"] = sent["annotations"]
                server.listed.setdefault((manifest.group(1), sent["subject"]["digest"]), []).append(entry)
                answered["OCI-Subject"] = sent["subject"]["digest"]
        self._answer(status, data, answered)

    do_GET = do_PUT = do_POST = do_HEAD = do_PATCH = do_DELETE = _any  # noqa: N815


@pytest.fixture
def referrers_registry(testenv):
    server = ReferrersRegistry(testenv["BUILDKIT_TEST_REGISTRY"])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def test_a_registry_with_the_referrers_api_lists_them_itself(testenv, tmp_path, referrers_registry):
    server = referrers_registry
    result, repository = pushed(tmp_path, server.address, locked_image(PACKAGES))
    assert [a.listed for a in result.attestations] == ["referrers API", "referrers API"]
    digest = result.pushed[0].digest
    assert not any(tag_for(digest) in path for _, path in server.seen)  # no tag schema written or read
    verified = api.verify(f"{repository}@{digest}", progress="quiet")
    assert verified.listed == "referrers API"
    assert ("GET", f"/v2/{repository.split('/', 1)[1]}/referrers/{digest}") in server.seen


# ---------------------------------------------------------------------------------------------
# Hostile flags and keys


@pytest.mark.parametrize("value", ["yes\n", "\u2028", "a" * 70000])
def test_no_attest_takes_no_value(tmp_path, capsys, monkeypatch, value):
    from buildkit_py.cli import main

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(SystemExit) as caught:  # argparse's refusal of a value for a switch
        main(["build", "--dir", str(tmp_path), f"--no-attest={value}"])
    assert caught.value.code == 2 and "--no-attest" in capsys.readouterr().err


@pytest.mark.parametrize("wrong", ["false", 0, [False], None])
def test_attest_of_another_type_is_refused_by_the_api(tmp_path, wrong):
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "task.py").write_text("")
    with pytest.raises(BuildkitError) as caught:
        api.build(api.Project(directory=tmp_path), api.BuildOptions(push=True, attest=wrong))
    assert caught.value.exit_code == 2 and "--no-attest" in str(caught.value)
    with pytest.raises(BuildkitError) as caught:
        api.build(api.Project(directory=tmp_path), push=True, attest=wrong)
    assert caught.value.exit_code == 2 and "attest" in str(caught.value)


@pytest.mark.parametrize("image", ["bad ref", "127.0.0.1:5000/a/b:\u2028", "a" * 70000, "x/y@sha256:nothex",
                                   "127.0.0.1:5000/a\nb:1"])
def test_hostile_images_exit_2_naming_it(image):
    proc = run_cli("verify", image)
    assert proc.returncode == 2 and "IMAGE" in proc.stderr and len(proc.stderr) < 1000, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("lock", ["/nonexistent/buildkit.lock", "\u2028", "a" * 5000])
def test_hostile_lock_paths_exit_2_naming_the_flag(lock):
    proc = run_cli("verify", "127.0.0.1:5000/a/b:1", "--lock", lock)
    assert proc.returncode == 2 and "--lock" in proc.stderr and len(proc.stderr) < 1000, proc.stderr


def test_verify_refuses_unknown_keywords_and_values_of_another_type():
    with pytest.raises(BuildkitError) as caught:
        api.verify("127.0.0.1:5000/a/b:1", lokc="x")
    assert caught.value.exit_code == 2 and "lokc" in str(caught.value)
    for wrong in (1, b"x", None, ["a"]):
        with pytest.raises(BuildkitError) as caught:
            api.verify(wrong)
        assert caught.value.exit_code == 2 and "IMAGE" in str(caught.value)


# ---------------------------------------------------------------------------------------------
# The real pipeline: a BuildKit build, then a code-only edit appended by the fast path


def test_a_build_and_its_fast_path_append_are_attested_and_verified(testenv, tmp_path):
    from test_fastpath_e2e import build, trainer

    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    root, cache = trainer(tmp_path, "quickstart"), tmp_path / "cache"
    repo = f"{registry}/attest-e2e/quickstart-{uuid.uuid4().hex[:8]}"
    first = build(testenv, root, cache, "--tag", repo)
    assert first.returncode == 0, first.stderr[-3000:]
    result = json.loads(first.stdout)
    assert [a["listed"] for a in result["attestations"]] == ["tag schema", "tag schema"]
    proc = run_cli("verify", result["tags"][0], "--json", env=testenv)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["image"] == result["pushed"][0]["image"]

    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write(f"\n# {uuid.uuid4().hex}\n")
    fast = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert fast.returncode == 0 and "appended the code layer" in fast.stderr, fast.stderr[-3000:]
    appended = json.loads(fast.stdout)
    assert len(appended["attestations"]) == 2
    assert api.verify(appended["tags"][0], progress="quiet").image == appended["pushed"][0]["image"]
    path = repo.split("/", 1)[1]
    index = json.loads(fetch(registry, f"{path}/manifests/{tag_for(appended['pushed'][0]['digest'])}")[1])
    provenance = next(m for m in index["manifests"] if m["artifactType"] == attest.PROVENANCE_TYPE)
    blob = json.loads(fetch(registry, f"{path}/manifests/{provenance['digest']}", OCI_MANIFEST)[1])["layers"][0]["digest"]
    statement = json.loads(fetch(registry, f"{path}/blobs/{blob}")[1])
    assert statement["predicate"]["runDetails"]["builder"]["id"].endswith("/fast-path")

    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write(f"\n# {uuid.uuid4().hex}\n")
    bare = build(testenv, root, cache, "--tag", repo, "--no-attest", env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert bare.returncode == 0 and json.loads(bare.stdout)["attestations"] == [], bare.stderr[-3000:]
