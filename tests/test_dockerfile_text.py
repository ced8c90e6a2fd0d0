"""The one reader of Dockerfile text against BuildKit's own parser (the `dockerfile` package wraps
moby/buildkit's frontend/dockerfile/parser), and --with-launcher checked by parsing its result with it."""

from __future__ import annotations

import json
import subprocess

import dockerfile  # BuildKit's parser (a test dependency)
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buildkit_py.errors import ConfigError
from buildkit_py.pipeline.render import render_with_launcher
from buildkit_py.sources.dockerfile import exec_form, instructions, read
from conftest import run_cli

CASES = {
    "an ENTRYPOINT in a heredoc's body": 'FROM x\nRUN <<EOF\nENTRYPOINT ["evil"]\nCMD ["evil"]\nEOF\n'
                                         'ENTRYPOINT ["python", "train.py"]\n',
    "<<-, quoted names, several on a line": 'FROM x\nCOPY <<-"A" <<\'B\' /x/\n\thello\n\tA\nb\nB\n'
                                            'RUN 3<<E1 cat <<E2 && true\n1\nE1\nCMD ["no"]\nE2\nCMD ["python", "t.py"]\n',
    "the escape directive": '# syntax=docker/dockerfile:1\n# escape=`\nFROM x\nRUN dir c:\\\n'
                            'ENTRYPOINT ["python", "t.py"]\nRUN echo `\n  more\n',
    "a final line ending in the escape character": 'FROM x\nCMD ["python", "t.py"]\nRUN echo a \\\n',
    "a final continuation ending in a comment": 'FROM x\nCMD ["python", "t.py"]\nRUN echo a \\\n# the end\n\n',
    "CRLF": 'FROM x\r\nRUN a \\\r\n  b\r\nENTRYPOINT ["python", \\\r\n "t.py"]\r\n',
    "comments and blank lines in continuations": 'FROM x\nENTRYPOINT ["python", \\\n# the trainer\n\n   "t.py"]\n'
                                                 'RUN a \\\n  # c\n\n b\n',
    "lowercase and JSON escapes": 'from x AS base\nrun echo hi\nentrypoint ["python", "-c", "print(\\"a\\\\\\\\\\")"]\n'
                                  'cmd ["--x=\\u00e9"]\n',
    "exec and shell forms, flags": 'FROM x\nRUN ["sh", "-c", "echo <<EOF"]\nRUN --mount=type=cache,target=/c <<EOF\nhi\n'
                                   'EOF\nONBUILD RUN <<EOF\nCMD x\nEOF\nCMD ["python", "t.py"]\n',
    "quotes hide a heredoc": 'FROM x\nRUN echo "<<EOF" \'<<X\' a<<B\nCMD ["python", "t.py"]\n',
    "an escaped escape character ends the line": 'FROM x\nRUN echo \\\\\nCMD ["python", "t.py"]\n',
    "a directive after an instruction is a comment": 'FROM x\n# escape=`\nRUN a `\nCMD ["python", "t.py"]\n',
    "two stages": 'FROM x AS a\nENTRYPOINT ["a"]\nFROM y\nCMD ["python", "t.py"]\n',
}


def _parsed(text: str):
    return dockerfile.parse_string(text)


def _keyword(command) -> str:
    return (command.cmd or "").upper()  # a line of only the escape character is an instruction with no keyword


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_the_reader_finds_the_instructions_buildkit_finds(text):
    ours = instructions(text)
    theirs = _parsed(text)
    assert [(i.keyword, i.line, i.end) for i in ours] == [(_keyword(c), c.start_line, c.end_line) for c in theirs]
    for mine, command in zip(ours, theirs, strict=True):
        if command.sub_cmd is None:  # the package does not show the heredocs of a command after ONBUILD
            assert [(h.name, h.content) for h in mine.heredocs] == [(h.name, h.content) for h in command.heredocs]
        if command.json:
            assert exec_form(mine.arguments) == list(command.value)
        elif not command.flags and _keyword(command) in ("RUN", "CMD", "ENTRYPOINT"):
            assert mine.arguments == command.value[0]


# Lines a Dockerfile is made of, in any order: BuildKit's reading of the whole decides what each one is. (Not `<< EOF`
# nor `# check=`: the package's parser predates both.)
PIECES = ["FROM x", "RUN a \\", "RUN a `", "  b", "# c", "", "  ", "\\", "`", "# escape=`", "# syntax=x", "#Syntax = y",
          "RUN <<EOF", "RUN <<-EOF cat", "COPY <<A <<'B' /x", 'RUN 2<<"E F"', "EOF", "\tEOF", "A", "B", "E F",
          'CMD ["a", \\', '"b"]', "cmd b", "ONBUILD RUN <<EOF", 'RUN ["<<EOF"]', "RUN --mount=x <<EOF",
          "RUN echo '<<EOF'", 'RUN echo "${A:-<<EOF}" \\', "RUN a\\\\", "\x0b RUN c", "ENTRYPOINT [\"e\"]\r",
          "<<EOF", "run <<eof", "eof", "copy <<X\\", "X", "RUN a # b \\", "  # escape=\\", "RUN <<EOF <<EOF"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=14), st.sampled_from(["\n", "\r\n"]),
       st.booleans())
def test_any_arrangement_of_lines_is_read_as_buildkit_reads_it(pieces, newline, final_newline):
    text = newline.join(pieces) + (newline if final_newline else "")
    try:
        theirs = _parsed(text)
    except dockerfile.GoParseError:
        return  # BuildKit refuses it (no instruction, an unterminated heredoc): nothing to compare
    ours = instructions(text)
    assert [(i.keyword, i.line, i.end) for i in ours] == [(_keyword(c), c.start_line, c.end_line) for c in theirs]
    for mine, command in zip(ours, theirs, strict=True):
        if command.sub_cmd is None:
            assert [(h.name, h.content) for h in mine.heredocs] == [(h.name, h.content) for h in command.heredocs]


def _comparable(command) -> tuple:
    # end_line aside: a final continuation that ran to the end of the file (over comments) now ends at its text
    return (_keyword(command), command.sub_cmd, command.json, command.original, command.start_line, command.flags,
            command.value, command.heredocs)


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_the_launcher_changes_no_other_instruction(text):
    _launcher_added_alone(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES + ['CMD ["python", "t.py"]', 'ENTRYPOINT ["python", \\', '  "t.py"]']),
                min_size=1, max_size=14), st.sampled_from(["\n", "\r\n"]))
def test_the_launcher_changes_no_other_instruction_of_any_arrangement(pieces, newline):
    text = newline.join(pieces)
    try:
        if not all(_keyword(c) for c in _parsed(text)):
            return  # an instruction without a keyword (a lone escape character): no build takes the file
        render_with_launcher(text, "Dockerfile")
    except (dockerfile.GoParseError, ConfigError):
        return  # refused by BuildKit, or by --with-launcher (no exec-form command in the final stage)
    _launcher_added_alone(text)


def _launcher_added_alone(text: str) -> None:
    before = _parsed(text)
    stage = max((i for i, c in enumerate(before) if _keyword(c) == "FROM"), default=0)
    own = {_keyword(c): list(c.value) for c in before[stage:] if _keyword(c) in ("ENTRYPOINT", "CMD")}
    kept = [c for i, c in enumerate(before) if i < stage or _keyword(c) not in ("ENTRYPOINT", "CMD")]
    after = _parsed(render_with_launcher(text, "Dockerfile"))
    assert [_comparable(c) for c in after[:-4]] == [_comparable(c) for c in kept]
    copy, env, entrypoint, cmd = after[-4:]
    assert (copy.cmd, copy.json, copy.value[-1]) == ("COPY", True, "/opt/buildkit-py/buildkit_launcher")
    assert env.cmd == "ENV" and env.value[0] == "PYTHONPATH"
    assert (entrypoint.cmd, entrypoint.json) == ("ENTRYPOINT", True)
    assert list(entrypoint.value) == ["python3", "-m", "buildkit_launcher", "--", *own.get("ENTRYPOINT", [])]
    assert (cmd.cmd, cmd.json, list(cmd.value)) == ("CMD", True, own.get("CMD", []))


@pytest.mark.parametrize("text, fragment", [
    ("FROM x\nRUN <<EOF\necho\n", "line 2: the heredoc 'EOF' is never terminated"),
    ("# escape=x\nFROM x\n", "line 1: the escape directive's value 'x' is not ` or \\"),
    ("# escape=`\n# ESCAPE=\\\nFROM x\n", "line 2: only one escape parser directive"),
])
def test_what_buildkit_refuses_is_refused_naming_the_line(text, fragment):
    with pytest.raises(dockerfile.GoParseError):  # BuildKit refuses it too
        _parsed(text)
    with pytest.raises(ConfigError) as caught:
        read(text)
    assert fragment in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        render_with_launcher(text + 'CMD ["x"]\n', "Dockerfile")
    assert str(caught.value).startswith("Dockerfile: BuildKit cannot read it: line ")


def test_inference_reads_a_refused_file_up_to_where_it_goes_wrong():
    assert [i.keyword for i in instructions("FROM x\nCMD [\"a\"]\nRUN <<EOF\necho\n")] == ["FROM", "CMD"]


def test_whitespace_after_the_heredoc_marker_as_buildkit_reads_it_since_2025():
    # `RUN << EOF` opens a heredoc in BuildKit since March 2025 (the package's parser is older)
    (run,) = instructions("RUN << EOF\nhi\nEOF\n")
    assert [(h.name, h.content) for h in run.heredocs] == [("EOF", "hi\n")] and run.end == 3


def test_shell_form_is_refused_naming_the_line():
    with pytest.raises(ConfigError) as caught:
        render_with_launcher("FROM x\nRUN a\nCMD python \\\n  train.py\n", "Dockerfile")
    assert "Dockerfile: line 3: CMD 'python   train.py' is not in exec form" in str(caught.value)


def test_the_engine_builds_the_launcher_into_an_escape_directive_crlf_file_ending_in_a_continuation(testenv, tmp_path):
    """The real engine reads the result: the user's command runs after the launcher, and every instruction of the
    user's is in the image's history (the final RUN, whose continuation once took in the launcher's COPY, too)."""
    root = tmp_path / "trainer-dir"
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "train.py").write_text("print('not this one')\n")
    own = ("# escape=`\n"
           "FROM python:3.11-slim-bookworm\n"
           "RUN echo 'c:\\' > /marker\n"  # a backslash ends no line under the backtick
           "ENTRYPOINT [\"python3\", `\n# the command\n\n  \"-c\", \"print('OWN COMMAND', open('/marker').read())\"]\n"
           "RUN echo last `\n")
    (root / "Dockerfile").write_bytes(own.replace("\n", "\r\n").encode())
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_cli("autopackage", str(root), "--image", f"{testenv['BUILDKIT_TEST_REGISTRY']}/dockerfile-text/own",
                   "--dockerfile", "--with-launcher", "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["run"]["exit_code"] == 0 and "OWN COMMAND c:\\" in proc.stderr
    docker = [testenv["BUILDKIT_DOCKER"]]
    engine = {"DOCKER_HOST": testenv["DOCKER_HOST"]}
    inspect = json.loads(subprocess.run([*docker, "image", "inspect", out["image"]], capture_output=True, text=True,
                                        env=engine, check=True).stdout)[0]["Config"]
    assert inspect["Entrypoint"] == ["python3", "-m", "buildkit_launcher", "--", "python3", "-c",
                                     "print('OWN COMMAND', open('/marker').read())"]
    history = subprocess.run([*docker, "history", "--no-trunc", "--format", "{{.CreatedBy}}", out["image"]],
                             capture_output=True, text=True, env=engine, check=True).stdout
    assert "echo 'c:\\' > /marker" in history and "echo last" in history and "/opt/buildkit-py" in history
