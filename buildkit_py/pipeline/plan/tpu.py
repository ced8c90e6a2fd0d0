"""A TPU image: the Python base of the CPU path with the framework's TPU build; no CUDA."""

from __future__ import annotations

import re

from ...catalog.matrix import (
    Framework,
    Matrix,
)
from ...catalog.reading import version_key
from ...catalog.tpu import (
    Tpu,
    TpuBuild,
)
from ...config import Config
from ...errors import ResolutionError, show
from ...patterns import lazy_pattern
from .assemble import Chosen, assembled
from .choice import chosen_framework, default_python
from .model import VENV, BaseKind, FrameworkInstall, Plan, PythonSetup

# A GPU build named on a TPU: a CUDA wheel variant, a CUDA extra, or CUDA libraries from PyPI.
_CUDA_BUILD = lazy_pattern(r".*(?:\+cu[0-9]+|\[[^\]]*(?:cuda|and-cuda)[^\]]*\]).*|(?:jax-cuda|nvidia-).*", re.ASCII | re.IGNORECASE)


def tpu_releases(fw: Framework, tpu: Tpu) -> list[str]:
    """The releases of the framework with a TPU build that the service documents for the TPU, newest first."""
    if fw.tpu is None:
        return []
    floor = tpu.min.get(fw.name)
    found = [r for s in fw.series for r in s.releases
             if fw.tpu.build(r, s.python) is not None and (floor is None or version_key(r) >= version_key(floor))]
    return sorted(found, key=version_key, reverse=True)


def tpu_plan(matrix: Matrix, config: Config, tpu: Tpu) -> Plan:
    """A TPU image: the Python base of the CPU path with the framework's TPU build; no CUDA."""
    who = f"{tpu.name} (TPU {tpu.generation})"
    _refuse_gpu_keys(config, tpu, who)
    fit = [name for name, f in sorted(matrix.frameworks.items()) if f.tpu]
    request = config.framework
    fw = None if request.is_none else matrix.framework(request.name)
    if fw is None or fw.tpu is None:
        what = "none" if request.is_none else f"{request.name} has no TPU build and"
        raise ResolutionError(f"framework: {what} would leave {who} unused; on a TPU use {', '.join(fit)} "
                              f"(buildkit-py versions FRAMEWORK --accelerator {tpu.name}), or drop the accelerator for "
                              "a CPU image")
    works = tpu_releases(fw, tpu)
    listed = f"{fw.name} releases with a TPU build for {tpu.name}: {', '.join(works[:8]) or 'none'}" + \
        (", ..." if len(works) > 8 else "") + f" (buildkit-py versions {fw.name} --accelerator {tpu.name})"
    if request.version and "+" in request.version:
        raise ResolutionError(f"framework: {fw.name}=={request.version} is a {request.version.split('+', 1)[1]} build; "
                              f"{tpu.name} needs the TPU build: {listed}")
    if request.version == "nightly":
        raise ResolutionError(f"framework: no nightly TPU build is known; {listed}")
    if request.version is None:
        from packaging.specifiers import SpecifierSet

        inside = [r for r in works if SpecifierSet(request.within).contains(r, prereleases=True)]
        if not inside:
            within = f" inside {show(str(request))}" if request.within else ""
            raise ResolutionError(f"accelerator: no {fw.name} release{within} in the data runs on {who}; {listed}")
        version = inside[0]
        series = next(s for s in fw.series if version in s.releases)
    else:
        _, series, version = chosen_framework(matrix, config)  # the known release (or the newest of a series)
    floor = tpu.min.get(fw.name)
    if floor and version_key(version) < version_key(floor):
        raise ResolutionError(f"framework: {fw.name} {version} does not run on {who}: Vertex AI documents {fw.name} >= "
                              f"{floor} for TPU {tpu.generation}; {listed}")
    build = fw.tpu.build(version, series.python)
    if build is None:
        raise ResolutionError(f"framework: {fw.name} {version} has no TPU build with libtpu from the package index "
                              f"(base_images/frameworks/{fw.source}); {listed}")
    label = f"{fw.name}=={version} for {tpu.name}"
    python = _tpu_python(matrix, config, tpu, build, label, listed)
    wheel_libtpu = f"{VENV}/lib/python{python}/site-packages/libtpu/libtpu.so"
    notes = (f"Vertex AI's TPU page does not name {fw.name} for TPU {tpu.generation}: not documented, not refused",) \
        if fw.name in tpu.undocumented else ()
    chosen = Chosen(python, fw, version, None, matrix.distros.cpu_image.format(python=python), config.platform, notes,
                    (build.companion,) if build.companion else ())  # PyTorch/XLA resolves with torch, in one step
    return assembled(
        config, matrix, chosen,
        base_kind=BaseKind.TPU,
        template="tpu.Dockerfile.j2",
        gpu=False,
        cuda=None,
        cudnn=None,
        min_driver=None,
        compat_driver=None,
        forward_compat_branches=(),
        python=PythonSetup(python, "present"),
        framework=FrameworkInstall(fw.name, version, build.requirement, build.index_url, pre=False, bundles_cuda=False,
                                   cudnn=None, source=series.origin),
        accelerator=tpu.name,
        tpu=tpu.name,
        tpu_runtime="/lib/libtpu.so" if build.system_libtpu else wheel_libtpu,
        tpu_companion=build.companion,
        tpu_link=wheel_libtpu if build.system_libtpu else None,
    )


def _refuse_gpu_keys(config: Config, tpu: Tpu, who: str) -> None:
    """The keys that choose a CUDA build or a base of one's own: a TPU image has neither."""
    if config.gpu:
        raise ResolutionError(f"gpu: true builds for a GPU, but accelerator {who} is a TPU: drop gpu (a TPU image has "
                              "no CUDA)")
    for key, value in (("cuda", config.cuda), ("cuda_flavor", config.cuda_flavor if config.cuda_flavor != "auto" else None)):
        if value:
            raise ResolutionError(f"{key}: {value} chooses a CUDA build, but accelerator {who} is a TPU: drop {key}")
    if config.base_image:
        raise ResolutionError(f"base_image: a TPU image starts from the Python base with the framework's TPU build; "
                              f"drop base_image for {tpu.name}, or drop the accelerator to build on your base")
    for package in config.pip:
        if _CUDA_BUILD.fullmatch(package):
            raise ResolutionError(f"pip: {show(package)} is a CUDA build, and accelerator {who} is a TPU: drop it "
                                  "(the framework's TPU build is installed for you)")


def _tpu_python(matrix: Matrix, config: Config, tpu: Tpu, build: TpuBuild, label: str, listed: str) -> str:
    """The config's Python where the TPU build has wheels for it (and the TPU generation runs it), else the
    default among those."""
    supported = [p for p in build.python if p in matrix.distros.cpu_python and
                 ("python" not in tpu.min or version_key(p) >= version_key(tpu.min["python"]))]
    if config.python:
        if config.python not in supported:
            floor_py = f", and {tpu.generation} needs Python >= {tpu.min['python']}" if "python" in tpu.min else ""
            raise ResolutionError(f"python: {config.python} is not supported by {label} (its TPU build has wheels for "
                                  f"{', '.join(build.python)}{floor_py}); use {', '.join(supported) or 'another release'}")
        return config.python
    if not supported:
        raise ResolutionError(f"python: {label} has no Python that TPU {tpu.generation} supports; {listed}")
    return default_python(matrix, supported)
