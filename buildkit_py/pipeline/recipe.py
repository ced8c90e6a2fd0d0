"""A build's recipe: what config -> plan -> render make of a project for one build (the Dockerfile, the plan, the
names of its tags, the rules of its context), and the recipe kept from the last such run.

A kept recipe is found by the digest of all a command gives those stages (the project and build options, the
working directory, the environment, this buildkit-py's own files) and holds while every path the stages read or
looked for still has the signature it had then (fsutil.consulted: where its symlinks lead, its kind, mode and
content). A code-only edit's `build --push` then runs none of those stages, nor imports them: about half of what
its process spent before the append itself (yaml, the config's and the matrix's classes, the plan, Jinja).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, OutputError
from ..fsutil import cache_dir, signature, write_atomic
from ..oci.refs import ImageRef, parse_ref
from ..version import __version__

if TYPE_CHECKING:
    from .context import ContextListing
    from .plan import Plan

RECIPE_SCHEME = 6  # 4: the plan kept once, as JSON (no pickle); 5: secrets_digest; 6: listings and programs consulted
KEPT_RECIPES = 64  # one per project, flags and environment used lately; the oldest go first
_SHELL = frozenset({"_", "OLDPWD", "SHLVL"})  # set by the shell per command: `make` and a terminal differ
_PACKAGE = Path(__file__).resolve().parents[1]  # buildkit_py/, of which pipeline/ is a part


@dataclass(frozen=True)
class Recipe:
    """Everything the stages after render take from the config and the plan."""

    root: Path  # the trainer directory: the build context
    dockerfile: str
    ignore: str  # the .dockerignore rules
    # plan.to_dict() as JSON holds it, the plan's one form here: the --json output, through its digest the fast path's
    # record, and the Plan itself for BuildResult.plan, made again only when asked for (plan_from_dict).
    plan: dict
    notes: tuple[str, ...]  # what every build of it says (a stale lock)
    image: ImageRef | None  # the config's image: the repository of the content tag
    tags: tuple[ImageRef, ...]  # the config's tags
    variant: str | None
    builder: str
    remote: bool  # the builder builds and pushes where it runs: no fast path from here
    platform: str | None
    secrets_digest: str  # of the index settings and CA bundle the build passes as secrets, never their text
    allow_secrets: tuple[str, ...]
    allow_large: tuple[str, ...]
    extras: tuple[tuple[str, Path], ...]  # (path in the context, source): the launcher, the lock's requirements
    # Where the build's import check starts, ("module", NAME, PACKAGE_DIR) or ("script", PATH, PACKAGE_DIR): its module
    # list is made from the staged files (imports.staged_imports); None: the Dockerfile has no check.
    import_check: tuple[str, str, str] | None = None

    def resolved(self) -> Plan:
        from .plan.model import plan_from_dict

        return plan_from_dict(self.plan)

    def refs(self, content_tag: str, revision: str | None) -> list[ImageRef]:
        return image_refs(self.image, self.tags, self.root, self.variant, content_tag, revision)

    @property
    def repository(self) -> str:
        """The repository of the content tag: the fast path's record is kept per repository and variant."""
        return self.refs("latest", None)[0].repository

    def listing(self) -> ContextListing:
        from .context import list_context  # the build's and the append's: a dry run lists nothing

        return list_context(self.root, self.dockerfile, self.ignore, allow_secrets=self.allow_secrets,
                            allow_large=self.allow_large, extras=self.extras)


def secrets_digest(secrets: Sequence[tuple[str, bytes]]) -> str:
    """The digest of the index settings and CA bundle a build passes as secrets ((id, content) each): the recipe
    and through it the fast path's record hold this, never the text."""
    def sha(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    return sha(b"".join(sha(name.encode() + b"\0" + data).encode() for name, data in secrets))


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "trainer"


def image_refs(image: ImageRef | None, tags: tuple[ImageRef, ...], root: Path, variant: str | None, content_tag: str,
               revision: str | None) -> list[ImageRef]:
    """The content tag (and git tag) on the primary repository, then every tag as given; a tag without a tag part
    gets the content tag."""
    repo = image or (tags[0] if tags else parse_ref(f"buildkit-py/{slug(root.name)}"))
    # A variant's tags carry its name, so variants of one config never share a tag.
    suffix = f"-{variant}" if variant else ""
    refs = [ImageRef(repo.registry, repo.path, content_tag + suffix)]
    if revision:
        refs.append(ImageRef(repo.registry, repo.path, f"git-{revision}{suffix}"))
    for ref in tags:
        refs.append(ImageRef(ref.registry, ref.path, (ref.tag or content_tag) + suffix))
    unique = {str(r): r for r in refs}
    return list(unique.values())


# ---------------------------------------------------------------------------------------------
# Kept recipes


# This buildkit-py's files as hold_own_files() listed them, for a process that ends before any of them changes.
_HELD: list[tuple[str, int, int]] | None = None


def hold_own_files() -> tuple[str, ...]:
    """List this buildkit-py's own files once, for every key this process makes: only for a process that ends
    before any of the files returned changes (the warm process, which watches them)."""
    global _HELD
    _HELD = _own_files()
    return tuple(path for path, _, _ in _HELD)


def _own_files() -> list[tuple[str, int, int]]:
    """This buildkit-py's code, templates and data, by name, size and mtime: a source checkout edited in place
    keeps its version number, and must not be served recipes its older code made."""
    from ..catalog.resources import resource_dir

    found = []
    for top in (_PACKAGE, resource_dir("templates"), resource_dir("base_images")):
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                st = os.stat(os.path.join(folder, name))
                found.append((os.path.join(folder, name), st.st_size, st.st_mtime_ns))
    return found


def key(project: object, options: object) -> str:
    """The digest of everything a command gives config -> plan -> render, other than the files they read: the
    project (config, directory, flags, variant), OPTIONS (a build's --locked: its other options come after render;
    a dry run's name and flags), and the environment but DOCKER_*, which names the engine and its client, which
    only the build itself talks to, and the shell's bookkeeping (the command as typed, the previous directory, the
    nesting depth), which no stage reads."""
    environment = sorted((k, v) for k, v in os.environ.items() if not k.startswith("DOCKER_") and k not in _SHELL)
    own = _HELD if _HELD is not None else _own_files()
    given = repr((RECIPE_SCHEME, __version__, own, sys.executable, sys.version, os.getcwd(), repr(project),
                  options, environment))
    return hashlib.sha256(given.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate the config refuses


def _path(folder: str, digest: str) -> Path:
    return cache_dir() / folder / f"{digest[:40]}.json"


def _read_kept(path: Path, digest: str) -> dict[str, Any] | None:
    """The kept record at PATH made under this key, while every path it was made from is as it was; else None.
    Only a file this user wrote and nobody else may change counts (a cache directory shared through
    BUILDKIT_PY_CACHE_DIR must not let another user's Dockerfile in)."""
    try:
        st = os.stat(path)
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("scheme") != RECIPE_SCHEME or data.get("key") != digest:
            return None
        consulted = data["consulted"]
        if not isinstance(consulted, dict) or any(signature(p) != s for p, s in consulted.items()):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return data


def _write_kept(path: Path, digest: str, consulted: dict[str, str], fields: dict[str, Any]) -> None:
    """Keep FIELDS under this key with the signatures of the paths they were made from; the oldest records of the
    folder go. A cache that cannot be written only costs the next command the stages again."""
    try:
        write_atomic(path, json.dumps({"scheme": RECIPE_SCHEME, "key": digest, "consulted": consulted, **fields},
                                      sort_keys=True))
        others = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    except (OutputError, OSError, ConfigError):
        return
    for old in others[:-KEPT_RECIPES]:
        old.unlink(missing_ok=True)


def kept(digest: str, tags: tuple[str, ...] | None) -> Recipe | None:
    """The recipe kept under this key while every path it was made from is as it was; else None (the stages run).
    tags: the --tag values of this command, which the key leaves out (a CI's commit tag is new on every run): the
    recipe takes them where its tags were those of the command that made it, and is not used where they were not
    (a variant's own tags) and differ."""
    data = _read_kept(_path("recipes", digest), digest)
    if data is None:
        return None
    try:
        r = data["recipe"]
        made_with = tuple(data["tags_given"]) if data["tags_given"] is not None else None
        recipe_tags = tuple(parse_ref(t, allow_digest=False) for t in r["tags"])
        if tags != made_with:
            if tags is None or made_with is None or not data["tags_follow"]:
                return None
            recipe_tags = tuple(parse_ref(t, field="--tag", allow_digest=False) for t in tags)  # as config reads them
        return Recipe(Path(r["root"]), r["dockerfile"], r["ignore"], r["plan"],
                      tuple(r["notes"]), parse_ref(r["image"]) if r["image"] else None,
                      recipe_tags, r["variant"], r["builder"], bool(r["remote"]),
                      r["platform"], r["secrets_digest"], tuple(r["allow_secrets"]), tuple(r["allow_large"]),
                      tuple((rel, Path(src)) for rel, src in r["extras"]),
                      tuple(r["import_check"]) if r["import_check"] else None)
    except (ValueError, KeyError, TypeError, AttributeError, ConfigError):
        return None


def keep(digest: str, recipe: Recipe, consulted: dict[str, str], tags: tuple[str, ...] | None) -> None:
    """Keep the recipe for the next command with the same key. tags: the command's --tag values (kept() says what
    they are for)."""
    record: dict[str, Any] = {
        "root": str(recipe.root), "dockerfile": recipe.dockerfile, "ignore": recipe.ignore, "plan": recipe.plan,
        "notes": list(recipe.notes),
        "image": str(recipe.image) if recipe.image else None, "tags": list(map(str, recipe.tags)),
        "variant": recipe.variant, "builder": recipe.builder,
        "remote": recipe.remote, "platform": recipe.platform, "secrets_digest": recipe.secrets_digest,
        "allow_secrets": list(recipe.allow_secrets), "allow_large": list(recipe.allow_large),
        "extras": [[rel, str(src)] for rel, src in recipe.extras],
        "import_check": list(recipe.import_check) if recipe.import_check else None,
    }
    try:
        # Its tags follow --tag where they are what the config made of these values (no variant's own).
        follow = tags is not None and [str(parse_ref(t, allow_digest=False)) for t in tags] == record["tags"]
    except ConfigError:
        return
    _write_kept(_path("recipes", digest), digest, consulted, {
        "recipe": record, "tags_given": list(tags) if tags is not None else None, "tags_follow": follow})


def kept_output(kind: str, digest: str) -> Any:
    """What a dry run of KIND printed under this key (the same key as a build's recipe, with the dry run's own
    options in it), while every path it was made from is as it was; None: the stages run."""
    data = _read_kept(_path(kind, digest), digest)
    return None if data is None else data.get("output")


def keep_output(kind: str, digest: str, consulted: dict[str, str], output: Any) -> None:
    """Keep a dry run's OUTPUT (JSON) for the next one with the same key and inputs."""
    _write_kept(_path(kind, digest), digest, consulted, {"output": output})
