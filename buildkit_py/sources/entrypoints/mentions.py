"""Commands mentioned elsewhere: submit commands, job config and pipeline files, cloudbuild.yaml steps, shell
scripts, Makefiles, tasks.py/noxfile.py, README code blocks, notebook cells, and Vertex AI SDK calls."""


from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path, PurePosixPath

from ...errors import shown_name
from ...patterns import lazy_pattern
from ..shell import Script, ShellSyntaxError, Simple, Word, read
from .commands import flat_steps, follow, how_it_runs, shell_script, unwrap
from .dockerfiles import dockerfile_entries, from_command, script_of
from .model import (
    DOCKER_BUILD_FILE,
    SAYS_TRAIN,
    SIDE,
    WORKDIR,
    Context,
    Declared,
    Evidence,
    SetAside,
    files_in,
    folders_in,
    in_directory,
    text_of,
)

_SUBMIT_MODULE = ("--module-name", "--module_name", "--python-module", "--python_module")


_SUBMIT_SCRIPT = ("--script",)


# A submit command in a script or Makefile names what the cloud job runs: as strong as an SDK call in code, above the
# script's own `python x.py` lines (a local try, a data step); a README's stays a document's.
_SUBMIT_RANK = 45


_WORKER_POOL = lazy_pattern(r"(?:^|,)(python-module|script)=([^,]+)")


def _mentioned(script: Script, ctx: Context, source: str, line_offset: int, evidence: Evidence,
               built: dict[str, str]) -> Iterator[Declared]:
    """Each trainer a text names: a gcloud submit command's module or script, a Python entry it runs (a README's
    `python train.py`, a Makefile recipe's), a Dockerfile it builds (recorded in `built`)."""
    kind, rank, says_train = evidence.kind, evidence.rank, evidence.says_train
    for step in flat_steps(follow(script, ctx, source, line_offset=line_offset)):
        if step.kind == "python" and step.call is not None:
            call = step.call
            args = tuple(a for a in call.args if a is not None)
            yield Declared(call.module, call.script, args if len(args) == len(call.args) else (), step.where, kind,
                           function=call.function, rank=rank, file_says_train=says_train, launcher=call.launcher,
                           how=", ".join(how_it_runs(step)))
    for simple in script.commands:
        values = [w.value for w in simple.words[unwrap(list(simple.words)).start:]]
        where = f"{source}:{simple.line + line_offset}"
        if not values or values[0] is None:
            continue
        head = PurePosixPath(values[0]).name
        if head == "gcloud":
            flag = next((w for w in simple.words if (w.value or "").split("=")[0] in
                         (*_SUBMIT_MODULE, *_SUBMIT_SCRIPT, "--worker-pool-spec")), None)
            if flag is not None and script.text:  # the line that names the trainer, in a command of several lines
                where = f"{source}:{script.text.count(chr(10), 0, flag.start) + 1 + line_offset}"
            yield from _gcloud(values, ctx, where, min(rank, _SUBMIT_RANK) if kind == "script" else rank, says_train)
        elif head in ("docker", "podman", "buildah") and "build" in values[1:3] or head == "build" and kind == "job":
            for i, v in enumerate(values[:-1]):
                if v in DOCKER_BUILD_FILE and values[i + 1]:
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
        if rel is not None and shell_script(rel, ctx):  # the job runs a shell script with bash: what it runs counts
            source, _, line = where.rpartition(":")
            declared = from_command(["bash", rel], ctx, source, int(line) if line.isdigit() else 1,
                                    Evidence("submit", rank, says_train))
            if declared is not None:
                inner = [h for h in declared.how.split(", ") if h and h != "through bash"]
                yield replace(declared, how=", ".join([f"through {rel}", *inner]))
        elif rel is not None:
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

    folders = ("", *(p.name for p in folders_in(directory)))
    for path in files_in(directory, folders, text_file):
        rel = path.relative_to(directory).as_posix()
        source = shown_name(rel)
        name = path.name
        says_train = bool(SAYS_TRAIN.search(name)) and not SIDE.search(name)
        text = text_of(path)
        if name.endswith((".sh", ".bash")):
            script = _read_text(text, source, ctx)
            if script is not None:
                found += _mentioned(script, ctx, source, 0, Evidence("script", 60 if not says_train else 55, says_train), built)
        elif name in ("Makefile", "makefile", "GNUmakefile", "Justfile", "justfile"):
            for target, line, recipe in _makefile(text):
                script = _read_text(recipe, f"{source}:{line}", ctx)
                if script is not None:
                    target_train = bool(SAYS_TRAIN.search(target)) and not SIDE.search(target)
                    found += _mentioned(script, ctx, source, line - 1,
                                        Evidence("script", 58 if target_train else 65, target_train), built)
        elif name.endswith((".md", ".rst", ".txt")):
            for line, block in _markdown_blocks(text) if name.endswith(".md") else [(1, text)] if "gcloud" in text else []:
                script = _read_text(block, f"{source}:{line}", ctx)
                if script is not None:
                    found += _mentioned(script, ctx, source, line - 1, Evidence("docs", 80), built)
        elif name.endswith(".ipynb"):
            for cell, block in _notebook_cells(text):
                script = _read_text(block, f"{source} cell {cell}", ctx)
                if script is not None:
                    found += [replace(d, where=f"{source} cell {cell}")
                              for d in _mentioned(script, ctx, source, 0, Evidence("docs", 85), built)]
            found += _sdk_calls(text, source, ctx, 75)
        elif name.endswith(".py"):
            for line, what, command in _python_commands(text):
                if what == "args" and isinstance(command, list):
                    job_args.append((f"{source}:{line}", command))
                    continue
                if what == "job" and isinstance(command, list):
                    declared = from_command(command, ctx, source, line, Evidence("job", 40, says_train))
                    if declared is not None:
                        found.append(declared)
                    continue
                script = _read_text(command, f"{source}:{line}", ctx) if isinstance(command, str) else \
                    script_of(command)
                if script is not None:
                    found += _mentioned(script, ctx, source, line - 1, Evidence("script", 62, says_train), built)
            found += _sdk_calls(text, source, ctx, 45)
        elif name.endswith((".yaml", ".yml", ".json")):
            for line, what, words in _yaml_commands(text) if not name.endswith(".json") or "command" in text else []:
                known = [w for w in words if w is not None]
                if what == "args":
                    if len(known) == len(words):
                        job_args.append((f"{source}:{line}", known))
                    continue
                if len(known) == len(words):
                    declared = from_command(known, ctx, source, line, Evidence("job", 40, says_train))
                    if declared is not None:
                        found.append(declared)
                else:
                    script = Script((Simple(tuple(Word(w, i, i + 1, w or "?") for i, w in enumerate(words)), 1),), (), "")
                    found += _mentioned(script, ctx, source, line - 1, Evidence("job", 42, says_train), built)
            if name.startswith("cloudbuild"):
                for line, words in _cloudbuild_steps(text):
                    script = Script((Simple(tuple(Word(w, i, i + 1, w) for i, w in enumerate(words)), 1),), (), "")
                    found += _mentioned(script, ctx, source, line - 1, Evidence("submit", 50, says_train), built)
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
