"""What the commands print: one report line for a human at a time (escaped, credentials masked), or JSON."""

from __future__ import annotations

import importlib.util
import json
import sys

from .. import __version__
from ..errors import terminal_line


def _lazy(name: str):
    """The module, executed on first attribute access (importlib's documented LazyLoader recipe): the API
    and all it imports cost nothing to `--version`, whose answer needs none of it."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


api = _lazy(__name__.split(".")[0] + ".api")
VERSION = f"buildkit-py {__version__}"


def say(text: str, *, file=None, flush: bool = False) -> None:
    """One line of a command's report for a human: names and values from the trainer's files and the config are
    in it as they are, so every character a terminal would act on is escaped, a line break too (a file named
    `a\\nRUN x` must not print a line of its own), and credentials are masked."""
    print(terminal_line(text, lines=False), file=file, flush=flush)


def print_json(value) -> None:
    print(json.dumps(value, indent=2))


def print_resolved(plan: api.Plan) -> None:
    fw = plan.framework
    rows = [
        ("base image", plan.base_image),
        ("CUDA", plan.cuda or "none"),
        # a cuDNN flavour whose cuDNN release base_images/cuda.yaml has not verified: there, but not "none"
        ("cuDNN", plan.cudnn or ("the base image's (release not recorded)" if (plan.cuda_flavor or "").startswith("cudnn")
                                 else "none")),
        ("Python", f"{plan.python.version} ({plan.python.install})"),
        ("framework", fw.requirement if fw else "none"),
        ("index URL", (fw.index_url if fw else None) or "PyPI"),
        ("hypertune", plan.hypertune or "no"),
        ("entrypoint", json.dumps(list(plan.entrypoint + plan.cmd)) if plan.entrypoint else "none"),
    ]
    if plan.gpu and plan.base_kind == "cuda":  # BaseKind is a str enum: compared without loading the plan module
        rows[1:1] = [("flavour", plan.cuda_flavor), ("GPU archs", ", ".join(plan.cuda_archs) or "not recorded")]
    if plan.accelerator:
        rows.insert(1, ("accelerator", plan.accelerator))
    if plan.platform and plan.platform != "linux/amd64":  # the default goes unsaid, as before there were others
        rows.insert(1, ("platform", plan.platform))
    if plan.tpu:  # what the TPU build adds, and the libtpu the framework loads
        rows[-2:-2] = ([("TPU extra", plan.tpu_companion)] if plan.tpu_companion else []) + [("libtpu", plan.tpu_runtime)]
    for name, value in rows:
        say(f"{name:<11} {value}")
    for note in plan.notes:
        say(f"note: {note}")


def print_generated(result: api.GeneratedFile, as_json: bool) -> int:
    if as_json:
        print(json.dumps(result.to_dict()))
    elif result.written:
        say(f"wrote {result.written}", file=sys.stderr)
    else:
        sys.stdout.write(result.text)
    return 0


def print_build(result: api.BuildResult, as_json: bool) -> int:
    if as_json:
        print_json(result.to_dict())
        return 0
    say(f"image {result.image_id}{'' if result.built else ' (up to date)'}")
    for tag in result.tags:
        say(f"tag   {tag}")
    for pushed in result.pushed:
        say(f"push  {pushed.image}")
    return 0


def print_warnings(warnings: tuple[str, ...]) -> None:
    for warning in warnings:
        say(f"buildkit-py: warning: {warning}", file=sys.stderr)


def print_plan(result: api.PlanResult) -> None:
    say(f"Vertex AI plan: {result.method} {result.url}")
    say(f"  + {result.job.kind[:-1]} {json.dumps(result.job.display_name)}")
    for line in json.dumps(result.job.resource, indent=2).splitlines():
        say(f"    {line}")
    say("checks:")
    for check in result.checks:
        mark = "info" if check.ok is None else "ok" if check.ok else "FAIL"
        say(f"  {mark:<5} {check.name:<12} {check.detail}")
    for note in result.job.notes:
        say(f"note: {note}")


def print_job_end(state: str, error: str | None, last_lines: tuple) -> None:
    """A failed job's end on stderr: the service's error, after the job's own last lines (what it died of)."""
    if not error:
        return
    if last_lines:
        say(f"buildkit-py: the job's last {len(last_lines)} lines:", file=sys.stderr)
        for line in last_lines:
            say(f"  {line.text()}", file=sys.stderr)
    say(f"buildkit-py: the job ended in {state}: {error}", file=sys.stderr)
