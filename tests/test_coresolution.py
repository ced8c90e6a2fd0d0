"""The framework release and the Python chosen with the rest of the image's requirements (pipeline/resolution.py):
against a loopback index of stand-in wheels whose metadata reproduces the bounds real libraries put on a framework
(tensorflow-data-validation's tensorflow<2.17, a library with cp310 wheels only), the resolution takes the newest
release and Python that resolve the whole set, keeps a pin, says what bounded the choice, and remembers it."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
from test_lock_e2e import Index
from test_resolution import online  # noqa: F401 (the fixture below: the resolver runs, as without BUILDKIT_PY_OFFLINE)

from buildkit_py.config import load_config
from buildkit_py.errors import ConfigError
from buildkit_py.pipeline.plan import make_plan
from buildkit_py.pipeline.resolution import declared_in, remembered, resolve_plan
from buildkit_py.pipeline.uv import python_platform

pytestmark = pytest.mark.usefixtures("online")


def wheel(directory: Path, name: str, version: str, *, requires: tuple[str, ...] = (), tag: str = "py3-none-any",
          requires_python: str | None = None) -> Path:
    """A wheel whose METADATA carries Requires-Dist and Requires-Python, for one tag: what the resolver reads."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    meta += f"Requires-Python: {requires_python}\n" if requires_python else ""
    files = {f"{dist}/__init__.py": f"VERSION = {version!r}\n", f"{info}/METADATA": meta,
             f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n"}
    record = "".join(f"{n},sha256={hashlib.sha256(t.encode()).hexdigest()},{len(t.encode())}\n" for n, t in files.items())
    path = directory / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for n, t in {**files, f"{info}/RECORD": record + f"{info}/RECORD,,\n"}.items():
            archive.writestr(zipfile.ZipInfo(n, (2020, 1, 1, 0, 0, 0)), t)
    return path


@pytest.fixture
def index(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in ("1.9.1", "1.6.1", "1.5.2"):  # releases base_images/frameworks/scikit-learn.yaml knows
        wheel(wheels, "scikit-learn", version)
    wheel(wheels, "bkpy-bounded", "1.0", requires=("scikit-learn<1.6",))  # what tfdv does to tensorflow
    wheel(wheels, "bkpy-cp310", "1.0", tag="cp310-cp310-manylinux_2_17_x86_64")  # tfx-bsl: no wheel for 3.11
    wheel(wheels, "bkpy-glibc", "1.0", tag="py3-none-manylinux_2_31_x86_64")  # libtpu 0.0.50: a newer glibc than 2.28
    served = Index(wheels)
    yield served
    served.close()


def config_for(root: Path, index_url: str, requirements: str, framework: str | None, extra: str = ""):
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.py").write_text("import sklearn\n")
    (root / "requirements.txt").write_text(requirements)
    (root / "pip.conf").write_text(f"[global]\nindex-url = {index_url}\n")
    (root / "buildkit.yaml").write_text((f"framework: {framework!r}\n" if framework else "") +
                                        "hypertune: false\npip_conf: pip.conf\ntrainer: {script: train.py}\n"
                                        f"requirements: requirements.txt\n{extra}")
    return load_config(root / "buildkit.yaml")


def resolved_for(config):
    plan = make_plan(config)
    return plan, resolve_plan(config, plan, declared_in(config, plan))


def test_an_unpinned_framework_moves_to_the_newest_release_that_resolves_and_says_what_bounded_it(index, tmp_path):
    config = config_for(tmp_path / "app", index.url, "scikit-learn\nbkpy-bounded\n", "scikit-learn")
    plan, got = resolved_for(config)
    assert plan.framework.version == "1.9.1"  # the newest known, before the resolution
    assert got.plan.framework.requirement == "scikit-learn==1.5.2" and got.config.framework.version == "1.5.2"
    assert dict(got.resolution.pins) == {"scikit-learn": "1.5.2", "bkpy-bounded": "1.0"}
    note = got.resolution.note
    assert "scikit-learn 1.5.2 chosen with the rest of the requirements: scikit-learn 1.9.1 does not resolve" in note
    assert "bkpy-bounded" in note and "needs scikit-learn<1.6" in note and "3 resolver calls" in note
    # Kept by the inputs: the next dry run makes no resolver call, and `print`'s plan is the same one.
    asked = len(index.seen)
    again = resolve_plan(config, plan, declared_in(config, plan))
    assert again.plan == got.plan and again.resolution.cached and len(index.seen) == asked
    kept = remembered(config, plan)
    assert kept is not None and kept.plan == got.plan and len(index.seen) == asked


def test_a_range_in_the_config_is_the_resolutions_to_choose_in(index, tmp_path):
    config = config_for(tmp_path / "app", index.url, "bkpy-bounded\n", "scikit-learn>=1.5,<1.9")
    plan, got = resolved_for(config)
    assert str(config.framework) == "scikit-learn<1.9,>=1.5" and plan.framework.version == "1.8.0"
    assert got.plan.framework.version == "1.5.2"


def test_a_pinned_framework_is_kept_and_the_conflict_names_both_sides(index, tmp_path):
    config = config_for(tmp_path / "app", index.url, "bkpy-bounded\n", "scikit-learn==1.9.1",
                        extra="python: '3.11'\n")
    with pytest.raises(ConfigError) as err:
        resolved_for(config)
    text = str(err.value)
    assert "requirements.txt:1: 'bkpy-bounded' does not resolve for Python 3.11" in text
    assert "scikit-learn==1.9.1" in text and "scikit-learn<1.6" in text and "Traceback" not in text


def test_an_unpinned_python_moves_to_the_newest_one_that_resolves(index, tmp_path):
    config = config_for(tmp_path / "app", index.url, "bkpy-cp310\n", "scikit-learn==1.5.2")
    plan, got = resolved_for(config)
    assert plan.python.version == "3.11" and got.plan.python.version == "3.10" and got.config.python == "3.10"
    assert got.plan.base_image == "python:3.10-slim-bookworm" and got.plan.framework.version == "1.5.2"
    assert "Python 3.10 chosen with the rest of the requirements: Python 3.11 does not resolve" in got.resolution.note


def test_a_python_the_config_pins_is_kept(index, tmp_path):
    config = config_for(tmp_path / "app", index.url, "bkpy-cp310\n", "scikit-learn==1.5.2", extra="python: '3.11'\n")
    with pytest.raises(ConfigError, match="'bkpy-cp310' does not resolve for Python 3.11"):
        resolved_for(config)


def test_the_resolution_targets_the_bases_glibc(index, tmp_path):
    """A wheel for glibc 2.31 runs on Debian 12 (2.36), the CPU base: it resolves there; on a base buildkit-py does
    not know, manylinux_2_28 is what is assumed, and it does not."""
    config = config_for(tmp_path / "app", index.url, "bkpy-glibc\n", "none")
    plan, got = resolved_for(config)
    assert plan.glibc == "2.36" and python_platform(plan, "linux/amd64") == "x86_64-manylinux_2_36"
    assert dict(got.resolution.pins) == {"bkpy-glibc": "1.0"}
    custom = config_for(tmp_path / "custom", index.url, "bkpy-glibc\n", "none",
                        extra="base_image: registry.example/base:1\npython: '3.11'\n")
    assert make_plan(custom).glibc == "2.28"
    with pytest.raises(ConfigError, match="manylinux_2_31"):
        resolved_for(custom)


def test_every_base_has_its_glibc_from_the_data():
    from buildkit_py.catalog.matrix import load_matrix

    distros = load_matrix().distros
    assert distros.ubuntu_glibc == {"20.04": "2.31", "22.04": "2.35", "24.04": "2.39"} and distros.cpu_glibc == "2.36"
    gpu = make_plan(load_config(None, document={"framework": "torch==2.9.1"}))
    assert gpu.ubuntu and gpu.glibc == distros.ubuntu_glibc[gpu.ubuntu]


def test_a_no_cuda_frameworks_release_the_data_lacks_is_the_indexs_and_its_wheels_pick_the_python(index, tmp_path):
    """scikit-learn needs no CUDA matching: a release base_images/ does not list is taken from the index, only as
    wheels, and the Python its wheels are for is the resolution's choice (0.19.2: cp37 here)."""
    wheel(index.directory, "scikit-learn", "0.19.2", tag="cp37-cp37m-manylinux_2_17_x86_64")
    config = config_for(tmp_path / "app", index.url, "", "scikit-learn==0.19.2")
    plan, got = resolved_for(config)
    assert plan.framework.source == "unrecorded" and plan.python.version == "3.11"
    assert any("not in base_images/frameworks/scikit-learn.yaml: a release of the package index" in n for n in plan.notes)
    assert got.plan.python.version == "3.7" and got.plan.base_image == "python:3.7-slim-bookworm"
    assert dict(got.resolution.pins) == {"scikit-learn": "0.19.2"}
    # A CUDA framework's release must be in the data: which CUDA its wheels need is not on the index.
    from buildkit_py.errors import ResolutionError

    with pytest.raises(ResolutionError, match=r"torch==2\.5\.7 is not a known release"):
        make_plan(config_for(tmp_path / "torch", index.url, "", "torch==2.5.7"))


def test_a_local_version_label_is_a_build_of_its_release_not_a_second_pin():
    from packaging.requirements import Requirement

    from buildkit_py.catalog.matrix import load_matrix
    from buildkit_py.inference.frameworks import _pin

    matrix = load_matrix()
    both = _pin(matrix, [("requirements.txt:1", Requirement("torch==2.4.0+cu118")), ("setup.py", Requirement("torch==2.4.0"))],
                None)
    assert both.pin == "torch==2.4.0"
    with pytest.raises(ConfigError, match=r"conflicting framework pins: 'torch==2\.4\.0\+cu118' \(a\) and "
                                          r"'torch==2\.4\.0\+cu121' \(b\)"):
        _pin(matrix, [("a", Requirement("torch==2.4.0+cu118")), ("b", Requirement("torch==2.4.0+cu121"))], None)


def test_a_placeholders_range_that_admits_the_placeholder_installs_what_replaces_it(tmp_path):
    """tensorflow-gpu>=2.0 takes 2.12.0, the sdist that raises on purpose (requirement_names.yaml: after 2.11.0): the
    line is installed as tensorflow>=2.0; tensorflow-gpu==2.4.0 is a real wheel and stays."""
    from buildkit_py.inference.requirements import _bad_names, _renamed

    table = _bad_names()
    lines = [("tensorflow-gpu>=2.0", "r:1"), ("tensorflow-gpu==2.4.0", "r:2"), ("tensorflow-gpu<2.12,>=2.5", "r:3"),
             ("tensorflow-gpu", "r:4")]
    out, notes = _renamed(table, lines)
    assert [t for t, _ in out] == ["tensorflow>=2.0", "tensorflow-gpu==2.4.0", "tensorflow-gpu<2.12,>=2.5", "tensorflow"]
    assert len(notes) == 2 and all("Traceback" not in n and "base_images/requirement_names.yaml" in n for n in notes)


def test_jax_on_a_tpu_resolves_on_pypi_where_libtpu_is_built_for_a_newer_glibc_than_2_28(tmp_path):
    """libtpu 0.0.50 and newer ship manylinux_2_31 wheels only: the TPU image's base (Debian 12, glibc 2.36) runs them,
    and the resolution, which targets that glibc, takes them (it refused them at manylinux_2_28)."""
    import json

    from conftest import run_cli

    (tmp_path / "train.py").write_text("import jax\n")
    (tmp_path / "buildkit.yaml").write_text("framework: jax\naccelerator: TPU_V5_LITEPOD\ntrainer: {script: train.py}\n")
    proc = run_cli("resolve", "--dir", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    if "not resolved" in plan["notes"][-1]:
        pytest.fail(f"PyPI is not reachable from this machine: {plan['notes'][-1]}")
    assert plan["glibc"] == "2.36" and "resolve for Python" in plan["notes"][-1]


def test_a_range_chooses_inside_it_on_a_tpu_too():
    from pathlib import Path

    from buildkit_py.config import Config, FrameworkRequest
    from buildkit_py.errors import ResolutionError

    def tpu(within: str):
        return make_plan(Config(root=Path("."), source="test", framework=FrameworkRequest("jax", None, within),
                                accelerator="TPU_V5_LITEPOD"))

    assert tpu("<0.7").framework.requirement == "jax[tpu]==0.6.2"
    with pytest.raises(ResolutionError, match=r"no jax release inside 'jax<0\.1' in the data runs on TPU_V5_LITEPOD"):
        tpu("<0.1")
