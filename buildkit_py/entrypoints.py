"""The entry point a trainer repository declares, read without running anything: a Dockerfile's ENTRYPOINT/CMD (exec
or shell form, `python -u`, through `sh -c`), the submit commands of its scripts, Makefiles, READMEs and notebooks
(`gcloud ... --module-name trainer.train`, `--python-module`, `python-module=`, `script=`), and Python that calls the
Vertex AI SDK (`python_module_name=`, `"python_module":`, `script_path=`). Each found with where (file:line); only a
module or script that is a file of the directory counts."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .dockerfile_text import exec_form, instructions
from .errors import shown_name

MAX_FILES = 200  # files of each kind read
MAX_BYTES = 1 << 20  # of each
# Dockerfile-like names: Dockerfile, Dockerfile.gpu, trainer.dockerfile, train.Dockerfile, Containerfile.
_DOCKERFILE = re.compile(r"(?:Dockerfile|dockerfile|Containerfile)(?:\.[\w.-]+)?|[\w.-]+\.(?:Dockerfile|dockerfile)", re.ASCII)
DOCKERFILE_FOLDERS = ("", "docker", "dockerfiles", "trainer", "training", "train")
# A Dockerfile for serving or an API runs no trainer.
_NOT_TRAINING = re.compile(r"serv|predict|infer|deploy|api|app\b|web|notebook|jupyter", re.IGNORECASE)
_FROM_PYTHON = re.compile(r"(?:--platform=\S+\s+)?(?:[\w.:-]+/)*(?:library/)?python:(3\.[0-9]+)\b", re.ASCII)
_PYTHON = re.compile(r"(?:.*/)?python(?:[23](?:\.[0-9]+)?)?", re.ASCII)
_PYTHON_OPTION_WITH_VALUE = {"-X", "-W", "-Q"}
_SEPARATORS = re.compile(r"\s*(?:&&|\|\||;)\s*")
_MODULE = r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
_SUBMIT_MODULE = re.compile(r"(?:--module[-_]name|--python[-_]module|python-module)[= ]+['\"]?" + _MODULE, re.ASCII)
_SUBMIT_SCRIPT = re.compile(r"(?:(?<=[,\s])script=|--script[= ]+)['\"]?([\w./-]+\.py)\b", re.ASCII)
_SDK_MODULE = re.compile(r"(?:python_module_name\s*=\s*|['\"]python_module['\"]\s*:\s*)['\"]" + _MODULE + "['\"]", re.ASCII)
_SDK_SCRIPT = re.compile(r"script_path\s*=\s*['\"]([\w./-]+\.py)['\"]", re.ASCII)


@dataclass(frozen=True)
class Declared:
    """A module or script the repository runs as its trainer, and where it says so."""

    module: str | None
    script: str | None
    args: tuple[str, ...]
    where: str  # "Dockerfile.gpu:14"
    kind: str  # "dockerfile" | "submit"
    also: tuple[str, ...] = ()  # what the command runs besides the trainer (`dvc pull`): not in the generated image
    python: tuple[str, str] | None = None  # the Python its FROM python:X.Y names, and where
    apt: tuple[str, ...] = ()  # the packages its final stage's apt-get install lines name
    env: tuple[tuple[str, str], ...] = ()  # its final stage's ENV that a generated image can take

    @property
    def name(self) -> str:
        return f"module {self.module}" if self.module else f"script {self.script}"

    @property
    def trainer(self) -> dict:
        value: dict = {"module": self.module} if self.module else {"script": self.script}
        return value | ({"args": list(self.args)} if self.args else {})


def _files(directory: Path, folders: tuple[str, ...], match: Callable[[str], bool]) -> Iterator[Path]:
    seen = 0
    for folder in folders:
        base = directory / folder if folder else directory
        try:
            entries = sorted(base.iterdir()) if base.is_dir() and not base.is_symlink() else []
        except OSError:
            continue
        for path in entries:
            if seen >= MAX_FILES:
                return
            # A link may point out of the directory; a FIFO would block the read.
            if match(path.name) and not path.is_symlink() and path.is_file():
                seen += 1
                yield path


def _text(path: Path) -> str:
    try:
        with path.open("rb") as f:  # a stray byte does not hide what the file declares
            return f.read(MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def _words(arguments: str) -> list[str] | None:
    """Exec form as JSON gives it; shell form as `/bin/sh -c TEXT` runs it."""
    return exec_form(arguments) if arguments.startswith("[") else ["/bin/sh", "-c", arguments]


def _python_call(words: list[str]) -> tuple[str | None, str | None, list[str]] | None:
    """(module, script, args) of `python [options] -m MODULE ARGS` or `python [options] SCRIPT ARGS`."""
    if words and words[0] == "exec":
        words = words[1:]
    if not words or not _PYTHON.fullmatch(words[0]):
        return None
    i = 1
    while i < len(words) and words[i].startswith("-") and words[i] != "-m":
        i += 2 if words[i] in _PYTHON_OPTION_WITH_VALUE else 1
    if i + 1 < len(words) and words[i] == "-m":
        return words[i + 1], None, words[i + 2:]
    if i < len(words) and words[i].endswith(".py"):
        return None, words[i], words[i + 1:]
    return None


def _command(words: list[str]) -> tuple[tuple[str | None, str | None, list[str]] | None, list[str]]:
    """The trainer call of a command and what else it runs: `sh -c "dvc pull && python src/train.py"`."""
    if len(words) >= 3 and Path(words[0]).name in ("sh", "bash") and re.fullmatch(r"-[a-z]*c", words[1]):
        try:
            inner = shlex.split(words[2])
        except ValueError:
            inner = []
        if len(inner) >= 3 and Path(inner[0]).name in ("sh", "bash") and re.fullmatch(r"-[a-z]*c", inner[1]):
            return _command(inner)  # CMD sh -c "...": the shell form's own shell runs another
        others, found = [], None
        for part in _SEPARATORS.split(words[2]):
            try:
                parsed = shlex.split(part)
            except ValueError:
                continue
            call = _python_call(parsed)
            if call is not None:
                found = call
            elif parsed and parsed[0] not in ("cd", "set", "export", "echo"):
                others.append(" ".join(parsed)[:80])
        return found, others
    return _python_call(words), []


_APT_INSTALL = re.compile(r"\bapt(?:-get)?\s+(?:-\S+\s+)*install\s+([^&;|]*)", re.ASCII)
_APT_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]{1,127}", re.ASCII)
# What the generated image installs its own way (its Python, pip, uv) or needs no package for.
_APT_LEFT = re.compile(r"python[0-9.]*(?:-.*)?|pip|.*-pip|curl|wget|ca-certificates|software-properties-common|gnupg.*|"
                       r"apt-utils|lsb-release|sudo", re.ASCII)
# ENV the generated image sets itself, or that would point its interpreter elsewhere.
_ENV_LEFT = re.compile(r"PATH|PYTHON.*|LD_LIBRARY_PATH|VIRTUAL_ENV|HOME|LANG|LC_.*|DEBIAN_FRONTEND|PIP_.*|CONDA.*|"
                       r"NVIDIA_.*|CUDA_.*", re.ASCII)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}", re.ASCII)


def _apt_packages(arguments: str) -> list[str]:
    """The packages `apt-get install` lines name (options, pinned versions and the image's own Python left out)."""
    found = []
    for match in _APT_INSTALL.finditer(arguments):
        for word in match.group(1).split():
            name = word.split("=")[0]
            if not word.startswith("-") and _APT_NAME.fullmatch(name) and not _APT_LEFT.fullmatch(name):
                found.append(name)
    return found


def _env(arguments: str) -> dict[str, str]:
    """ENV K=V ... (or the old ENV K V) with plain values: no variable to expand, nothing the image sets itself."""
    try:
        words = shlex.split(arguments)
    except ValueError:
        return {}
    pairs = [w.partition("=")[::2] for w in words] if all("=" in w for w in words) else \
        [(words[0], " ".join(words[1:]))] if len(words) >= 2 else []
    return {k: v for k, v in pairs if _ENV_NAME.fullmatch(k) and not _ENV_LEFT.fullmatch(k) and "$" not in v
            and "\n" not in v and len(v) <= 1000}


def _in_directory(path: str, workdir: str, is_script: Callable[[str], bool]) -> str | None:
    """The directory's file that a path in the image names: the longest tail of it that is a file here (the image
    copies the directory to its work directory, or a part of it to another)."""
    full = path if path.startswith("/") else f"{workdir.rstrip('/')}/{path}"
    parts = [p for p in full.split("/") if p and p != "."]
    for i in range(len(parts)):
        candidate = "/".join(parts[i:])
        if is_script(candidate):
            return candidate
    return None


def dockerfile_entries(directory: Path, is_module: Callable[[str], bool],
                       is_script: Callable[[str], bool]) -> Iterator[Declared]:
    """The trainer each training Dockerfile's final stage runs (ENTRYPOINT + CMD)."""
    for path in _files(directory, DOCKERFILE_FOLDERS, lambda n: bool(_DOCKERFILE.fullmatch(n))):
        rel = path.relative_to(directory).as_posix()
        if _NOT_TRAINING.search(path.name):
            continue
        entrypoint = cmd = python = None
        workdir = "/"
        apt: list[str] = []
        env: dict[str, str] = {}
        for instruction in instructions(_text(path)):
            line, keyword, arguments = instruction.line, instruction.keyword, instruction.arguments
            if keyword == "FROM":
                entrypoint, cmd, workdir, apt, env = None, None, "/", [], {}
                found = _FROM_PYTHON.match(arguments)
                python = (found.group(1), f"{shown_name(rel)}:{line}") if found else None
            elif keyword == "RUN":
                apt += _apt_packages(arguments)
            elif keyword == "ENV":
                env.update(_env(arguments))
            elif keyword == "WORKDIR":
                workdir = arguments if arguments.startswith("/") else f"{workdir.rstrip('/')}/{arguments}"
            elif keyword == "ENTRYPOINT":
                # the builder resets an inherited CMD (unknown here: None), not one this stage set
                entrypoint = (line, _words(arguments))
            elif keyword == "CMD":
                cmd = (line, _words(arguments))
        command = (entrypoint[1] or []) if entrypoint else []
        if cmd and cmd[1] and not (entrypoint and entrypoint[1] and entrypoint[1][:1] == ["/bin/sh"]):
            command = command + cmd[1]
        line = entrypoint[0] if entrypoint else cmd[0] if cmd else 0
        call, others = _command(command)
        if call is None:
            continue
        module, script, args = call
        if module is not None and not is_module(module):
            continue
        if script is not None:
            script = _in_directory(script, workdir, is_script)
            if script is None:
                continue
        if any("$" in a for a in args):  # the shell expanded these; a job passes its args as they are
            others.append(f"arguments with shell variables ({' '.join(args)[:80]}) are left out")
            args = []
        yield Declared(module, script, tuple(args), f"{shown_name(rel)}:{line}", "dockerfile", tuple(others), python,
                       tuple(dict.fromkeys(apt)), tuple(env.items()))


def submitted_entries(directory: Path, is_module: Callable[[str], bool],
                      is_script: Callable[[str], bool]) -> Iterator[Declared]:
    """Modules and scripts that the directory's scripts, Makefiles, READMEs, notebooks and Python submit."""
    def text_file(name: str) -> bool:
        return name.endswith((".sh", ".md", ".ipynb", ".py", ".yaml", ".yml", ".cfg", ".txt")) or name in ("Makefile",
                                                                                                             "makefile")

    for path in _files(directory, ("", *(p.name for p in _folders(directory))), text_file):
        rel = path.relative_to(directory).as_posix()
        text = _text(path)
        patterns = ((_SUBMIT_MODULE, True), (_SUBMIT_SCRIPT, False), (_SDK_MODULE, True), (_SDK_SCRIPT, False))
        for pattern, module in patterns:
            for match in pattern.finditer(text):
                name = match.group(1)
                if name.endswith(".py") and module:
                    continue
                if (is_module(name) if module else is_script(name)):
                    line = text.count("\n", 0, match.start()) + 1
                    yield Declared(name if module else None, None if module else name, (), f"{shown_name(rel)}:{line}", "submit")


def _folders(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
                      and not (p / "pyvenv.cfg").exists())[:MAX_FILES]
    except OSError:
        return []


def choose(found: list[Declared]) -> tuple[Declared | None, list[Declared]]:
    """The declaration the repository means, and the others: the first kind that declares any (a Dockerfile before a
    submit command); among several of that kind naming different trainers, the ones a training file names (train in
    its name); (None, candidates) when the repository itself stays ambiguous."""
    for kind in ("dockerfile", "submit"):
        of_kind = [d for d in found if d.kind == kind]
        if not of_kind:
            continue
        distinct = {d.name for d in of_kind}
        if len(distinct) > 1:
            training = [d for d in of_kind if "train" in d.where.split(":")[0].lower()]
            if len({d.name for d in training}) == 1:
                of_kind = training
            else:
                return None, of_kind
        chosen = of_kind[0]
        return chosen, [d for d in found if d.name != chosen.name]
    return None, []
