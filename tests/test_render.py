from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jinja2
import pytest
from dockerfile_parse import DockerfileParser

from buildkit_py.config import load_config
from buildkit_py.errors import ConfigError
from buildkit_py.pipeline import render
from buildkit_py.pipeline.plan import make_plan
from buildkit_py.pipeline.render import docker_quote, render_dockerfile, render_dockerignore
from conftest import hadolint, run_cli

HERE = Path(__file__).resolve().parent
CASES = sorted(p.name for p in (HERE / "cases").iterdir())
UPDATE = os.environ.get("BUILDKIT_UPDATE_GOLDEN") == "1"


def render_case(name: str, buildkit: bool = True) -> str:
    config = load_config(HERE / "cases" / name / "buildkit.yaml")
    return render_dockerfile(make_plan(config), root=config.root, buildkit=buildkit)


def render_golden(name: str, buildkit: bool = True) -> str:
    case, _, arch = name.partition("@")
    config = load_config(HERE / "cases" / case / "buildkit.yaml")
    if arch:
        config = next(c for c in config.each_platform() if c.platform.split("/")[1] == arch)
    return render_dockerfile(make_plan(config), root=config.root, buildkit=buildkit)


def _goldens() -> list[str]:
    """Every case, a multi-platform case once per platform (NAME@ARCH)."""
    out = []
    for name in CASES:
        config = load_config(HERE / "cases" / name / "buildkit.yaml")
        out += [f"{name}@{c.platform.split('/')[1]}" for c in config.each_platform()] if config.multi_platform else [name]
    return out


GOLDENS = _goldens()


def parse(text: str, tmp_path: Path) -> DockerfileParser:
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return DockerfileParser(path=str(path))


@pytest.mark.parametrize("name", GOLDENS)
def test_golden(name):
    """The rendered Dockerfile is reviewed text: a change shows up as a diff of tests/golden/."""
    golden = HERE / "golden" / f"{name.replace('@', '.')}.Dockerfile"
    text = render_golden(name)
    if UPDATE:
        golden.write_text(text)
    assert golden.is_file(), f"missing {golden}: run with BUILDKIT_UPDATE_GOLDEN=1 and review the diff"
    assert text == golden.read_text(), f"{name}: rendering changed; BUILDKIT_UPDATE_GOLDEN=1 to accept"


@pytest.mark.parametrize("name", GOLDENS)
@pytest.mark.parametrize("buildkit", [True, False], ids=["buildkit", "legacy"])
def test_hadolint_clean(name, buildkit):
    assert hadolint(render_golden(name, buildkit)) == ""


def test_layer_order_puts_dependencies_before_code(tmp_path):
    instructions = parse(render_case("torch-gpu"), tmp_path).structure
    order = [i["content"] for i in instructions if i["instruction"] in ("RUN", "COPY")]
    steps = ["apt-get", "python3.11 -m venv", "torch==2.5.1", "cloudml-hypertune", "numpy", "requirements.txt",
             "-r /tmp/buildkit-py/requirements.txt", "COPY . /app"]
    positions = [next(i for i, text in enumerate(order) if s in text) for s in steps]
    assert positions == sorted(positions), order


def test_caches_are_mounts_and_legacy_cleans_up():
    modern, legacy = render_case("torch-gpu"), render_case("torch-gpu", buildkit=False)
    assert "--mount=type=cache,target=/root/.cache/uv,sharing=locked" in modern
    assert "--mount=type=secret,id=buildkit-uv-conf" in modern
    assert "--mount=type=cache,target=/var/cache/apt" in modern
    assert "--mount" not in legacy
    assert "export UV_NO_CACHE=1" in legacy and "rm -rf /var/lib/apt/lists/*" in legacy
    assert "# syntax=" not in modern  # would pull a frontend image from Docker Hub


@pytest.mark.parametrize("buildkit", [True, False], ids=["buildkit", "legacy"])
def test_installs_go_through_uv_from_the_index_and_leave_it_out_of_the_image(buildkit, tmp_path):
    """Framework, hypertune and extras share one uv step, the requirements file gets its own; uv is
    pip-installed from the index (the build's pip.conf) into the cache mount or into /tmp, removed in
    the same RUN; the venv has no pip; bytecode is compiled after each install."""
    text = render_case("torch-gpu", buildkit)
    runs = [i["content"] for i in parse(text, tmp_path).structure if i["instruction"] == "RUN"]
    installs = [r for r in runs if "bin/uv pip install" in r]
    assert len(installs) == 2, installs
    assert all(pkg in installs[0] for pkg in ("torch==2.5.1", "cloudml-hypertune", "'numpy<2'"))
    assert "--extra-index-url https://download.pytorch.org/whl/cu124 --index-strategy unsafe-best-match" in installs[0]
    assert "-r /tmp/buildkit-py/requirements.txt" in installs[1]
    for run in installs:
        assert "pip install --no-cache-dir --target" in run and "uv==" in run
        assert "export UV_CONFIG_FILE=/run/secrets/buildkit-uv-conf" in run
        # Bytecode as pip writes it, but not for the packages' test suites; with BuildKit by the launcher's helper,
        # mounted for the step alone (what earlier layers compiled is only checked).
        assert run.rstrip().split("&& ")[-1 if buildkit else -2].startswith(
            "{ python /tmp/buildkit-py/bytecode.py /opt/venv/lib || true; }" if buildkit
            else "{ python -m compileall -q -j 0 -x '/tests?/' /opt/venv/lib || true; }")
        if buildkit:
            assert "--mount=type=bind,source=.buildkit-py/launcher/bytecode.py,target=/tmp/buildkit-py/bytecode.py" in run
            assert "--target /root/.cache/uv/buildkit-py/uv-" in run
        else:
            assert "--target /tmp/buildkit-py/uv " in run and run.rstrip().endswith("rm -rf /tmp/buildkit-py/uv")
    assert "-m venv --without-pip /opt/venv" in text
    assert not any(r.lstrip().startswith("pip ") or "&& pip install" in r for r in runs)


@pytest.mark.parametrize("change", [{"executor": True, "trainer": None}, {"keep_pip": True}], ids=["executor", "keep_pip"])
def test_executor_images_and_keep_pip_keep_pip_in_the_venv(change):
    """Executors' launcher pip-installs the job's packages at start (launcher/packages.py); keep_pip asks for it."""
    config = replace(load_config(HERE / "cases" / "sklearn-cpu" / "buildkit.yaml"), **change)
    text = render_dockerfile(make_plan(config), root=config.root)
    assert "-m venv /opt/venv" in text and "--without-pip" not in text


def test_compiled_templates_are_kept_between_runs_and_an_unwritable_cache_only_costs_time(tmp_path):
    """The bytecode cache (render._bytecode_cache) is filled by the first run, used by the next, and a
    cache directory that cannot be made or written never fails a render."""
    def dockerfile(cache: Path) -> str:
        env = {**os.environ, "BUILDKIT_PY_CACHE_DIR": str(cache), "PYTHONPATH": str(HERE.parent)}
        proc = subprocess.run([sys.executable, "-m", "buildkit_py", "dockerfile", "--dir",
                               str(HERE.parent / "examples" / "quickstart")], env=env, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    first = dockerfile(tmp_path / "cache")
    kept = sorted((tmp_path / "cache" / "templates").glob("__jinja2_*.cache"))
    assert kept, "no compiled template was kept"
    stamps = [p.stat().st_mtime_ns for p in kept]
    assert dockerfile(tmp_path / "cache") == first
    assert [p.stat().st_mtime_ns for p in kept] == stamps  # read, not written again
    (tmp_path / "file").write_text("")
    assert dockerfile(tmp_path / "file" / "cache") == first  # cannot be made: a file is in the way
    # A cache that goes away (or fills up) between the read and the write: the write is dropped.
    bucket = jinja2.bccache.Bucket(render.environment(), "k", "checksum")
    bucket.code = compile("x = 1", "<t>", "exec")
    type(render.environment().bytecode_cache)(str(tmp_path / "gone")).dump_bytecode(bucket)
    assert not (tmp_path / "gone").exists()


def test_entrypoint_and_default_args(tmp_path):
    parsed = parse(render_case("sklearn-cpu"), tmp_path)
    entry = [json.loads(i["value"]) for i in parsed.structure if i["instruction"] == "ENTRYPOINT"]
    cmd = [json.loads(i["value"]) for i in parsed.structure if i["instruction"] == "CMD"]
    assert entry == [["python", "-m", "buildkit_launcher", "--", "python", "/app/train.py"]]
    assert cmd == [["--alpha", "0.5"]]


def test_user_template_overrides_blocks_with_super():
    text = render_case("user-override")
    assert "apt-get \"$@\" install -y --no-install-recommends curl jq" in text
    assert 'com.example.team="ml-platform"' in text
    assert "xgboost==2.1.1" in text  # everything else comes from the variant


def test_dockerignore_has_defaults_and_the_users_lines():
    text = render_dockerignore("data/\n*.ckpt\n")
    lines = text.splitlines()
    for entry in (".git", ".venv", ".env", "**/__pycache__", "data/", "*.ckpt"):
        assert entry in lines


# Injection corpus: each hostile string goes into each field; it is rejected with a ConfigError
# or it stays one value and the Dockerfile keeps the baseline's instruction sequence.
HOSTILE = [
    "a\nRUN touch /pwned",
    "$(touch /pwned)",
    "`touch /pwned`",
    '"; touch /pwned; echo "',
    "'; touch /pwned; echo '",
    "a\\b",
    "${HOME}",
    "x && touch /pwned",
    "a b\tc",
    "# comment",
    "\\\nRUN x",
    "ünïcode ✓",
]
FIELDS = {
    "env value": lambda s: {"env": {"V": s}},
    "env name": lambda s: {"env": {s: "v"}},
    "trainer arg": lambda s: {"trainer": {"module": "trainer.task", "args": [s]}},
    "module": lambda s: {"trainer": {"module": s}},
    "pip": lambda s: {"pip": [s]},
    "system package": lambda s: {"system_packages": [s]},
    "requirements path": lambda s: {"requirements": s},
    "framework": lambda s: {"framework": s},
    "python": lambda s: {"python": s},
    "base image": lambda s: {"base_image": s},
}
BASE = {"framework": "none", "python": "3.11", "gpu": False, "trainer": {"module": "trainer.task"}}


def _shape(text: str, tmp_path: Path) -> list[str]:
    return [i["instruction"] for i in parse(text, tmp_path).structure]


@pytest.mark.parametrize("field", list(FIELDS))
def test_no_config_value_changes_the_dockerfile_shape(project, tmp_path, field):
    import yaml

    files = {"trainer/__init__.py": "", "trainer/task.py": ""}
    root = project({**files, "buildkit.yaml": yaml.safe_dump(BASE)})
    baseline = render_dockerfile(make_plan(load_config(root / "buildkit.yaml")))
    accepted = 0
    for value in HOSTILE:
        doc = {**BASE, **FIELDS[field](value)}
        (root / "buildkit.yaml").write_text(yaml.safe_dump(doc))
        try:
            config = load_config(root / "buildkit.yaml")
            text = render_dockerfile(make_plan(config))
        except ConfigError:
            continue
        accepted += 1
        shape, base_shape = _shape(text, tmp_path), _shape(baseline, tmp_path)
        extra = {"pip": ["RUN"], "env value": ["ENV"]}.get(field, [])
        assert [s for s in shape if s not in extra] == [s for s in base_shape if s not in extra], (field, value)
        assert hadolint(text) == "", (field, value)
        parsed = parse(text, tmp_path)
        if field == "env value":
            # dockerfile-parse does not unescape \\ and \$ as Docker does; the engine's reading
            # of these values is checked by a real build in test_build_e2e.
            assert f"V={docker_quote(value)}" in text
        if field == "trainer arg":
            cmd = [json.loads(i["value"]) for i in parsed.structure if i["instruction"] == "CMD"]
            assert cmd == [[value]]
        if field == "pip":
            assert shlex.quote(value) in text
    if field in ("env value", "trainer arg"):
        assert accepted >= 8  # most strings are legitimate values there and must survive intact


# The issue's cases through the real command line: `resolve --json` is what users and job specs read.
RESOLVED = {
    "torch-215": {"base_image": "nvidia/cuda:13.2.1-base-ubuntu22.04", "requirement": "torch==2.15.0",
                  "index_url": "https://download.pytorch.org/whl/cu132", "cudnn": "9.26", "flavor": "base"},
    "torch-291-v100": {"base_image": "nvidia/cuda:12.8.1-base-ubuntu22.04", "requirement": "torch==2.9.1",
                       "index_url": "https://download.pytorch.org/whl/cu128", "cudnn": "9.10", "flavor": "base",
                       "arch": "sm_70"},
    "jax-latest": {"base_image": "nvidia/cuda:12.9.2-base-ubuntu24.04", "requirement": "jax[cuda12]==0.12.0.1",
                   "index_url": None, "cudnn": "9.10", "flavor": "base", "python": "3.12"},
    "jax-nightly": {"base_image": "nvidia/cuda:12.9.2-base-ubuntu24.04", "requirement": "jax[cuda12]",
                    "index_url": "https://us-python.pkg.dev/ml-oss-artifacts-published/jax/simple/", "cudnn": "9.10",
                    "flavor": "base", "python": "3.12"},
    "xgboost-34-cuda12": {"base_image": "nvidia/cuda:12.9.2-base-ubuntu24.04", "requirement": "xgboost-cu12==3.4.1",
                          "index_url": None, "cudnn": None, "flavor": "base", "python": "3.12"},
    "tf-213-system-cudnn": {"base_image": "nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04",
                            "requirement": "tensorflow==2.13.1", "index_url": None, "cudnn": "8.9.6",
                            "flavor": "cudnn-runtime"},
    "tf-218-and-cuda": {"base_image": "nvidia/cuda:12.5.1-base-ubuntu22.04",
                        "requirement": "tensorflow[and-cuda]==2.18.1", "index_url": None, "cudnn": "9.3", "flavor": "base"},
}


@pytest.mark.parametrize("name", list(RESOLVED))
def test_resolve_json_of_the_issue_cases(name):
    want = RESOLVED[name]
    proc = run_cli("resolve", "--config", str(HERE / "cases" / name / "buildkit.yaml"), "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["base_image"] == want["base_image"] and plan["cuda_flavor"] == want["flavor"]
    assert plan["framework"]["requirement"] == want["requirement"]
    assert plan["framework"]["index_url"] == want["index_url"]
    assert plan["cudnn"] == want["cudnn"]
    assert plan["python"]["version"] == want.get("python", "3.11")
    assert plan["cuda_archs"] and want.get("arch", plan["cuda_archs"][0]) in plan["cuda_archs"]
    assert plan["labels"]["dev.buildkit-py.cuda-archs"] == ",".join(plan["cuda_archs"])
    assert plan["notes"] == []


def test_every_flavour_renders_its_nvidia_cuda_tag():
    tags = {name: render_case(name).split("\nFROM ", 1)[1].split("\n", 1)[0]
            for name in ("torch-291-v100", "flavor-runtime", "flavor-cudnn-runtime", "flavor-devel", "flavor-cudnn-devel")}
    assert tags == {
        "torch-291-v100": "nvidia/cuda:12.8.1-base-ubuntu22.04",
        "flavor-runtime": "nvidia/cuda:12.8.1-runtime-ubuntu22.04",
        "flavor-cudnn-runtime": "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04",
        "flavor-devel": "nvidia/cuda:12.8.1-devel-ubuntu22.04",
        "flavor-cudnn-devel": "nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04",
    }


def test_the_image_records_the_build_architectures_for_the_launcher(tmp_path):
    parsed = parse(render_case("torch-291-v100"), tmp_path)
    envs = [i["value"] for i in parsed.structure if i["instruction"] == "ENV"]
    assert any('BUILDKIT_PY_CUDA_ARCHS="sm_70,sm_75,sm_80,sm_86,sm_90,sm_100,sm_120"' in e for e in envs)
    assert 'dev.buildkit-py.cuda-archs="sm_70,sm_75,sm_80,sm_86,sm_90,sm_100,sm_120"' in render_case("torch-291-v100")
    assert "BUILDKIT_PY_CUDA_ARCHS" not in render_case("sklearn-cpu")


def test_resolve_text_shows_the_notes():
    proc = run_cli("resolve", "--framework", "torch==2.9.1", "--cuda-flavor", "cudnn-runtime")
    assert proc.returncode == 0, proc.stderr
    assert "flavour     cudnn-runtime" in proc.stdout and "GPU archs   sm_70, " in proc.stdout
    assert "note: cuda_flavor cudnn-runtime: the CUDA libraries and cuDNN are shipped twice" in proc.stdout


@pytest.mark.parametrize("args, fragment", [
    (["--framework", "torch==2.9.1", "--accelerator", "NVIDIA_TESLA_V10"], "nearest: NVIDIA_TESLA_V100"),
    (["--framework", "torch==2.9.1", "--accelerator", "nvidia_l4"],
     "accelerator: 'nvidia_l4' is not allowed: a Vertex AI accelerator type"),
    (["--framework", "torch==2.9.1", "--no-gpu", "--accelerator", "NVIDIA_L4"], "was given, but gpu is false"),
    (["--framework", "torch==2.9.1", "--cuda-flavor", "cudnn"], "cuda_flavor: 'cudnn' is not allowed: one of auto"),
    (["--framework", "torch==2.9.1", "--cuda", "13.0", "--accelerator", "NVIDIA_TESLA_V100"],
     "torch 2.9.1: use cuda 12.6, 12.8 or 12.9 for NVIDIA_TESLA_V100 (sm_70)"),
])
def test_bad_accelerator_and_flavour_input_exits_2(args, fragment):
    proc = run_cli("resolve", *args)
    assert proc.returncode == 2 and fragment in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


# The uv.toml a build passes as the secret buildkit-uv-conf: the pip.conf's index settings, for uv.
def test_uv_config_carries_the_pip_conf_index_settings():
    import tomllib

    from buildkit_py.sources.pip_config import uv_config

    pip_conf = ("[global]\nindex-url = https://u:p%40ss@mirror.example/simple\ntimeout = 2\n"
                "extra-index-url = https://a.example/simple\n    https://b.example/simple\n"
                "[install]\ntrusted-host = mirror.example\nno_index = false\n[list]\nformat = json\n")
    assert tomllib.loads(uv_config(pip_conf, "pip.conf")) == {
        "index-url": "https://u:p%40ss@mirror.example/simple",
        "extra-index-url": ["https://a.example/simple", "https://b.example/simple"],
        "allow-insecure-host": ["mirror.example"],
        "no-index": False,
        "index-strategy": "unsafe-best-match",  # pip's: the best version across the indexes
    }
    assert "index-strategy" not in uv_config("[global]\nindex-url = https://mirror.example/simple\n", "pip.conf")
    assert uv_config("[global]\ncert = /etc/ca.pem\n", "pip.conf") == ""


@pytest.mark.parametrize("value", ['https://x/"]\tno-index = true # [x]', "https://x/\\u0041\\", "https://x/\x7f\x1b", "ünï ✓"])
def test_uv_config_values_stay_one_toml_string(value):
    import tomllib

    from buildkit_py.sources.pip_config import uv_config

    assert tomllib.loads(uv_config(f"[global]\nindex-url = {value}\n", "pip.conf")) == {"index-url": value.strip()}


def test_unreadable_pip_conf_is_a_config_error_that_does_not_echo_it():
    from buildkit_py.sources.pip_config import uv_config

    with pytest.raises(ConfigError) as err:
        uv_config("index-url = https://user:Tok3n@x/simple\n", "/p/pip.conf")
    assert "/p/pip.conf" in str(err.value) and "Tok3n" not in str(err.value)


def test_the_build_passes_pip_conf_and_uv_toml_as_private_secret_files(project, tmp_path):
    import stat
    import tomllib

    from buildkit_py.pipeline.build import PIP_CONF_SECRET, UV_CONF_SECRET, _secrets, secret_sources

    root = project({"buildkit.yaml": "framework: none\npython: '3.11'\ngpu: false\ntrainer: {module: t}\n"
                                     "pip_index_url: https://u:Tok3n@mirror.example/simple\n"})
    secrets = dict(_secrets(secret_sources(load_config(root / "buildkit.yaml")), tmp_path))
    assert tomllib.loads(secrets[UV_CONF_SECRET].read_text()) == {"index-url": "https://u:Tok3n@mirror.example/simple"}
    assert "index-url = https://u:Tok3n@mirror.example/simple" in secrets[PIP_CONF_SECRET].read_text()
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in secrets.values())


def test_a_render_kept_in_the_cache_needs_no_jinja_and_any_input_change_renders_again(tmp_path):
    """The rendered text is kept under the digest of its inputs and of every template: the next run with the
    same inputs imports no Jinja; another input, or an edited template, renders anew."""
    root = tmp_path / "trainer"
    shutil.copytree(HERE.parent / "examples" / "quickstart", root)
    probe = ("import sys, io, contextlib; from buildkit_py.cli import main; out = io.StringIO()\n"
             "with contextlib.redirect_stdout(out): rc = main(['dockerfile', '--dir', sys.argv[1], *sys.argv[2:]])\n"
             "print(rc, 'jinja2' in sys.modules); print(out.getvalue(), end='')")

    def dockerfile(*flags: str) -> tuple[bool, str]:
        env = {**os.environ, "BUILDKIT_PY_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(HERE.parent)}
        proc = subprocess.run([sys.executable, "-c", probe, str(root), *flags], env=env, capture_output=True, text=True,
                              timeout=60)
        status, _, text = proc.stdout.partition("\n")
        assert status.split()[0] == "0", proc.stderr
        return status.split()[1] == "True", text

    used, first = dockerfile()
    assert used and "FROM " in first
    assert dockerfile() == (False, first)
    used, other = dockerfile("--python", "3.12")
    assert used and other != first
    for marker in ("first", "second"):  # the user's template is an input too: read each run, its edit renders anew
        (root / "my.Dockerfile.j2").write_text("{% extends base_template %}{% block header %}# marker " + marker
                                               + "\n{{ super() }}{% endblock %}\n")
        used, own = dockerfile("--template", "my.Dockerfile.j2")
        assert used and f"# marker {marker}\n" in own
        assert dockerfile("--template", "my.Dockerfile.j2") == (False, own)
