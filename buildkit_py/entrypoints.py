"""How a trainer repository runs its trainer, read without running anything. Every place a repository writes a command
is read by one reader (sources/shell.py) and one interpreter of what the command runs (`follow`): a Dockerfile's
ENTRYPOINT/CMD, job config files (`containerSpec.command`/`args`, `pythonPackageSpec`), pipeline component specs,
`cloudbuild.yaml` steps, shell scripts, Makefile recipes, `tasks.py`/`noxfile.py`, README and other markdown code blocks,
notebook cells, and Python submit code (Vertex AI SDK calls, job dicts). Wrappers are seen through (`sh -c`, `bash -lc`,
`conda run`, `uv run`, `poetry run`, `exec`, `env K=V`, `nohup`, `time`, `python -u`), a script the command runs is
followed into (its `"$@"` joined to the arguments passed), console scripts resolve through the package's entry points,
and distributed launchers (`torchrun`, `accelerate launch`, `deepspeed`) are kept as part of the entry.

Each candidate keeps where it was found (file:line) and how; `choose` ranks them by evidence. A command that is one
Python entry becomes a module or script; one that is more (a chain of stages, a data step before the trainer, a launcher,
a script with several stages, no Python at all) is kept as the repository's command, changed only where it cannot work
in the generated image (a conda environment, `uv run`/`poetry run` without the tool, a path laid out elsewhere)."""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from .dockerfile_text import exec_form, instructions
from .errors import shown_name
from .patterns import lazy_pattern
from .sources.shell import Script, ShellSyntaxError, Simple, Word, read

MAX_FILES = 200  # files of each kind read
MAX_BYTES = 1 << 20  # of each
MAX_FOLLOW = 4  # scripts followed inside scripts
MAX_COMMAND_BYTES = 8192  # a kept command as JSON: half of what the image's ENTRYPOINT line may hold, for its args
WORKDIR = "/app"  # where the generated image lays the trainer directory out (pipeline/plan/model.py's WORKDIR)
# Dockerfile-like names: Dockerfile, Dockerfile.gpu, trainer.dockerfile, train.Dockerfile, Containerfile.
_DOCKERFILE = lazy_pattern(r"(?:Dockerfile|dockerfile|Containerfile)(?:\.[\w.-]+)?|[\w.-]+\.(?:Dockerfile|dockerfile)", re.ASCII)
DOCKERFILE_FOLDERS = ("", "docker", "dockerfiles", "dockerfile", "trainer", "training", "train", "container", "containers",
                      "build", "deploy", "infra", "ci")
# A Dockerfile (or a source file's name) for serving or an API runs no trainer.
_NOT_TRAINING = lazy_pattern(r"serv|predict|infer|deploy|api|app\b|web|notebook|jupyter|dev\b|test", re.IGNORECASE)
_SAYS_TRAIN = lazy_pattern(r"train|fit|finetun|task", re.IGNORECASE)
# What a name says that makes it a second choice beside a training one: tuning, a local try, an evaluation.
_SIDE = lazy_pattern(r"tun|hp|hyper|sweep|local|eval|test|debug|predict|serv|infer|export|preprocess|prepare|download|"
                   r"upload|bench|demo|example|deploy|submit|pipeline|setup|client|util", re.IGNORECASE)
_FROM_PYTHON = lazy_pattern(r"(?:--platform=\S+\s+)?(?:[\w.:-]+/)*(?:library/)?python:(3\.[0-9]+)\b", re.ASCII)
_PYTHON = lazy_pattern(r"python(?:[23](?:\.[0-9]+)?)?", re.ASCII)
_PYTHON_OPTION_WITH_VALUE = {"-X", "-W", "-Q"}
_MODULE_NAME = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*", re.ASCII)

# Wrappers that run the rest of the command as it is: (options that take a value).
_PASS_THROUGH = {"exec": (), "command": (), "builtin": (), "nohup": (), "time": (), "nice": ("-n",), "ionice": ("-c", "-n"),
                 "stdbuf": (), "setsid": (), "chrt": (), "unbuffer": (), "catchsegv": (), "tini": (), "dumb-init": (),
                 "xvfb-run": ("-s", "--server-args", "-n", "--server-num", "-e", "--error-file", "-f", "--auth-file",
                              "-p", "--xauth-protocol"), "sudo": ("-u", "-g"), "gosu": (), "su-exec": (),
                 "timeout": ("-s", "--signal", "-k", "--kill-after"), "numactl": (), "taskset": (), "unshare": ()}
_TAKES_FIRST_ARG = {"gosu", "su-exec", "timeout", "chrt", "taskset"}  # a user, a duration, a mask before the command
# Tools that run a command in an environment of their own: (subcommand, options that take a value), and what the
# generated image has in its place (its own venv on PATH).
_ENV_RUNNERS = {
    "conda": ("run", {"-n", "--name", "-p", "--prefix", "--cwd", "--debug-wrapper-scripts"}),
    "mamba": ("run", {"-n", "--name", "-p", "--prefix", "--cwd"}),
    "micromamba": ("run", {"-n", "--name", "-p", "--prefix", "--cwd", "-a", "--attach"}),
    "uv": ("run", {"--with", "--with-requirements", "--with-editable", "--extra", "--group", "--only-group", "--python",
                   "-p", "--project", "--directory", "--package", "--env-file", "--index", "--index-url",
                   "--extra-index-url", "--no-group", "--no-extra", "--config-file"}),
    "poetry": ("run", {"-C", "--directory", "-P", "--project"}),
    "pipenv": ("run", set()),
    "pdm": ("run", {"-p", "--project", "-v"}),
    "hatch": ("run", {"-e", "--env"}),
    "rye": ("run", set()),
    "pixi": ("run", {"-e", "--environment", "--manifest-path"}),
}
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash"}
_SHELL_OPTIONS_WITH_VALUE = {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}
# Distributed launchers and the options of theirs that take no value.
_LAUNCHERS = {"torchrun": {"--standalone", "--no_python", "--no-python", "-m", "--module", "--run_path", "--run-path"},
              "torch.distributed.run": {"--standalone", "--no_python", "--no-python", "-m", "--module", "--run_path",
                                        "--run-path"},
              "torch.distributed.launch": {"--use_env", "--use-env", "-m", "--module", "--no_python", "--no-python"},
              "accelerate": {"--multi_gpu", "--multi-gpu", "--cpu", "--tpu", "--use_deepspeed", "--use_fsdp",
                             "--use_megatron_lm", "-m", "--module", "--no_python", "--debug", "-q", "--quiet"},
              "accelerate.commands.launch": {"--multi_gpu", "--cpu", "-m", "--module", "--no_python"},
              "deepspeed": {"--no_python", "--no_local_rank", "--module", "--autotuning", "--force_multi",
                            "--enable_each_rank_log", "--bind_cores_to_rank", "--no_ssh_check", "--elastic_training"},
              "deepspeed.launcher.runner": {"--no_python", "--module", "--no_local_rank"}}
# Commands the generated image does at build time, or that change nothing a trainer needs (install steps, the code
# fetched again, directories, messages, guards): beside one Python entry they are left out, each named.
_SETUP = frozenset({"pip", "pip3", "apt", "apt-get", "yum", "dnf", "apk", "git", "cd", "chmod", "chown", "echo", "printf",
                    "export", "set", "unset", "source", ".", "mkdir", "rm", "ls", "pwd", "true", "false", ":", "sleep",
                    "wandb", "huggingface-cli", "nvidia-smi", "which", "whoami", "date", "cat", "test", "[", "[[", "exit",
                    "ulimit", "trap", "ln", "touch", "alias", "shopt", "hostname", "id", "env", "pushd", "popd", "tee",
                    "wait", "nvcc", "conda", "mamba", "micromamba", "poetry", "uv", "pipenv", "pdm", "hatch", "pixi",
                    "activate", "deactivate", "umask", "readonly", "local", "declare", "typeset", "shift", "return",
                    "sync", "df", "du", "free", "lscpu", "ps", "kill", "history", "clear", "reset", "read", "getopts",
                    "printenv", "logger", "gcloud", "npm", "pip-compile", "sed", "awk", "grep", "head", "tail", "wc",
                    "sort", "uniq", "basename", "dirname", "realpath", "readlink", "find", "xargs", "type", "hash"})
# gcloud's subcommands that fetch or put data (not setup): gcloud storage cp, gcloud alpha storage ...
_GCLOUD_DATA = frozenset({"storage"})
# Steps that move data in or out around the trainer: kept with it.
_DATA = frozenset({"gsutil", "aws", "dvc", "wget", "curl", "cp", "mv", "rsync", "tar", "unzip", "gunzip", "kaggle",
                   "gcsfuse", "az", "rclone", "s5cmd", "azcopy", "bq", "hf", "git-lfs"})
_SUBMIT_MODULE = ("--module-name", "--module_name", "--python-module", "--python_module")
_SUBMIT_SCRIPT = ("--script",)
_WORKER_POOL = lazy_pattern(r"(?:^|,)(python-module|script)=([^,]+)")
_DOCKER_BUILD_FILE = ("-f", "--file")


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


def _text(path: Path) -> str:
    try:
        with path.open("rb") as f:  # a stray byte does not hide what the file declares
            return f.read(MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


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


def _folders(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
                      and not (p / "pyvenv.cfg").exists())[:MAX_FILES]
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


# --- what one command runs -------------------------------------------------------------------------------------------

def _known(words: list[Word]) -> list[str]:
    return [w.value if w.value is not None else w.raw for w in words]


def _python_call(values: list[str | None], ctx: Context, cwd: str, where: str) -> Call | str | None:
    """The Call of `python [options] -m MODULE ARGS` / `python [options] SCRIPT ARGS`; a string saying why a Python
    command names no trainer here; None: not a Python command."""
    if not values or values[0] is None or not _PYTHON.fullmatch(PurePosixPath(values[0]).name):
        return None
    i = 1
    while i < len(values) and (values[i] or "").startswith("-") and values[i] not in ("-m", "-c", "-"):
        i += 2 if values[i] in _PYTHON_OPTION_WITH_VALUE else 1
    if i >= len(values):
        return "an interactive Python (the job's arguments would name the script)"
    if values[i] == "-c":
        return "python -c runs inline code"
    if values[i] == "-m":
        module = values[i + 1] if i + 1 < len(values) else None
        if module is None:
            return "python -m with a module only running tells"
        return _module_call(module, values[i + 2:], ctx, where)
    target = values[i]
    if target is None:
        return "a script only running tells"
    script = in_directory(target, cwd, ctx.is_script)
    if script is None:
        return f"{target} is not a file of this directory"
    if script.rsplit("/", 1)[-1] == "setup.py":
        return None  # python setup.py install|sdist: packaging (a setup step), never the trainer
    return Call(None, script, tuple(values[i + 1:]), where)


def _module_call(module: str, args: list[str | None], ctx: Context, where: str, launcher: str | None = None) -> Call | str:
    if module in _LAUNCHERS:
        return _launched(module, args, ctx, where)
    if not _MODULE_NAME.fullmatch(module):
        return f"{module} is not a module name"
    if not ctx.is_module(module):
        return f"module {module} is not in this directory"
    return Call(module, None, tuple(args), where, launcher=launcher)


def _launched(launcher: str, values: list[str | None], ctx: Context, where: str,
              raws: list[str] | None = None) -> Call | str:
    """The entry a distributed launcher starts: its first word that is not one of its options (an option's value may be
    what only running tells: --nnodes=$NNODES)."""
    flags = _LAUNCHERS[launcher]
    module = False
    i = 0
    if launcher == "accelerate":
        if not values or values[0] != "launch":
            return "accelerate without launch"
        i = 1
    while i < len(values):
        word = values[i]
        if word is None and raws is not None and i < len(raws) and raws[i].startswith("-"):
            word = raws[i]
        if word is None:
            return f"{launcher} with a word only running tells"
        if word == "--":
            i += 1
            break
        if not word.startswith("-"):
            break
        if word in ("-m", "--module"):
            module = True
        if "=" in word or word in flags:
            i += 1
        else:
            i += 2
    if i >= len(values) or values[i] is None:
        return f"{launcher} with no script"
    target, rest = values[i], values[i + 1:]
    name = "torchrun" if launcher.startswith("torch") else launcher.split(".")[0]
    if module or (not target.endswith(".py") and ctx.is_module(target)):
        if not ctx.is_module(target):
            return f"module {target} is not in this directory"
        return Call(target, None, tuple(rest), where, launcher=name)
    script = in_directory(target, WORKDIR, ctx.is_script)
    if script is None:
        return f"{target} is not a file of this directory"
    return Call(None, script, tuple(rest), where, launcher=name)


@dataclass(frozen=True)
class _Unwrapped:
    start: int  # index of the first word of the command the wrappers run
    wrappers: tuple[str, ...]  # what was seen through
    changes: tuple[str, ...]  # the wrappers the generated image cannot run, each said
    env: tuple[tuple[str, str], ...]


def _unwrap(words: list[Word]) -> _Unwrapped:
    """Past the wrappers that run the rest of the command: exec, env K=V, nohup, time, conda run -n ENV, uv run, ..."""
    i = 0
    seen: list[str] = []
    changes: list[str] = []
    env: list[tuple[str, str]] = []
    while i < len(words):
        head = words[i].value
        if head is None:
            break
        name = PurePosixPath(head).name
        if name in _PASS_THROUGH:
            seen.append(name)
            takes = _PASS_THROUGH[name]
            i += 1
            first = name in _TAKES_FIRST_ARG
            while i < len(words) and (words[i].value or "").startswith("-"):
                option = words[i].value or ""
                i += 2 if option in takes else 1
                if option == "--":
                    break
            if first and i < len(words):
                i += 1
            continue
        if name == "env":
            i += 1
            while i < len(words):
                value = words[i].value or ""
                if value in ("-i", "--ignore-environment", "-"):
                    i += 1
                elif value in ("-u", "--unset"):
                    i += 2
                elif "=" in value and not value.startswith("="):
                    key, _, val = value.partition("=")
                    env.append((key, val))
                    i += 1
                else:
                    break
            seen.append("env")
            continue
        runner = _ENV_RUNNERS.get(name)
        if runner and i + 1 < len(words) and words[i + 1].value == runner[0]:
            subcommand, takes = runner
            j = i + 2
            while j < len(words) and (words[j].value or "").startswith("-"):
                option = words[j].value or ""
                j += 1 if "=" in option or option not in takes else 2
                if option == "--":
                    break
            if name == "hatch" and j < len(words) and ":" in (words[j].value or ""):
                j += 1 if (words[j].value or "").endswith(":") else 0
            seen.append(f"{name} {subcommand}")
            what = {"conda": "conda environment", "mamba": "conda environment", "micromamba": "conda environment"}
            changes.append(f"`{' '.join(_known(words[i:j]))}` is left out: the image has no "
                           f"{what.get(name, name + ' environment')}; its Python and packages are on PATH")
            i = j
            continue
        break
    return _Unwrapped(i, tuple(seen), tuple(changes), tuple(env))


def _console(values: list[str | None], ctx: Context, where: str) -> Call | None:
    head = values[0] if values else None
    if head is None:
        return None
    found = ctx.console_scripts.get(PurePosixPath(head).name)
    if found is None or "/" in head and not head.startswith(("/usr/local/bin/", "/opt/venv/bin/", "/usr/bin/")):
        return None
    return Call(found[0], None, tuple(values[1:]), where, function=found[1], console_script=PurePosixPath(head).name)


def _shell_script(path: str, ctx: Context) -> bool:
    """Is the directory's file `path` a shell script (by name or by its #! line)."""
    if path.endswith((".sh", ".bash")):
        return True
    head = _text(ctx.directory / path)[:200]
    return head.startswith("#!") and any(s in head.split("\n")[0] for s in ("sh", "bash"))


def _python_file(path: str, ctx: Context) -> bool:
    if path.endswith(".py"):
        return True
    head = _text(ctx.directory / path)[:200]
    return head.startswith("#!") and "python" in head.split("\n")[0]


def follow(script: Script, ctx: Context, source: str, *, cwd: str = WORKDIR, depth: int = 0,
           line_offset: int = 0) -> tuple[Step, ...]:
    """The steps of what a text runs, each command read through its wrappers into the Python entry, launcher, script
    or data step it is."""
    steps: list[Step] = []
    for simple in script.commands:
        step = _step(simple, ctx, source, cwd, depth, line_offset, script.text)
        if step.kind == "cd" and not simple.conditional:
            target = simple.words[1].value if len(simple.words) > 1 else None
            if target is not None:
                cwd = target if target.startswith("/") else f"{cwd.rstrip('/')}/{target}"
            step = replace(step, kind="setup")
        steps.append(step)
    return tuple(steps)


def _step(simple: Simple, ctx: Context, source: str, cwd: str, depth: int, line_offset: int, text: str) -> Step:
    where = f"{source}:{simple.line + line_offset}"
    unwrapped = _unwrap(list(simple.words))
    words = list(simple.words[unwrapped.start:])
    values = [w.value for w in words]
    shown = " ".join(_known(list(simple.words)))[:100]
    edits = ((simple.start, words[0].start, ""),) if unwrapped.changes and words else ()
    base = dict(shown=shown, where=where, conditional=simple.conditional, changes=unwrapped.changes, edits=edits)
    if not values or values[0] is None:
        return Step("other", **base)
    head = PurePosixPath(values[0]).name
    # sh -c TEXT [NAME ARGS...]: the text as that shell reads it
    if head in _SHELLS:
        i = 1
        command_text = None
        while i < len(values):
            option = values[i]
            if option is None or not option.startswith(("-", "+")):
                break
            i += 2 if option in _SHELL_OPTIONS_WITH_VALUE else 1
            if option.startswith("-") and "c" in option[1:] and not option.startswith("--"):
                command_text = i
                break
        if command_text is not None:
            if command_text >= len(values) or values[command_text] is None or depth >= MAX_FOLLOW:
                return Step("other", **base)
            name = values[command_text + 1] if len(values) > command_text + 1 else None
            args = values[command_text + 2:]
            try:
                inner_script = read(values[command_text] or "", args=list(args), name=name or "sh")
            except ShellSyntaxError as exc:
                ctx.set_aside.append(SetAside(where, shown, f"the shell text does not parse: {exc.message}"))
                return Step("other", **base)
            inner = follow(inner_script, ctx, source, cwd=cwd, depth=depth + 1, line_offset=line_offset + simple.line - 1)
            word = words[command_text]
            return Step("script", **base | {"inner": inner, "inner_text": inner_script.text,
                                              "target": (word.start, word.end, "c")})
        if i < len(values) and values[i] is not None:
            return _script_step(values[i], values[i + 1:], ctx, cwd, depth, base, head, words[i])
        return Step("other", **base)
    if head == "cd":
        return _cd_step(values, words, ctx, cwd, base)
    python = _python_call(values, ctx, cwd, where)
    if isinstance(python, str):
        ctx.set_aside.append(SetAside(where, shown, python))
        return Step("other", **base)
    if python is None and head in ("torchrun", "accelerate", "deepspeed") and len(values) > 1:
        python = _launched(head, values[1:], ctx, where, [w.raw for w in words[1:]])
        if isinstance(python, str):
            ctx.set_aside.append(SetAside(where, shown, python))
            return Step("other", **base)
    if python is None:
        python = _console(values, ctx, where)
    if python is not None:
        return Step("python", **base | {"edits": edits + _path_edits(words, cwd, ctx)}, call=python)
    if "/" in values[0] or values[0].endswith((".sh", ".py", ".bash")):
        return _script_step(values[0], values[1:], ctx, cwd, depth, base, None, words[0])
    if head == "gcloud" and len(values) > 1 and values[1] in _GCLOUD_DATA or head in _DATA:
        return Step("data", **base)
    if head in _SETUP:
        return Step("setup", **base)
    return Step("other", **base)


def _path_edits(words: list[Word], cwd: str, ctx: Context) -> tuple[tuple[int, int, str], ...]:
    """A path of the directory's file written as the repository's image lays it out, as the generated image does."""
    edits = []
    for word in words[1:]:
        value = word.value
        if value is None or "/" not in value or value.startswith("-") or word.raw != value:
            continue
        rel = in_directory(value, cwd, ctx.is_script)
        if rel is not None and value != rel and value != f"{WORKDIR}/{rel}" and \
                not (not value.startswith("/") and cwd.rstrip("/") == WORKDIR):
            edits.append((word.start, word.end, f"{WORKDIR}/{rel}"))
    return tuple(edits)


def _cd_step(values: list[str | None], words: list[Word], ctx: Context, cwd: str, base: dict) -> Step:
    """cd DIR: to where the generated image has that directory, else to its work directory."""
    target = values[1] if len(values) > 1 else None
    if target is None or len(words) < 2:
        return Step("cd", **base)
    if not target.startswith("/") or words[1].raw != target:
        return Step("cd", **base)  # relative: where the command itself goes (a folder it made, or one here)
    rel = in_directory(target, "/", lambda r: (ctx.directory / r).is_dir()) if target != "/" else None
    image = f"{WORKDIR}/{rel}" if rel else WORKDIR if target.rstrip("/") == cwd.rstrip("/") else None
    if image is None or image == target:
        return Step("cd", **base)
    change = f"`cd {target}` is `cd {image}`: the generated image lays the directory out under {WORKDIR}"
    return Step("cd", **base | {"changes": base["changes"] + (change,),
                                "edits": base["edits"] + ((words[1].start, words[1].end, image),)})


def _script_step(path: str, args: list[str | None], ctx: Context, cwd: str, depth: int, base: dict,
                 shell: str | None, word: Word) -> Step:
    """A script the command runs: a Python file of the directory is an entry; a shell script is followed into."""
    rel = in_directory(path, cwd, ctx.is_script)
    if rel is None:
        ctx.set_aside.append(SetAside(base["where"], base["shown"], f"{path} is not a file of this directory"))
        return Step("other", **base)
    if rel.rsplit("/", 1)[-1] == "setup.py":
        return Step("setup", **base)  # python setup.py install|sdist: packaging, never the trainer
    if shell is None and _python_file(rel, ctx):
        return Step("python", **base, call=Call(None, rel, tuple(args), base["where"]))
    if not (shell or _shell_script(rel, ctx)) or depth >= MAX_FOLLOW:
        return Step("other", **base)
    text = _text(ctx.directory / rel)
    try:
        script = read(text, args=list(args), name=rel)
    except ShellSyntaxError as exc:
        ctx.set_aside.append(SetAside(f"{shown_name(rel)}:{exc.line}", rel, f"the script does not parse: {exc.message}"))
        return Step("other", **base)
    inner = follow(script, ctx, shown_name(rel), cwd=cwd, depth=depth + 1)
    edits = base["edits"]
    if word.value != f"{WORKDIR}/{rel}" and shell is None:
        edits += ((word.start, word.end, f"{_interpreter(rel, ctx)} {WORKDIR}/{rel}"),)
    elif word.value != f"{WORKDIR}/{rel}":
        edits += ((word.start, word.end, f"{WORKDIR}/{rel}"),)
    return Step("script", **base | {"inner": inner, "shown": base["shown"] + f" (the script {shown_name(rel)})",
                                    "inner_text": script.text, "target": (word.start, word.end, "file"),
                                    "edits": edits})


def _interpreter(rel: str, ctx: Context) -> str:
    """The shell a script's #! line names (a file copied without its execute bit still runs)."""
    return _interpreter_of(_text(ctx.directory / rel)[:200])


def _flat(steps: tuple[Step, ...]) -> list[Step]:
    out: list[Step] = []
    for step in steps:
        if step.kind == "script" and step.inner:
            out += _flat(step.inner)
        else:
            out.append(step)
    return out


def _scripts(steps: tuple[Step, ...]) -> list[Step]:
    out: list[Step] = []
    for step in steps:
        if step.kind == "script":
            out += [step, *_scripts(step.inner)]
    return out


def _main_call(calls: list[Call]) -> Call:
    """The call among several that trains: one that says so, else the last."""
    training = [c for c in calls if _SAYS_TRAIN.search(c.module or c.script or "") and not _SIDE.search(c.module or c.script or "")]
    return training[-1] if training else calls[-1]


@dataclass(frozen=True)
class _Runs:
    """What a command that a container runs comes to: one Python entry, or the command kept."""

    call: Call | None
    keep: bool
    also: tuple[str, ...]
    changes: tuple[str, ...]
    how: tuple[str, ...]


def runs(steps: tuple[Step, ...]) -> _Runs | None:
    """One Python entry where the other steps are setup the image does at build time; else the command kept (a chain of
    stages, a data step, a launcher, a shell script that runs no Python of the directory); None: nothing runs."""
    flat = _flat(steps)
    calls = [s.call for s in flat if s.kind == "python" and s.call is not None]
    others = [s for s in flat if s.kind not in ("python", "setup")]
    changes = tuple(c for s in flat for c in s.changes)
    how = tuple(dict.fromkeys(w for s in steps for w in _how(s)))
    if len(calls) == 1 and not others and calls[0].launcher is None:
        setup = tuple(f"`{s.shown}` ({s.where})" for s in flat if s.kind == "setup" and s.shown.split(" ")[0] not in
                      ("echo", "printf", "cd", "export", "set", "true", ":", "[", "[[", "test", "exit"))
        return _Runs(calls[0], False, setup, changes, how)
    if not calls and not any(s.kind == "script" and s.target and s.target[2] == "file" for s in _scripts(steps)):
        return None  # no Python entry and no script of this directory: nothing here is what it runs
    return _Runs(_main_call(calls) if calls else None, True, (), changes, how)


def _how(step: Step) -> list[str]:
    out = []
    if step.kind == "script":
        head = step.shown.split(" ")[0]
        if head != "/bin/sh":  # a shell form's own shell says nothing
            out.append(f"through {PurePosixPath(head).name}" + (" -c" if step.target and step.target[2] == "c" else ""))
        for inner in step.inner:
            out += _how(inner)
    if step.call is not None and step.call.launcher:
        out.append(f"launched by {step.call.launcher}")
    if step.call is not None and step.call.console_script:
        out.append(f"the console script {step.call.console_script}")
    return out


# --- what the kept command is in the generated image ----------------------------------------------------------------

def _changed(steps: tuple[Step, ...]) -> bool:
    return any(s.changes or (s.kind == "script" and _changed(s.inner)) for s in steps)


def _all_changes(steps: tuple[Step, ...]) -> list[str]:
    out: list[str] = []
    for s in steps:
        out += s.changes
        if s.kind == "script":
            out += _all_changes(s.inner)
    return list(dict.fromkeys(out))


def _edit(text: str, steps: tuple[Step, ...]) -> str:
    """The text with each step's edits made; a script with changes inside runs as its edited text through the shell
    (`sh -c TEXT NAME ARGS`), so its arguments still reach it."""
    edits: dict[tuple[int, int], str] = {}
    for step in steps:
        script_changed = step.kind == "script" and step.inner_text is not None and _changed(step.inner)
        for start, end, new in step.edits:
            if not (script_changed and step.target and (start, end) == step.target[:2]):
                edits[(start, end)] = new
        if script_changed and step.target is not None:
            start, end, how = step.target
            inner = _edit(step.inner_text or "", step.inner)
            if how == "c":
                edits[(start, end)] = shlex.quote(inner)
            else:
                name = shlex.quote(PurePosixPath(text[start:end]).name or "sh")
                shell_head = step.shown.split(" ")[0] in _SHELLS or PurePosixPath(step.shown.split(" ")[0]).name in _SHELLS
                edits[(start, end)] = ("-c " if shell_head else "sh -c ") + shlex.quote(inner) + " " + name
    for (start, end), new in sorted(edits.items(), reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _kept_command(words: list[str], step: Step) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The repository's command (exec-form words, read as one step whose offsets are word indexes) as the generated
    image runs it, and the changes made: as written where nothing needs one."""
    changes = tuple(_all_changes((step,)))
    if not step.edits and not _changed((step,)):
        return tuple(words), changes
    replaced: dict[tuple[int, int], list[str]] = {(a, b): shlex.split(new) for a, b, new in step.edits}
    if step.kind == "script" and step.target is not None and _changed(step.inner):
        a, b, how = step.target
        inner = _edit(step.inner_text or "", step.inner)
        if how == "c":
            replaced[(a, b)] = [inner]
        else:  # the script as its edited text, through its shell, with the arguments it was given
            shell = [] if PurePosixPath(words[0]).name in _SHELLS and a > 0 else [_interpreter_of(inner)]
            replaced[(a, b)] = [*shell, "-c", inner, PurePosixPath(words[a]).name]
    out = list(words)
    for (a, b), new in sorted(replaced.items(), reverse=True):
        out[a:b] = new
    return tuple(out), changes


def _interpreter_of(text: str) -> str:
    """The shell a script's first (#!) line names."""
    return "bash" if "bash" in text.split("\n", 1)[0] else "sh"


# --- where commands are written --------------------------------------------------------------------------------------

def _words_of(arguments: str) -> tuple[list[str] | None, str | None]:
    """Exec form as JSON gives it; shell form as `/bin/sh -c TEXT` runs it: (words, the shell text)."""
    if arguments.startswith("["):
        return exec_form(arguments), None
    return ["/bin/sh", "-c", arguments], arguments


def _script_of(words: list[str]) -> Script:
    return Script(tuple([Simple(tuple(Word(w, i, i + 1, shlex.quote(w)) for i, w in enumerate(words)), 1)]), (), "")


def _from_command(words: list[str], ctx: Context, source: str, line: int, kind: str, rank: int, says_train: bool,
                  cwd: str = WORKDIR, extra: dict | None = None) -> Declared | None:
    """A candidate from a command a container runs (exec-form words)."""
    where = f"{source}:{line}"
    script = _script_of(words)
    steps = follow(script, ctx, source, cwd=cwd, line_offset=line - 1)
    found = runs(steps)
    if found is None:
        return None
    extra = extra or {}
    how = ", ".join(found.how)
    if not found.keep and found.call is not None:
        call = found.call
        args = tuple(a for a in call.args if a is not None)
        also = found.also
        if len(args) != len(call.args):
            also = (*also, "arguments only running tells are left out: "
                    + " ".join(a if a is not None else "?" for a in call.args)[:80])
        return Declared(call.module, call.script, args, where, kind, also, function=call.function, how=how, rank=rank,
                        file_says_train=says_train, changes=found.changes, **extra)
    command, changes = _kept_command(words, steps[0])
    if len(json.dumps(command)) > MAX_COMMAND_BYTES:  # an edited script too long to pass inline: run it as written
        command, changes = tuple(words), (*changes, "the changes above are not made: the edited script would be "
                                                    f"longer than {MAX_COMMAND_BYTES} bytes; it runs as written")
    command = _run_as_script(command, ctx, cwd)
    call = found.call
    return Declared(call.module if call else None, call.script if call else None, (), where, kind,
                    command=command, function=call.function if call else None, how=how, rank=rank,
                    file_says_train=says_train, changes=changes, launcher=call.launcher if call else None, **extra)


def entry_of(command: str | list[str], ctx: Context, source: str = "command", line: int = 1) -> Declared | None:
    """What a command a container runs comes to: text as a shell form runs it, words as an exec form does."""
    words = command if isinstance(command, list) else ["/bin/sh", "-c", command]
    return _from_command(words, ctx, source, line, "job", 40, False)


def _run_as_script(command: tuple[str, ...], ctx: Context, cwd: str) -> tuple[str, ...]:
    """A command whose first word is a shell script of the directory runs it through its shell, at the generated
    image's path (a file copied without its execute bit still runs)."""
    head = command[0] if command else ""
    rel = in_directory(head, cwd, ctx.is_script) if head and PurePosixPath(head).name not in _SHELLS else None
    if rel is None or not _shell_script(rel, ctx):
        return command
    return (_interpreter(rel, ctx), f"{WORKDIR}/{rel}", *command[1:])


def dockerfile_entries(directory: Path, ctx: Context, named: dict[str, str],
                       job_args: list[tuple[str, list[str]]]) -> Iterator[Declared]:
    """The trainer each training Dockerfile's final stage runs (ENTRYPOINT + CMD, or + the arguments a job config
    passes in CMD's place). named: Dockerfiles a build script, submit script or job config builds (path -> where)."""
    for path in _files(directory, DOCKERFILE_FOLDERS, lambda n: bool(_DOCKERFILE.fullmatch(n))):
        rel = path.relative_to(directory).as_posix()
        if _NOT_TRAINING.search(path.name) and rel not in named:
            continue
        entrypoint = cmd = python = None
        workdir = "/"
        stage = ""
        apt: list[str] = []
        env: dict[str, str] = {}
        for instruction in instructions(_text(path)):
            line, keyword, arguments = instruction.line, instruction.keyword, instruction.arguments
            if keyword == "FROM":
                entrypoint, cmd, workdir, apt, env = None, None, "/", [], {}
                found = _FROM_PYTHON.match(arguments)
                python = (found.group(1), f"{shown_name(rel)}:{line}") if found else None
                stage = arguments.split()[-1] if re.search(r"\s[Aa][Ss]\s", arguments) else ""
            elif keyword == "RUN":
                apt += _apt_packages(arguments)
            elif keyword == "ENV":
                env.update(_env(arguments))
            elif keyword == "WORKDIR":
                workdir = arguments if arguments.startswith("/") else f"{workdir.rstrip('/')}/{arguments}"
            elif keyword == "ENTRYPOINT":
                entrypoint = (line, _words_of(arguments))  # the builder resets an inherited CMD, not this stage's
            elif keyword == "CMD":
                cmd = (line, _words_of(arguments))
        words = list(entrypoint[1][0] or []) if entrypoint else []
        passed = None
        if entrypoint and entrypoint[1][1] is None and job_args:
            passed, given = job_args[0]  # a job's args replace CMD
            words += given
        elif cmd and cmd[1][0] and not (entrypoint and entrypoint[1][1] is not None):
            words += cmd[1][0]  # a shell-form ENTRYPOINT ignores CMD
        line = entrypoint[0] if entrypoint else cmd[0] if cmd else 0
        if not words:
            continue
        says_train = bool(_SAYS_TRAIN.search(path.name) or _SAYS_TRAIN.search(stage))
        rank = 10 if rel in named else 20 if says_train else 30
        declared = _from_command(words, ctx, shown_name(rel), line, "dockerfile", rank, says_train, workdir,
                                 {"python": python, "apt": tuple(dict.fromkeys(apt)), "env": tuple(env.items())})
        if declared is not None:
            if rel in named or passed:
                said = [f"built by {named[rel]}" if rel in named else "", f"its arguments from {passed}" if passed else ""]
                declared = replace(declared, how=", ".join(filter(None, [*said, declared.how])))
            yield declared


_APT_INSTALL = lazy_pattern(r"\bapt(?:-get)?\s+(?:-\S+\s+)*install\s+([^&;|]*)", re.ASCII)
_APT_NAME = lazy_pattern(r"[a-z0-9][a-z0-9+.-]{1,127}", re.ASCII)
# What the generated image installs its own way (its Python, pip, uv) or needs no package for.
_APT_LEFT = lazy_pattern(r"python[0-9.]*(?:-.*)?|pip|.*-pip|curl|wget|ca-certificates|software-properties-common|gnupg.*|"
                       r"apt-utils|lsb-release|sudo", re.ASCII)
# ENV the generated image sets itself, or that would point its interpreter elsewhere.
_ENV_LEFT = lazy_pattern(r"PATH|PYTHON.*|LD_LIBRARY_PATH|VIRTUAL_ENV|HOME|LANG|LC_.*|DEBIAN_FRONTEND|PIP_.*|CONDA.*|"
                       r"NVIDIA_.*|CUDA_.*", re.ASCII)
_ENV_NAME = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_]{0,254}", re.ASCII)


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


# --- mentions: submit commands, READMEs, Makefiles, scripts, Python ---------------------------------------------------

def _mentioned(script: Script, ctx: Context, source: str, line_offset: int, kind: str, rank: int,
               says_train: bool, built: dict[str, str]) -> Iterator[Declared]:
    """Each trainer a text names: a gcloud submit command's module or script, a Python entry it runs (a README's
    `python train.py`, a Makefile recipe's), a Dockerfile it builds (recorded in `built`)."""
    for step in _flat(follow(script, ctx, source, line_offset=line_offset)):
        if step.kind == "python" and step.call is not None:
            call = step.call
            args = tuple(a for a in call.args if a is not None)
            yield Declared(call.module, call.script, args if len(args) == len(call.args) else (), step.where, kind,
                           function=call.function, rank=rank, file_says_train=says_train, launcher=call.launcher,
                           how=", ".join(_how(step)))
    for simple in script.commands:
        values = [w.value for w in simple.words[_unwrap(list(simple.words)).start:]]
        where = f"{source}:{simple.line + line_offset}"
        if not values or values[0] is None:
            continue
        head = PurePosixPath(values[0]).name
        if head == "gcloud":
            flag = next((w for w in simple.words if (w.value or "").split("=")[0] in
                         (*_SUBMIT_MODULE, *_SUBMIT_SCRIPT, "--worker-pool-spec")), None)
            if flag is not None and script.text:  # the line that names the trainer, in a command of several lines
                where = f"{source}:{script.text.count(chr(10), 0, flag.start) + 1 + line_offset}"
            yield from _gcloud(values, ctx, where, rank, says_train)
        elif head in ("docker", "podman", "buildah") and "build" in values[1:3] or head == "build" and kind == "job":
            for i, v in enumerate(values[:-1]):
                if v in _DOCKER_BUILD_FILE and values[i + 1]:
                    built.setdefault(values[i + 1].removeprefix("./"), where)
                elif v and v.startswith("--file="):
                    built.setdefault(v.partition("=")[2].removeprefix("./"), where)


def _gcloud(values: list[str | None], ctx: Context, where: str, rank: int, says_train: bool) -> Iterator[Declared]:
    """`gcloud ai-platform|ml-engine jobs submit training ... --module-name M -- ARGS`, `gcloud ai custom-jobs create
    --worker-pool-spec=...,python-module=M|script=S --args=...`, and `local-run --python-module|--script`."""
    if not any(v in ("training", "custom-jobs", "hp-tuning-jobs") for v in values[:6] if v):
        return
    module = script = None
    unknown = None
    for i, v in enumerate(values):
        if v is None:
            continue
        key, eq, value = v.partition("=")
        nxt = value if eq else (values[i + 1] if i + 1 < len(values) else None)
        if key in _SUBMIT_MODULE:
            if nxt is None:
                unknown = "a module only running tells"
            else:
                module = nxt
        elif key in _SUBMIT_SCRIPT:
            script = nxt
        elif key == "--worker-pool-spec" and nxt:
            for found in _WORKER_POOL.finditer(nxt):
                if found.group(1) == "python-module":
                    module = found.group(2)
                else:
                    script = found.group(2)
        elif v == "--":
            break  # the trainer's arguments: the job's, not the image's
    shown = " ".join(v or "?" for v in values)[:100]
    if module is not None:
        if ctx.is_module(module):
            yield Declared(module, None, (), where, "submit", rank=rank, file_says_train=says_train)
        else:
            ctx.set_aside.append(SetAside(where, shown, f"module {module} is not in this directory"))
    elif script is not None:
        rel = in_directory(script, WORKDIR, ctx.is_script)
        if rel is not None:
            yield Declared(None, rel, (), where, "submit", rank=rank, file_says_train=says_train)
        else:
            ctx.set_aside.append(SetAside(where, shown, f"{script} is not a file of this directory"))
    elif unknown:
        ctx.set_aside.append(SetAside(where, shown, unknown))


def _read_text(text: str, where: str, ctx: Context) -> Script | None:
    try:
        return read(text)
    except ShellSyntaxError as exc:
        ctx.set_aside.append(SetAside(where, "shell text", f"line {exc.line} does not parse: {exc.message}"))
        return None


_FENCE = lazy_pattern(r"^([ \t]*)(```+|~~~+)[ \t]*([\w+-]*)[^\n]*\n(.*?)^\1\2[ \t]*$", re.MULTILINE | re.DOTALL)
_SHELL_FENCES = {"", "sh", "bash", "shell", "console", "zsh", "shell-session", "text", "cmd", "terminal"}
_MAKE_VAR = lazy_pattern(r"^([A-Za-z_][A-Za-z0-9_.-]*)\s*(?:\?=|:=|::=|=|\+=)\s*(.*)$")
_MAKE_TARGET = lazy_pattern(r"^([A-Za-z0-9_./-][A-Za-z0-9_./ -]*?)\s*:(?!=)(.*)$")
_MAKE_REF = lazy_pattern(r"\$[({]([A-Za-z_][A-Za-z0-9_.-]*)[)}]")


def _markdown_blocks(text: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of each shell code block, prompts ($ , > ) dropped."""
    for found in _FENCE.finditer(text):
        if found.group(3).lower() not in _SHELL_FENCES:
            continue
        first = text.count("\n", 0, found.start(4)) + 1
        body = "\n".join(re.sub(r"^\s*(?:\$|%|>|#\s(?=\w+\s))\s?", "", line) if re.match(r"^\s*[$%>]\s", line) else line
                         for line in found.group(4).split("\n"))
        yield first, body


def _notebook_cells(text: str) -> Iterator[tuple[int, str]]:
    """(cell number, shell text) of a notebook's `!command` lines and %%bash / %%sh cells."""
    try:
        cells = json.loads(text).get("cells", [])
    except (ValueError, AttributeError):
        return
    for n, cell in enumerate(cells if isinstance(cells, list) else [], 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if source.startswith(("%%bash", "%%sh", "%%script bash")):
            yield n, source.split("\n", 1)[1] if "\n" in source else ""
            continue
        lines = [line.strip()[1:] for line in source.split("\n") if line.strip().startswith("!")]
        if lines:
            yield n, "\n".join(lines)


def _makefile(text: str) -> Iterator[tuple[str, int, str]]:
    """(target, first line, recipe as shell text) of each rule, Make's own variables substituted and $$ made $."""
    variables: dict[str, str] = {}
    lines = text.replace("\\\n", " ").split("\n")
    target, start, recipe = None, 0, []

    def done() -> Iterator[tuple[str, int, str]]:
        if target is not None and recipe:
            yield target, start, "\n".join(recipe)

    for n, line in enumerate(lines, 1):
        if line.startswith("\t") and target is not None:
            body = line[1:].lstrip("@-+ ")
            body = _MAKE_REF.sub(lambda m: variables.get(m.group(1), m.group(0).replace("$(", "${").replace(")", "}")),
                                 body).replace("$$", "$")
            recipe.append(body)
            continue
        found_var = _MAKE_VAR.match(line)
        if found_var and not line.startswith("\t"):
            variables[found_var.group(1)] = _MAKE_REF.sub(lambda m: variables.get(m.group(1), ""), found_var.group(2))
            continue
        found = _MAKE_TARGET.match(line)
        if found and not line.startswith((" ", "\t", "#")):
            yield from done()
            target, start, recipe = found.group(1).strip(), n + 1, []
    yield from done()


def _python_commands(text: str) -> Iterator[tuple[int, str, list[str] | str]]:
    """(line, what, command) that Python code runs or submits: `c.run("...")`, `session.run("python", ...)`,
    `subprocess.run([...])`, and a job's `command`/`args` (a dict's keys or call keywords); what: run | job."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return

    def strings(node: ast.AST) -> list[str] | None:
        if isinstance(node, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                           for e in node.elts):
            return [e.value for e in node.elts]  # type: ignore[attr-defined]
        return None

    count = 0
    for node in ast.walk(tree):
        count += 1
        if count > 200000:
            return
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id if isinstance(
                node.func, ast.Name) else ""
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            if name in ("run", "call", "check_call", "check_output", "Popen", "system", "run_command") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    rest = [a.value for a in node.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                    yield node.lineno, "run", ([first.value, *rest] if rest else first.value)
                elif strings(first) is not None:
                    yield node.lineno, "run", strings(first)  # type: ignore[misc]
            command = strings(keywords["command"]) if "command" in keywords else None
            if command is not None:
                args = strings(keywords["args"]) if "args" in keywords else []
                yield node.lineno, "job", [*command, *(args or [])]
        elif isinstance(node, ast.Dict):
            keys = {k.value: v for k, v in zip(node.keys, node.values, strict=True)
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            command = strings(keys["command"]) if "command" in keys else None
            image = "image_uri" in keys or "imageUri" in keys
            if command is not None and (image or "args" in keys):
                args = strings(keys["args"]) if "args" in keys else []
                yield node.lineno, "job", [*command, *(args or [])]
            elif image and "args" in keys and strings(keys["args"]):
                yield node.lineno, "args", strings(keys["args"])  # type: ignore[misc]


def _yaml_commands(text: str) -> Iterator[tuple[int, str, list[str | None]]]:
    """(line, what, words) of each container command in a YAML job config or pipeline component: containerSpec's
    command + args, a component's implementation.container command + args ({inputValue: x} placeholders unknown);
    what: "command", or "args" where a container spec passes arguments to its image's own ENTRYPOINT."""
    try:
        import yaml

        documents = list(yaml.safe_load_all(text))
    except Exception:  # noqa: BLE001  any YAML the reader cannot read names nothing
        return
    lines = text.split("\n")

    def line_of(word: str) -> int:
        for n, line in enumerate(lines, 1):
            if word in line:
                return n
        return 1

    def words(value: object) -> list[str | None] | None:
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list):
            return None
        return [str(v) if isinstance(v, (str, int, float)) and not isinstance(v, bool) else None for v in value]

    stack: list[tuple[object, int]] = [(d, 0) for d in documents]
    while stack:
        node, depth = stack.pop()
        if depth > 20:
            continue
        if isinstance(node, dict):
            command = node.get("command")
            image = "image" in node or "imageUri" in node or "image_uri" in node
            if command is not None and ("args" in node or image):
                found = words(command)
                args = words(node.get("args")) or []
                if found:
                    anchor = next((w for w in found if w), "command")
                    yield line_of(anchor), "command", [*found, *args]
            elif image and isinstance(node.get("args"), list):
                args = words(node["args"]) or []
                if args:
                    yield line_of(next((w for w in args if w), "args")), "args", args
            stack += [(v, depth + 1) for v in node.values()]
        elif isinstance(node, list):
            stack += [(v, depth + 1) for v in node]


def declared_entries(directory: Path, ctx: Context) -> list[Declared]:
    """Every trainer the repository declares, from every place it writes a command."""
    found: list[Declared] = []
    built: dict[str, str] = {}  # Dockerfiles a script builds -> where
    job_args: list[tuple[str, list[str]]] = []  # what job configs pass to their image's ENTRYPOINT, and where

    def text_file(name: str) -> bool:
        return name.endswith((".sh", ".bash", ".md", ".ipynb", ".py", ".yaml", ".yml", ".txt", ".rst", ".cfg", ".json")) \
            or name in ("Makefile", "makefile", "GNUmakefile", "Justfile", "justfile", "Procfile")

    folders = ("", *(p.name for p in _folders(directory)))
    for path in _files(directory, folders, text_file):
        rel = path.relative_to(directory).as_posix()
        source = shown_name(rel)
        name = path.name
        says_train = bool(_SAYS_TRAIN.search(name)) and not _SIDE.search(name)
        text = _text(path)
        if name.endswith((".sh", ".bash")):
            script = _read_text(text, source, ctx)
            if script is not None:
                found += _mentioned(script, ctx, source, 0, "script", 60 if not says_train else 55, says_train, built)
        elif name in ("Makefile", "makefile", "GNUmakefile", "Justfile", "justfile"):
            for target, line, recipe in _makefile(text):
                script = _read_text(recipe, f"{source}:{line}", ctx)
                if script is not None:
                    target_train = bool(_SAYS_TRAIN.search(target)) and not _SIDE.search(target)
                    found += _mentioned(script, ctx, source, line - 1, "script", 58 if target_train else 65,
                                        target_train, built)
        elif name.endswith((".md", ".rst", ".txt")):
            for line, block in _markdown_blocks(text) if name.endswith(".md") else [(1, text)] if "gcloud" in text else []:
                script = _read_text(block, f"{source}:{line}", ctx)
                if script is not None:
                    found += _mentioned(script, ctx, source, line - 1, "docs", 80, False, built)
        elif name.endswith(".ipynb"):
            for cell, block in _notebook_cells(text):
                script = _read_text(block, f"{source} cell {cell}", ctx)
                if script is not None:
                    found += [replace(d, where=f"{source} cell {cell}")
                              for d in _mentioned(script, ctx, source, 0, "docs", 85, False, built)]
            found += _sdk_calls(text, source, ctx, 75)
        elif name.endswith(".py"):
            for line, what, command in _python_commands(text):
                if what == "args" and isinstance(command, list):
                    job_args.append((f"{source}:{line}", command))
                    continue
                if what == "job" and isinstance(command, list):
                    declared = _from_command(command, ctx, source, line, "job", 40, says_train)
                    if declared is not None:
                        found.append(declared)
                    continue
                script = _read_text(command, f"{source}:{line}", ctx) if isinstance(command, str) else \
                    _script_of(command)
                if script is not None:
                    found += _mentioned(script, ctx, source, line - 1, "script", 62, says_train, built)
            found += _sdk_calls(text, source, ctx, 45)
        elif name.endswith((".yaml", ".yml", ".json")):
            for line, what, words in _yaml_commands(text) if not name.endswith(".json") or "command" in text else []:
                known = [w for w in words if w is not None]
                if what == "args":
                    if len(known) == len(words):
                        job_args.append((f"{source}:{line}", known))
                    continue
                if len(known) == len(words):
                    declared = _from_command(known, ctx, source, line, "job", 40, says_train)
                    if declared is not None:
                        found.append(declared)
                else:
                    script = Script((Simple(tuple(Word(w, i, i + 1, w or "?") for i, w in enumerate(words)), 1),), (), "")
                    found += _mentioned(script, ctx, source, line - 1, "job", 42, says_train, built)
            if name.startswith("cloudbuild"):
                for line, words in _cloudbuild_steps(text):
                    script = Script((Simple(tuple(Word(w, i, i + 1, w) for i, w in enumerate(words)), 1),), (), "")
                    found += _mentioned(script, ctx, source, line - 1, "submit", 50, says_train, built)
    found = [*dockerfile_entries(directory, ctx, built, job_args), *found]
    return found


def _cloudbuild_steps(text: str) -> Iterator[tuple[int, list[str]]]:
    """(line, words) of each cloudbuild.yaml step: its entrypoint (or its builder's) and args; `bash -c` texts too."""
    try:
        import yaml

        data = yaml.safe_load(text)
    except Exception:  # noqa: BLE001
        return
    steps = data.get("steps") if isinstance(data, dict) else None
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict) or not isinstance(step.get("args", []), list):
            continue
        name = str(step.get("name", ""))
        entry = step.get("entrypoint") or ("docker" if "docker" in name else "gcloud" if "gcloud" in name
                                           or "cloud-sdk" in name else name.rsplit("/", 1)[-1])
        words = [str(entry), *(str(a) for a in step.get("args", []))]
        line = next((n for n, line in enumerate(text.split("\n"), 1) if name and name in line), 1)
        yield line, words


_SDK_MODULE = lazy_pattern(r"(?:python_module_name\s*=\s*|['\"]python_module['\"]\s*:\s*|pythonModule['\"]?\s*:\s*)"
                         r"['\"]([A-Za-z_][\w.-]*)['\"]", re.ASCII)
_SDK_SCRIPT = lazy_pattern(r"script_path\s*=\s*['\"]([\w./-]+\.py)['\"]", re.ASCII)


def _sdk_calls(text: str, source: str, ctx: Context, rank: int) -> list[Declared]:
    """Python that calls the Vertex AI SDK: python_module_name=, "python_module": ..., script_path=."""
    found = []
    for pattern, module in ((_SDK_MODULE, True), (_SDK_SCRIPT, False)):
        for match in pattern.finditer(text):
            name = match.group(1)
            where = f"{source}:{text.count(chr(10), 0, match.start()) + 1}"
            if module and ctx.is_module(name):
                found.append(Declared(name, None, (), where, "submit", rank=rank))
            elif not module and ctx.is_script(name):
                found.append(Declared(None, name, (), where, "submit", rank=rank))
    return found


def says_train(name: str) -> bool:
    """Does a trainer's name (module or script) say it trains, and not tuning, a local try or a side job."""
    return bool(_SAYS_TRAIN.search(name)) and not _SIDE.search(name)


def choose(found: list[Declared]) -> tuple[Declared | None, list[Declared]]:
    """The declaration the repository means, and the others: the strongest evidence first (a Dockerfile a script
    builds, a Dockerfile that says train, any training Dockerfile, a job config's command, a submit command or SDK call,
    a script or Makefile target, a README); among several of that strength naming different trainers, those whose file
    says train and not tuning or a local try, then the one named most often; (None, candidates) when the repository
    itself stays ambiguous."""
    if not found:
        return None, []
    for rank in sorted({d.rank for d in found}):
        of_rank = [d for d in found if d.rank == rank]
        distinct = list(dict.fromkeys(d.name for d in of_rank))
        if len(distinct) > 1:
            training = [d for d in of_rank if d.file_says_train or (_SAYS_TRAIN.search(d.where.split(":")[0])
                                                                    and not _SIDE.search(d.where.split(":")[0]))]
            if len({d.name for d in training}) == 1:
                of_rank = training
            else:
                pool = training or of_rank
                plain = [d for d in pool if not _SIDE.search(d.where.split(":")[0]) and not _SIDE.search(d.name)]
                if len({d.name for d in plain}) == 1:
                    of_rank = plain
                else:
                    counts: dict[str, int] = {}
                    for d in pool:
                        counts[d.name] = counts.get(d.name, 0) + 1
                    top = max(counts.values())
                    if list(counts.values()).count(top) == 1:
                        of_rank = [d for d in pool if counts[d.name] == top]
                    else:
                        return None, of_rank
        chosen = of_rank[0]
        return chosen, [d for d in found if d.name != chosen.name]
    return None, []
