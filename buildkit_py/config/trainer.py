"""What runs and what it is as a package: `trainer:` (module or script, function, args, package_dir), `package:` (the
sdist package mode generates) and `trainer_package:` (the trainer's own distribution)."""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from ..errors import ConfigError, show
from ..fsutil import consult, leads_outside
from ..patterns import lazy_pattern
from .reading import _dotted, _err
from .values import (
    MAX_ARGS_JSON_BYTES,
    _list,
    _pattern,
    _processes,
    _relative_file,
    _scalar_text,
    _string,
    _unknown_key,
)

_PACKAGE_PART = r"(?!\.\.?(?:/|$))[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}"  # a folder name, not . or ..
_PACKAGE_DIR = lazy_pattern(f"{_PACKAGE_PART}(?:/{_PACKAGE_PART}){{0,7}}", re.ASCII)
# What `python -m` runs: a dotted name whose parts are folder and file names (the import system allows a hyphen there)
_RUN_MODULE = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*", re.ASCII)
_FUNCTION = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_DIST_NAME = lazy_pattern(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?", re.ASCII)  # PEP 508 names
_VERSION = lazy_pattern(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}", re.ASCII)  # then PEP 440, which alone allows spaces


@dataclass(frozen=True)
class Trainer:
    """`trainer:`: what the image runs: a module or script (or the repository's own command), with its arguments."""

    module: str | None = None
    script: str | None = None  # POSIX path relative to the context root
    args: tuple[str, ...] = ()
    # A function of the module to call, as a console script calls it (`[project.scripts] train =
    # "trainer.task:main"`): sys.exit(function()), for a module with no __main__ block of its own.
    function: str | None = None
    # The folder holding the trainer's packages (`src` in a src layout), relative to the context root: on PYTHONPATH
    # before the root itself.
    package_dir: str | None = None
    # The repository's own command, where it is more than one Python entry (a chain of stages, a launcher, a shell
    # script): run behind the launcher, in the work directory; module or script then names the Python entry inside it,
    # which the import check and the fast path use.
    command: tuple[str, ...] | None = None
    # Trainer processes per machine: a number, or "auto" (one per GPU); None: one, or what the command's own
    # distributed launcher starts. A job setting (the image's launcher reads it from the job), so no part of the image.
    processes_per_node: int | str | None = None


@dataclass(frozen=True)
class ImportScope:
    """Where the build's import check starts (buildkit_py/sources/imports.py): the trainer's module or script, and the
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


def _trainer(raw, path, value, root: Path) -> Trainer:
    if not isinstance(value, dict):
        raise _err(raw, path, f"{show(value)} must be a mapping with module or script, and args")
    allowed = ["module", "script", "function", "args", "package_dir", "command", "processes_per_node"]
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
    command = _command(raw, path + ("command",), value["command"]) if value.get("command") is not None else None
    if "module" in value and "script" in value or command is None and ("module" in value) == ("script" in value):
        raise _err(raw, path, "give exactly one of module (python -m MODULE) or script (a .py file), or a command "
                              "(the repository's own, a list of words) with at most one of them")
    module = script = None
    if "module" in value:
        module = _pattern(raw, path + ("module",), value["module"], _RUN_MODULE,
                          "a dotted Python module name as `python -m` takes it, e.g. trainer.task")
        if len(module) > 255:
            raise _err(raw, path + ("module",), f"{show(module)} is too long: at most 255 characters")
    elif "script" in value:
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
        if any(keyword.iskeyword(part) or "-" in part for part in module.split(".")):
            raise _err(raw, path + ("module",), f"{show(module)} cannot be imported by name: a part is a "
                                            "Python keyword or has a hyphen")
    args = []
    given = value.get("args")
    for i, arg in enumerate(_list(raw, path + ("args",), [] if given is None else given)):
        args.append(_scalar_text(raw, path + ("args", i), arg))
    if len(json.dumps(args)) > MAX_ARGS_JSON_BYTES:
        raise _err(raw, path + ("args",), f"the arguments are too long for the image's CMD: at most {MAX_ARGS_JSON_BYTES} "
                                          "bytes as JSON; pass long values at run time")
    if len(json.dumps([*(command or ()), *args])) > MAX_ARGS_JSON_BYTES:
        raise _err(raw, path + ("command",), f"the command and its arguments are too long for the image's ENTRYPOINT: at "
                                             f"most {MAX_ARGS_JSON_BYTES} bytes as JSON")
    processes = value.get("processes_per_node")
    return Trainer(module=module, script=script, args=tuple(args), package_dir=package_dir, function=function,
                   command=command, processes_per_node=None if processes is None else
                   _processes(raw, path + ("processes_per_node",), processes))


MAX_COMMAND_WORDS = 256


def _command(raw, path, value) -> tuple[str, ...]:
    """trainer.command: the words the launcher runs (as an exec-form ENTRYPOINT has them); no shell reads them here."""
    if isinstance(value, str):
        raise _err(raw, path, f"{show(value)} must be a list of words, e.g. [sh, -c, \"dvc pull && python train.py\"] "
                              "(a string would be split by nobody)")
    words = _list(raw, path, value)
    if not words or len(words) > MAX_COMMAND_WORDS:
        raise _err(raw, path, f"{show(value)} must be a list of 1 to {MAX_COMMAND_WORDS} words")
    out = []
    for i, word in enumerate(words):
        text = _scalar_text(raw, path + (i,), word)
        if "\x00" in text or (i == 0 and not text.strip()):
            raise _err(raw, path + (i,), f"{show(text)} is not a word a command can hold: no NUL, and the first word "
                                         "names a program")
        out.append(text)
    return tuple(out)


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
_ENTRY_GROUP = lazy_pattern(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}", re.ASCII)
_ENTRY = lazy_pattern(r"([A-Za-z0-9_.-][A-Za-z0-9_. -]{0,99}?) ?= ?[A-Za-z_][A-Za-z0-9_.]{0,199}"
                    r"(?::[A-Za-z_][A-Za-z0-9_.]{0,199})?(?: ?\[[A-Za-z0-9_., -]{0,200}\])?", re.ASCII)
_SCRIPT_NAME = lazy_pattern(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}", re.ASCII)
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
