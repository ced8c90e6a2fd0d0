"""Config + base_images data -> a resolved, frozen Plan. Pure: no I/O besides the data tables.

The Plan is everything a Dockerfile, a label or a job spec needs to know; nothing downstream decides versions. The
package's rooms: the Plan value (model), the framework release and Python (choice), the CUDA base (cuda), the TPU
image (tpu), and the one constructor every plan goes through (assemble)."""

from __future__ import annotations

from dataclasses import dataclass

from ...catalog.machines import Accelerator
from ...catalog.matrix import (
    SHIPPED,
    UNRECORDED,
    Framework,
    Matrix,
    gpu_python,
    load_matrix,
    minor,
)
from ...catalog.reading import version_key
from ...config import Config
from ...errors import ConfigError, ResolutionError
from ...launcher.gpu import arch_supports
from .assemble import Chosen, assembled, framework_install
from .choice import (
    Release,
    accelerator_named,
    chosen_framework,
    chosen_python,
    closest_python,
    instead_of,
    release_for,
    tpu_named,
)
from .cuda import check_accelerator, custom_base_cuda, gpu_base, no_kernels, tagged_releases, ubuntu_with_python, wheel_cudnn
from .model import VENV, WORKDIR, BaseKind, FrameworkInstall, Plan, PlanLock, PlatformPlans, PythonSetup
from .tpu import tpu_plan, tpu_releases

__all__ = ["VENV", "WORKDIR", "BaseKind", "FrameworkInstall", "Plan", "PlanLock", "PlatformPlans", "PythonSetup",
           "accelerator_named", "check_accelerator", "closest_python", "make_plan", "make_plans", "tpu_named",
           "tpu_releases"]


def make_plan(config: Config, matrix: Matrix | None = None) -> Plan:
    """One platform's plan; a multi-platform config has one per platform (make_plans)."""
    if config.multi_platform:
        raise ConfigError(f"{','.join(config.platforms)} is several platforms, and this command makes one image: give "
                          f"one platform (e.g. --platform {config.platforms[0]})",
                          field=config.named("platform"))
    matrix = matrix or load_matrix()
    tpu = tpu_named(matrix, config.accelerator) if config.accelerator else None
    if tpu is not None:
        return tpu_plan(matrix, config, tpu)
    accelerator = accelerator_named(matrix, config.accelerator) if config.accelerator else None
    resolved = chosen_framework(matrix, config)
    gpu = _gpu_asked(config, resolved[0] if resolved else None, accelerator)
    release = release_for(matrix, config, resolved, accelerator, gpu)
    python = chosen_python(matrix, config, release.label, release.series)
    runtime = _runtime(matrix, config, release, python, gpu, accelerator)
    base = _base(matrix, config, release, python, runtime, accelerator)
    fw, series, kind, cuda = release.fw, release.series, base.kind, base.cuda
    notes = release.notes + runtime.notes + _origin_notes(matrix, release) + base.notes
    chosen = Chosen(python, fw, release.version, base.ubuntu, base.image, release.platform, notes,
                    series.companions if series and fw else (), release.said)  # companions: what the release needs
    return assembled(
        config, matrix, chosen,
        base_kind=kind,
        template=f"{kind}.Dockerfile.j2",
        driver_env=matrix.driver_env if kind == BaseKind.WHEELS else (),
        gpu=runtime.gpu,
        cuda=cuda,
        cudnn=base.cudnn,
        min_driver=base.min_driver,
        compat_driver=matrix.compat_driver.get(cuda.split(".")[0]) if cuda else None,
        forward_compat_branches=matrix.forward_compat_branches if cuda and kind == BaseKind.CUDA else (),  # cuda-compat's
        python=base.python,
        framework=framework_install(config, release, runtime.gpu, cuda, base.bundled) if fw else None,
        cuda_flavor=base.flavor,
        accelerator=accelerator.name if accelerator else None,
        cuda_archs=base.archs,
    )


def _gpu_asked(config: Config, fw: Framework | None, accelerator: Accelerator | None) -> bool:
    """Whether the image is for a GPU: `gpu`, else the framework's default, else whether a CUDA or an accelerator is
    named; with the refusals of keys that contradict it."""
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
    return gpu


@dataclass(frozen=True)
class _Runtime:
    """Whether the image runs on a GPU, and how it gets CUDA: from an nvidia/cuda base, or (wheel_gpu) from the
    framework's wheels on the Python base, the driver from the host."""

    gpu: bool
    wheel_gpu: bool = False
    notes: tuple[str, ...] = ()


def _runtime(matrix: Matrix, config: Config, release: Release, python: str, gpu: bool,
             accelerator: Accelerator | None) -> _Runtime:
    """A Python no nvidia/cuda image can have (3.7): the framework's wheels that bring CUDA go on the Python base, the
    driver from the host; without such wheels, a GPU nobody asked for gives way to a CPU image."""
    if not gpu or config.base_image or gpu_python(matrix, python):
        return _Runtime(gpu)
    fw, series, version, label = release.fw, release.series, release.version, release.label
    why = (f"python: {python} on a GPU image: no Ubuntu of the nvidia/cuda images has it in its own archive, and "
           f"uv's standalone builds start at Python {matrix.distros.standalone_min_python} (base_images/distros.yaml)")
    asked = config.gpu is True or accelerator is not None or config.cuda is not None
    if release.known and series.install.bundles_cuda and series.cuda and python in matrix.distros.cpu_python:
        return _Runtime(True, wheel_gpu=True)
    if not asked:
        return _Runtime(False, notes=(
            f"{why}, and {label}'s wheels do not bring CUDA: no GPU image can have it, and no GPU was asked for (gpu, "
            "accelerator, cuda), so the image is built for CPU; " + (instead_of(matrix, fw, series, version, True)
                                                                    if fw and series else
                                                                    f"use Python {matrix.distros.standalone_min_python} "
                                                                    "or newer for a GPU image"),))
    if release.known and not config.python:
        raise ResolutionError(f"{why}; {label} has wheels only for Python {', '.join(series.python)}, whose wheels "
                              "do not bring CUDA; " + instead_of(matrix, fw, series, version, gpu))
    raise ResolutionError(f"{why}; use Python {matrix.distros.standalone_min_python} or newer, gpu: false "
                          f"({matrix.distros.cpu_image.format(python=python)}), or base_image with that Python")


def _origin_notes(matrix: Matrix, release: Release) -> tuple[str, ...]:
    """Where a release the shipped data does not hold is known from: the package index, or the overlay."""
    series, label = release.series, release.label
    if series and series.origin == UNRECORDED:
        return (f"{label} is not in base_images/frameworks/{release.fw.source}: a release of the package index, which "
                "needs no CUDA matching; only its wheels are taken, for the Python they are built for",)
    if series and series.origin != SHIPPED and matrix.overlay:
        return (f"{label} is known from index metadata ({series.origin}, refreshed {matrix.overlay.generated} "
                f"from {matrix.overlay.index}), not from buildkit-py's shipped data: only its default CUDA is "
                "recorded, and not its GPU architectures",)
    return ()


@dataclass(frozen=True)
class _Base:
    """The image's base and what it brings: its kind (names the template), CUDA and cuDNN, the Ubuntu release, how
    the Python gets there."""

    kind: BaseKind
    image: str
    python: PythonSetup
    bundled: bool  # the framework's wheels bring the CUDA libraries
    cuda: str | None = None
    cudnn: str | None = None
    ubuntu: str | None = None
    min_driver: str | None = None
    flavor: str | None = None
    archs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _base(matrix: Matrix, config: Config, release: Release, python: str, runtime: _Runtime,
          accelerator: Accelerator | None) -> _Base:
    fw, series, version, label, platform = release.fw, release.series, release.version, release.label, release.platform
    bundled = bool(series and series.install.bundles_cuda)
    if config.base_image:
        cuda = custom_base_cuda(config, label, series) if runtime.gpu else None
        archs: tuple[str, ...] = ()
        if cuda and series and fw:
            archs = series.archs_for(cuda) or ()
            if accelerator and archs and arch_supports(archs, accelerator.capability) is None:
                raise no_kernels(fw, series, version, accelerator, tagged_releases(matrix, platform), [minor(cuda)],
                                 platform)
        return _Base(BaseKind.CUSTOM, config.base_image, PythonSetup(
            python, "auto", apt_packages=(f"python{python}", f"python{python}-venv"),
            uv_requirement=matrix.tools.uv_requirement, mirror=config.python_mirror), bundled, cuda, archs=archs)
    if runtime.wheel_gpu:
        return _wheels_base(matrix, release, python, accelerator)
    if runtime.gpu:
        return _cuda_base(matrix, config, release, python, accelerator)
    if python not in matrix.distros.cpu_python:
        raise ResolutionError(
            f"python: no CPU base image for Python {python}; supported: {', '.join(matrix.distros.cpu_python)}")
    return _Base(BaseKind.CPU, matrix.distros.cpu_image.format(python=python), PythonSetup(python, "present"), bundled)


def _wheels_base(matrix: Matrix, release: Release, python: str, accelerator: Accelerator | None) -> _Base:
    """The Python base; CUDA and cuDNN are the framework wheel's, the driver the host's (NVIDIA's container runtime
    mounts it where the nvidia/cuda images' ENV says, which the template sets: base_images/cuda.yaml)."""
    fw, series, platform = release.fw, release.series, release.platform
    cuda = series.default_cuda or max(series.cuda, key=version_key)
    archs = series.archs_for(cuda) or ()
    if accelerator and archs and arch_supports(archs, accelerator.capability) is None:
        raise no_kernels(fw, series, release.version, accelerator, tagged_releases(matrix, platform), [minor(cuda)],
                         platform)
    known = next((r for r in matrix.cuda if minor(r.cuda) == minor(cuda)), None)
    base = matrix.distros.cpu_image.format(python=python)
    return _Base(BaseKind.WHEELS, base, PythonSetup(python, "present"), True, cuda, series.cudnn,
                 min_driver=known.min_driver if known else None, archs=archs,
                 notes=(f"{release.label} on a GPU with Python {python}: no nvidia/cuda image has that Python, and the "
                        f"framework's wheels bring CUDA {cuda} and cuDNN themselves, so the image is {base} with the "
                        "host's driver (templates/wheels.Dockerfile.j2)",))


def _cuda_base(matrix: Matrix, config: Config, release: Release, python: str, accelerator: Accelerator | None) -> _Base:
    choice = gpu_base(matrix, config, release, accelerator)
    release_, flavor, series = choice.release, choice.flavor, release.series
    with_cudnn = flavor.startswith("cudnn-")
    # The cuDNN the image uses: the base's (cuDNN flavours) or the one the framework's wheels bring.
    cudnn = release_.cudnn if with_cudnn else (wheel_cudnn(series, release_.cuda) if series and choice.bundled else None)
    ubuntu, python_setup = ubuntu_with_python(matrix, release_.ubuntu_for(with_cudnn), python, config.python_mirror)
    tag_flavor = flavor.replace("cudnn-", f"{release_.cudnn_flavour}-")
    return _Base(BaseKind.CUDA, f"{matrix.cuda_repository}:{release_.cuda}-{tag_flavor}-ubuntu{ubuntu}", python_setup,
                 choice.bundled, release_.cuda, cudnn, ubuntu, release_.min_driver, flavor, choice.archs, choice.notes)


def make_plans(config: Config, matrix: Matrix | None = None) -> tuple[Plan, ...]:
    """The plan of each platform of the config's image, in its order (one for a one-platform config): the platforms
    may differ (their framework wheels, their CUDA variants), each resolved as its one-platform config is."""
    matrix = matrix or load_matrix()
    return tuple(make_plan(c, matrix) for c in config.each_platform())
