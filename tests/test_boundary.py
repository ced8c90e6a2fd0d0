"""The trainer directory is a boundary: a booby-trapped repository (symlinks out, `..` includes, an index URL on
loopback that records what it is asked) cannot make buildkit-py read, print or send a file outside it; trees and
include chains past their named limits are refused within seconds, and a walk is linear in the tree's size."""

from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path

import pytest

from buildkit_py.pipeline.render import render_dockerignore
from buildkit_py.sources.requirements import MAX_INCLUDES
from buildkit_py.sources.walk import MAX_DEPTH, included_files
from conftest import LoopbackServer, run_cli

SECRET = "hunter2-secret-line"  # the outside file's content: it must appear in no output and no request


class Recorder:
    """An HTTP server on loopback that answers 404 to everything and keeps every request's path."""

    def __init__(self) -> None:
        paths: list[str] = []
        self.paths = paths

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                paths.append(self.path)
                self.send_error(404)

            do_HEAD = do_GET  # noqa: N815

            def log_message(self, *args):
                pass

        self.server = LoopbackServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder():
    served = Recorder()
    yield served
    served.close()


@pytest.fixture
def trap(tmp_path):
    """(trainer directory, outside directory): the outside holds a secret list; write(files) and link(name, target)
    set the trap's files."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "list.txt").write_text(f"{SECRET}\n", encoding="utf-8")
    (outside / "setup.cfg").write_text(f"[metadata]\nname = {SECRET}\n[options]\ninstall_requires =\n    {SECRET}\n")
    (outside / "pyproject.toml").write_text(f'[project]\nname = "x"\ndependencies = ["{SECRET}"]\n')
    (outside / "Dockerfile").write_text(f"FROM python:3.11-slim\nRUN echo {SECRET}\n")
    root = tmp_path / "repo"
    root.mkdir()
    (root / "train.py").write_text("import os\n")
    return root, outside


def refused(*args: str) -> str:
    """Exit 2, one line on stderr without a traceback, no byte of the outside file anywhere."""
    proc = run_cli(*args)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2, said
    errors = [line for line in proc.stderr.splitlines() if line.startswith("buildkit-py: error:")]
    assert "Traceback" not in said and len(errors) == 1 and errors[0] == proc.stderr.splitlines()[-1], said
    assert SECRET not in said, said
    return errors[0]


@pytest.mark.parametrize("name", ["requirements.txt", "setup.cfg", "pyproject.toml"])
def test_inference_refuses_a_file_that_links_out(trap, name):
    root, outside = trap
    source = outside / ("list.txt" if name == "requirements.txt" else name)
    (root / name).symlink_to(source)
    err = refused("autopackage", str(root), "--dry-run")
    assert name in err and "outside the trainer directory" in err and str(source) in err, err
    err = refused("autopackage", str(root), "--dry-run", "--mode", "package")
    assert name in err, err


def test_a_requirements_include_out_is_refused_by_inference_lock_and_every_command(trap, recorder):
    root, _ = trap
    (root / "requirements.txt").write_text(f"-r ../outside/list.txt\n--index-url {recorder.url}\n")
    (root / "buildkit.yaml").write_text("trainer:\n  script: train.py\nrequirements: requirements.txt\n")
    config = str(root / "buildkit.yaml")
    for args in (("autopackage", str(root), "--dry-run"), ("lock", "--config", config),
                 ("dockerfile", "--config", config), ("package", "--config", config)):
        err = refused(*args)
        assert "requirements.txt:1" in err and ("not a file in the trainer directory" in err or args[0] == "package")
    # The plan copies each included file beside the requirements (so the install finds them): one out of the
    # directory is refused by every command that plans, the content digest's too, before anything is read.
    proc = run_cli("print", "content-digest", "--config", config)
    assert proc.returncode == 2 and "not a file in the trainer directory" in proc.stderr, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert not any(SECRET in path for path in recorder.paths), recorder.paths


def test_lock_hands_uv_the_checked_lines_of_includes_inside(trap, recorder, monkeypatch):
    """An include inside the trainer directory still counts: uv asks the index for what it names."""
    root, _ = trap
    (root / "reqs").mkdir()
    (root / "reqs" / "base.txt").write_text("inside-pkg-abc\n-c ../pins.txt\n")
    (root / "pins.txt").write_text("inside-pkg-abc<9\n")
    (root / "requirements.txt").write_text(f"--index-url {recorder.url}\n-r reqs/base.txt\n")
    (root / "buildkit.yaml").write_text("trainer:\n  script: train.py\nrequirements: requirements.txt\n")
    proc = run_cli("lock", "--config", str(root / "buildkit.yaml"))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr  # the recorder serves nothing
    assert any("inside-pkg-abc" in path for path in recorder.paths), (recorder.paths, proc.stderr)


def test_an_include_loop_and_a_long_chain_exit_2_naming_the_line(trap):
    root, _ = trap
    (root / "requirements.txt").write_text("-r a.txt\n")
    (root / "a.txt").write_text("six\n-r requirements.txt\n")
    err = refused("autopackage", str(root), "--dry-run")
    assert "a.txt:2" in err and "again (a loop)" in err, err
    for i in range(2000):  # once a RecursionError
        (root / f"r{i}.txt").write_text(f"-r r{i + 1}.txt\n")
    (root / "r2000.txt").write_text("six\n")
    (root / "requirements.txt").write_text("-r r0.txt\n")
    started = time.monotonic()
    err = refused("autopackage", str(root), "--dry-run")
    assert f"r{MAX_INCLUDES - 2}.txt:1" in err and f"at most {MAX_INCLUDES}" in err, err
    assert time.monotonic() - started < 30


def test_a_config_requirements_key_that_links_out_is_refused(trap):
    root, outside = trap
    (root / "reqs.txt").symlink_to(outside / "list.txt")
    (root / "buildkit.yaml").write_text("trainer:\n  script: train.py\nrequirements: reqs.txt\n")
    for args in (("dockerfile", "--config", str(root / "buildkit.yaml")), ("autopackage", str(root), "--dry-run")):
        err = refused(*args)
        assert "reqs.txt" in err and "outside" in err, err


def test_a_found_config_or_dockerignore_that_links_out_is_not_read(trap):
    root, outside = trap
    (root / "buildkit.yaml").symlink_to(outside / "list.txt")
    err = refused("dockerfile", "--dir", str(root))
    assert "buildkit.yaml" in err and "outside the trainer directory" in err, err
    (root / "buildkit.yaml").unlink()
    (root / "buildkit.yaml").write_text("trainer:\n  script: train.py\n")
    (root / ".dockerignore").symlink_to(outside / "list.txt")
    err = refused("print", "content-digest", "--dir", str(root))
    assert ".dockerignore" in err, err


def test_an_own_dockerfile_that_links_out_is_not_built(trap):
    """The default ignore list leaves Dockerfile out of the context, so the context's check of links never saw it."""
    root, outside = trap
    (root / "Dockerfile").symlink_to(outside / "Dockerfile")
    err = refused("autopackage", str(root), "--dockerfile", "--dry-run")
    assert "Dockerfile" in err and "outside the trainer directory" in err, err


def _chain(root: Path, depth: int) -> list[Path]:
    """A directory chain `depth` deep under root with a file at its end (os.makedirs recurses); its folders."""
    folders = [root]
    for _ in range(depth):
        folders.append(folders[-1] / "d")
        folders[-1].mkdir()
    (folders[-1] / "x.py").write_text("x = 1\n")
    return folders[1:]


def _unchain(folders: list[Path]) -> None:
    """Removed from the bottom up: pytest's clean-up of old runs (shutil.rmtree) recurses, and stops at 1,000."""
    (folders[-1] / "x.py").unlink()
    for folder in reversed(folders):
        folder.rmdir()


def test_a_tree_past_the_depth_limit_is_refused_within_seconds(trap):
    root, _ = trap
    (root / "buildkit.yaml").write_text("trainer:\n  script: train.py\n")
    folders = _chain(root, 1000)
    try:
        started = time.monotonic()
        err = refused("print", "content-digest", "--dir", str(root))
        assert f"more than {MAX_DEPTH} directories deep" in err, err
        err = refused("autopackage", str(root), "--dry-run")
        assert f"more than {MAX_DEPTH} directories deep" in err, err
        assert time.monotonic() - started < 30
    finally:
        _unchain(folders)


def _walk_seconds(root: Path) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        included_files(root, render_dockerignore())  # the default list: each pattern was tried at every parent
        best = min(best, time.perf_counter() - started)
    return best


def test_a_walk_costs_no_more_per_directory_deep_than_wide(tmp_path):
    """The same number of directories as one chain and side by side: a walk that re-checks every parent for every
    entry (as it once did) takes about depth/2 times longer on the chain; a linear one about the same."""
    deep, wide = tmp_path / "deep", tmp_path / "wide"
    deep.mkdir()
    wide.mkdir()
    _chain(deep, MAX_DEPTH)
    for i in range(MAX_DEPTH):
        (wide / f"d{i}").mkdir()
        (wide / f"d{i}" / "x.py").write_text("x = 1\n")
    ratio = _walk_seconds(deep) / _walk_seconds(wide)
    assert ratio < 12, ratio  # the quadratic walk gave over 40 here
