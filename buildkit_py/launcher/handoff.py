"""Hand off to the trainer so that it behaves as if it were the container's command: signals
reach it (SIGTERM on preemption), its exit code is the container's, and zombies are reaped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def exec_trainer(command: list[str]) -> None:
    """Not PID 1: become the trainer (same PID, so the runtime signals it directly)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp(command[0], command)


def supervise(command: list[str]) -> int:
    """PID 1: run the trainer as a child, forward signals to it and reap every orphan, since
    PID 1 ignores default-action signals and inherits other processes' zombies."""
    child: subprocess.Popen | None = None
    early: list[int] = []  # signals that came before the child existed, sent once it does

    def forward(signum, _frame):
        if child is None:
            early.append(signum)
            return
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    # Handlers first: a SIGTERM while the child starts is kept, not lost.
    for sig in FORWARDED:
        signal.signal(sig, forward)
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        return _cannot_run(command, exc)
    for signum in early:
        child.send_signal(signum)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return child.returncode if child.returncode is not None else 1
        except InterruptedError:
            continue
        if pid == child.pid:
            child.returncode = os.waitstatus_to_exitcode(status)
            code = child.returncode
            return 128 - code if code < 0 else code


def _cannot_run(command: list[str], exc: OSError) -> int:
    print(f"buildkit-py launcher: error: cannot run {command[0]!r}: {exc}", file=sys.stderr)
    return 127  # the shell's code for a command that cannot be found or run


def hand_off(command: list[str]) -> int:
    if os.getpid() == 1:
        return supervise(command)
    try:
        exec_trainer(command)
    except OSError as exc:
        return _cannot_run(command, exc)
    return 0  # not reached: exec replaced this process
