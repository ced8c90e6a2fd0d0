"""Launcher overhead: container start to the trainer's first line, through the launcher (the
image's ENTRYPOINT) vs. the trainer run directly, alternated in one run. Needs the test
environment:

    eval "$(scripts/testenv.sh up)" && python3 benchmarks/launcher.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCKER = os.environ.get("BUILDKIT_DOCKER", "docker")


def first_line_seconds(args: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    proc.stdout.readline()
    elapsed = time.perf_counter() - start
    proc.wait()
    return elapsed


def build_image(tmp: Path) -> str:
    (tmp / "trainer").mkdir()
    (tmp / "trainer" / "__init__.py").write_text("")
    (tmp / "trainer" / "task.py").write_text("print('first line', flush=True)\n")
    (tmp / "buildkit.yaml").write_text("framework: none\npython: '3.11'\ngpu: false\nhypertune: false\n"
                                       "trainer: {module: trainer.task}\n")
    proc = subprocess.run([sys.executable, "-m", "buildkit_py", "build", "--config", str(tmp / "buildkit.yaml"),
                           "--network", "host", "--progress", "plain", "--json"],
                          capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    return json.loads(proc.stdout)["tags"][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as tmp:
        image = build_image(Path(tmp))
    run = [DOCKER, "run", "--rm", "--network", "none"]
    cases = {
        "container, launcher": run + [image],
        "container, direct": run + ["--entrypoint", "python", image, "-m", "trainer.task"],
        "process, launcher": [sys.executable, "-m", "buildkit_py.launcher", "--", sys.executable, "-c", "print(1)"],
        "process, direct": [sys.executable, "-c", "print(1)"],
    }
    env_note = {"PYTHONPATH": str(REPO)}
    os.environ.update(env_note)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):  # alternate, so drift on a noisy machine hits every case alike
        for name, args in cases.items():
            times[name].append(first_line_seconds(args))
    print(f"{'start to first line':<22} {'median ms':>10} {'min ms':>8}")
    for name, values in times.items():
        print(f"{name:<22} {statistics.median(values) * 1000:>10.1f} {min(values) * 1000:>8.1f}")
    for kind in ("container", "process"):
        extra = statistics.median(times[f"{kind}, launcher"]) - statistics.median(times[f"{kind}, direct"])
        print(f"launcher overhead ({kind}): {extra * 1000:.1f} ms")


if __name__ == "__main__":
    main()
