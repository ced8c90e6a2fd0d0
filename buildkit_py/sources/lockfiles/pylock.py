"""pylock.toml (PEP 751, pylock.<name>.toml included): its packages whose markers hold for the image."""

from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError, show
from .common import Locked, _applies, _direct, _hashes, _lines_of, _name, _table, _tables, _text, _toml, _version


def _pylock(root: Path, name: str, env: dict[str, str]) -> list[Locked]:
    data, text = _toml(root / name, name)
    packages = _tables(data.get("packages"), name, "[[packages]]")
    if "lock-version" not in data:
        raise ConfigError(f"{name}: no lock-version: not a PEP 751 lock")
    where = {i: f"{name}:{n}" for i, (n, _) in enumerate(_lines_of(text, "packages"))}
    out = []
    for index, package in enumerate(packages):
        at = where.get(index, name)
        if not _applies(package.get("marker"), env, at, "lock_file"):
            continue
        pkg = _name(package.get("name"), at)
        if "directory" in package:
            directory = _table(package["directory"], at, "directory")
            if str(directory.get("path", "")).strip("/") in ("", "."):
                continue  # the project itself: its code is copied, its metadata installed by trainer_package
            raise ConfigError(f"{at}: {pkg} comes from the directory {show(directory.get('path'))}, which the image "
                              "cannot install from the lock")
        version = _version(package["version"], at) if "version" in package else ""
        files = ([_table(package["sdist"], at, "sdist")] if "sdist" in package else []) + \
            _tables(package.get("wheels"), at, "wheels")
        digests = [_table(f.get("hashes", {}), at, "hashes") for f in files]
        hashes = _hashes([f"sha256:{d['sha256']}" for d in digests if "sha256" in d], at)
        if "vcs" in package:
            vcs = _table(package["vcs"], at, "vcs")
            kind, url = _text(vcs.get("type", "git"), at, "vcs.type"), _text(vcs.get("url"), at, "vcs.url")
            commit = _text(vcs.get("commit-id"), at, "vcs.commit-id")
            out.append(Locked(pkg, version, (), _direct(f"{kind}+{url}@{commit}", at), at))
        elif "archive" in package:
            archive = _table(package["archive"], at, "archive")
            digest = _table(archive.get("hashes", {}), at, "archive.hashes")
            out.append(Locked(pkg, version, _hashes([f"sha256:{digest['sha256']}"] if "sha256" in digest else [], at),
                              _direct(_text(archive.get("url"), at, "archive.url"), at), at))
        elif not version:
            raise ConfigError(f"{at}: {pkg} has no version")
        else:
            out.append(Locked(pkg, version, hashes, None, at))
    return out
