"""`matrix check|refresh` against a package index on loopback: http.server in a thread serving
responses recorded from PyPI (tests/data/index/pypi-recorded.json: file names, Requires-Python and
the wheels' METADATA headers), as PEP 503 HTML, as PEP 691 JSON with PEP 658 metadata files, and
as real zip wheels answering HTTP range requests."""

from __future__ import annotations

import base64
import datetime
import html
import io
import json
import marshal
import re
import shutil
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml

from buildkit_py.catalog.index_client import Index, IndexFile
from buildkit_py.catalog.index_metadata import _pythons, _releases, run
from buildkit_py.catalog.matrix import load_matrix, overlay_path
from buildkit_py.catalog.resources import read_data, resource_dir
from buildkit_py.config import Config, FrameworkRequest
from buildkit_py.errors import ConfigError, DataError, PackageIndexError
from buildkit_py.pipeline.plan import make_plan
from conftest import REPO, LoopbackServer, run_cli

RECORDED = json.loads((REPO / "tests" / "data" / "index" / "pypi-recorded.json").read_text())["projects"]
BIG_WHEEL = "torch-2.15.0-cp315-cp315-manylinux_2_28_x86_64.whl"  # its central directory lies outside the tail


def _wheel(filename: str) -> bytes:
    """A real wheel (zip) whose METADATA is the recorded one, or a minimal one."""
    name, version = filename.split("-")[:2]
    metadata = next((m for p in RECORDED.values() for f, m in p["metadata"].items() if f == filename),
                    f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as wheel:
        for i in range(2500 if filename == BIG_WHEEL else 3):
            wheel.writestr(f"{name}/module_{i}.py", f"x = {i}\n")
        wheel.writestr(f"{name}-{version}.dist-info/METADATA", metadata)
        wheel.writestr(f"{name}-{version}.dist-info/RECORD", "")
    return buffer.getvalue()


class FakeIndex(BaseHTTPRequestHandler):
    mode = "html"  # html | json (PEP 691 + PEP 658 .metadata) | norange | slow | garbage (wheels that are no zip)
    auth: str | None = None  # "user:password" the index requires
    wheels: dict[str, bytes] = {}
    seen_auth: list[tuple[str, str | None]] = []

    def log_message(self, *args):  # keep pytest's output clean
        pass

    def _send(self, status: int, body: bytes, kind: str, headers: dict[str, str] | None = None):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 - http.server's name
        self.seen_auth.append((self.path, self.headers.get("Authorization")))
        if self.mode == "slow":
            time.sleep(3)
        if self.auth and self.headers.get("Authorization") != "Basic " + base64.b64encode(self.auth.encode()).decode():
            return self._send(401, b"unauthorized", "text/plain", {"WWW-Authenticate": 'Basic realm="index"'})
        if match := re.fullmatch(r"/simple/([a-z0-9-]+)/", self.path):
            return self._page(match.group(1))
        if match := re.fullmatch(r"/files/([^/]+\.whl)(\.metadata)?", self.path):
            return self._file(match.group(1), bool(match.group(2)))
        return self._send(404, b"not found", "text/plain")

    def _page(self, project: str):
        if project not in RECORDED:
            return self._send(404, b"no such project", "text/plain")
        files = RECORDED[project]["files"]
        if self.mode == "json" and "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", ""):
            data = {"meta": {"api-version": "1.1"}, "name": project, "files": [
                {"filename": f["filename"], "url": f"../../files/{f['filename']}", "hashes": {},
                 "requires-python": f["requires_python"], "core-metadata": True, "yanked": f["yanked"]} for f in files]}
            return self._send(200, json.dumps(data).encode(), "application/vnd.pypi.simple.v1+json")
        links = "".join(
            f'<a href="/files/{f["filename"]}#sha256=0"'
            + (f' data-requires-python="{html.escape(f["requires_python"])}"' if f["requires_python"] else "")
            + (' data-yanked=""' if f["yanked"] else "") + f'>{f["filename"]}</a><br/>\n' for f in files)
        return self._send(200, f"<!DOCTYPE html><html><body>{links}</body></html>".encode(), "text/html")

    def _file(self, filename: str, metadata: bool):
        if filename not in self.wheels:
            self.wheels[filename] = _wheel(filename)
        body = b"PK\x05\x06" + bytes(range(256)) * 300 if self.mode == "garbage" else self.wheels[filename]
        if metadata:
            if self.mode != "json":
                return self._send(404, b"no metadata files here", "text/plain")
            with zipfile.ZipFile(io.BytesIO(body)) as wheel:
                name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
                return self._send(200, wheel.read(name), "text/plain")
        spec = self.headers.get("Range", "")
        match = re.fullmatch(r"bytes=(-?[0-9]+)-?([0-9]*)", spec)
        if self.mode == "norange" or not match:
            return self._send(200, body, "application/zip")
        start, end = int(match.group(1)), match.group(2)
        if start < 0:
            start, stop = max(len(body) + start, 0), len(body) - 1
        else:
            stop = min(int(end) if end else len(body) - 1, len(body) - 1)
        return self._send(206, body[start:stop + 1], "application/zip",
                          {"Content-Range": f"bytes {start}-{stop}/{len(body)}"})


@pytest.fixture
def index_server():
    """Start the fake index; yields a function that sets its mode and returns its simple URL."""
    server = LoopbackServer(("127.0.0.1", 0), FakeIndex)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def configure(mode: str = "html", auth: str | None = None) -> str:
        FakeIndex.mode, FakeIndex.auth = mode, auth
        FakeIndex.seen_auth.clear()
        return f"http://127.0.0.1:{server.server_port}/simple/"

    yield configure
    server.shutdown()
    server.server_close()
    FakeIndex.mode, FakeIndex.auth = "html", None


# A small copy of base_images/ whose frameworks match the recorded releases, with planted errors.
FRAMEWORKS = {
    "torch.yaml": """
name: torch
package: torch
gpu: true
bundles_cuda: true
gpu_index_url: "https://download.pytorch.org/whl/cu{cuda_nodot}"
cpu_index_url: "https://download.pytorch.org/whl/cpu"
versions:
  - series: "2.14"
    releases: ["2.14.0", "2.14.1"]
    cuda: ["12.6", "13.0", "13.2"]
    default_cuda: "13.0"
    cudnn: "9.24"
    python: ["3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]  # planted: no cp39 wheel
    archs: {"12.6": [sm_50, sm_60, sm_70, sm_75, sm_80, sm_86, sm_90], "13": [sm_75, sm_80, sm_86, sm_90, sm_100, sm_120]}
""",
    "jax.yaml": """
name: jax
package: jax
wheel_package: jaxlib
gpu: true
bundles_cuda: true
gpu_extra: "cuda{cuda_major}"
versions:
  - series: "0.12"
    releases: ["0.12.0", "0.12.0.1"]
    cuda: ["12.9", "13.0"]
    default_cuda: "12.9"
    cudnn: "9.8"  # planted: the cuda12 plugin pins cuDNN >= 9.10.2.21
    python: ["3.12", "3.13", "3.14", "3.15"]
    archs: {"12": [sm_50, sm_60, sm_70, sm_80, sm_90, sm_100, compute_120]}
""",
    "xgboost.yaml": """
name: xgboost
package: xgboost
gpu: true
bundles_cuda: true
versions:
  - series: "3.4"
    releases: ["3.4.0"]
    cuda: ["12.9", "13.0"]
    default_cuda: "13.0"
    package_by_cuda: {"12": "xgboost-cu12"}
    python: ["3.12", "3.13", "3.14"]
    archs: {"13": [sm_75, sm_80, sm_90, sm_100, sm_120, compute_120]}
""",
    "scikit-learn.yaml": """
name: scikit-learn
package: scikit-learn
gpu: false
versions:
  - series: "1.9"
    releases: ["1.9.0", "1.9.1"]
    python: ["3.11", "3.12", "3.13", "3.14"]
""",
}


@pytest.fixture
def data_dir(tmp_path) -> Path:
    root = tmp_path / "base_images"
    shutil.copytree(resource_dir("base_images"), root, ignore=shutil.ignore_patterns("frameworks"))
    (root / "frameworks").mkdir()
    for name, text in FRAMEWORKS.items():
        (root / "frameworks" / name).write_text(text)
    return root


def _kinds(report) -> set[tuple[str, str | None, str]]:
    return {(f.framework, f.release, f.kind) for f in report.problems}


@pytest.mark.parametrize("mode", ["html", "json"])
def test_check_finds_what_the_data_lacks_and_gets_wrong(index_server, data_dir, tmp_path, mode):
    url = index_server(mode)
    report = run(load_matrix(data_dir, overlay=tmp_path / "none.yaml"), Index(url))
    assert _kinds(report) == {
        ("torch", "2.14.0", "python"), ("torch", "2.14.1", "python"),  # cp39 listed, no wheel
        ("torch", "2.15.0", "missing-release"),
        ("jax", "0.12.0.1", "cudnn"),  # the plugin's pins say 9.10
        ("xgboost", "3.4.1", "missing-release"),
    }
    messages = "\n".join(f.message for f in report.problems)
    assert "torch==2.14.1: the data lists Python 3.9, but torch 2.14.1 has no wheel for it" in messages
    assert "jax==0.12.0.1: the default wheel's pins say cuDNN 9.10, the data says 9.8" in messages
    assert "torch==2.15.0 is on the index (Python 3.11, 3.12, 3.13, 3.14, 3.15)" in messages
    assert dict(report.checked) == {"jax": 2, "scikit-learn": 2, "torch": 2, "xgboost": 1}
    if mode == "json":  # PEP 658: metadata files, no range request on any wheel
        assert not any(path.endswith(".whl") for path, _ in FakeIndex.seen_auth)
    else:  # the wheels' own METADATA, read with range requests
        assert any(path.endswith(".whl") for path, _ in FakeIndex.seen_auth)


def test_a_wrong_default_cuda_is_found(index_server, data_dir, tmp_path):
    torch = data_dir / "frameworks" / "torch.yaml"
    torch.write_text(torch.read_text().replace('default_cuda: "13.0"', 'default_cuda: "13.2"'))
    report = run(load_matrix(data_dir, overlay=tmp_path / "none.yaml"), Index(index_server()), ("torch",))
    assert "torch==2.14.1: the default wheel's pins say CUDA 13.0, the data's default is 13.2" in \
        [f.message for f in report.problems]


@pytest.mark.parametrize("mode", ["html", "json"])
def test_refresh_writes_an_overlay_that_resolution_reads_with_a_note(index_server, data_dir, tmp_path, mode):
    overlay = tmp_path / "config" / "buildkit-py" / "matrix-overlay.yaml"
    report = run(load_matrix(data_dir, overlay=overlay), Index(index_server(mode)), refresh=True, overlay=overlay)
    if mode == "html":  # a wheel whose central directory lies outside the last 64 KiB: read with a second range
        assert any(path == f"/files/{BIG_WHEEL}" for path, _ in FakeIndex.seen_auth)
    assert report.overlay == str(overlay) and set(report.added) == {("torch", "2.15.0"), ("xgboost", "3.4.1")}
    written = yaml.safe_load(overlay.read_text())
    assert written["index"].startswith("http://127.0.0.1:")
    assert written["frameworks"]["torch"] == [{"series": "2.15", "releases": ["2.15.0"],
                                               "python": ["3.11", "3.12", "3.13", "3.14", "3.15"],
                                               "cuda": ["13.2"], "default_cuda": "13.2", "cudnn": "9.26"}]
    assert written["frameworks"]["xgboost"][0]["default_cuda"] == "13.0"  # nvidia-nccl-cu13: CUDA 13

    matrix = load_matrix(data_dir, overlay=overlay)
    for request in (FrameworkRequest("torch", "2.15.0"), FrameworkRequest("torch", None)):
        plan = make_plan(Config(root=Path("."), source="test", framework=request), matrix)
        assert plan.framework.version == "2.15.0" and plan.framework.source == str(overlay)
        assert plan.base_image == "nvidia/cuda:13.2.1-base-ubuntu22.04"
        assert plan.framework.index_url == "https://download.pytorch.org/whl/cu132"
        assert "torch==2.15.0 is known from index metadata" in plan.notes[0] and str(overlay) in plan.notes[0]
        assert plan.cuda_archs == ()  # not in any index metadata: said so, never guessed
        assert "GPU architectures of torch==2.15.0 with CUDA 13.2 are not recorded" in plan.notes[1]
    shipped = make_plan(Config(root=Path("."), source="test", framework=FrameworkRequest("torch", "2.14.1")), matrix)
    assert shipped.notes == () and shipped.framework.source == "shipped"


def test_the_shipped_data_wins_over_the_overlay(data_dir, tmp_path):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"generated": "x", "index": "y", "frameworks": {"torch": [
        {"series": "2.14", "releases": ["2.14.1", "2.14.2"], "python": ["3.12"], "cuda": ["13.0"]}]}}))
    torch = load_matrix(data_dir, overlay=overlay).framework("torch")
    assert [(s.releases, s.origin == "shipped") for s in torch.series] == [(("2.14.0", "2.14.1"), True), (("2.14.2",), False)]


@pytest.mark.parametrize("entry", [
    {"series": "2.16", "releases": ["2.16.0\nRUN touch /pwned"], "python": ["3.12"]},
    {"series": "2.16", "releases": ["2.16.0"], "python": ["3.12"], "cuda": ["13.2; rm -rf /"]},
    {"series": "2.16", "releases": ["2.16.0"], "python": ["3.12"], "package": "torch\n"},
    {"series": "2.16", "releases": ["2.16.0"], "python": ["3.12"], "gpu_index_url": "https://evil.example/"},
    {"series": "2.16", "releases": ["2.16.0"], "python": ["3.12\u2028"]},
])
def test_a_hostile_overlay_is_refused_naming_the_file(data_dir, tmp_path, entry):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"frameworks": {"torch": [entry]}}))
    with pytest.raises(DataError) as err:
        load_matrix(data_dir, overlay=overlay)
    assert str(overlay) in str(err.value) and err.value.exit_code == 3


def test_credentials_go_to_the_index_host_only_and_are_never_shown(index_server, data_dir, tmp_path):
    url = index_server("html", auth="alice:s3cret")
    authed = url.replace("http://", "http://alice:s3cret@")
    report = run(load_matrix(data_dir, overlay=tmp_path / "none.yaml"), Index(authed), ("scikit-learn",))
    assert report.problems == () and "s3cret" not in report.index
    assert all(header for _, header in FakeIndex.seen_auth)
    with pytest.raises(PackageIndexError) as err:
        run(load_matrix(data_dir, overlay=tmp_path / "none.yaml"), Index(url.replace("http://", "http://alice:wrong@")))
    assert "HTTP 401" in str(err.value) and "wrong" not in str(err.value) and err.value.exit_code == 9


def test_an_index_without_range_requests_or_metadata_files_is_a_clear_error(index_server, data_dir, tmp_path):
    with pytest.raises(PackageIndexError, match="serves no metadata files .PEP 658. and does not answer range requests"):
        run(load_matrix(data_dir, overlay=tmp_path / "none.yaml"), Index(index_server("norange")), ("torch",))


def test_a_wheel_that_is_no_zip_is_a_clear_error(index_server, data_dir, tmp_path):
    with pytest.raises(PackageIndexError, match="is not a (zip file|readable wheel)") as err:
        run(load_matrix(data_dir, overlay=tmp_path / "none.yaml"), Index(index_server("garbage")), ("xgboost",))
    assert err.value.exit_code == 9


def test_a_project_the_index_lacks_is_a_finding(index_server, data_dir, tmp_path):
    (data_dir / "frameworks" / "jax.yaml").write_text(FRAMEWORKS["jax.yaml"].replace("package: jax\n", "package: jax-fork\n"))
    report = run(load_matrix(data_dir, overlay=tmp_path / "none.yaml"), Index(index_server()), ("jax",))
    assert [(f.kind, f.message) for f in report.problems] == [("not-on-index", "the index has no project jax-fork")]


def test_the_overlay_is_never_written_into_the_installation(index_server, data_dir):
    inside = resource_dir("base_images").parent / "matrix-overlay.yaml"
    with pytest.raises(ConfigError, match="inside buildkit-py's installation"):
        run(load_matrix(data_dir), Index(index_server()), ("scikit-learn",), refresh=True, overlay=inside)
    assert not inside.exists()


def test_overlay_path_is_user_side():
    assert overlay_path({"XDG_CONFIG_HOME": "/x/cfg"}) == Path("/x/cfg/buildkit-py/matrix-overlay.yaml")
    assert overlay_path({"HOME": "/home/u"}) == Path("/home/u/.config/buildkit-py/matrix-overlay.yaml")
    assert overlay_path({"BUILDKIT_PY_MATRIX_OVERLAY": "/o.yaml", "XDG_CONFIG_HOME": "/x"}) == Path("/o.yaml")


# The real command line: exit codes, JSON, the index from the config or PIP_INDEX_URL.
def test_cli_check_and_refresh_against_the_loopback_index(index_server, tmp_path):
    url = index_server("json")
    overlay = tmp_path / "overlay.yaml"
    env = {"BUILDKIT_PY_MATRIX_OVERLAY": str(overlay), "PIP_INDEX_URL": url}
    check = run_cli("matrix", "check", "scikit-learn", "--json", cwd=tmp_path, env=env)
    assert check.returncode == 1, check.stderr  # the shipped data lists releases the recording lacks
    report = json.loads(check.stdout)
    assert report["index"] == url and report["problems"] >= 1
    assert {"framework": "scikit-learn", "release": "1.8.0", "kind": "not-on-index", "problem": True,
            "message": "scikit-learn==1.8.0 has no Linux x86_64 wheel on the index"} in report["findings"]
    assert not any(f["release"] in ("1.9.0", "1.9.1") and f["problem"] for f in report["findings"])
    refresh = run_cli("matrix", "refresh", "scikit-learn", "--pip-index-url", url, cwd=tmp_path, env=env)
    assert refresh.returncode == 0, refresh.stderr
    assert f"wrote {overlay}: nothing new" in refresh.stdout and overlay.is_file()


def test_cli_unreachable_index_has_its_own_exit_code(tmp_path):
    proc = run_cli("matrix", "check", "torch", "--pip-index-url", "http://127.0.0.1:9/simple/", "--timeout", "2",
                   cwd=tmp_path, env={"BUILDKIT_PY_MATRIX_OVERLAY": str(tmp_path / "o.yaml")})
    assert proc.returncode == 9, proc.stderr
    assert "cannot reach the package index at http://127.0.0.1:9/simple/torch/" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_slow_index_times_out(index_server, tmp_path):
    url = index_server("slow")
    proc = run_cli("matrix", "check", "torch", "--pip-index-url", url, "--timeout", "0.5", cwd=tmp_path,
                   env={"BUILDKIT_PY_MATRIX_OVERLAY": str(tmp_path / "o.yaml")})
    assert proc.returncode == 9 and "timed out" in proc.stderr and "(timeout 0.5 s)" in proc.stderr, proc.stderr


@pytest.mark.parametrize("args, fragment", [
    (["matrix", "check", "pytorh"], "FRAMEWORK: unknown framework 'pytorh'"),
    (["matrix", "check", "--timeout", "0"], "--timeout: 0.0 is not allowed"),
    (["matrix", "check", "--pip-index-url", "ftp://example.com/simple"], "pip_index_url: the value is not allowed"),
    (["matrix", "check", "--pip-index-url", "https://user:hunter2@exa mple.com/"], "pip_index_url: the value is not allowed"),
])
def test_cli_bad_input_exits_2(tmp_path, args, fragment):
    proc = run_cli(*args, cwd=tmp_path, env={"BUILDKIT_PY_MATRIX_OVERLAY": str(tmp_path / "o.yaml")})
    assert proc.returncode == 2 and fragment in proc.stderr, proc.stderr
    assert "hunter2" not in proc.stderr and "Traceback" not in proc.stderr


def test_cli_versions_lists_what_fits_the_accelerator():
    proc = run_cli("versions", "torch", "--accelerator", "NVIDIA_TESLA_V100", "--json")
    data = json.loads(proc.stdout)["torch"]
    assert data["2.9"]["cuda"] == ["12.6", "12.8", "12.9"] and data["2.11"]["cuda"] == ["12.6"]
    assert "2.15" not in data and data["2.14"]["releases"] == ["2.14.0", "2.14.1"]
    assert data["2.11"]["verified"]["13.0"].startswith("2026-11-22, NVIDIA H100")
    bad = run_cli("versions", "torch", "--accelerator", "NVIDIA_H100")
    assert bad.returncode == 2 and "nearest: NVIDIA_H100_80GB" in bad.stderr


def test_wheels_for_pythons_older_than_any_image_are_not_counted():
    """TensorFlow 1.15.5 has cp35-cp37 wheels: the check compares only 3.7 and newer with the data (which
    lists 3.7 at the oldest, to say why the release is refused), and a cp36-only release is not missing."""
    def wheel(name: str) -> IndexFile:
        return IndexFile(name, f"https://files.example/{name}", None, False, False)

    found = _releases([wheel(f"tensorflow-1.15.5-cp3{n}-cp3{n}m-manylinux2010_x86_64.whl") for n in (5, 6, 7)]
                      + [wheel("tensorflow-1.4.0-cp36-cp36m-manylinux1_x86_64.whl")])
    assert {str(v): _pythons(r) for v, r in found.items()} == {"1.15.5": ("3.7",)}


def test_parsed_data_files_are_kept_between_runs_and_an_edit_or_a_damaged_copy_is_parsed_again(tmp_path, monkeypatch):
    """read_data keeps each file's parsed form (issue 20: start-up), keyed by the file's bytes."""
    monkeypatch.setenv("BUILDKIT_PY_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "d.yaml"
    data.write_text("a: [1, '2']\n")
    assert read_data(data) == {"a": [1, "2"]}
    (kept,) = (tmp_path / "cache" / "data").glob("*.marshal")
    kept.write_bytes(marshal.dumps({"a": "the kept copy"}))
    assert read_data(data) == {"a": "the kept copy"}  # the next run reads the kept copy, not the YAML
    data.write_text("a: edited\n")
    assert read_data(data) == {"a": "edited"}  # other bytes: parsed
    data.write_text("a: [1, '2']\n")
    kept.write_bytes(b"\xffdamaged")
    assert read_data(data) == {"a": [1, "2"]}  # a damaged copy: parsed again, and kept again
    assert read_data(data) == {"a": [1, "2"]} and marshal.loads(kept.read_bytes()) == {"a": [1, "2"]}
    # What marshal cannot hold (a date), and a cache that cannot be written: parsed each time, never an error.
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("BUILDKIT_PY_CACHE_DIR", str(tmp_path / "file" / "cache"))
    dated = tmp_path / "dated.yaml"
    dated.write_text("checked: 2026-11-24\n")
    assert read_data(dated) == {"checked": datetime.date(2026, 11, 24)}
    assert read_data(data) == {"a": [1, "2"]}
    with pytest.raises(DataError, match="cannot read"):
        read_data(tmp_path / "missing.yaml")
