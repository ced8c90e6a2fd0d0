"""The launcher runs on every Python the images use (3.7 and up, issue 28): each module parses with the oldest
grammar, and the launcher runs end to end (cluster contract, CPU run, hand-off, import check) on the oldest Python
this machine has (pyenv's 3.7 where it is installed)."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

LAUNCHER = REPO / "buildkit_py" / "launcher"


def oldest_python() -> tuple[str, tuple[int, int]]:
    """The oldest CPython >= 3.7 found (pyenv's versions, then PATH), else this one."""
    found = []
    for root in (Path.home() / ".pyenv" / "versions", Path("/root/.pyenv/versions")):
        for path in root.glob("3.*/bin/python3") if root.is_dir() else ():
            match = re.fullmatch(r"3\.([0-9]+)\..*", path.parent.parent.name)
            if match and int(match.group(1)) >= 7:
                found.append(((3, int(match.group(1))), str(path)))
    for minor in range(7, 11):
        if (path := shutil.which(f"python3.{minor}")):
            found.append(((3, minor), path))
    for version, path in sorted(found):  # a pyenv shim may name a version it does not run: each is tried
        if subprocess.run([path, "-c", "pass"], capture_output=True).returncode == 0:
            return path, version
    return sys.executable, sys.version_info[:2]


@pytest.mark.parametrize("module", sorted(p.name for p in LAUNCHER.glob("*.py")))
def test_every_launcher_module_parses_with_the_oldest_grammar(module):
    ast.parse((LAUNCHER / module).read_text(), feature_version=(3, 7))


def test_the_launcher_runs_on_the_oldest_python_here(tmp_path):
    python, version = oldest_python()
    site = tmp_path / "site"
    shutil.copytree(LAUNCHER, site / "buildkit_launcher", ignore=shutil.ignore_patterns("__pycache__"))
    spec = {"cluster": {"workerpool0": ["chief:2222"], "workerpool1": ["w0:2222", "w1:2222"]},
            "task": {"type": "workerpool1", "index": 1}, "job": "{}"}
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(site), "CLUSTER_SPEC": json.dumps(spec),
           "BUILDKIT_PY_EXPECT_GPUS": "0"}
    code = "import os, sys; print(sys.version_info[:2], os.environ['RANK'], os.environ['WORLD_SIZE'], os.environ['MASTER_ADDR'])"
    proc = subprocess.run([python, "-m", "buildkit_launcher", "--", python, "-c", code], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"({version[0]}, {version[1]}) 2 3 chief" in proc.stdout, (python, proc.stdout, proc.stderr)
    (tmp_path / "imports.json").write_text(json.dumps([["json", ["dumps"]], ["zz_absent_module", []]]))
    checked = subprocess.run([python, "-B", "-m", "buildkit_launcher.imports", str(tmp_path / "imports.json")],
                             capture_output=True, text=True, env=env, cwd=tmp_path)
    assert checked.returncode == 1 and "zz_absent_module: ModuleNotFoundError" in checked.stdout, checked.stdout


def test_the_pid_1_supervisor_runs_on_the_oldest_python_here(tmp_path):
    """As PID 1 (a PID namespace of its own): a trainer it execs and one it runs in its own interpreter both give their
    exit status, an orphan is reaped, and SIGTERM to PID 1 reaches the trainer's handler."""
    from test_launcher_handoff import SIGTERM_TRAINER, _pid_namespace_works

    if not _pid_namespace_works():
        pytest.skip("unshare --pid is not allowed here")
    python, version = oldest_python()
    site = tmp_path / "site"
    shutil.copytree(LAUNCHER, site / "buildkit_launcher", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(site), "BUILDKIT_PY_EXPECT_GPUS": "0",
           "BUILDKIT_PY_LAUNCHER_QUIET": "1"}
    pid_1 = ["unshare", "--fork", "--pid", "--mount-proc", python, "-m", "buildkit_launcher", "--"]
    spawned = subprocess.run([*pid_1, "sh", "-c", "sleep 0.2 & echo $$; exit 3"], capture_output=True, text=True,
                             env=env, timeout=60)
    assert spawned.returncode == 3 and spawned.stdout == "2\n", (version, spawned.stderr)
    script = tmp_path / "trainer.py"
    script.write_text(SIGTERM_TRAINER)
    proc = subprocess.Popen([*pid_1, python, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout.readline() == "ready\n"
        os.kill(int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0]), signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 42 and out == "got SIGTERM in __main__\n", (version, err)
