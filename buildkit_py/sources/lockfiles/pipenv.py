"""Pipfile.lock: its "default" packages whose markers hold for the image, the lock held against the Pipfile."""

from __future__ import annotations

import json
from pathlib import Path

from packaging.utils import canonicalize_name

from ...errors import ConfigError, show
from .common import Locked, _applies, _direct, _hashes, _name, _table, _text, _toml, _version
from .project import _refuse_stale, _table_requirements, _unmatched


def _pipenv(root: Path, name: str, env: dict[str, str]) -> list[Locked]:
    path = root / name
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}: cannot be read ({exc})") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ConfigError(f"{name}: not JSON ({exc})") from None
    default = _table(_table(data, name, "the file").get("default"), name, '"default"')
    lines = text.splitlines()
    out = []
    locked: dict[str, list[str]] = {}
    for pkg, entry in default.items():
        number = next((n for n, line in enumerate(lines, 1) if line.strip().startswith(json.dumps(pkg) + ":")), 0)
        at = f"{name}:{number}" if number else name
        pkg = _name(pkg, at)
        entry = _table(entry, at, pkg)
        pinned = entry.get("version")
        if pinned is not None and not (isinstance(pinned, str) and pinned.startswith("==")):
            raise ConfigError(f"{at}: {pkg} has no ==version: {show(pinned)}")
        version = _version(pinned[2:], at) if pinned else ""
        locked.setdefault(canonicalize_name(pkg), []).append(version or "(a URL or git)")
        if not _applies(entry.get("markers"), env, at):
            continue
        if entry.get("path") is not None or entry.get("editable"):
            if str(entry.get("path", "")).strip("/") in ("", "."):
                continue
            raise ConfigError(f"{at}: {pkg} comes from the path {show(entry.get('path'))}, which the image cannot "
                              "install from the lock")
        hashes_given = entry.get("hashes") or []
        if not isinstance(hashes_given, list):
            raise ConfigError(f"{at}: hashes must be a list, got {show(hashes_given)}")
        hashes = _hashes(hashes_given, at)
        if entry.get("git"):
            ref = _text(entry.get("ref"), at, "ref")
            out.append(Locked(pkg, version, (), _direct(f"git+{_text(entry['git'], at, 'git')}@{ref}", at), at))
        elif entry.get("file"):
            out.append(Locked(pkg, version, hashes, _direct(_text(entry["file"], at, "file"), at), at))
        elif not version:
            raise ConfigError(f"{at}: {pkg} has no ==version")
        else:
            out.append(Locked(pkg, version, hashes, None, at))
    pipfile = root / "Pipfile"
    if pipfile.is_file():
        declared, _ = _toml(pipfile, "Pipfile")
        packages = _table(declared.get("packages", {}), "Pipfile", "[packages]")
        problems = _unmatched(_table_requirements(packages, "Pipfile [packages]"), locked)
        _refuse_stale(name, "Pipfile", problems, "run `pipenv lock`")
    return out
