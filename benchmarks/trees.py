"""How a walk of the trainer directory grows with the tree (issue 29): the build context's listing
(context.included_files: what `print content-digest`, `build`, `autopackage` and `package` walk) of a deep tree
(one chain of directories, a file at its end) and of a wide one (directories side by side, a file in each), at
several sizes. Linear growth: the time per directory stays flat as the size doubles. The quadratic walk it
replaced (every entry re-matched against every parent) grew with the square of the depth. Each figure is the
best of --runs walks in a fresh interpreter; no Docker engine or network is needed.

    python3 benchmarks/trees.py [--runs 3] [--code OTHER_CHECKOUT]
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from startup import code_arguments  # benchmarks/ is first on the path of a script run from there

DEEP = (32, 64, 128, 256)  # 256: the deepest tree buildkit-py walks (sources.walk.MAX_DEPTH)
WIDE = (256, 1024, 4096, 16384)
# Run in the checkout under test, so that an older one (without the limits) can be timed the same way.
WALK = """
import sys, time
from pathlib import Path
try:
    from buildkit_py.sources.walk import included_files
except ImportError:  # a checkout from before the walk moved to sources/
    from buildkit_py.pipeline.context import included_files
from buildkit_py.pipeline.render import render_project_dockerignore
root = Path(sys.argv[1])
ignore = render_project_dockerignore(root)  # the default list, as every command walks with
best = float("inf")
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    files = included_files(root, ignore)
    best = min(best, time.perf_counter() - start)
print(best, len(files))
"""


def make(root: Path, shape: str, size: int) -> None:
    if shape == "deep":
        folder = root
        for _ in range(size):  # os.makedirs recurses once per level
            folder = folder / "d"
            folder.mkdir()
        (folder / "x.py").write_text("x = 1\n")
    else:
        for i in range(size):
            (root / f"d{i}").mkdir()
            (root / f"d{i}" / "x.py").write_text("x = 1\n")


def walk_seconds(root: Path, runs: int, code: Path) -> float:
    # cwd: not a checkout, whose buildkit_py `python -c` would import before PYTHONPATH's
    proc = subprocess.run([sys.executable, "-c", WALK, str(root), str(runs)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(code)}, cwd=root, check=True)
    seconds, files = proc.stdout.split()
    if int(files) < 1:
        raise SystemExit(f"the walk of {root} found no file")
    return float(seconds)


def main() -> None:
    args = code_arguments(__doc__, 3)
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, load average "
          f"{os.getloadavg()[0]:.1f} at the start; best of {args.runs} walks; code: {args.code}\n")
    print("| tree | directories | walk | per directory | growth for 2x or 4x the size |\n|---|---|---|---|---|")
    for shape, sizes in (("deep", DEEP), ("wide", WIDE)):
        previous = None
        for size in sizes:
            with tempfile.TemporaryDirectory(prefix="bkpy-tree-") as tmp:
                make(Path(tmp), shape, size)
                seconds = walk_seconds(Path(tmp), args.runs, args.code)
            growth = f"{seconds / previous:.1f}x" if previous else ""
            print(f"| {shape} | {size} | {seconds * 1000:.1f} ms | {seconds / size * 1e6:.0f} µs | {growth} |")
            previous = seconds


if __name__ == "__main__":
    main()
