"""The requirements the trainer declares: its requirements file (and the files it includes) checked as pip would read
it, another tool's lock file, and its own distribution's dependencies, with names known not to install replaced; what
of them the image installs from the file as it is, and what joins the config's pip entries."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..catalog.matrix import Matrix
from ..config import bad_character
from ..errors import ConfigError, StaleLockError, show
from ..patterns import lazy_pattern
from ..sources.lockfiles import found_in, is_lock_file, locked
from ..sources.requirements import local_path, parse_problem
from .conda import CondaEnvironment, found_environment, read_environment
from .distribution import Own
from .given import Given

REQUIREMENTS = "requirements.txt"
# pip's per-requirement options, after the requirement on the same line.
_PER_REQUIREMENT = lazy_pattern(r"\s+--(?:hash|config-settings|global-option|install-option)(?:=|\s).*$")
_SELF = {".", "./", "file:.", "file:./"}
# PyPI's own simple index, which requirements files of AI Platform's samples name beside `-e .`: the image's
# installer uses it anyway, so the option says nothing (pypi.python.org redirects to pypi.org).
_PYPI_INDEX = lazy_pattern(r"https?://pypi\.(?:python\.)?org/simple/?", re.ASCII | re.IGNORECASE)
_SELF_EXTRAS = lazy_pattern(r"(?:file:)?\./?\[[^\]]*\]")
MAX_REQUIREMENT = 4096  # characters of one requirement line; longer is not a requirement (URLs with hashes fit)


@dataclass(frozen=True)
class Source:
    """One requirement autopackage found, and where: requirements.txt:3, setup.py:install_requires[2],
    setup.cfg:[options] install_requires[0], pyproject.toml:[project] dependencies[1], the metadata hook's
    Requires-Dist, or an import (`import pandas` in train.py:4)."""

    requirement: str
    source: str

    def to_dict(self) -> dict:
        return {"requirement": self.requirement, "source": self.source}


@dataclass(frozen=True)
class _RequirementsFile:
    """A requirements file read as pip reads it: its requirements and options with where, and the lines that install
    the trainer itself, include files or ask for hashes."""

    lines: tuple[tuple[str, str], ...]  # (requirement text as pip takes it, where)
    options: tuple[tuple[str, str, str], ...]  # (option, value, where) that uv honours in the copied file
    installs_self: str | None  # where a line installs the trainer itself (-e ., .)
    included: tuple[str, ...]  # files named by -r: the copied file cannot reach them
    hashed: str | None = None  # where a line asks for hash checking (--hash, --require-hashes)
    # The first line pip refuses outright (not a requirement): the file cannot be installed at all (ConfigError
    # args: the message and where); declared_requirements decides whether that ends the command.
    refused: tuple[str, str] | None = None


def _refuse_extras(text: str, where: str) -> None:
    raise ConfigError(f"{show(text)} installs the trainer with extras: autopackage installs the trainer's declared "
                      "dependencies, not those of its extras; list the extras' requirements in the file instead of "
                      "the line", where=where)


def _read_requirements(directory: Path, name: str) -> _RequirementsFile:
    """Every line of a requirements file and of the files it includes (-r) checked as pip would read it: an
    invalid requirement, an option the image's installer cannot honour from a file copied alone, and a local path
    exit 2 naming the line."""
    from ..sources.requirements import KEPT_OPTIONS, asks_hashes, included_lines
    from ..sources.requirements import option as option_of

    lines: list[tuple[str, str]] = []
    options: list[tuple[str, str, str]] = []
    installs_self = None
    read, included = included_lines(directory, name, ("-r", "--requirement"))
    hashed = next((where for text, where, _ in read if asks_hashes(text)), None)
    refused = None
    for text, where, _ in read:
        _checked_text(text, where)
        if text.startswith("-"):
            option, value = option_of(text)
            if option in ("-e", "--editable") and value in _SELF:
                installs_self = installs_self or where
            elif option in ("-e", "--editable") and _SELF_EXTRAS.fullmatch(value):
                _refuse_extras(text, where)
            elif option in ("-e", "--editable") and "://" not in value:
                raise ConfigError(f"{show(text)} installs {show(value)} from this machine: the requirements file is "
                                  "copied into the image alone, without other directories; publish the package to an "
                                  "index, or move its code into the trainer directory", where=where)
            elif option in ("-e", "--editable"):
                lines.append((value, where))
            elif option in ("-f", "--find-links") and value.startswith(("https://", "http://")):
                options.append((option, value, where))
            elif option in ("-f", "--find-links"):
                raise ConfigError(f"{show(text)}: a local find-links directory is not in the image when the requirements "
                                  "file (copied alone) is installed; serve the wheels from an index (pip_index_url, "
                                  "pip_conf) or an http(s) find-links URL", where=where)
            elif option == "--trusted-host":
                raise ConfigError(f"{show(text)}: uv, which installs the image's packages, ignores --trusted-host; serve "
                                  "the index over https and give its CA bundle with ca_cert (or PIP_CERT)", where=where)
            elif option in ("-c", "--constraint"):
                raise ConfigError(f"{show(text)}: a constraints file is not copied with the requirements file; pin the "
                                  "versions in the requirements file itself", where=where)
            elif option in KEPT_OPTIONS:
                options.append((option, value, where))
            else:
                raise ConfigError(f"{show(text)}: the option {show(option)} is not one autopackage can pass to the "
                                  f"image's installer; allowed: {', '.join(sorted(KEPT_OPTIONS))}, -r, -f URL, -e .",
                                  where=where)
            continue
        text = _PER_REQUIREMENT.sub("", text)
        if _SELF_EXTRAS.fullmatch(text):
            _refuse_extras(text, where)
        if text in _SELF:
            installs_self = installs_self or where
            continue
        try:
            Requirement(text)
        except InvalidRequirement as exc:
            if "://" in text:  # a URL pip installs (an archive or VCS link): left to the installer
                lines.append((text, where))
                continue
            if local_path(text):
                raise ConfigError(f"{show(text)} is a path on this machine: the requirements file is copied into the "
                                  "image alone; publish the package to an index, or move its code into the trainer "
                                  "directory", where=where) from None
            refused = refused or (f"{show(text)} is not a valid requirement (PEP 508/440): {parse_problem(exc)}; "
                                  f"current pip refuses it too{_meant(text)}", where)
            continue
        lines.append((text, where))
    return _RequirementsFile(tuple(lines), tuple(options), installs_self, included, hashed, refused)


_ONE_MEANING = lazy_pattern(r"([A-Za-z0-9][A-Za-z0-9._-]*(?:\[[A-Za-z0-9,._ -]*\])?)\s*(=>|=<|=)\s*([0-9][A-Za-z0-9.*+!_-]*)",
                          re.ASCII)
_OPERATOR = {"=": "==", "=>": ">=", "=<": "<="}


def _meant(text: str) -> str:
    """The corrected line to copy, where the invalid one has one obvious meaning; else ""."""
    found = _ONE_MEANING.fullmatch(text.strip())
    if found is None:
        return ""
    fixed = f"{found.group(1)}{_OPERATOR[found.group(2)]}{found.group(3)}"
    return f"; write {show(fixed)}" if parses(fixed) else ""


@dataclass(frozen=True)
class _BadName:
    """A requirement name known not to install (requirement_names.yaml): what to install instead, why, how it fails."""

    use: str  # the distribution to install instead
    why: str
    fails: str  # install | missing | unrelated
    after: Version | None  # only releases after this one are broken


def _bad_names() -> dict[str, _BadName]:
    from ..catalog.resources import read_data, resource_dir
    from ..errors import DataError

    data = read_data(resource_dir("base_images") / "requirement_names.yaml", "base_images/requirement_names.yaml")
    names = data.get("names") if isinstance(data, dict) else None
    if not isinstance(names, dict):
        raise DataError("base_images/requirement_names.yaml: `names` must be a mapping")
    found = {}
    for name, row in names.items():
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("use", "why", "fails", "source")):
            raise DataError(f"base_images/requirement_names.yaml: {name} needs use, why, fails and source")
        found[canonicalize_name(name)] = _BadName(row["use"], row["why"], row["fails"],
                                                  Version(row["after"]) if row.get("after") else None)
    return found


def _after(last: Version) -> tuple[Version, ...]:
    """Releases after `last`, one per kind of step (the next minor, major, far; placeholders are new release lines, as
    tensorflow-gpu's 2.12.0 after 2.11.0): what a range must exclude to keep only the real releases."""
    major, minor_ = (last.release + (0,))[:2]
    return tuple(Version(v) for v in (f"{major}.{minor_ + 1}.0", f"{major + 1}.0.0", "9999"))


def _renamed(table: dict[str, _BadName], lines: Sequence[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[str]]:
    """The requirements with each name known not to install replaced by what to install instead (a renamed project
    keeps its version specifier; a placeholder's versions mean nothing for the real one), and a note for each; a name
    that installs an unrelated project is only said."""
    out, notes = [], []
    for text, where in lines:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            out.append((text, where))  # a URL line: installed as written
            continue
        bad = table.get(canonicalize_name(requirement.name))
        # A range that admits a release after the last real one takes the placeholder: the resolver picks the newest.
        broken = bad is not None and (bad.after is None or any(
            requirement.specifier.contains(v, prereleases=True) for v in _after(bad.after)))
        if bad is None or not broken:
            out.append((text, where))
            continue
        if bad.fails == "unrelated":
            notes.append(f"{where}: {requirement.name} installs a different project from the one its import name "
                         f"suggests ({bad.why}); if the trainer means {bad.use}, write that")
            out.append((text, where))
            continue
        fixed = Requirement(text)
        fixed.name = bad.use
        if bad.after is None:
            fixed.specifier = SpecifierSet()
        fixed_text = str(fixed)
        notes.append(f"{where}: {show(text)} cannot be installed ({bad.why}): {fixed_text} is installed instead "
                     "(base_images/requirement_names.yaml); write that in the file")
        out.append((fixed_text, where))
    return out, notes


def _checked_text(text: str, where: str) -> None:
    bad = bad_character(text)
    if bad:
        raise ConfigError(f"{show(text)}: {bad}", where=where)
    if len(text) > MAX_REQUIREMENT:
        raise ConfigError(f"{show(text)} is {len(text)} characters long: at most {MAX_REQUIREMENT} for one requirement",
                          where=where)


def _requirement(text: str, where: str) -> Requirement | None:
    """A declared requirement, or None for a URL line pip takes as it is; invalid: exit 2 naming where."""
    _checked_text(text, where)
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        if "://" in text:
            return None
        raise ConfigError(f"{show(text)} is not a valid requirement (PEP 508/440): {parse_problem(exc)}{_meant(text)}",
                          where=where) from None


def parses(text: str) -> bool:
    try:
        Requirement(text)
    except InvalidRequirement:
        return False
    return True


def config_pip(given: Given) -> list[str]:
    pip = given.data.get("pip")
    return [p for p in pip if isinstance(p, str) and parses(p)] if isinstance(pip, list) else []


@dataclass(frozen=True)
class Requirements:
    """What the trainer declares, checked and with names known not to install replaced."""

    file: str | None  # the requirements file (or lock) the image installs, as the config will name it
    options: tuple[tuple[str, str, str], ...]  # the file's index options: (option, value, where)
    sources: tuple[Source, ...]  # every requirement found, with where
    pip: tuple[tuple[str, str], ...]  # (requirement, where) to add to the config's pip entries
    parsed: tuple[tuple[str, Requirement], ...]  # (where, requirement) of each declared line but URLs and the trainer's own
    notes: tuple[str, ...]
    overrides: tuple[tuple[str, Any], ...]
    python: tuple[str, str] | None = None  # (X.Y, where): the Python a conda environment file names


@dataclass(frozen=True)
class _Locked:
    """What another tool's lock gives the image: the lock and its pins (None where it is stale), notes, and the config
    keys its chosen extras and groups set."""

    requirements: str | None  # None: the lock is stale, and the project's requirements are resolved instead
    read: _RequirementsFile | None  # its pins as requirement lines
    notes: tuple[str, ...]
    overrides: tuple[tuple[str, Any], ...]  # the config keys the lock's chosen extras and groups set


def _from_lock(directory: Path, given: Given, requirements: str, matrix: Matrix, declares: bool) -> _Locked:
    """Another tool's lock: its pins (for the default Python: the plan exports them for the image's) decide the
    framework. declares: the trainer package declares dependencies, which the lock holds."""
    chosen = installed_sets(directory, requirements, given)
    platform = str(given.flags.get("platform") or given.data.get("platform") or "linux/amd64")
    try:
        pins, chosen, said = _locked_with(directory, requirements, matrix.distros.default_python, platform, chosen)
    except StaleLockError as exc:
        if "requirements" in given:
            raise
        # What `pip install .` would install: the project file's requirements, resolved now.
        return _Locked(None, None, (f"{exc.detail.split('; run')[0]}: the image installs what the project declares "
                                    f"instead, resolved now (`{'poetry lock' if 'poetry' in requirements else 'uv lock'}` "
                                    "makes the lock current, and the image then installs exactly what it locks)",), ())
    notes = [*said, *([f"the trainer package's dependencies are installed as {requirements} locks them"] if declares
                      else []), *chosen.notes,
             f"{requirements}: the image installs exactly the {len(pins)} packages it locks (hashes checked)"]
    return _Locked(requirements, _RequirementsFile(tuple((p.requirement, p.where) for p in pins), (), None, ()),
                   tuple(notes), chosen.overrides)


def declared_requirements(directory: Path, given: Given, own: Own, matrix: Matrix) -> Requirements:
    """The requirements file (requirements.txt, else another tool's lock) where the config names none, its lines and
    the trainer package's dependencies. A file that cannot be installed as it is, copied alone (it installs the
    trainer itself, includes another file, or names a distribution that cannot be installed), joins the config's pip
    entries; where the config names that file: exit 2."""
    package = own.name
    requirements, notes = _requirements_file(directory, given)
    environment = _conda_environment(directory, given, requirements)
    declared = [*(environment.requirements if environment else ()), *own.deps]
    notes += _environment_notes(directory, requirements, environment) if "requirements" not in given else []
    lock_overrides: tuple[tuple[str, Any], ...] = ()
    if requirements and is_lock_file(requirements) and (directory / requirements).is_file():
        locked = _from_lock(directory, given, requirements, matrix, bool(declared))
        requirements, read, lock_overrides = locked.requirements, locked.read, locked.overrides
        notes += locked.notes
        declared = declared if locked.read is None else []  # what the project file declares is in the lock
    else:
        read = _read_requirements(directory, requirements) if requirements and (directory / requirements).is_file() else None
    if read is not None and read.refused is not None:
        notes.append(_refused_file(read.refused, requirements, given, declared))
        requirements, read = None, None
    # Names known not to install (base_images/requirement_names.yaml) are replaced, each said; the file's own lines
    # cannot be changed in the copied file, so a file with one joins the config's pip entries, as `-e .` does.
    bad_names = _bad_names()
    declared, said = _renamed(bad_names, declared)
    notes += said
    renamed_lines, said = _renamed(bad_names, list(read.lines) if read else [])
    notes += said
    renamed = [w for (t, w), (new, _) in zip(read.lines if read else (), renamed_lines, strict=True) if t != new]
    if read is not None and renamed and "requirements" in given:
        raise ConfigError(f"{show(requirements)} ({given.where['requirements']}) names a distribution that cannot be "
                          f"installed ({renamed[0]}: {said[0]}); the file is copied into the image as it is: fix the line",
                          field="requirements")
    if read is not None:
        read = replace(read, lines=tuple(renamed_lines))
    sources = [Source(t, w) for t, w in (read.lines if read else ())] + [Source(t, w) for t, w in declared]
    extra: list[tuple[str, str]] = list(declared)  # what autopackage adds to `pip`
    overrides: tuple[tuple[str, Any], ...] = ()
    if read is not None and (read.installs_self or read.included or renamed):
        what = (f"installs the trainer itself ({read.installs_self})" if read.installs_self
                else f"includes {', '.join(read.included)}" if read.included
                else f"names a distribution that cannot be installed ({', '.join(renamed[:3])})")
        if "requirements" in given:
            raise ConfigError(f"{show(requirements)} ({given.where['requirements']}) {what}, which the image's install of "
                              "the file, copied alone, cannot do; leave `requirements` unset and autopackage installs its "
                              "requirements and the trainer's declared dependencies", field="requirements")
        if read.hashed:  # the config's pip entries are install arguments, which take no hashes
            raise ConfigError(f"the line asks for hash checking (--hash, --require-hashes), and {show(requirements)} "
                              f"{what}: its lines would join the config's pip entries, which carry no hashes; keep the "
                              "hash-pinned requirements in a file without `-e .` or `-r` (the image installs such a file "
                              "as it is, hashes checked: `requirements:` in buildkit.yaml), or pin the image's packages "
                              "with `buildkit-py lock`",
                              where=read.hashed)
        if read.installs_self and package is None:
            raise ConfigError(f"{read.installs_self}: the line installs the trainer directory as a package, but it has no "
                              "setup.py, setup.cfg or pyproject.toml [project] to install", where=str(directory))
        pypi = [(o, v, w) for o, v, w in read.options if o in ("-i", "--index-url") and _PYPI_INDEX.fullmatch(v)]
        notes += [f"{w}: {o} {v} is PyPI's own index, which the image installs from by default: the line is dropped"
                  for o, v, w in pypi]
        kept = [o for o in read.options if o not in pypi]
        if kept:
            option, value, where = kept[0]
            raise ConfigError(f"{show(option + ' ' + value)}: a requirements file that {what.split(' (')[0]} is installed "
                              "through the config's `pip` entries, which take no index options; give the index with "
                              "pip_index_url (or --pip-index-url), or a pip_conf file for several", where=where)
        extra = list(read.lines) + extra
        notes.append(f"{requirements} {what}: its requirements join the config's pip entries, since the file, copied "
                     "into the image alone, cannot be installed as it is")
    elif read is not None and "requirements" not in given:
        overrides = (("requirements", requirements), *lock_overrides)
    # The trainer's own distribution is its copied code, never installed from an index.
    if package:
        extra = [(t, w) for t, w in extra if not (parses(t) and canonicalize_name(Requirement(t).name) == own.key)]
    parsed = [(s.source, r) for s in sources if (r := _requirement(s.requirement, s.source)) is not None]
    parsed = [(w, r) for w, r in parsed if canonicalize_name(r.name) != own.key]
    return Requirements(requirements, read.options if read else (), tuple(sources), tuple(extra), tuple(parsed),
                        tuple(notes), overrides, environment.python if environment else None)


def _conda_environment(directory: Path, given: Given, requirements: str | None) -> CondaEnvironment | None:
    """The conda environment file's requirements, where neither the config nor the directory has a requirements file."""
    name = found_environment(directory) if "requirements" not in given and not requirements else None
    return read_environment(directory, name) if name else None


def _environment_notes(directory: Path, requirements: str | None, environment: CondaEnvironment | None) -> list[str]:
    if environment is None:
        name = found_environment(directory)
        return [f"{name} is here too: the image installs {requirements}"] if name and requirements else []
    left = (f"; conda's own packages are left out: {', '.join(environment.left_out[:8])}"
            + (" ..." if len(environment.left_out) > 8 else "")) if environment.left_out else ""
    return [f"{environment.file}: the image has no conda: its {len(environment.requirements)} requirements (its conda "
            f"packages and its pip section) are installed from PyPI{left}", *environment.notes]


def _refused_file(refused: tuple[str, str], requirements: str | None, given: Given,
                  declared: Sequence[tuple[str, str]]) -> str:
    """The note on a requirements file pip refuses outright, left out for the package's declared dependencies; where
    the config names the file, or nothing else declares what the trainer needs: exit 2 naming the line."""
    problem, where = refused
    if "requirements" in given or not declared:
        raise ConfigError(problem, where=where)
    # pip refuses the whole file, and the trainer's package states what it needs: what `pip install .` (and AI
    # Platform's install of the package) installs is what the image gets.
    return (f"{where}: {problem}: {requirements} is left out, and the image installs the dependencies "
            f"{declared[0][1].split(':')[0]} declares, as `pip install .` would")


@dataclass(frozen=True)
class InstalledSets:
    """The extras and dependency groups of a lock that the repository's own image builds install."""

    extras: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    overrides: tuple[tuple[str, Any], ...] = ()
    source: str | None = None  # the build that installs them (Dockerfile.gpu)


def _locked_with(directory: Path, lock: str, python: str, platform: str, chosen: InstalledSets
                 ) -> tuple[list, InstalledSets, list[str]]:
    """The lock's pins with the extras and groups the repository's build installs; where the lock does not hold them,
    without, said (a stale lock raises StaleLockError)."""
    try:
        return locked(directory, lock, python, platform, chosen.extras, chosen.groups), chosen, []
    except ConfigError as exc:
        if isinstance(exc, StaleLockError) or exc.field not in ("requirements_extras", "requirements_groups"):
            raise
        said = [f"{chosen.source} names what the lock does not hold ({exc.detail}): the image installs the lock "
                "without extras or groups"]
        return locked(directory, lock, python, platform), InstalledSets(), said


# How a Dockerfile or script installs a lock's extras and groups: uv sync/pip and poetry install options, and pip's
# `.[a,b]`. An --all-extras or an extra named in several builds that disagree is left to the config.
_EXTRA_OPTION = lazy_pattern(r"""(?:--extra[= ]|\s-E[= ]?|--extras[= ])(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9][A-Za-z0-9._,-]*))""")
_GROUP_OPTION = lazy_pattern(r"(?:--group[= ]|--only-group[= ])[\"']?([A-Za-z0-9][A-Za-z0-9._,-]*)[\"']?")
_POETRY_WITH = lazy_pattern(r"(?:--with[= ]|--only[= ])[\"']?([A-Za-z0-9][A-Za-z0-9._,-]*)[\"']?")  # poetry's groups
_INSTALL_SELF_EXTRAS = lazy_pattern(r"""install\b[^\n]*?\s['"]?\.\[([A-Za-z0-9._, -]+)\]""")
_INSTALLER = lazy_pattern(r"\b(uv sync|uv pip install|uv export|poetry (?:install|export)|pip3? install)\b")


def installed_sets(directory: Path, lock: str, given: Given) -> InstalledSets:
    """The extras and groups the repository's Dockerfiles and scripts install with the lock (`uv sync --extra gpu`,
    `poetry install --with train -E cuda`, `pip install .[gpu]`): where several builds name different ones, the
    GPU build's (a Dockerfile whose name or base says GPU or CUDA), unless the config gives them."""
    if "requirements_extras" in given or "requirements_groups" in given:
        return InstalledSets()
    found: list[tuple[str, tuple[str, ...], tuple[str, ...], bool]] = []  # (file, extras, groups, a GPU build)
    candidates = sorted(p for p in directory.iterdir() if p.is_file() and not p.is_symlink() and (
        p.name.lower().startswith(("dockerfile", "containerfile")) or p.suffix in (".sh", ".Dockerfile")
        or p.name == "Makefile")) if directory.is_dir() else []
    for path in candidates[:32]:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")[:200_000]
        except OSError:
            continue
        extras: list[str] = []
        groups: list[str] = []
        for line in text.splitlines():
            tool = _INSTALLER.search(line)
            if tool is None:
                continue
            line = line[tool.start():]
            extras += [e for m in _EXTRA_OPTION.finditer(line) for e in re.split(r"[ ,]+", next(filter(None, m.groups())))
                       if e]
            extras += [e.strip() for m in _INSTALL_SELF_EXTRAS.finditer(line) for e in m.group(1).split(",") if e.strip()]
            groups += [g for m in _GROUP_OPTION.finditer(line) for g in m.group(1).split(",") if g]
            if tool.group(1).startswith("poetry"):
                groups += [g for m in _POETRY_WITH.finditer(line) for g in m.group(1).split(",") if g]
        if extras or groups:
            gpu = bool(re.search(r"gpu|cuda", path.name, re.IGNORECASE) or re.search(r"^\s*FROM\s+\S*(?:cuda|gpu)",
                                                                                    text, re.IGNORECASE | re.MULTILINE))
            found.append((path.name, tuple(dict.fromkeys(extras)), tuple(dict.fromkeys(groups)), gpu))
    if not found:
        return InstalledSets()
    distinct = {(e, g) for _, e, g, _ in found}
    picked = found[0] if len(distinct) == 1 else next((f for f in found if f[3]), None)
    if picked is None:
        return InstalledSets(notes=(f"{lock}: the builds here install different extras or groups ("
                                    + "; ".join(f"{n}: {', '.join(e + g)}" for n, e, g, _ in found)
                                    + "): none is chosen; set requirements_extras or requirements_groups",))
    name, extras, groups, _ = picked
    said = ", ".join([*(f"extra {e}" for e in extras), *(f"group {g}" for g in groups)])
    others = [n for n, e, g, _ in found if (e, g) != (extras, groups)]
    overrides = tuple((k, v) for k, v in (("requirements_extras", list(extras)), ("requirements_groups", list(groups)))
                      if v)
    return InstalledSets(extras, groups, (f"{name} installs {lock} with its {said}: the image does too"
                                          + (f" (the GPU build's; {', '.join(others)} installs others)" if others else ""),),
                         overrides, name)


def _requirements_file(directory: Path, given: Given) -> tuple[str | None, list[str]]:
    """The requirements file the image installs: the config's, else requirements.txt, else another tool's lock."""
    requirements = given.data.get("requirements") if isinstance(given.data.get("requirements"), str) else None
    lock = found_in(directory)
    if "requirements" not in given and (directory / REQUIREMENTS).is_file():
        return REQUIREMENTS, ([f"{lock} is here too: the image installs {REQUIREMENTS}; `requirements: {lock}` installs "
                               "exactly the lock's packages instead"] if lock else [])
    if "requirements" not in given and lock:
        return lock, []
    return requirements, []


@dataclass(frozen=True)
class Pip:
    """The config's pip entries as inference sets them."""

    entries: tuple[str, ...]  # what autopackage adds to the image's packages; () where the config sets pip
    notes: tuple[str, ...]
    overrides: tuple[tuple[str, Any], ...]


def pip_entries(given: Given, extra: Sequence[tuple[str, str]]) -> Pip:
    """The requirements found to add (declared dependencies, imports), once each; where the config sets pip, they are
    named instead, and left out."""
    pip = list(dict.fromkeys(t for t, _ in extra))
    if pip and "pip" in given:
        listed = {canonicalize_name(Requirement(t).name) for t in config_pip(given)}
        left = [t for t in pip if not parses(t) or canonicalize_name(Requirement(t).name) not in listed]
        notes = (f"the config sets pip ({given.where['pip']}), so these requirements found here are not installed: "
                 f"{', '.join(left)}; add them to it",) if left else ()
        return Pip((), notes, ())
    return Pip(tuple(pip), (), (("pip", pip),) if pip else ())
