from __future__ import annotations

from pathlib import Path

import pytest

from buildkit_py.config import Config, FrameworkRequest
from buildkit_py.errors import ResolutionError
from buildkit_py.matrix import load_matrix, minor
from buildkit_py.plan import make_plan


def plan_for(framework: str = "none", **kw):
    name, _, version = framework.partition("==")
    return make_plan(Config(root=Path("."), source="test", framework=FrameworkRequest(name, version or None), **kw))


# The expected results.
def test_torch_251_gets_cuda_124_cudnn_runtime_and_cu124_index():
    plan = plan_for("torch==2.5.1")
    assert plan.base_image == "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04"
    assert plan.framework.index_url == "https://download.pytorch.org/whl/cu124"
    assert plan.framework.requirement == "torch==2.5.1"
    assert (plan.cuda, plan.gpu, plan.python.install) == ("12.4.1", True, "apt")


def test_torch_251_with_cuda_118():
    plan = plan_for("torch==2.5.1", cuda="11.8")
    assert plan.base_image == "nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04"
    assert plan.framework.index_url == "https://download.pytorch.org/whl/cu118"


@pytest.mark.parametrize("version", ["2.15.0", "2.15.1"])
def test_tensorflow_215_gets_cuda_122_cudnn_89(version):
    plan = plan_for(f"tensorflow=={version}")
    assert plan.base_image == "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04"
    assert plan.cuda == "12.2.2" and plan.cudnn.startswith("8.9")
    assert plan.framework.requirement == f"tensorflow=={version}" and plan.framework.index_url is None


def test_gpu_false_gets_slim_cpu_base_with_the_requested_python():
    plan = plan_for("torch==2.5.1", gpu=False, python="3.12")
    assert plan.base_image == "python:3.12-slim-bookworm"
    assert (plan.cuda, plan.cudnn, plan.python.install) == (None, None, "present")
    assert plan.framework.index_url == "https://download.pytorch.org/whl/cpu"


def test_python_without_an_apt_package_uses_uv_standalone():
    plan = plan_for("torch==2.5.1", python="3.12")  # jammy has no python3.12 package
    assert plan.python.install == "uv" and plan.python.uv_requirement.startswith("uv==")


def test_tensorflow_bundled_cuda_uses_and_cuda_extra():
    plan = plan_for("tensorflow==2.17.1")
    assert plan.framework.requirement == "tensorflow[and-cuda]==2.17.1"


def test_jax_extra_follows_cuda_major():
    plan = plan_for("jax==0.4.35")
    assert plan.framework.requirement == f"jax[cuda{plan.cuda.split('.')[0]}]==0.4.35"


def test_nightly_builds():
    torch = plan_for("torch==nightly")
    assert torch.framework.pre and torch.framework.requirement == "torch"
    assert torch.framework.index_url.startswith("https://download.pytorch.org/whl/nightly/cu")
    tf = plan_for("tensorflow==nightly")
    assert tf.framework.requirement == "tf-nightly[and-cuda]"


def test_series_alone_means_its_newest_release_and_name_alone_the_newest_overall():
    assert plan_for("torch==2.5").framework.version == "2.5.1"
    newest = load_matrix().framework("torch").series[-1].releases[-1]
    assert plan_for("torch").framework.version == newest


def test_aliases():
    assert plan_for("pytorch==2.5.1").framework.name == "torch"
    assert plan_for("sklearn==1.5.2", gpu=False).framework.name == "scikit-learn"


def test_sklearn_is_cpu_by_default_and_refuses_gpu():
    assert plan_for("scikit-learn==1.5.2").gpu is False
    with pytest.raises(ResolutionError, match="scikit-learn has no GPU build"):
        plan_for("scikit-learn==1.5.2", gpu=True)


def test_no_framework_with_cuda_is_a_gpu_image():
    plan = plan_for("none", cuda="12.4")
    assert plan.gpu and plan.base_image == "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04" and plan.framework is None


def test_custom_base_image_keeps_its_cuda_for_the_wheel():
    plan = plan_for("torch==2.5.1", base_image="nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04")
    assert plan.base_kind == "custom" and plan.python.install == "auto"
    assert plan.framework.index_url.endswith("/cu121")
    with pytest.raises(ResolutionError, match="the base's CUDA 12.6.3 is not among them"):
        plan_for("torch==2.5.1", base_image="nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04")


# Bad input
def test_unknown_framework_lists_known_ones():
    with pytest.raises(ResolutionError) as err:
        plan_for("pytorh==2.5.1")
    assert "did you mean 'pytorch'" in str(err.value) and "tensorflow" in str(err.value)
    assert err.value.exit_code == 2


def test_unknown_version_lists_nearest_known():
    with pytest.raises(ResolutionError) as err:
        plan_for("torch==2.5.7")
    assert "torch==2.5.7 is not a known release" in str(err.value)
    assert "nearest known: 2.5.1, 2.5.0" in str(err.value)


def test_cuda_not_in_the_frameworks_wheels_lists_them():
    with pytest.raises(ResolutionError) as err:
        plan_for("torch==2.5.1", cuda="12.6")
    assert "torch==2.5.1 has CUDA wheels for 11.8, 12.1, 12.4" in str(err.value)


def test_python_not_supported_by_framework():
    with pytest.raises(ResolutionError, match=r"python: 3.8 is not supported by torch==2.5.1; supported: 3.9"):
        plan_for("torch==2.5.1", python="3.8")


def test_cuda_with_gpu_false_is_contradictory():
    with pytest.raises(ResolutionError, match="gpu: false"):
        plan_for("torch==2.5.1", cuda="12.4", gpu=False)


# The data itself: every release of every framework resolves, on GPU and CPU.
def _all_series():
    matrix = load_matrix()
    for fw in matrix.frameworks.values():
        for series in fw.series + ((fw.nightly,) if fw.nightly else ()):
            yield fw, series


@pytest.mark.parametrize("fw, series", list(_all_series()), ids=lambda v: getattr(v, "name", getattr(v, "series", "")))
def test_every_series_resolves(fw, series):
    version = "nightly" if series.series == "nightly" else series.releases[-1]
    cpu = plan_for(f"{fw.name}=={version}", gpu=False, python=series.python[-1]
                   if series.python[-1] in load_matrix().distros.cpu_python else None)
    assert cpu.base_kind == "cpu"
    if fw.gpu and series.cuda:
        gpu = plan_for(f"{fw.name}=={version}")
        assert minor(gpu.cuda) in series.cuda
        assert gpu.python.version in series.python


def test_cuda_table_flavours_follow_nvidia_naming():
    for release in load_matrix().cuda:
        major, minor_ = (int(x) for x in release.minor.split("."))
        expected = "cudnn8" if (major, minor_) <= (12, 2) else "cudnn9" if (major, minor_) == (12, 3) else "cudnn"
        assert release.cudnn_flavour == expected, release
