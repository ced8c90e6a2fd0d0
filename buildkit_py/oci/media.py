"""The media types of images, indexes, layers and artifacts (the OCI image spec and Docker's schema 2), and the
digest form: each defined here once."""

from __future__ import annotations

import hashlib
import re

from ..patterns import lazy_pattern

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
IMAGE_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)  # one platform's image
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)  # several platforms' images
# The Accept header of a manifest read: any of them.
MANIFEST_TYPES = ", ".join((OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST))
# The gzipped layer of each image manifest's kind.
LAYER_TYPES = {DOCKER_MANIFEST: "application/vnd.docker.image.rootfs.diff.tar.gzip",
               OCI_MANIFEST: "application/vnd.oci.image.layer.v1.tar+gzip"}
# An artifact's config: the empty descriptor's media type, whose blob is the two bytes `{}`.
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_BLOB = b"{}"

DIGEST = lazy_pattern(r"sha256:[0-9a-f]{64}", re.ASCII)


def digest_of(data: bytes) -> str:
    """The content digest that names a blob or a manifest: sha256:HEX."""
    return "sha256:" + hashlib.sha256(data).hexdigest()
