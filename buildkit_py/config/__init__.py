"""The config model: buildkit.yaml or [tool.buildkit-py] in pyproject.toml, plus flag overrides.

Loading is the only I/O here; the result is a frozen, validated Config. Every error names the
file position (YAML) or the flag, the field, the value (escaped) and what is allowed. Flags go
through the same validators as the file, so a value is refused the same way wherever it comes from.
"""

from __future__ import annotations

import json
import keyword
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from ..builders import BUILDERS
from ..errors import ConfigError, show
from ..flags import cloudbuild_flag_name, flag_name, job_flag_name
from ..fsutil import consult, leads_outside, read_text
from .reading import _KEY, _dotted, _err, _Raw, field_error, field_name, find_config, load_raw, read_yaml
from .values import (
    _ACCELERATOR,
    _ACCELERATOR_RULE,
    _MODULE,
    MAX_ARGS_JSON_BYTES,
    _bool,
    _choice,
    _duration,
    _env,
    _host_file,
    _int,
    _list,
    _mapping,
    _number,
    _pattern,
    _ref,
    _relative_file,
    _scalar_text,
    _string,
    _strings,
    _unknown_key,
    bad_character,
)

MAX_LIST_BYTES = 8192  # pip and system_packages share one RUN line each; quoting can grow a pip entry 5x

_FRAMEWORK = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,63})(?:==(?P<version>[0-9A-Za-z][0-9A-Za-z.+!-]{0,63}))?",
                        re.ASCII)
_CUDA = re.compile(r"[0-9]{1,2}\.[0-9]{1,2}(?:\.[0-9]{1,3})?", re.ASCII)
_PYTHON = re.compile(r"3\.[0-9]{1,2}", re.ASCII)
_PACKAGE_PART = r"(?!\.\.?(?:/|$))[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}"  # a folder name, not . or ..
_PACKAGE_DIR = re.compile(f"{_PACKAGE_PART}(?:/{_PACKAGE_PART}){{0,7}}", re.ASCII)
_DEBIAN_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]{1,127}(?:=[A-Za-z0-9.+:~-]{1,127})?", re.ASCII)
_FUNCTION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_MIRROR_URL = re.compile(r"https?://[A-Za-z0-9._~:/?#\[\]!&()*+,;=%-]+", re.ASCII)
_INDEX_URL = re.compile(r"https?://[!-~]+", re.ASCII)  # printable ASCII: credentials allowed, no space or line break
# A package index's host name (lower case, as URLs compare them) or IPv4 address: a netrc's `machine`.
_INDEX_HOST = re.compile(r"(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*",
                         re.ASCII)
_PLATFORM = re.compile(r"[a-z0-9]+/[a-z0-9_]+(?:/v?[0-9a-z]+)?", re.ASCII)
_BUILD_NETWORKS = ("default", "host", "none")  # what BuildKit's RUN steps accept
CUDA_FLAVORS = ("auto", "base", "runtime", "cudnn-runtime", "devel")  # nvidia/cuda image flavours
_PATTERN = re.compile(r"[^\x00-\x1f\x7f]{1,1024}")
_DIST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?", re.ASCII)  # PEP 508 names
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}", re.ASCII)  # then PEP 440, which alone allows spaces
# A variant's name ends its image tags (bk-DIGEST-NAME) and names its CI matrix job and Make target.
_VARIANT_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,31}", re.ASCII)
MAX_VARIANTS = 32


@dataclass(frozen=True)
class FrameworkRequest:
    name: str  # as written (aliases are resolved by the matrix)
    version: str | None  # None: the newest known release; "nightly": a nightly build

    @property
    def is_none(self) -> bool:
        return self.name == "none"

    def __str__(self) -> str:
        return self.name if self.version is None else f"{self.name}=={self.version}"


@dataclass(frozen=True)
class Trainer:
    module: str | None = None
    script: str | None = None  # POSIX path relative to the context root
    args: tuple[str, ...] = ()
    # A function of the module to call, as a console script calls it (`[project.scripts] train =
    # "trainer.task:main"`): sys.exit(function()), for a module with no __main__ block of its own.
    function: str | None = None
    # The folder holding the trainer's packages (`src` in a src layout), relative to the context root: on PYTHONPATH
    # before the root itself.
    package_dir: str | None = None


@dataclass(frozen=True)
class ImportScope:
    """Where the build's import check starts (buildkit_py/imports.py): the trainer's module or script, and the
    folder of its packages."""

    module: str | None = None
    script: str | None = None
    package_dir: str | None = None


@dataclass(frozen=True)
class PackageMeta:
    """The sdist `buildkit-py package` generates for a trainer without a pyproject.toml or setup.py."""

    name: str | None = None  # default: the trainer directory's name
    version: str | None = None  # default: 0.0.0


@dataclass(frozen=True)
class TrainerPackage:
    """The trainer directory's own distribution (setup.py, setup.cfg, pyproject.toml), as gcloud's `pip install .` left
    it in the image: its metadata, entry points and console scripts, installed before the code layer (the code itself
    is that layer, on PYTHONPATH), so importlib.metadata finds it and a code edit stays one layer."""

    name: str
    version: str
    entry_points: tuple[tuple[str, tuple[str, ...]], ...] = ()  # group -> "name = module:attr" entries

    def to_dict(self) -> dict:
        return {"name": self.name, "version": self.version, "entry_points": {g: list(e) for g, e in self.entry_points}}

    def json(self) -> str:
        """What the image's launcher (buildkit_launcher.distinfo) reads: one ASCII line."""
        return json.dumps(self.to_dict(), ensure_ascii=True, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Variant:
    """A named set of overrides of the top-level keys (e.g. cuda: "12.8"), validated like them."""

    name: str
    values: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Config:
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
    env: tuple[tuple[str, str], ...] = ()
    hypertune: bool = True
    import_check: bool = True  # the build imports what the trainer's entry point imports before its code layer
    build_extensions: bool = False  # the trainer directory's compiled extensions are built in a stage of their own
    keep_pip: bool = False  # leave pip in the image's venv (uv installs without it), for trainers that run pip
    trainer: Trainer | None = None
    package: PackageMeta | None = None
    trainer_package: TrainerPackage | None = None
    template: str | None = None
    image: str | None = None  # the repository the content and git tags go on
    python_mirror: str | None = None  # where uv downloads standalone Pythons (UV_PYTHON_INSTALL_MIRROR)
    # Replaces the framework's own package index (PyTorch's cuXYZ index, NVIDIA's for nvidia-tensorflow): a mirror
    # of it. In the Dockerfile, so no credentials: an index that needs them is the pip_conf's.
    framework_index_url: str | None = None
    # How to build: each also a flag of the same name.
    tags: tuple[str, ...] = ()
    platform: str | None = None  # default: linux/amd64 for CUDA images, the engine's own otherwise
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

    def with_variant(self, variant: Variant) -> Config:
        return replace(self, **dict(variant.values), variants=(), variant=variant.name)


def _framework(raw, path, value) -> FrameworkRequest:
    allowed = "use NAME==VERSION (e.g. torch==2.5.1), NAME==nightly, NAME alone for the newest known release, or none"
    text = _string(raw, path, value).strip()
    match = _FRAMEWORK.fullmatch(text)
    if not match:
        raise _err(raw, path, f"{show(text)} is not allowed: {allowed}")
    name = match["name"].lower()
    if name == "none" and match["version"]:
        raise _err(raw, path, f"{show(text)} is not allowed: 'none' takes no version")
    return FrameworkRequest(name, match["version"])


def ca_bundle_problem(path: Path) -> str | None:
    """Why a file cannot serve as a CA bundle, or None: PEM certificates and nothing secret."""
    consult(path)
    try:
        with open(path, "rb") as handle:
            head = handle.read(16 << 20)
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


def _pip_requirement(raw, path, value) -> str:
    # Loaded by a config with `pip:` only: PEP 508's parser is a tenth of every command's start-up otherwise.
    from packaging.requirements import InvalidRequirement, Requirement

    text = _string(raw, path, value).strip()
    if text.startswith("-"):
        raise _err(raw, path, f"{show(text)} is not allowed: give a PEP 508 requirement (options go in a requirements file)")
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        from ..requirements_file import parse_problem

        raise _err(raw, path, f"{show(text)} is not a valid PEP 508 requirement: {parse_problem(exc)}") from None
    return text


def _trainer(raw, path, value, root: Path) -> Trainer:
    if not isinstance(value, dict):
        raise _err(raw, path, f"{show(value)} must be a mapping with module or script, and args")
    allowed = ["module", "script", "function", "args", "package_dir"]
    for key in value:
        if key not in allowed:
            raise _unknown_key(raw, path, key, allowed)
    package_dir = None
    if value.get("package_dir") is not None:
        package_dir = _pattern(raw, path + ("package_dir",), value["package_dir"], _PACKAGE_DIR,
                               "a folder of the trainer directory, e.g. src")
        consult(root / package_dir)
        if leads_outside(root / package_dir, root.resolve()) or not (root / package_dir).is_dir():
            raise _err(raw, path + ("package_dir",), f"{show(package_dir)} is not a folder of the trainer directory")
    if ("module" in value) == ("script" in value):
        raise _err(raw, path, "give exactly one of module (python -m MODULE) or script (a .py file)")
    module = script = None
    if "module" in value:
        module = _pattern(raw, path + ("module",), value["module"], _MODULE, "a dotted Python module name, e.g. trainer.task")
        if len(module) > 255:
            raise _err(raw, path + ("module",), f"{show(module)} is too long: at most 255 characters")
    else:
        script = _relative_file(raw, path + ("script",), value["script"], root)
        if not script.endswith(".py"):
            raise _err(raw, path + ("script",), f"{show(script)} is not allowed: a script must be a .py file")
    function = None
    if value.get("function") is not None:
        if module is None:
            raise _err(raw, path + ("function",), "a function is called from a module: give module too")
        function = _pattern(raw, path + ("function",), value["function"], _FUNCTION,
                            "a function name of the module, as a console script names it (main)")
        if keyword.iskeyword(function) or len(function) > 100:
            raise _err(raw, path + ("function",), f"{show(function)} is not a function name")
        if any(keyword.iskeyword(part) for part in module.split(".")):
            raise _err(raw, path + ("module",), f"{show(module)} cannot be imported by name: a part is a Python keyword")
    args = []
    given = value.get("args")
    for i, arg in enumerate(_list(raw, path + ("args",), [] if given is None else given)):
        args.append(_scalar_text(raw, path + ("args", i), arg))
    if len(json.dumps(args)) > MAX_ARGS_JSON_BYTES:
        raise _err(raw, path + ("args",), f"the arguments are too long for the image's CMD: at most {MAX_ARGS_JSON_BYTES} "
                                          "bytes as JSON; pass long values at run time")
    return Trainer(module=module, script=script, args=tuple(args), package_dir=package_dir, function=function)


def distribution_name(text: str, field: str) -> str:
    """A distribution name as PEP 508 allows it (buildkit-py normalises it per PEP 503 when packaging)."""
    if not _DIST_NAME.fullmatch(text):
        raise ConfigError(f"{show(text)} is not a valid distribution name: ASCII letters, digits and . _ -, "
                          "starting and ending with a letter or digit, at most 200 characters", field=field)
    return text


def pep440_version(text: str, field: str) -> str:
    try:
        if not _VERSION.fullmatch(text):
            raise InvalidVersion(text)
        Version(text)
    except InvalidVersion:
        raise ConfigError(f"{show(text)} is not a PEP 440 version, e.g. 0.1.0, 1.2.3rc1 or 2024.5", field=field) from None
    return text


def _package(raw, path, value) -> PackageMeta:
    if not isinstance(value, dict):
        raise _err(raw, path, f"{show(value)} must be a mapping with name and/or version")
    checks = {"name": distribution_name, "version": pep440_version}
    out = {}
    for key, item in value.items():
        if key not in checks:
            raise _unknown_key(raw, path, key, list(checks))
        if item is None:
            continue
        text = _string(raw, path + (key,), item, allow_numbers=key == "version")
        try:
            out[key] = checks[key](text, _dotted(path + (key,)))
        except ConfigError as exc:  # restated with the file position
            raise _err(raw, path + (key,), exc.detail) from None
    return PackageMeta(**out)


# An entry point as setuptools writes it: NAME = module[:attr[.attr]] [extras]; a console or GUI script's name becomes a
# file in the venv's bin/, so it has no path separator.
_ENTRY_GROUP = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}", re.ASCII)
_ENTRY = re.compile(r"([A-Za-z0-9_.-][A-Za-z0-9_. -]{0,99}?) ?= ?[A-Za-z_][A-Za-z0-9_.]{0,199}"
                    r"(?::[A-Za-z_][A-Za-z0-9_.]{0,199})?(?: ?\[[A-Za-z0-9_., -]{0,200}\])?", re.ASCII)
_SCRIPT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}", re.ASCII)
MAX_ENTRY_GROUPS = 50
MAX_ENTRIES = 200  # per group
# The metadata is one RUN line, and BuildKit reads lines of at most 64 KiB (render.MAX_LINE_BYTES): half of that for it
MAX_TRAINER_PACKAGE_BYTES = 32768


def _trainer_package(raw, path, value) -> TrainerPackage:
    if not isinstance(value, dict):
        raise _err(raw, path, f"{show(value)} must be a mapping with name, version and entry_points")
    for key in value:
        if key not in ("name", "version", "entry_points"):
            raise _unknown_key(raw, path, key, ["name", "version", "entry_points"])
    out: dict[str, Any] = {}
    for key, check in (("name", distribution_name), ("version", pep440_version)):
        if value.get(key) is None:
            raise _err(raw, path + (key,), f"the trainer package needs its {key}")
        text = _string(raw, path + (key,), value[key], allow_numbers=key == "version")
        try:
            out[key] = check(text, _dotted(path + (key,)))
        except ConfigError as exc:
            raise _err(raw, path + (key,), exc.detail) from None
    groups = value.get("entry_points") or {}
    if not isinstance(groups, dict) or len(groups) > MAX_ENTRY_GROUPS:
        raise _err(raw, path + ("entry_points",), f"{show(groups)} must be a mapping of at most {MAX_ENTRY_GROUPS} "
                                                  "entry point groups, each a list of `NAME = module:attr` entries")
    entries = []
    for group, items in groups.items():
        at = path + ("entry_points", group)
        if not isinstance(group, str) or not _ENTRY_GROUP.fullmatch(group):
            raise _err(raw, at, f"{show(group)} is not an entry point group name (ASCII letters, digits, _ . -, e.g. "
                                "console_scripts)")
        if not isinstance(items, list) or len(items) > MAX_ENTRIES:
            raise _err(raw, at, f"{show(items)} must be a list of at most {MAX_ENTRIES} `NAME = module:attr` entries")
        texts = []
        for i, item in enumerate(items):
            text = _string(raw, at + (i,), item, limit=500)
            if not _ENTRY.fullmatch(text):
                raise _err(raw, at + (i,), f"{show(text)} is not an entry point: NAME = module:attr")
            name = text.partition("=")[0].strip()
            if group in ("console_scripts", "gui_scripts") and (not _SCRIPT_NAME.fullmatch(name) or ":" not in text):
                raise _err(raw, at + (i,), f"{show(text)} is not a script: NAME = module:function, NAME of ASCII "
                                           "letters, digits, _ . -")
            texts.append(text)
        entries.append((group, tuple(texts)))
    package = TrainerPackage(out["name"], out["version"], tuple(entries))
    size = len(package.json())
    if size > MAX_TRAINER_PACKAGE_BYTES:
        raise _err(raw, path + ("entry_points",), f"{len(entries)} groups of {sum(len(e) for _, e in entries)} entry "
                   f"points make {size} bytes of metadata, one Dockerfile line: at most {MAX_TRAINER_PACKAGE_BYTES}")
    return package


def _image(raw, path, value) -> str:
    ref = _ref(raw, path, value)
    text = str(value)
    if ref.tag or ref.digest:
        raise _err(raw, path, f"{show(text)} is not allowed: give the repository only; "
                              "buildkit-py adds the content and git tags (more tags: tags / --tag)")
    return ref.repository


def _tag(raw, path, value) -> str:
    return str(_ref(raw, path, value, allow_digest=False))


def _variants(raw: _Raw, path: tuple, value: Any, validators: dict[str, Callable]) -> tuple[Variant, ...]:
    allowed = ["name"] + [k for k in validators if k != "variants"]
    out: list[Variant] = []
    for i, item in enumerate(_list(raw, path, value, limit=MAX_VARIANTS)):
        where = path + (i,)
        if not isinstance(item, dict) or "name" not in item:
            raise _err(raw, where, f"{show(item)} must be a mapping with a name and the keys it overrides, "
                                   "e.g. {name: cu128, cuda: '12.8'}")
        name = _pattern(raw, where + ("name",), item["name"], _VARIANT_NAME,
                        "lowercase ASCII letters, digits, '.', '_' and '-', starting with a letter or digit, "
                        "at most 32 characters")
        if any(v.name == name for v in out):
            raise _err(raw, where + ("name",), f"variant {show(name)} is given twice")
        values = []
        for key, item_value in item.items():
            if key not in allowed:
                raise _unknown_key(raw, where, key, allowed)
            if key != "name" and item_value is not None:
                values.append((key, validators[key](raw, where + (key,), item_value)))
        out.append(Variant(name, tuple(values)))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# The Vertex AI job: `job`, `hyperparameters`, `fallbacks` (buildkit_py/jobs/vertex.py builds the spec)

_MACHINE_TYPE = re.compile(r"[a-z][a-z0-9]{0,15}(?:-[a-z0-9]{1,16}){1,3}", re.ASCII)
_TPU_TOPOLOGY = re.compile(r"[1-9][0-9]{0,2}(?:x[1-9][0-9]{0,2}){1,2}", re.ASCII)  # chips per axis, "2x2", "2x2x1"
_REGION = re.compile(r"[a-z]{2,20}-[a-z]{2,20}[0-9]{1,2}", re.ASCII)
_PROJECT = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20}", re.ASCII)  # an id or a number
_DISPLAY_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,127}", re.ASCII)
_LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}", re.ASCII)  # Google Cloud labels, in ASCII
_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}", re.ASCII)
_GCS_URI = re.compile(r"gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](?:/[A-Za-z0-9._~@+=,:/-]{0,1000})?", re.ASCII)
_SERVICE_ACCOUNT = re.compile(r"[A-Za-z0-9._+-]{1,64}@[a-z0-9.-]{1,253}", re.ASCII)
_VPC = re.compile(r"projects/[0-9]{1,20}/global/networks/[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?", re.ASCII)
_TENSORBOARD = re.compile(r"projects/[a-z0-9-]{1,30}/locations/[a-z0-9-]{1,40}/tensorboards/[0-9]{1,20}", re.ASCII)
_RESERVATION = re.compile(r"[A-Za-z0-9._/-]{1,512}", re.ASCII)
METRIC_TAG = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{0,127}", re.ASCII)
BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")
STRATEGIES = ("STANDARD", "SPOT", "FLEX_START")
RESERVATION_TYPES = ("ANY_RESERVATION", "NO_RESERVATION", "SPECIFIC_RESERVATION")
GOALS = ("MAXIMIZE", "MINIMIZE")
ALGORITHMS = ("ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH")  # unspecified: the service's default
PARAM_TYPES = ("DOUBLE", "INTEGER", "CATEGORICAL", "DISCRETE")
SCALES = ("linear", "log", "reverse_log")
MAX_LABELS = 64
MAX_REPLICAS = 1000
MAX_ACCELERATORS = 16


@dataclass(frozen=True)
class Pool:
    """One worker pool's machines; in `job` itself the chief's (pool 0)."""

    machine_type: str | None = None
    accelerator_type: str | None = None
    accelerator_count: int | None = None
    replica_count: int | None = None
    boot_disk_type: str | None = None
    boot_disk_size_gb: int | None = None
    tpu_topology: str | None = None  # machineSpec.tpuTopology, for TPU machine types that take one


@dataclass(frozen=True)
class Reservation:
    type: str
    key: str | None = None
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class PythonPackage:
    executor: str  # an image reference, or NAME==VERSION of Google's prebuilt training images
    package_uris: tuple[str, ...]
    module: str


@dataclass(frozen=True)
class JobConfig:
    name: str | None = None  # the display name; default <base>_<YYYYMMDD_HHMMSS>
    project: str | None = None
    region: str | None = None
    image: str | None = None
    chief: Pool = Pool()
    reservation: Reservation | None = None
    workers: Pool | None = None  # pool 1 (default: the chief's machines)
    parameter_servers: Pool | None = None  # pool 2
    reduction_server: Pool | None = None  # pool 2, Google's reduction server image
    evaluators: Pool | None = None  # pool 3
    command: tuple[str, ...] = ()
    args: tuple[str, ...] | None = None  # None: the image's default trainer args
    env: tuple[tuple[str, str], ...] = ()
    python_package: PythonPackage | None = None
    timeout: int | None = None  # seconds
    restart_job_on_worker_restart: bool | None = None
    strategy: str | None = None
    max_wait_duration: int | None = None  # seconds
    disable_retries: bool | None = None
    service_account: str | None = None
    network: str | None = None
    base_output_directory: str | None = None
    staging_bucket: str | None = None
    tensorboard: str | None = None
    enable_web_access: bool | None = None
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    min: float | int | None = None
    max: float | int | None = None
    values: tuple = ()
    scale: str | None = None


@dataclass(frozen=True)
class Hyperparameters:
    metric: str
    goal: str
    max_trials: int
    parallel_trials: int
    params: tuple[Param, ...]
    max_failed_trials: int | None = None
    algorithm: str = "ALGORITHM_UNSPECIFIED"


@dataclass(frozen=True)
class Fallback:
    """An alternative tried, in order, when the service refuses the job for capacity or quota."""

    accelerator_type: str | None = None
    accelerator_count: int | None = None
    machine_type: str | None = None
    region: str | None = None
    strategy: str | None = None


_POOL_FIELDS: dict[str, Callable[[_Raw, tuple, Any], Any]] = {
    "machine_type": lambda r, p, v: _pattern(r, p, v, _MACHINE_TYPE, "a Compute Engine machine type, e.g. n1-standard-8"),
    "accelerator_type": lambda r, p, v: _pattern(r, p, v, _ACCELERATOR, _ACCELERATOR_RULE),
    "accelerator_count": lambda r, p, v: _int(r, p, v, 0, MAX_ACCELERATORS),
    "replica_count": lambda r, p, v: _int(r, p, v, 1, MAX_REPLICAS),
    "boot_disk_type": lambda r, p, v: _choice(r, p, v, BOOT_DISK_TYPES),
    "boot_disk_size_gb": lambda r, p, v: _int(r, p, v, 100, 64000),
    "tpu_topology": lambda r, p, v: _pattern(r, p, v, _TPU_TOPOLOGY, "TPU chips per axis, e.g. 2x2 or 2x2x1"),
}


def _pool(raw: _Raw, path: tuple, value: Any) -> Pool:
    data = _mapping(raw, path, value, list(_POOL_FIELDS), "machine_type, accelerator_type, accelerator_count, replica_count, "
                                                          "boot_disk_type, boot_disk_size_gb, tpu_topology")
    return Pool(**{k: _POOL_FIELDS[k](raw, path + (k,), v) for k, v in data.items()})


def _reservation(raw: _Raw, path: tuple, value: Any) -> Reservation:
    data = _mapping(raw, path, value, ["type", "key", "values"], "type, key and values")
    kind = _choice(raw, path + ("type",), data.get("type"), RESERVATION_TYPES) if "type" in data else None
    if kind is None:
        raise _err(raw, path, f"type is required: one of {', '.join(RESERVATION_TYPES)}")
    key = _pattern(raw, path + ("key",), data["key"], _RESERVATION, "a label key, e.g. compute.googleapis.com/reservation-name") \
        if "key" in data else None
    values = _strings(raw, path + ("values",), data.get("values", []),
                      lambda r, p, v: _pattern(r, p, v, _RESERVATION, "a reservation name or projects/P/zones/Z/reservations/R"))
    if (kind == "SPECIFIC_RESERVATION") != bool(key and values):
        raise _err(raw, path, "key and values go with type SPECIFIC_RESERVATION, and only with it")
    return Reservation(kind, key, values)


def _labels(raw: _Raw, path: tuple, value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise _err(raw, path, f"{show(value)} must be a mapping of key: value")
    if len(value) > MAX_LABELS:
        raise _err(raw, path, f"{len(value)} labels are too many: at most {MAX_LABELS}")
    out = []
    for key, item in value.items():
        if not isinstance(key, str) or not _LABEL_KEY.fullmatch(key) or key.startswith("goog"):
            raise _err(raw, path + (key,), f"{show(key)} is not allowed: a label key is 1-63 lowercase ASCII letters, digits, "
                                           "'_' and '-', starting with a letter, not starting with 'goog'")
        text = _scalar_text(raw, path + (key,), item)
        if not _LABEL_VALUE.fullmatch(text):
            raise _err(raw, path + (key,), f"{show(text)} is not allowed: a label value is 0-63 lowercase ASCII letters, "
                                           "digits, '_' and '-'")
        out.append((key, text))
    return tuple(out)


def _python_package(raw: _Raw, path: tuple, value: Any) -> PythonPackage:
    data = _mapping(raw, path, value, ["executor", "package_uris", "module"], "executor, package_uris and module")
    missing = [k for k in ("executor", "package_uris", "module") if k not in data]
    if missing:
        raise _err(raw, path, f"{', '.join(missing)} required: an executor image (or NAME==VERSION), gs:// package URIs "
                              "and the module to run")
    executor = _string(raw, path + ("executor",), data["executor"])
    if "==" not in executor:  # NAME==VERSION is looked up in the executor catalog when the spec is made
        executor = str(_ref(raw, path + ("executor",), executor))
    uris = _strings(raw, path + ("package_uris",), data["package_uris"],
                    lambda r, p, v: _pattern(r, p, v, _GCS_URI, "a gs://BUCKET/OBJECT URI (Vertex AI reads packages from "
                                                                "Cloud Storage; `buildkit-py package --stage gs://...`)"))
    if not uris:
        raise _err(raw, path + ("package_uris",), "give at least one gs:// package URI")
    module = _pattern(raw, path + ("module",), data["module"], _MODULE, "a dotted Python module name, e.g. trainer.task")
    return PythonPackage(executor, uris, module)


def _args(raw: _Raw, path: tuple, value: Any) -> tuple[str, ...]:
    args = tuple(_scalar_text(raw, path + (i,), v) for i, v in enumerate(_list(raw, path, value)))
    if len(json.dumps(args)) > MAX_ARGS_JSON_BYTES:
        raise _err(raw, path, f"the arguments are too long: at most {MAX_ARGS_JSON_BYTES} bytes as JSON")
    return args


_JOB_FIELDS: dict[str, Callable[[_Raw, tuple, Any], Any]] = {
    "name": lambda r, p, v: _pattern(r, p, v, _DISPLAY_NAME, "a display name: ASCII letters, digits, '_', '.' and '-', "
                                                           "starting with a letter, at most 128 characters"),
    "project": lambda r, p, v: _pattern(r, p, v, _PROJECT, "a Google Cloud project id (6-30 lowercase letters, digits and "
                                                         "'-', starting with a letter) or number", allow_numbers=True),
    "region": lambda r, p, v: _pattern(r, p, v, _REGION, "a Google Cloud region, e.g. us-central1 or europe-west4"),
    "image": lambda r, p, v: str(_ref(r, p, v)),
    **_POOL_FIELDS,
    "reservation": _reservation,
    "workers": _pool,
    "parameter_servers": _pool,
    "reduction_server": _pool,
    "evaluators": _pool,
    "command": _args,
    "args": _args,
    "env": _env,
    "python_package": _python_package,
    "timeout": _duration,
    "restart_job_on_worker_restart": _bool,
    "strategy": lambda r, p, v: _choice(r, p, v, STRATEGIES),
    "max_wait_duration": _duration,
    "disable_retries": _bool,
    "service_account": lambda r, p, v: _pattern(r, p, v, _SERVICE_ACCOUNT, "a service account email, e.g. "
                                                "trainer@PROJECT.iam.gserviceaccount.com"),
    "network": lambda r, p, v: _pattern(r, p, v, _VPC, "a VPC network: projects/PROJECT_NUMBER/global/networks/NAME"),
    "base_output_directory": lambda r, p, v: _pattern(r, p, v, _GCS_URI, "a gs://BUCKET/PATH URI"),
    "staging_bucket": lambda r, p, v: _pattern(r, p, v, _GCS_URI, "a gs://BUCKET[/PATH] URI"),
    "tensorboard": lambda r, p, v: _pattern(r, p, v, _TENSORBOARD, "projects/P/locations/L/tensorboards/ID"),
    "enable_web_access": _bool,
    "labels": _labels,
}
JOB_KEYS = tuple(_JOB_FIELDS)


def _job(raw: _Raw, path: tuple, value: Any) -> JobConfig:
    data = _mapping(raw, path, value, list(_JOB_FIELDS), "job settings")
    values = {k: _JOB_FIELDS[k](raw, path + (k,), v) for k, v in data.items()}
    chief = Pool(**{k: values.pop(k) for k in list(values) if k in _POOL_FIELDS})
    if "parameter_servers" in values and "reduction_server" in values:
        raise _err(raw, path + ("reduction_server",), "give parameter_servers or reduction_server (both use pool 2), not both")
    if "python_package" in values and ("image" in values or "command" in values):
        raise _err(raw, path + ("python_package",), "a python_package job runs on its executor: drop image and command")
    return JobConfig(chief=chief, **values)


def check_job_key(raw: _Raw, path: tuple, key: str, value: Any) -> Any:
    """A key under `job:` read from another format (gcloud's job config), checked by its validator and named at
    that file's own field and line."""
    return _JOB_FIELDS[key](raw, path, value)


def check_hyperparameters(raw: _Raw, path: tuple, value: Any) -> Hyperparameters:
    """`hyperparameters:` read from another format, named at that file's field and line."""
    return _hyperparameters(raw, path, value)


def job_flag(key: str, value: Any) -> Any:
    """A job setting given as a flag (--machine-type...), checked by the validator of the config key."""
    raw = _Raw(data={}, source=job_flag_name(key), positions={("job", key): job_flag_name(key)}, flags={"job"})
    return _JOB_FIELDS[key](raw, ("job", key), value)


# gcloud's --worker-pool-spec keys that buildkit-py's job takes, as the pool keys they set
_SPEC_KEYS = {"machine-type": "machine_type", "replica-count": "replica_count", "accelerator-type": "accelerator_type",
              "accelerator-count": "accelerator_count"}
# gcloud's keys for what buildkit-py decides itself: the image it built, or the executor and package of --mode package
_SPEC_IMAGE_KEYS = ("container-image-uri", "executor-image-uri", "output-image-uri", "python-module", "script",
                    "local-package-path", "requirements", "extra-dirs", "extra-packages")
POOL_ORDER = ("chief", "workers", "parameter_servers", "evaluators")  # Vertex AI's pools 0-3


def worker_pool_specs(specs: tuple[str, ...] | list[str]) -> dict[str, Pool | None]:
    """gcloud's --worker-pool-spec values, one per pool in Vertex AI's order, as the job's pools: they replace the
    config's pools as a whole (an empty spec leaves that pool out). The chief's replica_count is the total, as in
    `job:`."""
    flag = job_flag_name("worker_pool_specs")
    if not isinstance(specs, (list, tuple)) or not all(isinstance(s, str) for s in specs):
        raise ConfigError(f"{show(specs)} is not allowed: a list of specs like machine-type=n1-standard-8,"
                          "replica-count=1", field=flag)
    if not 0 < len(specs) <= len(POOL_ORDER):
        raise ConfigError(f"{len(specs)} specs: give one to {len(POOL_ORDER)} (chief, workers, parameter servers, "
                          "evaluators)", field=flag)
    pools: dict[str, Pool | None] = {}
    for index, (spec, name) in enumerate(zip(specs, POOL_ORDER, strict=False)):
        where = f"{flag} #{index + 1} ({name})"
        data: dict[str, Any] = {}
        for item in spec.split(",") if spec.strip() else []:
            key, equals, value = item.partition("=")
            key = key.strip()
            if key in _SPEC_IMAGE_KEYS:
                raise ConfigError(f"{show(key)}: buildkit-py runs the image it built (or --image) in every pool; "
                                  "drop it (for an executor and a package: autopackage --mode package)", field=where)
            if key not in _SPEC_KEYS or not equals:
                raise ConfigError(f"{show(item)} is not allowed: KEY=VALUE with KEY one of {', '.join(_SPEC_KEYS)}",
                                  field=where)
            if _SPEC_KEYS[key] in data:
                raise ConfigError(f"{show(key)} is given twice", field=where)
            text = value.strip()
            data[_SPEC_KEYS[key]] = int(text) if key.endswith("-count") and text.isdigit() else text
        raw = _Raw(data={}, source=where, positions={("job", name): where}, flags={"job"})
        pools[name] = _pool(raw, ("job", name), data) if data else None
    chief = pools["chief"]
    if chief is None:
        raise ConfigError("the first spec is the chief's (pool 0): it cannot be empty", field=f"{flag} #1 (chief)")
    if chief.replica_count not in (None, 1):
        raise ConfigError(f"replica-count={chief.replica_count}: pool 0 runs the one chief; give the workers in a "
                          "second spec", field=f"{flag} #1 (chief)")
    workers = pools.get("workers")
    total = 1 + (workers.replica_count or 1 if workers is not None else 0)
    pools["chief"] = replace(chief, replica_count=total)
    return {name: pools.get(name) for name in POOL_ORDER}


def validate_keys(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Config keys made from another format (a legacy AI Platform config.yaml), through the same validators."""
    raw = _Raw(data=data, source=source)
    validators = _validators(Path("."))
    return {key: validators[key](raw, (key,), value) for key, value in data.items() if value is not None}


def _hyperparameters(raw: _Raw, path: tuple, value: Any) -> Hyperparameters:
    keys = ["metric", "goal", "max_trials", "parallel_trials", "max_failed_trials", "algorithm", "params"]
    data = _mapping(raw, path, value, keys, ", ".join(keys))
    missing = [k for k in ("metric", "goal", "max_trials", "parallel_trials", "params") if k not in data]
    if missing:
        raise _err(raw, path, f"{', '.join(missing)} required")
    metric = _pattern(raw, path + ("metric",), data["metric"], METRIC_TAG, "the metric's tag as the trainer reports it "
                                                                      "(ASCII letters, digits, _ . / -)")
    goal = _choice(raw, path + ("goal",), data["goal"], GOALS)
    max_trials = _int(raw, path + ("max_trials",), data["max_trials"], 1, 10000)
    parallel = _int(raw, path + ("parallel_trials",), data["parallel_trials"], 1, max_trials)
    failed = _int(raw, path + ("max_failed_trials",), data["max_failed_trials"], 0, max_trials) \
        if "max_failed_trials" in data else None
    algorithm = _choice(raw, path + ("algorithm",), data["algorithm"], ALGORITHMS) if "algorithm" in data \
        else "ALGORITHM_UNSPECIFIED"
    params = tuple(_param(raw, path + ("params", i), v) for i, v in enumerate(_list(raw, path + ("params",), data["params"],
                                                                                    limit=100)))
    if not params:
        raise _err(raw, path + ("params",), "give at least one parameter")
    names = [p.name for p in params]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise _err(raw, path + ("params", i, "name"), f"{show(name)} is given twice")
    return Hyperparameters(metric, goal, max_trials, parallel, params, failed, algorithm)


PARAM_NAME_RULE = ("a parameter name: Vertex AI's parameter_id, without whitespace, and passed to each trial as "
                   "--NAME=value, so without '=' and not starting with '-'; at most 255 characters, e.g. batch-size")


def param_name(raw: _Raw, path: tuple, value: Any) -> str:
    """Vertex AI's rule (StudySpec.ParameterSpec.parameter_id: no whitespace, unique; google-cloud-aiplatform
    aiplatform_v1/types/study.py) and what keeps `--NAME=value` one flag: '=' would split it elsewhere, a leading
    '-' makes it `---NAME`; invisible format characters (isprintable) could make a name look like another."""
    name = _string(raw, path, value, limit=255)
    if not name or name.startswith("-") or "=" in name or not name.isprintable() or any(ch.isspace() for ch in name):
        raise _err(raw, path, f"{show(name)} is not allowed: {PARAM_NAME_RULE}")
    return name


def _param(raw: _Raw, path: tuple, value: Any) -> Param:
    data = _mapping(raw, path, value, ["name", "type", "min", "max", "values", "scale"], "name, type, min, max, values, scale")
    if "name" not in data or "type" not in data:
        raise _err(raw, path, "name and type are required")
    name = param_name(raw, path + ("name",), data["name"])
    kind = _choice(raw, path + ("type",), data["type"], PARAM_TYPES)
    scale = _choice(raw, path + ("scale",), data["scale"], SCALES) if "scale" in data else None
    ranged = kind in ("DOUBLE", "INTEGER")
    wrong = [k for k in (("values",) if ranged else ("min", "max")) if k in data]
    if wrong:
        raise _err(raw, path + (wrong[0],), f"a {kind} parameter takes {'min and max' if ranged else 'values'}, "
                                            f"not {wrong[0]}")
    if kind == "CATEGORICAL" and scale:
        raise _err(raw, path + ("scale",), "a CATEGORICAL parameter has no scale")
    if ranged:
        if "min" not in data or "max" not in data:
            raise _err(raw, path, f"a {kind} parameter needs min and max")
        check = (lambda p, v: _int(raw, p, v, -(2**53), 2**53)) if kind == "INTEGER" else (lambda p, v: _number(raw, p, v))
        low, high = check(path + ("min",), data["min"]), check(path + ("max",), data["max"])
        if low > high:
            raise _err(raw, path + ("max",), f"{show(high)} is less than min {show(low)}")
        if scale in ("log", "reverse_log") and low <= 0:
            raise _err(raw, path + ("min",), f"{show(low)} is not allowed: a {scale} scale needs min > 0")
        return Param(name, kind, low, high, (), scale)
    items = _list(raw, path + ("values",), data.get("values", []), limit=1000)
    if not items:
        raise _err(raw, path + ("values",), f"a {kind} parameter needs a list of values")
    if kind == "CATEGORICAL":
        values = tuple(_scalar_text(raw, path + ("values", i), v, limit=256) for i, v in enumerate(items))
    else:
        values = tuple(_number(raw, path + ("values", i), v) for i, v in enumerate(items))
        if list(values) != sorted(set(values)):
            raise _err(raw, path + ("values",), "DISCRETE values must increase, each given once")
        if scale in ("log", "reverse_log") and values[0] <= 0:
            raise _err(raw, path + ("values",), f"a {scale} scale needs values > 0")
    return Param(name, kind, None, None, values, scale)


_FALLBACK_FIELDS = {k: _JOB_FIELDS[k] for k in ("accelerator_type", "accelerator_count", "machine_type", "region", "strategy")}


def _fallbacks(raw: _Raw, path: tuple, value: Any) -> tuple[Fallback, ...]:
    out = []
    for i, item in enumerate(_list(raw, path, value, limit=10)):
        data = _mapping(raw, path + (i,), item, list(_FALLBACK_FIELDS), ", ".join(_FALLBACK_FIELDS))
        if not data:
            raise _err(raw, path + (i,), f"an alternative sets at least one of {', '.join(_FALLBACK_FIELDS)}")
        out.append(Fallback(**{k: _FALLBACK_FIELDS[k](raw, path + (i, k), v) for k, v in data.items()}))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# The model a training pipeline uploads: `model` (buildkit_py/jobs/pipeline.py builds the TrainingPipeline)

# NAME==VERSION of the prebuilt prediction images (base_images/prediction.yaml), as executors are named
_SERVING_SPEC = re.compile(r"[a-z][a-z0-9-]{0,31}==[0-9]{1,3}(?:\.[0-9]{1,4}){0,2}", re.ASCII)
MAX_MODEL_DESCRIPTION = 2048


@dataclass(frozen=True)
class ModelConfig:
    serving_image: str | None = None  # an image reference, or NAME==VERSION; None: the prebuilt image for the framework
    serving_gpu: bool = False  # the prebuilt image's GPU build (CPU serving by default)
    name: str | None = None  # the model's display name; default the pipeline's
    description: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    artifact_uri: str | None = None  # default: the service's, base_output_directory/model


def _serving_image(raw: _Raw, path: tuple, value: Any) -> str:
    text = _string(raw, path, value)
    if "==" in text:
        if not _SERVING_SPEC.fullmatch(text):
            raise _err(raw, path, f"{show(text)} is not allowed: NAME==VERSION of a prebuilt prediction image (e.g. "
                                  "torch==2.4) or an image reference")
        return text
    return str(_ref(raw, path, text))


_MODEL_FIELDS: dict[str, Callable[[_Raw, tuple, Any], Any]] = {
    "serving_image": _serving_image,
    "serving_gpu": _bool,
    "name": _JOB_FIELDS["name"],
    "description": lambda r, p, v: _string(r, p, v, limit=MAX_MODEL_DESCRIPTION),
    "labels": _labels,
    "artifact_uri": lambda r, p, v: _pattern(r, p, v, _GCS_URI, "a gs://BUCKET/PATH URI (the directory of the model's "
                                                                 "artifacts)"),
}


def _model(raw: _Raw, path: tuple, value: Any) -> ModelConfig:
    data = _mapping(raw, path, value, list(_MODEL_FIELDS), ", ".join(_MODEL_FIELDS))
    return ModelConfig(**{k: _MODEL_FIELDS[k](raw, path + (k,), v) for k, v in data.items()})


def model_flag(key: str, value: Any, flag: str) -> Any:
    """A model setting given as a flag (--serving-image, --model-name), checked by the config key's validator."""
    raw = _Raw(data={}, source=flag, positions={("model", key): flag}, flags={"model"})
    return _MODEL_FIELDS[key](raw, ("model", key), value)


# Google Cloud Build (builder: cloudbuild): where and on what the build runs. Each key is also a flag,
# --cloudbuild-KEY, since job: has keys of the same names.
CLOUDBUILD_MACHINE_TYPES = ("UNSPECIFIED", "E2_MEDIUM", "E2_STANDARD_2", "E2_HIGHCPU_8", "E2_HIGHCPU_32", "N1_HIGHCPU_8",
                            "N1_HIGHCPU_32")  # BuildOptions.MachineType, google-cloud-build 3.43.0 (checked 2026-11-24)
MAX_CLOUDBUILD_TIMEOUT = 86400  # Build.timeout: at most 24 h (Cloud Build documentation, checked 2026-11-24)
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]", re.ASCII)
_WORKER_POOL = re.compile(r"projects/[a-z0-9-]{1,30}/locations/[a-z0-9-]{1,40}/workerPools/[a-z0-9-]{1,63}", re.ASCII)
_SECRET_VERSION = re.compile(r"projects/[a-z0-9-]{1,30}/secrets/[A-Za-z0-9_-]{1,255}/versions/(?:[0-9]{1,20}|latest)",
                             re.ASCII)
_SECRET_RULE = "a Secret Manager secret version: projects/PROJECT/secrets/NAME/versions/VERSION (a number or latest)"


@dataclass(frozen=True)
class CloudBuildConfig:
    project: str | None = None  # default: job.project, $GOOGLE_CLOUD_PROJECT, ADC's project
    region: str | None = None  # default: job.region, else us-central1
    bucket: str | None = None  # for contexts and logs; default: PROJECT_cloudbuild (as gcloud builds submit)
    machine_type: str | None = None
    disk_size_gb: int | None = None
    timeout: int | None = None  # seconds; default 1 h
    worker_pool: str | None = None
    service_account: str | None = None  # an email; the build runs as it
    # What the build's RUN steps get as secrets, from Secret Manager: never in the request, a step or a log.
    ca_cert_secret: str | None = None
    pip_conf_secret: str | None = None
    uv_conf_secret: str | None = None


_CLOUDBUILD_FIELDS: dict[str, Callable[[_Raw, tuple, Any], Any]] = {
    "project": _JOB_FIELDS["project"],
    "region": _JOB_FIELDS["region"],
    "bucket": lambda r, p, v: _pattern(r, p, v, _BUCKET_NAME, "a Cloud Storage bucket name: lowercase letters, digits, "
                                                           "'-', '_' and '.', 3 to 222 characters"),
    "machine_type": lambda r, p, v: _choice(r, p, v, CLOUDBUILD_MACHINE_TYPES),
    "disk_size_gb": lambda r, p, v: _int(r, p, v, 10, 4000),
    "timeout": lambda r, p, v: _cloudbuild_timeout(r, p, v),
    "worker_pool": lambda r, p, v: _pattern(r, p, v, _WORKER_POOL, "projects/PROJECT/locations/REGION/workerPools/NAME"),
    "service_account": _JOB_FIELDS["service_account"],
    "ca_cert_secret": lambda r, p, v: _pattern(r, p, v, _SECRET_VERSION, _SECRET_RULE),
    "pip_conf_secret": lambda r, p, v: _pattern(r, p, v, _SECRET_VERSION, _SECRET_RULE),
    "uv_conf_secret": lambda r, p, v: _pattern(r, p, v, _SECRET_VERSION, _SECRET_RULE),
}
CLOUDBUILD_KEYS = tuple(_CLOUDBUILD_FIELDS)


def _cloudbuild_timeout(raw: _Raw, path: tuple, value: Any) -> int:
    seconds = _duration(raw, path, value)
    if seconds > MAX_CLOUDBUILD_TIMEOUT:
        raise _err(raw, path, f"{show(value)} is not allowed: Cloud Build allows at most 24h")
    return seconds


def _cloudbuild(raw: _Raw, path: tuple, value: Any) -> CloudBuildConfig:
    data = _mapping(raw, path, value, list(_CLOUDBUILD_FIELDS), "Cloud Build settings")
    return CloudBuildConfig(**{k: _CLOUDBUILD_FIELDS[k](raw, path + (k,), v) for k, v in data.items()})


def _validators(root: Path) -> dict[str, Callable[[_Raw, tuple, Any], Any]]:
    patterns = "fnmatch patterns of context paths, e.g. keys/*.pem"
    validators: dict[str, Callable[[_Raw, tuple, Any], Any]] = {
        "framework": _framework,
        "cuda": lambda r, p, v: _pattern(r, p, v, _CUDA, "a CUDA version like 12.4 or 12.4.1", allow_numbers=True),
        "python": lambda r, p, v: _pattern(r, p, v, _PYTHON, "a Python version like 3.11", allow_numbers=True),
        "gpu": _bool,
        "accelerator": lambda r, p, v: _pattern(r, p, v, _ACCELERATOR, "a Vertex AI accelerator type in capitals, "
                                                "e.g. NVIDIA_TESLA_T4, NVIDIA_L4 or TPU_V5_LITEPOD"),
        "cuda_flavor": lambda r, p, v: _choice(r, p, v, CUDA_FLAVORS),
        "base_image": lambda r, p, v: str(_ref(r, p, v)),
        "system_packages": lambda r, p, v: _strings(
            r, p, v, lambda r2, p2, v2: _pattern(r2, p2, v2, _DEBIAN_PACKAGE, "a Debian package name, optionally =VERSION"),
            total_bytes=MAX_LIST_BYTES * 2),
        "pip": lambda r, p, v: _strings(r, p, v, _pip_requirement, total_bytes=MAX_LIST_BYTES),
        "requirements": lambda r, p, v: _relative_file(r, p, v, root, "requirements file"),
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
        "tags": lambda r, p, v: _strings(r, p, v, _tag),
        "platform": lambda r, p, v: _pattern(r, p, v, _PLATFORM, "OS/ARCH[/VARIANT], e.g. linux/amd64 or linux/arm64"),
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
    return Config(root=root, source=raw.source, **values)


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


# What the rest of buildkit-py imports from the config: the package's names, whichever of its modules holds each.
__all__ = ["CLOUDBUILD_KEYS", "JOB_KEYS", "KEYS", "METRIC_TAG", "POOL_ORDER", "Config", "Fallback", "FrameworkRequest",
           "Hyperparameters", "ImportScope", "JobConfig", "ModelConfig", "Param", "Pool", "Trainer", "TrainerPackage",
           "bad_character", "check_hyperparameters", "check_job_key", "default_ca_bundle", "distribution_name",
           "field_error", "field_name", "find_config", "job_flag", "load_config", "load_raw", "model_flag", "param_name",
           "pep440_version", "read_yaml", "validate_keys", "worker_pool_specs"]
