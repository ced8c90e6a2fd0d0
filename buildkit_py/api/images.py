"""Images: the build (one config, every variant, an executor image), the lock, the push, and the
values `buildkit-py print` gives."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..builders import builder_class
from ..config import Config
from ..errors import ConfigError
from ..fsutil import reads_once
from ..oci.refs import parse_ref
from ..pipeline import lock as _lock
from ..pipeline.buildtypes import BuildOptions, BuildResult
from ..pipeline.plan import make_plan
from ..progress import HtmlRepr, Reporter
from .builds import check_build_options
from .project import (
    Progress,
    Project,
    checked,
    load,
    refuse_unknown,
    reporting,
    typed,
    variant_configs,
)

# Imported where used, for start-up time (see this package's docstring).
if TYPE_CHECKING:
    from ..oci.client import PushResult


@dataclass(frozen=True)
class VariantsResult(HtmlRepr):
    """Each variant's build."""

    builds: tuple[tuple[str, BuildResult], ...]  # (variant name, its build), in config order

    def to_dict(self) -> dict:
        return {"variants": {name: result.to_dict() for name, result in self.builds}}


@reads_once
def build_variants(project: Project, options: BuildOptions, reporter: Reporter) -> VariantsResult:
    """Every variant of the config, one after the other on one builder: their common layers are built once."""
    project, options = typed(project, options, BuildOptions, "build_variants")
    check_build_options(options)
    configs = variant_configs(load(replace(project, variant=None)))
    if not configs:
        raise ConfigError("the config has no variants: add `variants:` (a list of named overrides, e.g. "
                          "[{name: cu126, cuda: '12.6'}]) or build without it", field="--all-variants")
    if all(builder_class(c.builder).remote for c in configs):  # each on a machine of its own, at once
        from ..pipeline.variant_builds import build_at_once

        return VariantsResult(build_at_once(configs, options, reporter))
    from ..pipeline.build import build_config  # the builders: only the commands that build load them

    return VariantsResult(tuple((c.variant or "", build_config(c, options, reporter)) for c in configs))


@reads_once
def lock(project: Project, options: _lock.LockOptions) -> _lock.LockResult:
    """Write buildkit.lock for the config and each of its variants (or, with check, say what makes it stale)."""
    project, options = typed(project, options, _lock.LockOptions, "lock")
    for name in options.upgrade_packages:
        _lock.check_package_name(name)
    config = load(replace(project, variant=None))
    # A multi-platform image is locked per platform: each has its own base manifest and wheels.
    plans = [(p, make_plan(p)) for c in [config, *variant_configs(config)] for p in c.each_platform()]
    return _lock.lock(config, plans, options)


def push(ref: str, *, progress: Progress = None, **settings: Any) -> PushResult:
    """Push a local image (REPOSITORY:TAG) from the Docker engine to its registry: repository@digest and size.

    progress: as build's (push bytes per layer).
    """
    from ..builders.engine_images import EngineImages

    refuse_unknown(settings, "push", ["progress"])

    parsed = parse_ref(checked(ref, "str", "REF"), field="REF", allow_digest=False)
    with reporting(progress) as reporter:
        from ..pipeline.publish import push_image

        return push_image(EngineImages().push, [parsed], reporter)[0]


@reads_once
def executor_build(project: Project, options: BuildOptions, reporter: Reporter) -> BuildResult:
    """An executor image: the config's framework, Python, packages, hypertune and the launcher, without trainer
    code. The build context holds only the launcher (and the requirements file and template the config names),
    so a trainer's code edits never change it."""
    project, options = typed(project, options, BuildOptions, "executor_build")
    check_build_options(options)
    return executor_build_for(load(project), options, reporter)


def executor_build_for(config: Config, options: BuildOptions, reporter: Reporter) -> BuildResult:
    """executor_build() for a config already loaded."""
    with tempfile.TemporaryDirectory(prefix="buildkit-py-executor-") as tmp:
        root = Path(tmp)
        # buildkit.lock too, when there is one: the executor installs the locked packages from the locked base.
        locked = _lock.LOCK_NAME if _lock.lock_path(config).is_file() else None
        for rel in filter(None, (config.requirements, config.template, locked)):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(config.root / rel, root / rel)
        image = config.image or (None if config.tags else parse_ref("buildkit-py/executor"))
        executor = replace(config, root=root, executor=True, trainer=None, image=image)
        from ..pipeline.build import build_config

        return build_config(executor, options, reporter)
