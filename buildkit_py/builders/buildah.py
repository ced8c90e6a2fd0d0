"""Daemonless builds with buildah (Debian's `buildah` package): the same Dockerfile, cache and
secret mounts, tags, labels and push, with no Docker engine. Images live in buildah's own storage
(containers-storage), so a base image must be there or pullable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BuildError, EngineError, RegistryError
from ..fsutil import write_private
from ..oci.refs import ImageRef, is_loopback_host, registry_host
from ..progress import Reporter
from ..sources.dockerfile import instructions
from .base import Builder, BuildRequest, dockerfile_build_args, run_build_tool

if TYPE_CHECKING:
    from ..oci.client import PushResult

BUILDAH_ENV = "BUILDKIT_PY_BUILDAH"
INSTALL_HINT = ("install it with `apt-get install buildah` (Debian, Ubuntu), `dnf install buildah` (Fedora, RHEL) "
                f"or point {BUILDAH_ENV} at its executable; or build with a Docker engine (--builder buildkit)")


def _pulls_from_loopback(dockerfile: str) -> bool:
    """A FROM of the Dockerfile names an image on a loopback registry (buildah pulls a base it lacks, or one of
    another platform than it holds under that name)."""
    for instruction in instructions(dockerfile):
        words = [w for w in instruction.arguments.split() if not w.startswith("--")]
        if instruction.keyword == "FROM" and words and "/" in words[0] \
                and is_loopback_host(registry_host(words[0].split("/", 1)[0])):
            return True
    return False


class BuildahBuilder(Builder):
    name = "buildah"
    supports_secrets = True
    inline_cache = False  # buildah pushes its layer cache to the cache repository itself

    def __init__(self, executable: str):
        self.executable = executable

    @classmethod
    def create(cls, docker: str | None) -> BuildahBuilder:
        path = os.environ.get(BUILDAH_ENV) or shutil.which("buildah")
        if not path or not os.access(path, os.X_OK):
            raise EngineError(f"the buildah builder needs buildah, which is not installed: {INSTALL_HINT}")
        return cls(path)

    def _run(self, *args: str, what: str) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run([self.executable, *args], capture_output=True, text=True, errors="replace", timeout=3600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EngineError(f"buildah {what}: {exc}") from None
        return proc

    def _args(self, request: BuildRequest, iidfile: Path) -> list[str]:
        # --layers keeps a layer per instruction, so an unchanged step is reused (and can be cached remotely).
        args = [self.executable, "build", "--layers", "--iidfile", str(iidfile)] + dockerfile_build_args(request)
        loopback = _pulls_from_loopback(request.dockerfile.read_text(encoding="utf-8"))
        if request.cache_ref is not None:
            # buildah's cache is a repository of its own (one image per layer, tagged by content).
            repo = request.cache_ref.repository
            args += ["--cache-from", repo, "--cache-to", repo]
            loopback = loopback or is_loopback_host(registry_host(request.cache_ref.registry))
        if loopback:  # plain HTTP to a registry on this machine, as Docker allows it (a base of another platform)
            args.append("--tls-verify=false")
        return args + [str(request.context_dir)]

    def build(self, request: BuildRequest, reporter: Reporter) -> str:
        with tempfile.TemporaryDirectory(prefix="buildkit-py-iid-") as tmp:
            iidfile = Path(tmp) / "iid"
            run_build_tool(self._args(request, iidfile), reporter, tool="buildah")
            return iidfile.read_text().strip().removeprefix("sha256:")

    def image_id(self, ref: ImageRef) -> str | None:
        proc = self._run("images", "--no-trunc", "--format", "{{.ID}}", str(ref), what="images")
        found = proc.stdout.split()
        return found[0].removeprefix("sha256:") if proc.returncode == 0 and found else None

    def tag(self, image_id: str, refs: Sequence[ImageRef]) -> None:
        # One command for every tag: buildah applies all of them or fails before any.
        proc = self._run("tag", image_id, *map(str, refs), what="tag")
        if proc.returncode != 0:
            raise BuildError(f"buildah refused to tag {image_id}: {proc.stderr.strip()[-2000:]}")

    def push(self, ref: ImageRef, reporter: Reporter) -> PushResult:
        from ..clients.transport import basic_token
        from ..oci.client import PushResult
        from ..oci.credentials import credentials_for  # a push's only: choosing a backend does not load it

        with tempfile.TemporaryDirectory(prefix="buildkit-py-push-") as tmp:
            digestfile = Path(tmp) / "digest"
            args = ["push", "--digestfile", str(digestfile)]
            if is_loopback_host(registry_host(ref.registry)):
                args.append("--tls-verify=false")
            creds = credentials_for(ref.registry)
            if creds:  # an auth file, never argv: other users can read a process's arguments
                auth = Path(tmp) / "auth.json"
                token = basic_token(creds.username, creds.password)
                write_private(auth, json.dumps({"auths": {ref.registry: {"auth": token}}}).encode())
                args += ["--authfile", str(auth)]
            reporter.message(f"pushing {ref} (buildah)")
            proc = self._run(*args, str(ref), f"docker://{ref}", what="push")
            if proc.returncode != 0:
                raise RegistryError(f"buildah could not push {ref}: {proc.stderr.strip()[-2000:]}")
            digest = digestfile.read_text().strip()
        reporter.message(f"pushed {ref.repository}@{digest}")
        return PushResult(image=f"{ref.repository}@{digest}", tag=str(ref), digest=digest, size=None)
