"""The interface every build backend implements."""

from __future__ import annotations

import codecs
import collections
import fcntl
import io
import os
import pty
import subprocess
import termios
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from ..errors import BuildError
from ..oci.refs import ImageRef
from ..patterns import lazy_pattern
from ..progress import Reporter

if TYPE_CHECKING:  # the registry client loads where a push happens, not with every build backend
    from ..oci.client import PushResult

if TYPE_CHECKING:
    from ..config import Config
    from ..google.adc import Identity


class RemoteSettings(Protocol):
    """A remote builder's checked settings (cloudbuild.CloudBuildSettings), which it is bound() to."""

    @property
    def identity(self) -> Identity:
        """Who the remote build runs as: named when an index refuses its token."""
        ...


# The binfmt_misc handler qemu-user-static registers for each architecture (Debian's binfmt-support names them so,
# and tonistiigi/binfmt too): a build for a platform this machine cannot run needs the one of its architecture.
QEMU_HANDLERS = {"arm64": "qemu-aarch64", "amd64": "qemu-x86_64", "arm": "qemu-arm", "ppc64le": "qemu-ppc64le",
                 "s390x": "qemu-s390x", "riscv64": "qemu-riscv64", "386": "qemu-i386"}


@dataclass(frozen=True)
class BuildRequest:
    """One build for a backend: the context and its Dockerfile, labels, platform, network, secrets and cache image;
    for a remote builder also the tags it pushes and the index hosts it mints tokens for."""

    context_dir: Path
    dockerfile: Path  # outside context_dir
    labels: tuple[tuple[str, str], ...] = ()
    platform: str | None = None
    network: str | None = None
    secrets: tuple[tuple[str, Path], ...] = ()  # (id, file): mounted at /run/secrets/<id> in RUN steps
    no_cache: bool = False
    cache_ref: ImageRef | None = None  # a registry image whose layers the build may reuse (and refresh)
    # A remote builder (cloudbuild) pushes the image under every tag itself.
    tags: tuple[ImageRef, ...] = ()
    # Index hosts whose access token a remote builder mints where it runs, as the build's own identity (a local
    # build gets them minted here, in the netrc secret).
    token_hosts: tuple[str, ...] = ()


class Builder:
    """What every backend is and does. A capability that only some backends have is declared here with the default
    the others keep (remote, settings, pull), so that a caller asks the backend and never probes it."""

    name: str
    supports_secrets: bool  # False: the Dockerfile must be rendered without BuildKit mounts
    # True: the cache travels inside the image (BuildKit's inline cache), so the caller tags the
    # result as the cache ref and pushes it; False: the builder exports the cache itself.
    inline_cache: bool
    # True: builds and pushes where it runs (cloudbuild), with the secrets found there: the request carries the tags,
    # the builder is bound() to its settings(), the fast path and this machine's secrets are not used.
    remote: bool = False

    @classmethod
    def create(cls, docker: str | None) -> Builder:
        """An instance ready to build; raises EngineError naming what is missing and how to get it."""
        raise NotImplementedError

    @staticmethod
    def settings(config: Config, endpoint: str | None) -> RemoteSettings | None:
        """A remote builder's settings from the config and flags, checked before anything is uploaded; None for a
        builder that runs here."""
        return None

    def bound(self, settings: RemoteSettings | None) -> Builder:
        """The builder that builds with a remote builder's settings(); one that runs here takes none."""
        return self

    def build(self, request: BuildRequest, reporter: Reporter) -> str:
        """Build and return the image ID. Applies no tag: the caller tags only after success,
        so a failed or interrupted build leaves no tag behind."""
        raise NotImplementedError

    def image_id(self, ref: ImageRef) -> str | None:
        """The ID of the local image tagged ref, or None."""
        raise NotImplementedError

    def pull(self, ref: ImageRef) -> str | None:
        """The image brought from its registry into the builder's own images: its ID, or None when the registry
        refused or the builder keeps no images to pull into (the caller builds instead)."""
        return None

    def tag(self, image_id: str, refs: Sequence[ImageRef]) -> None:
        """Apply every tag or none."""
        raise NotImplementedError

    def push(self, ref: ImageRef, reporter: Reporter) -> PushResult:
        raise NotImplementedError


# What a build tool prints around a failing step, in the three forms it comes in.
_BUILDKIT_LINE = lazy_pattern(r"#(\d+) (?:(\d+\.\d+) )?(.*)")  # plain progress; its tty summary repeats the step's log
_BUILDKIT_HEADER = lazy_pattern(r"(?:#\d+| >) (\[[^\]]+\] .*?):?")
_STEP_HEADER = lazy_pattern(r"(?:STEP|Step) (\d+/\d+) ?: (.*)")  # buildah, the legacy builder
_NOT_OUTPUT = lazy_pattern(r" ---> |Removing intermediate container |error building at STEP |Error: building at STEP ")
_ANSI = lazy_pattern(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|[()][0-9A-Za-z]|[=>78])")
STEP_LINES = 25  # of the failing step's output, in the error


def failed_step(lines: Sequence[str]) -> tuple[str | None, list[str]]:
    """The step that failed and its own output (a RUN step's installer messages), from a build tool's lines:
    BuildKit's plain or tty progress, buildah's or the legacy builder's steps. (None, []) when none is found."""
    failed, logs, headers = None, collections.defaultdict(list), {}
    for line in lines:
        found = _BUILDKIT_LINE.fullmatch(line)
        if found:
            step, stamp, text = found.groups()
            if stamp:
                logs[step].append(text)
            elif text.startswith("ERROR"):
                failed = step
            elif text.startswith("["):
                headers[step] = text
    if failed is None and logs:
        failed = list(logs)[-1]  # tty: only the failed step's summary has log lines
    if failed is not None:
        header = headers.get(failed) or next((h.group(1) for h in map(_BUILDKIT_HEADER.fullmatch, reversed(lines)) if h),
                                             None)
        return header, logs.get(failed, [])
    for i in range(len(lines) - 1, -1, -1):
        found = _STEP_HEADER.fullmatch(lines[i])
        if found:
            return f"step {found.group(1)} {found.group(2)}", [ln for ln in lines[i + 1:] if not _NOT_OUTPUT.match(ln)]
    return None, []


def build_failure(tool: str, code: int | str, lines: Sequence[str]) -> BuildError:
    """The error of a failed build, ending with the failing step's own output (uv's or pip's message), the step
    named once and shortened: what the user reads last is why it failed, not the echoed RUN command."""
    step, output = failed_step(lines)
    output = [ln for ln in map(_screen_line, output) if ln.strip()]  # the legacy builder colours stderr
    if not output:
        shown = "\n".join(lines[-30:]) if lines else "(see the build output above)"
        return BuildError(f"the build failed ({tool} {code}):\n{shown}")
    where = " ".join(step.split()) if step else "the failing step"  # BuildKit shows the command's newlines as runs of spaces
    where = where if len(where) <= 100 else where[:99] + "\u2026"
    return BuildError(f"the build failed ({tool} {code}) at {where}; its output ends:\n" + "\n".join(output[-STEP_LINES:]))


def run_build_tool(args: list[str], reporter: Reporter, *, tool: str, env: dict[str, str] | None = None,
                   live: bool = False) -> None:
    """Run a build command, its output going to the reporter line by line (or, when live, to the terminal as it
    is, through a pseudo-terminal so that it is read too); an interruption stops it; a failure is a BuildError
    that ends with the failing step's own output."""
    seen: collections.deque[str] = collections.deque(maxlen=5000)
    if live:
        code = _run_live(args, env, reporter.stream, seen)
    else:
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace")
        try:
            for line in proc.stdout:
                line = line.rstrip("\n")
                seen.append(line)
                reporter.build_line(line)
            code = proc.wait()
        except BaseException:
            _stop(proc)
            raise
    if code != 0:
        raise build_failure(tool, f"exit code {code}", list(seen))


def _run_live(args: list[str], env: dict[str, str] | None, stream: TextIO,
              seen: collections.deque[str]) -> int:
    """The tool's own live display on a pseudo-terminal of the stream's size, copied to the stream as it comes,
    its lines (escape sequences removed) kept for the error."""
    main, child = pty.openpty()
    try:
        size = fcntl.ioctl(stream.fileno(), termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(child, termios.TIOCSWINSZ, size)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # not a terminal (a test's pipe): the pseudo-terminal's default size
    try:
        proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=child, stderr=child)
    except BaseException:
        os.close(main)
        raise
    finally:
        os.close(child)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    try:
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: the tool closed its terminal
                data = b""
            if not data:
                break
            text = decoder.decode(data)
            stream.write(text)
            stream.flush()
            *lines, pending = (pending + text).split("\n")
            seen.extend(_screen_line(ln) for ln in lines)
        code = proc.wait()
    except BaseException:
        _stop(proc)
        raise
    finally:
        os.close(main)
    if pending:
        seen.append(_screen_line(pending))
    return code


def _screen_line(text: str) -> str:
    """A terminal line as it stays on the screen: escape sequences dropped, the text after its last carriage return."""
    return _ANSI.sub("", text).rstrip("\r").split("\r")[-1]


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def dockerfile_build_args(request: BuildRequest) -> list[str]:
    """The flags `docker build` and `buildah build` spell alike: platform, network, secrets, labels, cache."""
    args = ["-f", str(request.dockerfile)]
    if request.platform:
        args += ["--platform", request.platform]
    if request.network:
        args += ["--network", request.network]
    for secret_id, src in request.secrets:
        args += ["--secret", f"id={secret_id},src={src}"]
    for key, value in request.labels:
        args += ["--label", f"{key}={value}"]
    if request.no_cache:
        args.append("--no-cache")
    return args

