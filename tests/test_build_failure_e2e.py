"""A failed build step ends with its own output: whatever the progress mode and backend, the last lines the user
reads are the installer's message (here uv's), not the RUN command the build tool echoes (issue 18, cause 11)."""

from __future__ import annotations

import shutil

import pytest

from buildkit_py.builders.base import failed_step
from conftest import REPO, run_cli

MISSING = "file:///nonexistent/nonexistent_zzz-1.0-py3-none-any.whl"
UV_ERROR = f"error: Distribution not found at: {MISSING}"  # uv refuses it at once, offline


@pytest.fixture
def failing(tmp_path):
    root = tmp_path / "failing"
    shutil.copytree(REPO / "examples" / "quickstart", root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "requirements.txt").write_text(f"nonexistent-zzz @ {MISSING}\n")
    with (root / "buildkit.yaml").open("a") as config:
        config.write("requirements: requirements.txt\n")
    return root


def error_tail(stderr: str) -> list[str]:
    """The lines of buildkit-py's error message, from its first line to the end."""
    lines = stderr.rstrip("\n").split("\n")
    start = max(i for i, line in enumerate(lines) if line.startswith("buildkit-py: error:"))
    return lines[start:]


@pytest.mark.parametrize("builder, progress", [("buildkit", "plain"), ("buildkit", "tty"), ("buildkit", "json"),
                                               ("buildah", "plain")])
def test_the_last_lines_are_the_failing_steps_own_output(testenv, failing, builder, progress):
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]}
    if builder == "buildah":
        env.pop("DOCKER_HOST")
    proc = run_cli("build", "--config", str(failing / "buildkit.yaml"), "--network", "host", "--builder", builder,
                   "--progress", progress, env=env)
    assert proc.returncode == 6, proc.stderr[-3000:]
    message = error_tail(proc.stderr)
    assert message[-1] == UV_ERROR, "\n".join(message)
    assert "its output ends:" in message[0] and "RUN" in message[0]
    # The command is named once, shortened; nothing after it echoes it again.
    assert len(message[0]) < 220 and not any("RUN" in line or "executor failed" in line for line in message[1:])


def test_failed_step_reads_the_legacy_builders_steps():
    # As the engine's classic builder streams them (pip's stderr coloured), from a real failed build.
    lines = ["Step 5/18 : COPY [\"requirements.txt\", \"/tmp/r.txt\"]", " ---> 1b2c", "Step 6/18 : RUN pip install uv",
             " ---> Running in 5838f2996f4d", "\x1b[91mERROR: No matching distribution found for uv==0.13.0", "\x1b[0m",
             "Removing intermediate container 5838f2996f4d"]
    step, output = failed_step(lines)
    assert step == "step 6/18 RUN pip install uv"
    assert output == ["\x1b[91mERROR: No matching distribution found for uv==0.13.0", "\x1b[0m"]


def test_failed_step_finds_no_step_in_other_output():
    assert failed_step(["unable to prepare context: path not found"]) == (None, [])


def test_a_buildkit_step_that_failed_silently_is_not_mistaken_for_another():
    lines = ["#5 [stage-0 2/3] RUN echo hi", "#5 0.101 hi", "#5 DONE 0.1s", "#6 [stage-0 3/3] RUN false",
             "#6 ERROR: executor failed running [/bin/sh -c false]: exit code: 1"]
    assert failed_step(lines) == ("[stage-0 3/3] RUN false", [])
