"""config -> plan -> render -> context -> image (-> push): the build pipeline, start to end.

Tags are applied only after a successful build, so a failed or interrupted build leaves no new
tag; the staged context and every temporary file live in one temp dir that is always removed.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .builders import select_builder
from .builders.base import BuildRequest
from .config import Config
from .context import staged_context
from .engine import engine_client
from .errors import BuildError, ConfigError
from .plan import LABEL_PREFIX, Plan, make_plan
from .progress import Reporter
from .refs import ImageRef, parse_ref
from .registry import PushResult, push
from .render import render_dockerfile, render_project_dockerignore
from .resources import launcher_sources

CA_ENV = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
CA_SECRET = "buildkit-ca"
PIP_CONF_SECRET = "buildkit-pip-conf"


@dataclass(frozen=True)
class BuildOptions:
    tags: tuple[str, ...] = ()
    push: bool = False
    platform: str | None = None  # default: linux/amd64 for CUDA images, the engine's own otherwise
    network: str | None = None
    ca_cert: Path | None = None  # default: the bundle named by PIP_CERT, REQUESTS_CA_BUNDLE or SSL_CERT_FILE
    pip_index_url: str | None = None  # may carry credentials: passed as a secret pip.conf
    pip_conf: Path | None = None
    builder: str = "auto"
    docker: str | None = None
    no_cache: bool = False
    allow_secrets: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    tags: tuple[str, ...]
    built: bool  # False: an image with the same content tag already existed
    content_digest: str
    plan: Plan
    pushed: tuple[PushResult, ...] = field(default=())

    def to_dict(self) -> dict:
        return {
            "image_id": self.image_id,
            "tags": list(self.tags),
            "built": self.built,
            "content_digest": self.content_digest,
            "pushed": [p.__dict__ for p in self.pushed],
            "plan": self.plan.to_dict(),
        }


def default_ca_bundle(env: dict[str, str] | None = None) -> Path | None:
    env = env if env is not None else dict(os.environ)
    for name in CA_ENV:
        if env.get(name) and Path(env[name]).is_file():
            return Path(env[name])
    return None


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


def image_refs(config: Config, tags: Sequence[str], content_tag: str, revision: str | None) -> list[ImageRef]:
    """The content tag (and git tag) on the primary repository, then every --tag as given; a
    --tag without a tag part gets the content tag."""
    extra = [parse_ref(t, field="--tag") for t in tags]
    primary = config.image or (extra[0].repository if extra else f"buildkit-py/{_slug(config.root.name)}")
    repo = parse_ref(primary, field="image")
    refs = [ImageRef(repo.registry, repo.path, content_tag)]
    if revision:
        refs.append(ImageRef(repo.registry, repo.path, f"git-{revision}"))
    for ref in extra:
        refs.append(ref if ref.tag else ImageRef(ref.registry, ref.path, content_tag))
    unique = {str(r): r for r in refs}
    return list(unique.values())


def _secrets(options: BuildOptions, tmp: Path) -> list[tuple[str, Path]]:
    secrets = []
    ca = options.ca_cert or default_ca_bundle()
    if ca:
        if not ca.is_file():
            raise ConfigError(f"{str(ca)!r} is not a file", field="--ca-cert")
        secrets.append((CA_SECRET, ca))
    if options.pip_index_url and options.pip_conf:
        raise ConfigError("give --pip-index-url or --pip-conf, not both", field="--pip-index-url")
    if options.pip_index_url:
        conf = tmp / "pip.conf"
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(f"[global]\nindex-url = {options.pip_index_url}\n")
        secrets.append((PIP_CONF_SECRET, conf))
    elif options.pip_conf:
        if not options.pip_conf.is_file():
            raise ConfigError(f"{str(options.pip_conf)!r} is not a file", field="--pip-conf")
        secrets.append((PIP_CONF_SECRET, options.pip_conf))
    return secrets


def _existing_image(client, ref: ImageRef) -> str | None:
    from docker.errors import ImageNotFound

    try:
        return client.images.get(str(ref)).id
    except ImageNotFound:
        return None


def build(config: Config, options: BuildOptions, reporter: Reporter) -> BuildResult:
    plan = make_plan(config)
    builder = select_builder(options.builder, options.docker)
    dockerfile = render_dockerfile(plan, root=config.root, buildkit=builder.supports_secrets)
    ignore = render_project_dockerignore(config.root)
    client = engine_client()
    revision = git_revision(config.root)
    platform = options.platform or ("linux/amd64" if plan.gpu else None)

    with tempfile.TemporaryDirectory(prefix="buildkit-py-secrets-") as tmp, \
            staged_context(config.root, dockerfile, ignore, allow_secrets=options.allow_secrets,
                           extras=launcher_sources()) as ctx:
        secrets = tuple(_secrets(options, Path(tmp)))
        if secrets and not builder.supports_secrets:
            raise BuildError(
                f"the {builder.name} builder cannot pass secrets ({', '.join(s for s, _ in secrets)}) without writing "
                "them into a layer; use a BuildKit client (--builder buildkit), or unset PIP_CERT, "
                "REQUESTS_CA_BUNDLE and SSL_CERT_FILE if no CA bundle is needed"
            )
        content_tag = f"bk-{ctx.digest[:16]}"
        refs = image_refs(config, options.tags, content_tag, revision)
        image_id = None if options.no_cache else _existing_image(client, refs[0])
        built = image_id is None
        if built:
            reporter.message(f"building {refs[0]} ({len(ctx.files)} files in the context, builder {builder.name})")
            labels = [(f"{LABEL_PREFIX}.content-digest", ctx.digest)]
            if revision:
                labels.append(("org.opencontainers.image.revision", revision))
            request = BuildRequest(
                context_dir=ctx.directory,
                dockerfile=ctx.dockerfile,
                labels=tuple(labels),
                platform=platform,
                network=options.network,
                secrets=secrets,
                no_cache=options.no_cache,
            )
            image_id = builder.build(request, reporter)
        else:
            reporter.message(f"{refs[0]} is up to date: same Dockerfile and files, nothing to build")
        for ref in refs:
            if not client.api.tag(image_id, ref.repository, ref.tag):
                raise BuildError(f"the engine refused to tag {image_id} as {ref}")
        reporter.message("tagged " + ", ".join(str(r) for r in refs))

    pushed = tuple(push(ref, reporter, client=client) for ref in refs) if options.push else ()
    return BuildResult(image_id, tuple(str(r) for r in refs), built, ctx.digest, plan, pushed)
