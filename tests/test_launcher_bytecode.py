"""launcher/bytecode.py, the install steps' compile: what compileall -x '/tests?/' writes, the test suites left out,
files an earlier layer compiled left as they are, in parallel or one by one, on this Python and on the oldest."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_launcher_oldest_python import oldest_python

from conftest import REPO

HELPER = REPO / "buildkit_py" / "launcher" / "bytecode.py"


def _site(root: Path, modules: int) -> Path:
    """A site-packages: a package of `modules` modules, its test suites, a module that does not compile, a
    symlinked folder (compileall does not follow those) and a data file."""
    site = root / "lib" / "python3" / "site-packages"
    for i in range(modules):
        path = site / "pkg" / f"m{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"X = {i}\n")
    for suite in ("pkg/tests/test_a.py", "pkg/sub/test/test_b.py", "other/tests/conftest.py"):
        (site / suite).parent.mkdir(parents=True, exist_ok=True)
        (site / suite).write_text("A = 1\n")
    (site / "pkg" / "sub" / "__init__.py").write_text("")
    (site / "broken.py").write_text("def (:\n")
    (site / "data.txt").write_text("not python\n")
    (root / "elsewhere").mkdir()
    (root / "elsewhere" / "linked.py").write_text("L = 1\n")
    (site / "linked").symlink_to(root / "elsewhere")
    return site


def _pycs(site: Path, python: str) -> dict[str, int]:
    tag = subprocess.run([python, "-c", "import sys; print(sys.implementation.cache_tag)"], capture_output=True,
                         text=True, check=True).stdout.strip()
    return {str(p.relative_to(site)): p.stat().st_mtime_ns for p in site.rglob(f"*.{tag}.pyc")}


def _run(python: str, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([python, str(HELPER), str(root / "lib")], capture_output=True, text=True,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


@pytest.mark.parametrize("modules", [3, 200], ids=["one-by-one", "parallel"])
@pytest.mark.parametrize("which", ["this", "oldest"])
def test_it_compiles_what_compileall_would_but_the_test_suites(tmp_path, modules, which):
    python = sys.executable if which == "this" else oldest_python()[0]
    site = _site(tmp_path, modules)
    proc = _run(python, tmp_path)
    assert proc.returncode == 0, proc.stderr  # a file that does not compile does not stop the step
    assert "broken.py" in proc.stdout + proc.stderr  # ... but it is said, as compileall -q says it
    compiled = _pycs(site, python)
    names = {Path(p).parent.parent.name + "/" + Path(p).name.split(".")[0] for p in compiled}
    assert names == {f"pkg/m{i}" for i in range(modules)} | {"sub/__init__"}
    assert not any("tests" in p or "/test/" in p or p.startswith("linked") for p in compiled)
    # As compileall writes them: Python imports them without compiling again.
    check = subprocess.run([python, "-c", "import importlib.util as u, sys; sys.path.insert(0, sys.argv[1]); "
                            "import pkg.m1; print(pkg.m1.__cached__)", str(site)],
                           capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert check.returncode == 0 and Path(check.stdout.strip()).is_file(), check.stderr


def test_an_earlier_layers_files_are_left_and_only_the_new_and_changed_are_compiled(tmp_path):
    site = _site(tmp_path, 100)
    assert _run(sys.executable, tmp_path).returncode == 0
    before = _pycs(site, sys.executable)
    # The next install step: a new package, and one module replaced by an upgrade (a newer source than its .pyc).
    (site / "newpkg").mkdir()
    (site / "newpkg" / "__init__.py").write_text("N = 1\n")
    changed = site / "pkg" / "m7.py"
    changed.write_text("X = 'upgraded'\n")
    os.utime(changed, (changed.stat().st_atime + 5, changed.stat().st_mtime + 5))
    assert _run(sys.executable, tmp_path).returncode == 0
    after = _pycs(site, sys.executable)
    rewritten = {p for p in after if after[p] != before.get(p)}
    assert rewritten == {p for p in after if p.startswith("newpkg/") or "/m7." in p}, rewritten
    cached = Path(importlib.util.cache_from_source(str(changed)))
    assert cached.is_file() and b"upgraded" in cached.read_bytes()


def test_without_a_process_pool_it_compiles_one_by_one(tmp_path, monkeypatch):
    """Where worker processes cannot start (no /dev/shm, no semaphores), the step still compiles everything."""
    spec = importlib.util.spec_from_file_location("bytecode_helper", HELPER)
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)

    class NoPool:
        def __init__(self, *args, **kwargs):
            raise OSError(38, "Function not implemented")

    monkeypatch.setattr(helper, "ProcessPoolExecutor", NoPool)
    monkeypatch.setattr(helper, "_workers", lambda: 4)
    site = _site(tmp_path, helper.PARALLEL_FROM + 10)
    assert helper.main([str(tmp_path / "lib")]) == 0
    assert len(_pycs(site, sys.executable)) == helper.PARALLEL_FROM + 10 + 1
