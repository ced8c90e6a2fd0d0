"""The top-level keys of the image and its build: the framework and versions, packages, the repository and tags,
package indexes and the CA bundle (the key table in __init__.py holds the rules of the rest)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, show
from ..fsutil import consult, read_small, read_text
from ..oci.refs import ImageRef
from ..patterns import lazy_pattern
from .reading import _err, _Raw
from .values import _host_file, _list, _ref, _string

MAX_LIST_BYTES = 8192  # pip and system_packages share one RUN line each; quoting can grow a pip entry 5x

_FRAMEWORK = lazy_pattern(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,63})(?:==(?P<version>[0-9A-Za-z][0-9A-Za-z.+!-]{0,63}))?",
                        re.ASCII)
# NAME and a PEP 440 range: the newest release inside it that resolves with the rest (framework: "tensorflow<2.17").
_FRAMEWORK_RANGE = lazy_pattern(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,63})\s*(?P<within>(?:[<>!~=]=?|===)\s*[0-9A-Za-z.*+!-]{1,64}"
                              r"(?:\s*,\s*(?:[<>!~=]=?|===)\s*[0-9A-Za-z.*+!-]{1,64}){0,7})", re.ASCII)
_CUDA = lazy_pattern(r"[0-9]{1,2}\.[0-9]{1,2}(?:\.[0-9]{1,3})?", re.ASCII)
_PYTHON = lazy_pattern(r"3\.[0-9]{1,2}", re.ASCII)
_DEBIAN_PACKAGE = lazy_pattern(r"[a-z0-9][a-z0-9+.-]{1,127}(?:=[A-Za-z0-9.+:~-]{1,127})?", re.ASCII)
_MIRROR_URL = lazy_pattern(r"https?://[A-Za-z0-9._~:/?#\[\]!&()*+,;=%-]+", re.ASCII)
_INDEX_URL = lazy_pattern(r"https?://[!-~]+", re.ASCII)  # printable ASCII: credentials allowed, no space or line break
# A package index's host name (lower case, as URLs compare them) or IPv4 address: a netrc's `machine`.
_INDEX_HOST = lazy_pattern(r"(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*",
                         re.ASCII)
_PLATFORM = lazy_pattern(r"[a-z0-9]{1,16}/[a-z0-9_]{1,16}(?:/v?[0-9a-z]{1,8})?", re.ASCII)  # linux/arm64/v8
_PLATFORM_RULE = "OS/ARCH[/VARIANT], e.g. linux/amd64 or linux/arm64"
MAX_PLATFORMS = 8  # a multi-platform image: one engine build each
_BUILD_NETWORKS = ("default", "host", "none")  # what BuildKit's RUN steps accept
CUDA_FLAVORS = ("auto", "base", "runtime", "cudnn-runtime", "devel")  # nvidia/cuda image flavours
_PATTERN = lazy_pattern(r"[^\x00-\x1f\x7f]{1,1024}")  # allow_secrets, allow_large: fnmatch patterns of context paths


@dataclass(frozen=True)
class FrameworkRequest:
    """The framework the config asks for: its name, and a pinned release, "nightly", or none and the range it is
    chosen in."""

    name: str  # as written (aliases are resolved by the matrix)
    version: str | None  # None: the release is chosen (see within); "nightly": a nightly build
    # With no version: the range the release is chosen in ("" for any known release), newest first, the newest that
    # resolves with the rest of the image's requirements (pipeline/resolution.py).
    within: str = ""

    @property
    def chosen(self) -> bool:
        """The release is buildkit-py's choice: nobody pinned one."""
        return self.version is None and not self.is_none

    @property
    def is_none(self) -> bool:
        return self.name == "none"

    def __str__(self) -> str:
        return self.name + self.within if self.version is None else f"{self.name}=={self.version}"


def _platforms(raw: _Raw, path: tuple, value: Any) -> str | tuple[str, ...]:
    """`platform`: one platform, or several (a list, or comma-separated as docker's --platform takes them) for one
    image index. One entry is that platform as a string, so a one-platform config is what it was before lists."""
    if isinstance(value, str) and "," in value:
        text = _string(raw, path, value)
        items: list = text.split(",")
        where = [path] * len(items)  # a flag or one YAML string: its entries have no position of their own
    else:
        items = [value] if isinstance(value, str) else _list(raw, path, value, limit=MAX_PLATFORMS)
        where = [path] if isinstance(value, str) else [path + (i,) for i in range(len(items))]
    if not items:
        raise _err(raw, path, f"an empty list is not allowed: one platform or several ({_PLATFORM_RULE})")
    if len(items) > MAX_PLATFORMS:
        raise _err(raw, path, f"{len(items)} platforms are too many: at most {MAX_PLATFORMS}")
    out: list[str] = []
    for at, item in zip(where, items, strict=True):
        text = _string(raw, at, item)
        if not _PLATFORM.fullmatch(text):
            raise _err(raw, at, f"{show(text)} is not allowed: {_PLATFORM_RULE}"
                                + (" (a list: comma-separated, no spaces)" if len(items) > 1 else ""))
        if text in out:
            raise _err(raw, at, f"{show(text)} is given twice: each platform once")
        out.append(text)
    return out[0] if len(out) == 1 else tuple(out)


def platform_keys(value: str | tuple[str, ...] | None) -> dict[str, Any]:
    """The Config fields `platform` sets: `platform` for one, `platforms` for several (platform None: no plan)."""
    if isinstance(value, tuple):
        return {"platform": None, "platforms": value}
    return {"platform": value, "platforms": ()}


def _framework(raw, path, value) -> FrameworkRequest:
    allowed = ("use NAME==VERSION (e.g. torch==2.5.1), NAME==nightly, NAME alone or NAME with a range (tensorflow<2.17) "
               "for the newest known release that resolves with the rest, or none")
    text = _string(raw, path, value).strip()
    match = _FRAMEWORK.fullmatch(text)
    if not match:
        ranged = _FRAMEWORK_RANGE.fullmatch(text)
        if not ranged:
            raise _err(raw, path, f"{show(text)} is not allowed: {allowed}")
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            within = SpecifierSet(ranged["within"])
        except InvalidSpecifier:
            raise _err(raw, path, f"{show(text)} is not allowed: {show(ranged['within'])} is not a PEP 440 range; "
                                  f"{allowed}") from None
        name = ranged["name"].lower()
        if name == "none":
            raise _err(raw, path, f"{show(text)} is not allowed: 'none' takes no version")
        return FrameworkRequest(name, None, ",".join(sorted(str(s) for s in within)))
    name = match["name"].lower()
    if name == "none" and match["version"]:
        raise _err(raw, path, f"{show(text)} is not allowed: 'none' takes no version")
    return FrameworkRequest(name, match["version"])


def _pip_requirement(raw, path, value) -> str:
    # Loaded by a config with `pip:` only: PEP 508's parser is a tenth of every command's start-up otherwise.
    from packaging.requirements import InvalidRequirement, Requirement

    text = _string(raw, path, value).strip()
    if text.startswith("-"):
        raise _err(raw, path, f"{show(text)} is not allowed: give a PEP 508 requirement (options go in a requirements file)")
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        from ..sources.requirements import parse_problem

        raise _err(raw, path, f"{show(text)} is not a valid PEP 508 requirement: {parse_problem(exc)}") from None
    return text


def _image(raw, path, value) -> ImageRef:
    ref = _ref(raw, path, value)
    if ref.tag or ref.digest:
        raise _err(raw, path, f"{show(str(value))} is not allowed: give the repository only; "
                              "buildkit-py adds the content and git tags (more tags: tags / --tag)")
    return ref


def _tags(raw, path, value) -> tuple[ImageRef, ...]:
    return tuple(_ref(raw, path + (i,), v, allow_digest=False) for i, v in enumerate(_list(raw, path, value)))


def _index_url(raw: _Raw, path: tuple, value: Any) -> str:
    text = _string(raw, path, value, secret=True)
    if not _INDEX_URL.fullmatch(text):
        # Never echo it: the URL may carry a password.
        raise _err(raw, path, "the value is not allowed: an http(s) URL of printable ASCII without spaces "
                              "(percent-encode other characters in credentials)")
    return text


def _mirror_url(raw: _Raw, path: tuple, value: Any) -> str:
    text = _string(raw, path, value, secret=True)
    if not _MIRROR_URL.fullmatch(text):
        raise _err(raw, path, "the value is not allowed: an http(s) URL without spaces, quotes or credentials")
    return text


def ca_bundle_problem(path: Path) -> str | None:
    """Why a file cannot serve as a CA bundle, or None: PEM certificates and nothing secret."""
    consult(path)
    try:
        _, head = read_small(path, 16 << 20)  # kept for the build's secret when small: one read per command
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if b"PRIVATE KEY" in head:
        return "it holds a private key; a CA bundle holds certificates only"
    if b"-----BEGIN CERTIFICATE-----" not in head and b"-----BEGIN TRUSTED CERTIFICATE-----" not in head:
        return "it holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
    return None


def _ca_cert(raw: _Raw, path: tuple, value: Any, root: Path) -> Path:
    target = _host_file(raw, path, value, root)
    problem = ca_bundle_problem(target)
    if problem:
        raise _err(raw, path, f"{show(str(value))} is not a CA bundle: {problem}")
    return target


def _pip_conf(raw: _Raw, path: tuple, value: Any, root: Path) -> Path:
    target = _host_file(raw, path, value, root)
    try:
        read_text(target, "pip.conf")
    except ConfigError as exc:
        raise _err(raw, path, exc.message) from None
    return target


def default_ca_bundle(env: dict[str, str] | None = None) -> Path | None:
    """The CA bundle the user's shell names (PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE), checked
    like --ca-cert; the first that names an existing file wins."""
    env = dict(os.environ) if env is None else env
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        value = env.get(name)
        if value:
            consult(value)
        if value and Path(value).is_file():
            problem = ca_bundle_problem(Path(value))
            if problem:
                raise ConfigError(f"{show(value)} is not a CA bundle: {problem}", field=f"${name}")
            return Path(value)
    return None
