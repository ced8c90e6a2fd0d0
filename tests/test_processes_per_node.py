"""Processes per machine on the tool's side: trainer.processes_per_node and --processes-per-node in the job (each
ranked pool's launcher is told; servers, evaluators and the reduction server are not), the world size the job and the
preflight say, and the refusals before anything is sent: more processes than the machine type has GPUs, and a
distributed launcher in the command whose flags contradict the job."""

from __future__ import annotations

import json

import pytest
from google.cloud import aiplatform_v1
from google.protobuf import json_format

from buildkit_py import cli
from buildkit_py.config import load_config
from buildkit_py.errors import ConfigError
from buildkit_py.jobs import preflight, vertex
from buildkit_py.launcher.constants import PROCESSES_ENV

IMAGE = "us-central1-docker.pkg.dev/proj/repo/trainer:v1"
BASE = "framework: torch==2.5.1\naccelerator: NVIDIA_A100_80GB\n"


def make(project, text: str, **job) -> vertex.VertexJob:
    root = project({"buildkit.yaml": text, "trainer/__init__.py": "", "trainer/task.py": ""})
    config = load_config(root / "buildkit.yaml", root)
    settings = config.job
    if job:
        from dataclasses import replace

        settings = replace(settings, **job)
    made = vertex.build_job(config, settings)
    message = aiplatform_v1.CustomJob.pb(aiplatform_v1.CustomJob())
    json_format.ParseDict(made.resource, message)  # the official type's strict parser
    return made


def env_of(pool: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pool["containerSpec"]["env"]}


def job_text(trainer: str, machine: str = "a2-ultragpu-8g", count: int = 8, replicas: int = 3, extra: str = "") -> str:
    return BASE + trainer + f"""job:
  image: {IMAGE}
  machine_type: {machine}
  accelerator_count: {count}
  replica_count: {replicas}
{extra}"""


def test_auto_on_eight_gpu_machines_is_a_world_of_twenty_four(project):
    job = make(project, job_text("trainer: {module: trainer.task, processes_per_node: auto}\n"))
    pools = job.resource["jobSpec"]["workerPoolSpecs"]
    assert [env_of(p)[PROCESSES_ENV] for p in pools] == ["auto", "auto"]
    assert (job.machines, job.processes_per_node, job.world_size) == (3, 8, 24)
    assert "world size 24: 3 machine(s) x 8 trainer process(es)" in job.notes
    checks = {c.name: c for c in preflight.job_checks(job, project="p", region="r", staging=None, console="c")}
    assert checks["world"].ok and checks["world"].detail.startswith("world size 24: 3 machines x 8 trainer processes")


def test_the_flag_overrides_the_config_and_is_checked_against_the_machine(project):
    text = job_text("trainer: {module: trainer.task, processes_per_node: 2}\n")
    job = make(project, text, processes_per_node=4)
    assert env_of(job.resource["jobSpec"]["workerPoolSpecs"][0])[PROCESSES_ENV] == "4" and job.world_size == 12
    with pytest.raises(ConfigError) as caught:
        make(project, text, processes_per_node=16)
    assert caught.value.field == "--processes-per-node"
    assert "16 processes per machine, but a2-ultragpu-8g has 8 GPU(s): at most 8, or auto" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        make(project, job_text("trainer: {module: trainer.task, processes_per_node: 9}\n"))
    assert caught.value.field == "trainer.processes_per_node"


def test_nothing_asked_is_one_process_and_no_variable(project):
    job = make(project, job_text("trainer: {module: trainer.task}\n", replicas=1))
    assert PROCESSES_ENV not in env_of(job.resource["jobSpec"]["workerPoolSpecs"][0])
    assert job.world_size == 1 and not any(n.startswith("world size") for n in job.notes)


def test_servers_evaluators_and_the_reduction_server_are_not_told(project):
    job = make(project, job_text("trainer: {module: trainer.task, processes_per_node: auto}\n",
                                 extra="  reduction_server: {replica_count: 2}\n"))
    pools = job.resource["jobSpec"]["workerPoolSpecs"]
    assert pools[2]["containerSpec"] == {"imageUri": vertex.REDUCTION_SERVER_IMAGE}  # pool 2 keeps its own image
    job = make(project, job_text("trainer: {module: trainer.task, processes_per_node: 8}\n",
                                 extra="  evaluators: {replica_count: 1}\n"))
    assert PROCESSES_ENV not in env_of(job.resource["jobSpec"]["workerPoolSpecs"][3])


@pytest.mark.parametrize("command, per_node", [
    ('["torchrun", "--nproc_per_node=8", "-m", "trainer.task"]', 8),
    ('["torchrun", "--nproc_per_node", "gpu", "-m", "trainer.task"]', 8),
    ('["python", "-m", "torch.distributed.run", "-m", "trainer.task"]', 1),
    ('["deepspeed", "trainer/task.py"]', 8),
    ('["accelerate", "launch", "--num_processes", "4", "trainer/task.py"]', 4),
])
def test_the_commands_own_launcher_says_the_processes(project, command, per_node):
    job = make(project, job_text(f"trainer: {{module: trainer.task, command: {command}}}\n"))
    assert job.processes_per_node == per_node and job.world_size == 3 * per_node


@pytest.mark.parametrize("command, fragment", [
    ('["torchrun", "--nnodes", "2", "--nproc_per_node=8", "-m", "trainer.task"]',
     "torchrun --nnodes 2 in the trainer's command, but the job runs 3 machines"),
    ('["torchrun", "--standalone", "-m", "trainer.task"]', "torchrun --standalone in the trainer's command"),
    ('["accelerate", "launch", "--machine_rank", "0", "trainer/task.py"]', "accelerate launch --machine_rank"),
])
def test_a_contradiction_is_refused_before_the_job_is_sent(project, command, fragment):
    with pytest.raises(ConfigError) as caught:
        make(project, job_text(f"trainer: {{module: trainer.task, command: {command}}}\n"))
    assert caught.value.field == "trainer.command" and fragment in str(caught.value)


def test_the_flag_against_the_commands_own_count(project):
    text = job_text('trainer: {module: trainer.task, command: ["torchrun", "--nproc_per_node=8", "-m", '
                    '"trainer.task"]}\n')
    with pytest.raises(ConfigError) as caught:
        make(project, text, processes_per_node=4)
    assert "the job runs 4 processes per machine, but the trainer's command starts 8" in str(caught.value)


def test_a_tpu_job_takes_no_process_count(project):
    text = ("framework: jax\naccelerator: TPU_V5_LITEPOD\ntrainer: {module: trainer.task, processes_per_node: 4}\n"
            f"job: {{image: {IMAGE}}}\n")
    with pytest.raises(ConfigError) as caught:
        make(project, text)
    assert "a TPU VM job runs one trainer process per host" in str(caught.value)


@pytest.mark.parametrize("value", ["0", "65", "two", "1.5", "-1", "\u0663", "\u00b2", "00000000008"])
def test_bad_values_from_the_flag_and_the_config(project, capsys, value):
    root = project({"buildkit.yaml": job_text("trainer: {module: trainer.task}\n"), "trainer/__init__.py": "",
                    "trainer/task.py": ""})
    code = cli.main(["job", "--dir", str(root), "--processes-per-node", value])
    _, err = capsys.readouterr()
    assert code == 2 and "--processes-per-node" in err and "a number of processes from 1 to 64, or auto" in err
    assert "Traceback" not in err
    (root / "buildkit.yaml").write_text(job_text(f"trainer: {{module: trainer.task, processes_per_node: {value}}}\n"))
    code = cli.main(["job", "--dir", str(root)])
    _, err = capsys.readouterr()
    assert code == 2 and "trainer.processes_per_node" in err and "Traceback" not in err


def test_the_job_command_prints_the_variable(project, capsys):
    root = project({"buildkit.yaml": job_text("trainer: {module: trainer.task}\n"), "trainer/__init__.py": "",
                    "trainer/task.py": ""})
    assert cli.main(["job", "--dir", str(root), "--processes-per-node", "auto", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"name": PROCESSES_ENV, "value": "auto"} in out["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"]


def test_an_accelerate_config_file_of_the_repository_says_the_processes(project):
    root = project({"acc.yaml": "num_machines: 1\nnum_processes: 4\n"})
    job = make(project, job_text('trainer: {module: trainer.task, command: ["accelerate", "launch", "--config_file", '
                                 '"acc.yaml", "trainer/task.py"]}\n'))
    assert (root / "acc.yaml").is_file() and (job.processes_per_node, job.world_size) == (4, 12)


def test_a_prebuilt_executor_cannot_start_processes(project):
    text = (BASE + "trainer: {module: trainer.task, processes_per_node: auto}\njob:\n  machine_type: a2-ultragpu-8g\n"
            "  accelerator_count: 8\n  python_package: {executor: torch==2.4, package_uris: [gs://bucket/t.tar.gz], "
            "module: trainer.task}\n")
    with pytest.raises(ConfigError) as caught:
        make(project, text)
    assert caught.value.field == "trainer.processes_per_node" and "runs one process per machine" in str(caught.value)
