"""The one door into the pipeline: typed options in, typed results out, one module per stage.

The command line, `autopackage`, and the generated Makefile and CI files call only this package.
Every function validates all of its input before it reaches an engine, a registry or the
network, and reports failures as the errors of buildkit_py.errors (each with its exit code).

Each name is imported from its module on first use (PEP 562), so that a command imports only the
stages it runs (`dockerfile` must start in well under 0.2 s; tests/test_startup.py keeps it so).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The module (of this package, or of buildkit_py) that defines each name; __all__ lists the same names
# (tests/test_public_api.py keeps the two equal), and the TYPE_CHECKING imports below import each from the same
# module (tests/test_import_graph.py).
_MODULES: dict[str, tuple[str, ...]] = {
    ".project": ("Project", "load", "resolve", "variant_configs"),
    ".catalog": ("MatrixOptions", "SeriesVersions", "Versions", "executors", "matrix_check", "matrix_refresh", "versions"),
    ".builds": ("build", "warm_up"),
    ".dockerfiles": ("DockerfileResult", "dockerfile"),
    ".images": ("VariantsResult", "build_variants", "executor_build", "lock", "push"),
    ".printing": ("PRINTABLE", "print_value"),
    ".generated": ("GeneratedFile", "ci", "make"),
    ".packages": ("PackageOptions", "PackageResult", "package"),
    ".runs": ("RunOptions", "doctor", "run"),
    ".jobtypes": ("CancelResult", "JobOptions", "JobResult", "LogsResult", "PlanResult", "SubmitOptions", "SubmitResult"),
    ".jobs": ("job", "plan", "submit"),
    ".following": ("cancel", "logs"),
    ".autopackaging": ("AutopackageOptions", "AutopackageResult", "autopackage"),
    ".tuning": ("TuneOptions", "tune"),
    ".attestations": ("VerifyResult", "verify"),
    "..pipeline.buildtypes": ("BuildOptions", "BuildResult"),
    "..pipeline.lock": ("LockOptions", "LockResult"),
    "..flags": ("JOB_FLAGS", "cloudbuild_flag_name"),
    "..catalog.executors": ("Executor",),
    "..oci.client": ("PushResult",),
    "..jobs.local": ("RunResult",),
    "..jobs.tune": ("Study", "Trial"),
    "..pipeline.plan": ("Plan", "PlatformPlans"),
}
_HOMES = {name: module for module, names in _MODULES.items() for name in names}

__all__ = ["JOB_FLAGS", "AutopackageOptions", "AutopackageResult", "BuildOptions", "BuildResult", "CancelResult",
    "DockerfileResult", "Executor", "GeneratedFile", "JobOptions", "JobResult", "LockOptions", "LockResult",
    "LogsResult", "MatrixOptions", "PRINTABLE", "PackageOptions", "PackageResult", "Plan", "PlanResult", "PlatformPlans", "Project",
    "PushResult", "RunOptions", "RunResult", "SeriesVersions", "Study", "SubmitOptions", "SubmitResult", "Trial",
    "TuneOptions", "VariantsResult", "VerifyResult", "Versions", "autopackage", "build", "build_variants", "cancel",
    "ci", "cloudbuild_flag_name", "dockerfile", "doctor", "executor_build", "executors", "job", "load", "lock",
    "logs", "make", "matrix_check", "matrix_refresh", "package", "plan", "print_value", "push", "resolve", "run",
    "submit", "tune", "variant_configs", "verify", "versions", "warm_up"]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name], __package__), name)
        globals()[name] = value  # found once: later lookups do not come here
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from ..catalog.executors import Executor
    from ..flags import JOB_FLAGS, cloudbuild_flag_name
    from ..jobs.local import RunResult
    from ..jobs.tune import Study, Trial
    from ..oci.client import PushResult
    from ..pipeline.buildtypes import BuildOptions, BuildResult
    from ..pipeline.lock import LockOptions, LockResult
    from ..pipeline.plan import Plan, PlatformPlans
    from .attestations import VerifyResult, verify
    from .autopackaging import AutopackageOptions, AutopackageResult, autopackage
    from .builds import build, warm_up
    from .catalog import MatrixOptions, SeriesVersions, Versions, executors, matrix_check, matrix_refresh, versions
    from .dockerfiles import DockerfileResult, dockerfile
    from .following import cancel, logs
    from .generated import GeneratedFile, ci, make
    from .images import VariantsResult, build_variants, executor_build, lock, push
    from .jobs import job, plan, submit
    from .jobtypes import CancelResult, JobOptions, JobResult, LogsResult, PlanResult, SubmitOptions, SubmitResult
    from .packages import PackageOptions, PackageResult, package
    from .printing import PRINTABLE, print_value
    from .project import Project, load, resolve, variant_configs
    from .runs import RunOptions, doctor, run
    from .tuning import TuneOptions, tune
