"""Artifacts attached to an image in its registry (OCI image-spec 1.1 and distribution-spec 1.1): a manifest whose
`subject` is the image's descriptor, whose `artifactType` says what it holds, with the empty config
(application/vnd.oci.empty.v1+json, the two bytes `{}`) and the artifact as its one layer.

A registry with the referrers API answers the manifest's PUT with `OCI-Subject: <subject digest>` and lists it at
`GET /v2/<name>/referrers/<digest>`. One without (distribution 2.8, older Artifact Registry repositories) gets the
referrers tag schema: an image index tagged `sha256-<hex>` listing the artifacts, read, extended and written back
by the client (the tag is the client's to keep; two writers at once may lose one's entry: the spec leaves that to
the clients, and registries without conditional requests give no way to avoid it). Readers (crane, oras, cosign
tree) look in the same two places.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import RegistryError, show
from ..fsutil import in_background
from ..patterns import lazy_pattern
from ..progress import HtmlRepr, Reporter
from .client import RegistryClient, check_answer, send, upload_blob
from .media import DIGEST, EMPTY_BLOB, EMPTY_MEDIA_TYPE, MANIFEST_TYPES, OCI_INDEX, OCI_MANIFEST, digest_of
from .refs import ImageRef

MAX_ARTIFACT = 32 << 20  # an SBOM of a CUDA image is a few MiB; a larger answer is not ours
MAX_PAGES = 32  # pages of a referrers list followed (Link: rel="next")
_UNSAFE = lazy_pattern(r"[^A-Za-z0-9_.-]")  # what a tag cannot hold
_NEXT = lazy_pattern(r'<([^>]+)>\s*;\s*rel="?next"?')


def _canonical(value: dict) -> bytes:
    """The bytes a manifest or index is sent as: sorted keys, no spaces, so the same content is the same digest."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def tag_for(digest: str) -> str:
    """The referrers tag schema's tag of a digest: `<algorithm>-<encoded>`, truncated to 32 and 64 characters."""
    algorithm, _, encoded = digest.partition(":")
    return f"{_UNSAFE.sub('-', algorithm[:32])}-{_UNSAFE.sub('-', encoded[:64])}"


@dataclass(frozen=True)
class Subject:
    """The image's manifest as a descriptor names it."""

    media_type: str
    digest: str
    size: int

    def descriptor(self) -> dict:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


@dataclass(frozen=True)
class Artifact:
    """What to attach: one blob of MEDIA_TYPE, listed as ARTIFACT_TYPE with these annotations."""

    artifact_type: str
    media_type: str
    data: bytes
    annotations: tuple[tuple[str, str], ...] = ()

    def manifest(self, subject: Subject) -> bytes:
        layer = {"mediaType": self.media_type, "digest": digest_of(self.data), "size": len(self.data)}
        empty = {"mediaType": EMPTY_MEDIA_TYPE, "digest": digest_of(EMPTY_BLOB), "size": len(EMPTY_BLOB)}
        body = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": self.artifact_type, "config": empty,
                "layers": [layer], "subject": subject.descriptor()}
        if self.annotations:
            body["annotations"] = dict(self.annotations)
        return _canonical(body)


@dataclass(frozen=True)
class Attached(HtmlRepr):
    """An artifact the registry holds for the image: its manifest's digest, what it is, the blob's digest and how
    the registry lists it ("referrers API" or "tag schema")."""

    artifact_type: str
    digest: str
    blob: str
    listed: str


@dataclass(frozen=True)
class Referrer:
    """An entry of the image's referrers list."""

    media_type: str
    digest: str
    size: int
    artifact_type: str
    annotations: tuple[tuple[str, str], ...]


def subject_of(client: RegistryClient, ref: ImageRef, reference: str) -> Subject:
    """The descriptor of the manifest REFERENCE (a digest or a tag) names, read from the registry (its bytes hashed:
    what is named is what is there)."""
    got = send(client, "GET", f"manifests/{reference}", {"Accept": MANIFEST_TYPES})
    if got.status_code == 404:
        raise RegistryError(f"{ref.repository}{'@' if DIGEST.fullmatch(reference) else ':'}{reference} is not in "
                            f"{ref.registry}")
    check_answer(client, got, ref, f"the read of manifest {reference}", (200,))
    digest = digest_of(got.content)
    if DIGEST.fullmatch(reference) and digest != reference:
        raise RegistryError(f"{ref.registry} gave back another manifest than {reference}")
    try:
        media = json.loads(got.content).get("mediaType")
    except (ValueError, AttributeError):
        media = None
    media = media if isinstance(media, str) else got.headers.get("Content-Type", "").split(";")[0]
    return Subject(media or OCI_MANIFEST, digest, len(got.content))


def pushed_subject(client: RegistryClient, ref: ImageRef, digest: str) -> Subject:
    """The descriptor of a manifest just pushed as DIGEST, from a HEAD (its type and size; the image is not read
    back), else from its bytes."""
    head = send(client, "HEAD", f"manifests/{digest}", {"Accept": MANIFEST_TYPES})
    media = head.headers.get("Content-Type", "").split(";")[0]
    size = head.headers.get("Content-Length", "")
    if head.status_code == 200 and head.headers.get("Docker-Content-Digest", digest) == digest and media in \
            MANIFEST_TYPES.split(", ") and size.isdigit():
        return Subject(media, digest, int(size))
    return subject_of(client, ref, digest)


def config_labels(client: RegistryClient, ref: ImageRef, digest: str) -> dict[str, str] | None:
    """The labels of the image config the manifest at DIGEST names; None where DIGEST names an index (each platform
    has its own) or a manifest without a config."""
    got = send(client, "GET", f"manifests/{digest}", {"Accept": MANIFEST_TYPES})
    check_answer(client, got, ref, f"the read of manifest {digest}", (200,))
    try:
        manifest = json.loads(got.content)
        config = manifest["config"]["digest"]
    except (ValueError, KeyError, TypeError):
        return None
    if digest_of(got.content) != digest or not isinstance(config, str) or not DIGEST.fullmatch(config):
        return None
    blob = send(client, "GET", f"blobs/{config}", {})
    check_answer(client, blob, ref, f"the read of the image config {config}", (200,))
    if digest_of(blob.content) != config:
        raise RegistryError(f"{ref.registry} gave back other bytes than the image config {config}")
    try:
        labels = (json.loads(blob.content).get("config") or {}).get("Labels") or {}
    except (ValueError, AttributeError):
        return None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else None


def _send_blob(client: RegistryClient, ref: ImageRef, subject: str, data: bytes) -> None:
    # A blob that names the subject, pushed just now, is in no registry yet: not asked for first (the provenance
    # names it as its hex digest, the SBOM with its algorithm).
    upload_blob(client, ref, digest_of(data), data, new=subject.removeprefix("sha256:").encode() in data)


@dataclass(frozen=True)
class Sent:
    """The artifacts' manifests as the registry took them: (artifact, manifest bytes, whether the registry said it
    processed the subject) each; and how many of them the referrers tag's index took on meanwhile (None: not
    listed yet)."""

    manifests: tuple[tuple[Artifact, bytes, bool], ...]
    listed: int | None = None


def _push(client: RegistryClient, ref: ImageRef, subject: Subject, artifact: Artifact, config: Callable[[], None]
          ) -> tuple[Artifact, bytes, bool]:
    _send_blob(client, ref, subject.digest, artifact.data)
    body = artifact.manifest(subject)
    config()  # the empty config the manifest names: a registry refuses a manifest whose blobs it lacks
    put = send(client, "PUT", f"manifests/{digest_of(body)}", {"Content-Type": OCI_MANIFEST}, body)
    check_answer(client, put, ref, f"the {artifact.artifact_type} artifact of {subject.digest}", (200, 201))
    return artifact, body, put.headers.get("OCI-Subject", "") == subject.digest


def send_artifacts(client: RegistryClient, ref: ImageRef, subject: Subject, artifacts: Sequence[Artifact],
                   tag_schema: bool = False) -> Sent:
    """Push each artifact with SUBJECT as its subject, its blob then its manifest, each on a connection of its own
    at once (the empty config they name on one more); where TAG_SCHEMA (the registry listed the last ones in the tag
    schema), the referrers tag is read meanwhile. SUBJECT need not be in the registry yet: distribution-spec 1.1 has
    a registry take a manifest whose subject it does not hold, so that an image and its referrers go up in either
    order, and an append sends these while it writes the image. Where TAG_SCHEMA, the index that lists them is
    written as soon as they are in (the registry checks that an index's manifests exist), while the image's own
    manifest goes up: a write of the image that then fails leaves a listing under the tag of a digest no manifest
    has, which the same image's next push finds complete. Raises the first push's RegistryError."""
    config = in_background(_send_blob, client.fork(), ref, subject.digest, EMPTY_BLOB)
    reading = in_background(_read_tag, client.fork(), subject) if tag_schema else None
    pushing = [in_background(_push, client.fork(), ref, subject, a, config) for a in artifacts]
    manifests = tuple(waiting() for waiting in pushing)
    pending = _pending(manifests)
    if reading is None or not pending:
        return Sent(manifests)
    return Sent(manifests, _list_in_tag(client, ref, subject, pending, reading()))


def _pending(manifests: Sequence[tuple[Artifact, bytes, bool]]) -> list[tuple[Artifact, bytes]]:
    """The manifests the registry did not list by their subject: the referrers tag's index lists them."""
    return [(a, body) for a, body, processed in manifests if not processed]


def attach(ref: ImageRef, subject: Subject, artifacts: Sequence[Artifact], reporter: Reporter,
           *, client: RegistryClient | None = None, sent: Sent | None = None) -> tuple[Attached, ...]:
    """Push each artifact with SUBJECT as its subject into REF's repository; where the registry does not say that it
    processed the subject (no OCI-Subject header), the referrers tag schema's index lists them. Pushing the same
    artifacts again changes nothing (each is named by its content; an index that lists them all is not rewritten).
    client: one for REF's repository (else a new one, with the credentials found here); sent: what
    send_artifacts() pushed already, with the image (only the listing is left)."""
    if client is None:
        client = RegistryClient(ref)
    if sent is None:
        sent = send_artifacts(client, ref, subject, artifacts)
    pending = _pending(sent.manifests)
    listed = sent.listed
    if listed is None and pending:  # not listed with the manifests: read and written now
        listed = _list_in_tag(client, ref, subject, pending, _read_tag(client, subject))
    if listed:
        reporter.message(f"listed {listed} artifact(s) of {subject.digest} under the referrers tag "
                         f"{tag_for(subject.digest)}")
    attached = tuple(Attached(a.artifact_type, digest_of(body), digest_of(a.data),
                              "referrers API" if processed else "tag schema") for a, body, processed in sent.manifests)
    for item in attached:
        reporter.message(f"attached {item.artifact_type} {item.digest} to {ref.repository}@{subject.digest} "
                         f"({item.listed})")
    return attached


def unattached(image: str, exc: Exception) -> str:
    """What a push says of IMAGE (repository@digest) whose attestations the registry did not take."""
    return f"note: no SBOM or provenance attached to {image}: {exc}"


def _index_entries(data: object) -> list[dict] | None:
    """The descriptors of an image index, or None when DATA is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("manifests"), list):
        return None
    return [m for m in data["manifests"] if isinstance(m, dict) and isinstance(m.get("digest"), str)]


def _read_tag(client: RegistryClient, subject: Subject):
    return send(client, "GET", f"manifests/{tag_for(subject.digest)}", {"Accept": OCI_INDEX})


def _list_in_tag(client: RegistryClient, ref: ImageRef, subject: Subject, pending: list[tuple[Artifact, bytes]],
                 got) -> int:
    """Read-modify-write of the referrers tag's index: the entries it has (GOT: the tag's read), then ours that it
    lacks; how many it took on (0: it listed them all already)."""
    tag = tag_for(subject.digest)
    entries: list[dict] = []
    if got.status_code == 200:
        try:
            entries = _index_entries(json.loads(got.content)) or []
        except ValueError:
            entries = []  # not an index: the spec reads it as no referrers, and the tag is the schema's
    elif got.status_code != 404:
        check_answer(client, got, ref, f"the read of the referrers tag {tag}", (200, 404))
    have = {e["digest"] for e in entries}
    new = []
    for artifact, body in pending:
        if digest_of(body) in have:
            continue
        entry = {"mediaType": OCI_MANIFEST, "digest": digest_of(body), "size": len(body),
                 "artifactType": artifact.artifact_type}
        if artifact.annotations:
            entry["annotations"] = dict(artifact.annotations)
        new.append(entry)
    if new:
        index = _canonical({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries + new})
        put = send(client, "PUT", f"manifests/{tag}", {"Content-Type": OCI_INDEX}, index)
        check_answer(client, put, ref, f"the referrers tag {tag}", (200, 201))
    return len(new)


def referrers(client: RegistryClient, ref: ImageRef, digest: str) -> tuple[tuple[Referrer, ...], str]:
    """The artifacts the registry lists for the manifest at DIGEST, and where they were listed: the referrers API,
    else (its 404) the tag schema's index (none when that tag is not an index)."""
    got = send(client, "GET", f"referrers/{digest}", {"Accept": OCI_INDEX})
    entries: list[dict] = []
    if got.status_code == 404:
        listed = "tag schema"
        got = send(client, "GET", f"manifests/{tag_for(digest)}", {"Accept": OCI_INDEX})
        if got.status_code not in (200, 404):
            check_answer(client, got, ref, f"the read of the referrers tag {tag_for(digest)}", (200, 404))
        pages = [got] if got.status_code == 200 else []
    else:
        listed = "referrers API"
        check_answer(client, got, ref, f"the referrers list of {digest}", (200,))
        pages = [got]
        while len(pages) < MAX_PAGES:
            following = _NEXT.search(pages[-1].headers.get("Link", ""))
            if not following:
                break
            pages.append(send(client, "GET", following.group(1), {"Accept": OCI_INDEX}))
            check_answer(client, pages[-1], ref, f"the referrers list of {digest}", (200,))
    for page in pages:
        try:
            entries += _index_entries(json.loads(page.content)) or []
        except ValueError:
            if listed == "referrers API":
                raise RegistryError(f"{ref.registry}'s referrers list of {digest} is not JSON") from None
    found = []
    for e in entries:
        annotations = e.get("annotations") if isinstance(e.get("annotations"), dict) else {}
        found.append(Referrer(str(e.get("mediaType", "")), e["digest"], e.get("size") if isinstance(e.get("size"), int)
                              else -1, str(e.get("artifactType", "")),
                              tuple(sorted((str(k), str(v)) for k, v in annotations.items()))))
    return tuple(found), listed


@dataclass(frozen=True)
class Fetched:
    """An artifact read back: its manifest (as JSON) and its one layer's bytes, each checked against its digest."""

    digest: str
    manifest: dict
    layer_media_type: str
    blob: str
    data: bytes


def fetch(client: RegistryClient, ref: ImageRef, digest: str) -> Fetched:
    """The artifact manifest at DIGEST and its layer; a registry that gives other bytes than a digest names is an
    error."""
    if not DIGEST.fullmatch(digest):
        raise RegistryError(f"{ref.registry} lists an artifact by {show(digest)}, which is not a sha256 digest")
    got = send(client, "GET", f"manifests/{digest}", {"Accept": OCI_MANIFEST})
    check_answer(client, got, ref, f"the read of artifact {digest}", (200,))
    if digest_of(got.content) != digest:
        raise RegistryError(f"{ref.registry} gave back another artifact manifest than {digest}")
    try:
        manifest = json.loads(got.content)
    except ValueError:
        raise RegistryError(f"artifact {digest} is not JSON") from None
    layers = manifest.get("layers") if isinstance(manifest, dict) else None
    if not isinstance(layers, list) or len(layers) != 1 or not isinstance(layers[0], dict) \
            or not DIGEST.fullmatch(str(layers[0].get("digest"))):
        raise RegistryError(f"artifact {digest} does not have one layer named by a sha256 digest")
    blob = layers[0]["digest"]
    size = layers[0].get("size")
    if not isinstance(size, int) or not 0 <= size <= MAX_ARTIFACT:
        raise RegistryError(f"artifact {digest}'s layer has size {show(size)}: at most {MAX_ARTIFACT} bytes are read")
    data = send(client, "GET", f"blobs/{blob}", {})
    check_answer(client, data, ref, f"the read of blob {blob}", (200,))
    if len(data.content) != size or digest_of(data.content) != blob:
        raise RegistryError(f"{ref.registry} gave back other bytes than blob {blob} of artifact {digest}")
    return Fetched(digest, manifest, str(layers[0].get("mediaType", "")), blob, data.content)
