"""python -m buildkit_launcher [--check] -- TRAINER COMMAND...

Checks, then hands off. Switches (environment; names in constants.py):
  BUILDKIT_PY_EXPECT_GPUS=N       fail unless N GPUs are visible and usable (0/unset: CPU allowed)
  BUILDKIT_PY_SKIP_GPU_CHECK=1    skip the GPU checks entirely
  BUILDKIT_PY_LAUNCHER_QUIET=1    no log lines on success; warnings and errors still show
  BUILDKIT_PY_PROBE=torch|tensorflow  also ask the framework (slower: it imports it)
A switch with another value stops with exit code 21, as a bad command line does.
Executor images (Vertex AI's PythonPackageSpec):
  BUILDKIT_PY_PYTHON_MODULE=M     run `python -m M ARGS...`: what follows -- are the module's arguments
  BUILDKIT_PY_PACKAGE_URIS=U,...  first pip-install these packages (paths, file://, https://, gs://);
                                  exit code 30 when one cannot be fetched, 31 when pip fails
"""

from __future__ import annotations

import os
import sys
import time

from . import cluster, gpu, handoff, packages
from .constants import BAD_CLUSTER, QUIET_ENV, SKIP_GPU_CHECK_ENV, USAGE

HP_METRIC_DEFAULT = "/tmp/hypertune/output.metrics"
USAGE_LINE = "usage: python -m buildkit_launcher [--check] -- TRAINER COMMAND..."


def _print(text: str) -> None:
    print(f"buildkit-py launcher: {text}", file=sys.stderr, flush=True)


def _log(text: str) -> None:
    if os.environ.get(QUIET_ENV) != "1":
        _print(text)


def _fail(code: int, message: str) -> int:
    _print(f"error: {message}")
    return code


def _switch_error(env: dict[str, str]) -> str | None:
    for name in (SKIP_GPU_CHECK_ENV, QUIET_ENV):
        value = env.get(name, "")
        if value not in ("", "0", "1"):
            return f"{name}={value!r} is not a switch value; allowed: 1 (on), 0 or unset (off)"
    return None


def prepare(command: list[str], env: dict[str, str]) -> tuple[int, str, list[str], list[str]]:
    """Run the checks and fill in the environment: (exit code, error, log lines, warnings).
    Mutates env."""
    lines: list[str] = []
    warnings: list[str] = []
    error = _switch_error(env)
    if error:
        return USAGE, error, lines, warnings
    if env.get(SKIP_GPU_CHECK_ENV) == "1":
        lines.append(f"GPU checks skipped ({SKIP_GPU_CHECK_ENV}=1)")
    else:
        try:
            report = gpu.check(env)
        except gpu.CheckFailed as exc:
            return exc.code, exc.message, lines, warnings
        lines.append(report.summary)
        warnings += report.warnings
    try:
        added, notes = cluster.torch_env(cluster.parse(env), env)
    except cluster.ClusterError as exc:
        return BAD_CLUSTER, str(exc), lines, warnings
    env.update(added)
    lines += notes
    if added:
        lines.append("set " + " ".join(f"{k}={v}" for k, v in added.items()))
    job_dir = cluster.job_dir(command[1:])
    if job_dir:
        env.setdefault("JOB_DIR", job_dir)
        lines.append(f"legacy --job-dir {job_dir} (also in JOB_DIR)")
    for name in cluster.PASS_THROUGH:
        if env.get(name):
            lines.append(f"{name}={env[name]}")
    # cloudml-hypertune appends to this file; its directory must exist before the first report.
    metric_file = env.get("CLOUD_ML_HP_METRIC_FILE") or HP_METRIC_DEFAULT
    try:
        os.makedirs(os.path.dirname(metric_file), exist_ok=True)
    except OSError as exc:
        lines.append(f"cannot create the hypertune metric directory for {metric_file}: {exc}")
    return 0, "", lines, warnings


def main(argv: list[str] | None = None) -> int:
    start = time.perf_counter()
    args = sys.argv[1:] if argv is None else argv
    check_only = args[:1] == ["--check"]
    if check_only:
        args = args[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    elif args[:1] and args[0].startswith("-"):
        return _fail(USAGE, f"unknown option {args[0]!r}; {USAGE_LINE}")
    try:
        trainer = packages.command(args, os.environ)
    except packages.PackageError as exc:
        return _fail(exc.code, exc.message)
    if not trainer and not check_only:
        return _fail(USAGE, USAGE_LINE)
    code, error, lines, warnings = prepare(trainer or ["check"], os.environ)  # os.environ: the trainer inherits it
    for line in lines:
        _log(line)
    for warning in warnings:
        _print(f"warning: {warning}")
    if code:
        return _fail(code, error)
    _log(f"checks passed in {time.perf_counter() - start:.3f} s" + ("" if check_only else f"; starting {' '.join(trainer)}"))
    if check_only:
        return 0
    try:
        packages.install(os.environ, _log)
    except packages.PackageError as exc:
        return _fail(exc.code, exc.message)
    return handoff.hand_off(trainer)


if __name__ == "__main__":
    sys.exit(main())
