"""The version tables of base_images/, loaded into frozen objects and checked once, plus the
user's overlay that `buildkit-py matrix refresh` writes from the package index's metadata.

This module only reads and indexes the data; choosing among it is the pipeline/plan package's job. The TPU tables
are read by tpu.py, the GPUs and machine types by machines.py, with the checks of reading.py.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import DataError, show
from ..fsutil import consult
from ..patterns import lazy_pattern
from .machines import AMD64, ARM64, Accelerator, _accelerators, arch
from .reading import _PYTHON, _RELEASE, _load, _need, _strings, _text, version_key
from .resources import resource_dir
from .tpu import Tpu, TpuSpec, _tpu_spec, _tpus

OVERLAY_ENV = "BUILDKIT_PY_MATRIX_OVERLAY"  # another overlay file (tests, shared CI caches)
OVERLAY_NAME = "matrix-overlay.yaml"
_GLIBC = lazy_pattern(r"2\.[0-9]{1,2}", re.ASCII)
SHIPPED = "shipped"  # FrameworkSeries.origin of base_images/ data
# FrameworkSeries.origin of a release the data does not list, of a framework with no CUDA to match: the index's
UNRECORDED = "unrecorded"
FLAVOURS = ("base", "runtime", "cudnn-runtime", "devel")  # nvidia/cuda image flavours a config may ask for
SYSTEM_CUDA = ("base", "runtime")  # what a framework whose wheels bring CUDA needs from the base
# Whole-string ASCII patterns, as reading.py's: the overlay's values reach requirement strings and labels.
_MINOR = lazy_pattern(r"[0-9]{1,2}\.[0-9]{1,2}", re.ASCII)
_CUDA_KEY = lazy_pattern(r"[0-9]{1,2}(?:\.[0-9]{1,2})?", re.ASCII)
_CUDNN = lazy_pattern(r"[0-9]{1,2}(?:\.[0-9]{1,3}){0,3}", re.ASCII)
ARCH = lazy_pattern(r"(sm|compute)_([0-9]{2,3})([af]?)", re.ASCII)
_PACKAGE = lazy_pattern(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", re.ASCII)
_COMPANION = lazy_pattern(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}(?:[<>=!~]=?[0-9][0-9a-z.*]{0,31})?", re.ASCII)
_PLATFORM = lazy_pattern(r"linux/[a-z0-9]{1,16}", re.ASCII)


def minor(version: str) -> str:
    """'12.4.1' -> '12.4'."""
    return ".".join(version.split(".")[:2])


@dataclass(frozen=True)
class CudaRelease:
    """One CUDA release of the nvidia/cuda images (cuda.yaml): its cuDNN, Ubuntu releases and minimum driver."""

    cuda: str  # full version of the tag, "12.4.1"
    cudnn_flavour: str  # "cudnn8", "cudnn9", "cudnn"
    cudnn: str | None  # NV_CUDNN_VERSION of the cuDNN images; None: not verified
    ubuntu: tuple[str, ...]  # Ubuntu releases of the base, runtime and devel tags
    min_driver: str | None = None  # the Linux driver this CUDA needs (CUDA toolkit release notes)
    cudnn_ubuntu: tuple[str, ...] = ()  # Ubuntu releases of the cuDNN tags, where they differ

    @property
    def minor(self) -> str:
        return minor(self.cuda)

    def ubuntu_for(self, with_cudnn: bool) -> tuple[str, ...]:
        return (self.cudnn_ubuntu or self.ubuntu) if with_cudnn else self.ubuntu


@dataclass(frozen=True)
class InstallSpec:
    """How one framework release line is installed (values may hold {cuda_nodot}/{cuda_major})."""

    package: str
    pre: bool
    bundles_cuda: bool  # the GPU wheels bring CUDA and cuDNN as nvidia-* packages
    gpu_extra: str | None
    gpu_index_url: str | None
    cpu_index_url: str | None
    extra_optional: bool = False  # without gpu_extra the wheel loads the system CUDA/cuDNN instead
    system_cuda: str = "base"  # the nvidia/cuda flavour a bundling framework needs: base or runtime
    package_by_cuda: tuple[tuple[str, str], ...] = ()  # CUDA major or minor -> another package name

    def package_for(self, cuda: str | None) -> str:
        names = dict(self.package_by_cuda)
        if cuda:
            return names.get(minor(cuda)) or names.get(cuda.split(".")[0]) or self.package
        return self.package


@dataclass(frozen=True)
class FrameworkSeries:
    """One release series of a framework (frameworks/*.yaml, or the overlay): its releases, CUDA builds, Pythons and
    how it installs."""

    series: str  # "2.5", or "nightly"
    releases: tuple[str, ...]
    cuda: tuple[str, ...]  # CUDA minor versions of the official GPU wheels
    cudnn: str | None
    python: tuple[str, ...]
    install: InstallSpec
    default_cuda: str | None = None  # the framework's stable default; None: the newest of `cuda`
    experimental_cuda: tuple[str, ...] = ()  # variants chosen only when asked for
    archs: tuple[tuple[str, tuple[str, ...]], ...] = ()  # CUDA major or minor -> sm_XY/compute_XY
    origin: str = SHIPPED  # SHIPPED, or the overlay file the series came from
    verified: tuple[tuple[str, str], ...] = ()  # CUDA -> what a real GPU machine reported for the build
    companions: tuple[str, ...] = ()  # requirements installed with the framework: "protobuf<3.20"
    advice: str | None = None  # what to do instead when a release of the series cannot be built
    # Another distribution that builds the series for GPUs (`gpu_build`: NVIDIA's TensorFlow 1.15), its one release
    # in `releases`; and the distributions it stands for, whose requirements it replaces.
    gpu_build: FrameworkSeries | None = None
    replaces: tuple[str, ...] = ()
    # Linux aarch64 (linux/arm64) CUDA wheels: the variants published, and their GPU architectures where the
    # aarch64 build's differ from `archs` (None: the same build settings as x86_64).
    arm64_cuda: tuple[str, ...] = ()
    arm64_archs: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    per_release: dict[str, FrameworkSeries] = field(default_factory=dict, compare=False)

    def for_release(self, version: str) -> FrameworkSeries:
        """This series as it applies to one release (per_release overrides)."""
        return self.per_release.get(version, self)

    def for_platform(self, platform: str | None) -> FrameworkSeries:
        """This series as it builds for the platform: on linux/arm64 only its aarch64 CUDA wheels, with their
        architectures; elsewhere itself."""
        if arch(platform) != arch(ARM64):
            return self
        cuda = self.arm64_cuda
        return replace(self, cuda=cuda, archs=self.archs if self.arm64_archs is None else self.arm64_archs,
                       default_cuda=self.default_cuda if self.default_cuda in cuda else None,
                       experimental_cuda=tuple(c for c in self.experimental_cuda if c in cuda), per_release={})

    def archs_for(self, cuda: str) -> tuple[str, ...] | None:
        """The GPU architectures of the wheel for this CUDA (minor, else major); None: not recorded."""
        table = dict(self.archs)
        found = table.get(minor(cuda), table.get(cuda.split(".")[0]))
        return tuple(found) if found is not None else None


@dataclass(frozen=True)
class Framework:
    """A framework of base_images/frameworks/: its aliases, its series oldest first, its nightly and its TPU build."""

    name: str
    aliases: tuple[str, ...]
    gpu: bool
    series: tuple[FrameworkSeries, ...]  # oldest first; overlay series after the shipped ones of a label
    nightly: FrameworkSeries | None
    source: str
    wheel_package: str  # the package whose cpXY wheels tell a release's Pythons (jaxlib for jax)
    tpu: TpuSpec | None = None  # the TPU build (frameworks/*.yaml `tpu:`); None: none
    arm64_cpu_from: str | None = None  # the first release with Linux aarch64 wheels; None: not recorded

    def releases(self) -> list[str]:
        return [r for s in self.series for r in s.releases]

    def gpu_series(self, series: FrameworkSeries) -> FrameworkSeries | None:
        """What builds a release of this series for GPUs in place of the framework's own wheels: the series'
        gpu_build, else (an older series of a release line) the gpu_build of the newest series of the same major."""
        if series.gpu_build is not None:
            return series.gpu_build
        major = series.series.split(".")[0]
        later = [s for s in self.series if s.gpu_build is not None and s.series.split(".")[0] == major
                 and version_key(s.series) > version_key(series.series)]
        return max(later, key=lambda s: version_key(s.series)).gpu_build if later else None

    @property
    def package(self) -> str:
        return self.series[-1].install.package if self.series else self.name


@dataclass(frozen=True)
class Distros:
    """The bases' Pythons and glibc (distros.yaml): each Ubuntu release's, the CPU image's, default, oldest."""

    ubuntu_system: dict[str, str]
    ubuntu_apt: dict[str, tuple[str, ...]]
    cpu_image: str  # format string with {python}
    cpu_python: tuple[str, ...]
    default_python: str
    min_python: str  # the oldest Python any image may have (the launcher's syntax)
    standalone_min_python: str  # the oldest Python uv installs as a standalone build (GPU images)
    ubuntu_glibc: dict[str, str] = field(default_factory=dict)  # the manylinux_X_Y its wheels may need
    cpu_glibc: str = "2.28"
    custom_glibc: str = "2.28"


@dataclass(frozen=True)
class Tools:
    """The pinned tools the generated images install (tools.yaml): uv and cloudml-hypertune."""

    uv_requirement: str
    hypertune_requirement: str


@dataclass(frozen=True)
class Overlay:
    """The user's matrix overlay, as loaded: its file, when `matrix refresh` wrote it, and the index it read."""

    path: Path
    generated: str  # when `matrix refresh` wrote it
    index: str  # the index it read (no credentials)


@dataclass(frozen=True)
class Matrix:
    """The version tables of base_images/ (CUDA, frameworks, distros, GPUs, TPUs), the user's overlay merged in."""

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
    accelerators: dict[str, Accelerator] = field(default_factory=dict)
    overlay: Overlay | None = None
    tpus: dict[str, Tpu] = field(default_factory=dict)  # tpus.yaml
    deleted_cuda: dict[str, str] = field(default_factory=dict)  # CUDA minor -> why its nvidia/cuda tags are gone
    # The nvidia/cuda images' ENV for the host's driver, for a GPU image on another base (cuda.yaml driver_env).
    driver_env: tuple[tuple[str, str], ...] = ()
    cuda_platforms: tuple[str, ...] = (AMD64,)  # the platforms of the nvidia/cuda tags' manifest lists
    cuda_arm64_from: str | None = None  # the first CUDA release with linux/arm64 (sbsa) images

    def framework(self, name: str) -> Framework | None:
        return self.frameworks.get(self.aliases.get(name, name))


def usable_python(matrix: Matrix, series: FrameworkSeries) -> list[str]:
    """The series' Pythons that an image can have (the launcher needs distros.yaml's min_python)."""
    floor = version_key(matrix.distros.min_python)
    return [p for p in series.python if version_key(p) >= floor]


def gpu_python(matrix: Matrix, python: str) -> bool:
    """Can an nvidia/cuda image have this Python: from an Ubuntu archive, or as uv's standalone build."""
    return any(python in apt for apt in matrix.distros.ubuntu_apt.values()) or \
        version_key(python) >= version_key(matrix.distros.standalone_min_python)


def _glibc(data: dict, key: str, where: str) -> str:
    return str(_text(_need(data, key, str, where) and data, key, where, _GLIBC))


def _install(data: dict, defaults: InstallSpec | None, where: str) -> InstallSpec:
    base = defaults or InstallSpec("", False, False, None, None, None)
    system_cuda = data.get("system_cuda", base.system_cuda)
    if system_cuda not in SYSTEM_CUDA:
        raise DataError(f"{where}: system_cuda must be one of {', '.join(SYSTEM_CUDA)}, got {show(system_cuda)}")
    packages = data.get("package_by_cuda")
    if packages is not None:
        if not isinstance(packages, dict) or not all(
            isinstance(k, str) and _CUDA_KEY.fullmatch(k) and isinstance(v, str) and _PACKAGE.fullmatch(v)
            for k, v in packages.items()
        ):
            raise DataError(f"{where}: package_by_cuda must map quoted CUDA versions to package names")
        package_by_cuda = tuple(packages.items())
    else:
        package_by_cuda = base.package_by_cuda
    return InstallSpec(
        package=data.get("package", base.package),
        pre=bool(data.get("pre", base.pre)),
        bundles_cuda=bool(data.get("bundles_cuda", base.bundles_cuda)),
        gpu_extra=data.get("gpu_extra", base.gpu_extra),
        gpu_index_url=data.get("gpu_index_url", base.gpu_index_url),
        cpu_index_url=data.get("cpu_index_url", base.cpu_index_url),
        extra_optional=bool(data.get("extra_optional", base.extra_optional)),
        system_cuda=system_cuda,
        package_by_cuda=package_by_cuda,
    )


def _archs(data: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if data is None:
        return ()
    if not isinstance(data, dict) or not all(isinstance(k, str) and _CUDA_KEY.fullmatch(k) for k in data):
        raise DataError(f"{where}: archs must map quoted CUDA versions to lists of sm_XY/compute_XY")
    return tuple((k, _strings(v, f"{where}: archs.{k}", ARCH)) for k, v in data.items())


def _verified(data: Any, where: str) -> tuple[tuple[str, str], ...]:
    if data is None:
        return ()
    if not isinstance(data, dict) or not all(isinstance(k, str) and _CUDA_KEY.fullmatch(k) and isinstance(v, str)
                                             for k, v in data.items()):
        raise DataError(f"{where}: verified must map quoted CUDA versions to what a GPU machine reported")
    return tuple(data.items())


_SERIES_KEYS = {"series", "releases", "cuda", "cudnn", "python", "default_cuda", "experimental_cuda", "archs",
                "per_release", "package", "pre", "bundles_cuda", "gpu_extra", "gpu_index_url", "cpu_index_url",
                "extra_optional", "system_cuda", "package_by_cuda", "verified", "companions", "advice", "gpu_build",
                "arm64_cuda", "arm64_archs"}
_RELEASE_KEYS = {"cuda", "cudnn", "python", "default_cuda", "archs", "arm64_cuda", "arm64_archs"}
_GPU_BUILD_KEYS = {"package", "release", "replaces", "python", "cuda", "cudnn", "default_cuda", "archs", "bundles_cuda",
                   "system_cuda", "gpu_index_url", "companions"}
# A release with a local label (NVIDIA's 1.15.5+nv23.3), which only a gpu_build names.
_LOCAL_RELEASE = lazy_pattern(_RELEASE.pattern + r"(?:\+[a-z0-9]+(?:\.[a-z0-9]+)*)?", re.ASCII)
# What `matrix refresh` writes: how a release installs (package, extras, indexes) stays the shipped data's.
_OVERLAY_KEYS = {"series", "releases", "python", "cuda", "default_cuda", "cudnn"}


def _advice(value: Any, where: str) -> str | None:
    if value is not None and not (isinstance(value, str) and value.isprintable() and len(value) <= 600):
        raise DataError(f"{where}: advice must be one printable line of text")
    return value


def _series(data: dict, series: str, defaults: InstallSpec, where: str, origin: str = SHIPPED) -> FrameworkSeries:
    unknown = sorted(set(data) - _SERIES_KEYS)
    if unknown:
        raise DataError(f"{where}: unknown keys {', '.join(map(show, unknown))}")
    releases = _strings(data.get("releases", []), where, _RELEASE)
    for r in releases:
        version_key(r)
    cuda = _strings(data.get("cuda", []), where, _MINOR)
    cudnn = data.get("cudnn")
    if cudnn is not None and not (isinstance(cudnn, str) and _CUDNN.fullmatch(cudnn)):
        raise DataError(f"{where}: cudnn must be a quoted version like \"9.1\", got {show(cudnn)}")
    out = FrameworkSeries(
        series=series,
        releases=releases,
        cuda=cuda,
        cudnn=cudnn,
        python=_strings(_need(data, "python", list, where), where, _PYTHON),
        install=_install(data, defaults, where),
        default_cuda=_text(data, "default_cuda", where, _MINOR),
        experimental_cuda=_strings(data.get("experimental_cuda", []), where, _MINOR),
        archs=_archs(data.get("archs"), where),
        origin=origin,
        verified=_verified(data.get("verified"), where),
        companions=_strings(data.get("companions", []), where, _COMPANION),
        advice=_advice(data.get("advice"), where),
        gpu_build=_gpu_build(data["gpu_build"], series, defaults, f"{where}: gpu_build", origin)
        if "gpu_build" in data else None,
        arm64_cuda=_strings(data.get("arm64_cuda", []), where, _MINOR),
        arm64_archs=_archs(data["arm64_archs"], f"{where}: arm64_archs") if data.get("arm64_archs") is not None else None,
    )
    for name in (out.default_cuda, *out.experimental_cuda, *out.arm64_cuda):
        if name and name not in cuda:
            raise DataError(f"{where}: CUDA {name} is not one of the series' cuda list")
    overrides = data.get("per_release") or {}
    if not isinstance(overrides, dict):
        raise DataError(f"{where}: per_release must map releases to fields")
    for release, fields in overrides.items():
        rw = f"{where}: per_release.{release}"
        if release not in releases or not isinstance(fields, dict) or set(fields) - _RELEASE_KEYS:
            raise DataError(f"{rw}: must name a release of the series and only {', '.join(sorted(_RELEASE_KEYS))}")
        merged = {"python": list(out.python), "cuda": list(out.cuda), "cudnn": out.cudnn,
                  "default_cuda": out.default_cuda, "experimental_cuda": list(out.experimental_cuda),
                  "archs": {k: list(v) for k, v in out.archs}, "verified": dict(out.verified),
                  "companions": list(out.companions), "advice": out.advice, "arm64_cuda": list(out.arm64_cuda),
                  "arm64_archs": {k: list(v) for k, v in out.arm64_archs} if out.arm64_archs is not None else None,
                  **fields}
        if merged["default_cuda"] not in merged["cuda"]:
            merged["default_cuda"] = None
        merged["experimental_cuda"] = [c for c in merged["experimental_cuda"] if c in merged["cuda"]]
        merged["arm64_cuda"] = [c for c in merged["arm64_cuda"] if c in merged["cuda"]]
        out.per_release[release] = replace(
            _series({**merged, "releases": [release]}, series, out.install, rw, origin), releases=releases)
    return out


def _gpu_build(data: Any, series: str, defaults: InstallSpec, where: str, origin: str) -> FrameworkSeries:
    if not isinstance(data, dict) or set(data) - _GPU_BUILD_KEYS or not {"package", "release", "python"} <= set(data):
        raise DataError(f"{where}: must be a mapping of package, release, python and optionally "
                        f"{', '.join(sorted(_GPU_BUILD_KEYS - {'package', 'release', 'python'}))}")
    release = _text(data, "release", where, _LOCAL_RELEASE)
    replaces = _strings(data.get("replaces", []), where, _PACKAGE)
    fields = {k: v for k, v in data.items() if k not in ("release", "replaces")}
    # Only the index of the GPU build: its CPU index (none) never applies.
    build = _series({**fields, "releases": [], "cpu_index_url": None}, series, defaults, where, origin)
    return replace(build, releases=(str(release),), replaces=replaces)


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
        wheel_package=data.get("wheel_package", defaults.package),
        tpu=_tpu_spec(data["tpu"], f"{where}: tpu") if "tpu" in data else None,
        arm64_cpu_from=_text(data, "arm64_cpu_from", where, _RELEASE),
    )


def _cuda_releases(cuda_data: dict) -> tuple[CudaRelease, ...]:
    cuda = []
    for i, item in enumerate(_need(cuda_data, "releases", list, "cuda.yaml")):
        where = f"cuda.yaml: releases[{i}]"
        cudnn = _need(item, "cudnn", dict, where)
        version = cudnn.get("version")
        if version is not None and not isinstance(version, str):
            raise DataError(f"{where}: cudnn.version must be a quoted version or null")
        cuda.append(
            CudaRelease(
                cuda=_need(item, "cuda", str, where),
                cudnn_flavour=_need(cudnn, "flavour", str, where),
                cudnn=version,
                ubuntu=_strings(item.get("ubuntu"), where),
                min_driver=item.get("min_driver"),
                cudnn_ubuntu=_strings(item.get("cudnn_ubuntu", []), where),
            )
        )
    cuda.sort(key=lambda r: version_key(r.cuda))
    return tuple(cuda)


def _deleted(cuda_data: dict) -> dict[str, str]:
    data = cuda_data.get("deleted") or {}
    if not isinstance(data, dict) or not all(isinstance(k, str) and _MINOR.fullmatch(k) and isinstance(v, str)
                                             for k, v in data.items()):
        raise DataError("cuda.yaml: 'deleted' must map quoted CUDA versions (\"10.2\") to the evidence")
    return dict(data)


def overlay_path(env: dict[str, str] | None = None) -> Path:
    """Where `matrix refresh` writes and resolution reads the overlay: user-side, never inside
    the installed package ($BUILDKIT_PY_MATRIX_OVERLAY, else $XDG_CONFIG_HOME/buildkit-py/, else
    ~/.config/buildkit-py/)."""
    env = dict(os.environ) if env is None else env
    if env.get(OVERLAY_ENV):
        return Path(env[OVERLAY_ENV])
    config = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(config) / "buildkit-py" / OVERLAY_NAME


def _merge_overlay(frameworks: dict[str, Framework], path: Path) -> Overlay:
    what = f"the matrix overlay {path} (written by `buildkit-py matrix refresh`; delete it or refresh it)"
    data = _load(path, what)
    entries = data.get("frameworks") or {}
    if not isinstance(entries, dict):
        raise DataError(f"{what}: 'frameworks' must map framework names to series")
    for name, items in entries.items():
        fw = frameworks.get(name)
        if fw is None or not isinstance(items, list):
            raise DataError(f"{what}: {show(name)} is not a framework of this buildkit-py")
        known = set(fw.releases())
        added = []
        for i, item in enumerate(items):
            where = f"{path}: frameworks.{name}[{i}]"
            if not isinstance(item, dict) or set(item) - _OVERLAY_KEYS:
                raise DataError(f"{where}: must be a mapping of {', '.join(sorted(_OVERLAY_KEYS))}")
            label = _text(item, "series", where, _MINOR) or ""
            defaults = fw.series[-1].install if fw.series else _install({}, None, where)
            series = _series(item, label, defaults, where, origin=str(path))
            fresh = tuple(r for r in series.releases if r not in known)  # shipped data wins
            if fresh:
                added.append(replace(series, releases=fresh))
        merged = sorted(fw.series + tuple(added), key=lambda s: (version_key(s.series), s.origin != SHIPPED))
        frameworks[name] = replace(fw, series=tuple(merged))
    return Overlay(path, str(data.get("generated", "?")), str(data.get("index", "?")))


def load_matrix(directory: Path | None = None, overlay: Path | None = None) -> Matrix:
    """The shipped data plus the user's overlay (overlay_path(), when it exists)."""
    path = overlay or overlay_path()
    consult(path)
    try:
        stamp = path.stat().st_mtime_ns if path.is_file() else None
    except OSError:
        stamp = None
    return _load_matrix(directory, path if stamp is not None else None, stamp)


@lru_cache(maxsize=8)
def _load_matrix(directory: Path | None, overlay: Path | None, stamp: int | None) -> Matrix:
    root = directory or resource_dir("base_images")
    cuda_data = _load(root / "cuda.yaml")
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
    loaded = _merge_overlay(frameworks, overlay) if overlay else None
    distros = _load(root / "distros.yaml")
    ubuntu = _need(distros, "ubuntu", dict, "distros.yaml")
    cpu = _need(distros, "cpu", dict, "distros.yaml")
    tools = _load(root / "tools.yaml")
    return Matrix(
        cuda_repository=_need(cuda_data, "repository", str, "cuda.yaml"),
        cuda=_cuda_releases(cuda_data),
        frameworks=frameworks,
        aliases=aliases,
        distros=Distros(
            ubuntu_system={k: _need(v, "system", str, f"distros.yaml: ubuntu.{k}") for k, v in ubuntu.items()},
            ubuntu_apt={k: _strings(v.get("apt"), f"distros.yaml: ubuntu.{k}") for k, v in ubuntu.items()},
            cpu_image=_need(cpu, "image", str, "distros.yaml: cpu"),
            cpu_python=_strings(cpu.get("python"), "distros.yaml: cpu"),
            default_python=_need(distros, "default_python", str, "distros.yaml"),
            min_python=str(_text(distros, "min_python", "distros.yaml", _PYTHON)),
            standalone_min_python=str(_text(distros, "standalone_min_python", "distros.yaml", _PYTHON)),
            ubuntu_glibc={k: _glibc(v, "glibc", f"distros.yaml: ubuntu.{k}") for k, v in ubuntu.items()},
            cpu_glibc=_glibc(cpu, "glibc", "distros.yaml: cpu"),
            custom_glibc=_glibc(distros, "custom_glibc", "distros.yaml"),
        ),
        tools=Tools(
            uv_requirement=_need(tools, "uv_requirement", str, "tools.yaml"),
            hypertune_requirement=_need(tools, "hypertune_requirement", str, "tools.yaml"),
        ),
        compat_driver=dict(compat_driver),
        forward_compat_branches=tuple(branches),
        accelerators=_accelerators(root),
        overlay=loaded,
        tpus=_tpus(root),
        deleted_cuda=_deleted(cuda_data),
        driver_env=tuple((str(k), str(v)) for k, v in _need(cuda_data, "driver_env", dict, "cuda.yaml").items()),
        cuda_platforms=_strings(_need(cuda_data, "platforms", list, "cuda.yaml"), "cuda.yaml: platforms", _PLATFORM),
        cuda_arm64_from=_text(cuda_data, "arm64_from", "cuda.yaml", _RELEASE),
    )
