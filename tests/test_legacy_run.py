"""run --legacy: what AI Platform Training set (TF_CONFIG with master/worker/ps, --job-dir), on the real engine."""

from __future__ import annotations

import json
import time

from conftest import run_cli

TASK = '''import json, os, sys, time
spec = json.loads(os.environ.get("TF_CONFIG") or os.environ["CLUSTER_SPEC"])
name = f"{spec['task']['type']}-{spec['task']['index']}"
with open(os.path.join(os.environ["AIP_MODEL_DIR"], name + ".json"), "w") as f:
    json.dump({"argv": sys.argv[1:], "tf_config": os.environ.get("TF_CONFIG"),
               "cluster_spec": os.environ.get("CLUSTER_SPEC")}, f)
names = [f"{kind}-{i}" for kind, hosts in spec["cluster"].items() for i in range(len(hosts))]
deadline = time.monotonic() + 30
while spec["task"]["type"] == "master" and time.monotonic() < deadline and not all(
        os.path.exists(os.path.join(os.environ["AIP_MODEL_DIR"], n + ".json")) for n in names):
    time.sleep(0.05)  # the master ends the job: it waits until every task has written what it saw
if spec["task"]["type"] == "ps" and "--ps-serves" in sys.argv:
    time.sleep(300)  # a parameter server serves until the job ends
'''


def test_legacy_run_sets_tf_config_roles_and_job_dir(testenv, project, tmp_path):
    root = project({"buildkit.yaml": "framework: none\npython: '3.11'\ntrainer:\n  module: trainer.task\n"
                                     "  args: ['--epochs', '3']\n",
                    "trainer/__init__.py": "", "trainer/task.py": TASK})
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"]}
    out = tmp_path / "out"
    proc = run_cli("run", "--dir", str(root), "--image", "legacy-run/trainer", "--legacy", "--workers", "1", "--ps", "1",
                   "--output", str(out), "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(json.loads(proc.stdout)["exit_codes"]) == {"master-0", "worker-0", "ps-0"}
    seen = {p.stem: json.loads(p.read_text()) for p in (out / "model").glob("*.json")}
    assert set(seen) == {"master-0", "worker-0", "ps-0"}
    for name, found in seen.items():
        assert found["cluster_spec"] is None  # the legacy form only
        assert found["argv"] == ["--epochs", "3", "--job-dir=/buildkit-output/"]  # the image's args, then --job-dir
        spec = json.loads(found["tf_config"])
        assert set(spec["cluster"]) == {"master", "worker", "ps"} and spec["environment"] == "cloud"
        assert f"{spec['task']['type']}-{spec['task']['index']}" == name
    # A parameter server that serves forever is stopped once the master and workers are done.
    start = time.monotonic()
    proc = run_cli("run", "--dir", str(root), "--image", "legacy-run/trainer", "--legacy", "--ps", "1", "--output",
                   str(tmp_path / "serves"), "--json", "--", "--ps-serves", env=env)
    assert proc.returncode == 0 and json.loads(proc.stdout)["exit_codes"] == {"master-0": 0, "ps-0": 0}, proc.stderr
    assert time.monotonic() - start < 60 and "stopped ps-0" in proc.stderr
    # Without --legacy the Vertex form stays: CLUSTER_SPEC, no TF_CONFIG, no --job-dir.
    vertex = tmp_path / "vertex"
    proc = run_cli("run", "--dir", str(root), "--image", "legacy-run/trainer", "--output", str(vertex), "--", "--x", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads((vertex / "model" / "workerpool0-0.json").read_text())
    assert found["tf_config"] is None and found["argv"] == ["--x"]


def test_parameter_servers_need_legacy():
    proc = run_cli("run", "some/image:tag", "--ps", "1")
    assert proc.returncode == 2 and "--legacy" in proc.stderr and "Traceback" not in proc.stderr
