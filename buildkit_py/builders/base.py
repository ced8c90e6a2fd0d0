"""The interface every build backend implements."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..progress import Reporter


@dataclass(frozen=True)
class BuildRequest:
    context_dir: Path
    dockerfile: Path  # outside context_dir
    labels: tuple[tuple[str, str], ...] = ()
    platform: str | None = None
    network: str | None = None
    secrets: tuple[tuple[str, Path], ...] = ()  # (id, file): mounted at /run/secrets/<id> in RUN steps
    no_cache: bool = False


class Builder(Protocol):
    name: str
    supports_secrets: bool  # False: the Dockerfile must be rendered without BuildKit mounts

    def build(self, request: BuildRequest, reporter: Reporter) -> str:
        """Build and return the image ID. Applies no tag: the caller tags only after success,
        so a failed or interrupted build leaves no tag behind."""
        ...
