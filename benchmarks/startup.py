"""Start-up of the commands Make and the edit loop run most (issue 20): `--version`, `print image-uri` and
`dockerfile` on examples/quickstart, each run as the console command users type (`buildkit-py`, installed for
this interpreter) with this checkout's code, byte-compiled first as pip compiles an installed package. Runs
each command --runs times, after one warm-up run, and prints a table of medians against the targets. No
Docker engine or network is needed.

    python3 benchmarks/startup.py [--runs 21] [--code CHECKOUT] [--against OTHER_CHECKOUT]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
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


def _timed(command: list[str], code: Path) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(code)}  # the console script then runs that checkout's code
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed ({os.waitstatus_to_exitcode(status)}) with the code of {code}")
    return wall, usage.ru_utime + usage.ru_stime


def interleaved(command: list[str], runs: int, codes: list[Path]) -> list[tuple[float, float]]:
    """Median wall time and median CPU time (user + system, of the command's process) in seconds, for each checkout
    in CODES: each run times every checkout once, in a new random order (the one timed first pays what the machine
    does between runs). On a shared machine the wall time carries the others' load; the CPU time far less so."""
    for code in codes:
        _timed(command, code)  # warm-up: the page cache, not measured
    times: dict[Path, list[tuple[float, float]]] = {code: [] for code in codes}
    for _ in range(runs):
        for code in random.sample(codes, len(codes)):
            times[code].append(_timed(command, code))
    return [(statistics.median(w for w, _ in times[c]), statistics.median(u for _, u in times[c])) for c in codes]


def medians(command: list[str], runs: int, code: Path = REPO) -> tuple[float, float]:
    """interleaved() of one checkout."""
    return interleaved(command, runs, [code])[0]


def code_arguments(doc: str, runs: int) -> argparse.Namespace:
    """--runs and --code, which the benchmarks that time this checkout against another share."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout whose buildkit_py runs (default: this "
                        "one), e.g. an exported older commit to compare with")
    parser.add_argument("--against", type=Path, help="another checkout (e.g. `git worktree add ../before REV`), timed "
                        "in the same runs, in random order: a before/after table")
    return parser.parse_args()


def main() -> None:
    args = code_arguments(__doc__, 21)
    if not CONSOLE.is_file():
        raise SystemExit(f"{CONSOLE} is missing: install buildkit-py for {sys.executable} (pip install -e {REPO})")
    codes = [args.code, *([args.against] if args.against else [])]
    for code in codes:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "buildkit_py")], check=True)
    load = os.getloadavg()[0]
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, load average {load:.1f} "
          f"at the start; {args.runs} runs each, medians; code: {', '.join(map(str, codes))}\n")
    if args.against:
        print(f"| command | {args.against} (wall / CPU) | {args.code} (wall / CPU) | CPU, {args.code.name} / "
              f"{args.against.name} |\n|---|---|---|---|")
        for name, arguments, _ in COMMANDS:
            (wall, cpu), (before_wall, before_cpu) = interleaved([str(CONSOLE), *arguments], args.runs, codes)
            print(f"| `{name}` | {before_wall * 1000:.0f} / {before_cpu * 1000:.0f} ms | {wall * 1000:.0f} / "
                  f"{cpu * 1000:.0f} ms | {cpu / before_cpu:.2f}x |")
        return
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
