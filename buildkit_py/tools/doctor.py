"""`buildkit-py doctor`: the launcher's checks and the build tooling, on this machine."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..builders.buildkit_cli import find_buildkit_client
from ..clients.engine import engine_client, engine_host
from ..errors import BuildkitError
from ..launcher import cluster, gpu
from ..launcher.constants import BAD_CLUSTER, EXPECT_GPUS_ENV


@dataclass(frozen=True)
class Finding:
    """One check of `buildkit-py doctor`: its name, whether it passed, the message, and a failure's exit code."""

    name: str
    ok: bool
    message: str
    code: int = 0


def diagnose(expect_gpus: int | None = None, env: dict[str, str] | None = None) -> list[Finding]:
    env = dict(os.environ if env is None else env)
    if expect_gpus is not None:
        env[EXPECT_GPUS_ENV] = str(expect_gpus)
    findings = []
    try:
        report = gpu.check(env)
        findings.append(Finding("gpu", True, "; ".join([report.summary, *(f"warning: {w}" for w in report.warnings)])))
    except gpu.CheckFailed as exc:
        findings.append(Finding("gpu", False, exc.message, exc.code))
    try:
        added, notes = cluster.torch_env(cluster.parse(env), env)
        text = "; ".join(notes + [f"{k}={v}" for k, v in added.items()]) or "single machine (no CLUSTER_SPEC or TF_CONFIG)"
        findings.append(Finding("cluster", True, text))
    except cluster.ClusterError as exc:
        findings.append(Finding("cluster", False, str(exc), BAD_CLUSTER))
    try:
        client = find_buildkit_client()
        findings.append(Finding("buildkit", True, f"{client.path} ({client.mode})"))
    except BuildkitError as exc:
        findings.append(Finding("buildkit", False, exc.message))
    try:
        version = engine_client().version().get("Version", "?")
        findings.append(Finding("engine", True, f"Docker engine {version} at {engine_host()}"))
    except BuildkitError as exc:
        findings.append(Finding("engine", False, exc.message))
    return findings
