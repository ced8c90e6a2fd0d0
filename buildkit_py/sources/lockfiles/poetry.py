"""poetry.lock: the packages of the groups and extras in force whose markers hold for the image, the lock held
against pyproject.toml's dependencies."""

from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name

from ...errors import ConfigError, show
from .common import Locked, _applies, _direct, _hashes, _lines_of, _name, _table, _tables, _text, _toml, _version
from .project import _project_dependencies, _refuse_stale, _unmatched


def _poetry(root: Path, name: str, env: dict[str, str], extras: tuple[str, ...] = (),
            groups: tuple[str, ...] = ()) -> list[Locked]:
    data, text = _toml(root / name, name)
    packages = _tables(data.get("package"), name, "[[package]]")
    _table(data.get("metadata"), name, "[metadata]")
    where = {i: f"{name}:{n}" for i, (n, _) in enumerate(_lines_of(text, "package"))}
    # An extra installs the optional packages the lock's [extras] table names for it ("torch (>=2.0)": the name first).
    table = {canonicalize_name(str(k)): v for k, v in _table(data.get("extras", {}), name, "[extras]").items()}
    for extra in extras:
        if canonicalize_name(extra) not in table:
            raise ConfigError(f"{name}: the project has no extra {show(extra)} in the lock; it has "
                              f"{', '.join(sorted(table)) or 'none'}", field="requirements_extras")
    optional_in = {canonicalize_name(str(item).split()[0]) for extra in extras
                   for item in (table.get(canonicalize_name(extra)) or []) if str(item).strip()}
    in_force = {"main", *groups}
    out = []
    locked: dict[str, list[str]] = {}
    for index, package in enumerate(packages):
        at = where.get(index, name)
        pkg = _name(package.get("name"), at)
        version = _version(package.get("version"), at)
        locked.setdefault(canonicalize_name(pkg), []).append(version)
        package_groups = package.get("groups", [package.get("category", "main")])
        if not isinstance(package_groups, list) or not in_force & set(map(str, package_groups)):
            continue  # a dev/test group not installed: not the trainer's runtime
        if package.get("optional") is True and canonicalize_name(pkg) not in optional_in:
            continue  # an extra not installed
        markers = package.get("markers")
        if isinstance(markers, dict):  # per group: the package applies where one group in force says so
            said = [markers.get(g) for g in in_force if g in markers] or [None]
            if not any(_applies(m, env, at) for m in said):
                continue
        elif not _applies(markers, env, at):
            continue
        source = _table(package.get("source", {}), at, "source")
        hashes = _hashes([f["hash"] for f in _tables(package.get("files"), at, "files") if "hash" in f], at)
        kind = source.get("type")
        if kind == "git":
            commit = _text(source.get("resolved_reference") or source.get("reference"), at, "source.resolved_reference")
            out.append(Locked(pkg, version, (), _direct(f"git+{_text(source.get('url'), at, 'source.url')}@{commit}", at),
                              at))
        elif kind == "url":
            out.append(Locked(pkg, version, hashes, _direct(_text(source.get("url"), at, "source.url"), at), at))
        elif kind in ("directory", "file"):
            if str(source.get("url", "")).strip("/") in ("", "."):
                continue
            raise ConfigError(f"{at}: {pkg} comes from the {kind} {show(source.get('url'))}, which the image cannot "
                              "install from the lock")
        else:  # PyPI, or a source (index) the project names: pip_conf/pip_index_url give the image that index
            out.append(Locked(pkg, version, hashes, None, at))
    declared = _project_dependencies(root)
    if declared is not None:
        _refuse_stale(name, declared[1], _unmatched(declared[0], locked), "run `poetry lock`")
    return out
