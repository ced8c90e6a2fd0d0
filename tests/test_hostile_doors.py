"""The doors added since the hostile corpus was first written (issue 43): `job --job-config`, `verify`, `logs`, and
other tools' lock files (uv.lock, poetry.lock, Pipfile.lock, pylock.toml) as a trainer's requirements. Each payload of
the corpus scripts/hostile_report.py feeds the config keys goes into each field of each door, through the real command
line: the end is a refusal on one bounded line that names where (the file or the argument), or a harmless result; never
a traceback, never the credential a payload carries, never a Dockerfile of another shape.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from test_hostile import CORPUS, instructions
from test_logs import JOB, a_job

from buildkit_py import cli
from buildkit_py.errors import BuildkitError
from buildkit_py.pipeline.resolution import OFFLINE_ENV
from buildkit_py.sources.lockfiles import export

SECRET = "pAsSw0rdS3cret"
PAYLOADS = [*CORPUS, f"https://user:{SECRET}@127.0.0.1:1/simple", f"user:{SECRET}@127.0.0.1:1/a/b:1",
            f"git+https://{SECRET}@github.com/o/r.git", "ghp_" + "A1b2" * 9]
TOKEN = PAYLOADS[-1]


def shown(capsys, monkeypatch, argv: list[str], where: tuple[str, ...], spec: bool = False) -> tuple[int, str, str]:
    """Run the command line; check how it ended; return (exit code, stdout, stderr). spec: what it prints is a job's
    request, which holds the trainer's arguments and environment as the user wrote them."""
    raised: list[BaseException] = []
    monkeypatch.setattr(cli, "_report", lambda exc, debug: raised.append(exc))
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse's own refusal (a value that reads as an option): its one line
        code = exc.code
    out, err = capsys.readouterr()
    if code and not raised:
        raised.append(BuildkitError(err.strip().splitlines()[-1].split(": error: ", 1)[-1]))
    assert "Traceback" not in err and "internal error" not in err, (argv[:3], err[-600:])
    assert SECRET not in err, (argv[:3], err[-300:])
    assert SECRET not in out or spec, (argv[:3], out[-300:])
    assert all(len(line) <= 2000 for line in err.splitlines()), err[:300]
    if code:
        assert raised and isinstance(raised[0], BuildkitError), (code, err[-300:])
        message = str(raised[0])
        assert "\n" not in message and "\u2028" not in message, f"a refusal of several lines: {message!r}"
        assert len(message) <= 2000, f"an unbounded refusal ({len(message)} characters)"
        assert all(ch.isprintable() for ch in message), f"a raw control character in {message!r}"
        assert not re.search(r"\bin\.txt\b", message), f"names a file of ours: {message!r}"
        if code == 2:
            assert any(w in message for w in where), f"names none of {where}: {message!r}"
    return code, out, err


# --- job --job-config ------------------------------------------------------------------------------------------------

CONFIG = "framework: none\npython: '3.11'\ntrainer: {module: trainer.task}\njob: {project: fake-project}\n"


def custom_job(value: str, field: str) -> dict:
    pool = {"machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1},
            "replicaCount": 1, "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
            "containerSpec": {"imageUri": "{IMAGE_URI}", "args": ["--epochs=3"], "env": [{"name": "A", "value": "x"}]}}
    job = {"workerPoolSpecs": [pool], "scheduling": {"timeout": "7200s"},
           "serviceAccount": "t@fake-project.iam.gserviceaccount.com", "baseOutputDirectory": {"outputUriPrefix": "gs://my-bucket/out"}}
    *parents, last = field.split(".")
    table = job
    for part in parents:
        table = table[part][0] if isinstance(table[part], list) else table[part]
    if isinstance(table.get(last), list):  # a list's first item
        item = table[last][0]
        table[last] = [{**item, "value": value} if isinstance(item, dict) else value]
    else:
        table[last] = value
    return job


JOB_FIELDS = ["workerPoolSpecs.machineSpec.machineType", "workerPoolSpecs.machineSpec.acceleratorType",
              "workerPoolSpecs.machineSpec.acceleratorCount", "workerPoolSpecs.replicaCount",
              "workerPoolSpecs.diskSpec.bootDiskType", "workerPoolSpecs.containerSpec.imageUri",
              "workerPoolSpecs.containerSpec.args", "workerPoolSpecs.containerSpec.env", "scheduling.timeout",
              "serviceAccount", "baseOutputDirectory.outputUriPrefix", "network"]


@pytest.fixture
def trainer(project):
    return project({"buildkit.yaml": CONFIG, "trainer/__init__.py": "", "trainer/task.py": ""})


@pytest.mark.parametrize("field", JOB_FIELDS)
def test_every_payload_in_every_field_of_a_job_config(trainer, capsys, monkeypatch, field):
    (trainer / "job.yaml").write_text(yaml.safe_dump(custom_job("n1-standard-8", JOB_FIELDS[0])))
    argv = ["job", "--dir", str(trainer), "--json", "--job-config", str(trainer / "job.yaml"), "--image",
            "us-docker.pkg.dev/p/r/t:1"]
    assert shown(capsys, monkeypatch, argv, ())[0] == 0, "the file without a payload is a job"
    for payload in PAYLOADS:
        if "\udcff" in payload:
            continue  # YAML cannot hold it
        (trainer / "job.yaml").write_text(yaml.safe_dump(custom_job(payload, field), allow_unicode=True))
        as_written = field.endswith(("args", "env"))
        code, out, err = shown(capsys, monkeypatch, argv, ("job.yaml",), spec=as_written)
        assert code in (0, 2), (field, payload[:40], err[-300:])
        if code == 0:
            json.loads(out)  # the spec, checked by the official types before it was printed
            if as_written and (payload == TOKEN or SECRET in payload):
                assert "Secret Manager" in err, err  # the value goes where it was put, with the hint


@pytest.mark.parametrize("text", [b"workerPoolSpecs: " + b"[" * 5000 + b"]" * 5000, b"\xff\xfe workerPoolSpecs: []",
                                  b"workerPoolSpecs: []\x00", b"a" * 70000 + b": 1", b"- 1\n- 2\n", b"!!python/name:os.system",
                                  b"workerPoolSpecs: [{containerSpec: {imageUri: '" + f"user:{SECRET}@gcr.io/p/i:1".encode() +
                                  b"'}, machineSpec: {machineType: n1-standard-4}, replicaCount: 1}]"])
def test_a_job_config_file_that_is_not_one_is_refused_naming_it(trainer, capsys, monkeypatch, text):
    (trainer / "job.yaml").write_bytes(text)
    code, _, _ = shown(capsys, monkeypatch, ["job", "--dir", str(trainer), "--job-config", str(trainer / "job.yaml")],
                       ("job.yaml",))
    assert code == 2


# --- verify ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", ["{}", "127.0.0.1:1/a/{}:1", "127.0.0.1:1/a/b:{}", "{}@127.0.0.1:1/a/b:1",
                                   "127.0.0.1:1/a/b@{}"])
def test_every_payload_as_the_image_verify_reads(capsys, monkeypatch, shape):
    for payload in PAYLOADS:
        if shape == "{}" and re.fullmatch(r"[a-z0-9./_-]+(:[\w.-]+)?", payload):
            continue  # a reference Docker Hub would be asked for: nothing to refuse
        code, _, err = shown(capsys, monkeypatch, ["verify", shape.format(payload)], ("IMAGE",))
        assert code != 0, (shape, payload[:40])
        assert code == 2 or "127.0.0.1:1" in err, (shape, payload[:40], err[-300:])  # refused, or nothing answered


def test_verify_refuses_a_lock_that_is_not_one_naming_it(tmp_path, capsys, monkeypatch):
    for payload in PAYLOADS[:12]:
        lock = tmp_path / "buildkit.lock"
        lock.write_text(payload)
        code, _, _ = shown(capsys, monkeypatch, ["verify", "127.0.0.1:1/a/b:1", "--lock", str(lock)],
                           ("buildkit.lock", "--lock"))
        assert code == 2, payload[:40]


# --- logs ------------------------------------------------------------------------------------------------------------



@pytest.mark.parametrize("argument", ["JOB", "--project", "--region"])
def test_every_payload_as_a_job_logs_reads(fake, capsys, monkeypatch, argument):
    a_job(fake, "JOB_STATE_SUCCEEDED")
    for payload in PAYLOADS:
        argv = {"JOB": ["logs", payload], "--project": ["logs", "1000", "--project", payload, "--region", "us-central1"],
                "--region": ["logs", "1000", "--project", "fake-project", "--region", payload]}[argument]
        code, _, err = shown(capsys, monkeypatch, argv, (argument, "project", "region"))
        assert code == 2, (argument, payload[:40], err[-300:])


def test_hostile_log_lines_are_printed_inert_each_with_its_replica(fake, capsys, monkeypatch):
    a_job(fake, "JOB_STATE_SUCCEEDED")
    for payload in PAYLOADS:
        fake.logging.write("1000", "workerpool0-0", payload)
    code, out, _ = shown(capsys, monkeypatch, ["logs", JOB], ())
    assert code == 0
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) >= len([p for p in PAYLOADS if p.strip()])
    for line in lines:  # a break inside an entry starts a labelled line: no entry passes for another replica's
        assert re.match(r"\S+Z \w+ +\[workerpool0-0\] ", line), line[:80]
        assert all(ch.isprintable() or ch == "\t" for ch in line), f"a raw control character printed: {line[:80]!r}"


# --- other tools' lock files -----------------------------------------------------------------------------------------

HASH = "sha256:" + "a" * 64
LOCKS = {
    "uv.lock": ('version = 1\nrequires-python = ">=3.10"\n\n[[package]]\nname = "app"\nversion = "0.1.0"\n'
                'source = {{ virtual = "." }}\ndependencies = [{{ name = {NAME}, marker = {MARKER} }}]\n\n'
                '[[package]]\nname = {NAME}\nversion = {VERSION}\nsource = {{ registry = {URL} }}\n'
                'wheels = [{{ url = "https://files.example/x.whl", hash = {HASH} }}]\n'),
    "poetry.lock": ('[[package]]\nname = {NAME}\nversion = {VERSION}\noptional = false\ngroups = ["main"]\n'
                    'markers = {MARKER}\nfiles = [{{ file = "x.whl", hash = {HASH} }}]\n'
                    '[package.source]\ntype = "legacy"\nurl = {URL}\nreference = "private"\n\n'
                    '[metadata]\nlock-version = "2.1"\npython-versions = "^3.10"\ncontent-hash = "0"\n'),
    "pylock.toml": ('lock-version = "1.0"\ncreated-by = "uv"\n\n[[packages]]\nname = {NAME}\nversion = {VERSION}\n'
                    'marker = {MARKER}\nindex = {URL}\nwheels = [{{ url = "https://files.example/x.whl", '
                    'hashes = {{ sha256 = {SHA} }} }}]\n'),
    "Pipfile.lock": ('{{"_meta": {{"sources": [{{"name": "p", "url": {URL}, "verify_ssl": true}}]}}, '
                     '"default": {{{NAME}: {{"version": {PINNED}, "markers": {MARKER}, "hashes": [{HASH}], "index": "p"}}}}}}'),
}
GOOD = {"NAME": "bkpin", "VERSION": "1.0", "PINNED": "==1.0", "MARKER": "python_version >= '3'",
        "URL": "https://pypi.org/simple", "HASH": HASH, "SHA": "a" * 64}


def lock_text(name: str, field: str | None, payload: str) -> str:
    values = {**GOOD, **({field: payload} if field else {})}
    return LOCKS[name].format(**{k: json.dumps(v) for k, v in values.items()})  # a TOML or JSON string either way


@pytest.fixture
def locked_trainer(project):
    return project({"trainer/__init__.py": "", "trainer/task.py": "import bkpin\n"})


def dockerfile(locked_trainer: Path, name: str) -> list[str]:
    (locked_trainer / "buildkit.yaml").write_text(
        f"framework: none\npython: '3.11'\ntrainer: {{module: trainer.task}}\nrequirements: {name}\n")
    return ["dockerfile", "--dir", str(locked_trainer)]


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_a_lock_file_as_written_gives_its_package(locked_trainer, capsys, monkeypatch, name):
    (locked_trainer / name).write_text(lock_text(name, None, ""))
    code, out, err = shown(capsys, monkeypatch, dockerfile(locked_trainer, name), (name,))
    assert code == 0, err
    staged = (locked_trainer / ".buildkit-py" / "requirements-locked.txt")
    assert "bkpin" in out or staged.is_file() or "requirements-locked" in out, out[-400:]


@pytest.mark.parametrize("name", sorted(LOCKS))
@pytest.mark.parametrize("field", ["NAME", "VERSION", "MARKER", "URL", "HASH"])
def test_every_payload_in_every_field_of_a_lock_file(locked_trainer, capsys, monkeypatch, name, field):
    (locked_trainer / name).write_text(lock_text(name, None, ""))
    benign = instructions(cli_out(locked_trainer, name, capsys, monkeypatch))
    if field == "VERSION" and name == "Pipfile.lock":
        field = "PINNED"
    if field == "HASH" and name == "pylock.toml":
        field = "SHA"
    for payload in PAYLOADS:
        (locked_trainer / name).write_text(lock_text(name, field, payload), encoding="utf-8", errors="surrogateescape")
        code, out, err = shown(capsys, monkeypatch, dockerfile(locked_trainer, name), (name,))
        assert code in (0, 2), (field, payload[:40], err[-300:])
        if code == 0:
            assert instructions(out) == benign, (field, payload[:40])
            exported = export(locked_trainer, name, "3.11", "linux/amd64").source.read_text()
            assert SECRET not in exported, "a login in the lines the image installs from"  # a file of the context


def cli_out(locked_trainer: Path, name: str, capsys, monkeypatch) -> str:
    code, out, err = shown(capsys, monkeypatch, dockerfile(locked_trainer, name), (name,))
    assert code == 0, err
    return out


@pytest.mark.parametrize("name", sorted(LOCKS))
@pytest.mark.parametrize("text", [b"\xff\xfe[[package]]", b"x = 1\x00", b"a = " + b"[" * 5000 + b"]" * 5000,
                                  b"[[package]]\nname = 'x'\n" * 2 + b"a" * 70000, b"{", b""])
def test_a_lock_file_that_is_not_one_is_refused_naming_it(locked_trainer, capsys, monkeypatch, name, text):
    (locked_trainer / name).write_bytes(text)
    code, _, _ = shown(capsys, monkeypatch, dockerfile(locked_trainer, name), (name,))
    assert code == 2


# --- the cases of issue 43, one by one -------------------------------------------------------------------------------

def refused(capsys, monkeypatch, root: Path, *argv: str) -> str:
    raised: list[BaseException] = []
    monkeypatch.setattr(cli, "_report", lambda exc, debug: raised.append(exc))
    assert cli.main([*argv, "--dir", str(root)]) == 2, capsys.readouterr().err
    capsys.readouterr()
    return str(raised[0])


@pytest.fixture
def resolving(monkeypatch, locked_trainer, index):
    """The dry run resolves (the tests' default is offline), against a loopback index of no wheels: what is refused
    here is refused by uv as it reads the lines, or before uv runs."""
    monkeypatch.delenv(OFFLINE_ENV)
    (locked_trainer / "buildkit.yaml").write_text(
        "framework: none\npython: '3.11'\ntrainer: {module: trainer.task}\nrequirements: requirements.txt\n"
        f"pip_index_url: {index.url}\n")


def test_uv_refusing_a_line_names_the_users_file_and_line_not_ours(locked_trainer, resolving, capsys, monkeypatch):
    (locked_trainer / "requirements.txt").write_text("bkpin\n-e git+https://example.com/o/r.git#egg=r\n")
    message = refused(capsys, monkeypatch, locked_trainer, "dockerfile", "--resolve")
    assert "at requirements.txt:2" in message and "in.txt" not in message, message
    (locked_trainer / "requirements.txt").write_text("bkpin\n-c more.txt\n")
    (locked_trainer / "more.txt").write_text("# pins\n-e git+https://example.com/o/r.git#egg=r\n")
    message = refused(capsys, monkeypatch, locked_trainer, "dockerfile", "--resolve")
    assert "at more.txt:2" in message and "in.txt" not in message and "constraints.txt" not in message, message


@pytest.mark.parametrize("line", ["--index-url file:///etc/passwd", "-i /etc", "--extra-index-url=./wheels"])
def test_an_index_that_is_a_path_here_is_refused_naming_the_line(locked_trainer, resolving, capsys, monkeypatch, line):
    (locked_trainer / "requirements.txt").write_text(f"bkpin\n{line}\n")
    message = refused(capsys, monkeypatch, locked_trainer, "dockerfile", "--resolve")
    assert message.startswith("requirements.txt:2: ") and "http(s) URL" in message, message


@pytest.mark.parametrize(("name", "field"), [("uv.lock", "URL"), ("pylock.toml", "URL")])
def test_a_login_in_a_locks_url_is_refused_naming_the_line_never_exported(locked_trainer, capsys, monkeypatch, name,
                                                                           field):
    for url in (f"https://user:{SECRET}@pypi.example/simple", f"https://{SECRET}@pypi.example/simple"):
        (locked_trainer / name).write_text(lock_text(name, field, url) if name == "uv.lock" else
                                           lock_text(name, None, "").replace('wheels = [', f'archive = {{ url = '
                                                                             f'{json.dumps(url + "/x.whl")} }}\nwheels = ['))
        (locked_trainer / "buildkit.yaml").write_text(
            f"framework: none\npython: '3.11'\ntrainer: {{module: trainer.task}}\nrequirements: {name}\n")
        message = refused(capsys, monkeypatch, locked_trainer, "dockerfile")
        assert re.match(rf"{re.escape(name)}:[0-9]+: a URL with credentials \(not shown\)", message), message
        assert SECRET not in message


@pytest.mark.parametrize(("value", "field"), [
    ("trainer: {module: DEEP}", "trainer.module[0]"), ("variants: {gpu: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: "
                                                       "{a: {a: {a: {a: {a: {a: 1}}}}}}}}}}}}}}}}}", "variants.gpu.a.a"),
    ("pip: [numpy, DEEP]", "pip[1][0]"), ("trainer: {module: x, args: [a, !!python/name:os.system ]}", "trainer.args[1]"),
    ("env: {A: &x 1}", "env.A")])
def test_a_yaml_refusal_names_the_field_and_the_line(trainer, capsys, monkeypatch, value, field):
    (trainer / "buildkit.yaml").write_text("framework: none\npython: '3.11'\n" + value.replace("DEEP", "[" * 30 + "]" * 30))
    message = refused(capsys, monkeypatch, trainer, "dockerfile")
    assert re.match(rf"\S*buildkit.yaml:3:[0-9]+: {re.escape(field)}", message), message


def test_a_job_files_machine_that_is_not_offered_is_refused_at_its_line(trainer, capsys, monkeypatch):
    job = custom_job("NVIDIA_TESLA_T5", "workerPoolSpecs.machineSpec.acceleratorType")
    (trainer / "job.yaml").write_text(yaml.safe_dump(job))
    argv = ("job", "--job-config", str(trainer / "job.yaml"), "--image", "us-docker.pkg.dev/p/r/t:1")
    message = refused(capsys, monkeypatch, trainer, *argv)
    assert re.match(r"\S*job.yaml:[0-9]+:[0-9]+: workerPoolSpecs\[0\]\.machineSpec: 'n1-standard-8' takes no "
                    r"'NVIDIA_TESLA_T5'", message), message
    assert cli.main(["job", "--dir", str(trainer), *argv[1:], "--accelerator-type", "NVIDIA_TESLA_T4"]) == 0  # a flag wins
    job["workerPoolSpecs"][0]["machineSpec"].update(acceleratorType="NVIDIA_TESLA_T4", acceleratorCount=3)
    (trainer / "job.yaml").write_text(yaml.safe_dump(job))
    assert "3 x NVIDIA_TESLA_T4 is not offered" in refused(capsys, monkeypatch, trainer, *argv)


def test_ini_files_that_do_not_parse_are_one_line_naming_the_key_and_line(trainer, capsys, monkeypatch):
    import buildkit_py as bk

    (trainer / "bad.conf").write_text("no header\nindex-url = https://u:p@h/simple\n")
    with pytest.raises(BuildkitError) as caught:
        bk.dockerfile(trainer, pip_conf=str(trainer / "bad.conf"))
    assert str(caught.value).endswith("bad.conf:1: pip_conf: the pip.conf cannot be read as an INI file "
                                      "(MissingSectionHeaderError)"), caught.value
    (trainer / "setup.cfg").write_text("[metadata]\nname = x\nname = y\n")
    monkeypatch.chdir(trainer)
    raised: list[BaseException] = []
    monkeypatch.setattr(cli, "_report", lambda exc, debug: raised.append(exc))
    assert cli.main(["autopackage", "--dry-run", "."]) == 2
    assert str(raised[0]) == "setup.cfg:3: does not parse as an INI file: option 'name' in section 'metadata' already exists"


def test_verify_reads_its_lock_before_asking_the_registry(tmp_path, capsys, monkeypatch):
    from buildkit_py.oci import client

    monkeypatch.setattr(client.RegistryClient, "__init__", lambda *a, **k: pytest.fail("asked the registry"))
    (tmp_path / "buildkit.lock").write_text("version: 1\nimages: []\n")
    code, _, _ = shown(capsys, monkeypatch, ["verify", "127.0.0.1:1/a/b:1", "--lock", str(tmp_path / "buildkit.lock")],
                       ("buildkit.lock",))
    assert code == 2


@pytest.mark.parametrize("ref", [f"127.0.0.1:1/a/user:{SECRET}@127.0.0.1:1/a/b:1", f"gcr.io/p/i@user:{SECRET}@gcr.io/p/i",
                                 f"gcr.io/p/i:t:{SECRET}@localhost/x", f"gcr.io/p/{SECRET}@registry.example:5000/x"])
def test_a_credential_pasted_inside_a_reference_is_cut(ref):
    from buildkit_py.errors import mask_credentials

    assert SECRET not in mask_credentials(f"IMAGE: {ref!r} is not valid")
    for kept in ("name@linux/amd64", "127.0.0.1:5000/x:1@linux/arm64", "gcr.io/p/i:1@sha256:" + "a" * 64):
        assert mask_credentials(kept) == kept
