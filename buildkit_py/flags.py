"""The command-line flag of each config key: the command line defines them, and the config's errors name them
(a value set by a flag is named as its flag). Apart from config.py, so that building the parser loads no config."""

from __future__ import annotations

_FLAG_NAMES = {"tags": "--tag", "allow_secrets": "--allow-secret", "allow_large": "--allow-large"}


def flag_name(key: str) -> str:
    """The command-line flag that sets a config key."""
    return _FLAG_NAMES.get(key) or "--" + key.replace("_", "-")


def cloudbuild_flag_name(key: str) -> str:
    """The flag that sets a key of `cloudbuild:` (--cloudbuild-KEY)."""
    return "--cloudbuild-" + key.replace("_", "-")
