"""From a recipe to a pushed image without the engine, when only the code changed: the staged context, its tags
and labels, the fast path's append (fastpath.py), and the engine's stale tags. The full build (build.py) runs
the same steps first; a kept recipe (recipe.py) runs them with nothing of the config, plan or render loaded."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..clients.engine import engine_may_answer
from ..errors import BuildkitError, RegistryError
from ..fsutil import asked_once, in_background
from ..launcher.constants import IMPORTS_CONTEXT_FILE
from ..oci.refs import ImageRef
from ..progress import Reporter
from .attest import Built, artifacts
from .buildtypes import BuildOptions, BuildResult
from .context import BuildContext, add_generated, staged
from .names import BUILD_LABELS, CONTENT_LABEL, REVISION_LABEL, VARIANT_LABEL
from .publish import Made, publish
from .recipe import Recipe

if TYPE_CHECKING:  # the registry client loads with a push
    from ..sources.imports import ImportSet
    from . import fastpath


def git_revision(root: Path) -> str | None:
    """The commit of the trainer's checkout, with -dirty when its files have local changes: one git run, asked once
    per command."""
    return asked_once(("git", str(root)), lambda: _revision(root))


def _revision(root: Path) -> str | None:
    try:
        # v2 with --branch: the commit on a header line, then a line for each changed file under the directory.
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain=v2", "--branch", "--", "."],
                                capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = status.stdout.splitlines()
    commit = next((line.split()[2] for line in lines if line.startswith("# branch.oid ")), None)
    if status.returncode != 0 or commit is None or not all(c in "0123456789abcdef" for c in commit):
        return None  # not a checkout, or no commit yet ("(initial)")
    return commit[:12] + ("-dirty" if any(not line.startswith("#") for line in lines) else "")


@dataclass(frozen=True)
class Staged:
    """The stage's hand-off to the build or the append: the recipe's context staged (each file read once, copied and
    hashed as it is copied: the content tag names exactly what the builder gets, whatever changes in the directory
    meanwhile), its tags (the content tag first), the build's labels and the modules its import check imports."""

    recipe: Recipe
    context: BuildContext
    refs: tuple[ImageRef, ...]
    labels: tuple[tuple[str, str], ...]
    imports: ImportSet | None
    revision: str | None  # the git commit (-dirty) of the trainer's checkout, or None
    scan: float  # seconds from the command's start to the staged context: the fast path's first timing


@contextmanager
def staging(recipe: Recipe, revision: Callable[[], str | None], reporter: Reporter, started: float) -> Iterator[Staged]:
    """Stage the recipe's context once; the staged files are removed however the block ends. revision: waits for
    the git revision (asked for meanwhile); started: when the command began."""
    with staged(recipe.listing()) as ctx:
        imports = None
        if recipe.import_check is not None:  # the import check's module list, from the files the build gets
            from ..sources.imports import staged_imports

            kind, name, package_dir = recipe.import_check
            imports = staged_imports(name if kind == "module" else None, name if kind == "script" else None,
                                     package_dir or None, ctx.directory, ctx.snapshot.files)
            ctx = add_generated(ctx, IMPORTS_CONTEXT_FILE, imports.file_bytes())
        for note in recipe.notes + ctx.snapshot.notes:
            reporter.message(f"note: {note}")
        commit = revision()
        labels = [(CONTENT_LABEL, ctx.snapshot.digest)]
        if commit:
            labels.append((REVISION_LABEL, commit))
        if recipe.variant:
            labels.append((VARIANT_LABEL, recipe.variant))
        yield Staged(recipe, ctx, tuple(recipe.refs(f"bk-{ctx.snapshot.digest[:16]}", commit)), tuple(labels), imports,
                     commit, time.perf_counter() - started)


def checked(imports: ImportSet | None) -> tuple[str, ...] | None:
    """What the build record keeps of the import check: the modules the image imports."""
    return tuple(n.module for n in imports.needed) if imports is not None else None


def kept_record(ref: ImageRef, variant: str | None, parts: tuple | None, imports: ImportSet | None
                ) -> fastpath.Record | None:
    """What a full build keeps for the next code-only edit, once the publisher pushed it under REF (it fills in the
    manifest); None where the build can have no record (parts: the attempt's)."""
    if parts is None:
        return None
    from . import fastpath

    return fastpath.Record(ref.repository, variant, parts, "", ref.tag or "", checked(imports))


@dataclass(frozen=True)
class Previous:
    """What the fast path knows before a build: the record of the last push it may append to, and why a kept
    recipe's append could not take this build (said already: not tried again)."""

    record: fastpath.Record | None = None
    said: str | None = None


@dataclass(frozen=True)
class Attempt:
    """What the fast path made of a build: the appended image (None: a full build), the record parts the full build
    keeps for the next edit (None where it cannot have a record), and why the build is a full one."""

    appended: fastpath.Appended | None = None
    parts: tuple | None = None
    why: str | None = None


def attempt(staged: Staged, options: BuildOptions, record: fastpath.Record | None, reporter: Reporter,
            said: str | None = None) -> Attempt:
    """The appended image when only the code changed; else why the build is a full one (said here). said: why, as
    an earlier attempt with the same recipe said: not tried again."""
    from ..oci.client import Unreachable
    from ..oci.image import PartlyTagged, Refused
    from . import fastpath

    recipe, refs, imports = staged.recipe, staged.refs, staged.imports

    def full(why: str, parts: tuple | None) -> Attempt:
        reporter.message(f"{why}: full build")
        return Attempt(None, parts, why)

    if not options.push or recipe.remote:
        return Attempt()
    step = fastpath.code_step(recipe.dockerfile)
    if isinstance(step, str):
        return full(step, None)
    parts = fastpath.record_parts(recipe, step, staged.context.snapshot)
    if said is not None:
        return Attempt(None, parts, said)
    if not options.fast_path or options.no_cache:
        return full("--no-fast-path" if not options.fast_path else "--no-cache", parts)
    same = [r for r in refs if r.repository == refs[0].repository]
    why = "a tag is in another repository" if len(same) != len(refs) else fastpath.full_build_reason(record, parts)
    if why == fastpath.IMPORTS_CHANGED and imports and record and record.imports is not None:
        # The record names what the image was checked for: the modules the edit adds are named.
        new = [n for n in imports.needed if n.module not in record.imports]
        if new:
            why = ("the trainer now imports " + ", ".join(f"{n.module} ({n.where})" for n in new[:3])
                   + (" ..." if len(new) > 3 else "") + ", which the image was not checked for")
    if why:
        return full(why, parts)
    assert record is not None  # full_build_reason
    # The engine's tags of these names, asked while the registry works (buildah keeps images in its own storage).
    local = in_background(_engine_tags, refs) if recipe.builder != "buildah" else None
    untagging: list[Callable[[], str | None]] = []

    def stored(new: set[str]) -> None:  # the engine's older images of these names lose their tags meanwhile
        untagging.append(in_background(_untag_stale, refs, local, new))

    tags = tuple(r.tag or "latest" for r in refs)

    def built(digest: str) -> Built:  # as the provenance names the new image
        return Built(refs[0], digest, tags, staged.context.snapshot.digest, staged.revision, "fast-path")

    try:
        edit = fastpath.CodeEdit(refs, record, step, staged.context.directory, staged.labels, tuple(BUILD_LABELS),
                                 recipe.platform, (lambda d: artifacts(recipe, built(d))) if options.attest else None)
        appended = fastpath.append(edit, reporter, stored=stored if local is not None else None)
    except Refused as exc:
        return full(str(exc), parts)
    except Unreachable as exc:  # nothing was tagged: the engine's own network may reach the registry
        return full(f"{exc} from this machine", parts)
    except PartlyTagged as exc:
        raise RegistryError(f"the fast path failed: {exc}") from None
    except RegistryError as exc:
        raise RegistryError(f"the fast path failed: {exc}; no tag was changed") from None
    finally:
        for untagged in [waiting() for waiting in untagging]:
            if untagged:
                reporter.message(untagged)
    fastpath.save_record(replace(record, manifest=appended.pushed[0].digest, content_tag=refs[0].tag or "",
                                 imports=checked(imports), sent=appended.sent(record),
                                 listed=appended.attached[0].listed if appended.attached else record.listed), reporter)
    return Attempt(appended, parts)


def appended_made(staged: Staged, tried: Attempt) -> Made:
    """The appended image of TRIED, for the publisher: pushed already, attested already where the append did it."""
    image = tried.appended
    assert image is not None
    result = BuildResult(image.image_id, tuple(str(r) for r in staged.refs), True, staged.context.snapshot.digest,
                         staged.recipe, image.pushed, (("scan", staged.scan), *image.timings), image.attached or ())
    return Made(result, staged.refs, staged.revision, attested=image.attached is not None)


def append_edit(recipe: Recipe, options: BuildOptions, reporter: Reporter, started: float) -> BuildResult | str | None:
    """A kept recipe's build: the appended image, else why the build must be a full one (said), or None where the
    fast path was not tried (no record of a previous image: the full build says so)."""
    from . import fastpath

    record = fastpath.load_record(recipe.repository, recipe.variant)
    if record is None or recipe.remote:
        return None
    fastpath.check_ahead(recipe.refs("latest", None)[0], record, recipe.platform)
    describing = in_background(git_revision, recipe.root)  # a git run or two, while the files are copied
    with staging(recipe, describing, reporter, started) as staged:
        tried = attempt(staged, options, record, reporter)
        if tried.appended is None:
            return tried.why
        return publish(appended_made(staged, tried), options, reporter)


def _engine_tags(refs: Sequence[ImageRef]) -> dict[ImageRef, str | None]:
    """The image each ref names in the local engine (None: no such tag); {} where no engine answers."""
    if not engine_may_answer():
        return {}
    from ..builders.engine_images import EngineImages

    images = EngineImages()
    return {ref: images.image_id(ref) for ref in refs}


def _untag_stale(refs: Sequence[ImageRef], local: Callable[[], dict[ImageRef, str | None]], new: set[str]) -> str | None:
    """Once the registry holds the new image, an engine's own tags of these names would still name older images (a
    later `docker run` or `buildkit-py push` of one would use the stale image): such tags are removed, the layers
    kept, so that the next use pulls the new image and only its code layer travels; what to say of it, if anything.
    Pulling it here would cost the edit more than its whole append; an engine without any of these tags (a CI
    runner's) is only asked. A tag whose registry write then fails only costs a pull of what the registry names."""
    from ..builders.engine_images import EngineImages

    images = EngineImages()
    stale: list[ImageRef] = []
    try:
        for ref, image_id in local().items():
            if image_id not in (None, *new):
                images.untag(ref)
                stale.append(ref)
    except BuildkitError as exc:
        return f"note: the local engine's tags may still name older images ({exc}); `docker pull {refs[0]}` brings the new one"
    if stale:
        return (f"the local engine's {', '.join(map(str, stale))} named the previous image: untagged, so `docker run` "
                "and `buildkit-py run` pull the new one (its code layer only)")
    return None
