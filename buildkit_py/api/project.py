"""Where the trainer and its config are (Project), how it is loaded, how a call's keyword arguments become
its options and config keys, and the checks every stage shares."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConfigError, ResolutionError, show
from ..fsutil import cache_dir, nesting_problem, path_problem, reads_once
from ..pipeline.recipe import slug
from ..progress import Reporter, reporter

# The config and the plan load where a call uses them: a kept recipe's build uses neither (recipe.py).
if TYPE_CHECKING:
    from ..config import Config
    from ..pipeline.plan import Plan, PlatformPlans

# progress=: a mode of --progress (auto, plain, tty, json, notebook, log, quiet) or a Reporter of one's own.
Progress = str | Reporter | None
Options = TypeVar("Options")

MAX_GPUS = 16  # the most GPUs one Vertex AI machine has
MAX_WORKERS = 64  # local runs start one container per worker


@dataclass(frozen=True)
class Project:
    """Where the trainer and its config are, and the config keys set by flags (None: not set)."""

    config: Path | None = None  # buildkit.yaml or pyproject.toml (default: found in directory)
    directory: Path | None = None  # the trainer directory (default: the config's, else the working directory)
    overrides: tuple[tuple[str, Any], ...] = ()
    variant: str | None = None  # one of the config's variants (its overrides applied, its name in the tags)
    document: Mapping[str, Any] | None = None  # the config itself (the API's config dict), instead of a file


# What a call's first argument may be: a Project, the trainer directory or the config file (a path), the config
# itself (a mapping of config keys), or None (the working directory).
Source = Project | str | os.PathLike | Mapping[str, Any] | None


def load(project: Project) -> Config:
    """The project's config, validated (with its variant applied when it names one)."""
    from ..config import load_config

    project = project_from(project, {}, "load")  # a Project, or what a call's first argument may be
    directory = project.directory or (project.config.parent if project.config else Path.cwd())
    config = load_config(project.config, directory, dict(project.overrides), project.document)
    variants = variant_configs(config)
    if project.variant is None:
        return config
    found = [v for v in variants if v.variant == project.variant]
    if not found:
        known = ", ".join(v.variant or "" for v in variants) or "none (the config has no variants: key)"
        raise ConfigError(f"{show(project.variant)} is not a variant of {config.source}; variants: {known}", field="--variant")
    return found[0]


def with_trainer(project: Project, module: str | None, script: str | None = None) -> Project:
    """The project with `trainer:` set by --module or --script, the config keys those flags stand for."""
    if module and script:
        raise ConfigError("give --module or --script, not both", field="--script")
    trainer = {"module": module} if module else {"script": script} if script else None
    return replace(project, overrides=(*project.overrides, ("trainer", trainer))) if trainer else project


def variant_configs(config: Config) -> list[Config]:
    """Each variant's config, every one checked to resolve: a variant that does not is named."""
    from ..config import Config
    from ..pipeline.plan import make_plans

    if not isinstance(config, Config):
        raise ConfigError(f"{show(config)} is not allowed: a Config (from load())", field="config")
    out = []
    for i, variant in enumerate(config.variants):
        derived = config.with_variant(variant)
        try:
            make_plans(derived)
        except (ConfigError, ResolutionError) as exc:
            raise ConfigError(f"variant {show(variant.name)} does not resolve: {exc}", field=f"variants[{i}]",
                              where=config.source) from None
        out.append(derived)
    return out


@reads_once
def resolve(source: Source = None, /, **settings: Any) -> Plan | PlatformPlans:
    """The resolved plan: base image, CUDA, cuDNN, Python, the framework wheel and its index, hypertune; the image's
    requirements resolved with uv (a requirement that does not resolve raises ConfigError; BUILDKIT_PY_OFFLINE=1 skips).

    source: a Project, the trainer directory or config file, a config dict, or None (the working directory).
    settings: config keys, as their flags set them (framework="torch==2.5.1", python="3.11", cuda="12.4"...),
    and config (a path or a dict), dir and variant as the flags of those names.
    A multi-platform config (`platform: [linux/amd64, linux/arm64]`) gives PlatformPlans: the plan of each platform.
    """
    from ..pipeline.plan import PlatformPlans, make_plan
    from ..pipeline.resolution import checked_plan

    config = load(project_from(source, settings, "resolve"))
    if config.multi_platform:  # several platforms (`platform: [...]`): the plan of each
        return PlatformPlans(tuple(checked_plan(c, make_plan(c)) for c in config.each_platform()))
    return checked_plan(config, make_plan(config))


def project_from(source: Source, settings: dict[str, Any], call: str, allowed: Iterable[str] = ()) -> Project:
    """The Project a call names: its first argument, then config=, dir= and variant= and the config keys among the
    keywords (each as its flag sets it; `tags=["a"]` as `--tag a`). Takes what it uses from settings; any keyword
    left is unknown to the call and refused, naming what it allows."""
    for name, value in settings.items():  # before anything walks them (a recipe's key, the config's checks)
        _shallow(value, name)
    config, directory = settings.pop("config", None), settings.pop("dir", None)
    variant = settings.pop("variant", None)
    if isinstance(source, Project):
        project = _checked_project(source)
    elif source is None or isinstance(source, Mapping):
        project = Project(document=_shallow(source, "config"))
    else:
        path = _path(source, "project")
        project = Project(directory=path) if path.is_dir() else Project(config=path)
    if config is not None:
        if source is not None:
            raise ConfigError(f"give the project as the first argument or config=, not both (config={show(config)})",
                              field="config")
        if not isinstance(config, (Mapping, str, os.PathLike)):
            raise ConfigError(f"{show(config)} is not allowed: a path or a mapping of config keys", field="config")
        project = replace(project, document=config) if isinstance(config, Mapping) else replace(
            project, config=_path(config, "config"))
    if directory is not None:
        project = replace(project, directory=_path(directory, "dir"))
    if variant is not None:
        project = replace(project, variant=checked(variant, "str", "variant"))
    if settings:
        from ..config import KEYS

        refuse_unknown({k: v for k, v in settings.items() if k not in KEYS}, call,
                       [*allowed, "config", "dir", "variant", f"the config keys ({', '.join(KEYS)})"])
    overrides = tuple((key, tuple(value) if isinstance(value, list) else value) for key, value in settings.items())
    settings.clear()
    return replace(project, overrides=project.overrides + overrides) if overrides else project


def _shallow(value: Any, name: str) -> Any:
    """A keyword's value nested no deeper than a config file may be (a value thousands deep would reach Python's
    recursion limit in the first walk over it)."""
    problem = nesting_problem(value)
    if problem:
        raise ConfigError(problem, field=name)
    return value


def _checked_project(project: Project) -> Project:
    """A Project the caller made, its fields checked as the keywords that set them are."""
    if not isinstance(project.overrides, tuple) or not all(
            isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str) for pair in project.overrides):
        raise ConfigError(f"{show(project.overrides)} is not allowed: a tuple of (config key, value) pairs",
                          field="overrides")
    for key, value in project.overrides:
        _shallow(value, key)
    if project.document is not None and not isinstance(project.document, Mapping):
        raise ConfigError(f"{show(project.document)} is not allowed: a mapping of config keys", field="config")
    return replace(project, config=checked(project.config, "Path | None", "--config"),
                   directory=checked(project.directory, "Path | None", "--dir"),
                   variant=checked(project.variant, "str | None", "--variant"),
                   document=_shallow(project.document, "config"))


def options_of(given: Any, kind: type[Options], name: str) -> Options:
    """A call's options argument: None for the defaults, else a `kind` (options_from checks its fields)."""
    if given is None:
        return kind()
    if not isinstance(given, kind):
        raise ConfigError(f"{show(given)} is not allowed: a {kind.__name__} or None", field=name)
    return given


def typed(project: Any, options: Any, kind: type[Options], call: str) -> tuple[Project, Options]:
    """The Project and options of a call that takes them as they are (lock, matrix_check, build_variants...): both
    checked as a call's first argument and its options object are."""
    return project_from(project, {}, call), options_from(options_of(options, kind, "options"), {})


def arguments(call: str, source: Source, settings: dict[str, Any], *options: Any, takes: Iterable[str] = (),
              config_keys: tuple[str, ...] = ()) -> tuple[Any, ...]:
    """A call's Project and its options: each options object with the fields that keywords name (options_from),
    then the Project (project_from), which refuses a keyword left over, naming the call's parameters (takes), the
    options' fields and the config keys."""
    filled = tuple(options_from(o, settings, config_keys) for o in options)
    return (project_from(source, settings, call, [*takes, *option_names(*filled)]), *filled)


def refuse_unknown(settings: Mapping[str, Any], call: str, allowed: Iterable[str]) -> None:
    """A keyword that no option and no config key of the call takes: refused, naming what it allows."""
    for name in settings:
        raise ConfigError(f"{show(name)} is not a keyword of {call}(); allowed: {', '.join(dict.fromkeys(allowed))}", field=name)


def option_names(*options: Any) -> list[str]:
    """The keywords a call's options take: their fields, and the fields of the options they hold."""
    out: list[str] = []
    for item in options:
        for f in dataclasses.fields(item):
            value = getattr(item, f.name)
            out += option_names(value) if dataclasses.is_dataclass(value) else [f.name]
    return out


def options_from(options: Options, settings: dict[str, Any], config_keys: tuple[str, ...] = ()) -> Options:
    """options (a frozen dataclass instance) with the fields that settings name replaced, each field checked against
    its type, a keyword's or the caller's (BuildOptions(push="yes") is refused, not taken as true); a field holding
    options of its own (RunOptions.build) takes their fields from the same keywords. Takes what it uses from
    settings; config_keys stay there for project_from (a call's `image` may be the config's)."""
    values: dict[str, Any] = {}
    for item in dataclasses.fields(options):  # type: ignore[arg-type]
        current = getattr(options, item.name)
        if dataclasses.is_dataclass(current):
            if item.name in settings:  # the options themselves (build=BuildOptions(...)), then their fields
                given = settings.pop(item.name)
                if not isinstance(given, type(current)):
                    raise ConfigError(f"{show(given)} is not allowed: a {type(current).__name__}", field=item.name)
                current = values[item.name] = given
            nested = options_from(current, settings, config_keys)
            if nested is not current:
                values[item.name] = nested
            continue
        if item.name in settings and item.name not in config_keys:
            values[item.name] = checked(settings.pop(item.name), str(item.type), item.name)
            continue
        value = checked(current, str(item.type), _FLAGS.get(item.name) or "--" + item.name.replace("_", "-"))
        if type(value) is not type(current):  # a path given as a string, a list for a tuple
            values[item.name] = value
    return replace(options, **values) if values else options  # type: ignore[type-var]


# The flag of an options field, where it is not --FIELD: a field of an options object the caller made is named as
# the command line names it (a keyword, by the keyword).
_FLAGS = {"fast_path": "--no-fast-path", "attest": "--no-attest", "parameter_servers": "--ps", "poll_interval": "--poll"}

_KINDS = {"bool": "True or False", "int": "a whole number", "float": "a number", "str": "a string", "Path": "a path",
          "None": "None", "tuple[str, ...]": "a list of strings", "Callable[[str, dict], None]": "a function",
          "Callable[[LogLine], None]": "a function", "dict[str, str]": "a dict of strings"}


def checked(value: Any, hint: str, name: str) -> Any:
    """A keyword's value against its field's annotation (the few types options hold); a path may be given as a
    string and a tuple as a list. Anything else names the keyword, the value and the type allowed."""
    kinds = [kind.strip() for kind in hint.split("|")]
    if value is None and "None" in kinds:
        return None
    for kind in kinds:
        if kind == "bool" and isinstance(value, bool):
            return value
        if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if kind == "str" and isinstance(value, str):
            return value
        if kind == "Path" and isinstance(value, (str, os.PathLike)):
            return _path(value, name)
        if kind == "tuple[str, ...]" and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(value)
        if kind.startswith("Callable[") and callable(value):
            return value
        if kind == "dict[str, str]" and isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return dict(value)  # the values are checked by the config key's validator, with its message
    allowed = " or ".join(_KINDS.get(k, f"a {k}") for k in kinds)
    raise ConfigError(f"{show(value)} is not allowed: {allowed}", field=name)


def output_file(value: Any, name: str) -> Path | None:
    """A file to write a result to (None: not written), refused before any work when it names a directory."""
    path = checked(value, "Path | None", name)
    try:
        folder = path is not None and (path.name in ("", "..") or path.is_dir())
    except OSError:  # not readable here: the write says why
        folder = False
    if folder:
        raise ConfigError(f"{show(str(path))} is a directory: give a file name", field=name)
    return path


def _path(value: Any, name: str) -> Path:
    if not isinstance(value, (str, os.PathLike)):
        raise ConfigError(f"{show(value)} is not allowed: a path (str or os.PathLike)", field=name)
    text = os.fspath(value)
    problem = path_problem(text) if isinstance(text, str) else "a path of text, not bytes"
    if problem:
        raise ConfigError(f"{show(text)} is not allowed: {problem}", field=name)
    return Path(text)


@contextmanager
def reporting(progress: Progress) -> Iterator[Reporter]:
    """The call's Reporter (progress=), told when the work ends, however it ends: a notebook's display then shows
    the last lines it held back."""
    out = reporter(progress)
    try:
        yield out
    finally:
        out.finish()


def check_count(name: str, value: int, limit: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ConfigError(f"{show(value)} is not allowed: a whole number from 0 to {limit}", field=name)


def runs_dir(config: Config, kind: str = "run") -> Path:
    """Where a run's or a study's outputs go unless --output names a place: under the cache dir, outside the
    trainer directory, whose next build would send them (and get a new content tag)."""
    when = f"{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**6:06d}"  # two runs in one second apart
    return cache_dir() / "runs" / f"{slug(config.root.name)}-{kind}-{when}"
