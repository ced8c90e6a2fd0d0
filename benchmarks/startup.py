"""Start-up of the commands Make and the edit loop run most (issue 20): `--version`, `print image-uri` and
`dockerfile` on examples/quickstart, each run as the console command users type (`buildkit-py`, installed for
this interpreter) with this checkout's code, byte-compiled first as pip compiles an installed package. Runs
each command --runs times, after one warm-up run, and prints a table of medians against the targets. No
Docker engine or network is needed.

    python3 benchmarks/startup.py [--runs 21]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONSOLE = Path(sysconfig.get_path("scripts")) / "buildkit-py"
QUICKSTART = REPO / "examples" / "quickstart"
# name, arguments, target in seconds (issue 20)
COMMANDS = (
    ("buildkit-py --version", ["--version"], 0.060),
    ("buildkit-py print image-uri", ["print", "image-uri", "--config", str(QUICKSTART / "buildkit.yaml"),
                                     "--image", "127.0.0.1:5000/quickstart"], 0.150),
    ("buildkit-py dockerfile", ["dockerfile", "--config", str(QUICKSTART / "buildkit.yaml")], 0.200),
)


def median_seconds(command: list[str], runs: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # the console script then runs this checkout's code
    subprocess.run(command, env=env, check=True, capture_output=True)  # warm-up: the page cache, not measured
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def bare_python(runs: int) -> float:
    """The interpreter alone, with the same site-packages: the floor no change of ours can go below."""
    return median_seconds([sys.executable, "-c", "pass"], runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    if not CONSOLE.is_file():
        raise SystemExit(f"{CONSOLE} is missing: install buildkit-py for {sys.executable} (pip install -e {REPO})")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "buildkit_py")], check=True)
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"{args.runs} runs each, medians\n")
    print("| command | median | target | met |\n|---|---|---|---|")
    print(f"| `python3 -c pass` (the floor) | {bare_python(args.runs) * 1000:.0f} ms | | |")
    for name, arguments, target in COMMANDS:
        seconds = median_seconds([str(CONSOLE), *arguments], args.runs)
        print(f"| `{name}` | {seconds * 1000:.0f} ms | < {target * 1000:.0f} ms | {'yes' if seconds < target else 'no'} |")


if __name__ == "__main__":
    main()
