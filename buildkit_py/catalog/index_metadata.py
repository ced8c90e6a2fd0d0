"""`buildkit-py matrix check|refresh`: base_images/ against the package index's own metadata.

Reads the simple API (PEP 691 JSON, else PEP 503 HTML) of PyPI or the user's mirror, the
wheels' core metadata (PEP 658/714 `.metadata` files where the index serves them, else the
wheel's own METADATA read with HTTP range requests, a few kilobytes of each wheel: index_client.py), and:
verifies every listed release exists with the Pythons listed (from the cpXY tags of its Linux
x86_64 wheels, or Requires-Python for py3 wheels); derives the default CUDA and cuDNN from the
nvidia-*/cuda-toolkit pins of the default wheel; lists releases missing from the data. `refresh`
writes the missing releases to the user's overlay (matrix.overlay_path()), which resolution reads.

Everything the index sends is untrusted: sizes are capped, names and versions parsed with
`packaging`, values checked by the overlay loader's patterns before they are written.
"""

from __future__ import annotations

import datetime
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..errors import ConfigError, OutputError, ResolutionError, show
from ..fsutil import write_atomic
from ..patterns import lazy_pattern
from .index_client import Index, IndexFile
from .matrix import OVERLAY_ENV, SHIPPED, Framework, FrameworkSeries, Matrix, load_matrix, overlay_path
from .reading import version_key
from .resources import resource_dir

WORKERS = 8  # metadata requests in flight
# What Requires-Python of py3 wheels is checked against. Wheels for older Pythons (TensorFlow 1.15's
# cp35/cp36) are not counted: no image has them, and the data lists 3.7 at the oldest (to say so).
PYTHONS = tuple(f"3.{n}" for n in range(7, 16))
_LINUX_X86_64 = lazy_pattern(r"manylinux(?:1|2010|2014|_[0-9]+_[0-9]+)_x86_64|linux_x86_64", re.ASCII)
_CP = lazy_pattern(r"cp3([0-9]{1,2})", re.ASCII)
_CU = lazy_pattern(r"-cu([0-9]{2})", re.ASCII)


@dataclass(frozen=True)
class Finding:
    """What `matrix check` found for a framework (or one release) on the index; `problem`: the data contradicts it."""

    framework: str
    release: str | None
    kind: str  # missing-release, not-on-index, yanked, python, cuda, cudnn, extra-python
    message: str
    problem: bool  # the data contradicts the index (extra-python is only information)


@dataclass(frozen=True)
class MatrixReport:
    """The result of `matrix check|refresh`: the index read, the findings, the releases compared per framework, and
    what `refresh` wrote to the overlay."""

    index: str  # without credentials
    findings: tuple[Finding, ...]
    checked: tuple[tuple[str, int], ...]  # framework -> releases compared
    overlay: str | None = None  # the file `refresh` wrote
    added: tuple[tuple[str, str], ...] = ()  # (framework, release) written to the overlay

    @property
    def problems(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.problem)

    def to_dict(self) -> dict:
        return {"index": self.index, "checked": dict(self.checked),
                "findings": [f.__dict__ for f in self.findings], "problems": len(self.problems),
                "overlay": self.overlay, "added": [{"framework": f, "release": r} for f, r in self.added]}


# ---------------------------------------------------------------------------------------------
# What the files say


@dataclass
class _Release:
    """One release of a project on the index: its Linux x86_64 wheels with their Pythons, and whether all are yanked."""

    wheels: list[tuple[IndexFile, tuple[str, ...]]] = field(default_factory=list)  # Linux x86_64 wheels, Pythons
    yanked: bool = True  # until a file that is not yanked is seen
    tagged: bool = False  # the Pythons come from cpXY tags (not only from a py3 wheel's Requires-Python)


def _releases(files: list[IndexFile]) -> dict[Version, _Release]:
    out: dict[Version, _Release] = {}
    for file in files:
        try:
            _, version, _, tags = parse_wheel_filename(file.filename)
        except InvalidWheelFilename:
            continue
        if version.is_prerelease or version.is_devrelease or version.local:
            continue
        pythons = set()
        for tag in tags:
            cp = _CP.fullmatch(tag.interpreter)
            if (cp and int(cp.group(1)) >= version_key(PYTHONS[0]).minor and tag.abi in (tag.interpreter, tag.interpreter + "m")
                    and _LINUX_X86_64.fullmatch(tag.platform)):
                pythons.add(f"3.{cp.group(1)}")  # cp37m is 3.7's ABI; cp313t (free-threaded) is not counted
            elif tag.interpreter == "py3" and tag.abi == "none" and (tag.platform == "any"
                                                                      or _LINUX_X86_64.fullmatch(tag.platform)):
                pythons.update(_requires_python(file.requires_python))
        if not pythons:
            continue
        entry = out.setdefault(version, _Release())
        entry.wheels.append((file, tuple(sorted(pythons, key=version_key))))
        entry.yanked = entry.yanked and file.yanked
        entry.tagged = entry.tagged or any(_CP.fullmatch(tag.interpreter) for tag in tags)
    return out


def _requires_python(spec: str | None) -> set[str]:
    try:
        allowed = SpecifierSet(spec or "")
    except InvalidSpecifier:
        return set()
    return {p for p in PYTHONS if allowed.contains(p + ".0", prereleases=True)}


def _pythons(release: _Release) -> tuple[str, ...]:
    return tuple(sorted({p for _, ps in release.wheels for p in ps}, key=version_key))


def _default_wheel(release: _Release) -> tuple[IndexFile, str]:
    """The wheel a Linux x86_64 pip picks for the newest Python (GPU builds are manylinux_2_28 where
    a CPU-only manylinux2014 sibling exists, as xgboost has), and that Python."""
    file, pythons = max(release.wheels, key=lambda w: (version_key(w[1][-1]), "_2_28" in w[0].filename))
    return file, pythons[-1]


def _pinned(requirement: Requirement) -> tuple[Version, bool] | None:
    """The version a requirement pins (exact) or starts from (a floor, as jax's plugins pin)."""
    for op in ("==", "===", "~=", ">="):
        for spec in requirement.specifier:
            if spec.operator == op:
                try:
                    return Version(spec.version.rstrip(".*")), op in ("==", "===")
                except InvalidVersion:
                    return None
    return None


@dataclass(frozen=True)
class _Cuda:
    """The CUDA and cuDNN a wheel's nvidia-*/cuda-toolkit pins say, with the plugin requirements to read next."""

    cuda: str | None  # "12.8", or only the major ("13") when nothing says the minor
    cudnn: str | None  # "9.10"
    chase: tuple[tuple[str, str, frozenset[str]], ...] = ()  # (package, version, extras) to read next
    floor: bool = False  # the CUDA pin is a lower bound: pip installs the newest of that major

    def contradicts(self, expected: str) -> bool:
        """Does the data's default CUDA disagree with these pins?"""
        if self.cuda is None:
            return False
        if "." not in self.cuda or self.floor:
            same_major = expected.split(".")[0] == self.cuda.split(".")[0]
            return not same_major or ("." in self.cuda and version_key(expected) < version_key(self.cuda))
        return expected != self.cuda


def _cuda_of(requires: list[str], python: str, extras: frozenset[str]) -> _Cuda:
    """CUDA and cuDNN from nvidia-*/cuda-toolkit pins active on Linux x86_64 with these extras."""
    cuda = cudnn = major = None
    floor = False
    chase = []
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        env = {"platform_system": "Linux", "sys_platform": "linux", "platform_machine": "x86_64",
               "python_version": python, "python_full_version": python + ".0", "os_name": "posix"}
        if req.marker and not any(req.marker.evaluate({**env, "extra": e}) for e in (extras or {""})):
            continue
        name = canonicalize_name(req.name)
        pinned = _pinned(req)
        if name in ("cuda-toolkit", "nvidia-cuda-runtime") or re.fullmatch(r"nvidia-cuda-runtime-cu[0-9]+", name):
            if pinned and len(pinned[0].release) >= 2:
                cuda, floor = f"{pinned[0].release[0]}.{pinned[0].release[1]}", not pinned[1]
        elif re.fullmatch(r"nvidia-cudnn-cu[0-9]+", name):
            if pinned and len(pinned[0].release) >= 2:
                cudnn = f"{pinned[0].release[0]}.{pinned[0].release[1]}"
        elif name.startswith("nvidia-") and (cu := _CU.search(name)):
            major = major or str(int(cu.group(1)))
        elif req.extras and pinned is not None:  # jax[cuda12] -> jax-cuda12-plugin[with-cuda]
            chase.append((name, str(pinned[0]), frozenset(req.extras)))
    return _Cuda(cuda or major, cudnn, tuple(chase), floor)


# ---------------------------------------------------------------------------------------------
# The check


class _Checker:
    def __init__(self, index: Index):
        self.index = index
        self._files: dict[str, list[IndexFile] | None] = {}

    def files(self, project: str) -> list[IndexFile] | None:
        if project not in self._files:
            self._files[project] = self.index.files(project)
        return self._files[project]

    def derive(self, fw: Framework, series: FrameworkSeries | None, release: _Release) -> _Cuda:
        """The default CUDA and cuDNN of a release, from its default wheel's pins (and, for an
        extra that installs a plugin, the plugin's pins)."""
        file, python = _default_wheel(release)
        meta = self.index.metadata(file)
        requires = meta.get_all("Requires-Dist") or []
        spec = (series or fw.series[-1]).install
        extras: frozenset[str] = frozenset()
        if spec.gpu_extra:
            provided = {canonicalize_name(e) for e in meta.get_all("Provides-Extra") or []}
            if "{" in spec.gpu_extra and "cuda" in provided:
                extra = "cuda"  # jax's own default among its cudaNN extras
            else:
                default = (series.default_cuda if series else None) or (series.cuda[-1] if series and series.cuda else "12")
                extra = canonicalize_name(spec.gpu_extra.format(cuda_major=default.split(".")[0], cuda_nodot=""))
            extras = frozenset({extra} & provided)
        found = _cuda_of(requires, python, extras)
        if found.cudnn is None and found.chase:
            package, version, plugin_extras = found.chase[0]
            plugin = self.files(package)
            parsed = _releases(plugin or []).get(Version(version))
            if parsed:
                wheel, py = _default_wheel(parsed)
                inner = _cuda_of(self.index.metadata(wheel).get_all("Requires-Dist") or [], py, plugin_extras)
                found = _Cuda(inner.cuda or found.cuda, inner.cudnn, (), inner.floor if inner.cuda else found.floor)
        return found

    def releases(self, fw: Framework) -> tuple[dict[Version, _Release], dict[Version, _Release]] | None:
        """The framework package's releases, and those of the package whose wheels tell the
        Pythons (jaxlib for jax); None when the index does not have the framework."""
        package = self.files(fw.package)
        if package is None:
            return None
        wheels = package if fw.wheel_package == fw.package else (self.files(fw.wheel_package) or [])
        return _releases(package), _releases(wheels)

    def check(self, fw: Framework) -> tuple[list[Finding], list[tuple[str, str, _Release]], int]:
        """Findings, the releases missing from the data (series label, release, what the index says)
        and how many releases were compared."""
        findings: list[Finding] = []
        both = self.releases(fw)
        if both is None:
            return [Finding(fw.name, None, "not-on-index", f"the index has no project {fw.package}", True)], [], 0
        index, wheel_index = both
        shipped = [(s, r) for s in fw.series if s.origin == SHIPPED for r in s.releases]
        listed = {Version(r) for _, r in shipped}
        for series, release in shipped:
            found = index.get(Version(release))
            applied = series.for_release(release)
            if found is None:
                close = sorted(str(v) for v in index if v.base_version == Version(release).base_version)
                hint = f" (the index has {', '.join(close)})" if close else ""
                findings.append(Finding(fw.name, release, "not-on-index",
                                        f"{fw.name}=={release} has no Linux x86_64 wheel on the index{hint}", True))
                continue
            if found.yanked:
                findings.append(Finding(fw.name, release, "yanked", f"{fw.name}=={release} is yanked on the index", True))
            if Version(release) not in wheel_index:  # jax 0.4.37 installs jaxlib 0.4.36
                findings.append(Finding(fw.name, release, "extra-python", f"{fw.name}=={release}: {fw.wheel_package} has "
                                        f"no {release}, so its Pythons are not checked", False))
                continue
            wheels = wheel_index[Version(release)]
            absent = [p for p in applied.python if p not in _pythons(wheels)]
            extra = [p for p in _pythons(wheels) if p not in applied.python] if wheels.tagged else []
            if absent:
                findings.append(Finding(fw.name, release, "python", f"{fw.name}=={release}: the data lists Python "
                                        f"{', '.join(absent)}, but {fw.wheel_package} {release} has no wheel for it", True))
            if extra:
                findings.append(Finding(fw.name, release, "extra-python", f"{fw.name}=={release}: {fw.wheel_package} "
                                        f"also has wheels for Python {', '.join(extra)}", False))
        oldest = min(listed) if listed else Version("0")
        missing = [(f"{v.major}.{v.minor}", str(v), wheel_index.get(v, r)) for v, r in sorted(index.items())
                   if v > oldest and v not in listed and not r.yanked]
        for _, release, found in missing:
            findings.append(Finding(fw.name, release, "missing-release", f"{fw.name}=={release} is on the index "
                                    f"(Python {', '.join(_pythons(found))}) but not in base_images/frameworks/{fw.source}",
                                    True))
        return findings, missing, len(shipped)

    def check_cuda(self, fw: Framework) -> list[Finding]:
        """The newest release of each GPU series: its default wheel's CUDA/cuDNN against the data."""
        both = self.releases(fw) if fw.gpu else None
        index = both[0] if both else {}
        jobs = []
        for series in fw.series:
            if series.origin != SHIPPED or not series.cuda or not fw.gpu:
                continue
            release = max(series.releases, key=version_key)
            found = index.get(Version(release))
            if found is not None:
                jobs.append((series.for_release(release), release, found))
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            derived = list(pool.map(lambda job: self.derive(fw, job[0], job[2]), jobs))
        findings = []
        for (series, release, _), got in zip(jobs, derived, strict=True):
            expected = series.default_cuda or series.cuda[-1]
            if got.contradicts(expected):
                pins = f"CUDA {got.cuda} or newer" if got.floor else f"CUDA {got.cuda}"
                findings.append(Finding(fw.name, release, "cuda", f"{fw.name}=={release}: the default wheel's pins say "
                                        f"{pins}, the data's default is {expected}", True))
            if got.cudnn and series.cudnn and series.install.bundles_cuda and got.cudnn != series.cudnn:
                findings.append(Finding(fw.name, release, "cudnn", f"{fw.name}=={release}: the default wheel's pins say "
                                        f"cuDNN {got.cudnn}, the data says {series.cudnn}", True))
        return findings


def _derive_all(checker: _Checker, fw: Framework, missing: list[tuple[str, str, _Release]]) -> list[_Cuda]:
    """The default CUDA and cuDNN of each missing release (read in parallel)."""
    if not fw.gpu:
        return [_Cuda(None, None) for _ in missing]
    index = checker.releases(fw)[0]
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(lambda m: checker.derive(fw, None, index[Version(m[1])]), missing))


def _overlay_series(fw: Framework, missing: list[tuple[str, str, _Release]], derived: list[_Cuda],
                    matrix: Matrix) -> list[dict]:
    tagged = [r.minor for r in matrix.cuda]
    groups: dict[str, dict] = {}
    for (label, release, found), got in zip(missing, derived, strict=True):
        entry = groups.setdefault(label, {"series": label, "releases": [], "python": list(_pythons(found))})
        entry["releases"].append(release)
        entry["python"] = sorted(set(entry["python"]) & set(_pythons(found)), key=version_key)
        cuda = got.cuda
        if cuda and "." not in cuda:  # only the major is known (xgboost's NCCL pin): its oldest tagged minor
            cuda = next((m for m in tagged if m.split(".")[0] == cuda), None)
        if fw.gpu and cuda and cuda in tagged:
            entry.update(cuda=[cuda], default_cuda=cuda)
            if got.cudnn:
                entry["cudnn"] = got.cudnn
    return [g for g in groups.values() if g["python"]]


def run(matrix: Matrix | None, index: Index, frameworks: tuple[str, ...] = (), refresh: bool = False,
        overlay: Path | None = None) -> MatrixReport:
    matrix = matrix or load_matrix()
    names = []
    for name in frameworks or tuple(sorted(matrix.frameworks)):
        fw = matrix.framework(name)
        if fw is None:
            raise ResolutionError(f"FRAMEWORK: unknown framework {show(name)}; known: {', '.join(sorted(matrix.frameworks))}")
        names.append(fw.name)
    checker = _Checker(index)
    findings: list[Finding] = []
    checked = []
    written: dict[str, list[dict]] = {}
    added = []
    for name in names:
        fw = matrix.frameworks[name]
        found, missing, count = checker.check(fw)
        findings += found
        findings += checker.check_cuda(fw)
        checked.append((name, count))
        if refresh and missing:
            entries = _overlay_series(fw, missing, _derive_all(checker, fw, missing), matrix)
            if entries:
                written[name] = entries
                added += [(name, r) for e in entries for r in e["releases"]]
    path = None
    if refresh:
        path = overlay or overlay_path()
        _write_overlay(path, index, written)
    return MatrixReport(index.url, tuple(findings), tuple(checked), str(path) if path else None, tuple(added))


def _write_overlay(path: Path, index: Index, entries: dict[str, list[dict]]) -> None:
    shipped = resource_dir("base_images").resolve()
    if path.resolve().is_relative_to(shipped.parent):
        raise ConfigError(f"the overlay {path} would be written inside buildkit-py's installation ({shipped.parent}); "
                          "set it to a file of your own", field=f"${OVERLAY_ENV} / $XDG_CONFIG_HOME")
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    document = {"generated": stamp, "index": index.url, "frameworks": entries}
    header = ("# Written by `buildkit-py matrix refresh` from the package index's metadata: releases newer than\n"
              "# buildkit-py's shipped data. Resolution reads it and says so; refresh again rather than edit it.\n")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, header + yaml.safe_dump(document, sort_keys=False))
    except OSError as exc:
        raise OutputError(f"cannot write the overlay {path}: {exc.strerror or exc}") from None
    # Read back through the loader: what it refuses, resolution would refuse.
    load_matrix(overlay=path)
