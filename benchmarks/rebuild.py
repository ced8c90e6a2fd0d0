"""Rebuild speed, measured side by side in one run: cold build, unchanged rebuild, one-line code
edit, and a dependency edit, on the quickstart trainer. Needs the test environment:

    eval "$(scripts/testenv.sh up)" && python3 benchmarks/rebuild.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def build(root: Path, *extra: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "buildkit_py", "build", "--config", str(root / "buildkit.yaml"), "--network", "host",
         "--progress", "plain", "--json", *extra],
        check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return time.perf_counter() - start


def one_round(workdir: Path) -> dict[str, float]:
    root = workdir / f"quickstart-{uuid.uuid4().hex[:8]}"
    shutil.copytree(REPO / "examples" / "quickstart", root, ignore=shutil.ignore_patterns("__pycache__"))
    task = root / "trainer" / "task.py"
    config = root / "buildkit.yaml"
    times = {"cold (no cache)": build(root, "--no-cache"), "unchanged": build(root)}
    task.write_text(task.read_text() + f"\n# edit {uuid.uuid4().hex}\n")
    times["code edit"] = build(root)
    config.write_text(config.read_text() + 'pip: ["six==1.16.0"]\n')
    times["new pip package"] = build(root)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rounds = [one_round(Path(tmp)) for _ in range(args.rounds)]
    cold = statistics.median(r["cold (no cache)"] for r in rounds)
    print(f"{'quickstart build':<18} {'median s':>9} {'min s':>7} {'vs cold':>8}")
    for name in rounds[0]:
        values = [r[name] for r in rounds]
        median = statistics.median(values)
        print(f"{name:<18} {median:>9.2f} {min(values):>7.2f} {median / cold:>7.0%}")


if __name__ == "__main__":
    main()
