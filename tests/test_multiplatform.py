"""Multi-platform images (issue 32, part 2): `platform: [linux/amd64, linux/arm64]` or `--platform a,b` plans, renders
and resolves each platform as its one-platform config does; a one-platform config is what it was before lists."""

from __future__ import annotations

import json

import pytest

from buildkit_py import cli
from buildkit_py.config import load_config
from buildkit_py.errors import ConfigError
from buildkit_py.pipeline.plan import make_plan, make_plans

TRAINER = {"trainer/__init__.py": "", "trainer/task.py": "print('hi')\n"}
TORCH = "framework: torch==2.9.1\ntrainer: {module: trainer.task}\n"


def config_of(project, text: str, **overrides):
    return load_config(project({"buildkit.yaml": text, **TRAINER}) / "buildkit.yaml", overrides=overrides)


def main(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("given", ["platform: [linux/amd64, linux/arm64]\n", "platform: linux/amd64,linux/arm64\n"])
def test_a_list_or_commas_make_a_multi_platform_config(project, given):
    config = config_of(project, TORCH + given)
    assert config.multi_platform and config.platform is None and config.platforms == ("linux/amd64", "linux/arm64")
    assert [c.platform for c in config.each_platform()] == ["linux/amd64", "linux/arm64"]
    amd64, arm64 = make_plans(config)
    assert (amd64.platform, arm64.platform) == ("linux/amd64", "linux/arm64") and arm64.arm64 and not amd64.arm64
    # Each platform's plan is its one-platform config's.
    one = make_plan(config_of(project, TORCH + "platform: linux/arm64\n"))
    assert arm64.to_dict() == one.to_dict()


def test_one_platform_stays_a_string(project):
    for text in ("platform: linux/arm64\n", "platform: [linux/arm64]\n"):
        config = config_of(project, TORCH + text)
        assert config.platform == "linux/arm64" and config.platforms == () and not config.multi_platform
        assert config.each_platform() == (config,)
    flagged = config_of(project, TORCH, platform="linux/amd64,linux/arm64")
    assert flagged.platforms == ("linux/amd64", "linux/arm64") and flagged.named("platform") == "--platform"


def test_a_variant_may_set_several_platforms(project):
    config = config_of(project, TORCH + "variants:\n  - {name: both, platform: [linux/amd64, linux/arm64]}\n"
                                        "  - {name: arm, platform: linux/arm64}\n")
    both, arm = (config.with_variant(v) for v in config.variants)
    assert both.multi_platform and both.platforms == ("linux/amd64", "linux/arm64")
    assert arm.platform == "linux/arm64" and not arm.multi_platform


HOSTILE = {
    "twice": ("[linux/amd64, linux/amd64]", "platform[1]: 'linux/amd64' is given twice"),
    "empty list": ("[]", "platform: an empty list is not allowed"),
    "a mapping in the list": ("[linux/amd64, {a: 1}]", "platform[1]: {'a': 1} must be a string"),
    "a line break in an entry": ("[linux/amd64, \"linux/arm64\\nRUN x\"]", "platform[1]: "),
    "too many": ("[" + ", ".join(f"linux/a{i}" for i in range(9)) + "]", "at most 8"),
    "a space after a comma": ("\"linux/amd64, linux/arm64\"", "comma-separated, no spaces"),
    "an empty entry": ("\"linux/amd64,\"", "platform: '' is not allowed"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_platform_lists_are_refused_naming_the_entry(project, case):
    value, says = HOSTILE[case]
    with pytest.raises(ConfigError) as caught:
        config_of(project, TORCH + f"platform: {value}\n")
    assert says in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("value, says", [("linux/amd64,linux/amd64", "given twice"), ("linux/amd64,", "OS/ARCH"),
                                         ("linux/amd64,$(id)/x", "OS/ARCH"), (",".join(["linux/amd64"] * 9), "at most 8"),
                                         ("linux/amd64,linux/arm64\nRUN x", "line breaks")])
@pytest.mark.parametrize("command", ["resolve", "dockerfile", "build", "lock"])
def test_hostile_platform_flags_exit_2_with_one_line(project, capsys, command, value, says):
    root = project({"buildkit.yaml": TORCH, **TRAINER})
    code, out, err = main(capsys, command, "--dir", str(root), "--platform", value)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("buildkit-py: error: --platform: ") and says in err


def test_an_accelerator_s_platform_must_be_among_them(project, capsys):
    gb200 = "framework: torch==2.9.1\naccelerator: NVIDIA_GB200\ntrainer: {module: trainer.task}\n"
    config = config_of(project, gb200 + "platform: [linux/amd64, linux/arm64]\n")
    amd64, arm64 = make_plans(config)  # the amd64 image is for other machines: allowed beside the one GB200 needs
    assert arm64.accelerator == "NVIDIA_GB200" and amd64.platform == "linux/amd64"
    root = project({"buildkit.yaml": gb200, **TRAINER})
    code, out, err = main(capsys, "resolve", "--dir", str(root), "--platform", "linux/amd64,linux/386")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("buildkit-py: error: --platform: linux/amd64,linux/386 has no linux/arm64 image, and "
                          "NVIDIA_GB200's machines (a4x-highgpu-4g) have Arm CPUs") and "add linux/arm64" in err


def test_a_one_image_command_says_to_give_one_platform(project, capsys):
    root = project({"buildkit.yaml": TORCH + "platform: [linux/amd64, linux/arm64]\n", **TRAINER})
    code, out, err = main(capsys, "print", "base-image", "--dir", str(root))
    assert code == 2 and err.count("\n") == 1
    assert "platform: linux/amd64,linux/arm64 is several platforms, and this command makes one image: give one " \
           "platform (e.g. --platform linux/amd64)" in err
    # The index's tags print without a plan of their own: its content digest is of each platform's.
    code, index_tag, err = main(capsys, "print", "image-tag", "--dir", str(root))
    assert code == 0, err
    code, arm64_tag, err = main(capsys, "print", "image-tag", "--dir", str(root), "--platform", "linux/arm64")
    assert code == 0 and index_tag.startswith("bk-") and index_tag != arm64_tag
    code, reversed_tag, err = main(capsys, "print", "image-tag", "--dir", str(root), "--platform",
                                   "linux/arm64,linux/amd64")
    assert code == 0 and reversed_tag != index_tag


def test_resolve_and_dockerfile_give_each_platform(project, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDKIT_PY_OFFLINE", "1")
    root = project({"buildkit.yaml": TORCH, **TRAINER})
    code, out, err = main(capsys, "resolve", "--dir", str(root), "--platform", "linux/amd64,linux/arm64", "--json")
    assert code == 0, err
    plans = json.loads(out)["platforms"]
    assert list(plans) == ["linux/amd64", "linux/arm64"] and plans["linux/arm64"]["cuda_archs"] == ["sm_90", "sm_100",
                                                                                                   "sm_120"]
    code, out, err = main(capsys, "dockerfile", "--dir", str(root), "--platform", "linux/amd64,linux/arm64")
    assert code == 0, err
    parts = out.split("# platform: ")[1:]
    assert [p.split("\n", 1)[0] for p in parts] == ["linux/amd64", "linux/arm64"]
    assert "uv-0.13.0-arm64" in parts[1] and "arm64" not in parts[0].split("\n", 1)[1]
    code, out, err = main(capsys, "dockerfile", "--dir", str(root), "--platform", "linux/amd64,linux/arm64",
                          "--output", str(root / "Dockerfile"))
    assert code == 0, err
    assert (root / "Dockerfile.linux-amd64").is_file() and (root / "Dockerfile.linux-arm64.dockerignore").is_file()
    assert not (root / "Dockerfile").exists()


def test_a_foreign_platform_needs_an_emulator_and_says_it_uses_one(tmp_path, monkeypatch):
    from buildkit_py.errors import BuildError
    from buildkit_py.pipeline import build

    monkeypatch.setattr(build, "BINFMT", tmp_path)
    monkeypatch.setattr(build._host, "machine", lambda: "x86_64")
    assert build.emulation("linux/amd64", True) is None  # this machine's own
    assert build.emulation("linux/arm64", False) is None  # an engine elsewhere answers for itself
    with pytest.raises(BuildError) as caught:
        build.emulation("linux/arm64", True)
    assert str(caught.value).startswith(f"linux/arm64: this machine (x86_64) cannot run it and no emulator is registered "
                                        f"({tmp_path}/qemu-aarch64 is missing): install qemu-user-static")
    (tmp_path / "qemu-aarch64").write_text("enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: PF\n")
    assert build.emulation("linux/arm64", True).startswith("linux/arm64 is built under emulation (qemu-aarch64")


def test_an_index_is_a_docker_list_of_docker_manifests_else_an_oci_index():
    from buildkit_py.oci.media import DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST
    from buildkit_py.oci.remote import IndexEntry, index_bytes

    docker = [IndexEntry("linux/amd64", "sha256:" + "a" * 64, DOCKER_MANIFEST, 10),
              IndexEntry("linux/arm64/v8", "sha256:" + "b" * 64, DOCKER_MANIFEST, 11)]
    body, media = index_bytes(docker)
    assert media == DOCKER_LIST and body == index_bytes(docker)[0]  # the same platforms make the same digest
    document = json.loads(body)
    assert document["mediaType"] == DOCKER_LIST and document["schemaVersion"] == 2
    assert document["manifests"][1] == {"mediaType": DOCKER_MANIFEST, "digest": "sha256:" + "b" * 64, "size": 11,
                                        "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}}
    mixed = [docker[0], IndexEntry("linux/arm64", "sha256:" + "c" * 64, OCI_MANIFEST, 12)]
    assert index_bytes(mixed)[1] == OCI_INDEX


def test_the_index_content_tag_covers_every_platform_in_order():
    from buildkit_py.pipeline.build import index_content_digest

    one = index_content_digest([("linux/amd64", "1" * 64), ("linux/arm64", "2" * 64)])
    assert one != index_content_digest([("linux/arm64", "2" * 64), ("linux/amd64", "1" * 64)])
    assert one != index_content_digest([("linux/amd64", "1" * 64), ("linux/arm64", "3" * 64)])


LOCK_CONFIG = ("framework: none\npython: '3.11'\nbase_image: 127.0.0.1:5000/lock/base:1\nhypertune: false\n"
               "trainer: {module: trainer.task}\n")


def test_the_lock_has_a_section_per_platform_and_each_build_takes_its_own(project, capsys, monkeypatch, tmp_path):
    from buildkit_py.pipeline import lock

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    root = project({"buildkit.yaml": LOCK_CONFIG + "platform: [linux/amd64, linux/arm64]\n", **TRAINER})
    config = load_config(root / "buildkit.yaml")
    images = []
    for i, one in enumerate(config.each_platform()):
        plan = make_plan(one)
        images.append(lock.LockedImage(None, "3.11", one.platform, plan.base_image, f"sha256:{str(i + 1) * 64}", (),
                                       lock.inputs(one, plan), (lock.LockedPackage("bkpin", "1.0", ("sha256:" + "a" * 64,)),),
                                       several=True))
    text = lock.Lock(root / lock.LOCK_NAME, tuple(images)).text()
    assert "  _base@linux/amd64:\n" in text and "  _base@linux/arm64:\n" in text
    (root / lock.LOCK_NAME).write_text(text)
    assert lock.read_lock(root / lock.LOCK_NAME).images == tuple(images)  # read back as written
    code, out, err = main(capsys, "dockerfile", "--dir", str(root))
    assert code == 0, err
    amd64, arm64 = out.split("# platform: ")[1:]
    assert f"FROM 127.0.0.1:5000/lock/base:1@sha256:{'1' * 64}\n" in amd64
    assert f"FROM 127.0.0.1:5000/lock/base:1@sha256:{'2' * 64}\n" in arm64
    assert "--require-hashes" in amd64 and "--require-hashes" in arm64
    # A section whose platform is not its key's is a hand edit, named at its line.
    (root / lock.LOCK_NAME).write_text(text.replace("platform: linux/arm64", "platform: linux/amd64"))
    code, out, err = main(capsys, "dockerfile", "--dir", str(root))
    assert code == 2 and "'linux/amd64' is not the platform its key names ('linux/arm64')" in err
    # The one-platform config of the same directory is another set of sections: the lock is another config's.
    (root / lock.LOCK_NAME).write_text(text)
    code, out, err = main(capsys, "dockerfile", "--dir", str(root), "--platform", "linux/arm64")
    assert code == 2 and "the lock has sections _base@linux/amd64, _base@linux/arm64; the config's images are _base" in err


def test_a_one_platform_lock_is_written_as_before(project, tmp_path):
    from buildkit_py.pipeline import lock

    root = project({"buildkit.yaml": LOCK_CONFIG, **TRAINER})
    config = load_config(root / "buildkit.yaml")
    plan = make_plan(config)
    image = lock.LockedImage(None, "3.11", "linux/amd64", plan.base_image, "sha256:" + "1" * 64, (),
                             lock.inputs(config, plan), ())
    text = lock.Lock(root / lock.LOCK_NAME, (image,)).text()
    assert "\n  _base:\n" in text and "@" not in text.split("images:", 1)[1].split("\n", 2)[1]
    assert image.key == "_base" and not image.several


def test_a_job_runs_the_platform_its_machines_need_from_the_index(project, capsys):
    gb200 = "framework: torch==2.9.1\naccelerator: NVIDIA_GB200\ntrainer: {module: trainer.task}\n"
    root = project({"buildkit.yaml": gb200 + "platform: [linux/amd64, linux/arm64]\n", **TRAINER})
    code, out, err = main(capsys, "job", "--dir", str(root), "--image", "127.0.0.1:5999/x:y", "--target", "loopback",
                          "--accelerator-count", "4", "--json")
    assert code == 0, err
    assert "a4x-highgpu-4g" in out
    # A CPU job of the same two-platform image: its amd64 manifest.
    cpu = project({"buildkit.yaml": TORCH + "gpu: false\nplatform: [linux/arm64, linux/amd64]\n", **TRAINER})
    code, out, err = main(capsys, "job", "--dir", str(cpu), "--image", "127.0.0.1:5999/x:y", "--target", "loopback")
    assert code == 0, err
    # An index without the platform the machines run is refused, naming both.
    arm_only = project({"buildkit.yaml": TORCH + "gpu: false\nplatform: [linux/arm64, linux/arm64/v8]\n", **TRAINER})
    code, out, err = main(capsys, "job", "--dir", str(arm_only), "--image", "127.0.0.1:5999/x:y", "--target", "loopback")
    assert code == 2 and "the image is built for linux/arm64, linux/arm64/v8; n1-standard-4 runs linux/amd64" in err, err
