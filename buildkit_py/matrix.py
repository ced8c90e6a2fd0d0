"""The version tables of base_images/, loaded into frozen objects and checked once.

This module only reads and indexes the data; choosing among it is plan.py's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from packaging.version import InvalidVersion, Version

from .errors import DataError
from .resources import resource_dir


def minor(version: str) -> str:
    """'12.4.1' -> '12.4'."""
    return ".".join(version.split(".")[:2])


def version_key(version: str) -> Version:
    try:
        return Version(version)
    except InvalidVersion:
        raise DataError(f"base_images/: {version!r} is not a version") from None


@dataclass(frozen=True)
class CudaRelease:
    cuda: str  # full version of the tag, "12.4.1"
    cudnn_flavour: str  # "cudnn8", "cudnn9", "cudnn"
    cudnn: str  # NV_CUDNN_VERSION of the runtime image
    ubuntu: tuple[str, ...]
    min_driver: str | None = None  # the Linux driver this CUDA needs (CUDA toolkit release notes)

    @property
    def minor(self) -> str:
        return minor(self.cuda)


@dataclass(frozen=True)
class InstallSpec:
    """How one framework release line is installed (values may hold {cuda_nodot}/{cuda_major})."""

    package: str
    pre: bool
    bundles_cuda: bool
    gpu_extra: str | None
    gpu_index_url: str | None
    cpu_index_url: str | None


@dataclass(frozen=True)
class FrameworkSeries:
    series: str  # "2.5", or "nightly"
    releases: tuple[str, ...]
    cuda: tuple[str, ...]  # CUDA minor versions of the official GPU wheels
    cudnn: str | None
    python: tuple[str, ...]
    install: InstallSpec


@dataclass(frozen=True)
class Framework:
    name: str
    aliases: tuple[str, ...]
    gpu: bool
    series: tuple[FrameworkSeries, ...]  # oldest first
    nightly: FrameworkSeries | None
    source: str

    def releases(self) -> list[str]:
        return [r for s in self.series for r in s.releases]


@dataclass(frozen=True)
class Distros:
    ubuntu_system: dict[str, str]
    ubuntu_apt: dict[str, tuple[str, ...]]
    cpu_image: str  # format string with {python}
    cpu_python: tuple[str, ...]
    default_python: str


@dataclass(frozen=True)
class Tools:
    uv_requirement: str
    hypertune_requirement: str


@dataclass(frozen=True)
class Matrix:
    cuda_repository: str
    cuda: tuple[CudaRelease, ...]  # oldest first
    frameworks: dict[str, Framework]
    aliases: dict[str, str]
    distros: Distros
    tools: Tools
    # The launcher's driver rule (cuda.yaml): per CUDA major the minor-version-compatibility
    # floor, and the driver branches cuda-compat (forward compatibility) supports.
    compat_driver: dict[str, str]
    forward_compat_branches: tuple[int, ...]

    def framework(self, name: str) -> Framework | None:
        return self.frameworks.get(self.aliases.get(name, name))


def _load(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: the top level must be a mapping")
    return data


def _need(data: dict, key: str, kind: type, where: str) -> Any:
    if key not in data or not isinstance(data[key], kind):
        raise DataError(f"{where}: {key!r} must be a {kind.__name__}")
    return data[key]


def _strings(values: Any, where: str) -> tuple[str, ...]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise DataError(f"{where}: expected a list of quoted strings, got {values!r}")
    return tuple(values)


def _install(data: dict, defaults: InstallSpec | None, where: str) -> InstallSpec:
    base = defaults or InstallSpec("", False, False, None, None, None)
    return InstallSpec(
        package=data.get("package", base.package),
        pre=bool(data.get("pre", base.pre)),
        bundles_cuda=bool(data.get("bundles_cuda", base.bundles_cuda)),
        gpu_extra=data.get("gpu_extra", base.gpu_extra),
        gpu_index_url=data.get("gpu_index_url", base.gpu_index_url),
        cpu_index_url=data.get("cpu_index_url", base.cpu_index_url),
    )


def _series(data: dict, series: str, defaults: InstallSpec, where: str) -> FrameworkSeries:
    releases = _strings(data.get("releases", []), where)
    for r in releases:
        version_key(r)
    return FrameworkSeries(
        series=series,
        releases=releases,
        cuda=_strings(data.get("cuda", []), where),
        cudnn=str(data["cudnn"]) if data.get("cudnn") is not None else None,
        python=_strings(_need(data, "python", list, where), where),
        install=_install(data, defaults, where),
    )


def _framework(path: Path) -> Framework:
    data = _load(path)
    where = str(path)
    name = _need(data, "name", str, where)
    defaults = _install(data, None, where)
    if not defaults.package:
        raise DataError(f"{where}: 'package' is required")
    series = []
    for i, item in enumerate(_need(data, "versions", list, where)):
        sw = f"{where}: versions[{i}]"
        series.append(_series(item, str(_need(item, "series", str, sw)), defaults, sw))
    series.sort(key=lambda s: version_key(s.series))
    nightly = data.get("nightly")
    return Framework(
        name=name,
        aliases=_strings(data.get("aliases", []), where),
        gpu=bool(data.get("gpu", False)),
        series=tuple(series),
        nightly=_series(nightly, "nightly", defaults, f"{where}: nightly") if nightly else None,
        source=path.name,
    )


@lru_cache(maxsize=4)
def load_matrix(directory: Path | None = None) -> Matrix:
    root = directory or resource_dir("base_images")
    cuda_data = _load(root / "cuda.yaml")
    cuda = []
    for i, item in enumerate(_need(cuda_data, "releases", list, "cuda.yaml")):
        where = f"cuda.yaml: releases[{i}]"
        cudnn = _need(item, "cudnn", dict, where)
        cuda.append(
            CudaRelease(
                cuda=_need(item, "cuda", str, where),
                cudnn_flavour=_need(cudnn, "flavour", str, where),
                cudnn=_need(cudnn, "version", str, where),
                ubuntu=_strings(item.get("ubuntu"), where),
                min_driver=item.get("min_driver"),
            )
        )
    cuda.sort(key=lambda r: version_key(r.cuda))
    compat_driver = _need(cuda_data, "compat_driver", dict, "cuda.yaml")
    branches = _need(cuda_data, "forward_compat_branches", list, "cuda.yaml")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in compat_driver.items()):
        raise DataError("cuda.yaml: 'compat_driver' must map quoted CUDA majors to quoted driver versions")
    if not all(type(b) is int for b in branches):
        raise DataError(f"cuda.yaml: 'forward_compat_branches' must be a list of driver branch numbers, got {branches!r}")
    frameworks: dict[str, Framework] = {}
    aliases: dict[str, str] = {}
    for path in sorted((root / "frameworks").glob("*.yaml")):
        fw = _framework(path)
        frameworks[fw.name] = fw
        for alias in fw.aliases:
            aliases[alias] = fw.name
    distros = _load(root / "distros.yaml")
    ubuntu = _need(distros, "ubuntu", dict, "distros.yaml")
    cpu = _need(distros, "cpu", dict, "distros.yaml")
    tools = _load(root / "tools.yaml")
    return Matrix(
        cuda_repository=_need(cuda_data, "repository", str, "cuda.yaml"),
        cuda=tuple(cuda),
        frameworks=frameworks,
        aliases=aliases,
        distros=Distros(
            ubuntu_system={k: _need(v, "system", str, f"distros.yaml: ubuntu.{k}") for k, v in ubuntu.items()},
            ubuntu_apt={k: _strings(v.get("apt"), f"distros.yaml: ubuntu.{k}") for k, v in ubuntu.items()},
            cpu_image=_need(cpu, "image", str, "distros.yaml: cpu"),
            cpu_python=_strings(cpu.get("python"), "distros.yaml: cpu"),
            default_python=_need(distros, "default_python", str, "distros.yaml"),
        ),
        tools=Tools(
            uv_requirement=_need(tools, "uv_requirement", str, "tools.yaml"),
            hypertune_requirement=_need(tools, "hypertune_requirement", str, "tools.yaml"),
        ),
        compat_driver=dict(compat_driver),
        forward_compat_branches=tuple(branches),
    )
