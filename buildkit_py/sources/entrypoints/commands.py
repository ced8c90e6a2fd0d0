"""What one command runs: wrappers seen through, scripts followed into, console scripts resolved, distributed
launchers kept; and what a kept command becomes in the generated image."""


from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from ...errors import shown_name
from ...patterns import lazy_pattern
from ..shell import Script, ShellSyntaxError, Simple, Word, read
from .model import MAX_FOLLOW, SAYS_TRAIN, SHELLS, SIDE, WORKDIR, Call, Context, SetAside, Step, in_directory, text_of

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
    """A command past its wrappers: where the command they run starts, the wrappers, what the image cannot run, and
    the env they set."""

    start: int  # index of the first word of the command the wrappers run
    wrappers: tuple[str, ...]  # what was seen through
    changes: tuple[str, ...]  # the wrappers the generated image cannot run, each said
    env: tuple[tuple[str, str], ...]


def unwrap(words: list[Word]) -> _Unwrapped:
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


def shell_script(path: str, ctx: Context) -> bool:
    """Is the directory's file `path` a shell script (by name or by its #! line)."""
    if path.endswith((".sh", ".bash")):
        return True
    head = text_of(ctx.directory / path)[:200]
    return head.startswith("#!") and any(s in head.split("\n")[0] for s in ("sh", "bash"))


def _python_file(path: str, ctx: Context) -> bool:
    if path.endswith(".py"):
        return True
    head = text_of(ctx.directory / path)[:200]
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
    unwrapped = unwrap(list(simple.words))
    words = list(simple.words[unwrapped.start:])
    values = [w.value for w in words]
    shown = " ".join(_known(list(simple.words)))[:100]
    edits = ((simple.start, words[0].start, ""),) if unwrapped.changes and words else ()
    base = dict(shown=shown, where=where, conditional=simple.conditional, changes=unwrapped.changes, edits=edits)
    if not values or values[0] is None:
        return Step("other", **base)
    head = PurePosixPath(values[0]).name
    # sh -c TEXT [NAME ARGS...]: the text as that shell reads it
    if head in SHELLS:
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
            return _script_step(values[i:], ctx, cwd, depth, base, head, words[i])
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
        return _script_step(values, ctx, cwd, depth, base, None, words[0])
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


def _script_step(command: list[str | None], ctx: Context, cwd: str, depth: int, base: dict, shell: str | None,
                 word: Word) -> Step:
    """A script the command runs (COMMAND: its path, then its arguments; WORD: the path as written): a Python file of
    the directory is an entry; a shell script is followed into."""
    path, args = command[0], command[1:]
    rel = in_directory(path, cwd, ctx.is_script)
    if rel is None:
        ctx.set_aside.append(SetAside(base["where"], base["shown"], f"{path} is not a file of this directory"))
        return Step("other", **base)
    if rel.rsplit("/", 1)[-1] == "setup.py":
        return Step("setup", **base)  # python setup.py install|sdist: packaging, never the trainer
    if shell is None and _python_file(rel, ctx):
        return Step("python", **base, call=Call(None, rel, tuple(args), base["where"]))
    if not (shell or shell_script(rel, ctx)) or depth >= MAX_FOLLOW:
        return Step("other", **base)
    text = text_of(ctx.directory / rel)
    try:
        script = read(text, args=list(args), name=rel)
    except ShellSyntaxError as exc:
        ctx.set_aside.append(SetAside(f"{shown_name(rel)}:{exc.line}", rel, f"the script does not parse: {exc.message}"))
        return Step("other", **base)
    inner = follow(script, ctx, shown_name(rel), cwd=cwd, depth=depth + 1)
    edits = base["edits"]
    if word.value != f"{WORKDIR}/{rel}" and shell is None:
        edits += ((word.start, word.end, f"{interpreter_for(rel, ctx)} {WORKDIR}/{rel}"),)
    elif word.value != f"{WORKDIR}/{rel}":
        edits += ((word.start, word.end, f"{WORKDIR}/{rel}"),)
    return Step("script", **base | {"inner": inner, "shown": base["shown"] + f" (the script {shown_name(rel)})",
                                    "inner_text": script.text, "target": (word.start, word.end, "file"),
                                    "edits": edits})


def interpreter_for(rel: str, ctx: Context) -> str:
    """The shell a script's #! line names (a file copied without its execute bit still runs)."""
    return _interpreter_of(text_of(ctx.directory / rel)[:200])


def flat_steps(steps: tuple[Step, ...]) -> list[Step]:
    out: list[Step] = []
    for step in steps:
        if step.kind == "script" and step.inner:
            out += flat_steps(step.inner)
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
    training = [c for c in calls if SAYS_TRAIN.search(c.module or c.script or "") and not SIDE.search(c.module or c.script or "")]
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
    flat = flat_steps(steps)
    calls = [s.call for s in flat if s.kind == "python" and s.call is not None]
    others = [s for s in flat if s.kind not in ("python", "setup")]
    changes = tuple(c for s in flat for c in s.changes)
    how = tuple(dict.fromkeys(w for s in steps for w in how_it_runs(s)))
    if len(calls) == 1 and not others and calls[0].launcher is None:
        setup = tuple(f"`{s.shown}` ({s.where})" for s in flat if s.kind == "setup" and s.shown.split(" ")[0] not in
                      ("echo", "printf", "cd", "export", "set", "true", ":", "[", "[[", "test", "exit"))
        return _Runs(calls[0], False, setup, changes, how)
    if not calls and not any(s.kind == "script" and s.target and s.target[2] == "file" for s in _scripts(steps)):
        return None  # no Python entry and no script of this directory: nothing here is what it runs
    return _Runs(_main_call(calls) if calls else None, True, (), changes, how)


def how_it_runs(step: Step) -> list[str]:
    out = []
    if step.kind == "script":
        head = step.shown.split(" ")[0]
        if head != "/bin/sh":  # a shell form's own shell says nothing
            out.append(f"through {PurePosixPath(head).name}" + (" -c" if step.target and step.target[2] == "c" else ""))
        for inner in step.inner:
            out += how_it_runs(inner)
    if step.call is not None and step.call.launcher:
        out.append(f"launched by {step.call.launcher}")
    if step.call is not None and step.call.console_script:
        out.append(f"the console script {step.call.console_script}")
    return out


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
                shell_head = step.shown.split(" ")[0] in SHELLS or PurePosixPath(step.shown.split(" ")[0]).name in SHELLS
                edits[(start, end)] = ("-c " if shell_head else "sh -c ") + shlex.quote(inner) + " " + name
    for (start, end), new in sorted(edits.items(), reverse=True):
        text = text[:start] + new + text[end:]
    return text


def kept_command(words: list[str], step: Step) -> tuple[tuple[str, ...], tuple[str, ...]]:
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
            shell = [] if PurePosixPath(words[0]).name in SHELLS and a > 0 else [_interpreter_of(inner)]
            replaced[(a, b)] = [*shell, "-c", inner, PurePosixPath(words[a]).name]
    out = list(words)
    for (a, b), new in sorted(replaced.items(), reverse=True):
        out[a:b] = new
    return tuple(out), changes


def _interpreter_of(text: str) -> str:
    """The shell a script's first (#!) line names."""
    return "bash" if "bash" in text.split("\n", 1)[0] else "sh"
