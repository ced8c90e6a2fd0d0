"""Before anything is built: the image's complete requirement set resolved by uv (the resolver the image installs with)
for the image's Python and platform, against the indexes the build uses. A requirement that does not resolve, or whose
metadata cannot be built (the `sklearn` placeholder), stops the dry run and the build with exit 2 naming where it was
declared. A resolution that succeeded is kept by the digest of its inputs, so the next dry run costs nothing; offline
(--offline, BUILDKIT_PY_OFFLINE=1) or with no index reachable it says that nothing was checked instead of failing."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.utils import canonicalize_name

from ..catalog.reading import version_key
from ..config import Config, FrameworkRequest
from ..errors import ConfigError, OutputError, ResolutionError, show
from ..fsutil import cache_dir, consult, read_whole, write_atomic
from ..patterns import lazy_pattern
from ..sources.requirements import requirement_name, resolver_input
from .plan import Plan, make_plan
from .uv import platform_of

OFFLINE_ENV = "BUILDKIT_PY_OFFLINE"
CHECK_TIMEOUT = 600  # seconds: a cold resolve of a CUDA framework reads large index pages
PROBE_SECONDS = 0.5  # for any index to take a connection: a loopback or LAN one answers in milliseconds
_PIN = lazy_pattern(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", re.ASCII)
# What uv says when no index answered: nothing was checked, which is not the requirements' fault.
_UNREACHABLE = ("error sending request", "dns error", "failed to lookup address", "Connection refused",
                "connection refused", "Network is unreachable", "operation timed out", "Could not connect",
                "Could not resolve host")  # the last: git's, for a requirement from a repository
SCHEME = 1


@dataclass(frozen=True)
class Resolution:
    """What uv made of the image's requirements: checked, and the release it picked for each package; or not checked
    and why."""

    checked: bool
    note: str  # one line for the user: what was resolved, or why not
    pins: tuple[tuple[str, str], ...] = ()  # (canonical name, version)
    cached: bool = False

    def version(self, name: str) -> str | None:
        wanted = canonicalize_name(name)
        return next((v for n, v in self.pins if n == wanted), None)

    def to_dict(self) -> dict:
        return {"checked": self.checked, "note": self.note, "cached": self.cached, "packages": dict(self.pins)}


def offline_requested(flag: bool = False) -> bool:
    return flag or os.environ.get(OFFLINE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _key(config: Config, plan: Plan, platform: str, framework: str | None = None) -> str:
    from .uv import pip_conf_text, uv_binary

    fw = plan.framework
    if plan.requirements_export or not plan.requirements:
        requirements = read_whole(config.root / plan.requirements) if plan.requirements else b""
    else:  # what uv is handed: the file's checked lines and its includes'
        requirements = json.dumps([[text for text, _ in part] for part in resolver_input(config.root, plan.requirements)]).encode()
    pip_conf = pip_conf_text(config) or ""
    uv = Path(uv_binary())
    consult(uv, by_stat=True)
    given = json.dumps([SCHEME, framework or (fw.requirement if fw else None), fw.index_url if fw else None,
                        fw.pre if fw else None, list(fw.overrides) if fw else None, fw.source if fw else None,
                        plan.hypertune, list(plan.pip), hashlib.sha256(requirements).hexdigest(), plan.python.version,
                        platform, plan.glibc, hashlib.sha256(pip_conf.encode()).hexdigest(), str(uv), uv.stat().st_size])
    return hashlib.sha256(given.encode()).hexdigest()


@dataclass(frozen=True)
class _Outcome:
    """One resolver run: the pins (resolved), uv's refusal (said), or why nothing was checked (unchecked)."""

    pins: tuple[tuple[str, str], ...] | None = None
    said: str = ""
    unchecked: str | None = None
    cached: bool = False


def _run(config: Config, plan: Plan, platform: str, framework: str | None = None, *, kept_only: bool = False
         ) -> _Outcome:
    """uv on the plan's package set (the framework as `framework` says where given); a resolution is kept by the
    digest of its inputs, a refusal is not. kept_only: a kept resolution or nothing (no resolver call)."""
    from ..sources.pip_config import without_credentials
    from .uv import Compile, compile_requirements, index_urls_of, pip_conf_text

    try:
        key = _key(config, plan, platform, framework)
    except OSError as exc:
        return _Outcome(unchecked=f"the requirements were not resolved: {exc.strerror or exc}")
    kept = cache_dir() / "resolutions" / f"{key[:40]}.json"
    consult(kept)  # a dry run kept with what it found here (or that nothing was) holds while it is so
    try:
        return _Outcome(tuple((str(n), str(v)) for n, v in json.loads(kept.read_text(encoding="utf-8"))), cached=True)
    except (OSError, ValueError, TypeError):
        if kept_only:
            return _Outcome(unchecked="not resolved yet")
    from ..clients.transport import unreachable

    # No index taking a connection is known at once; uv would say the same after its retries (5 s and more).
    nobody = unreachable(index_urls_of(plan, pip_conf_text(config)), PROBE_SECONDS)
    if nobody:
        return _Outcome(unchecked=f"the requirements were not resolved: no package index answered ({nobody})")
    with tempfile.TemporaryDirectory(prefix="buildkit-py-resolve-") as tmp:
        done, _ = compile_requirements(config, plan, platform, Path(tmp),
                                       Compile(False, timeout=CHECK_TIMEOUT, framework=framework))
        if done is None:
            return _Outcome(unchecked=f"the requirements were not resolved: uv took over {CHECK_TIMEOUT} s")
        said = without_credentials(done.stderr.strip())
        if done.returncode != 0:
            if any(u in said for u in _UNREACHABLE):
                return _Outcome(unchecked="the requirements were not resolved: no package index answered ("
                                + show(said.splitlines()[-1][:200] if said else "uv failed") + ")")
            built = re.search(r"Failed to build `([^`]+)`", said)
            host = f"{sys.version_info[0]}.{sys.version_info[1]}"
            if built and plan.python.version != host:
                # uv builds an sdist's metadata with this machine's Python: a setup.py that checks the version it runs
                # on fails here and builds in the image, so nothing was checked.
                return _Outcome(unchecked=f"the requirements were not resolved: {built.group(1)} is an sdist whose "
                                f"metadata builds with Python {plan.python.version}, which this machine does not have "
                                f"(uv built it with {host}); the image's build installs it")
            return _Outcome(said=said)
        pins = tuple((canonicalize_name(m.group(1)), m.group(2)) for line in (Path(tmp) / "out.txt").read_text().splitlines()
                     if (m := _PIN.match(line.strip())))
    try:
        write_atomic(kept, json.dumps([list(p) for p in pins]))
    except OutputError:
        pass  # the next dry run resolves again
    consult(kept, written=True)
    return _Outcome(pins)


@dataclass(frozen=True)
class Resolved:
    """The plan stage's hand-off where the requirements are resolved: the config and plan the resolution settled on (the
    framework release and the Python it chose where nobody pinned them), and what it found."""

    config: Config
    plan: Plan
    resolution: Resolution | None  # None: not resolved here (a remote builder's, a user's own Dockerfile)


def check_resolution(config: Config, plan: Plan, declared: Sequence[tuple[str, str]], *, offline: bool = False) -> Resolution:
    """The plan's package set resolved as it is (a lock's, a multi-platform image's sections): a failure is a
    ConfigError (exit 2) naming the requirement and where it was declared."""
    if offline_requested(offline):
        return Resolution(False, "the requirements were not resolved: offline (--offline or BUILDKIT_PY_OFFLINE)")
    if plan.lock is not None:
        return Resolution(True, f"the packages are the lock's ({plan.lock.digest[:19]}): resolved when it was written")
    platform = platform_of(plan)
    out = _run(config, plan, platform)
    if out.unchecked:
        return Resolution(False, out.unchecked)
    if out.pins is None:
        raise _failure(out.said, declared, plan, platform)
    return Resolution(True, _resolved(out.pins, plan, platform), out.pins, cached=out.cached)


def resolve_plan(config: Config, plan: Plan, declared: Sequence[tuple[str, str]], *, offline: bool = False) -> Resolved:
    """The plan resolved with the rest of the image's requirements. Where nobody pinned the framework's release or the
    Python, they are chosen with the rest: when the plan's own (the newest known) do not resolve, older releases inside
    the range, then the other Pythons the base can have (older first), the first set that resolves wins and the note
    names what bounded it. A pin is kept: a conflict with it is uv's refusal, naming both sides. The choice is kept
    by the digest of the inputs, so the next dry run makes no resolver call."""
    if offline_requested(offline) or plan.lock is not None:
        return Resolved(config, plan, check_resolution(config, plan, declared, offline=offline))
    platform = platform_of(plan)
    started = time.perf_counter()
    memo = _memo(config, plan, platform)
    kept = _remembered(memo, config, plan, platform)
    if kept is not None:
        return kept
    first = _run(config, plan, platform)
    if first.unchecked:
        return Resolved(config, plan, Resolution(False, first.unchecked))
    if first.pins is not None:
        return Resolved(config, plan, Resolution(True, _resolved(first.pins, plan, platform), first.pins,
                                                 cached=first.cached))
    # uv builds an sdist's metadata with this machine's Python whatever the image's: another Python cannot mend that.
    moves = [m for m in _moves(config, plan) if m is None or "Failed to build" not in first.said]
    calls = 1
    for python in moves:
        moved = _moved(config, python)
        try:
            at = plan if python is None else make_plan(moved)
        except (ConfigError, ResolutionError):
            continue  # no image for this Python: the next
        relaxed = at.framework.relaxed() if at.framework else None  # a move of None is one where this is set
        out = _run(moved, at, platform, relaxed)
        calls += not out.cached
        if out.unchecked:  # the first run reached the index: what this one could not check is no choice
            continue
        release = _release(out.pins, at) if out.pins is not None else None
        if out.pins is not None and relaxed and release and release != at.framework.version:
            moved = replace(moved, framework=FrameworkRequest(config.framework.name, release))
            try:
                at = make_plan(moved)
            except (ConfigError, ResolutionError):
                continue
            out = _run(moved, at, platform)
            calls += not out.cached
        if out.pins is None:
            continue
        note = _moved_note(plan, at, first.said, calls, time.perf_counter() - started)
        try:
            write_atomic(memo, json.dumps({"python": python, "framework": release if relaxed else None, "note": note}))
        except OutputError:
            pass  # the next dry run chooses again
        consult(memo, written=True)
        return Resolved(moved, at, Resolution(True, f"{_resolved(out.pins, at, platform)}; {note}", out.pins))
    raise _failure(first.said, declared, plan, platform, tried=_tried(plan, moves))


def remembered(config: Config, plan: Plan) -> Resolved | None:
    """What an earlier resolution of this plan's inputs found, without a resolver call (`print image-uri`, a job's
    image: the tags the build gives; `dockerfile` without --resolve): the framework release and Python it chose, or
    the plan as made where it resolved as it is; None: nothing kept (the plan stands as made)."""
    if offline_requested() or plan.lock is not None:
        return None
    try:
        platform = platform_of(plan)
        memo = _memo(config, plan, platform)
    except (OSError, ConfigError):
        return None
    moved = _remembered(memo, config, plan, platform, kept_only=True)
    if moved is not None:
        return moved
    out = _run(config, plan, platform, kept_only=True)
    if out.pins is None:
        return None
    return Resolved(config, plan, Resolution(True, _resolved(out.pins, plan, platform), out.pins, cached=True))


def _memo(config: Config, plan: Plan, platform: str) -> Path:
    """Where the choice the resolution made for the plan's inputs is kept."""
    return cache_dir() / "resolutions" / f"{_key(config, plan, platform)[:40]}.move.json"


def _remembered(memo: Path, config: Config, plan: Plan, platform: str, *, kept_only: bool = False) -> Resolved | None:
    """The choice an earlier run made for these inputs, its set resolved again (a kept resolution: no resolver
    call)."""
    consult(memo)
    try:
        said = json.loads(memo.read_text(encoding="utf-8"))
        python, release, note = said["python"], said["framework"], str(said["note"])
        moved = _moved(config, python if isinstance(python, str) else None)
        if isinstance(release, str):
            moved = replace(moved, framework=FrameworkRequest(config.framework.name, release))
        at = plan if moved is config else make_plan(moved)
    except (OSError, ValueError, TypeError, KeyError, ConfigError, ResolutionError):
        return None
    out = _run(moved, at, platform, kept_only=kept_only)
    if out.pins is None:
        return None
    return Resolved(moved, at, Resolution(True, f"{_resolved(out.pins, at, platform)}; {note}", out.pins,
                                          cached=out.cached))


def _moves(config: Config, plan: Plan) -> list[str | None]:
    """What the resolution may change where the plan does not resolve: None for an older framework release (the
    release is the resolution's to choose), then each other Python the base can have (none is pinned), older first."""
    from ..catalog.matrix import gpu_python, load_matrix, usable_python

    fw = plan.framework
    moves: list[str | None] = [None] if fw is not None and fw.relaxed() is not None else []
    if config.python or config.base_image or plan.requirements_export is not None or plan.tpu:
        return moves
    matrix = load_matrix()
    known = matrix.framework(fw.name) if fw else None
    if known is None:
        pythons = set(matrix.distros.cpu_python)
    elif fw.chosen_within is not None:
        from packaging.specifiers import SpecifierSet

        within = SpecifierSet(fw.chosen_within)
        pythons = {p for s in known.series for r in s.releases if within.contains(r, prereleases=True)
                   for p in usable_python(matrix, s.for_release(r))}
    else:
        pythons = {p for s in known.series if fw.version in s.releases for p in usable_python(matrix, s.for_release(fw.version))}
        pythons = pythons or set(matrix.distros.cpu_python)
    if plan.gpu:
        pythons = {p for p in pythons if gpu_python(matrix, p)}
    else:
        pythons &= set(matrix.distros.cpu_python)
    now = version_key(plan.python.version)
    older = sorted((p for p in pythons if version_key(p) < now), key=version_key, reverse=True)
    newer = sorted((p for p in pythons if version_key(p) > now), key=version_key)
    return moves + older + newer


def _moved(config: Config, python: str | None) -> Config:
    return config if python is None else replace(config, python=python)


def _release(pins: tuple[tuple[str, str], ...], plan: Plan) -> str | None:
    """The framework release the resolution picked (its public version: 2.5.1 of 2.5.1+cu124)."""
    fw = plan.framework
    if fw is None:
        return None
    package = canonicalize_name(requirement_name(fw.requirement) or fw.name)
    found = next((v for n, v in pins if n == package), None)
    return found.split("+", 1)[0] if found else None


def _bound(said: str, name: str) -> str | None:
    """The requirement uv names as bounding the framework: "tensorflow-data-validation==1.16.1 needs tensorflow<2.17"."""
    text = " ".join(said.split())
    spec = r"[<>=!~]=?[0-9][^\s,]*(?:,\s?[<>=!~]=?[0-9][^\s,]*)*"
    found = re.search(r"(?<![A-Za-z0-9._-])([A-Za-z][A-Za-z0-9._-]*(?:" + spec + r")?) depends? on " + re.escape(name) +
                      r"((?:[<>=!~]=?[0-9][^\s,]*)(?:,\s?[<>=!~]=?[0-9][^\s,]*)*)", text, re.IGNORECASE)
    return f"{found.group(1)} needs {name}{found.group(2)}" if found else None


def _moved_note(plan: Plan, at: Plan, said: str, calls: int, seconds: float) -> str:
    """What the resolution chose instead of the plan's newest, and what bounded it."""
    changed, was = [], []
    if plan.framework and at.framework and at.framework.version != plan.framework.version:
        changed.append(f"{at.framework.name} {at.framework.version}")
        was.append(f"{plan.framework.name} {plan.framework.version}")
    if at.python.version != plan.python.version:
        changed.append(f"Python {at.python.version}")
        was.append(f"Python {plan.python.version}")
    name = plan.framework.name if plan.framework else ""
    why = (_bound(said, name) if name else None) or _reason(said)
    return (f"{' and '.join(changed) or 'the plan'} chosen with the rest of the requirements: "
            f"{' and '.join(was) or 'the newest'} {'do' if len(was) > 1 else 'does'} not resolve ({why}); {calls} "
            f"resolver call{'s' if calls != 1 else ''}, {seconds:.1f} s")


def _tried(plan: Plan, moves: list[str | None]) -> str:
    parts = []
    if None in moves and plan.framework:
        parts.append(f"older {plan.framework.name} releases")
    pythons = [m for m in moves if m]
    if pythons:
        parts.append(f"Python {', '.join(pythons)}")
    return " and ".join(parts)


def _resolved(pins: tuple, plan: Plan, platform: str) -> str:
    return f"{len(pins)} package{' resolves' if len(pins) == 1 else 's resolve'} for Python {plan.python.version} ({platform})"


def _reason(said: str) -> str:
    """uv's chain of causes and hints, and the first line a failed build printed (the placeholder's own message), as one
    line: never a backend's traceback."""
    lines = [" ".join(line.split()) for line in said.splitlines()]
    kept = [line.split(":", 1)[1].strip() if line.startswith(("error:", "cause:")) else line for i, line in enumerate(lines)
            if line.startswith(("error:", "cause:", "hint:")) or (i and lines[i - 1] == "[stderr]")]
    kept = [line for line in kept if line and not line.startswith(("Traceback", "File \""))]
    reason = "; ".join(kept) or "; ".join(line for line in lines if line and not line.startswith(
        ("Traceback", "File \"")))[-400:]
    return reason[:600] or "uv gave no reason"


def _failure(said: str, declared: Sequence[tuple[str, str]], plan: Plan, platform: str, tried: str = "") -> ConfigError:
    """uv's refusal, at the first declared requirement it names."""
    reason = _reason(said) + (f" (nor with {tried})" if tried else "")
    text = said.lower()
    culprit = next(((r, w) for r, w in declared if (name := requirement_name(r)) and re.search(
        r"(?<![a-z0-9_.-])" + re.escape(name) + r"(?![a-z0-9_-])", text.replace("_", "-"))), None)
    fix = (f"check the name and the release on the index, pin one that has a build for Python {plan.python.version} "
           f"({platform}), or drop the line")
    if culprit is None:
        return ConfigError(f"the image's requirements do not resolve for Python {plan.python.version} ({platform}): "
                           f"{reason}; {fix}", field="requirements")
    requirement, where = culprit
    return ConfigError(f"{show(requirement)} does not resolve for Python {plan.python.version} ({platform}): {reason}; "
                       f"{fix}", where=where)


def declared_in(config: Config, plan: Plan) -> list[tuple[str, str]]:
    """(requirement, where) of what a config declares for its image: the `pip` entries and the requirements file's
    lines, for an error's position."""
    from ..sources.requirements import included_lines

    found = [(p, f"{config.source}: pip") for p in plan.pip]
    if plan.requirements_export:  # another tool's lock: where each package is in it
        return found + list(plan.requirements_export.pins)
    if plan.requirements:
        found += [(text, where) for text, where, _ in included_lines(config.root, plan.requirements)[0]]
    return found


def checked_plan(config: Config, plan: Plan) -> Plan:
    """The plan, its requirements resolved (`resolve`, `dockerfile`): a requirement that does not resolve exits 2; what
    was resolved, or why not, is the plan's last note (none when offline was asked for)."""
    resolved = resolve_plan(config, plan, declared_in(config, plan))
    if offline_requested():
        return resolved.plan
    return replace(resolved.plan, notes=(*resolved.plan.notes, resolved.resolution.note))
