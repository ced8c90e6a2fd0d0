"""buildkit.lock on real parts: a package index on loopback (PEP 503 pages over real wheels), the loopback
registry holding the base, and BuildKit builds."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

import yaml
from test_build_e2e import docker

from conftest import CA_BUNDLE, LoopbackServer, run_cli

STANDIN = "buildkit-py/standin:bookworm"  # python3.11 with venv and pip (scripts/testenv.sh)


def make_wheel(directory: Path, name: str, version: str, marker: str = "", module_text: str | None = None) -> Path:
    """A real pure-Python wheel (zip with METADATA, WHEEL and RECORD) whose module reports its version (or is
    module_text)."""
    path = directory / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    text = f"VERSION = {version!r}\nMARKER = {marker!r}\n" if module_text is None else module_text
    files = {f"{name}/__init__.py": text,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{n},sha256={hashlib.sha256(t.encode()).hexdigest()},{len(t.encode())}\n" for n, t in files.items())
    with zipfile.ZipFile(path, "w") as archive:
        for n, t in {**files, f"{info}/RECORD": record + f"{info}/RECORD,,\n"}.items():
            archive.writestr(zipfile.ZipInfo(n, (2020, 1, 1, 0, 0, 0)), t)
    return path


class Index:
    """PEP 503 simple pages over a directory of wheels, each link with its #sha256= as real indexes give it.
    login: given, a request whose Authorization header it refuses is answered 401 (no header) or 403; `seen` records
    (path, whether it was let in)."""

    def __init__(self, directory: Path, login: Callable[[str | None], bool] | None = None):
        self.directory = directory
        self.seen: list[tuple[str, bool]] = []
        root, seen = directory, self.seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_HEAD(self):  # noqa: N802 (uv asks whether a wheel can be read by ranges)
                self.do_GET(body=False)

            def do_GET(self, body: bool = True):  # noqa: N802 (http.server's name)
                self.body = body
                header = self.headers.get("Authorization")
                allowed = login is None or login(header)
                seen.append((self.path, allowed))
                if not allowed:
                    self.send_response(403 if header else 401)
                    if not header:
                        self.send_header("WWW-Authenticate", 'Basic realm="index"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                parts = [p for p in self.path.split("/") if p]
                if parts[:1] == ["files"] and len(parts) == 2 and (root / parts[1]).is_file():
                    return self._send((root / parts[1]).read_bytes(), "application/octet-stream")
                if parts[:1] == ["simple"] and len(parts) == 2:
                    wheels = sorted(p for p in root.glob("*.whl") if p.name.split("-")[0] == parts[1].replace("-", "_"))
                    if wheels:
                        links = "".join(f'<a href="/files/{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">'
                                        f"{w.name}</a>\n" for w in wheels)
                        return self._send(f"<html><body>{links}</body></html>".encode(), "text/html")
                self.send_error(404)

            def _send(self, body: bytes, kind: str):
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.body:
                    self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = LoopbackServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def push_base(testenv, ref: str, label: str) -> str:
    """A stand-in base under ref in the loopback registry; label makes each push another image."""
    directory = Path(testenv["BUILDKIT_TESTENV"] if "BUILDKIT_TESTENV" in testenv else "/tmp") / f"base-{uuid.uuid4().hex[:8]}"
    directory.mkdir(parents=True)
    (directory / "Dockerfile").write_text(f"FROM {STANDIN}\nLABEL test.base={label}\n")
    docker(testenv, "build", "-q", "-t", ref, str(directory))
    docker(testenv, "push", ref)
    return ref


def cli(testenv, *args):
    return run_cli(*args, env={**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]})


def trainer(root: Path, base: str, index_url: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "trainer").mkdir(exist_ok=True)
    (root / "trainer" / "task.py").write_text("import bkpin\nprint('bkpin', bkpin.VERSION, bkpin.MARKER)\n")
    (root / "pip.conf").write_text(f"[global]\nextra-index-url = {index_url}\n")
    (root / "buildkit.yaml").write_text(yaml.safe_dump({
        "framework": "none", "python": "3.11", "base_image": base, "hypertune": False, "pip": ["bkpin"],
        "trainer": {"module": "trainer.task"}, "pip_conf": "pip.conf", "image": f"lock-e2e/{root.name}"}))
    return root / "buildkit.yaml"


def build(testenv, config: Path, *args):
    return cli(testenv, "build", "--config", str(config), "--network", "host", "--progress", "plain", "--json",
               "--ca-cert", CA_BUNDLE, *args)


def versions(root: Path) -> list[tuple[str, str]]:
    packages = yaml.safe_load((root / "buildkit.lock").read_text())["images"]["_base"]["packages"]
    return [(p["name"], p["version"]) for p in packages]


def run_trainer(testenv, image: str) -> str:
    return docker(testenv, "run", "--rm", "--network", "none", image).stdout


def test_locked_build_keeps_pinned_package_and_base(testenv, index, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    base = push_base(testenv, f"{registry}/lock-e2e/base:{uuid.uuid4().hex[:8]}", "first")
    first_digest = json.loads(docker(testenv, "image", "inspect", base).stdout)[0]["RepoDigests"][0].split("@")[1]
    make_wheel(index.directory, "bkpin", "1.0", "original")
    config = trainer(tmp_path / "app", base, index.url)

    locked = cli(testenv, "lock", "--config", str(config), "--ca-cert", CA_BUNDLE)
    assert locked.returncode == 0, locked.stderr[-3000:]
    text = (tmp_path / "app" / "buildkit.lock").read_text()
    lock = yaml.safe_load(text)
    image = lock["images"]["_base"]
    assert image["base"]["digest"] == first_digest
    assert versions(tmp_path / "app") == [("bkpin", "1.0")]
    assert index.url in image["indexes"]
    assert cli(testenv, "lock", "--check", "--config", str(config)).returncode == 0

    # A newer release appears, and the base tag is pushed again with other content.
    make_wheel(index.directory, "bkpin", "1.1", "newer")
    push_base(testenv, base, "second")
    relocked = cli(testenv, "lock", "--config", str(config), "--ca-cert", CA_BUNDLE)  # uv keeps the locked versions
    assert relocked.returncode == 0 and versions(tmp_path / "app") == [("bkpin", "1.0")]
    (tmp_path / "app" / "buildkit.lock").write_text(text)  # as first written: with the first base digest
    check = cli(testenv, "lock", "--check", "--config", str(config))
    assert check.returncode == 1 and "now points at" in check.stdout and first_digest in check.stdout, check.stdout

    proc = build(testenv, config, "--locked")
    assert proc.returncode == 0, proc.stderr[-4000:]
    tag = json.loads(proc.stdout)["tags"][0]
    assert "bkpin 1.0 original" in run_trainer(testenv, tag)
    labels = json.loads(docker(testenv, "image", "inspect", tag).stdout)[0]["Config"]["Labels"]
    assert labels["org.opencontainers.image.base.digest"] == first_digest
    digest = cli(testenv, "print", "lock-digest", "--config", str(config))
    assert digest.returncode == 0 and labels["dev.buildkit-py.lock-digest"] == digest.stdout.strip()

    # Without the lock the same config takes the newest release, under another content tag.
    (tmp_path / "app" / "buildkit.lock").rename(tmp_path / "saved.lock")
    proc = build(testenv, config)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout)["tags"][0] != tag
    assert "bkpin 1.1 newer" in run_trainer(testenv, json.loads(proc.stdout)["tags"][0])
    (tmp_path / "saved.lock").rename(tmp_path / "app" / "buildkit.lock")

    # The pinned wheel replaced on the index by other bytes: the locked build refuses it.
    locked_hash = image["packages"][0]["hashes"][0]
    make_wheel(index.directory, "bkpin", "1.0", "tampered")
    new_hash = "sha256:" + hashlib.sha256((index.directory / "bkpin-1.0-py3-none-any.whl").read_bytes()).hexdigest()
    proc = build(testenv, config, "--locked", "--no-cache")
    assert proc.returncode == 6, proc.stderr[-3000:]
    assert "bkpin" in proc.stderr and locked_hash in proc.stderr and new_hash in proc.stderr, proc.stderr[-3000:]


def test_upgrade_package_takes_the_newer_release_and_credentials_stay_out(testenv, index, tmp_path):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    base = push_base(testenv, f"{registry}/lock-e2e/base:{uuid.uuid4().hex[:8]}", "upgrade")
    make_wheel(index.directory, "bkpin", "1.0")
    token = f"Tok-{uuid.uuid4().hex[:12]}"
    config = trainer(tmp_path / "app", base, index.url.replace("http://", f"http://tester:{token}@"))
    first = cli(testenv, "lock", "--config", str(config), "--ca-cert", CA_BUNDLE)
    assert first.returncode == 0, first.stderr[-3000:]
    make_wheel(index.directory, "bkpin", "1.1")
    upgraded = cli(testenv, "lock", "--config", str(config), "--ca-cert", CA_BUNDLE, "--upgrade-package", "bkpin")
    assert upgraded.returncode == 0, upgraded.stderr[-3000:]
    text = (tmp_path / "app" / "buildkit.lock").read_text()
    assert versions(tmp_path / "app") == [("bkpin", "1.1")]
    assert index.url in text  # the index is named, without its credentials
    assert token not in text + first.stdout + first.stderr + upgraded.stdout + upgraded.stderr


def test_an_index_resolves_to_the_build_platforms_manifest(testenv, index, tmp_path):
    import requests

    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    repo = f"lock-e2e/multi-{uuid.uuid4().hex[:8]}"
    accept = {"Accept": "application/vnd.docker.distribution.manifest.v2+json"}
    entries = []
    for label, arch in (("amd", "amd64"), ("arm", "arm64")):
        push_base(testenv, f"{registry}/{repo}:{label}", label)
        got = requests.get(f"http://{registry}/v2/{repo}/manifests/{label}", headers=accept, timeout=30)
        entries.append({"mediaType": got.headers["Content-Type"], "size": len(got.content),
                        "digest": "sha256:" + hashlib.sha256(got.content).hexdigest(),
                        "platform": {"os": "linux", "architecture": arch}})
    kind = "application/vnd.docker.distribution.manifest.list.v2+json"
    body = json.dumps({"schemaVersion": 2, "mediaType": kind, "manifests": entries}).encode()
    put = requests.put(f"http://{registry}/v2/{repo}/manifests/multi", data=body, headers={"Content-Type": kind}, timeout=30)
    assert put.status_code == 201, put.text
    make_wheel(index.directory, "bkpin", "1.0")
    config = trainer(tmp_path / "app", f"{registry}/{repo}:multi", index.url)
    for platform, entry in (("linux/amd64", entries[0]), ("linux/arm64", entries[1])):
        proc = cli(testenv, "lock", "--config", str(config), "--ca-cert", CA_BUNDLE, "--platform", platform, "--upgrade")
        assert proc.returncode == 0, proc.stderr[-3000:]
        image = yaml.safe_load((tmp_path / "app" / "buildkit.lock").read_text())["images"]["_base"]
        assert image["base"]["digest"] == entry["digest"] and image["platform"] == platform


def test_a_failed_resolve_names_the_package_never_the_credentials(testenv, index, tmp_path):
    token = f"Tok-{uuid.uuid4().hex[:12]}"
    private = index.url.replace("http://", f"http://tester:{token}@")
    config = trainer(tmp_path / "app", f"{testenv['BUILDKIT_TEST_REGISTRY']}/lock-e2e/none:1", private)
    (tmp_path / "app" / "pip.conf").write_text(f"[global]\nindex-url = {private}\n")  # the only index: bkpin is not on it
    proc = cli(testenv, "lock", "--config", str(config), "--ca-cert", CA_BUNDLE)
    assert proc.returncode == 6 and "bkpin" in proc.stderr, proc.stderr[-2000:]
    assert token not in proc.stdout + proc.stderr and not (tmp_path / "app" / "buildkit.lock").exists()


def test_autopackage_builds_from_the_lock(testenv, index, tmp_path):
    """autopackage plans, renders and builds once: the lock's requirements must reach its content tag and context."""
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    base = push_base(testenv, f"{registry}/lock-e2e/base:{uuid.uuid4().hex[:8]}", "autopackage")
    make_wheel(index.directory, "bkpin", "1.0", "locked")
    config = trainer(tmp_path / "auto", base, index.url)
    locked = cli(testenv, "lock", "--config", str(config), "--ca-cert", CA_BUNDLE)
    assert locked.returncode == 0, locked.stderr[-3000:]
    make_wheel(index.directory, "bkpin", "1.1", "newer")
    proc = cli(testenv, "autopackage", str(tmp_path / "auto"), "--target", "local", "--ca-cert", CA_BUNDLE, "--json")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "bkpin 1.0 locked" in proc.stderr, proc.stderr[-3000:]
    image = json.loads(proc.stdout)["image"]
    labels = json.loads(docker(testenv, "image", "inspect", image).stdout)[0]["Config"]["Labels"]
    digest = cli(testenv, "print", "lock-digest", "--config", str(config)).stdout.strip()
    assert labels["dev.buildkit-py.lock-digest"] == digest
