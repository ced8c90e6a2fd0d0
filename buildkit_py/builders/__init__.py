"""Build backends behind one small interface (base.Builder), one module each, chosen by name."""

from __future__ import annotations

import importlib
import threading
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


class Backend:
    """The builder a command chose, once: its class (probing nothing: what planning and the checks read) and the
    builder `create` makes, made on the first `made()` (a background thread may start it early; a later call waits
    for that one) and shared by every stage of the command: the build, the push, each platform's build. A `create`
    that failed is not tried again: every later call raises its error (an engine that does not answer is waited on
    once)."""

    def __init__(self, name: str, docker: str | None):
        self.cls = builder_class(name)
        self._docker = docker
        self._lock = threading.Lock()
        self._made: Builder | None = None
        self._failed: Exception | None = None

    def made(self) -> Builder:
        with self._lock:
            if self._failed is not None:
                raise self._failed
            if self._made is None:
                try:
                    self._made = self.cls.create(self._docker)
                except Exception as exc:
                    self._failed = exc
                    raise
            return self._made


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


__all__ = ["BUILDERS", "Backend", "BuildRequest", "Builder", "BuildahBuilder", "BuildkitCliBuilder", "CloudBuildBuilder",
           "LegacyBuilder", "builder_class"]
