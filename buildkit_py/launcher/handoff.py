"""Hand off to the trainer so that it behaves as if it were the container's command: signals
reach it (SIGTERM on preemption), its exit status is the container's, and zombies are reaped.

A trainer command that would start this same interpreter the plain way (`python -m MODULE ARGS`
or `python SCRIPT ARGS`) runs in this interpreter instead, through runpy, as Python itself runs
them: that saves starting a second interpreter (tens of milliseconds at every container start).
Anything else (another interpreter, interpreter options, a shell script) is exec'd or spawned.
"""

from __future__ import annotations

import os
import signal
import sys

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
MODULE, SCRIPT = "module", "script"  # the kinds of target: (kind, module name or script path, arguments)


def interpreter_env(env) -> dict[str, str]:
    """The variables read once, at process start, by the loader (LD_*) and by Python (PYTHON*):
    a trainer may run in this interpreter only while they are what this process started with."""
    return {k: v for k, v in env.items() if k.startswith(("LD_", "PYTHON"))}


def _on_path(name: str) -> str | None:
    """The file execvp would run for name."""
    if os.sep in name:
        return name
    for directory in os.get_exec_path():
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _is_this_interpreter(name: str) -> bool:
    path = _on_path(name)
    # The same file in the same directory: a venv is chosen by the directory the interpreter is
    # started from (pyvenv.cfg beside it), so a symlink elsewhere is another environment.
    return bool(path and sys.executable) and os.path.dirname(os.path.abspath(path)) == os.path.dirname(
        sys.executable) and os.path.realpath(path) == os.path.realpath(sys.executable)


def python_target(command: list[str]) -> tuple[str, str, list[str]] | None:
    """(MODULE, M, ARGS) for `python -m M ARGS`, (SCRIPT, PATH, ARGS) for `python PATH ARGS`, when
    `python` is this interpreter and this interpreter was started with no options before its own
    -m (so the trainer's interpreter would be configured alike); None otherwise."""
    if len(command) < 2 or not _is_this_interpreter(command[0]):
        return None
    started = getattr(sys, "orig_argv", None)  # Python 3.10+; older ones: the image's ENTRYPOINT has no options
    if started is not None and started[1:2] != ["-m"]:
        return None
    if command[1] == "-m":
        module = command[2] if len(command) > 2 else ""
        if module and all(part.isidentifier() for part in module.split(".")):
            return MODULE, module, command[3:]
        return None
    # A .py file only: Python runs a zip, a directory or a .pyc given as SCRIPT differently.
    if command[1].endswith(".py") and os.path.isfile(command[1]) and os.access(command[1], os.R_OK):
        return SCRIPT, command[1], command[2:]
    return None


def _trainer_frames(tb):
    """The traceback from where the trainer's code was entered on, without this module's frames."""
    while tb is not None and tb.tb_frame.f_globals.get("__name__") == __name__:
        tb = tb.tb_next
    return tb


def _die_by_sigint(interrupted: list[bool]) -> None:
    """As Python ends on an uncaught KeyboardInterrupt: by SIGINT, so the parent sees the signal."""
    if not interrupted:
        return
    import gc

    gc.collect()  # finalize what the trainer left (open files flush), as interpreter shutdown would
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


def _run_script(main, name: str, args: list[str]) -> None:
    """As `python SCRIPT ARGS` runs it: sys.argv[0] as given, __file__ and the code's file name
    absolute, sys.path[0] the directory of the script's real path."""
    import importlib.machinery

    filename = os.path.abspath(name)
    sys.argv = [name, *args]
    if not getattr(sys.flags, "safe_path", False):
        sys.path[0] = os.path.dirname(os.path.realpath(filename))  # -m put the working directory there
    main.__file__ = filename
    main.__cached__ = None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", filename)
    with open(filename, "rb") as handle:
        code = compile(handle.read(), filename, "exec", dont_inherit=True)  # not this module's __future__
    exec(code, main.__dict__)


def run_python(target: tuple[str, str, list[str]]) -> object:
    """Run the trainer in this interpreter as `python -m M` / `python SCRIPT` runs it, in a new
    `__main__` module that stays sys.modules["__main__"]; return its exit status as sys.exit
    takes it (SystemExit's code; 1 after an uncaught exception is shown by sys.excepthook). The
    caller exits with it, so the interpreter's own shutdown follows: non-daemon threads are
    joined, atexit functions run, files are flushed."""
    import atexit
    import runpy
    import types

    kind, name, args = target
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    interrupted: list[bool] = []
    atexit.register(_die_by_sigint, interrupted)  # first registered, so it runs after the trainer's own
    try:
        if kind == MODULE:
            sys.argv = ["-m", *args]  # as -m has it while the module is found; runpy then sets the file
            runpy._run_module_as_main(name)  # what -m itself calls (CPython's Modules/main.c)
        else:
            _run_script(main, name, args)
    except SystemExit as exc:
        return exc.code
    except BaseException as exc:  # what the interpreter does with an exception nothing caught
        tb = _trainer_frames(exc.__traceback__)
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)  # the default hook prints exc.__traceback__
        if isinstance(exc, KeyboardInterrupt):
            interrupted.append(True)
            return 128 + signal.SIGINT  # Python's own code should the signal not end the process
        return 1
    return 0


def exec_trainer(command: list[str]) -> None:
    """Not PID 1: become the trainer (same PID, so the runtime signals it directly)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp(command[0], command)


def supervise(command: list[str], target: tuple[str, str, list[str]] | None = None) -> object:
    """PID 1: run the trainer as a child (forked to run target in this interpreter, else forked and exec'd), forward
    signals to it and reap every orphan, since PID 1 ignores default-action signals and inherits other processes'
    zombies. Returns the trainer's exit status; in the forked child, the trainer's own (see run_python).

    The forwarded signals and SIGCHLD stay blocked here and are taken with sigwaitinfo, never by a handler: a
    handler's signal that lands just before the wait blocks would wait with it, unforwarded, until the trainer
    ends. One that comes before the child exists stays pending until it does."""
    watched = (*FORWARDED, signal.SIGCHLD)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # not SIG_IGN, which would reap the trainer before its status is read
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if target is not None:
            return run_python(target)
        exec_child(command)
    while True:
        signum = signal.sigwaitinfo(watched).si_signo
        if signum != signal.SIGCHLD:
            try:
                os.kill(child, signum)
            except ProcessLookupError:
                pass
            continue
        while True:  # one SIGCHLD may stand for several ended children
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 1  # not reached: the trainer is a child until it is reaped here
            if pid == 0:
                break
            if pid == child:
                return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def exec_child(command: list[str]) -> None:
    """In a forked child: become the trainer, or end with the shell's status for a command that cannot run."""
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # ignored by Python, and exec keeps an ignored signal so
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        code = _cannot_run(command, exc)
        sys.stderr.flush()
        os._exit(code)


def _cannot_run(command: list[str], exc: OSError) -> int:
    print(f"buildkit-py launcher: error: cannot run {command[0]!r}: {exc}", file=sys.stderr)
    return 127  # the shell's code for a command that cannot be found or run


def hand_off(command: list[str], same_interpreter: bool) -> object:
    """Run the trainer; same_interpreter False when this process's start-up state no longer
    matches a fresh interpreter's (see interpreter_env; packages just installed)."""
    target = python_target(command) if same_interpreter else None
    if os.getpid() == 1:
        return supervise(command, target)
    if target is not None:
        return run_python(target)
    try:
        exec_trainer(command)
    except OSError as exc:
        return _cannot_run(command, exc)
    return 0  # not reached: exec replaced this process
