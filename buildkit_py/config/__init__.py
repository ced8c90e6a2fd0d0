"""The config model: buildkit.yaml or [tool.buildkit-py] in pyproject.toml, plus flag overrides.

Loading is the only I/O here; the result is a frozen, validated Config. Every error names the
file position (YAML) or the flag, the field, the value (escaped) and what is allowed. Flags go
through the same validators as the file, so a value is refused the same way wherever it comes from.

Config, the key table and load_config live here; each section of the document has a module of its own (reading,
values, image, trainer, job, tuning, model, cloudbuild, variants), and this package gives their names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..builders.names import BUILDERS
from ..flags import cloudbuild_flag_name, flag_name
from ..oci.refs import ImageRef
from ..patterns import lazy_pattern
from .cloudbuild import CLOUDBUILD_KEYS, CloudBuildConfig, _cloudbuild
from .image import (
    _BUILD_NETWORKS,
    _CUDA,
    _DEBIAN_PACKAGE,
    _INDEX_HOST,
    _PATTERN,
    _PYTHON,
    CUDA_FLAVORS,
    MAX_LIST_BYTES,
    FrameworkRequest,
    _ca_cert,
    _framework,
    _image,
    _index_url,
    _mirror_url,
    _pip_conf,
    _pip_requirement,
    _platforms,
    _tags,
    default_ca_bundle,
    platform_keys,
)
from .job import JOB_KEYS, POOL_ORDER, Fallback, JobConfig, Pool, _fallbacks, _job, check_job_key, job_flag, worker_pool_specs
from .model import ModelConfig, _model, model_flag
from .reading import _KEY, _err, _Raw, field_error, field_name, find_config, load_raw, read_yaml
from .trainer import (
    ImportScope,
    PackageMeta,
    Trainer,
    TrainerPackage,
    _package,
    _trainer,
    _trainer_package,
    distribution_name,
    pep440_version,
)
from .tuning import METRIC_TAG, Hyperparameters, Param, _hyperparameters, check_hyperparameters, param_name
from .values import (
    _ACCELERATOR,
    _ACCELERATOR_RULE,
    _bool,
    _choice,
    _env,
    _pattern,
    _ref,
    _relative_file,
    _strings,
    _unknown_key,
    bad_character,
)
from .variants import Variant, _variants

_EXTRA_NAME = lazy_pattern(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?", re.ASCII)


@dataclass(frozen=True)
class Config:
    """The validated config: buildkit.yaml or [tool.buildkit-py] in pyproject.toml, with the flags applied."""

    root: Path  # the build context: the directory of the config file
    source: str  # where the config came from, for messages
    framework: FrameworkRequest = FrameworkRequest("none", None)
    cuda: str | None = None
    python: str | None = None
    gpu: bool | None = None  # None: the framework decides
    accelerator: str | None = None  # Vertex AI accelerator type the job runs on, e.g. NVIDIA_TESLA_T4
    cuda_flavor: str | None = None  # auto (None), base, runtime, cudnn-runtime or devel
    base_image: str | None = None
    system_packages: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()
    requirements: str | None = None
    # A lock file's extras and dependency groups the image installs (uv sync --extra gpu, poetry install --with train).
    requirements_extras: tuple[str, ...] = ()
    requirements_groups: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    hypertune: bool = True
    import_check: bool = True  # the build imports what the trainer's entry point imports before its code layer
    build_extensions: bool = False  # the trainer directory's compiled extensions are built in a stage of their own
    keep_pip: bool = False  # leave pip in the image's venv (uv installs without it), for trainers that run pip
    trainer: Trainer | None = None
    package: PackageMeta | None = None
    trainer_package: TrainerPackage | None = None
    template: str | None = None
    image: ImageRef | None = None  # the repository the content and git tags go on (no tag, no digest)
    python_mirror: str | None = None  # where uv downloads standalone Pythons (UV_PYTHON_INSTALL_MIRROR)
    # Replaces the framework's own package index (PyTorch's cuXYZ index, NVIDIA's for nvidia-tensorflow): a mirror
    # of it. In the Dockerfile, so no credentials: an index that needs them is the pip_conf's.
    framework_index_url: str | None = None
    # How to build: each also a flag of the same name.
    tags: tuple[ImageRef, ...] = ()  # each with its tag, or none: the content tag
    platform: str | None = None  # default: linux/amd64 for CUDA images, the engine's own otherwise
    # A multi-platform image (`platform: [linux/amd64, linux/arm64]`): its platforms, two or more, in the order given;
    # () for one. With several, `platform` is None here and each platform's config (for_platform) names its own.
    platforms: tuple[str, ...] = ()
    network: str | None = None
    ca_cert: Path | None = None  # default: the bundle named by PIP_CERT, REQUESTS_CA_BUNDLE or SSL_CERT_FILE
    pip_index_url: str | None = field(default=None, repr=False)  # may carry credentials: a secret pip.conf
    pip_conf: Path | None = None
    # Index hosts that get an access token of Application Default Credentials (beside every *-python.pkg.dev).
    pip_google_auth: tuple[str, ...] = ()
    builder: str = "auto"
    allow_secrets: tuple[str, ...] = ()
    allow_large: tuple[str, ...] = ()
    variants: tuple[Variant, ...] = ()
    # The Vertex AI job (buildkit-py job/plan/submit): its settings, a tuning study, alternatives for capacity.
    job: JobConfig | None = None
    hyperparameters: Hyperparameters | None = None
    fallbacks: tuple[Fallback, ...] = ()
    model: ModelConfig | None = None  # what a training pipeline uploads (job --pipeline)
    cloudbuild: CloudBuildConfig | None = None  # builder: cloudbuild (builders/cloudbuild.py)
    # Not a key: set by `executor build` for an image without trainer code that installs packages at start.
    executor: bool = False
    variant: str | None = None  # not a key: the variant this config was made for (see with_variant)
    # Not a key: the keys a flag set, so that a later stage's error names what the user typed.
    set_by_flags: frozenset[str] = frozenset()

    def with_variant(self, variant: Variant) -> Config:
        values = dict(variant.values)
        if "platform" in values:  # one platform or several, as the top-level key
            values.update(platform_keys(values["platform"]))
        return replace(self, **values, variants=(), variant=variant.name)

    @property
    def multi_platform(self) -> bool:
        """An image index of several platforms, of which this config is the whole (no plan of its own)."""
        return bool(self.platforms) and self.platform is None

    def for_platform(self, platform: str) -> Config:
        """One platform's config of a multi-platform image: planned, rendered and built as a one-platform config is;
        `platforms` stays, so that a check that needs the whole set (the accelerator's platform) sees it."""
        return replace(self, platform=platform)

    def each_platform(self) -> tuple[Config, ...]:
        """The config of each platform of a multi-platform image, in the order given; (self,) for one platform."""
        return tuple(self.for_platform(p) for p in self.platforms) if self.multi_platform else (self,)

    def named(self, key: str) -> str:
        """The key as the user gave it: its flag (--platform) when a flag set it, else the config key."""
        return flag_name(key) if key in self.set_by_flags else key


def validate_keys(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Config keys made from another format (a legacy AI Platform config.yaml), through the same validators."""
    raw = _Raw(data=data, source=source)
    validators = _validators(Path("."))
    return {key: validators[key](raw, (key,), value) for key, value in data.items() if value is not None}


def _validators(root: Path) -> dict[str, Callable[[_Raw, tuple, Any], Any]]:
    patterns = "fnmatch patterns of context paths, e.g. keys/*.pem"
    validators: dict[str, Callable[[_Raw, tuple, Any], Any]] = {
        "framework": _framework,
        "cuda": lambda r, p, v: _pattern(r, p, v, _CUDA, "a CUDA version like 12.4 or 12.4.1", allow_numbers=True),
        "python": lambda r, p, v: _pattern(r, p, v, _PYTHON, "a Python version like 3.11", allow_numbers=True),
        "gpu": _bool,
        "accelerator": lambda r, p, v: _pattern(r, p, v, _ACCELERATOR, _ACCELERATOR_RULE),
        "cuda_flavor": lambda r, p, v: _choice(r, p, v, CUDA_FLAVORS),
        "base_image": lambda r, p, v: str(_ref(r, p, v)),
        "system_packages": lambda r, p, v: _strings(
            r, p, v, lambda r2, p2, v2: _pattern(r2, p2, v2, _DEBIAN_PACKAGE, "a Debian package name, optionally =VERSION"),
            total_bytes=MAX_LIST_BYTES * 2),
        "pip": lambda r, p, v: _strings(r, p, v, _pip_requirement, total_bytes=MAX_LIST_BYTES),
        "requirements": lambda r, p, v: _relative_file(r, p, v, root, "requirements file"),
        "requirements_extras": lambda r, p, v: _strings(r, p, v, lambda r2, p2, v2: _pattern(
            r2, p2, v2, _EXTRA_NAME, "an extra's name, e.g. gpu (PEP 685)")),
        "requirements_groups": lambda r, p, v: _strings(r, p, v, lambda r2, p2, v2: _pattern(
            r2, p2, v2, _EXTRA_NAME, "a dependency group's name, e.g. train (PEP 735)")),
        "env": _env,
        "hypertune": _bool,
        "import_check": _bool,
        "build_extensions": _bool,
        "keep_pip": _bool,
        "trainer": lambda r, p, v: _trainer(r, p, v, root),
        "package": _package,
        "trainer_package": _trainer_package,
        "template": lambda r, p, v: _relative_file(r, p, v, root, "template"),
        "image": _image,
        "python_mirror": _mirror_url,
        "framework_index_url": _mirror_url,
        "tags": _tags,
        "platform": _platforms,
        "network": lambda r, p, v: _choice(r, p, v, _BUILD_NETWORKS),
        "ca_cert": lambda r, p, v: _ca_cert(r, p, v, root),
        "pip_index_url": _index_url,
        "pip_conf": lambda r, p, v: _pip_conf(r, p, v, root),
        "pip_google_auth": lambda r, p, v: _strings(r, p, v, lambda r2, p2, v2: _pattern(
            r2, p2, v2, _INDEX_HOST, "a package index's host name in lower case, e.g. pypi.internal.example.com")),
        "builder": lambda r, p, v: _choice(r, p, v, BUILDERS),
        "allow_secrets": lambda r, p, v: _strings(r, p, v, lambda r2, p2, v2: _pattern(r2, p2, v2, _PATTERN, patterns)),
        "allow_large": lambda r, p, v: _strings(r, p, v, lambda r2, p2, v2: _pattern(r2, p2, v2, _PATTERN, patterns)),
        "job": _job,
        "hyperparameters": _hyperparameters,
        "fallbacks": _fallbacks,
        "model": _model,
        "cloudbuild": _cloudbuild,
        "variants": lambda r, p, v: _variants(r, p, v, validators),
    }
    return validators


KEYS = tuple(_validators(Path(".")))


def _flag_like(key: Any) -> bool:
    """A key of a mapping set by flags that a flag may be named after: an API caller's {1: ...} or {"\\n": ...} is
    named by its path in the config instead."""
    return isinstance(key, str) and _KEY.fullmatch(key) is not None


def load_config(
    config_path: Path | None = None,
    directory: Path | None = None,
    overrides: dict[str, Any] | None = None,
    document: Mapping[str, Any] | None = None,
) -> Config:
    """Read (or take the document given), merge flag overrides over it, validate; raise ConfigError on any bad value."""
    raw, root = load_raw(config_path, directory or Path.cwd(), document)
    for key, value in (overrides or {}).items():
        if value is not None and value != ():
            if key == "cloudbuild" and isinstance(value, dict):  # set key by key (--cloudbuild-KEY): the file's other keys stay
                given = raw.data.get(key)
                raw.data[key] = {**(given if isinstance(given, dict) else {}), **value}
                raw.positions.update({(key, sub): cloudbuild_flag_name(sub) for sub in value if _flag_like(sub)})
                raw.scalars = {p: t for p, t in raw.scalars.items() if p[:2] not in {(key, k) for k in value}}
                raw.flags.add(key)
                continue
            raw.data[key] = value
            raw.positions[(key,)] = flag_name(key)
            if key == "trainer" and isinstance(value, dict):  # set by flags of its keys' names (--module, --script)
                raw.positions.update({(key, sub): flag_name(sub) for sub in value if _flag_like(sub)})
            raw.scalars = {p: t for p, t in raw.scalars.items() if p[:1] != (key,)}
            raw.flags.add(key)
    validators = _validators(root)
    values: dict[str, Any] = {}
    for key, value in raw.data.items():
        if key not in validators:
            raise _unknown_key(raw, (), key, list(validators))
        if value is None:
            continue  # an empty YAML value means "use the default"
        values[key] = validators[key](raw, (key,), value)
    if values.get("pip_index_url") and values.get("pip_conf"):
        raise _err(raw, ("pip_index_url",), "give pip_index_url or pip_conf, not both")
    if "platform" in values:
        values.update(platform_keys(values["platform"]))
    return Config(root=root, source=raw.source, set_by_flags=frozenset(raw.flags), **values)


# What the rest of buildkit-py imports from the config: the package's names, whichever of its modules holds each.
__all__ = ["CLOUDBUILD_KEYS", "JOB_KEYS", "KEYS", "METRIC_TAG", "POOL_ORDER", "Config", "Fallback", "FrameworkRequest",
           "Hyperparameters", "ImportScope", "JobConfig", "ModelConfig", "Param", "Pool", "Trainer", "TrainerPackage",
           "bad_character", "check_hyperparameters", "check_job_key", "default_ca_bundle", "distribution_name",
           "field_error", "field_name", "find_config", "job_flag", "load_config", "load_raw", "model_flag", "param_name",
           "pep440_version", "read_yaml", "validate_keys", "worker_pool_specs"]
