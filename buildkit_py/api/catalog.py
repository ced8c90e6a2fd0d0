"""What buildkit-py knows: framework releases and CUDA builds (versions), the version data checked against the
package index (matrix_check, matrix_refresh), Google's prebuilt training images (executors)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..catalog.matrix import SHIPPED, load_matrix
from ..catalog.reading import version_key
from ..config import default_ca_bundle
from ..errors import ConfigError, ResolutionError, show
from ..launcher.gpu import arch_supports
from ..pipeline.plan import accelerator_named, tpu_named, tpu_releases
from ..progress import HtmlRepr
from .project import Project, checked, load, typed

# Imported where used, for start-up time (see this package's docstring).
if TYPE_CHECKING:
    from ..catalog import index_client, index_metadata
    from ..catalog.executors import Executor


@dataclass(frozen=True)
class SeriesVersions:
    """One release series of a framework: its releases, CUDA builds and Pythons, and where they are known from."""

    series: str
    releases: tuple[str, ...]
    cuda: tuple[str, ...]
    python: tuple[str, ...]
    default_cuda: str | None = None
    source: str = SHIPPED  # or the overlay file (index metadata)
    verified: tuple[tuple[str, str], ...] = ()  # CUDA -> what a real GPU machine reported
    tpu: str | None = None  # listed for a TPU: what its TPU build installs, "jax[tpu]"
    # What a GPU image installs instead of the series' own wheels (gpu_build): "nvidia-tensorflow==1.15.5+nv23.3
    # (CUDA 12.1, Python 3.8)"
    gpu_build: str | None = None


@dataclass(frozen=True)
class Versions(HtmlRepr):
    """The releases buildkit-py knows, by framework (with an accelerator: only the builds with kernels for it)."""

    frameworks: tuple[tuple[str, tuple[SeriesVersions, ...]], ...]
    accelerator: str | None = None  # the listing keeps only the builds with kernels for it

    def to_dict(self) -> dict:
        return {name: {s.series + ("" if s.source == SHIPPED else " (index metadata)"): {
            "releases": list(s.releases), "cuda": list(s.cuda), "python": list(s.python),
            "default_cuda": s.default_cuda, "source": s.source, "verified": dict(s.verified)}
            | ({"tpu": s.tpu} if s.tpu else {}) | ({"gpu_build": s.gpu_build} if s.gpu_build else {}) for s in series}
            for name, series in self.frameworks}


def versions(framework: str | None = None, accelerator: str | None = None) -> Versions:
    """The known releases; with an accelerator, only the releases and CUDA variants whose build has
    kernels for it (as resolution would choose among them)."""
    framework = checked(framework, "str | None", "framework")
    accelerator = checked(accelerator, "str | None", "--accelerator")
    matrix = load_matrix()
    tpu = tpu_named(matrix, accelerator, "--accelerator") if accelerator is not None else None
    wanted = accelerator_named(matrix, accelerator, "--accelerator") if accelerator is not None and not tpu else None
    tagged = {r.minor for r in matrix.cuda}
    names = [framework] if framework is not None else sorted(matrix.frameworks)
    out = []
    for name in names:
        fw = matrix.framework(name)
        if fw is None:
            raise ResolutionError(f"framework: unknown framework {show(name)}; known: {', '.join(sorted(matrix.frameworks))}")
        listed = []
        for s in fw.series + ((fw.nightly,) if fw.nightly else ()):
            if tpu is not None:  # the releases with a TPU build the service documents for it, and their Pythons
                fits = set(tpu_releases(fw, tpu))
                builds = [fw.tpu.build(r, s.for_release(r).python) for r in s.releases if r in fits] if fw.tpu else []
                floor = tpu.min.get("python", "3")
                python = sorted({p for b in builds if b for p in b.python if version_key(p) >= version_key(floor)},
                                key=version_key)
                if builds and fw.tpu:
                    listed.append(SeriesVersions(s.series, tuple(r for r in s.releases if r in fits), (), tuple(python),
                                                 None, s.origin, (), fw.tpu.requirement + (
                                                     f" + {builds[0].companion.split('==')[0]}" if builds[0].companion
                                                     else "")))
                continue
            releases, cuda = list(s.releases), list(s.cuda)
            if wanted is not None:
                fits = {r: [c for c in s.for_release(r).cuda
                            if c in tagged and arch_supports(s.for_release(r).archs_for(c) or (), wanted.capability)]
                        for r in s.releases or ("nightly",)}
                releases = [r for r in s.releases if fits[r]]
                cuda = sorted({c for r in fits.values() for c in r}, key=version_key)
                if not cuda:
                    continue
            default = s.default_cuda if s.default_cuda in cuda else (cuda[-1] if cuda and wanted else s.default_cuda)
            build = fw.gpu_series(s)
            listed.append(SeriesVersions(s.series, tuple(releases), tuple(cuda), tuple(s.python), default, s.origin,
                                         s.verified, gpu_build=f"{build.install.package}=={build.releases[0]} (CUDA "
                                         f"{', '.join(build.cuda)}, Python {', '.join(build.python)})" if build else None))
        out.append((fw.name, tuple(listed)))
    return Versions(tuple(out), tpu.name if tpu else wanted.name if wanted else None)


@dataclass(frozen=True)
class MatrixOptions:
    """Which frameworks `matrix check|refresh` reads from the package index, and its timeout per request."""

    frameworks: tuple[str, ...] = ()  # default: all
    timeout: float | None = None  # seconds per request (None: index_client.TIMEOUT)


def _package_index(project: Project, options: MatrixOptions) -> index_client.Index:
    """The config's pip_index_url (or --pip-index-url), else $PIP_INDEX_URL, else PyPI; the CA
    bundle of the build (--ca-cert, PIP_CERT...) verifies it."""
    from ..catalog import index_client

    timeout = index_client.TIMEOUT if options.timeout is None else options.timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 300:
        raise ConfigError(f"{show(timeout)} is not allowed: seconds, more than 0 and at most 300", field="--timeout")
    config = load(project)
    url = config.pip_index_url or os.environ.get("PIP_INDEX_URL") or index_client.DEFAULT_INDEX
    return index_client.Index(url, timeout=float(timeout), ca_file=config.ca_cert or default_ca_bundle())


def matrix_check(project: Project, options: MatrixOptions) -> index_metadata.MatrixReport:
    """base_images/ against the index's metadata: missing releases, Pythons without wheels, default
    CUDA/cuDNN that the default wheel's pins contradict."""
    from ..catalog import index_metadata

    project, options = typed(project, options, MatrixOptions, "matrix_check")
    return index_metadata.run(load_matrix(), _package_index(project, options), options.frameworks)


def matrix_refresh(project: Project, options: MatrixOptions) -> index_metadata.MatrixReport:
    """matrix_check, and the releases missing from the data written to the user's overlay, which
    resolution then reads (flagged as known from index metadata)."""
    from ..catalog import index_metadata

    project, options = typed(project, options, MatrixOptions, "matrix_refresh")
    return index_metadata.run(load_matrix(), _package_index(project, options), options.frameworks, refresh=True)


def executors(framework: str | None = None, region: str | None = None) -> list[Executor]:
    """Google's prebuilt training images (base_images/executors.yaml), in the region's repository."""
    from ..catalog.executors import catalog_entries

    return catalog_entries(checked(framework, "str | None", "framework"), region=checked(region, "str | None", "--region"))
