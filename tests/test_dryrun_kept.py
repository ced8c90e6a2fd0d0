"""A repeated dry run (`dockerfile`) is served from what the last one made, kept by the digest of its inputs, while
every file it read or looked for (the config, the requirements, a kept resolution, the directories it listed) is
as it was: it loads none of config, plan, resolution or render, and asks no index; anything else makes it run the
stages again. A dry run whose index did not answer is not kept: the next one asks again."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import buildkit_py.api as api
from buildkit_py.api import dockerfiles
from buildkit_py.fsutil import CACHE_ENV
from buildkit_py.pipeline import plan as plan_module
from conftest import REPO


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("BUILDKIT_PY_MATRIX_OVERLAY", str(tmp_path / "overlay.yaml"))
    monkeypatch.delenv("BUILDKIT_PY_OFFLINE", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _project(root: Path, index: str | None = None) -> Path:
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text("print('one')\n")
    (root / "requirements.txt").write_text("six==1.16.0\n")
    (root / "buildkit.yaml").write_text("framework: none\npython: '3.11'\ngpu: false\nrequirements: requirements.txt\n"
                                        "trainer:\n  module: trainer.task\n"
                                        + (f"pip_index_url: {index}\n" if index else ""))
    return root


def _records(cache: Path) -> list[Path]:
    return sorted((cache / dockerfiles.KEPT_DRY_RUNS).glob("*.json"))


@pytest.fixture
def stages_refused(monkeypatch):
    """Makes the plan stage fail: a dry run served from its kept record never gets there."""
    def refused(*_args, **_kwargs):
        raise AssertionError("the plan stage ran")

    def refuse() -> None:
        monkeypatch.setattr(plan_module, "make_plan", refused)

    return refuse


def test_a_repeated_dry_run_is_the_kept_one_and_runs_no_stage(isolated, stages_refused):
    root = _project(isolated / "proj")
    first = api.dockerfile(root)
    assert len(_records(isolated / "cache")) == 1
    stages_refused()
    again = api.dockerfile(root)
    assert again == first
    assert "ENTRYPOINT" in again.dockerfile and again.notes == first.notes


def test_a_code_edit_keeps_it_and_an_input_change_makes_it_again(isolated, stages_refused):
    root = _project(isolated / "proj")
    first = api.dockerfile(root)
    (root / "trainer" / "task.py").write_text("print('two')\n")  # code: no input of the Dockerfile
    assert api.dockerfile(root) == first
    (root / "requirements.txt").write_text("six==1.17.0\n")
    with pytest.raises(AssertionError, match="plan stage ran"):
        stages_refused()
        api.dockerfile(root)


@pytest.mark.parametrize("change", ["edit the config", "add a .dockerignore", "a flag", "the environment",
                                    "a resolution is kept", "resolve"])
def test_what_the_dry_run_depends_on_is_in_its_key_or_its_files(isolated, change, monkeypatch):
    root = _project(isolated / "proj")
    api.dockerfile(root)
    record = json.loads(_records(isolated / "cache")[0].read_text())
    settings: dict = {}
    if change == "edit the config":
        (root / "buildkit.yaml").write_text((root / "buildkit.yaml").read_text() + "hypertune: false\n")
    elif change == "add a .dockerignore":
        (root / ".dockerignore").write_text("data/\n")
    elif change == "a flag":
        settings = {"python": "3.12"}
    elif change == "the environment":
        monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    elif change == "a resolution is kept":  # an earlier resolution of these inputs is what the dry run renders
        kept = next(p for p in record["consulted"] if "/resolutions/" in p and p.endswith(".json")
                    and not p.endswith(".move.json"))
        Path(kept).parent.mkdir(parents=True, exist_ok=True)
        Path(kept).write_text(json.dumps([["six", "1.16.0"]]))
    resolve = change == "resolve"
    project = dockerfiles.project_from(root, dict(settings), "dockerfile", ["output", "resolve"])
    key = dockerfiles._recipe.key(project, ("dockerfile", resolve))
    assert dockerfiles._recipe.kept_output(dockerfiles.KEPT_DRY_RUNS, key) is None


def test_a_dry_run_whose_index_does_not_answer_is_not_kept_and_says_so_each_time(isolated):
    with socket.socket() as closed:  # a loopback port nothing listens on
        closed.bind(("127.0.0.1", 0))
        nobody = f"http://127.0.0.1:{closed.getsockname()[1]}/simple"
        root = _project(isolated / "proj", index=nobody)
        for _ in range(2):
            result = api.dockerfile(root, resolve=True)
            assert any("no package index answered" in note for note in result.notes), result.notes
        assert _records(isolated / "cache") == []


def test_a_kept_dry_run_writes_its_files(isolated, stages_refused):
    root = _project(isolated / "proj")
    api.dockerfile(root)
    stages_refused()
    result = api.dockerfile(root, output=isolated / "out" / "Dockerfile")
    assert (isolated / "out" / "Dockerfile").read_text() == result.dockerfile
    assert (isolated / "out" / "Dockerfile.dockerignore").read_text() == result.dockerignore
    assert result.written[-1].is_dir() and any(result.written[-1].iterdir())  # the launcher the Dockerfile copies


def test_a_record_of_another_shape_is_made_again(isolated):
    root = _project(isolated / "proj")
    first = api.dockerfile(root)
    path = _records(isolated / "cache")[0]
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "output": {"dockerfiles": "not a list"}}))
    assert api.dockerfile(root) == first


def test_the_repeated_dry_run_imports_no_stage(isolated):
    root = _project(isolated / "proj")
    script = ("import sys\nfrom buildkit_py.cli import main\ncode = main(['dockerfile', '--dir', sys.argv[1]])\n"
              "print(' '.join(sorted(m for m in sys.modules if m.startswith(('buildkit_py', 'jinja2', 'yaml')))),"
              " file=sys.stderr)\nsys.exit(code)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = [subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True, env=env)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr
    assert runs[0].stdout == runs[1].stdout and "ENTRYPOINT" in runs[1].stdout
    first, second = (set(r.stderr.splitlines()[-1].split()) for r in runs)
    assert "buildkit_py.pipeline.plan" in first
    assert not second & {"buildkit_py.config", "buildkit_py.pipeline.plan", "buildkit_py.pipeline.render",
                         "buildkit_py.pipeline.resolution", "jinja2", "yaml"}, sorted(second)
