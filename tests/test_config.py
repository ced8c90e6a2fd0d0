from __future__ import annotations

import pytest
import yaml

from buildkit_py.config import load_config
from buildkit_py.errors import ConfigError

TRAINER = {"trainer/__init__.py": "", "trainer/task.py": "print('hi')\n"}


def load(project, text: str, **extra):
    root = project({"buildkit.yaml": text, **TRAINER, **extra})
    return load_config(root / "buildkit.yaml")


def test_full_config_is_typed_and_frozen(project):
    cfg = load(
        project,
        """
framework: torch==2.5.1
cuda: 12.4
python: 3.10
gpu: true
system_packages: [git, libgl1=1.7.0-1]
pip: ["numpy<2", "pandas[parquet]==2.2.3"]
requirements: requirements.txt
env: {OMP_NUM_THREADS: 4, DEBUG: true, MSG: "hello world"}
hypertune: false
trainer: {module: trainer.task, args: [--epochs, 3, --lr, 0.1]}
""",
        **{"requirements.txt": "requests\n"},
    )
    assert cfg.framework.name == "torch" and cfg.framework.version == "2.5.1"
    # YAML reads 3.10 as the float 3.1; the config keeps what the user wrote.
    assert cfg.python == "3.10" and cfg.cuda == "12.4"
    assert cfg.system_packages == ("git", "libgl1=1.7.0-1")
    assert cfg.env == (("OMP_NUM_THREADS", "4"), ("DEBUG", "true"), ("MSG", "hello world"))
    assert cfg.trainer.args == ("--epochs", "3", "--lr", "0.1")
    assert cfg.hypertune is False and cfg.requirements == "requirements.txt"
    with pytest.raises(AttributeError):
        cfg.python = "3.12"


def test_unknown_key_names_it_and_suggests_the_nearest(project):
    with pytest.raises(ConfigError) as err:
        load(project, "framwork: torch==2.5.1\n")
    msg = str(err.value)
    assert "buildkit.yaml:1:1" in msg and "framwork" in msg and "did you mean 'framework'" in msg


def test_unknown_trainer_key(project):
    with pytest.raises(ConfigError, match=r"trainer\.modul: unknown key; did you mean 'module'"):
        load(project, "trainer: {modul: trainer.task}\n")


def test_malformed_yaml_reports_file_line_and_column(project):
    with pytest.raises(ConfigError) as err:
        load(project, "framework: torch\npython: [3.11\ngpu: true\n")
    assert err.value.exit_code == 2
    assert "buildkit.yaml:3:4" in str(err.value) and "invalid YAML" in str(err.value)


def test_duplicate_key_is_an_error(project):
    with pytest.raises(ConfigError, match=r"buildkit.yaml:2:1: python: this key is given twice"):
        load(project, "python: '3.11'\npython: '3.12'\n")


def test_error_positions_point_at_the_bad_value(project):
    with pytest.raises(ConfigError) as err:
        load(project, "trainer:\n  module: trainer.task\n  args: [ok, {a: b}]\n")
    assert "buildkit.yaml:3:14: trainer.args[1]" in str(err.value)


def test_pyproject_table(project):
    root = project(
        {
            "pyproject.toml": '[project]\nname = "x"\n[tool.buildkit-py]\nframework = "scikit-learn==1.5.2"\n'
            'python = "3.12"\ntrainer = { script = "train.py" }\n',
            "train.py": "",
        }
    )
    cfg = load_config(None, root)
    assert cfg.framework.name == "scikit-learn" and cfg.python == "3.12"
    assert cfg.trainer.script == "train.py" and "tool.buildkit-py" in cfg.source


def test_buildkit_yaml_wins_over_pyproject(project):
    root = project({"pyproject.toml": '[tool.buildkit-py]\npython = "3.12"\n', "buildkit.yaml": "python: '3.10'\n"})
    assert load_config(None, root).python == "3.10"


def test_flags_override_the_file(project):
    root = project({"buildkit.yaml": "framework: torch==2.5.1\npython: '3.10'\n"})
    cfg = load_config(root / "buildkit.yaml", root, {"python": "3.12", "cuda": None})
    assert cfg.python == "3.12" and cfg.framework.version == "2.5.1"


def test_flag_value_is_validated_and_named(project):
    root = project({"buildkit.yaml": "{}\n"})
    with pytest.raises(ConfigError, match=r"--python: python: '3.x' is not allowed"):
        load_config(root / "buildkit.yaml", root, {"python": "3.x"})


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("framework: torch>=2.4;python_version>'3'\n", "use NAME==VERSION"),
        ("framework: torch>=2.x\n", "is not a PEP 440 range"),
        ("framework: none==1\n", "'none' takes no version"),
        ("python: '2.7'\n", "a Python version like 3.11"),
        ("cuda: twelve\n", "a CUDA version like 12.4"),
        ("gpu: 'yes'\n", "must be true or false"),
        ("system_packages: ['git; rm -rf /']\n", "a Debian package name"),
        ("system_packages: git\n", "must be a list"),
        ("pip: ['--index-url=http://evil']\n", "give a PEP 508 requirement"),
        ("pip: ['numpy<2 $(id)']\n", "not a valid PEP 508 requirement"),
        ("requirements: ../secrets.txt\n", "relative path inside"),
        ("requirements: /etc/passwd\n", "relative path inside"),
        ("requirements: missing.txt\n", "not found"),
        ("requirements: 'req$(id).txt'\n", "a path is letters"),
        ("env: {'1BAD': x}\n", "names are ASCII letters"),
        ("env: {A: \"line\\nbreak\"}\n", "line breaks"),
        ("env: {A: 'ends with \\'}\n", "may not end with a backslash"),
        ("trainer: {module: 'a; rm -rf /'}\n", "a dotted Python module name"),
        ("trainer: {module: a, script: b.py}\n", "exactly one of module"),
        ("trainer: {script: trainer/__init__.py, args: [\"a\\u0000b\"]}\n", "NUL"),
        ("base_image: 'UPPER/case'\n", "must be lowercase"),
        ("hypertune: 1\n", "must be true or false"),
    ],
)
def test_bad_values_name_field_value_and_rule(project, text, fragment):
    with pytest.raises(ConfigError) as err:
        load(project, text)
    assert fragment in str(err.value)
    assert err.value.exit_code == 2


def test_script_must_be_python_file(project):
    with pytest.raises(ConfigError, match="must be a .py file"):
        load(project, "trainer: {script: run.sh}\n", **{"run.sh": "echo"})


@pytest.mark.parametrize("trainer, fragment", [
    ({"script": "train.py", "function": "main"}, "a function is called from a module: give module too"),
    ({"module": "trainer.task", "function": "main()"}, "a function name of the module"),
    ({"module": "trainer.task", "function": "class"}, "'class' is not a function name"),
    ({"module": "trainer.task", "function": "a;import os"}, "a function name of the module"),
    ({"module": "trainer.lambda", "function": "main"}, "cannot be imported by name: a part is a Python keyword"),
    ({"module": "trainer.task", "function": 7}, "trainer.function"),
])
def test_a_trainer_function_is_a_name_of_a_module(tmp_path, trainer, fragment):
    (tmp_path / "train.py").write_text("")
    (tmp_path / "buildkit.yaml").write_text(yaml.safe_dump({"trainer": trainer}))
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "buildkit.yaml")
    assert fragment in str(err.value), err.value
