"""Image references: `[host[:port]/]path[:tag][@digest]`, with Docker's distribution rules.

The grammar is github.com/distribution/reference (regexp.go, normalize.go), ASCII only like Go's
regexp. Where the reference library and the engine in use disagree, the stricter rule wins, so
a reference accepted here is accepted by old and new engines alike:
- the 255-character limit counts the canonical name with its registry host
  ("docker.io/library/NAME"), as Docker 20.10 does (reference >= 0.6 counts the path only);
- a first component with "." or ":" is a registry host and must be a valid one (the engines
  quietly fall back to a Docker Hub path for "exa_mple.com/x", then push to that "host");
- an uppercase first component is refused as uppercase (newer engines read it as a host).
IPv6 hosts (`[::1]:5000`) follow the current grammar; Docker < 23 refuses them when tagging.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ConfigError, show
from ..patterns import lazy_pattern

DOCKER_HUB = "docker.io"
LEGACY_DOCKER_HUB = "index.docker.io"  # normalize.go: canonicalized to docker.io
NAME_MAX = 255  # NameTotalLengthMax
TAG_MAX = 128
# go-digest's registered algorithms and their hex lengths; the engine refuses any other.
DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
# Nothing longer can be valid: name, ":" tag, "@sha512:" and 128 hex digits. Checked first so
# no regex ever runs on a megabyte of input.
REF_MAX = NAME_MAX + 1 + TAG_MAX + 1 + len("sha512:") + 128

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_COMPONENT = lazy_pattern(rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*", re.ASCII)
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = lazy_pattern(
    rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?", re.ASCII
)
_TAG = lazy_pattern(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", re.ASCII)  # Go's \w is ASCII
_DIGEST = lazy_pattern(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}", re.ASCII)
_IDENTIFIER = lazy_pattern(r"[a-f0-9]{64}", re.ASCII)  # an image ID, refused as a name
_PRINTABLE = lazy_pattern(r"[!-~]", re.ASCII)  # printable ASCII without space

_TAG_RULE = (f"a tag is 1-{TAG_MAX} ASCII letters, digits, '_', '.' and '-', "
             "not starting with '.' or '-'")
_COMPONENT_RULE = ("each path component is lowercase ASCII letters and digits, separated by one '.', "
                   "one or two '_', or any number of '-', starting and ending with a letter or digit")
_HOST_RULE = ("a registry host is a DNS name or IPv4 address (ASCII letters, digits, '-' inside labels, "
              "labels joined by '.') or an IPv6 address in brackets, with an optional :PORT")


@dataclass(frozen=True)
class ImageRef:
    """A parsed image reference: registry, repository path, tag and digest."""

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


def parse_ref(value: str, field: str = "image", *, allow_digest: bool = True) -> ImageRef:
    """Parse an image reference or raise ConfigError naming the field, the value and the rule.

    allow_digest=False refuses `@DIGEST` (a tag to create cannot carry one)."""
    def bad(rule: str) -> ConfigError:
        return ConfigError(f"{show(value)} is not a valid image reference: {rule}", field=field)

    if not isinstance(value, str) or not value:
        raise bad("it must be a non-empty string")
    if len(value) > REF_MAX:
        raise bad(f"it is {len(value)} characters; the longest valid reference has {REF_MAX}")
    for pos, char in enumerate(value):
        if not _PRINTABLE.fullmatch(char):
            raise bad(f"character {char!r} at position {pos} is not allowed: only printable ASCII, "
                      "no spaces or control characters")
    if _IDENTIFIER.fullmatch(value):
        raise bad("64 hexadecimal digits are an image ID, not a repository name")

    name, at, digest = value.partition("@")
    if at:
        if not allow_digest:
            raise bad(f"a digest ({show('@' + digest)}) cannot be given here; give a tag, e.g. NAME:v1")
        _check_digest(digest, bad)

    # The tag is after the first ':' of the last path component (earlier ':' is a host's port).
    head, slash, last = name.rpartition("/")
    last, colon, tag = last.partition(":")
    if colon and not _TAG.fullmatch(tag):
        raise bad(f"tag {show(tag)} is not valid: {_TAG_RULE}")
    name = head + slash + last

    registry, path = DOCKER_HUB, name
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        if not _HOST.fullmatch(first):
            raise bad(f"registry host {show(first)} is not valid: {_HOST_RULE}")
        registry, path = (DOCKER_HUB if first == LEGACY_DOCKER_HUB else first), rest
    components = path.split("/")
    for comp in components:
        if not comp:
            raise bad("the repository path has an empty component (a leading, trailing or doubled '/')")
        if not _COMPONENT.fullmatch(comp):
            if _COMPONENT.fullmatch(comp.lower()):
                raise bad(f"repository name must be lowercase: path component {show(comp)} has uppercase "
                          f"letters (try {show(comp.lower())})")
            raise bad(f"path component {show(comp)} is not valid: {_COMPONENT_RULE}")
    if registry == DOCKER_HUB and len(components) == 1:
        path = f"library/{path}"
    canonical = f"{registry}/{path}"
    if len(canonical) > NAME_MAX:
        raise bad(f"the repository name {show(canonical)} is {len(canonical)} characters; at most {NAME_MAX} "
                  "are allowed, counting the registry host (and 'library/' for an official Docker Hub name)")
    return ImageRef(registry=registry, path=path, tag=tag if colon else None, digest=digest if at else None)


def _check_digest(digest: str, bad: Callable[[str], ConfigError]) -> None:
    if not _DIGEST.fullmatch(digest):
        raise bad(f"digest {show(digest)} is not valid: a digest is ALGORITHM:HEX with at least 32 hex digits, "
                  "e.g. sha256: and 64 lowercase hex digits")
    algorithm, _, hexpart = digest.partition(":")
    size = DIGEST_HEX.get(algorithm)
    if size is None:
        raise bad(f"digest algorithm {show(algorithm)} is not supported: use "
                  + ", ".join(f"{a} ({n} hex digits)" for a, n in DIGEST_HEX.items()))
    if len(hexpart) != size or hexpart != hexpart.lower():
        raise bad(f"a {algorithm} digest has exactly {size} lowercase hex digits; this one has {len(hexpart)}"
                  + ("" if hexpart == hexpart.lower() else " and uppercase letters"))


def registry_host(registry: str) -> str:
    """The host of a registry, without its port or an IPv6 address's brackets: "[::1]:5000" -> "::1"."""
    if registry.startswith("["):
        return registry[1:registry.find("]")]
    return registry.split(":")[0]


def is_loopback_host(host: str) -> bool:
    """localhost or a loopback address: where Docker (and so buildkit-py) allows plain HTTP."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

