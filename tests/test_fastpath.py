"""The fast path's decisions without an engine: which step is the code layer, why a build is a full one, and a
code layer that is the same bytes for the same files."""

from __future__ import annotations

import gzip
import io
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from buildkit_py import api
from buildkit_py.pipeline import fastpath
from buildkit_py.pipeline.build import make_recipe, prepare
from buildkit_py.pipeline.context import FIXED_MTIME, list_context, staged
from buildkit_py.pipeline.recipe import secrets_digest
from conftest import run_cli


def _dockerfile(root: Path) -> str:
    return api.dockerfile(api.Project(directory=root)).dockerfile


def _trainer(tmp_path: Path, requirements: str | None = None) -> Path:
    (tmp_path / "trainer").mkdir(parents=True)
    (tmp_path / "trainer" / "task.py").write_text("print('hi')\n")
    config = "framework: none\npython: '3.11'\ngpu: false\ntrainer:\n  module: trainer.task\n"
    if requirements is not None:
        (tmp_path / "requirements.txt").write_text(requirements)
        config += "requirements: requirements.txt\n"
    (tmp_path / "buildkit.yaml").write_text(config)
    return tmp_path


def test_the_rendered_dockerfile_ends_in_the_code_step_and_names_what_earlier_steps_copy(tmp_path):
    step = fastpath.code_step(_dockerfile(_trainer(tmp_path, "six\n")))
    assert isinstance(step, fastpath.CodeStep)
    assert step.dest == "/app" and step.instruction == "COPY . /app"
    assert "requirements.txt" in step.earlier_sources and ".buildkit-py/launcher" in step.earlier_sources


@pytest.mark.parametrize("text, why", [
    ("FROM x\nCOPY . /app\nRUN make\n", "last layer is not a plain `COPY . DIR`"),
    ("FROM x\nCOPY --chown=1:1 . /app\n", "last layer is not a plain `COPY . DIR`"),
    ("FROM x\nCOPY . /app\nWORKDIR /app\n", "last layer is not a plain `COPY . DIR`"),
    ("FROM x\nCOPY . /src\nCOPY . /app\n", "copies the whole context"),
    ("FROM x\nADD https://example.invalid/a /a\nCOPY . /app\n", "a URL"),
    ("FROM x\nFROBNICATE a\nCOPY . /app\n", "instructions buildkit-py does not follow"),
    # a heredoc's body is the RUN's script, not instructions (as BuildKit reads it)
    ("FROM x\nRUN <<EOF\nCOPY . /app\nEOF\n", "last layer is not a plain `COPY . DIR`"),
])
def test_dockerfiles_the_fast_path_cannot_follow_say_why(text, why):
    found = fastpath.code_step(text)
    assert isinstance(found, str) and why in found


def test_a_heredoc_before_the_code_step_is_a_layer_like_any_run():
    step = fastpath.code_step("FROM x\nRUN <<EOF\necho\nEOF\nCOPY . /app\n")
    assert step == fastpath.CodeStep("/app", "COPY . /app", ())


def test_metadata_after_the_code_step_and_copies_from_stages_are_fine():
    text = "FROM b AS deps\nRUN make\nFROM x\nCOPY --from=deps /out /out\nCOPY [\"req.txt\", \"/r\"]\n" \
           "COPY . /srv/app\nENV A=1 \\\n    B=2\nLABEL a=b\nENTRYPOINT [\"python\"]\nCMD [\"x\"]\n"
    step = fastpath.code_step(text)
    assert step == fastpath.CodeStep("/srv/app", "COPY . /srv/app", ("req.txt",))


def _parts(root: Path, dockerfile: str, secrets=()) -> tuple:
    step = fastpath.code_step(dockerfile)
    config = api.load(api.Project(directory=root))
    made = replace(make_recipe(config, prepare(config)), dockerfile=dockerfile,
                   secrets_digest=secrets_digest([(name, path.read_bytes()) for name, path in secrets]))
    with staged(list_context(root, dockerfile, "")) as ctx:
        return fastpath.record_parts(made, step, ctx.snapshot)


def test_each_change_below_the_code_layer_is_named_and_a_code_edit_is_not(tmp_path):
    root = _trainer(tmp_path, "six\n")
    dockerfile = _dockerfile(root)
    before = _parts(root, dockerfile)
    record = fastpath.Record("r/x", None, before, "sha256:" + "0" * 64, "bk-0")
    assert fastpath.full_build_reason(None, before) == "no previous image"

    (root / "trainer" / "task.py").write_text("print('edited')\n")
    assert fastpath.full_build_reason(record, _parts(root, dockerfile)) is None

    (root / "requirements.txt").write_text("six==1.16.0\n")
    assert fastpath.full_build_reason(record, _parts(root, dockerfile)) == "requirements.txt changed"
    (root / "requirements.txt").write_text("six\n")

    assert fastpath.full_build_reason(record, _parts(root, dockerfile + "# another template\n")) \
        == "the template changed (the Dockerfile is not the same)"
    ca = tmp_path / "ca.pem"
    ca.write_text("a CA bundle\n")
    assert "index settings or the CA bundle" in fastpath.full_build_reason(record, _parts(root, dockerfile, [("ca", ca)]))


def _layer(directory: Path) -> tuple[bytes, str]:
    return fastpath.code_layer(directory, "/app")


def test_the_code_layer_is_the_same_bytes_for_the_same_files_laid_out_as_copy_does(tmp_path):
    root = _trainer(tmp_path / "t")
    (root / "trainer" / "run.sh").write_text("#!/bin/sh\n")
    (root / "trainer" / "run.sh").chmod(0o755)
    (root / "trainer" / "alias.py").symlink_to("task.py")
    (root / "trainer" / "ünï.txt").write_text("x")
    listing = list_context(root, "FROM x\n", "")
    with staged(listing) as one:
        first = _layer(one.directory)
    with staged(listing) as two:
        second = _layer(two.directory)
    assert first == second
    blob, diff_id = first
    assert blob[4:8] == b"\0\0\0\0"  # gzip without a timestamp
    raw = gzip.decompress(blob)
    assert diff_id == "sha256:" + __import__("hashlib").sha256(raw).hexdigest()
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names[:2] == ["app", "app/buildkit.yaml"] and names.index("app/trainer") < names.index("app/trainer/alias.py")
    assert all(m.uid == 0 and m.gid == 0 and m.uname == "root" for m in members)
    modes = {m.name: m.mode for m in members}
    assert modes["app/trainer/run.sh"] == 0o755 and modes["app/trainer/task.py"] == 0o644 and modes["app/trainer"] == 0o755
    assert {m.mtime for m in members} == {FIXED_MTIME}
    assert next(m for m in members if m.name == "app/trainer/alias.py").linkname == "task.py"


def test_build_says_why_it_is_a_full_build(tmp_path):
    root = _trainer(tmp_path / "t")
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "BUILDKIT_PY_CACHE_DIR": str(tmp_path / "cache"),
           "BUILDKIT_PY_DOCKER": "/usr/bin/docker"}
    args = ("build", "--dir", str(root), "--push", "--tag", "127.0.0.1:5000/fastpath-why/x", "--progress", "plain")
    proc = run_cli(*args, env=env)
    assert "no previous image: full build" in proc.stderr and proc.returncode != 0
    proc = run_cli(*args, "--no-fast-path", env=env)
    assert "--no-fast-path: full build" in proc.stderr
    assert "--no-cache: full build" in run_cli(*args, "--no-cache", env=env).stderr
    # Without --push there is no registry to append in, and nothing is said.
    assert "full build" not in run_cli(*args[:3], env=env).stderr


def test_records_do_not_hold_secrets_and_survive_a_broken_file(tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDKIT_PY_CACHE_DIR", str(tmp_path))
    secret = tmp_path / "pip.conf"
    secret.write_text("[global]\nindex-url = https://user:hunter2-secret@example.invalid/simple\n")
    root = _trainer(tmp_path / "t")
    parts = _parts(root, _dockerfile(root), [("buildkit-pip-conf", secret)])
    fastpath.save_record(fastpath.Record("r/x", None, parts, "sha256:" + "1" * 64, "bk-1"))
    stored = next((tmp_path / "build-records").iterdir())
    assert "hunter2" not in stored.read_text() and fastpath.load_record("r/x", None).parts == parts
    stored.write_text("{not json")
    assert fastpath.load_record("r/x", None) is None


def test_a_record_that_moves_on_forgets_the_copies_kept_of_its_older_image(tmp_path, monkeypatch):
    """An index, its platform manifests and their configs, kept by digest, go when the record names another image;
    the new image's copies, and a copy no record named, stay."""
    import hashlib
    import json

    monkeypatch.setenv("BUILDKIT_PY_CACHE_DIR", str(tmp_path))
    kept = tmp_path / "registry-json"
    kept.mkdir()

    def keep(document: dict) -> str:
        data = json.dumps(document).encode()
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        (kept / digest.replace(":", "-")).write_bytes(data)
        return digest

    def image(n: int) -> set[str]:
        config = keep({"rootfs": {"diff_ids": [f"sha256:{n:064d}"]}})
        return {keep({"mediaType": "application/vnd.oci.image.manifest.v1+json", "config": {"digest": config}}), config}

    older = [image(1), image(2)]
    index = keep({"mediaType": "application/vnd.oci.image.index.v1+json",
                  "manifests": [{"digest": next(d for d in o if d in _manifests(kept))} for o in older]})
    new, other = image(3), image(4)
    new_manifest = next(d for d in new if d in _manifests(kept))
    fastpath.save_record(fastpath.Record("r/x", None, (), index, "bk-1"))
    assert len(list(kept.iterdir())) == 9  # nothing forgotten: no record before
    fastpath.save_record(fastpath.Record("r/x", None, (), new_manifest, "bk-2"))
    assert {p.name for p in kept.iterdir()} == {d.replace(":", "-") for d in new | other}


def _manifests(kept: Path) -> set[str]:
    import json

    return {f.name.replace("-", ":", 1) for f in kept.iterdir() if "mediaType" in json.loads(f.read_text())}


def test_a_record_that_cannot_be_written_is_a_note_not_a_failure(tmp_path, monkeypatch):
    from buildkit_py.progress import Reporter

    (tmp_path / "build-records").write_text("a file where the directory goes")
    monkeypatch.setenv("BUILDKIT_PY_CACHE_DIR", str(tmp_path))
    said = io.StringIO()
    fastpath.save_record(fastpath.Record("r/x", None, (), "sha256:" + "1" * 64, "bk-1"), Reporter(said))
    assert "no build record for the fast path" in said.getvalue() and fastpath.load_record("r/x", None) is None
