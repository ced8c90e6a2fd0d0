"""Build backends behind one small interface (base.Builder), one module each, chosen by name."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Builder

# buildkit: a Docker CLI with BuildKit (buildx, or a client with it built in); legacy: the engine's
# classic builder through the Docker SDK (no cache or secret mounts); buildah: no Docker engine; cloudbuild: Google
# Cloud Build, no engine on this machine. Each backend's module loads when it is chosen: loading the config or
# planning a build (which reads only `supports_secrets`) does not pay for the others. This module imports none of
# them, nor base.py: the config, below the backends, checks a builder's name against this table.
_MODULES = {"buildkit": ("buildkit_cli", "BuildkitCliBuilder"), "legacy": ("legacy", "LegacyBuilder"),
            "buildah": ("buildah", "BuildahBuilder"), "cloudbuild": ("cloudbuild", "CloudBuildBuilder")}
ALIASES = {"auto": "buildkit"}
BUILDERS = (*ALIASES, *_MODULES)


def builder_class(name: str = "auto") -> type[Builder]:
    """The backend a (validated) builder name stands for, without probing the machine: its
    `create(docker)` then finds what it needs or says how to install it."""
    module, cls = _MODULES[ALIASES.get(name, name)]
    return getattr(importlib.import_module(f".{module}", __package__), cls)


def __getattr__(name: str) -> Any:
    """The backend classes by name (`from buildkit_py.builders import BuildahBuilder`), and the interface
    (Builder, BuildRequest), loaded on first use."""
    if name in ("Builder", "BuildRequest"):
        from . import base  # up: the interface loads with a backend, not with the table of names the config reads

        return getattr(base, name)
    backend = next((b for b, (_, cls) in _MODULES.items() if cls == name), None)
    if backend is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return builder_class(backend)


__all__ = ["BUILDERS", "BuildRequest", "Builder", "BuildahBuilder", "BuildkitCliBuilder", "CloudBuildBuilder",
           "LegacyBuilder", "builder_class"]
