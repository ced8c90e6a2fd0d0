"""Several trainer processes on one machine, one per GPU, the way torchrun starts them (Vertex AI runs one container
per machine, so using its GPUs is the image's job): each process gets LOCAL_RANK, RANK = node rank x N + local rank,
WORLD_SIZE = nodes x N, LOCAL_WORLD_SIZE, GROUP_RANK and the master's address; JAX's coordinator variables too.

Their output is relayed line by line, each line after `[rank N] ` (the image sets PYTHONUNBUFFERED, so a print
from several processes would otherwise interleave mid-line); a line that is a JSON object passes as it is, for
structured logging. Supervised by torchrun's rules: signals reach every process, the first to fail stops the others (SIGTERM, then
SIGKILL after a grace period) and its status is the machine's. The launcher's own supervisor rather than handing off
to torch.distributed.run: the same contract in every image (JAX, TensorFlow, a custom trainer, no torch at all), no
torch import at start, and Vertex AI's membership is fixed, so torch's elastic rendezvous has nothing to add.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import sys
import threading
import time

from .cluster import join
from .constants import AUTO_PROCESSES, MAX_PROCESSES_PER_NODE, PROCESSES_ENV, STOP_GRACE_SECONDS
from .handoff import FORWARDED, exec_child, run_python

# Each process's own (process_envs): a machine-wide value of these would only mislead.
PER_PROCESS = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
               "ROLE_WORLD_SIZE", "NODE_RANK", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_LOCAL_DEVICE_IDS")


_DIGITS = re.compile(r"[0-9]{1,4}", re.ASCII)  # ASCII only: int() reads other scripts' digits too


class GroupError(Exception):
    pass


def requested(env: dict[str, str]) -> int | str | None:
    """PROCESSES_ENV as the job set it: a number, AUTO_PROCESSES, or None (unset: one)."""
    raw = env.get(PROCESSES_ENV, "").strip()
    if not raw:
        return None
    if raw == AUTO_PROCESSES:
        return raw
    if _DIGITS.fullmatch(raw) and 1 <= int(raw) <= MAX_PROCESSES_PER_NODE:
        return int(raw)
    raise GroupError(f"{PROCESSES_ENV}={raw!r} is not a process count; allowed: 1-{MAX_PROCESSES_PER_NODE} or "
                     f"{AUTO_PROCESSES} (one per visible GPU)")


def counted(wanted: int | str | None, gpus: int) -> tuple[int | None, str | None]:
    """The processes per machine as a number (None where nothing was asked), and a line saying how it was counted."""
    if wanted != AUTO_PROCESSES:
        return wanted if isinstance(wanted, int) else None, None
    if gpus:
        return gpus, f"{PROCESSES_ENV}=auto: {gpus} processes, one per visible GPU"
    return 1, f"{PROCESSES_ENV}=auto: no GPU is visible, so one process"


def process_envs(count: int, node_rank: int, nodes: int, master: tuple[str, str], gpus: int) -> list[dict[str, str]]:
    """Each process's variables. JAX_LOCAL_DEVICE_IDS gives a JAX process its own GPU, as LOCAL_RANK does a torch
    one (CUDA_VISIBLE_DEVICES stays whole: `torch.cuda.set_device(LOCAL_RANK)` needs every GPU visible)."""
    addr, port = master
    world = nodes * count
    out = []
    for local in range(count):
        rank = node_rank * count + local
        env = {"LOCAL_RANK": str(local), "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(count),
               "GROUP_RANK": str(node_rank), "GROUP_WORLD_SIZE": str(nodes), "ROLE_RANK": str(rank),
               "ROLE_WORLD_SIZE": str(world), "NODE_RANK": str(node_rank), "MASTER_ADDR": addr, "MASTER_PORT": port,
               "JAX_COORDINATOR_ADDRESS": join(addr, port), "JAX_NUM_PROCESSES": str(world),
               "JAX_PROCESS_ID": str(rank)}
        if gpus >= count:
            env["JAX_LOCAL_DEVICE_IDS"] = str(local)
        out.append(env)
    return out


def _status(status: int) -> int:
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _start(command: list[str], target, env: dict[str, str], mask, pipes: dict[int, tuple[bytes, int]]) -> int:
    """Fork one process, its output into two new pipes (added to pipes: read end -> (prefix, where it goes)): its PID
    in the parent; the child runs the trainer and never returns here."""
    ends = [os.pipe(), os.pipe()]
    pid = os.fork()
    if pid:
        for fd, (read, write) in enumerate(ends, 1):  # stdout, stderr
            os.close(write)
            pipes[read] = (f"[rank {env['RANK']}] ".encode(), fd)
        return pid
    for fd, (read, write) in enumerate(ends, 1):
        os.dup2(write, fd)
        os.close(read)
        os.close(write)
    for read in pipes:  # the other processes' ends, which would keep their pipes open
        os.close(read)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    os.environ.update(env)
    if target is not None:
        raise SystemExit(run_python(target))  # up through main, as the trainer's own exit would
    exec_child(command)
    return 0  # not reached


def run(command: list[str], target, envs: list[dict[str, str]], log) -> object:
    """Start a process per env, supervise them, and return the status: the first failure's, else 0."""
    watched = (*FORWARDED, signal.SIGCHLD)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # not SIG_IGN, which would reap a process before its status is read
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    sys.stdout.flush()
    sys.stderr.flush()
    alive: dict[int, str] = {}
    pipes: dict[int, tuple[bytes, int]] = {}
    for env in envs:
        alive[_start(command, target, env, mask, pipes)] = env["RANK"]
    relay = threading.Thread(target=_relay, args=(pipes,), daemon=True)  # after the forks: none forks a thread
    relay.start()
    log(f"started {len(envs)} processes, ranks {envs[0]['RANK']}-{envs[-1]['RANK']} of {envs[0]['WORLD_SIZE']}")
    failed: tuple[str, int] | None = None
    deadline = None
    while alive:
        if deadline is None:
            info = signal.sigwaitinfo(watched)
        else:
            info = signal.sigtimedwait(watched, max(deadline - time.monotonic(), 0))
            if info is None:  # the grace period is over
                log(f"{len(alive)} process(es) still running {STOP_GRACE_SECONDS} s after SIGTERM: killed")
                _signal(alive, signal.SIGKILL)
                deadline = float("inf")
                continue
        if info.si_signo != signal.SIGCHLD:
            _signal(alive, info.si_signo)
            continue
        while alive:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return failed[1] if failed else 1  # not reached: the processes are children until reaped here
            if pid == 0:
                break
            rank = alive.pop(pid, None)
            if rank is None:
                continue  # an orphan this PID 1 inherited
            code = _status(status)
            if code and failed is None:
                failed = (rank, code)
                if alive:
                    log(f"rank {rank} exited with status {code}: stopping the other {len(alive)} (SIGTERM)")
                    _signal(alive, signal.SIGTERM)
                    deadline = time.monotonic() + STOP_GRACE_SECONDS
    relay.join(timeout=5)  # a process's own children may hold its pipes open past it
    if failed:
        log(f"rank {failed[0]} failed first, with status {failed[1]}")
        return failed[1]
    return 0


MAX_LINE = 1 << 16  # a longer run without a newline goes out as a line of its own


def _relay(pipes: dict[int, tuple[bytes, int]]) -> None:
    """Copy each pipe to its fd, whole lines at a time, each after its prefix (a JSON object's line as it is)."""
    selector = selectors.DefaultSelector()
    for fd, (prefix, target) in pipes.items():
        selector.register(fd, selectors.EVENT_READ, (prefix, target, bytearray()))
    while selector.get_map():
        for key, _ in selector.select():
            prefix, target, pending = key.data
            chunk = os.read(key.fd, MAX_LINE)
            pending += chunk
            *lines, rest = bytes(pending).split(b"\n")
            if not chunk or len(rest) >= MAX_LINE:
                lines, rest = (lines + [rest]) if rest else lines, b""
            if lines:
                _write(target, b"".join(line + b"\n" if line.startswith(b"{") else prefix + line + b"\n"
                                        for line in lines))
            pending[:] = rest
            if not chunk:
                selector.unregister(key.fd)
                os.close(key.fd)


def _write(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data):]
        except OSError:  # the container's log reader is gone: nothing to write to
            return


def _signal(alive: dict[int, str], signum: int) -> None:
    for pid in alive:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass
