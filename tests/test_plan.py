from __future__ import annotations

from pathlib import Path

import pytest

from buildkit_py.api import versions
from buildkit_py.catalog.matrix import gpu_python, load_matrix, minor
from buildkit_py.catalog.reading import version_key
from buildkit_py.config import Config, FrameworkRequest
from buildkit_py.errors import ResolutionError
from buildkit_py.pipeline.plan import check_accelerator, make_plan


def plan_for(framework: str = "none", **kw):
    name, _, version = framework.partition("==")
    return make_plan(Config(root=Path("."), source="test", framework=FrameworkRequest(name, version or None), **kw))


# The expected results. torch's wheels bring CUDA and cuDNN (nvidia-*), so the base is the
# -base- flavour of the same release: no library shipped twice.
def test_torch_251_gets_cuda_124_base_and_cu124_index():
    plan = plan_for("torch==2.5.1")
    assert plan.base_image == "nvidia/cuda:12.4.1-base-ubuntu22.04" and plan.cuda_flavor == "base"
    assert plan.framework.index_url == "https://download.pytorch.org/whl/cu124"
    assert plan.framework.requirement == "torch==2.5.1" and plan.framework.bundles_cuda
    assert (plan.cuda, plan.gpu, plan.python.install) == ("12.4.1", True, "apt")
    assert plan.cudnn == "9.1"  # the cuDNN of torch's wheel: the base has none


def test_torch_251_with_cuda_118():
    plan = plan_for("torch==2.5.1", cuda="11.8")
    assert plan.base_image == "nvidia/cuda:11.8.0-base-ubuntu22.04"
    assert plan.framework.index_url == "https://download.pytorch.org/whl/cu118"


@pytest.mark.parametrize("version", ["2.15.0", "2.15.1"])
def test_tensorflow_215_uses_its_and_cuda_wheels_on_a_base_image(version):
    plan = plan_for(f"tensorflow=={version}")
    assert plan.base_image == "nvidia/cuda:12.2.2-base-ubuntu22.04"
    assert plan.cuda == "12.2.2" and plan.cudnn.startswith("8.9")
    assert plan.framework.requirement == f"tensorflow[and-cuda]=={version}" and plan.framework.index_url is None


@pytest.mark.parametrize("version", ["2.15.0", "2.15.1"])
def test_tensorflow_215_with_the_system_cudnn(version):
    plan = plan_for(f"tensorflow=={version}", cuda_flavor="cudnn-runtime")
    assert plan.base_image == "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04"
    assert plan.framework.requirement == f"tensorflow=={version}" and not plan.framework.bundles_cuda
    assert plan.cudnn.startswith("8.9")


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
    # Without a framework nothing brings cuDNN: the cuDNN runtime flavour, as before.
    plan = plan_for("none", cuda="12.4")
    assert plan.gpu and plan.base_image == "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04" and plan.framework is None
    assert plan.cuda_archs == () and plan.notes == ()


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
    """Every release resolves, or is refused for the reason its data gives: wheels only for Pythons
    older than the launcher's, or nvidia/cuda bases that NVIDIA deleted (naming what builds)."""
    matrix = load_matrix()
    version = "nightly" if series.series == "nightly" else series.releases[-1]
    usable = [p for p in series.python if version_key(p) >= version_key(matrix.distros.min_python)]
    if not usable:
        line = [r for s in fw.series for r in s.releases if r.split(".")[0] == version.split(".")[0] and
                any(version_key(p) >= version_key(matrix.distros.min_python) for p in s.for_release(r).python)]
        if line:  # the last release of the line that an image can have, on CPU as on GPU (TensorFlow 1.15)
            moved = plan_for(f"{fw.name}=={version}", gpu=False)
            assert moved.framework.version == max(line, key=version_key) and moved.base_kind == "cpu"
            assert any("is installed instead" in n for n in moved.said), moved.said
            return
        with pytest.raises(ResolutionError, match=r"need Python >= 3\.7 \(the launcher\); nearest release that builds"):
            plan_for(f"{fw.name}=={version}", gpu=False)
        return
    cpu = plan_for(f"{fw.name}=={version}", gpu=False, python=usable[-1] if usable[-1] in matrix.distros.cpu_python else None)
    assert cpu.base_kind == "cpu"
    build = fw.gpu_series(series)
    if fw.gpu and build is not None:  # TensorFlow 1.x: NVIDIA's 1.15 build on GPUs
        gpu = plan_for(f"{fw.name}=={version}")
        assert gpu.framework.requirement == f"{build.install.package}=={build.releases[0]}"
        assert gpu.python.version in build.python and minor(gpu.cuda) in build.cuda, gpu
        assert any("is installed instead" in n for n in gpu.notes), gpu.notes
        return
    if fw.gpu and series.cuda:
        if not any(gpu_python(matrix, p) for p in usable):  # Python 3.7 only: no nvidia/cuda image has it
            if series.install.bundles_cuda:  # the wheels bring CUDA: the Python base, the host's driver
                gpu = plan_for(f"{fw.name}=={version}")
                assert gpu.gpu and gpu.base_kind == "wheels" and gpu.base_image.startswith("python:3.7")
                assert dict(gpu.driver_env)["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
                return
            cpu = plan_for(f"{fw.name}=={version}")  # no GPU was asked for: a CPU image, said
            assert not cpu.gpu and any("no GPU was asked for" in n for n in cpu.notes), cpu.notes
            with pytest.raises(ResolutionError, match=r"on a GPU image: .*gpu: false builds"):
                plan_for(f"{fw.name}=={version}", accelerator="NVIDIA_TESLA_T4")
            return
        if all(c in matrix.deleted_cuda for c in series.cuda):
            with pytest.raises(ResolutionError, match="NVIDIA deleted from Docker Hub .*nearest release that builds"):
                plan_for(f"{fw.name}=={version}")
            return
        gpu = plan_for(f"{fw.name}=={version}")
        assert minor(gpu.cuda) in series.cuda
        assert gpu.python.version in usable


def test_cuda_table_flavours_follow_nvidia_naming():
    for release in load_matrix().cuda:
        major, minor_ = (int(x) for x in release.minor.split("."))
        expected = "cudnn8" if (major, minor_) <= (12, 2) else "cudnn9" if (major, minor_) == (12, 3) else "cudnn"
        assert release.cudnn_flavour == expected, release


def test_cuda_table_has_the_corrected_facts():
    releases = {r.cuda: r for r in load_matrix().cuda}
    assert releases["12.5.1"].cudnn == "9.2.1" and releases["12.5.1"].ubuntu_for(True) == ("20.04", "22.04")
    assert "24.04" in releases["12.5.1"].ubuntu_for(False)
    assert releases["13.0.3"].min_driver == "580.126.20"
    assert releases["13.1.2"].min_driver == "590.48.01" and "13.1.1" not in releases
    assert {"13.2.1", "13.3.1"} <= set(releases)


# Facts of the issue, corrected in the data.
def test_xgboost_170_is_the_post_release():
    assert plan_for("xgboost==1.7.0.post0").framework.requirement == "xgboost==1.7.0.post0"
    with pytest.raises(ResolutionError, match="xgboost==1.7.0 is not a known release"):
        plan_for("xgboost==1.7.0")


@pytest.mark.parametrize("version", ["0.7.0", "0.7.1"])
def test_jax_070_and_071_stay_on_cuda_12(version):
    plan = plan_for(f"jax=={version}")
    assert plan.framework.requirement == f"jax[cuda12]=={version}"
    with pytest.raises(ResolutionError, match="has CUDA wheels for 12.1, .*12.9; cuda 13.0 is not among them"):
        plan_for(f"jax=={version}", cuda="13.0")
    assert plan_for("jax==0.7.2", cuda="13.0").framework.requirement == "jax[cuda13]==0.7.2"


def test_jax_nightly_and_011_need_python_312():
    for request in ("jax==nightly", "jax==0.11.0", "jax"):
        plan = plan_for(request)
        assert plan.python.version == "3.12", request  # the supported Python closest to the default 3.11
        assert plan.python.install == "apt" and plan.ubuntu == "24.04"
    with pytest.raises(ResolutionError, match="python: 3.11 is not supported by jax==nightly"):
        plan_for("jax==nightly", python="3.11")


@pytest.mark.parametrize("request_, python", [
    ("jax==0.4.33", "3.13"), ("jax==0.7.0", "3.14"), ("scikit-learn==1.3.0", "3.12"),
    ("scikit-learn==1.5.1", "3.13"), ("scikit-learn==1.7.1", "3.14"),
])
def test_pythons_without_wheels_are_refused(request_, python):
    with pytest.raises(ResolutionError, match=f"python: {python} is not supported"):
        plan_for(request_, python=python, gpu=False)


def test_newer_series_of_the_same_release_line_keep_their_pythons():
    assert plan_for("scikit-learn==1.7.2", python="3.14", gpu=False).python.version == "3.14"
    assert plan_for("jax==0.4.34", python="3.13", gpu=False).python.version == "3.13"


@pytest.mark.parametrize("version, default", [("2.9.1", "12.8"), ("2.10.0", "12.8"), ("2.11.0", "13.0"),
                                              ("2.14.1", "13.0"), ("2.15.0", "13.2")])
def test_torch_gets_its_pypi_default_cuda(version, default):
    """Not the newest CUDA of the wheels: 13.0 was experimental for 2.9 and 2.10."""
    assert minor(plan_for(f"torch=={version}").cuda) == default


def test_torch_2121_also_has_cu129_and_2120_does_not():
    assert plan_for("torch==2.12.1", cuda="12.9").framework.index_url.endswith("/cu129")
    with pytest.raises(ResolutionError, match="torch==2.12.0 has CUDA wheels for 12.6, 13.0, 13.2"):
        plan_for("torch==2.12.0", cuda="12.9")


def test_tensorflow_nightly_needs_a_recent_cudnn_and_no_python_310():
    with pytest.raises(ResolutionError, match="python: 3.10 is not supported by tensorflow==nightly"):
        plan_for("tensorflow==nightly", python="3.10")
    system = plan_for("tensorflow==nightly", cuda_flavor="cudnn-runtime")
    assert system.base_image.startswith("nvidia/cuda:12.9.2-cudnn-runtime-") and system.framework.requirement == "tf-nightly"


def test_experimental_cuda_only_when_asked_for():
    plan = plan_for("torch==2.9.1", cuda="13.0")
    assert plan.cuda == "13.0.3" and "experimental" in plan.notes[0]


# The GPU the job will run on.
def test_torch_291_for_a_v100_gets_a_cuda_12_build_with_sm_70():
    plan = plan_for("torch==2.9.1", accelerator="NVIDIA_TESLA_V100")
    assert plan.cuda == "12.8.1" and "sm_70" in plan.cuda_archs and plan.accelerator == "NVIDIA_TESLA_V100"
    assert ("BUILDKIT_PY_CUDA_ARCHS", ",".join(plan.cuda_archs)) in plan.launcher_env


def test_torch_211_for_a_v100_falls_back_to_its_cuda_126_build():
    """The default (13.0) and 12.8 (Volta dropped in 2.11) have no sm_70: 12.6 has."""
    plan = plan_for("torch==2.11.0", accelerator="NVIDIA_TESLA_V100")
    assert plan.cuda == "12.6.3" and plan.framework.index_url.endswith("/cu126")
    assert plan.cudnn is None  # the data records the cuDNN of the default wheel only


def test_impossible_combination_names_what_works():
    with pytest.raises(ResolutionError) as err:
        plan_for("torch==2.9.1", cuda="13.0", accelerator="NVIDIA_TESLA_V100")
    assert "torch 2.9.1: use cuda 12.6, 12.8 or 12.9 for NVIDIA_TESLA_V100 (sm_70)" in str(err.value)
    assert err.value.exit_code == 2


def test_no_build_for_the_gpu_names_the_newest_release_that_has_one():
    with pytest.raises(ResolutionError) as err:
        plan_for("torch==2.15.0", accelerator="NVIDIA_TESLA_V100")
    assert "torch 2.15.0 has no build with kernels for NVIDIA_TESLA_V100 (sm_70)" in str(err.value)
    assert "torch 2.14.1 with cuda 12.6 has them" in str(err.value)


def test_xgboost_34_for_a_v100_installs_xgboost_cu12():
    assert plan_for("xgboost==3.4.1").framework.requirement == "xgboost==3.4.1"
    plan = plan_for("xgboost==3.4.1", accelerator="NVIDIA_TESLA_V100")
    assert plan.framework.requirement == "xgboost-cu12==3.4.1" and plan.cuda.startswith("12.")


@pytest.mark.parametrize("accelerator, ok", [("NVIDIA_L4", True), ("NVIDIA_TESLA_T4", True), ("NVIDIA_B200", True),
                                             ("NVIDIA_RTX_PRO_6000", True), ("NVIDIA_TESLA_P100", False)])
def test_newer_gpus_of_a_family_use_its_cubins(accelerator, ok):
    """sm_89 (L4) runs torch's sm_86 cubins; P100 (sm_60) has no 13.x build."""
    if ok:
        assert plan_for("torch==2.15.0", accelerator=accelerator).accelerator == accelerator
    else:
        with pytest.raises(ResolutionError, match="no build with kernels for NVIDIA_TESLA_P100"):
            plan_for("torch==2.15.0", accelerator=accelerator)


def test_check_accelerator_for_job_specs():
    plan = plan_for("torch==2.15.0")
    assert check_accelerator(plan, "NVIDIA_H100_80GB") == ()
    with pytest.raises(ResolutionError, match="no kernels for NVIDIA_TESLA_V100 .sm_70."):
        check_accelerator(plan, "NVIDIA_TESLA_V100")
    with pytest.raises(ResolutionError, match="built for CPU"):
        check_accelerator(plan_for("torch==2.15.0", gpu=False), "NVIDIA_L4")
    unknown = plan_for("none", cuda="12.4")
    assert "not checked" in check_accelerator(unknown, "NVIDIA_L4")[0]


# cuda_flavor
@pytest.mark.parametrize("flavor, tag", [("auto", "base"), ("base", "base"), ("runtime", "runtime"),
                                         ("cudnn-runtime", "cudnn-runtime"), ("devel", "devel")])
def test_cuda_flavors_for_a_bundling_framework(flavor, tag):
    plan = plan_for("torch==2.9.1", cuda_flavor=flavor)
    assert plan.base_image == f"nvidia/cuda:12.8.1-{tag}-ubuntu22.04"
    assert plan.framework.requirement == "torch==2.9.1"
    assert bool(plan.notes) == (flavor in ("runtime", "cudnn-runtime"))  # shipped twice: said so


@pytest.mark.parametrize("flavor, tag", [("auto", "cudnn8-runtime"), ("cudnn-runtime", "cudnn8-runtime"),
                                         ("devel", "cudnn8-devel")])
def test_cuda_flavors_for_tensorflow_213_with_the_system_cudnn(flavor, tag):
    plan = plan_for("tensorflow==2.13.1", cuda_flavor=flavor)
    assert plan.base_image == f"nvidia/cuda:11.8.0-{tag}-ubuntu22.04" and plan.framework.requirement == "tensorflow==2.13.1"


@pytest.mark.parametrize("flavor", ["base", "runtime"])
def test_system_cudnn_framework_refuses_a_flavour_without_cudnn(flavor):
    with pytest.raises(ResolutionError, match=f"cuda_flavor: tensorflow==2.13.1 loads the system .*-{flavor}- image"):
        plan_for("tensorflow==2.13.1", cuda_flavor=flavor)


def test_tensorflow_218_with_the_system_cudnn_finds_no_matching_tag():
    """12.5.1's cuDNN is 9.2.1, older than the 9.3 TensorFlow 2.18 was built with."""
    with pytest.raises(ResolutionError, match=r"cuDNN 9.3.x matches tensorflow==2.18.1.*\[and-cuda\] wheels instead"):
        plan_for("tensorflow==2.18.1", cuda_flavor="cudnn-runtime")


def test_cuda_flavor_needs_a_resolved_gpu_base():
    with pytest.raises(ResolutionError, match="cuda_flavor: base chooses the nvidia/cuda flavour, but the image has no GPU"):
        plan_for("torch==2.9.1", gpu=False, cuda_flavor="base")
    with pytest.raises(ResolutionError, match="with base_image, the base is yours"):
        plan_for("torch==2.9.1", base_image="nvidia/cuda:12.8.1-devel-ubuntu22.04", cuda_flavor="devel")


# Bad input
def test_unknown_accelerator_names_the_nearest():
    with pytest.raises(ResolutionError) as err:
        plan_for("torch==2.9.1", accelerator="NVIDIA_TESLA_V10")
    assert "unknown accelerator 'NVIDIA_TESLA_V10'; nearest: NVIDIA_TESLA_V100" in str(err.value)
    assert err.value.exit_code == 2


def test_accelerator_with_gpu_false_is_contradictory():
    with pytest.raises(ResolutionError, match="accelerator: NVIDIA_L4 was given, but gpu is false"):
        plan_for("torch==2.9.1", gpu=False, accelerator="NVIDIA_L4")
    with pytest.raises(ResolutionError, match="accelerator: NVIDIA_L4 was given, but scikit-learn has no GPU build"):
        plan_for("scikit-learn==1.9.1", accelerator="NVIDIA_L4")


def test_accelerator_with_a_custom_base_is_checked_against_its_cuda():
    with pytest.raises(ResolutionError, match="use cuda 12.6, 12.8 or 12.9 for NVIDIA_TESLA_V100"):
        plan_for("torch==2.9.1", base_image="nvidia/cuda:13.0.3-devel-ubuntu24.04", accelerator="NVIDIA_TESLA_V100")


# The data itself: every GPU series of a framework with CUDA builds records their architectures,
# except the old releases added for issue 18, whose build scripts were not read per tag (the plan
# notes that the launcher cannot check them).
UNRECORDED_ARCHS_BEFORE = {"torch": "1.13", "tensorflow": "2.12", "xgboost": "1.7"}


def test_every_cuda_variant_records_its_architectures():
    matrix = load_matrix()
    for fw in matrix.frameworks.values():
        for series in fw.series + ((fw.nightly,) if fw.nightly else ()):
            floor = UNRECORDED_ARCHS_BEFORE.get(fw.name)
            if floor and series.series != "nightly" and version_key(series.series) < version_key(floor):
                assert not series.archs, (fw.name, series.series)
                continue
            for release in series.releases or ("nightly",):
                applied = series.for_release(release)
                for cuda in applied.cuda:
                    assert applied.archs_for(cuda), (fw.name, series.series, cuda)


# Older releases (issue 18, cause 9): still on the package index, resolved with the CUDA/cuDNN of
# their wheels where NVIDIA still has the base, refused with what builds where it does not.
def test_torch_1121_uses_its_cu116_build_since_the_pypi_default_base_is_deleted():
    plan = plan_for("torch==1.12.1")
    assert plan.base_image == "nvidia/cuda:11.6.2-base-ubuntu20.04"
    assert plan.framework.requirement == "torch==1.12.1"
    assert plan.framework.index_url == "https://download.pytorch.org/whl/cu116"
    assert plan.python.version == "3.10"
    assert any("CUDA 10.2, the one PyPI serves" in n and "CUDA 11.6 build is used" in n for n in plan.notes)


def test_tensorflow_293_gets_cuda_112_with_cudnn_81():
    plan = plan_for("tensorflow==2.9.3")
    assert plan.base_image == "nvidia/cuda:11.2.2-cudnn8-runtime-ubuntu20.04"
    assert (plan.cuda, plan.cudnn, plan.python.version) == ("11.2.2", "8.1.1", "3.10")
    assert plan.framework.requirement == "tensorflow==2.9.3" and plan.pip == ()
    assert plan_for("tensorflow==2.9.3", python="3.8").python.install == "apt"


def test_a_cuda_whose_base_was_deleted_is_refused_with_what_builds():
    with pytest.raises(ResolutionError) as err:
        plan_for("torch==1.12.1", cuda="10.2")
    message = str(err.value)
    assert "nvidia/cuda 10.2, whose tags NVIDIA deleted from Docker Hub" in message
    assert "NVIDIA/nvidia-docker#1768" in message and "nearest release that builds: torch==1.13.0 (CUDA 11.7)" in message
    with pytest.raises(ResolutionError, match=r"needs nvidia/cuda 10\.1, .*nearest release that builds: tensorflow==2\.4\.0 "
                                              r"\(CUDA 11\.0\); gpu: false builds tensorflow==2\.3\.4 for CPU"):
        plan_for("tensorflow==2.3.4")
    cpu = plan_for("tensorflow==2.3.4", gpu=False)
    assert (cpu.base_image, cpu.pip) == ("python:3.8-slim-bookworm", ("protobuf<3.20",))


def test_tensorflow_1_x_builds_nvidias_1_15_on_a_gpu_and_the_official_wheel_on_python_3_7():
    """Issue 28: TensorFlow 1.x on GPUs through NVIDIA's 1.15 build (Python 3.8, CUDA 12.1, its CUDA as wheels), code
    pinned to an older 1.x too, with a note; on CPUs the official cp37 wheels on python:3.7-slim-bookworm."""
    gpu = plan_for("tensorflow==1.15.5")
    assert gpu.framework.requirement == "nvidia-tensorflow==1.15.5+nv23.3"
    assert gpu.framework.index_url == "https://pypi.ngc.nvidia.com" and gpu.framework.bundles_cuda
    assert gpu.python.version == "3.8" and gpu.base_image == "nvidia/cuda:12.1.1-base-ubuntu20.04" and gpu.cudnn == "8.8"
    assert gpu.framework.replaces == ("tensorflow", "tensorflow-gpu", "tensorflow-cpu")
    assert gpu.framework.overrides[1] == 'tensorflow-gpu ; sys_platform == "never"'
    assert not any("is the last" in n for n in gpu.notes)
    older = plan_for("tensorflow==1.13.1")
    assert older.framework.requirement == gpu.framework.requirement and older.python.version == "3.8"
    assert any("tensorflow 1.15 is the last 1.x series, and code written for 1.13 runs on it" in n for n in older.notes)
    for version in ("1.13.1", "1.14.0", "1.15.5", "2.0.4", "2.1.4"):
        cpu = plan_for(f"tensorflow=={version}", gpu=False)
        assert (cpu.base_image, cpu.python.version) == ("python:3.7-slim-bookworm", "3.7"), version
        assert cpu.framework.requirement == f"tensorflow=={version}" and cpu.framework.replaces == ()
    with pytest.raises(ResolutionError, match=r"python: 3\.7 is not supported by tensorflow==1\.15\.5 on a GPU "
                                              r"\(nvidia-tensorflow==1\.15\.5\+nv23\.3\); supported: 3\.8"):
        plan_for("tensorflow==1.15.5", python="3.7")
    # 2.0 and 2.1: cp37 wheels that do not bring CUDA, CUDA 10.x bases deleted, no GPU build: a CPU image where no GPU
    # was asked for, said; refused where one was.
    cpu = plan_for("tensorflow==2.1.4")
    assert (cpu.gpu, cpu.base_image) == (False, "python:3.7-slim-bookworm")
    assert any("no GPU was asked for (gpu, accelerator, cuda), so the image is built for CPU" in n for n in cpu.notes)
    with pytest.raises(ResolutionError) as err:
        plan_for("tensorflow==2.1.4", accelerator="NVIDIA_TESLA_T4")
    assert str(err.value).startswith("python: 3.7 on a GPU image:") and "gpu: false builds tensorflow==2.1.4" in str(err.value)
    assert plan_for("tensorflow==2.9.3", python="3.7", gpu=False).base_image == "python:3.7-slim-bookworm"
    assert not plan_for("tensorflow==2.9.3", python="3.7").gpu  # no GPU asked for: the CPU image
    with pytest.raises(ResolutionError, match="python: 3.7 on a GPU image: .*use Python 3.8 or newer"):
        plan_for("tensorflow==2.9.3", python="3.7", gpu=True)
    moved = plan_for("tensorflow==1.12.3", gpu=False)  # cp35/cp36 only: the line's last release, as on a GPU
    assert moved.framework.requirement == "tensorflow==1.15.5" and moved.python.version == "3.7"
    assert any("tensorflow==1.12.3: tensorflow==1.15.5 (Python 3.7) is installed instead" in n for n in moved.said)
    listed = versions("tensorflow").to_dict()["tensorflow"]
    assert listed["1.12"]["gpu_build"] == "nvidia-tensorflow==1.15.5+nv23.3 (CUDA 12.1, Python 3.8)"
    assert "gpu_build" not in listed["2.1"]


def test_torch_and_xgboost_releases_older_than_the_cuda_11_era_build_for_cpu_and_say_what_builds_on_a_gpu():
    """Issue 28: torch==1.2.0 and xgboost==0.81 were refused as unknown. Their wheels still install (cp37; py3), their
    CUDA bases are deleted: CPU images build, GPU plans name the nearest release that builds."""
    torch = plan_for("torch==1.2.0", gpu=False)
    assert (torch.base_image, torch.python.version) == ("python:3.7-slim-bookworm", "3.7")
    assert torch.framework.requirement == "torch==1.2.0"
    assert torch.framework.index_url == "https://download.pytorch.org/whl/cpu"
    assert plan_for("torch==1.6.0", gpu=False).python.version == "3.8"  # cp38 from 1.4
    gpu = plan_for("torch==1.2.0")  # Python 3.7 only, its wheel brings CUDA 10.0: the Python base, the host's driver
    assert (gpu.gpu, gpu.base_kind, gpu.base_image, gpu.cuda) == (True, "wheels", "python:3.7-slim-bookworm", "10.0")
    assert gpu.template == "wheels.Dockerfile.j2" and gpu.forward_compat_branches == ()
    with pytest.raises(ResolutionError, match=r"torch==1\.6\.0.*nearest release that builds: torch==1\.7\.0 \(CUDA 11\.0\)"):
        plan_for("torch==1.6.0")  # Python 3.8: an nvidia/cuda image could have it, and its CUDA 10.2 bases are gone
    xgb = plan_for("xgboost==0.81", gpu=False)
    assert xgb.framework.requirement == "xgboost==0.81" and xgb.python.version == "3.8"
    assert "libgomp1" in xgb.system_packages  # 1.2.1 and older load the system's libgomp.so.1
    assert any("xgboost loads a system library the base may lack: libgomp1" in n for n in xgb.said), xgb.said
    assert "libgomp1" not in plan_for("xgboost==1.3.3", gpu=False).system_packages  # vendors its own
    with pytest.raises(ResolutionError, match=r"xgboost==0\.81.*nearest release that builds: xgboost==1\.4\.0 \(CUDA"):
        plan_for("xgboost==0.81")
    with pytest.raises(ResolutionError, match=r"xgboost==0\.71 is not a known release; nearest known: 0\.72\.1"):
        plan_for("xgboost==0.71", gpu=False)  # sdist only on PyPI: not in the data


@pytest.mark.parametrize("made", [
    lambda: plan_for("torch==2.5.1"), lambda: plan_for("tensorflow==2.15.1"),
    lambda: plan_for("jax", accelerator="TPU_V5_LITEPOD"), lambda: plan_for("torch==2.5.1", gpu=False, python="3.10"),
    lambda: plan_for("none", gpu=True, cuda="12.4"), lambda: plan_for("torch==2.7.0", accelerator="NVIDIA_GB200"),
    lambda: plan_for("xgboost", base_image="nvidia/cuda:12.4.1-runtime-ubuntu22.04"),
])
def test_a_plan_made_again_from_its_json_is_the_same_plan(made):
    """A kept recipe holds the plan once, as to_dict() through JSON; BuildResult.plan makes the value again from it.
    Every kind of field comes back typed: tuples, nested values, paths, the lock, another tool's exported lock."""
    import json
    from dataclasses import replace

    from buildkit_py.config import ImportScope, TrainerPackage
    from buildkit_py.pipeline.plan import PlanLock
    from buildkit_py.pipeline.plan.model import plan_from_dict
    from buildkit_py.sources.lockfiles import Exported

    plan = replace(made(), env=(("A", "1"), ("B", "two")),
                   lock=PlanLock("sha256:" + "a" * 64, "sha256:" + "b" * 64, ".buildkit-py/req.txt", Path("/tmp/req.txt")),
                   requirements_export=Exported("uv.lock", ".buildkit-py/exported.txt", Path("/tmp/e.txt"),
                                                (("torch==2.5.1", "uv.lock:88"),)),
                   trainer_package=TrainerPackage("trainer", "0.1", (("console_scripts", ("train = trainer.task:main",)),)),
                   import_check=ImportScope("trainer.task", None, "src"))
    again = plan_from_dict(json.loads(json.dumps(plan.to_dict(), default=str)))
    assert again == plan
    assert isinstance(again.env, tuple) and isinstance(again.lock.source, Path) and again.python == plan.python
