"""Plan -> Dockerfile and .dockerignore text. Reads templates; runs nothing.

Config values reach the text only through the quoting filters below, so no value can add a
line or an instruction to the Dockerfile. Every template, ours and the user's, renders in Jinja's
immutable sandbox: a template from a pull request cannot run code on the machine that builds it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..catalog.matrix import load_matrix
from ..catalog.resources import LAUNCHER_CONTEXT_DIR, LAUNCHER_MODULE, resource_dir
from ..errors import ConfigError, OutputError, RenderError, show
from ..fsutil import cache_dir, consult, read_text, write_atomic
from ..launcher.constants import IMPORTS_CONTEXT_FILE, IMPORTS_IMAGE_FILE
from ..sources.dockerfile import Instruction
from ..sources.dockerfile import exec_form as exec_words
from ..sources.dockerfile import read as read_dockerfile
from ..version import __version__
from .names import EXTENSIONS_STAGE
from .plan import Plan

DOCKERIGNORE_TEMPLATE = "dockerignore.j2"
MAX_LINE_BYTES = 65535  # BuildKit's Dockerfile scanner refuses longer lines ("token too long")
# Characters str.splitlines() breaks on: BuildKit splits only on \n, but a value must not look
# like two lines to any tool that reads the file (editors, linters, diff, our own tidy step).
LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")

if TYPE_CHECKING:
    import jinja2


def _one_line(value: str) -> str:
    if not isinstance(value, str):
        raise RenderError(f"{show(value)} is not text")
    if "\0" in value or LINE_BREAKS.intersection(value):
        raise RenderError(f"{show(value)} cannot be written as one Dockerfile value (line break or NUL)")
    return value


def docker_quote(value: str) -> str:
    """A double-quoted ENV/LABEL value: Docker's parser unescapes \\ \" and \\$ inside quotes."""
    # A trailing backslash is valid for Docker but misread by hadolint; config rejects it too.
    if _one_line(value).endswith("\\"):
        raise RenderError(f"{show(value)} cannot be written as one Dockerfile value (final backslash)")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def shell_quote(value: str) -> str:
    """One POSIX shell word on one line: shlex.quote would keep a line break inside its quotes,
    and BuildKit would end the RUN instruction there."""
    return shlex.quote(_one_line(value))


def exec_form(values) -> str:
    """A JSON array for exec-form instructions (ENTRYPOINT, CMD, COPY): no shell, no expansion;
    ASCII-escaped, so no character of a value can break the line."""
    return json.dumps(list(values), ensure_ascii=True)


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    import jinja2

    class CompiledTemplates(jinja2.FileSystemBytecodeCache):
        """Compiled templates kept between runs: compiling ours took about 130 ms of every command that
        renders. Keyed by each template's source, so an edited template is compiled again; the code only
        calls back into the sandboxed environment, which still checks every access. A cache that cannot
        be written only makes the next run slower."""

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                super().dump_bytecode(bucket)
            except OSError:
                pass

    directory = cache_dir() / "templates"
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return None
    return CompiledTemplates(str(directory))


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """One environment per process, and compiled templates kept on disk between processes."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(
        bytecode_cache=_bytecode_cache(),
        loader=jinja2.FileSystemLoader(str(resource_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(
        sh=shell_quote,
        json=exec_form,
        dockerenv=docker_quote,
        kv=lambda pair: f"{pair[0]}={docker_quote(pair[1])}",
    )
    return env


def _python_check(version: str) -> str:
    major, minor_ = version.split(".")
    return (
        f"import sys; v = sys.version_info[:2]; "
        f"assert v == ({major}, {minor_}), \"expected Python {version}, got %d.%d\" % v"
    )


def render_dockerfile(plan: Plan, *, root: Path | None = None, buildkit: bool = True) -> str:
    """Render the plan's variant template, or the user's template (relative to root) over it."""
    if not plan.entrypoint:
        raise ConfigError("the config has no trainer (module or script) to run as the ENTRYPOINT", field="trainer")
    user = read_text((root or Path.cwd()) / plan.user_template, "template", root=root) if plan.user_template else None
    return _kept(("dockerfile", plan.to_dict(), buildkit, user), lambda: _render_plan(plan, user, buildkit))


def _render_plan(plan: Plan, user: str | None, buildkit: bool) -> str:
    import jinja2

    env = environment()
    context = {
        "plan": plan,
        "version": __version__,
        "buildkit": buildkit,
        "base_template": plan.template,
        "python_check": _python_check(plan.python.version),
        "launcher_dir": LAUNCHER_CONTEXT_DIR,
        "launcher_module": LAUNCHER_MODULE,
        "imports_file": IMPORTS_CONTEXT_FILE,
        "imports_image_file": IMPORTS_IMAGE_FILE,
        "extensions_stage": EXTENSIONS_STAGE,
        "uv_requirement": load_matrix().tools.uv_requirement,  # the builds' installer (base_images/tools.yaml)
    }
    try:
        if user is not None:
            template = env.from_string(user)
        else:
            template = env.get_template(plan.template)
        text = template.render(context)
    except jinja2.TemplateSyntaxError as exc:
        where = f"{plan.user_template or exc.filename}:{exc.lineno}"
        raise RenderError(f"template syntax error at {where}: {exc.message}") from None
    except (jinja2.TemplateError, RecursionError) as exc:
        raise RenderError(f"cannot render {plan.user_template or plan.template}: {exc}") from None
    return _check_lines(_tidy(text), plan.user_template or plan.template)


@functools.lru_cache(maxsize=1)
def dockerfile_templates_digest() -> str:
    """Every shipped template a Dockerfile or .dockerignore renders from, names and bytes: the CI and Make templates
    cannot change an image (nor, through buildkit.lock's record of this digest, make a lock stale)."""
    digest = hashlib.sha256()
    root = resource_dir("templates")
    for path in sorted(root.rglob("*.j2")):
        if path.relative_to(root).parts[0] in ("ci", "make"):
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()


def _kept(inputs: object, render: Callable[[], str]) -> str:
    """RENDER's text, kept in the cache under the digest of its inputs and of the templates: a render is a pure
    function of them, and a command that finds its text kept neither imports Jinja nor compiles a template
    (most of what `print image-uri`, `dockerfile` and a code edit's build spend before their own work)."""
    key = hashlib.sha256((__version__ + dockerfile_templates_digest() + json.dumps(inputs, sort_keys=True, default=str))
                         .encode()).hexdigest()
    path = cache_dir() / "rendered" / key
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        pass
    text = render()
    try:
        write_atomic(path, text)
    except OutputError:
        pass  # only a cache
    return text


def _tidy(text: str) -> str:
    """Collapse the blank lines that optional blocks leave behind."""
    lines: list[str] = []
    for line in text.split("\n"):  # as BuildKit splits: only \n ends a line
        line = line.rstrip(" \t")
        if line == "" and (not lines or lines[-1] == ""):
            continue
        lines.append(line)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def _check_lines(text: str, template: str) -> str:
    for number, line in enumerate(text.split("\n"), 1):
        size = len(line.encode())
        if size > MAX_LINE_BYTES:
            raise RenderError(f"line {number} of the Dockerfile from {template} ({show(line[:40])}...) is {size} bytes; "
                              f"BuildKit reads lines of at most {MAX_LINE_BYTES} bytes")
    return text


def render_project_dockerignore(root: Path) -> str:
    """The defaults plus the project's own .dockerignore, when it has one."""
    user = root / ".dockerignore"
    consult(user)
    return render_dockerignore(read_text(user, ".dockerignore", root=root) if user.is_file() else None)


def render_dockerignore(user_dockerignore: str | None = None) -> str:
    # Split as the Docker CLI reads the file: on \n, with a trailing \r dropped.
    lines = [ln.rstrip("\r").rstrip() for ln in (user_dockerignore or "").split("\n") if ln.strip()]
    return _kept(("dockerignore", lines), lambda: environment().get_template(DOCKERIGNORE_TEMPLATE).render(user_lines=lines))


WITH_LAUNCHER_TEMPLATE = "with-launcher.Dockerfile.j2"
LAUNCHER_ROOT = "/opt/buildkit-py"  # where --with-launcher puts the launcher in the user's image


def _exec_form_of(dockerfile: str, where: str) -> tuple[list[str], list[str], str]:
    """The final stage's own ENTRYPOINT and CMD, each a JSON (exec form) array ([] for one it does not set),
    and the Dockerfile with those instructions commented out: the launcher's take their place (hadolint
    refuses two ENTRYPOINTs, and a reader should see one). Read as BuildKit reads it (dockerfile_text), and
    changed only where that leaves every other instruction as it was."""
    try:
        parsed = read_dockerfile(dockerfile)
    except ConfigError as exc:
        raise ConfigError(f"BuildKit cannot read it: {exc.detail}", where=where) from None
    found: dict[str, list[str]] = {}  # the last of each: it is the one the image gets
    commands: list[Instruction] = []  # every ENTRYPOINT and CMD of the final stage: all give way to the launcher's
    for instruction in parsed.instructions:
        if instruction.keyword == "FROM":
            found, commands = {}, []
        elif instruction.keyword in ("ENTRYPOINT", "CMD"):
            value = exec_words(instruction.arguments)
            if value is None:
                raise ConfigError(f"line {instruction.line}: {instruction.keyword} {show(instruction.arguments)} is not "
                                  "in exec form: --with-launcher hands the command to the launcher word for word, so "
                                  f"write it as a JSON list, {instruction.keyword} [\"python\", \"train.py\"]", where=where)
            found[instruction.keyword] = value
            commands.append(instruction)
    if not found:
        raise ConfigError("the final stage sets no ENTRYPOINT or CMD of its own: --with-launcher needs the command it "
                          "hands off to (an image's inherited one is not known here)", where=where)
    lines = list(parsed.lines)

    def rewrite(n: int, prefix: str = "") -> None:
        body = lines[n - 1].rstrip("\r\n")
        lines[n - 1] = prefix + parsed.continuation(body)[0] + lines[n - 1][len(body):]

    for instruction in commands:
        for n in instruction.text_lines:  # a comment continues nothing, so the escape character goes
            rewrite(n, "# (after the launcher, below) ")
    last = parsed.instructions[-1]
    if last.open and last not in commands:
        rewrite(last.text_lines[-1])  # the file ends inside a continuation, which would take in the launcher's COPY
    return found.get("ENTRYPOINT", []), found.get("CMD", []), "".join(lines)


def render_with_launcher(dockerfile: str, where: str) -> str:
    """The user's Dockerfile with the launcher in front of its own command (WITH_LAUNCHER_TEMPLATE)."""
    entrypoint, cmd, text = _exec_form_of(dockerfile, where)
    return environment().get_template(WITH_LAUNCHER_TEMPLATE).render(
        dockerfile=text.rstrip("\n"), entrypoint=entrypoint, cmd=cmd, launcher_dir=LAUNCHER_CONTEXT_DIR,
        launcher_module=LAUNCHER_MODULE, launcher_root=LAUNCHER_ROOT)
