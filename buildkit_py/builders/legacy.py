"""The engine's classic builder through the Docker SDK, for engines without any BuildKit client.
It has no cache or secret mounts: the Dockerfile is rendered without them, and build.py refuses
a CA bundle or pip credentials rather than let them land in a layer (supports_secrets)."""

from __future__ import annotations

import collections
import re

from ..errors import BuildError
from ..progress import Reporter
from .base import Builder, BuildRequest, build_failure
from .engine_images import EngineImages


class LegacyBuilder(EngineImages, Builder):
    name = "legacy"
    supports_secrets = False
    inline_cache = False

    @classmethod
    def create(cls, docker: str | None) -> LegacyBuilder:
        return cls()

    def build(self, request: BuildRequest, reporter: Reporter) -> str:
        from docker.errors import APIError

        if request.cache_ref is not None:
            raise BuildError("the legacy builder cannot use a registry cache; use --builder buildkit or buildah")
        client = self.client
        image_id = None
        try:
            stream = client.api.build(
                path=str(request.context_dir),
                dockerfile=str(request.dockerfile),
                labels=dict(request.labels),
                network_mode=request.network,
                platform=request.platform,
                nocache=request.no_cache,
                rm=True,
                forcerm=True,  # remove intermediate containers even when a step fails
                decode=True,
            )
            seen: collections.deque[str] = collections.deque(maxlen=5000)
            for chunk in stream:
                if "error" in chunk or "errorDetail" in chunk:
                    detail = chunk.get("errorDetail", {}).get("message") or chunk.get("error")
                    # The detail echoes the RUN command: only its exit code is kept; the step's own output says why.
                    code = re.search(r"returned a non-zero code: (\d+)", str(detail))
                    raise build_failure("engine", f"exit code {code.group(1)}" if code else f"error: {detail}", list(seen))
                if "stream" in chunk:
                    for line in chunk["stream"].splitlines():
                        if line.strip():
                            seen.append(line)
                            reporter.build_line(line)
                if "aux" in chunk and "ID" in chunk["aux"]:
                    image_id = chunk["aux"]["ID"]
        except APIError as exc:
            raise BuildError(f"the build failed: {exc.explanation or exc}") from None
        if not image_id:
            raise BuildError("the build finished but the engine reported no image ID")
        return image_id
