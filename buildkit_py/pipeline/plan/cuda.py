"""The nvidia/cuda base of a GPU image: the CUDA release and flavour whose cuDNN and kernels fit the framework
and the accelerator; and the check of a built plan against a job's accelerator."""

from __future__ import annotations

from dataclasses import dataclass

from ...catalog.machines import (
    ARM64,
    Accelerator,
    arch,
)
from ...catalog.matrix import (
    CudaRelease,
    Framework,
    FrameworkSeries,
    Matrix,
    load_matrix,
    minor,
)
from ...catalog.reading import version_key
from ...config import Config
from ...errors import ResolutionError
from ...launcher.gpu import arch_supports
from ...oci.refs import parse_ref
from .choice import Release, accelerator_named, has_cudnn, instead_of, or_list, tpu_named
from .model import Plan, PythonSetup


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


def no_kernels(fw: Framework, series: FrameworkSeries, version: str, accelerator: Accelerator,
                tagged: dict[str, CudaRelease], checked: list[str], platform: str | None = None) -> ResolutionError:
    who = f"{accelerator.name} ({accelerator.sm})"
    fitting = [c for c in series.cuda if c in tagged and _fits(series, c, accelerator)]
    builds = "; ".join(f"CUDA {c}: {', '.join(series.archs_for(c) or ('not recorded',))}" for c in checked)
    if fitting:
        return ResolutionError(f"cuda: {fw.name} {version}: use cuda {or_list(fitting)} for {who}; its build for "
                               f"{builds} has no kernels for {accelerator.sm}")
    other = newest_fitting(fw, accelerator, set(tagged), platform)
    hint = (f"{fw.name} {other[0]} with cuda {other[1]} has them" if other
            else f"no {fw.name} release in the data has them")
    return ResolutionError(f"accelerator: {fw.name} {version} has no build with kernels for {who} (its builds: "
                           f"{builds}); {hint} (buildkit-py versions {fw.name} --accelerator {accelerator.name})")


def tagged_releases(matrix: Matrix, platform: str | None) -> dict[str, CudaRelease]:
    """The nvidia/cuda releases by CUDA minor that have an image for the platform (arm64: from cuda.yaml's
    arm64_from)."""
    first = matrix.cuda_arm64_from if arch(platform) == ARM64 else None
    return {r.minor: r for r in matrix.cuda if first is None or version_key(r.cuda) >= version_key(first)}


@dataclass(frozen=True)
class GpuBase:
    """The nvidia/cuda release and flavour of a GPU image, with what they bring."""

    release: CudaRelease
    flavor: str
    bundled: bool  # the framework's wheels bring the CUDA libraries
    archs: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class _Flavor:
    """The nvidia/cuda flavour, whether the framework's wheels bring the CUDA libraries, and notes."""

    flavor: str
    bundled: bool
    notes: tuple[str, ...] = ()


def gpu_base(matrix: Matrix, config: Config, release: Release, accelerator: Accelerator | None) -> GpuBase:
    """The nvidia/cuda release and flavour: the framework's stable default CUDA (or the one asked
    for) among those with a tag, a fitting cuDNN when the framework loads the system's, and kernels
    for the accelerator; the flavour that ships each CUDA library once."""
    fw, series, label = release.fw, release.series, release.label
    flavor = _flavor(config, release)
    tagged = tagged_releases(matrix, release.platform)
    wheels = list(series.cuda) if series else list(tagged)
    if series and not wheels:
        raise ResolutionError(f"gpu: {label} has no CUDA build; set gpu: false")
    tags = _Tags(tagged, wheels, [c for c in wheels if c in matrix.deleted_cuda and c not in tagged])
    candidates = _candidates(matrix, config, release, flavor, accelerator, tags)
    gone = tags.gone
    notes = list(flavor.notes)
    if config.cuda:
        chosen = candidates[0]
    else:
        experimental = series.experimental_cuda if series else ()
        stable = [r for r in candidates if r.minor not in experimental] or candidates
        default = next((r for r in stable if series and r.minor == series.default_cuda), None)
        chosen = default or max(stable, key=lambda r: version_key(r.cuda))
    if series and chosen.minor in series.experimental_cuda:
        notes.append(f"CUDA {chosen.minor} is an experimental build of {label}")
    if series and not config.cuda and series.default_cuda in gone and chosen.minor != series.default_cuda:
        notes.append(f"{label}'s default build (CUDA {series.default_cuda}, the one PyPI serves) has no "
                     f"{matrix.cuda_repository} base any more (NVIDIA deleted its tags: base_images/cuda.yaml); "
                     f"its CUDA {chosen.minor} build is used")
    archs = series.archs_for(chosen.minor) if series and fw else None
    if fw and archs is None:
        notes.append(f"the GPU architectures of {label} with CUDA {chosen.minor} are not recorded: the launcher "
                     "cannot check them" + (f", and {accelerator.name} is not checked" if accelerator else ""))
    return GpuBase(chosen, flavor.flavor, flavor.bundled, archs or (), tuple(notes))


def _flavor(config: Config, release: Release) -> _Flavor:
    """The flavour asked for (cuda_flavor), or the one that ships each CUDA library once: the framework's wheels
    bring them, or it loads the system's."""
    asked = config.cuda_flavor or "auto"
    spec = release.series.install if release.series else None
    # TensorFlow's wheel without [and-cuda] loads the system CUDA: cudnn-runtime asks for that.
    bundled = bool(spec and spec.bundles_cuda and not (asked == "cudnn-runtime" and spec.extra_optional))
    if asked in ("base", "runtime") and release.fw is not None and not bundled:
        raise ResolutionError(f"cuda_flavor: {release.label} loads the system CUDA libraries and cuDNN, which a "
                              f"-{asked}- image does not have; use cudnn-runtime or devel (or auto)")
    if asked == "auto":
        flavor = spec.system_cuda if bundled and spec else "cudnn-runtime"
    elif asked == "devel":
        flavor = "devel" if bundled else "cudnn-devel"
    else:
        flavor = asked
    if bundled and spec and flavor in ("runtime", "cudnn-runtime") and flavor != spec.system_cuda:
        what = "the CUDA libraries and cuDNN are" if flavor == "cudnn-runtime" else "the CUDA math libraries and NCCL are"
        return _Flavor(flavor, bundled, (f"cuda_flavor {flavor}: {what} shipped twice, in the base image and in "
                                         f"{release.label}'s nvidia-* wheels (cuda_flavor auto avoids it)",))
    return _Flavor(flavor, bundled)


@dataclass(frozen=True)
class _Tags:
    """The CUDA releases tagged for the platform, the CUDA minors with framework wheels, and those NVIDIA deleted."""

    tagged: dict[str, CudaRelease]  # the releases with an nvidia/cuda tag for the platform, by CUDA minor
    wheels: list[str]  # the CUDA minors the framework has wheels for (every tagged one without a framework)
    gone: list[str]  # those whose tags NVIDIA deleted


def _candidates(matrix: Matrix, config: Config, release: Release, flavor: _Flavor, accelerator: Accelerator | None,
                tags: _Tags) -> list[CudaRelease]:
    """The tagged releases the image may start from: the CUDA asked for, else every one the framework has wheels
    for; with the cuDNN a framework that loads the system's needs, and kernels for the accelerator."""
    fw, series, version, label = release.fw, release.series, release.version, release.label
    tagged, wheels, gone = tags.tagged, tags.wheels, tags.gone

    def deleted(cudas: list[str]) -> ResolutionError:
        instead = instead_of(matrix, fw, series, version, gpu=True) if fw and series and version else ""
        return ResolutionError(
            f"cuda: {label} needs {matrix.cuda_repository} {', '.join(cudas)}, whose tags NVIDIA deleted from Docker Hub "
            f"({matrix.deleted_cuda[cudas[0]]}; base_images/cuda.yaml); {instead or 'choose another cuda'}; or set "
            "base_image to an image of your own with that CUDA")
    if config.cuda:
        wanted = minor(config.cuda)
        if wanted not in wheels:
            raise ResolutionError(
                f"cuda: {label} has CUDA wheels for {', '.join(wheels)}; cuda {config.cuda} is not among them")
        if wanted in gone:
            raise deleted([wanted])
        found = tagged.get(wanted)
        if found is None or (config.cuda != wanted and found.cuda != config.cuda):
            known = ", ".join(r.cuda for r in matrix.cuda)
            raise ResolutionError(f"cuda: no {matrix.cuda_repository} tag for CUDA {config.cuda}; known: {known}")
        candidates = [found]
    else:
        candidates = [tagged[c] for c in wheels if c in tagged]
    fw_needs = series.cudnn if series and fw is not None and not flavor.bundled else None
    if fw_needs:
        candidates = [r for r in candidates if has_cudnn(r, fw_needs)]
    if not candidates and gone and fw:
        raise deleted(gone)
    if not candidates:
        spec = series.install if series else None
        extra = f" with cuDNN {fw_needs}.x" if fw_needs else ""
        hint = (f"; cuda_flavor auto installs its [{spec.gpu_extra}] wheels instead"
                if spec and spec.extra_optional and spec.bundles_cuda else "")
        raise ResolutionError(
            f"cuda: no {matrix.cuda_repository} runtime tag{extra} matches {label} "
            f"(its wheels: CUDA {', '.join(wheels)}){hint}; set base_image to choose one yourself")
    if accelerator and series and fw and version:
        fitting = [r for r in candidates if _fits(series, r.minor, accelerator) is not False]
        if not fitting:
            raise no_kernels(fw, series, version, accelerator, tagged, [r.minor for r in candidates], release.platform)
        candidates = fitting
    return candidates


def ubuntu_with_python(matrix: Matrix, ubuntus: tuple[str, ...], python: str, mirror: str | None) -> tuple[str, PythonSetup]:
    """Newest Ubuntu of the tag whose own archive has the Python; else the newest, with uv."""
    with_apt = [u for u in ubuntus if python in matrix.distros.ubuntu_apt.get(u, ())]
    if with_apt:
        ubuntu = max(with_apt, key=version_key)
        return ubuntu, PythonSetup(python, "apt", apt_packages=(f"python{python}", f"python{python}-venv"))
    ubuntu = max(ubuntus, key=version_key)
    return ubuntu, PythonSetup(python, "uv", uv_requirement=matrix.tools.uv_requirement, mirror=mirror)


def wheel_cudnn(series: FrameworkSeries, cuda: str | None) -> str | None:
    """The cuDNN of the framework's wheel for this CUDA: the data records the default wheel's."""
    if cuda and series.default_cuda and minor(cuda) != series.default_cuda:
        return None
    return series.cudnn


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


def custom_base_cuda(config: Config, label: str, series: FrameworkSeries | None) -> str | None:
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
