"""Requirements that fail only at build or import time, known at inference: placeholder and missing distribution
names (base_images/requirement_names.yaml), invalid specifiers with one meaning, the system libraries wheels load
(base_images/system_libraries.yaml), and package metadata setuptools normalises."""

from __future__ import annotations

import json

import yaml

from buildkit_py.catalog.resources import resource_dir
from buildkit_py.inference.distribution import _setuptools_name, _setuptools_version
from conftest import run_cli


def dry(root, *args: str) -> dict:
    proc = run_cli("autopackage", str(root), "--dry-run", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def refused(root, *args: str) -> str:
    proc = run_cli("autopackage", str(root), "--dry-run", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr


def test_a_placeholder_name_in_the_requirements_is_replaced_and_said(project):
    root = project({"train.py": "import sklearn\nimport cv2\n",
                    "requirements.txt": "sklearn\nopencv==4.1\ntensorflow-gpu==2.5.0\npandas>=2\n"})
    out = dry(root)
    inferred = out["inferred"]
    by_line = {s["source"]: s["requirement"] for s in inferred["sources"]}
    assert by_line["requirements.txt:1"] == "scikit-learn"  # a placeholder's versions say nothing of the real one
    assert by_line["requirements.txt:2"] == "opencv-python"
    assert by_line["requirements.txt:3"] == "tensorflow-gpu==2.5.0"  # a real release up to 2.11: left alone
    notes = " | ".join(inferred["notes"])
    assert "requirements.txt:1: 'sklearn' cannot be installed" in notes and "scikit-learn is installed instead" in notes
    # The copied file cannot change: its lines join the config's pip entries, fixed.
    assert "requirements" not in inferred["config_keys"] and "scikit-learn" in inferred["pip"], inferred
    assert "sklearn" not in inferred["pip"] and "opencv-python" in inferred["pip"]
    # Past its last release the renamed project keeps the pin; the file named in the config is refused with the fix.
    (root / "requirements.txt").write_text("tensorflow-gpu==2.12.0\n")
    sources = {s["source"]: s["requirement"] for s in dry(root)["inferred"]["sources"]}
    assert sources["requirements.txt:1"] == "tensorflow==2.12.0", sources
    (root / "buildkit.yaml").write_text("requirements: requirements.txt\n")
    err = refused(root)
    assert "requirements.txt:1" in err and "tensorflow==2.12.0 is installed instead" in err and "fix the line" in err


def test_a_setup_py_placeholder_is_replaced_and_an_unrelated_name_is_only_said(project):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "import attr\n",
                    "setup.py": "from setuptools import setup\nsetup(name='t', version='1', install_requires=['pytorch', "
                                "'attr'])\n"})
    inferred = dry(root)["inferred"]
    assert "torch" in inferred["pip"] and "pytorch" not in inferred["pip"] and "attr" in inferred["pip"]
    assert any("attr installs a different project" in n and "attrs" in n for n in inferred["notes"]), inferred["notes"]


def test_an_invalid_specifier_with_one_meaning_names_the_line_to_write(project):
    for line, fixed in (("xgboost=0.72.1", "xgboost==0.72.1"), ("numpy =>1.20", "numpy>=1.20"),
                        ("pandas[parquet]=<2", "pandas[parquet]<=2")):
        root = project({"train.py": "", "requirements.txt": f"six\n{line}\n"})
        err = refused(root)
        assert "requirements.txt:2" in err and f"write {fixed!r}" in err, err
    root = project({"train.py": "", "requirements.txt": "tensorflow>=1.15.*,<2\n"})
    assert "write" not in refused(root)  # no single meaning: no guess


def test_system_libraries_of_installed_wheels_go_into_the_system_packages_layer(project):
    root = project({"train.py": "import lightgbm\nimport cv2\n", "requirements.txt": "lightgbm==4.6.0\n"})
    out = dry(root)
    assert out["plan"]["system_packages"][:3] == ["libgomp1", "libgl1", "libglib2.0-0"], out["plan"]["system_packages"]
    assert any("lightgbm loads a system library" in n for n in out["plan"]["notes"])
    # A package the config names already is not added twice; a GPU image on Ubuntu 24.04 gets that release's name.
    (root / "buildkit.yaml").write_text("system_packages: [libgomp1=12.2.0-14]\n")
    assert dry(root)["plan"]["system_packages"].count("libgomp1") == 0


def test_every_table_row_names_a_library_of_the_table_and_has_a_source():
    libraries = yaml.safe_load((resource_dir("base_images") / "system_libraries.yaml").read_text())
    assert libraries["distributions"]["lightgbm"] == ["libgomp.so.1"]
    for name, needed in libraries["distributions"].items():
        assert needed and all(lib in libraries["libraries"] for lib in needed), name
    names = yaml.safe_load((resource_dir("base_images") / "requirement_names.yaml").read_text())["names"]
    for name, row in names.items():
        assert row["fails"] in ("install", "missing", "unrelated") and row["source"].startswith("https://"), name


def test_metadata_setuptools_normalises_never_refuses_the_build(project):
    assert _setuptools_version("UNVERSIONED") == "0.dev0+sanitized.unversioned"
    assert _setuptools_version("1.0-beta") == "1.0b0" and _setuptools_version("v2.0.x") == "2.0.dev0+sanitized.x"
    assert _setuptools_name("my trainer") == "my-trainer" and _setuptools_name("-") is None
    root = project({"trainer/__init__.py": "", "trainer/task.py": "",
                    "setup.py": "from setuptools import setup\nsetup(name='my trainer', version='UNVERSIONED', "
                                "install_requires=[])\n"})
    inferred = dry(root)["inferred"]
    assert inferred["config_keys"]["trainer_package"]["version"] == "0.dev0+sanitized.unversioned"
    assert inferred["config_keys"]["trainer_package"]["name"] == "my-trainer"
    assert any("setuptools installs its name 'my trainer' as 'my-trainer' and version 'UNVERSIONED' as "
               "'0.dev0+sanitized.unversioned'" in n for n in inferred["notes"]), inferred["notes"]
