"""Processes per machine (BUILDKIT_PY_PROCESSES_PER_NODE): the launcher's process tree on the CPU, as torchrun's rules
have it (every process's variables, a signal reaching all, the first failure ending the rest with its status), and the
distributed launchers in a trainer's command given the cluster of a 3-replica CLUSTER_SPEC."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from buildkit_py.launcher import cluster, launchers
from buildkit_py.launcher.constants import BAD_CLUSTER, PROCESSES_ENV, USAGE
from conftest import REPO

# Each process writes its variables to DIR/<RANK>.json, then acts as its first argument says.
TRAINER = '''
import json, os, signal, sys, time
out, mode = sys.argv[1], sys.argv[2]
names = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
         "JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_LOCAL_DEVICE_IDS", "PET_NNODES")
rank = os.environ["RANK"]
got = []
signal.signal(signal.SIGTERM, lambda s, f: (got.append(s), open(os.path.join(out, rank + ".signal"), "w").write(str(s)),
                                             sys.exit(0 if mode != "stubborn" else 0)))
with open(os.path.join(out, rank + ".json.part"), "w") as f:  # renamed whole: the test never reads half a file
    json.dump({**{n: os.environ.get(n) for n in names}, "pid": os.getpid()}, f)
os.replace(os.path.join(out, rank + ".json.part"), os.path.join(out, rank + ".json"))
if mode == "ok":
    sys.exit(0)
if mode == "fail-rank-1" and os.environ["LOCAL_RANK"] == "1":
    while len([n for n in os.listdir(out) if n.endswith(".json")]) < int(os.environ["LOCAL_WORLD_SIZE"]):
        time.sleep(0.02)
    sys.exit(7)
deadline = time.time() + 60
while time.time() < deadline and not got:
    time.sleep(0.02)
sys.exit(3)  # never signalled: the test sees a status it did not expect
'''

SPEC_POOLS = {"workerpool0": ["chief-0:2222"], "workerpool1": ["w-0:2222", "w-1:2222"]}


def spec(task_type: str, index: int) -> str:
    return json.dumps({"cluster": SPEC_POOLS, "task": {"type": task_type, "index": index}, "environment": "cloud"})


def start(tmp_path: Path, mode: str, env: dict[str, str], *command: str) -> subprocess.Popen:
    script = tmp_path / "train.py"
    script.write_text(TRAINER)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    words = command or (sys.executable, str(script), str(out), mode)
    return subprocess.Popen([sys.executable, "-m", "buildkit_py.launcher", "--", *words], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), **env})


def written(tmp_path: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (tmp_path / "out").glob("*.json")}


def wait_for(tmp_path: Path, count: int) -> None:
    deadline = time.monotonic() + 30
    while len(written(tmp_path)) < count:
        assert time.monotonic() < deadline, "the processes did not start"
        time.sleep(0.05)


@pytest.mark.parametrize("in_interpreter", [True, False])
def test_three_processes_on_the_second_machine_of_three(tmp_path, in_interpreter):
    env = {PROCESSES_ENV: "3", "CLUSTER_SPEC": spec("workerpool1", 0)}
    script = tmp_path / "train.py"
    command = () if in_interpreter else ("sh", "-c", f'exec "{sys.executable}" "{script}" "{tmp_path / "out"}" ok')
    proc = start(tmp_path, "ok", env, *command)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    seen = written(tmp_path)
    assert sorted(seen) == ["3", "4", "5"]
    for rank, values in seen.items():
        assert values["LOCAL_RANK"] == str(int(rank) - 3)
        assert values["WORLD_SIZE"] == "9" and values["LOCAL_WORLD_SIZE"] == "3" and values["GROUP_RANK"] == "1"
        assert (values["MASTER_ADDR"], values["MASTER_PORT"]) == ("chief-0", "2222")
        assert values["JAX_COORDINATOR_ADDRESS"] == "chief-0:2222" and values["JAX_NUM_PROCESSES"] == "9"
        assert values["JAX_PROCESS_ID"] == rank and values["PET_NNODES"] == "3"
        assert values["JAX_LOCAL_DEVICE_IDS"] is None  # no GPU here: no device to give each process
    assert len({v["pid"] for v in seen.values()}) == 3
    assert "started 3 processes, ranks 3-5 of 9" in err


def test_one_machine_rendezvous_on_loopback(tmp_path):
    proc = start(tmp_path, "ok", {PROCESSES_ENV: "2"})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    seen = written(tmp_path)
    assert {(v["RANK"], v["WORLD_SIZE"], v["MASTER_ADDR"], v["MASTER_PORT"]) for v in seen.values()} == {
        ("0", "2", "127.0.0.1", "29500"), ("1", "2", "127.0.0.1", "29500")}


def test_a_signal_reaches_every_process(tmp_path):
    proc = start(tmp_path, "wait", {PROCESSES_ENV: "3"})
    wait_for(tmp_path, 3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert sorted(p.name for p in (tmp_path / "out").glob("*.signal")) == ["0.signal", "1.signal", "2.signal"]


def test_the_first_failure_stops_the_others_and_is_the_status(tmp_path):
    proc = start(tmp_path, "fail-rank-1", {PROCESSES_ENV: "3"})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 7, err
    assert "rank 1 exited with status 7: stopping the other 2 (SIGTERM)" in err
    # The others were stopped by the launcher (their SIGTERM handler ran), not left to time out.
    assert sorted(p.name for p in (tmp_path / "out").glob("*.signal")) == ["0.signal", "2.signal"]


def test_a_process_that_cannot_start_fails_the_machine(tmp_path):
    proc = start(tmp_path, "ok", {PROCESSES_ENV: "2"}, str(tmp_path / "no-such-trainer"))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 127 and "cannot run" in err


def test_auto_without_a_gpu_is_one_process(tmp_path):
    proc = start(tmp_path, "ok", {PROCESSES_ENV: "auto"})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert list(written(tmp_path)) == ["0"]
    assert "auto: no GPU is visible, so one process" in err


def test_auto_is_one_process_per_visible_gpu(tmp_path, fake_nvml):
    env = {PROCESSES_ENV: "auto", "BUILDKIT_PY_NVML_LIBRARY": fake_nvml, "FAKE_NVML_COUNT": "4",
           "CUDA_VERSION": "12.4.1", "BUILDKIT_PY_EXPECT_GPUS": "4", "BUILDKIT_PY_SHM_PATH": str(tmp_path)}
    proc = start(tmp_path, "ok", env)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    seen = written(tmp_path)
    assert sorted(seen) == ["0", "1", "2", "3"]
    assert {v["JAX_LOCAL_DEVICE_IDS"] for v in seen.values()} == {"0", "1", "2", "3"}


@pytest.mark.parametrize("value", ["0", "-1", "two", "65", "1.5", "\u0663", "\u00b2", "1 2", "08x"])
def test_a_bad_process_count_is_a_usage_error(tmp_path, value):
    proc = start(tmp_path, "ok", {PROCESSES_ENV: value})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == USAGE
    assert f"{PROCESSES_ENV}={value!r} is not a process count; allowed: 1-64 or auto" in err
    assert "Traceback" not in err


def test_servers_and_evaluators_run_one_process(tmp_path):
    pools = {**SPEC_POOLS, "workerpool3": ["e-0:2222"]}
    env = {PROCESSES_ENV: "3", "CLUSTER_SPEC": json.dumps({"cluster": pools, "task": {"type": "workerpool3",
                                                                                       "index": 0}})}
    script = tmp_path / "train.py"
    proc = start(tmp_path, "ok", env, "sh", "-c", f'RANK=evaluator exec "{sys.executable}" "{script}" '
                                                  f'"{tmp_path / "out"}" ok')
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert list(written(tmp_path)) == ["evaluator"] and "takes no rank: one process, not 3" in err


# --- distributed launchers in the command ---------------------------------------------------------------------------

def cluster_of(task_type: str, index: int) -> cluster.Cluster:
    return cluster.parse({"CLUSTER_SPEC": spec(task_type, index)})


@pytest.mark.parametrize("command, kind, flags, trainer", [
    (["torchrun", "--nproc_per_node=8", "train.py", "--nnodes", "5"], "torchrun", (("nproc_per_node", "8"),), 2),
    (["torchrun", "--nproc-per-node", "gpu", "--standalone", "-m", "pkg.train"], "torchrun",
     (("nproc_per_node", "gpu"), ("standalone", True), ("m", True)), 5),
    (["python3", "-m", "torch.distributed.run", "--nnodes", "1:4", "t.py"], "torchrun", (("nnodes", "1:4"),), 5),
    (["accelerate", "launch", "--config_file", "acc.yaml", "--num_processes", "4", "train.py"], "accelerate",
     (("config_file", "acc.yaml"), ("num_processes", "4")), 6),
    (["deepspeed", "--num_gpus", "8", "train.py", "--deepspeed", "ds.json"], "deepspeed", (("num_gpus", "8"),), 3),
])
def test_launchers_are_read_up_to_the_trainer(command, kind, flags, trainer):
    launch = launchers.find(command)
    assert (launch.kind, launch.flags, launch.trainer) == (kind, flags, trainer)


@pytest.mark.parametrize("command", [["python", "train.py"], ["accelerate", "config"], ["sh", "-c", "torchrun x"],
                                     ["python", "-m", "torch.utils.bottleneck"], []])
def test_other_commands_are_no_launcher(command):
    assert launchers.find(command) is None


@pytest.mark.parametrize("command, per_node, fragment", [
    (["torchrun", "--nnodes", "2", "t.py"], None, "torchrun --nnodes 2 in the trainer's command, but the job runs 3 "
                                                  "machines"),
    (["torchrun", "--nnodes=4:8", "t.py"], None, "--nnodes 4:8"),
    (["torchrun", "--standalone", "--nproc_per_node=8", "t.py"], None, "torchrun --standalone"),
    (["torchrun", "--node_rank=0", "t.py"], None, "--node_rank in the trainer's command is the same on every machine"),
    (["accelerate", "launch", "--num_machines", "2", "t.py"], None, "accelerate launch --num_machines 2"),
    (["accelerate", "launch", "--main_process_ip", "10.0.0.1", "t.py"], None, "--main_process_ip"),
    (["deepspeed", "--hostfile", "hosts", "t.py"], None, "deepspeed --hostfile"),
    (["torchrun", "--nproc_per_node=4", "t.py"], 8, "the job runs 8 processes per machine, but the trainer's command "
                                                    "starts 4"),
])
def test_contradictions_with_a_three_replica_job(command, per_node, fragment):
    assert fragment in launchers.contradiction(launchers.find(command), 3, per_node)


@pytest.mark.parametrize("command, per_node", [
    (["torchrun", "--nnodes=3", "--nproc_per_node=8", "t.py"], None), (["torchrun", "--nnodes=1:4", "t.py"], None),
    (["torchrun", "--nproc_per_node=8", "t.py"], 8), (["accelerate", "launch", "t.py"], "auto"),
    (["deepspeed", "t.py"], None),
])
def test_agreeing_flags_are_no_contradiction(command, per_node):
    assert launchers.contradiction(launchers.find(command), 3, per_node) is None


def test_torchrun_is_given_the_cluster_through_its_variables():
    found = cluster_of("workerpool1", 1)
    launch = launchers.find(["torchrun", "--nproc_per_node=8", "t.py"])
    command, env, _ = launchers.adapt(["torchrun", "--nproc_per_node=8", "t.py"], launch, 3, found.rank,
                                      found.master, found.hosts, None)
    assert command == ["torchrun", "--nproc_per_node=8", "t.py"]  # its own flags stay, and win over PET_*
    assert env == {"PET_NNODES": "3", "PET_NODE_RANK": "2", "PET_MASTER_ADDR": "chief-0", "PET_MASTER_PORT": "2222"}
    _, env, _ = launchers.adapt(["torchrun", "t.py"], launchers.find(["torchrun", "t.py"]), 3, 2, found.master,
                                found.hosts, 4)
    assert env["PET_NPROC_PER_NODE"] == "4"


def test_accelerate_is_given_the_cluster_as_flags():
    found = cluster_of("workerpool1", 0)
    words = ["accelerate", "launch", "--num_processes", "8", "train.py", "--lr", "1"]
    command, env, notes = launchers.adapt(words, launchers.find(words), 3, found.rank, found.master, found.hosts, None)
    assert env == {}
    # Replaced where it stands (accelerate takes a flag's last value), the cluster's flags after `launch`.
    assert command == ["accelerate", "launch", "--num_machines", "3", "--machine_rank", "1", "--main_process_ip",
                       "chief-0", "--main_process_port", "2222", "--multi_gpu", "--num_processes", "24", "train.py",
                       "--lr", "1"]
    assert any("one machine's: 24 over 3 machines" in n for n in notes)


def test_deepspeed_is_given_a_hostfile_and_no_ssh(tmp_path, monkeypatch):
    monkeypatch.setattr(launchers, "HOSTFILE", str(tmp_path / "hostfile"))
    found = cluster_of("workerpool0", 0)
    words = ["deepspeed", "train.py", "--deepspeed", "ds.json"]
    command, _, _ = launchers.adapt(words, launchers.find(words), 3, found.rank, found.master, found.hosts, 8)
    assert command == ["deepspeed", "--hostfile", str(tmp_path / "hostfile"), "--no_ssh", "--node_rank", "0",
                       "--master_addr", "chief-0", "--master_port", "2222", "--num_gpus", "8", "train.py",
                       "--deepspeed", "ds.json"]
    assert (tmp_path / "hostfile").read_text() == "chief-0 slots=8\nw-0 slots=8\nw-1 slots=8\n"


FAKE_LAUNCHER = """
import json, os, sys
names = ("PET_", "JAX_", "MASTER_", "RANK", "WORLD")
json.dump({"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items() if k.startswith(names)}},
          open(RECORD, "w"))
"""


def fake_launcher(tmp_path: Path, name: str) -> Path:
    """A stand-in for the launcher's executable that writes what it was given: its arguments and PET_* variables."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    record = str(tmp_path / f"{name}.json")
    path.write_text(f"#!{sys.executable}\n" + FAKE_LAUNCHER.replace("RECORD", repr(record)))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_dir


@pytest.mark.parametrize("name, command, expect_args", [
    ("torchrun", ["--nproc_per_node=8", "train.py"], ["--nproc_per_node=8", "train.py"]),
    ("accelerate", ["launch", "--multi_gpu", "train.py"],
     ["launch", "--num_machines", "3", "--machine_rank", "2", "--main_process_ip", "chief-0", "--main_process_port",
      "2222", "--multi_gpu", "train.py"]),
])
def test_the_image_launcher_hands_the_cluster_to_the_entry(tmp_path, name, command, expect_args):
    bin_dir = fake_launcher(tmp_path, name)
    env = {"CLUSTER_SPEC": spec("workerpool1", 1), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "buildkit_py.launcher", "--", name, *command], capture_output=True,
                          text=True, env={"PYTHONPATH": str(REPO), **env}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads((tmp_path / f"{name}.json").read_text())
    assert seen["argv"] == expect_args
    assert (seen["env"]["PET_NNODES"], seen["env"]["PET_NODE_RANK"]) == ("3", "2")
    assert seen["env"]["JAX_COORDINATOR_ADDRESS"] == "chief-0:2222" and seen["env"]["JAX_PROCESS_ID"] == "2"


def test_the_image_launcher_refuses_a_contradiction_before_starting(tmp_path):
    bin_dir = fake_launcher(tmp_path, "torchrun")
    env = {"CLUSTER_SPEC": spec("workerpool0", 0), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "buildkit_py.launcher", "--", "torchrun", "--nnodes=2", "t.py"],
                          capture_output=True, text=True, env={"PYTHONPATH": str(REPO), **env}, timeout=60)
    assert proc.returncode == BAD_CLUSTER and "--nnodes 2 in the trainer's command" in proc.stderr
    assert not (tmp_path / "torchrun.json").exists()


def test_jax_and_torchrun_variables_of_each_machine():
    for task_type, index, rank in (("workerpool0", 0, "0"), ("workerpool1", 1, "2")):
        found = cluster_of(task_type, index)
        env = cluster.node_env(found, {}, tpu=False)
        assert env == {"PET_NNODES": "3", "PET_NODE_RANK": rank, "PET_MASTER_ADDR": "chief-0",
                       "PET_MASTER_PORT": "2222", "JAX_COORDINATOR_ADDRESS": "chief-0:2222", "JAX_NUM_PROCESSES": "3",
                       "JAX_PROCESS_ID": rank}
    tpu = cluster.node_env(cluster_of("workerpool0", 0), {}, tpu=True)
    assert not any(k.startswith("JAX_") for k in tpu)  # a TPU slice's runtime sets JAX's own
    assert cluster.node_env(cluster_of("workerpool0", 0), {"JAX_PROCESS_ID": "9"}, tpu=False).get("JAX_PROCESS_ID") \
        is None


def test_output_is_relayed_in_whole_lines_after_each_rank(tmp_path):
    script = tmp_path / "talk.py"
    script.write_text('import json, os, sys\nrank = os.environ["RANK"]\n'
                      'for i in range(200):\n    print("rank", rank, "line", i, "end")\n'
                      'print(json.dumps({"severity": "INFO", "rank": rank}))\n'
                      'print("to stderr", rank, file=sys.stderr)\nsys.stdout.write("no newline " + rank)\n')
    proc = subprocess.run([sys.executable, "-m", "buildkit_py.launcher", "--", sys.executable, str(script)],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), PROCESSES_ENV: "4",
                               "PYTHONUNBUFFERED": "1"})  # as the image sets it: each print's part a write of its own
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 4 * 202
    for rank in range(4):
        own = [line for line in lines if line.startswith(f"[rank {rank}] ")]
        assert own[:200] == [f"[rank {rank}] rank {rank} line {i} end" for i in range(200)]
        assert own[200] == f"[rank {rank}] no newline {rank}"
        assert f"[rank {rank}] to stderr {rank}" in proc.stderr.splitlines()
    # A JSON object's line is left whole and bare, for structured logging.
    assert sorted(json.loads(line)["rank"] for line in lines if line.startswith("{")) == ["0", "1", "2", "3"]


ACCELERATE_CONFIG = """compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 8  # this workstation's GPUs
use_cpu: false
"""


@pytest.mark.parametrize("name, text", [("acc.yaml", ACCELERATE_CONFIG),
                                        ("acc.json", '{"num_machines": 1, "num_processes": 8}')])
def test_an_accelerate_config_file_made_on_one_machine_counts_one_machines_processes(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    words = ["accelerate", "launch", "--config_file", name, "train.py"]
    launch = launchers.find(words, root=str(tmp_path))
    assert sorted(launch.file) == [("num_machines", "1"), ("num_processes", "8")]
    assert launchers.declared_per_node(launch) == 8
    assert launchers.contradiction(launch, 3, None) is None  # its one machine is the workstation's
    found = cluster_of("workerpool1", 1)
    command, _, notes = launchers.adapt(words, launch, 3, found.rank, found.master, found.hosts, None)
    # Its flags override the file: 24 processes over 3 machines, this one the third.
    assert command == ["accelerate", "launch", "--num_processes", "24", "--num_machines", "3", "--machine_rank", "2",
                       "--main_process_ip", "chief-0", "--main_process_port", "2222", "--config_file", name,
                       "train.py"]
    assert f"{name}: num_processes counts one machine's: 24 over 3 machines" in notes
    assert launchers.contradiction(launch, 3, 4) is None  # a file's count is no flag of the command's


def test_an_accelerate_config_file_for_other_machines_is_a_contradiction(tmp_path):
    (tmp_path / "acc.yaml").write_text(ACCELERATE_CONFIG.replace("num_machines: 1", "num_machines: 2"))
    launch = launchers.find(["accelerate", "launch", "--config_file", "acc.yaml", "t.py"], root=str(tmp_path))
    assert "accelerate launch --num_machines 2" in launchers.contradiction(launch, 3, None)
    assert launchers.find(["accelerate", "launch", "--config_file", "missing.yaml", "t.py"], root=str(tmp_path)).file == ()


@settings(max_examples=300, deadline=None)
@given(head=st.sampled_from([["torchrun"], ["accelerate", "launch"], ["deepspeed"], ["python3", "-m",
                                                                                    "torch.distributed.run"]]),
       words=st.lists(st.one_of(st.sampled_from(["--nnodes", "--nnodes=1:x", "--nproc_per_node", "--num_processes",
                                                 "--num_machines", "--node_rank", "-m", "--", "--config_file", "=",
                                                 "--standalone", "--num_gpus", "\u0663", "-"]), st.text(max_size=8)),
                      max_size=12),
       nodes=st.integers(1, 5), per_node=st.sampled_from([None, "auto", 1, 8]))
def test_any_launcher_command_is_read_without_a_crash(tmp_path_factory, head, words, nodes, per_node):
    command = head + words
    launch = launchers.find(command, root=str(tmp_path_factory.getbasetemp()))
    assert launch is not None and launch.head <= launch.trainer <= len(command)
    problem = launchers.contradiction(launch, nodes, per_node)
    assert problem is None or isinstance(problem, str)
    count = per_node if isinstance(per_node, int) else None
    hostfile = str(tmp_path_factory.getbasetemp() / "hostfile")
    try:
        with mock.patch.object(launchers, "HOSTFILE", hostfile):
            out, _, _ = launchers.adapt(command, launch, nodes, 0, ("chief-0", "2222"), ("chief-0",) * nodes, count)
    except ValueError:
        return  # DeepSpeed across machines with no count to write its hostfile with: said as an error
    trainer = command[launch.trainer:]
    assert out[:len(head)] == head and out[len(out) - len(trainer):] == trainer  # the trainer's words untouched


def test_an_accelerate_config_file_no_file_can_be_named_is_read_as_none():
    # A NUL in the name (hypothesis found it): open() raises ValueError, not OSError; the command runs uncounted.
    assert launchers._accelerate_file("conf\x00.yaml") == ()
    launch = launchers.find(["accelerate", "launch", "--config_file", "\x00", "train.py"], root="/nonexistent")
    assert launch is not None
