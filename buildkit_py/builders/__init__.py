"""Build backends behind one small interface; `select_builder` picks one by name."""

from __future__ import annotations

from .base import Builder, BuildRequest
from .buildkit_cli import BuildkitCliBuilder, find_buildkit_client
from .legacy import LegacyBuilder

BUILDERS = ("auto", "buildkit", "legacy")


def select_builder(name: str = "auto", docker: str | None = None) -> Builder:
    """buildkit/auto: a Docker CLI with BuildKit (buildx, or a client with it built in);
    legacy: the engine's classic builder through the Docker SDK (no cache or secret mounts)."""
    if name == "legacy":
        return LegacyBuilder()
    return BuildkitCliBuilder(find_buildkit_client(docker))


__all__ = ["BUILDERS", "Builder", "BuildRequest", "BuildkitCliBuilder", "LegacyBuilder", "select_builder"]
