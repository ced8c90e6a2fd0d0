"""Choosing the framework release, the platform and the Python from the config and the version data."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from packaging.version import Version

from ...catalog.machines import (
    AMD64,
    ARM64,
    Accelerator,
    arch,
    load_machines,
)
from ...catalog.matrix import (
    UNRECORDED,
    CudaRelease,
    Framework,
    FrameworkSeries,
    Matrix,
    gpu_python,
    usable_python,
)
from ...catalog.reading import version_key
from ...catalog.tpu import Tpu
from ...config import Config
from ...errors import ConfigError, ResolutionError, show


def _nearest(wanted: str, known: list[str], count: int = 5) -> list[str]:
    def distance(candidate: str) -> tuple:
        a = (Version(candidate).release + (0, 0, 0))[:3]
        try:
            b = (Version(wanted).release + (0, 0, 0))[:3]
        except ValueError:
            return (0,)
        return tuple(abs(x - y) for x, y in zip(a, b, strict=True))

    return sorted(known, key=distance)[:count]


def chosen_framework(matrix: Matrix, config: Config) -> tuple[Framework, FrameworkSeries, str] | None:
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


def tpu_named(matrix: Matrix, name: str, field: str = "accelerator") -> Tpu | None:
    """The TPU of that name; None for any other name. A TPU that Vertex AI custom training does not
    take is refused here."""
    tpu = matrix.tpus.get(name)
    if tpu is not None and tpu.why_not:
        offered = [t.name for t in matrix.tpus.values() if not t.why_not]
        raise ResolutionError(f"{field}: {name} is not offered for Vertex AI custom training ({tpu.why_not}); "
                              f"TPUs: {', '.join(offered)} (base_images/tpus.yaml)")
    return tpu


def platform_of(config: Config, accelerator: Accelerator | None) -> str | None:
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


def why_platform(config: Config, platform: str, accelerator: Accelerator | None) -> str:
    """Where the platform came from, for a refusal: the key (or flag) that set it, or the accelerator's machines."""
    if config.platform:
        return f"{config.named('platform')}: {platform}"
    return f"accelerator: {accelerator.name if accelerator else '?'} runs on {platform} machines (Arm CPUs)"


def arm64_gpu_series(fw: Framework, series: FrameworkSeries, version: str, label: str, why: str) -> FrameworkSeries:
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


def arm64_cpu_notes(fw: Framework | None, version: str | None, label: str, why: str) -> tuple[str, ...]:
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


def gpu_build_note(fw: Framework, series: FrameworkSeries, version: str, build: FrameworkSeries) -> str:
    index = f", from {build.install.gpu_index_url}" if build.install.gpu_index_url else ""
    last = (f"; {fw.name} {build.series} is the last {build.series.split('.')[0]}.x series, and code written for "
            f"{series.series} runs on it" if build.series != series.series else "")
    return (f"{fw.name}=={version} on a GPU: {build.install.package}=={build.releases[0]} (Python "
            f"{', '.join(build.python)}, CUDA {', '.join(build.cuda)}{index}) is installed instead, since "
            f"{fw.name} {series.series}'s own GPU wheels need CUDA {', '.join(series.cuda)} and Python "
            f"{', '.join(series.python)}, which no image can have{last}; requirements naming "
            f"{', '.join(build.replaces)} are left to it")


def has_cudnn(release: CudaRelease, need: str) -> bool:
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
        if system_cudnn and not has_cudnn(release, system_cudnn):
            continue
        return f"CUDA {cuda}"
    return None


def line_release(matrix: Matrix, fw: Framework, series: FrameworkSeries, version: str
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


def instead_of(matrix: Matrix, fw: Framework, series: FrameworkSeries, version: str, gpu: bool) -> str:
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


@dataclass(frozen=True)
class Release:
    """The framework release the image installs, once the GPU build, the platform and the Python line have moved
    what the config asked for; the platform it is built for."""

    fw: Framework | None
    series: FrameworkSeries | None
    version: str | None
    label: str  # how messages name it: "torch==2.5.1", "... on a GPU (...)", "framework none"
    platform: str | None
    said: tuple[str, ...] = ()  # what is installed instead of what was asked: every build of the plan says it
    notes: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        """A release of the data with its series (not none, not a nightly): what the version rules apply to."""
        return bool(self.fw and self.series and self.version != "nightly")


def release_for(matrix: Matrix, config: Config, resolved: tuple[Framework, FrameworkSeries, str] | None,
                accelerator: Accelerator | None, gpu: bool) -> Release:
    """The release asked for (RESOLVED: chosen_framework's), moved where the image cannot have it: to the
    framework's GPU build, to its arm64 build, or (on a CPU) to the last release of its line whose wheels an image's
    Python can run."""
    fw, series, version = resolved if resolved else (None, None, None)
    label = f"{fw.name}=={version}" if fw else "framework none"
    said: list[str] = []
    build = fw.gpu_series(series) if gpu and fw and series and version != "nightly" else None
    if build is not None:
        said.append(gpu_build_note(fw, series, version, build))
        series, version = build, build.releases[0]
        label = f"{label} on a GPU ({build.install.package}=={version})"
    platform = platform_of(config, accelerator)
    notes: tuple[str, ...] = ()
    if arch(platform) == ARM64:
        why = why_platform(config, platform, accelerator)
        if gpu and fw and series:
            series = arm64_gpu_series(fw, series, version, label, why)
            label = f"{label} for {ARM64}"
        elif not gpu:
            notes = arm64_cpu_notes(fw, version, label, why)
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
            said.append(f"{fw.name}=={version}: {fw.name}=={moved} (Python {', '.join(moved_series.python)}) is "
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
    return Release(fw, series, version, label, platform, tuple(said), notes)


def chosen_python(matrix: Matrix, config: Config, label: str, series: FrameworkSeries | None) -> str:
    supported = usable_python(matrix, series) if series else matrix.distros.cpu_python
    if config.python:
        if config.python not in supported:
            raise ResolutionError(
                f"python: {config.python} is not supported by {label}; supported: {', '.join(supported)}"
            )
        return config.python
    return default_python(matrix, supported)


def default_python(matrix: Matrix, supported: list[str] | tuple[str, ...]) -> str:
    """The distros' default Python if supported, else the closest to it, newer first: jax >= 0.11
    (3.12+) gets 3.12, not the newest."""
    return closest_python(matrix.distros.default_python, supported)


def closest_python(wanted: str, supported: list[str] | tuple[str, ...]) -> str:
    """`wanted` if supported, else the closest to it, newer first: code written for 3.7 runs on 3.8
    more often than on an older Python."""
    newer = [p for p in supported if version_key(p) >= version_key(wanted)]
    return min(newer, key=version_key) if newer else max(supported, key=version_key)


def or_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"
