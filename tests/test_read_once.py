"""Each input is read once per command: the real command line, run with an audit hook that counts every open of a
file in the trainer directory and every process started, for `autopackage --dry-run`, `build --push` cold and after a
one-line edit (the fast path), and `submit --dry-run`. A stage that reads a file again, or asks git again, fails here."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO, SESSION_CACHE

# Runs buildkit-py in this interpreter with an audit hook; writes what it saw to the file named by argv[1].
RUNNER = """
import hashlib, json, os, runpy, sys, tomllib, yaml
out, root, opens, runs, parsed = sys.argv[1], os.path.realpath(sys.argv[2]) + os.sep, [], [], []
def counted(parse):
    def parse_counted(text, *args, **kwargs):
        parsed.append(hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest())
        return parse(text, *args, **kwargs)
    return parse_counted
yaml.compose, tomllib.loads = counted(yaml.compose), counted(tomllib.loads)  # the config's YAML, pyproject's TOML
from buildkit_py.sources import requirements, walk
requirements._logical_lines = counted(requirements._logical_lines)  # a requirements file's lines, as pip reads them
def walked(tree, *args, walk_tree=walk._walk):
    if os.path.realpath(tree) + os.sep == root:
        opens.append("walked:.")  # a walk of the whole trainer directory (shallow globs of it are not walks)
    return walk_tree(tree, *args)
walk._walk = walked
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path, mode = os.fsdecode(args[0]), args[1]
        if os.path.realpath(path).startswith(root) and not (isinstance(mode, str) and set(mode) & set("wax+")) \\
                and not (isinstance(args[2], int) and args[2] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)):
            opens.append(os.path.relpath(os.path.realpath(path), root))
    elif event == "subprocess.Popen":
        runs.append([os.fsdecode(a) for a in args[1]] if args[1] else [os.fsdecode(args[0])])
sys.addaudithook(hook)
sys.argv = ["buildkit-py", *sys.argv[3:]]
try:
    runpy.run_module("buildkit_py", run_name="__main__")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
with open(out, "w") as handle:
    json.dump({"code": code, "opens": opens, "runs": runs, "parsed": parsed}, handle)
"""


def traced(tmp_path: Path, root: Path, *args: str, env: dict | None = None) -> tuple[Counter, list[list[str]], str]:
    """(opens of each file under root, the processes started, stderr); each parse of a file under root as YAML,
    TOML or a requirements file counts as an open of "parsed:PATH", each walk of root as one of "walked:."."""
    out = tmp_path / f"trace-{uuid.uuid4().hex[:6]}.json"
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(out), str(root), *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                               "HOME": str(REPO / ".testenv"), "XDG_CACHE_HOME": str(SESSION_CACHE),
                               "BUILDKIT_PY_OFFLINE": "1",
                               # A TLS-intercepting proxy's CA bundle, as the user's shell has it (run_cli passes it too).
                               **{k: os.environ[k] for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
                                  if k in os.environ}, **(env or {})})
    assert proc.returncode == 0 and out.exists(), proc.stderr[-3000:]
    seen = json.loads(out.read_text())
    assert seen["code"] in (0, None), (seen["code"], proc.stderr[-3000:])
    digests = {hashlib.sha256(p.read_bytes()).hexdigest(): p.relative_to(root).as_posix() for p in root.rglob("*")
               if p.is_file() and ".git" not in p.parts and p.suffix in (".yaml", ".yml", ".toml", ".txt")}
    parses = [f"parsed:{digests[d]}" for d in seen["parsed"] if d in digests]
    return Counter(seen["opens"] + parses), seen["runs"], proc.stderr


def read_once(opens: Counter, runs: list[list[str]], expected: set[str]) -> None:
    twice = {path: n for path, n in opens.items() if n > 1 and not path.startswith(".git" + os.sep)}
    assert not twice, f"read more than once: {twice}"
    assert expected <= set(opens), f"not read at all: {expected - set(opens)} (saw {sorted(opens)})"
    gits = [run for run in runs if Path(run[0]).name == "git"]
    assert len(gits) <= 1, f"git ran {len(gits)} times: {gits}"


@pytest.fixture
def checkout(tmp_path) -> Path:
    """The quickstart with a requirements file, in a git checkout (so that the git tag is asked for)."""
    root = tmp_path / "quickstart"
    shutil.copytree(REPO / "examples" / "quickstart", root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "requirements.txt").write_text("six\n")
    with open(root / "buildkit.yaml", "a") as handle:
        handle.write("requirements: requirements.txt\n")
    git = ["git", "-C", str(root), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "trainer"], check=True)
    return root


INPUTS = {"buildkit.yaml", "requirements.txt", "parsed:requirements.txt", os.path.join("trainer", "task.py"),
          os.path.join("trainer", "__init__.py")}


def test_autopackage_dry_run_reads_each_input_once(checkout, tmp_path):
    opens, runs, _ = traced(tmp_path, checkout, "autopackage", str(checkout), "--dry-run", "--json")
    # Inference and the config stage: one parse; inference's imports and the build context's listing: one walk.
    read_once(opens, runs, INPUTS | {"parsed:buildkit.yaml", "walked:."})


def test_a_pyproject_config_is_parsed_once(checkout, tmp_path):
    """The config in pyproject.toml's [tool.buildkit-py], beside the project's own table: the config stage, inference
    (the trainer's distribution) and the lock files' checks read one parse of it."""
    (checkout / "buildkit.yaml").unlink()
    (checkout / "pyproject.toml").write_text(
        '[project]\nname = "quick"\nversion = "1.0"\ndependencies = ["six"]\n\n'
        '[tool.buildkit-py]\nframework = "none"\npython = "3.11"\ngpu = false\nrequirements = "requirements.txt"\n\n'
        '[tool.buildkit-py.trainer]\nmodule = "trainer.task"\n')
    opens, runs, _ = traced(tmp_path, checkout, "autopackage", str(checkout), "--dry-run", "--json")
    read_once(opens, runs, {"pyproject.toml", "parsed:pyproject.toml", "requirements.txt", "parsed:requirements.txt",
                            "walked:."})


def test_submit_dry_run_reads_each_input_once(checkout, tmp_path):
    opens, runs, _ = traced(tmp_path, checkout, "submit", "--dir", str(checkout), "--dry-run", "--image",
                            "us-docker.pkg.dev/proj-123/r/i:1", "--project", "proj-123", "--region", "us-central1",
                            "--skip-image-check")
    read_once(opens, runs, {"buildkit.yaml", "parsed:buildkit.yaml", "requirements.txt", "parsed:requirements.txt"})


def test_build_push_reads_each_input_once_cold_and_after_an_edit(testenv, checkout, tmp_path):
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/read-once/{uuid.uuid4().hex[:8]}"
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]}
    # A CA bundle in the trainer directory: the recipe's index digest and the build's secret come from one read.
    shutil.copyfile("/etc/ssl/certs/ca-certificates.crt", checkout / "ca.pem")
    with open(checkout / "buildkit.yaml", "a") as handle:
        handle.write("ca_cert: ca.pem\n")
    build = ("build", "--dir", str(checkout), "--image", image, "--push", "--network", "host", "--progress", "plain")
    opens, runs, said = traced(tmp_path, checkout, *build, env=env)
    read_once(opens, runs, INPUTS | {"ca.pem", "parsed:buildkit.yaml", "walked:."})
    assert "pushed" in said, said[-2000:]

    with open(checkout / "trainer" / "task.py", "a") as handle:
        handle.write("# a one-line edit\n")
    opens, runs, said = traced(tmp_path, checkout, *build, env=env)
    read_once(opens, runs, INPUTS - {"parsed:requirements.txt"})  # the kept recipe: nothing of the plan is made again
    assert "appended the code layer" in said, said[-2000:]  # the fast path, which reads the code to append it


def test_a_file_the_command_writes_is_in_the_next_walk(tmp_path):
    """The walk is kept for the command, until the command writes under the directory (autopackage --write-config
    writes buildkit.yaml after inference walked the tree, before the build context lists it)."""
    from buildkit_py.fsutil import one_read, write_atomic
    from buildkit_py.sources.walk import included_files

    (tmp_path / "train.py").write_text("")
    with one_read():
        assert included_files(tmp_path, "") == ["train.py"]
        (tmp_path / "late.py").write_text("")  # not by the command: the kept walk stands
        assert included_files(tmp_path, "") == ["train.py"]
        write_atomic(tmp_path / "buildkit.yaml", "framework: none\n")
        assert included_files(tmp_path, "") == ["buildkit.yaml", "late.py", "train.py"]
        assert included_files(tmp_path, "late.py\n") == ["buildkit.yaml", "train.py"]  # another ignore list: walked


def test_a_requirements_chain_is_followed_once_until_the_command_writes_under_it(tmp_path, monkeypatch):
    """The plan, the resolution, the lock and the resolver's input each ask for the lines of requirements.txt and of
    what it includes: followed once a command."""
    from buildkit_py.fsutil import one_read, write_atomic
    from buildkit_py.sources import requirements

    (tmp_path / "requirements.txt").write_text("six\n-r more.txt\n")
    (tmp_path / "more.txt").write_text("attrs==23.1.0  # pinned\n")
    followed = []
    real = requirements._followed
    monkeypatch.setattr(requirements, "_followed", lambda *a: followed.append(a) or real(*a))
    with one_read():
        first = requirements.included_lines(tmp_path, "requirements.txt")
        assert first == ([("six", "requirements.txt:1", False), ("attrs==23.1.0", "more.txt:1", False)], ("more.txt",))
        first[0].clear()  # a caller's copy: the next one gets the lines whole
        assert requirements.included_lines(tmp_path, "requirements.txt")[0][1] == ("attrs==23.1.0", "more.txt:1", False)
        assert len(followed) == 1
        write_atomic(tmp_path / "more.txt", "attrs==24.2.0\n")
        assert requirements.included_lines(tmp_path, "requirements.txt")[0][1] == ("attrs==24.2.0", "more.txt:1", False)
        assert len(followed) == 2


def test_a_written_file_has_the_umask_mode_or_keeps_the_one_it_had(tmp_path):
    """-o FILE (ci, make, dockerfile, job) is a file to commit and share, not a private one (mkstemp's 0600)."""
    import os
    import stat

    from buildkit_py.fsutil import write_atomic

    old = os.umask(0o027)
    try:
        from buildkit_py import fsutil

        fsutil._new_file_mode.cache_clear()
        write_atomic(tmp_path / "new.yml", "a: 1\n")
        assert stat.S_IMODE((tmp_path / "new.yml").stat().st_mode) == 0o640
        kept = tmp_path / "kept.mk"
        kept.write_text("x\n")
        kept.chmod(0o755)
        write_atomic(kept, "y\n")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o755 and kept.read_text() == "y\n"
    finally:
        os.umask(old)
        fsutil._new_file_mode.cache_clear()
