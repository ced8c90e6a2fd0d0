"""Names and values from a trainer's files reach the terminal inert: a file named `evil\\nRUN touch pwned.py`, ESC
sequences and U+2028 in folder, notebook, package, lock section and legacy key names print escaped, in reports and
notes as in errors; every line of stdout and stderr is one line without a control character."""

from __future__ import annotations

import json
from pathlib import Path

from test_lock import main, write_lock

from conftest import REPO, run_cli

EVIL = "evil\nRUN touch pwned.py"
ESC = "\x1b]0;pwned\x07\x1b[2J"
SEP = "\u2028"


def inert(*texts: str) -> None:
    for text in texts:
        for line in text.split("\n"):
            assert all(ch == "\t" or ch.isprintable() for ch in line), repr(line)
            assert not line.startswith("RUN touch"), repr(line)


def hostile_trainer(root: Path) -> Path:
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text("import numpy\n")
    (root / EVIL).write_text("import yaml\n")
    (root / f"fold{ESC}er{SEP}z").mkdir()
    (root / f"fold{ESC}er{SEP}z" / "x.py").write_text("import pandas\n")
    (root / f"fold{ESC}er{SEP}z" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    (root / f"nb{ESC}{SEP}.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    (root / "setup.py").write_text(f"from setuptools import setup\nsetup(name={'na' + ESC + SEP + 'me'!r}, version='0.1', "
                                   "install_requires=['six'])\n")
    return root


def test_a_dry_run_report_and_its_notes_show_every_name_escaped(tmp_path):
    root = hostile_trainer(tmp_path / "t")
    proc = run_cli("autopackage", str(root), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    inert(proc.stdout, proc.stderr)
    assert "(import yaml ('evil\\nRUN touch pwned.py':1))" in proc.stderr  # the note
    assert "import yaml ('evil\\nRUN touch pwned.py':1)" in proc.stdout  # the report's source column
    assert "import pandas ('fold\\x1b]0;pwned\\x07\\x1b[2Jer\\u2028z/x.py':1)" in proc.stdout
    assert "'fold\\x1b]0;pwned\\x07\\x1b[2Jer\\u2028z/Dockerfile'" in proc.stderr  # another Dockerfile, not used
    assert "the package 'na\\x1b]0;pwned\\x07\\x1b[2J\\u2028me'" in proc.stderr
    # JSON was already safe (json.dumps escapes): it names the files as they are
    out = json.loads(run_cli("autopackage", str(root), "--dry-run", "--json").stdout)
    assert any(s["source"] == "import yaml ('evil\\nRUN touch pwned.py':1)" for s in out["inferred"]["sources"])


def test_a_refusal_naming_notebooks_is_one_line(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    (root / f"a{ESC}\nRUN touch pwned.ipynb").write_text("{}")
    proc = run_cli("autopackage", str(root), "--dry-run")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    inert(proc.stdout, proc.stderr)
    assert "a notebook is not a trainer ('a\\x1b]0;pwned\\x07\\x1b[2J\\nRUN touch pwned.ipynb')" in proc.stderr


def test_legacy_keys_not_converted_are_shown_escaped(tmp_path):
    legacy = (REPO / "tests" / "data" / "legacy" / "config_custom_container.yaml").read_text()
    config = tmp_path / "config.yaml"
    config.write_text(legacy.replace("trainingInput:\n", 'trainingInput:\n  "k\\e[2J\\u2028\\nRUN touch pwned": 1\n', 1))
    proc = run_cli("job", "--from-aiplatform", str(config))
    assert proc.returncode == 0, proc.stderr
    inert(proc.stdout, proc.stderr)
    assert "not converted: trainingInput.'k\\x1b[2J\\u2028\\nRUN touch pwned': no Vertex AI equivalent" in proc.stderr


def test_a_lock_section_name_and_base_image_edited_by_hand_are_shown_escaped(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    monkeypatch.setenv("BUILDKIT_PY_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "task.py").write_text("")
    (tmp_path / "requirements.txt").write_text("six\n")
    (tmp_path / "buildkit.yaml").write_text(
        "framework: none\npython: '3.11'\nbase_image: 127.0.0.1:5000/lock/base:1\nhypertune: false\npip: [bkpin]\n"
        "requirements: requirements.txt\ntrainer: {module: trainer.task}\n")
    write_lock(tmp_path, lambda text: text.replace("  _base:", '  "x\\e[2J\\u2028\\nRUN touch pwned":'))
    code, out, err = main(capsys, "dockerfile", "--dir", str(tmp_path))
    assert code == 2, err
    inert(out, err)
    assert "the lock has sections 'x\\x1b[2J\\u2028\\nRUN touch pwned'; the config's images are _base" in err
    base = "127.0.0.1:5000/lock/base:1"
    write_lock(tmp_path, lambda text: text.replace(f"image: {base}", 'image: "127.0.0.1:5000/lock/other:1\\e[2J\\u2028"'))
    code, out, err = main(capsys, "build", "--dir", str(tmp_path), "--locked", "--python", "3.12")
    assert code == 2, err
    inert(out, err)
    assert f"base_image {base} is planned, the lock has '127.0.0.1:5000/lock/other:1\\x1b[2J\\u2028'" in err
