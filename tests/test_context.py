from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from buildkit_py.context import FIXED_MTIME, find_secrets, included_files, staged_context
from buildkit_py.errors import ContextError
from buildkit_py.render import render_dockerignore

DOCKERFILE = "FROM python:3.11-slim\nCOPY . /app\n"
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
}


@pytest.mark.parametrize("name", IGNORE_CASES)
def test_dockerignore_semantics(tmp_path, name):
    ignore, files, kept = IGNORE_CASES[name]
    write_tree(tmp_path, {f: "x" for f in files})
    assert included_files(tmp_path, ignore) == sorted(kept)


@pytest.mark.parametrize("ignore", ["[abc", "!", "foo\\"])
def test_invalid_patterns_are_refused(tmp_path, ignore):
    with pytest.raises(ContextError, match="dockerignore"):
        included_files(tmp_path, ignore)


def test_default_ignores_and_user_lines(project):
    root = project({
        "train.py": "",
        "data.csv": "",
        "keep.csv": "",
        ".git/config": "",
        ".venv/bin/python": "",
        "pkg/__pycache__/m.cpython-311.pyc": "",
        ".env": "TOKEN=1",
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


def test_look_alikes_are_not_secrets(tmp_path):
    write_tree(tmp_path, {
        "certs/ca.pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        "config.json": '{"lr": 0.1}',
        "keys/id_rsa.pub": "ssh-rsa AAAA",
        "model.p12": b"\x00\x01binary",
        "env.py": "",
        # Only a bounded prefix is read: a key beyond the first 64 KiB is not seen.
        "big.bin": b"\0" * (1 << 20) + PEM_KEY.encode(),
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


def test_allowed_secret_goes_through_others_still_refused(tmp_path):
    write_tree(tmp_path, {"keys/id_rsa": "k", "tests/fixtures/fake.pem": PEM_KEY})
    with pytest.raises(ContextError) as caught, staged_context(tmp_path, DOCKERFILE, "", allow_secrets=["tests/fixtures/*"]):
        pass
    assert "keys/id_rsa" in str(caught.value) and "fake.pem" not in str(caught.value)
    with staged_context(tmp_path, DOCKERFILE, "", allow_secrets=["tests/fixtures/*", "keys/id_rsa"]) as ctx:
        assert ctx.files == ("keys/id_rsa", "tests/fixtures/fake.pem")


def test_ignored_secrets_are_not_reported(tmp_path):
    write_tree(tmp_path, {"train.py": "", ".env": "A=1", "keys/id_rsa": "k"})
    with staged_context(tmp_path, DOCKERFILE, render_dockerignore("keys/")) as ctx:
        assert ctx.files == ("train.py",)


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
        assert staged == list(ctx.files) == ["pkg/m.py", "run.sh", "train.py"]
        assert (ctx.directory / "pkg/m.py").read_text() == "x = 1"
        assert (ctx.directory / "run.sh").stat().st_mode & 0o777 == 0o755
        assert (ctx.directory / "train.py").stat().st_mode & 0o777 == 0o644
        assert {p.stat().st_mtime for p in ctx.directory.rglob("*")} == {FIXED_MTIME}
        assert ctx.dockerfile.read_text() == DOCKERFILE
        assert ctx.dockerfile.parent == ctx.directory.parent
        assert len(ctx.digest) == 64


def stage_digest(root: Path, dockerfile: str = DOCKERFILE, ignore: str = "ignored/") -> str:
    with staged_context(root, dockerfile, ignore) as ctx:
        return ctx.digest


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
