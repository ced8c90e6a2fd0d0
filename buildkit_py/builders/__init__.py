"""Build backends behind one small interface (base.Builder), one module each, chosen by name."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .names import ALIASES, BACKENDS, BUILDERS

if TYPE_CHECKING:
    from .base import Builder


def builder_class(name: str = "auto") -> type[Builder]:
    """The backend a (validated) builder name stands for, without probing the machine: its
    `create(docker)` then finds what it needs or says how to install it. Only the chosen backend's module loads:
    planning a build (which reads only `supports_secrets`) does not pay for the others."""
    module, cls = BACKENDS[ALIASES.get(name, name)]
    return getattr(importlib.import_module(f".{module}", __package__), cls)


def __getattr__(name: str) -> Any:
    """The backend classes by name (`from buildkit_py.builders import BuildahBuilder`), and the interface
    (Builder, BuildRequest), loaded on first use."""
    if name in ("Builder", "BuildRequest"):
        from . import base  # the interface loads with a backend, not with the package

        return getattr(base, name)
    backend = next((b for b, (_, cls) in BACKENDS.items() if cls == name), None)
    if backend is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return builder_class(backend)


__all__ = ["BUILDERS", "BuildRequest", "Builder", "BuildahBuilder", "BuildkitCliBuilder", "CloudBuildBuilder",
           "LegacyBuilder", "builder_class"]
