"""What the config file and the flags already set: inference fills only the keys both leave out, and a message about
a key they set names where it was set."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import find_config, load_raw


@dataclass(frozen=True)
class Given:
    """What the config file and the flags already set: the file's keys as written, the flags' values, and where each
    key is set."""

    config_file: Path | None
    data: dict[str, Any]  # the config file's keys as written (not yet checked: a value may have any type)
    flags: dict[str, Any]  # config key -> the flag's value; None where the flag is not passed
    keys: frozenset[str]  # the keys the config file or a flag sets
    where: dict[str, str]  # each of those keys -> the flag (--pip-index-url) or the config file that sets it

    def __contains__(self, key: str) -> bool:
        return key in self.keys

    @property
    def framework(self) -> str:
        """The framework the config or --framework sets ("torch==2.5.1", "torch"); "" where neither does."""
        return str(self.flags.get("framework") or self.data.get("framework") or "")


def read_given(directory: Path, config_path: Path | None, flags: dict[str, Any]) -> Given:
    raw, _ = load_raw(config_path, directory)
    config_file = config_path or find_config(directory)
    keys = set(raw.data) | {k for k, v in flags.items() if v is not None}
    where = {k: ("--" + k.replace("_", "-") if k in flags and flags[k] is not None else str(config_file)) for k in keys}
    return Given(config_file, raw.data, flags, frozenset(keys), where)
