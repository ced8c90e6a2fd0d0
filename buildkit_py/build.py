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
from .config import Config, default_ca_bundle
from .context import staged_context
from .engine import engine_client
from .errors import BuildError
from .plan import LABEL_PREFIX, Plan, make_plan
from .progress import Reporter
from .refs import ImageRef, parse_ref
from .registry import PushResult, push
from .render import render_dockerfile, render_project_dockerignore
from .resources import launcher_sources

CA_SECRET = "buildkit-ca"
PIP_CONF_SECRET = "buildkit-pip-conf"


@dataclass(frozen=True)
class BuildOptions:
    """What this one build does; how images are built (tags, platform, network, CA bundle, pip
    index, builder, allowed files) is in the Config, from the config file or flags."""

    push: bool = False
    docker: str | None = None  # the docker client that runs BuildKit (default: $BUILDKIT_PY_DOCKER or found)
    no_cache: bool = False


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
    refs = [ImageRef(repo.registry, repo.path, content_tag)]
    if revision:
        refs.append(ImageRef(repo.registry, repo.path, f"git-{revision}"))
    for ref in extra:
        refs.append(ref if ref.tag else ImageRef(ref.registry, ref.path, content_tag))
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
        text = f"[global]\nindex-url = {config.pip_index_url}\n"
        secrets.append((PIP_CONF_SECRET, _private_copy(text.encode(), tmp / "pip.conf")))
    elif config.pip_conf:
        secrets.append((PIP_CONF_SECRET, _private_copy(config.pip_conf.read_bytes(), tmp / "pip.conf")))
    return tuple(secrets)


def _private_copy(data: bytes, path: Path) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def _existing_image(client, ref: ImageRef) -> str | None:
    from docker.errors import ImageNotFound

    try:
        return client.images.get(str(ref)).id
    except ImageNotFound:
        return None


def build(config: Config, options: BuildOptions, reporter: Reporter) -> BuildResult:
    plan = make_plan(config)
    builder = select_builder(config.builder, options.docker)
    dockerfile = render_dockerfile(plan, root=config.root, buildkit=builder.supports_secrets)
    ignore = render_project_dockerignore(config.root)
    platform = config.platform or ("linux/amd64" if plan.gpu else None)

    with tempfile.TemporaryDirectory(prefix="buildkit-py-secrets-") as tmp:
        secrets = _secrets(config, Path(tmp))  # every input is checked before the engine is reached
        if secrets and not builder.supports_secrets:
            raise BuildError(
                f"the {builder.name} builder cannot pass secrets ({', '.join(s for s, _ in secrets)}) without writing "
                "them into a layer; use a BuildKit client (--builder buildkit), or unset PIP_CERT, "
                "REQUESTS_CA_BUNDLE and SSL_CERT_FILE if no CA bundle is needed"
            )
        client = engine_client()
        revision = git_revision(config.root)
        with staged_context(config.root, dockerfile, ignore, allow_secrets=config.allow_secrets,
                            allow_large=config.allow_large, extras=launcher_sources()) as ctx:
            content_tag = f"bk-{ctx.digest[:16]}"
            refs = image_refs(config, content_tag, revision)
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
                    network=config.network,
                    secrets=secrets,
                    no_cache=options.no_cache,
                )
                image_id = builder.build(request, reporter)
            else:
                reporter.message(f"{refs[0]} is up to date: same Dockerfile and files, nothing to build")
            _tag(client, image_id, refs)
            reporter.message("tagged " + ", ".join(str(r) for r in refs))

    pushed = tuple(push(ref, reporter, client=client) for ref in refs) if options.push else ()
    return BuildResult(image_id, tuple(str(r) for r in refs), built, ctx.digest, plan, pushed)


def _tag(client, image_id: str, refs: Sequence[ImageRef]) -> None:
    """Apply every tag or none: a refusal removes the tags this call added."""
    from docker.errors import APIError

    added: list[ImageRef] = []
    for ref in refs:
        existed = _existing_image(client, ref) is not None
        try:
            ok, why = client.api.tag(image_id, ref.repository, ref.tag), "no reason given"
        except APIError as exc:
            ok, why = False, exc.explanation or exc
        if not ok:
            for done in added:
                try:
                    client.api.remove_image(str(done), noprune=True)
                except APIError:
                    pass
            raise BuildError(f"the engine refused to tag {image_id} as {ref}: {why}")
        if not existed:
            added.append(ref)
