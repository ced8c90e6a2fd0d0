"""Every door of the Python API refuses like the command line (issue 29).

A property test feeds hostile values (nested thousands deep, 70,000 characters, control and format characters, lone
surrogates, URLs carrying a token) into every keyword of every public call and every config key: the outcome is a
buildkit_py error or a harmless result, never another exception; the message is one bounded line with no raw control
character and no secret; where a flag mirrors the keyword, the command line ends with the same exit code. Calls that
would build, run, upload or reach a service stop at the first step of that work (Reached): what is tested is that
every check comes before it. Then the cases the issue names, one by one.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import buildkit_py as bk
from buildkit_py import api, cli
from buildkit_py.api import autopackaging
from buildkit_py.config import KEYS
from buildkit_py.errors import BuildkitError, ConfigError, terminal_line
from buildkit_py.fsutil import MAX_NESTING, PYTHON_NESTING
from buildkit_py.progress import QuietReporter

SECRET = "tok3nS3cr3t"
CREDENTIAL_URLS = [f"https://user:{SECRET}@127.0.0.1:1/simple", f"https://{SECRET}@example.com/x",
                   f"http://127.0.0.1:1/x?token={SECRET}"]
SPECIAL = ["a" * 70000, "\ud800", "x\udcff", "", ".", "/", "..", "-x", "\x1b[31mred", "a\u2028FROM alpine", "a\nb",
           "\u202egnp.exe", "\x00", "3.11", "none", "torch==2.5.1", "trainer.task", *CREDENTIAL_URLS]
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=20)  # surrogates and controls included
ATOMS = st.one_of(TEXT, st.sampled_from(SPECIAL), st.integers(), st.booleans(), st.none(), st.floats(),
                  st.binary(max_size=8))


def nest(leaf: object, depth: int, kind: str) -> object:
    """leaf wrapped `depth` times, built with a loop: the test itself must not recurse."""
    for _ in range(depth):
        leaf = {"a": leaf} if kind == "dict" else [leaf] if kind == "list" else (leaf,)
    return leaf


NESTED = st.builds(nest, ATOMS, st.sampled_from([MAX_NESTING + 1, 100, 5000]), st.sampled_from(["dict", "list", "tuple"]))
VALUES = st.one_of(ATOMS, NESTED, st.lists(ATOMS, max_size=4), st.dictionaries(st.one_of(TEXT, st.integers()), ATOMS, max_size=3))
EXAMPLES = int(os.environ.get("BUILDKIT_HYPOTHESIS_EXAMPLES", "40"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


INFER = autopackaging._autopackage_with  # autopackage's work, kept before `stopped` replaces it


class Reached(Exception):
    """A call got past its checks to the work this test does not do."""


# (module, name) of the first step of each call's work, replaced by Reached.
STOPS = [("buildkit_py.api.builds", "build_project"), ("buildkit_py.api.runs", "_run"),
         ("buildkit_py.api.tuning", "build_config"), ("buildkit_py.api.jobs", "plan_job"),
         ("buildkit_py.pipeline.publish", "push_image"), ("buildkit_py.pipeline.packaging", "build_sdist"),
         ("buildkit_py.jobs.submit", "default_credentials"), ("buildkit_py.api.autopackaging", "_autopackage_with"),
         ("buildkit_py.pipeline.build", "build_config"), ("buildkit_py.api.images", "executor_build_for"),
         ("buildkit_py.pipeline.lock", "lock"), ("buildkit_py.catalog.index_metadata", "run"),
         ("buildkit_py.tools.doctor", "diagnose")]

# The calls with the keywords each takes beyond the config keys: their parameters and their options' fields.
OPTIONS = {"build": api.BuildOptions, "run": api.RunOptions, "tune": api.TuneOptions, "package": api.PackageOptions,
           "job": api.JobOptions, "plan": api.JobOptions, "submit": api.JobOptions, "autopackage": api.AutopackageOptions}
PARAMETERS = {"dockerfile": ["output", "resolve"], "job": ["output", "as_json"], "build": ["progress", "options"],
              "run": ["progress", "options"], "tune": ["progress", "options"], "submit": ["submit_options", "on_state", "on_line"],
              "plan": ["submit_options", "options"], "package": ["options"], "autopackage": ["options", "progress"],
              "resolve": [], "cancel": ["submit_options", "project", "region"], "push": ["progress"],
              "logs": ["submit_options", "project", "region", "follow", "on_line"]}
OWN_KEYWORDS = sorted({(call, name) for call, names in PARAMETERS.items() for name in names} | {
    (call, f.name) for call, kind in OPTIONS.items() for f in dataclasses.fields(kind)})

# Config keys that the command line sets with a flag taking a value: the same value must end the same way there.
FLAGGED = ["framework", "python", "cuda", "accelerator", "cuda_flavor", "base_image", "requirements", "template", "image",
           "python_mirror", "framework_index_url"]


@pytest.fixture(scope="module")
def trainer(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("doors")
    (root / "trainer").mkdir()
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text("print('hi')\n")
    (root / "buildkit.yaml").write_text("framework: none\npython: '3.11'\ntrainer: {module: trainer.task}\n")
    return root


@pytest.fixture(autouse=True)
def stopped(monkeypatch, tmp_path):
    import importlib

    def reached(*args, **kwargs):
        raise Reached()

    for module, name in STOPS:
        monkeypatch.setattr(importlib.import_module(module), name, reached)
    monkeypatch.chdir(tmp_path)  # a relative output= lands here


def outcome(call, *args, **kwargs) -> int:
    """0 for a result (or work reached), else the error's exit code, after checking its message."""
    try:
        call(*args, **kwargs)
    except Reached:
        return 0
    except BuildkitError as exc:
        check_message(str(exc))
        assert exc.exit_code == 2, f"bad input is exit 2 whatever stage notices it: {exc!r}"
        return exc.exit_code
    return 0


def check_message(text: str) -> None:
    assert "\n" not in text, f"a message of more than one line: {text!r}"
    assert len(text) <= 2000, f"an unbounded message ({len(text)} characters): {text[:200]!r}"
    assert SECRET not in text, f"a secret in a message: {text!r}"
    assert all(ch.isprintable() for ch in text), f"a raw control or format character in a message: {text!r}"
    assert terminal_line(text) == text, "the command line prints it as it is"


def cli_code(capsys, *argv: str) -> int:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    _, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    assert SECRET not in err, err
    assert all(len(line) <= 2000 for line in err.splitlines()), err[:300]
    return code


@pytest.mark.parametrize("call", ["resolve", "dockerfile"])
@SETTINGS
@given(key=st.sampled_from(KEYS), value=VALUES)
def test_every_config_key_as_keyword_and_in_a_config_dict(trainer, call, key, value):
    door = getattr(api, call)
    outcome(door, trainer, **{key: value})
    outcome(door, {"framework": "none", "python": "3.11", "trainer": {"module": "trainer.task"}, key: value}, dir=trainer)


@SETTINGS
@given(keyword=st.sampled_from(OWN_KEYWORDS), value=VALUES)
def test_every_keyword_of_every_call(trainer, keyword, value):
    call, name = keyword
    if call in ("cancel", "logs"):
        outcome(getattr(bk, call), "projects/p/locations/us-central1/customJobs/1", **{name: value})
    elif call == "push":
        outcome(bk.push, "127.0.0.1:1/x:y", **{name: value})
    else:
        outcome(getattr(api, call), trainer, **{name: value})


@SETTINGS
@given(call=st.sampled_from(sorted(PARAMETERS)), value=VALUES)
def test_every_first_argument(trainer, call, value):
    """The project (a path, a config dict, a Project), or push's REF and cancel's NAME."""
    outcome(getattr(api, call), value)


# The calls of bk.api that take a Project and options as they are (what the commands call), each with good arguments.
def _good(trainer: Path) -> dict:
    project = api.Project(directory=trainer)
    return {"lock": (project, api.LockOptions()), "matrix_check": (project, api.MatrixOptions()),
            "matrix_refresh": (project, api.MatrixOptions()), "build_variants": (project, api.BuildOptions(), QuietReporter()),
            "executor_build": (project, api.BuildOptions(), QuietReporter()), "make": (project, None),
            "ci": (project, "github", None), "print_value": (project, "image-tag"), "load": (project,),
            "doctor": (None,), "versions": (None, None), "executors": (None, None)}


@SETTINGS
@given(call=st.sampled_from(sorted(_good(Path(".")))), data=st.data())
def test_every_argument_of_the_calls_that_take_a_project(trainer, call, data):
    arguments = list(_good(trainer)[call])
    place = data.draw(st.integers(0, len(arguments) - 1))
    value = data.draw(VALUES)
    arguments[place] = value
    if call == "lock" and place == 1:
        arguments[1] = data.draw(st.sampled_from([value, api.LockOptions(upgrade_packages=value), api.LockOptions(check=value)]))
    outcome(getattr(api, call), *arguments)


@SETTINGS
@given(kind=st.sampled_from(sorted(set(OPTIONS.values()) | {api.SubmitOptions}, key=lambda k: k.__name__)),
       data=st.data())
def test_every_field_of_an_options_object_the_caller_made(trainer, kind, data):
    """An options object is a frozen dataclass anyone can fill with anything: its fields are checked as keywords are."""
    name = data.draw(st.sampled_from([f.name for f in dataclasses.fields(kind)]))
    options = kind(**{name: data.draw(VALUES)})
    calls = {api.BuildOptions: ("build", "options"), api.RunOptions: ("run", "options"), api.TuneOptions: ("tune", "options"),
             api.PackageOptions: ("package", "options"), api.JobOptions: ("job", "options"),
             api.AutopackageOptions: ("autopackage", "options"), api.SubmitOptions: ("plan", "submit_options")}
    call, parameter = calls[kind]
    outcome(getattr(api, call), trainer, **{parameter: options})


@SETTINGS
@given(key=st.sampled_from(FLAGGED), value=st.one_of(TEXT, st.sampled_from(SPECIAL)))
def test_a_flag_ends_as_its_keyword_does(trainer, capsys, key, value):
    expected = outcome(bk.dockerfile, trainer, **{key: value})
    flag = "--" + key.replace("_", "-")
    assert cli_code(capsys, "dockerfile", "--dir", str(trainer), f"{flag}={value}") == expected, (key, value)


@SETTINGS
@given(value=st.one_of(TEXT, st.sampled_from([s for s in SPECIAL if SECRET not in s])))  # a file name is no secret
def test_output_ends_as_the_flag_does(trainer, capsys, value):
    expected = outcome(bk.dockerfile, trainer, output=value)
    assert cli_code(capsys, "dockerfile", "--dir", str(trainer), f"--output={value}") == expected, value


# --- the cases of issue 29, one by one ------------------------------------------------------------


def refusal(call, *args, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        call(*args, **kwargs)
    check_message(str(caught.value))
    return caught.value


def test_the_issues_api_cases_are_config_errors_naming_the_keyword(trainer):
    assert refusal(bk.build, trainer, options="x").field == "options"
    assert refusal(bk.build, trainer, options=api.BuildOptions(push="yes")).field == "--push"  # not taken as true
    assert refusal(bk.build, trainer, push="yes").field == "push"  # a keyword is named as such
    assert refusal(api.run, trainer, options=api.RunOptions(build=api.BuildOptions(no_cache=1))).field == "--no-cache"
    for switch, flag in (("no_cache", "--no-cache"), ("locked", "--locked"), ("offline", "--offline")):
        assert refusal(bk.build, trainer, options=api.BuildOptions(**{switch: ["x"]})).field == flag  # every switch
    assert refusal(bk.build, trainer, options=api.BuildOptions(cache_ref=["r"])).field == "--cache-ref"
    assert refusal(api.run, trainer, options=api.RunOptions(processes_per_node="two")).field == "--processes-per-node"
    assert refusal(bk.submit, trainer, submit_options=api.JobOptions()).field == "submit_options"
    assert "env[1]" in str(refusal(bk.dockerfile, trainer, env={1: "x"}))
    assert "lone surrogate" in str(refusal(bk.dockerfile, trainer, output="\ud800"))
    assert "at most 4096 bytes" in str(refusal(bk.dockerfile, trainer, output="a" * 70000))
    assert "at most 255 bytes" in str(refusal(bk.dockerfile, trainer, output="a" * 300))
    for folder in (".", "/", str(trainer)):
        assert "is a directory" in str(refusal(bk.dockerfile, trainer, output=folder))
    assert refusal(bk.resolve, api.Project(directory=5)).field == "--dir"
    assert not list(Path.cwd().iterdir()), "a refused call wrote nothing"


def test_entry_points_past_one_dockerfile_line_are_refused_at_config_time(trainer, capsys):
    groups = {f"group{g}": [f"n{i} = {'m' * 150}:{'f' * 150}" for i in range(200)] for g in range(3)}
    package = {"name": "census", "version": "1", "entry_points": groups}
    error = refusal(bk.dockerfile, trainer, trainer_package=package)
    assert error.exit_code == 2 and "trainer_package.entry_points" in str(error) and "at most 32768" in str(error)
    (trainer / "deep.yaml").write_text(
        "framework: none\npython: '3.11'\ntrainer: {module: trainer.task}\ntrainer_package: {name: census, version: '1', "
        "entry_points: {" + ", ".join(f"g{g}: [{', '.join(repr(e) for e in groups[f'group{g}'])}]" for g in range(3)) + "}}\n")
    assert cli_code(capsys, "dockerfile", "--config", str(trainer / "deep.yaml")) == 2


def deep_list(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("door", ["keyword", "config dict", "Project"])
def test_a_value_nested_thousands_deep_is_refused_naming_the_key_and_the_limit(trainer, door):
    value = nest("x", 5000, "dict")
    if door == "keyword":
        error = refusal(bk.build, trainer, env=value)
    elif door == "config dict":
        error = refusal(bk.resolve, {"env": value}, dir=trainer)
    else:
        error = refusal(bk.resolve, api.Project(directory=trainer, overrides=(("env", value),)))
    assert f"nested too deep: more than {MAX_NESTING} levels" in str(error)
    assert error.field in ("env", "config")


def test_a_value_that_holds_itself_or_is_shared_at_every_level_ends_within_the_limits(trainer):
    cycle: list = []
    cycle.append(cycle)
    assert "nested too deep" in str(refusal(bk.resolve, trainer, pip=cycle))
    shared: list = ["x"] * 10
    for _ in range(12):  # 10**12 paths through 130 lists
        shared = [shared] * 10
    assert "values in all" in str(refusal(bk.resolve, trainer, env={"A": shared}))


def test_toml_nested_thousands_deep_names_the_file_and_the_limit(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text(f"[tool.buildkit-py]\nenv = {deep_list(5000)}\n")
    assert cli_code(capsys, "resolve", "--dir", str(tmp_path)) == 2
    (tmp_path / "pyproject.toml").write_text("[tool.buildkit-py" + ".a" * 5000 + "]\nx = 1\n")  # dotted: no recursion
    error = refusal(bk.resolve, tmp_path)
    assert str(error).startswith(str(tmp_path / "pyproject.toml")) and f"more than {MAX_NESTING} levels" in str(error)


def test_python_the_parser_gives_up_on_is_named_not_an_internal_error(tmp_path):
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "__init__.py").write_text("")
    (tmp_path / "trainer" / "task.py").write_text("x = " + "+".join(["1"] * 100000) + "\n")
    (tmp_path / "setup.py").write_text("from setuptools import setup\nx = " + "-" * 100000 + "1\nsetup(name='t')\n")
    dry_run = (api.Project(directory=tmp_path), api.AutopackageOptions(dry_run=True), QuietReporter())
    error = refusal(INFER, *dry_run)
    assert f"more than {PYTHON_NESTING} levels" in str(error) and "setup.py" in str(error)
    (tmp_path / "setup.py").unlink()
    error = refusal(INFER, *dry_run)
    assert "trainer/task.py" in str(error) and "Python cannot run it" in str(error) and "Python 2" not in str(error)
