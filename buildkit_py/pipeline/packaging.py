"""A trainer -> a reproducible source distribution (sdist), for prebuilt containers and executor images.

The sdist is built with `build`'s PEP 517 API, always from a temporary copy of the trainer (setuptools
writes egg-info beside the sources; the user's tree is never written). A trainer with its own
pyproject.toml or setup.py is built as it is; one without gets a generated pyproject.toml (setuptools,
pinned). The backend runs in an isolated environment that holds only the build requirements, created
once per requirement set and kept in the cache: isolation without downloading setuptools on every build
(pipeline/backend.py runs the backend, and the metadata hook of a trainer's own build).

The backend's tarball is then re-packed byte for byte reproducibly: sorted entries, one mtime
(SOURCE_DATE_EPOCH or 1980-01-01), owner 0/0 without names, normalised modes, a gzip header without
name or time. The named module is checked in the re-packed tarball before anything is uploaded.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..catalog.matrix import load_matrix
from ..config import Config, Trainer, distribution_name
from ..errors import BuildError, ConfigError, OutputError, show
from ..fsutil import read_text, read_toml
from ..patterns import lazy_pattern
from ..sources.lockfiles import is_lock_file, locked
from ..sources.requirements import local_path, requirement_lines
from ..sources.walk import included_files
from .backend import backend_sdist
from .context import FIXED_MTIME, LARGE_FILE_BYTES, find_large_files, find_secrets
from .render import render_project_dockerignore

# The generated pyproject's backend, pinned: the sdist's bytes (PKG-INFO, SOURCES.txt) depend on its version.
SETUPTOOLS_REQUIREMENT = "setuptools==80.9.0"
DEFAULT_VERSION = "0.0.0"
# A single script goes where the Vertex AI SDK puts one (utils/source_utils.py, _TrainingScriptPythonPackager):
# <SCRIPT_PACKAGE>/task.py, run as `python -m aiplatform_custom_trainer_script.task`.
SCRIPT_PACKAGE = "aiplatform_custom_trainer_script"
SCRIPT_MODULE = f"{SCRIPT_PACKAGE}.task"

_IDENTIFIER = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_OPTION_HINTS = {
    "-e": "editable installs", "--editable": "editable installs", "-i": "an index URL", "--index-url": "an index URL",
    "--extra-index-url": "an index URL", "-f": "a find-links location", "--find-links": "a find-links location",
    "-r": "an included file", "--requirement": "an included file", "-c": "a constraints file",
    "--constraint": "a constraints file",
}


@dataclass(frozen=True)
class Sdist:
    """The trainer's reproducible sdist: its file, name, version, the module it runs, sha256, size and members."""

    path: Path
    name: str  # the distribution name as the metadata holds it
    version: str
    module: str  # what `python -m` runs once the sdist is installed
    sha256: str
    size: int
    files: tuple[str, ...]  # the tarball's members, without the top directory
    generated: bool  # built from a generated pyproject.toml (else the trainer's own)

    def to_dict(self) -> dict:
        return {"path": str(self.path), "name": self.name, "version": self.version, "module": self.module,
                "sha256": self.sha256, "size": self.size, "files": len(self.files), "generated": self.generated}


# ---------------------------------------------------------------------------------------------
# Dependencies: the config's pip entries and requirements file, as package metadata can carry them.


def dependency(text: str, where: str) -> str:
    """One requirement as install_requires takes it: a PEP 508 name or a URL without credentials; options and
    local paths refused (they work in an image's `pip install -r`, not in a package's metadata)."""
    if text.startswith("-"):
        option = text.split("=", 1)[0].split(None, 1)[0]
        what = _OPTION_HINTS.get(option, "a pip option")
        raise ConfigError(f"{show(text)} is not allowed in a package: {what} cannot be part of its metadata; "
                          "an index belongs in the image's pip configuration (pip_index_url, pip_conf)", where=where)
    try:
        req = Requirement(text)
    except InvalidRequirement:
        if local_path(text):
            raise ConfigError(f"{show(text)} is a local path; a package cannot depend on files of this machine: "
                              "publish it to an index, or depend on it by URL (NAME @ https://...)", where=where) from None
        raise ConfigError(f"{show(text)} is not a PEP 508 requirement", where=where) from None
    if req.url:
        scheme, _, rest = req.url.partition("://")
        if scheme.lower() == "file" or not rest:
            raise ConfigError(f"{show(text)} names a local path; a package cannot depend on files of this machine",
                              where=where)
        if "@" in rest.split("/", 1)[0]:
            # Never echo it: the URL carries a password or token.
            raise ConfigError(f"the requirement {req.name!r} has credentials in its URL; they would be published with "
                              "the package: use a pip.conf or keyring for the index instead", where=where)
    return text


def _pinned(text: str, pins: dict[str, str]) -> str:
    """The requirement pinned to the lock's version of it (extras and markers kept); a URL stays as it is."""
    req = Requirement(text)
    version = pins.get(canonicalize_name(req.name))
    if version is None or req.url:
        return text
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}=={version}" + (f"; {req.marker}" if req.marker else "")


def dependencies(config: Config, pins: dict[str, str] | None = None) -> tuple[str, ...]:
    """install_requires: the config's pip entries, requirements and hypertune; pinned to `pins` (buildkit.lock's
    versions) where given."""
    found = [dependency(p, f"{config.source}: pip") for p in config.pip]
    if config.requirements and is_lock_file(config.requirements):  # another tool's lock: its pins (markers taken for
        # the default Python: the executor image's is not known here)
        found += [p.requirement for p in locked(config.root, config.requirements, load_matrix().distros.default_python,
                                                config.platform or "linux/amd64")]
    elif config.requirements:
        path = config.root / config.requirements
        for text, where in requirement_lines(read_text(path, "requirements file", root=config.root), str(path)):
            found.append(dependency(text, where))
    if config.hypertune:
        found.append(load_matrix().tools.hypertune_requirement)
    return tuple(dict.fromkeys(_pinned(f, pins or {}) for f in found))  # order kept, duplicates dropped


# ---------------------------------------------------------------------------------------------
# What goes into the package


def own_build(root: Path) -> bool:
    """The trainer defines its own build: setup.py, or a pyproject.toml with [build-system] or [project]
    (one holding only [tool.buildkit-py] is buildkit-py's config, not a build definition)."""
    if (root / "setup.py").is_file():
        return True
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return False
    data = read_toml(pyproject, "pyproject.toml", root=root)
    return "build-system" in data or "project" in data


def _top_level(files: list[str], module_top: str) -> tuple[list[str], list[str]]:
    """(packages, modules) at the top of the trainer: directories with an __init__.py, the module's own top
    package (also without one), and importable .py files."""
    packages, modules = set(), set()
    for rel in files:
        parts = rel.split("/")
        if len(parts) == 1 and rel.endswith(".py") and _IDENTIFIER.fullmatch(rel[:-3]) and rel != "setup.py":
            modules.add(rel[:-3])
        elif len(parts) > 1 and _IDENTIFIER.fullmatch(parts[0]) and (parts[1:] == ["__init__.py"] or parts[0] == module_top):
            packages.add(parts[0])
    return sorted(packages), sorted(modules - packages)


def _pyproject(name: str, version: str, deps: tuple[str, ...], packages: list[str], modules: list[str]) -> str:
    # json.dumps writes TOML basic strings: the same escapes, and ASCII only.
    def array(values) -> str:
        return "[" + ", ".join(json.dumps(v) for v in values) + "]"

    includes = [p for package in packages for p in (package, f"{package}.*")]
    return (
        "# Generated by buildkit-py package: the trainer has no pyproject.toml or setup.py of its own.\n"
        f"[build-system]\nrequires = {array([SETUPTOOLS_REQUIREMENT])}\nbuild-backend = \"setuptools.build_meta\"\n\n"
        f"[project]\nname = {json.dumps(name)}\nversion = {json.dumps(version)}\ndependencies = {array(deps)}\n\n"
        f"[tool.setuptools]\npy-modules = {array(modules)}\ninclude-package-data = true\n\n"
        f"[tool.setuptools.packages.find]\nwhere = [\".\"]\ninclude = {array(includes)}\nnamespaces = true\n"
    )


def _refuse_unsafe(root: Path, files: list[str], config: Config) -> None:
    secrets = [(p, why) for p, why in find_secrets(root, files) if not any(fnmatchcase(p, a) for a in config.allow_secrets)]
    large = [(p, n) for p, n in find_large_files(root, files) if not any(fnmatchcase(p, a) for a in config.allow_large)]
    lines = [f"  {show(p)}  ({why})" for p, why in secrets] + [f"  {show(p)}  ({n >> 20} MiB)" for p, n in large]
    if lines:
        raise ConfigError(
            "these files would be packaged and uploaded with the trainer:\n" + "\n".join(lines) + "\n"
            f"Add them to .dockerignore (secrets; files over {LARGE_FILE_BYTES >> 20} MiB belong in a bucket), or allow "
            "them by pattern with allow_secrets / allow_large in the config.")


def _copy(root: Path, files: list[str], dest: Path, rename: dict[str, str]) -> None:
    for rel in files:
        target = dest / rename.get(rel, rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, target)  # contents only: no modes or times of the user's tree travel


# ---------------------------------------------------------------------------------------------
# Reproducible tarball


def source_date_epoch() -> int:
    """SOURCE_DATE_EPOCH, else 1980-01-01; never earlier, since pip builds a wheel (a zip) from the sdist and
    zip cannot hold times before 1980."""
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value is None or value == "":
        return FIXED_MTIME
    if not re.fullmatch(r"[0-9]{1,12}", value, re.ASCII):
        raise ConfigError(f"{show(value)} is not a number of seconds since 1970", field="$SOURCE_DATE_EPOCH")
    return max(int(value), FIXED_MTIME)


def repack(data: bytes, mtime: int) -> bytes:
    """The same members, written the same way whatever the machine, user, umask or time."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as src, \
            gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as dst:
        for member in sorted(src.getmembers(), key=lambda m: m.name):
            if not (member.isfile() or member.isdir() or member.issym()):
                continue
            member.mtime = mtime
            member.uid = member.gid = 0
            member.uname = member.gname = ""
            member.mode = 0o755 if member.isdir() or member.mode & 0o111 else 0o644
            member.pax_headers = {}
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    return out.getvalue()


def members(data: bytes) -> tuple[str, ...]:
    """The tarball's file names, without the top directory (name-version/)."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return tuple(m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile() and "/" in m.name)


def module_in(files: tuple[str, ...], module: str) -> bool:
    """A module `python -m` can run: a.b.c.py or a/b/c/__main__.py, at the top or under a source folder (src/)."""
    path = module.replace(".", "/")
    return any(f == target or f.endswith("/" + target) for f in files for target in (f"{path}.py", f"{path}/__main__.py"))


def _modules(files: tuple[str, ...]) -> list[str]:
    names = {f[:-3].replace("/", ".").removesuffix(".__init__") for f in files
             if f.endswith(".py") and "egg-info" not in f and f != "setup.py"}
    return sorted(names)


# ---------------------------------------------------------------------------------------------


def refuse_function(trainer: Trainer | None) -> None:
    """A prebuilt container runs `python -m MODULE` (Vertex AI's python_package_spec takes a module): a trainer that is a
    function of its module cannot run there."""
    if trainer is not None and trainer.command:
        raise ConfigError("trainer.command: a prebuilt container runs `python -m MODULE`, not the repository's own "
                          f"command ({shlex.join(trainer.command)[:120]}); build an image (not --mode package), or set "
                          "trainer.module alone", field="trainer.command")
    if trainer is not None and trainer.function:
        raise ConfigError(f"trainer.function: a prebuilt container runs `python -m {trainer.module}`, so "
                          f"{trainer.function}() would not be called; give the module a __main__ block that calls it, "
                          "or build an image (not --mode package)", field="trainer")


def build_sdist(config: Config, out_dir: Path, *, name: str | None = None, version: str | None = None,
                pins: dict[str, str] | None = None) -> Sdist:
    """Build the trainer's sdist into out_dir (written atomically; an identical file is left as it is).
    name and version (flags, already checked) win over the config's package keys; pins: buildkit.lock's versions."""
    root = config.root
    trainer = config.trainer
    if trainer is None:
        raise ConfigError("no module to run: pass --module trainer.task or --script train.py, or set trainer in the "
                          "config", field="trainer")
    refuse_function(trainer)
    module, script = trainer.module, trainer.script
    mtime = source_date_epoch()
    files = included_files(root, render_project_dockerignore(root))
    generated = not own_build(root)
    meta = config.package
    if not generated and (name or version or meta):
        raise ConfigError("the trainer's own pyproject.toml or setup.py sets its name and version; package.name, "
                          "package.version, --name and --version apply to generated packages only", field="package")
    rename: dict[str, str] = {}
    if generated:
        if not (name or (meta and meta.name)):
            try:
                distribution_name(root.name, "package.name")
            except ConfigError as exc:
                raise ConfigError(f"the directory name {exc.detail}; set package.name in the config or pass --name",
                                  field="package.name") from None
        dist_name = canonicalize_name(name or (meta.name if meta and meta.name else root.name))
        dist_version = str(Version(version or (meta.version if meta and meta.version else DEFAULT_VERSION)))
        if script:
            rename = {script: f"{SCRIPT_PACKAGE}/task.py"}
            module = SCRIPT_MODULE
        packages, modules = _top_level([rename.get(f, f) for f in files], module.split(".")[0])
        if not packages and not modules:
            raise ConfigError(f"nothing to package: {root} has no Python package (a directory with __init__.py) or "
                              "module (.py file)", field="trainer")
        keep = set(packages) | {f"{m}.py" for m in modules}
        files = [f for f in files if rename.get(f, f).split("/")[0] in keep]
        deps = dependencies(config, pins)
    _refuse_unsafe(root, files, config)

    with tempfile.TemporaryDirectory(prefix="buildkit-py-package-") as tmp:
        source = Path(tmp) / "src"
        source.mkdir()
        _copy(root, files, source, rename)
        if generated:
            if script:
                (source / SCRIPT_PACKAGE / "__init__.py").touch()
            (source / "pyproject.toml").write_text(_pyproject(dist_name, dist_version, deps, packages, modules))
            # Data files beside the code (configs, vocabularies) ship with it.
            (source / "MANIFEST.in").write_text("".join(f"graft {p}\n" for p in packages))
        built = backend_sdist(source, Path(tmp) / "out")
        data = repack(built.read_bytes(), mtime)
    listed = members(data)
    if not module_in(listed, module):
        found = ", ".join(_modules(listed)[:20]) or "no Python modules"
        raise ConfigError(f"module {module!r} is not in {built.name} (it holds {found}); `python -m {module}` would fail",
                          field="trainer")
    info = pkg_info(data)
    target = out_dir / built.name
    _write(target, data)
    return Sdist(target, info.get("Name", ""), info.get("Version", ""), module, hashlib.sha256(data).hexdigest(),
                 len(data), listed, generated)


def pkg_info(data: bytes) -> dict[str, str]:
    """The sdist's PKG-INFO headers (name-version/PKG-INFO)."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        member = next((m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")), None)
        if member is None:
            raise BuildError("the sdist has no PKG-INFO: the build backend did not write a valid sdist")
        text = tar.extractfile(member).read().decode("utf-8", "replace")
    head = text.split("\n\n", 1)[0]  # headers end at the first blank line; the description follows
    return dict(line.split(": ", 1) for line in head.split("\n") if ": " in line and not line.startswith((" ", "\t")))


def _write(target: Path, data: bytes) -> None:
    try:
        if target.is_file() and target.read_bytes() == data:
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from None
