"""`buildkit-py print NAME`: one value for Make and shell scripts. Each value loads only the stages it needs,
and the names alone load nothing (the command line lists them in its help)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import ConfigError, RegistryError, show
from ..fsutil import reads_once
from .project import Project, checked, load

if TYPE_CHECKING:
    from ..config import Config
    from ..pipeline.plan import Plan


def _planned(config: Config, git: bool = False):
    from ..pipeline.build import BuildOptions, make_recipe, planned_index_refs, planned_refs, prepare, recipes_of

    if config.multi_platform:  # the index's tags: its content digest is of each platform's
        return planned_index_refs(config, recipes_of(config, BuildOptions()), git=git)
    return planned_refs(make_recipe(config, prepare(config)), git=git)


def _plan(config: Config) -> Plan:
    from ..pipeline.plan import make_plan

    return make_plan(config)


def _lock_digest(config: Config) -> str:
    from ..pipeline import lock as _lock
    from ..pipeline.build import prepare

    plan = prepare(config)
    if plan.lock is None:
        raise ConfigError(f"the build of this config is not locked: no current {_lock.LOCK_NAME} beside it "
                          "(`buildkit-py lock` writes one)", field="NAME")
    return plan.lock.digest


def _digest(config: Config) -> str:
    """repository@digest of the content tag as this machine last pushed it: the push's record (a code edit the fast
    path appended in the registry never was in the engine), else the engine's record of its push."""
    from ..builders import builder_class
    from ..pipeline.fastpath import load_record

    ref = _planned(config)[0][0]
    # Pushed where it was built, or an index (assembled in the registry, never in the engine): the registry knows.
    if builder_class(config.builder).remote or config.multi_platform:
        from ..jobs import preflight

        return f"{ref.repository}@{preflight.manifest(ref).digest}"
    record = load_record(ref.repository, config.variant)
    if record is not None and record.manifest and record.content_tag == ref.tag:
        return f"{ref.repository}@{record.manifest}"
    from docker.errors import ImageNotFound

    from ..clients.engine import engine_client

    try:
        digests = engine_client().images.get(str(ref)).attrs.get("RepoDigests") or []
    except ImageNotFound:
        digests = []
    found = [d for d in digests if d.startswith(ref.repository + "@")]
    if not found:
        raise RegistryError(f"{ref} has not been pushed from this engine: run `buildkit-py build --push` (make push) "
                            "first; a daemonless build prints its digest in `build --push --json`")
    return found[0]


def _framework(config: Config) -> str:
    fw = _plan(config).framework
    return fw.requirement if fw else "none"


PRINTABLE: dict[str, Callable[[Config], str]] = {
    "image-uri": lambda c: str(_planned(c)[0][0]),
    "image-tag": lambda c: _planned(c)[0][0].tag or "",
    "image": lambda c: _planned(c)[0][0].repository,
    "tags": lambda c: " ".join(map(str, _planned(c, git=True)[0])),
    "content-digest": lambda c: _planned(c)[1],
    "lock-digest": _lock_digest,
    "digest": _digest,
    "base-image": lambda c: _plan(c).base_image,
    "cuda": lambda c: _plan(c).cuda or "",
    "python": lambda c: _plan(c).python.version,
    "framework": _framework,
    "variants": lambda c: " ".join(v.name for v in c.variants),
}


@reads_once
def print_value(project: Project, name: str) -> str:
    """One value for Make and shell scripts (`buildkit-py print NAME`): one of PRINTABLE."""
    if checked(name, "str", "NAME") not in PRINTABLE:
        raise ConfigError(f"{show(name)} is not a value buildkit-py prints; one of {', '.join(PRINTABLE)}", field="NAME")
    return PRINTABLE[name](load(project))
