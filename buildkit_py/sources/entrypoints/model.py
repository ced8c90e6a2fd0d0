"""What the readers of commands find: a call of a Python entry, a step of a command, a declaration of how the
repository runs its trainer (where it was found, how strongly), and the context they read in."""


from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ...patterns import lazy_pattern

MAX_FILES = 200  # files of each kind read


MAX_BYTES = 1 << 20  # of each


MAX_FOLLOW = 4  # scripts followed inside scripts


MAX_COMMAND_BYTES = 8192  # a kept command as JSON: half of what the image's ENTRYPOINT line may hold, for its args


WORKDIR = "/app"  # where the generated image lays the trainer directory out (pipeline/plan/model.py's WORKDIR)


SAYS_TRAIN = lazy_pattern(r"train|fit|finetun|task", re.IGNORECASE)


# What a name says that makes it a second choice beside a training one: tuning, a local try, an evaluation.
SIDE = lazy_pattern(r"tun|hp|hyper|sweep|local|eval|test|debug|predict|serv|infer|export|preprocess|prepare|download|"
                   r"upload|bench|demo|example|deploy|submit|pipeline|setup|client|util", re.IGNORECASE)


SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash"}


DOCKER_BUILD_FILE = ("-f", "--file")


@dataclass(frozen=True)
class Call:
    """A Python entry a command runs: a module (`python -m`), a script (`python PATH`), or a console script's function;
    its arguments (None where only running tells a word), and the distributed launcher it runs under."""

    module: str | None
    script: str | None
    args: tuple[str | None, ...]
    where: str
    function: str | None = None
    launcher: str | None = None
    console_script: str | None = None

    @property
    def name(self) -> str:
        if self.function:
            return f"module {self.module}, function {self.function}"
        return f"module {self.module}" if self.module else f"script {self.script}"


@dataclass(frozen=True)
class Step:
    """One simple command of what a repository runs, as `follow` reads it: kind python (a Call), setup (left out beside
    one Python entry), data (moves data; kept), script (followed: its steps are `inner`), other."""

    kind: str
    shown: str  # the command as a note names it
    where: str
    call: Call | None = None
    inner: tuple[Step, ...] = ()
    conditional: bool = False
    env: tuple[tuple[str, str], ...] = ()  # `export K=V` with a plain value, before the trainer
    changes: tuple[str, ...] = ()  # what the generated image runs differently, each said
    edits: tuple[tuple[int, int, str], ...] = ()  # (start, end, new text) in the text the step was read from
    inner_text: str | None = None  # a script step's text (a file's, or the `sh -c` word's value) its inner steps are in
    target: tuple[int, int, str] | None = None  # where that text is named in this step's text, and how ("c" | "file")


@dataclass(frozen=True)
class Declared:
    """A trainer the repository declares, where and how it says so, and what the command needs of the image."""

    module: str | None
    script: str | None
    args: tuple[str, ...]
    where: str  # "Dockerfile.gpu:14"
    kind: str  # the evidence: "dockerfile" | "job" | "submit" | "script" | "docs"
    also: tuple[str, ...] = ()  # what the command runs besides the trainer and is left out, each said
    python: tuple[str, str] | None = None  # the Python its FROM python:X.Y names, and where
    apt: tuple[str, ...] = ()  # the packages its final stage's apt-get install lines name
    env: tuple[tuple[str, str], ...] = ()  # its final stage's ENV (and the command's exports) a generated image can take
    function: str | None = None  # a console script's function
    command: tuple[str, ...] | None = None  # the repository's own command, kept (not one Python entry)
    how: str = ""  # how it was found: "through sh -c, poetry run"
    rank: int = 50  # lower: stronger evidence
    file_says_train: bool = False  # the file's name (or stage, or Make target) says it trains
    changes: tuple[str, ...] = ()  # what the kept command runs differently from the repository's
    launcher: str | None = None
    # The arguments an ENTRYPOINT gives the trainer itself: they stay, before the job's (which replace CMD's, args)
    fixed: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        if self.command is not None and self.module is None and self.script is None:
            return f"command {shlex.join(self.command)[:120]}"
        if self.function:
            return f"module {self.module}, function {self.function}"
        return f"module {self.module}" if self.module else f"script {self.script}"

    @property
    def trainer(self) -> dict:
        value: dict = {}
        if self.command is not None:
            value["command"] = list(self.command)
        elif self.fixed:  # the image's interpreter, in the work directory, as `command` runs
            value["command"] = ["python", *(["-m", self.module] if self.module else [self.script or ""]), *self.fixed]
        if self.module:
            value["module"] = self.module
        elif self.script:
            value["script"] = self.script
        if self.function:
            value["function"] = self.function
        return value | ({"args": list(self.args)} if self.args else {})

    @property
    def flag(self) -> str:
        """The one flag that picks this candidate."""
        if self.command is not None:
            return f"trainer: {{command: {json.dumps(list(self.command))}}} in buildkit.yaml"
        if self.function:
            return f"--module {self.module} (and trainer.function: {self.function} in buildkit.yaml)"
        return f"--module {self.module}" if self.module else f"--script {self.script}"


@dataclass(frozen=True)
class Evidence:
    """What the place a command is found in says of it: its kind (dockerfile, job, submit, script, docs), its rank
    (lower is stronger: `choose` ranks by it) and whether the file's name says it trains."""

    kind: str
    rank: int
    says_train: bool = False


@dataclass(frozen=True)
class SetAside:
    """A command seen that names no trainer of this directory, and why."""

    where: str
    what: str
    why: str


@dataclass
class Context:
    """What following a command needs to know of the directory."""

    directory: Path
    is_module: Callable[[str], bool]
    is_script: Callable[[str], bool]
    console_scripts: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (module, function)
    set_aside: list[SetAside] = field(default_factory=list)


def text_of(path: Path) -> str:
    try:
        with path.open("rb") as f:  # a stray byte does not hide what the file declares
            return f.read(MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def files_in(directory: Path, folders: tuple[str, ...], match: Callable[[str], bool]) -> Iterator[Path]:
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


def folders_in(directory: Path) -> list[Path]:
    """The folders that may declare a trainer: not hidden ones, virtual environments, or a build's metadata (an
    .egg-info's SOURCES.txt lists every file of the package, which would read as commands running each)."""
    try:
        return sorted(p for p in directory.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
                      and not p.name.endswith(".egg-info") and not (p / "pyvenv.cfg").exists())[:MAX_FILES]
    except OSError:
        return []


def in_directory(path: str, workdir: str, exists: Callable[[str], bool]) -> str | None:
    """The directory's file that a path in an image names: the longest tail of it that is one here (the image copies
    the directory to its work directory, or a part of it to another)."""
    full = path if path.startswith("/") else f"{workdir.rstrip('/')}/{path}"
    parts = [p for p in full.split("/") if p and p != "."]
    if ".." in parts:
        return None
    for i in range(len(parts)):
        candidate = "/".join(parts[i:])
        if exists(candidate):
            return candidate
    return None
