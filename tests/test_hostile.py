"""No input reshapes the Dockerfile or crashes the tool.

A property test feeds arbitrary text (every Unicode line-break class included) into every config
field, from the file and from flags: the result is a refusal with exit 2 naming the field, or a
Dockerfile with the same instructions as a benign value, the same FROM lines and no line over
BuildKit's limit. A corpus of hostile files and flags then goes through the real command line.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buildkit_py import cli
from buildkit_py.config import KEYS, load_config
from buildkit_py.errors import BuildkitError
from buildkit_py.pipeline.plan import make_plan
from buildkit_py.pipeline.render import MAX_LINE_BYTES, render_dockerfile
from conftest import REPO

LINE_BREAKS = list("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
NASTY = LINE_BREAKS + list("\x00\t\"'$\\`;&|{}%#=,@:/ ") + ["\x1b[31m", "${HOME}", "$(id)", "\\\n", "{{ 7*7 }}"]
TEXT = st.lists(st.one_of(st.characters(exclude_categories=("Cs",)), st.sampled_from(NASTY)), max_size=30).map("".join)
VALUES = st.one_of(TEXT, st.sampled_from(["a" * 70000, "é" * 20000, "x\u2028FROM alpine\u2028RUN touch /pwned",
                                            "git\n", "trainer.task\n", "A\n"]))

# The payloads scripts/hostile_report.py feeds every config key, and tests/test_hostile_doors.py every other door.
CORPUS = [
    "a\nFROM alpine", "a\rb", "a\x0bb", "a\x0cb", "a\x1cb", "a\x1db", "a\x1eb", "a\x85b",
    "a\u2028FROM alpine\u2028RUN touch /pwned", "a\u2029b", "x\x00y", "git\n", "trainer.task\n", "A\n",
    "$(id)", "`id`", "${HOME}", "a;rm -rf /", "a && id", "a|id", "'quoted'", '"dq"', "back\\", "\\\nRUN id",
    "{{ 7*7 }}", "{% raw %}", "\x1b[31mred", "\u202eevil", "\ufeffbom", "\udcff", "é" * 20000, "a" * 70000,
    "a,src=/etc/shadow", "id=x,src=/y", "https://u:p@h/simple\n[global]", "../../etc/passwd", "/etc/passwd",
    "UPPER/Case", "x@sha256:" + "a" * 63, "x:" + "t" * 129, "१२.४", "3.\u00b9\u00b9", "", " ", "-rf",
    "--index-url=http://evil", "numpy; python_version > '3'\u2028RUN id", "!!python/name:os.system",
]


BENIGN = {"framework": "none", "python": "3.11", "gpu": False, "trainer": {"module": "trainer.task", "args": ["--a"]},
          "env": {"A": "x"}, "pip": ["numpy"], "system_packages": ["git"]}

# Where a hostile text goes: (name, function from the text to config keys set).
PLACES = [
    ("env value", lambda t: {"env": {"A": t}}),
    ("env name", lambda t: {"env": {t: "x"}}),
    ("pip", lambda t: {"pip": [t]}),
    ("system_packages", lambda t: {"system_packages": [t]}),
    ("trainer.module", lambda t: {"trainer": {"module": t, "args": ["--a"]}}),
    ("trainer.script", lambda t: {"trainer": {"script": t, "args": ["--a"]}}),
    ("trainer.args", lambda t: {"trainer": {"module": "trainer.task", "args": [t]}}),
    ("trainer.function", lambda t: {"trainer": {"module": "trainer.task", "function": t, "args": ["--a"]}}),
] + [(key, lambda t, key=key: {key: [t] if key in ("tags", "allow_secrets", "allow_large") else t})
     for key in KEYS if key not in ("env", "pip", "system_packages", "trainer", "gpu", "hypertune")]


def instructions(text: str) -> tuple[list[str], list[str]]:
    """(instruction keywords, FROM lines) as BuildKit reads them: lines end at \\n only; a
    trailing backslash continues the instruction; comments and blank lines are skipped."""
    keywords, froms, current = [], [], ""
    for line in text.split("\n"):
        if not current and (line.lstrip().startswith("#") or not line.strip()):
            continue
        if line.endswith("\\"):
            current += line[:-1]
            continue
        current += line
        keywords.append(current.split(None, 1)[0].upper())
        if keywords[-1] == "FROM":
            froms.append(current)
        current = ""
    return keywords, froms


@pytest.fixture(scope="module")
def trainer_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    (root / "trainer").mkdir()
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text("print('hi')\n")
    return root


def _render(root: Path, values: dict, *, as_flags: bool) -> str:
    if as_flags:
        (root / "buildkit.yaml").write_text(yaml.safe_dump({k: v for k, v in BENIGN.items() if k not in values}))
        config = load_config(root / "buildkit.yaml", root, values)
    else:
        (root / "buildkit.yaml").write_text(yaml.safe_dump({**BENIGN, **values}, allow_unicode=True))
        config = load_config(root / "buildkit.yaml", root)
    return render_dockerfile(make_plan(config), root=config.root)


@pytest.mark.parametrize("place", PLACES, ids=[p[0] for p in PLACES])
@pytest.mark.parametrize("as_flags", [False, True], ids=["file", "flag"])
@settings(max_examples=int(os.environ.get("BUILDKIT_HYPOTHESIS_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=VALUES)
def test_no_value_reshapes_the_dockerfile(trainer_dir, place, as_flags, text):
    name, where = place
    benign_keywords, benign_froms = instructions(_render(trainer_dir, {}, as_flags=as_flags))
    try:
        rendered = _render(trainer_dir, where(text), as_flags=as_flags)
    except BuildkitError as exc:
        assert exc.exit_code == 2, f"{name}: {exc}"
        return
    keywords, froms = instructions(rendered)
    assert keywords == benign_keywords, f"{name} = {text!r} changed the instructions"
    assert froms == benign_froms or name == "base_image"
    assert all(len(line.encode()) <= MAX_LINE_BYTES for line in rendered.split("\n"))
    assert not any(ch in rendered for ch in LINE_BREAKS[1:]), f"{name} = {text!r} put a line separator in the file"


# --- the command line, in process: exit codes and messages, never a traceback --------------


def main(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return code, out, err


def write(root: Path, name: str, data: bytes | str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


HOSTILE_FILES = [
    ("tag python/name", "framework: !!python/name:os.system\n", "YAML tags"),
    ("tag int", "python: !!int abc\n", "YAML tags"),
    ("tag timestamp", "python: !!timestamp x\n", "YAML tags"),
    ("local tag", "python: !x '3.11'\n", "YAML tags"),
    ("recursive alias", "a: &a [*a]\n", "anchors and aliases"),
    ("alias bomb", "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi",
                                                                                            strict=True)),
     "anchors and aliases"),
    ("deep nesting", "env: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deep: more than 16 levels"),
    ("utf-16", "framework: none\n".encode("utf-16"), "UTF-16"),
    ("latin-1", "env: {A: caf\xe9}\n".encode("latin-1"), "not valid UTF-8"),
    ("nul", b"framework: none\x00\n", "NUL byte"),
    ("multi document", "framework: none\n---\npython: '3.11'\n", "invalid YAML"),
    ("top-level list", "- a\n", "top level must be a mapping"),
    ("complex key", "? [a]\n: b\n", "keys must be plain strings"),
    ("bad date", "python: 2024-13-45\n", "a Python version like 3.11"),
    ("huge int", "python: " + "9" * 5000 + "\n", "at most 4096 characters"),
    ("unknown key escaped", "\"fram\\u2028ework\": none\n", "unknown key"),
    ("long env value", "env: {A: " + "a" * 70000 + "}\n", "too long"),
    ("many pip", "pip: [" + ", ".join(f"p{i}" for i in range(20000)) + "]\n", "too long"),
    ("env name newline", "env: {\"A\\n\": v}\n", "not allowed"),
    ("package newline", "system_packages: [\"git\\n\"]\n", "not allowed"),
    ("module newline", "trainer: {module: \"x\\n\"}\n", "not allowed"),
    ("u2028 in env", "env: {V: \"a\\u2028FROM alpine\\u2028RUN touch /pwned\"}\n", "line breaks"),
    ("u2028 in pip marker", "pip: [\"numpy; python_version > '3'\\u2028RUN id\"]\n", "line breaks"),
    ("long path", "requirements: " + "a" * 300 + ".txt\n", "255 characters"),
    ("long nested path", "requirements: " + "/".join(["abcdefgh"] * 600) + "\n", "too long"),
    ("args null", "trainer: {module: trainer.task, args: [null]}\n", "must be a string"),
    ("image with tag", "image: 127.0.0.1:5000/x:latest\n", "repository only"),
    ("network", "network: bridge\n", "one of default, host, none"),
]


@pytest.mark.parametrize("name, data, fragment", HOSTILE_FILES, ids=[c[0] for c in HOSTILE_FILES])
def test_hostile_config_files_exit_2_naming_the_problem(tmp_path, capsys, name, data, fragment):
    write(tmp_path, "trainer/task.py", "")
    config = write(tmp_path, "buildkit.yaml", data)
    code, out, err = main(capsys, "dockerfile", "--config", str(config))
    assert code == 2, err
    assert fragment in err, err
    assert len(err) < 2000, "a message names a long value by its start and length"


@pytest.mark.parametrize("text, fragment", [
    ('[tool]\nbuildkit-py = "x"\n', "must be a table"),
    ('tool = "x"\n', "[tool] must be a table"),
    ("[tool.buildkit-py\n", "invalid TOML"),
    ('[tool.buildkit-py]\nframework = 1979-05-27T07:32:00Z\n', "must be a string"),
    ('[tool.buildkit-py]\nenv = {A = "x\\u2028y"}\n', "line breaks"),
    ('[tool.buildkit-py]\npip = ["numpy\\u2028RUN id"]\n', "line breaks"),
])
def test_hostile_pyproject_exits_2(tmp_path, capsys, text, fragment):
    write(tmp_path, "pyproject.toml", text)
    code, _, err = main(capsys, "resolve", "--dir", str(tmp_path))
    assert code == 2 and fragment in err, err


def test_dotdockerignore_and_requirements_are_decoded_with_the_file_named(tmp_path, capsys):
    write(tmp_path, "trainer/task.py", "")
    write(tmp_path, "buildkit.yaml", "trainer: {module: trainer.task}\nrequirements: req.txt\n")
    write(tmp_path, "req.txt", b"caf\xe9\n")
    code, _, err = main(capsys, "dockerfile", "--dir", str(tmp_path))
    assert code == 2 and "requirements" in err and "not valid UTF-8" in err
    write(tmp_path, "req.txt", "numpy\n")
    write(tmp_path, ".dockerignore", "\ufeff\xff".encode("utf-16"))
    code, _, err = main(capsys, "dockerfile", "--dir", str(tmp_path))
    assert code == 2 and ".dockerignore" in err and "UTF-16" in err


HOSTILE_FLAGS = [
    (["--framework", "torch==2.5.1\n"], "--framework"),
    (["--python", "3.11\n"], "--python"),
    (["--python", "3.\u00b9\u00b9"], "--python"),
    (["--cuda", "\u0661\u0662.4"], "--cuda"),
    (["--base-image", "pyth\u00f6n:3.11"], "--base-image"),
    (["--base-image", "python:3.11\nRUN id"], "--base-image"),
    (["--base-image", "python@sha256:abc"], "--base-image"),
    (["--image", "a" * 300], "--image"),
    (["--tag", "127.0.0.1:5000/x@sha256:" + "a" * 64], "--tag"),
    (["--tag", "x:t\u00e4g"], "--tag"),
    (["--platform", "linux/amd64\n"], "--platform"),
    (["--network", "host,src=/etc/shadow"], "--network"),
    (["--ca-cert", "a,src=/etc/shadow"], "--ca-cert"),
    (["--pip-index-url", "https://x/simple\n[global]\ntrusted-host = evil"], "--pip-index-url"),
    (["--pip-index-url", "ftp://x/"], "--pip-index-url"),
    (["--builder", "nope"], "--builder"),
    (["--allow-secret", "a\nb"], "--allow-secret"),
    (["--requirements", "../../etc/passwd"], "--requirements"),
    (["--template", "/etc/passwd"], "--template"),
    (["--python-mirror", "https://user:pw@mirror/"], "--python-mirror"),
    (["--dir", "/nonexistent-dir"], "--dir"),
    (["--config", "x" * 5000], "--config"),
    (["--docker", "/nonexistent/docker"], "--docker"),
]


@pytest.mark.parametrize("flags, field", HOSTILE_FLAGS, ids=[f[1] + str(i) for i, f in enumerate(HOSTILE_FLAGS)])
def test_hostile_flags_exit_2_before_any_engine_work(tmp_path, capsys, flags, field, monkeypatch):
    # No engine is reachable here: a flag checked only after the engine ping would exit 5, not 2.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    write(tmp_path, "trainer/task.py", "")
    write(tmp_path, "buildkit.yaml", "framework: none\npython: '3.11'\ntrainer: {module: trainer.task}\n")
    code, _, err = main(capsys, "build", "--dir", str(tmp_path), *flags)
    assert code == 2, err
    assert field in err, err
    assert "[global]" not in err and "pw@" not in err, "a credential-bearing value is never echoed"


def test_ca_cert_must_hold_certificates_and_no_key(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    write(tmp_path, "trainer/task.py", "")
    write(tmp_path, "buildkit.yaml", "trainer: {module: trainer.task}\n")
    key = write(tmp_path, "key.pem", "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n")
    code, _, err = main(capsys, "build", "--dir", str(tmp_path), "--ca-cert", str(key))
    assert code == 2 and "private key" in err
    text = write(tmp_path, "notes.txt", "hello\n")
    code, _, err = main(capsys, "build", "--dir", str(tmp_path), "--ca-cert", str(text))
    assert code == 2 and "no PEM certificate" in err
    monkeypatch.setenv("PIP_CERT", str(key))  # the default bundle is checked the same way
    code, _, err = main(capsys, "build", "--dir", str(tmp_path))
    assert code == 2 and "$PIP_CERT" in err and "private key" in err


def test_config_file_build_settings_are_validated_with_their_position(tmp_path, capsys):
    write(tmp_path, "trainer/task.py", "")
    write(tmp_path, "buildkit.yaml", "trainer: {module: trainer.task}\ntags: [ok/x, 'Bad/Upper']\n")
    code, _, err = main(capsys, "build", "--dir", str(tmp_path))
    assert code == 2 and "buildkit.yaml:2:" in err and "tags[1]" in err


def test_user_templates_run_in_the_sandbox(tmp_path, capsys):
    write(tmp_path, "trainer/task.py", "")
    write(tmp_path, "Dockerfile.j2", "{% extends base_template %}{% block header %}"
                                     "# {{ cycler.__init__.__globals__.os.popen('touch pwned').read() }}\n"
                                     "{% endblock %}")
    write(tmp_path, "buildkit.yaml", "template: Dockerfile.j2\ntrainer: {module: trainer.task}\n")
    code, out, err = main(capsys, "dockerfile", "--dir", str(tmp_path))
    assert code != 0 and "unsafe" in err.lower()
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_files_the_config_names_must_stay_inside_the_trainer_directory(tmp_path, capsys):
    root = tmp_path / "trainer-dir"
    write(root, "trainer/task.py", "")
    outside = write(tmp_path, "outside.j2", "{% extends base_template %}")
    (root / "Dockerfile.j2").symlink_to(outside)
    (root / "loop.txt").symlink_to(root / "loop.txt")
    write(root, "buildkit.yaml", "template: Dockerfile.j2\ntrainer: {module: trainer.task}\n")
    code, _, err = main(capsys, "dockerfile", "--dir", str(root))
    assert code == 2 and "leads outside" in err
    write(root, "buildkit.yaml", "requirements: loop.txt\ntrainer: {module: trainer.task}\n")
    code, _, err = main(capsys, "dockerfile", "--dir", str(root))
    assert code == 2 and "requirements" in err


def test_output_naming_a_directory_is_a_clear_error(tmp_path, capsys):
    code, _, err = main(capsys, "dockerfile", "--config", str(REPO / "examples/quickstart/buildkit.yaml"),
                        "-o", str(tmp_path))
    assert code == 2 and "is a directory" in err


def test_debug_shows_the_cause_chain(tmp_path, capsys):
    write(tmp_path, "buildkit.yaml", b"\xff\xfe")
    code, _, err = main(capsys, "resolve", "--dir", str(tmp_path))
    assert code == 2 and "Traceback" not in err
    try:
        cli.main(["resolve", "--dir", str(tmp_path), "--debug"])
    finally:
        err = capsys.readouterr().err
    assert "UTF-16" in err and "Traceback" in err


# --- options anywhere before `--`; the README's own forms --------------------------------


@pytest.mark.parametrize("argv", [
    ["run", "img:1", "--gpus", "1", "--output", "out", "--", "--epochs", "3"],
    ["run", "--gpus", "1", "img:1", "--output", "out", "--", "--epochs", "3"],
    ["run", "--gpus", "1", "--output", "out", "img:1", "--", "--epochs", "3"],
])
def test_run_options_anywhere_before_the_double_dash(argv):
    args = cli.parse(argv)
    assert (args.run_image, args.gpus, str(args.output), args.trainer_args) == ("img:1", 1, "out", ["--epochs", "3"])


def test_only_run_takes_trainer_arguments(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.parse(["build", "--", "x"])
    assert exit_info.value.code == 2 and "takes no trainer arguments" in capsys.readouterr().err
    assert cli.parse(["run", "img:1", "--", "--gpus", "2"]).trainer_args == ["--gpus", "2"]
    assert cli.parse(["run", "img:1", "--", "--gpus", "2"]).gpus == 0


def test_build_options_anywhere_and_debug_before_or_after_the_command():
    args = cli.parse(["--debug", "build", "--tag", "a/b:1", "--dir", ".", "--push", "-t", "c/d"])
    assert args.tags == ["a/b:1", "c/d"] and args.push and args.debug
    assert cli.parse(["build", "--debug"]).debug


@pytest.mark.parametrize("flag, value", [("--gpus", "-1"), ("--workers", "1000")])
def test_run_counts_are_checked(capsys, flag, value):
    code, _, err = main(capsys, "run", "img:1", flag, value)
    assert code == 2 and flag in err


def test_closed_stdout_ends_quietly():
    proc = subprocess.run(
        f"{sys.executable} -m buildkit_py versions --json | head -c 10 >/dev/null; exit ${{PIPESTATUS[0]}}",
        shell=True, executable="/bin/bash", capture_output=True, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stderr == "" and proc.returncode in (0, 141), proc.stderr


def test_json_output_of_every_result_command(capsys):
    for argv in (["resolve", "--json"], ["versions", "torch", "--json"], ["dockerfile", "--json"]):
        code, out, err = main(capsys, *argv, "--config", str(REPO / "examples/quickstart/buildkit.yaml")) \
            if argv[0] != "versions" else main(capsys, *argv)
        assert code == 0, err
        json.loads(out)


def test_files_a_config_file_passes_as_secrets_stay_inside_the_trainer_directory(tmp_path, capsys, monkeypatch):
    """A pull request that edits buildkit.yaml must not get the CI host's files mounted into its build."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    root = tmp_path / "t"
    write(root, "trainer/task.py", "")
    host_file = write(tmp_path, "host-pip.conf", "[global]\nindex-url = https://pypi.org/simple\n")
    for key in ("pip_conf", "ca_cert"):
        write(root, "buildkit.yaml", f"trainer: {{module: trainer.task}}\n{key}: {host_file}\n")
        code, _, err = main(capsys, "build", "--dir", str(root))
        assert code == 2 and "leads outside" in err, err
    # The same file named by a flag (the user's own choice) is accepted as far as the engine.
    write(root, "buildkit.yaml", "trainer: {module: trainer.task}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        code, _, err = main(capsys, "build", "--dir", str(root), "--pip-conf", str(host_file))
        gc.collect()  # docker-py leaks the socket of a refused connection: collect it here, silently
    assert code == 5, err



# autopackage's inputs (issue 18): its flags, and what it reads from the trainer directory.
HOSTILE_AUTOPACKAGE = [
    (["--strict=yes\n"], None, "--strict"),
    (["--strict=\u2028"], None, "--strict"),
    (["--dockerfile=" + "a" * 70000], None, "--dockerfile"),
    (["--dockerfile=\udcff"], None, "--dockerfile"),
    (["--dockerfile"], None, "--dockerfile"),  # no Dockerfile in the directory
    (["--with-launcher=\n"], None, "--with-launcher"),
    (["--with-launcher"], None, "--with-launcher"),  # without --dockerfile
    ([], ("requirements.txt", "numpy\u2028tensorflow==2.15.1\n"), "requirements.txt:1"),
    ([], ("requirements.txt", "numpy\nx" * 1 + "y" * 70000 + "==1\n"), "requirements.txt"),
    ([], ("requirements.txt", b"numpy\n\xff\xfe==1\n"), "requirements.txt"),
    ([], ("requirements.txt", "torch==2.5.1;\n"), "requirements.txt:1"),
    ([], ("requirements.txt", "-e .\n"), "no setup.py"),
    ([], ("setup.cfg", "[options\ninstall_requires = x\n"), "setup.cfg"),
    ([], ("setup.py", b"from setuptools import setup\nsetup(name='\xff')\n"), "setup.py"),
    ([], ("setup.py", "setup(install_requires=['torch==2.5.1\\n'])\n"), "setup.py:install_requires[0]"),
    ([], ("pyproject.toml", "[project]\nname = 't'\ndependencies = 'torch'\n"), "dependencies"),
]


@pytest.mark.parametrize("flags, file, field", HOSTILE_AUTOPACKAGE,
                         ids=[f"{i}-{h[2][:20]}" for i, h in enumerate(HOSTILE_AUTOPACKAGE)])
def test_hostile_autopackage_input_exits_2_naming_it(tmp_path, capsys, flags, file, field, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    write(tmp_path, "trainer/task.py", "")
    if file:
        write(tmp_path, *file)
    code, _, err = main(capsys, "autopackage", str(tmp_path), "--dry-run", *flags)
    assert code == 2, err
    assert field in err, err


def test_autopackage_options_of_the_wrong_type_exit_2(tmp_path):
    from buildkit_py import api
    from buildkit_py.errors import ConfigError
    from buildkit_py.progress import Reporter

    write(tmp_path, "trainer/task.py", "")
    for name in ("strict", "dockerfile", "with_launcher"):
        with pytest.raises(ConfigError) as caught:
            api.autopackage(api.Project(directory=tmp_path), api.AutopackageOptions(**{name: "yes"}), progress=Reporter())
        assert caught.value.exit_code == 2 and f"--{name.replace('_', '-')}" in str(caught.value)
SKIP_IMAGE_CHECK_VALUES = ["yes\n", "\u2028", "a" * 70000, os.fsdecode(b"\xff\xfe")]


@pytest.mark.parametrize("command, flag", [("plan", "--skip-image-check"), ("submit", "--skip-image-check"),
                                           ("autopackage", "--skip-image-check"), ("build", "--no-fast-path"),
                                           ("run", "--no-fast-path"), ("autopackage", "--offline"),
                                           ("build", "--no-import-check"), ("autopackage", "--import-check"),
                                           ("dockerfile", "--build-extensions")])
@pytest.mark.parametrize("value", SKIP_IMAGE_CHECK_VALUES, ids=["newline", "u2028", "70000", "invalid-utf8"])
def test_switches_take_no_value(tmp_path, capsys, monkeypatch, command, flag, value):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    code, out, err = main(capsys, command, "--dir", str(tmp_path), f"{flag}={value}")
    assert code == 2 and flag in err and out == ""


def test_skip_image_check_of_another_type_is_refused_by_the_api(tmp_path):
    from buildkit_py import api

    write(tmp_path, "trainer/task.py", "")
    project = api.Project(directory=tmp_path)
    for wrong in ("true", 1, [True], None):
        options = api.SubmitOptions(skip_image_check=wrong)
        for call in (lambda o: api.plan(project, api.JobOptions(), o),
                     lambda o: api.autopackage(project, api.AutopackageOptions(dry_run=True, submit=o))):
            with pytest.raises(BuildkitError) as caught:
                call(options)
            assert caught.value.exit_code == 2 and "--skip-image-check" in str(caught.value)


# `lock`: its flag and the fields of a buildkit.lock (tests/test_lock.py has the hand edits that keep the YAML valid).
LOCK_CONFIG = "framework: none\npython: '3.11'\nbase_image: 127.0.0.1:5000/lock/base:1\ntrainer: {module: trainer.task}\n"


@pytest.mark.parametrize("value", ["bkpin\n", "bk\u2028pin", "b" * 70000, "bk\udcffpin", "-r /etc/passwd"],
                         ids=["newline", "u2028", "70000", "invalid-utf8", "option"])
def test_hostile_upgrade_package_exits_2_naming_it(tmp_path, capsys, value):
    write(tmp_path, "trainer/task.py", "")
    write(tmp_path, "buildkit.yaml", LOCK_CONFIG)
    code, _, err = main(capsys, "lock", "--dir", str(tmp_path), "--upgrade-package", value)
    assert code == 2 and "--upgrade-package" in err and len(err) < 1000, err


@pytest.mark.parametrize("lock, fragment", [
    ("version: 1\nimages: {_base: {python: \"3.11\\n\"}}\n", "buildkit.lock:2:"),
    ("version: 1\nimages: {_base: {python: \"3.11\\u2028\"}}\n", "buildkit.lock:2:"),
    ("version: 1\nimages: {_base: {python: '" + "3" * 70000 + "'}}\n", "buildkit.lock:2:"),
    (b"version: 1\nimages: \xff\n", "buildkit.lock"),
    ("version: 1\nimages: [a, b]\n", "buildkit.lock:2:"),
    ("version: '1'\nimages: {}\n", "buildkit.lock:1:"),
    ("version: 1\nimages: !!python/object:os.system {}\n", "buildkit.lock:2:"),
], ids=["newline", "u2028", "70000", "invalid-utf8", "list", "version-type", "yaml-tag"])
def test_hostile_lock_fields_exit_2_naming_the_line(tmp_path, capsys, lock, fragment):
    write(tmp_path, "trainer/task.py", "")
    write(tmp_path, "buildkit.yaml", LOCK_CONFIG)
    write(tmp_path, "buildkit.lock", lock)
    code, _, err = main(capsys, "dockerfile", "--dir", str(tmp_path))
    assert code == 2 and fragment in err and len(err) < 1000, err


def test_a_lock_linked_outside_the_trainer_directory_is_not_read(tmp_path, capsys):
    root = tmp_path / "trainer-dir"
    write(root, "trainer/task.py", "")
    write(root, "buildkit.yaml", LOCK_CONFIG)
    outside = write(tmp_path, "private.txt", "-----BEGIN PRIVATE KEY-----\nMIIEv\n")
    (root / "buildkit.lock").symlink_to(outside)
    code, _, err = main(capsys, "dockerfile", "--dir", str(root))
    assert code == 2 and "leads outside" in err and "PRIVATE" not in err, err
# --- builder cloudbuild: every `cloudbuild:` key, from the file and from its --cloudbuild-KEY flag ---------------

CLOUDBUILD_GOOD = {"project": "my-project", "region": "europe-west4", "bucket": "my-bucket", "machine_type": "E2_HIGHCPU_8",
                   "disk_size_gb": 200, "timeout": "90m", "worker_pool": "projects/p1/locations/us-central1/workerPools/pool",
                   "service_account": "builder@my-project.iam.gserviceaccount.com",
                   "ca_cert_secret": "projects/p1/secrets/ca/versions/1",
                   "pip_conf_secret": "projects/p1/secrets/pip-conf/versions/latest",
                   "uv_conf_secret": "projects/p1/secrets/uv-toml/versions/2"}
CLOUDBUILD_HOSTILE = {"newline": "my-bucket\n", "u2028": "my-bucket\u2028x", "70000": "a" * 70000,
                      "invalid-utf8": "my-bucket\udcff", "wrong-type": ["my-bucket"]}
HOSTILE_CLOUDBUILD_ENDPOINTS = ["http://127.0.0.1:1\n", "https://cloudbuild.googleapis.com\u2028", "https://" + "a" * 70000,
                          "https://cloudbuild\udcff.googleapis.com", "https://cloudbuild.googleapis.com/v1",
                          "http://cloudbuild.googleapis.com"]
CLOUDBUILD_BAD = {"bucket": "Bucket_With_Caps", "machine_type": "n1-standard-8", "disk_size_gb": 5, "timeout": "25h",
                  "worker_pool": "pool", "service_account": "not an email", "ca_cert_secret": "ca.pem",
                  "project": "x", "region": "moon"}


def test_cloudbuild_section_reads_every_key(tmp_path):
    from buildkit_py.config import CLOUDBUILD_KEYS
    from buildkit_py.flags import CLOUDBUILD_HELP

    assert set(CLOUDBUILD_GOOD) == set(CLOUDBUILD_KEYS) == set(CLOUDBUILD_HELP), "each key has its flag"
    write(tmp_path, "buildkit.yaml", yaml.safe_dump({"framework": "none", "builder": "cloudbuild",
                                                     "cloudbuild": CLOUDBUILD_GOOD}))
    config = load_config(directory=tmp_path, overrides={"cloudbuild": {"bucket": "flag-bucket"}})
    assert config.builder == "cloudbuild"
    assert config.cloudbuild.bucket == "flag-bucket", "a flag overrides its key"
    assert config.cloudbuild.project == "my-project", "the file's other keys stay"
    assert config.cloudbuild.timeout == 5400 and config.cloudbuild.disk_size_gb == 200


@pytest.mark.parametrize("key", sorted(CLOUDBUILD_GOOD))
@pytest.mark.parametrize("kind", sorted(CLOUDBUILD_HOSTILE) + ["bad"])
@pytest.mark.parametrize("as_flag", [False, True], ids=["file", "flag"])
def test_hostile_cloudbuild_settings_exit_2_naming_the_field(tmp_path, capsys, monkeypatch, key, kind, as_flag):
    from buildkit_py.flags import cloudbuild_flag_name

    value = CLOUDBUILD_BAD.get(key, "x y") if kind == "bad" else CLOUDBUILD_HOSTILE[kind]
    if as_flag and not isinstance(value, str):
        value = str(value)  # a flag is text; its type is checked as text (disk size: a whole number)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")  # nothing may be uploaded: nothing listens
    write(tmp_path, "trainer/task.py", "")
    config = {"framework": "none", "python": "3.11", "trainer": {"module": "trainer.task"}, "builder": "cloudbuild"}
    if not as_flag:
        config["cloudbuild"] = {key: value}
    write(tmp_path, "buildkit.yaml", json.dumps(config))
    flags = [cloudbuild_flag_name(key), value] if as_flag else []
    code, _, err = main(capsys, "build", "--dir", str(tmp_path), *flags)
    assert code == 2, err
    assert (cloudbuild_flag_name(key) if as_flag else f"cloudbuild.{key}") in err, err


@pytest.mark.parametrize("value", HOSTILE_CLOUDBUILD_ENDPOINTS, ids=["newline", "u2028", "70000", "invalid-utf8",
                                                                            "path", "plain-http-elsewhere"])
def test_hostile_cloudbuild_endpoint_exits_2_naming_it(tmp_path, capsys, monkeypatch, value):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    write(tmp_path, "trainer/task.py", "")
    write(tmp_path, "buildkit.yaml", "framework: none\npython: '3.11'\ntrainer: {module: trainer.task}\nbuilder: cloudbuild\n")
    code, _, err = main(capsys, "build", "--dir", str(tmp_path), "--cloudbuild-endpoint", value)
    assert code == 2 and "--cloudbuild-endpoint" in err, err
    monkeypatch.setenv("BUILDKIT_PY_CLOUDBUILD_ENDPOINT", value)
    code, _, err = main(capsys, "build", "--dir", str(tmp_path))
    assert code == 2 and "$BUILDKIT_PY_CLOUDBUILD_ENDPOINT" in err, err


@pytest.mark.parametrize("field, flag", [("fast_path", "--no-fast-path"), ("offline", "--offline")])
def test_build_switches_of_another_type_are_refused_by_the_api(tmp_path, field, flag):
    from buildkit_py import api

    write(tmp_path, "trainer/task.py", "")
    for wrong in ("false", 0, [False], None):
        for call in (lambda o: api.build(api.Project(directory=tmp_path), o),
                     lambda o: api.run(api.Project(directory=tmp_path), api.RunOptions(build=o)),
                     lambda o: api.autopackage(api.Project(directory=tmp_path), api.AutopackageOptions(build=o))):
            with pytest.raises(BuildkitError) as caught:
                call(api.BuildOptions(push=True, **{field: wrong}))
            assert caught.value.exit_code == 2 and flag in str(caught.value)


@pytest.mark.parametrize("line", ["numpy" + "x" * 900_000, "a:/" * 300_000, "git+h" * 180_000],
                         ids=["one-name", "colon-slashes", "scheme-like"])
def test_a_requirements_line_of_900_kb_is_answered_not_hung_on(tmp_path, line):
    """Every step reads a line in time linear in its size: a URL pattern that backtracked per character hung here."""
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "task.py").write_text("")
    (tmp_path / "buildkit.yaml").write_text("framework: none\ntrainer: {module: trainer.task}\n"
                                            "requirements: requirements.txt\n")
    (tmp_path / "requirements.txt").write_text(line + "\n")
    proc = subprocess.run([sys.executable, "-m", "buildkit_py", "dockerfile", "--dir", str(tmp_path), "--offline"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 2) and "Traceback" not in proc.stderr
    assert all(len(text) < 4000 for text in proc.stderr.splitlines())


@pytest.mark.parametrize("stage, fragment", [
    ("/tmp/x\ud800/s", "a path of valid Unicode (it holds a lone surrogate)"),
    ("/tmp/" + "b" * 20_000, "(20005 characters) is not allowed: a path of at most 4096 bytes"),
    ("file:///tmp/" + "c" * 300 + "/x", "a path whose every name is at most 255 bytes"),
], ids=["surrogate", "20k", "long-name"])
def test_a_stage_path_the_system_cannot_take_is_refused_by_name_in_one_bounded_line(project, capsys, stage, fragment):
    from buildkit_py import cli

    root = project({"buildkit.yaml": "framework: none\ntrainer: {module: trainer.task}\n", "trainer/task.py": ""})
    code = cli.main(["package", "--dir", str(root), "--out", str(root / "dist"), "--stage", stage])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("buildkit-py: error: --stage: ") and fragment in err
    assert len(err.strip().splitlines()) == 1 and len(err) < 400
