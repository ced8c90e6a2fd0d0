"""examples/notebook.ipynb, run headless with nbclient in a real Jupyter kernel, and the same calls from a plain
script: resolve, build and push to the loopback registry, submit to the Vertex AI stand-in (tests/vertex_loopback.py)
and wait, read the result (issue 23)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import REPO

NOTEBOOK = REPO / "examples" / "notebook.ipynb"


@pytest.fixture
def notebook_env(testenv, fake, tmp_path, monkeypatch):
    """What the notebook's first cell reads, and the engine, registry and API it reaches (the kernel inherits it)."""
    trainer = tmp_path / "quickstart"
    shutil.copytree(REPO / "examples" / "quickstart", trainer, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "BUILDKIT_EXAMPLE_TRAINER": str(trainer),
           "BUILDKIT_EXAMPLE_TARGET": "loopback", "GOOGLE_CLOUD_PROJECT": "fake-project", "HOME": str(tmp_path / "home"),
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    (tmp_path / "home").mkdir()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def test_the_notebook_is_kept_without_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


def test_the_notebook_builds_pushes_submits_and_waits(notebook_env, fake, tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [c for c in notebook.cells if c.cell_type == "code"]
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.output_type == "stream" and "Traceback" in o.text]
    build_cell = next(c for c in code if "bk.build(" in c.source)
    shown = [o.data["text/html"] for o in build_cell.outputs if o.output_type == "display_data"]
    # Live progress: one output area, updated in place (a display_data per cell, then updates to it).
    assert shown and "buildkit-py" in shown[0]
    result = next(o.data for o in build_cell.outputs if o.output_type == "execute_result")
    assert "BuildResult" in result["text/html"] and notebook_env["BUILDKIT_TEST_REGISTRY"] in result["text/html"]
    job_cell = next(c for c in code if "bk.submit(" in c.source)
    job_html = next(o.data["text/html"] for o in job_cell.outputs if o.output_type == "execute_result")
    assert "SubmitResult" in job_html and "JOB_STATE_SUCCEEDED" in job_html
    (name,) = fake.jobs
    printed = "".join(o.text for c in code for o in c.outputs if o.output_type == "stream" and o.name == "stdout")
    assert f"{name}\n" in printed and "console.cloud.google.com" in printed and "JOB_STATE_SUCCEEDED" in printed
    # The job runs the image the build pushed, pinned by the digest the registry gave.
    image = fake.bodies[0]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"]
    assert image.startswith(f"{notebook_env['BUILDKIT_TEST_REGISTRY']}/notebook-quickstart@sha256:")
    # A typed error, escaped in its message: the hostile value is shown as text.
    assert "cuda_flavor: '<b>bold</b>' is not allowed: one of auto, base" in printed


def test_the_same_calls_from_a_plain_script(notebook_env, fake, tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    script = tmp_path / "pipeline.py"
    script.write_text("\n\n".join(c.source for c in notebook.cells if c.cell_type == "code") + "\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (name,) = fake.jobs
    assert proc.stdout.splitlines()[:3] == [name, proc.stdout.splitlines()[1], "JOB_STATE_SUCCEEDED"]
    assert "console.cloud.google.com" in proc.stdout.splitlines()[1]
    # No terminal and no kernel: progress is plain lines on stderr, the job's states among them.
    states = [line.rsplit(": ", 1)[1] for line in proc.stderr.splitlines() if line.startswith(f"buildkit-py: {name}: ")]
    assert states == ["JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"]
    assert "Traceback" not in proc.stderr
    assert json.loads(json.dumps(fake.bodies[0]))["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"]
