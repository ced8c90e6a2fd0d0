"""Config + base_images data -> a resolved, frozen Plan. Pure: no I/O besides the data tables.

The Plan is everything a Dockerfile, a label or a job spec needs to know; nothing downstream
decides versions.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from ..config import Config, ImportScope, TrainerPackage
from ..errors import ConfigError, ResolutionError, show
from ..fsutil import read_text
from ..indexes import (
    first_credentials_line,
    google_index_hosts,
    index_options,
    index_urls,
    option_urls,
    url_credentials,
    uv_config,
    without_credentials,
)
from ..launcher.constants import (
    COMPAT_DRIVER_ENV,
    CUDA_ARCHS_ENV,
    FORWARD_COMPAT_ENV,
    MIN_DRIVER_ENV,
    TPU_RUNTIME_ENV,
    TPU_TYPE_ENV,
)
from ..launcher.gpu import arch_supports
from ..matrix import (
    AMD64,
    ARM64,
    SHIPPED,
    UNRECORDED,
    Accelerator,
    CudaRelease,
    Framework,
    FrameworkSeries,
    Matrix,
    Tpu,
    arch,
    gpu_python,
    load_machines,
    load_matrix,
    minor,
    usable_python,
    version_key,
)
from ..notebook import HtmlRepr
from ..patterns import lazy_pattern
from ..refs import parse_ref
from ..resources import LAUNCHER_MODULE
from ..version import __version__
from .names import LABEL_PREFIX

if TYPE_CHECKING:
    from ..lockfiles import Exported

VENV = "/opt/venv"
WORKDIR = "/app"


@dataclass(frozen=True)
class PythonSetup:
    version: str  # "3.11"
    # present: the base ships it; apt: the distro's pythonX.Y packages; uv: a standalone build;
    # auto: decided while building (custom bases): present, else apt, else uv.
    install: str
    apt_packages: tuple[str, ...] = ()
    uv_requirement: str | None = None  # "uv==0.13.0", installed with pip from the package index
    mirror: str | None = None  # python_mirror: uv's UV_PYTHON_INSTALL_MIRROR for the standalone build


@dataclass(frozen=True)
class FrameworkInstall:
    name: str  # canonical name, "torch"
    version: str  # "2.5.1" or "nightly"
    requirement: str  # what pip installs: "torch==2.5.1", "tensorflow[and-cuda]==2.17.1"
    index_url: str | None  # replaces PyPI for this one install (PyTorch's CUDA indexes)
    pre: bool
    bundles_cuda: bool  # this install brings CUDA and cuDNN as nvidia-* wheels
    cudnn: str | None  # the cuDNN the framework build expects
    source: str = SHIPPED  # where the release is known from: shipped data, or the overlay file
    # Distributions this build stands for (nvidia-tensorflow for tensorflow-gpu): every install and resolution of
    # the image overrides their requirements away.
    replaces: tuple[str, ...] = ()
    # Nobody pinned the release: the range the resolution may choose an older one in, newest first (the config's
    # `framework` range, "" for any; None: pinned), down to `oldest`, the oldest release the data knows.
    chosen_within: str | None = None
    oldest: str | None = None

    def relaxed(self) -> str | None:
        """The requirement the resolution takes where the release is its to choose: this release or an older one."""
        exact = f"=={self.version}"
        if self.chosen_within is None or not self.requirement.endswith(exact):
            return None
        bounds = [f"<={self.version}", *([f">={self.oldest}"] if self.oldest else []),
                  *(b for b in self.chosen_within.split(",") if b)]
        return self.requirement[:-len(exact)] + ",".join(bounds)

    @property
    def overrides(self) -> tuple[str, ...]:
        """uv override lines that drop every requirement of the replaced distributions: a marker never true."""
        return tuple(f'{name} ; sys_platform == "never"' for name in self.replaces)


@dataclass(frozen=True)
class PlanLock:
    """What buildkit.lock pins for this image (pipeline/lock.py): set on a plan by the build, never by make_plan."""

    base_digest: str  # the base's manifest for the build platform: FROM base@sha256:...
    digest: str  # the lock section's digest: a label, and through the Dockerfile part of the content tag
    requirements: str  # the hash-checked requirements file's path in the build context
    source: Path  # that file on this machine


@dataclass(frozen=True)
class Plan(HtmlRepr):
    """The resolved build: base image, CUDA, cuDNN, Python, the framework wheel and its index, hypertune."""

    base_image: str
    base_kind: str  # "cuda" | "cpu" | "custom"
    template: str  # the variant template in templates/
    user_template: str | None
    gpu: bool
    cuda: str | None  # full CUDA version of the base, "12.4.1"
    cudnn: str | None  # the cuDNN the image uses: the base's, or the framework's wheel's
    min_driver: str | None  # the NVIDIA driver the base's CUDA needs, for the launcher's message
    compat_driver: str | None  # the oldest driver for any release of the base's CUDA major (cuda.yaml)
    forward_compat_branches: tuple[int, ...]  # driver branches the base's cuda-compat supports
    ubuntu: str | None
    python: PythonSetup
    framework: FrameworkInstall | None
    hypertune: str | None  # the requirement, or None when disabled
    system_packages: tuple[str, ...]
    pip: tuple[str, ...]
    requirements: str | None
    env: tuple[tuple[str, str], ...]
    entrypoint: tuple[str, ...]  # the launcher, then the trainer command
    cmd: tuple[str, ...]  # the trainer's default args
    # The nvidia/cuda flavour of the base: base, runtime, cudnn-runtime, devel or cudnn-devel.
    cuda_flavor: str | None = None
    accelerator: str | None = None  # the Vertex AI accelerator the image is resolved for
    # The platform the image is built for: the one given, else the one its accelerator's machines run when that is
    # not the default (linux/arm64 for GB200: A4X runs Arm CPUs); None: linux/amd64 for GPU images, else the engine's.
    platform: str | None = None
    # The base's glibc: the newest manylinux_X_Y its wheels may be built for (base_images/distros.yaml), which the
    # resolution and the lock target.
    glibc: str = "2.28"
    # A GPU image on a base that is not an nvidia/cuda one (base_kind "wheels"): the ENV that has NVIDIA's container
    # runtime mount the host's driver as those images do.
    driver_env: tuple[tuple[str, str], ...] = ()
    # The GPU architectures of the framework build (sm_XY cubins, compute_XY PTX); () not recorded.
    cuda_archs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what the user should know about this resolution
    executor: bool = False  # an executor image: no trainer code, the launcher installs packages at start
    keep_pip: bool = False  # pip stays in the venv (executors keep it anyway: their launcher pip-installs)
    venv: str = VENV
    workdir: str = WORKDIR
    tpu: str | None = None  # the TPU accelerator type the image is built for (base_kind "tpu")
    tpu_runtime: str | None = None  # absolute path of the libtpu.so the framework loads
    tpu_companion: str | None = None  # installed with the framework (also in pip): "torch_xla[tpu]==2.8.1"
    tpu_link: str | None = None  # the wheel's libtpu.so, linked to tpu_runtime (TensorFlow's /lib/libtpu.so)
    lock: PlanLock | None = None
    # The requirements file asks for hash checking: its install reinstalls what it names, since uv checks the hashes
    # only of what it installs, and the framework step installed some of them (with their dependencies) unchecked.
    requirements_hashed: bool = False
    # The requirements file is another tool's lock (uv.lock, pylock.toml, poetry.lock, Pipfile.lock): its packages
    # for this image, exported as hash-pinned lines (lockfiles.py), are what the requirements layer installs.
    requirements_export: Exported | None = None
    # The requirements file's index lines (--extra-index-url URL, -f URL, --no-index): a locked install's
    # requirements file starts with them, for it replaces the file that had them.
    requirements_index_options: tuple[str, ...] = ()
    # The trainer's own distribution, metadata only (config.TrainerPackage): installed before the code layer.
    trainer_package: TrainerPackage | None = None
    # Where the build's import check starts (the trainer's module or script); None: no check (no trainer code, or
    # import_check: false).
    import_check: ImportScope | None = None
    # The trainer's compiled extensions are built from its directory in a stage of their own and copied beside the code.
    build_extensions: bool = False
    package_dir: str | None = None  # the folder of the trainer's packages (src layout), on PYTHONPATH first
    said: tuple[str, ...] = ()  # what every build of this plan says (also in notes): system packages added, no check
    # The install step reads logins from the build's netrc secret (build.NETRC_SECRET), so they reach no Dockerfile
    # line, label or history: a pip entry's URL carried credentials (`pip` holds it without them), or an index gets
    # a Google access token (google_indexes).
    pip_credentials: bool = False
    # Hosts of the indexes that get a Google access token (Artifact Registry Python repositories, pip_google_auth):
    # minted where the build or lock runs and passed in the same netrc secret, never in the plan.
    google_indexes: tuple[str, ...] = ()

    @property
    def from_image(self) -> str:
        """What the Dockerfile's FROM names: the tag, pinned to the lock's digest when there is one."""
        # A base given by digest (an index's, maybe) gives way to the lock's: the build platform's manifest.
        return f"{self.base_image.split('@')[0]}@{self.lock.base_digest}" if self.lock else self.base_image

    @property
    def arm64(self) -> bool:
        """Built for linux/arm64 (an amd64 plan's label and Dockerfile stay as they were before arm64 plans)."""
        return arch(self.platform) == ARM64

    @property
    def pythonpath(self) -> str:
        """The code's place on the import path: the packages' folder first (a src layout), then the work directory."""
        return f"{self.workdir}/{self.package_dir}:{self.workdir}" if self.package_dir else self.workdir

    @property
    def launcher_env(self) -> tuple[tuple[str, str], ...]:
        """The image's ENV that the launcher checks the host's driver and GPUs against."""
        values = {MIN_DRIVER_ENV: self.min_driver, COMPAT_DRIVER_ENV: self.compat_driver,
                  FORWARD_COMPAT_ENV: ",".join(map(str, self.forward_compat_branches)),
                  CUDA_ARCHS_ENV: ",".join(self.cuda_archs), TPU_TYPE_ENV: self.tpu, TPU_RUNTIME_ENV: self.tpu_runtime}
        return tuple((k, v) for k, v in values.items() if v)

    @property
    def labels(self) -> tuple[tuple[str, str], ...]:
        fw = self.framework
        values = {
            "org.opencontainers.image.base.name": self.base_image,
            f"{LABEL_PREFIX}.version": __version__,
            f"{LABEL_PREFIX}.python": self.python.version,
            f"{LABEL_PREFIX}.framework": f"{fw.name}=={fw.version}" if fw else "none",
            f"{LABEL_PREFIX}.cuda": self.cuda or "none",
            f"{LABEL_PREFIX}.cudnn": self.cudnn or "none",
        }
        if self.gpu:  # the architectures the launcher checks the GPUs against (also BUILDKIT_PY_CUDA_ARCHS)
            values[f"{LABEL_PREFIX}.cuda-archs"] = ",".join(self.cuda_archs) or "not recorded"
        if self.tpu:  # the TPU type a job's spec is checked against
            values[f"{LABEL_PREFIX}.tpu"] = self.tpu
        if self.lock:
            values["org.opencontainers.image.base.digest"] = self.lock.base_digest
            values[f"{LABEL_PREFIX}.lock-digest"] = self.lock.digest
        values[f"{LABEL_PREFIX}.plan"] = json.dumps(self.summary(), sort_keys=True, separators=(",", ":"))
        return tuple(values.items())

    def summary(self) -> dict:
        """The resolved versions, as the image's plan label records them."""
        fw = self.framework
        return {
            "base_image": self.base_image,
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "python": self.python.version,
            "framework": fw.requirement if fw else None,
            "index_url": fw.index_url if fw else None,
            "gpu": self.gpu,
            "cuda_flavor": self.cuda_flavor,
            "cuda_archs": list(self.cuda_archs),
            "accelerator": self.accelerator,
        } | ({"platform": self.platform} if self.arm64 else {}) | (
            {"tpu": self.tpu, "tpu_runtime": self.tpu_runtime, "tpu_companion": self.tpu_companion} if self.tpu else {})

    def to_dict(self) -> dict:
        out = asdict(self)
        out["labels"] = dict(self.labels)
        out["env"] = dict(self.env)
        if self.lock:
            out["lock"]["source"] = str(self.lock.source)
        if self.requirements_export:
            out["requirements_export"]["source"] = str(self.requirements_export.source)
        return out


# ---------------------------------------------------------------------------------------------


def _nearest(wanted: str, known: list[str], count: int = 5) -> list[str]:
    def distance(candidate: str) -> tuple:
        a = (Version(candidate).release + (0, 0, 0))[:3]
        try:
            b = (Version(wanted).release + (0, 0, 0))[:3]
        except ValueError:
            return (0,)
        return tuple(abs(x - y) for x, y in zip(a, b, strict=True))

    return sorted(known, key=distance)[:count]


def _framework(matrix: Matrix, config: Config) -> tuple[Framework, FrameworkSeries, str] | None:
    request = config.framework
    if request.is_none:
        return None
    fw = matrix.framework(request.name)
    if fw is None:
        names = sorted(matrix.frameworks) + ["none"]
        close = difflib.get_close_matches(request.name, names + list(matrix.aliases), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ResolutionError(f"framework: unknown framework {request.name!r}; {hint}known: {', '.join(names)}")
    if request.version == "nightly":
        if fw.nightly is None:
            raise ResolutionError(f"framework: {fw.name} has no nightly build in base_images/frameworks/{fw.source}")
        return fw, fw.nightly, "nightly"
    pairs = [(s, r) for s in fw.series for r in s.releases]
    if request.version is None:
        return _chosen_release(fw, pairs, request, config.python)
    for series, release in pairs:
        if request.version == release:
            return fw, series.for_release(release), release
    in_series = [p for p in pairs if p[0].series == request.version]  # "torch==2.5" means the newest 2.5.x
    if in_series:
        series, release = max(in_series, key=lambda p: version_key(p[1]))
        return fw, series.for_release(release), release
    unrecorded = _unrecorded_release(matrix, fw, request.version)
    if unrecorded is not None:
        return fw, unrecorded, request.version
    nearest = ", ".join(_nearest(request.version, fw.releases()))
    raise ResolutionError(
        f"framework: {fw.name}=={request.version} is not a known release; nearest known: {nearest} "
        f"(all: buildkit-py versions {fw.name}; data: base_images/frameworks/{fw.source}; releases newer than "
        "the data: buildkit-py matrix refresh)"
    )


def _chosen_release(fw: Framework, pairs: list[tuple[FrameworkSeries, str]], request, python: str | None
                    ) -> tuple[Framework, FrameworkSeries, str]:
    """The newest known release inside the request's range, for the config's Python where one is set (the
    resolution may then move to an older one that resolves with the rest)."""
    from packaging.specifiers import SpecifierSet

    within = SpecifierSet(request.within)
    inside = [(s, r) for s, r in pairs if within.contains(r, prereleases=True)]
    if not inside:
        raise ResolutionError(f"framework: no known {fw.name} release inside {show(str(request))}; known: "
                              f"{', '.join(sorted(fw.releases(), key=version_key, reverse=True)[:12])} (buildkit-py "
                              f"versions {fw.name})")
    fitting = [(s, r) for s, r in inside if python is None or python in s.for_release(r).python]
    series, release = max(fitting or inside, key=lambda p: version_key(p[1]))
    return fw, series.for_release(release), release


def _unrecorded_release(matrix: Matrix, fw: Framework, version: str) -> FrameworkSeries | None:
    """A release the data does not list, of a framework whose wheels need no CUDA matching: the package index says
    whether it exists and has wheels for the image's Python (a CUDA framework's release must be in the data, which
    says which CUDA its wheels were built for)."""
    try:
        parsed = Version(version)
    except ValueError:
        return None
    if fw.gpu or not fw.series or parsed.local is not None:
        return None
    series_name = ".".join(str(n) for n in (parsed.release + (0,))[:2])
    # No CUDA to match: the install of the nearest recorded series, every Python a CPU image can have (the resolver,
    # taking only the framework's wheels, finds the one its wheels are for).
    wanted = parsed.release[:2]
    nearest = min(fw.series, key=lambda s: tuple(abs(a - b) for a, b in zip(version_key(s.releases[-1]).release[:2],
                                                                               wanted, strict=False)))
    return replace(nearest, series=series_name, releases=(version,), python=tuple(matrix.distros.cpu_python),
                   per_release={}, origin=UNRECORDED)


def accelerator_named(matrix: Matrix, name: str, field: str = "accelerator") -> Accelerator:
    """The GPU of that name (callers ask tpu_named first where a TPU is allowed)."""
    found = matrix.accelerators.get(name)
    if found is None:
        names = list(matrix.accelerators) + list(matrix.tpus)
        if name in matrix.tpus:
            raise ResolutionError(f"{field}: {name} is a TPU, and this needs a GPU: one of {', '.join(matrix.accelerators)}")
        starts = [n for n in names if n.startswith(name.upper())]
        close = list(dict.fromkeys(starts + difflib.get_close_matches(name, names, n=3, cutoff=0.4)))[:3]
        hint = f"nearest: {', '.join(close)}; " if close else ""
        raise ResolutionError(f"{field}: unknown accelerator {show(name)}; {hint}known: "
                              f"{', '.join(names)} (base_images/accelerators.yaml, base_images/tpus.yaml)")
    return found


def _platform(config: Config, accelerator: Accelerator | None) -> str | None:
    """The platform the image is built for: `platform` when given, else the one every machine with the accelerator
    runs when it is not the default (GB200: A4X, Arm CPUs). A platform those machines cannot run is refused here,
    before anything is built."""
    machines = load_machines()
    needed = machines.accelerator_platform(accelerator.name) if accelerator else None
    if config.platform is None:
        return needed if needed != AMD64 else None
    # One of a multi-platform image: the accelerator's platform need only be among them.
    several = bool(config.platforms)
    if needed and (needed not in {arch(p) for p in config.platforms} if several else arch(config.platform) != needed):
        cpus = f"({', '.join(machines.machines_with(accelerator.name))}) have {'Arm' if needed == ARM64 else 'x86'} " \
               "CPUs (base_images/machines.yaml)"
        if several:
            raise ConfigError(f"{','.join(config.platforms)} has no {needed} image, and {accelerator.name}'s machines "
                              f"{cpus}: add {needed} to the platforms", field=config.named("platform"))
        raise ConfigError(f"{config.platform} does not run on {accelerator.name}: its machines {cpus}; allowed: "
                          f"{needed}, or no platform (the accelerator's)", field=config.named("platform"))
    return config.platform


def _why_platform(config: Config, platform: str, accelerator: Accelerator | None) -> str:
    """Where the platform came from, for a refusal: the key (or flag) that set it, or the accelerator's machines."""
    if config.platform:
        return f"{config.named('platform')}: {platform}"
    return f"accelerator: {accelerator.name if accelerator else '?'} runs on {platform} machines (Arm CPUs)"


def _arm64_gpu_series(fw: Framework, series: FrameworkSeries, version: str, label: str, why: str) -> FrameworkSeries:
    """The series as it builds for linux/arm64: its Linux aarch64 CUDA wheels; a release without them is refused
    with the nearest release that has them (the oldest newer one, else the newest older one)."""
    view = series.for_platform(ARM64)
    if view.cuda:
        return view
    have = [(r, s.for_release(r).arm64_cuda) for s in fw.series for r in s.releases if s.for_release(r).arm64_cuda]
    newer = [p for p in have if version != "nightly" and version_key(p[0]) > version_key(version)]
    pick = min(newer, key=lambda p: version_key(p[0])) if newer else max(have, key=lambda p: version_key(p[0]),
                                                                          default=None)
    hint = (f"nearest release that has them: {fw.name}=={pick[0]} (CUDA {', '.join(pick[1])})" if pick else
            f"no {fw.name} release in the data has them: set base_image to an arm64 image with {fw.name} built for "
            "CUDA (NVIDIA's NGC containers), or build for CPU (gpu: false)")
    raise ResolutionError(f"{why}: {label} has no Linux aarch64 CUDA wheels; {hint} (base_images/frameworks/{fw.source})")


def _arm64_cpu(fw: Framework | None, version: str | None, label: str, why: str) -> tuple[str, ...]:
    """A CPU image for linux/arm64: a release older than the framework's first Linux aarch64 wheels is refused; a
    framework whose first one is not recorded gets a note."""
    if fw is None or version is None or version == "nightly":
        return ()
    first = fw.arm64_cpu_from
    if first is None:
        return (f"the Linux aarch64 wheels of {label} are not recorded (base_images/frameworks/{fw.source}): the "
                "build finds out",)
    if version_key(version) >= version_key(first):
        return ()
    later = sorted((r for r in fw.releases() if version_key(r) >= version_key(first)), key=version_key)
    hint = f"nearest release that has them: {fw.name}=={later[0]}" if later else f"{fw.name} {first} and later have them"
    raise ResolutionError(f"{why}: {label} has no Linux aarch64 wheels (the first: {first}); {hint} "
                          f"(base_images/frameworks/{fw.source})")


def tpu_named(matrix: Matrix, name: str, field: str = "accelerator") -> Tpu | None:
    """The TPU of that name; None for any other name. A TPU that Vertex AI custom training does not
    take is refused here."""
    tpu = matrix.tpus.get(name)
    if tpu is not None and tpu.why_not:
        offered = [t.name for t in matrix.tpus.values() if not t.why_not]
        raise ResolutionError(f"{field}: {name} is not offered for Vertex AI custom training ({tpu.why_not}); "
                              f"TPUs: {', '.join(offered)} (base_images/tpus.yaml)")
    return tpu


def _gpu_build_note(fw: Framework, series: FrameworkSeries, version: str, build: FrameworkSeries) -> str:
    index = f", from {build.install.gpu_index_url}" if build.install.gpu_index_url else ""
    last = (f"; {fw.name} {build.series} is the last {build.series.split('.')[0]}.x series, and code written for "
            f"{series.series} runs on it" if build.series != series.series else "")
    return (f"{fw.name}=={version} on a GPU: {build.install.package}=={build.releases[0]} (Python "
            f"{', '.join(build.python)}, CUDA {', '.join(build.cuda)}{index}) is installed instead, since "
            f"{fw.name} {series.series}'s own GPU wheels need CUDA {', '.join(series.cuda)} and Python "
            f"{', '.join(series.python)}, which no image can have{last}; requirements naming "
            f"{', '.join(build.replaces)} are left to it")


def _has_cudnn(release: CudaRelease, need: str) -> bool:
    """Does the tag's cuDNN serve a framework that loads the system cuDNN: same major, at least the
    minor it was built with."""
    return release.cudnn is not None and Version(release.cudnn).major == Version(need).major and \
        Version(release.cudnn) >= Version(need)


def _builds(matrix: Matrix, series: FrameworkSeries, gpu: bool) -> str | None:
    """How a release of this series builds: 'CUDA X' / 'CPU', or None when it cannot (no usable
    Python, no nvidia/cuda tag for its CUDA, or no tag with the cuDNN it loads)."""
    if gpu and series.gpu_build is not None:
        series = series.gpu_build
    python = usable_python(matrix, series)
    if not gpu:
        return "CPU" if set(python) & set(matrix.distros.cpu_python) else None
    if not any(gpu_python(matrix, p) for p in python):
        return None
    tagged = {r.minor: r for r in matrix.cuda}
    system_cudnn = series.cudnn if not series.install.bundles_cuda else None
    for cuda in reversed(series.cuda):
        release = tagged.get(cuda)
        if release is None or cuda in series.experimental_cuda:
            continue
        if system_cudnn and not _has_cudnn(release, system_cudnn):
            continue
        return f"CUDA {cuda}"
    return None


def _line_release(matrix: Matrix, fw: Framework, series: FrameworkSeries, version: str
                  ) -> tuple[FrameworkSeries, str] | None:
    """The newest release of the same major line whose wheels are for a Python an image can have (TensorFlow 1.15.5
    for 1.8), where this one's are not."""
    major = version_key(version).release[0]
    fitting = [(s, r) for s in fw.series for r in s.releases if version_key(r).release[0] == major and
               usable_python(matrix, s.for_release(r)) and not version_key(r).is_prerelease]
    if not fitting:
        return None
    moved_series, moved = max(fitting, key=lambda p: version_key(p[1]))
    return moved_series.for_release(moved), moved


def _instead(matrix: Matrix, fw: Framework, series: FrameworkSeries, version: str, gpu: bool) -> str:
    """What builds instead of this release: the nearest release that builds (the oldest newer one,
    else the newest older one), a CPU build where there is one, and the series' advice (data)."""
    ok = [(r, how) for s in fw.series for r in s.releases if (how := _builds(matrix, s.for_release(r), gpu))]
    newer = [p for p in ok if version_key(p[0]) > version_key(version)]
    pick = min(newer, key=lambda p: version_key(p[0])) if newer else max(ok, key=lambda p: version_key(p[0]), default=None)
    hints = [f"nearest release that builds: {fw.name}=={pick[0]} ({pick[1]})"] if pick else []
    if gpu and _builds(matrix, series, gpu=False):
        hints.append(f"gpu: false builds {fw.name}=={version} for CPU")
    if series.advice:
        hints.append(series.advice)
    return "; ".join(hints) + f" (buildkit-py versions {fw.name})"


def _python(matrix: Matrix, config: Config, label: str, series: FrameworkSeries | None) -> str:
    supported = usable_python(matrix, series) if series else matrix.distros.cpu_python
    if config.python:
        if config.python not in supported:
            raise ResolutionError(
                f"python: {config.python} is not supported by {label}; supported: {', '.join(supported)}"
            )
        return config.python
    return _default_python(matrix, supported)


def _default_python(matrix: Matrix, supported: list[str] | tuple[str, ...]) -> str:
    """The distros' default Python if supported, else the closest to it, newer first: jax >= 0.11
    (3.12+) gets 3.12, not the newest."""
    return closest_python(matrix.distros.default_python, supported)


def closest_python(wanted: str, supported: list[str] | tuple[str, ...]) -> str:
    """`wanted` if supported, else the closest to it, newer first: code written for 3.7 runs on 3.8
    more often than on an older Python."""
    newer = [p for p in supported if version_key(p) >= version_key(wanted)]
    return min(newer, key=version_key) if newer else max(supported, key=version_key)


def _or_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _fits(series: FrameworkSeries, cuda: str, accelerator: Accelerator) -> bool | None:
    """Does this CUDA variant's build have kernels for the accelerator? None: not recorded."""
    archs = series.archs_for(cuda)
    return None if archs is None else arch_supports(archs, accelerator.capability) is not None


def newest_fitting(fw: Framework, accelerator: Accelerator, tagged: set[str],
                   platform: str | None = None) -> tuple[str, str] | None:
    """The newest release of the framework with a CUDA variant (for the platform) that has kernels for the
    accelerator, and that variant: (release, cuda minor)."""
    for series in sorted(fw.series, key=lambda s: version_key(s.series), reverse=True):
        for release in sorted(series.releases, key=version_key, reverse=True):
            applied = series.for_release(release).for_platform(platform)
            fitting = [c for c in applied.cuda if c in tagged and _fits(applied, c, accelerator)]
            if fitting:
                stable = [c for c in fitting if c not in applied.experimental_cuda] or fitting
                return release, (applied.default_cuda if applied.default_cuda in stable else stable[-1])
    return None


def _no_kernels(fw: Framework, series: FrameworkSeries, version: str, accelerator: Accelerator,
                tagged: dict[str, CudaRelease], checked: list[str], platform: str | None = None) -> ResolutionError:
    who = f"{accelerator.name} ({accelerator.sm})"
    fitting = [c for c in series.cuda if c in tagged and _fits(series, c, accelerator)]
    builds = "; ".join(f"CUDA {c}: {', '.join(series.archs_for(c) or ('not recorded',))}" for c in checked)
    if fitting:
        return ResolutionError(f"cuda: {fw.name} {version}: use cuda {_or_list(fitting)} for {who}; its build for "
                               f"{builds} has no kernels for {accelerator.sm}")
    other = newest_fitting(fw, accelerator, set(tagged), platform)
    hint = (f"{fw.name} {other[0]} with cuda {other[1]} has them" if other
            else f"no {fw.name} release in the data has them")
    return ResolutionError(f"accelerator: {fw.name} {version} has no build with kernels for {who} (its builds: "
                           f"{builds}); {hint} (buildkit-py versions {fw.name} --accelerator {accelerator.name})")


def _tagged(matrix: Matrix, platform: str | None) -> dict[str, CudaRelease]:
    """The nvidia/cuda releases by CUDA minor that have an image for the platform (arm64: from cuda.yaml's
    arm64_from)."""
    first = matrix.cuda_arm64_from if arch(platform) == ARM64 else None
    return {r.minor: r for r in matrix.cuda if first is None or version_key(r.cuda) >= version_key(first)}


@dataclass(frozen=True)
class _GpuBase:
    release: CudaRelease
    flavor: str
    bundled: bool  # the framework's wheels bring the CUDA libraries
    archs: tuple[str, ...]
    notes: tuple[str, ...]


def _gpu_base(matrix: Matrix, config: Config, label: str, fw: Framework | None, series: FrameworkSeries | None,
              version: str | None, accelerator: Accelerator | None, platform: str | None) -> _GpuBase:
    """The nvidia/cuda release and flavour: the framework's stable default CUDA (or the one asked
    for) among those with a tag, a fitting cuDNN when the framework loads the system's, and kernels
    for the accelerator; the flavour that ships each CUDA library once."""
    asked = config.cuda_flavor or "auto"
    spec = series.install if series else None
    # TensorFlow's wheel without [and-cuda] loads the system CUDA: cudnn-runtime asks for that.
    bundled = bool(spec and spec.bundles_cuda and not (asked == "cudnn-runtime" and spec.extra_optional))
    system_libs = fw is not None and not bundled
    notes: list[str] = []
    if asked in ("base", "runtime") and system_libs:
        raise ResolutionError(f"cuda_flavor: {label} loads the system CUDA libraries and cuDNN, which a -{asked}- "
                              "image does not have; use cudnn-runtime or devel (or auto)")
    if asked == "auto":
        flavor = spec.system_cuda if bundled and spec else "cudnn-runtime"
    elif asked == "devel":
        flavor = "devel" if bundled else "cudnn-devel"
    else:
        flavor = asked
    if bundled and spec and flavor in ("runtime", "cudnn-runtime") and flavor != spec.system_cuda:
        what = "the CUDA libraries and cuDNN are" if flavor == "cudnn-runtime" else "the CUDA math libraries and NCCL are"
        notes.append(f"cuda_flavor {flavor}: {what} shipped twice, in the base image and in {label}'s nvidia-* wheels "
                     "(cuda_flavor auto avoids it)")

    tagged = _tagged(matrix, platform)
    wheels = list(series.cuda) if series else list(tagged)
    if series and not wheels:
        raise ResolutionError(f"gpu: {label} has no CUDA build; set gpu: false")
    gone = [c for c in wheels if c in matrix.deleted_cuda and c not in tagged]

    def deleted(cudas: list[str]) -> ResolutionError:
        instead = _instead(matrix, fw, series, version, gpu=True) if fw and series and version else ""
        return ResolutionError(
            f"cuda: {label} needs {matrix.cuda_repository} {', '.join(cudas)}, whose tags NVIDIA deleted from Docker Hub "
            f"({matrix.deleted_cuda[cudas[0]]}; base_images/cuda.yaml); {instead or 'choose another cuda'}; or set "
            "base_image to an image of your own with that CUDA")
    if config.cuda:
        wanted = minor(config.cuda)
        if wanted not in wheels:
            raise ResolutionError(
                f"cuda: {label} has CUDA wheels for {', '.join(wheels)}; cuda {config.cuda} is not among them"
            )
        if wanted in gone:
            raise deleted([wanted])
        release = tagged.get(wanted)
        if release is None or (config.cuda != wanted and release.cuda != config.cuda):
            known = ", ".join(r.cuda for r in matrix.cuda)
            raise ResolutionError(f"cuda: no {matrix.cuda_repository} tag for CUDA {config.cuda}; known: {known}")
        candidates = [release]
    else:
        candidates = [tagged[c] for c in wheels if c in tagged]
    fw_needs = series.cudnn if series and system_libs else None
    if fw_needs:
        candidates = [r for r in candidates if _has_cudnn(r, fw_needs)]
    if not candidates and gone and fw:
        raise deleted(gone)
    if not candidates:
        extra = f" with cuDNN {fw_needs}.x" if fw_needs else ""
        hint = (f"; cuda_flavor auto installs its [{spec.gpu_extra}] wheels instead"
                if spec and spec.extra_optional and spec.bundles_cuda else "")
        raise ResolutionError(
            f"cuda: no {matrix.cuda_repository} runtime tag{extra} matches {label} "
            f"(its wheels: CUDA {', '.join(wheels)}){hint}; set base_image to choose one yourself"
        )
    if accelerator and series and fw and version:
        fitting = [r for r in candidates if _fits(series, r.minor, accelerator) is not False]
        if not fitting:
            raise _no_kernels(fw, series, version, accelerator, tagged, [r.minor for r in candidates], platform)
        candidates = fitting
    if config.cuda:
        release = candidates[0]
    else:
        experimental = series.experimental_cuda if series else ()
        stable = [r for r in candidates if r.minor not in experimental] or candidates
        default = next((r for r in stable if series and r.minor == series.default_cuda), None)
        release = default or max(stable, key=lambda r: version_key(r.cuda))
    if series and release.minor in series.experimental_cuda:
        notes.append(f"CUDA {release.minor} is an experimental build of {label}")
    if series and not config.cuda and series.default_cuda in gone and release.minor != series.default_cuda:
        notes.append(f"{label}'s default build (CUDA {series.default_cuda}, the one PyPI serves) has no "
                     f"{matrix.cuda_repository} base any more (NVIDIA deleted its tags: base_images/cuda.yaml); "
                     f"its CUDA {release.minor} build is used")
    archs = series.archs_for(release.minor) if series and fw else None
    if fw and archs is None:
        notes.append(f"the GPU architectures of {label} with CUDA {release.minor} are not recorded: the launcher "
                     "cannot check them" + (f", and {accelerator.name} is not checked" if accelerator else ""))
    return _GpuBase(release, flavor, bundled, archs or (), tuple(notes))


def _ubuntu_for(matrix: Matrix, ubuntus: tuple[str, ...], python: str, mirror: str | None) -> tuple[str, PythonSetup]:
    """Newest Ubuntu of the tag whose own archive has the Python; else the newest, with uv."""
    with_apt = [u for u in ubuntus if python in matrix.distros.ubuntu_apt.get(u, ())]
    if with_apt:
        ubuntu = max(with_apt, key=version_key)
        return ubuntu, PythonSetup(python, "apt", apt_packages=(f"python{python}", f"python{python}-venv"))
    ubuntu = max(ubuntus, key=version_key)
    return ubuntu, PythonSetup(python, "uv", uv_requirement=matrix.tools.uv_requirement, mirror=mirror)


def _wheel_cudnn(series: FrameworkSeries, cuda: str | None) -> str | None:
    """The cuDNN of the framework's wheel for this CUDA: the data records the default wheel's."""
    if cuda and series.default_cuda and minor(cuda) != series.default_cuda:
        return None
    return series.cudnn


def _install(fw: Framework, series: FrameworkSeries, version: str, gpu: bool, cuda: str | None,
             bundled: bool, mirror: str | None, within: str | None) -> FrameworkInstall:
    spec = series.install
    fields = {}
    if cuda:
        fields = {"cuda_nodot": minor(cuda).replace(".", ""), "cuda_major": cuda.split(".")[0]}
    extra = spec.gpu_extra.format(**fields) if gpu and bundled and spec.gpu_extra else None
    requirement = spec.package_for(cuda if gpu else None) + (f"[{extra}]" if extra else "")
    if version != "nightly":
        requirement += f"=={version}"
    url = spec.gpu_index_url if gpu else spec.cpu_index_url
    return FrameworkInstall(
        name=fw.name,
        version=version,
        requirement=requirement,
        index_url=(mirror or url.format(**fields)) if url else None,  # a mirror stands only for an index the build has
        pre=spec.pre,
        bundles_cuda=gpu and bundled,
        cudnn=_wheel_cudnn(series, cuda),
        source=series.origin,
        replaces=series.replaces,
        chosen_within=within if series.gpu_build is None and not series.replaces else None,
        oldest=min(fw.releases(), key=version_key) if fw.releases() else None,
    )


def _unchecked(config: Config) -> tuple[str, ...]:
    if config.import_check or config.executor or config.trainer is None:
        return ()
    return ("import_check: false: the build does not import what the trainer imports, so an import the image cannot "
            "do fails where the job runs",)


def _import_scope(config: Config) -> ImportScope | None:
    trainer = config.trainer
    if not config.import_check or config.executor or trainer is None or not (trainer.module or trainer.script):
        return None
    return ImportScope(trainer.module, trainer.script, trainer.package_dir)


def _entry(config: Config) -> tuple[tuple[str, ...], tuple[str, ...]]:
    trainer = config.trainer
    launcher = ("python", "-m", LAUNCHER_MODULE, "--")
    if config.executor:  # the container's arguments are the module's (BUILDKIT_PY_PYTHON_MODULE)
        return launcher, ()
    if trainer is None:
        return (), ()
    if trainer.command:  # the repository's own command, kept as it wrote it (inference says what changed)
        return launcher + trainer.command, trainer.args
    if trainer.function:  # as the console script pip writes for module:function calls it
        return launcher + ("python", "-c", f"import sys; from {trainer.module} import {trainer.function}; "
                                           f"sys.exit({trainer.function}())"), trainer.args
    if trainer.module:
        return launcher + ("python", "-m", trainer.module), trainer.args
    return launcher + ("python", f"{WORKDIR}/{trainer.script}"), trainer.args


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


def _tpu_plan(matrix: Matrix, config: Config, tpu: Tpu) -> Plan:
    """A TPU image: the Python base of the CPU path with the framework's TPU build; no CUDA."""
    who = f"{tpu.name} (TPU {tpu.generation})"
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
        _, series, version = _framework(matrix, config)  # the known release (or the newest of a series)
    floor = tpu.min.get(fw.name)
    if floor and version_key(version) < version_key(floor):
        raise ResolutionError(f"framework: {fw.name} {version} does not run on {who}: Vertex AI documents {fw.name} >= "
                              f"{floor} for TPU {tpu.generation}; {listed}")
    build = fw.tpu.build(version, series.python)
    if build is None:
        raise ResolutionError(f"framework: {fw.name} {version} has no TPU build with libtpu from the package index "
                              f"(base_images/frameworks/{fw.source}); {listed}")
    supported = [p for p in build.python if p in matrix.distros.cpu_python and
                 ("python" not in tpu.min or version_key(p) >= version_key(tpu.min["python"]))]
    label = f"{fw.name}=={version} for {tpu.name}"
    if config.python:
        if config.python not in supported:
            floor_py = f", and {tpu.generation} needs Python >= {tpu.min['python']}" if "python" in tpu.min else ""
            raise ResolutionError(f"python: {config.python} is not supported by {label} (its TPU build has wheels for "
                                  f"{', '.join(build.python)}{floor_py}); use {', '.join(supported) or 'another release'}")
        python = config.python
    elif not supported:
        raise ResolutionError(f"python: {label} has no Python that TPU {tpu.generation} supports; {listed}")
    else:
        python = _default_python(matrix, supported)
    wheel_libtpu = f"{VENV}/lib/python{python}/site-packages/libtpu/libtpu.so"
    notes = [f"Vertex AI's TPU page does not name {fw.name} for TPU {tpu.generation}: not documented, not refused"] \
        if fw.name in tpu.undocumented else []
    return _assembled(
        config, matrix, python_version=python, fw=fw, version=version, ubuntu=None,
        base=matrix.distros.cpu_image.format(python=python), notes=notes,
        extra_pip=(build.companion,) if build.companion else (),  # PyTorch/XLA resolves with torch, in one step
        base_kind="tpu",
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
        platform=config.platform,
    )


def _assembled(config: Config, matrix: Matrix, *, python_version: str, fw: Framework | None, version: str | None,
               ubuntu: str | None, base: str, notes: list[str], extra_pip: tuple[str, ...], platform: str | None,
               said_first: tuple[str, ...] = (), **specific: object) -> Plan:
    """The one Plan constructor: what the trainer's files and the config's own keys give every plan (entry point,
    requirements, indexes, the system libraries its wheels load, what every build says), with what the TPU or the
    standard plan resolved for its base (`specific`)."""
    entrypoint, cmd = _entry(config)
    requirements = _requirements_file(config, python_version, platform)
    google_indexes = _google_indexes(config, requirements)
    libraries = _wheel_libraries(config, requirements, fw, version, ubuntu, base)
    said = said_first + libraries.notes + _unchecked(config)  # what every build of the plan says
    pip = _pip(config)
    return Plan(
        base_image=base,
        ubuntu=ubuntu,
        platform=platform,
        user_template=config.template,
        hypertune=_hypertune(config, matrix, requirements),
        system_packages=config.system_packages + libraries.packages,
        pip=extra_pip + pip,
        pip_credentials=pip != config.pip or bool(google_indexes),
        google_indexes=google_indexes,
        requirements=config.requirements,
        requirements_hashed=requirements.hashed,
        requirements_export=requirements.export,
        requirements_index_options=requirements.index_options,
        trainer_package=config.trainer_package,
        import_check=_import_scope(config),
        build_extensions=config.build_extensions and not config.executor,
        package_dir=config.trainer.package_dir if config.trainer else None,
        env=config.env,
        entrypoint=entrypoint,
        cmd=cmd,
        notes=tuple(notes) + said,
        said=said,
        executor=config.executor,
        keep_pip=config.keep_pip,
        glibc=(matrix.distros.custom_glibc if config.base_image else matrix.distros.ubuntu_glibc[ubuntu] if ubuntu
               else matrix.distros.cpu_glibc),
        **specific,
    )


def _hypertune(config: Config, matrix: Matrix, requirements: _Requirements) -> str | None:
    """cloudml-hypertune for the image, unless the trainer's requirements or pip entries name it: their release is the
    one the trainer was written for, and two pins of it would not resolve."""
    if not config.hypertune:
        return None
    from packaging.utils import canonicalize_name

    from ..requirements_file import requirement_name

    wanted = requirement_name(matrix.tools.hypertune_requirement)
    named = {canonicalize_name(n) for n in requirements.names} | {
        canonicalize_name(n) for p in config.pip if (n := requirement_name(p))}
    return None if wanted and canonicalize_name(wanted) in named else matrix.tools.hypertune_requirement


def _google_indexes(config: Config, requirements: _Requirements) -> tuple[str, ...]:
    """The hosts of the indexes the build reads that get a Google access token: Artifact Registry Python repositories
    named by pip_index_url, the pip_conf, the requirements file's index lines or a pip entry's URL; pip_google_auth's."""
    urls = list(option_urls(requirements.index_options)) + list(config.pip)
    if config.pip_index_url:
        urls.append(config.pip_index_url)
    elif config.pip_conf:
        urls += index_urls(uv_config(read_text(config.pip_conf, "pip.conf"), str(config.pip_conf)))
    return google_index_hosts(urls, config.pip_google_auth)


def _pip(config: Config) -> tuple[str, ...]:
    """The config's pip entries as a Dockerfile line may hold them: each URL's credentials cut out (checked here, so
    that a pair the build's netrc cannot hold exits 2 before anything is rendered)."""
    url_credentials(config.pip, "pip")
    return tuple(without_credentials(p) for p in config.pip)


@dataclass(frozen=True)
class _Requirements:
    """What the plan reads of the requirements file, once: whether it asks for hash checking, and the distributions
    it names (for the system libraries their wheels load)."""

    hashed: bool = False
    names: tuple[str, ...] = ()
    export: Exported | None = None
    index_options: tuple[str, ...] = ()  # its index lines (--extra-index-url URL, ...)


def _requirements_file(config: Config, python: str, platform: str | None) -> _Requirements:
    if not config.requirements:
        return _Requirements()
    from ..lockfiles import export, is_lock_file  # here: it reads requirements and markers (start-up time)
    from ..requirements_file import hash_checked, requirement_lines, requirement_name, requirement_names

    if is_lock_file(config.requirements):
        exported = export(config.root, config.requirements, python, platform or AMD64, config.requirements_extras,
                          config.requirements_groups)
        return _Requirements(True, tuple(n for r, _ in exported.pins if (n := requirement_name(r))), exported)

    text = read_text(config.root / config.requirements, "requirements file", root=config.root)
    where = first_credentials_line(text, config.requirements)
    if where:  # the file is copied into the image as it is: a password in it is in a layer anyone who pulls it reads
        raise ConfigError("a URL with credentials (not shown); the file is copied into the image, where "
                          "anyone who pulls it reads them: give the index as pip_index_url or pip_conf (the build "
                          "passes them as secrets), or the requirement in pip:", where=where)
    return _Requirements(hash_checked(text, config.requirements) is not None,
                         requirement_names(text, config.requirements),
                         index_options=index_options([line for line, _ in requirement_lines(text, config.requirements)]))


@dataclass(frozen=True)
class _Libraries:
    packages: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


_UBUNTU_TAG = lazy_pattern(r"ubuntu([0-9]{2}\.[0-9]{2})", re.ASCII)


def _wheel_libraries(config: Config, requirements: _Requirements, fw: Framework | None, version: str | None,
                     ubuntu: str | None, base: str) -> _Libraries:
    """The system packages that the wheels of the image's distributions load at import and the base lacks
    (base_images/system_libraries.yaml), for the system-packages layer, each with a note."""
    from ..requirements_file import requirement_name

    # A URL line names no distribution before it is downloaded: it brings no system package. Only the framework's
    # release is known here.
    names = [*((n, None) for n in requirements.names), *((requirement_name(t), None) for t in config.pip),
             *([(requirement_name(fw.package or fw.name), version)] if fw else [])]
    wanted = list(dict.fromkeys((n, v) for n, v in names if n))
    if not wanted:
        return _Libraries()
    from ..syslibs import system_libraries

    if ubuntu is None and config.base_image:  # a custom base names its release in its tag, if anywhere
        found = _UBUNTU_TAG.search(base)
        ubuntu = found.group(1) if found else None
    given = {p.split("=")[0] for p in config.system_packages}
    needed = {p: who for p, who in system_libraries().for_distributions(wanted, ubuntu).items() if p not in given}
    notes = tuple(f"{', '.join(who)} load{'s' if len(who) == 1 else ''} a system library the base may lack: {p} is "
                  "installed (base_images/system_libraries.yaml)" for p, who in needed.items())
    return _Libraries(tuple(needed), notes)


def make_plan(config: Config, matrix: Matrix | None = None) -> Plan:
    """One platform's plan; a multi-platform config has one per platform (make_plans)."""
    if config.multi_platform:
        raise ConfigError(f"{','.join(config.platforms)} is several platforms, and this command makes one image: give "
                          f"one platform (e.g. --platform {config.platforms[0]})",
                          field=config.named("platform"))
    matrix = matrix or load_matrix()
    tpu = tpu_named(matrix, config.accelerator) if config.accelerator else None
    if tpu is not None:
        return _tpu_plan(matrix, config, tpu)
    resolved = _framework(matrix, config)
    fw, series, version = resolved if resolved else (None, None, None)
    label = f"{fw.name}=={version}" if fw else "framework none"
    accelerator = accelerator_named(matrix, config.accelerator) if config.accelerator else None
    implied = config.cuda is not None or accelerator is not None
    gpu = config.gpu if config.gpu is not None else (fw.gpu if fw else implied)
    if accelerator and not gpu:
        why = f"{fw.name} has no GPU build" if fw and not fw.gpu and config.gpu is None else "gpu is false"
        raise ResolutionError(f"accelerator: {accelerator.name} was given, but {why}; drop the accelerator "
                              "(a CPU job) or build for the GPU")
    if gpu and fw and not fw.gpu:
        raise ResolutionError(f"gpu: {fw.name} has no GPU build; set gpu: false (or framework: none with cuda)")
    if not gpu and config.cuda:
        raise ResolutionError(f"cuda: {config.cuda} was given with gpu: false; drop one of them")
    if config.cuda_flavor not in (None, "auto") and (not gpu or config.base_image):
        why = "with base_image, the base is yours" if config.base_image else "the image has no GPU (gpu: false)"
        raise ResolutionError(f"cuda_flavor: {config.cuda_flavor} chooses the nvidia/cuda flavour, but {why}")
    substituted: list[str] = []
    build = fw.gpu_series(series) if gpu and fw and series and version != "nightly" else None
    if build is not None:
        substituted.append(_gpu_build_note(fw, series, version, build))
        series, version = build, build.releases[0]
        label = f"{label} on a GPU ({build.install.package}=={version})"
    platform = _platform(config, accelerator)
    platform_notes: tuple[str, ...] = ()
    if arch(platform) == ARM64:
        why = _why_platform(config, platform, accelerator)
        if gpu and fw and series:
            series = _arm64_gpu_series(fw, series, version, label, why)
            label = f"{label} for {ARM64}"
        elif not gpu:
            platform_notes = _arm64_cpu(fw, version, label, why)
    if gpu and not config.base_image and platform and arch(platform) not in matrix.cuda_platforms:
        raise ResolutionError(f"{_why_platform(config, platform, accelerator)}: {matrix.cuda_repository} images are "
                              f"built for {', '.join(matrix.cuda_platforms)} (base_images/cuda.yaml); use one of them, "
                              "or base_image for another")
    if fw and series and version != "nightly" and not usable_python(matrix, series) and not gpu:
        # The CPU image as the GPU one: the last release of the line with wheels for a Python an image can have
        # (TensorFlow 1.8 runs as the official 1.15 on Python 3.7, where the GPU image takes NVIDIA's 1.15).
        line = _line_release(matrix, fw, series, version)
        if line is not None:
            moved_series, moved = line
            substituted.append(f"{fw.name}=={version}: {fw.name}=={moved} (Python {', '.join(moved_series.python)}) is "
                               f"installed instead, since {fw.name} {series.series}'s wheels are for Python "
                               f"{', '.join(series.python)}, which no image can have; {fw.name} {moved_series.series} is "
                               f"the last {moved_series.series.split('.')[0]}.x series, and code written for "
                               f"{series.series} runs on it")
            series, version, label = moved_series, moved, f"{fw.name}=={moved}"
    if fw and series and version != "nightly" and not usable_python(matrix, series):
        raise ResolutionError(
            f"framework: {label} has wheels only for Python {', '.join(series.python)} on the package index, and "
            f"buildkit-py images need Python >= {matrix.distros.min_python} (the launcher); "
            + _instead(matrix, fw, series, version, gpu))
    python = _python(matrix, config, label, series)
    # A Python no nvidia/cuda image can have (3.7): the framework's wheels that bring CUDA go on the Python base, the
    # driver from the host (wheel_gpu); without such wheels, a GPU nobody asked for gives way to a CPU image.
    wheel_gpu = False
    cpu_notes: list[str] = []
    if gpu and not config.base_image and not gpu_python(matrix, python):
        why = (f"python: {python} on a GPU image: no Ubuntu of the nvidia/cuda images has it in its own archive, and "
               f"uv's standalone builds start at Python {matrix.distros.standalone_min_python} (base_images/distros.yaml)")
        asked = config.gpu is True or accelerator is not None or config.cuda is not None
        if fw and series and version != "nightly" and series.install.bundles_cuda and series.cuda and \
                python in matrix.distros.cpu_python:
            wheel_gpu = True
        elif not asked:
            gpu = False
            cpu_notes.append(f"{why}, and {label}'s wheels do not bring CUDA: no GPU image can have it, and no GPU was "
                             "asked for (gpu, accelerator, cuda), so the image is built for CPU; "
                             + (_instead(matrix, fw, series, version, True) if fw and series else
                                f"use Python {matrix.distros.standalone_min_python} or newer for a GPU image"))
        elif fw and series and version != "nightly" and not config.python:
            raise ResolutionError(f"{why}; {label} has wheels only for Python {', '.join(series.python)}, whose wheels "
                                  "do not bring CUDA; " + _instead(matrix, fw, series, version, gpu))
        else:
            raise ResolutionError(f"{why}; use Python {matrix.distros.standalone_min_python} or newer, gpu: false "
                                  f"({matrix.distros.cpu_image.format(python=python)}), or base_image with that "
                                  "Python")
    notes: list[str] = list(platform_notes) + cpu_notes
    if series and series.origin == UNRECORDED:
        notes.append(f"{label} is not in base_images/frameworks/{fw.source}: a release of the package index, which "
                     "needs no CUDA matching; only its wheels are taken, for the Python they are built for")
    elif series and series.origin != SHIPPED and matrix.overlay:
        notes.append(f"{label} is known from index metadata ({series.origin}, refreshed {matrix.overlay.generated} "
                     f"from {matrix.overlay.index}), not from buildkit-py's shipped data: only its default CUDA is "
                     "recorded, and not its GPU architectures")

    cuda = cudnn = ubuntu = min_driver = flavor = None
    archs: tuple[str, ...] = ()
    bundled = bool(series and series.install.bundles_cuda)
    if config.base_image:
        base, kind = config.base_image, "custom"
        cuda = _custom_base_cuda(config, label, series) if gpu else None
        if cuda and series and fw:
            archs = series.archs_for(cuda) or ()
            if accelerator and archs and arch_supports(archs, accelerator.capability) is None:
                raise _no_kernels(fw, series, version, accelerator, _tagged(matrix, platform), [minor(cuda)], platform)
        python_setup = PythonSetup(
            python, "auto", apt_packages=(f"python{python}", f"python{python}-venv"),
            uv_requirement=matrix.tools.uv_requirement, mirror=config.python_mirror,
        )
    elif wheel_gpu:
        # The Python base; CUDA and cuDNN are the framework wheel's, the driver the host's (NVIDIA's container runtime
        # mounts it where the nvidia/cuda images' ENV says, which the template sets: base_images/cuda.yaml).
        cuda = series.default_cuda or max(series.cuda, key=version_key)
        archs = series.archs_for(cuda) or ()
        if accelerator and archs and arch_supports(archs, accelerator.capability) is None:
            raise _no_kernels(fw, series, version, accelerator, _tagged(matrix, platform), [minor(cuda)], platform)
        known = next((r for r in matrix.cuda if minor(r.cuda) == minor(cuda)), None)
        min_driver = known.min_driver if known else None
        cudnn = series.cudnn
        bundled = True
        base = matrix.distros.cpu_image.format(python=python)
        python_setup = PythonSetup(python, "present")
        kind = "wheels"
        notes.append(f"{label} on a GPU with Python {python}: no nvidia/cuda image has that Python, and the framework's "
                     f"wheels bring CUDA {cuda} and cuDNN themselves, so the image is {base} with the host's driver "
                     "(templates/wheels.Dockerfile.j2)")
    elif gpu:
        choice = _gpu_base(matrix, config, label, fw, series, version, accelerator, platform)
        release, flavor, bundled, archs = choice.release, choice.flavor, choice.bundled, choice.archs
        notes += choice.notes
        cuda, min_driver = release.cuda, release.min_driver
        with_cudnn = flavor.startswith("cudnn-")
        # The cuDNN the image uses: the base's (cuDNN flavours) or the one the framework's wheels bring.
        cudnn = release.cudnn if with_cudnn else (_wheel_cudnn(series, cuda) if series and bundled else None)
        ubuntu, python_setup = _ubuntu_for(matrix, release.ubuntu_for(with_cudnn), python, config.python_mirror)
        tag_flavor = flavor.replace("cudnn-", f"{release.cudnn_flavour}-")
        base = f"{matrix.cuda_repository}:{cuda}-{tag_flavor}-ubuntu{ubuntu}"
        kind = "cuda"
    else:
        if python not in matrix.distros.cpu_python:
            raise ResolutionError(
                f"python: no CPU base image for Python {python}; supported: {', '.join(matrix.distros.cpu_python)}"
            )
        base = matrix.distros.cpu_image.format(python=python)
        python_setup = PythonSetup(python, "present")
        kind = "cpu"

    return _assembled(
        config, matrix, python_version=python, fw=fw, version=version, ubuntu=ubuntu, base=base, notes=notes,
        said_first=tuple(substituted),
        extra_pip=series.companions if series and fw else (),  # what the release needs beside it
        base_kind=kind,
        template=f"{kind}.Dockerfile.j2",
        driver_env=matrix.driver_env if kind == "wheels" else (),
        gpu=gpu,
        cuda=cuda,
        cudnn=cudnn,
        min_driver=min_driver,
        compat_driver=matrix.compat_driver.get(cuda.split(".")[0]) if cuda else None,
        forward_compat_branches=matrix.forward_compat_branches if cuda and kind == "cuda" else (),  # cuda-compat's
        python=python_setup,
        framework=_install(fw, series, version, gpu, cuda, bundled, config.framework_index_url,
                           config.framework.within if config.framework.chosen else None) if fw else None,
        cuda_flavor=flavor,
        accelerator=accelerator.name if accelerator else None,
        cuda_archs=archs,
        platform=platform,
    )


def check_accelerator(plan: Plan, accelerator: str, matrix: Matrix | None = None) -> tuple[str, ...]:
    """Can an image of this plan use the accelerator? For job specs, before submission: raises
    ResolutionError (exit 2) when it cannot; returns notes when it cannot be told (the build's
    architectures are not recorded). A TPU job needs an image resolved for that TPU."""
    matrix = matrix or load_matrix()
    fw = plan.framework
    name = f"{fw.name}=={fw.version}" if fw else "the image"
    tpu = tpu_named(matrix, accelerator)
    if tpu is not None or plan.tpu:
        if plan.tpu == accelerator:
            return ()
        built = f"is built for {plan.tpu}" if plan.tpu else f"has no TPU build ({'a GPU' if plan.gpu else 'a CPU'} image)"
        hint = f" (buildkit-py versions {fw.name} --accelerator {accelerator})" if fw else ""
        raise ResolutionError(f"accelerator: the job runs on {accelerator}, but {name} {built}: resolve the image for it "
                              f"(accelerator: {accelerator}){hint}")
    found = accelerator_named(matrix, accelerator)
    who = f"{found.name} ({found.sm})"
    if not plan.gpu:
        raise ResolutionError(f"accelerator: {who} was given, but {name} is built for CPU (gpu: false)")
    if not plan.cuda_archs:
        return (f"the GPU architectures of {name} are not recorded; {who} is not checked",)
    if arch_supports(plan.cuda_archs, found.capability) is None:
        hint = f" (buildkit-py versions {fw.name} --accelerator {found.name})" if fw else ""
        raise ResolutionError(f"accelerator: {name} with CUDA {plan.cuda} carries {', '.join(plan.cuda_archs)}: no "
                              f"kernels for {who}; resolve the image for it (accelerator: {found.name}){hint}")
    return ()


def _custom_base_cuda(config: Config, label: str, series: FrameworkSeries | None) -> str | None:
    """The CUDA a custom base carries: `cuda`, else an nvidia/cuda tag's version; it picks the
    framework's wheel, so it must be one the framework has wheels for."""
    ref = parse_ref(config.base_image, field="base_image")
    cuda = config.cuda
    if cuda is None and ref.path == "nvidia/cuda" and ref.tag:
        head = ref.tag.split("-", 1)[0]
        if head.replace(".", "").isdigit():
            cuda = head
    if series is None:
        return cuda
    if cuda is None:
        return series.default_cuda or (series.cuda[-1] if series.cuda else None)
    if minor(cuda) not in series.cuda:
        raise ResolutionError(
            f"cuda: {label} has CUDA wheels for {', '.join(series.cuda)}; the base's CUDA {cuda} is not among them"
        )
    return cuda


@dataclass(frozen=True)
class PlatformPlans(HtmlRepr):
    """A multi-platform image's plans, one per platform in the config's order (`resolve` of such a config)."""

    plans: tuple[Plan, ...]

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(p.platform or "" for p in self.plans)

    def to_dict(self) -> dict:
        return {"platforms": {p.platform: p.to_dict() for p in self.plans}}


def make_plans(config: Config, matrix: Matrix | None = None) -> tuple[Plan, ...]:
    """The plan of each platform of the config's image, in its order (one for a one-platform config): the platforms
    may differ (their framework wheels, their CUDA variants), each resolved as its one-platform config is."""
    matrix = matrix or load_matrix()
    return tuple(make_plan(c, matrix) for c in config.each_platform())
