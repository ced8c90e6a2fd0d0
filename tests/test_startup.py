"""Start-up cost of the command line: the modules that only some commands need (the Docker SDK and
requests, Google's clients, the job, index and packaging code) are not imported by the CLI itself,
nor by `dockerfile`, the command the edit loop and Makefiles run most. Importing one of them eagerly
costs every command tens of milliseconds (issue 13's target: `dockerfile` < 0.3 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

QUICKSTART = REPO / "examples" / "quickstart"
# Top-level packages and our own modules that no fast command needs.
HEAVY = ("docker", "requests", "urllib3", "google.auth", "google.cloud.aiplatform", "http.client",
         "buildkit_py.jobs", "buildkit_py.catalog.index_metadata", "buildkit_py.inference", "buildkit_py.pipeline.packaging",
         "buildkit_py.pipeline.backend", "buildkit_py.tools.doctor", "buildkit_py.catalog.executors")
# What only building, pushing or writing CI/Make files needs: the commands that compute a tag or render do not load it.
BUILD_ONLY = ("buildkit_py.oci.client", "buildkit_py.oci.credentials", "buildkit_py.oci.image", "buildkit_py.oci.remote",
              "buildkit_py.oci.referrers", "buildkit_py.google.storage", "buildkit_py.tools.ci", "buildkit_py.tools.makefile",
              "buildkit_py.builders.buildah", "buildkit_py.builders.legacy", "concurrent.futures", "packaging.requirements")
# What `--version` needs none of: the API and everything it imports (issue 20: --version < 60 ms).
API = ("yaml", "jinja2", "packaging", "buildkit_py.config", "buildkit_py.pipeline.plan", "buildkit_py.pipeline.render",
       "buildkit_py.pipeline.build", "buildkit_py.catalog.matrix", "buildkit_py.pipeline.context")

PROBE = """
import io, json, sys
from contextlib import redirect_stdout
import buildkit_py.cli as cli
after_import = sorted(sys.modules)
code = None
if len(sys.argv) > 1:
    with redirect_stdout(io.StringIO()):
        code = cli.main(sys.argv[1:])
print(json.dumps({"import": after_import, "command": sorted(sys.modules), "code": code}))
"""


def loaded(*args: str, path: str | None = None, cache: os.PathLike | None = None) -> dict:
    """What the CLI and then the command ARGS import. cache: the cache directory (a fresh one: nothing kept by an
    earlier run serves the command)."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": path or os.environ.get("PATH", "/usr/bin:/bin"),
                               "HOME": str(REPO / ".testenv"),
                               **({"BUILDKIT_PY_CACHE_DIR": str(cache)} if cache else {})})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def among(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def heavy(modules: list[str]) -> list[str]:
    return among(modules, HEAVY)


def test_importing_the_cli_loads_no_heavy_module():
    assert heavy(loaded()["import"]) == []


def test_the_dockerfile_command_loads_no_heavy_module(tmp_path):
    found = loaded("dockerfile", "--config", str(QUICKSTART / "buildkit.yaml"), cache=tmp_path)
    assert found["code"] in (0, None)
    assert "buildkit_py.pipeline.render" in found["command"]  # the probe did run the command
    assert heavy(found["command"]) == []
    assert among(found["command"], BUILD_ONLY) == []
    # The same dry run again is the one kept: none of the stages loads (issue 41).
    again = loaded("dockerfile", "--config", str(QUICKSTART / "buildkit.yaml"), cache=tmp_path)
    assert again["code"] in (0, None) and "buildkit_py.api.dockerfiles" in again["command"]
    assert among(again["command"], API + HEAVY + BUILD_ONLY) == [], among(again["command"], API + HEAVY + BUILD_ONLY)


def test_version_loads_neither_the_api_nor_what_it_imports():
    found = loaded("--version")
    assert found["code"] == 0
    assert among(found["command"], API + HEAVY) == []


def test_the_warm_process_client_loads_no_typing_json_or_command_code():
    """The console script's front door (cli.warm), which every command typed at a terminal starts with, imports
    what pip's script template does (re) and its own few modules: not typing (which the package's __init__ used
    to import), json, nor any of the commands' code."""
    probe = ("import re, sys\nbefore = set(sys.modules)\nimport buildkit_py.cli.warm\n"
             "print(sorted(set(sys.modules) - before))")
    proc = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    new = eval(proc.stdout)
    assert "buildkit_py.cli.warm" in new  # the probe did import it
    assert among(new, ("typing", "json", "importlib", "argparse", "buildkit_py.api", "buildkit_py.pipeline",
                       "buildkit_py.cli.parser", "buildkit_py.cli.output")) == [], new


def test_print_image_uri_loads_only_what_the_content_tag_needs_and_runs_no_git(tmp_path):
    """The content tag is plan, render and the context's hash: no registry client, no other build backend, no
    git (the git tag is not printed). A `git` first on PATH records each run."""
    marker = tmp_path / "git-ran"
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {marker}\nexit 1\n")
    fake.chmod(0o755)
    path = f"{fake.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    config = str(QUICKSTART / "buildkit.yaml")
    found = loaded("print", "image-uri", "--config", config, "--image", "127.0.0.1:5000/quick", path=path)
    assert found["code"] == 0 and "buildkit_py.pipeline.context" in found["command"]  # the probe did hash the context
    assert among(found["command"], BUILD_ONLY + HEAVY) == []
    assert not marker.exists()
    # The check can fail: the tags include the git tag, so `print tags` runs git.
    assert loaded("print", "tags", "--config", config, "--image", "127.0.0.1:5000/quick", path=path)["code"] == 0
    assert marker.exists()


def test_the_probe_would_see_a_heavy_import():
    """The check can fail: a command that needs the job code does load it."""
    found = loaded("executor", "list")
    assert "buildkit_py.catalog.executors" in heavy(found["command"])


@pytest.mark.parametrize("name, module", [("Executor", "buildkit_py.catalog.executors"), ("RunResult", "buildkit_py.jobs.local"),
                                          ("PushResult", "buildkit_py.oci.client")])
def test_the_api_still_exports_the_lazily_imported_types(name, module):
    from buildkit_py import api

    value = getattr(api, name)
    assert value.__module__ == module and value.__name__ == name
    assert name in api.__all__
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        api.Nothing  # noqa: B018


def test_submitting_needs_no_extra_and_its_clients_load_only_when_used():
    """google-auth and requests are core dependencies (issue 19): `pip install buildkit-py` then `submit` works.
    Start-up stays fast because only the commands that call Google import them (the tests above)."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {Requirement(r).name for r in project["dependencies"]}
    assert {"google-auth", "requests"} <= core
    assert all(not project["optional-dependencies"][alias] for alias in ("vertex", "gcp"))  # kept empty, for old commands
    # Writing a job spec sends nothing: google-auth stays unloaded.
    found = loaded("job", "--config", str(QUICKSTART / "buildkit.yaml"), "--image", "europe-docker.pkg.dev/p/r/i:t",
                   "--project", "my-project")
    assert found["code"] == 0 and "buildkit_py.jobs.vertex" in found["command"]
    assert not any(m == "google.auth" or m.startswith("google.auth.") for m in found["command"])


def test_no_module_of_ours_compiles_a_regular_expression_at_import():
    """Regular expressions are compiled on first use (issue 41): every module's own patterns are lazy_pattern
    values, which stay source text until a command uses them. The launcher runs in the image, apart."""
    import importlib
    import pkgutil
    import re

    import buildkit_py
    from buildkit_py.patterns import LazyPattern

    compiled, lazy = [], 0
    for info in pkgutil.walk_packages(buildkit_py.__path__, "buildkit_py."):
        if info.name.startswith(("buildkit_py.launcher", "buildkit_py.__main__")):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern) and getattr(module, "__name__", "") == info.name:
                compiled.append(f"{info.name}.{name}")
            lazy += isinstance(value, LazyPattern)
    assert compiled == []
    assert lazy > 100  # the walk did see the modules' patterns


def test_a_lazy_pattern_compiles_once_on_first_use_then_is_the_compiled_pattern():
    import re

    from buildkit_py.patterns import LazyPattern, lazy_pattern

    word = lazy_pattern(r"[a-z]+", re.IGNORECASE)
    assert isinstance(word, LazyPattern) and "match" not in vars(word)  # nothing compiled yet
    assert word.fullmatch("AbC") and not word.fullmatch("a1")
    assert isinstance(vars(word)["match"].__self__, re.Pattern)  # from now on the compiled pattern's own methods
    assert word.flags & re.IGNORECASE and word.pattern == "[a-z]+" and word.sub("x", "ab1cd") == "x1x"
    with pytest.raises(AttributeError):
        word.nothing  # noqa: B018
