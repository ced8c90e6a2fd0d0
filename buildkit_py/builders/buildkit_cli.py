"""BuildKit through the Docker CLI: `docker buildx build`, or `DOCKER_BUILDKIT=1 docker build`
with a client that has BuildKit built in (Docker < 23 without buildx, e.g. Debian's docker.io)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildError, EngineError
from ..oci.refs import ImageRef
from ..patterns import lazy_pattern
from ..progress import Reporter
from .base import Builder, BuildRequest, dockerfile_build_args, run_build_tool
from .engine_images import EngineImages

DOCKER_ENV = "BUILDKIT_PY_DOCKER"
_VERSION = lazy_pattern(r"version (\d+)\.(\d+)")


@dataclass(frozen=True)
class DockerClient:
    """A Docker client that runs BuildKit: its path, and how (`buildx build`, or `DOCKER_BUILDKIT=1 docker build`)."""

    path: str
    mode: str  # "buildx" | "builtin"

    def command(self) -> list[str]:
        return [self.path, "buildx", "build", "--load"] if self.mode == "buildx" else [self.path, "build"]

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_BUILDKIT": "1"}


def _candidates(explicit: str | None) -> list[str]:
    if explicit:
        return [explicit]
    found = [os.environ.get(DOCKER_ENV), shutil.which("docker"), "/usr/bin/docker", "/usr/local/bin/docker"]
    seen, out = set(), []
    for path in found:
        if path and os.access(path, os.X_OK) and os.path.realpath(path) not in seen:
            seen.add(os.path.realpath(path))
            out.append(path)
    return out


PROBE_TIMEOUT = 20.0
# The engine's BuildKit drops a build's gRPC stream now and then under load: the build itself is not at fault, and a
# second run takes what the first finished from the cache.
SESSION_DROPPED = ("rpc error: code = Internal desc = unexpected EOF", "rpc error: code = Unavailable desc = error reading")


def _start(args: list[str]) -> subprocess.Popen | None:
    try:
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return None


def _answer(proc: subprocess.Popen | None) -> tuple[int, str] | None:
    """Exit code and output of a probe, or None when it did not start or answer in time."""
    if proc is None:
        return None
    try:
        out, _ = proc.communicate(timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None
    return proc.returncode, out


def _probe(path: str) -> str | None:
    """How this client can run BuildKit ("buildx", "builtin"), or None. Both questions are asked at once:
    each answer costs a Go client's start-up, on the path of every build."""
    buildx, version = _start([path, "buildx", "version"]), _start([path, "--version"])
    try:
        has_buildx, said = _answer(buildx), _answer(version)
    finally:
        for proc in (buildx, version):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    if has_buildx and has_buildx[0] == 0:
        return "buildx"
    match = _VERSION.search(said[1]) if said else None
    # From Docker 23 the classic `docker build` refuses DOCKER_BUILDKIT=1 without buildx.
    return "builtin" if match and int(match.group(1)) < 23 else None


def find_buildkit_client(explicit: str | None = None) -> DockerClient:
    tried = []
    for path in _candidates(explicit):
        mode = _probe(path)
        if mode:
            return DockerClient(path, mode)
        tried.append(path)
    where = ", ".join(tried) or "no docker executable on PATH"
    raise EngineError(
        f"no Docker client that can run BuildKit (tried: {where}). Install the buildx plugin, point "
        f"--docker or {DOCKER_ENV} at a client with BuildKit built in (e.g. Debian's /usr/bin/docker), "
        "or build with --builder legacy (the classic builder: no cache or secret mounts)"
    )


class BuildkitCliBuilder(EngineImages, Builder):
    name = "buildkit"
    supports_secrets = True
    inline_cache = True  # the default buildx driver and Docker 20.10's BuildKit export no registry cache

    def __init__(self, docker: DockerClient):
        self.docker = docker

    @classmethod
    def create(cls, docker: str | None) -> BuildkitCliBuilder:
        return cls(find_buildkit_client(docker))

    def _cache_args(self, ref: ImageRef) -> list[str]:
        """Reuse the layers of the cache image and embed this build's cache in the new image."""
        if self.docker.mode == "buildx":
            return ["--cache-from", f"type=registry,ref={ref}", "--cache-to", "type=inline"]
        return ["--cache-from", str(ref), "--build-arg", "BUILDKIT_INLINE_CACHE=1"]

    def _args(self, request: BuildRequest, progress: str, iidfile: Path) -> list[str]:
        args = self.docker.command() + ["--progress", progress, "--iidfile", str(iidfile)] + dockerfile_build_args(request)
        if request.cache_ref is not None:
            args += self._cache_args(request.cache_ref)
        return args + [str(request.context_dir)]

    def image_id(self, ref: ImageRef) -> str | None:
        """Asked through the client the build runs with (a Go client's start-up), so that the engine SDK's
        import (0.1 s) is not paid before the build: `build` pays it while BuildKit works."""
        try:
            proc = subprocess.run([self.docker.path, "image", "inspect", "--format", "{{.Id}}", str(ref)],
                                  capture_output=True, text=True, env=self.docker.env(), timeout=PROBE_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EngineError(f"{self.docker.path} could not look up {ref}: {exc}") from None
        if proc.returncode == 0:
            return proc.stdout.strip()
        if "No such image" in proc.stderr:
            return None
        raise EngineError(f"{self.docker.path} could not look up {ref}: {proc.stderr.strip()[-1000:]}")

    def build(self, request: BuildRequest, reporter: Reporter) -> str:
        from concurrent.futures import ThreadPoolExecutor  # a build's only: choosing the backend does not load it

        live = reporter.mode == "tty"
        # The engine client (the Docker SDK), which tag and push need next, is made while the build runs.
        with ThreadPoolExecutor(max_workers=1) as pool, tempfile.TemporaryDirectory(prefix="buildkit-py-iid-") as tmp:
            pool.submit(getattr, self, "client")  # a failure shows again, and is reported, where the client is used
            iidfile = Path(tmp) / "iid"
            args = self._args(request, "tty" if live else "plain", iidfile)
            for attempt in (1, 2):
                try:
                    run_build_tool(args, reporter, tool="docker", env=self.docker.env(), live=live)
                    break
                except BuildError as exc:
                    if attempt == 2 or not any(said in str(exc) for said in SESSION_DROPPED):
                        raise
                    reporter.message("the engine's BuildKit dropped the build's connection (rpc error: unexpected "
                                     "EOF): the build runs once more, the steps it finished cached")
            return iidfile.read_text().strip()
