"""Images as values, as go-containerregistry has them: an image is its manifest's media type, its config and its
layers, made and changed in memory (`replace_top`), then sent to a registry in one call (`write`), which uploads
what the registry lacks and tags last, so that an interrupted or refused write leaves no tag on a half-written
image."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..errors import RegistryError, show
from ..fsutil import in_background
from .client import PushResult, RegistryClient, check_answer, json_object, refusal, send, upload_blob
from .media import IMAGE_TYPES, LAYER_TYPES, digest_of
from .refs import ImageRef

_TAGGED = (201, 200)  # a manifest PUT that stored and tagged


class Refused(RegistryError):
    """The registry cannot hold the image (e.g. it refuses its manifest's media type): another way may."""


class PartlyTagged(RegistryError):
    """A tag was refused after others were written: those name the complete new image."""


class LostLayer(RegistryError):
    """A layer the image takes from the registry is no longer there: a manifest naming it would be an image nobody
    can pull."""

    def __init__(self, digest: str) -> None:
        super().__init__(f"layer {digest} is gone from the registry")
        self.digest = digest


@dataclass(frozen=True)
class Layer:
    """One layer: its descriptor's fields, the digest of its uncompressed tar (the config's rootfs lists it), and
    its compressed bytes where this process made it (None: the registry has it)."""

    media_type: str
    digest: str
    size: int
    diff_id: str
    blob: bytes | None = None
    as_read: tuple[tuple[str, Any], ...] = ()  # a read layer's descriptor whole (annotations too), in its order

    @classmethod
    def of(cls, blob: bytes, diff_id: str, media_type: str) -> Layer:
        return cls(media_type, digest_of(blob), len(blob), diff_id, blob)

    def descriptor(self) -> dict[str, Any]:
        return dict(self.as_read) or {"mediaType": self.media_type, "size": self.size, "digest": self.digest}


@dataclass(frozen=True)
class Image:
    """One platform's image: the manifest's media type (OCI or Docker schema 2), the config as stored (its digest
    names the image, as an engine does) and the layers, lowest first."""

    media_type: str
    config_media_type: str
    config: bytes
    layers: tuple[Layer, ...]

    # Worked out once per value (write, the fast path's record and its message all ask): the value never changes.
    @cached_property
    def config_digest(self) -> str:
        return digest_of(self.config)

    def config_json(self) -> dict:
        return json_object(self.config, "the image config")

    @cached_property
    def manifest(self) -> bytes:
        return json.dumps({"schemaVersion": 2, "mediaType": self.media_type,
                           "config": {"mediaType": self.config_media_type, "size": len(self.config),
                                      "digest": self.config_digest},
                           "layers": [layer.descriptor() for layer in self.layers]}, indent=3).encode()

    @cached_property
    def digest(self) -> str:
        return digest_of(self.manifest)


def read_image(manifest: dict, media_type: str, config: bytes, what: str = "the image") -> Image:
    """The image a registry holds as MANIFEST (of MEDIA_TYPE) with its CONFIG blob: each layer with the diff_id the
    config lists for it. Raises Refused where the two do not describe one image this module can write (WHAT names
    it in the message)."""
    if media_type not in IMAGE_TYPES:
        raise Refused(f"{what}'s manifest is {show(media_type)}, which buildkit-py does not write")
    descriptor = manifest.get("config") or {}
    layers = manifest.get("layers") or []
    diff_ids = (json_object(config, "the image config").get("rootfs") or {}).get("diff_ids") or []
    if not layers or not isinstance(layers, list) or not isinstance(diff_ids, list) or len(layers) != len(diff_ids):
        raise Refused(f"{what}'s layers and its config's diff_ids do not match")
    try:
        return Image(media_type, str(descriptor["mediaType"]), config, tuple(
            Layer(str(layer["mediaType"]), str(layer["digest"]), int(layer["size"]), str(diff_id),
                  as_read=tuple(layer.items()))
            for layer, diff_id in zip(layers, diff_ids, strict=True)))
    except (AttributeError, KeyError, TypeError, ValueError):
        raise Refused("the image's manifest has a descriptor without a media type, digest or size") from None


def replace_top(image: Image, blob: bytes, diff_id: str, labels: Iterable[tuple[str, str]],
                dropped: Iterable[str] = ()) -> Image:
    """The image with its top layer replaced by BLOB (gzipped; DIFF_ID its tar's digest): the config's diff_ids
    follow, the labels in DROPPED are removed and LABELS set. History and every other field stay as they are."""
    config = image.config_json()
    config["rootfs"] = {**config["rootfs"], "diff_ids": [layer.diff_id for layer in image.layers[:-1]] + [diff_id]}
    settings = config.setdefault("config", {})
    new_labels = dict(settings.get("Labels") or {})
    for name in dropped:
        new_labels.pop(name, None)
    new_labels.update(labels)
    settings["Labels"] = new_labels
    return Image(image.media_type, image.config_media_type,
                 json.dumps(config, separators=(",", ":"), ensure_ascii=False).encode(),
                 image.layers[:-1] + (Layer.of(blob, diff_id, LAYER_TYPES[image.media_type]),))


@dataclass(frozen=True)
class Written:
    """An image written to its registry: the push result of each tag, the layers uploaded, and the timings."""

    pushed: tuple[PushResult, ...]  # one per tag, the first tag's first
    sent: tuple[str, ...]  # the digests of the layers uploaded (a layer the registry had is not)
    timings: tuple[tuple[str, float], ...]  # (stage, seconds): upload, manifest


def _lost_layer(client: RegistryClient, digests: Sequence[str]) -> str | None:
    """The first of these blobs the registry does not have, or None."""
    return next((d for d in digests if not client.has_blob(d)), None)


def _answer(request: Callable[[], Any]) -> Any:
    """A request's response, or the RegistryError it raised (each tag's answer is weighed with the others')."""
    try:
        return request()
    except RegistryError as exc:
        return exc


def write(client: RegistryClient, image: Image, refs: Sequence[ImageRef],
          stored: Callable[[set[str]], None] | None = None, seen: bool = False) -> Written:
    """Send IMAGE to the repository of REFS (all of one repository) and tag it under each: the layers it made and
    its config uploaded (the layers the registry should have checked meanwhile, over a few connections at once),
    then the manifest under every tag at once. stored: called with the config and manifest digests once the
    registry holds the image under the first ref, while the others are still being tagged. seen: this machine
    appended the image's code layer before (it and its config are likely in the registry: asked for before they
    are sent).
    Raises LostLayer before any tag when a layer it takes from the registry is gone, Refused where the registry
    refuses the manifest under every tag, PartlyTagged where some tags were written, RegistryError otherwise."""
    started = time.perf_counter()
    ref = refs[0]
    kept = [layer.digest for layer in image.layers if layer.blob is None]
    client.check_blobs(kept)  # asked at once, unless asked ahead (a code edit asks while it stages its files)
    lost = [in_background(_lost_layer, client.fork(), kept)] if kept else []
    # The config and the layers made here are new unless the same content went up before: asked meanwhile.
    config_sent = in_background(lambda: upload_blob(client.fork(), ref, image.config_digest, image.config,
                                                    likely_new=True, seen=seen))
    sent = tuple(layer.digest for layer in image.layers if layer.blob is not None and upload_blob(
        client, ref, layer.digest, layer.blob, likely_new=True, seen=seen))
    config_sent()
    timings = [("upload", time.perf_counter() - started)]
    missing = next((d for d in (check() for check in lost) if d), None)
    if missing:
        raise LostLayer(missing)

    started = time.perf_counter()
    body, digest = image.manifest, image.digest
    headers = {"Content-Type": image.media_type}
    # Every tag at once, each on its own connection: a registry checks the manifest whole (media type, every blob)
    # before it tags, so a manifest it refuses is refused under every name and no tag is written.
    others = [in_background(send, client.fork(), "PUT", f"manifests/{t.tag}", headers, body) for t in refs[1:]]
    replies: list = [_answer(lambda: send(client, "PUT", f"manifests/{ref.tag}", headers, body))]
    if stored is not None and not isinstance(replies[0], Exception) and replies[0].status_code in _TAGGED:
        stored({image.config_digest, digest})
    replies += [_answer(waiting) for waiting in others]
    results, refused, failed = [], [], []
    for target, reply in zip(refs, replies, strict=True):
        if isinstance(reply, Exception):
            failed.append(reply)
        elif reply.status_code == 415 or reply.status_code == 400 and any(
                code in reply.text for code in ("MANIFEST_INVALID", "UNSUPPORTED")):
            refused.append(Refused(f"{ref.registry} refuses the appended image's manifest ({refusal(reply)})"))
        else:
            try:
                check_answer(client, reply, target, f"the tag {target.tag}", _TAGGED)
            except RegistryError as exc:
                failed.append(exc)
                continue
            results.append(PushResult(f"{target.repository}@{digest}", target.tag or "latest", digest, len(body)))
    if not results:
        raise (refused or failed)[0]
    if refused or failed:
        raise PartlyTagged(f"{'; '.join(map(str, refused + failed))}; {', '.join(r.tag for r in results)} already "
                           f"name the whole new image {digest}")
    timings.append(("manifest", time.perf_counter() - started))
    return Written(tuple(results), sent, tuple(timings))
