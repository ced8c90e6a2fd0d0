"""Artifact Registry Python repositories as package indexes: an access token of Application Default Credentials (a
service-account key whose token_uri is the loopback token endpoint) reaches a loopback index that demands it, through
the build's netrc secret, for `lock`, BuildKit builds and Cloud Build (the build's service account, from the metadata
server), and is in no layer, argument, label, log line or lock. The real host pattern (*-python.pkg.dev) is found by
the plan; the loopback index is named in pip_google_auth."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import pytest
import yaml
from test_cloudbuild_e2e import cloud  # noqa: F401 - the Cloud Build stand-in's fixture
from test_lock_e2e import Index, make_wheel, push_base
from test_no_secrets import docker

from conftest import assert_secrets_absent, run_cli

LOGIN = "oauth2accesstoken"  # Artifact Registry's user for a token (adc.TOKEN_LOGIN), written out: what the service takes


def token_of(header: str | None) -> str | None:
    """The password of a Basic Authorization header whose user is Artifact Registry's token user."""
    if not header or not header.startswith("Basic "):
        return None
    user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    return password if user == LOGIN else None


@pytest.fixture
def private(tmp_path):
    """An index on loopback serving bkprivate 1.0, letting in only the tokens in its `accepted` (none at first)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "bkprivate", "1.0")
    gate: dict[str, set[str]] = {"accepted": set()}
    index = Index(wheels, lambda header: token_of(header) in gate["accepted"])
    index.gate = gate
    yield index
    index.close()


def trainer(root: Path, base: str, index_url: str, **extra) -> Path:
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "task.py").write_text("import bkprivate\nprint('bkprivate', bkprivate.VERSION)\n")
    (root / "requirements.txt").write_text(f"--extra-index-url {index_url}\nbkprivate==1.0\n")
    (root / "buildkit.yaml").write_text(yaml.safe_dump({
        "framework": "none", "python": "3.11", "base_image": base, "hypertune": False, "requirements": "requirements.txt",
        "trainer": {"module": "trainer.task"}, "pip_google_auth": ["127.0.0.1"], "image": f"ar-index/{root.name}",
        **extra}))
    return root


def cli(testenv, fake_env: dict, *args: str):
    return run_cli(*args, env={**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], **fake_env})


@pytest.fixture
def adc(fake):
    """The environment a command needs for Application Default Credentials from the loopback token endpoint."""
    import os

    return {"GOOGLE_APPLICATION_CREDENTIALS": os.environ["GOOGLE_APPLICATION_CREDENTIALS"]}


def test_lock_and_build_send_the_token_to_the_index_and_it_is_nowhere_in_the_image_or_lock(testenv, fake, adc, private,
                                                                                           tmp_path):
    base = push_base(testenv, f"{testenv['BUILDKIT_TEST_REGISTRY']}/ar-index/base:{uuid.uuid4().hex[:8]}", "ar")
    root = trainer(tmp_path / "app", base, private.url)
    private.gate["accepted"] = fake.tokens  # the token endpoint's own set: every token it issues is let in
    index_login = private.seen
    dockerfile = cli(testenv, adc, "dockerfile", "--dir", str(root))
    assert dockerfile.returncode == 0 and "--mount=type=secret,id=buildkit-netrc" in dockerfile.stdout, dockerfile.stderr
    plan = cli(testenv, adc, "resolve", "--dir", str(root), "--json")
    assert json.loads(plan.stdout)["google_indexes"] == ["127.0.0.1"], plan.stdout[-2000:]

    locked = cli(testenv, adc, "lock", "--dir", str(root))
    assert locked.returncode == 0, locked.stderr[-3000:]
    assert any(p.startswith("/simple/bkprivate") and ok for p, ok in index_login), index_login
    lock_text = (root / "buildkit.lock").read_text()
    assert ("bkprivate", "1.0") in [(p["name"], p["version"]) for p in
                                    yaml.safe_load(lock_text)["images"]["_base"]["packages"]]

    built = cli(testenv, adc, "build", "--dir", str(root), "--locked", "--network", "host", "--progress", "plain",
                "--json", "--no-cache")
    assert built.returncode == 0, built.stderr[-4000:]
    assert "an access token of trainer@fake-project.iam.gserviceaccount.com for 127.0.0.1" in built.stderr
    ref = json.loads(built.stdout)["tags"][0]
    ran = docker(testenv, "run", "--rm", "--entrypoint", "python", ref, "-c", "import bkprivate; print(bkprivate.VERSION)")
    assert ran.strip() == "1.0"
    files = [p for p, ok in index_login if ok and p.startswith("/files/")]
    assert len(files) >= 2, index_login  # lock's resolve (a range read at least) and the build's install both got in
    assert fake.tokens, "google-auth fetched no token from the key file's token_uri"
    saved = tmp_path / "image.tar"
    docker(testenv, "save", "-o", str(saved), ref)
    assert_secrets_absent(tuple(fake.tokens), (dockerfile.stdout, plan.stdout + plan.stderr, lock_text,
                                               locked.stdout + locked.stderr, built.stdout + built.stderr,
                                               docker(testenv, "history", "--no-trunc", ref),
                                               docker(testenv, "image", "inspect", ref)), saved)


def test_an_index_that_refuses_the_token_names_the_identity_and_the_reader_role(testenv, fake, adc, private, tmp_path):
    root = trainer(tmp_path / "app", "python:3.11-slim-bookworm", private.url)  # no token accepted: 403 for all
    locked = cli(testenv, adc, "lock", "--dir", str(root))
    assert locked.returncode != 0 and "Traceback" not in locked.stderr, locked.stderr
    said = locked.stderr
    assert "trainer@fake-project.iam.gserviceaccount.com" in said and "roles/artifactregistry.reader" in said, said
    assert any(not ok for _, ok in private.seen)
    assert not any(token in said for token in fake.tokens)
    assert "--member serviceAccount:trainer@fake-project.iam.gserviceaccount.com" in said, said
    # Resolved before the engine builds (exit 2), or offline, refused by the build's own install (exit 6).
    built = cli(testenv, adc, "build", "--dir", str(root), "--network", "host", "--progress", "plain")
    assert built.returncode in (2, 6) and "roles/artifactregistry.reader" in built.stderr, built.stderr[-3000:]
    assert "serviceAccount:trainer@fake-project.iam.gserviceaccount.com" in built.stderr.splitlines()[-1]


@pytest.mark.parametrize("command", [("lock",), ("build", "--network", "host", "--progress", "plain")])
def test_no_credentials_exit_9_saying_how_to_log_in_before_the_index_is_asked(testenv, private, tmp_path, command):
    root = trainer(tmp_path / "app", "python:3.11-slim-bookworm", private.url)
    proc = cli(testenv, {"GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "missing.json")}, *command, "--dir", str(root))
    assert proc.returncode == 9, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert "gcloud auth application-default login" in line and "roles/artifactregistry.reader" in line, line
    assert "127.0.0.1" in line and not private.seen


def test_the_legacy_builder_refuses_before_a_token_is_minted(testenv, fake, adc, private, tmp_path):
    root = trainer(tmp_path / "app", "python:3.11-slim-bookworm", private.url)
    proc = cli(testenv, {**adc, "BUILDKIT_PY_OFFLINE": "1"}, "build", "--dir", str(root), "--builder", "legacy")
    assert proc.returncode == 6 and "buildkit-netrc" in proc.stderr and "--builder buildkit" in proc.stderr, proc.stderr
    assert not fake.tokens and not private.seen


@pytest.mark.parametrize("files, hosts", [
    ({"buildkit.yaml": "pip_index_url: https://us-python.pkg.dev/p/r/simple/\n"}, ["us-python.pkg.dev"]),
    ({"buildkit.yaml": "pip_conf: pip.conf\n", "pip.conf": "[global]\nextra-index-url = "
      "https://europe-west4-python.pkg.dev/p/r/simple/ https://pypi.example.com/simple\n"},
     ["europe-west4-python.pkg.dev"]),
    ({"buildkit.yaml": "requirements: requirements.txt\n",
      "requirements.txt": "--extra-index-url https://asia-python.pkg.dev/p/r/simple/\nsix\n"}, ["asia-python.pkg.dev"]),
    ({"buildkit.yaml": "pip: ['inhouse @ https://us-central1-python.pkg.dev/p/r/inhouse-1.0-py3-none-any.whl']\n"},
     ["us-central1-python.pkg.dev"]),
    ({"buildkit.yaml": "pip_google_auth: [pypi.internal.example.com]\n"}, ["pypi.internal.example.com"]),
    ({"buildkit.yaml": "pip_index_url: https://pypi.example.com/simple/\n"}, []),
    ({"buildkit.yaml": "pip_index_url: https://evil.example.com/us-python.pkg.dev/simple/\n"}, []),
])
def test_the_plan_finds_the_indexes_that_get_a_token(project, files, hosts):
    from buildkit_py.config import load_config
    from buildkit_py.pipeline.plan import make_plan
    from buildkit_py.pipeline.render import render_dockerfile

    root = project({"trainer/__init__.py": "", "trainer/task.py": "", **files,
                    "buildkit.yaml": "framework: none\npython: '3.11'\ntrainer: {module: trainer.task}\n"
                                     + files["buildkit.yaml"]})
    config = load_config(root / "buildkit.yaml")
    plan = make_plan(config)
    assert list(plan.google_indexes) == hosts
    assert ("--mount=type=secret,id=buildkit-netrc" in render_dockerfile(plan, root=root, buildkit=True)) == bool(hosts)


@pytest.mark.parametrize("value, said", [
    ("[US-PYTHON.PKG.DEV]", "lower case"), ("[' a.example']", "lower case"), ("['a.example\\n']", "lower case"),
    ("['a.example\\u2028']", "lower case"), ("a.example", "list"), ("[{a: 1}]", "string"),
    ("['" + "a" * 70000 + "']", "pip_google_auth"), ("['https://a.example/simple']", "lower case"),
], ids=["upper", "space", "newline", "u2028", "not-a-list", "mapping", "70000", "url"])
def test_pip_google_auth_takes_host_names_only(project, value, said):
    root = project({"trainer/__init__.py": "", "trainer/task.py": "",
                    "buildkit.yaml": f"framework: none\ntrainer: {{module: trainer.task}}\npip_google_auth: {value}\n"})
    proc = run_cli("dockerfile", "--dir", str(root))
    assert proc.returncode == 2 and "pip_google_auth" in proc.stderr and said in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and len(proc.stderr) < 2000


def test_cloud_build_mints_the_token_of_the_builds_service_account_where_it_runs(testenv, cloud, private, tmp_path):  # noqa: F811 (the fixture)
    from google.cloud.devtools import cloudbuild_v1

    standin = cloud["standin"]
    private.gate["accepted"] = {standin.metadata_token}
    root = trainer(tmp_path / "app", "python:3.11-slim-bookworm", private.url, builder="cloudbuild", network="host",
                   cloudbuild={"project": "fake-project"})
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/ar-index/cloudbuild-{uuid.uuid4().hex[:8]}"
    proc = run_cli("build", "--dir", str(root), "--image", image, "--progress", "plain", "--json", env=cloud["env"])
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert standin.metadata_asked == [True]  # one token, asked as the metadata server wants
    assert any(ok and p.startswith("/files/bkprivate") for p, ok in private.seen), private.seen
    (body,) = standin.bodies
    cloudbuild_v1.Build.from_json(json.dumps(body))
    request = json.dumps(body)
    assert "id=buildkit-netrc" in request and "metadata.google.internal" in request
    ref = json.loads(proc.stdout)["tags"][0]
    docker(testenv, "pull", ref)
    saved = tmp_path / "image.tar"
    docker(testenv, "save", "-o", str(saved), ref)
    kept = [v.decode(errors="replace") for v in cloud["gcs"].objects.values()]  # the context and the build's log
    assert_secrets_absent((standin.metadata_token,), (request, proc.stdout + proc.stderr, *kept,
                                                      docker(testenv, "history", "--no-trunc", ref)), saved)


def test_cloud_build_takes_an_artifact_registry_pip_index_url_without_secret_manager(cloud, tmp_path):  # noqa: F811 (the fixture)
    root = tmp_path / "app"
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "task.py").write_text("print('hi')\n")
    (root / "buildkit.yaml").write_text(yaml.safe_dump({
        "framework": "none", "python": "3.11", "base_image": "python:3.11-slim-bookworm", "hypertune": False,
        "trainer": {"module": "trainer.task"}, "builder": "cloudbuild", "cloudbuild": {"project": "fake-project"},
        "pip_index_url": "https://us-python.pkg.dev/fake-project/internal/simple/"}))
    from buildkit_py.builders.cloudbuild import settings
    from buildkit_py.config import load_config

    with pytest.MonkeyPatch.context() as patch:
        for name, value in cloud["env"].items():
            patch.setenv(name, value)
        conf = settings(load_config(root / "buildkit.yaml"), None)
    assert dict(conf.index_files)["buildkit-pip-conf"] == \
        "[global]\nindex-url = https://us-python.pkg.dev/fake-project/internal/simple/\n"
    assert not conf.secrets
    with_login = root / "buildkit.yaml"
    with_login.write_text(with_login.read_text().replace("https://us-python", "https://u:Pw-9@us-python"))
    proc = run_cli("build", "--dir", str(root), env=cloud["env"])
    assert proc.returncode == 2 and "cloudbuild.pip_conf_secret" in proc.stderr and "Pw-9" not in proc.stderr, proc.stderr


def test_buildah_sends_the_token_from_the_same_netrc_secret(testenv, fake, adc, private, tmp_path):
    private.gate["accepted"] = fake.tokens
    root = trainer(tmp_path / "app", "python:3.11-slim-bookworm", private.url)
    env = {**{k: v for k, v in testenv.items() if k != "DOCKER_HOST"}, **adc, "BUILDKIT_PY_OFFLINE": "1"}
    proc = run_cli("build", "--builder", "buildah", "--dir", str(root), "--network", "host", "--progress", "plain",
                   "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert any(ok and p.startswith("/files/bkprivate") for p, ok in private.seen), private.seen
    ref = json.loads(proc.stdout)["tags"][0]
    import subprocess

    history = subprocess.run(["buildah", "inspect", "--type", "image", ref], capture_output=True, text=True, check=True)
    assert fake.tokens and not any(t in history.stdout + proc.stdout + proc.stderr for t in fake.tokens)
