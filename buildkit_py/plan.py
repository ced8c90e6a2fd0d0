"""Config + base_images data -> a resolved, frozen Plan. Pure: no I/O besides the data tables.

The Plan is everything a Dockerfile, a label or a job spec needs to know; nothing downstream
decides versions.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass

from packaging.version import Version

from . import __version__
from .config import Config
from .errors import ResolutionError
from .launcher.constants import COMPAT_DRIVER_ENV, FORWARD_COMPAT_ENV, MIN_DRIVER_ENV
from .matrix import CudaRelease, Framework, FrameworkSeries, Matrix, load_matrix, minor, version_key
from .refs import parse_ref
from .resources import LAUNCHER_MODULE

VENV = "/opt/venv"
WORKDIR = "/app"
LABEL_PREFIX = "dev.buildkit-py"


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
    bundles_cuda: bool
    cudnn: str | None  # the cuDNN the framework build expects


@dataclass(frozen=True)
class Plan:
    base_image: str
    base_kind: str  # "cuda" | "cpu" | "custom"
    template: str  # the variant template in templates/
    user_template: str | None
    gpu: bool
    cuda: str | None  # full CUDA version of the base, "12.4.1"
    cudnn: str | None  # cuDNN version in the base image
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
    venv: str = VENV
    workdir: str = WORKDIR

    @property
    def launcher_env(self) -> tuple[tuple[str, str], ...]:
        """The image's ENV that the launcher checks the host's driver against."""
        values = {MIN_DRIVER_ENV: self.min_driver, COMPAT_DRIVER_ENV: self.compat_driver,
                  FORWARD_COMPAT_ENV: ",".join(map(str, self.forward_compat_branches))}
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
            f"{LABEL_PREFIX}.plan": json.dumps(self.summary(), sort_keys=True, separators=(",", ":")),
        }
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
        }

    def to_dict(self) -> dict:
        out = asdict(self)
        out["labels"] = dict(self.labels)
        out["env"] = dict(self.env)
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
    if request.version is None:
        return fw, fw.series[-1], fw.series[-1].releases[-1]
    for series in fw.series:
        if request.version in series.releases:
            return fw, series, request.version
        if request.version == series.series:  # "torch==2.5" means the newest 2.5.x
            return fw, series, series.releases[-1]
    nearest = ", ".join(_nearest(request.version, fw.releases()))
    raise ResolutionError(
        f"framework: {fw.name}=={request.version} is not a known release; nearest known: {nearest} "
        f"(all: buildkit-py versions {fw.name}; data: base_images/frameworks/{fw.source})"
    )


def _python(matrix: Matrix, config: Config, label: str, series: FrameworkSeries | None) -> str:
    supported = series.python if series else matrix.distros.cpu_python
    if config.python:
        if config.python not in supported:
            raise ResolutionError(
                f"python: {config.python} is not supported by {label}; supported: {', '.join(supported)}"
            )
        return config.python
    default = matrix.distros.default_python
    return default if default in supported else supported[-1]


def _cuda_release(matrix: Matrix, config: Config, label: str, series: FrameworkSeries | None) -> CudaRelease:
    tagged = {r.minor: r for r in matrix.cuda}
    wheels = list(series.cuda) if series else list(tagged)
    if series and not wheels:
        raise ResolutionError(f"gpu: {label} has no CUDA build; set gpu: false")
    if config.cuda:
        wanted = minor(config.cuda)
        if wanted not in wheels:
            raise ResolutionError(
                f"cuda: {label} has CUDA wheels for {', '.join(wheels)}; cuda {config.cuda} is not among them"
            )
        release = tagged.get(wanted)
        if release is None or (config.cuda != wanted and release.cuda != config.cuda):
            known = ", ".join(r.cuda for r in matrix.cuda)
            raise ResolutionError(
                f"cuda: no {matrix.cuda_repository} cuDNN runtime tag for CUDA {config.cuda}; known: {known}"
            )
        candidates = [release]
    else:
        candidates = [tagged[c] for c in wheels if c in tagged]
    fw_needs = series.cudnn if series and not series.install.bundles_cuda else None
    if fw_needs:
        # The framework loads the system cuDNN: same major, at least the minor it was built with.
        need = Version(fw_needs)
        candidates = [
            r for r in candidates
            if Version(r.cudnn).major == need.major and Version(r.cudnn) >= need
        ]
    if not candidates:
        extra = f" with cuDNN {fw_needs}.x" if fw_needs else ""
        raise ResolutionError(
            f"cuda: no {matrix.cuda_repository} runtime tag{extra} matches {label} "
            f"(its wheels: CUDA {', '.join(wheels)}); set base_image to choose one yourself"
        )
    return max(candidates, key=lambda r: version_key(r.cuda))


def _ubuntu_for(matrix: Matrix, release: CudaRelease, python: str, mirror: str | None) -> tuple[str, PythonSetup]:
    """Newest Ubuntu of the tag whose own archive has the Python; else the newest, with uv."""
    with_apt = [u for u in release.ubuntu if python in matrix.distros.ubuntu_apt.get(u, ())]
    if with_apt:
        ubuntu = max(with_apt, key=version_key)
        return ubuntu, PythonSetup(python, "apt", apt_packages=(f"python{python}", f"python{python}-venv"))
    ubuntu = max(release.ubuntu, key=version_key)
    return ubuntu, PythonSetup(python, "uv", uv_requirement=matrix.tools.uv_requirement, mirror=mirror)


def _install(fw: Framework, series: FrameworkSeries, version: str, gpu: bool, cuda: str | None) -> FrameworkInstall:
    spec = series.install
    fields = {}
    if cuda:
        fields = {"cuda_nodot": minor(cuda).replace(".", ""), "cuda_major": cuda.split(".")[0]}
    extra = spec.gpu_extra.format(**fields) if gpu and spec.gpu_extra else None
    requirement = spec.package + (f"[{extra}]" if extra else "")
    if version != "nightly":
        requirement += f"=={version}"
    url = spec.gpu_index_url if gpu else spec.cpu_index_url
    return FrameworkInstall(
        name=fw.name,
        version=version,
        requirement=requirement,
        index_url=url.format(**fields) if url else None,
        pre=spec.pre,
        bundles_cuda=spec.bundles_cuda,
        cudnn=series.cudnn,
    )


def _entry(config: Config) -> tuple[tuple[str, ...], tuple[str, ...]]:
    trainer = config.trainer
    if trainer is None:
        return (), ()
    launcher = ("python", "-m", LAUNCHER_MODULE, "--")
    if trainer.module:
        return launcher + ("python", "-m", trainer.module), trainer.args
    return launcher + ("python", f"{WORKDIR}/{trainer.script}"), trainer.args


def make_plan(config: Config, matrix: Matrix | None = None) -> Plan:
    matrix = matrix or load_matrix()
    resolved = _framework(matrix, config)
    fw, series, version = resolved if resolved else (None, None, None)
    label = f"{fw.name}=={version}" if fw else "framework none"
    gpu = config.gpu if config.gpu is not None else (fw.gpu if fw else config.cuda is not None)
    if gpu and fw and not fw.gpu:
        raise ResolutionError(f"gpu: {fw.name} has no GPU build; set gpu: false (or framework: none with cuda)")
    if not gpu and config.cuda:
        raise ResolutionError(f"cuda: {config.cuda} was given with gpu: false; drop one of them")
    python = _python(matrix, config, label, series)

    cuda = cudnn = ubuntu = min_driver = None
    if config.base_image:
        base, kind = config.base_image, "custom"
        cuda = _custom_base_cuda(config, label, series) if gpu else None
        python_setup = PythonSetup(
            python, "auto", apt_packages=(f"python{python}", f"python{python}-venv"),
            uv_requirement=matrix.tools.uv_requirement, mirror=config.python_mirror,
        )
    elif gpu:
        release = _cuda_release(matrix, config, label, series)
        cuda, cudnn, min_driver = release.cuda, release.cudnn, release.min_driver
        ubuntu, python_setup = _ubuntu_for(matrix, release, python, config.python_mirror)
        base = f"{matrix.cuda_repository}:{cuda}-{release.cudnn_flavour}-runtime-ubuntu{ubuntu}"
        kind = "cuda"
    else:
        if python not in matrix.distros.cpu_python:
            raise ResolutionError(
                f"python: no CPU base image for Python {python}; supported: {', '.join(matrix.distros.cpu_python)}"
            )
        base = matrix.distros.cpu_image.format(python=python)
        python_setup = PythonSetup(python, "present")
        kind = "cpu"

    entrypoint, cmd = _entry(config)
    return Plan(
        base_image=base,
        base_kind=kind,
        template=f"{kind}.Dockerfile.j2",
        user_template=config.template,
        gpu=gpu,
        cuda=cuda,
        cudnn=cudnn,
        min_driver=min_driver,
        compat_driver=matrix.compat_driver.get(cuda.split(".")[0]) if cuda else None,
        forward_compat_branches=matrix.forward_compat_branches if cuda else (),
        ubuntu=ubuntu,
        python=python_setup,
        framework=_install(fw, series, version, gpu, cuda) if fw else None,
        hypertune=matrix.tools.hypertune_requirement if config.hypertune else None,
        system_packages=config.system_packages,
        pip=config.pip,
        requirements=config.requirements,
        env=config.env,
        entrypoint=entrypoint,
        cmd=cmd,
    )


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
        return series.cuda[-1] if series.cuda else None
    if minor(cuda) not in series.cuda:
        raise ResolutionError(
            f"cuda: {label} has CUDA wheels for {', '.join(series.cuda)}; the base's CUDA {cuda} is not among them"
        )
    return cuda
