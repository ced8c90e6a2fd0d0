"""The one Plan constructor: what the trainer's files and the config's own keys give every plan (entry point,
requirements, indexes, the system libraries its wheels load)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...catalog.machines import AMD64
from ...catalog.matrix import (
    Framework,
    Matrix,
    minor,
)
from ...catalog.reading import version_key
from ...catalog.resources import LAUNCHER_MODULE
from ...config import Config, ImportScope
from ...errors import ConfigError
from ...fsutil import read_text
from ...patterns import lazy_pattern
from ...sources.pip_config import (
    first_credentials_line,
    google_index_hosts,
    index_options,
    index_urls,
    option_urls,
    url_credentials,
    uv_config,
    without_credentials,
)
from .choice import Release
from .cuda import wheel_cudnn
from .model import WORKDIR, FrameworkInstall, Plan

if TYPE_CHECKING:
    from ...sources.lockfiles import Exported


def framework_install(config: Config, release: Release, gpu: bool, cuda: str | None, bundled: bool) -> FrameworkInstall:
    """What installs the release: its requirement (the CUDA variant and extra), its index (framework_index_url, a
    mirror, stands only for an index the build has), and the range the resolution may move it in."""
    fw, series, version = release.fw, release.series, release.version
    mirror = config.framework_index_url
    within = config.framework.within if config.framework.chosen else None
    spec = series.install
    fields = {}
    if cuda:
        fields = {"cuda_nodot": minor(cuda).replace(".", ""), "cuda_major": cuda.split(".")[0]}
    extra = spec.gpu_extra.format(**fields) if gpu and bundled and spec.gpu_extra else None
    requirement = spec.package_for(cuda if gpu else None) + (f"[{extra}]" if extra else "")
    if version != "nightly":
        requirement += f"=={version}"
    url = spec.gpu_index_url if gpu else spec.cpu_index_url
    return FrameworkInstall(
        name=fw.name,
        version=version,
        requirement=requirement,
        index_url=(mirror or url.format(**fields)) if url else None,  # a mirror stands only for an index the build has
        pre=spec.pre,
        bundles_cuda=gpu and bundled,
        cudnn=wheel_cudnn(series, cuda),
        source=series.origin,
        replaces=series.replaces,
        chosen_within=within if series.gpu_build is None and not series.replaces else None,
        oldest=min(fw.releases(), key=version_key) if fw.releases() else None,
    )


def _unchecked(config: Config) -> tuple[str, ...]:
    if config.import_check or config.executor or config.trainer is None:
        return ()
    return ("import_check: false: the build does not import what the trainer imports, so an import the image cannot "
            "do fails where the job runs",)


def _import_scope(config: Config) -> ImportScope | None:
    trainer = config.trainer
    if not config.import_check or config.executor or trainer is None or not (trainer.module or trainer.script):
        return None
    return ImportScope(trainer.module, trainer.script, trainer.package_dir)


def _entry(config: Config) -> tuple[tuple[str, ...], tuple[str, ...]]:
    trainer = config.trainer
    launcher = ("python", "-m", LAUNCHER_MODULE, "--")
    if config.executor:  # the container's arguments are the module's (BUILDKIT_PY_PYTHON_MODULE)
        return launcher, ()
    if trainer is None:
        return (), ()
    if trainer.command:  # the repository's own command, kept as it wrote it (inference says what changed)
        return launcher + trainer.command, trainer.args
    if trainer.function:  # as the console script pip writes for module:function calls it
        return launcher + ("python", "-c", f"import sys; from {trainer.module} import {trainer.function}; "
                                           f"sys.exit({trainer.function}())"), trainer.args
    if trainer.module:
        return launcher + ("python", "-m", trainer.module), trainer.args
    return launcher + ("python", f"{WORKDIR}/{trainer.script}"), trainer.args


@dataclass(frozen=True)
class Chosen:
    """What the TPU or the standard path chose that the common part of every plan reads."""

    python: str  # "3.11"
    fw: Framework | None
    version: str | None
    ubuntu: str | None
    base: str
    platform: str | None
    notes: tuple[str, ...] = ()
    extra_pip: tuple[str, ...] = ()  # what the release needs beside it (a companion, PyTorch/XLA)
    said: tuple[str, ...] = ()  # said first by every build of the plan (what is installed instead of what was asked)


def assembled(config: Config, matrix: Matrix, chosen: Chosen, **specific: object) -> Plan:
    """The one Plan constructor: what the trainer's files and the config's own keys give every plan (entry point,
    requirements, indexes, the system libraries its wheels load, what every build says), with what the TPU or the
    standard plan chose (CHOSEN, and the Plan's fields it alone sets: `specific`)."""
    python_version, fw, version, ubuntu, base = chosen.python, chosen.fw, chosen.version, chosen.ubuntu, chosen.base
    platform, notes, extra_pip, said_first = chosen.platform, chosen.notes, chosen.extra_pip, chosen.said
    entrypoint, cmd = _entry(config)
    requirements = _requirements_file(config, python_version, platform)
    google_indexes = _google_indexes(config, requirements)
    libraries = _wheel_libraries(config, requirements, fw, version, ubuntu, base)
    said = said_first + libraries.notes + _unchecked(config)  # what every build of the plan says
    pip = _pip(config)
    return Plan(
        base_image=base,
        ubuntu=ubuntu,
        platform=platform,
        user_template=config.template,
        hypertune=_hypertune(config, matrix, requirements),
        system_packages=config.system_packages + libraries.packages,
        pip=extra_pip + pip,
        pip_credentials=pip != config.pip or bool(google_indexes),
        google_indexes=google_indexes,
        requirements=config.requirements,
        requirements_hashed=requirements.hashed,
        requirements_export=requirements.export,
        requirements_index_options=requirements.index_options,
        requirements_included=requirements.included,
        trainer_package=config.trainer_package,
        import_check=_import_scope(config),
        build_extensions=config.build_extensions and not config.executor,
        package_dir=config.trainer.package_dir if config.trainer else None,
        env=config.env,
        entrypoint=entrypoint,
        cmd=cmd,
        notes=tuple(notes) + said,
        said=said,
        executor=config.executor,
        keep_pip=config.keep_pip,
        glibc=(matrix.distros.custom_glibc if config.base_image else matrix.distros.ubuntu_glibc[ubuntu] if ubuntu
               else matrix.distros.cpu_glibc),
        **specific,
    )


def _hypertune(config: Config, matrix: Matrix, requirements: _Requirements) -> str | None:
    """cloudml-hypertune for the image, unless the trainer's requirements or pip entries name it: their release is the
    one the trainer was written for, and two pins of it would not resolve."""
    if not config.hypertune:
        return None
    from packaging.utils import canonicalize_name

    from ...sources.requirements import requirement_name

    wanted = requirement_name(matrix.tools.hypertune_requirement)
    named = {canonicalize_name(n) for n in requirements.names} | {
        canonicalize_name(n) for p in config.pip if (n := requirement_name(p))}
    return None if wanted and canonicalize_name(wanted) in named else matrix.tools.hypertune_requirement


def _google_indexes(config: Config, requirements: _Requirements) -> tuple[str, ...]:
    """The hosts of the indexes the build reads that get a Google access token: Artifact Registry Python repositories
    named by pip_index_url, the pip_conf, the requirements file's index lines or a pip entry's URL; pip_google_auth's."""
    urls = list(option_urls(requirements.index_options)) + list(config.pip)
    if config.pip_index_url:
        urls.append(config.pip_index_url)
    elif config.pip_conf:
        urls += index_urls(uv_config(read_text(config.pip_conf, "pip.conf"), str(config.pip_conf)))
    return google_index_hosts(urls, config.pip_google_auth)


def _pip(config: Config) -> tuple[str, ...]:
    """The config's pip entries as a Dockerfile line may hold them: each URL's credentials cut out (checked here, so
    that a pair the build's netrc cannot hold exits 2 before anything is rendered)."""
    url_credentials(config.pip, "pip")
    return tuple(without_credentials(p) for p in config.pip)


@dataclass(frozen=True)
class _Requirements:
    """What the plan reads of the requirements file, once: whether it asks for hash checking, and the distributions
    it names (for the system libraries their wheels load)."""

    hashed: bool = False
    names: tuple[str, ...] = ()
    export: Exported | None = None
    index_options: tuple[str, ...] = ()  # its index lines (--extra-index-url URL, ...)
    included: tuple[str, ...] = ()  # the files its -r/-c lines include, in the trainer directory


def _requirements_file(config: Config, python: str, platform: str | None) -> _Requirements:
    if not config.requirements:
        return _Requirements()
    from ...sources.lockfiles import export, is_lock_file  # here: it reads requirements and markers (start-up time)
    from ...sources.requirements import hash_checked, included_lines, requirement_lines, requirement_name, requirement_names

    if is_lock_file(config.requirements):
        exported = export(config.root, config.requirements, python, platform or AMD64, config.requirements_extras,
                          config.requirements_groups)
        return _Requirements(True, tuple(n for r, _ in exported.pins if (n := requirement_name(r))), exported)

    text = read_text(config.root / config.requirements, "requirements file", root=config.root)
    included = included_lines(config.root, config.requirements)[1]
    for name in (config.requirements, *included):  # each read once a command: read_text gives back the kept bytes
        where = first_credentials_line(read_text(config.root / name, "requirements file", root=config.root), name)
        if where:  # the files are copied into the image as they are: a password is in a layer anyone who pulls reads
            raise ConfigError("a URL with credentials (not shown); the file is copied into the image, where "
                              "anyone who pulls it reads them: give the index as pip_index_url or pip_conf (the build "
                              "passes them as secrets), or the requirement in pip:", where=where)
    return _Requirements(hash_checked(text, config.requirements) is not None,
                         requirement_names(text, config.requirements),
                         index_options=index_options([line for line, _ in requirement_lines(text, config.requirements)]),
                         included=included)


@dataclass(frozen=True)
class _Libraries:
    """The system packages the image's wheels load and the base may lack, with a note for each."""

    packages: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


_UBUNTU_TAG = lazy_pattern(r"ubuntu([0-9]{2}\.[0-9]{2})", re.ASCII)


def _wheel_libraries(config: Config, requirements: _Requirements, fw: Framework | None, version: str | None,
                     ubuntu: str | None, base: str) -> _Libraries:
    """The system packages that the wheels of the image's distributions load at import and the base lacks
    (base_images/system_libraries.yaml), for the system-packages layer, each with a note."""
    from ...sources.requirements import requirement_name

    # A URL line names no distribution before it is downloaded: it brings no system package. Only the framework's
    # release is known here.
    names = [*((n, None) for n in requirements.names), *((requirement_name(t), None) for t in config.pip),
             *([(requirement_name(fw.package or fw.name), version)] if fw else [])]
    wanted = list(dict.fromkeys((n, v) for n, v in names if n))
    if not wanted:
        return _Libraries()
    from ...catalog.syslibs import system_libraries

    if ubuntu is None and config.base_image:  # a custom base names its release in its tag, if anywhere
        found = _UBUNTU_TAG.search(base)
        ubuntu = found.group(1) if found else None
    given = {p.split("=")[0] for p in config.system_packages}
    needed = {p: who for p, who in system_libraries().for_distributions(wanted, ubuntu).items() if p not in given}
    notes = tuple(f"{', '.join(who)} load{'s' if len(who) == 1 else ''} a system library the base may lack: {p} is "
                  "installed (base_images/system_libraries.yaml)" for p, who in needed.items())
    return _Libraries(tuple(needed), notes)
