"""The console script's front door: a command goes to a warm buildkit-py, a process of this same interpreter and
code that imported what commands load and waits on a socket, where one runs; else it runs here as always, and a warm
process starts for the next command. A one-line edit and push is then the network's time, not the interpreter's:
the warm process forks a child per command, which takes this process's arguments, directory, environment, umask
and standard streams (passed as file descriptors) and runs the command exactly as `buildkit-py` would, with nothing
of another command's state in it (the parent only imports; it never runs a command).

BUILDKIT_PY_WARM: `auto` (the default: on where stderr is a terminal and CI is unset, so scripts, pipes and CI
jobs run in their own process), `1` (always), `0` (never). The warm process leaves after WARM_IDLE seconds without a
command, or as soon as a file of this buildkit-py changes.

This module imports only what the client needs: the commands' modules load in the warm process, or here when
none answers.
"""

from __future__ import annotations

import os
import sys

WARM_ENV = "BUILDKIT_PY_WARM"
WARM_IDLE = 900.0  # seconds a warm process waits for its next command
WARM_REPLY_WAIT = 10.0  # seconds the client waits for the warm process to take a command
PROTOCOL = b"buildkit-py-warm/1"
# The commands a warm process serves: those that end on their own and read no terminal. `run` (an interactive
# container), `logs` and `submit` (which follow a job) and `autopackage` and `tune` run where they are typed.
WARM_COMMANDS = frozenset({"build", "ci", "dockerfile", "job", "lock", "make", "matrix", "plan", "print", "push",
                           "resolve", "verify", "versions"})
_SOCKET_PATH_MAX = 104  # bytes: sun_path holds 108 on Linux, 104 on macOS, with its NUL
_LOG_MAX = 1 << 20
# What the interpreter reads at start-up, and so what a child inherits from the warm process rather than from the
# command: a command whose values differ goes to another warm process.
_STARTUP_ENV = ("PYTHON", "LANG", "LC_")
# Signals the client passes on to the command's process group, as a terminal sends them to a foreground job.
_FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGWINCH", "SIGUSR1", "SIGUSR2", "SIGCONT")
# What the warm process imports before it answers: the modules a code edit, a dry run and the parser load.
_PRELOAD = ("buildkit_py.cli.parser", "buildkit_py.cli.commands", "buildkit_py.api.builds", "buildkit_py.api.dockerfiles",
            "buildkit_py.pipeline.fastbuild", "buildkit_py.pipeline.fastpath", "buildkit_py.oci.client",
            "buildkit_py.oci.referrers", "buildkit_py.sources.imports", "buildkit_py.builders.engine_images",
            "buildkit_py.pipeline.build", "buildkit_py.clients.http1", "buildkit_py.builders.buildkit_cli",
            "buildkit_py.sources.lockfiles", "buildkit_py.catalog.syslibs")


def main() -> int:
    """The `buildkit-py` console script."""
    argv = sys.argv[1:]
    mode = _mode()
    if isinstance(mode, str):  # a value not allowed, said as every error is
        print(f"buildkit-py: error: {WARM_ENV}: {mode}", file=sys.stderr)
        return 2
    warm = bool(mode and argv and argv[0] in WARM_COMMANDS)
    if warm:
        served = _served(argv, sys.argv[0])
        if served is not None:
            return served
    from . import main as run_here

    try:
        code = run_here(argv)
    finally:
        if warm:
            _start_server()
    _leave(code)


def _mode() -> bool | str:
    """Whether commands go to a warm process; a string: why the setting is not allowed."""
    value = os.environ.get(WARM_ENV, "auto").strip(" \t").lower()  # only spaces and tabs: no line or separator
    if value in ("", "auto"):
        try:
            return os.isatty(2) and not os.environ.get("CI")
        except OSError:
            return False
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return f"{value[:40]!r}{'...' if len(value) > 40 else ''} is not allowed: auto, 1 or 0"


def _identity() -> bytes:
    """What makes a warm process this command's: the interpreter, its start-up settings, its module path and the
    user."""
    # A relative directory (`python -c`'s '') is found from the working directory; an editable install's hook
    # entry is no directory.
    entries = [f"{entry}@{os.getcwd()}" if not os.path.isabs(entry) and (entry == "" or os.path.isdir(entry))
               else entry for entry in sys.path]
    # PYTHONUTF8 shows in sys.flags, which the interpreter may also set itself (a C locale, coerced).
    env = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(_STARTUP_ENV) and k != "PYTHONUTF8")
    given = [sys.executable, sys.version, repr(sys.flags), str(os.getuid()), *entries, "", *env]
    return "\0".join(given).encode("utf-8", "surrogateescape")


def _socket_dir() -> str:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = runtime if runtime and os.path.isdir(runtime) else "/tmp"
    return os.path.join(base, f"buildkit-py-warm-{os.getuid()}")


def _socket_path(identity: bytes) -> str | None:
    """Where the warm process of this identity listens; None where the path is too long for a Unix socket (a deep
    XDG_RUNTIME_DIR): commands then run alone."""
    import zlib  # the name only picks the socket: the warm process compares the whole identity

    name = f"{zlib.crc32(identity):08x}{zlib.adler32(identity):08x}"
    path = os.path.join(_socket_dir(), f"{name}.sock")
    return path if len(os.fsencode(path)) < _SOCKET_PATH_MAX else None


def _private_dir(path: str, create: bool) -> bool:
    """Whether PATH is a directory of this user's that nobody else may write (created so, where asked)."""
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    import stat

    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _served(argv: list[str], program: str) -> int | None:
    """The exit status of the command as a warm process ran it; None where none took it (it runs here)."""
    import socket

    identity = _identity()
    path = _socket_path(identity)
    if path is None or not _private_dir(os.path.dirname(path), create=False):
        return None
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    umask = os.umask(0o022)
    os.umask(umask)
    fields = [PROTOCOL, identity, os.fsencode(cwd), b"%d" % umask, b"%d" % (len(argv) + 1),
              os.fsencode(program), *map(os.fsencode, argv),
              *(os.fsencode(k) + b"=" + os.fsencode(v) for k, v in os.environ.items())]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        socket.send_fds(conn, [b"\0".join(fields)], [0, 1, 2])
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(WARM_REPLY_WAIT)
        replies = conn.makefile("rb")
        first = replies.readline()
    except OSError:  # none listens (a process that left), or a standard stream is closed: run here
        conn.close()
        if os.path.exists(path) and not _listening(path):
            _unlink(path)
        return None
    if not first.startswith(b"pid "):
        conn.close()
        return None  # another interpreter's, or its code changed: it leaves, this command runs here
    child = int(first[4:])
    conn.settimeout(None)
    _forward_signals(child)
    status = replies.readline()
    conn.close()
    if not status.startswith(b"exit "):
        print(f"buildkit-py: error: the warm process ended before the command did; set {WARM_ENV}=0 to run "
              "commands in their own process", file=sys.stderr)
        return 1
    code = int(status[5:])
    if code < 0:  # ended by a signal: so does this process, as the shell would have seen it
        import signal

        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


def _listening(path: str) -> bool:
    import socket

    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _forward_signals(child: int) -> None:
    """Pass what the terminal sends this process on to the command's process group; Ctrl-Z stops both."""
    import signal

    def forward(signum, _frame) -> None:
        try:
            os.killpg(child, signum)
        except OSError:
            pass

    def suspend(signum, _frame) -> None:
        forward(signal.SIGSTOP, None)
        os.kill(os.getpid(), signal.SIGSTOP)  # SIGCONT, forwarded, wakes the command again

    for name in _FORWARDED:
        signal.signal(getattr(signal, name), forward)
    signal.signal(signal.SIGTSTP, suspend)


def _start_server() -> None:
    """Start a warm process for the next command, once: none starts where one is starting (a second) or where the
    socket directory is not this user's alone."""
    path = _socket_path(_identity())
    if path is None or not _private_dir(os.path.dirname(path), create=True) or _listening(path):
        return
    marker = path[:-len(".sock")] + ".starting"
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
    except FileExistsError:
        try:
            import time

            if time.time() - os.stat(marker).st_mtime < 60:
                return
            os.utime(marker)
        except OSError:
            return
    except OSError:
        return
    import subprocess

    code = "import sys; sys.path[:] = sys.argv[2:]; from buildkit_py.cli.warm import serve; serve(sys.argv[1])"
    try:
        log_path = path[:-len(".sock")] + ".log"
        # One line per command: a log past LOG_MAX starts again with the process.
        with open(log_path, "ab" if not os.path.exists(log_path) or os.path.getsize(log_path) < _LOG_MAX else "wb") as log:
            subprocess.Popen([sys.executable, "-c", code, path, *sys.path], stdin=subprocess.DEVNULL,
                             stdout=log, stderr=log, start_new_session=True, env={
                                 **{k: v for k, v in os.environ.items() if k.startswith(_STARTUP_ENV) or k in (
                                     "PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "XDG_RUNTIME_DIR")},
                                 # This process's UTF-8 mode, set or chosen for a C locale (whose LC_CTYPE the
                                 # interpreter then coerced: the warm process gets the coerced value, and so would
                                 # not choose it itself).
                                 "PYTHONUTF8": str(sys.flags.utf8_mode)})
    except OSError:
        _unlink(marker)


def stop(folder: str | None = None) -> list[int]:
    """End the warm processes that listen in FOLDER (this user's socket directory where None): the pids they named
    in their logs, each only while it is still a warm process of buildkit-py's. Returns the pids ended."""
    import signal

    folder = folder or _socket_dir()
    ended = []
    try:
        names = [name for name in os.listdir(folder) if name.endswith(".log")]
    except OSError:
        return ended
    for name in names:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as log:
                pids = [int(line.rsplit(" ", 1)[1]) for line in log if line.startswith("listening at ")]
        except (OSError, ValueError):
            continue
        for pid in pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    if b"buildkit_py.cli.warm import serve" not in cmdline.read():
                        continue  # gone, and its pid taken by another process
                os.kill(pid, signal.SIGTERM)
                ended.append(pid)
            except OSError:
                continue
    return ended


# ---------------------------------------------------------------------------------------------
# The warm process


def _rehearse() -> tuple[str, ...]:
    """What every command does first, done once here for all the children: the warm commands' parsers built, a
    command line of each shape parsed (argparse compiles a pattern per shape: a subcommand, an option's value, a
    flag), and the API's warm-up (patterns compiled, the default ignore list translated, buildkit-py's own files
    listed). Returns the files the warm-up relies on: the process leaves when one changes."""
    from ..api import warm_up
    from .parser import parse, parser_for

    for command in WARM_COMMANDS:
        parser_for(command)
    parse(["build", "--push", "--tag", "warm.example/rehearsal"])
    return warm_up(watched=True)


def serve(path: str) -> None:
    """Import what commands load, then listen at PATH: each command is forked off and run by _child; the parent
    leaves after WARM_IDLE seconds without one, when its socket is no longer at PATH, or when a file of this
    buildkit-py changed. Runs in its own session, with stdin from /dev/null."""
    import importlib

    for name in _PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # loaded, or failed, by the command that needs it
    request = _listen(path, _rehearse())
    if request is None:
        return
    # In the child, which has left the loop: the command runs as the console script's would.
    *taken, conn = request
    try:
        code = _child(*taken)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except Exception as exc:  # a bug of ours before the command ran: said as the command line says one
        print(f"buildkit-py: internal error: the warm process: {type(exc).__name__}: {exc} (set "
              f"{WARM_ENV}=0 to run commands in their own process, and please report it)", file=sys.stderr)
        code = 70
    _leave(code, conn)


def _leave(code: int, conn=None) -> None:
    """End the process as the interpreter ends one (its threads joined, its exit functions run, its streams
    flushed), say the status to the client (CONN: a warm process's child), and exit without tearing down every
    module loaded: that teardown, tens of milliseconds, is what the user would otherwise wait for."""
    import atexit
    import threading

    shutdown = getattr(threading, "_shutdown", None)  # the interpreter's own: executors' workers are told to end
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # as the interpreter exits when its streams cannot be flushed
    code &= 0xFF  # what a process's exit status keeps of it
    if conn is not None:
        _reply(conn, b"exit %d\n" % code)
    os._exit(code)


def _listen(path: str, relied_on: tuple[str, ...]):
    """The accept loop. Returns only in a forked child: its request and connection; the parent returns None once
    it leaves (also when a file of RELIED_ON, or of a module loaded, changed). Nothing here wraps the fork in a
    `with` or `finally`: none of the parent's clean-up runs in a child."""
    import selectors
    import signal
    import socket
    import struct  # noqa: F401  (for _take: loaded before the files are taken down)
    import time

    identity, files = _identity(), tuple(sorted({*_loaded_files(), *relied_on}))
    signature = _signature(files)
    marker = path[:-len(".sock")] + ".starting"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    temporary = f"{path}.{os.getpid()}"
    _unlink(temporary)
    listener.bind(temporary)
    listener.listen(64)
    os.rename(temporary, path)  # at once: a client finds a listening socket or none
    _unlink(marker)
    print(f"listening at {path} as pid {os.getpid()}", flush=True)  # the log beside the socket
    mine = os.stat(path).st_ino
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the selector through the wakeup fd
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    waiting: dict[int, socket.socket] = {}  # each running command's child and its client's connection
    last = time.monotonic()
    while True:
        events = selector.select(timeout=30.0)
        for pid, status in _reaped():
            conn = waiting.pop(pid, None)
            if conn is not None:
                _reply(conn, b"exit %d\n" % os.waitstatus_to_exitcode(status))
                conn.close()
            last = time.monotonic()
        for key, _ in events:
            if key.fileobj is listener:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue
                taken = _take(conn, identity, lambda: _signature(files) == signature)
                if taken is None:
                    conn.close()
                    continue
                pid = _fork()
                if pid == 0:
                    for held in (selector, listener, *waiting.values()):
                        held.close()
                    for fd in (wake_read, wake_write):
                        os.close(fd)
                    return (*taken, conn)
                for fd in taken[0]:
                    os.close(fd)
                _reply(conn, b"pid %d\n" % pid)
                print(f"pid {pid}: {taken[3][1] if len(taken[3]) > 1 else ''}", flush=True)  # the command only
                waiting[pid] = conn
                last = time.monotonic()
            else:
                try:
                    os.read(wake_read, 512)
                except BlockingIOError:
                    pass
        try:
            moved = os.stat(path).st_ino != mine
        except OSError:
            moved = True
        stale = signature != _signature(files) if not waiting else False
        if (moved or stale or time.monotonic() - last > WARM_IDLE) and not waiting:
            if not moved:
                _unlink(path)
            return None


def _fork() -> int:
    """os.fork(), what the parent made kept out of the child's garbage collections first (each would otherwise write
    to, and so copy, the pages of objects it never uses); in the child, the parent's signal wake-up is dropped."""
    import gc
    import signal

    gc.freeze()
    pid = os.fork()
    if pid == 0:
        signal.set_wakeup_fd(-1)
    return pid


def _loaded_files() -> tuple[str, ...]:
    """The files of every module the warm process has loaded (data files, and modules it has not loaded, each command
    reads afresh)."""
    return tuple(sorted({m.__file__ for m in list(sys.modules.values()) if isinstance(getattr(m, "__file__", None), str)}))


def _signature(files: tuple[str, ...]) -> tuple:
    """FILES by mtime and size: an edit of buildkit-py's code or an upgrade of a library it loaded changes it, and
    the warm process leaves."""
    found = []
    for path in files:
        try:
            st = os.stat(path)
            found.append((st.st_mtime_ns, st.st_size))
        except OSError:
            found.append(None)
    return tuple(found)


def _reaped() -> list[tuple[int, int]]:
    found = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if pid == 0:
            return found
        found.append((pid, status))


def _reply(conn, line: bytes) -> None:
    try:
        conn.sendall(line)
    except OSError:
        pass  # the client left: its command runs to its end all the same, as a terminal's would after a hang-up


def _take(conn, identity: bytes, current) -> tuple | None:
    """A client's request: (its standard streams, cwd, umask, argv, environment); None, said to the client, where
    it is another user's, another interpreter's, or this process's code changed (CURRENT() is False: the process
    then leaves). Standard library only, as all of the client's side: its imports are each command's cost."""
    import socket
    import struct

    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():
            return None
    except (AttributeError, OSError):
        pass  # no SO_PEERCRED here: the socket's directory is this user's alone
    conn.settimeout(WARM_REPLY_WAIT)
    chunks, fds = [], []
    try:
        while True:
            data, got, _, _ = socket.recv_fds(conn, 1 << 16, 3)
            fds.extend(got)
            if not data:
                break
            chunks.append(data)
    except OSError:
        for fd in fds:
            os.close(fd)
        return None
    fields, parts = b"".join(chunks).split(b"\0"), identity.split(b"\0")
    if len(fds) != 3 or len(fields) < 6 or fields[0] != PROTOCOL or fields[1:1 + len(parts)] != parts \
            or not current():
        for fd in fds:
            os.close(fd)
        _reply(conn, b"refused\n")
        return None
    rest = fields[1 + len(parts):]
    try:
        cwd, umask, argc = os.fsdecode(rest[0]), int(rest[1]), int(rest[2])
        argv = [os.fsdecode(a) for a in rest[3:3 + argc]]
        env = dict(os.fsdecode(item).partition("=")[::2] for item in rest[3 + argc:] if item)
    except (ValueError, IndexError):
        for fd in fds:
            os.close(fd)
        _reply(conn, b"refused\n")
        return None
    return fds, cwd, umask, argv, env


def _child(fds: list[int], cwd: str, umask: int, argv: list[str], env: dict[str, str]) -> int:
    """In the forked child: become the command's process (its own process group, which the client's signals
    reach; its standard streams, directory, environment and umask) and run it as the console script would."""
    import signal

    os.setpgid(0, 0)
    for name in ("SIGCHLD", "SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    # The streams the interpreter made stay (their encoding is the start-up's, which the client shares): stdout is
    # line-buffered on a terminal, as a process of its own would have it.
    sys.stdout.reconfigure(line_buffering=os.isatty(1))
    os.chdir(cwd)
    os.umask(umask)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = argv
    from . import main as run_here

    return run_here(argv[1:])
