"""The launcher runs a `python -m M` / `python SCRIPT` trainer in its own interpreter (runpy) instead
of starting a second one. Each case runs the trainer twice, directly with this interpreter and through
the launcher, and the two must not differ: exit status, stdout, stderr (tracebacks included), files.
Also as PID 1 (the supervisor forks, the child runs the trainer), in a PID namespace of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

TASK = '''
import atexit, os, sys, threading, time
from . import helper


class Point:
    def __init__(self, x):
        self.x = x


def square(n):
    return n * n


def annotated(x: int) -> None:
    pass


mode = sys.argv[1] if len(sys.argv) > 1 else "info"
if mode == "info":
    import __main__
    print(__name__, __package__, __spec__ and __spec__.name, __file__, sys.argv, sys.path[0], helper.VALUE,
          __main__.__dict__ is globals(), annotated.__annotations__)
elif mode == "raise":
    helper.fail("boom")
elif mode == "exit-message":
    sys.exit("a message for stderr")
elif mode == "exit-code":
    sys.exit(7)
elif mode == "interrupt":
    raise KeyboardInterrupt
elif mode == "shutdown":
    # After the module's code: a non-daemon thread is joined, then atexit runs, then an open
    # file (a cycle through its module's functions) is flushed and closed.
    atexit.register(lambda: print("atexit ran", flush=True))
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread finished", flush=True))).start()
    log = open(sys.argv[2], "w")
    log.write("written, never flushed by the trainer")
    print("module done", flush=True)
elif mode == "pickle":
    import multiprocessing
    import pickle
    assert pickle.loads(pickle.dumps(Point(3))).x == 3  # a class of __main__, found by pickle
    if __name__ == "__main__":
        with multiprocessing.get_context("spawn").Pool(1) as pool:  # re-imports __main__ by name
            print("spawned", pool.map(square, [2, 3]), flush=True)
'''

SCRIPT = '''
import sys
import helper_module


def annotated(x: int) -> None:
    pass


print(__name__, __package__, __spec__, __file__, sys.argv, sys.path[0], helper_module.VALUE, annotated.__annotations__)
if sys.argv[1:] == ["raise"]:
    helper_module.fail("boom")
'''

HELPER = '''
VALUE = "helper"


def fail(message):
    raise ValueError(message)
'''


@pytest.fixture(scope="module")
def trainers(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("handoff")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "helper.py").write_text(HELPER)
    (root / "pkg" / "task.py").write_text(TASK)
    (root / "pkg" / "__main__.py").write_text("import sys\nprint('package main', __name__, __spec__.name, sys.argv)\n")
    (root / "scripts").mkdir()
    (root / "scripts" / "train.py").write_text(SCRIPT)
    (root / "scripts" / "helper_module.py").write_text(HELPER)
    (root / "elsewhere").mkdir()
    (root / "elsewhere" / "link.py").symlink_to(root / "scripts" / "train.py")  # sys.path[0]: the real directory
    return root


def _pid_namespace_works() -> bool:
    try:
        return subprocess.run(["unshare", "--fork", "--pid", "--mount-proc", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


PID_1 = pytest.param(True, marks=pytest.mark.skipif(not _pid_namespace_works(), reason="unshare --pid is not allowed here"),
                     id="pid1")


def env(**extra) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "BUILDKIT_PY_LAUNCHER_QUIET": "1", **extra}


def run(root: Path, command: list[str], launcher: bool, pid_1: bool = False, **kwargs) -> subprocess.CompletedProcess:
    if launcher:
        command = [sys.executable, "-m", "buildkit_py.launcher", "--", *command]
    if pid_1:
        command = ["unshare", "--fork", "--pid", "--mount-proc", *command]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, env=env(), timeout=60, **kwargs)


def assert_same(root: Path, command: list[str], pid_1: bool = False) -> subprocess.CompletedProcess:
    direct = run(root, command, launcher=False)
    launched = run(root, command, launcher=True, pid_1=pid_1)
    # As PID 1 the supervisor exits 128 + N for a trainer ended by signal N, as a shell says it (and as before).
    code = 128 - direct.returncode if pid_1 and direct.returncode < 0 else direct.returncode
    assert (launched.returncode, launched.stdout, launched.stderr) == (code, direct.stdout, direct.stderr)
    return direct


MODULE_CASES = [
    # (arguments after `python -m pkg.task`, exit status, a fragment of stdout + stderr)
    (["info", "--lr", "0.1"], 0, "__main__ pkg pkg.task"),
    (["raise"], 1, "ValueError: boom"),
    (["exit-message"], 1, "a message for stderr"),
    (["exit-code"], 7, ""),
    (["interrupt"], -signal.SIGINT, "KeyboardInterrupt"),  # Python ends by the signal itself
    (["pickle"], 0, "spawned [4, 9]"),
]


@pytest.mark.parametrize("pid_1", [False, PID_1])
@pytest.mark.parametrize("args, code, fragment", MODULE_CASES, ids=[c[0][0] for c in MODULE_CASES])
def test_a_module_runs_as_python_runs_it(trainers, args, code, fragment, pid_1):
    direct = assert_same(trainers, [sys.executable, "-m", "pkg.task", *args], pid_1)
    assert direct.returncode == code and fragment in direct.stdout + direct.stderr
    if args[0] == "info":  # what the comparison covered
        assert f"{trainers}/pkg/task.py ['{trainers}/pkg/task.py', 'info', '--lr', '0.1'] {trainers} helper True " \
               "{'x': <class 'int'>, 'return': None}" in direct.stdout
    if args[0] == "raise":
        assert 'pkg/helper.py", line 6, in fail' in direct.stderr and "buildkit_py" not in direct.stderr


@pytest.mark.parametrize("pid_1", [False, PID_1])
@pytest.mark.parametrize("command", [["-m", "pkg", "a"], ["-m", "pkg.nosuch"], ["scripts/train.py", "x"],
                                     ["scripts/train.py", "raise"], [str(Path("elsewhere") / "link.py")]],
                         ids=["package-main", "no-such-module", "script", "script-raise", "symlinked-script"])
def test_a_package_or_script_runs_as_python_runs_it(trainers, command, pid_1):
    direct = assert_same(trainers, [sys.executable, *command], pid_1)
    if command[0] == "scripts/train.py":
        # __file__ absolute, argv[0] as given, sys.path[0] the script's directory, no __future__ leaked in
        assert f"__main__ None None {trainers}/scripts/train.py ['scripts/train.py', '{command[1]}'] {trainers}/scripts " \
               "helper {'x': <class 'int'>, 'return': None}" in direct.stdout
    if command[0].startswith("elsewhere"):
        assert f" {trainers}/scripts helper " in direct.stdout
    if command[1:2] == ["pkg.nosuch"]:
        assert direct.returncode == 1 and f"{sys.executable}: No module named pkg.nosuch" in direct.stderr


def test_shutdown_joins_threads_runs_atexit_and_flushes_files(trainers, tmp_path):
    results = []
    for launcher in (False, True):
        log = tmp_path / f"log-{launcher}"
        proc = run(trainers, [sys.executable, "-m", "pkg.task", "shutdown", str(log)], launcher=launcher)
        results.append((proc.returncode, proc.stdout, proc.stderr, log.read_text()))
    assert results[0] == results[1]
    assert results[0] == (0, "module done\nthread finished\natexit ran\n", "", "written, never flushed by the trainer")


TELL = "import sys; print(sorted(m for m in sys.modules if m.endswith('launcher.handoff')))\n"


def test_only_this_interpreter_run_plainly_is_run_in_process(trainers, tmp_path):
    script = tmp_path / "tell.py"
    script.write_text(TELL)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)  # the same binary in another directory: another venv

    def launch(*command, python=()):
        proc = subprocess.run([sys.executable, *python, "-m", "buildkit_py.launcher", "--", *command],
                              capture_output=True, text=True, env=env(), timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert launch(sys.executable, str(script)) == "['buildkit_py.launcher.handoff']\n"
    assert launch(str(tmp_path / "bin" / "python"), str(script)) == "[]\n"
    assert launch(sys.executable, "-u", str(script)) == "[]\n"  # interpreter options: a fresh one
    assert launch(sys.executable, str(script), python=("-X", "dev")) == "[]\n"  # the launcher's own options differ
    assert launch(sys.executable, "-c", TELL) == "[]\n"


# The trainer's handler must not print: SIGTERM can land while the main thread is inside
# print(flush=True) holding stdout's lock, and a print from the handler then raises "reentrant call".
SIGTERM_TRAINER = (
    "import os, signal, sys, time\n"
    "def on_term(*_):\n"
    "    os.write(1, b'got SIGTERM in ' + __name__.encode() + b'\\n')\n"
    "    os._exit(42)\n"
    "signal.signal(signal.SIGTERM, on_term)\n"
    "print('ready', flush=True)\n"
    "while True:\n"  # short sleeps: a signal landing between Python's check and the sleep's syscall waits for the
    "    time.sleep(0.05)\n"  # sleep to end (CPython's own race), as no training loop would
)


@pytest.mark.parametrize("pid_1", [False, PID_1])
def test_sigterm_reaches_a_trainer_run_in_process(tmp_path, pid_1):
    script = tmp_path / "trainer.py"
    script.write_text(SIGTERM_TRAINER)
    command = [sys.executable, "-m", "buildkit_py.launcher", "--", sys.executable, str(script)]
    if pid_1:
        command = ["unshare", "--fork", "--pid", "--mount-proc", *command]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    assert proc.stdout.readline() == "ready\n"
    if pid_1:  # as `docker stop` does: to the namespace's PID 1, the launcher (unshare itself ignores SIGTERM)
        launcher = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0])
        os.kill(launcher, signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:  # seen once in a full run, never alone: say where the signal stuck
        states = _signal_states(proc.pid)
        proc.kill()
        pytest.fail(f"no exit 20 s after SIGTERM; processes (pid, state, blocked, caught):\n{states}")
    assert out == "got SIGTERM in __main__\n" and proc.returncode == 42, err


def _signal_states(root: int) -> str:
    """State and signal masks of a process and its descendants, from /proc."""
    lines, todo = [], [root]
    while todo:
        pid = todo.pop()
        try:
            fields = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                          if ":\t" in line)
            todo += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except OSError:
            continue
        lines.append(f"{pid} {fields.get('State', '?').strip()} blk={fields.get('SigBlk', '?').strip()} "
                     f"cgt={fields.get('SigCgt', '?').strip()} pnd={fields.get('ShdPnd', '?').strip()}")
    return "\n".join(lines)


def test_supervisor_forwards_to_the_forked_trainer_and_reaps_orphans(tmp_path):
    """supervise() itself, not as PID 1: the orphan is re-parented to init, not to the supervisor, so
    the zombie check runs in a PID namespace (unshare) when that is allowed."""
    script = tmp_path / "trainer.py"
    script.write_text(SIGTERM_TRAINER)
    code = ("import sys; from buildkit_py.launcher.handoff import python_target, supervise; "
            f"cmd = [{sys.executable!r}, {str(script)!r}]; raise SystemExit(supervise(cmd, python_target(cmd)))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env())
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert out == "got SIGTERM in __main__\n" and proc.returncode == 42


ORPHANS = '''
import os, time
child = os.fork()
if child == 0:
    if os.fork() == 0:
        time.sleep(0.2)  # outlives its parent: re-parented to PID 1, the launcher, before it exits
        os._exit(0)
    os._exit(0)
os.waitpid(child, 0)
time.sleep(1.0)
zombies = [p for p in os.listdir("/proc") if p.isdigit()
           and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"]
print("zombies", len(zombies), "pid", os.getpid())
'''


@pytest.mark.skipif(not _pid_namespace_works(), reason="unshare --pid is not allowed here")
def test_pid_1_reaps_the_orphans_of_a_trainer_run_in_process(tmp_path):
    script = tmp_path / "orphans.py"
    script.write_text(ORPHANS)
    proc = subprocess.run(["unshare", "--fork", "--pid", "--mount-proc", sys.executable, "-m", "buildkit_py.launcher", "--",
                           sys.executable, str(script)], capture_output=True, text=True, env=env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "zombies 0 pid 2\n"  # the forked trainer, beside its supervisor


# What the launcher's start imports: the container start pays for every module (issue 13).
@pytest.mark.parametrize("extra, devices, wanted, unwanted", [
    ({}, [], {"buildkit_py.launcher.gpu"},
     {"ctypes", "dataclasses", "json", "subprocess", "ssl", "urllib.request", "buildkit_py.launcher.tpu", "inspect"}),
    ({}, ["nvidiactl"], {"ctypes"}, set()),  # an NVIDIA device: NVML is asked
    ({"BUILDKIT_PY_EXPECT_TPU_CHIPS": "1", "BUILDKIT_PY_SKIP_TPU_CHECK": "1"}, [], set(),
     {"buildkit_py.launcher.gpu", "buildkit_py.launcher.tpu", "ctypes"}),
    ({"BUILDKIT_PY_EXPECT_TPU_CHIPS": "1"}, [], {"buildkit_py.launcher.tpu"}, {"ctypes", "json"}),
    ({"CLUSTER_SPEC": '{"cluster": {"workerpool0": ["a:1"]}, "task": {"type": "workerpool0", "index": 0}}'}, [],
     {"json"}, {"ctypes"}),
])
def test_start_up_imports_only_what_the_run_needs(tmp_path, extra, devices, wanted, unwanted):
    for name in devices:
        (tmp_path / name).write_bytes(b"")
    # -S: what the site module's .pth files import here is no part of the launcher's start.
    proc = subprocess.run([sys.executable, "-S", "-X", "importtime", "-m", "buildkit_py.launcher", "--check"],
                          capture_output=True, text=True, env=env(BUILDKIT_PY_DEV_DIR=str(tmp_path), **extra))
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert wanted <= imported and not unwanted & imported, proc.stderr[-3000:]
