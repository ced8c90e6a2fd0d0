"""The fast path on the real engine and loopback registries: a code-only edit appended in the registry gives the
same image, file by file and in its config, as a full BuildKit build of the same context; it needs no engine; and
every fault (a refused media type, lost blobs, 403 midway, Ctrl-C during the upload, two pushes at once) ends
with a clear error and no tag on a half-written image."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
import uuid
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from buildkit_py import api
from buildkit_py.fsutil import CACHE_ENV
from buildkit_py.oci import media
from buildkit_py.oci.referrers import tag_for
from buildkit_py.pipeline import fastpath
from conftest import REPO, LoopbackServer, run_cli, socket_closed

sys.path.insert(0, str(REPO / "benchmarks"))
from login import token_registry  # noqa: E402  (the stand-in edit.py measures with)

ACCEPT = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy


def fetch(registry: str, path: str, method: str = "GET") -> tuple[int, bytes, dict]:
    request = urllib.request.Request(f"http://{registry}/v2/{path}", method=method, headers={"Accept": ACCEPT})
    try:
        with _OPENER.open(request, timeout=60) as answer:
            return answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def build(testenv, root: Path, cache: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_cli("build", "--config", str(root / "buildkit.yaml"), "--network", "host", "--progress", "plain", "--json",
                   "--push", *args, env={**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"],
                                         "BUILDKIT_PY_CACHE_DIR": str(cache), **(env or {})})


def trainer(tmp_path: Path, example: str) -> Path:
    root = tmp_path / example
    shutil.copytree(REPO / "examples" / example, root, ignore=shutil.ignore_patterns("__pycache__", "Makefile", "*.mk"))
    if example == "quickstart":  # and the awkward kinds of entry: links, an empty directory, a script, non-ASCII names
        (root / "trainer" / "empty").mkdir()
        (root / "trainer" / "alias.py").symlink_to("task.py")
        (root / "data").mkdir()
        (root / "data" / "grüße – 日本.txt").write_text("non-ASCII name\n", encoding="utf-8")
        (root / "trainer" / "data").symlink_to("../data")
        script = root / "run.sh"
        script.write_text("#!/bin/sh\nexec python -m trainer.task \"$@\"\n")
        script.chmod(0o755)
    return root


def image(registry: str, repository_path: str, tag: str) -> tuple[dict, dict, dict]:
    """(manifest, config, {path: entry}) of an image: its layers applied in order, whiteouts honoured."""
    status, body, _ = fetch(registry, f"{repository_path}/manifests/{tag}")
    assert status == 200, body
    manifest = json.loads(body)
    config = json.loads(fetch(registry, f"{repository_path}/blobs/{manifest['config']['digest']}")[1])
    files: dict[str, tuple] = {}
    for layer in manifest["layers"]:
        entries = _layer(registry, repository_path, layer["digest"])
        for name, entry in entries.items():
            base = os.path.basename(name)
            if base.startswith(".wh."):
                gone = os.path.join(os.path.dirname(name), base[4:])
                files = {k: v for k, v in files.items() if k != gone and not k.startswith(gone + "/")}
                continue
            files[name] = entry
    return manifest, config, files


_LAYERS: dict[str, dict] = {}


def _layer(registry: str, path: str, digest: str) -> dict:
    if digest not in _LAYERS:
        status, blob, _ = fetch(registry, f"{path}/blobs/{digest}")
        assert status == 200
        entries = {}
        with tarfile.open(fileobj=__import__("io").BytesIO(gzip.decompress(blob))) as tar:
            for member in tar:
                content = hashlib.sha256(tar.extractfile(member).read()).hexdigest() if member.isfile() else None
                # Every field the comparison covers: kind, permission bits, owner, link target, content. Go's tar
                # writes the file type into the mode field too, Python's not: the kind is compared by the type flag.
                entries[member.name.rstrip("/")] = (member.type, stat.S_IMODE(member.mode), member.uid, member.gid, member.linkname,
                                                    content)
        _LAYERS[digest] = entries
    return _LAYERS[digest]


def _compared_config(config: dict) -> dict:
    inner = config["config"]
    labels = {k: v for k, v in (inner.get("Labels") or {}).items()
              if k not in ("dev.buildkit-py.content-digest", "org.opencontainers.image.revision")}
    return {k: inner.get(k) for k in ("Env", "Entrypoint", "Cmd", "WorkingDir", "User")} | {"Labels": labels}


@pytest.mark.parametrize("example", ["quickstart", "distributed", "make-trainer"])
def test_fast_path_image_equals_a_full_build_entry_by_entry(testenv, tmp_path, example):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    root, cache = trainer(tmp_path, example), tmp_path / "cache"
    fast_repo, full_repo = f"fastpath-eq/{example}-{os.getpid()}", f"fastpath-eq/{example}-full-{os.getpid()}"
    first = build(testenv, root, cache, "--tag", f"{registry}/{fast_repo}")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "no previous image: full build" in first.stderr

    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write("\n# a one-line edit\n")
    fast = build(testenv, root, cache, "--tag", f"{registry}/{fast_repo}", env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert fast.returncode == 0, fast.stderr[-3000:]
    assert "appended the code layer" in fast.stderr and "building " not in fast.stderr
    fast_result = json.loads(fast.stdout)
    assert set(fast_result["fast_path"]) == {"scan", "base", "tar", "upload", "manifest"}

    full = build(testenv, root, tmp_path / "cache-full", "--no-fast-path", "--tag", f"{registry}/{full_repo}")
    assert full.returncode == 0, full.stderr[-3000:]
    full_result = json.loads(full.stdout)
    tag = fast_result["tags"][0].rsplit(":", 1)[1]
    assert full_result["tags"][0].endswith(":" + tag)  # the same content tag: the same context both ways

    fast_manifest, fast_config, fast_files = image(registry, fast_repo, tag)
    full_manifest, full_config, full_files = image(registry, full_repo, tag)
    assert fast_manifest["mediaType"] == full_manifest["mediaType"]
    # The base's layers are the very same blobs; only the code layer was made anew.
    assert [x["digest"] for x in fast_manifest["layers"][:-1]] == [x["digest"] for x in full_manifest["layers"][:-1]]
    assert len(fast_manifest["layers"]) == len(full_manifest["layers"])
    assert fast_files.keys() == full_files.keys()
    differ = {p: (fast_files[p], full_files[p]) for p in fast_files if fast_files[p] != full_files[p]}
    assert not differ
    assert _compared_config(fast_config) == _compared_config(full_config)
    assert fast_config["config"]["Labels"]["dev.buildkit-py.content-digest"] == fast_result["content_digest"]
    if example == "quickstart":
        assert full_files["app/trainer/alias.py"][4] == "task.py" and full_files["app/run.sh"][1] == 0o755
        assert full_files["app/trainer/data"][4] == "../data"
        # The build context holds files and links only (pipeline/context/): an empty directory is in neither image.
        assert "app/trainer/empty" not in full_files
        assert "app/data/grüße – 日本.txt" in full_files
    # The image runs, and runs the edited code.
    docker = [testenv["BUILDKIT_DOCKER"]]
    denv = {"DOCKER_HOST": testenv["DOCKER_HOST"], "PATH": "/usr/bin:/bin"}
    ran = subprocess.run(docker + ["run", "--rm", "--network", "host", "--entrypoint", "tail",
                                   f"{registry}/{fast_repo}:{tag}", "-n", "1", "/app/trainer/task.py"],
                         capture_output=True, text=True, env=denv)
    assert ran.returncode == 0 and ran.stdout.strip() == "# a one-line edit", ran.stderr[-2000:]


# ---------------------------------------------------------------------------------------------
# Faults, injected by a small proxy in front of the open loopback registry


class FaultProxy(LoopbackServer):
    """Forwards to the registry; `fault(method, path, headers)` may answer instead ((status, body)) or stall."""

    daemon_threads = True

    def __init__(self, upstream: str):
        self.upstream, self.fault, self.seen = upstream, None, []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                chunk = self.rfile.read(size + 2)[:size]
                if not size:
                    break
                data += chunk
            return data
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _any(self) -> None:
        body = self._body()
        server: FaultProxy = self.server
        server.seen.append((self.command, self.path))
        answer = server.fault(self.command, self.path, self.headers) if server.fault else None
        if answer is not None:
            status, text = answer
            if status == 0:  # a dropped connection: no answer at all
                self.close_connection = True
                self.connection.shutdown(2)
                return
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 401:  # as a registry whose credentials expired midway says it
                self.send_header("WWW-Authenticate", 'Basic realm="registry"')
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            return
        upstream = http.client.HTTPConnection(server.upstream, timeout=60)
        # A header sent several times (the engine's Accept, one line per manifest type) travels whole: with only
        # its last line the registry would answer with a schema 1 conversion, another image.
        headers = {k: ", ".join(self.headers.get_all(k)) for k in set(self.headers.keys())
                   if k.lower() not in ("transfer-encoding", "content-length")}
        upstream.request(self.command, self.path, body=body if body or self.command in ("PUT", "POST", "PATCH") else None,
                         headers=headers)
        reply = upstream.getresponse()
        data = reply.read()
        self.send_response(reply.status)
        for key, value in reply.getheaders():
            if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data) if self.command != "HEAD" else reply.getheader("Content-Length") or 0))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        upstream.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _any


@pytest.fixture(scope="module")
def base(testenv, tmp_path_factory):
    """A pushed image and its build record, behind a fault proxy: each test edits the code and appends."""
    tmp = tmp_path_factory.mktemp("fastpath-faults")
    proxy = FaultProxy(testenv["BUILDKIT_TEST_REGISTRY"])
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    root, cache = trainer(tmp, "make-trainer"), tmp / "cache"
    path = f"fastpath-faults/trainer-{os.getpid()}"
    # Built and pushed straight to the registry (the engine's push needs no proxy); its record then names the
    # same repository as the proxy shows it.
    first = build(testenv, root, cache, "--tag", f"{proxy.upstream}/{path}")
    assert first.returncode == 0, first.stderr[-3000:]
    saved = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(cache)
    try:
        record = fastpath.load_record(f"{proxy.upstream}/{path}", None)
        fastpath.save_record(replace(record, repository=f"{proxy.address}/{path}"))
    finally:
        os.environ.pop(CACHE_ENV) if saved is None else os.environ.__setitem__(CACHE_ENV, saved)
    yield proxy, root, cache, f"{proxy.address}/{path}"
    proxy.shutdown()


def _edited(base, tmp_path, text: str) -> tuple[Path, Path]:
    proxy, root, cache, repo = base
    copy = tmp_path / "trainer"
    shutil.copytree(root, copy)
    shutil.copytree(cache, tmp_path / "cache")
    with (copy / "trainer" / "task.py").open("a") as handle:
        handle.write(f"\n# {text}\n")
    proxy.fault, proxy.seen[:] = None, []
    return copy, tmp_path / "cache"


def _tags(proxy: FaultProxy, repo: str) -> set[str]:
    status, body, _ = fetch(proxy.upstream, repo.split("/", 1)[1] + "/tags/list")
    return set(json.loads(body)["tags"] or []) if status == 200 else set()


def _cli_env(testenv, cache: Path) -> dict:
    """run_cli's environment (the CA bundle variables included: they are part of what the record compares), no engine."""
    return {"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"], "HOME": str(REPO / ".testenv"), **testenv,
            **{k: os.environ[k] for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE") if k in os.environ},
            "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "BUILDKIT_PY_CACHE_DIR": str(cache),
            "DOCKER_HOST": "unix:///nonexistent.sock"}


def _content_tag(testenv, root: Path) -> str:
    proc = run_cli("print", "image-uri", "--config", str(root / "buildkit.yaml"), env=testenv)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().rsplit(":", 1)[1]


def test_lost_base_blob_is_a_clear_error_and_no_tag(testenv, base, tmp_path):
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, "lost blob")
    proxy.fault = lambda method, path, headers: (404, '{"errors":[{"code":"BLOB_UNKNOWN"}]}') \
        if method == "HEAD" and "/blobs/" in path and "uploads" not in path else None
    proc = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert proc.returncode == 7, proc.stderr[-2000:]
    assert "has lost layer sha256:" in proc.stderr and "--no-fast-path" in proc.stderr and "Traceback" not in proc.stderr
    assert _content_tag(testenv, root) not in _tags(proxy, repo)


@pytest.mark.parametrize("status", [401, 403])
def test_auth_refused_midway_is_a_clear_error_and_no_tag(testenv, base, tmp_path, status):
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, f"auth {status}")
    proxy.fault = lambda method, path, headers: (status, '{"errors":[{"code":"DENIED","message":"no push"}]}') \
        if method == "PUT" and "/manifests/" in path else None
    proc = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert proc.returncode == 7, proc.stderr[-2000:]
    assert "no tag was changed" in proc.stderr and "Traceback" not in proc.stderr
    assert f"HTTP {status}" in proc.stderr or "wants credentials and none were found" in proc.stderr
    assert _content_tag(testenv, root) not in _tags(proxy, repo)
    # The attestations went up meanwhile (a registry takes referrers before their subject), but no listing was
    # written for the image that never was: the referrers tag is not even asked for.
    assert not any(m == "PUT" and "/manifests/sha256-" in p for m, p in proxy.seen)


def test_refused_media_type_falls_back_to_the_full_build_and_says_so(testenv, base, tmp_path):
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, "media type")
    refusal = '{"errors":[{"code":"MANIFEST_INVALID","message":"unsupported media type"}]}'
    proxy.fault = lambda method, path, headers: (400, refusal) if method == "PUT" and "/manifests/" in path else None
    proc = build(testenv, root, cache, "--tag", repo)
    assert "refuses the appended image's manifest" in proc.stderr and "full build" in proc.stderr
    assert "building " in proc.stderr  # the full build ran; the same registry refuses its manifest too
    assert proc.returncode == 7 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert _content_tag(testenv, root) not in _tags(proxy, repo)


def test_ctrl_c_during_the_upload_leaves_no_tag(testenv, base, tmp_path):
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, "interrupted")
    uploading = threading.Event()

    def stall(method, path, headers):
        if method == "PUT" and "/blobs/uploads/" in path:
            uploading.set()
            time.sleep(20)
        return None

    proxy.fault = stall
    env = _cli_env(testenv, cache)
    proc = subprocess.Popen([sys.executable, "-m", "buildkit_py", "build", "--config", str(root / "buildkit.yaml"),
                             "--push", "--tag", repo, "--progress", "plain"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    if not uploading.wait(30):
        proc.kill()
        raise AssertionError(f"no upload seen: {proxy.seen} {proc.communicate()}")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    assert _content_tag(testenv, root) not in _tags(proxy, repo)


@pytest.mark.parametrize("code", ["same", "different"])
def test_two_pushes_of_the_same_tag_at_once_both_leave_a_whole_image(testenv, base, tmp_path, code):
    proxy, _, _, repo = base
    roots, caches = [], []
    for i in range(2):  # the same edit twice, or two different edits racing for the same moving tag
        root, cache = _edited(base, tmp_path / str(i), f"twice at once {uuid.uuid4().hex if code == 'different' else ''}")
        roots.append(root)
        caches.append(cache)
    procs = [subprocess.Popen([sys.executable, "-m", "buildkit_py", "build", "--config", str(root / "buildkit.yaml"),
                               "--push", "--tag", repo, "--tag", f"{repo}:racing", "--progress", "plain", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_cli_env(testenv, cache))
             for root, cache in zip(roots, caches, strict=True)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    digests = {json.loads(out)["pushed"][0]["digest"] for out, _ in outputs}
    assert len(digests) == (1 if code == "same" else 2)  # the same code gives the same image, whichever push wins
    path = repo.split("/", 1)[1]
    for tag in {_content_tag(testenv, root) for root in roots} | {"racing"}:
        status, body, headers = fetch(proxy.upstream, f"{path}/manifests/{tag}")
        assert status == 200 and headers["Docker-Content-Digest"] in digests
        manifest = json.loads(body)
        for blob in [manifest["config"]] + manifest["layers"]:
            assert fetch(proxy.upstream, f"{path}/blobs/{blob['digest']}", "HEAD")[0] == 200


def test_a_local_build_after_a_fast_path_push_pulls_only_the_new_layer(testenv, base, tmp_path):
    proxy, _, _, repo = base
    token = f"run me locally {uuid.uuid4().hex}"  # content no earlier run left in the engine
    root, cache = _edited(base, tmp_path, token)
    env = _cli_env(testenv, cache)
    pushed = subprocess.run([sys.executable, "-m", "buildkit_py", "build", "--config", str(root / "buildkit.yaml"), "--push",
                             "--tag", repo, "--json"], capture_output=True, text=True, env=env)
    assert pushed.returncode == 0 and "appended the code layer" in pushed.stderr, pushed.stderr[-2000:]
    digest = json.loads(pushed.stdout)["pushed"][0]["digest"]
    manifest = json.loads(fetch(proxy.upstream, f"{repo.split('/', 1)[1]}/manifests/{digest}")[1])
    proxy.seen[:] = []
    local = subprocess.run([sys.executable, "-m", "buildkit_py", "build", "--config", str(root / "buildkit.yaml"),
                            "--network", "host", "--tag", repo, "--json"], capture_output=True, text=True,
                           env={**env, "DOCKER_HOST": testenv["DOCKER_HOST"]})
    assert local.returncode == 0 and "pulled " in local.stderr and "building " not in local.stderr, local.stderr[-2000:]
    fetched = {path.rsplit("/", 1)[1] for method, path in proxy.seen if method == "GET" and "/blobs/" in path}
    # The engine had every layer below the code layer from the full build: only the config and the code layer came.
    assert fetched == {manifest["config"]["digest"], manifest["layers"][-1]["digest"]}, proxy.seen
    ran = subprocess.run([testenv["BUILDKIT_DOCKER"], "run", "--rm", "--network", "host", "--entrypoint", "tail",
                          json.loads(local.stdout)["tags"][0], "-n", "1", "/app/trainer/task.py"],
                         capture_output=True, text=True, env={"DOCKER_HOST": testenv["DOCKER_HOST"], "PATH": "/usr/bin:/bin"})
    assert ran.stdout.strip() == f"# {token}", ran.stderr


def _put(registry: str, path: str, media: str, body: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    request = urllib.request.Request(f"http://{registry}/v2/{path}/manifests/{digest}", data=body, method="PUT",
                                     headers={"Content-Type": media})
    with _OPENER.open(request, timeout=60) as answer:
        assert answer.status == 201
    return digest


@pytest.mark.parametrize("stored_as", ["oci", "oci-index"])
def test_an_oci_image_or_an_index_gets_an_oci_image_of_the_build_platform(testenv, base, tmp_path, stored_as):
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, f"from {stored_as}")
    path = repo.split("/", 1)[1]
    saved = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(cache)
    try:
        record = fastpath.load_record(repo, None)
        docker_manifest = json.loads(fetch(proxy.upstream, f"{path}/manifests/{record.manifest}")[1])
        # The same blobs described with OCI media types, as an OCI-exporting builder would push them.
        oci = {"schemaVersion": 2, "mediaType": media.OCI_MANIFEST,
               "config": {**docker_manifest["config"], "mediaType": "application/vnd.oci.image.config.v1+json"},
               "layers": [{**x, "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip"} for x in docker_manifest["layers"]]}
        body = json.dumps(oci).encode()
        previous = _put(proxy.upstream, path, media.OCI_MANIFEST, body)
        if stored_as == "oci-index":
            other = {"mediaType": media.OCI_MANIFEST, "digest": previous, "size": len(body),
                     "platform": {"os": "linux", "architecture": "arm64"}}
            index = {"schemaVersion": 2, "mediaType": media.INDEX_TYPES[0], "manifests": [
                other, {**other, "platform": {"os": "linux", "architecture": "amd64"}}]}
            previous = _put(proxy.upstream, path, media.INDEX_TYPES[0], json.dumps(index).encode())
        fastpath.save_record(replace(record, manifest=previous))
    finally:
        os.environ.pop(CACHE_ENV) if saved is None else os.environ.__setitem__(CACHE_ENV, saved)
    proc = build(testenv, root, cache, "--tag", repo,
                 env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    if proc.returncode != 0 or "appended" not in proc.stderr:
        raise AssertionError(proc.stderr[-2000:])
    digest = json.loads(proc.stdout)["pushed"][0]["digest"]
    status, body, headers = fetch(proxy.upstream, f"{path}/manifests/{digest}")
    manifest = json.loads(body)
    assert status == 200 and manifest["mediaType"] == media.OCI_MANIFEST
    assert manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    assert {x["mediaType"] for x in manifest["layers"]} == {"application/vnd.oci.image.layer.v1.tar+gzip"}
    assert [x["digest"] for x in manifest["layers"][:-1]] == [x["digest"] for x in oci["layers"][:-1]]


def test_a_tag_refused_after_the_first_says_which_tags_name_the_whole_image(testenv, base, tmp_path):
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, "second tag refused")
    proxy.fault = lambda method, path, headers: (403, '{"errors":[{"code":"DENIED","message":"tag is immutable"}]}') \
        if method == "PUT" and path.endswith("/manifests/stable") else None
    proc = build(testenv, root, cache, "--tag", repo, "--tag", f"{repo}:stable", env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert proc.returncode == 7 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    tag = _content_tag(testenv, root)
    assert f"{tag} already name the whole new image sha256:" in proc.stderr and "no tag was changed" not in proc.stderr
    path = repo.split("/", 1)[1]
    manifest = json.loads(fetch(proxy.upstream, f"{path}/manifests/{tag}")[1])
    for blob in [manifest["config"]] + manifest["layers"]:
        assert fetch(proxy.upstream, f"{path}/blobs/{blob['digest']}", "HEAD")[0] == 200


def test_run_after_a_fast_path_push_pulls_and_runs_the_edited_trainer(testenv, base, tmp_path):
    proxy, _, _, repo = base
    token = uuid.uuid4().hex
    root, cache = _edited(base, tmp_path, token)
    task = root / "trainer" / "task.py"
    task.write_text(task.read_text() + f"\nprint('edited {token}')\n")
    env = _cli_env(testenv, cache)
    pushed = subprocess.run([sys.executable, "-m", "buildkit_py", "build", "--config", str(root / "buildkit.yaml"), "--push",
                             "--tag", repo], capture_output=True, text=True, env=env)
    assert pushed.returncode == 0 and "appended the code layer" in pushed.stderr, pushed.stderr[-2000:]
    ran = subprocess.run([sys.executable, "-m", "buildkit_py", "run", "--config", str(root / "buildkit.yaml"), "--tag", repo,
                          "--output", str(tmp_path / "out")], capture_output=True, text=True,
                         env={**env, "DOCKER_HOST": testenv["DOCKER_HOST"]})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "pulled " in ran.stderr and "building " not in ran.stderr
    assert f"edited {token}" in ran.stdout + ran.stderr


def test_with_an_engine_its_stale_tags_are_removed_and_a_pull_brings_the_appended_image(testenv, base, tmp_path):
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, f"engine tags {uuid.uuid4().hex}")
    docker = [testenv["BUILDKIT_DOCKER"]]
    denv = {"DOCKER_HOST": testenv["DOCKER_HOST"], "PATH": "/usr/bin:/bin"}
    # No tag of these names in the engine: nothing is stale, nothing is pulled (a CI runner's engine pulls no
    # gigabytes for a code edit).
    proc = build(testenv, root, cache, "--tag", repo, "--tag", f"{repo}:latest-{uuid.uuid4().hex[:8]}")
    assert proc.returncode == 0 and "appended the code layer" in proc.stderr, proc.stderr[-2000:]
    assert "local engine" not in proc.stderr
    # `latest` names the older image in the engine, as after a full build: a later `docker run` of it must not
    # start the old code. The name goes; the older image's layers stay, so the pull fetches the code layer only.
    older = subprocess.run(docker + ["images", "-q", "--filter", f"reference={proxy.upstream}/{repo.split('/', 1)[1]}"],
                           capture_output=True, text=True, env=denv).stdout.split()[0]  # the base's full build
    subprocess.run(docker + ["tag", older, f"{repo}:latest"], check=True, capture_output=True, env=denv)
    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write("# once more\n")
    proc = build(testenv, root, cache, "--tag", repo, "--tag", f"{repo}:latest")
    assert proc.returncode == 0 and "appended the code layer" in proc.stderr, proc.stderr[-2000:]
    assert f"the local engine's {repo}:latest named the previous image: untagged" in proc.stderr
    assert "building " not in proc.stderr
    gone = subprocess.run(docker + ["image", "inspect", f"{repo}:latest"], capture_output=True, text=True, env=denv)
    assert gone.returncode != 0 and "No such image" in gone.stderr
    assert subprocess.run(docker + ["image", "inspect", older], capture_output=True, env=denv).returncode == 0
    result = json.loads(proc.stdout)
    pulled = subprocess.run(docker + ["pull", f"{repo}:latest"], capture_output=True, text=True, env=denv)
    assert pulled.returncode == 0, pulled.stderr
    assert pulled.stdout.count("Pull complete") == 1, pulled.stdout  # the code layer; the rest was kept
    inspected = subprocess.run(docker + ["image", "inspect", "--format", "{{.Id}}", f"{repo}:latest"],
                               capture_output=True, text=True, env=denv)
    assert inspected.stdout.strip() == result["image_id"], (inspected.stderr, proc.stderr)


def test_a_previous_image_gone_from_the_registry_takes_the_full_build_and_says_so(testenv, base, tmp_path):
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, "previous image gone")
    shutil.rmtree(cache / "registry-json")  # nothing of it kept here (the full build's read-ahead did not finish)
    proxy.fault = lambda method, path, headers: (404, '{"errors":[{"code":"MANIFEST_UNKNOWN"}]}') \
        if method == "GET" and "/manifests/sha256:" in path else None
    proc = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert "is gone from the registry: full build" in proc.stderr, proc.stderr[-2000:]
    # The full build needs the engine, which is not there: its own clear error, and no tag.
    assert proc.returncode == 5 and "Traceback" not in proc.stderr
    assert _content_tag(testenv, root) not in _tags(proxy, repo)


def test_a_wiped_registry_takes_the_full_build_though_this_machine_kept_the_manifest(testenv, base, tmp_path):
    """After a fast push this machine keeps the new manifest, so the next edit reads nothing back: a registry wiped
    since then shows only as lost layers, and must read as the previous image gone, not as a broken registry."""
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, "kept, then wiped")
    first = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert first.returncode == 0 and "appended the code layer" in first.stderr, first.stderr[-2000:]
    manifest = json.loads(first.stdout)["pushed"][0]["digest"]
    assert (cache / "registry-json" / manifest.replace(":", "-")).is_file()
    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write("# after the wipe\n")
    proxy.seen[:] = []
    proxy.fault = lambda method, path, headers: (404, '{"errors":[{"code":"BLOB_UNKNOWN"}]}') \
        if "/blobs/sha256:" in path or "/manifests/sha256:" in path else None
    proc = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert f"the previous image {repo}@{manifest} is gone from the registry: full build" in proc.stderr, \
        proc.stderr[-2000:]
    assert not any(method == "GET" and "/manifests/sha256:" in path for method, path in proxy.seen)  # the kept copy
    assert proc.returncode == 5 and "Traceback" not in proc.stderr  # the full build's own error: no engine here
    assert _content_tag(testenv, root) not in _tags(proxy, repo)


def committed(root: Path) -> list[str]:
    """ROOT made a git checkout with one commit of everything in it; the git command line to run more in it."""
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "trainer"]):
        subprocess.run(git + args, check=True, capture_output=True)
    return git


def test_the_revision_label_and_git_tag_follow_the_checkout(testenv, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    root, cache = trainer(tmp_path, "distributed"), tmp_path / "cache"
    git = committed(root)
    repo = f"{registry}/fastpath-git/distributed-{os.getpid()}"
    first = build(testenv, root, cache, "--tag", repo)
    assert first.returncode == 0, first.stderr[-3000:]
    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write(f"\n# {uuid.uuid4().hex}\n")
    subprocess.run(git + ["commit", "-q", "-am", "edit"], check=True, capture_output=True)
    revision = subprocess.run(git + ["rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    fast = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert fast.returncode == 0 and "appended the code layer" in fast.stderr, fast.stderr[-3000:]
    result = json.loads(fast.stdout)
    assert [t.rsplit(":", 1)[1] for t in result["tags"]][1] == f"git-{revision}"
    path = repo.split("/", 1)[1]
    for tag in result["tags"]:
        status, body, headers = fetch(registry, f"{path}/manifests/{tag.rsplit(':', 1)[1]}")
        assert status == 200 and headers["Docker-Content-Digest"] == result["pushed"][0]["digest"]
    config = json.loads(fetch(registry, f"{path}/blobs/{json.loads(body)['config']['digest']}")[1])
    assert config["config"]["Labels"]["org.opencontainers.image.revision"] == revision


def test_transient_refusals_and_a_dropped_connection_are_tried_again(testenv, base, tmp_path):
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, f"transient {uuid.uuid4().hex}")
    faults = {"upload": [(503, '{"errors":[{"code":"UNAVAILABLE"}]}'), (0, "")], "manifest": [(429, "{}")]}

    def flaky(method, path, headers):
        kind = "upload" if method == "PUT" and "/blobs/uploads/" in path else \
            "manifest" if method == "PUT" and "/manifests/" in path else None
        return faults[kind].pop(0) if kind and faults[kind] else None

    proxy.fault = flaky
    proc = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert proc.returncode == 0 and "appended the code layer" in proc.stderr, proc.stderr[-2000:]
    assert faults == {"upload": [], "manifest": []}  # every fault was met, and passed by trying again
    path = repo.split("/", 1)[1]
    manifest = json.loads(fetch(proxy.upstream, f"{path}/manifests/{_content_tag(testenv, root)}")[1])
    for blob in [manifest["config"]] + manifest["layers"]:
        assert fetch(proxy.upstream, f"{path}/blobs/{blob['digest']}", "HEAD")[0] == 200


def test_attestations_go_up_whole_while_the_image_is_written(testenv, base, tmp_path):
    """The SBOM and provenance, blobs and manifests, are pushed while the image is written, not after it: with the
    image's tags slow to be answered, both artifact manifests reach the registry before any tag is written, and the
    tag schema's listing follows them while the tags wait: nothing is left for after the tags, and the image is not
    read back for its descriptor."""
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, f"attested {uuid.uuid4().hex}")
    tagged, early, answered = [], [], []

    def slow_tags(method, path, headers):
        if method == "PUT" and "/manifests/" in path and "/manifests/sha256" not in path:
            time.sleep(0.3)  # the image's tags are slow to be answered
            answered.append(len(proxy.seen))  # what had arrived by then; an artifact may arrive during the wait
            tagged.append(path)
        elif method == "PUT" and "/manifests/sha256:" in path:
            early.append(not tagged)
        return None

    proxy.fault = slow_tags
    proc = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    proxy.fault = None
    assert proc.returncode == 0 and "appended the code layer" in proc.stderr, proc.stderr[-2000:]
    assert early == [True, True] and tagged  # both artifact manifests were sent before any tag was written
    result = json.loads(proc.stdout)
    digest, path = result["pushed"][0]["digest"], repo.split("/", 1)[1]
    tags = {f"/v2/{path}/manifests/{p['tag']}" for p in result["pushed"]}
    assert ("PUT", f"/v2/{path}/manifests/{_content_tag(testenv, root)}") in proxy.seen
    tag_put = min(answered)  # the requests that arrived once the first tag was written
    seen = [(m, p.split("?")[0]) for m, p in proxy.seen]
    referrers_tag = f"/v2/{path}/manifests/{tag_for(digest)}"
    listing = seen.index(("PUT", referrers_tag))
    manifests = [i for i, (m, p) in enumerate(seen) if m == "PUT" and "/manifests/sha256:" in p]
    assert len(manifests) == 2 and max(manifests) < listing < tag_put  # after what it names, before a tag is written
    assert [r for r in seen[tag_put:] if r[1] not in tags] == []
    uploads = [p for m, p in proxy.seen[:tag_put] if m == "PUT" and "/blobs/uploads/" in p]
    assert {a["blob"] for a in result["attestations"]} <= {p.split("digest=")[-1] for p in uploads}
    assert ("HEAD", f"/v2/{path}/manifests/{digest}") not in proxy.seen
    assert api.verify(f"{repo}@{digest}", progress="quiet").image == f"{repo}@{digest}"


def test_a_code_edit_behind_a_token_service_logs_in_once_and_the_next_meets_no_challenge(testenv, base, tmp_path):
    """As on a cloud registry: every connection of an edit shares one login (a token per scope its challenges name,
    not one per connection), and the next edit, its challenge kept, asks for one token for all it does while it
    loads, and meets no 401."""
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, f"token login {uuid.uuid4().hex}")
    with token_registry(proxy.upstream) as tokens:
        guarded = f"{tokens.address}/{repo.split('/', 1)[1]}"
        os.environ[CACHE_ENV] = str(cache)  # the record names the image as the token service's address shows it
        try:
            fastpath.save_record(replace(fastpath.load_record(repo, None), repository=guarded))
        finally:
            os.environ.pop(CACHE_ENV)
        password = f"s3cret-{uuid.uuid4().hex}"
        login = {"BUILDKIT_PY_REGISTRY_USERNAME": "tester", "BUILDKIT_PY_REGISTRY_PASSWORD": password,
                 "DOCKER_HOST": "unix:///nonexistent.sock"}
        first = build(testenv, root, cache, "--tag", guarded, env=login)
        assert first.returncode == 0 and "appended the code layer" in first.stderr, first.stderr[-2000:]
        # One token for the first requests' pulls, one for the uploads' push (or one alone, where an upload's challenge,
        # which names pull and push, was the first answered): not one for each of a dozen connections.
        issued = len(tokens.issued)
        assert issued in (1, 2) and tokens.challenged > 0, (issued, tokens.challenged)
        with (root / "trainer" / "task.py").open("a") as handle:
            handle.write(f"\n# {uuid.uuid4().hex}\n")
        challenged = tokens.challenged
        second = build(testenv, root, cache, "--tag", guarded, "--tag", f"{guarded}:ci-{uuid.uuid4().hex[:8]}",
                       env=login)
        assert second.returncode == 0 and "appended the code layer" in second.stderr, second.stderr[-2000:]
        assert tokens.challenged == challenged and len(tokens.issued) == issued + 1  # one token, for pulls and pushes
        assert password not in first.stderr + first.stdout + second.stderr + second.stdout
        assert not any(password in f.read_text(errors="replace") for f in cache.rglob("*") if f.is_file())
    digest = json.loads(second.stdout)["pushed"][0]["digest"]
    assert api.verify(f"{repo}@{digest}", progress="quiet").image == f"{repo}@{digest}"


def test_where_the_last_append_was_listed_in_the_tag_schema_the_next_reads_the_tag_while_it_attaches(testenv, base,
                                                                                                      tmp_path):
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, f"tag schema {uuid.uuid4().hex}")
    nowhere = {"DOCKER_HOST": "unix:///nonexistent.sock"}
    first = build(testenv, root, cache, "--tag", repo, env=nowhere)
    assert first.returncode == 0 and {a["listed"] for a in json.loads(first.stdout)["attestations"]} == {"tag schema"}
    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write(f"\n# {uuid.uuid4().hex}\n")
    answered, early = [], []

    def slow_artifacts(method, path, headers):
        if method == "PUT" and "/manifests/sha256:" in path:
            time.sleep(0.3)  # the artifact manifests are slow to be answered
            answered.append(path)
        elif method == "GET" and "/manifests/sha256-" in path:
            early.append(not answered)
        return None

    proxy.fault = slow_artifacts
    proc = build(testenv, root, cache, "--tag", repo, env=nowhere)
    proxy.fault = None
    assert proc.returncode == 0 and "listed 2 artifact(s)" in proc.stderr, proc.stderr[-2000:]
    assert early == [True] and len(answered) == 2  # one read of the tag, sent before either artifact was answered
    digest = json.loads(proc.stdout)["pushed"][0]["digest"]
    assert api.verify(f"{repo}@{digest}", progress="quiet").listed == "tag schema"


def test_code_the_registry_has_already_is_not_sent_again_and_its_upload_session_is_cancelled(testenv, base, tmp_path):
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, f"back and forth {uuid.uuid4().hex}")
    nowhere = {"DOCKER_HOST": "unix:///nonexistent.sock"}
    task = root / "trainer" / "task.py"
    first = task.read_text()
    assert build(testenv, root, cache, "--tag", repo, env=nowhere).returncode == 0
    task.write_text(first + "# another edit\n")
    assert build(testenv, root, cache, "--tag", repo, env=nowhere).returncode == 0
    task.write_text(first)  # back to the first edit's code: its layer is in the registry
    proxy.seen[:] = []
    proc = build(testenv, root, cache, "--tag", repo, env=nowhere)
    assert proc.returncode == 0 and "already in the registry" in proc.stderr, proc.stderr[-2000:]
    path = repo.split("/", 1)[1]
    manifest = json.loads(fetch(proxy.upstream, f"{path}/manifests/{json.loads(proc.stdout)['pushed'][0]['digest']}")[1])
    kept = {manifest["layers"][-1]["digest"], manifest["config"]["digest"]}  # the same code: the same config too
    sent = {p.split("digest=")[-1] for m, p in proxy.seen if m == "PUT" and "/blobs/uploads/" in p}
    assert not kept & sent
    cancelled = [p for m, p in proxy.seen if m == "DELETE" and p.startswith(f"/v2/{path}/blobs/uploads/")]
    assert len(cancelled) == 2, proxy.seen
    # Every upload session started (ahead of the staging, or for a blob) is either used or cancelled: none is left.
    started = [p for m, p in proxy.seen if m == "POST" and p.startswith(f"/v2/{path}/blobs/uploads/")]
    assert len(started) == len(cancelled) + sum(1 for m, p in proxy.seen if m == "PUT" and "/blobs/uploads/" in p)


def test_an_attestation_the_registry_refuses_leaves_the_appended_image_pushed_and_says_so(testenv, base, tmp_path):
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, f"refused attestation {uuid.uuid4().hex}")
    tag = _content_tag(testenv, root)
    proxy.fault = lambda method, path, headers: (400, '{"errors":[{"code":"MANIFEST_INVALID","message":"no artifacts"}]}') \
        if method == "PUT" and "/manifests/sha256:" in path else None
    proc = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert proc.returncode == 0 and "appended the code layer" in proc.stderr, proc.stderr[-2000:]
    assert "note: no SBOM or provenance attached to" in proc.stderr and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["attestations"] == [] and tag in _tags(proxy, repo)


def test_the_htpasswd_registry_takes_the_append_with_the_right_credentials_only(testenv, tmp_path):
    registry = testenv["BUILDKIT_TEST_AUTH_REGISTRY"]
    root, cache = trainer(tmp_path, "distributed"), tmp_path / "cache"
    repo = f"{registry}/fastpath-auth/distributed-{os.getpid()}"
    right = {"BUILDKIT_PY_REGISTRY_USERNAME": "tester", "BUILDKIT_PY_REGISTRY_PASSWORD": "s3cret-pass"}
    first = build(testenv, root, cache, "--tag", repo, env=right)
    assert first.returncode == 0, first.stderr[-3000:]
    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write(f"\n# {uuid.uuid4().hex}\n")
    nowhere = {"DOCKER_HOST": "unix:///nonexistent.sock"}
    wrong = build(testenv, root, cache, "--tag", repo, env={**right, "BUILDKIT_PY_REGISTRY_PASSWORD": "wrong-pass", **nowhere})
    assert wrong.returncode == 7 and "refused the credentials from $BUILDKIT_PY_REGISTRY_USERNAME" in wrong.stderr
    assert "no tag was changed" in wrong.stderr and "wrong-pass" not in wrong.stderr + wrong.stdout
    fast = build(testenv, root, cache, "--tag", repo, env={**right, **nowhere})
    assert fast.returncode == 0 and "appended the code layer" in fast.stderr, fast.stderr[-3000:]
    assert "s3cret-pass" not in fast.stderr + fast.stdout


def test_a_read_ahead_the_registry_spoils_costs_the_full_build_nothing(testenv, base, tmp_path):
    """The full build reads ahead what the next edit appends to; a registry that answers that read with garbage
    leaves nothing kept and says nothing (the edit reads it again, and says what is wrong there)."""
    proxy, root, _, repo = base
    copy, cache = trainer(tmp_path, "make-trainer"), tmp_path / "cache"
    with (copy / "trainer" / "task.py").open("a") as handle:
        handle.write(f"\n# {uuid.uuid4().hex}\n")
    proxy.fault = lambda method, path, headers: (200, "[not a manifest") \
        if method == "GET" and "/manifests/sha256:" in path else None
    proc = build(testenv, copy, cache, "--tag", repo + "-garbage", "--no-fast-path")
    proxy.fault = None
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("GET", f"/v2/{repo.split('/', 1)[1]}-garbage/manifests/{json.loads(proc.stdout)['pushed'][0]['digest']}") \
        in proxy.seen
    assert not (cache / "registry-json").exists() or not any((cache / "registry-json").iterdir())
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr


def test_the_next_edit_reads_nothing_back_and_a_spoilt_copy_is_read_again(testenv, base, tmp_path):
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, f"kept {uuid.uuid4().hex}")
    first = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert first.returncode == 0 and "appended the code layer" in first.stderr, first.stderr[-2000:]
    # (the referrers tag's index, read to list the attestations in it, is not a read of the image)
    reads = [(m, p) for m, p in proxy.seen if m == "GET" and ("/manifests/" in p or "/blobs/sha256" in p)
             and "/manifests/sha256-" not in p]
    assert reads == [], proxy.seen  # the full build's image: its manifest and config, read ahead by the full build
    for edit, spoil in (("again", False), ("spoilt", True)):
        if spoil:  # a kept copy that no longer hashes to its name is not trusted: read from the registry
            for kept in (cache / "registry-json").iterdir():
                kept.write_bytes(kept.read_bytes().replace(b'"', b"'", 1))
        with (root / "trainer" / "task.py").open("a") as handle:
            handle.write(f"# {edit}\n")
        proxy.seen[:] = []
        proc = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
        assert proc.returncode == 0 and "appended the code layer" in proc.stderr, proc.stderr[-2000:]
        reads = [(m, p) for m, p in proxy.seen if m == "GET" and "/manifests/sha256-" not in p]
        assert len(reads) == (2 if spoil else 0), proxy.seen
        result = json.loads(proc.stdout)
        path = repo.split("/", 1)[1]
        manifest = json.loads(fetch(proxy.upstream, f"{path}/manifests/{result['tags'][0].rsplit(':', 1)[1]}")[1])
        assert manifest["config"]["digest"] == result["image_id"]
    # Only the last image's manifest and config stay kept (no half-written copy, no older ones piling up).
    kept = sorted(p.name for p in (cache / "registry-json").iterdir())
    assert kept == sorted(d.replace(":", "-") for d in (result["pushed"][0]["digest"], result["image_id"])), kept
    # A full build's record names its own image: the appended one's copies go, its own are read ahead.
    full = build(testenv, root, cache, "--tag", repo, "--no-fast-path")
    assert full.returncode == 0, full.stderr[-2000:]
    result = json.loads(full.stdout)
    kept = sorted(p.name for p in (cache / "registry-json").iterdir())
    assert kept == sorted(d.replace(":", "-") for d in (result["pushed"][0]["digest"], result["image_id"])), kept


def test_a_registry_only_the_engine_reaches_gets_the_full_build_and_the_engines_push(testenv, tmp_path):
    """This machine's requests go through a proxy that is down; the engine's do not: the fast path cannot reach
    the registry before it writes anything, says so, and the full build's engine push lands the image."""
    registry = "localhost:" + testenv["BUILDKIT_TEST_REGISTRY"].rsplit(":", 1)[1]  # a name the proxy is not bypassed for
    root, cache = trainer(tmp_path, "quickstart"), tmp_path / "cache"
    repo = f"{registry}/fastpath-proxy/quickstart-{uuid.uuid4().hex[:8]}"
    first = build(testenv, root, cache, "--tag", repo)
    assert first.returncode == 0 and "no previous image: full build" in first.stderr, first.stderr[-3000:]
    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write(f"# {uuid.uuid4().hex}\n")
    with socket_closed() as dead:
        proc = build(testenv, root, cache, "--tag", repo, env={"HTTP_PROXY": dead, "http_proxy": dead, "NO_PROXY": "",
                                                                "no_proxy": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "cannot reach the registry localhost:" in proc.stderr and "from this machine: full build" in proc.stderr
    result = json.loads(proc.stdout)
    tag = result["tags"][0].rsplit(":", 1)[1]
    status, body, _ = fetch(testenv["BUILDKIT_TEST_REGISTRY"], f"{repo.split('/', 1)[1]}/manifests/{tag}")
    assert status == 200 and "sha256:" + hashlib.sha256(body).hexdigest() == result["pushed"][0]["digest"]


def test_an_unchanged_push_keeps_the_image_and_a_new_commit_alone_changes_its_revision(testenv, tmp_path):
    """Pushing again with nothing changed leaves the content tag on the image the engine built (a layer of ours
    would differ in its tar bytes alone); an empty commit changes only the revision label: appended, as an edit is."""
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    root, cache = trainer(tmp_path, "make-trainer"), tmp_path / "cache"
    git = committed(root)
    repo = f"{registry}/fastpath-unchanged/trainer-{os.getpid()}"
    first = build(testenv, root, cache, "--tag", repo)
    assert first.returncode == 0, first.stderr[-3000:]
    digest = json.loads(first.stdout)["pushed"][0]["digest"]
    again = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert again.returncode == 0 and "unchanged since its last push" in again.stderr, again.stderr[-3000:]
    assert "appended the code layer" not in again.stderr and json.loads(again.stdout)["pushed"][0]["digest"] == digest
    subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", "nothing"], check=True, capture_output=True)
    moved = build(testenv, root, cache, "--tag", repo, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert moved.returncode == 0 and "appended the code layer" in moved.stderr, moved.stderr[-3000:]
    result = json.loads(moved.stdout)
    assert result["pushed"][0]["digest"] != digest
    content = result["tags"][0].rsplit(":", 1)[1]
    status, _, headers = fetch(registry, f"{repo.split('/', 1)[1]}/manifests/{content}")
    assert status == 200 and headers["Docker-Content-Digest"] == result["pushed"][0]["digest"]
    # the engine never had the appended image: `print digest` answers from this machine's record of the push
    printed = run_cli("print", "digest", "--config", str(root / "buildkit.yaml"), "--tag", repo,
                      env={**testenv, "BUILDKIT_PY_CACHE_DIR": str(cache)})
    assert printed.returncode == 0 and printed.stdout.strip() == f"{repo}@{result['pushed'][0]['digest']}", printed.stderr


def test_a_code_edit_starts_its_uploads_ahead_and_leaves_no_session_behind(testenv, base, tmp_path):
    """The kept recipe found, the layer's, config's and attestations' upload sessions are started before the files
    are staged: each blob then goes up in one PUT on a session started ahead, and none is left open."""
    proxy, _, _, repo = base
    root, cache = _edited(base, tmp_path, f"ahead {uuid.uuid4().hex}")
    nowhere = {"DOCKER_HOST": "unix:///nonexistent.sock"}
    assert build(testenv, root, cache, "--tag", repo, env=nowhere).returncode == 0
    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write(f"# {uuid.uuid4().hex}\n")
    proxy.seen[:] = []
    proc = build(testenv, root, cache, "--tag", repo, env=nowhere)
    assert proc.returncode == 0 and "appended the code layer" in proc.stderr, proc.stderr[-2000:]
    seen = list(proxy.seen)
    posts = [i for i, (m, p) in enumerate(seen) if m == "POST" and "/blobs/uploads/" in p]
    puts = [i for i, (m, p) in enumerate(seen) if m == "PUT" and "/blobs/uploads/" in p]
    assert len(posts) == len(puts) == 4, seen  # the layer, the config, the SBOM, the provenance
    assert max(posts) < min(puts), seen  # every session started before the first blob went up
    assert not any(m == "DELETE" for m, _ in seen), seen
    # --no-attest: two sessions, for the layer and the config.
    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write(f"# {uuid.uuid4().hex}\n")
    proxy.seen[:] = []
    assert build(testenv, root, cache, "--tag", repo, "--no-attest", env=nowhere).returncode == 0
    assert sum(1 for m, p in proxy.seen if m == "POST" and "/blobs/uploads/" in p) == 2, proxy.seen
