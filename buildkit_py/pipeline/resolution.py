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
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from ..config import Config
from ..errors import ConfigError, OutputError, show
from ..fsutil import cache_dir, read_whole, write_atomic
from ..requirements_file import requirement_name, resolver_input
from .plan import Plan

OFFLINE_ENV = "BUILDKIT_PY_OFFLINE"
CHECK_TIMEOUT = 600  # seconds: a cold resolve of a CUDA framework reads large index pages
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", re.ASCII)
# What uv says when no index answered: nothing was checked, which is not the requirements' fault.
_UNREACHABLE = ("error sending request", "dns error", "failed to lookup address", "Connection refused",
                "connection refused", "Network is unreachable", "operation timed out", "Could not connect")
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


def _key(config: Config, plan: Plan, platform: str) -> str:
    from .lock import _uv, pip_conf_text

    fw = plan.framework
    if plan.requirements_export or not plan.requirements:
        requirements = read_whole(config.root / plan.requirements) if plan.requirements else b""
    else:  # what uv is handed: the file's checked lines and its includes'
        requirements = json.dumps(resolver_input(config.root, plan.requirements)).encode()
    pip_conf = pip_conf_text(config) or ""
    uv = Path(_uv())
    given = json.dumps([SCHEME, fw.requirement if fw else None, fw.index_url if fw else None, fw.pre if fw else None,
                        list(fw.overrides) if fw else None,
                        plan.hypertune, list(plan.pip), hashlib.sha256(requirements).hexdigest(), plan.python.version,
                        platform, hashlib.sha256(pip_conf.encode()).hexdigest(), str(uv), uv.stat().st_size])
    return hashlib.sha256(given.encode()).hexdigest()


def check_resolution(config: Config, plan: Plan, declared: Sequence[tuple[str, str]], *, offline: bool = False) -> Resolution:
    """Resolve the plan's package set. declared: (requirement, where) of each requirement found, for the error's
    position. A failure is a ConfigError (exit 2) naming the requirement and where it was declared."""
    from ..indexes import without_credentials
    from .lock import _compile, platform_of

    if offline_requested(offline):
        return Resolution(False, "the requirements were not resolved: offline (--offline or BUILDKIT_PY_OFFLINE)")
    if plan.lock is not None:
        return Resolution(True, f"the packages are the lock's ({plan.lock.digest[:19]}): resolved when it was written")
    platform = platform_of(plan)
    try:
        key = _key(config, plan, platform)
    except OSError as exc:
        return Resolution(False, f"the requirements were not resolved: {exc.strerror or exc}")
    kept = cache_dir() / "resolutions" / f"{key[:40]}.json"
    try:
        pins = tuple((str(n), str(v)) for n, v in json.loads(kept.read_text(encoding="utf-8")))
        return Resolution(True, _resolved(pins, plan, platform), pins, cached=True)
    except (OSError, ValueError, TypeError):
        pass
    with tempfile.TemporaryDirectory(prefix="buildkit-py-resolve-") as tmp:
        done, _ = _compile(config, plan, platform, Path(tmp), hashes=False, timeout=CHECK_TIMEOUT)
        if done is None:
            return Resolution(False, f"the requirements were not resolved: uv took over {CHECK_TIMEOUT} s")
        said = without_credentials(done.stderr.strip())
        if done.returncode != 0:
            if any(u in said for u in _UNREACHABLE):
                return Resolution(False, "the requirements were not resolved: no package index answered ("
                                  + show(said.splitlines()[-1][:200] if said else "uv failed") + ")")
            raise _failure(said, declared, plan, platform)
        pins = tuple((canonicalize_name(m.group(1)), m.group(2)) for line in (Path(tmp) / "out.txt").read_text().splitlines()
                     if (m := _PIN.match(line.strip())))
    try:
        write_atomic(kept, json.dumps([list(p) for p in pins]))
    except OutputError:
        pass  # the next dry run resolves again
    return Resolution(True, _resolved(pins, plan, platform), pins)


def _resolved(pins: tuple, plan: Plan, platform: str) -> str:
    return f"{len(pins)} package{' resolves' if len(pins) == 1 else 's resolve'} for Python {plan.python.version} ({platform})"


def _failure(said: str, declared: Sequence[tuple[str, str]], plan: Plan, platform: str) -> ConfigError:
    """uv's refusal, at the first declared requirement it names."""
    lines = [" ".join(line.split()) for line in said.splitlines()]
    # uv's chain of causes and hints, and the first line a failed build printed (the placeholder's own message).
    kept = [line.split(":", 1)[1].strip() if line.startswith(("error:", "cause:")) else line for i, line in enumerate(lines)
            if line.startswith(("error:", "cause:", "hint:")) or (i and lines[i - 1] == "[stderr]")]
    reason = "; ".join(line for line in kept if line) or "; ".join(line for line in lines if line)[-400:]
    reason = reason[:600] or "uv gave no reason"
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
    from ..requirements_file import included_lines

    found = [(p, f"{config.source}: pip") for p in plan.pip]
    if plan.requirements_export:  # another tool's lock: where each package is in it
        return found + list(plan.requirements_export.pins)
    if plan.requirements:
        found += [(text, where) for text, where, _ in included_lines(config.root, plan.requirements)[0]]
    return found


def checked_plan(config: Config, plan: Plan) -> Plan:
    """The plan, its requirements resolved (`resolve`, `dockerfile`): a requirement that does not resolve exits 2; what
    was resolved, or why not, is the plan's last note (none when offline was asked for)."""
    from dataclasses import replace

    resolution = check_resolution(config, plan, declared_in(config, plan))
    return plan if offline_requested() else replace(plan, notes=(*plan.notes, resolution.note))
