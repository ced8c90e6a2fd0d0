"""autopackage resolves the image's requirements with uv before anything is built: against a loopback index of real
wheels (test_lock_e2e.Index), and against PyPI for its placeholder; cached by its inputs; offline said, not failed."""

from __future__ import annotations

import json
import socket
import zipfile
from dataclasses import replace

import pytest
from test_lock_e2e import Index, make_wheel

from buildkit_py.config import load_config
from buildkit_py.errors import ConfigError
from buildkit_py.pipeline.plan import make_plan
from buildkit_py.pipeline.resolution import OFFLINE_ENV, check_resolution, declared_in
from conftest import run_cli


@pytest.fixture
def online(monkeypatch):
    monkeypatch.delenv(OFFLINE_ENV, raising=False)


@pytest.fixture
def index(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "bkpy_plain", "1.0", module_text="VERSION = '1.0'\n")
    make_wheel(wheels, "bkpy_plain", "1.1", module_text="VERSION = '1.1'\n")
    served = Index(wheels)
    yield served
    served.close()


def trainer(root, index_url: str, requirements: str, extra: str = ""):
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.py").write_text("import bkpy_plain\n")
    (root / "requirements.txt").write_text(requirements)
    (root / "pip.conf").write_text(f"[global]\nindex-url = {index_url}\n")
    (root / "buildkit.yaml").write_text(f"framework: none\nhypertune: false\npip_conf: pip.conf\n{extra}")
    return root


def dry(root, *args):
    return run_cli("autopackage", str(root), "--dry-run", "--json", *args)


def test_the_dry_run_resolves_each_requirement_and_keeps_the_result(online, index, tmp_path):
    root = trainer(tmp_path / "app", index.url, "bkpy-plain>=1.0\n")
    proc = dry(root)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["resolution"]["checked"] is True and out["resolution"]["cached"] is False, out["resolution"]
    assert out["resolution"]["packages"] == {"bkpy-plain": "1.1"}
    assert out["requirements"] == [{"requirement": "bkpy-plain>=1.0", "source": "requirements.txt:1", "resolved": "1.1"}]
    assert [s["stage"] for s in out["stages"]] == ["infer", "resolve", "render"]
    again = json.loads(dry(root).stdout)
    assert again["resolution"]["cached"] is True and again["resolution"]["packages"] == {"bkpy-plain": "1.1"}
    (root / "requirements.txt").write_text("bkpy-plain==1.0\n")  # another input: resolved again
    changed = json.loads(dry(root).stdout)
    assert changed["resolution"]["cached"] is False and changed["requirements"][0]["resolved"] == "1.0"


def test_a_requirement_that_does_not_resolve_exits_2_at_its_line(online, index, tmp_path):
    root = trainer(tmp_path / "app", index.url, "bkpy-plain==1.0\nbkpy-nowhere==2.0\n")
    proc = dry(root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "requirements.txt:2: 'bkpy-nowhere==2.0' does not resolve for Python 3.11 (linux/amd64)" in proc.stderr
    assert "not found in the package registry" in proc.stderr and "Traceback" not in proc.stderr
    error = proc.stderr.strip().splitlines()[-1]  # one line, after the stages' progress events
    assert error.startswith("buildkit-py: error: requirements.txt:2:") and "not found in the package registry" in error
    (root / "requirements.txt").write_text("bkpy-plain==3.0\n")  # a release the index lacks
    assert "requirements.txt:1: 'bkpy-plain==3.0' does not resolve" in dry(root).stderr


def test_offline_or_an_unreachable_index_says_nothing_was_checked(online, tmp_path):
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = trainer(tmp_path / "app", f"http://127.0.0.1:{port}/simple", "bkpy-plain==1.0\n")
    for args, env, said in (((), {}, "no package index answered"), (("--offline",), {}, "offline"),
                            ((), {OFFLINE_ENV: "1"}, "offline")):
        proc = run_cli("autopackage", str(root), "--dry-run", "--json", *args, env=env)
        assert proc.returncode == 0, proc.stderr
        resolution = json.loads(proc.stdout)["resolution"]
        assert resolution["checked"] is False and said in resolution["note"], resolution
        if not args and not env:  # known before uv is run (its retries take seconds): the probe's words
            assert f"(127.0.0.1:{port}: Connection refused)" in resolution["note"], resolution


def test_a_placeholder_the_config_names_is_refused_by_pypi_with_its_own_words(online, tmp_path):
    root = tmp_path / "app"
    root.mkdir()
    (root / "train.py").write_text("print(1)\n")
    (root / "buildkit.yaml").write_text("framework: none\nhypertune: false\npip: [sklearn]\n")
    proc = dry(root)
    if proc.returncode == 0 and not json.loads(proc.stdout)["resolution"]["checked"]:
        pytest.fail(f"PyPI is not reachable from this machine: {proc.stdout[-500:]}")
    assert proc.returncode == 2, proc.stdout
    assert "buildkit.yaml: pip: 'sklearn' does not resolve" in proc.stderr, proc.stderr
    assert "Failed to build `sklearn" in proc.stderr and "scikit-learn" in proc.stderr


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_offline_takes_a_boolean_through_the_api(value):
    from buildkit_py import api
    from buildkit_py.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        api.autopackage(dir="/nonexistent", dry_run=True, offline=value)
    assert str(err.value) == f"offline: {value!r} is not allowed: True or False"


def test_a_build_resolves_before_the_engine_builds(online, index, testenv, tmp_path):
    root = trainer(tmp_path / "app", index.url, "bkpy-plain==1.0\nbkpy-nowhere==2.0\n",
                   "requirements: requirements.txt\ntrainer:\n  script: train.py\n")
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]}
    proc = run_cli("build", "--dir", str(root), "--network", "host", "--progress", "plain", env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "requirements.txt:2: 'bkpy-nowhere==2.0' does not resolve" in proc.stderr
    assert "building " not in proc.stderr  # refused before the engine was asked to build anything
    offline = run_cli("build", "--dir", str(root), "--network", "host", "--progress", "plain", "--offline", env=env)
    assert "note: the requirements were not resolved: offline" in offline.stderr


def test_resolve_and_dockerfile_resolve_resolve_too(online, index, tmp_path):
    root = trainer(tmp_path / "app", index.url, "bkpy-plain==1.0\n", "requirements: requirements.txt\n"
                   "trainer:\n  script: train.py\n")
    rendered = run_cli("dockerfile", "--dir", str(root))  # without the network: said so
    assert rendered.returncode == 0 and "note: the requirements were not resolved" in rendered.stderr, rendered.stderr
    assert not index.seen, "dockerfile asked the index"
    resolved = run_cli("resolve", "--dir", str(root), "--json")
    assert resolved.returncode == 0, resolved.stderr
    assert json.loads(resolved.stdout)["notes"][-1] == "1 package resolves for Python 3.11 (linux/amd64)"
    again = run_cli("dockerfile", "--dir", str(root))  # the kept resolution of the same inputs: nothing to say
    assert again.returncode == 0 and "not resolved" not in again.stderr and again.stdout == rendered.stdout
    (root / "requirements.txt").write_text("bkpy-plain==9.9\n")
    for command in (["resolve"], ["dockerfile", "--resolve"]):
        proc = run_cli(*command, "--dir", str(root))
        assert proc.returncode == 2 and "requirements.txt:1: 'bkpy-plain==9.9' does not resolve" in proc.stderr, proc.stderr
    assert run_cli("dockerfile", "--dir", str(root)).returncode == 0
    assert run_cli("dockerfile", "--resolve", "--dir", str(root), env={OFFLINE_ENV: "1"}).returncode == 0


def _platform_wheel(directory, name: str, version: str, tag: str, module: str) -> None:
    """A wheel of one platform tag (NVIDIA's nvidia-tensorflow is cp38-cp38-linux_x86_64, not manylinux)."""
    info = f"{name}-{version}.dist-info"
    files = {f"{module}/__init__.py": f"__version__ = {version.split('+')[0]!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n",
             f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n"}
    with zipfile.ZipFile(directory / f"{name}-{version}-{tag}.whl", "w") as archive:
        for n, t in {**files, f"{info}/RECORD": ""}.items():
            archive.writestr(n, t)


def test_nvidias_tensorflow_stands_for_the_tensorflow_requirements_in_the_resolution(online, index, tmp_path):
    """A TensorFlow 1.15 GPU image installs nvidia-tensorflow (its index replaced by a loopback one here): the
    trainer's own tensorflow-gpu==1.15.5 line (cp37 wheels only) is overridden away, as in the image's installs."""
    _platform_wheel(index.directory, "nvidia_tensorflow", "1.15.5+nv23.3", "cp38-cp38-linux_x86_64", "tensorflow")
    root = trainer(tmp_path / "app", index.url, "tensorflow-gpu==1.15.5\nbkpy-plain==1.0\n")
    (root / "buildkit.yaml").write_text("framework: tensorflow==1.15.5\nhypertune: false\npip_conf: pip.conf\n"
                                        "trainer: {script: train.py}\nrequirements: requirements.txt\n")
    config = load_config(root / "buildkit.yaml")
    plan = make_plan(config)
    assert plan.framework.requirement == "nvidia-tensorflow==1.15.5+nv23.3" and plan.python.version == "3.8"
    plan = replace(plan, framework=replace(plan.framework, index_url=index.url))
    resolved = check_resolution(config, plan, declared_in(config, plan))
    assert resolved.checked and dict(resolved.pins) == {"nvidia-tensorflow": "1.15.5+nv23.3", "bkpy-plain": "1.0"}
    unreplaced = replace(plan, framework=replace(plan.framework, replaces=()))
    with pytest.raises(ConfigError, match=r"requirements.txt:1: 'tensorflow-gpu==1.15.5' does not resolve for Python 3\.8"):
        check_resolution(config, unreplaced, declared_in(config, unreplaced))


def test_an_index_nobody_answers_is_known_at_once_through_its_proxy_too(monkeypatch):
    from buildkit_py.clients.transport import unreachable

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as closed, socket.socket() as listening:
        closed.bind(("127.0.0.1", 0))
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        shut, open_ = closed.getsockname()[1], listening.getsockname()[1]
        assert unreachable([f"http://127.0.0.1:{shut}/simple"], 0.5) == f"127.0.0.1:{shut}: Connection refused"
        assert unreachable([f"http://127.0.0.1:{shut}/simple", f"http://127.0.0.1:{open_}/simple"], 0.5) is None
        assert unreachable(["file:///srv/wheels"], 0.5) is None  # nothing to connect to: uv reads it
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{shut}")  # the resolver goes through the proxy
        assert unreachable([f"https://127.0.0.1:{open_}/simple"], 0.5) == f"127.0.0.1:{shut}: Connection refused"
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        assert unreachable([f"https://127.0.0.1:{open_}/simple"], 0.5) is None
