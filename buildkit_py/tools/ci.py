"""`buildkit-py ci github|cloudbuild|gitlab`: a pipeline that builds the image (every variant, as a
matrix) with a registry cache, tags it by commit and content, pushes it and saves its digest.

GitHub's runners have a Docker engine and buildx: BuildKit with an inline registry cache. Cloud
Build and GitLab runners often have no daemon: buildah, whose cache is a registry repository.
Config values reach the file only as JSON-quoted plain words (`makefile.word`) in variables; the
scripts read them from the environment, so no value can change the file's shape or a command.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..config import Config
from ..pipeline.lock import LOCK_NAME
from ..pipeline.render import environment
from .makefile import config_path, word

CI_FLAVOURS = {"github": "ci/github.yml.j2", "cloudbuild": "ci/cloudbuild.yaml.j2", "gitlab": "ci/gitlab-ci.yml.j2"}
CACHE_TAG = "buildcache"  # BuildKit: REPO:buildcache carries the inline cache; buildah: REPO-cache holds layers


def _yaml(value: str) -> str:
    """A YAML double-quoted scalar: JSON's escaping, ASCII only."""
    return json.dumps(value, ensure_ascii=True)


def render_ci(config: Config, given_config: Path | None, flavour: str) -> str:
    image = word(str(config.image), "image") if config.image else "REGISTRY/PROJECT/trainer"
    variants = [word(v.name, "variants") for v in config.variants]
    return environment().get_template(CI_FLAVOURS[flavour]).render(
        config=_yaml(config_path(config, given_config, Path.cwd()) or "buildkit.yaml"),
        image=_yaml(image),
        variant_names=variants,
        variants_list="[" + ", ".join(_yaml(v) for v in variants) + "]",
        # Cloud Build has no matrix: one step per variant, all started at once.
        steps=[{"id": _yaml(f"image-{v}" if v else "image"), "submit_id": _yaml(f"submit-{v}" if v else "submit"),
                "variant": _yaml(f"VARIANT={v}")} for v in variants or [""]],
        cache_tag=CACHE_TAG,
        # A project that locks its images builds them only from a current lock in CI: a stale one fails the job.
        locked=(config.root / LOCK_NAME).is_file(),
    )
