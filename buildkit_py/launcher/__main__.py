"""python -m buildkit_launcher [--check] -- TRAINER COMMAND...

Checks, then hands off. Switches (environment):
  BUILDKIT_PY_EXPECT_GPUS=N       fail unless N GPUs are visible and usable (0/unset: CPU allowed)
  BUILDKIT_PY_SKIP_GPU_CHECK=1    skip the GPU checks entirely
  BUILDKIT_PY_LAUNCHER_QUIET=1    no log lines on success
"""

from __future__ import annotations

import os
import sys
import time

from . import cluster, gpu, handoff

USAGE = 21
BAD_CLUSTER = 20
HP_METRIC_DEFAULT = "/tmp/hypertune/output.metrics"


def _log(text: str) -> None:
    if os.environ.get("BUILDKIT_PY_LAUNCHER_QUIET") != "1":
        print(f"buildkit-py launcher: {text}", file=sys.stderr, flush=True)


def _fail(code: int, message: str) -> int:
    print(f"buildkit-py launcher: error: {message}", file=sys.stderr, flush=True)
    return code


def prepare(command: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    """Run the checks and fill in the environment; (exit code, log lines). Mutates env."""
    lines = []
    if env.get("BUILDKIT_PY_SKIP_GPU_CHECK") == "1":
        lines.append("GPU checks skipped (BUILDKIT_PY_SKIP_GPU_CHECK=1)")
    else:
        try:
            lines.append(gpu.check(env).summary)
        except gpu.CheckFailed as exc:
            return _fail(exc.code, exc.message), lines
    try:
        added, notes = cluster.torch_env(cluster.parse(env), env)
    except cluster.ClusterError as exc:
        return _fail(BAD_CLUSTER, str(exc)), lines
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
    return 0, lines


def main(argv: list[str] | None = None) -> int:
    start = time.perf_counter()
    args = sys.argv[1:] if argv is None else argv
    check_only = bool(args) and args[0] == "--check"
    if check_only:
        args = args[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args and not check_only:
        return _fail(USAGE, "usage: python -m buildkit_launcher [--check] -- TRAINER COMMAND...")
    code, lines = prepare(args or ["check"], os.environ)  # os.environ: the trainer inherits what is set
    for line in lines:
        _log(line)
    if code:
        return code
    _log(f"checks passed in {time.perf_counter() - start:.3f} s" + ("" if check_only else f"; starting {' '.join(args)}"))
    if check_only:
        return 0
    return handoff.hand_off(args)


if __name__ == "__main__":
    sys.exit(main())
