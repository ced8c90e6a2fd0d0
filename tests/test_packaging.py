"""`buildkit-py package`: a trainer -> a reproducible sdist, built with `build` in a temporary copy."""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from buildkit_py.pipeline.context import FIXED_MTIME
from buildkit_py.pipeline.packaging import SETUPTOOLS_REQUIREMENT
from conftest import REPO, run_cli

QUICKSTART = REPO / "examples" / "quickstart"
SERVICE_ACCOUNT_KEY = ('{"type": "service_account", "project_id": "p", "private_key_id": "k", '
                       '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIB\\n-----END PRIVATE KEY-----\\n"}')


def copy_quickstart(dest: Path) -> Path:
    shutil.copytree(QUICKSTART, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def snapshot(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every path under root with its mode, mtime and content: what 'never modified' compares."""
    out = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        out[str(path.relative_to(root))] = (info.st_mode, info.st_mtime_ns, path.read_bytes() if path.is_file() else b"")
    return out


def package(root: Path, *args: str, out: Path | None = None, env: dict | None = None):
    proc = run_cli("package", str(root), "--out", str(out or root.parent / "dist"), "--json", *args, env=env)
    return proc, (json.loads(proc.stdout) if proc.returncode == 0 else None)


def members(path: Path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(path) as tar:
        return {m.name: m for m in tar.getmembers()}


def read_member(path: Path, name: str) -> str:
    with tarfile.open(path) as tar:
        return tar.extractfile(name).read().decode()


@pytest.fixture
def quickstart(tmp_path) -> Path:
    return copy_quickstart(tmp_path / "quickstart")


def test_quickstart_sdist_has_the_module_its_metadata_and_leaves_the_tree_untouched(quickstart):
    before = snapshot(quickstart)
    proc, result = package(quickstart)
    assert proc.returncode == 0, proc.stderr
    assert snapshot(quickstart) == before, "the trainer directory was modified"
    sdist = Path(result["path"])
    assert sdist.name == "quickstart-0.0.0.tar.gz" and result["module"] == "trainer.task" and result["generated"]
    names = members(sdist)
    assert "quickstart-0.0.0/trainer/task.py" in names and "quickstart-0.0.0/trainer/__init__.py" in names
    assert not any("buildkit.yaml" in n for n in names), "only the code is packaged"
    info = read_member(sdist, "quickstart-0.0.0/PKG-INFO")
    assert "Name: quickstart\n" in info and "Version: 0.0.0\n" in info
    assert "Requires-Dist: cloudml-hypertune==0.1.0.dev6" in info, "hypertune is on by default"
    pyproject = read_member(sdist, "quickstart-0.0.0/pyproject.toml")
    assert f'requires = ["{SETUPTOOLS_REQUIREMENT}"]' in pyproject


def test_byte_identical_from_copies_with_other_mtimes_modes_and_at_another_time(tmp_path):
    first = copy_quickstart(tmp_path / "a" / "quickstart")
    second = copy_quickstart(tmp_path / "b" / "quickstart")
    rng = random.Random(5)
    for path in second.rglob("*"):
        stamp = rng.randint(1_000_000_000, 1_900_000_000)
        os.utime(path, (stamp, stamp))
        if path.is_file():
            path.chmod(0o600)
    proc, one = package(first, out=tmp_path / "out1")
    assert proc.returncode == 0, proc.stderr
    time.sleep(1.1)  # a tarball or gzip header that held the build time would now differ
    proc, two = package(second, out=tmp_path / "out2")
    assert proc.returncode == 0, proc.stderr
    data = Path(one["path"]).read_bytes()
    assert data == Path(two["path"]).read_bytes() and one["sha256"] == two["sha256"]

    assert data[:2] == b"\x1f\x8b" and data[3] & 0x08 == 0, "the gzip header holds no file name"
    assert data[4:8] == b"\0\0\0\0", "the gzip header holds no time"
    infos = list(tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))).getmembers())
    assert [m.name for m in infos] == sorted(m.name for m in infos)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in infos} == {(FIXED_MTIME, 0, 0, "", "")}
    assert {m.mode for m in infos if m.isfile()} == {0o644} and {m.mode for m in infos if m.isdir()} == {0o755}


def test_source_date_epoch_sets_the_times(quickstart, tmp_path):
    proc, result = package(quickstart, env={"SOURCE_DATE_EPOCH": "1700000000"})
    assert proc.returncode == 0, proc.stderr
    assert {m.mtime for m in members(Path(result["path"])).values()} == {1700000000}
    proc, _ = package(quickstart, env={"SOURCE_DATE_EPOCH": "yesterday"})
    assert proc.returncode == 2 and "$SOURCE_DATE_EPOCH" in proc.stderr


def test_a_script_is_packaged_as_the_vertex_sdk_does_and_python_m_finds_it(tmp_path):
    root = tmp_path / "scripted"
    root.mkdir()
    (root / "train.py").write_text("import sys\nfrom helpers import twice\nprint('script ran', twice(sys.argv[1]))\n")
    (root / "helpers.py").write_text("def twice(x):\n    return x * 2\n")
    (root / "buildkit.yaml").write_text("hypertune: false\npackage: {name: Scripted_Trainer, version: '1.0'}\n")
    proc, result = package(root, "--script", "train.py")
    assert proc.returncode == 0, proc.stderr
    assert result["module"] == "aiplatform_custom_trainer_script.task"
    assert result["name"] == "scripted-trainer" and result["version"] == "1.0"
    assert Path(result["path"]).name == "scripted_trainer-1.0.tar.gz"  # PEP 625
    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), result["path"]],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-2000:]
    ran = subprocess.run([sys.executable, "-m", result["module"], "ab"], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(site), "PATH": os.environ["PATH"]})
    assert ran.stdout.strip() == "script ran abab", ran.stderr


def test_dependencies_come_from_pip_and_the_requirements_file_and_data_files_ship(quickstart):
    (quickstart / "requirements.txt").write_text("# training deps\nnumpy>=1.26 \\\n  ; python_version >= '3.9'\n"
                                                 "requests==2.32.3  # pinned\n")
    (quickstart / "trainer" / "defaults.yaml").write_text("epochs: 3\n")
    (quickstart / "buildkit.yaml").write_text((quickstart / "buildkit.yaml").read_text()
                                              + "pip: ['pandas<3']\nrequirements: requirements.txt\nhypertune: false\n")
    proc, result = package(quickstart)
    assert proc.returncode == 0, proc.stderr
    info = read_member(Path(result["path"]), "quickstart-0.0.0/PKG-INFO")
    requires = [line.split(": ", 1)[1] for line in info.split("\n") if line.startswith("Requires-Dist: ")]
    assert requires == ["pandas<3", 'numpy>=1.26; python_version >= "3.9"', "requests==2.32.3"]
    assert "quickstart-0.0.0/trainer/defaults.yaml" in members(Path(result["path"]))


def test_a_trainer_with_its_own_setup_py_is_built_as_it_is_in_a_copy(tmp_path):
    root = tmp_path / "own"
    (root / "src" / "mytrainer").mkdir(parents=True)
    (root / "src" / "mytrainer" / "__init__.py").write_text("")
    (root / "src" / "mytrainer" / "main.py").write_text("print('own')\n")
    (root / "setup.py").write_text("from setuptools import setup, find_packages\n"
                                   "setup(name='My.Own-Trainer', version='2.1', package_dir={'': 'src'},\n"
                                   "      packages=find_packages('src'))\n")
    before = snapshot(root)
    proc, result = package(root, "--module", "mytrainer.main")
    assert proc.returncode == 0, proc.stderr
    assert snapshot(root) == before, "egg-info or build/ was written into the trainer's tree"
    assert not result["generated"] and result["version"] == "2.1" and result["name"] == "My.Own-Trainer"
    assert Path(result["path"]).name == "my_own_trainer-2.1.tar.gz"
    assert "my_own_trainer-2.1/src/mytrainer/main.py" in members(Path(result["path"]))
    proc, _ = package(root, "--module", "mytrainer.main", "--version", "3.0")
    assert proc.returncode == 2 and "generated packages only" in proc.stderr


@pytest.mark.parametrize("args, fragment, field", [
    (["--module", "trainer.missing"], "'trainer.missing' is not in quickstart-0.0.0.tar.gz", "trainer"),
    (["--module", "trainer.task\n"], "not allowed", "--module"),
    (["--name", "bad name!"], "not a valid distribution name", "--name"),
    (["--name", "caf\u00e9"], "not a valid distribution name", "--name"),
    (["--version", "1.0 beta"], "not a PEP 440 version", "--version"),
    (["--module", "trainer.task", "--script", "x.py"], "not both", "--script"),
    (["--script", "../outside.py"], "not allowed", "--script"),
])
def test_bad_flags_exit_2_and_write_nothing(quickstart, args, fragment, field):
    before = snapshot(quickstart)
    proc, _ = package(quickstart, *args)
    assert proc.returncode == 2, proc.stderr
    assert fragment in proc.stderr and field in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert snapshot(quickstart) == before and not (quickstart.parent / "dist").exists()


@pytest.mark.parametrize("requirement, fragment", [
    ("./libs/helper", "is a local path"),
    ("../wheels/helper-1.0-py3-none-any.whl", "is a local path"),
    ("helper @ file:///opt/helper", "local path"),
    ("-e .", "editable installs"),
    ("--index-url https://mirror.example/simple", "an index URL"),
    ("-i https://mirror.example/simple", "an index URL"),
    ("helper @ https://user:s3cr3t@pkgs.example/helper-1.0.tar.gz", "credentials in its URL"),
])
def test_requirements_a_package_cannot_carry_are_clear_errors(quickstart, requirement, fragment):
    (quickstart / "requirements.txt").write_text(f"numpy\n{requirement}\n")
    (quickstart / "buildkit.yaml").write_text((quickstart / "buildkit.yaml").read_text() + "requirements: requirements.txt\n")
    before = snapshot(quickstart)
    proc, _ = package(quickstart)
    assert proc.returncode == 2, proc.stderr
    assert fragment in proc.stderr and "requirements.txt:2" in proc.stderr, proc.stderr
    assert "s3cr3t" not in proc.stderr, "a credential is never echoed"
    assert snapshot(quickstart) == before


@pytest.mark.parametrize("yaml_text, fragment", [
    ('package: {name: "x\\u2028y"}\n', "line breaks"),
    ("package: {name: -leading}\n", "not a valid distribution name"),
    ("package: {version: 'v 1'}\n", "not a PEP 440 version"),
    ("package: {nmae: x}\n", "did you mean 'name'"),
    ("package: x\n", "must be a mapping"),
])
def test_package_keys_are_validated_with_their_position(quickstart, yaml_text, fragment):
    (quickstart / "buildkit.yaml").write_text((quickstart / "buildkit.yaml").read_text() + yaml_text)
    proc, _ = package(quickstart)
    assert proc.returncode == 2 and fragment in proc.stderr and "buildkit.yaml:" in proc.stderr, proc.stderr


def test_a_directory_name_that_is_no_distribution_name_asks_for_one(tmp_path):
    root = copy_quickstart(tmp_path / "my trainer")
    proc, _ = package(root)
    assert proc.returncode == 2 and "set package.name" in proc.stderr and "--name" in proc.stderr
    proc, result = package(root, "--name", "my-trainer")
    assert proc.returncode == 0 and result["name"] == "my-trainer"


def test_secrets_beside_the_code_are_refused(quickstart):
    (quickstart / "trainer" / "sa.json").write_text(SERVICE_ACCOUNT_KEY)
    proc, _ = package(quickstart)
    assert proc.returncode == 2 and "trainer/sa.json" in proc.stderr and "packaged and uploaded" in proc.stderr
    (quickstart / ".dockerignore").write_text("trainer/sa.json\n")
    proc, result = package(quickstart)
    assert proc.returncode == 0 and "quickstart-0.0.0/trainer/sa.json" not in members(Path(result["path"]))
