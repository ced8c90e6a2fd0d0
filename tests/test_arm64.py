"""Arm GPU machines (issue 32): an accelerator whose machines run Arm CPUs (GB200 on A4X) makes the image
linux/arm64, with the framework's Linux aarch64 CUDA wheels; a release without them is refused naming the nearest
that has them; a platform the accelerator's machines cannot run is refused before anything is built; every
command that resolves or renders takes --platform."""

from __future__ import annotations

import pytest

from buildkit_py import cli
from buildkit_py.catalog.machines import load_machines
from buildkit_py.catalog.matrix import load_matrix
from buildkit_py.config import load_config
from buildkit_py.errors import ConfigError, ResolutionError
from buildkit_py.pipeline.plan import make_plan

TRAINER = {"trainer/__init__.py": "", "trainer/task.py": "print('hi')\n"}


def plan_of(project, text: str):
    return make_plan(load_config(project({"buildkit.yaml": text, **TRAINER}) / "buildkit.yaml"))


def main(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_machine_data_says_which_gpus_need_arm64():
    machines = load_machines()
    assert machines.accelerator_platform("NVIDIA_GB200") == "linux/arm64"  # only A4X has it
    assert machines.platform("a4x-highgpu-4g") == "linux/arm64" and machines.platform("n1-standard-4") == "linux/amd64"
    assert machines.accelerator_platform("NVIDIA_TESLA_T4") == "linux/amd64"  # N1 machines
    assert machines.accelerator_platform("TPU_V5_LITEPOD") is None  # not in machines.yaml


def test_gb200_makes_the_image_arm64_with_the_aarch64_wheels(project):
    plan = plan_of(project, "framework: torch==2.9.1\naccelerator: NVIDIA_GB200\ntrainer: {module: trainer.task}\n")
    assert plan.platform == "linux/arm64" and plan.arm64
    assert plan.base_image == "nvidia/cuda:12.8.1-base-ubuntu22.04"  # the tag is a multi-arch manifest list
    assert plan.framework.index_url == "https://download.pytorch.org/whl/cu128"
    assert plan.cuda_archs == ("sm_90", "sm_100", "sm_120")  # the aarch64 build's, not x86_64's
    assert plan.summary()["platform"] == "linux/arm64"


def test_amd64_plans_say_nothing_new(project):
    plan = plan_of(project, "framework: torch==2.9.1\naccelerator: NVIDIA_H100_80GB\ntrainer: {module: trainer.task}\n")
    assert plan.platform is None and not plan.arm64 and "platform" not in plan.summary()
    given = plan_of(project, "framework: torch==2.9.1\nplatform: linux/amd64\ntrainer: {module: trainer.task}\n")
    assert given.platform == "linux/amd64" and "platform" not in given.summary()


@pytest.mark.parametrize("framework, nearest", [
    ("torch==2.6.0", "nearest release that has them: torch==2.7.0 (CUDA 12.8)"),
    ("xgboost==3.1.0", "nearest release that has them: xgboost==3.1.3"),
    ("tensorflow==2.15.1", "no tensorflow release in the data has them"),
])
def test_a_release_without_aarch64_cuda_wheels_is_refused_with_the_nearest(project, framework, nearest):
    with pytest.raises(ResolutionError) as caught:
        plan_of(project, f"framework: {framework}\naccelerator: NVIDIA_GB200\ntrainer: {{module: trainer.task}}\n")
    message = str(caught.value)
    assert message.startswith("accelerator: NVIDIA_GB200 runs on linux/arm64 machines")
    assert "no Linux aarch64 CUDA wheels" in message and nearest in message and "\n" not in message


def test_every_framework_release_with_aarch64_wheels_resolves_on_gb200(project):
    """The newest release of each GPU framework that has aarch64 CUDA wheels resolves for GB200 with kernels for it."""
    matrix = load_matrix()
    for name in ("torch", "jax", "xgboost"):
        fw = matrix.frameworks[name]
        release = max((r for s in fw.series for r in s.releases if s.for_release(r).arm64_cuda),
                      key=lambda r: tuple(int(p) for p in r.split(".") if p.isdigit()))
        plan = plan_of(project, f"framework: {name}=={release}\naccelerator: NVIDIA_GB200\n"
                                "trainer: {module: trainer.task}\n")
        assert plan.arm64 and plan.cuda, name
        assert any(a.endswith("_100") or a.startswith("compute_1") for a in plan.cuda_archs), (name, plan.cuda_archs)


def test_a_cuda_variant_without_kernels_on_arm64_names_those_that_have_them(project):
    with pytest.raises(ResolutionError, match=r"use cuda 12\.8 or 13\.0 for NVIDIA_GB200 \(sm_100\)"):
        plan_of(project, "framework: torch==2.9.1\ncuda: \"12.6\"\naccelerator: NVIDIA_GB200\n"
                         "trainer: {module: trainer.task}\n")
    with pytest.raises(ResolutionError, match=r"torch==2\.9\.1 for linux/arm64 has CUDA wheels for 12\.6, 12\.8, 13\.0"):
        plan_of(project, "framework: torch==2.9.1\ncuda: \"12.9\"\nplatform: linux/arm64\n"
                         "trainer: {module: trainer.task}\n")


def test_cpu_images_on_arm64(project):
    plan = plan_of(project, "framework: scikit-learn==1.5.2\nplatform: linux/arm64\ntrainer: {module: trainer.task}\n")
    assert plan.arm64 and plan.base_image == "python:3.11-slim-bookworm"
    with pytest.raises(ResolutionError, match=r"platform: linux/arm64: scikit-learn==0\.22\.2\.post1 has no Linux "
                                              r"aarch64 wheels \(the first: 0\.24\.0\); nearest release that has "
                                              r"them: scikit-learn==0\.24\.0 "):
        plan_of(project, "framework: scikit-learn==0.22.2.post1\npython: \"3.8\"\nplatform: linux/arm64\n"
                         "trainer: {module: trainer.task}\n")
    unknown = plan_of(project, "framework: torch==2.9.1\ngpu: false\nplatform: linux/arm64\n"
                               "trainer: {module: trainer.task}\n")
    assert any("Linux aarch64 wheels of torch==2.9.1 are not recorded" in n for n in unknown.notes)


def test_a_platform_the_accelerators_machines_cannot_run_is_refused(project):
    with pytest.raises(ConfigError) as caught:
        plan_of(project, "framework: torch==2.9.1\naccelerator: NVIDIA_GB200\nplatform: linux/amd64\n"
                         "trainer: {module: trainer.task}\n")
    assert str(caught.value) == ("platform: linux/amd64 does not run on NVIDIA_GB200: its machines (a4x-highgpu-4g) have "
                                 "Arm CPUs (base_images/machines.yaml); allowed: linux/arm64, or no platform (the "
                                 "accelerator's)")
    with pytest.raises(ConfigError, match=r"^platform: linux/arm64 does not run on NVIDIA_L4: .* x86 CPUs .* allowed: "
                                          r"linux/amd64"):
        plan_of(project, "framework: torch==2.9.1\naccelerator: NVIDIA_L4\nplatform: linux/arm64\n"
                         "trainer: {module: trainer.task}\n")


@pytest.mark.parametrize("command", ["resolve", "dockerfile", "print", "build", "lock", "job", "plan"])
def test_a_contradicting_platform_flag_is_refused_before_anything_is_built(project, capsys, command):
    root = project({"buildkit.yaml": "framework: torch==2.9.1\naccelerator: NVIDIA_GB200\n"
                                     "trainer: {module: trainer.task}\n", **TRAINER})
    before = ["base-image"] if command == "print" else []
    after = ["--image", "127.0.0.1:5999/x:y", "--target", "loopback"] if command in ("job", "plan") else []
    code, out, err = main(capsys, command, *before, "--dir", str(root), "--platform", "linux/amd64", *after)
    assert code == 2, (out, err)
    line = err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith("buildkit-py: error: --platform: linux/amd64 does not run on NVIDIA_GB200")
    assert "allowed: linux/arm64" in line


HOSTILE = {
    "line break": ("linux/amd64\nRUN touch /pwned", "line breaks"),
    "unicode line separator": ("linux/amd64\u2028FROM alpine", "not allowed"),
    "path": ("../../etc/passwd", "OS/ARCH"),
    "trailing space": ("linux/arm64 ", "OS/ARCH"),
    "upper case": ("LINUX/ARM64", "OS/ARCH"),
    "70,000 characters": ("linux/" + "a" * 70000, "too long"),
    "long architecture": ("linux/" + "a" * 40, "OS/ARCH"),
    "command substitution": ("$(id)/amd64", "OS/ARCH"),
    "empty": ("", "OS/ARCH"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.parametrize("command", ["resolve", "dockerfile", "make", "ci", "print", "job"])
def test_hostile_platform_values_exit_2_with_one_line(project, capsys, command, case):
    value, says = HOSTILE[case]
    root = project({"buildkit.yaml": "framework: torch==2.9.1\ngpu: true\ntrainer: {module: trainer.task}\n", **TRAINER})
    before = {"ci": ["github"], "print": ["base-image"]}.get(command, [])
    after = ["--image", "127.0.0.1:5999/x:y", "--target", "loopback"] if command == "job" else []
    code, out, err = main(capsys, command, *before, "--dir", str(root), "--platform", value, *after)
    assert code == 2, (out, err[:300])
    assert err.count("\n") == 1 and len(err) < 600 and "Traceback" not in err
    assert err.startswith("buildkit-py: error: --platform: ") and says in err
    assert "RUN touch" not in out and "FROM alpine" not in out


@pytest.mark.parametrize("command", ["resolve", "dockerfile", "print"])
def test_a_platform_nvidia_cuda_has_no_image_for_is_refused(project, capsys, command):
    root = project({"buildkit.yaml": "framework: torch==2.9.1\ngpu: true\ntrainer: {module: trainer.task}\n", **TRAINER})
    before = ["base-image"] if command == "print" else []
    code, out, err = main(capsys, command, *before, "--dir", str(root), "--platform", "linux/ppc64le")
    assert code == 2 and err.count("\n") == 1
    assert "--platform: linux/ppc64le: nvidia/cuda images are built for linux/amd64, linux/arm64" in err


def test_dockerfile_takes_the_platform(project, capsys):
    root = project({"buildkit.yaml": "framework: jax==0.11.2\ngpu: true\ntrainer: {module: trainer.task}\n", **TRAINER})
    code, out, err = main(capsys, "dockerfile", "--dir", str(root), "--platform", "linux/arm64")
    assert code == 0, err
    assert "for linux/arm64." in out.splitlines()[0] and "uv-0.13.0-arm64/bin/uv" in out
    code, plain, err = main(capsys, "dockerfile", "--dir", str(root))
    assert code == 0 and "arm64" not in plain
