"""Build backends behind one small interface (base.Builder), one module each, chosen by name."""

from __future__ import annotations

from .base import Builder, BuildRequest
from .buildah import BuildahBuilder
from .buildkit_cli import BuildkitCliBuilder
from .cloudbuild import CloudBuildBuilder
from .legacy import LegacyBuilder

# buildkit: a Docker CLI with BuildKit (buildx, or a client with it built in); legacy: the engine's
# classic builder through the Docker SDK (no cache or secret mounts); buildah: no Docker engine; cloudbuild: Google
# Cloud Build, no engine on this machine.
REGISTRY: dict[str, type[Builder]] = {b.name: b for b in (BuildkitCliBuilder, LegacyBuilder, BuildahBuilder,
                                                           CloudBuildBuilder)}
ALIASES = {"auto": BuildkitCliBuilder.name}
BUILDERS = (*ALIASES, *REGISTRY)


def builder_class(name: str = "auto") -> type[Builder]:
    """The backend a (validated) builder name stands for, without probing the machine: its
    `create(docker)` then finds what it needs or says how to install it."""
    return REGISTRY[ALIASES.get(name, name)]


__all__ = ["BUILDERS", "REGISTRY", "BuildRequest", "Builder", "BuildahBuilder", "BuildkitCliBuilder", "CloudBuildBuilder",
           "LegacyBuilder", "builder_class"]
