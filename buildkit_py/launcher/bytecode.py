"""Byte-compiles what an install step left uncompiled, at build time in the image's own Python, as pip compiles
what it installs (the image runs with PYTHONDONTWRITEBYTECODE: without .pyc every container start compiles its
imports again):

    python /tmp/buildkit-py/bytecode.py /opt/venv/lib

What `python -m compileall -q -j 0 -x '/tests?/' DIR` does, the packages' own test suites (tests/, test/) left out,
but the files that earlier layers compiled are checked here, in this process, and only the others are sent to the
worker processes: compileall -j sends every file to its workers, which took 0.85 s to find nothing to do in
scikit-learn + pandas (0.1 s here), most of a requirements edit's compile. A file that does not compile is left to
fail at import, as pip leaves it, and the step goes on (exit 0). The build mounts this file for the step alone: no
install layer holds it, and only its own bytes are in the step's cache key (it ships later with the launcher package,
as imports.py does). Standard library only; Python 3.7+; runs as a script (no package around it).
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import struct
import sys
from concurrent.futures import ProcessPoolExecutor
from functools import partial

TEST_SUITES = ("tests", "test", "__pycache__")
PARALLEL_FROM = 64  # fewer stale files than this compile here: starting workers would cost more


def sources(root: str) -> list:
    """Every .py file under root outside the test suites, as compileall walks (symlinked folders not followed)."""
    found = []
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if f not in TEST_SUITES)
        found.extend(os.path.join(folder, name) for name in sorted(files) if name.endswith(".py"))
    return found


def compiled(path: str) -> bool:
    """True where the .pyc names this source's mtime: compileall's own test (magic number, flags 0, mtime)."""
    try:
        expect = struct.pack("<4sLL", importlib.util.MAGIC_NUMBER, 0, int(os.stat(path).st_mtime) & 0xFFFFFFFF)
        with open(importlib.util.cache_from_source(path), "rb") as handle:
            return handle.read(12) == expect
    except OSError:
        return False


def _workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def compile_all(paths: list) -> None:
    compile_one = partial(compileall.compile_file, force=True, quiet=1)
    workers = min(_workers(), 32)
    if workers > 1 and len(paths) >= PARALLEL_FROM:
        try:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                list(pool.map(compile_one, paths, chunksize=max(1, len(paths) // (workers * 4))))
            return
        except (OSError, RuntimeError, ImportError):  # no process pool here (no /dev/shm, no semaphores): one by one
            pass
    for path in paths:
        compile_one(path)


def main(argv: list) -> int:
    for root in argv:
        compile_all([path for path in sources(root) if not compiled(path)])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
