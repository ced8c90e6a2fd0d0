"""Images as values (oci/image.py): read from a manifest and its config, changed in memory, written to the loopback
registry in one call that uploads what the registry lacks and tags last."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import sys
import tarfile
import urllib.request
import uuid

import pytest

from buildkit_py.oci.client import RegistryClient, send, upload_blob
from buildkit_py.oci.image import Image, Layer, LostLayer, Refused, read_image, replace_top, write
from buildkit_py.oci.media import DOCKER_MANIFEST, LAYER_TYPES, MANIFEST_TYPES, OCI_INDEX, OCI_MANIFEST
from buildkit_py.oci.refs import parse_ref
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from login import token_registry  # noqa: E402  (the stand-in edit.py measures with)

CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer_of(text: str) -> tuple[bytes, str]:
    """A gzipped tar of one file, and the digest of the tar."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("f.txt")
        data = text.encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0), sha(raw.getvalue())


def config_of(diff_ids: list[str], labels: dict[str, str]) -> bytes:
    return json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": labels, "Env": ["A=1"]},
                       "rootfs": {"type": "layers", "diff_ids": diff_ids},
                       "history": [{"created_by": "FROM"}, {"created_by": "COPY . /app"}]}).encode()


def two_layers(media: str = OCI_MANIFEST) -> tuple[dict, bytes, list[tuple[bytes, str]]]:
    made = [layer_of(uuid.uuid4().hex), layer_of(uuid.uuid4().hex)]
    config = config_of([d for _, d in made], {"keep": "1", "owned": "old"})
    manifest = {"schemaVersion": 2, "mediaType": media,
                "config": {"mediaType": CONFIG_TYPE, "digest": sha(config), "size": len(config)},
                "layers": [{"mediaType": LAYER_TYPES[media], "digest": sha(b), "size": len(b),
                            "annotations": {"buildkit/rewritten-timestamp": "0"}} for b, _ in made]}
    return manifest, config, made


def test_an_image_read_then_its_top_layer_replaced():
    manifest, config, made = two_layers()
    image = read_image(manifest, OCI_MANIFEST, config)
    assert [layer.digest for layer in image.layers] == [sha(b) for b, _ in made]
    assert all(layer.blob is None for layer in image.layers)  # read: the registry has them
    assert json.loads(image.manifest)["layers"] == manifest["layers"]  # descriptors kept whole, annotations too

    blob, diff_id = layer_of("new code")
    new = replace_top(image, blob, diff_id, (("owned", "new"), ("added", "2")), dropped=("keep",))
    assert new.layers[0] == image.layers[0] and new.layers[-1].blob == blob
    assert new.layers[-1].descriptor() == {"mediaType": LAYER_TYPES[OCI_MANIFEST], "size": len(blob), "digest": sha(blob)}
    settings = new.config_json()
    assert settings["rootfs"]["diff_ids"] == [made[0][1], diff_id]
    assert settings["config"]["Labels"] == {"owned": "new", "added": "2"} and settings["config"]["Env"] == ["A=1"]
    assert settings["history"] == json.loads(config)["history"]  # the rest of the config as it was
    assert new.digest == sha(new.manifest) != image.digest and new.config_digest == sha(new.config)
    assert image.layers[-1].digest == sha(made[1][0])  # values: the image read is unchanged


def test_a_docker_image_keeps_its_media_types():
    manifest, config, _ = two_layers(DOCKER_MANIFEST)
    blob, diff_id = layer_of("x")
    new = replace_top(read_image(manifest, DOCKER_MANIFEST, config), blob, diff_id, ())
    written = json.loads(new.manifest)
    assert written["mediaType"] == DOCKER_MANIFEST
    assert written["layers"][-1]["mediaType"] == LAYER_TYPES[DOCKER_MANIFEST]


@pytest.mark.parametrize("change, why", [
    (lambda m, c: (m, OCI_INDEX, c), "manifest is 'application/vnd.oci.image.index.v1+json'"),
    (lambda m, c: ({**m, "layers": m["layers"][:1]}, OCI_MANIFEST, c), "do not match"),
    (lambda m, c: ({**m, "layers": []}, OCI_MANIFEST, c), "do not match"),
    (lambda m, c: ({**m, "layers": [{"digest": "x"}, {"digest": "y"}]}, OCI_MANIFEST, c), "without a media type"),
    (lambda m, c: ({**m, "layers": ["a", "b"]}, OCI_MANIFEST, c), "without a media type"),
])
def test_what_is_not_one_writable_image_is_refused(change, why):
    manifest, config, _ = two_layers()
    with pytest.raises(Refused, match=re.escape(why)):
        read_image(*change(manifest, config), "the previous image")


def _registry_manifest(registry: str, path: str, reference: str) -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://{registry}/v2/{path}/manifests/{reference}",
                                     headers={"Accept": MANIFEST_TYPES})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def _based(registry: str) -> tuple[str, RegistryClient, Image]:
    """An image of two layers whose blobs are in the loopback registry (nothing tagged)."""
    path = f"oci-image/{uuid.uuid4().hex[:12]}"
    ref = parse_ref(f"{registry}/{path}:base")
    client = RegistryClient(ref)
    manifest, config, made = two_layers()
    for blob, _ in made:
        upload_blob(client, ref, sha(blob), blob)
    return path, client, read_image(manifest, OCI_MANIFEST, config)


def test_written_under_every_tag_with_only_the_new_layer_sent(testenv):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    path, client, base = _based(registry)
    blob, diff_id = layer_of(uuid.uuid4().hex)
    image = replace_top(base, blob, diff_id, (("v", "1"),))
    refs = [parse_ref(f"{registry}/{path}:{tag}") for tag in ("one", "two", "three")]
    stored = []
    written = write(client, image, refs, stored=stored.append)
    assert written.sent == (sha(blob),)  # the lower layer was there: not sent again
    assert [p.tag for p in written.pushed] == ["one", "two", "three"]
    assert {p.digest for p in written.pushed} == {image.digest}
    assert stored == [{image.config_digest, image.digest}]
    for tag in ("one", "two", "three"):
        status, body = _registry_manifest(registry, path, tag)
        assert status == 200 and sha(body) == image.digest
    assert [name for name, _ in written.timings] == ["upload", "manifest"]
    # Written again: nothing is uploaded, the tags are the same.
    again = write(client, image, refs[:1])
    assert again.sent == () and again.pushed[0].digest == image.digest


def test_a_lost_lower_layer_stops_the_write_before_any_tag(testenv):
    registry = testenv["BUILDKIT_TEST_REGISTRY"]
    path, client, base = _based(registry)
    gone = Layer(base.layers[0].media_type, "sha256:" + "0" * 64, 10, base.layers[0].diff_id)
    image = replace_top(Image(base.media_type, base.config_media_type, base.config, (gone, base.layers[1])),
                        *layer_of("x"), ())
    with pytest.raises(LostLayer) as raised:
        write(client, image, [parse_ref(f"{registry}/{path}:lost")])
    assert raised.value.digest == gone.digest
    assert _registry_manifest(registry, path, "lost")[0] == 404  # no tag names a half-written image
    assert send(client, "HEAD", f"blobs/{image.layers[-1].digest}", {}).status_code == 200  # the new layer did go up


class CountingProvider:
    """Credentials for any registry, counting how often they are asked for (a credential helper is a process)."""

    def __init__(self):
        self.asked = 0

    def credentials(self, registry: str):
        from buildkit_py.oci.credentials import Credentials

        self.asked += 1
        return Credentials("user", "secret", "the test's provider")


def test_a_write_over_many_connections_logs_in_once(testenv):
    """Every connection of a write (the layer checks, the config, each tag) shares one login: the token service and
    the credentials are asked once per scope, however many connections the write opens. The next command answers
    the registry's challenges, kept, before its first request, for every action they named: no connection of its
    write meets a 401."""
    with token_registry(testenv["BUILDKIT_TEST_REGISTRY"]) as tokens:
        provider = CountingProvider()
        path = f"oci-image/{uuid.uuid4().hex[:12]}"
        ref = parse_ref(f"{tokens.address}/{path}:base")
        client = RegistryClient(ref, [provider])
        manifest, config, made = two_layers()
        for blob, _ in made:
            upload_blob(client, ref, sha(blob), blob)
        assert len(tokens.issued) == 2 and provider.asked == 2  # a token to pull (the HEAD), then one to push
        image = replace_top(read_image(manifest, OCI_MANIFEST, config), *layer_of(uuid.uuid4().hex), ())
        # A client of its own (none of the first one's login), as a new command's: its first requests all at once.
        fresh, challenged = CountingProvider(), tokens.challenged
        written = write(RegistryClient(ref, [fresh]), image,
                        [parse_ref(f"{tokens.address}/{path}:{tag}") for tag in ("one", "two", "three")])
        assert {p.digest for p in written.pushed} == {image.digest}
        assert (len(tokens.issued), fresh.asked, tokens.challenged - challenged) == (3, 1, 0)
        assert _registry_manifest(testenv["BUILDKIT_TEST_REGISTRY"], path, "three")[0] == 200
        # A remembered token service that refuses the early request: the challenge is met as it comes, and answered.
        tokens.refusing, challenged = 1, tokens.challenged
        later = RegistryClient(ref, [CountingProvider()])
        assert send(later, "HEAD", f"blobs/{image.layers[-1].digest}", {}).status_code == 200
        assert tokens.refusing == 0 and tokens.challenged == challenged + 1 and len(tokens.issued) == 4
