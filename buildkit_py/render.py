"""Plan -> Dockerfile and .dockerignore text. Reads templates; runs nothing.

Config values reach the text only through the quoting filters below, so no value can add a
line or an instruction to the Dockerfile.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jinja2

from . import __version__
from .errors import ConfigError, RenderError
from .plan import Plan
from .resources import LAUNCHER_CONTEXT_DIR, LAUNCHER_MODULE, resource_dir

DOCKERIGNORE_TEMPLATE = "dockerignore.j2"


def docker_quote(value: str) -> str:
    """A double-quoted ENV/LABEL value: Docker's parser unescapes \\ \" and \\$ inside quotes."""
    # A trailing backslash is valid for Docker but misread by hadolint; config rejects it too.
    if any(ch in value for ch in "\n\r\x00") or value.endswith("\\"):
        raise RenderError(f"{value!r} cannot be written as one Dockerfile value (line break, NUL or final backslash)")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def exec_form(values) -> str:
    """A JSON array for exec-form instructions (ENTRYPOINT, CMD, COPY): no shell, no expansion."""
    return json.dumps(list(values))


def environment(extra_dirs: tuple[Path, ...] = ()) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in extra_dirs] + [str(resource_dir("templates"))]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(
        sh=shlex.quote,
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
    env = environment()
    context = {
        "plan": plan,
        "version": __version__,
        "buildkit": buildkit,
        "base_template": plan.template,
        "python_check": _python_check(plan.python.version),
        "launcher_dir": LAUNCHER_CONTEXT_DIR,
        "launcher_module": LAUNCHER_MODULE,
    }
    try:
        if plan.user_template:
            path = (root or Path.cwd()) / plan.user_template
            template = env.from_string(path.read_text(encoding="utf-8"))
        else:
            template = env.get_template(plan.template)
        text = template.render(context)
    except jinja2.TemplateSyntaxError as exc:
        where = f"{plan.user_template or exc.filename}:{exc.lineno}"
        raise RenderError(f"template syntax error at {where}: {exc.message}") from None
    except (jinja2.TemplateError, OSError) as exc:
        raise RenderError(f"cannot render {plan.user_template or plan.template}: {exc}") from None
    return _tidy(text)


def _tidy(text: str) -> str:
    """Collapse the blank lines that optional blocks leave behind."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.strip() == "" and (not lines or lines[-1] == ""):
            continue
        lines.append(line.rstrip())
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def render_project_dockerignore(root: Path) -> str:
    """The defaults plus the project's own .dockerignore, when it has one."""
    user = root / ".dockerignore"
    return render_dockerignore(user.read_text(encoding="utf-8") if user.is_file() else None)


def render_dockerignore(user_dockerignore: str | None = None) -> str:
    lines = [ln.rstrip() for ln in (user_dockerignore or "").splitlines() if ln.strip()]
    return environment().get_template(DOCKERIGNORE_TEMPLATE).render(user_lines=lines)
