"""The launcher as a real image's ENTRYPOINT and PID 1, on the real engine."""

from __future__ import annotations

import json
import time

import pytest
from test_build_e2e import docker
from test_launcher_tpu import elf_header, stand_in

from conftest import REPO, run_cli

TRAINER = '''
import os, signal, sys, time

def on_term(*_):
    # No print here: a signal inside print(flush=True) makes a second print a "reentrant call".
    os.write(1, b"trainer got SIGTERM\\n")
    os._exit(42)

signal.signal(signal.SIGTERM, on_term)
print("trainer pid", os.getpid(), "rank", os.environ.get("RANK"), "world", os.environ.get("WORLD_SIZE"), flush=True)
mode = sys.argv[1] if len(sys.argv) > 1 else "exit"
if mode == "orphans":
    # A child that leaves a grandchild behind: the grandchild becomes PID 1's to reap.
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            time.sleep(0.2)  # outlive its parent: it is re-parented to PID 1 before it exits
            os._exit(0)
        os._exit(0)
    os.waitpid(child, 0)  # the trainer reaps its own child; the orphan is PID 1's job
    time.sleep(1.0)
    zombies = [p for p in os.listdir("/proc") if p.isdigit()
               and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"]
    print("zombies", len(zombies), flush=True)
elif mode == "wait":
    time.sleep(60)
elif mode == "info":
    from . import helper
    print("name", __name__, "argv", sys.argv, "helper", helper.VALUE, "in the launcher's interpreter",
          "buildkit_launcher.handoff" in sys.modules, flush=True)
elif mode == "raise":
    raise ValueError("boom")
elif mode == "exit-message":
    sys.exit("stopped: bad data")
sys.exit(int(os.environ.get("TRAINER_EXIT", "0")))
'''


@pytest.fixture(scope="module")
def image(testenv, tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("launcher-trainer")
    (root / "trainer").mkdir()
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text(TRAINER)
    (root / "trainer" / "helper.py").write_text("VALUE = 'relative import'\n")
    (root / "buildkit.yaml").write_text("framework: none\npython: '3.11'\ngpu: false\nhypertune: false\n"
                                        "trainer: {module: trainer.task}\n")
    proc = run_cli("build", "--config", str(root / "buildkit.yaml"), "--network", "host", "--json",
                   env={**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)["tags"][0]


def test_trainer_exit_code_is_the_containers(testenv, image):
    proc = docker(testenv, "run", "--rm", "--network", "none", "-e", "TRAINER_EXIT=3", image, check=False)
    assert proc.returncode == 3
    assert "buildkit-py launcher: checks passed" in proc.stderr and "trainer pid" in proc.stdout


def test_sigterm_reaches_the_trainer_under_pid_1(testenv, image):
    name = f"bkpy-sigterm-{time.time_ns()}"
    docker(testenv, "run", "-d", "--name", name, "--network", "none", image, "wait")
    try:
        for _ in range(100):
            if "trainer pid" in docker(testenv, "logs", name).stdout:
                break
            time.sleep(0.1)
        start = time.monotonic()
        docker(testenv, "stop", "-t", "20", name)
        stopped_in = time.monotonic() - start
        state = json.loads(docker(testenv, "inspect", name).stdout)[0]["State"]
        logs = docker(testenv, "logs", name).stdout
    finally:
        docker(testenv, "rm", "-f", name, check=False)
    assert "trainer got SIGTERM" in logs and state["ExitCode"] == 42
    assert stopped_in < 10  # the signal was delivered, not the stop timeout's SIGKILL


def test_pid_1_reaps_orphaned_zombies(testenv, image):
    proc = docker(testenv, "run", "--rm", "--network", "none", image, "orphans")
    assert "zombies 0" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("mode, code, out, err", [
    ("info", 0, "name __main__ argv ['/app/trainer/task.py', 'info'] helper relative import in the launcher's "
                "interpreter True", ""),
    ("raise", 1, "", 'File "/app/trainer/task.py", line 32, in <module>\n    raise ValueError("boom")\n'
                     "ValueError: boom\n"),
    ("exit-message", 1, "", "\nstopped: bad data\n"),
])
def test_the_trainer_runs_in_the_launchers_interpreter_as_python_would_run_it(testenv, image, mode, code, out, err):
    proc = docker(testenv, "run", "--rm", "--network", "none", image, mode, check=False)
    assert proc.returncode == code and out in proc.stdout and err in proc.stderr, proc.stdout + proc.stderr
    assert "buildkit_launcher" not in proc.stderr  # a traceback shows the trainer's frames, as python -m does


def test_cluster_spec_becomes_torch_variables(testenv, image):
    spec = json.dumps({"cluster": {"workerpool0": ["127.0.0.1:29500"], "workerpool1": ["127.0.0.1:29501"]},
                       "task": {"type": "workerpool1", "index": 0}})
    proc = docker(testenv, "run", "--rm", "--network", "none", "-e", f"CLUSTER_SPEC={spec}", image)
    assert "rank 1 world 2" in proc.stdout


def test_gpu_requested_but_container_started_without_gpus(testenv, image):
    proc = docker(testenv, "run", "--rm", "--network", "none", "-e", "BUILDKIT_PY_EXPECT_GPUS=1", image, check=False)
    assert proc.returncode == 10
    assert "no NVIDIA driver is visible in this container" in proc.stderr and "trainer pid" not in proc.stdout


@pytest.mark.parametrize("chips, code, fragment", [
    (4, 0, "4 TPU_V5_LITEPOD chip(s) visible (/standin-dev/vfio/0, /standin-dev/vfio/1, /standin-dev/vfio/2, "
           "/standin-dev/vfio/3); TPU runtime /standin-lib/libtpu.so"),
    (1, 18, "asked for 4 TPU_V5_LITEPOD chip(s) (BUILDKIT_PY_EXPECT_TPU_CHIPS=4) but 1 is visible in this container "
            "(/standin-dev/vfio/0)"),
])
def test_tpu_checks_in_a_container_with_a_stand_in_layout(testenv, image, tmp_path, chips, code, fragment):
    """A v5e TPU VM's /dev/vfio and a libtpu stand-in (an ELF shared object header), bind-mounted."""
    dev = stand_in(tmp_path, vfio=chips)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libtpu.so").write_bytes(elf_header())
    proc = docker(testenv, "run", "--rm", "--network", "none", "-v", f"{dev}:/standin-dev:ro",
                  "-v", f"{tmp_path / 'lib'}:/standin-lib:ro", "-e", "BUILDKIT_PY_DEV_DIR=/standin-dev",
                  "-e", "BUILDKIT_PY_SYS_DIR=/standin-dev/no-sysfs",
                  "-e", "BUILDKIT_PY_EXPECT_TPU_CHIPS=4", "-e", "BUILDKIT_PY_TPU=TPU_V5_LITEPOD",
                  "-e", "BUILDKIT_PY_TPU_RUNTIME=/standin-lib/libtpu.so", image, check=False)
    assert proc.returncode == code and fragment in proc.stderr, proc.stderr
    assert ("trainer pid" in proc.stdout) == (code == 0)


def test_local_run_with_workers_rendezvous_and_cloud_environment(testenv, tmp_path):
    out = tmp_path / "out"
    proc = run_cli("run", "--config", str(REPO / "examples" / "distributed" / "buildkit.yaml"), "--workers", "2",
                   "--output", str(out), "--progress", "plain", "--json",
                   env={**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]})
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    assert result["exit_codes"] == {"workerpool0-0": 0, "workerpool1-0": 0, "workerpool1-1": 0}
    # ranks 0..2 add (rank + 1 + step): step 2 sums 3 + 4 + 5
    for rank in range(3):
        assert f"rank {rank}/3 step 2: global sum 12" in proc.stderr
    assert result["metrics"][-1]["global_sum"] == "12.0"
    assert (out / "hypertune" / "output.metrics").is_file() and (out / "model").is_dir()
    assert result["job_id"].startswith("local_")
    assert docker(testenv, "ps", "-aq").stdout.strip() == ""  # every container removed


def test_local_run_of_three_machines_of_three_processes(testenv, tmp_path):
    """Every process a rank of its own: rank 0 (the chief's first) checks that the eight others joined, each once."""
    proc = run_cli("run", "--config", str(REPO / "examples" / "distributed" / "buildkit.yaml"), "--workers", "2",
                   "--processes-per-node", "3", "--output", str(tmp_path / "out"), "--progress", "plain", "--json",
                   env={**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout)["exit_codes"] == {"workerpool0-0": 0, "workerpool1-0": 0, "workerpool1-1": 0}
    # ranks 0..8 add (rank + 1 + step): step 2 sums 3 + 4 + ... + 11
    for rank in range(9):
        assert f"rank {rank}/9 step 2: global sum 63" in proc.stderr
    for machine, ranks in (("workerpool0-0", "0-2"), ("workerpool1-0", "3-5"), ("workerpool1-1", "6-8")):
        assert f"[{machine}] buildkit-py launcher: started 3 processes, ranks {ranks} of 9" in proc.stderr


def test_local_run_sets_what_the_cloud_sets(testenv, image, tmp_path):
    proc = run_cli("run", image, "--output", str(tmp_path / "o"), "--json", "--", "exit",
                   env={**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rank 0 world 1" in proc.stderr  # CLUSTER_SPEC with one chief -> RANK 0, WORLD_SIZE 1


def test_a_runs_output_directory_starts_without_an_earlier_runs_metrics(tmp_path):
    """hypertune appends to its file: a run into the --output of an earlier one would report that one's metrics
    (a failed run's too)."""
    from buildkit_py.jobs.local import LocalRun, _output_dir

    old = tmp_path / "out" / "hypertune"
    old.mkdir(parents=True)
    (old / "output.metrics").write_text('{"rmse": "0.1", "global_step": "300"}\n')
    (old / "notes.txt").write_text("kept\n")
    out = _output_dir(LocalRun("unused/image", tmp_path / "out"))
    assert not (out / "hypertune" / "output.metrics").exists() and (out / "hypertune" / "notes.txt").is_file()
