"""python -m buildkit_launcher [--check] -- TRAINER COMMAND...

Checks, then hands off. Switches (environment; names in constants.py):
  BUILDKIT_PY_EXPECT_GPUS=N       fail unless N GPUs are visible and usable (0/unset: CPU allowed)
  BUILDKIT_PY_EXPECT_TPU_CHIPS=N  fail unless N TPU chips are visible and the image's libtpu is there
                                  (exit 18, 19); 0/unset: nothing TPU-related is done. A TPU job with
                                  no GPU expected skips the GPU checks.
  BUILDKIT_PY_SKIP_GPU_CHECK=1    skip the GPU checks entirely
  BUILDKIT_PY_SKIP_TPU_CHECK=1    skip the TPU checks (a separate switch: skipping the GPU checks of
                                  a job must not hide a TPU job's missing chips, nor the reverse)
  BUILDKIT_PY_LAUNCHER_QUIET=1    no log lines on success; warnings and errors still show
  BUILDKIT_PY_PROBE=torch|tensorflow  also ask the framework (slower: it imports it)
  BUILDKIT_PY_PROCESSES_PER_NODE=N|auto  start N trainer processes on this machine (auto: one per visible GPU), each
                                  with torchrun's variables (group.py); a torchrun, accelerate or deepspeed command is
                                  given the cluster instead and starts them itself (launchers.py)
A switch with another value stops with exit code 21, as a bad command line does.
A trainer command `python -m M ...` or `python SCRIPT ...` naming this interpreter runs in it
(handoff.py); other commands are exec'd. As PID 1 the launcher stays as the trainer's supervisor.
Executor images (Vertex AI's PythonPackageSpec):
  BUILDKIT_PY_PYTHON_MODULE=M     run `python -m M ARGS...`: what follows -- are the module's arguments
  BUILDKIT_PY_PACKAGE_URIS=U,...  first pip-install these packages (paths, file://, https://, gs://);
                                  exit code 30 when one cannot be fetched, 31 when pip fails
"""

from __future__ import annotations

import os
import sys
import time
from collections import namedtuple

from . import cluster, group, handoff, launchers, packages
from .constants import (
    AUTO_PROCESSES,
    BAD_CLUSTER,
    EXPECT_GPUS_ENV,
    EXPECT_TPU_ENV,
    LOCAL_MASTER_ADDR,
    LOCAL_MASTER_PORT,
    QUIET_ENV,
    SKIP_GPU_CHECK_ENV,
    SKIP_TPU_CHECK_ENV,
    USAGE,
)

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
    for name in (SKIP_GPU_CHECK_ENV, SKIP_TPU_CHECK_ENV, QUIET_ENV):
        value = env.get(name, "")
        if value not in ("", "0", "1"):
            return f"{name}={value!r} is not a switch value; allowed: 1 (on), 0 or unset (off)"
    return None


class Prepared(namedtuple("Prepared", "code error lines warnings command processes")):
    """What the checks decided: an exit code and error (0, "" to go on), log lines, warnings, the trainer's command
    (with a distributed launcher's cluster flags added) and each process's variables ([] for one process)."""

    __slots__ = ()


def prepare(command: list[str], env: dict[str, str]) -> Prepared:
    """Run the checks and fill in the environment. Mutates env."""
    lines: list[str] = []
    warnings: list[str] = []

    def failed(code: int, message: str) -> Prepared:
        return Prepared(code, message, lines, warnings, command, [])

    error = _switch_error(env)
    if error:
        return failed(USAGE, error)
    try:
        wanted = group.requested(env)
    except group.GroupError as exc:
        return failed(USAGE, str(exc))
    # A check's module is imported only when it runs: every container start pays for imports.
    tpu_job = env.get(EXPECT_TPU_ENV, "").strip() not in ("", "0")
    run_tpu = tpu_job and env.get(SKIP_TPU_CHECK_ENV) != "1"
    run_gpu = env.get(SKIP_GPU_CHECK_ENV) != "1" and not (tpu_job and env.get(EXPECT_GPUS_ENV, "").strip() in ("", "0"))
    if env.get(SKIP_GPU_CHECK_ENV) == "1":
        lines.append(f"GPU checks skipped ({SKIP_GPU_CHECK_ENV}=1)")
    elif not run_gpu:
        lines.append(f"GPU checks skipped: a TPU job ({EXPECT_TPU_ENV} set) with no GPU requested")
    if tpu_job and not run_tpu:
        lines.append(f"TPU checks skipped ({SKIP_TPU_CHECK_ENV}=1)")
    gpus = None
    if run_gpu or run_tpu:
        from . import gpu  # its CheckFailed and Report serve the TPU check too

        try:
            reports = [gpu.check(env)] if run_gpu else []
            if run_tpu:
                from . import tpu

                reports.append(tpu.check(env))
        except gpu.CheckFailed as exc:
            return failed(exc.code, exc.message)
        for report in reports:
            lines.append(report.summary)
            warnings += report.warnings
        gpus = reports[0].gpus if run_gpu else None
    if wanted == AUTO_PROCESSES and gpus is None:
        from . import gpu

        gpus = gpu.visible(env)
    try:
        found = cluster.parse(env)
        added, notes = cluster.torch_env(found, env)
    except cluster.ClusterError as exc:
        return failed(BAD_CLUSTER, str(exc))
    added.update(cluster.node_env(found, {**env, **added}, tpu_job))
    lines += notes
    command, processes, extra, problem = _spread(command, {**env, **added}, found, wanted, gpus or 0, lines, warnings)
    if problem:
        return failed(BAD_CLUSTER, problem)
    if processes:
        added = {k: v for k, v in added.items() if k not in group.PER_PROCESS}
    added.update({k: v for k, v in extra.items() if k not in env and k not in added})
    env.update(added)
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
    return Prepared(0, "", lines, warnings, command, processes)


def _spread(command: list[str], env: dict[str, str], found, wanted, gpus: int, lines: list[str], warnings: list[str]):
    """How this machine's processes start: (command, each process's variables, variables for the one process, a
    contradiction). A distributed launcher in the command starts them itself, given the cluster; otherwise more than
    one are started here. How many per machine is counted here, from what was asked (`wanted`) and the visible GPUs."""
    per_node, counted = group.counted(wanted, gpus)
    lines += [counted] if counted else []
    ranked = found is None or found.rank is not None
    nodes, node_rank = (found.world_size, found.rank) if found is not None and ranked else (1, 0)
    master = found.master if found is not None and found.master else (
        env.get("MASTER_ADDR") or LOCAL_MASTER_ADDR, env.get("MASTER_PORT") or LOCAL_MASTER_PORT)
    launch = launchers.find(command, root=os.getcwd())
    if launch is not None:
        problem = launchers.contradiction(launch, nodes, wanted)
        if problem or not ranked:
            return command, [], {}, problem
        try:
            command, added, notes = launchers.adapt(command, launch, nodes, node_rank, master,
                                                    found.hosts if found is not None else ("localhost",), per_node)
        except (ValueError, OSError) as exc:
            return command, [], {}, str(exc)
        lines.extend(notes)
        return command, [], added, None
    if per_node is None:
        return command, [], {}, None
    if not ranked:
        lines.append(f"{found.task_type} takes no rank: one process, not {per_node}")
        return command, [], {}, None
    if gpus and per_node > gpus:
        warnings.append(f"{per_node} processes per machine on {gpus} GPU(s): some processes share a GPU")
    processes = group.process_envs(per_node, node_rank, nodes, master, gpus)
    if per_node == 1:  # asked for, so the process has the same variables as each of several would
        return command, [], processes[0], None
    return command, processes, {}, None


def main(argv: list[str] | None = None) -> object:
    """The exit status, as sys.exit takes it (a trainer run in this interpreter may exit with a message)."""
    start = time.perf_counter()
    started_with = handoff.interpreter_env(os.environ)
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
    prepared = prepare(trainer or ["check"], os.environ)  # os.environ: the trainer inherits it
    for line in prepared.lines:
        _log(line)
    for warning in prepared.warnings:
        _print(f"warning: {warning}")
    if prepared.code:
        return _fail(prepared.code, prepared.error)
    trainer = prepared.command if trainer else trainer
    _log(f"checks passed in {time.perf_counter() - start:.3f} s" + ("" if check_only else f"; starting {' '.join(trainer)}"))
    if check_only:
        return 0
    try:
        installed = packages.install(os.environ, _log)
    except packages.PackageError as exc:
        return _fail(exc.code, exc.message)
    same = not installed and handoff.interpreter_env(os.environ) == started_with
    if prepared.processes:
        target = handoff.python_target(trainer) if same else None
        return group.run(trainer, target, prepared.processes, _log)
    return handoff.hand_off(trainer, same)


if __name__ == "__main__":
    sys.exit(main())
