"""Config + base_images data -> a resolved, frozen Plan. Pure: no I/O besides the data tables.

The Plan is everything a Dockerfile, a label or a job spec needs to know; nothing downstream decides versions. The
package's rooms: the Plan value (model), the framework release and Python (choice), the CUDA base (cuda), the TPU
image (tpu), and the one constructor every plan goes through (assemble)."""

from __future__ import annotations

from ...config import Config
from ...errors import ConfigError, ResolutionError
from ...launcher.gpu import arch_supports
from ...matrix import (
    ARM64,
    SHIPPED,
    UNRECORDED,
    Matrix,
    arch,
    gpu_python,
    load_matrix,
    minor,
    usable_python,
    version_key,
)
from .assemble import assembled, framework_install
from .choice import (
    accelerator_named,
    arm64_cpu_notes,
    arm64_gpu_series,
    chosen_framework,
    chosen_python,
    closest_python,
    gpu_build_note,
    instead_of,
    line_release,
    platform_of,
    tpu_named,
    why_platform,
)
from .cuda import check_accelerator, custom_base_cuda, gpu_base, no_kernels, tagged_releases, ubuntu_with_python, wheel_cudnn
from .model import VENV, WORKDIR, FrameworkInstall, Plan, PlanLock, PlatformPlans, PythonSetup
from .tpu import tpu_plan, tpu_releases

__all__ = ["VENV", "WORKDIR", "FrameworkInstall", "Plan", "PlanLock", "PlatformPlans", "PythonSetup", "accelerator_named",
           "check_accelerator", "closest_python", "make_plan", "make_plans", "tpu_named", "tpu_releases"]


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
    resolved = chosen_framework(matrix, config)
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
        substituted.append(gpu_build_note(fw, series, version, build))
        series, version = build, build.releases[0]
        label = f"{label} on a GPU ({build.install.package}=={version})"
    platform = platform_of(config, accelerator)
    platform_notes: tuple[str, ...] = ()
    if arch(platform) == ARM64:
        why = why_platform(config, platform, accelerator)
        if gpu and fw and series:
            series = arm64_gpu_series(fw, series, version, label, why)
            label = f"{label} for {ARM64}"
        elif not gpu:
            platform_notes = arm64_cpu_notes(fw, version, label, why)
    if gpu and not config.base_image and platform and arch(platform) not in matrix.cuda_platforms:
        raise ResolutionError(f"{why_platform(config, platform, accelerator)}: {matrix.cuda_repository} images are "
                              f"built for {', '.join(matrix.cuda_platforms)} (base_images/cuda.yaml); use one of them, "
                              "or base_image for another")
    if fw and series and version != "nightly" and not usable_python(matrix, series) and not gpu:
        # The CPU image as the GPU one: the last release of the line with wheels for a Python an image can have
        # (TensorFlow 1.8 runs as the official 1.15 on Python 3.7, where the GPU image takes NVIDIA's 1.15).
        line = line_release(matrix, fw, series, version)
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
            + instead_of(matrix, fw, series, version, gpu))
    python = chosen_python(matrix, config, label, series)
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
                             + (instead_of(matrix, fw, series, version, True) if fw and series else
                                f"use Python {matrix.distros.standalone_min_python} or newer for a GPU image"))
        elif fw and series and version != "nightly" and not config.python:
            raise ResolutionError(f"{why}; {label} has wheels only for Python {', '.join(series.python)}, whose wheels "
                                  "do not bring CUDA; " + instead_of(matrix, fw, series, version, gpu))
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
        cuda = custom_base_cuda(config, label, series) if gpu else None
        if cuda and series and fw:
            archs = series.archs_for(cuda) or ()
            if accelerator and archs and arch_supports(archs, accelerator.capability) is None:
                raise no_kernels(fw, series, version, accelerator, tagged_releases(matrix, platform), [minor(cuda)], platform)
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
            raise no_kernels(fw, series, version, accelerator, tagged_releases(matrix, platform), [minor(cuda)], platform)
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
        choice = gpu_base(matrix, config, label, fw, series, version, accelerator, platform)
        release, flavor, bundled, archs = choice.release, choice.flavor, choice.bundled, choice.archs
        notes += choice.notes
        cuda, min_driver = release.cuda, release.min_driver
        with_cudnn = flavor.startswith("cudnn-")
        # The cuDNN the image uses: the base's (cuDNN flavours) or the one the framework's wheels bring.
        cudnn = release.cudnn if with_cudnn else (wheel_cudnn(series, cuda) if series and bundled else None)
        ubuntu, python_setup = ubuntu_with_python(matrix, release.ubuntu_for(with_cudnn), python, config.python_mirror)
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

    return assembled(
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
        framework=framework_install(fw, series, version, gpu, cuda, bundled, config.framework_index_url,
                           config.framework.within if config.framework.chosen else None) if fw else None,
        cuda_flavor=flavor,
        accelerator=accelerator.name if accelerator else None,
        cuda_archs=archs,
        platform=platform,
    )


def make_plans(config: Config, matrix: Matrix | None = None) -> tuple[Plan, ...]:
    """The plan of each platform of the config's image, in its order (one for a one-platform config): the platforms
    may differ (their framework wheels, their CUDA variants), each resolved as its one-platform config is."""
    matrix = matrix or load_matrix()
    return tuple(make_plan(c, matrix) for c in config.each_platform())
