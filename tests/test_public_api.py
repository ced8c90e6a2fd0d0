"""The Python API (`import buildkit_py as bk`, issue 23): its surface, documented and typed; lazy imports; typed
errors for hostile input, with the messages the command line gives for the same values; results and progress that
render escaped HTML in Jupyter; a quiet mode and the logging mode."""

from __future__ import annotations

import dataclasses
import html
import importlib
import inspect
import io
import json
import logging
import re
import subprocess
import sys
import warnings

import pytest

import buildkit_py as bk
from buildkit_py import api, cli
from buildkit_py.api.project import options_from
from buildkit_py.errors import BuildkitError, ConfigError
from buildkit_py.progress import MODES, JsonReporter, NotebookReporter, QuietReporter, Reporter, reporter
from conftest import REPO

QUICKSTART = REPO / "examples" / "quickstart"
CALLS = ("resolve", "dockerfile", "build", "push", "package", "job", "plan", "submit", "cancel", "logs", "autopackage",
         "tune")
HOSTILE = "<script>alert('x')</script>\x1b[31m\u2028"


def test_the_package_gives_the_calls_and_imports_nothing_until_one_is_used():
    assert set(CALLS) | {"__version__"} == set(bk.__all__)
    probe = ("import sys, buildkit_py as bk; print(sorted(m for m in sys.modules if m.startswith(('buildkit_py.', 'yaml', "
             "'jinja2', 'docker', 'requests')))); print(bk.api.Project.__module__); "
             "import buildkit_py.pipeline.build, buildkit_py.pipeline.plan; "
             "print(bk.build.__module__, bk.plan.__module__, bk.autopackage.__module__)")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    first, project, second = proc.stdout.splitlines()
    assert first == "[]" and project == "buildkit_py.api.project"  # bk.api before any call
    # Two calls share their names with modules: importing those modules leaves bk's names the calls.
    assert second == "buildkit_py.api.builds buildkit_py.api.jobs buildkit_py.api.autopackaging"


def test_the_api_package_lists_each_name_once_and_finds_each():
    assert sorted(api.__all__) == sorted(api._HOMES)
    for name in api.__all__:
        assert getattr(api, name) is not None
    for name in CALLS:
        assert getattr(bk, name) is getattr(api, name)


def _public() -> list[tuple[str, object]]:
    names = [(f"bk.{n}", getattr(bk, n)) for n in CALLS]
    return names + [(f"api.{n}", getattr(api, n)) for n in api.__all__ if callable(getattr(api, n))]


@pytest.mark.parametrize("name, obj", _public(), ids=[n for n, _ in _public()])
def test_every_public_name_has_a_docstring_and_type_hints(name, obj):
    doc = inspect.getdoc(obj) or ""
    generated = inspect.isclass(obj) and doc.startswith(obj.__name__ + "(")  # dataclass's own, from its fields
    assert doc.strip() and not generated, f"{name} has no docstring"
    if inspect.isfunction(obj):
        signature = inspect.signature(obj)
        missing = [p.name for p in signature.parameters.values() if p.annotation is inspect.Parameter.empty]
        assert not missing, f"{name}: no type hint for {missing}"
        assert signature.return_annotation is not inspect.Signature.empty, f"{name}: no return type"
    if dataclasses.is_dataclass(obj):
        assert all(f.type for f in dataclasses.fields(obj))
        if "Result" in name or name.endswith(("Plan", "Study", "Trial")):
            assert obj.__dataclass_params__.frozen, f"{name} is not frozen"
            assert hasattr(obj, "_repr_html_"), f"{name} does not render in Jupyter"


def test_the_api_reference_generates_without_a_warning(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        api_reference = importlib.import_module("api_reference")
    finally:
        sys.path.remove(str(REPO / "scripts"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pages = api_reference.generate(tmp_path)
    assert {p.relative_to(tmp_path).as_posix() for p in pages} >= {"buildkit_py.html", "buildkit_py/api.html",
                                                                   "buildkit_py/errors.html", "buildkit_py/progress.html"}
    page = (tmp_path / "buildkit_py" / "api.html").read_text()
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).replace("`", "").split())
    for name in CALLS:
        first = " ".join(inspect.getdoc(getattr(bk, name)).replace("`", "").split())[:60]
        assert f'id="{name}"' in page and first in text, name


# ---------------------------------------------------------------------------------------------
# Hostile input: the API raises the CLI's typed error, with the CLI's message

def _cli_error(capsys, *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    err = capsys.readouterr().err
    assert err.startswith("buildkit-py: error: ") and "Traceback" not in err, err
    return code, err.removeprefix("buildkit-py: error: ").rstrip("\n")


CONFIG = ("--config", str(QUICKSTART / "buildkit.yaml"))
SAME = [  # (CLI arguments, the API call with the same values)
    (("resolve", *CONFIG, "--framework", "torch==2.5.1" + HOSTILE),
     lambda: bk.resolve(QUICKSTART, framework="torch==2.5.1" + HOSTILE)),
    (("resolve", *CONFIG, "--cuda-flavor", HOSTILE), lambda: bk.resolve(QUICKSTART, cuda_flavor=HOSTILE)),
    (("resolve", *CONFIG, "--python", "3" * 70000), lambda: bk.resolve(QUICKSTART, python="3" * 70000)),
    (("dockerfile", *CONFIG, "--image", "UPPER/Case" + HOSTILE),
     lambda: bk.dockerfile(QUICKSTART / "buildkit.yaml", image="UPPER/Case" + HOSTILE)),
    (("build", *CONFIG, "--tag", "a b\n"), lambda: bk.build(config=QUICKSTART / "buildkit.yaml", tags=["a b\n"])),
    (("dockerfile", *CONFIG, "--variant", HOSTILE), lambda: bk.dockerfile(QUICKSTART, variant=HOSTILE)),
    (("build", *CONFIG, "--cache-ref", HOSTILE), lambda: bk.build(QUICKSTART, cache_ref=HOSTILE)),
    (("build", *CONFIG, "--docker", "/nonexistent/" + HOSTILE), lambda: bk.build(QUICKSTART, docker="/nonexistent/" + HOSTILE)),
    (("push", "Bad Ref" + HOSTILE), lambda: bk.push("Bad Ref" + HOSTILE)),
    (("package", "--dir", str(QUICKSTART), "--name", HOSTILE), lambda: bk.package(QUICKSTART, name=HOSTILE)),
    (("package", "--dir", str(QUICKSTART), "--stage", "s3://" + HOSTILE), lambda: bk.package(QUICKSTART, stage="s3://" + HOSTILE)),
    (("job", *CONFIG, "--machine-type", "n1;rm -rf /"), lambda: bk.job(QUICKSTART, machine_type="n1;rm -rf /")),
    (("job", *CONFIG, "--accelerator-count", "99", "--accelerator-type", "NVIDIA_TESLA_T4"),
     lambda: bk.job(QUICKSTART, accelerator_count=99, accelerator_type="NVIDIA_TESLA_T4")),
    (("plan", *CONFIG, "--region", HOSTILE), lambda: bk.plan(QUICKSTART, region=HOSTILE)),
    (("submit", *CONFIG, "--project", HOSTILE), lambda: bk.submit(QUICKSTART, project=HOSTILE)),
    (("cancel", "projects/p/locations/" + HOSTILE), lambda: bk.cancel("projects/p/locations/" + HOSTILE)),
    (("autopackage", str(QUICKSTART), "--target", HOSTILE), lambda: bk.autopackage(QUICKSTART, target=HOSTILE)),
    (("autopackage", str(QUICKSTART), "--gpus", "17"), lambda: bk.autopackage(QUICKSTART, gpus=17)),
    (("tune", *CONFIG, "--local", "--trial-timeout", "-1"), lambda: bk.tune(QUICKSTART, trial_timeout=-1)),
    (("run", *CONFIG, "--workers", "65"), lambda: api.run(QUICKSTART, workers=65)),
]


@pytest.mark.parametrize("argv, call", SAME, ids=[f"{a[0]}-{i}" for i, (a, _) in enumerate(SAME)])
def test_hostile_values_raise_the_clis_error_with_its_message(capsys, argv, call, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    code, message = _cli_error(capsys, *argv)
    with pytest.raises(BuildkitError) as caught:
        call()
    assert (type(caught.value).exit_code, str(caught.value)) == (code, message)
    assert capsys.readouterr() == ("", "")  # nothing printed: no traceback, no progress for a refused call


WRONG = [  # values the command line cannot give (its flags are strings): typed errors naming the keyword
    (lambda: bk.build(QUICKSTART, push="yes"), "push", "True or False"),
    (lambda: bk.build(QUICKSTART, no_cache=1), "no_cache", "True or False"),
    (lambda: bk.autopackage(QUICKSTART, gpus="3"), "gpus", "a whole number"),
    (lambda: bk.autopackage(QUICKSTART, gpus=2.0), "gpus", "a whole number"),
    (lambda: bk.submit(QUICKSTART, wait=1), "wait", "True or False"),
    (lambda: bk.submit(QUICKSTART, on_state="print"), "on_state", "a function"),
    (lambda: bk.tune(QUICKSTART, seed=1.5), "seed", "a whole number"),
    (lambda: bk.tune(QUICKSTART, args="--epochs 3"), "args", "a list of strings"),
    (lambda: bk.package(QUICKSTART, out=3), "out", "a path"),
    (lambda: bk.package(QUICKSTART, out="dist\0"), "out", "without NUL"),
    (lambda: bk.resolve(config=42), "config", "a path or a mapping"),
    (lambda: bk.resolve(QUICKSTART, config=QUICKSTART / "buildkit.yaml"), "config", "not both"),
    (lambda: bk.resolve({1: "x"}), "config", "a mapping of config keys (strings)"),
    (lambda: bk.resolve(QUICKSTART, variant=3), "variant", "a string"),
    (lambda: bk.resolve(QUICKSTART, framwork="torch"), "framwork", "is not a keyword of resolve()"),
    (lambda: bk.build(QUICKSTART, pussh=True), "pussh", "allowed: options, progress, push, docker"),
    (lambda: bk.push("127.0.0.1:5000/a:b", force=True), "force", "allowed: progress"),
    (lambda: bk.cancel("x", wait=True, bogus=1), "bogus", "is not a keyword of cancel()"),
    (lambda: bk.cancel(42), "NAME", "a string"),
    (lambda: bk.build(QUICKSTART, progress="loud"), "--progress", "one of auto, plain"),
    (lambda: api.run(QUICKSTART, build="yes"), "build", "a BuildOptions"),
    (lambda: bk.dockerfile(QUICKSTART, output=["x"]), "output", "a path"),
    (lambda: bk.resolve(dir="trainer\0"), "dir", "without NUL characters"),
    (lambda: bk.resolve(QUICKSTART, dir=""), "dir", "not empty"),
    (lambda: bk.build(QUICKSTART, progress="p" * 70000), "--progress", "... (70000 characters)"),
    (lambda: bk.resolve({"framework": "t" * 70000}), "framework", "(70000 characters)"),
    (lambda: bk.submit(QUICKSTART, poll_interval=float("inf"), wait=True), "--poll", "seconds, more than 0"),
]


@pytest.mark.parametrize("call, field, words", WRONG, ids=[w[1] + str(i) for i, w in enumerate(WRONG)])
def test_wrong_types_and_unknown_keywords_are_config_errors(capsys, call, field, words):
    with pytest.raises(ConfigError) as caught:
        call()
    assert caught.value.field == field and caught.value.exit_code == 2
    assert words in str(caught.value), str(caught.value)
    assert capsys.readouterr() == ("", "")


def test_a_config_dict_is_the_config_and_its_errors_say_so(tmp_path):
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "task.py").write_text("print('hi')\n")
    config = {"framework": "none", "python": "3.11", "trainer": {"module": "trainer.task"}}
    plan = bk.resolve(config=config, dir=tmp_path)
    assert (plan.base_image, plan.framework, plan.cmd) == (bk.resolve(QUICKSTART).base_image, None, ())
    text = bk.dockerfile(config, dir=tmp_path).dockerfile
    assert "trainer.task" in text
    with pytest.raises(ConfigError) as caught:
        bk.resolve({"framework": "none", "cuda_flavour": "base"}, dir=tmp_path)
    assert str(caught.value).startswith("(config dict): ") and "cuda_flavour" in str(caught.value)


def test_keywords_set_options_nested_ones_too(tmp_path):
    options = options_from(api.RunOptions(), settings := {"gpus": 2, "push": True, "args": ["--x"], "image": None})
    assert (options.gpus, options.build.push, options.args, settings) == (2, True, ("--x",), {})
    options = options_from(api.AutopackageOptions(), settings := {"image": "r/x", "region": "europe-west4"},
                               config_keys=("image",))
    assert options.job.region == "europe-west4" and options.job.image is None and settings == {"image": "r/x"}


COMMANDS = {  # each call's command, with what it needs to reach the call
    "resolve": ["resolve"], "dockerfile": ["dockerfile"], "build": ["build"], "push": ["push", "r/x:1"],
    "package": ["package"], "job": ["job"], "plan": ["plan"], "submit": ["submit"], "cancel": ["cancel", "x"],
    "logs": ["logs", "x"], "autopackage": ["autopackage"], "tune": ["tune", "--local"]}


@pytest.mark.parametrize("name", CALLS)
def test_each_command_is_the_call_of_its_name(capsys, monkeypatch, name):
    """The CLI is a shell over these calls: each command parses, makes exactly this call and prints its result."""
    made = []

    def call(*args, **kwargs):
        made.append((args, kwargs))
        raise ConfigError("the call was made", field="probe")

    monkeypatch.setattr(api, name, call)
    assert cli.main(COMMANDS[name]) == 2
    assert capsys.readouterr().err == "buildkit-py: error: probe: the call was made\n" and len(made) == 1


# ---------------------------------------------------------------------------------------------
# Jupyter: escaped HTML; live progress; quiet and logging modes

def test_results_render_escaped_html():
    submitted = api.SubmitResult(name=HOSTILE, console_url="javascript:alert(1)", state="<b>JOB_STATE_FAILED</b>",
                                 error="<img src=x onerror=alert(1)>")
    page = submitted._repr_html_()
    assert "<script>" not in page and "<img" not in page and "<b>JOB" not in page
    assert "&lt;script&gt;" in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<caption" in page and "SubmitResult" in page
    plan = bk.resolve(QUICKSTART)
    assert plan.base_image in plan._repr_html_()


def test_the_notebook_reporter_shows_steps_pushes_and_states_escaped(monkeypatch):
    shown: list[str] = []

    class Handle:
        def update(self, obj):
            shown.append(obj.data)

    display = importlib.import_module("IPython.display")
    monkeypatch.setattr(display, "display", lambda obj, display_id=False: shown.append(obj.data) or Handle())
    out = reporter("notebook")
    assert isinstance(out, NotebookReporter)
    out.message("build started")
    out.build_line("#5 RUN pip install " + HOSTILE)
    out.push_progress("sha256:abcdef0123456789", 1048576, 2097152, "Pushing")
    out.push_status("sha256:abcdef0123456789", "Pushed")
    out.job_state("projects/p/locations/r/customJobs/1", "JOB_STATE_RUNNING")
    out.finish()
    last = shown[-1]
    assert "build started" in last and "#5 RUN pip install &lt;script&gt;" in last and "<script>" not in last
    assert "push sha256:abcde" in last and "Pushed" in last and "JOB_STATE_RUNNING" in last
    count = len(shown)
    out.finish()  # nothing held back: no update
    assert len(shown) == count
    out.build_line("#6 DONE")  # within INTERVAL of the last update: held back, then shown by finish
    assert len(shown) == count
    out.finish()
    assert "#6 DONE" in shown[-1]


def test_auto_is_the_notebook_display_only_in_a_kernel():
    assert type(reporter("auto", io.StringIO())) is Reporter  # IPython imported (by the test above), no kernel


def test_quiet_says_nothing_and_log_goes_to_the_logger(caplog):
    stream = io.StringIO()
    quiet = reporter("quiet", stream)
    assert isinstance(quiet, QuietReporter)
    for out in (quiet,):
        out.message("m")
        out.build_line("b")
        out.push_progress("l", 1, 2, "Pushing")
        out.push_status("l", "Pushed")
        out.job_state("n", "JOB_STATE_RUNNING")
    assert stream.getvalue() == ""
    with caplog.at_level(logging.INFO, logger="buildkit_py"):
        logged = reporter("log")
        logged.message("hello")
        logged.job_state("projects/p/locations/r/customJobs/1", "JOB_STATE_SUCCEEDED")
    assert [r.getMessage() for r in caplog.records] == [
        "buildkit-py: hello", "buildkit-py: projects/p/locations/r/customJobs/1: JOB_STATE_SUCCEEDED"]


def test_each_mode_is_a_reporter_and_a_reporter_is_kept():
    assert set(MODES) == {"auto", "plain", "tty", "json", "notebook", "log", "quiet"}
    mine = Reporter(io.StringIO())
    assert reporter(mine) is mine
    stream = io.StringIO()
    JsonReporter(stream).job_state("n", "JOB_STATE_RUNNING")
    assert json.loads(stream.getvalue()) == {"event": "job-state", "name": "n", "state": "JOB_STATE_RUNNING"}
