"""`variants:`: named overrides validated like the top level, each resolved; one image per variant."""

from __future__ import annotations

import json
import shutil
import uuid

import pytest
from test_build_e2e import docker

from buildkit_py.config import load_config
from buildkit_py.errors import ConfigError
from conftest import REPO, run_cli

BASE = "framework: none\npython: '3.11'\ngpu: false\ntrainer: {module: trainer.task}\n"


def cli_error(root, *args) -> str:
    proc = run_cli(*args, "--config", str(root / "buildkit.yaml"))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stderr


@pytest.mark.parametrize("variants, field, words", [
    ("[{name: a, cudaa: '12.6'}]", "variants[0].cudaa", ["did you mean 'cuda'", "allowed keys"]),
    ("[{name: 'A b'}]", "variants[0].name", ["'A b'", "lowercase ASCII"]),
    ('[{name: "a\\u2028b"}]', "variants[0].name", ["line breaks"]),
    ("[{name: a}, {name: a}]", "variants[1].name", ["given twice"]),
    ("[{cuda: '12.6'}]", "variants[0]", ["must be a mapping with a name"]),
    ("cu126", "variants", ["must be a list"]),
    ("[{name: a, python: 'x'}]", "variants[0].python", ["'x'", "Python version"]),
    ("[{name: a, variants: []}]", "variants[0].variants", ["unknown key", "allowed keys"]),
])
def test_bad_variants_are_refused_naming_the_field(project, variants, field, words):
    root = project({"buildkit.yaml": BASE + f"variants: {variants}\n", "trainer/task.py": ""})
    message = cli_error(root, "resolve")
    assert f"{field}:" in message, message
    for word in words:
        assert word in message, message


def test_a_variant_that_does_not_resolve_is_exit_2_naming_it(project):
    root = project({"buildkit.yaml": "framework: torch==2.5.1\ntrainer: {module: trainer.task}\n"
                                     "variants: [{name: stable}, {name: nightly-cu118, framework: torch==nightly, cuda: '11.8'}]\n",
                    "trainer/task.py": ""})
    message = cli_error(root, "resolve")
    assert "variants[1]" in message and "'nightly-cu118' does not resolve" in message and "11.8" in message, message


def test_each_variant_resolves_with_its_overrides(project):
    root = project({"buildkit.yaml": BASE + "variants: [{name: py310, python: '3.10'}, {name: py312, python: '3.12'}]\n",
                    "trainer/task.py": ""})
    config = load_config(root / "buildkit.yaml", root)
    assert [v.name for v in config.variants] == ["py310", "py312"]
    for name, python in (("py310", "3.10"), ("py312", "3.12")):
        proc = run_cli("resolve", "--json", "--variant", name, "--config", str(root / "buildkit.yaml"))
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["python"]["version"] == python
    message = cli_error(root, "resolve", "--variant", "py399")
    assert "--variant" in message and "'py399'" in message and "py310, py312" in message


def test_all_variants_without_variants_is_exit_2(project):
    root = project({"buildkit.yaml": BASE, "trainer/task.py": ""})
    assert "--all-variants" in cli_error(root, "build", "--all-variants")


def test_variants_are_fuzzed_as_a_config_key():
    with pytest.raises(ConfigError) as info:
        load_config(None, REPO / "examples" / "quickstart", {"variants": "x\u2028FROM alpine"})
    assert info.value.exit_code == 2 and "variants" in str(info.value)


def test_build_all_variants_gives_one_image_each_with_named_tags_labels_and_shared_layers(testenv, tmp_path):
    root = tmp_path / "variants"
    shutil.copytree(REPO / "examples" / "quickstart", root, ignore=shutil.ignore_patterns("__pycache__"))
    marker = uuid.uuid4().hex[:8]  # unique content: the engine keeps images between runs
    (root / "buildkit.yaml").write_text((root / "buildkit.yaml").read_text() + f"image: buildkit-py/variants-{marker}\n"
                                        "variants:\n  - {name: small, trainer: {module: trainer.task, args: ['--epochs', '10']}}\n"
                                        "  - {name: large, trainer: {module: trainer.task, args: ['--epochs', '400']}}\n")
    proc = run_cli("build", "--all-variants", "--config", str(root / "buildkit.yaml"), "--network", "host", "--progress",
                   "plain", "--json", env={**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]})
    assert proc.returncode == 0, proc.stderr[-4000:]
    builds = json.loads(proc.stdout)["variants"]
    assert list(builds) == ["small", "large"]
    ids = {builds[n]["image_id"] for n in builds}
    assert len(ids) == 2
    layers = {}
    for name, result in builds.items():
        assert result["tags"] and all(t.endswith(f"-{name}") for t in result["tags"]), result["tags"]
        inspect = json.loads(docker(testenv, "image", "inspect", result["tags"][0]).stdout)[0]
        assert inspect["Config"]["Labels"]["dev.buildkit-py.variant"] == name
        layers[name] = inspect["RootFS"]["Layers"]
    # Only the CMD differs: every layer is shared.
    assert layers["small"] == layers["large"]

