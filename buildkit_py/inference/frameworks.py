"""The framework that decides the base image: which declared (or imported) requirements are frameworks, the one that
decides when several are, its release (the newest known inside every range declared for it, for the image's Python and
before the APIs the code calls were removed), whether the trainer declares its CPU-only build, and how it meets the
framework the config sets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..catalog.matrix import Framework, Matrix, usable_python
from ..catalog.reading import version_key
from ..errors import ConfigError, show
from .api_usage import RemovedUse
from .api_usage import notes as removed_notes
from .given import Given
from .layout import Python
from .requirements import parses

# The framework that decides the base when several are declared: the frameworks whose GPU builds fix the
# CUDA base first, the one a trainer trains with before those listed beside it for helpers (metrics,
# tf.data or TensorBoard beside torch, a boosting baseline, scikit-learn's metrics); frameworks not
# listed follow by name. The others stay plain requirements, installed from the index as declared.
FRAMEWORK_ORDER = ("torch", "tensorflow", "jax", "xgboost", "scikit-learn")


def framework_of(matrix: Matrix, requirement: Requirement) -> str | None:
    name = canonicalize_name(requirement.name)
    for fw in matrix.frameworks.values():
        if name in {canonicalize_name(n) for n in (fw.name, fw.wheel_package, *fw.aliases) if n}:
            return fw.name
    return None


def release_pythons(matrix: Matrix, pin: str) -> list[str]:
    """The Pythons an image can have that the release's wheels support (NAME==VERSION); [] where it is not known."""
    name, _, version = pin.partition("==")
    fw = matrix.framework(name)
    series = next((s.for_release(version) for s in fw.series if version in s.releases), None) if fw else None
    return usable_python(matrix, series) if series else []


def _listed(releases: list[str], shown: int = 12) -> str:
    ordered = sorted(releases, key=version_key, reverse=True)
    return ", ".join(ordered[:shown]) + (f" and {len(ordered) - shown} older" if len(ordered) > shown else "")


@dataclass(frozen=True)
class Choice:
    """The framework that decides the base image and its release: the pin, where it is declared, the declared range,
    why it decides (when several are declared), and notes."""

    pin: str  # torch==2.5.1, or torch (unpinned: the plan resolves the newest)
    where: str
    spec: SpecifierSet
    reason: str | None
    notes: tuple[str, ...]
    # Nothing pins the release: the range the plan and the resolution choose it in (the config's `framework`), else None.
    within: str | None = None


def by_framework(matrix: Matrix, found: Sequence[tuple[str, Requirement]]) -> dict[str, list[tuple[str, Requirement]]]:
    by_fw: dict[str, list[tuple[str, Requirement]]] = {}
    for where, req in found:
        name = framework_of(matrix, req)
        if name is not None:
            by_fw.setdefault(name, []).append((where, req))
    return by_fw


def deciding(frameworks: Sequence[str] | dict) -> str:
    """The framework that decides the base among several, by FRAMEWORK_ORDER, then by name."""
    rank = {n: i for i, n in enumerate(FRAMEWORK_ORDER)}
    return min(frameworks, key=lambda n: (rank.get(n, len(rank)), n))


def _pin(matrix: Matrix, found: list[tuple[str, Requirement]], python: str | None,
         limits: Sequence[tuple[str, Requirement]] = (), prefer: Sequence[tuple[str, str]] = ()) -> Choice | None:
    """The framework that decides the base, by FRAMEWORK_ORDER, pinned to the newest known release inside
    every range declared for it (for the image's Python when it is set). Two different exact pins, or a range
    no known release meets: exit 2. `limits` narrow a framework that is not pinned exactly (the code uses an
    API later releases removed); a `prefer` entry (NAME==VERSION, why) is taken where nothing pins the release and it
    lies inside the range (what a legacy runtimeVersion ran)."""
    by_fw = by_framework(matrix, found)
    if not by_fw:
        return None
    chosen = deciding(by_fw)
    declared = by_fw[chosen]
    where = ", ".join(w for w, _ in declared)
    exact = [(s.version, w) for w, r in declared for s in r.specifier if s.operator in ("==", "===") and "*" not in s.version]
    # A local version label is a build of its release (torch==2.4.0+cu118 beside torch==2.4.0): one pin, the build's.
    exact.sort(key=lambda p: Version(p[0]).local is None)
    for version, w in exact[1:]:
        if Version(version).public != Version(exact[0][0]).public or Version(version).local not in (
                None, Version(exact[0][0]).local):
            raise ConfigError(f"conflicting framework pins: {show(f'{chosen}=={exact[0][0]}')} ({exact[0][1]}) and "
                              f"{show(f'{chosen}=={version}')} ({w}); keep one", field="framework")
    spec = SpecifierSet()
    for _, req in declared:
        spec &= req.specifier
    reason = None
    if len(by_fw) > 1:
        others = [n for n in by_fw if n != chosen]
        reason = (f"{chosen} decides the base image ({' > '.join(FRAMEWORK_ORDER)}); "
                  f"{', '.join(others)} {'stays a plain requirement' if len(others) == 1 else 'stay plain requirements'}")
    fw = matrix.framework(chosen)
    if exact:
        version = exact[0][0]
        if not spec.contains(version, prereleases=True):
            raise ConfigError(f"conflicting framework requirements: {show(chosen + '==' + version)} is outside "
                              f"{show(chosen + str(spec))} ({where})", field="framework")
        # A local version label (torch==2.5.1+cpu) names a build of the release, which the plan's index choice makes.
        public = Version(version).public if parses(f"x=={version}") and "+" in version else version
        return Choice(f"{chosen}=={public}", where, spec, reason, ())
    known = [(s, r) for s in fw.series for r in s.releases] if fw else []
    narrowed = [(w, r) for w, r in limits if r.name == chosen]
    limited = spec
    for _, req in narrowed:
        limited &= req.specifier
    # A limit that leaves no known release is dropped: the declared range stands and the note names the call.
    if narrowed and any(limited.contains(r) for _, r in known):
        spec = limited
    else:
        narrowed = []
    limit_notes = tuple(f"{w}: {chosen}{r.specifier} keeps it" for w, r in narrowed)
    wanted = next(((pin, why) for pin, why in prefer if pin.partition("==")[0] == chosen and "==" in pin), None)
    if wanted is not None:
        version = wanted[0].partition("==")[2]
        if spec.contains(version, prereleases=True):
            return Choice(wanted[0], where, spec, reason, (*limit_notes, f"{chosen} ({where}): {version}, {wanted[1]}"))
    if not str(spec) and python is None:  # with the image's Python known, its newest known release is taken below
        return Choice(chosen, where, spec, reason, (
            f"{chosen} ({where}) is not pinned: the framework is pinned to the release that resolves (see `resolve`), "
            "write it as ==VERSION to keep it",))
    inside = [r for s, r in known if spec.contains(r) and (python is None or python in s.for_release(r).python)]
    if not inside:
        for_python = f" for Python {python}" if python else ""
        raise ConfigError(
            f"no known {chosen} release inside {show(chosen + str(spec))} ({where}){for_python}; known: "
            f"{_listed([r for _, r in known]) or 'none'} (buildkit-py versions {chosen}); change the range, or pin a "
            "known release with --framework", field="framework")
    picked = max(inside, key=version_key)
    return Choice(f"{chosen}=={picked}", where, spec, reason, (*limit_notes,
        f"{chosen}{spec} ({where}): {picked}, the newest known release {'inside the range' if str(spec) else 'of it'}"
        f"{' for Python ' + python if python else ''}, unless an older one is what resolves with the rest",),
        within=",".join(sorted(str(s) for s in spec)))


def _cpu_index_urls(fw: Framework) -> tuple[str, ...]:
    """The framework's CPU-only indexes: a cpu_index_url that is not also its GPU index (PyTorch's
    download.pytorch.org/whl/cpu; jax's one index serves both)."""
    found = []
    for series in (*fw.series, *([fw.nightly] if fw.nightly else [])):
        spec = series.install
        if spec.cpu_index_url and spec.cpu_index_url != spec.gpu_index_url:
            found.append(spec.cpu_index_url.rstrip("/"))
    return tuple(dict.fromkeys(found))


def _cpu_only(matrix: Matrix, chosen: str, parsed: Sequence[tuple[str, Requirement]],
              options: Sequence[tuple[str, str, str]]) -> list[str]:
    """Where the trainer declares the CPU-only build of the framework that decides the base, each as
    "where: what" (base_images/cpu_builds.yaml; an index option naming the framework's CPU index)."""
    from ..catalog.resources import read_data, resource_dir

    data = read_data(resource_dir("base_images") / "cpu_builds.yaml", "base_images/cpu_builds.yaml")
    rules = data["frameworks"].get(chosen) or {}
    distributions = {canonicalize_name(d) for d in rules.get("distributions", ())}
    extras, labels = set(rules.get("extras", ())), set(rules.get("local_versions", ()))
    found = []
    for where, req in parsed:
        if framework_of(matrix, req) != chosen:
            continue
        local = [Version(s.version).local for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version
                 and parses(f"x=={s.version}")]
        if canonicalize_name(req.name) in distributions:
            found.append(f"{where}: {req.name} is the CPU-only build of {chosen}")
        elif req.extras & extras:
            found.append(f"{where}: {req.name}[{','.join(sorted(req.extras & extras))}] installs {chosen} for CPU only")
        elif any(lv and lv.split(".")[0] in labels for lv in local):
            found.append(f"{where}: {req} is a CPU-only wheel of {chosen} (local version +{local[0]})")
    fw = matrix.framework(chosen)
    cpu_indexes = _cpu_index_urls(fw) if fw else ()
    for option, value, where in options:
        url = value.rstrip("/")
        if any(url == i or url.startswith(i + "/") for i in cpu_indexes):
            found.append(f"{where}: {option} {value} is {chosen}'s CPU-only index")
    return found


def declared_frameworks(matrix: Matrix, parsed: Sequence[tuple[str, Requirement]]) -> tuple[set[str], tuple[str, ...]]:
    """The distribution names the declared frameworks install (a framework declared by another of its names,
    tensorflow-gpu==2.3.0, declares its import), and a note on each line that names one so."""
    names: set[str] = set()
    notes = []
    for w, r in parsed:
        fw_name = framework_of(matrix, r)
        fw = matrix.framework(fw_name) if fw_name else None
        if fw is None:
            continue
        own = {canonicalize_name(n) for n in (fw.name, fw.package) if n}
        names |= own
        if canonicalize_name(r.name) not in own:
            matched = [s for s in fw.series if any(r.specifier.contains(x, prereleases=True) for x in s.releases)]
            builds = [fw.gpu_series(s) for s in matched]
            replaced = bool(matched) and all(b is not None and r.name in b.replaces for b in builds)
            notes.append(f"{w}: {r.name} is another distribution name of {fw.name}: the image's framework is {fw.name}, "
                         f"and the line, where it is installed as written, adds {r.name} beside it (the same code twice; "
                         f"tensorflow-gpu has no release after 2.11); write {fw.name}{r.specifier} instead"
                         + (f" (a GPU image installs {builds[0].install.package} in their place and leaves the line "
                            "out)" if replaced else ""))
    return names, tuple(notes)


def choose_framework(matrix: Matrix, found: Sequence[tuple[str, Requirement]], python: Python,
                     removed: Sequence[RemovedUse], prefer: Sequence[tuple[str, str]]) -> Choice | None:
    """The framework that decides the base, and its release, from the requirements declared and imported. Removed
    APIs (base_images/removed_apis.yaml): a framework the requirements leave open gets the newest release that still
    has what the code calls; an exact pin is kept (and a later note names the call that breaks). Where the repository
    asks for a Python the release has no wheels for: exit 2."""
    limits = [(f"{u.where} uses {u.api.api} (removed in {u.api.removed_in})", Requirement(f"{u.api.framework}<{u.api.removed_in}"))
              for u in removed]
    choice = _pin(matrix, list(found), str(python.version) if python.version is not None else None, limits, prefer)
    fits = release_pythons(matrix, choice.pin) if python.asked_by is not None and choice is not None and "==" in choice.pin else []
    if fits and python.version not in fits:
        raise ConfigError(f"{python.asked_by} asks for Python {python.version}, and {choice.pin} ({choice.where}) has wheels "
                          f"for Python {', '.join(fits)}: make them agree (or pass --python)", field="python")
    return choice


@dataclass(frozen=True)
class CpuBuild:
    """The image built for CPU where the trainer declares the framework's CPU-only build."""

    notes: tuple[str, ...]
    overrides: tuple[tuple[str, Any], ...]


def cpu_build(matrix: Matrix, given: Given, choice: Choice | None, parsed: Sequence[tuple[str, Requirement]],
              options: Sequence[tuple[str, str, str]], legacy_gpu: str | None) -> CpuBuild:
    """gpu: false where the trainer declares the CPU-only build of the framework that decides the base (a GPU the
    config, a flag or the legacy job asks for beside it: exit 2), or where the release it pins has GPU builds only for
    a CUDA whose nvidia/cuda tags NVIDIA deleted and nothing asks for a GPU."""
    chosen = choice.pin.partition("==")[0] if choice else None
    if not chosen:
        return CpuBuild((), ())
    flagged = {k for k, v in given.flags.items() if v is not None}
    if not (cpu := _cpu_only(matrix, chosen, parsed, options)):
        gone = _gone_cuda(matrix, choice.pin) if choice else None
        if gone is None or {"gpu", "accelerator"} & (flagged | set(given.data)) or legacy_gpu:
            return CpuBuild((), ())
        return CpuBuild((f"{choice.pin} ({choice.where}) has GPU builds for CUDA {', '.join(gone)} alone, whose "
                         "nvidia/cuda tags NVIDIA deleted from Docker Hub, and nothing here asks for a GPU: the image is "
                         "built for CPU (gpu: false; a newer release and gpu: true train on a GPU)",), (("gpu", False),))
    gpu_value = given.flags.get("gpu") if "gpu" in flagged else given.data.get("gpu")
    accelerator = given.flags.get("accelerator") if "accelerator" in flagged else given.data.get("accelerator")
    asked = (f"gpu: true ({given.where['gpu']})" if gpu_value is True else
             f"accelerator {accelerator} ({given.where['accelerator']})"
             if isinstance(accelerator, str) and not accelerator.upper().startswith("TPU") else
             f"the legacy job's {legacy_gpu}" if legacy_gpu and not {"gpu", "accelerator"} & flagged else None)
    if asked:
        raise ConfigError(f"{cpu[0]}, but {asked} asks for a GPU, which that build cannot use; declare {chosen} "
                          "itself (its GPU build) to train on the GPU, or drop the GPU for a CPU job",
                          field="framework")
    if "gpu" in given:
        return CpuBuild((), ())
    return CpuBuild((f"{'; '.join(cpu)}: the image is built for CPU (gpu: false; base_images/cpu_builds.yaml)",),
                    (("gpu", False),))


def _gone_cuda(matrix: Matrix, pin: str) -> tuple[str, ...] | None:
    """The CUDA minors PIN's GPU builds need, where NVIDIA deleted every one's tags (base_images/cuda.yaml); else None."""
    name, _, version = pin.partition("==")
    fw = matrix.framework(name)
    series = next((s for s in fw.series if version in s.releases), None) if fw and version else None
    if series is None or any(s.gpu_build is not None and s.series.split(".")[0] == series.series.split(".")[0]
                             for s in fw.series):
        return None  # a GPU build of its major line serves it instead (TensorFlow 1.x: NVIDIA's 1.15)
    cudas = tuple(series.for_release(version).cuda)
    return cudas if cudas and all(c in matrix.deleted_cuda for c in cudas) else None


@dataclass(frozen=True)
class FrameworkSetting:
    """The framework as the config will have it, and where it was found."""

    framework: str | None  # the pin found in the requirements, e.g. torch==2.5.1
    framework_from: str | None  # where: requirements.txt:3
    reason: str | None  # why this framework decides the base, when several are declared
    notes: tuple[str, ...]
    overrides: tuple[tuple[str, Any], ...]


def framework_setting(matrix: Matrix, given: Given, choice: Choice | None, configured: Framework | None,
                      found: Sequence[tuple[str, Requirement]], removed: Sequence[RemovedUse],
                      runtime_note: str | None) -> FrameworkSetting:
    """The chosen framework set where the config sets none; where it sets one, the two must agree (exit 2) unless
    they are different frameworks. Then the notes on the code's calls that the image's releases removed."""
    notes: list[str] = []
    overrides: tuple[tuple[str, Any], ...] = ()
    framework = framework_from = reason = None
    if choice is not None:
        chosen = choice.pin.partition("==")[0]
        framework, framework_from, reason = choice.pin, choice.where, choice.reason
        notes += [*choice.notes, *([reason] if reason else []), *([runtime_note] if runtime_note else [])]
        if "framework" in given:
            version = given.framework.partition("==")[2]
            if configured is not None and configured.name != chosen:
                notes.append(f"framework {given.framework} ({given.where['framework']}) is kept; {framework} "
                             f"({framework_from}) is installed from the requirements on top of it")
            elif version and parses(f"x=={version}") and not choice.spec.contains(version, prereleases=True):
                declared_as = f"{chosen}{choice.spec}" if len(choice.spec) != 1 else framework
                raise ConfigError(f"conflicting framework pins: {show(given.framework)} ({given.where['framework']}) and "
                                  f"{show(declared_as)} ({framework_from}); make them agree", field="framework")
        else:
            overrides = (("framework", framework if choice.within is None else chosen + choice.within),)
    effective = given.framework if "framework" in given else framework
    return FrameworkSetting(framework, framework_from, reason, (*notes, *_removed_notes(matrix, effective, found, removed)),
                            overrides)


def _removed_notes(matrix: Matrix, effective: str | None, found: Sequence[tuple[str, Requirement]],
                   removed: Sequence[RemovedUse]) -> list[str]:
    """A note on each call of the code that the release the image gets removed."""
    notes = []
    if effective:  # the release the image gets, where it lacks what the code calls
        name, _, version = effective.partition("==")
        known_fw = matrix.framework(name)
        notes += removed_notes(tuple(u for u in removed if known_fw and u.api.framework == known_fw.name and (
            not parses(f"x=={version}") or not version or Version(version) >= Version(u.api.removed_in))))
    # A framework installed as a plain requirement beside the chosen one (scikit-learn beside tensorflow) gets the
    # release its line asks for: the note names the call unless an exact pin predates the removal.
    chosen_fw = matrix.framework(effective.partition("==")[0]) if effective else None
    for use in removed:
        if chosen_fw is not None and use.api.framework == chosen_fw.name:
            continue
        lines = [r for _, r in found if framework_of(matrix, r) == use.api.framework]
        exact = [Version(x.version) for r in lines for x in r.specifier if x.operator == "==" and "*" not in x.version]
        if lines and not (exact and all(v < Version(use.api.removed_in) for v in exact)):
            notes += removed_notes((use,))
    return notes
