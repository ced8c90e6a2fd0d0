from __future__ import annotations

import base64
import json
import os
import random
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import venv
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from buildkit_py.errors import ContextError
from buildkit_py.fsutil import OUTPUT_MARKER, make_output_dir
from buildkit_py.pipeline.context import (
    FIXED_MTIME,
    LARGE_FILE_BYTES,
    find_large_files,
    find_secrets,
    hash_context,
    list_context,
    staged,
)
from buildkit_py.pipeline.context import stage as stage_module
from buildkit_py.pipeline.render import render_dockerignore
from buildkit_py.sources.ignore import MAX_PATTERN_CHARS
from buildkit_py.sources.walk import included_files
from conftest import REPO

DOCKERFILE = "FROM python:3.11-slim\nCOPY . /app\n"


def staged_context(root: Path, dockerfile: str, ignore: str, **allowed):
    """What a build does: list (and check), then stage (copy and hash)."""
    return staged(list_context(root, dockerfile, ignore, **allowed))
PEM_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def our_temp_dirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("buildkit-py-*"))


# .dockerignore semantics: (ignore lines, files in the tree, files that must stay).
IGNORE_CASES = {
    "star matches at the root only": ("*.pyc", ["a.pyc", "a.py", "sub/b.pyc"], ["a.py", "sub/b.pyc"]),
    "double star matches any depth": (
        "**/__pycache__",
        ["__pycache__/x.pyc", "pkg/__pycache__/y.pyc", "pkg/deep/__pycache__/z.pyc", "pkg/mod.py", "my__pycache__/z"],
        ["my__pycache__/z", "pkg/mod.py"],
    ),
    "double star then glob": ("**/*.py[cod]", ["a.pyc", "p/q/b.pyo", "p/c.py"], ["p/c.py"]),
    "directory excludes its contents": (
        "data/", ["data/a.csv", "data/sub/b.csv", "database.py", "other/data/c"], ["database.py", "other/data/c"],
    ),
    "exception inside data/**": (
        "data/**\n!data/keep.txt", ["data/a.csv", "data/keep.txt", "data/sub/keep.txt"], ["data/keep.txt"],
    ),
    "exception inside an excluded directory": ("data\n!data/keep.txt", ["data/a.csv", "data/keep.txt"], ["data/keep.txt"]),
    "wildcard exception reaches into an excluded directory": (
        ".venv\n!**/keep.me", [".venv/a/keep.me", ".venv/a/other", "x.py"], [".venv/a/keep.me", "x.py"],
    ),
    "leading slash anchors nothing extra": ("/build", ["build/out.o", "src/build/x"], ["src/build/x"]),
    "dotenv with an exception": (
        ".env\n.env.*\n!.env.example", [".env", ".env.local", ".env.example"], [".env.example"],
    ),
    "star does not cross directories": (
        "docs/*.md", ["docs/a.md", "docs/sub/b.md", "README.md", "docs/c.txt"], ["README.md", "docs/c.txt", "docs/sub/b.md"],
    ),
    "question mark is one character": ("?.txt", ["a.txt", "ab.txt", "d/a.txt"], ["ab.txt", "d/a.txt"]),
    "character class": ("[a-c].log", ["a.log", "c.log", "d.log"], ["d.log"]),
    "negated character class": ("[^a].log", ["a.log", "b.log"], ["a.log"]),
    "escaped star is literal": ("\\*.txt", ["*.txt", "a.txt"], ["a.txt"]),
    "later exception re-includes": ("*.log\n!keep.log", ["a.log", "keep.log"], ["keep.log"]),
    "later exclude overrides an earlier exception": ("!keep.log\n*.log", ["a.log", "keep.log"], []),
    "comments, blanks and whitespace": ("# *.py\n\n   *.txt   \n", ["a.py", "a.txt"], ["a.py"]),
    "patterns are cleaned": ("./src/../tmp/", ["tmp/x", "src/y"], ["src/y"]),
    "leading double star also matches at the root": (
        "**/secret.txt", ["secret.txt", "a/b/secret.txt", "mysecret.txt"], ["mysecret.txt"],
    ),
    "leading double star glued to a name matches by suffix, as Docker does": (
        "**.txt", ["a.txt", "d/b.txt", "a.md"], ["a.md"],
    ),
    "trailing double star": ("logs/**", ["logs/a", "logs/b/c", "logsx"], ["logsx"]),
    "non-ASCII names": ("données/\n日本*.txt", ["données/a", "日本語.txt", "x.txt"], ["x.txt"]),
    # Character classes pass to the regex as patternmatcher passes them to Go's: what Go reads literally
    # stays literal, though Python's re would read a nested set or a set operation (and warn).
    "a ] first in a class is a member": ("[]a].log", ["].log", "a.log", "b.log"], ["b.log"]),
    "a [ in a class is a member": ("[[a].log", ["[.log", "a.log", "b.log"], ["b.log"]),
    "set operators are plain in a class": ("[&~|].log", ["&.log", "~.log", "|.log", "a.log"], ["a.log"]),
    "a range ending in a dash": ("[+--].log", ["+.log", ",.log", "-.log", "a.log"], ["a.log"]),
    "a star in a class is patternmatcher's [^/]*, whose ] ends the class": ("[*]", ["]", "^]", "a"], ["a"]),
}


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("name", IGNORE_CASES)
def test_dockerignore_semantics(tmp_path, name):
    ignore, files, kept = IGNORE_CASES[name]
    write_tree(tmp_path, {f: "x" for f in files})
    assert included_files(tmp_path, ignore) == sorted(kept)


@pytest.mark.parametrize("ignore, why", [
    ("[abc", "invalid"),
    ("[]", "invalid"),
    ("!", "lone"),
    ("foo\\", "backslash"),
    ("data\0/", "NUL character"),
    ("x" * (MAX_PATTERN_CHARS + 1), f"longer than {MAX_PATTERN_CHARS}"),
    ("[[:alpha:]].txt", "POSIX class"),
])
def test_invalid_patterns_are_refused(tmp_path, ignore, why):
    with pytest.raises(ContextError, match="dockerignore") as caught:
        included_files(tmp_path, ignore)
    assert why in str(caught.value) and caught.value.exit_code == 2
    assert len(str(caught.value)) < 500  # a long line is named by its start


HOSTILE_CHARS = "*?[]^!-\\/.:&~|{}()$+# \t\r\n\0\u2028\ufeff\udc80éa"


@settings(max_examples=400, deadline=None)
@given(st.text(st.sampled_from(HOSTILE_CHARS) | st.characters(), max_size=30))
def test_any_ignore_text_gives_a_file_list_or_a_context_error(tmp_path_factory, text):
    root = tmp_path_factory.getbasetemp() / "hostile-ignore"
    if not root.exists():
        write_tree(root, {"a.py": "", "d/b.txt": "", "é/[x]": "", "-.log": ""})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a regex warning would be one more message, or an error under -W error
        try:
            kept = included_files(root, text)
        except ContextError as exc:
            assert "dockerignore" in str(exc)
        else:
            assert set(kept) <= {"a.py", "d/b.txt", "é/[x]", "-.log"}


def test_double_stars_cannot_make_matching_backtrack_for_ever(tmp_path):
    deep = "/".join(["a"] * 40)
    write_tree(tmp_path, {f"{deep}/c": "", "x": ""})
    started = time.monotonic()
    assert included_files(tmp_path, "**/" * 30 + "x\n" + "**/a/" * 4 + "b\n") == [f"{deep}/c"]
    assert time.monotonic() - started < 5  # the first line ran over ten minutes in the former translation
    with pytest.raises(ContextError, match='more than 4 "\\*\\*" between names'):
        included_files(tmp_path, "**/a/" * 5 + "b")


def test_default_ignores_and_user_lines(project):
    root = project({
        "train.py": "",
        "data.csv": "",
        "keep.csv": "",
        ".git/config": "",
        ".venv/bin/python": "",
        "pkg/__pycache__/m.cpython-311.pyc": "",
        ".env": "TOKEN=1",
        ".envrc": "export TOKEN=1",
        "pkg/m.py": "",
    })
    assert included_files(root, render_dockerignore(None)) == ["data.csv", "keep.csv", "pkg/m.py", "train.py"]
    assert included_files(root, render_dockerignore("*.csv\n!keep.csv")) == ["keep.csv", "pkg/m.py", "train.py"]


SA_KEY = json.dumps({"type": "service_account", "project_id": "p", "private_key": PEM_KEY.replace("RSA ", "")})
PKCS12 = b"\x30\x82\x0a\x1b\x02\x01\x03\x30\x82\x09\xe1" + bytes(200)

SECRETS = {
    "config/.env": ("A=1", "dotenv file"),
    "deploy/.env.production": ("A=1", "dotenv file"),
    "keys/id_rsa": ("anything", "private key"),
    "keys/id_ed25519": ("anything", "private key"),
    "certs/server.pem": (PEM_KEY, "private key"),
    "certs/tls.key": ("PRIVATE KEY material", "private key"),
    "certs/store.p12": (PKCS12, "PKCS#12 key store"),
    "notes.txt": ("see below\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n", "private key"),
    "sa.json": (SA_KEY, "service-account key JSON"),
    "deploy/config.json": ('{"auths": {"gcr.io": {"auth": "abc"}}}', "docker credentials"),
    ".docker/config.json": ("{}", "docker credentials"),
    ".netrc": ("machine x login y password z", "netrc credentials"),
    ".pypirc": ("[pypi]", "PyPI credentials"),
    ".git-credentials": ("https://u:p@github.com", "git credentials"),
    "home/_netrc": ("machine x login y password z", "netrc credentials"),
    "tools/.envrc": ("export TOKEN=1", "direnv environment file"),
    ".aws/credentials": ("[default]\n", "AWS credentials"),
    "home/u/.aws/credentials": ("[default]\n", "AWS credentials"),
    "gcloud/application_default_credentials.json": ("{}", "Google application default credentials"),
    "keys/id_ed25519_sk": ("anything", "private key"),
}


@pytest.mark.parametrize("path", SECRETS)
def test_each_kind_of_secret_is_refused_by_name(tmp_path, path):
    content, reason = SECRETS[path]
    write_tree(tmp_path, {"train.py": "", path: content})
    assert find_secrets(tmp_path, included_files(tmp_path, "")) == [(path, reason)]
    before = our_temp_dirs()
    with pytest.raises(ContextError) as caught, staged_context(tmp_path, DOCKERFILE, ""):
        pass
    assert f"{path}  ({reason})" in str(caught.value)
    assert caught.value.exit_code == 2
    assert our_temp_dirs() == before  # refused before a temp dir was made


def shaped(prefix: str, alphabet: str, length: int) -> str:
    """A credential of the right shape, put together at run time so that no scanner flags this file."""
    return prefix + (alphabet * length)[:length]


AWS_KEY_ID = shaped("AKIA", "Q7ZK3M2XW9R4T6Y1", 16)
AWS_SECRET = shaped("", "aB3/kQ7+", 40)
GOOGLE_USER = {"client_id": "764086051850-6qr4p6gpi6hn506pt8ejuq83di341hur.apps.googleusercontent.com",
               "client_secret": shaped("d-", "FL95Q19q", 22), "refresh_token": shaped("1//0g", "Rk3xQ", 60),
               "type": "authorized_user"}
PUTTY_KEY = "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: k\nPublic-Lines: 2\n"

# Recognised by what is in them, whatever the file is called: (content, reason).
CONTENT_SECRETS = {
    "service account": (SA_KEY, "service-account key JSON"),
    "gcloud user": (json.dumps(GOOGLE_USER), "Google user credentials (refresh token)"),
    "workforce user": (json.dumps({**GOOGLE_USER, "type": "external_account_authorized_user"}),
                       "Google external_account_authorized_user credentials"),
    "impersonation": (json.dumps({"type": "impersonated_service_account", "delegates": [],
                                  "source_credentials": GOOGLE_USER}),
                      "Google impersonated_service_account credentials"),
    "external account with a secret": (json.dumps({"type": "external_account", "audience": "//iam",
                                                   "client_id": "c", "client_secret": "s3cr3t"}),
                                       "Google external_account credentials"),
    "docker auths": (json.dumps({"auths": {"ghcr.io": {"auth": base64.b64encode(b"u:p").decode()}}}),
                     "docker credentials"),
    "docker identity token": (json.dumps({"auths": {"quay.io": {"identitytoken": "t"}}}), "docker credentials"),
    "PuTTY key": (PUTTY_KEY, "PuTTY private key"),
    "PEM key in a JSON string": (json.dumps({"key": PEM_KEY}), "private key"),
    "AWS ini": (f"[default]\naws_access_key_id = {AWS_KEY_ID}\naws_secret_access_key = {AWS_SECRET}\n",
                "AWS secret access key"),
    "AWS in a shell file": (f'export AWS_SECRET_ACCESS_KEY="{AWS_SECRET}"\n', "AWS secret access key"),
    "AWS in code": (f'boto3.client("s3", aws_secret_access_key="{AWS_SECRET}")\n', "AWS secret access key"),
    "AWS CLI output": (json.dumps({"AccessKey": {"AccessKeyId": AWS_KEY_ID, "SecretAccessKey": AWS_SECRET}}),
                       "AWS secret access key"),
    "AWS key id and secret unnamed": (f'KEYS = ("{AWS_KEY_ID}", "{AWS_SECRET}")\n', "AWS secret access key"),
    "GitHub classic token": (f'token = "{shaped("ghp_", "aB3dE5", 36)}"\n', "GitHub token"),
    "GitHub fine-grained token": (f'token = "{shaped("github_pat_", "aB3d", 22) + shaped("_", "xY7z", 59)}"\n', "GitHub token"),
    "PyPI token": (f'token = "{shaped("pypi-AgEIcHlwaS5vcmc", "A1b2_C3d4-", 60)}"\n', "PyPI token"),
    "Google API key": (f'token = "{shaped("AIza", "Sy3_Bq9-Kd", 35)}"\n', "Google API key"),
    "Slack token": (f'token = "{shaped("xoxb-123456789012-1234567890123-", "AbCdEf", 24)}"\n', "Slack token"),
    "Hugging Face token": (f'token = "{shaped("hf_", "aBcDeFgH", 34)}"\n', "Hugging Face token"),
    "OpenAI key": (f'token = "{shaped("sk-proj-", "aB3_dE5-", 64)}"\n', "OpenAI API key"),
    "Anthropic key": (f'token = "{shaped("sk-ant-api03-", "aB3_dE5-", 95)}"\n', "Anthropic API key"),
    "Azure storage key": (shaped("AccountName=a;AccountKey=", "aB3+dE5/", 86) + "==;EndpointSuffix=x",
                          "Azure storage account key"),
}


@pytest.mark.parametrize("kind", CONTENT_SECRETS)
def test_each_kind_of_secret_is_refused_by_content_under_any_name(tmp_path, kind):
    content, reason = CONTENT_SECRETS[kind]
    write_tree(tmp_path, {"train.py": "", "conf/settings": content})
    assert find_secrets(tmp_path, included_files(tmp_path, "")) == [("conf/settings", reason)]
    with pytest.raises(ContextError) as caught, staged_context(tmp_path, DOCKERFILE, ""):
        pass
    assert f"conf/settings  ({reason})" in str(caught.value)


def test_look_alikes_are_not_secrets(tmp_path):
    noise = random.Random(0).randbytes(48 * 1024)
    write_tree(tmp_path, {
        "certs/ca.pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        "config.json": '{"lr": 0.1}',
        "keys/id_rsa.pub": "ssh-rsa AAAA",
        "model.p12": b"\x00\x01binary",
        "env.py": "",
        # Only a bounded prefix is read: a key beyond the first 64 KiB is not seen.
        "big.bin": b"\0" * (1 << 20) + PEM_KEY.encode(),
        # A trainer's ordinary files.
        "data/meta.json": json.dumps({"type": "dataset", "name": "cifar10", "splits": ["train", "test"]}),
        "requirements.txt": "torch==2.5.1\nnumpy<2\nboto3\nhuggingface_hub\n",
        "data/images.b64": base64.encodebytes(noise).decode(),
        "data/weights.bin": noise,
        "trainer/hub.py": 'from huggingface_hub import hf_hub_download\ntoken = os.environ["HF_TOKEN"]\n',
        "trainer/keys.py": 'if text.startswith("-----BEGIN RSA PRIVATE KEY-----"):\n    kind = "rsa"\n',
        # Docs name the settings and quote AWS's own example keys, which all say EXAMPLE; a placeholder is no key.
        "README.md": "Put aws_secret_access_key in ~/.aws/credentials, e.g.\n\n    aws_access_key_id = "
                     "AKIAIOSFODNN7EXAMPLE\n    aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
                     "    aws_secret_access_key = YOUR_SECRET_ACCESS_KEY\n\nA PuTTY-User-Key-File-3 key works too.\n",
        # An access key id alone grants nothing; a git hash is 40 characters but has no capitals.
        "deploy/ids.txt": f"{AWS_KEY_ID}\ncommit 3f786850e387550fdab836ed7e6dc881de23001b\n",
        # Workload identity federation: a pointer to a token file, no secret of its own.
        "deploy/wif.json": json.dumps({"type": "external_account", "audience": "//iam.googleapis.com/x",
                                       "credential_source": {"file": "/var/run/token"}}),
        # A docker config that names credential helpers holds no credential.
        "deploy/config.json": json.dumps({"auths": {"gcr.io": {}}, "credHelpers": {"gcr.io": "gcloud"}}),
        "deploy/empty-key.json": json.dumps({"type": "service_account", "private_key": ""}),
    })
    assert find_secrets(tmp_path, included_files(tmp_path, "")) == []


def test_every_secret_is_listed_with_the_fix(tmp_path):
    write_tree(tmp_path, {"sa.json": SA_KEY, "keys/id_rsa": "k", "app/.env": "A=1"})
    with pytest.raises(ContextError) as caught, staged_context(tmp_path, DOCKERFILE, ""):
        pass
    message = str(caught.value)
    for path in ("sa.json", "keys/id_rsa", "app/.env"):
        assert path in message
    assert ".dockerignore" in message and "--allow-secret PATTERN" in message


def test_names_in_a_refusal_cannot_drive_the_terminal(tmp_path):
    write_tree(tmp_path, {"\x1b[2Jdeploy\n/.env": "A=1"})
    with pytest.raises(ContextError) as caught, staged_context(tmp_path, DOCKERFILE, ""):
        pass
    assert "'\\x1b[2Jdeploy\\n/.env'  (dotenv file)" in str(caught.value) and "\x1b" not in str(caught.value)


def test_allowed_secret_goes_through_others_still_refused(tmp_path):
    write_tree(tmp_path, {"keys/id_rsa": "k", "tests/fixtures/fake.pem": PEM_KEY})
    with pytest.raises(ContextError) as caught, staged_context(tmp_path, DOCKERFILE, "", allow_secrets=["tests/fixtures/*"]):
        pass
    assert "keys/id_rsa" in str(caught.value) and "fake.pem" not in str(caught.value)
    with staged_context(tmp_path, DOCKERFILE, "", allow_secrets=["tests/fixtures/*", "keys/id_rsa"]) as ctx:
        assert ctx.snapshot.files == ("keys/id_rsa", "tests/fixtures/fake.pem")


def test_ignored_secrets_are_not_reported(tmp_path):
    write_tree(tmp_path, {"train.py": "", ".env": "A=1", "keys/id_rsa": "k"})
    with staged_context(tmp_path, DOCKERFILE, render_dockerignore("keys/")) as ctx:
        assert ctx.snapshot.files == ("train.py",)


def test_staged_context_holds_exactly_the_included_files(tmp_path):
    root = write_tree(tmp_path / "proj", {
        "train.py": "print(1)",
        "run.sh": "#!/bin/sh\n",
        "pkg/m.py": "x = 1",
        "data/big.csv": "1,2",
        ".git/HEAD": "ref",
    })
    (root / "run.sh").chmod(0o750)
    with staged_context(root, DOCKERFILE, render_dockerignore("data/")) as ctx:
        staged = sorted(p.relative_to(ctx.directory).as_posix() for p in ctx.directory.rglob("*") if p.is_file())
        assert staged == list(ctx.snapshot.files) == ["pkg/m.py", "run.sh", "train.py"]
        assert (ctx.directory / "pkg/m.py").read_text() == "x = 1"
        assert (ctx.directory / "run.sh").stat().st_mode & 0o777 == 0o755
        assert (ctx.directory / "train.py").stat().st_mode & 0o777 == 0o644
        assert {p.stat().st_mtime for p in ctx.directory.rglob("*")} == {FIXED_MTIME}
        assert ctx.dockerfile.read_text() == DOCKERFILE
        assert ctx.dockerfile.parent == ctx.directory.parent
        assert len(ctx.snapshot.digest) == 64


def stage_digest(root: Path, dockerfile: str = DOCKERFILE, ignore: str = "ignored/") -> str:
    with staged_context(root, dockerfile, ignore) as ctx:
        return ctx.snapshot.digest


def test_digest_tracks_content_mode_path_and_dockerfile_only(tmp_path):
    root = write_tree(tmp_path, {"train.py": "print(1)", "pkg/m.py": "x = 1", "ignored/log.txt": "a"})
    first = stage_digest(root)
    assert stage_digest(root) == first
    os.utime(root / "train.py", (1_000_000, 1_000_000))
    assert stage_digest(root) == first
    (root / "ignored/log.txt").write_text("b")
    assert stage_digest(root) == first

    assert stage_digest(root, dockerfile=DOCKERFILE + "RUN true\n") != first
    (root / "train.py").write_text("print(2)")
    edited = stage_digest(root)
    assert edited != first
    (root / "train.py").chmod(0o755)
    assert stage_digest(root) != edited
    (root / "train.py").chmod(0o644)
    assert stage_digest(root) == edited
    (root / "pkg/m.py").rename(root / "pkg/n.py")
    assert stage_digest(root) != edited


def test_digest_does_not_depend_on_where_the_tree_lives(tmp_path):
    files = {"train.py": "print(1)", "a/b/c.txt": "c", "z.txt": "z"}
    one = write_tree(tmp_path / "one", files)
    two = write_tree(tmp_path / "two", dict(reversed(files.items())))  # created in another order
    assert stage_digest(one) == stage_digest(two)


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    """Temp dirs of this test only: other builds on the machine make their own in /tmp meanwhile."""
    where = tmp_path / "tmp"
    where.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    return where


def test_hashing_copies_nothing_and_gives_the_digest_staging_gives(tmp_path, private_tmp):
    root = write_tree(tmp_path / "proj", {"train.py": "print(1)", "pkg/m.py": "x = 1", "ignored/log.txt": "a"})
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o750)
    (root / "m.py").symlink_to("pkg/m.py")
    listing = list_context(root, DOCKERFILE, "ignored/")
    hashed = hash_context(listing)
    assert list(private_tmp.iterdir()) == []  # `print image-uri` copies nothing
    assert hashed.files == ("m.py", "pkg/m.py", "run.sh", "train.py") and hashed.notes == ()
    with staged(listing) as ctx:
        assert ctx.snapshot == hashed
        assert (ctx.directory / "run.sh").stat().st_mode & 0o777 == 0o755
    assert list(private_tmp.iterdir()) == []


def snapshot_of_copy(directory: Path, dockerfile: str = DOCKERFILE) -> str:
    """The digest of a staged directory's own files, as a fresh listing of that directory gives it."""
    return hash_context(list_context(directory, dockerfile, "")).digest


@pytest.mark.parametrize("change", ["content", "grown", "mode", "replaced"])
def test_a_file_changed_after_the_listing_is_staged_as_read_and_the_digest_names_the_copy(tmp_path, private_tmp,
                                                                                           change):
    """No refusal and no second read: the copy is what the digest covers, and what the builder gets."""
    root = write_tree(tmp_path / "proj", {"train.py": "print(1)", "pkg/m.py": "x = 1"})
    listing = list_context(root, DOCKERFILE, "")
    target = root / "pkg/m.py"
    if change == "content":
        target.write_text("x = 2")
    elif change == "grown":
        with target.open("a") as log:
            log.write("\ny = 2")
    elif change == "mode":
        target.chmod(0o755)
    else:  # swapped in by rename, as editors save
        (root / "pkg/new").write_text("x = 3")
        (root / "pkg/new").rename(target)
    with staged(listing) as ctx:
        assert (ctx.directory / "pkg/m.py").read_bytes() == target.read_bytes()
        assert ctx.snapshot.digest == snapshot_of_copy(ctx.directory) == hash_context(listing).digest
        assert ctx.snapshot.files == ("pkg/m.py", "train.py") and ctx.snapshot.notes == ()
    assert list(private_tmp.iterdir()) == []


def test_a_file_deleted_after_the_listing_is_left_out_with_a_note(tmp_path, private_tmp):
    root = write_tree(tmp_path / "proj", {"train.py": "print(1)", "pkg/m.py": "x = 1", "pkg/sub/n.py": "", "ok.py": ""})
    (root / "link.py").symlink_to("ok.py")
    listing = list_context(root, DOCKERFILE, "")
    (root / "pkg/m.py").unlink()
    shutil.rmtree(root / "pkg/sub")
    (root / "link.py").unlink()
    with staged(listing) as ctx:
        assert ctx.snapshot.files == ("ok.py", "train.py")
        assert sorted(p.name for p in ctx.directory.rglob("*") if not p.is_dir()) == ["ok.py", "train.py"]
        assert ctx.snapshot.notes == tuple(f"{p} was deleted while the build context was read: left out"
                                           for p in ("link.py", "pkg/m.py", "pkg/sub/n.py"))
        assert ctx.snapshot.digest == snapshot_of_copy(ctx.directory)  # the tag names the files that were sent
    assert list(private_tmp.iterdir()) == []


def test_a_file_deleted_before_its_secret_check_is_left_out_not_refused(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "proj", {"train.py": "", "gone.txt": "x"})
    real = stage_module.find_secrets

    def delete_then_check(where, files, **kw):
        (root / "gone.txt").unlink()
        return real(where, files, **kw)

    monkeypatch.setattr(stage_module, "find_secrets", delete_then_check)  # as the listing calls it
    listing = list_context(root, DOCKERFILE, "")
    assert hash_context(listing).files == ("train.py",)
    assert hash_context(listing).notes == ("gone.txt was deleted while the build context was read: left out",)


class CountingReader:
    """A file handle that counts the bytes read through it."""

    read_total = 0

    def __init__(self, handle):
        self.handle = handle

    def read(self, n=-1):
        data = self.handle.read(n)
        CountingReader.read_total += len(data)
        return data

    def fileno(self):
        return self.handle.fileno()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()


def test_a_file_grown_past_the_limit_while_read_is_refused_and_not_read_to_its_end(tmp_path, private_tmp, monkeypatch):
    root = write_tree(tmp_path / "proj", {"train.py": "", "logs/train.log": "step 1\n"})
    listing = list_context(root, DOCKERFILE, "")
    sparse(root / "logs/train.log", 4 << 30)  # 4 GiB by the time it is read
    real = stage_module.open_regular
    monkeypatch.setattr(stage_module, "open_regular", lambda path: (h := real(path)) and CountingReader(h))
    CountingReader.read_total = 0
    with pytest.raises(ContextError) as caught, staged(listing):
        pass
    message = str(caught.value)
    assert "logs/train.log  (grew past 100 MiB while the build context was read)" in message
    assert "--allow-large PATTERN" in message and caught.value.exit_code == 2
    assert CountingReader.read_total <= LARGE_FILE_BYTES + 1  # stopped at the limit, not 4 GiB
    assert list(private_tmp.iterdir()) == []
    # Allowed by pattern: no limit while reading either.
    allowed = list_context(root, DOCKERFILE, "", allow_large=["logs/*"])
    assert dict((rel, limit) for rel, _, limit in allowed.sources)["logs/train.log"] is None


def test_temp_dir_removed_after_the_block(tmp_path):
    write_tree(tmp_path, {"train.py": ""})
    before = our_temp_dirs()
    with staged_context(tmp_path, DOCKERFILE, "") as ctx:
        assert ctx.directory.is_dir() and our_temp_dirs() != before
    assert not ctx.directory.parent.exists()
    assert our_temp_dirs() == before


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_temp_dir_removed_when_the_block_raises(tmp_path, error):
    write_tree(tmp_path, {"train.py": ""})
    before = our_temp_dirs()
    with pytest.raises(error), staged_context(tmp_path, DOCKERFILE, ""):
        raise error()
    assert our_temp_dirs() == before


def test_symlink_outside_root_is_refused(tmp_path):
    root = write_tree(tmp_path / "proj", {"train.py": ""})
    (tmp_path / "outside.txt").write_text("secret")
    (root / "leak.txt").symlink_to(tmp_path / "outside.txt")
    (root / "etc").symlink_to("/etc")
    with pytest.raises(ContextError) as caught:
        included_files(root, "")
    assert "leak.txt" in str(caught.value) and "etc -> /etc" in str(caught.value)
    assert included_files(root, "leak.txt\netc") == ["train.py"]  # an ignored link is not sent, so it is fine


def test_symlinks_inside_root_are_staged_as_links(tmp_path):
    root = write_tree(tmp_path / "proj", {"pkg/m.py": "x = 1"})
    (root / "m.py").symlink_to(root / "pkg/m.py")  # absolute, yet inside root
    (root / "lib").symlink_to("pkg")  # a directory: not walked, sent as a link
    assert included_files(root, "") == ["lib", "m.py", "pkg/m.py"]
    with staged_context(root, DOCKERFILE, "") as ctx:
        assert os.readlink(ctx.directory / "m.py") == "pkg/m.py"
        assert (ctx.directory / "lib/m.py").read_text() == "x = 1"


# Files too large to belong in an image.


def sparse(path: Path, size: int) -> None:
    """A file of this apparent size that takes no disk space."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)


def test_large_files_are_refused_before_anything_is_staged(tmp_path):
    write_tree(tmp_path, {"train.py": ""})
    sparse(tmp_path / "data/shard-0.bin", 2 << 30)
    sparse(tmp_path / "ckpt/at-the-limit.pt", LARGE_FILE_BYTES)
    assert find_large_files(tmp_path, included_files(tmp_path, "")) == [("data/shard-0.bin", 2 << 30)]
    before = our_temp_dirs()
    with pytest.raises(ContextError) as caught, staged_context(tmp_path, DOCKERFILE, ""):
        pass
    message = str(caught.value)
    assert "data/shard-0.bin  (2.0 GiB)" in message and "at-the-limit" not in message
    assert "over 100 MiB" in message and ".dockerignore" in message and "--allow-large PATTERN" in message
    assert caught.value.exit_code == 2
    assert our_temp_dirs() == before
    with staged_context(tmp_path, DOCKERFILE, "data/") as ctx:  # an ignored file is not sent, so it is fine
        assert ctx.snapshot.files == ("ckpt/at-the-limit.pt", "train.py")


def test_allow_large_lifts_the_refusal_for_what_it_matches_only(tmp_path):
    write_tree(tmp_path, {"train.py": "", "keys/id_rsa": "k"})
    sparse(tmp_path / "data/shard-0.bin", 2 << 30)
    sparse(tmp_path / "weights/init.pt", LARGE_FILE_BYTES + 1)
    with pytest.raises(ContextError) as caught, staged_context(tmp_path, DOCKERFILE, "", allow_large=["data/*"]):
        pass
    message = str(caught.value)
    # One message for secrets and large files alike, so that one run shows every fix.
    assert "keys/id_rsa  (private key)" in message and "weights/init.pt  (100.0 MiB)" in message
    assert "shard-0" not in message
    with staged_context(tmp_path, DOCKERFILE, "data/\nkeys/", allow_large=["weights/init.pt"]) as ctx:
        assert ctx.snapshot.files == ("train.py", "weights/init.pt")
        assert (ctx.directory / "weights/init.pt").stat().st_size == LARGE_FILE_BYTES + 1


def test_a_link_to_a_large_file_counts_where_the_file_is(tmp_path):
    write_tree(tmp_path, {"train.py": ""})
    sparse(tmp_path / "data/big.bin", LARGE_FILE_BYTES + 1)
    (tmp_path / "big.bin").symlink_to("data/big.bin")
    assert find_large_files(tmp_path, included_files(tmp_path, "")) == [("data/big.bin", LARGE_FILE_BYTES + 1)]
    assert find_large_files(tmp_path, included_files(tmp_path, "data/")) == []


# Environments: recognised by what is in them, not by their name.


def test_environments_are_left_out_wherever_they_are_and_code_dirs_are_kept(tmp_path):
    write_tree(tmp_path, {
        "train.py": "",
        # A trainer's own packages and folders, named as environments and build outputs often are.
        "env/__init__.py": "",
        "env/wrappers.py": "",
        "venv/README.md": "",
        "build/layers.py": "",
        "dist/sampler.py": "",
        "envs/base/conda-meta/history": "",
        "envs/base/lib/python3.11/site.py": "",
        "envs/notes.txt": "",
    })
    # Real virtual environments (python -m venv), at the top and deep inside; their bin/python leads out of
    # the root, so the listing would be refused if anything of them were kept.
    venv.create(tmp_path / "env2", with_pip=False, symlinks=True)
    venv.create(tmp_path / "tools/py311", with_pip=False, symlinks=True)
    (tmp_path / "tools/run.sh").write_text("")
    kept = included_files(tmp_path, render_dockerignore(None))
    assert kept == ["build/layers.py", "dist/sampler.py", "env/__init__.py", "env/wrappers.py", "envs/notes.txt",
                    "tools/run.sh", "train.py", "venv/README.md"]
    assert not {"env", "venv", "build", "dist"} & set(render_dockerignore(None).splitlines())


def test_an_environment_comes_back_only_when_a_bang_line_names_it(tmp_path):
    write_tree(tmp_path, {"train.py": "", "tools/run.sh": ""})
    venv.create(tmp_path / "tools/py311", with_pip=False, symlinks=True)
    # A "!" for a parent (the allow-list style) does not bring the environment back.
    assert included_files(tmp_path, "*\n!tools") == ["tools/run.sh"]
    assert included_files(tmp_path, "!tools/py311/pyvenv.cfg") == ["tools/py311/pyvenv.cfg", "tools/run.sh",
                                                                      "train.py"]
    assert "tools/py311/pyvenv.cfg" not in included_files(tmp_path, "!tools/py311/pyvenv.cfg\ntools/")
    with pytest.raises(ContextError, match="tools/py311/bin/python ->"):  # all of it, its outward links too
        included_files(tmp_path, "!tools/py311")


def test_output_directories_of_buildkit_py_are_left_out_wherever_they_are_with_a_note(tmp_path):
    """A marker, not a name: `tune --local --output anything` inside the trainer directory changes no build."""
    write_tree(tmp_path, {"train.py": "", "results/notes.txt": "mine", "buildkit-output/local_1/model/m.pt": "old"})
    make_output_dir(tmp_path / "runs/study-1")
    make_output_dir(tmp_path / "runs/study-1/trial-1")
    (tmp_path / "runs/study-1/trial-1/metrics.json").write_text("{}")
    make_output_dir(tmp_path / "results")  # the user's own directory, not empty: never marked
    assert not (tmp_path / "results" / OUTPUT_MARKER).exists()
    notes: list[str] = []
    assert included_files(tmp_path, render_dockerignore(None), notes) == ["results/notes.txt", "train.py"]
    assert notes == [f'runs/study-1/ left out: it holds outputs of buildkit-py runs ({OUTPUT_MARKER}); '
                     'a "!runs/study-1" line in .dockerignore keeps it']
    assert "runs/study-1/trial-1/metrics.json" in included_files(tmp_path, "!runs/study-1")
    # At the root it is the directory the user named: kept, but for the marked directories within.
    assert included_files(tmp_path / "runs/study-1", "") == [OUTPUT_MARKER]


# Unreadable and special entries.


def test_a_file_gone_since_the_listing_is_named(tmp_path):
    for check in (find_secrets, find_large_files):
        with pytest.raises(ContextError, match="gone.txt: No such file or directory") as caught:
            check(tmp_path, ["gone.txt"])
        assert caught.value.exit_code == 2


def test_a_path_too_long_for_the_system_is_named(tmp_path):
    name = "d" * 250
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(20):  # 5,000 characters: over PATH_MAX, made one level at a time
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with pytest.raises(ContextError, match="File name too long") as caught:
            included_files(tmp_path, "")
        assert name[:40] in str(caught.value) and len(str(caught.value)) < 500
    finally:
        os.close(fd)
        shutil.rmtree(tmp_path / name)


PERMISSION_PROBE = """
import sys
from pathlib import Path
from buildkit_py.pipeline.context import find_secrets
from buildkit_py.sources.walk import included_files
from buildkit_py.errors import ContextError
root = Path(sys.argv[1])
for ignore in ("", "private/"):
    try:
        print("kept", find_secrets(root, included_files(root, ignore)))
    except ContextError as exc:
        print(exc.exit_code, exc)
"""


def test_unreadable_directory_and_file_are_named(tmp_path):
    write_tree(tmp_path, {"train.py": "", "private/notes.txt": "", "locked.txt": ""})
    (tmp_path / "private").chmod(0)
    (tmp_path / "locked.txt").chmod(0)
    # Root reads everything: as root, the check runs without the capabilities that override file modes.
    confine = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"] if os.geteuid() == 0 else []
    try:
        proc = subprocess.run([*confine, sys.executable, "-c", PERMISSION_PROBE, str(tmp_path)], cwd=REPO,
                              env={"PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    finally:
        (tmp_path / "private").chmod(0o755)
    assert proc.stderr == ""
    assert proc.stdout.splitlines() == [f"2 cannot read {tmp_path}/private: Permission denied",
                                        f"2 cannot read {tmp_path}/locked.txt: Permission denied"]


def test_fifos_sockets_and_devices_are_left_out(tmp_path):
    write_tree(tmp_path, {"train.py": ""})
    os.mkfifo(tmp_path / "pipe")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        try:
            os.mknod(tmp_path / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
        except PermissionError:
            pass  # no CAP_MKNOD here: the FIFO and the socket still show the rule
        assert included_files(tmp_path, "") == ["train.py"]
        with staged_context(tmp_path, DOCKERFILE, "") as ctx:
            assert ctx.snapshot.files == ("train.py",)
        # Named anyway (swapped in after the listing): not opened, so nothing waits for a writer.
        assert find_secrets(tmp_path, ["pipe", "sock"]) == [] and find_large_files(tmp_path, ["pipe", "sock"]) == []


def test_staging_a_fifo_is_refused_not_waited_on(tmp_path):
    write_tree(tmp_path, {"train.py": ""})
    os.mkfifo(tmp_path / "launcher.fifo")
    with pytest.raises(ContextError, match="no longer a regular file"), \
            staged_context(tmp_path, DOCKERFILE, "launcher.fifo", extras=[("x.py", tmp_path / "launcher.fifo")]):
        pass
