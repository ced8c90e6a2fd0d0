"""A conda environment file (environment.yml) as the image installs it: the image has no conda, so its pip section
and its conda packages become PyPI requirements (renamed where conda names the project otherwise), what only conda
provides (the CUDA toolkit, C libraries, the Python itself) is left out and said, and its Python is the one the
repository asks for. base_images/conda_names.yaml holds the names."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..config import read_yaml
from ..errors import ConfigError, DataError, show
from ..patterns import lazy_pattern

ENVIRONMENT_FILES = ("environment.yml", "environment.yaml")
# A conda match spec: [channel::]name[ version[ build]], or name=version[=build], or name with PEP 440-like operators
_SPEC = lazy_pattern(r"(?:[A-Za-z0-9_.\-/:]+::)?([A-Za-z0-9_][A-Za-z0-9_.\-]*)\s*(.*)", re.ASCII | re.DOTALL)
_PYTHON = lazy_pattern(r"[=<>~!]*\s*(3\.\d{1,2})(?:[.*].*)?", re.ASCII)


@dataclass(frozen=True)
class CondaEnvironment:
    """What an environment file asks the image for."""

    file: str
    requirements: tuple[tuple[str, str], ...]  # (PyPI requirement, where): conda packages and the pip section
    left_out: tuple[str, ...]  # conda-only packages, as written
    python: tuple[str, str] | None  # (X.Y, where) of its `python` package
    notes: tuple[str, ...]


def found_environment(directory: Path) -> str | None:
    """The environment file of the trainer directory, if it has one."""
    return next((n for n in ENVIRONMENT_FILES if (directory / n).is_file() and not (directory / n).is_symlink()), None)


def read_environment(directory: Path, name: str) -> CondaEnvironment:
    """The environment file NAME of DIRECTORY read as the image installs it; one that is not a conda environment
    (no list of dependencies, an entry that is no package) is a ConfigError naming the entry."""
    data, positions = read_yaml(directory / name, name)
    dependencies = data.get("dependencies", [])

    def where(*path: Any) -> str:
        return positions.get(("dependencies", *path), positions.get(("dependencies",), name))

    if not isinstance(dependencies, list):
        raise ConfigError(f"{show(dependencies)} is not allowed: a list of conda packages and a `pip:` list",
                          field="dependencies", where=where())
    renamed, conda_only = _names()
    requirements: list[tuple[str, str]] = []
    left_out: list[str] = []
    notes: list[str] = []
    python = None
    for i, entry in enumerate(dependencies):
        if isinstance(entry, dict) and set(entry) == {"pip"} and isinstance(entry["pip"], list):
            for j, line in enumerate(entry["pip"]):
                if not isinstance(line, str):
                    raise ConfigError(f"{show(line)} is not allowed: a requirement line", field=f"dependencies[{i}].pip[{j}]",
                                      where=where(i, "pip", j))
                text, at = line.strip(), f"{name}:dependencies[{i}].pip[{j}]"
                if text.startswith("-"):  # an option or another file: the image's install of these lines has none
                    notes.append(f"{at}: {show(line)} is left out: a pip option or included file, which the image's "
                                 "install of these requirements does not take")
                elif text:
                    requirements.append((text, at))
            continue
        if isinstance(entry, bool) or not isinstance(entry, str | int | float):
            raise ConfigError(f"{show(entry)} is not allowed: a conda package (name and version) or a `pip:` list",
                              field=f"dependencies[{i}]", where=where(i))
        found = _SPEC.fullmatch(str(entry).strip())
        if found is None:
            raise ConfigError(f"{show(entry)} is not a conda package spec", field=f"dependencies[{i}]", where=where(i))
        conda_name, version = found.group(1).lower(), found.group(2).strip()
        if conda_name == "python":
            matched = _PYTHON.fullmatch(version)
            python = (matched.group(1), f"{name}:dependencies[{i}]") if matched else python
            continue
        if _conda_only(conda_name, conda_only):
            left_out.append(str(entry))
            continue
        requirement = _requirement(renamed.get(conda_name, conda_name), version)
        if requirement is None:
            notes.append(f"{name}:dependencies[{i}]: {show(entry)}'s version is not one pip can read: "
                         f"{renamed.get(conda_name, conda_name)} is installed at the release the resolution chooses")
            requirement = renamed.get(conda_name, conda_name)
        requirements.append((requirement, f"{name}:dependencies[{i}]"))
    return CondaEnvironment(name, tuple(requirements), tuple(left_out), python, tuple(notes))


def _requirement(dist: str, version: str) -> str | None:
    """DIST at conda's VERSION as a PEP 508 requirement: `=1.7` (conda's prefix match) is `==1.7.*`, `=1.7.1=py38_0`
    (a build string after it) `==1.7.1.*`, ` 1.7.1` `==1.7.1`, ` 1.7*` `==1.7.*`; operators stay. None where pip
    cannot read it."""
    version = version.strip()
    if not version:
        return dist
    if version.startswith("=") and not version.startswith("=="):  # name=1.7[=build]: 1.7 and what starts with it
        text = f"{dist}=={version[1:].split('=')[0].strip().rstrip('*').rstrip('.')}.*"
    elif version[0].isdigit():  # `name 1.7.1` is that release; `name 1.7*` what starts with 1.7
        release = version.split()[0]
        text = f"{dist}=={release.rstrip('*').rstrip('.')}.*" if release.endswith("*") else f"{dist}=={release}"
    else:
        text = dist + version.split()[0]
    try:
        Requirement(text)
    except InvalidRequirement:
        return None
    return text


def _conda_only(name: str, patterns: tuple[str, ...]) -> bool:
    return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in patterns)


def _names() -> tuple[dict[str, str], tuple[str, ...]]:
    from ..catalog.resources import read_data, resource_dir

    data = read_data(resource_dir("base_images") / "conda_names.yaml", "base_images/conda_names.yaml")
    renamed = data.get("renamed") if isinstance(data, dict) else None
    conda_only = data.get("conda_only") if isinstance(data, dict) else None
    if not isinstance(renamed, dict) or not isinstance(conda_only, list) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in renamed.items()) or not all(
            isinstance(p, str) for p in conda_only):
        raise DataError("base_images/conda_names.yaml: `renamed` must map names to names, `conda_only` list names")
    return {canonicalize_name(k): v for k, v in renamed.items()}, tuple(conda_only)
