"""The build of one config: a code-only edit of a project whose kept recipe still holds goes straight to the
fast path, with nothing of the config, plan or render loaded (recipe.py); any other build loads the config, keeps
what config -> plan -> render made of it, and runs the whole pipeline (build.py)."""

from __future__ import annotations

import os
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError, show
from ..fsutil import consulted, reads_once
from ..oci.refs import parse_ref
from ..pipeline import recipe as _recipe
from ..pipeline.buildtypes import BuildOptions, BuildResult
from ..progress import Reporter
from .project import Progress, Project, Source, arguments, load, options_of, reporting


@reads_once
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
    project, options = arguments("build", source, settings, options_of(options, BuildOptions, "options"),
                                 takes=("options", "progress"))
    check_build_options(options)
    with reporting(progress) as reporter:
        return build_project(project, options, reporter)


def build_project(project: Project, options: BuildOptions, reporter: Reporter) -> BuildResult:
    """A push whose kept recipe holds tries the fast path first; what it could not do (said once) goes to the full
    pipeline, which keeps the recipe it makes for the next command."""
    started = time.perf_counter()
    # The tags a command writes are outputs, not inputs: a new one (a CI's commit tag) finds the same kept recipe.
    servable, tags = _tag_values(project)
    key = _recipe.key(replace(project, overrides=tuple(o for o in project.overrides if o[0] != "tags")), options.locked)
    said = None
    if servable and options.push and options.fast_path and not options.no_cache:
        kept = _recipe.kept(key, tags)
        if kept is not None:
            client = None
            if not kept.remote:  # the registry's login (a token) comes while the fast path loads
                from ..oci.client import RegistryClient

                client = RegistryClient(kept.refs("latest", None)[0])
                client.log_in_ahead()
                # And the upload sessions of a code edit's layer and config (and attestations): started meanwhile.
                client.open_uploads(4 if options.attest else 2)
            from ..pipeline.fastbuild import append_edit

            try:
                outcome = append_edit(kept, options, reporter, started)
            finally:
                if client is not None:
                    client.cancel_uploads()
            if isinstance(outcome, BuildResult):
                return outcome
            said = outcome
    from ..pipeline.build import build as build_image  # the pipeline: config, plan, render, builders
    from ..pipeline.build import make_recipe, prepare_resolved

    with consulted() as paths:
        config = load(project)
        if config.multi_platform:  # each platform's build, and their index: no kept recipe (one image each)
            from ..pipeline.build import build_platforms, recipes_of

            return build_platforms(config, options, reporter, recipes_of(config, options))
        prepared = prepare_resolved(config, locked=options.locked, offline=options.offline)
        made = make_recipe(prepared.config, prepared.plan)
    _recipe.keep(key, made, paths, tags)
    return build_image(prepared.config, options, reporter, made, fast_path_said=said, resolution=prepared.resolution)


def _tag_values(project: Project) -> tuple[bool, tuple[str, ...] | None]:
    """(whether a kept recipe may serve, the tags the command gives as text: --tag, tags=[...]; None for none). A
    value that is not a list of strings may not: the config refuses it, with the full pipeline's message."""
    given = dict(project.overrides).get("tags")
    if given is None:
        return True, None
    if isinstance(given, (list, tuple)) and all(isinstance(t, str) for t in given):
        return True, tuple(given)
    return False, None


# The flag of each switch of BuildOptions (a field whose default is a bool), as the CLI names it.
_SWITCH_FLAGS = {"push": "--push", "no_cache": "--no-cache", "locked": "--locked", "fast_path": "--no-fast-path",
                 "offline": "--offline", "attest": "--no-attest"}


def check_build_options(options: BuildOptions) -> None:
    for item in fields(BuildOptions):
        value = getattr(options, item.name)
        if isinstance(item.default, bool) and not isinstance(value, bool):
            raise ConfigError(f"{show(value)} is not allowed: true or false",
                              field=_SWITCH_FLAGS.get(item.name, "--" + item.name.replace("_", "-")))
        if item.default is None and value is not None and not isinstance(value, (str, os.PathLike)):
            raise ConfigError(f"{show(value)} is not allowed: a string", field="--" + item.name.replace("_", "-"))
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


def warm_up(watched: bool = False) -> tuple[str, ...]:
    """For a process that runs many builds and dry runs (the warm process, a notebook): do once what each of them
    would do first, so that none pays for it. The patterns of the loaded modules are compiled, and the default
    .dockerignore rendered and translated (a project's own lines add to it). Changes no file but the render cache.
    watched: the caller ends before any file this returns changes (the warm process watches them): buildkit-py's
    own files are then listed once here, not by every command's kept-recipe key. Returns those files (() unless
    watched)."""
    from ..patterns import compile_all
    from ..pipeline.recipe import hold_own_files
    from ..pipeline.render import render_dockerignore
    from ..sources.ignore import parse_ignore

    parse_ignore(render_dockerignore(None))
    compile_all()
    return hold_own_files() if watched else ()
