"""The one way from a build to the registry. A build hands over what it made (`Made`: an image in the engine, an edit
appended in the registry, a remote builder's pushed image) and `publish` pushes it under every tag, keeps what the
next code-only edit appends to, and attaches the SBOM and provenance; `publish_index` puts a multi-platform image's
index over its platforms' images. `build --push`, autopackage's push stage, the fast path, each platform and its
index, and `buildkit-py push` all come here; the backend (which builder, made once a command) is the build's."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..errors import RegistryError
from ..oci.refs import ImageRef
from ..progress import Reporter
from .attest import attested
from .buildtypes import BuildOptions, BuildResult

if TYPE_CHECKING:  # the registry client and the fast path's records load with a push
    from ..builders.base import Builder
    from ..oci.client import PushResult
    from .fastpath import Record


@dataclass(frozen=True)
class Made:
    """What a build made, for the publisher: the result (its `pushed` set already where the image is in the registry:
    appended there, or pushed by a remote builder where it ran), the refs it goes under in the order of `pushed`, the
    checkout's revision for the provenance, and the record the next code-only edit appends to once the image is
    pushed (its `manifest` filled in then; None: the build keeps none), and whether the image is attested already
    (an append attaches its own with the image's write)."""

    result: BuildResult
    refs: tuple[ImageRef, ...]
    revision: str | None
    keep: Record | None = None
    attested: bool = False


def publish(made: Made, options: BuildOptions, reporter: Reporter, engine: Builder | None = None,
            extra: Sequence[ImageRef] = ()) -> BuildResult:
    """The result pushed (with --push, unless it is in the registry already) and attested. engine: the builder that
    holds the image (needed only to push it); extra: more refs of the same image pushed after the tags and left out
    of the result (the inline cache's tag)."""
    result = made.result
    keep = None
    if options.push and not result.pushed:
        assert engine is not None, "an image not in the registry yet is pushed by the builder that holds it"
        started = time.perf_counter()
        pushed = push_image(engine.push, [*made.refs, *extra], reporter)[:len(made.refs)]
        result = replace(result, pushed=pushed, stages=(*result.stages, ("push", time.perf_counter() - started)))
        if made.keep is not None:
            from . import fastpath

            keep = replace(made.keep, manifest=pushed[0].digest)
            fastpath.read_ahead(made.refs[0], pushed[0].digest, result.recipe.platform)
    if not made.attested:
        started = time.perf_counter()
        result = attested(result, made.refs, options, reporter, made.revision)
        if result.attestations and result.stages:  # a build by the engine: where its time went
            result = replace(result, stages=(*result.stages, ("attest", time.perf_counter() - started)))
    if keep is not None:  # with how the registry listed the attestations: the next edit reads that listing at once
        fastpath.save_record(replace(keep, listed=result.attestations[0].listed if result.attestations else None),
                             reporter)
    return result


def publish_index(index: Made, platforms: Sequence[Made], options: BuildOptions, reporter: Reporter) -> BuildResult:
    """A multi-platform image: the index naming each platform's pushed manifest PUT under every ref, attested, and
    each platform's image attested as well. platforms: each platform's image, pushed already."""
    from ..oci.remote import put_index

    pushed, _ = put_index(index.refs, [(p.platform, p.digest or "") for p in index.result.platforms], reporter)
    result = publish(replace(index, result=replace(index.result, pushed=pushed)), options, reporter)
    each = tuple(a for made in platforms for a in publish(made, options, reporter).attestations)
    return replace(result, attestations=result.attestations + each)


def push_image(push: Callable[[ImageRef, Reporter], PushResult], refs: Sequence[ImageRef],
               reporter: Reporter) -> tuple[PushResult, ...]:
    """Push one image under every ref (all tags of one local image), the layers sent once: the first ref by
    PUSH (a builder's or the engine's), its other tags in the same repository as manifests (about 10 ms each on
    loopback, where an engine push that checks every layer again takes 50); a ref in another repository is
    pushed."""
    from ..oci.client import add_tags

    first = push(refs[0], reporter)
    same = [r for r in refs[1:] if r.repository == refs[0].repository]
    try:
        added = dict(zip(map(str, same), add_tags(first, same, reporter), strict=True))
    except RegistryError as exc:
        # The engine's push says the same refusal with its retries and hints, or gets through where this did not.
        reporter.message(f"adding the tags as manifests failed ({exc}); pushing them")
        added = {}
    return (first, *(added.get(str(r)) or push(r, reporter) for r in refs[1:]))
