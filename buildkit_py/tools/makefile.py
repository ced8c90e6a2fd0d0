"""`buildkit-py make`: an includable buildkit.mk whose targets each run one buildkit-py command.

Config values reach the file only as defaults of `?=` variables, and only when they are plain
words (see `word`): no value can add a line, a target, a comment or an expansion to it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..config import Config, find_config
from ..errors import ConfigError, show
from ..patterns import lazy_pattern
from ..pipeline.render import environment

TEMPLATE = "make/buildkit.mk.j2"
# Safe in Make (no $ # ; \\ or space), in a POSIX shell word, and in YAML and JSON strings.
_WORD = lazy_pattern(r"[A-Za-z0-9._/:@+=,-]{1,512}", re.ASCII)


def word(value: str, field: str) -> str:
    """A value written into a generated Makefile or CI file: one plain word, or an error naming the field."""
    if not _WORD.fullmatch(value):
        raise ConfigError(f"{show(value)} cannot be written into a generated Makefile or CI file: use ASCII letters, "
                          "digits and . _ / : @ + = , - (no spaces, quotes or $)", field=field)
    return value


def config_path(config: Config, given: Path | None, base: Path) -> str:
    """The config file as the generated file names it: relative to where that file is used."""
    found = given or find_config(config.root)
    if found is None:
        return ""
    return word(os.path.relpath(found.resolve(), base.resolve()), "--config")


def render_makefile(config: Config, given_config: Path | None, base: Path) -> str:
    return environment().get_template(TEMPLATE).render(
        config=config_path(config, given_config, base),
        image=word(str(config.image), "image") if config.image else "",
        variants=[word(v.name, "variants") for v in config.variants],
        tune=config.hyperparameters is not None,
    )
