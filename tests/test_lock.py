"""buildkit.lock read offline: locked Dockerfiles, stale locks, and hand-edited or foreign locks refused naming the line."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from buildkit_py import cli
from buildkit_py.catalog import resources
from buildkit_py.config import load_config
from buildkit_py.pipeline import lock, render, uv
from buildkit_py.pipeline.plan import make_plan
from buildkit_py.sources import pip_config as indexes
from conftest import hadolint

HERE = Path(__file__).resolve().parent
BASE = "127.0.0.1:5000/lock/base:1"
DIGEST = "sha256:" + "d" * 64
HASH = "sha256:" + "a" * 64
CONFIG = ("framework: none\npython: '3.11'\nbase_image: 127.0.0.1:5000/lock/base:1\nhypertune: false\npip: [bkpin]\n"
          "requirements: requirements.txt\ntrainer: {module: trainer.task}\n")


def main(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write_lock(root: Path, edit=None) -> Path:
    """The lock `buildkit-py lock` would write for the config in root, without a registry or an index."""
    config = load_config(root / "buildkit.yaml", root)
    plan = make_plan(config)
    image = lock.LockedImage(None, "3.11", "linux/amd64", plan.base_image, DIGEST, ("http://127.0.0.1:1/simple",),
                             lock.inputs(config, plan), (lock.LockedPackage("bkpin", "1.0", (HASH,)),))
    text = lock.Lock(root / lock.LOCK_NAME, (image,)).text()
    path = root / lock.LOCK_NAME
    path.write_text(edit(text) if edit else text)
    return path


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # nothing here may reach an engine
    monkeypatch.setenv("BUILDKIT_PY_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "task.py").write_text("")
    (tmp_path / "requirements.txt").write_text("six\n")
    (tmp_path / "buildkit.yaml").write_text(CONFIG)
    return tmp_path


def test_locked_dockerfile_pins_the_base_and_checks_hashes_golden_and_hadolint(root, capsys):
    write_lock(root)
    code, text, err = main(capsys, "dockerfile", "--dir", str(root))
    assert code == 0, err
    assert f"FROM {BASE}@{DIGEST}\n" in text
    assert "--require-hashes -r /tmp/buildkit-py/locked-requirements.txt" in text
    assert "COPY [\".buildkit-py/locked-requirements.txt\"" in text
    assert "/tmp/buildkit-py/requirements.txt" not in text  # the requirements are in the locked set
    golden = HERE / "golden" / "locked.Dockerfile"
    if os.environ.get("BUILDKIT_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text(), "rendering changed; BUILDKIT_UPDATE_GOLDEN=1 to accept"
    assert hadolint(text) == ""
    code, digest, _ = main(capsys, "print", "lock-digest", "--dir", str(root))
    assert code == 0 and digest.strip().startswith("sha256:") and digest.strip() in text


def test_the_lock_changes_the_content_tag(root, capsys):
    code, unlocked, err = main(capsys, "print", "content-digest", "--dir", str(root))
    assert code == 0, err
    write_lock(root)
    code, locked, err = main(capsys, "print", "content-digest", "--dir", str(root))
    assert code == 0 and locked != unlocked


def _with_include(root: Path) -> None:
    (root / "reqs").mkdir(exist_ok=True)
    (root / "reqs" / "base.txt").write_text("six\n")
    (root / "requirements.txt").write_text("-r reqs/base.txt\n")


@pytest.mark.parametrize("change, named", [
    (lambda r: (r / "buildkit.yaml").write_text(CONFIG + "env: {A: b}\n"), "config"),
    (lambda r: (r / "requirements.txt").write_text("six\nnumpy\n"), "requirements"),
    (lambda r: (r / "reqs" / "base.txt").write_text("six\nnumpy\n"), "requirements"),  # an include's change
])
def test_locked_build_refuses_a_stale_lock_naming_what_changed(root, capsys, change, named):
    _with_include(root)
    write_lock(root)
    change(root)
    code, _, err = main(capsys, "build", "--dir", str(root), "--locked")
    assert code == 2 and "--locked" in err and f"{named} (" in err and "changed" in err, err
    # Without --locked the build goes unlocked: the Dockerfile installs from the config as before.
    code, text, err = main(capsys, "dockerfile", "--dir", str(root))
    assert code == 0 and "--require-hashes" not in text and f"FROM {BASE}\n" in text


def test_locked_build_without_a_lock_exits_2(root, capsys):
    code, _, err = main(capsys, "build", "--dir", str(root), "--locked")
    assert code == 2 and "no buildkit.lock" in err


def test_a_locked_python_base_or_platform_the_plan_does_not_have_is_a_hand_edit(root, capsys):
    for edit, fragment in ((lambda t: t.replace("python: '3.11'", "python: '3.12'"), "python:"),
                           (lambda t: t.replace(f"image: {BASE}", "image: 127.0.0.1:5000/lock/other:1"), "image: 127"),
                           (lambda t: t.replace("platform: linux/amd64", "platform: linux/arm64"), "platform:")):
        path = write_lock(root, edit)
        code, _, err = main(capsys, "dockerfile", "--dir", str(root))
        assert code == 2 and f"buildkit.lock:{_line(path.read_text(), fragment)}:" in err and "by hand" in err, err


def test_a_flag_that_changes_the_plan_makes_the_lock_stale(root, capsys):
    write_lock(root)
    code, _, err = main(capsys, "build", "--dir", str(root), "--locked", "--python", "3.12")
    assert code == 2 and "python 3.12 is planned, the lock has 3.11" in err, err
    code, _, err = main(capsys, "build", "--dir", str(root), "--locked", "--base-image", "127.0.0.1:5000/lock/b:2")
    assert code == 2 and "base_image 127.0.0.1:5000/lock/b:2 is planned" in err, err


def _line(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


@pytest.mark.parametrize("edit, fragment, message", [
    (lambda t: t.replace(HASH, "sha256:" + "a" * 63 + "z"), "- sha256:aaa", "hash"),
    (lambda t: t.replace(DIGEST, "sha256:1234"), "digest: sha256", "digest"),
    (lambda t: t.replace("python: '3.11'", "python: 'three'"), "python:", "Python version"),
    (lambda t: t.replace("python: '3.11'", "python: 3.11"), "python:", "Python version"),
    (lambda t: t.replace("    platform:", "    colour: blue\n    platform:"), "colour:", "unknown key 'colour'"),
    (lambda t: t.replace("version: 1\n", "version: 7\n"), "version: 7", "schema"),
    (lambda t: t.replace("python: '3.11'", "python: '3.11\\n'"), "python:", "Python version"),
    (lambda t: t.replace("python: '3.11'", "python: '3.11\u2028'"), "python:", "Python version"),
    (lambda t: t.replace("name: bkpin", "name: " + "b" * 70000), "name: bbb", "package name"),
    (lambda t: t.replace("hashes:\n      - " + HASH, "hashes: " + HASH), "hashes:", "must be a list"),
])
def test_hand_edited_lock_exits_2_naming_the_line(root, capsys, edit, fragment, message):
    path = write_lock(root, edit)
    line = _line(path.read_text(), fragment)
    code, _, err = main(capsys, "dockerfile", "--dir", str(root))
    assert code == 2, err
    assert f"buildkit.lock:{line}:" in err and message in err, err
    assert len(err) < 1000  # a 70,000-character value is shown cut


def test_lock_that_is_not_utf8_exits_2(root, capsys):
    (root / lock.LOCK_NAME).write_bytes(b"version: 1\nimages: \xff\xfe\n")
    code, _, err = main(capsys, "dockerfile", "--dir", str(root))
    assert code == 2 and "buildkit.lock" in err


def test_lock_of_another_configs_variants_exits_2(root, capsys):
    write_lock(root)
    (root / "buildkit.yaml").write_text(CONFIG + "variants: [{name: py312, python: '3.12'}]\n")
    code, _, err = main(capsys, "dockerfile", "--dir", str(root))
    assert code == 2 and "another config's lock" in err and "py312" in err, err
    code, _, err = main(capsys, "dockerfile", "--dir", str(root), "--variant", "py312")
    assert code == 2 and "another config's lock" in err, err


def test_upgrade_package_of_the_wrong_type_or_unknown_exits_2(root, capsys):
    from buildkit_py import api
    from buildkit_py.errors import ConfigError

    write_lock(root)
    for names in ((7,), ("numpy",)):
        with pytest.raises(ConfigError) as caught:
            api.lock(api.Project(directory=root), api.LockOptions(upgrade_packages=names))
        assert caught.value.exit_code == 2 and "--upgrade-package" in str(caught.value)


def test_index_credentials_never_reach_the_lock():
    assert indexes.without_credentials("https://user:s3cret@idx.example/simple") == "https://idx.example/simple"
    assert uv._user_indexes("[global]\nindex-url = https://u:tok@a.example/simple\n"
                              "extra-index-url = https://b.example/x https://v:tok2@c.example/y\n") == [
        "https://a.example/simple", "https://b.example/x", "https://c.example/y"]


def test_job_labels_carry_the_lock_digest(root, capsys):
    job = "job: {image: us-central1-docker.pkg.dev/my-project/r/app:1, project: my-project, region: us-central1}\n"
    (root / "buildkit.yaml").write_text(CONFIG + job)
    write_lock(root)
    code, digest, err = main(capsys, "print", "lock-digest", "--dir", str(root))
    assert code == 0, err
    code, out, err = main(capsys, "job", "--dir", str(root), "--json")
    assert code == 0, err
    labels = json.loads(out)["labels"]
    assert labels["buildkit-lock-sha256"] == digest.strip().removeprefix("sha256:")[:63]


def test_sdist_dependencies_take_the_lock_pins(root):
    from buildkit_py.pipeline.packaging import dependencies

    (root / "buildkit.yaml").write_text(CONFIG.replace("pip: [bkpin]", "pip: ['bkpin[fast]>=0.5; python_version>\"3\"']"))
    write_lock(root)
    config = load_config(root / "buildkit.yaml", root)
    pins = lock.pins(config, make_plan(config))
    assert pins == {"bkpin": "1.0"}
    assert dependencies(config, pins)[0] == 'bkpin[fast]==1.0; python_version > "3"'
    assert dependencies(config)[0] == 'bkpin[fast]>=0.5; python_version>"3"'
    (root / "requirements.txt").write_text("six\nnumpy\n")  # a stale lock pins nothing
    assert lock.pins(config, make_plan(config)) == {}


def test_executor_build_takes_the_lock_along(root, capsys):
    code, _, err = main(capsys, "executor", "build", "--dir", str(root), "--locked")
    assert code == 2 and "no buildkit.lock" in err, err
    write_lock(root)
    code, _, err = main(capsys, "executor", "build", "--dir", str(root), "--locked")
    assert code == 5, err  # past the lock's checks, at the (absent) engine


def test_a_base_given_by_digest_takes_the_locked_one(root, capsys):
    index_digest = "sha256:" + "e" * 64
    (root / "buildkit.yaml").write_text(CONFIG.replace(BASE, f"{BASE}@{index_digest}"))
    write_lock(root)
    code, text, err = main(capsys, "dockerfile", "--dir", str(root))
    assert code == 0 and f"FROM {BASE}@{DIGEST}\n" in text, err


def test_each_variant_builds_from_its_own_section(root, capsys):
    from buildkit_py import api

    (root / "buildkit.yaml").write_text(CONFIG + "variants: [{name: py312, python: '3.12'}]\n")
    config = load_config(root / "buildkit.yaml", root)
    images = []
    for i, cfg in enumerate([config, *api.variant_configs(config)]):
        plan = make_plan(cfg)
        images.append(lock.LockedImage(cfg.variant, plan.python.version, "linux/amd64", plan.base_image,
                                       f"sha256:{str(i) * 64}", (), lock.inputs(cfg, plan), ()))
    (root / lock.LOCK_NAME).write_text(lock.Lock(root / lock.LOCK_NAME, tuple(images)).text())
    digests = set()
    for variant, digest in ((None, "0" * 64), ("py312", "1" * 64)):
        code, text, err = main(capsys, "dockerfile", "--dir", str(root), *(["--variant", variant] if variant else []))
        assert code == 0 and f"FROM {BASE}@sha256:{digest}\n" in text, err
        code, out, err = main(capsys, "print", "lock-digest", "--dir", str(root), *(["--variant", variant] if variant else []))
        digests.add(out.strip())
    assert len(digests) == 2


def test_only_the_dockerfile_templates_can_make_a_lock_stale(tmp_path, monkeypatch):
    """The lock records a digest of the shipped templates that render Dockerfiles: an edit to a CI or Make template
    keeps every lock current, an edit to a Dockerfile template does not."""
    root = tmp_path / "trainer"
    (root / "trainer").mkdir(parents=True)
    (root / "buildkit.yaml").write_text("framework: none\ntrainer: {module: trainer.task}\n")
    config = load_config(root / "buildkit.yaml")
    plan = make_plan(config)
    shipped = tmp_path / "templates"
    shutil.copytree(resources.resource_dir("templates"), shipped)
    monkeypatch.setattr(render, "resource_dir", lambda name: shipped if name == "templates" else resources.resource_dir(name))

    def digest() -> str:
        render.dockerfile_templates_digest.cache_clear()  # once per process otherwise
        return lock._template_digest(config, plan)

    before = digest()
    for folder in ("ci", "make"):
        for path in (shipped / folder).glob("*.j2"):
            path.write_text(path.read_text() + "# edited\n")
    assert digest() == before
    (shipped / "base.Dockerfile.j2").write_text((shipped / "base.Dockerfile.j2").read_text() + "# edited\n")
    assert digest() != before
    render.dockerfile_templates_digest.cache_clear()


def test_a_requirements_file_without_includes_keeps_the_digest_its_lock_recorded(root):
    config = load_config(root / "buildkit.yaml", root)
    recorded = dict(lock.inputs(config, make_plan(config)))["requirements"]
    assert recorded == "sha256:" + hashlib.sha256((root / "requirements.txt").read_bytes()).hexdigest()
