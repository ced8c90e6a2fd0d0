"""Images: the Dockerfile, the build (one config, every variant, an executor image), the lock, the push, and the
values `buildkit-py print` gives."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..builders import builder_class
from ..catalog.resources import LAUNCHER_CONTEXT_DIR, launcher_sources
from ..config import Config
from ..errors import ConfigError
from ..fsutil import reads_once, write_atomic
from ..oci.refs import parse_ref
from ..pipeline import lock as _lock
from ..pipeline.buildtypes import BuildOptions, BuildResult, platform_suffix
from ..pipeline.plan import make_plan
from ..pipeline.render import render_dockerfile, render_project_dockerignore
from ..pipeline.resolution import check_resolution, declared_in, remembered, resolve_plan
from ..progress import HtmlRepr, Reporter
from .builds import check_build_options
from .project import (
    Progress,
    Project,
    Source,
    checked,
    load,
    output_file,
    project_from,
    refuse_unknown,
    reporting,
    typed,
    variant_configs,
)

# Imported where used, for start-up time (see this package's docstring).
if TYPE_CHECKING:
    from ..oci.client import PushResult


@dataclass(frozen=True)
class DockerfileResult(HtmlRepr):
    """The rendered Dockerfile and .dockerignore, and the paths written (with output)."""

    dockerfile: str  # a multi-platform image's: its first platform's
    dockerignore: str
    written: tuple[Path, ...] = ()  # the Dockerfile, its .dockerignore and the launcher directory, when written
    # A multi-platform image: (platform, its Dockerfile) each, in the config's order; written, OUTPUT.OS-ARCH each
    # (with its .dockerignore), for the platforms' Dockerfiles differ (framework wheels, cache folders, labels).
    platforms: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()  # what the user should know of it (not resolved)

    def to_dict(self) -> dict:
        if self.written:
            names = [f"{k}:{p}" for p, _ in self.platforms for k in ("dockerfile", "dockerignore")] or \
                ["dockerfile", "dockerignore"]
            return dict(zip([*names, "launcher"], map(str, self.written), strict=True))
        if self.platforms:
            return {"dockerfiles": dict(self.platforms), "dockerignore": self.dockerignore}
        return {"dockerfile": self.dockerfile, "dockerignore": self.dockerignore}


@reads_once
def dockerfile(source: Source = None, /, output: str | os.PathLike | None = None, *, resolve: bool = False,
               **settings: Any) -> DockerfileResult:
    """The Dockerfile and its .dockerignore; with output, also written there (and the launcher,
    which the Dockerfile copies, into the trainer directory). A multi-platform image has one Dockerfile per platform
    (`platforms`), written as OUTPUT.OS-ARCH.

    source: a Project, the trainer directory or config file, a config dict, or None (the working directory).
    resolve: resolve the requirements against the index first (as `resolve` and a build do), a refusal exiting 2;
    without it the Dockerfile is rendered without the network, with the framework release and Python an earlier
    resolution of the same inputs chose (kept by their digest), else the plan's own, and a note saying so.
    settings: config keys as their flags set them (framework=, cuda=, base_image=...), config, dir, variant.
    """
    output = output_file(output, "output")
    resolve = checked(resolve, "bool", "resolve")
    whole = load(project_from(source, settings, "dockerfile", ["output", "resolve"]))
    made = []  # (config, plan, text) of each platform (one for a one-platform image)
    notes: list[str] = []
    for each in whole.each_platform():
        plan = _lock.apply(each, make_plan(each), locked=False)
        config = each
        if resolve:
            if whole.multi_platform:  # each platform's set as it is (a lock's was resolved when written)
                resolution = check_resolution(config, plan, declared_in(config, plan))
            else:  # the framework release and Python chosen with the rest where nobody pinned them
                resolved = resolve_plan(each, plan, declared_in(each, plan))
                config, plan, resolution = resolved.config, resolved.plan, resolved.resolution
            if resolution is not None and not resolution.checked and resolution.note not in notes:
                notes.append(resolution.note)  # offline, or no index answered: said once
        else:
            if plan.requirements and plan.requirements_export is None:
                # What the resolution would refuse before asking an index (an include out of the directory, an option
                # or a path the image's installer cannot take) is refused without it too.
                from ..sources.requirements import resolver_input

                resolver_input(each.root, plan.requirements)
            kept = remembered(each, plan)
            if kept is not None:
                config, plan = kept.config, kept.plan
            elif plan.lock is None and not notes:
                notes.append("the requirements were not resolved for this Dockerfile (no network asked): "
                             "`dockerfile --resolve` or `resolve` checks them, as a build does")
        made.append((config, plan, render_dockerfile(plan, root=config.root)))
    ignore = render_project_dockerignore(whole.root)
    platforms = tuple((c.platform or "", text) for c, _, text in made) if whole.multi_platform else ()
    text = made[0][2]
    if output is None:
        return DockerfileResult(text, ignore, platforms=platforms, notes=tuple(notes))
    written: list[Path] = []
    for config, plan, text_p in made:
        path = output.with_name(f"{output.name}.{platform_suffix(config.platform or '')}") if platforms else output
        # BuildKit reads <Dockerfile>.dockerignore before the context's own .dockerignore.
        ignore_path = path.with_name(path.name + ".dockerignore")
        write_atomic(path, text_p)
        write_atomic(ignore_path, ignore)
        written += [path, ignore_path]
        for rel, source in launcher_sources() + ([(plan.lock.requirements, plan.lock.source)] if plan.lock else []):
            write_atomic(config.root / rel, source.read_text(encoding="utf-8"))
    return DockerfileResult(text, ignore, (*written, whole.root / LAUNCHER_CONTEXT_DIR), platforms, tuple(notes))


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
