"""Image references: `[host[:port]/]path[:tag][@digest]`, with Docker's distribution rules."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ConfigError

# The grammar of github.com/distribution/reference, restated as the rules a user can act on.
_HOST = re.compile(r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?$")
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-fA-F0-9]{32,}$")
DOCKER_HUB = "docker.io"


@dataclass(frozen=True)
class ImageRef:
    registry: str  # "docker.io" when the reference names no host
    path: str  # "library/python", "my-project/repo/trainer"
    tag: str | None = None
    digest: str | None = None

    @property
    def repository(self) -> str:
        """The reference without tag and digest, in the short form users write."""
        if self.registry == DOCKER_HUB:
            return self.path.removeprefix("library/")
        return f"{self.registry}/{self.path}"

    def __str__(self) -> str:
        out = self.repository
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out


def parse_ref(value: str, field: str = "image") -> ImageRef:
    """Parse an image reference or raise ConfigError quoting the rule that failed."""

    def bad(rule: str) -> ConfigError:
        return ConfigError(f"{value!r} is not a valid image reference: {rule}", field=field)

    if not isinstance(value, str) or not value:
        raise bad("it must be a non-empty string")
    if len(value) > 255 + 128 + 80:
        raise bad("it is too long")
    if any(c.isspace() for c in value):
        raise bad("it must not contain whitespace")
    rest, digest = value, None
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not _DIGEST.match(digest):
            raise bad("a digest is ALGORITHM:HEX with at least 32 hex digits, e.g. sha256:<64 hex>")
    tag = None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, tag = rest.rsplit(":", 1)
        if not _TAG.match(tag):
            raise bad("a tag is 1-128 characters of letters, digits, '_', '.', '-', not starting with '.' or '-'")
    parts = rest.split("/")
    registry = DOCKER_HUB
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        registry = parts.pop(0)
        if not _HOST.match(registry):
            raise bad(f"registry host {registry!r} must be a hostname or IP with an optional :port")
    if not parts or parts == [""]:
        raise bad("it names no repository")
    for comp in parts:
        if not _COMPONENT.match(comp):
            raise bad(
                f"path component {comp!r} must be lowercase letters and digits, "
                "separated by '.', '_', '__' or '-'"
            )
    path = "/".join(parts)
    if len(path) > 255:
        raise bad("the repository path is longer than 255 characters")
    if registry == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    return ImageRef(registry=registry, path=path, tag=tag, digest=digest)
