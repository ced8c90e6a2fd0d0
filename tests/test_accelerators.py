"""Vertex AI's GPUs as data, and the one rule (launcher.gpu.arch_supports) that resolution,
`versions --accelerator`, job specs (plan.check_accelerator) and the launcher share."""

from __future__ import annotations

from pathlib import Path

import pytest

from buildkit_py import api
from buildkit_py.catalog.matrix import load_matrix
from buildkit_py.config import Config, FrameworkRequest
from buildkit_py.errors import ResolutionError
from buildkit_py.pipeline.plan import check_accelerator, make_plan

# The names the issue lists, with NVIDIA's compute capabilities.
EXPECTED = {
    "NVIDIA_TESLA_T4": (7, 5), "NVIDIA_TESLA_V100": (7, 0), "NVIDIA_L4": (8, 9), "NVIDIA_TESLA_A100": (8, 0),
    "NVIDIA_A100_80GB": (8, 0), "NVIDIA_H100_80GB": (9, 0), "NVIDIA_H100_MEGA_80GB": (9, 0),
    "NVIDIA_H200_141GB": (9, 0), "NVIDIA_B200": (10, 0), "NVIDIA_GB200": (10, 0), "NVIDIA_RTX_PRO_6000": (12, 0),
    "NVIDIA_TESLA_P100": (6, 0), "NVIDIA_TESLA_P4": (6, 1),
}


def plan_for(framework: str, **kw):
    name, _, version = framework.partition("==")
    return make_plan(Config(root=Path("."), source="test", framework=FrameworkRequest(name, version or None), **kw))


def test_accelerators_and_their_compute_capability():
    found = {name: a.capability for name, a in load_matrix().accelerators.items()}
    assert found == EXPECTED


def _cases():
    matrix = load_matrix()
    for fw in matrix.frameworks.values():
        if not fw.gpu:
            continue
        for series in fw.series[-4:]:  # the current releases of each framework
            for accelerator in ("NVIDIA_TESLA_P4", "NVIDIA_TESLA_V100", "NVIDIA_TESLA_T4", "NVIDIA_L4",
                                "NVIDIA_H100_80GB", "NVIDIA_B200", "NVIDIA_RTX_PRO_6000"):
                yield fw.name, series.series, series.releases[-1], accelerator


@pytest.mark.parametrize("framework, series, release, accelerator", list(_cases()))
def test_versions_listing_and_resolution_agree(framework, series, release, accelerator):
    """What `versions --accelerator` lists is what resolution accepts, and the chosen build
    passes the job-spec check."""
    listed = dict(api.versions(framework, accelerator).frameworks)[framework]
    fits = any(s.series == series and release in s.releases for s in listed)
    try:
        plan = plan_for(f"{framework}=={release}", accelerator=accelerator)
    except ResolutionError:
        assert not fits
        return
    assert fits and check_accelerator(plan, accelerator) == ()
    assert plan.cuda_archs and plan.accelerator == accelerator


def test_pre_turing_gpus_have_no_cuda_13_build_anywhere():
    """CUDA 13 dropped Maxwell, Pascal and Volta: every CUDA 13 variant in the data agrees."""
    matrix = load_matrix()
    for fw in matrix.frameworks.values():
        for series in fw.series + ((fw.nightly,) if fw.nightly else ()):
            for cuda in series.cuda:
                archs = series.archs_for(cuda)
                if cuda.startswith("13.") and archs:
                    assert not any(a in archs for a in ("sm_50", "sm_60", "sm_61", "sm_70")), (fw.name, series.series)
