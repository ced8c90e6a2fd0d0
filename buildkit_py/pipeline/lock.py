"""buildkit.lock: each image's base digest and complete, hash-checked Python package set.

`lock` resolves (the registry for the base, uv's resolver for the packages) and writes the file; a
build reads it and installs exactly those bytes from `FROM base@sha256:...`. The lock records digests
of its inputs (config, requirements file, templates), so a stale lock is known without the network.
Index URLs are written without credentials; uv's header (its command line) is never kept.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from ..config import Config, read_yaml
from ..config.reading import DEFAULTS_SOURCE
from ..errors import BuildError, ConfigError, RegistryError, show, shown_name
from ..fsutil import consult, kept_text, read_whole, write_atomic
from ..oci.refs import parse_ref
from ..patterns import lazy_pattern
from ..progress import HtmlRepr
from ..sources.pip_config import without_credentials
from .plan import Plan, PlanLock
from .render import dockerfile_templates_digest
from .uv import PYTHON_PLATFORMS, UV_TIMEOUT, Compile, compile_requirements, platform_of

LOCK_NAME = "buildkit.lock"
SCHEMA_VERSION = 1
BASE_KEY = "_base"  # the config itself; variant names start with a letter or digit, so none is this
# A multi-platform image has a section per platform, keyed KEY@PLATFORM (_base@linux/arm64, cu128@linux/amd64): no
# variant name holds "@", and a one-platform image's section keeps its plain key, so its lock reads as it did.
PLATFORM_MARK = "@"
STALE_LOCK = f"{LOCK_NAME} is stale"  # the start of the plan's note a build shows
LOCKED_REQUIREMENTS = ".buildkit-py/locked-requirements.txt"  # its place in the build context
_HASH = lazy_pattern(r"sha256:[0-9a-f]{64}", re.ASCII)
_PYTHON = lazy_pattern(r"3\.[0-9]{1,2}", re.ASCII)
_NAME = lazy_pattern(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?", re.ASCII)
_VERSION = lazy_pattern(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}", re.ASCII)


@dataclass(frozen=True)
class LockedPackage:
    """One package of a lock section: its name, version and hashes."""

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
    """buildkit.lock: its path and each image's section."""

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
    return None if source == DEFAULTS_SOURCE else Path(source)


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
            from ..sources.requirements import included_lines

            included = included_lines(config.root, plan.requirements)[1]
            if included:  # a file without includes keeps the digest its lock recorded
                digest = "sha256:" + hashlib.sha256(json.dumps(
                    [digest, *((name, _sha256_file(config.root / name)) for name in included)]).encode()).hexdigest()
        values.append(("requirements", digest))
    values.append(("template", _template_digest(config, plan)))
    return tuple(values)


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
        platform=reader.text(at + ("platform",), section["platform"], re.compile("|".join(PYTHON_PLATFORMS)),
                             "one of " + ", ".join(PYTHON_PLATFORMS)),
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


def _parse_compiled(text: str) -> tuple[LockedPackage, ...]:
    """`uv pip compile --generate-hashes --no-annotate --no-header` output: NAME==VERSION with --hash lines."""
    from ..sources.requirements import pinned

    found, other = pinned(text)
    if other:
        raise BuildError(f"uv wrote a line buildkit-py does not read: {show(other[0][:200])}")
    for name, _, hashes in found:
        if not hashes:
            raise BuildError(f"uv gave no hash for {name} (an sdist from a directory or VCS cannot be locked)")
    return tuple(LockedPackage(name, version, hashes) for name, version, hashes in found)


def resolve_packages(config: Config, plan: Plan, platform: str, previous: LockedImage | None,
                     options: LockOptions) -> tuple[tuple[LockedPackage, ...], tuple[str, ...]]:
    with tempfile.TemporaryDirectory(prefix="buildkit-py-lock-") as tmp:
        work = Path(tmp)
        extra = ["--upgrade"] if options.upgrade else []
        for name in options.upgrade_packages:
            extra += ["--upgrade-package", name]
        if previous is not None and not options.upgrade:  # uv keeps the pins of an existing output file
            (work / "out.txt").write_text(previous.requirements)
        done, indexes = compile_requirements(config, plan, platform, work, Compile(True, tuple(extra)))
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
