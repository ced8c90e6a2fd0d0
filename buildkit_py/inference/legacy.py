"""What a legacy AI Platform Training job ran, where inference takes it: its trainingInput.pythonModule as the trainer,
and the releases its runtimeVersion shipped (base_images/aiplatform_runtimes.yaml, handed in as `prefer`) for the imports
the requirements leave out, with a Python those releases have wheels for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..catalog.matrix import Matrix, gpu_python, usable_python
from ..errors import ConfigError, show
from .frameworks import Choice, by_framework, deciding, framework_of, release_pythons
from .given import Given
from .layout import Python, Trainer, module_file


def runtime_pins(prefer: Sequence[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """The runtime's releases by distribution: (NAME==VERSION, why), or (NAME, why) where the release is not recorded."""
    return {canonicalize_name(pin.partition("==")[0]): (pin, why) for pin, why in prefer}


def legacy_trainer(directory: Path, module: str) -> Trainer:
    """The legacy file's pythonModule: the module its job ran, which must be a module of the directory."""
    if not module_file(directory, module):
        raise ConfigError(f"{show(module)} (trainingInput.pythonModule) is not a module in {show(str(directory))}: no "
                          f"{show(module.replace('.', '/') + '.py')} there; give the trainer directory the legacy job "
                          "packaged, or --module", field="--from-aiplatform")
    value = {"module": module}
    return Trainer(value, f"module {module} (trainingInput.pythonModule)", overrides=(("trainer", value),))


def runtime_python(matrix: Matrix, given: Given, missing: Mapping[str, str], found: Sequence[tuple[str, Requirement]],
                   runtime: Mapping[str, tuple[str, str]]) -> Python:
    """Where nothing sets the image's Python, and a plain import is one the legacy runtime gave a release of: the
    oldest Python an image can have with it, and that some release of the deciding framework has (on a GPU image, one
    an nvidia/cuda image can have)."""
    chosen = by_framework(matrix, found)
    deciding_name = deciding(chosen) if chosen else None
    framework = matrix.framework(deciding_name) if deciding_name else None
    also = {p for s in framework.series for p in usable_python(matrix, s)} if framework else None
    asked = given.flags.get("gpu") if given.flags.get("gpu") is not None else given.data.get("gpu")
    if asked is True or (asked is None and framework is not None and framework.gpu):
        also = {p for p in also if gpu_python(matrix, p)} if also is not None else None
    python = next((fits[0] for d in missing if framework_of(matrix, Requirement(d)) != deciding_name
                   and "==" in (ran := runtime.get(canonicalize_name(d), ("",)))[0]
                   and (fits := [p for p in release_pythons(matrix, ran[0]) if also is None or p in also])), None)
    return Python(python, overrides=(("python", python),)) if python is not None else Python(None)


def imported_release(matrix: Matrix, runtime: Mapping[str, tuple[str, str]], dist: str,
                     python: Python) -> tuple[str | None, str | None]:
    """An import nothing declares: the release the legacy runtime gave it (NAME==VERSION) where the image's Python has
    it, and why; else None, and why the runtime's release is not the image's (None where the runtime had none)."""
    ran = runtime.get(canonicalize_name(dist))
    if ran and "==" in ran[0]:
        if str(python.version) in release_pythons(matrix, ran[0]):
            return ran[0], ran[1] + (f" (on Python {python.version}, which its wheels support)" if python.overrides else "")
        return None, (f"{ran[1]}, which has no wheels for Python {python.version} in the version data (buildkit-py "
                      f"versions {dist}): {dist} is added unpinned")
    if ran:
        return None, (f"{ran[1]}: which {dist} release it had is not recorded (base_images/aiplatform_runtimes.yaml); "
                      "pin the one the trainer's saved models need in requirements.txt")
    return None, None


def unrecorded(runtime: Mapping[str, tuple[str, str]], choice: Choice | None) -> str | None:
    """A note where the runtime shipped the chosen framework in a release not recorded and nothing pins it exactly."""
    if choice is None:
        return None
    chosen = choice.pin.partition("==")[0]
    ran = runtime.get(canonicalize_name(chosen))
    if ran and "==" not in ran[0] and not any(x.operator in ("==", "===") for x in choice.spec):
        return (f"{ran[1]}: which {chosen} release it had is not recorded (base_images/aiplatform_runtimes.yaml); "
                f"building {choice.pin}: pin the one the trainer's saved models need in requirements.txt")
    return None
