"""The interface every build backend implements."""

from __future__ import annotations

import collections
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..errors import BuildError
from ..progress import Reporter
from ..refs import ImageRef
from ..registry import PushResult


@dataclass(frozen=True)
class BuildRequest:
    context_dir: Path
    dockerfile: Path  # outside context_dir
    labels: tuple[tuple[str, str], ...] = ()
    platform: str | None = None
    network: str | None = None
    secrets: tuple[tuple[str, Path], ...] = ()  # (id, file): mounted at /run/secrets/<id> in RUN steps
    no_cache: bool = False
    cache_ref: ImageRef | None = None  # a registry image whose layers the build may reuse (and refresh)


class Builder(Protocol):
    name: str
    supports_secrets: bool  # False: the Dockerfile must be rendered without BuildKit mounts
    # True: the cache travels inside the image (BuildKit's inline cache), so the caller tags the
    # result as the cache ref and pushes it; False: the builder exports the cache itself.
    inline_cache: bool

    @classmethod
    def create(cls, docker: str | None) -> Builder:
        """An instance ready to build; raises EngineError naming what is missing and how to get it."""
        ...

    def build(self, request: BuildRequest, reporter: Reporter) -> str:
        """Build and return the image ID. Applies no tag: the caller tags only after success,
        so a failed or interrupted build leaves no tag behind."""
        ...

    def image_id(self, ref: ImageRef) -> str | None:
        """The ID of the local image tagged ref, or None."""
        ...

    def tag(self, image_id: str, refs: Sequence[ImageRef]) -> None:
        """Apply every tag or none."""
        ...

    def push(self, ref: ImageRef, reporter: Reporter) -> PushResult:
        ...


def run_build_tool(args: list[str], reporter: Reporter, *, tool: str, env: dict[str, str] | None = None,
                   live: bool = False) -> None:
    """Run a build command, its output going to the reporter line by line (or straight to the
    terminal when live); an interruption stops it; a failure is a BuildError with its last lines."""
    tail: collections.deque[str] = collections.deque(maxlen=30)
    proc = subprocess.Popen(args, env=env, stdout=None if live else subprocess.PIPE,
                            stderr=None if live else subprocess.STDOUT, text=True, errors="replace")
    try:
        if proc.stdout is not None:
            for line in proc.stdout:
                line = line.rstrip("\n")
                tail.append(line)
                reporter.build_line(line)
        code = proc.wait()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    if code != 0:
        shown = "\n".join(tail) if tail else "(see the build output above)"
        raise BuildError(f"the build failed ({tool} exit code {code}):\n{shown}")


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

