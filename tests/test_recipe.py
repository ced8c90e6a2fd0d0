"""Kept recipes: what config -> plan -> render made of a project is used again only while every path those stages
read or looked for, the project and flags, the working directory, the environment and buildkit-py's own files are
as they were; a code-only edit's build --push then loads none of those stages; and nothing else changes what a
build does or says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from test_fastpath_e2e import build, fetch, trainer

from buildkit_py.api.project import Project, load
from buildkit_py.fsutil import CACHE_ENV, consulted
from buildkit_py.pipeline import fastpath, recipe
from buildkit_py.pipeline.build import make_recipe, prepare
from buildkit_py.pipeline.buildtypes import BuildOptions
from conftest import REPO

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text("print('one')\n")
    (root / "requirements.txt").write_text("six==1.16.0\n")
    (root / "pip.conf").write_text("[global]\nindex-url = http://127.0.0.1:1/simple\n")
    (root / "ca.pem").write_text(PEM)
    (root / "buildkit.yaml").write_text("framework: none\npython: '3.11'\ngpu: false\nrequirements: requirements.txt\n"
                                        "pip_conf: pip.conf\nca_cert: ca.pem\ntrainer:\n  module: trainer.task\n")
    return root


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("BUILDKIT_PY_MATRIX_OVERLAY", str(tmp_path / "overlay.yaml"))
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


PUSH = BuildOptions(push=True)


def _keep(root: Path, options: BuildOptions = PUSH) -> tuple[str, recipe.Recipe]:
    project = Project(directory=root)
    key = recipe.key(project, options.locked)
    with consulted() as paths:
        config = load(project)
        made = make_recipe(config, prepare(config, locked=options.locked))
    recipe.keep(key, made, paths, None)
    return key, made


def test_a_kept_recipe_holds_through_code_edits_and_is_the_same_recipe(isolated):
    root = _project(isolated)
    key, made = _keep(root)
    assert recipe.kept(key, None) == made
    (root / "trainer" / "task.py").write_text("print('two')\n")  # code: not an input of config -> plan -> render
    (root / "trainer" / "new.py").write_text("")
    assert recipe.kept(key, None) == made
    assert recipe.kept(key, None).resolved() == made.resolved()


@pytest.mark.parametrize("change", [
    "edit the config", "edit the requirements", "requirements become a symlink", "add a .dockerignore",
    "edit the pip.conf", "edit the CA bundle", "write a matrix overlay", "add a lock", "remove the requirements",
])
def test_any_change_to_what_the_stages_read_makes_them_run_again(isolated, change):
    root = _project(isolated)
    key, _ = _keep(root)
    if change == "edit the config":
        (root / "buildkit.yaml").write_text((root / "buildkit.yaml").read_text() + "hypertune: false\n")
    elif change == "edit the requirements":
        (root / "requirements.txt").write_text("six==1.17.0\n")
    elif change == "requirements become a symlink":  # the same bytes, through a link: the config checks where it leads
        (root / "deps.txt").write_text("six==1.16.0\n")
        (root / "requirements.txt").unlink()
        (root / "requirements.txt").symlink_to("deps.txt")
    elif change == "add a .dockerignore":
        (root / ".dockerignore").write_text("data/\n")
    elif change == "edit the pip.conf":
        (root / "pip.conf").write_text("[global]\nindex-url = http://127.0.0.1:2/simple\n")
    elif change == "edit the CA bundle":
        (root / "ca.pem").write_text(PEM + PEM)
    elif change == "write a matrix overlay":
        (isolated / "overlay.yaml").write_text("frameworks: {}\n")
    elif change == "add a lock":
        (root / "buildkit.lock").write_text("{}\n")
    elif change == "remove the requirements":
        (root / "requirements.txt").unlink()
    assert recipe.kept(key, None) is None


def test_the_key_covers_flags_lock_directory_and_environment(isolated, monkeypatch):
    root = _project(isolated)
    key, _ = _keep(root)
    assert recipe.key(Project(directory=root), False) == key
    assert recipe.key(Project(directory=root, overrides=(("python", "3.12"),)), False) != key
    assert recipe.key(Project(directory=root, variant="cu126"), False) != key
    assert recipe.key(Project(directory=root), True) != key  # --locked: the lock must be there and current
    monkeypatch.setenv("DOCKER_HOST", "unix:///nowhere")  # the engine: only the build stage talks to it
    for name, value in (("_", "/usr/bin/make"), ("OLDPWD", "/"), ("SHLVL", "3")):  # the shell's, per command
        monkeypatch.setenv(name, value)
    assert recipe.key(Project(directory=root), False) == key
    monkeypatch.setenv("PIP_CERT", str(root / "ca.pem"))  # a CA bundle named by the environment
    assert recipe.key(Project(directory=root), False) != key
    monkeypatch.delenv("PIP_CERT")
    monkeypatch.chdir(root)  # a relative --dir or --config means another directory
    assert recipe.key(Project(directory=root), False) != key


def test_a_broken_or_foreign_kept_recipe_is_not_used(isolated):
    root = _project(isolated)
    key, _ = _keep(root)
    path = next((isolated / "cache" / "recipes").glob("*.json"))
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "key": "0" * 64}))
    assert recipe.kept(key, None) is None
    path.write_text("{not json")
    assert recipe.kept(key, None) is None


def test_a_kept_recipe_others_may_change_is_not_used(isolated):
    root = _project(isolated)
    key, made = _keep(root)
    path = next((isolated / "cache" / "recipes").glob("*.json"))
    assert recipe.kept(key, None) == made
    path.chmod(0o666)  # a cache directory shared with other users: its file is not trusted
    assert recipe.kept(key, None) is None


@pytest.mark.parametrize("optional", [True, False], ids=["optional files there", "optional files absent"])
def test_every_file_the_stages_open_or_look_for_is_consulted(isolated, monkeypatch, optional):
    """The stages' own reads, seen from outside: every file under the test's directory that loading the config,
    planning, locking, rendering and reading the secrets opened or stat()ed (there or not) is among the consulted
    paths, so that a kept recipe cannot outlive a change to it. Directories are left out (no listing is an input)."""
    root = _project(isolated)
    if optional:
        (root / ".dockerignore").write_text("*.log\n")
        (root / "Dockerfile.j2").write_text("{% extends base_template %}\n")
        (root / "buildkit.yaml").write_text((root / "buildkit.yaml").read_text() + "template: Dockerfile.j2\n")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(isolated / "absent.pem"))
    seen: set[str] = set()
    recording = [False]

    def note(path) -> None:
        if recording[0] and isinstance(path, (str, os.PathLike)):
            seen.add(os.path.abspath(os.fspath(path)))

    sys.addaudithook(lambda event, args: note(args[0]) if event == "open" else None)
    for name in ("stat", "lstat"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda path, *a, _real=real, **k: (note(path), _real(path, *a, **k))[1])
    recording[0] = True
    try:
        with consulted() as paths:
            config = load(Project(directory=root))
            make_recipe(config, prepare(config))
    finally:
        recording[0] = False
    mine = {p for p in seen if p.startswith(str(isolated)) and not p.startswith(str(isolated / "cache"))
            and not os.path.isdir(p)}
    assert {str(root / n) for n in ("buildkit.yaml", "requirements.txt", "pip.conf", "ca.pem", ".dockerignore")} <= mine
    assert mine <= set(paths), sorted(mine - set(paths))


# What a code edit's build --push never loads: the config, plan and render stages, the builders' clients, and
# http.client with the email package it reads headers with (clients/http1.py speaks to the registry and the engine).
PIPELINE = {"yaml", "jinja2", "tomllib", "buildkit_py.config", "buildkit_py.pipeline.plan", "buildkit_py.catalog.matrix",
            "buildkit_py.pipeline.render", "buildkit_py.pipeline.lock", "buildkit_py.pipeline.build",
            "buildkit_py.pipeline.resolution", "buildkit_py.inference", "docker", "requests", "http.client",
            "email.parser"}


def _modules_after(testenv, root: Path, cache: Path, *extra: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """A build --push of ROOT in a fresh interpreter, as `build` (test_fastpath_e2e) runs it, and its modules."""
    script = ("import sys, json\nfrom buildkit_py.cli import main\ncode = main(sys.argv[1:])\n"
              "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\nsys.exit(code)\n")
    env = {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(REPO / ".testenv"),
           **{k: os.environ[k] for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE") if k in os.environ},
           **testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "BUILDKIT_PY_CACHE_DIR": str(cache)}
    proc = subprocess.run([sys.executable, "-c", script, "build", "--config", str(root / "buildkit.yaml"), "--network",
                           "host", "--progress", "plain", "--json", "--push", *extra], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=600)
    return proc, json.loads(proc.stderr.strip().splitlines()[-1])


def test_a_code_edit_loads_no_config_plan_or_render_and_says_a_full_build_once(testenv, tmp_path):
    root = trainer(tmp_path, "quickstart")
    cache = tmp_path / "cache"
    (root / "buildkit.yaml").write_text((root / "buildkit.yaml").read_text()
                                        + f"image: {testenv['BUILDKIT_TEST_REGISTRY']}/recipe/{tmp_path.name}\n")
    first, _ = _modules_after(testenv, root, cache)
    assert first.returncode == 0, first.stderr
    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write("# an edit\n")
    proc, modules = _modules_after(testenv, root, cache)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["fast_path"] is not None and result["plan"] == json.loads(first.stdout)["plan"]
    loaded = PIPELINE & set(modules)
    assert not loaded, loaded
    status, _, headers = fetch(testenv["BUILDKIT_TEST_REGISTRY"], f"recipe/{tmp_path.name}/manifests/"
                               f"{result['tags'][0].rsplit(':', 1)[1]}", "HEAD")
    assert status == 200 and headers["Docker-Content-Digest"] == result["pushed"][0]["digest"]
    # A record that no longer matches (as when another recipe pushed to this repository): the kept recipe's door
    # finds the build is a full one and says why; the full build then neither tries nor says it again.
    repository = f"{testenv['BUILDKIT_TEST_REGISTRY']}/recipe/{tmp_path.name}"
    env = {CACHE_ENV: str(cache)}
    with _env(env):
        record = fastpath.load_record(repository, None)
        fastpath.save_record(replace(record, parts=tuple((n, "0" * 64 if n == "plan" else v) for n, v in record.parts)))
    with (root / "trainer" / "task.py").open("a") as handle:
        handle.write("# another edit\n")
    again = build(testenv, root, cache)
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("full build") == 1, again.stderr
    assert json.loads(again.stdout)["fast_path"] is None


@contextmanager
def _env(values: dict[str, str]):
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_a_new_tag_finds_the_same_kept_recipe(testenv, tmp_path):
    """A CI tags each push with its commit: the tags are outputs, so the edit takes the fast path all the same, loads
    nothing of the pipeline, and the new tag names the appended image."""
    root = trainer(tmp_path, "quickstart")
    cache = tmp_path / "cache"
    repository = f"{testenv['BUILDKIT_TEST_REGISTRY']}/recipe/{tmp_path.name}"
    (root / "buildkit.yaml").write_text((root / "buildkit.yaml").read_text() + f"image: {repository}\n")
    first, _ = _modules_after(testenv, root, cache, "--tag", f"{repository}:ci-1")
    assert first.returncode == 0, first.stderr
    for number in (2, 3):
        with (root / "trainer" / "task.py").open("a") as handle:
            handle.write(f"# edit {number}\n")
        proc, modules = _modules_after(testenv, root, cache, "--tag", f"{repository}:ci-{number}")
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result["fast_path"] is not None, proc.stderr
        assert not PIPELINE & set(modules), PIPELINE & set(modules)
        assert f"{repository}:ci-{number}" in result["tags"] and f"{repository}:ci-{number - 1}" not in result["tags"]
        status, _, headers = fetch(testenv["BUILDKIT_TEST_REGISTRY"], f"recipe/{tmp_path.name}/manifests/ci-{number}",
                                   "HEAD")
        assert status == 200 and headers["Docker-Content-Digest"] == result["pushed"][0]["digest"]


def test_kept_tags_follow_the_command_only_where_they_were_its_own(isolated):
    root = _project(isolated)
    project = Project(directory=root, overrides=(("tags", ["127.0.0.1:5000/a/b:one"]),))
    key = recipe.key(Project(directory=root), False)
    with consulted() as paths:
        config = load(project)
        made = make_recipe(config, prepare(config))
    recipe.keep(key, made, paths, ("127.0.0.1:5000/a/b:one",))
    assert recipe.kept(key, ("127.0.0.1:5000/a/b:one",)) == made
    assert [str(t) for t in recipe.kept(key, ("127.0.0.1:5000/a/b:two", "127.0.0.1:5000/c")).tags] == [
        "127.0.0.1:5000/a/b:two", "127.0.0.1:5000/c"]
    assert recipe.kept(key, None) is None  # the config's own tags (none here) are not known from the recipe
    assert recipe.kept(key, ("Not A Ref",)) is None  # the config's check says what is wrong with it
    recipe.keep(key, replace(made, tags=()), paths, ("127.0.0.1:5000/a/b:one",))  # tags not the command's (a variant's)
    assert recipe.kept(key, ("127.0.0.1:5000/a/b:one",)) is not None
    assert recipe.kept(key, ("127.0.0.1:5000/a/b:two",)) is None
