"""Images: the Dockerfile, the build (one config, every variant, an executor image), the lock, the push, and the
values `buildkit-py print` gives."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import lock as _lock
from ..build import BuildOptions, BuildResult, _inputs, planned_refs, push_image
from ..build import build as build_image
from ..builders import builder_class
from ..config import Config
from ..errors import ConfigError, RegistryError, show
from ..fsutil import write_atomic
from ..notebook import HtmlRepr
from ..plan import make_plan
from ..progress import Reporter
from ..refs import parse_ref
from ..render import render_dockerfile, render_project_dockerignore
from ..resources import LAUNCHER_CONTEXT_DIR, launcher_sources
from .project import Progress, Project, Source, arguments, checked, load, project_from, refuse_unknown, reporting, variant_configs

# Imported where used, for start-up time (see this package's docstring).
if TYPE_CHECKING:
    from ..registry import PushResult


@dataclass(frozen=True)
class DockerfileResult(HtmlRepr):
    """The rendered Dockerfile and .dockerignore, and the paths written (with output)."""

    dockerfile: str
    dockerignore: str
    written: tuple[Path, ...] = ()  # the Dockerfile, its .dockerignore and the launcher directory, when written

    def to_dict(self) -> dict:
        if self.written:
            return dict(zip(("dockerfile", "dockerignore", "launcher"), map(str, self.written), strict=True))
        return {"dockerfile": self.dockerfile, "dockerignore": self.dockerignore}


def dockerfile(source: Source = None, /, output: str | os.PathLike | None = None, **settings: Any) -> DockerfileResult:
    """The Dockerfile and its .dockerignore; with output, also written there (and the launcher,
    which the Dockerfile copies, into the trainer directory).

    source: a Project, the trainer directory or config file, a config dict, or None (the working directory).
    settings: config keys as their flags set them (framework=, cuda=, base_image=...), config, dir, variant.
    """
    output = checked(output, "Path | None", "output")
    config = load(project_from(source, settings, "dockerfile", ["output"]))
    plan = _lock.apply(config, make_plan(config), locked=False)
    text = render_dockerfile(plan, root=config.root)
    ignore = render_project_dockerignore(config.root)
    if output is None:
        return DockerfileResult(text, ignore)
    # BuildKit reads <Dockerfile>.dockerignore before the context's own .dockerignore.
    ignore_path = output.with_name(output.name + ".dockerignore")
    write_atomic(output, text)
    write_atomic(ignore_path, ignore)
    for rel, source in launcher_sources() + ([(plan.lock.requirements, plan.lock.source)] if plan.lock else []):
        write_atomic(config.root / rel, source.read_text(encoding="utf-8"))
    return DockerfileResult(text, ignore, (output, ignore_path, config.root / LAUNCHER_CONTEXT_DIR))


def build(source: Source = None, /, options: BuildOptions | None = None, *, progress: Progress = None,
          **settings: Any) -> BuildResult:
    """Build the trainer image with BuildKit (and push every tag with push=True): its ID, tags and, pushed,
    each tag's repository@digest.

    source: a Project, the trainer directory or config file, a config dict, or None (the working directory).
    options: BuildOptions; its fields may also be given as keywords (push=True, no_cache=True, cache_ref=...).
    progress: auto (a live display in a notebook or on a terminal, else plain lines), plain, tty, json,
    notebook, log (the `buildkit_py` logger), quiet, or a Reporter.
    settings: config keys as their flags set them (image=, tags=[...], framework=...), config, dir, variant.
    """
    project, options = arguments("build", source, settings, options or BuildOptions(), takes=("options", "progress"))
    check_build_options(options)
    with reporting(progress) as reporter:
        return build_image(load(project), options, reporter)


@dataclass(frozen=True)
class VariantsResult(HtmlRepr):
    """Each variant's build."""

    builds: tuple[tuple[str, BuildResult], ...]  # (variant name, its build), in config order

    def to_dict(self) -> dict:
        return {"variants": {name: result.to_dict() for name, result in self.builds}}


def build_variants(project: Project, options: BuildOptions, reporter: Reporter) -> VariantsResult:
    """Every variant of the config, one after the other on one builder: their common layers are built once."""
    check_build_options(options)
    configs = variant_configs(load(replace(project, variant=None)))
    if not configs:
        raise ConfigError("the config has no variants: add `variants:` (a list of named overrides, e.g. "
                          "[{name: cu126, cuda: '12.6'}]) or build without it", field="--all-variants")
    if all(getattr(builder_class(c.builder), "remote", False) for c in configs):  # each on a machine of its own, at once
        from ..variant_builds import build_at_once

        return VariantsResult(build_at_once(configs, options, reporter))
    return VariantsResult(tuple((c.variant or "", build_image(c, options, reporter)) for c in configs))


def lock(project: Project, options: _lock.LockOptions) -> _lock.LockResult:
    """Write buildkit.lock for the config and each of its variants (or, with check, say what makes it stale)."""
    for name in options.upgrade_packages:
        _lock.check_package_name(name)
    config = load(replace(project, variant=None))
    plans = [(c, make_plan(c)) for c in [config, *variant_configs(config)]]
    return _lock.lock(config, plans, options)


def _lock_digest(config: Config) -> str:
    plan = _inputs(config, builder_class(config.builder).supports_secrets)[0]
    if plan.lock is None:
        raise ConfigError(f"the build of this config is not locked: no current {_lock.LOCK_NAME} beside it "
                          "(`buildkit-py lock` writes one)", field="NAME")
    return plan.lock.digest


def check_build_options(options: BuildOptions) -> None:
    if not isinstance(options.fast_path, bool):
        raise ConfigError(f"{show(options.fast_path)} is not allowed: true or false", field="--no-fast-path")
    if options.docker is not None:
        path = Path(options.docker)
        try:
            usable = path.is_file() and os.access(path, os.X_OK)
        except (OSError, ValueError):
            usable = False
        if not usable:
            raise ConfigError(f"{show(options.docker)} is not an executable file (a docker client)", field="--docker")
    if options.cache_ref is not None:
        parse_ref(options.cache_ref, field="--cache-ref", allow_digest=False)


def push(ref: str, *, progress: Progress = None, **settings: Any) -> PushResult:
    """Push a local image (REPOSITORY:TAG) from the Docker engine to its registry: repository@digest and size.

    progress: as build's (push bytes per layer).
    """
    from ..builders.engine_images import EngineImages

    refuse_unknown(settings, "push", ["progress"])

    parsed = parse_ref(checked(ref, "str", "REF"), field="REF", allow_digest=False)
    with reporting(progress) as reporter:
        return push_image(EngineImages().push, [parsed], reporter)[0]


def executor_build(project: Project, options: BuildOptions, reporter: Reporter) -> BuildResult:
    """An executor image: the config's framework, Python, packages, hypertune and the launcher, without trainer
    code. The build context holds only the launcher (and the requirements file and template the config names),
    so a trainer's code edits never change it."""
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
        image = config.image or (None if config.tags else "buildkit-py/executor")
        executor = replace(config, root=root, executor=True, trainer=None, image=image)
        return build_image(executor, options, reporter)


def _digest(config: Config) -> str:
    """repository@digest of the content tag as the engine recorded its push."""
    ref = planned_refs(config, git=False)[0][0]
    if getattr(builder_class(config.builder), "remote", False):  # pushed where it was built: the registry knows
        from ..jobs import preflight

        return f"{ref.repository}@{preflight.manifest(ref).digest}"
    from docker.errors import ImageNotFound

    from ..engine import engine_client

    try:
        digests = engine_client().images.get(str(ref)).attrs.get("RepoDigests") or []
    except ImageNotFound:
        digests = []
    found = [d for d in digests if d.startswith(ref.repository + "@")]
    if not found:
        raise RegistryError(f"{ref} has not been pushed from this engine: run `buildkit-py build --push` (make push) "
                            "first; a daemonless build prints its digest in `build --push --json`")
    return found[0]


# What `buildkit-py print NAME` gives: one value for Make and shell scripts.
PRINTABLE: dict[str, Any] = {
    "image-uri": lambda c: str(planned_refs(c, git=False)[0][0]),
    "image-tag": lambda c: planned_refs(c, git=False)[0][0].tag,
    "image": lambda c: planned_refs(c, git=False)[0][0].repository,
    "tags": lambda c: " ".join(map(str, planned_refs(c)[0])),
    "content-digest": lambda c: planned_refs(c, git=False)[1],
    "lock-digest": _lock_digest,
    "digest": _digest,
    "base-image": lambda c: make_plan(c).base_image,
    "cuda": lambda c: make_plan(c).cuda or "",
    "python": lambda c: make_plan(c).python.version,
    "framework": lambda c: make_plan(c).framework.requirement if make_plan(c).framework else "none",
    "variants": lambda c: " ".join(v.name for v in c.variants),
}


def print_value(project: Project, name: str) -> str:
    """One value for Make and shell scripts (`buildkit-py print NAME`): one of PRINTABLE."""
    if name not in PRINTABLE:
        raise ConfigError(f"{show(name)} is not a value buildkit-py prints; one of {', '.join(PRINTABLE)}", field="NAME")
    return PRINTABLE[name](load(project))
