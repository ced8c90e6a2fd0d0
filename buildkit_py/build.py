"""config -> plan -> render -> context -> image (-> push): the build pipeline, start to end.

Tags are applied only after a successful build, so a failed or interrupted build leaves no new
tag; the staged context and every temporary file live in one temp dir that is always removed.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .builders import builder_class
from .builders.base import BuildRequest
from .config import Config, default_ca_bundle
from .context import BuildContext, ContextListing, hash_context, list_context, staged
from .engine import engine_may_answer
from .errors import BuildError, BuildkitError, ConfigError, RegistryError
from .fsutil import read_text
from .lock import STALE_LOCK
from .lock import apply as apply_lock
from .notebook import HtmlRepr
from .plan import LABEL_PREFIX, Plan, make_plan
from .progress import Reporter
from .refs import ImageRef, parse_ref
from .render import render_dockerfile, render_project_dockerignore
from .resources import launcher_sources

if TYPE_CHECKING:  # the registry client, the fast path, threads and INI parser load with the build or push
    from . import fastpath
    from .registry import PushResult

# The labels a build sets itself (--label), beside the Dockerfile's.
CONTENT_LABEL = f"{LABEL_PREFIX}.content-digest"
REVISION_LABEL = "org.opencontainers.image.revision"
VARIANT_LABEL = f"{LABEL_PREFIX}.variant"
BUILD_LABELS = (CONTENT_LABEL, REVISION_LABEL, VARIANT_LABEL)

CA_SECRET = "buildkit-ca"
PIP_CONF_SECRET = "buildkit-pip-conf"
# The same index settings for uv (the build's installer), which does not read pip.conf: a uv.toml.
UV_CONF_SECRET = "buildkit-uv-conf"


@dataclass(frozen=True)
class BuildOptions:
    """What this one build does; how images are built (tags, platform, network, CA bundle, pip
    index, builder, allowed files) is in the Config, from the config file or flags."""

    push: bool = False
    docker: str | None = None  # the docker client that runs BuildKit (default: $BUILDKIT_PY_DOCKER or found)
    no_cache: bool = False
    # A registry image to reuse layers from and refresh (e.g. REPO:buildcache): what CI runners with
    # an empty engine need. BuildKit keeps the cache inline in that image; buildah in that repository.
    cache_ref: str | None = None
    locked: bool = False  # buildkit.lock must be there and current (CI): else exit 2 naming what changed
    cloudbuild_endpoint: str | None = None  # builder cloudbuild: the API (default: $BUILDKIT_PY_CLOUDBUILD_ENDPOINT or Google's)
    # A pushed code-only edit is appended to the last pushed image in the registry (fastpath.py); False: always
    # build and push every changed layer through the engine.
    fast_path: bool = True


@dataclass(frozen=True)
class BuildResult(HtmlRepr):
    """A built image: its ID, tags, content digest and plan; pushed, each tag's repository@digest."""

    image_id: str
    tags: tuple[str, ...]
    built: bool  # False: an image with the same content tag already existed
    content_digest: str
    plan: Plan
    pushed: tuple[PushResult, ...] = field(default=())
    # (stage, seconds) of a fast-path append: scan, base (reading the previous image), tar, upload,
    # manifest; empty for a build by the engine
    timings: tuple[tuple[str, float], ...] = field(default=())

    def to_dict(self) -> dict:
        return {
            "image_id": self.image_id,
            "tags": list(self.tags),
            "built": self.built,
            "content_digest": self.content_digest,
            "pushed": [p.__dict__ for p in self.pushed],
            "fast_path": dict(self.timings) if self.timings else None,
            "plan": self.plan.to_dict(),
        }


def git_revision(root: Path) -> str | None:
    """The commit of the trainer's checkout, with -dirty when its files have local changes."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=20)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("-dirty" if dirty else "")


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "trainer"


def image_refs(config: Config, content_tag: str, revision: str | None) -> list[ImageRef]:
    """The content tag (and git tag) on the primary repository, then every tag as given; a tag
    without a tag part gets the content tag. Tags were checked when the config was loaded."""
    extra = [parse_ref(t, field="--tag", allow_digest=False) for t in config.tags]
    primary = config.image or (extra[0].repository if extra else f"buildkit-py/{_slug(config.root.name)}")
    repo = parse_ref(primary, field="image")
    # A variant's tags carry its name, so variants of one config never share a tag.
    suffix = f"-{config.variant}" if config.variant else ""
    refs = [ImageRef(repo.registry, repo.path, content_tag + suffix)]
    if revision:
        refs.append(ImageRef(repo.registry, repo.path, f"git-{revision}{suffix}"))
    for ref in extra:
        refs.append(ImageRef(ref.registry, ref.path, (ref.tag or content_tag) + suffix))
    unique = {str(r): r for r in refs}
    return list(unique.values())


def _secrets(config: Config, tmp: Path) -> tuple[tuple[str, Path], ...]:
    """Secret files for the build, copied under fixed names into a private temp dir: the path the
    builder is given can then hold no character that would add a field to its --secret spec."""
    secrets = []
    ca = config.ca_cert or default_ca_bundle()
    if ca:
        secrets.append((CA_SECRET, _private_copy(ca.read_bytes(), tmp / "ca.pem")))
    if config.pip_index_url:
        # The URL is one line of printable ASCII (checked in config), so it cannot add a section.
        pip_conf = f"[global]\nindex-url = {config.pip_index_url}\n"
    elif config.pip_conf:
        pip_conf = read_text(config.pip_conf, "pip.conf")
    else:
        return tuple(secrets)
    secrets.append((PIP_CONF_SECRET, _private_copy(pip_conf.encode(), tmp / "pip.conf")))
    uv_toml = uv_config(pip_conf, str(config.pip_conf or "pip_index_url"))
    secrets.append((UV_CONF_SECRET, _private_copy(uv_toml.encode(), tmp / "uv.toml")))
    return tuple(secrets)


# pip.conf keys an install reads ([install] over [global]) -> uv.toml keys; uv takes lists where pip
# takes whitespace-separated values. Other pip keys (timeout, retries, cert) have no uv.toml form:
# the CA bundle reaches uv as SSL_CERT_FILE.
_UV_KEYS = {"index-url": ("index-url", False), "extra-index-url": ("extra-index-url", True),
            "find-links": ("find-links", True), "trusted-host": ("allow-insecure-host", True),
            "no-index": ("no-index", None)}


def uv_config(pip_conf: str, where: str) -> str:
    """The index settings of a pip.conf as a uv.toml."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(pip_conf, source=where)
    except configparser.Error as exc:
        # Its lines may carry credentials: name the kind of error, never the text.
        raise ConfigError(f"the pip.conf cannot be read as an INI file ({type(exc).__name__})", where=where) from None
    settings: dict[str, str] = {}
    for section in ("global", "install"):
        if parser.has_section(section):
            settings.update({k.replace("_", "-"): v for k, v in parser.items(section) if k.replace("_", "-") in _UV_KEYS})
    lines = []
    if "extra-index-url" in settings:  # pip's semantics: the best version across all indexes (uv: the first index's)
        lines.append('index-strategy = "unsafe-best-match"')
    for key, value in settings.items():
        name, is_list = _UV_KEYS[key]
        if is_list is None:  # a pip boolean
            lines.append(f"{name} = {'true' if value.strip().lower() in ('1', 'true', 'yes', 'on') else 'false'}")
        elif is_list:
            lines.append(f"{name} = [{', '.join(_toml_string(v) for v in value.split())}]")
        else:
            lines.append(f"{name} = {_toml_string(value.strip())}")
    return "".join(line + "\n" for line in lines)


def _toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}" if ord(c) < 0x10000
                         else f"\\U{ord(c):08x}" for c in text) + '"'


def _private_copy(data: bytes, path: Path) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def _inputs(config: Config, buildkit: bool, dockerfile: str | None = None, plan: Plan | None = None,
            locked: bool = False) -> tuple[Plan, str, str]:
    """The plan (with buildkit.lock's pins when there is a current lock), Dockerfile and .dockerignore a build of this
    config uses; `dockerfile`: the user's own text, built as it is (autopackage --dockerfile) instead of the rendered one;
    `plan`: the config's, where the caller has made it already (each stage runs once per command)."""
    plan = plan or make_plan(config)
    if dockerfile is None:
        plan = apply_lock(config, plan, locked=locked)
    text = dockerfile if dockerfile is not None else render_dockerfile(plan, root=config.root, buildkit=buildkit)
    return plan, text, render_project_dockerignore(config.root)


def planned_refs(config: Config, dockerfile: str | None = None, plan: Plan | None = None,
                 git: bool = True) -> tuple[list[ImageRef], str]:
    """The tags a build would apply (the content tag first) and the content digest, without an
    engine: what `print image-uri` and the Makefile's push stamp need. git=False: without the git tag, whose
    two git runs are most of the time of a `print` that needs only the content tag."""
    plan, dockerfile, ignore = _inputs(config, builder_class(config.builder).supports_secrets, dockerfile, plan)
    # Each file read once and hashed, nothing copied: nothing is handed to a builder here, so there is no copy
    # the digest must match (a file that changes before the build gives that build another tag, as it should).
    digest = hash_context(_listing(config, dockerfile, ignore, plan)).digest
    return image_refs(config, f"bk-{digest[:16]}", git_revision(config.root) if git else None), digest


def _listing(config: Config, dockerfile: str, ignore: str, plan: Plan) -> ContextListing:
    locked = [(plan.lock.requirements, plan.lock.source)] if plan.lock else []
    return list_context(config.root, dockerfile, ignore, allow_secrets=config.allow_secrets,
                        allow_large=config.allow_large, extras=launcher_sources() + locked)


def push_image(push: Callable[[ImageRef, Reporter], PushResult], refs: Sequence[ImageRef],
               reporter: Reporter) -> tuple[PushResult, ...]:
    """Push one image under every ref (all tags of one local image), the layers sent once: the first ref by
    PUSH (a builder's or the engine's), its other tags in the same repository as manifests (about 10 ms each on
    loopback, where an engine push that checks every layer again takes 50); a ref in another repository is
    pushed. Every command that pushes comes here."""
    from .registry import add_tags

    first = push(refs[0], reporter)
    same = [r for r in refs[1:] if r.repository == refs[0].repository]
    try:
        added = dict(zip(map(str, same), add_tags(first, same, reporter), strict=True))
    except RegistryError as exc:
        # The engine's push says the same refusal with its retries and hints, or gets through where this did not.
        reporter.message(f"adding the tags as manifests failed ({exc}); pushing them")
        added = {}
    return (first, *(added.get(str(r)) or push(r, reporter) for r in refs[1:]))


def _fast_path(config: Config, options: BuildOptions, record: fastpath.Record | None, plan: Plan, dockerfile: str,
               ctx: BuildContext, refs: list[ImageRef], labels: list[tuple[str, str]], secrets, platform: str | None,
               reporter: Reporter) -> tuple[fastpath.Appended | None, tuple | None]:
    """The appended image when only the code changed, else why not (said) and the record parts to keep after
    the full build (None where this build cannot have a record)."""
    from . import fastpath
    from .registry import Unreachable

    if not options.push:
        return None, None
    step = fastpath.code_step(dockerfile)
    if isinstance(step, str):
        reporter.message(f"{step}: full build")
        return None, None
    parts = fastpath.record_parts(plan, dockerfile, step, ctx.snapshot, secrets, config.builder, platform)
    if not options.fast_path or options.no_cache:
        reporter.message(f"{'--no-fast-path' if not options.fast_path else '--no-cache'}: full build")
        return None, parts
    same = [r for r in refs if r.repository == refs[0].repository]
    why = "a tag is in another repository" if len(same) != len(refs) else fastpath.full_build_reason(record, parts)
    if why:
        reporter.message(f"{why}: full build")
        return None, parts
    try:
        appended = fastpath.append(refs, record, step, ctx.directory, labels, BUILD_LABELS, platform, reporter)
    except fastpath.Refused as exc:
        reporter.message(f"{exc}: full build")
        return None, parts
    except Unreachable as exc:  # nothing was tagged: the engine's own network may reach the registry
        reporter.message(f"{exc} from this machine: full build")
        return None, parts
    except fastpath.PartlyTagged as exc:
        raise RegistryError(f"the fast path failed: {exc}") from None
    except RegistryError as exc:
        raise RegistryError(f"the fast path failed: {exc}; no tag was changed") from None
    fastpath.save_record(replace(record, manifest=appended.pushed[0].digest, content_tag=refs[0].tag or ""), reporter)
    return appended, parts


def _sync_engine(refs: Sequence[ImageRef], appended: fastpath.Appended, reporter: Reporter) -> None:
    """After an append, an engine's own tags of these names would still name older images (a later `docker run`
    or `buildkit-py push` of one would use the stale image): such tags are removed, the layers kept, so that the
    next use pulls the new image and only its code layer travels. Pulling it here would cost the edit more than
    its whole append; an engine without any of these tags (a CI runner's) is only asked."""
    if not engine_may_answer():
        return
    from .builders.engine_images import EngineImages

    images, new = EngineImages(), {appended.image_id, appended.pushed[0].digest}
    stale: list[ImageRef] = []
    try:
        for ref in refs:
            if images.image_id(ref) not in (None, *new):
                images.untag(ref)
                stale.append(ref)
    except BuildkitError as exc:
        reporter.message(f"note: the local engine's tags may still name older images ({exc}); "
                         f"`docker pull {refs[0]}` brings the new one")
        return
    if stale:
        reporter.message(f"the local engine's {', '.join(map(str, stale))} named the previous image: untagged, so "
                         "`docker run` and `buildkit-py run` pull the new one (its code layer only)")


def _pull_appended(builder, record: fastpath.Record | None, ref: ImageRef, reporter: Reporter) -> str | None:
    """The image the fast path pushed with this very content, pulled into the engine (which has the layers below
    the code layer from the full build, so only the code layer travels); None when there is none to pull."""
    if record is None or record.content_tag != ref.tag or not hasattr(builder, "pull"):
        return None
    started = time.perf_counter()
    image_id = builder.pull(ref)
    if image_id is not None:
        reporter.message(f"pulled {ref}, pushed by the fast path, in {time.perf_counter() - started:.2f} s "
                         "(only the layers the engine lacked)")
    return image_id


def build(config: Config, options: BuildOptions, reporter: Reporter, dockerfile: str | None = None,
          plan: Plan | None = None) -> BuildResult:
    from concurrent.futures import ThreadPoolExecutor

    from . import fastpath

    started = time.perf_counter()
    backend = builder_class(config.builder)
    remote_builder = getattr(backend, "remote", False)  # builds and pushes where it runs: no fast path from here
    # The builder's probes and git run (subprocesses: a Go client's start-up each) while the Dockerfile is
    # rendered; an error of the inputs still comes first. A push that may take the fast path needs no builder:
    # it is made only if the build turns out to be a full one.
    record = fastpath.load_record(image_refs(config, "latest", None)[0].repository, config.variant) \
        if options.fast_path and not remote_builder else None
    eager = not (options.push and record)
    with ThreadPoolExecutor(max_workers=2) as pool:
        creating = pool.submit(backend.create, options.docker) if eager else None
        describing = pool.submit(git_revision, config.root)
        plan, dockerfile, ignore = _inputs(config, backend.supports_secrets, dockerfile, plan, options.locked)
        revision = describing.result()
        if creating is not None:
            creating.result()
    # A lock's wheels are for its platform (linux/amd64 unless the config names one): the build targets the same.
    platform = config.platform or ("linux/amd64" if plan.gpu or plan.lock else None)
    cache_ref = parse_ref(options.cache_ref, field="--cache-ref", allow_digest=False) if options.cache_ref else None
    # A remote builder's settings, checked before anything is uploaded; its secrets come from where it runs.
    remote = backend.settings(config, options.cloudbuild_endpoint) if remote_builder else None

    with tempfile.TemporaryDirectory(prefix="buildkit-py-secrets-") as tmp:
        secrets = () if remote else _secrets(config, Path(tmp))  # every input is checked before the engine is reached
        if secrets and not backend.supports_secrets:
            raise BuildError(
                f"the {backend.name} builder cannot pass secrets ({', '.join(s for s, _ in secrets)}) without writing "
                "them into a layer; use a BuildKit client (--builder buildkit), or unset PIP_CERT, "
                "REQUESTS_CA_BUNDLE and SSL_CERT_FILE if no CA bundle is needed"
            )
        # Each file is read once, copied and hashed as it is copied: the content tag names exactly what the
        # builder gets, whatever changes in the directory meanwhile (the build's own log). An image already
        # built from the same content makes the copy a waste, yet a small one next to hashing every file anyway.
        with staged(_listing(config, dockerfile, ignore, plan)) as ctx:
            snapshot = ctx.snapshot
            for note in plan.notes:
                if note.startswith(STALE_LOCK):
                    reporter.message(f"note: {note}")
            for note in snapshot.notes:
                reporter.message(f"note: {note}")
            refs = image_refs(config, f"bk-{snapshot.digest[:16]}", revision)
            labels = [(CONTENT_LABEL, snapshot.digest)]
            if revision:
                labels.append((REVISION_LABEL, revision))
            if config.variant:
                labels.append((VARIANT_LABEL, config.variant))
            scan = time.perf_counter() - started  # plan, render, listing, reading and staging the files
            appended, parts = (None, None) if remote_builder else _fast_path(config, options, record, plan, dockerfile, ctx,
                                                                              refs, labels, secrets, platform, reporter)
            if appended is not None:
                if config.builder != "buildah":  # buildah keeps images in its own storage, not the engine's
                    _sync_engine(refs, appended, reporter)
                return BuildResult(appended.image_id, tuple(str(r) for r in refs), True, snapshot.digest, plan,
                                   appended.pushed, (("scan", scan), *appended.timings))
            builder = creating.result() if creating is not None else backend.create(options.docker)
            image_id = None if options.no_cache else builder.image_id(refs[0]) or _pull_appended(builder, record, refs[0],
                                                                                               reporter)
            built = image_id is None
            if built:
                reporter.message(f"building {refs[0]} ({len(snapshot.files)} files in the context, builder {builder.name})")
                request = BuildRequest(
                    context_dir=ctx.directory,
                    dockerfile=ctx.dockerfile,
                    labels=tuple(labels),
                    platform=platform,
                    network=config.network,
                    secrets=secrets,
                    no_cache=options.no_cache,
                    cache_ref=cache_ref,
                    tags=tuple(refs),
                    cloudbuild=remote,
                )
                image_id = builder.build(request, reporter)
            else:
                reporter.message(f"{refs[0]} is up to date: same Dockerfile and files, nothing to build")
        builder.tag(image_id, refs)
        reporter.message("tagged " + ", ".join(str(r) for r in refs))
        if cache_ref is not None and builder.inline_cache and options.push:
            builder.tag(image_id, [cache_ref])  # the inline cache travels in this image

    pushed: tuple[PushResult, ...] = ()
    if options.push:
        # The inline cache's tag is the same image: one more manifest when it shares the repository.
        cache = [cache_ref] if cache_ref is not None and builder.inline_cache else []
        pushed = push_image(builder.push, refs + cache, reporter)[:len(refs)]
        if parts is not None:  # what the next code-only edit appends to
            fastpath.save_record(fastpath.Record(refs[0].repository, config.variant, parts, pushed[0].digest,
                                                 refs[0].tag or ""), reporter)
    return BuildResult(image_id, tuple(str(r) for r in refs), built, snapshot.digest, plan, pushed)
