"""What a build is asked to do (BuildOptions) and what it gives back (BuildResult): apart from the pipeline, so
that a command that only appends a code layer (fastbuild.py) imports none of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..progress import HtmlRepr

if TYPE_CHECKING:
    from ..oci.client import PushResult
    from ..oci.referrers import Attached
    from .plan import Plan
    from .recipe import Recipe



@dataclass(frozen=True)
class BuildOptions:
    """What this one build does; how images are built (tags, platform, network, CA bundle, pip
    index, builder, allowed files) is in the Config, from the config file or flags."""

    push: bool = False
    docker: str | None = None  # the docker client that runs BuildKit (default: $BUILDKIT_PY_DOCKER or found)
    no_cache: bool = False
    # A registry image to reuse layers from and refresh (e.g. REPO:buildcache): what CI runners with
    # an empty engine need. BuildKit keeps the cache inline in that image; buildah in that repository.
    cache_ref: str | None = None
    locked: bool = False  # buildkit.lock must be there and current (CI): else exit 2 naming what changed
    cloudbuild_endpoint: str | None = None  # builder cloudbuild: the API (default: $BUILDKIT_PY_CLOUDBUILD_ENDPOINT or Google's)
    # A pushed code-only edit is appended to the last pushed image in the registry (fastpath.py); False: always
    # build and push every changed layer through the engine.
    fast_path: bool = True
    # The image's requirements are not resolved against the package indexes before an engine build (also
    # BUILDKIT_PY_OFFLINE=1); said in the output.
    offline: bool = False
    # A pushed image gets its SBOM and provenance attached in the registry (pipeline/attest.py); False: none.
    attest: bool = True


@dataclass(frozen=True)
class PlatformImage:
    """One platform's image of a multi-platform build: its engine tag and image, content digest and, pushed, the
    digest of its manifest in the index's repository."""

    platform: str  # os/arch[/variant], as the config names it
    tag: str  # the engine's tag of it: CONTENT-TAG-OS-ARCH
    image_id: str
    content_digest: str
    built: bool
    digest: str | None = None  # pushed: its manifest, which the index names


@dataclass(frozen=True)
class BuildResult(HtmlRepr):
    """A built image: its ID, tags, content digest and plan; pushed, each tag's repository@digest."""

    image_id: str
    tags: tuple[str, ...]
    built: bool  # False: an image with the same content tag already existed
    content_digest: str
    recipe: Recipe = field(repr=False)  # what config -> plan -> render made of the project for this build
    pushed: tuple[PushResult, ...] = field(default=())
    # (stage, seconds) of a fast-path append: scan, base (reading the previous image), tar, upload,
    # manifest; empty for a build by the engine
    timings: tuple[tuple[str, float], ...] = field(default=())
    attestations: tuple[Attached, ...] = field(default=())  # the SBOM and provenance attached to what was pushed
    # A multi-platform image: each platform's image, in the config's order; `pushed` then names the index (under every
    # tag), image_id is "" (the engine holds one image per platform) and `recipe` is the first platform's.
    platforms: tuple[PlatformImage, ...] = field(default=())
    # (stage, seconds) of a build by the engine: build (absent where the image was up to date), push, attest; where
    # a cold build's time goes (issue 41: most of it is the engine's compression of every layer for the push)
    stages: tuple[tuple[str, float], ...] = field(default=())

    @property
    def plan(self) -> Plan:
        return self.recipe.resolved()

    def to_dict(self) -> dict:
        return {
            "image_id": self.image_id,
            "tags": list(self.tags),
            "built": self.built,
            "content_digest": self.content_digest,
            "pushed": [p.__dict__ for p in self.pushed],
            "fast_path": dict(self.timings) if self.timings else None,
            "stages": dict(self.stages) if self.stages else None,
            "attestations": [a.__dict__ for a in self.attestations],
            "plan": self.recipe.plan,
        } | ({"platforms": [p.__dict__ for p in self.platforms]} if self.platforms else {})


def platform_suffix(platform: str) -> str:
    """linux/arm64/v8 -> linux-arm64-v8: a platform in a tag or a file name."""
    return platform.replace("/", "-")
