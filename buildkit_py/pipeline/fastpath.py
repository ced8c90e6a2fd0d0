"""The fast path: a code-only edit becomes a new image in the registry, with no build, no engine and no push.

A full build that pushes leaves a build record (in cache_dir(), one per repository and variant) naming what lies
below the code layer: the plan, the Dockerfile, the content of every file an earlier step copies, the package
index settings and CA bundle (as hashes: the record never holds a secret), the builder and the platform. When
all of that is unchanged, the previous image (the record's manifest digest) keeps its layers below the code
layer, and the staged context becomes the new code layer, as the Dockerfile's final `COPY . DIR` lays it out:
sorted entries, root-owned, the staged modes and fixed mtimes, gzip without a timestamp. Blob, config and
manifest go up through the registry API (Docker v2 or OCI, as the previous image was); tags come last, so an
interrupted or refused append leaves no tag on a half-written image.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import posixpath
import shlex
import stat
import tarfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import OutputError, RegistryError, show
from ..fsutil import cache_dir, in_background, write_atomic
from ..launcher.constants import IMPORTS_CONTEXT_FILE
from ..oci.client import PushResult, RegistryClient, check_answer, json_object, send
from ..oci.credentials import AuthProvider
from ..oci.image import Image, LostLayer, Refused, read_image, replace_top, write
from ..oci.media import DIGEST, INDEX_TYPES, MANIFEST_TYPES, digest_of
from ..oci.referrers import Artifact, Attached, Subject, attach, send_artifacts, unattached
from ..oci.refs import ImageRef
from ..progress import Reporter
from ..sources.dockerfile import exec_form, instructions
from .context import FIXED_MTIME, Snapshot
from .names import EXTENSIONS_STAGE

RECORD_SCHEME = 1
IMPORTS_CHANGED = "the modules the trainer imports changed: the image's import check runs again"
if TYPE_CHECKING:
    from .recipe import Recipe

GZIP_LEVEL = 6  # fixed: another level gives another blob digest for the same code
# Instructions that change the image config but add no layer: allowed after the code COPY.
_METADATA_ONLY = frozenset(("ENV", "LABEL", "ENTRYPOINT", "CMD", "EXPOSE", "STOPSIGNAL", "HEALTHCHECK", "USER", "ARG",
                            "SHELL", "VOLUME", "MAINTAINER", "ONBUILD"))
_LAYERS = frozenset(("FROM", "RUN", "COPY", "ADD", "WORKDIR"))
# Why each part of the record differs, as the output says it.
_WHY = {"plan": "the plan changed (base image, Python, framework or packages)",
        "dockerfile": "the template changed (the Dockerfile is not the same)",
        "secrets": "the package index settings or the CA bundle changed",
        "builder": "the builder or the platform changed"}


@dataclass(frozen=True)
class CodeStep:
    """The Dockerfile's final `COPY . DEST` and the context paths that earlier steps copy."""

    dest: str
    instruction: str
    earlier_sources: tuple[str, ...]


@dataclass(frozen=True)
class Record:
    """The build record of a repository and variant: what lies below the code layer, the last image pushed."""

    repository: str
    variant: str | None
    parts: tuple[tuple[str, str], ...]  # (name, sha256) of each thing below the code layer
    manifest: str  # digest of the last image pushed for this repository and variant
    content_tag: str
    imports: tuple[str, ...] | None = None  # the modules its build's import check imported; None: no check
    # How the registry listed the last append's attestations ("referrers API" or "tag schema"); None: not known yet.
    listed: str | None = None
    # The code layers this machine appended to the repository, newest last (RECENT_LAYERS at most): an edit back to
    # one of them asks the registry before it sends the layer again.
    sent: tuple[str, ...] = ()


RECENT_LAYERS = 32


@dataclass(frozen=True)
class Appended:
    """The image the fast path wrote (the recorded one with a new code layer): its ID, the push results,
    timings and attestations."""

    image_id: str  # the config digest, as an engine names the image
    pushed: tuple[PushResult, ...]
    timings: tuple[tuple[str, float], ...]  # (stage, seconds): base, tar, upload, manifest
    # Its attestations (CodeEdit.attestations) as the registry took them; None: left to the publisher (an image
    # tagged again, unchanged: its own are there).
    attached: tuple[Attached, ...] | None = None
    layer: str | None = None  # the digest of the code layer appended; None: nothing appended

    def sent(self, record: Record) -> tuple[str, ...]:
        """RECORD's appended layers, this one's added."""
        if self.layer is None:
            return record.sent
        return (*(d for d in record.sent if d != self.layer), self.layer)[-RECENT_LAYERS:]


def _instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction, as BuildKit reads them."""
    return [(i.keyword, i.arguments) for i in instructions(text)]


def _words(arguments: str) -> list[str] | None:
    if arguments.startswith("["):
        return exec_form(arguments)
    try:
        return shlex.split(arguments)
    except ValueError:
        return None


def code_step(dockerfile: str) -> CodeStep | str:
    """The code step of a Dockerfile, or why it has none the fast path can replace."""
    steps = _instructions(dockerfile)
    if any(k == "FROM" and a.split()[-1:] == [EXTENSIONS_STAGE] for k, a in steps):
        return ("the trainer's compiled extensions are built from its whole directory (build_extensions): a code edit "
                "rebuilds them")
    unknown = sorted({k for k, _ in steps} - _METADATA_ONLY - _LAYERS)
    if unknown:
        return f"the Dockerfile has instructions buildkit-py does not follow ({', '.join(map(show, unknown))})"
    layered = [i for i, (keyword, _) in enumerate(steps) if keyword in _LAYERS]
    last = layered[-1] if layered else -1
    words = _words(steps[last][1]) if last >= 0 and steps[last][0] == "COPY" else None
    if not words or len(words) != 2 or words[0] not in (".", "./") or not words[1].startswith("/"):
        return "the Dockerfile's last layer is not a plain `COPY . DIR` of the trainer"
    sources: list[str] = []
    for keyword, arguments in steps[:last]:
        if keyword not in ("COPY", "ADD"):
            continue
        args = _words(arguments) or []
        flags = [w for w in args if w.startswith("--")]
        if any(f.startswith("--from") for f in flags):
            continue  # another stage's files: the Dockerfile text names that stage
        for source in (w for w in args[:-1] if not w.startswith("--")):
            clean = posixpath.normpath(source).lstrip("/")
            if clean in (".", "") or "://" in source:
                return f"an earlier step ({keyword} {show(source)}) copies the whole context or a URL"
            sources.append(clean)
    dest = posixpath.normpath(words[1])
    return CodeStep(dest, f"COPY . {words[1]}", tuple(sources))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_parts(recipe: Recipe, step: CodeStep, snapshot: Snapshot) -> tuple[tuple[str, str], ...]:
    """What lies below the code layer, each part hashed: equal parts make the same lower layers."""
    parts = [("plan", _sha(json.dumps(recipe.plan, sort_keys=True, default=str).encode())),
             ("dockerfile", _sha(recipe.dockerfile.encode()))]
    for source in step.earlier_sources:
        glob = any(c in source for c in "*?[")  # a plain path needs no pattern compiled
        copied = [f"{rel}\0{kind}\0{content}" for rel, kind, content in snapshot.entries
                  if rel == source or rel.startswith(source + "/") or glob and fnmatchcase(rel, source)]
        parts.append((f"input:{source}", _sha("\n".join(copied).encode())))
    parts.append(("secrets", recipe.secrets_digest))
    parts.append(("builder", _sha(f"{recipe.builder}\0{recipe.platform}".encode())))
    return tuple(parts)


def _record_path(repository: str, variant: str | None) -> Path:
    return cache_dir() / "build-records" / (_sha(f"{repository}\0{variant or ''}".encode())[:32] + ".json")


def load_record(repository: str, variant: str | None) -> Record | None:
    """The last image's record; None when there is none or it cannot be read (the fast path then just waits
    for the next full build to write a good one)."""
    try:
        data = json.loads(_record_path(repository, variant).read_text(encoding="utf-8"))
        if data.get("scheme") != RECORD_SCHEME or data.get("repository") != repository:
            return None
        imports = data.get("imports")
        return Record(repository, variant, tuple((str(k), str(v)) for k, v in data["parts"]),
                      str(data["manifest"]), str(data["content_tag"]),
                      tuple(map(str, imports)) if isinstance(imports, list) else None,
                      data["listed"] if data.get("listed") in ("referrers API", "tag schema") else None,
                      tuple(str(d) for d in data.get("sent") or () if DIGEST.fullmatch(str(d))))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def save_record(record: Record, reporter: Reporter | None = None) -> None:
    """Write the record; one that cannot be written (a read-only cache) is said, never fatal: the image is pushed,
    and the next code edit takes the full build. The copies kept of the image it named before go: no edit
    appends to that one again."""
    before = load_record(record.repository, record.variant)
    try:
        write_atomic(_record_path(record.repository, record.variant), json.dumps({
            "scheme": RECORD_SCHEME, "repository": record.repository, "variant": record.variant,
            "parts": [list(p) for p in record.parts], "manifest": record.manifest, "content_tag": record.content_tag,
            "imports": list(record.imports) if record.imports is not None else None, "listed": record.listed,
            "sent": list(record.sent),
        }, indent=1) + "\n")
    except OutputError as exc:
        if reporter is not None:
            reporter.message(f"note: no build record for the fast path ({exc}); the next code edit takes the full build")
        return
    if before is not None and before.manifest != record.manifest:
        _forget(before.manifest)


def full_build_reason(record: Record | None, parts: tuple[tuple[str, str], ...]) -> str | None:
    """Why this build cannot be an append to the recorded image; None when only the code changed."""
    if record is None:
        return "no previous image"
    before = dict(record.parts)
    for name, value in parts:
        if before.get(name) != value:
            if name == f"input:{IMPORTS_CONTEXT_FILE}":
                return IMPORTS_CHANGED
            if name.startswith("input:"):
                return f"{name.removeprefix('input:')} changed"
            return _WHY[name]
    if set(before) != {name for name, _ in parts}:
        return _WHY["dockerfile"]
    return None


def code_layer(directory: Path, dest: str) -> tuple[bytes, str]:
    """The gzip blob and the diff_id (sha256 of the tar) of the staged context copied to DEST, entry by entry as
    BuildKit's COPY lays it out: DEST and its parents, then a depth-first walk in byte order of names, owned by
    root:root, with the staged modes and mtimes. Directories get FIXED_MTIME (BuildKit gives them the build's
    time, which would make every digest new)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        top = dest.strip("/")
        parts = top.split("/")

        def add(name: str, path: Path | None) -> None:
            info = tarfile.TarInfo(name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if path is None:
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, FIXED_MTIME
                tar.addfile(info)
                return
            st = path.lstat()
            info.mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                info.type, info.linkname, info.mtime = tarfile.SYMTYPE, os.readlink(path), int(st.st_mtime)
                tar.addfile(info)
            elif stat.S_ISDIR(st.st_mode):
                info.type, info.mtime = tarfile.DIRTYPE, FIXED_MTIME
                tar.addfile(info)
            else:
                info.size, info.mtime = st.st_size, int(st.st_mtime)
                with path.open("rb") as handle:
                    tar.addfile(info, handle)

        for depth in range(1, len(parts) + 1):
            add("/".join(parts[:depth]), None)

        def walk(folder: Path, name: str) -> None:
            for entry in sorted(os.listdir(folder), key=os.fsencode):
                path = folder / entry
                add(f"{name}/{entry}", path)
                if path.is_dir() and not path.is_symlink():
                    walk(path, f"{name}/{entry}")

        walk(directory, top)
    tar_bytes = raw.getvalue()
    return gzip.compress(tar_bytes, compresslevel=GZIP_LEVEL, mtime=0), digest_of(tar_bytes)


def _json_body(response, what: str, digest: str | None = None) -> dict:
    body = response.content
    if digest and digest_of(body) != digest:
        raise RegistryError(f"the registry gave back another {what} than {digest}")
    return json_object(body, f"the registry's {what}")




def _kept_path(digest: str) -> Path | None:
    return cache_dir() / "registry-json" / digest.replace(":", "-") if DIGEST.fullmatch(digest) else None


def _kept_bytes(digest: str) -> bytes | None:
    """A manifest or image config this machine read or wrote by DIGEST: content-addressed, so a copy whose
    bytes still hash to it is the registry's too."""
    path = _kept_path(digest)
    try:
        data = path.read_bytes() if path else b""
    except OSError:
        return None
    return data if digest_of(data) == digest else None


def _kept(digest: str) -> dict | None:
    data = _kept_bytes(digest)
    try:
        found = json.loads(data) if data is not None else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _keep(digest: str, data: bytes) -> None:
    path = _kept_path(digest)
    if path is None or digest_of(data) != digest:
        return
    try:
        write_atomic(path, data.decode("utf-8"))
    except (OutputError, UnicodeDecodeError):
        pass  # only a cache: the next edit reads it from the registry


def _forget(digest: str) -> None:
    """Remove this machine's copies of the image at DIGEST: its manifest, an index's platform manifests, configs."""
    kept = _kept(digest)
    if kept is not None:
        entries = kept.get("manifests") if isinstance(kept.get("manifests"), list) else []
        for entry in [*entries, kept.get("config")]:
            if isinstance(entry, dict) and isinstance(entry.get("digest"), str):
                _forget(entry["digest"])
    path = _kept_path(digest)
    try:
        if path is not None:
            path.unlink(missing_ok=True)
    except OSError:
        pass  # only a cache


def _manifest(client: RegistryClient, ref: ImageRef, digest: str, what: str, keep: Callable[[str, bytes], None],
              send: Callable[..., Any]) -> tuple[dict, str]:
    """A manifest by digest and its media type, kept from an earlier read or write where it names its type; one
    read from the registry is handed to KEEP."""
    kept = _kept(digest)
    if kept is not None and isinstance(kept.get("mediaType"), str):
        return kept, kept["mediaType"]
    got = send(client, "GET", f"manifests/{digest}", {"Accept": MANIFEST_TYPES})
    if got.status_code == 404:
        raise Refused(f"{what} is gone from the registry")
    check_answer(client, got, ref, f"the read of {what}", (200,))
    manifest = _json_body(got, "manifest", digest)
    keep(digest, got.content)
    return manifest, manifest.get("mediaType") or got.headers.get("Content-Type", "").split(";")[0]


def _previous(client: RegistryClient, ref: ImageRef, digest: str, platform: str | None,
              keep: Callable[[str, bytes], None], send: Callable[..., Any]) -> Image:
    """The image at DIGEST as an append reads it (the build platform's, where DIGEST names an index): its manifest
    and its config, each from this machine's copy where one is kept, else read from the registry with SEND and
    handed to KEEP."""
    manifest, media = _manifest(client, ref, digest, f"the previous image {ref.repository}@{digest}", keep, send)
    if media in INDEX_TYPES:
        digest, media = _platform_manifest(client, ref, manifest, platform)
        manifest, media = _manifest(client, ref, digest, f"manifest {digest}", keep, send)
    config_digest = str((manifest.get("config") or {}).get("digest"))
    config = _kept_bytes(config_digest)
    if config is None:
        got = send(client, "GET", f"blobs/{config_digest}", {})
        check_answer(client, got, ref, "the read of the previous image's config", (200,))
        _json_body(got, "image config", config_digest)
        config = got.content
        keep(config_digest, config)
    return read_image(manifest, media, config, "the previous image")


def check_ahead(ref: ImageRef, record: Record, platform: str | None) -> None:
    """Ask the registry of REF, while the edit stages its files, whether it still has the recorded image's lower
    layers, from this machine's copy of its manifest (an image without one is asked at its write)."""
    client, manifest = RegistryClient(ref), _kept(record.manifest)
    try:
        if manifest is not None and manifest.get("mediaType") in INDEX_TYPES:
            manifest = _kept(_platform_manifest(client, ref, manifest, platform)[0])
        layers = manifest.get("layers") if manifest is not None else None
        digests = [str(layer["digest"]) for layer in layers[:-1]] if isinstance(layers, list) else []
    except (RegistryError, KeyError, TypeError):
        return  # the write reads the image and says what is wrong with it
    if digests:
        client.check_blobs(digests)


READ_AHEAD_WAIT = 2.0  # seconds a full build waits at most for its read-ahead (each request tried once)


def read_ahead(ref: ImageRef, digest: str, platform: str | None, providers: Iterable[AuthProvider] | None = None) -> None:
    """Keep on this machine what the next code-only edit's append reads of the image just pushed as REF@DIGEST (its
    manifest and config), so that the edit reads nothing back. Only a head start: a registry this machine cannot
    read, or one slow to answer, leaves the reads to the edit (the files are written here, never by a thread that
    the end of the command may cut short)."""
    read: list[tuple[str, bytes]] = []

    def reads() -> None:
        try:
            client = RegistryClient(ref, list(providers) if providers is not None else None)
            _previous(client, ref, digest, platform, lambda d, data: read.append((d, data)),
                      lambda *request: send(*request, attempts=1))
        except Exception:  # whatever the registry answers: the edit reads it again, and says what is wrong
            read.clear()

    thread = threading.Thread(target=reads, daemon=True)
    thread.start()
    thread.join(READ_AHEAD_WAIT)
    if not thread.is_alive():
        for kept in read:
            _keep(*kept)


def _platform_manifest(client: RegistryClient, ref: ImageRef, index: dict, platform: str | None) -> tuple[str, str]:
    """The digest and media type of the build platform's manifest in an index."""
    os_name, _, arch = (platform or "linux/amd64").partition("/")
    for entry in index.get("manifests") or []:
        found = entry.get("platform") or {}
        if found.get("os") == os_name and found.get("architecture") == arch.split("/")[0]:
            return entry["digest"], entry["mediaType"]
    raise RegistryError(f"the previous image of {ref.repository} is an index without a {os_name}/{arch} manifest")


@dataclass(frozen=True)
class CodeEdit:
    """A code-only edit, staged: what append() makes the new image of."""

    refs: tuple[ImageRef, ...]  # the new image's tags, the content tag first
    record: Record  # the image it appends to
    step: CodeStep
    directory: Path  # the staged context: the new code layer
    labels: tuple[tuple[str, str], ...]
    owned: tuple[str, ...]  # the build's own labels: those it does not set this time are removed
    platform: str | None
    # The artifacts to attach to the new image, given its digest: their blobs go up with the image's own.
    attestations: Callable[[str], tuple[Artifact, ...]] | None = None


def _unchanged(edit: CodeEdit, base: Image) -> bool:
    """The recorded image is what this edit would make: its content tag is this context's, and the labels this build
    sets are the ones it has (a new commit changes the revision label, and so the image)."""
    labels = (base.config_json().get("config") or {}).get("Labels") or {}
    set_now = dict(edit.labels)
    return (edit.record.content_tag == (edit.refs[0].tag or "") and all(labels.get(k) == v for k, v in set_now.items())
            and not any(name in labels for name in edit.owned if name not in set_now))


def append(edit: CodeEdit, reporter: Reporter, providers: Iterable[AuthProvider] | None = None,
           stored: Callable[[set[str]], None] | None = None) -> Appended:
    """The new image: the recorded image with the staged context as its code layer, its config with the new
    diff_id and labels (replace_top); written under every ref (oci.image.write, which tags last).
    stored: called with the new image's config and manifest digests once the registry holds it under the first
    ref, while the other refs are still being tagged.
    Raises Refused where the registry cannot hold the result, RegistryError for every other failure."""
    started = time.perf_counter()
    refs, record, step = edit.refs, edit.record, edit.step
    ref = refs[0]
    client = RegistryClient(ref, list(providers) if providers is not None else None)
    base = _previous(client, ref, record.manifest, edit.platform, _keep, send)
    history = base.config_json().get("history") or []
    layered = [i for i, h in enumerate(history) if isinstance(h, dict) and not h.get("empty_layer")]
    if len(layered) != len(base.layers) or not str(history[layered[-1]].get("created_by", "")).startswith(
            step.instruction):
        raise Refused(f"the previous image's last layer is not made by `{step.instruction}`")
    timings = [("base", time.perf_counter() - started)]
    if _unchanged(edit, base):
        # The same files (the content tag names them) and labels as the recorded image: that image is this build's.
        # A layer of ours would differ from the engine's in its tar bytes alone and move the content tag.
        written = write(client, base, refs, stored)
        reporter.message(f"{ref} is unchanged since its last push: {ref.repository}@{record.manifest} tagged again, "
                         "nothing appended")
        return Appended(base.config_digest, written.pushed, tuple(timings) + written.timings)
    started = time.perf_counter()
    blob, diff_id = code_layer(edit.directory, step.dest)
    timings.append(("tar", time.perf_counter() - started))
    image = replace_top(base, blob, diff_id, edit.labels, edit.owned)
    artifacts = edit.attestations(image.digest) if edit.attestations is not None else ()
    subject, repository = Subject(image.media_type, image.digest, len(image.manifest)), ImageRef(ref.registry, ref.path)
    # The attestations go up whole while the image is written: blobs, manifests, and the tag schema's listing where
    # the last append's went there (it names their manifests, so it follows them, beside the image's own manifest).
    riding = in_background(send_artifacts, client.fork(), repository, subject, artifacts,
                           record.listed == "tag schema") if artifacts else None
    try:
        written = write(client, image, refs, stored, seen=image.layers[-1].digest in record.sent)
    except LostLayer as exc:
        if send(client, "HEAD", f"manifests/{record.manifest}", {}).status_code == 404:
            # Read from this machine's copy, of an image the registry has lost whole (wiped or garbage-collected):
            # nothing to append to, as when the registry says so at the read.
            raise Refused(f"the previous image {ref.repository}@{record.manifest} is gone from the registry") from None
        raise RegistryError(f"{ref.registry} has lost layer {exc.digest} of the previous image {ref.repository}@"
                            f"{record.manifest}; run with --no-fast-path to build and push every layer again") from None
    _keep(image.digest, image.manifest)  # the next edit appends to this image: it reads nothing back
    _keep(image.config_digest, image.config)
    top = image.layers[-1]
    reporter.message(f"appended the code layer ({top.size} bytes"
                     f"{'' if top.digest in written.sent else ', already in the registry'}) to "
                     f"{ref.repository}@{record.manifest}: {ref} is {image.digest}")
    attached = None
    if riding is not None:
        try:
            attached = attach(repository, subject, artifacts, reporter, client=client, sent=riding())
        except RegistryError as exc:
            reporter.message(unattached(f"{ref.repository}@{image.digest}", exc))
            attached = ()
    return Appended(image.config_digest, written.pushed, tuple(timings) + written.timings, attached, top.digest)
