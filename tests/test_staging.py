"""Staging packages: a local directory, file://, and gs:// through the real google-cloud-storage client
against a Cloud Storage server on loopback (tests/gcs_loopback.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from gcs_loopback import GcsServer

from buildkit_py import api
from buildkit_py.errors import StageError
from buildkit_py.google import storage as staging
from conftest import REPO, run_cli

QUICKSTART = REPO / "examples" / "quickstart"


@pytest.fixture
def trainer(tmp_path) -> Path:
    root = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def package(root: Path, *args: str, env: dict | None = None):
    proc = run_cli("package", str(root), "--out", str(root.parent / "dist"), "--json", *args, env=env)
    return proc, (json.loads(proc.stdout) if proc.returncode == 0 else None)


def test_local_directory_and_file_uri_name_the_digest_and_skip_an_unchanged_package(trainer, tmp_path):
    stage_dir = tmp_path / "stage"
    proc, first = package(trainer, "--stage", str(stage_dir))
    assert proc.returncode == 0, proc.stderr
    expected = stage_dir / first["sha256"][:16] / "quickstart-0.0.0.tar.gz"
    assert first["uri"] == expected.as_uri() and first["uploaded"] is True
    assert hashlib.sha256(expected.read_bytes()).hexdigest() == first["sha256"]
    mtime = expected.stat().st_mtime_ns

    proc, again = package(trainer, "--stage", stage_dir.as_uri())  # the same place, as file://
    assert proc.returncode == 0, proc.stderr
    assert again["uri"] == first["uri"] and again["uploaded"] is False
    assert expected.stat().st_mtime_ns == mtime, "an unchanged package is not written again"

    (trainer / "trainer" / "task.py").write_text((trainer / "trainer" / "task.py").read_text() + "# edited\n")
    proc, edited = package(trainer, "--stage", str(stage_dir))
    assert edited["sha256"] != first["sha256"] and edited["uploaded"] is True
    assert sorted(p.name for p in stage_dir.iterdir()) == sorted([first["sha256"][:16], edited["sha256"][:16]])
    assert not list(stage_dir.rglob(".*")), "no temp file is left behind"


def test_a_foreign_file_under_the_digest_name_is_never_overwritten(trainer, tmp_path):
    proc, first = package(trainer, "--stage", str(tmp_path / "stage"))
    target = Path(first["uri"].removeprefix("file://"))
    target.write_bytes(b"something else")
    proc, _ = package(trainer, "--stage", str(tmp_path / "stage"))
    assert proc.returncode == 7 and "exists with other content" in proc.stderr
    assert target.read_bytes() == b"something else"


@pytest.mark.parametrize("stage, fragment", [
    ("gs://Bad_Bucket/x", "not a Cloud Storage bucket name"),
    ("gs://ok-bucket/a//b", "prefix"),
    ("gs://ok-bucket/a/../b", "prefix"),
    ("gs://ok-bucket/a b", "prefix"),
    ("s3://bucket/x", "not a stage"),
    ("file://relative/dir", "absolute path"),
    ("gs://ok-bucket/x\n", "control characters"),
])
def test_bad_stage_is_exit_2_before_anything_is_built(trainer, stage, fragment):
    proc, _ = package(trainer, "--stage", stage)
    assert proc.returncode == 2 and "--stage" in proc.stderr and fragment in proc.stderr, proc.stderr
    assert not (trainer.parent / "dist").exists()


def test_gcs_upload_through_the_storage_client_names_the_digest_and_skips_an_unchanged_package(trainer):
    with GcsServer({"bkpy-bucket"}) as gcs:
        env = {"STORAGE_EMULATOR_HOST": gcs.url}
        proc, first = package(trainer, "--stage", "gs://bkpy-bucket/trainers/quickstart/", env=env)
        assert proc.returncode == 0, proc.stderr
        name = f"trainers/quickstart/{first['sha256'][:16]}/quickstart-0.0.0.tar.gz"
        assert first["uri"] == f"gs://bkpy-bucket/{name}" and first["uploaded"] is True
        local = Path(first["path"]) if Path(first["path"]).is_absolute() else REPO / first["path"]
        assert gcs.objects[("bkpy-bucket", name)] == local.read_bytes()
        assert gcs.uploads == 1

        proc, again = package(trainer, "--stage", "gs://bkpy-bucket/trainers/quickstart", env=env)
        assert proc.returncode == 0, proc.stderr
        assert again["uploaded"] is False and again["uri"] == first["uri"]
        assert gcs.uploads == 1, "an unchanged package is not uploaded again"

        proc = run_cli("package", str(trainer), "--out", str(trainer.parent / "dist"), "--stage",
                       "gs://bkpy-bucket/trainers/quickstart", env=env)
        assert proc.returncode == 0 and f"uri     gs://bkpy-bucket/{name} (already there)" in proc.stdout


@pytest.mark.parametrize("bucket, status, fragment", [
    ("no-such-bucket", None, "does not exist"),
    ("bkpy-bucket", 403, "access denied"),
])
def test_gcs_refusals_are_clear_and_leave_nothing(trainer, bucket, status, fragment):
    with GcsServer({"bkpy-bucket"}, upload_status=status) as gcs:
        proc, _ = package(trainer, "--stage", f"gs://{bucket}/p", env={"STORAGE_EMULATOR_HOST": gcs.url})
        assert proc.returncode == 7, proc.stderr
        assert fragment in proc.stderr and f"gs://{bucket}/p/" in proc.stderr and "Traceback" not in proc.stderr
        assert gcs.objects == {}


def test_gcs_failing_service_and_unreachable_endpoint_leave_nothing(trainer, tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "RETRY_SECONDS", 1.0)  # 5xx and dropped connections are retried: keep it short
    monkeypatch.setenv("HOME", str(REPO / ".testenv"))  # the build environments the other tests made
    options = api.PackageOptions(out=tmp_path / "dist", stage="gs://bkpy-bucket/p")
    with GcsServer({"bkpy-bucket"}, upload_status=503) as gcs:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.url)
        with pytest.raises(StageError, match="nothing was stored") as info:
            api.package(api.Project(directory=trainer), options)
        assert gcs.uploads >= 1 and gcs.objects == {}
        assert info.value.exit_code == 7
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.url)  # now closed: nothing listens there
    with pytest.raises(StageError, match="gs://bkpy-bucket/p/"):
        api.package(api.Project(directory=trainer), options)
