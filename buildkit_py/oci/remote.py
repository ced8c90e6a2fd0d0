"""What an image is in its registry (its manifest's digest and the platforms it runs on), and a multi-platform
image's index of the platforms' manifests, assembled in the registry."""


from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import RegistryError, show
from ..progress import Reporter
from .client import PushResult, RegistryClient, check_answer, json_object, send
from .credentials import AuthProvider
from .media import DIGEST, DOCKER_LIST, DOCKER_MANIFEST, IMAGE_TYPES, INDEX_TYPES, MANIFEST_TYPES, OCI_INDEX
from .refs import ImageRef


@dataclass(frozen=True)
class Manifest:
    """An image's manifest in its registry: its digest, its media type and the platforms the image runs on."""

    digest: str
    media_type: str
    platforms: tuple[str, ...]  # os/arch[/variant] the image runs on


def manifest(ref: ImageRef, hint: str = "") -> Manifest:
    """HEAD the image's manifest; then read the platforms it runs on (the index, or the config blob). hint: what
    ends the error when the registry cannot be reached or read from here."""
    registry = RegistryClient(ref)
    reference = ref.digest or ref.tag or "latest"
    try:
        head = registry.request("HEAD", f"manifests/{reference}", {"Accept": MANIFEST_TYPES})
    except RegistryError as exc:  # unreachable, or no credentials here
        raise RegistryError(f"{exc}{hint}") from None
    if head.status_code == 404:
        untagged = "" if ref.digest or ref.tag else (
            " (no tag given, so :latest; `build --push` pushes the content tag `buildkit-py print image-uri` prints, "
            "and the git tag)")
        raise RegistryError(f"{ref} is not in {ref.registry}{untagged}: push it first (buildkit-py build --push)")
    if head.status_code in (401, 403):
        raise RegistryError(f"{ref.registry} refused to show {ref} ({head.status_code}): check the credentials" + hint)
    if head.status_code != 200:
        raise RegistryError(f"{ref.registry} answered HEAD of {ref} with HTTP {head.status_code}{hint}")
    digest = ref.digest or head.headers.get("Docker-Content-Digest", "")
    media = head.headers.get("Content-Type", "").split(";")[0]
    body = registry.request("GET", f"manifests/{digest or reference}", {"Accept": MANIFEST_TYPES})
    try:
        data = body.json()
    except ValueError:
        data = {}
    platforms: list[str] = []
    if media in INDEX_TYPES or "manifests" in data:
        for item in data.get("manifests") or []:
            p = item.get("platform") or {}
            if p.get("os") and p.get("architecture") and p.get("os") != "unknown":  # unknown: attestations
                platforms.append("/".join(filter(None, (p["os"], p["architecture"], p.get("variant")))))
    else:
        config = (data.get("config") or {}).get("digest", "")
        blob = registry.request("GET", f"blobs/{config}", {"Accept": "*/*"}) if DIGEST.fullmatch(config) else None
        try:
            info = blob.json() if blob is not None and blob.status_code == 200 else {}
        except ValueError:
            info = {}
        if info.get("os") and info.get("architecture"):
            platforms.append("/".join(filter(None, (info["os"], info["architecture"], info.get("variant")))))
    if not DIGEST.fullmatch(digest):
        raise RegistryError(f"{ref.registry} gave no sha256 digest for {ref}")
    return Manifest(digest, media, tuple(platforms))


@dataclass(frozen=True)
class IndexEntry:
    """One platform's manifest in an index: the OCI descriptor's fields (image-spec descriptor.md, image-index.md)."""

    platform: str  # os/arch[/variant], as the image's config says it
    digest: str
    media_type: str
    size: int


def read_entry(client: RegistryClient, ref: ImageRef, digest: str, platform: str) -> IndexEntry:
    """The manifest pushed as DIGEST, as an index names it, its platform read from the image's config: a build for
    PLATFORM whose config says another (a base image of the wrong architecture) is refused, not indexed under it."""
    got = send(client, "GET", f"manifests/{digest}", {"Accept": MANIFEST_TYPES})
    check_answer(client, got, ref, f"the read of manifest {digest}", (200,))
    body = got.content
    if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
        raise RegistryError(f"{ref.registry} gave back another manifest than {digest}")
    media = got.headers.get("Content-Type", "").split(";")[0]
    config = (json_object(body, f"the manifest {digest}").get("config") or {}).get("digest", "")
    if media not in IMAGE_TYPES or not DIGEST.fullmatch(config):
        raise RegistryError(f"{ref}@{digest} is not an image manifest ({show(media)}): an index names images")
    blob = send(client, "GET", f"blobs/{config}", {"Accept": "*/*"})
    check_answer(client, blob, ref, f"the read of config {config}", (200,))
    info = json_object(blob.content, f"the image config {config}")
    found = "/".join(str(info.get(k)) for k in ("os", "architecture") if info.get(k))
    wanted = "/".join(platform.split("/")[:2])
    if found != wanted:
        raise RegistryError(f"the {platform} build made a {found or 'platformless'} image ({ref}@{digest}): its base "
                            f"image has no {platform} image (a stand-in imported for another architecture?)")
    variant = info.get("variant") if isinstance(info.get("variant"), str) else None
    return IndexEntry(found + (f"/{variant}" if variant else ""), digest, media, len(body))


def index_bytes(entries: Sequence[IndexEntry]) -> tuple[bytes, str]:
    """The index naming ENTRIES, and its media type: a Docker manifest list where every entry is a Docker manifest
    (what `docker buildx` and the engine's pushes make of those), else an OCI image index. Compact JSON in a fixed
    key order, so the same platforms' manifests always make the same index digest."""
    media = DOCKER_LIST if all(e.media_type == DOCKER_MANIFEST for e in entries) else OCI_INDEX

    def platform(text: str) -> dict[str, str]:
        os_, arch, *variant = text.split("/")
        return {"architecture": arch, "os": os_} | ({"variant": variant[0]} if variant else {})

    document = {"schemaVersion": 2, "mediaType": media, "manifests": [
        {"mediaType": e.media_type, "digest": e.digest, "size": e.size, "platform": platform(e.platform)}
        for e in entries]}
    return json.dumps(document, separators=(",", ":")).encode(), media


def put_index(refs: Sequence[ImageRef], pushed: Sequence[tuple[str, str]], reporter: Reporter,
              providers: Iterable[AuthProvider] | None = None) -> tuple[tuple[PushResult, ...], tuple[IndexEntry, ...]]:
    """The index of the platforms' manifests, (platform, digest) each as pushed into the repository of REFS, PUT
    under every ref (all in that repository: an index names only manifests of its own). Each manifest is read and
    checked first, so nothing is PUT unless every platform's image is there and is of its platform."""
    client = RegistryClient(refs[0], providers)
    entries = tuple(read_entry(client, refs[0], digest, platform) for platform, digest in pushed)
    body, media = index_bytes(entries)
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    results = []
    for ref in refs:
        put = send(client, "PUT", f"manifests/{ref.tag or 'latest'}", {"Content-Type": media}, body)
        check_answer(client, put, ref, f"the index {ref}", (200, 201))
        if put.headers.get("Docker-Content-Digest", digest) != digest:
            raise RegistryError(f"{ref.registry} stored the index {ref} as {put.headers['Docker-Content-Digest']}, "
                                f"not {digest}")
        reporter.message(f"pushed the index {ref}@{digest} ({', '.join(e.platform for e in entries)})")
        results.append(PushResult(f"{ref.repository}@{digest}", ref.tag or "latest", digest, len(body)))
    return tuple(results), entries
