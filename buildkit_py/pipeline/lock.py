"""buildkit.lock: each image's base digest and complete, hash-checked Python package set.

`lock` resolves (the registry for the base, uv's resolver for the packages) and writes the file; a
build reads it and installs exactly those bytes from `FROM base@sha256:...`. The lock records digests
of its inputs (config, requirements file, templates), so a stale lock is known without the network.
Index URLs are written without credentials; uv's header (its command line) is never kept.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from ..config import Config, default_ca_bundle, read_yaml
from ..errors import BuildError, ConfigError, RegistryError, show, shown_name
from ..fsutil import consult, kept_text, read_text, read_whole, write_atomic, write_private
from ..indexes import without_credentials
from ..matrix import UNRECORDED
from ..notebook import HtmlRepr
from ..patterns import lazy_pattern
from ..refs import parse_ref
from .plan import Plan, PlanLock
from .render import dockerfile_templates_digest

LOCK_NAME = "buildkit.lock"
SCHEMA_VERSION = 1
BASE_KEY = "_base"  # the config itself; variant names start with a letter or digit, so none is this
# A multi-platform image has a section per platform, keyed KEY@PLATFORM (_base@linux/arm64, cu128@linux/amd64): no
# variant name holds "@", and a one-platform image's section keeps its plain key, so its lock reads as it did.
PLATFORM_MARK = "@"
STALE_LOCK = f"{LOCK_NAME} is stale"  # the start of the plan's note a build shows
LOCKED_REQUIREMENTS = ".buildkit-py/locked-requirements.txt"  # its place in the build context
# The wheels uv may pick for an image: the platform's architecture, and the base's glibc (Plan.glibc) as the manylinux tag.
_PYTHON_PLATFORMS = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}
_HASH = lazy_pattern(r"sha256:[0-9a-f]{64}", re.ASCII)
_PYTHON = lazy_pattern(r"3\.[0-9]{1,2}", re.ASCII)
_NAME = lazy_pattern(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?", re.ASCII)
_VERSION = lazy_pattern(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}", re.ASCII)
UV_TIMEOUT = 900  # seconds: a cold resolve of torch with CUDA wheels downloads no wheel, yet reads large pages


@dataclass(frozen=True)
class LockedPackage:
    name: str
    version: str
    hashes: tuple[str, ...]


@dataclass(frozen=True)
class LockedImage:
    """One image's section: a variant of the config, or the config itself (variant None)."""

    variant: str | None
    python: str
    platform: str
    base_image: str  # as the plan names it (the tag)
    base_digest: str  # the platform's image manifest
    indexes: tuple[str, ...]  # where the packages come from, without credentials
    inputs: tuple[tuple[str, str], ...]  # (config | plan | requirements | template, sha256)
    packages: tuple[LockedPackage, ...]
    # Where python, platform and base.image stand in the file ("file:line:col"), for a hand edit's error; not content.
    lines: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    several: bool = False  # one platform of a multi-platform image: its section is keyed KEY@PLATFORM

    @property
    def key(self) -> str:
        """The section's key in the file."""
        return (self.variant or BASE_KEY) + (PLATFORM_MARK + self.platform if self.several else "")

    def to_dict(self) -> dict:
        return {"python": self.python, "platform": self.platform,
                "base": {"image": self.base_image, "digest": self.base_digest},
                "indexes": list(self.indexes), "inputs": dict(self.inputs),
                "packages": [{"name": p.name, "version": p.version, "hashes": list(p.hashes)} for p in self.packages]}

    @property
    def digest(self) -> str:
        """The section's own digest: an edit of another variant's section leaves this image's tag alone."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()

    @property
    def requirements(self) -> str:
        """The requirements file the build installs with --require-hashes: pins and hashes only, no index."""
        return "".join(f"{p.name}=={p.version} " + " ".join(f"--hash={h}" for h in p.hashes) + "\n" for p in self.packages)


@dataclass(frozen=True)
class Lock:
    path: Path
    images: tuple[LockedImage, ...]

    def image(self, variant: str | None, platform: str | None = None) -> LockedImage | None:
        """The section of the variant's image; platform: of that platform of a multi-platform image."""
        return next((i for i in self.images if i.key == section_key(variant, platform)), None)

    def section(self, config: Config) -> LockedImage | None:
        """The section of the image the config builds (one platform's, for a platform of several)."""
        return self.image(config.variant, config.platform if config.platforms else None)

    def text(self) -> str:
        body = {"version": SCHEMA_VERSION,
                "images": {i.key: i.to_dict() for i in self.images}}
        return ("# Written by `buildkit-py lock`: base image digests and hash-checked packages for each image of\n"
                "# the config. Builds install exactly this; `buildkit-py lock --upgrade` refreshes it.\n"
                + yaml.safe_dump(body, sort_keys=False, default_flow_style=False, width=200))


@dataclass(frozen=True)
class LockOptions:
    """What `lock` does: upgrade every pin or the packages named, or only check (write nothing)."""

    upgrade: bool = False
    upgrade_packages: tuple[str, ...] = ()
    check: bool = False  # report staleness, write nothing


@dataclass(frozen=True)
class LockResult(HtmlRepr):
    """The lock file and each image it pins; with check, what makes it stale."""

    path: Path
    written: bool
    stale: tuple[str, ...]  # with check: what changed since the lock was written
    images: tuple[LockedImage, ...]

    def to_dict(self) -> dict:
        return {"path": str(self.path), "written": self.written, "stale": list(self.stale),
                "images": {i.key: {"digest": i.digest, "packages": len(i.packages),
                                                     "base": f"{i.base_image}@{i.base_digest}"} for i in self.images}}


def check_package_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"{show(name)} is not a package name (letters, digits, '.', '_' and '-')", field="--upgrade-package")
    return name


def section_key(variant: str | None, platform: str | None) -> str:
    """A lock section's key: the variant's (or _base), with @PLATFORM for one platform of a multi-platform image."""
    return (variant or BASE_KEY) + (PLATFORM_MARK + platform if platform else "")


def config_key(config: Config) -> str:
    """The key of the section a config's image has: a platform of several has one of its own."""
    return section_key(config.variant, config.platform if config.platforms else None)


def lock_path(config: Config) -> Path:
    return config.root / LOCK_NAME


def _sha256_file(path: Path) -> str:
    consult(path)
    return "sha256:" + hashlib.sha256(read_whole(path)).hexdigest()


def _config_file(config: Config) -> Path | None:
    source = config.source.split(" [tool.", 1)[0]  # pyproject.toml [tool.buildkit-py]
    return None if source == "(defaults)" else Path(source)


def _template_digest(config: Config, plan: Plan) -> str:
    """The user's template, or every shipped Dockerfile template: any of them can change the install steps."""
    if plan.user_template:
        return _sha256_file(config.root / plan.user_template)
    return dockerfile_templates_digest()


def _plan_digest(config: Config, plan: Plan) -> str:
    """What the lock is resolved from, as planned (the config file and flags): a change is a stale lock, while the
    same plan with another python, base or platform in the lock is a hand edit."""
    fw = plan.framework
    fields = [plan.python.version, plan.base_image, platform_of(plan), fw.requirement if fw else None,
              fw.index_url if fw else None, bool(fw and fw.pre), plan.hypertune, list(plan.pip), plan.requirements]
    return "sha256:" + hashlib.sha256(json.dumps(fields).encode()).hexdigest()


def inputs(config: Config, plan: Plan) -> tuple[tuple[str, str], ...]:
    found = _config_file(config)
    values = [("config", _sha256_file(found) if found else "none"), ("plan", _plan_digest(config, plan))]
    if plan.requirements:
        digest = _sha256_file(config.root / plan.requirements)
        if plan.requirements_export is None:  # a requirements file: what its -r/-c includes say is locked too
            from ..requirements_file import included_lines

            included = included_lines(config.root, plan.requirements)[1]
            if included:  # a file without includes keeps the digest its lock recorded
                digest = "sha256:" + hashlib.sha256(json.dumps(
                    [digest, *((name, _sha256_file(config.root / name)) for name in included)]).encode()).hexdigest()
        values.append(("requirements", digest))
    values.append(("template", _template_digest(config, plan)))
    return tuple(values)


def platform_of(plan: Plan) -> str:
    """The platform the plan's packages are resolved and locked for: the plan's, else linux/amd64."""
    platform = plan.platform or "linux/amd64"
    if platform not in _PYTHON_PLATFORMS:
        raise ConfigError(f"a lock is made for {', '.join(_PYTHON_PLATFORMS)}, not {show(platform)}", field="platform")
    return platform


def python_platform(plan: Plan, platform: str) -> str:
    """uv's --python-platform for the image: x86_64-manylinux_2_35 on Ubuntu 22.04, for instance."""
    return f"{_PYTHON_PLATFORMS[platform]}-manylinux_{plan.glibc.replace('.', '_')}"


# ---------------------------------------------------------------------------------------------
# Reading and checking a lock


class _Reader:
    """Typed values out of the parsed lock; every refusal names the file's line."""

    def __init__(self, path: Path, positions: dict[tuple, str]):
        self.path, self.positions = path, positions

    def where(self, at: tuple) -> str:
        while at and at not in self.positions:
            at = at[:-1]
        return self.positions.get(at, str(self.path))

    def fail(self, at: tuple, message: str) -> ConfigError:
        field = ".".join(str(p) for p in at) or None
        return ConfigError(f"{message} (`buildkit-py lock --upgrade` writes it anew)", field=field, where=self.where(at))

    def mapping(self, at: tuple, value, keys: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
        if not isinstance(value, dict):
            raise self.fail(at, f"must be a mapping, not {show(value)}")
        for key in value:
            if key not in keys + optional:
                raise self.fail(at + (key,), f"unknown key {show(key)}; a lock has {', '.join(keys + optional)}")
        for key in keys:
            if key not in value:
                raise self.fail(at, f"{key} is missing")
        return value

    def text(self, at: tuple, value, pattern: re.Pattern | None, allowed: str) -> str:
        if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
            raise self.fail(at, f"{show(value)} is not {allowed}")
        return value

    def items(self, at: tuple, value) -> list:
        if not isinstance(value, list):
            raise self.fail(at, f"must be a list, not {show(value)}")
        return value


def _image(reader: _Reader, key: str, value) -> LockedImage:
    at = ("images", key)
    section = reader.mapping(at, value, ("python", "platform", "base", "indexes", "inputs", "packages"))
    name, _, several = key.partition(PLATFORM_MARK)
    base = reader.mapping(at + ("base",), section["base"], ("image", "digest"))
    inputs_ = reader.mapping(at + ("inputs",), section["inputs"], ("config", "plan", "template"), ("requirements",))
    packages = []
    for i, item in enumerate(reader.items(at + ("packages",), section["packages"])):
        p = reader.mapping(at + ("packages", i), item, ("name", "version", "hashes"))
        hashes = tuple(reader.text(at + ("packages", i, "hashes", j), h, _HASH, "a sha256:<64 hex digits> hash")
                       for j, h in enumerate(reader.items(at + ("packages", i, "hashes"), p["hashes"])))
        if not hashes:
            raise reader.fail(at + ("packages", i, "hashes"), "a package needs at least one hash")
        packages.append(LockedPackage(reader.text(at + ("packages", i, "name"), p["name"], _NAME, "a package name"),
                                      reader.text(at + ("packages", i, "version"), p["version"], _VERSION, "a version"),
                                      hashes))
    digest_or_none = re.compile(r"none|" + _HASH.pattern, re.ASCII)
    image = LockedImage(
        variant=None if name == BASE_KEY else name,
        python=reader.text(at + ("python",), section["python"], _PYTHON, "a Python version such as '3.11'"),
        platform=reader.text(at + ("platform",), section["platform"], re.compile("|".join(_PYTHON_PLATFORMS)),
                             "one of " + ", ".join(_PYTHON_PLATFORMS)),
        base_image=reader.text(at + ("base", "image"), base["image"], None, "an image reference"),
        base_digest=reader.text(at + ("base", "digest"), base["digest"], _HASH, "a sha256:<64 hex digits> digest"),
        indexes=tuple(_index(reader, at + ("indexes", i), u)
                      for i, u in enumerate(reader.items(at + ("indexes",), section["indexes"]))),
        inputs=tuple((k, reader.text(at + ("inputs", k), v, digest_or_none, "a sha256:<64 hex digits> digest"))
                     for k, v in inputs_.items()),
        packages=tuple(packages),
        lines=tuple((name, reader.where(at + path)) for name, path in
                    (("python", ("python",)), ("platform", ("platform",)), ("base_image", ("base", "image")))),
        several=bool(several),
    )
    if several and several != image.platform:  # the key's platform is the section's
        raise reader.fail(at + ("platform",), f"{show(image.platform)} is not the platform its key names ({show(several)})")
    return image


def _index(reader: _Reader, at: tuple, value) -> str:
    """An index URL as `lock` writes it: never quoted in a refusal (a hand edit may have put a password in it), and
    refused with credentials, which a lock never holds (they travel as the build's secrets)."""
    if not isinstance(value, str) or not re.fullmatch(r"[!-~]{1,2048}", value, re.ASCII):
        raise reader.fail(at, "is not an index URL: printable ASCII without spaces")
    if "@" in value.partition("://")[2].split("/", 1)[0]:
        raise reader.fail(at, "is an index URL with credentials (not shown): a lock never holds them; they belong in "
                              "pip_conf or pip_index_url, which the build passes as secrets")
    return value


def read_lock(path: Path) -> Lock:
    # A link out of the trainer directory (from a pull request) would show a start of that file in an error.
    if not path.resolve().is_relative_to(path.parent.resolve()):
        raise ConfigError(f"{LOCK_NAME} is a link that leads outside the trainer directory", where=str(path))
    data, positions = read_yaml(path, "lock file")
    reader = _Reader(path, positions)
    top = reader.mapping((), data, ("version", "images"))
    if type(top["version"]) is not int or top["version"] != SCHEMA_VERSION:  # YAML's true would equal 1
        raise reader.fail(("version",), f"lock schema {show(top['version'])} is not the one this buildkit-py reads "
                                        f"({SCHEMA_VERSION})")
    images = top["images"]
    if not isinstance(images, dict) or not images:
        raise reader.fail(("images",), "must be a mapping of image sections")
    return Lock(path, tuple(_image(reader, str(k), v) for k, v in images.items()))


def _check_variants(lock: Lock, wanted: set[str], exact: bool) -> None:
    """A lock holds a section for each image of its config (exact: and no other), by section key."""
    have = {i.key for i in lock.images}
    if (wanted != have) if exact else not wanted <= have:
        def names(items: set) -> str:
            return ", ".join(sorted(shown_name(i) for i in items)) or "none"  # hand-edited names
        raise ConfigError(f"the lock has sections {names(have)}; the config's images are {names(wanted)}: is it another "
                          "config's lock? Run `buildkit-py lock` to write it for this one", where=str(lock.path))


def changes(config: Config, plan: Plan, image: LockedImage) -> tuple[str, ...]:
    """What differs between the lock's section and this config, read offline. The same plan with another Python,
    base or platform in the lock is a hand edit: ConfigError naming its line."""
    found = []
    now = dict(inputs(config, plan))
    had = dict(image.inputs)
    for name in ("config", "requirements", "template"):
        if now.get(name) != had.get(name):
            what = {"config": _config_file(config) or "config", "requirements": plan.requirements,
                    "template": plan.user_template or "the shipped templates"}[name]
            found.append(f"{name} ({what}) changed since the lock was written")
    planned = {"python": plan.python.version, "base_image": plan.base_image, "platform": platform_of(plan)}
    locked = {"python": image.python, "base_image": image.base_image, "platform": image.platform}
    for name, value in planned.items():
        if value == locked[name]:
            continue
        if now["plan"] == had.get("plan"):
            raise ConfigError(f"{show(locked[name])} is not the {name} the lock was resolved for ({value}): it was "
                              "edited by hand; run `buildkit-py lock` to write it again", where=dict(image.lines).get(name))
        found.append(f"{name} {value} is planned, the lock has {shown_name(locked[name])}")
    if now["plan"] != had.get("plan") and not found:
        found.append("the planned packages changed since the lock was written (flags or the config)")
    return tuple(found)


def load_for(config: Config) -> LockedImage | None:
    """This config's section of the lock beside it, or None when there is no lock. A variant's config no longer
    knows its siblings: the config itself checks them all."""
    path = lock_path(config)
    consult(path)
    if not path.is_file():
        return None
    lock = read_lock(path)
    if config.variant is None:  # each platform's section of the config itself and of each variant
        whole = replace(config, platform=None) if config.platforms else config
        _check_variants(lock, {config_key(p) for c in (whole, *map(whole.with_variant, whole.variants))
                               for p in c.each_platform()}, exact=True)
    else:
        _check_variants(lock, {config_key(config)}, exact=False)
    return lock.section(config)


def apply(config: Config, plan: Plan, *, locked: bool) -> Plan:
    """The plan with the lock's base digest and package set, when a lock is beside the config and current.
    A stale lock: with `locked` (CI), an error naming what changed; else the build goes unlocked, with a note."""
    image = load_for(config)
    if image is None:
        if locked:
            raise ConfigError(f"there is no {LOCK_NAME} beside the config: run `buildkit-py lock` first", field="--locked")
        return plan
    stale = changes(config, plan, image)
    if stale:
        if locked:
            raise ConfigError(f"{LOCK_NAME} is stale: {'; '.join(stale)}; run `buildkit-py lock`", field="--locked")
        return replace(plan, notes=plan.notes + (f"{STALE_LOCK} ({'; '.join(stale)}): this build is not locked; "
                                                 "run `buildkit-py lock`",))
    # The requirements file's own index lines come first: the locked file replaces it in the install.
    text = "".join(line + "\n" for line in plan.requirements_index_options) + image.requirements
    return replace(plan, lock=PlanLock(image.base_digest, image.digest, LOCKED_REQUIREMENTS,
                                       kept_text("locks", text, ".txt")))


def pins(config: Config, plan: Plan) -> dict[str, str]:
    """Each locked package's version by its canonical name, when a current lock is beside the config (else none):
    what a trainer's sdist pins its dependencies to."""
    from packaging.utils import canonicalize_name

    image = load_for(config)
    if image is None or changes(config, plan, image):
        return {}
    return {canonicalize_name(p.name): p.version for p in image.packages}


# ---------------------------------------------------------------------------------------------
# Resolving


def base_digest(image: str, platform: str) -> str:
    """The digest of the image's manifest for the platform, read from its registry (an index is resolved)."""
    from ..oci.client import RegistryClient
    from ..oci.media import MANIFEST_TYPES

    ref = parse_ref(image, field="base_image")
    client = RegistryClient(ref)
    os_, arch = platform.split("/")
    reference = ref.digest or ref.tag or "latest"
    for _ in range(2):  # an index, then the platform's manifest
        got = client.request("GET", f"manifests/{reference}", {"Accept": MANIFEST_TYPES})
        if got.status_code != 200:
            raise RegistryError(f"{ref.registry} answered the read of {ref.repository}:{reference} with HTTP "
                                f"{got.status_code}")
        digest = "sha256:" + hashlib.sha256(got.content).hexdigest()
        if reference.startswith("sha256:") and digest != reference:  # what is pinned must be what was read
            raise RegistryError(f"{ref.registry} gave back another manifest than {reference} for {image}")
        try:
            data = got.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise RegistryError(f"{ref.registry} sent a manifest for {image} that is not a JSON object")
        if "manifests" not in data:
            return digest
        found = [m.get("digest", "") for m in data.get("manifests") or []
                 if (m.get("platform") or {}).get("os") == os_ and (m.get("platform") or {}).get("architecture") == arch]
        if not found or not _HASH.fullmatch(found[0]):
            raise RegistryError(f"{image} has no {platform} image in its index")
        reference = found[0]
    raise RegistryError(f"{image}: an index inside an index")


_UV_FOUND: list[str] = []
_UV_LOCK = threading.Lock()


def _uv() -> str:
    """uv, a dependency of buildkit-py (pyproject), else the one on PATH; looked up once, under a lock: the variants of
    one build plan in threads, and uv's lookup reads sysconfig, whose first read is not thread-safe."""
    with _UV_LOCK:
        if not _UV_FOUND:
            try:
                import uv

                _UV_FOUND.append(uv.find_uv_bin())
            except (ImportError, FileNotFoundError):
                found = shutil.which("uv")
                if found is None:
                    raise BuildError("uv is not installed: `pip install uv` (buildkit-py locks with uv's resolver)") \
                        from None
                _UV_FOUND.append(found)
        return _UV_FOUND[0]


def _parse_compiled(text: str) -> tuple[LockedPackage, ...]:
    """`uv pip compile --generate-hashes --no-annotate --no-header` output: NAME==VERSION with --hash lines."""
    from ..requirements_file import pinned

    found, other = pinned(text)
    if other:
        raise BuildError(f"uv wrote a line buildkit-py does not read: {show(other[0][:200])}")
    for name, _, hashes in found:
        if not hashes:
            raise BuildError(f"uv gave no hash for {name} (an sdist from a directory or VCS cannot be locked)")
    return tuple(LockedPackage(name, version, hashes) for name, version, hashes in found)


def pip_conf_text(config: Config) -> str | None:
    """The index settings the build and resolver use: pip_index_url as a pip.conf, or the pip_conf file."""
    if config.pip_index_url:
        from ..indexes import index_pip_conf

        return index_pip_conf(config.pip_index_url)
    return read_text(config.pip_conf, "pip.conf") if config.pip_conf else None


def _user_indexes(pip_conf: str | None) -> list[str]:
    """The indexes a pip.conf names (PyPI unless it replaces it), without credentials."""
    from ..indexes import index_urls, uv_config

    settings = uv_config(pip_conf or "", "pip.conf")
    replaced = any(line.startswith(("index-url", "no-index")) for line in settings.splitlines())
    return ([] if replaced else ["https://pypi.org/simple"]) + [without_credentials(u) for u in index_urls(settings)]


def index_urls_of(plan: Plan, pip_conf: str | None) -> list[str]:
    """The indexes uv reads for the plan's package set, without credentials: the framework's, the pip.conf's (PyPI
    unless it replaces it), the requirements file's index options."""
    from ..indexes import option_urls

    fw = plan.framework
    return ([without_credentials(fw.index_url)] if fw and fw.index_url else []) + _user_indexes(pip_conf) + \
        [without_credentials(u) for u in option_urls(plan.requirements_index_options)]


def _compile(config: Config, plan: Plan, platform: str, work: Path, *, hashes: bool, extra: Sequence[str] = (),
             timeout: int = UV_TIMEOUT, framework: str | None = None
             ) -> tuple[subprocess.CompletedProcess | None, tuple[str, ...]]:
    """`uv pip compile` of the image's package set (the framework, hypertune, the config's packages and the
    requirements file) for its Python and platform, against the indexes the build uses; the output in work/out.txt.
    framework: the framework's requirement in place of the plan's (a range the resolution chooses the release in).
    (the finished process, or None when it ran past `timeout`; the indexes, without credentials)."""
    fw = plan.framework
    exported = plan.requirements_export  # another tool's lock: its exported lines (exact pins, so uv starts there)
    # Each line of uv's input with where the user wrote it: uv's messages name its line of in.txt, a file of ours.
    lines = ([(framework or fw.requirement, "framework")] if fw else []) + \
        ([(plan.hypertune, "hypertune")] if plan.hypertune else []) + \
        [(p, f"pip[{i}]") for i, p in enumerate(plan.pip)] + ([(f"-r {exported.source}", exported.origin)] if exported else [])
    constraints: list[tuple[str, str]] = []
    if plan.requirements and not exported:
        # The lines buildkit-py read and checked, never the file: uv would follow its includes wherever they lead.
        from ..requirements_file import resolver_input

        requirements, constraints = resolver_input(config.root, plan.requirements)
        lines += requirements + ([("-c constraints.txt", plan.requirements)] if constraints else [])
        (work / "constraints.txt").write_text("".join(line + "\n" for line, _ in constraints))
    (work / "in.txt").write_text("".join(line + "\n" for line, _ in lines))
    args = [_uv(), "pip", "compile", "in.txt", "-o", "out.txt", "--no-header", "--no-annotate",
            "--python-version", plan.python.version, "--python-platform", python_platform(plan, platform), "--quiet"]
    args += ["--generate-hashes"] if hashes else []
    if fw and fw.source == UNRECORDED:  # a release the data does not describe: its wheels say which Python it takes
        args += ["--only-binary", fw.name]
    if fw and fw.overrides:  # what the image's installs drop (templates/macros.j2 `install`)
        (work / "overrides.txt").write_text("".join(line + "\n" for line in fw.overrides))
        args += ["--overrides", "overrides.txt"]
    if fw and fw.pre:
        args.append("--prerelease=allow")
    if fw and fw.index_url:
        args += ["--extra-index-url", fw.index_url, "--index-strategy", "unsafe-best-match"]
    pip_conf = pip_conf_text(config)
    if pip_conf is not None:
        from ..indexes import uv_config

        write_private(work / "uv.toml", uv_config(pip_conf, str(config.pip_conf or "pip_index_url")).encode())
        args += ["--config-file", "uv.toml"]
    else:
        args.append("--no-config")
    indexes = index_urls_of(plan, pip_conf)
    env = dict(os.environ)
    ca = config.ca_cert or default_ca_bundle()
    if ca:
        env["SSL_CERT_FILE"] = str(ca)
    from ..indexes import google_logins, logins_netrc, refusal_hint, url_credentials

    credentials = url_credentials(config.pip, "pip")
    logins = google_logins(plan.google_indexes)  # minted here: only a run of uv needs them
    if credentials or logins:  # plan.pip holds the URLs without them: uv reads them as the build's uv does
        write_private(work / "netrc", logins_netrc(credentials, logins).encode())
        env["NETRC"] = str(work / "netrc")
    try:
        done = subprocess.run([*args, *extra], cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        done = None
    if done is not None:
        done.stderr = _users_lines(done.stderr, {"in.txt": lines, "constraints.txt": constraints})
    hint = refusal_hint(done.stderr, plan.google_indexes, logins.identity) \
        if logins is not None and done is not None and done.returncode != 0 else None
    if hint:  # in uv's own form: what the callers' messages keep of its output
        done.stderr = f"{done.stderr.rstrip()}\nhint: {hint}\n"
    return done, tuple(dict.fromkeys(indexes))


_INPUT_PLACE = lazy_pattern(r"(?:in )?`(in\.txt|constraints\.txt)` at (line|position) ([0-9]+)")


def _users_lines(stderr: str, written: dict[str, list[tuple[str, str]]]) -> str:
    """uv's message with each "in `in.txt` at line N" (or "at position P", a character of it), a file of ours, said
    as where that line came from. written: each of our files' lines, one per line, with where each came from."""
    def where(m: re.Match) -> str:
        lines, number = written[m.group(1)], int(m.group(3))
        if m.group(2) == "position":  # a character of the file: the line it falls in
            ends = list(itertools.accumulate(len(text) + 1 for text, _ in lines))
            number = bisect.bisect_right(ends, number) + 1
        return f"at {lines[number - 1][1]}" if 0 < number <= len(lines) else "in the requirements"
    return _INPUT_PLACE.sub(where, stderr)


def resolve_packages(config: Config, plan: Plan, platform: str, previous: LockedImage | None,
                     options: LockOptions) -> tuple[tuple[LockedPackage, ...], tuple[str, ...]]:
    with tempfile.TemporaryDirectory(prefix="buildkit-py-lock-") as tmp:
        work = Path(tmp)
        extra = ["--upgrade"] if options.upgrade else []
        for name in options.upgrade_packages:
            extra += ["--upgrade-package", name]
        if previous is not None and not options.upgrade:  # uv keeps the pins of an existing output file
            (work / "out.txt").write_text(previous.requirements)
        done, indexes = _compile(config, plan, platform, work, hashes=True, extra=extra)
        if done is None:
            raise BuildError(f"uv did not resolve the packages within {UV_TIMEOUT} s")
        if done.returncode != 0:
            # uv's message may quote an index URL: credentials are cut out of it.
            raise BuildError("uv could not resolve the packages for Python "
                             f"{plan.python.version} ({platform}): {without_credentials(done.stderr.strip())[-2000:]}")
        return _parse_compiled((work / "out.txt").read_text()), indexes


def lock_image(config: Config, plan: Plan, previous: LockedImage | None, options: LockOptions) -> LockedImage:
    platform = platform_of(plan)
    packages, indexes = resolve_packages(config, plan, platform, previous, options)
    return LockedImage(config.variant, plan.python.version, platform, plan.base_image,
                       base_digest(plan.base_image, platform), indexes, inputs(config, plan), packages,
                       several=bool(config.platforms))


def check(config: Config, plans: list[tuple[Config, Plan]]) -> tuple[str, ...]:
    """What makes the lock stale: inputs (offline), then each base tag's digest in its registry."""
    path = lock_path(config)
    if not path.is_file():
        return (f"there is no {LOCK_NAME} beside the config",)
    lock = read_lock(path)
    _check_variants(lock, {config_key(c) for c, _ in plans}, exact=True)
    found = []
    for cfg, plan in plans:
        image = lock.section(cfg)
        assert image is not None  # _check_variants
        name = config_key(cfg)
        found += [f"{name}: {c}" for c in changes(cfg, plan, image)]
        now = base_digest(plan.base_image, image.platform)
        if now != image.base_digest:
            found.append(f"{name}: {plan.base_image} now points at {now}, the lock has {image.base_digest}")
    return tuple(found)


def lock(config: Config, plans: list[tuple[Config, Plan]], options: LockOptions) -> LockResult:
    path = lock_path(config)
    if options.check:
        stale = check(config, plans)
        return LockResult(path, False, stale, read_lock(path).images if path.is_file() else ())
    previous = None
    if path.is_file():
        try:
            previous = read_lock(path)
        except ConfigError:
            if not options.upgrade:
                raise
    from packaging.utils import canonicalize_name

    unknown = [n for n in options.upgrade_packages if previous is None or not any(
        canonicalize_name(p.name) == canonicalize_name(n) for i in previous.images for p in i.packages)]
    if unknown:
        raise ConfigError(f"{show(unknown[0])} is not a package of the lock", field="--upgrade-package")
    images = tuple(lock_image(cfg, plan, previous.section(cfg) if previous else None, options)
                   for cfg, plan in plans)
    write_atomic(path, Lock(path, images).text())
    return LockResult(path, True, (), images)


__all__ = ["LOCK_NAME", "Lock", "LockOptions", "LockResult", "LockedImage", "LockedPackage", "apply", "lock",
           "read_lock"]
