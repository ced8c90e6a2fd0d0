"""Commands written in Dockerfiles: ENTRYPOINT/CMD, with what the Dockerfile installs and sets beside them."""


from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path, PurePosixPath

from ...errors import shown_name
from ...patterns import lazy_pattern
from ..dockerfile import exec_form, instructions
from ..shell import Script, Simple, Word
from .commands import follow, interpreter_for, kept_command, runs, shell_script
from .model import (
    MAX_COMMAND_BYTES,
    SAYS_TRAIN,
    SHELLS,
    WORKDIR,
    Context,
    Declared,
    Evidence,
    files_in,
    folders_in,
    in_directory,
    text_of,
)

# Dockerfile-like names: Dockerfile, Dockerfile.gpu, trainer.dockerfile, train.Dockerfile, Containerfile.
_DOCKERFILE = lazy_pattern(r"(?:Dockerfile|dockerfile|Containerfile)(?:\.[\w.-]+)?|[\w.-]+\.(?:Dockerfile|dockerfile)", re.ASCII)


DOCKERFILE_FOLDERS = ("", "docker", "dockerfiles", "dockerfile", "trainer", "training", "train", "container", "containers",
                      "build", "deploy", "infra", "ci")


# A Dockerfile (or a source file's name) for serving or an API runs no trainer.
_NOT_TRAINING = lazy_pattern(r"serv|predict|infer|deploy|api|app\b|web|notebook|jupyter|dev\b|test", re.IGNORECASE)


_FROM_PYTHON = lazy_pattern(r"(?:--platform=\S+\s+)?(?:[\w.:-]+/)*(?:library/)?python:(3\.[0-9]+)\b", re.ASCII)


def _words_of(arguments: str) -> tuple[list[str] | None, str | None]:
    """Exec form as JSON gives it; shell form as `/bin/sh -c TEXT` runs it: (words, the shell text)."""
    if arguments.startswith("["):
        return exec_form(arguments), None
    return ["/bin/sh", "-c", arguments], arguments


def script_of(words: list[str]) -> Script:
    return Script(tuple([Simple(tuple(Word(w, i, i + 1, shlex.quote(w)) for i, w in enumerate(words)), 1)]), (), "")


def from_command(words: list[str], ctx: Context, source: str, line: int, evidence: Evidence, cwd: str = WORKDIR,
                 extra: dict | None = None) -> Declared | None:
    """A candidate from a command a container runs (exec-form words)."""
    kind, rank, says_train = evidence.kind, evidence.rank, evidence.says_train
    where = f"{source}:{line}"
    script = script_of(words)
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
    command, changes = kept_command(words, steps[0])
    if len(json.dumps(command)) > MAX_COMMAND_BYTES:  # an edited script too long to pass inline: run it as written
        command, changes = tuple(words), (*changes, "the changes above are not made: the edited script would be "
                                                    f"longer than {MAX_COMMAND_BYTES} bytes; it runs as written")
    elif any("\n" in w or "\r" in w for w in command):  # the config holds a command's words on one line each
        command, changes = tuple(words), (*changes, "the changes above are not made: the edited script has several "
                                                    "lines, which a command cannot pass inline; it runs as written")
    command = _run_as_script(command, ctx, cwd)
    call = found.call
    return Declared(call.module if call else None, call.script if call else None, (), where, kind,
                    command=command, function=call.function if call else None, how=how, rank=rank,
                    file_says_train=says_train, changes=changes, launcher=call.launcher if call else None, **extra)


def entry_of(command: str | list[str], ctx: Context, source: str = "command", line: int = 1) -> Declared | None:
    """What a command a container runs comes to: text as a shell form runs it, words as an exec form does."""
    words = command if isinstance(command, list) else ["/bin/sh", "-c", command]
    return from_command(words, ctx, source, line, Evidence("job", 40))


def _run_as_script(command: tuple[str, ...], ctx: Context, cwd: str) -> tuple[str, ...]:
    """A command whose first word is a shell script of the directory runs it through its shell, at the generated
    image's path (a file copied without its execute bit still runs)."""
    head = command[0] if command else ""
    rel = in_directory(head, cwd, ctx.is_script) if head and PurePosixPath(head).name not in SHELLS else None
    if rel is None or not shell_script(rel, ctx):
        return command
    return (interpreter_for(rel, ctx), f"{WORKDIR}/{rel}", *command[1:])


def dockerfile_entries(directory: Path, ctx: Context, named: dict[str, str],
                       job_args: list[tuple[str, list[str]]]) -> Iterator[Declared]:
    """The trainer each training Dockerfile's final stage runs (ENTRYPOINT + CMD, or + the arguments a job config
    passes in CMD's place). named: Dockerfiles a build script, submit script or job config builds (path -> where)."""
    for path in _dockerfiles(directory, named):
        rel = path.relative_to(directory).as_posix()
        # docker/api/Dockerfile: a subfolder's name says what its Dockerfile is for, as a file's does
        sub = path.parent.name if rel.count("/") == 2 else ""
        if (_NOT_TRAINING.search(path.name) or _NOT_TRAINING.search(sub)) and rel not in named:
            continue
        entrypoint = cmd = python = None
        workdir = "/"
        stage = ""
        apt: list[str] = []
        env: dict[str, str] = {}
        copied: dict[str, str] = {}  # a path in the image -> the context file a COPY put there
        for instruction in instructions(text_of(path)):
            line, keyword, arguments = instruction.line, instruction.keyword, instruction.arguments
            if keyword == "FROM":
                entrypoint, cmd, workdir, apt, env, copied = None, None, "/", [], {}, {}
                found = _FROM_PYTHON.match(arguments)
                python = (found.group(1), f"{shown_name(rel)}:{line}") if found else None
                stage = arguments.split()[-1] if re.search(r"\s[Aa][Ss]\s", arguments) else ""
            elif keyword == "RUN":
                apt += _apt_packages(arguments)
            elif keyword == "ENV":
                env.update(_env(arguments))
            elif keyword in ("COPY", "ADD"):
                copied.update(_copied(arguments, workdir))
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
        # A file the Dockerfile copied elsewhere (`COPY docker/train/entrypoint.sh .`, then ENTRYPOINT [./entrypoint.sh])
        # is named by where it is here: the generated image has the whole directory at WORKDIR.
        words = [f"{WORKDIR}/{copied[_in_image(w, workdir)]}" if _in_image(w, workdir) in copied else w for w in words]
        says_train = bool(SAYS_TRAIN.search(path.name) or SAYS_TRAIN.search(stage) or SAYS_TRAIN.search(sub))
        rank = 10 if rel in named else 20 if says_train else 30
        evidence = Evidence("dockerfile", rank, says_train)
        extra = {"python": python, "apt": tuple(dict.fromkeys(apt)), "env": tuple(env.items())}
        declared = from_command(words, ctx, shown_name(rel), line, evidence, workdir, extra)
        if declared is not None and entrypoint and declared.command is None and declared.function is None and declared.args:
            # What the ENTRYPOINT itself passes is no default: a job's args follow it (`ENTRYPOINT [python, -m, x,
            # train]`), where CMD's (or a job config's) are replaced.
            alone = from_command(list(entrypoint[1][0] or []), ctx, shown_name(rel), line, evidence, workdir, extra)
            if alone is not None and alone.command is None and (alone.module, alone.script) == (
                    declared.module, declared.script) and alone.args and declared.args[:len(alone.args)] == alone.args:
                declared = replace(declared, fixed=alone.args, args=declared.args[len(alone.args):])
        if declared is not None:
            if rel in named or passed:
                said = [f"built by {named[rel]}" if rel in named else "", f"its arguments from {passed}" if passed else ""]
                declared = replace(declared, how=", ".join(filter(None, [*said, declared.how])))
            yield declared


def _in_image(path: str, workdir: str) -> str:
    """PATH as the image resolves it from WORKDIR, normalised."""
    return str(PurePosixPath(path if path.startswith("/") else f"{workdir.rstrip('/')}/{path}"))


def _copied(arguments: str, workdir: str) -> dict[str, str]:
    """What a COPY or ADD of one context file puts where: the image's path -> the file (another stage's, a URL, a
    glob or several sources: nothing)."""
    words = exec_form(arguments) if arguments.lstrip().startswith("[") else arguments.split()
    words = [w for w in words or [] if not w.startswith("--")]
    if len(words) != 2 or any(c in words[0] for c in "*?[$") or "://" in words[0]:
        return {}
    source, dest = words[0].removeprefix("./"), words[1]
    parts = PurePosixPath(source).parts
    if not parts or source.startswith("/") or ".." in parts:
        return {}
    target = _in_image(dest, workdir)
    if dest.endswith("/") or dest in (".", "./") or dest.endswith("/."):
        target = f"{target.rstrip('/')}/{parts[-1]}"
    return {target: "/".join(parts)}


def _dockerfiles(directory: Path, named: dict[str, str]) -> Iterator[Path]:
    """The Dockerfiles of the folders training repositories keep them in and of those folders' subfolders
    (docker/train/Dockerfile), then each one a build script or job config names wherever it is."""
    nested = tuple(f"{folder}/{sub.name}" for folder in DOCKERFILE_FOLDERS if folder for sub in folders_in(directory / folder))
    found = list(files_in(directory, DOCKERFILE_FOLDERS + nested, lambda n: bool(_DOCKERFILE.fullmatch(n))))
    yield from found
    for rel in named:
        parts = PurePosixPath(rel).parts
        path = directory.joinpath(*parts) if parts and not rel.startswith("/") and ".." not in parts else None
        if path is not None and path not in found and not path.is_symlink() and path.is_file():
            yield path


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
