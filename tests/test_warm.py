"""The console script's warm process (buildkit_py/cli/warm.py): a command it serves prints, exits and writes what the
same command run in its own process does, in the caller's directory and environment; it is used only where asked
(or on a terminal), only by the interpreter and user that started it, and a bad setting is said, not guessed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from buildkit_py.cli.warm import stop

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "examples" / "quickstart" / "buildkit.yaml"


@pytest.fixture
def console(tmp_path_factory):
    """A console script as pip writes one (this interpreter, buildkit_py.cli.warm:main), a runtime directory of its own
    for the warm process's socket, and the warm processes it started, ended with the test."""
    bin_dir = tmp_path_factory.mktemp("bin")
    script = bin_dir / "buildkit-py"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom buildkit_py.cli.warm import main\nsys.exit(main())\n")
    script.chmod(0o755)
    runtime = Path(os.path.realpath(tmp_path_factory.mktemp("rt")))

    def run(*args: str, cwd: Path = REPO, env: dict | None = None, warm: str = "1", umask: int = 0o022
            ) -> subprocess.CompletedProcess:
        given = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
                 "PYTHONPATH": str(REPO), "XDG_RUNTIME_DIR": str(runtime), "BUILDKIT_PY_WARM": warm,
                 "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"], "BUILDKIT_PY_OFFLINE": "1", **(env or {})}
        return subprocess.run([str(script), *args], cwd=cwd, capture_output=True, text=True, env=given, timeout=120,
                              umask=umask)

    def popen(*args: str, env: dict | None = None) -> subprocess.Popen:
        given = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
                 "PYTHONPATH": str(REPO), "XDG_RUNTIME_DIR": str(runtime), "BUILDKIT_PY_WARM": "1",
                 "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"], "BUILDKIT_PY_OFFLINE": "1", **(env or {})}
        return subprocess.Popen([str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=given)

    run.popen = popen
    run.runtime = runtime / f"buildkit-py-warm-{os.getuid()}"
    yield run
    stop(str(run.runtime))


def wait_for_server(folder: Path) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        logs = [p for p in folder.glob("*.log") if "listening at" in p.read_text()] if folder.is_dir() else []
        if logs:
            return logs[0]
        time.sleep(0.1)
    raise AssertionError(f"no warm process started in {folder}: {[p.read_text() for p in folder.glob('*.log')]}")


def served(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith("pid ")]


def test_a_served_command_prints_and_exits_as_its_own_process_would(console, tmp_path):
    first = console("dockerfile", "--config", str(CONFIG))  # none answers yet: runs here, starts one
    assert first.returncode == 0, first.stderr
    log = wait_for_server(console.runtime)
    again = console("dockerfile", "--config", str(CONFIG))
    assert served(log) == [served(log)[0]] and served(log)[0].endswith(": dockerfile")
    assert (again.returncode, again.stdout, again.stderr) == (first.returncode, first.stdout, first.stderr)
    # An error: the same message and status, from the child as from a process of its own.
    alone = console("dockerfile", "--config", str(CONFIG), "--framework", "nope", warm="0")
    bad = console("dockerfile", "--config", str(CONFIG), "--framework", "nope")
    assert len(served(log)) == 2
    assert bad.returncode == alone.returncode == 2
    assert bad.stderr == alone.stderr and "unknown framework 'nope'" in bad.stderr


def test_the_child_takes_the_callers_directory_environment_and_umask(console, tmp_path):
    console("dockerfile", "--config", str(CONFIG))
    log = wait_for_server(console.runtime)
    project = tmp_path / "p"
    (project / "trainer").mkdir(parents=True)
    (project / "trainer" / "task.py").write_text("print('hi')\n")
    (project / "buildkit.yaml").write_text("framework: none\npython: '3.11'\ntrainer: {module: trainer.task}\n")
    out = project / "out"
    cache = tmp_path / "cache"
    # A relative config and output, read and written in the caller's directory; the cache the caller's environment
    # names; a new file made under the caller's umask.
    made = console("dockerfile", "--config", "buildkit.yaml", "--output", "out/Dockerfile", cwd=project,
                   env={"BUILDKIT_PY_CACHE_DIR": str(cache)}, umask=0o077)
    assert made.returncode == 0, made.stderr
    assert len(served(log)) == 1
    assert "FROM python:3.11" in (out / "Dockerfile").read_text()
    assert (out / "Dockerfile").stat().st_mode & 0o077 == 0
    assert cache.is_dir() and any(cache.iterdir())  # the child's cache is the caller's, not the warm process's


def test_another_interpreter_setting_gets_a_warm_process_of_its_own(console):
    console("dockerfile", "--config", str(CONFIG))
    log = wait_for_server(console.runtime)
    other = console("dockerfile", "--config", str(CONFIG), env={"PYTHONWARNINGS": "ignore"})
    assert other.returncode == 0, other.stderr
    assert served(log) == []  # a start-up setting the warm process does not have: not served by it
    deadline = time.monotonic() + 60
    while len(list(console.runtime.glob("*.sock"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(list(console.runtime.glob("*.sock"))) == 2


@pytest.mark.parametrize("value", ["maybe", "2", "on please", "\n", "1\n", "\u2028", "x" * 70000, "\udcff"])
def test_a_setting_not_allowed_is_said(console, value):
    proc = console("dockerfile", "--config", str(CONFIG), warm=value)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "BUILDKIT_PY_WARM" in proc.stderr and "auto, 1 or 0" in proc.stderr and "Traceback" not in proc.stderr


def test_off_by_default_where_nobody_watches(console):
    # auto: stderr is a pipe here, so every command runs in its own process and none is started.
    for _ in range(2):
        assert console("dockerfile", "--config", str(CONFIG), warm="auto").returncode == 0
    assert not console.runtime.exists()
    assert console("dockerfile", "--config", str(CONFIG), warm="0").returncode == 0
    assert not console.runtime.exists()


def test_commands_that_follow_a_job_or_a_terminal_run_where_typed(console):
    console("dockerfile", "--config", str(CONFIG))
    log = wait_for_server(console.runtime)
    console("logs", "--help")
    console("--version")
    assert served(log) == []


def test_a_socket_directory_others_may_write_is_not_used(console):
    console.runtime.mkdir(mode=0o700)
    console.runtime.chmod(0o777)
    for _ in range(2):
        assert console("dockerfile", "--config", str(CONFIG)).returncode == 0
    time.sleep(1)
    assert list(console.runtime.iterdir()) == []  # neither served nor started in a directory another user may write


def test_ctrl_c_reaches_the_served_command(console, tmp_path):
    """The client passes the terminal's SIGINT to the child's process group (the child and the resolver it runs):
    the command says it was interrupted and exits 130, as one in its own process does."""
    import socket

    silent = socket.socket()  # an index that takes the connection and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    project = tmp_path / "p"
    (project / "trainer").mkdir(parents=True)
    (project / "trainer" / "task.py").write_text("import six\n")
    (project / "requirements.txt").write_text("six==1.16.0\n")
    (project / "buildkit.yaml").write_text(
        "framework: none\npython: '3.11'\nrequirements: requirements.txt\ntrainer: {module: trainer.task}\n"
        f"pip_index_url: http://127.0.0.1:{silent.getsockname()[1]}/simple\n")
    console("dockerfile", "--config", str(CONFIG))
    log = wait_for_server(console.runtime)
    proc = console.popen("dockerfile", "--resolve", "--config", str(project / "buildkit.yaml"),
                         env={"BUILDKIT_PY_OFFLINE": ""})
    deadline = time.monotonic() + 30
    while not served(log) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # the resolver is waiting on the index
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    silent.close()
    assert served(log) and proc.returncode == 130, err
    assert "buildkit-py: interrupted" in err and "Traceback" not in err


def test_an_edit_of_its_code_sends_the_warm_process_away(console, tmp_path):
    """The warm process runs the code it loaded: once one of those files changes, it serves no command more (the
    command runs alone, with the new code) and leaves; the next command starts one with the new code."""
    import shutil

    copy = tmp_path / "src"
    copy.mkdir()
    shutil.copytree(REPO / "buildkit_py", copy / "buildkit_py", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for data in ("templates", "base_images"):
        if (REPO / data).is_dir():
            shutil.copytree(REPO / data, copy / data, symlinks=True)
    env = {"PYTHONPATH": str(copy)}
    assert console("dockerfile", "--config", str(CONFIG), env=env).returncode == 0
    log = wait_for_server(console.runtime)
    assert console("dockerfile", "--config", str(CONFIG), env=env).returncode == 0
    assert len(served(log)) == 1
    output = copy / "buildkit_py" / "cli" / "output.py"  # loaded by every command, and so by the warm process
    output.write_text(output.read_text() + "\n# edited\n")
    edited = console("dockerfile", "--config", str(CONFIG), env=env)
    assert edited.returncode == 0, edited.stderr
    assert len(served(log)) == 1  # not served by the process that loaded the old file
    first_pid = int(log.read_text().split("\n")[0].rsplit(" ", 1)[1])
    deadline = time.monotonic() + 60
    while _alive(first_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(first_pid), "the warm process stayed after its code changed"
    deadline = time.monotonic() + 60
    while log.read_text().count("listening at") < 2 and time.monotonic() < deadline:
        console("dockerfile", "--config", str(CONFIG), env=env)  # runs alone, and starts a warm process anew
        time.sleep(0.5)
    assert log.read_text().count("listening at") == 2
    assert console("dockerfile", "--config", str(CONFIG), env=env).returncode == 0
    assert len(served(log)) == 2
    # A template is no module, but the warm process listed it once for every command's kept-recipe key: an edit of
    # one sends it away too.
    second_pid = int([line for line in log.read_text().splitlines() if line.startswith("listening at")][1].rsplit(" ", 1)[1])
    template = sorted((copy / "templates").rglob("*.j2"))[0]
    template.write_text(template.read_text() + "\n{# edited #}\n")
    assert console("dockerfile", "--config", str(CONFIG), env=env).returncode == 0
    assert len(served(log)) == 2
    deadline = time.monotonic() + 60
    while _alive(second_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(second_pid), "the warm process stayed after a template changed"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (ours, not yet reaped) has left all the same
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


def test_a_runtime_directory_too_deep_for_a_socket_runs_commands_alone(console, tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    for _ in range(2):
        proc = console("dockerfile", "--config", str(CONFIG), env={"XDG_RUNTIME_DIR": str(deep)})
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert not (deep / f"buildkit-py-warm-{os.getuid()}").exists() or not any(
        (deep / f"buildkit-py-warm-{os.getuid()}").glob("*.sock"))


def test_the_warm_up_leaves_a_child_nothing_to_compile_or_build():
    """What the warm process does before it forks (the parsers, the API's warm_up) is what its children would do on
    every command: afterwards the loaded modules' patterns are compiled, the parser of a command is the one built
    already, a command line parses and the default ignore list translates without compiling a regular expression,
    and the kept-recipe key is made from buildkit-py's files as listed then (the files the process watches)."""
    probe = (
        "import re\n"
        "import buildkit_py.pipeline.fastpath, buildkit_py.sources.imports\n"
        "from buildkit_py.cli import warm, parser\n"
        "from buildkit_py import patterns\n"
        "from buildkit_py.pipeline.render import render_dockerignore\n"
        "from buildkit_py.sources.ignore import parse_ignore\n"
        "from buildkit_py.pipeline import recipe\n"
        "assert any('match' not in vars(p) for p in patterns._MADE)\n"
        "before = recipe.key('project', 'options')\n"
        "relied_on = warm._rehearse()\n"
        "assert any(p.endswith('.j2') for p in relied_on) and any(p.endswith('.yaml') for p in relied_on)\n"
        "assert recipe._HELD is not None and recipe.key('project', 'options') == before\n"
        "assert patterns._MADE and all('match' in vars(p) for p in patterns._MADE)\n"
        "built = parser.parser_for('build')\n"
        "compiled = []\n"
        "real = re._compiler.compile\n"  # what re calls on a miss of its own cache
        "re._compiler.compile = lambda *a: compiled.append(a) or real(*a)\n"
        "parser.parse(['build', '--push', '--tag', 'r.example/x', '--no-attest'])\n"
        "assert parser.parser_for('build') is built\n"
        "parse_ignore(render_dockerignore(None))\n"
        "print(len(compiled))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0"]
