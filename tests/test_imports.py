"""The import closure of the trainer's entry point (buildkit_py/imports.py) and the image's checker
(buildkit_launcher.imports), without an engine; the build's check end to end is in test_import_check_e2e.py."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

from buildkit_py.errors import BuildError, ImportCheckError
from buildkit_py.launcher.constants import IMPORT_CHECKING_MARKER, IMPORT_FAILED_MARKER
from buildkit_py.sources.imports import closure, import_failure, import_names, statements
from conftest import REPO


def needed(files: dict[str, str], module: str | None = None, script: str | None = None) -> dict[str, tuple]:
    trees = {}
    for rel, text in files.items():
        try:
            trees[rel] = ast.parse(text)
        except SyntaxError:
            continue
    found = closure(module, script, files, trees.get, import_names())
    return {n.module: (n.names, n.where, n.distribution) for n in found.needed}


def test_the_closure_follows_the_trainers_own_modules_and_leaves_out_what_the_entry_never_reaches():
    files = {
        "trainer/__init__.py": "import yaml\n",
        "trainer/task.py": "import numpy as np\nfrom . import model\nfrom trainer.data import load\nimport os, json\n",
        "trainer/model.py": "from .layers import dense\ntry:\n    import ujson\nexcept ImportError:\n    ujson = None\n",
        "trainer/layers/__init__.py": "",
        "trainer/layers/dense.py": "from sklearn.linear_model import Ridge\n",
        "trainer/data.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pandas\n"
                           "from google.cloud import storage\ndef load():\n    import torch\n",
        "scripts/plot.py": "import matplotlib\n",  # a helper the job never runs
        "trainer/py2.py": "print 'old'\n",  # does not parse: inference says so, the check leaves it
    }
    found = needed(files, module="trainer.task")
    assert set(found) == {"yaml", "numpy", "sklearn.linear_model", "google.cloud", "torch"}, found
    assert found["numpy"] == ((), "trainer/task.py:1", "numpy")
    assert found["yaml"][1:] == ("trainer/__init__.py:1", "pyyaml")  # the package's __init__ runs first
    assert found["sklearn.linear_model"] == (("Ridge",), "trainer/layers/dense.py:1", "scikit-learn")
    assert found["google.cloud"] == (("storage",), "trainer/data.py:4", "google-cloud-storage")
    assert found["torch"][1] == "trainer/data.py:6"  # inside a function: it runs when the function does


def test_a_script_in_a_folder_imports_its_neighbours_and_an_unknown_import_has_no_provider():
    files = {"src/train.py": "import model\nimport nosuchthing_zz.sub\nimport cPickle\n", "src/model.py": "import six\n",
             "other.py": "import lightgbm\n"}
    found = needed(files, script="src/train.py")
    assert found == {"six": ((), "src/model.py:1", "six"), "nosuchthing_zz.sub": ((), "src/train.py:2", None)}
    assert needed(files, module="no.such.module") == {}  # no entry file: nothing to check


def test_the_check_file_holds_modules_and_names_only_so_a_moved_line_changes_nothing():
    a = closure("t", None, ["t.py"], {"t.py": ast.parse("import numpy\nfrom os import path\n")}.get, import_names())
    b = closure("t", None, ["t.py"], {"t.py": ast.parse("\n\n# moved\nimport numpy\n")}.get, import_names())
    assert a.file_bytes() == b.file_bytes() == b'[["numpy",[]]]\n'
    assert a.needed[0].where != b.needed[0].where


def test_statements_give_relative_levels_and_leave_optional_imports_out():
    tree = ast.parse("from ..a import b\ntry:\n    import x\nexcept (ValueError, ImportError):\n    pass\nimport y.z\n"
                     "if sys.version_info < (3, 8):\n    import importlib_metadata\nelse:\n    import importlib.metadata\n"
                     "if os.name == 'nt':\n    import winreg\nif args.gpu:\n    import apex\n")
    assert sorted((s.module, s.names, s.level) for s in statements(tree)) == [("a", ("b",), 2), ("apex", (), 0),
                                                                               ("y.z", (), 0)]


def test_the_image_checker_imports_each_module_and_names_every_failure(tmp_path):
    (tmp_path / "goodmod.py").write_text("VALUE = 1\n")
    (tmp_path / "badlib.py").write_text("import ctypes\nctypes.CDLL('libdoesnotexist_zz.so.1')\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub.py").write_text("X = 2\n")
    wanted = [["goodmod", ["VALUE"]], ["pkg", ["sub"]], ["badlib", []], ["absent_zz", []], ["pkg", ["nothere"]]]
    (tmp_path / "imports.json").write_text(json.dumps(wanted))
    env = {"PYTHONPATH": f"{REPO / 'buildkit_py'}:{tmp_path}", "HOME": str(tmp_path / "home")}
    # buildkit_py/launcher is buildkit_launcher in images: run it under that name, as the Dockerfile does.
    (tmp_path / "buildkit_launcher").symlink_to(REPO / "buildkit_py" / "launcher")
    proc = subprocess.run([sys.executable, "-B", "-m", "buildkit_launcher.imports", str(tmp_path / "imports.json")],
                          capture_output=True, text=True, env=env, cwd=tmp_path / "pkg")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = [line for line in proc.stdout.splitlines() if line.startswith(IMPORT_FAILED_MARKER)]
    assert len(failed) == 3, proc.stdout
    assert "badlib: OSError: libdoesnotexist_zz.so.1: cannot open shared object file" in failed[0]
    assert "absent_zz: ModuleNotFoundError: No module named 'absent_zz'" in failed[1]
    assert "pkg: ModuleNotFoundError: No module named 'pkg.nothere'" in failed[2]
    assert not (tmp_path / "home").exists()  # the scratch HOME is its own temp dir, removed
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps([["goodmod", []]]))
    done = subprocess.run([sys.executable, "-B", "-m", "buildkit_launcher.imports", str(ok)], capture_output=True,
                          text=True, env=env, cwd=tmp_path / "pkg")
    assert done.returncode == 0 and "1 module(s) import" in done.stdout, done.stdout + done.stderr


def test_the_checker_parses_with_the_oldest_grammar_the_images_run():
    for name in ("imports.py", "constants.py"):
        ast.parse((REPO / "buildkit_py" / "launcher" / name).read_text(), feature_version=(3, 7))


def test_a_failed_check_is_restated_with_where_and_the_fix_and_other_failures_pass_through():
    imports = closure("t", None, ["t.py"], {"t.py": ast.parse("import numpy\nimport lightgbm\nimport zz_unknown\n")}.get,
                      import_names())
    output = "\n".join([f"{IMPORT_CHECKING_MARKER} lightgbm",
                        f"{IMPORT_FAILED_MARKER} lightgbm: OSError: libgomp.so.1: cannot open shared object file: No such "
                        "file or directory",
                        f"{IMPORT_CHECKING_MARKER} numpy",
                        f"{IMPORT_FAILED_MARKER} numpy: ModuleNotFoundError: No module named 'numpy'",
                        f"{IMPORT_CHECKING_MARKER} zz_unknown",
                        f"{IMPORT_FAILED_MARKER} zz_unknown: ModuleNotFoundError: No module named 'zz_unknown'"])
    error = import_failure(BuildError(f"the build failed (docker exit code 1) at [7/9] RUN ...; its output ends:\n{output}"),
                           imports, None)
    assert isinstance(error, ImportCheckError) and error.exit_code == 6
    text = str(error)
    assert "lightgbm (t.py:2): OSError: libgomp.so.1" in text and "system_packages (libgomp1)" in text
    assert "numpy (t.py:1): ModuleNotFoundError" in text and "add numpy to requirements.txt" in text
    assert "zz_unknown (t.py:3)" in text and "no known distribution provides it" in text
    other = BuildError("the build failed (docker exit code 1) at [3/9] RUN uv pip install ...")
    assert import_failure(other, imports, None) is other
    crashed = import_failure(BuildError(f"failed:\n{IMPORT_CHECKING_MARKER} numpy\nSegmentation fault"), imports, None)
    assert "numpy (t.py:1): the image's Python died while importing it" in str(crashed)
