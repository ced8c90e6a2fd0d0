"""The Dockerfile of a config, as a dry run: config -> plan -> (resolution) -> render, and what they made kept by the
digest of their inputs (pipeline/recipe.py: the project, the flags, the environment, this buildkit-py's files, and
every file the stages read or looked for, a kept resolution's included), so that the same dry run again loads none
of those stages and asks no index."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..catalog.resources import LAUNCHER_CONTEXT_DIR, launcher_sources
from ..fsutil import consulted, reads_once, write_atomic
from ..pipeline import recipe as _recipe
from ..pipeline.buildtypes import platform_suffix
from ..progress import HtmlRepr
from .project import Project, Source, checked, output_file, project_from

KEPT_DRY_RUNS = "dockerfiles"  # the cache folder of kept dry runs, beside the recipes


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


@dataclass(frozen=True)
class _Rendered:
    """What the stages made of a config: each platform's Dockerfile and the files written beside it (the launcher,
    a lock's requirements), the .dockerignore, and the notes; kept as JSON for the next same dry run."""

    root: Path
    dockerfiles: tuple[tuple[str | None, str, tuple[tuple[str, str], ...]], ...]  # (platform, text, (rel, source))
    dockerignore: str
    multi_platform: bool
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"root": str(self.root), "dockerfiles": [[p, text, [list(c) for c in copies]]
                                                        for p, text, copies in self.dockerfiles],
                "dockerignore": self.dockerignore, "multi_platform": self.multi_platform, "notes": list(self.notes)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> _Rendered:
        return cls(Path(data["root"]), tuple((p, str(text), tuple((str(rel), str(src)) for rel, src in copies))
                                             for p, text, copies in data["dockerfiles"]),
                   str(data["dockerignore"]), bool(data["multi_platform"]), tuple(map(str, data["notes"])))


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
    project = project_from(source, settings, "dockerfile", ["output", "resolve"])
    key = _recipe.key(project, ("dockerfile", resolve))
    kept = _recipe.kept_output(KEPT_DRY_RUNS, key)
    rendered = None
    if kept is not None:
        try:
            rendered = _Rendered.from_json(kept)
        except (KeyError, TypeError, ValueError):
            pass  # a record of another shape: made again
    if rendered is None:
        with consulted(listings=True) as paths:  # a file added to the trainer may change what inference finds
            rendered, settled = _render(project, resolve)
        if settled:
            _recipe.keep_output(KEPT_DRY_RUNS, key, paths, rendered.to_json())
    return _result(rendered, output)


def _render(project: Project, resolve: bool) -> tuple[_Rendered, bool]:
    """What config -> plan -> (resolution) -> render make of the project, and whether it may be kept: not where the
    resolution asked and no index answered (the next dry run asks again)."""
    from ..pipeline import lock as _lock
    from ..pipeline.plan import make_plan
    from ..pipeline.render import render_dockerfile, render_project_dockerignore
    from ..pipeline.resolution import check_resolution, declared_in, remembered, resolve_plan
    from .project import load

    whole = load(project)
    made = []
    notes: list[str] = []
    settled = True
    for each in whole.each_platform():
        plan = _lock.apply(each, make_plan(each), locked=False)
        config = each
        if resolve:
            if whole.multi_platform:  # each platform's set as it is (a lock's was resolved when written)
                resolution = check_resolution(config, plan, declared_in(config, plan))
            else:  # the framework release and Python chosen with the rest where nobody pinned them
                resolved = resolve_plan(each, plan, declared_in(each, plan))
                config, plan, resolution = resolved.config, resolved.plan, resolved.resolution
            if resolution is not None and not resolution.checked:
                settled = False
                if resolution.note not in notes:
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
        copies = tuple((rel, str(src)) for rel, src in launcher_sources()) + \
            (((plan.lock.requirements, str(plan.lock.source)),) if plan.lock else ())
        made.append((config.platform, render_dockerfile(plan, root=config.root), copies))
    return _Rendered(whole.root, tuple(made), render_project_dockerignore(whole.root), whole.multi_platform,
                     tuple(notes)), settled


def _result(rendered: _Rendered, output: Path | None) -> DockerfileResult:
    """The result of RENDERED; with OUTPUT, its files written."""
    platforms = tuple((p or "", text) for p, text, _ in rendered.dockerfiles) if rendered.multi_platform else ()
    text, ignore = rendered.dockerfiles[0][1], rendered.dockerignore
    if output is None:
        return DockerfileResult(text, ignore, platforms=platforms, notes=rendered.notes)
    written: list[Path] = []
    for platform, text_p, copies in rendered.dockerfiles:
        path = output.with_name(f"{output.name}.{platform_suffix(platform or '')}") if platforms else output
        # BuildKit reads <Dockerfile>.dockerignore before the context's own .dockerignore.
        ignore_path = path.with_name(path.name + ".dockerignore")
        write_atomic(path, text_p)
        write_atomic(ignore_path, ignore)
        written += [path, ignore_path]
        for rel, src in copies:
            write_atomic(rendered.root / rel, Path(src).read_text(encoding="utf-8"))
    return DockerfileResult(text, ignore, (*written, rendered.root / LAUNCHER_CONTEXT_DIR), platforms, rendered.notes)
