"""Where the trainer and its config are (Project), how it is loaded, and the checks every stage shares."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import build as _build
from ..config import Config, load_config
from ..errors import ConfigError, ResolutionError, show
from ..fsutil import cache_dir
from ..plan import Plan, make_plan

MAX_GPUS = 16  # the most GPUs one Vertex AI machine has
MAX_WORKERS = 64  # local runs start one container per worker


@dataclass(frozen=True)
class Project:
    """Where the trainer and its config are, and the config keys set by flags (None: not set)."""

    config: Path | None = None  # buildkit.yaml or pyproject.toml (default: found in directory)
    directory: Path | None = None  # the trainer directory (default: the config's, else the working directory)
    overrides: tuple[tuple[str, Any], ...] = ()
    variant: str | None = None  # one of the config's variants (its overrides applied, its name in the tags)


def load(project: Project) -> Config:
    directory = project.directory or (project.config.parent if project.config else Path.cwd())
    config = load_config(project.config, directory, dict(project.overrides))
    variants = variant_configs(config)
    if project.variant is None:
        return config
    found = [v for v in variants if v.variant == project.variant]
    if not found:
        known = ", ".join(v.variant or "" for v in variants) or "none (the config has no variants: key)"
        raise ConfigError(f"{show(project.variant)} is not a variant of {config.source}; variants: {known}", field="--variant")
    return found[0]


def variant_configs(config: Config) -> list[Config]:
    """Each variant's config, every one checked to resolve: a variant that does not is named."""
    out = []
    for i, variant in enumerate(config.variants):
        derived = config.with_variant(variant)
        try:
            make_plan(derived)
        except (ConfigError, ResolutionError) as exc:
            raise ConfigError(f"variant {show(variant.name)} does not resolve: {exc}", field=f"variants[{i}]",
                              where=config.source) from None
        out.append(derived)
    return out


def resolve(project: Project) -> Plan:
    return make_plan(load(project))


def check_count(name: str, value: int, limit: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ConfigError(f"{show(value)} is not allowed: a whole number from 0 to {limit}", field=name)


def runs_dir(config: Config, kind: str = "run") -> Path:
    """Where a run's or a study's outputs go unless --output names a place: under the cache dir, outside the
    trainer directory, whose next build would send them (and get a new content tag)."""
    when = f"{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**6:06d}"  # two runs in one second apart
    return cache_dir() / "runs" / f"{_build._slug(config.root.name)}-{kind}-{when}"
