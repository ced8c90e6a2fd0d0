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


def medians(command: list[str], runs: int, code: Path = REPO) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system, of the command's process) in seconds. On a shared
    machine the wall time carries the others' load; the CPU time far less so."""
    env = {**os.environ, "PYTHONPATH": str(code)}  # the console script then runs that checkout's code
    subprocess.run(command, env=env, check=True, capture_output=True)  # warm-up: the page cache, not measured
    wall, cpu = [], []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall.append(time.perf_counter() - start)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed ({proc.returncode})")
        cpu.append(usage.ru_utime + usage.ru_stime)
    return statistics.median(wall), statistics.median(cpu)


def code_arguments(doc: str, runs: int) -> argparse.Namespace:
    """--runs and --code, which the benchmarks that time this checkout against another share."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout whose buildkit_py runs (default: this "
                        "one), e.g. an exported older commit to compare with")
    return parser.parse_args()


def main() -> None:
    args = code_arguments(__doc__, 21)
    if not CONSOLE.is_file():
        raise SystemExit(f"{CONSOLE} is missing: install buildkit-py for {sys.executable} (pip install -e {REPO})")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.code / "buildkit_py")], check=True)
    load = os.getloadavg()[0]
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, load average {load:.1f} "
          f"at the start; {args.runs} runs each, medians; code: {args.code}\n")
    print("| command | wall | CPU | target (wall) | met |\n|---|---|---|---|---|")
    # The interpreter alone, with the same site-packages: the floor no change of ours can go below.
    wall, cpu = medians([sys.executable, "-c", "pass"], args.runs)
    print(f"| `python3 -c pass` (the floor) | {wall * 1000:.0f} ms | {cpu * 1000:.0f} ms | | |")
    for name, arguments, target in COMMANDS:
        wall, cpu = medians([str(CONSOLE), *arguments], args.runs, args.code)
        print(f"| `{name}` | {wall * 1000:.0f} ms | {cpu * 1000:.0f} ms | < {target * 1000:.0f} ms | "
              f"{'yes' if wall < target else 'no'} |")

if __name__ == "__main__":
    main()
