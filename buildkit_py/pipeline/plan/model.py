"""The Plan: the resolved build as a frozen value, everything a Dockerfile, a label or a job spec needs to know."""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...catalog.machines import (
    ARM64,
    arch,
)
from ...catalog.matrix import (
    SHIPPED,
)
from ...config import ImportScope, TrainerPackage
from ...launcher.constants import (
    COMPAT_DRIVER_ENV,
    CUDA_ARCHS_ENV,
    FORWARD_COMPAT_ENV,
    MIN_DRIVER_ENV,
    TPU_RUNTIME_ENV,
    TPU_TYPE_ENV,
)
from ...progress import HtmlRepr
from ...version import __version__
from ..names import (
    BASE_DIGEST_LABEL,
    BASE_NAME_LABEL,
    CUDA_ARCHS_LABEL,
    CUDA_LABEL,
    CUDNN_LABEL,
    FRAMEWORK_LABEL,
    LOCK_LABEL,
    PLAN_LABEL,
    PYTHON_LABEL,
    TPU_LABEL,
    VERSION_LABEL,
)

if TYPE_CHECKING:
    from ...sources.lockfiles import Exported


VENV = "/opt/venv"


WORKDIR = "/app"


class BaseKind(enum.StrEnum):
    """What the image starts from, which names its template (templates/KIND.Dockerfile.j2)."""

    CUDA = "cuda"  # an nvidia/cuda image
    CPU = "cpu"  # the Python base
    CUSTOM = "custom"  # the config's base_image
    WHEELS = "wheels"  # the Python base on a GPU, CUDA from the framework's wheels, the driver from the host
    TPU = "tpu"  # the Python base with the framework's TPU build


@dataclass(frozen=True)
class PythonSetup:
    """The image's Python: its version, how it is installed (present, apt, uv or auto), and what that takes."""

    version: str  # "3.11"
    # present: the base ships it; apt: the distro's pythonX.Y packages; uv: a standalone build;
    # auto: decided while building (custom bases): present, else apt, else uv.
    install: str
    apt_packages: tuple[str, ...] = ()
    uv_requirement: str | None = None  # "uv==0.13.0", installed with pip from the package index
    mirror: str | None = None  # python_mirror: uv's UV_PYTHON_INSTALL_MIRROR for the standalone build


@dataclass(frozen=True)
class FrameworkInstall:
    """The framework's install: its release, what pip installs and from which index, whether it brings CUDA, and the
    range the release may be chosen in."""

    name: str  # canonical name, "torch"
    version: str  # "2.5.1" or "nightly"
    requirement: str  # what pip installs: "torch==2.5.1", "tensorflow[and-cuda]==2.17.1"
    index_url: str | None  # replaces PyPI for this one install (PyTorch's CUDA indexes)
    pre: bool
    bundles_cuda: bool  # this install brings CUDA and cuDNN as nvidia-* wheels
    cudnn: str | None  # the cuDNN the framework build expects
    source: str = SHIPPED  # where the release is known from: shipped data, or the overlay file
    # Distributions this build stands for (nvidia-tensorflow for tensorflow-gpu): every install and resolution of
    # the image overrides their requirements away.
    replaces: tuple[str, ...] = ()
    # Nobody pinned the release: the range the resolution may choose an older one in, newest first (the config's
    # `framework` range, "" for any; None: pinned), down to `oldest`, the oldest release the data knows.
    chosen_within: str | None = None
    oldest: str | None = None

    def relaxed(self) -> str | None:
        """The requirement the resolution takes where the release is its to choose: this release or an older one."""
        exact = f"=={self.version}"
        if self.chosen_within is None or not self.requirement.endswith(exact):
            return None
        bounds = [f"<={self.version}", *([f">={self.oldest}"] if self.oldest else []),
                  *(b for b in self.chosen_within.split(",") if b)]
        return self.requirement[:-len(exact)] + ",".join(bounds)

    @property
    def overrides(self) -> tuple[str, ...]:
        """uv override lines that drop every requirement of the replaced distributions: a marker never true."""
        return tuple(f'{name} ; sys_platform == "never"' for name in self.replaces)


@dataclass(frozen=True)
class PlanLock:
    """What buildkit.lock pins for this image (pipeline/lock.py): set on a plan by the build, never by make_plan."""

    base_digest: str  # the base's manifest for the build platform: FROM base@sha256:...
    digest: str  # the lock section's digest: a label, and through the Dockerfile part of the content tag
    requirements: str  # the hash-checked requirements file's path in the build context
    source: Path  # that file on this machine


@dataclass(frozen=True)
class Plan(HtmlRepr):
    """The resolved build: base image, CUDA, cuDNN, Python, the framework wheel and its index, hypertune."""

    base_image: str
    base_kind: BaseKind
    template: str  # the variant template in templates/
    user_template: str | None
    gpu: bool
    cuda: str | None  # full CUDA version of the base, "12.4.1"
    cudnn: str | None  # the cuDNN the image uses: the base's, or the framework's wheel's
    min_driver: str | None  # the NVIDIA driver the base's CUDA needs, for the launcher's message
    compat_driver: str | None  # the oldest driver for any release of the base's CUDA major (cuda.yaml)
    forward_compat_branches: tuple[int, ...]  # driver branches the base's cuda-compat supports
    ubuntu: str | None
    python: PythonSetup
    framework: FrameworkInstall | None
    hypertune: str | None  # the requirement, or None when disabled
    system_packages: tuple[str, ...]
    pip: tuple[str, ...]
    requirements: str | None
    env: tuple[tuple[str, str], ...]
    entrypoint: tuple[str, ...]  # the launcher, then the trainer command
    cmd: tuple[str, ...]  # the trainer's default args
    # The nvidia/cuda flavour of the base: base, runtime, cudnn-runtime, devel or cudnn-devel.
    cuda_flavor: str | None = None
    accelerator: str | None = None  # the Vertex AI accelerator the image is resolved for
    # The platform the image is built for: the one given, else the one its accelerator's machines run when that is
    # not the default (linux/arm64 for GB200: A4X runs Arm CPUs); None: linux/amd64 for GPU images, else the engine's.
    platform: str | None = None
    # The base's glibc: the newest manylinux_X_Y its wheels may be built for (base_images/distros.yaml), which the
    # resolution and the lock target.
    glibc: str = "2.28"
    # A GPU image on a base that is not an nvidia/cuda one (base_kind "wheels"): the ENV that has NVIDIA's container
    # runtime mount the host's driver as those images do.
    driver_env: tuple[tuple[str, str], ...] = ()
    # The GPU architectures of the framework build (sm_XY cubins, compute_XY PTX); () not recorded.
    cuda_archs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what the user should know about this resolution
    executor: bool = False  # an executor image: no trainer code, the launcher installs packages at start
    keep_pip: bool = False  # pip stays in the venv (executors keep it anyway: their launcher pip-installs)
    venv: str = VENV
    workdir: str = WORKDIR
    tpu: str | None = None  # the TPU accelerator type the image is built for (base_kind "tpu")
    tpu_runtime: str | None = None  # absolute path of the libtpu.so the framework loads
    tpu_companion: str | None = None  # installed with the framework (also in pip): "torch_xla[tpu]==2.8.1"
    tpu_link: str | None = None  # the wheel's libtpu.so, linked to tpu_runtime (TensorFlow's /lib/libtpu.so)
    lock: PlanLock | None = None
    # The requirements file asks for hash checking: its install reinstalls what it names, since uv checks the hashes
    # only of what it installs, and the framework step installed some of them (with their dependencies) unchecked.
    requirements_hashed: bool = False
    # The requirements file is another tool's lock (uv.lock, pylock.toml, poetry.lock, Pipfile.lock): its packages
    # for this image, exported as hash-pinned lines (sources/lockfiles/), are what the requirements layer installs.
    requirements_export: Exported | None = None
    # The requirements file's index lines (--extra-index-url URL, -f URL, --no-index): a locked install's
    # requirements file starts with them, for it replaces the file that had them.
    requirements_index_options: tuple[str, ...] = ()
    # The files the requirements file includes (-r, -c; relative to the trainer directory): copied beside it, each
    # at its own path, so that the install finds them where the lines say.
    requirements_included: tuple[str, ...] = ()
    # The trainer's own distribution, metadata only (config.TrainerPackage): installed before the code layer.
    trainer_package: TrainerPackage | None = None
    # Where the build's import check starts (the trainer's module or script); None: no check (no trainer code, or
    # import_check: false).
    import_check: ImportScope | None = None
    # The trainer's compiled extensions are built from its directory in a stage of their own and copied beside the code.
    build_extensions: bool = False
    package_dir: str | None = None  # the folder of the trainer's packages (src layout), on PYTHONPATH first
    said: tuple[str, ...] = ()  # what every build of this plan says (also in notes): system packages added, no check
    # The install step reads logins from the build's netrc secret (build.NETRC_SECRET), so they reach no Dockerfile
    # line, label or history: a pip entry's URL carried credentials (`pip` holds it without them), or an index gets
    # a Google access token (google_indexes).
    pip_credentials: bool = False
    # Hosts of the indexes that get a Google access token (Artifact Registry Python repositories, pip_google_auth):
    # minted where the build or lock runs and passed in the same netrc secret, never in the plan.
    google_indexes: tuple[str, ...] = ()

    @property
    def from_image(self) -> str:
        """What the Dockerfile's FROM names: the tag, pinned to the lock's digest when there is one."""
        # A base given by digest (an index's, maybe) gives way to the lock's: the build platform's manifest.
        return f"{self.base_image.split('@')[0]}@{self.lock.base_digest}" if self.lock else self.base_image

    @property
    def arm64(self) -> bool:
        """Built for linux/arm64 (an amd64 plan's label and Dockerfile stay as they were before arm64 plans)."""
        return arch(self.platform) == ARM64

    @property
    def pythonpath(self) -> str:
        """The code's place on the import path: the packages' folder first (a src layout), then the work directory."""
        return f"{self.workdir}/{self.package_dir}:{self.workdir}" if self.package_dir else self.workdir

    @property
    def launcher_env(self) -> tuple[tuple[str, str], ...]:
        """The image's ENV that the launcher checks the host's driver and GPUs against."""
        values = {MIN_DRIVER_ENV: self.min_driver, COMPAT_DRIVER_ENV: self.compat_driver,
                  FORWARD_COMPAT_ENV: ",".join(map(str, self.forward_compat_branches)),
                  CUDA_ARCHS_ENV: ",".join(self.cuda_archs), TPU_TYPE_ENV: self.tpu, TPU_RUNTIME_ENV: self.tpu_runtime}
        return tuple((k, v) for k, v in values.items() if v)

    @property
    def labels(self) -> tuple[tuple[str, str], ...]:
        fw = self.framework
        values = {
            BASE_NAME_LABEL: self.base_image,
            VERSION_LABEL: __version__,
            PYTHON_LABEL: self.python.version,
            FRAMEWORK_LABEL: f"{fw.name}=={fw.version}" if fw else "none",
            CUDA_LABEL: self.cuda or "none",
            CUDNN_LABEL: self.cudnn or "none",
        }
        if self.gpu:  # the architectures the launcher checks the GPUs against (also BUILDKIT_PY_CUDA_ARCHS)
            values[CUDA_ARCHS_LABEL] = ",".join(self.cuda_archs) or "not recorded"
        if self.tpu:  # the TPU type a job's spec is checked against
            values[TPU_LABEL] = self.tpu
        if self.lock:
            values[BASE_DIGEST_LABEL] = self.lock.base_digest
            values[LOCK_LABEL] = self.lock.digest
        values[PLAN_LABEL] = json.dumps(self.summary(), sort_keys=True, separators=(",", ":"))
        return tuple(values.items())

    def summary(self) -> dict:
        """The resolved versions, as the image's plan label records them."""
        fw = self.framework
        return {
            "base_image": self.base_image,
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "python": self.python.version,
            "framework": fw.requirement if fw else None,
            "index_url": fw.index_url if fw else None,
            "gpu": self.gpu,
            "cuda_flavor": self.cuda_flavor,
            "cuda_archs": list(self.cuda_archs),
            "accelerator": self.accelerator,
        } | ({"platform": self.platform} if self.arm64 else {}) | (
            {"tpu": self.tpu, "tpu_runtime": self.tpu_runtime, "tpu_companion": self.tpu_companion} if self.tpu else {})

    def to_dict(self) -> dict:
        out = asdict(self)
        out["labels"] = dict(self.labels)
        out["env"] = dict(self.env)
        if self.lock:
            out["lock"]["source"] = str(self.lock.source)
        if self.requirements_export:
            out["requirements_export"]["source"] = str(self.requirements_export.source)
        return out


def plan_from_dict(data: dict) -> Plan:
    """The Plan whose to_dict() is DATA, as JSON holds it (lists for tuples, strings for paths): a kept recipe holds
    the plan once, in that form, and gives back the value only when asked."""
    from ...sources.lockfiles import Exported  # the one name the annotations leave to type checkers

    return _typed(Plan, data, {"Exported": Exported})


def _typed(kind, raw, names: dict):
    """RAW as the annotation KIND holds it: dataclasses field by field, tuples from lists (or from a dict's items:
    to_dict writes env as a mapping), paths from strings."""
    if raw is None:
        return None
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return _typed(next(a for a in args if a is not type(None)), raw, names)
    if origin is tuple:
        items = list(raw.items()) if isinstance(raw, dict) else raw
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_typed(args[0], item, names) for item in items)
        return tuple(_typed(a, item, names) for a, item in zip(args, items, strict=True))
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind, localns=names)
        return kind(**{f.name: _typed(hints[f.name], raw[f.name], names) for f in dataclasses.fields(kind)
                       if f.init and f.name in raw})
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind(raw)
    return Path(raw) if kind is Path else raw


@dataclass(frozen=True)
class PlatformPlans(HtmlRepr):
    """A multi-platform image's plans, one per platform in the config's order (`resolve` of such a config)."""

    plans: tuple[Plan, ...]

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(p.platform or "" for p in self.plans)

    def to_dict(self) -> dict:
        return {"platforms": {p.platform: p.to_dict() for p in self.plans}}
