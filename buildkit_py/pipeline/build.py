"""config -> plan -> render -> context -> image (-> push): the build pipeline, start to end.

Tags are applied only after a successful build, so a failed or interrupted build leaves no new
tag; the staged context and every temporary file live in one temp dir that is always removed.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import platform as _host
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..builders import Backend, builder_class
from ..builders.base import QEMU_HANDLERS, BuildRequest
from ..catalog.resources import launcher_sources
from ..config import Config, default_ca_bundle
from ..errors import BuildError, ConfigError, show
from ..fsutil import read_whole, write_private
from ..launcher.constants import IMPORTS_CONTEXT_FILE
from ..oci.refs import ImageRef, parse_ref
from ..progress import Reporter
from ..sources.imports import import_failure
from ..sources.pip_config import google_logins, logins_netrc, netrc, refusal_hint, url_credentials, uv_config
from .buildtypes import BuildOptions, BuildResult, PlatformImage, platform_suffix
from .context import hash_context
from .fastbuild import Attempt, Previous, Staged, appended_made, attempt, git_revision, kept_record, staging
from .lock import STALE_LOCK, config_key
from .lock import apply as apply_lock
from .plan import Plan, make_plan
from .publish import Made, publish, publish_index
from .recipe import Recipe, secrets_digest
from .render import render_dockerfile, render_project_dockerignore
from .resolution import Resolution, Resolved, check_resolution, declared_in, remembered, resolve_plan
from .uv import pip_conf_text

if TYPE_CHECKING:  # the registry client, the fast path, threads and INI parser load with the build or push
    from . import fastpath

CA_SECRET = "buildkit-ca"
PIP_CONF_SECRET = "buildkit-pip-conf"
# The same index settings for uv (the build's installer), which does not read pip.conf: a uv.toml.
UV_CONF_SECRET = "buildkit-uv-conf"
# The logins cut out of the pip entries' URLs, as a netrc: uv sends them to their hosts (plan.pip_credentials).
NETRC_SECRET = "buildkit-netrc"


_SECRET_FILES = {CA_SECRET: "ca.pem", PIP_CONF_SECRET: "pip.conf", UV_CONF_SECRET: "uv.toml", NETRC_SECRET: "netrc"}


def secret_sources(config: Config) -> tuple[tuple[str, bytes], ...]:
    """(secret id, content) of each secret the build passes: the CA bundle, the index settings and the logins uv sends
    to index hosts (the pip entries' URLs' credentials; the Artifact Registry tokens are added where a build mints
    them, for no digest may hold them: they change every hour)."""
    secrets = []
    ca = config.ca_cert or default_ca_bundle()
    if ca:
        secrets.append((CA_SECRET, read_whole(ca)))  # the recipe's index digest and the build: read once
    pip_conf = pip_conf_text(config)
    if pip_conf is not None:
        secrets.append((PIP_CONF_SECRET, pip_conf.encode()))
        secrets.append((UV_CONF_SECRET, uv_config(pip_conf, str(config.pip_conf or "pip_index_url")).encode()))
    credentials = url_credentials(config.pip, "pip")
    if credentials:
        secrets.append((NETRC_SECRET, netrc(credentials).encode()))
    return tuple(secrets)


def _secrets(sources: Sequence[tuple[str, bytes]], tmp: Path) -> tuple[tuple[str, Path], ...]:
    """Secret files for the build, copied under fixed names into a private temp dir: the path the
    builder is given can then hold no character that would add a field to its --secret spec."""
    return tuple((name, write_private(tmp / _SECRET_FILES[name], data)) for name, data in sources)


def prepare(config: Config, *, locked: bool = False, own_dockerfile: str | None = None) -> Plan:
    """The plan stage of a command that builds nothing: the config's plan with buildkit.lock's pins applied, once (with
    `locked`, a stale or missing lock is an error), and the framework release and Python an earlier resolution chose
    for it (no resolver call: the tags `print image-uri` names are the build's); a user's own Dockerfile
    (autopackage --dockerfile) is built as it is, unlocked."""
    return prepare_resolved(config, locked=locked, own_dockerfile=own_dockerfile, resolve=False).plan


def prepare_resolved(config: Config, *, locked: bool = False, own_dockerfile: str | None = None, resolve: bool = True,
                     offline: bool = False, declared: Sequence[tuple[str, str]] | None = None) -> Resolved:
    """The plan stage of a build: prepare's plan, its requirements resolved with uv before the engine builds (a
    requirement that does not resolve exits 2 at its file:line now, not minutes into the build), the framework release
    and Python chosen with them where nobody pinned them. A remote builder reads indexes this machine may not reach:
    its plan is resolved by that build. declared: (requirement, where) for an error's position."""
    plan = make_plan(config)
    if own_dockerfile is not None:
        return Resolved(config, plan, None)
    plan = apply_lock(config, plan, locked=locked)
    if not resolve or builder_class(config.builder).remote:
        kept = remembered(config, plan)
        return Resolved(config, plan, None) if kept is None else replace(kept, resolution=None)
    return resolve_plan(config, plan, declared_in(config, plan) if declared is None else declared, offline=offline)


def planned_refs(recipe: Recipe, git: bool = True) -> tuple[list[ImageRef], str]:
    """The tags a build of the recipe would apply (the content tag first) and the content digest, without an
    engine: what `print image-uri`, autopackage's job and the Makefile's push stamp need. git=False: without the git
    tag, whose git run is most of the time of a `print` that needs only the content tag."""
    # Each file read and hashed, nothing copied: nothing is handed to a builder here, so there is no copy the digest
    # must match (a file that changes before the build gives that build another tag, as it should).
    digest = hash_context(recipe.listing()).digest
    return recipe.refs(f"bk-{digest[:16]}", git_revision(recipe.root) if git else None), digest


def planned_index_refs(config: Config, recipes: Sequence[Recipe], git: bool = True) -> tuple[list[ImageRef], str]:
    """planned_refs of a multi-platform image: the tags its index gets and its content digest (of each platform's)."""
    digest = index_content_digest([(c.platform or "", hash_context(r.listing()).digest)
                                   for c, r in zip(config.each_platform(), recipes, strict=True)])
    return recipes[0].refs(f"bk-{digest[:16]}", git_revision(recipes[0].root) if git else None), digest


def _extras(plan: Plan) -> list[tuple[str, Path]]:
    """What buildkit-py adds to the context: the launcher, and the lock's requirements file (buildkit.lock's, else the
    one exported from the trainer's own lock file)."""
    export = plan.requirements_export
    return launcher_sources() + ([(plan.lock.requirements, plan.lock.source)] if plan.lock else
                                 [(export.context, export.source)] if export else [])


def make_recipe(config: Config, plan: Plan, own_dockerfile: str | None = None) -> Recipe:
    """The render stage: the prepared plan's Dockerfile (or the user's own, as it is) and all that the stages after
    it take."""
    backend = builder_class(config.builder)
    text = own_dockerfile if own_dockerfile is not None else render_dockerfile(plan, root=config.root,
                                                                               buildkit=backend.supports_secrets)
    ignore = render_project_dockerignore(config.root)
    remote = backend.remote  # builds and pushes where it runs, with the secrets found there
    return Recipe(
        root=config.root, dockerfile=text, ignore=ignore, plan=json.loads(json.dumps(plan.to_dict(), default=str)),
        notes=plan.said + tuple(n for n in plan.notes if n.startswith(STALE_LOCK)),
        image=config.image, tags=tuple(config.tags), variant=config.variant, builder=config.builder, remote=remote,
        # A lock's wheels are for its platform (linux/amd64 unless the plan names one): the build targets the same.
        platform=plan.platform or ("linux/amd64" if plan.gpu or plan.lock else None),
        secrets_digest=secrets_digest(() if remote else secret_sources(config)), allow_secrets=tuple(config.allow_secrets),
        allow_large=tuple(config.allow_large), extras=tuple(_extras(plan)),
        import_check=_import_check(plan, text))


def _import_check(plan: Plan, dockerfile: str) -> tuple[str, str, str] | None:
    """Where the rendered Dockerfile's import check starts, and the packages' folder ("" for the top); None for a
    Dockerfile without one (the user's own)."""
    scope = plan.import_check
    if scope is None or IMPORTS_CONTEXT_FILE not in dockerfile:
        return None
    kind, name = ("module", scope.module) if scope.module else ("script", scope.script or "")
    return kind, name, scope.package_dir or ""


def resolve_requirements(config: Config, recipe: Recipe, options: BuildOptions, reporter: Reporter,
                         resolution: Resolution | None = None) -> None:
    """What the plan stage's resolution found, said as the build starts; a plan made without one (each platform's of a
    multi-platform image) is resolved as it is now."""
    if resolution is None:
        plan = recipe.resolved()
        resolution = check_resolution(config, plan, declared_in(config, plan), offline=options.offline)
    reporter.message(resolution.note if resolution.checked else f"note: {resolution.note}")


def _pull_appended(builder, record: fastpath.Record | None, ref: ImageRef, reporter: Reporter) -> str | None:
    """The image the fast path pushed with this very content, pulled into the engine (which has the layers below
    the code layer from the full build, so only the code layer travels); None when there is none to pull."""
    if record is None or record.content_tag != ref.tag:
        return None
    started = time.perf_counter()
    image_id = builder.pull(ref)
    if image_id is not None:
        reporter.message(f"pulled {ref}, pushed by the fast path, in {time.perf_counter() - started:.2f} s "
                         "(only the layers the engine lacked)")
    return image_id


def build_config(config: Config, options: BuildOptions, reporter: Reporter) -> BuildResult:
    """plan -> render -> build for a config loaded already (each platform's, for a multi-platform image)."""
    if config.multi_platform:
        return build_platforms(config, options, reporter, recipes_of(config, options))
    prepared = prepare_resolved(config, locked=options.locked, offline=options.offline)
    return build(prepared.config, options, reporter, make_recipe(prepared.config, prepared.plan),
                 resolution=prepared.resolution)


def last_record(recipe: Recipe, options: BuildOptions) -> fastpath.Record | None:
    """What the last push of this repository and variant appended to: a push may take the fast path from it."""
    from . import fastpath

    return fastpath.load_record(recipe.repository, recipe.variant) \
        if options.fast_path and not recipe.remote else None


def build(config: Config, options: BuildOptions, reporter: Reporter, recipe: Recipe, *,
          fast_path_said: str | None = None, resolution: Resolution | None = None) -> BuildResult:
    """stage -> build or append -> publish, for the render stage's recipe (api.build keeps it for the next command);
    fast_path_said: why the fast path of a kept recipe could not take this build (said already)."""
    from concurrent.futures import ThreadPoolExecutor

    started = time.perf_counter()
    backend = Backend(config.builder, options.docker)
    previous = Previous(last_record(recipe, options), fast_path_said)
    # The builder's probes and git run (subprocesses: a Go client's start-up each) while the context is staged; an
    # error of the inputs still comes first. A push that may take the fast path needs no builder: it is made only if
    # the build turns out to be a full one.
    eager = not (options.push and previous.record) or fast_path_said is not None
    with ThreadPoolExecutor(max_workers=2) as pool:
        if eager:
            pool.submit(backend.made)  # its error, if any, is raised again where the build needs the builder
        # In the command's context: git is asked once per command (fsutil.asked_once).
        describing = pool.submit(contextvars.copy_context().run, git_revision, config.root)
        with staging(recipe, describing.result, reporter, started) as staged:
            return build_staged(config, options, reporter, staged, backend,
                                lambda: resolve_requirements(config, recipe, options, reporter, resolution), previous)


def build_staged(config: Config, options: BuildOptions, reporter: Reporter, staged: Staged, backend: Backend,
                 resolve: Callable[[], object], previous: Previous) -> BuildResult:
    """build or append -> publish, for the staged context. backend: the command's builder, made when a full build
    needs it; resolve: the resolution stage, run once before the engine builds; previous: what the fast path may
    append to (last_record's) and why a kept recipe's append could not."""
    recipe, refs, imports, snapshot = staged.recipe, list(staged.refs), staged.imports, staged.context.snapshot
    kind = backend.cls
    cache_ref = parse_ref(options.cache_ref, field="--cache-ref", allow_digest=False) if options.cache_ref else None
    # A remote builder's settings, checked before anything is uploaded; its secrets come from where it runs.
    remote = kind.settings(config, options.cloudbuild_endpoint) if recipe.remote else None

    with tempfile.TemporaryDirectory(prefix="buildkit-py-secrets-") as tmp:
        # Every input is checked before the engine is reached; the Artifact Registry tokens are minted only for a
        # build that installs (a remote builder's step mints them where it runs).
        sources = () if remote else secret_sources(config)
        token_hosts = tuple(recipe.plan.get("google_indexes") or ())
        needed = [s for s, _ in sources] + ([NETRC_SECRET] if token_hosts and NETRC_SECRET not in dict(sources) else [])
        if needed and not remote and not kind.supports_secrets:
            raise BuildError(
                f"the {kind.name} builder cannot pass secrets ({', '.join(needed)}) without writing "
                "them into a layer; use a BuildKit client (--builder buildkit), or unset PIP_CERT, "
                "REQUESTS_CA_BUNDLE and SSL_CERT_FILE if no CA bundle is needed"
            )
        tried = attempt(staged, options, previous.record, reporter, said=previous.said)
        if tried.appended is not None:
            return publish(appended_made(staged, tried), options, reporter)
        engine = backend.made().bound(remote)
        image_id = None if options.no_cache else engine.image_id(refs[0]) or _pull_appended(engine, previous.record,
                                                                                             refs[0], reporter)
        built = image_id is None
        if built:
            if not remote:
                resolve()
            logins = None if remote else google_logins(token_hosts)
            if logins is not None:
                reporter.message(f"an access token of {logins.identity} for {', '.join(token_hosts)}")
                netrc_text = logins_netrc(url_credentials(config.pip, "pip"), logins).encode()
                sources = tuple(s for s in sources if s[0] != NETRC_SECRET) + ((NETRC_SECRET, netrc_text),)
            reporter.message(f"building {refs[0]} ({len(snapshot.files)} files in the context, builder {engine.name})")
            request = BuildRequest(
                context_dir=staged.context.directory,
                dockerfile=staged.context.dockerfile,
                labels=staged.labels,
                platform=recipe.platform,
                network=config.network,
                secrets=_secrets(sources, Path(tmp)),
                token_hosts=token_hosts if remote else (),
                no_cache=options.no_cache,
                cache_ref=cache_ref,
                tags=staged.refs,
            )
            building = time.perf_counter()
            try:
                image_id = engine.build(request, reporter)
            except BuildError as exc:
                hint = refusal_hint(str(exc), token_hosts, logins.identity if logins else remote.identity) \
                    if logins or remote else None
                if hint:
                    raise BuildError(f"{exc}\n{hint}") from None
                raise import_failure(exc, imports, recipe.plan.get("ubuntu")) from None
            stages: tuple[tuple[str, float], ...] = (("build", time.perf_counter() - building),)
        else:
            reporter.message(f"{refs[0]} is up to date: same Dockerfile and files, nothing to build")
            stages = ()
    engine.tag(image_id, refs)
    reporter.message("tagged " + ", ".join(str(r) for r in refs))
    if cache_ref is not None and engine.inline_cache and options.push:
        engine.tag(image_id, [cache_ref])  # the inline cache travels in this image

    # The inline cache's tag is the same image: one more manifest when it shares the repository.
    cache = (cache_ref,) if cache_ref is not None and engine.inline_cache else ()
    keep = kept_record(refs[0], config.variant, tried.parts, imports)
    made = Made(BuildResult(image_id, tuple(str(r) for r in refs), built, snapshot.digest, recipe, stages=stages),
                staged.refs, staged.revision, keep)
    return publish(made, options, reporter, engine, extra=cache)


# ---------------------------------------------------------------------------------------------
# A multi-platform image: one build per platform, an index in the registry

_MACHINES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
BINFMT = Path("/proc/sys/fs/binfmt_misc")


def platform_tag(content: ImageRef, platform: str) -> ImageRef:
    """Where one platform's image of a multi-platform build is tagged and pushed: CONTENT-TAG-OS-ARCH, in the index's
    repository (an index names only manifests of its own)."""
    return ImageRef(content.registry, content.path, f"{content.tag}-{platform_suffix(platform)}")


def emulation(platform: str, local_engine: bool) -> str | None:
    """None where this machine runs PLATFORM itself; else what the build runs it with: the qemu handler registered
    with binfmt_misc (said), or BuildError where there is none (a RUN step would fail with `exec format error` minutes
    in). An engine on another machine (DOCKER_HOST tcp://, a remote builder) answers for itself."""
    arch = platform.split("/")[1]
    if not local_engine or _MACHINES.get(_host.machine()) == arch:
        return None
    handler = QEMU_HANDLERS.get(arch)
    if handler and (BINFMT / handler).is_file() and "enabled" in (BINFMT / handler).read_text(errors="replace"):
        return f"{platform} is built under emulation ({handler}, binfmt_misc): its RUN steps are several times slower"
    raise BuildError(f"{platform}: this machine ({_host.machine()}) cannot run it and no emulator is registered "
                     f"({BINFMT / (handler or 'qemu-' + arch)} is missing): install qemu-user-static and binfmt-support "
                     "(Debian/Ubuntu; `update-binfmts --enable` registers it), build on a machine of that platform, or "
                     "drop it from platform")


def _local_engine(builder: str) -> bool:
    """The engine builds on this machine: buildah always; Docker's unless DOCKER_HOST names another machine."""
    host = os.environ.get("DOCKER_HOST", "")
    return builder == "buildah" or not host or host.startswith(("unix://", "npipe://"))


def recipes_of(config: Config, options: BuildOptions) -> tuple[Recipe, ...]:
    """Each platform's recipe: plan (with the lock's pins for that platform) and render, as a one-platform build's."""
    return tuple(make_recipe(c, prepare(c, locked=options.locked)) for c in config.each_platform())


def index_content_digest(platforms: Sequence[tuple[str, str]]) -> str:
    """The content digest of a multi-platform image: of each (platform, content digest) in order, so that the
    content tag changes when any platform's context does, and a platform list in another order is another image."""
    return hashlib.sha256("".join(f"{p}\0{d}\n" for p, d in platforms).encode()).hexdigest()


def _platform_record(recipe: Recipe, config: Config, options: BuildOptions) -> fastpath.Record | None:
    """The fast path's record of one platform of a multi-platform image: kept as a variant of its own, KEY@PLATFORM
    (the lock's section key: no variant's name holds "@")."""
    from . import fastpath

    return fastpath.load_record(recipe.repository, config_key(config)) if options.fast_path and options.push else None


def build_platforms(config: Config, options: BuildOptions, reporter: Reporter, recipes: Sequence[Recipe]) -> BuildResult:
    """Each platform built as its one-platform config is (the same builder, one build each: Docker 20.10's BuildKit
    builds one platform per build) and tagged CONTENT-OS-ARCH; with push, all pushed into the content tag's repository
    only once every build passed (Cloud Build pushes each where it builds), then one index naming each platform's
    manifest PUT under every tag: a failed build pushes no index. The SBOM and provenance are attached to the index's
    digest."""
    from concurrent.futures import ThreadPoolExecutor

    started = time.perf_counter()
    configs = config.each_platform()
    backend = Backend(config.builder, options.docker)
    local = not backend.cls.remote and _local_engine(backend.cls.name)  # Cloud Build registers qemu where it runs
    notes = [n for n in (emulation(c.platform or "", local) for c in configs) if n]
    with ThreadPoolExecutor(max_workers=2) as pool, ExitStack() as stack:
        pool.submit(backend.made)  # its error, if any, is raised again where a build needs the builder
        describing = pool.submit(contextvars.copy_context().run, git_revision, config.root)
        staged = [stack.enter_context(staging(r, describing.result, reporter, started)) for r in recipes]
        digest = index_content_digest([(c.platform or "", s.context.snapshot.digest) for c, s in zip(configs, staged,
                                                                                                       strict=True)])
        refs = recipes[0].refs(f"bk-{digest[:16]}", staged[0].revision)
        others = [str(r) for r in refs if r.repository != refs[0].repository]
        if options.push and others:
            raise ConfigError(f"{show(others[0])} is in another repository than {refs[0].repository}: an image index "
                              "names only manifests of its own repository; push a multi-platform image to one",
                              field="tags")
        for note in notes:
            reporter.message(f"note: {note}")
        # A code-only edit of a platform is appended to its last pushed manifest (its own record: KEY@PLATFORM);
        # the others are built, each alone and pushing nothing: their pushes come after every build passed.
        alone = replace(options, push=False, attest=False)
        images: dict[str, PlatformImage] = {}
        built: list[tuple[str, Made]] = []
        for one, recipe, stage in zip(configs, recipes, staged, strict=True):
            platform = one.platform or ""
            tag = platform_tag(refs[0], platform)
            alone_stage = replace(stage, refs=(tag,))
            record = _platform_record(recipe, one, options)
            # Its attestations are made once the index is pushed (publish_index), not with the append.
            tried = attempt(alone_stage, replace(options, attest=False), record, reporter) if options.push else Attempt()
            appended, parts = tried.appended, tried.parts
            if appended is not None:
                images[platform] = PlatformImage(platform, str(tag), appended.image_id, stage.context.snapshot.digest,
                                                 True, appended.pushed[0].digest)
                continue
            # A remote builder pushes where it builds (one Cloud Build each): only the index waits for them all.
            result = build_staged(one, replace(alone, push=True) if backend.cls.remote else alone, reporter, alone_stage,
                                  backend, lambda one=one, recipe=recipe: resolve_requirements(one, recipe, options,
                                                                                               reporter), Previous())
            if backend.cls.remote:
                images[platform] = PlatformImage(platform, str(tag), result.image_id, result.content_digest,
                                                 result.built, result.pushed[0].digest)
                continue
            # What the platform's next code-only edit appends to: its own record, kept once it is pushed.
            built.append((platform, Made(result, (tag,), stage.revision, kept_record(tag, config_key(one), parts,
                                                                                      stage.imports))))
        for platform, made in built:
            # Each platform pushed alone; the attestations go to the index and each platform below.
            result = publish(made, replace(options, attest=False), reporter, backend.made())
            images[platform] = PlatformImage(platform, str(made.refs[0]), result.image_id, result.content_digest,
                                             result.built, result.pushed[0].digest if result.pushed else None)
        ordered = tuple(images[c.platform or ""] for c in configs)
        # The index's recipe is its first platform's, naming every platform (the provenance's `platform`).
        whole = replace(recipes[0], platform=",".join(i.platform for i in ordered))
        built_any = any(i.built for i in ordered)
        if not (options.push or backend.cls.remote):
            reporter.message("a multi-platform image is an index in a registry: --push pushes each platform and its "
                             "index; each platform is tagged here as " + ", ".join(i.tag for i in ordered))
            return BuildResult("", tuple(i.tag for i in ordered), built_any, digest, whole, platforms=ordered)
        index = Made(BuildResult("", tuple(str(r) for r in refs), built_any, digest, whole, platforms=ordered),
                     tuple(refs), staged[0].revision)
        return publish_index(index, [_platform_made(recipe, image, refs[0], stage.revision)
                                     for recipe, image, stage in zip(recipes, ordered, staged, strict=True)],
                             options, reporter)


def _platform_made(recipe: Recipe, image: PlatformImage, index: ImageRef, revision: str | None) -> Made:
    """A platform's image of an index, pushed: its attestations are its own too (its packages and base are its own;
    the index's are the first platform's)."""
    from ..oci.client import PushResult

    tag = platform_tag(index, image.platform)
    pushed = (PushResult(f"{tag.repository}@{image.digest}", tag.tag or "", image.digest or "", None),)
    return Made(BuildResult(image.image_id, (str(tag),), image.built, image.content_digest, recipe, pushed), (tag,),
                revision)
