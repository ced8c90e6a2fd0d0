"""The build's import check: every third-party module the trainer's entry point reaches is imported in the image's
own Python, after its packages are installed and before its code is copied, so an image that cannot import what
the trainer imports is never pushed. Nothing of the trainer runs: its code is not in the image yet.

    python -B -m buildkit_launcher.imports /tmp/buildkit-py/imports.json

The file is a JSON list of [MODULE, [NAME, ...]]: `import MODULE`, or `from MODULE import NAME, ...` (a NAME that is
no attribute is imported as the submodule MODULE.NAME, as the import statement does). Each failure prints one line
(IMPORT_FAILED_MARKER, the module, the error's type and last line) and the step exits 1. Imports may write caches
(matplotlib's font list, a framework's config): HOME and the XDG directories point at a temp dir removed at the end,
so the step leaves nothing in the layer. Standard library only; Python 3.7+.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import tempfile
import time

from .constants import IMPORT_CHECKING_MARKER, IMPORT_FAILED_MARKER

_CACHE_VARIABLES = ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "MPLCONFIGDIR")


def _last_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{type(exc).__name__}: {text[:300]}"


def check(module: str, names: list) -> str | None:
    """None when `import module` (or `from module import names`) works here; else the error's last line."""
    try:
        found = importlib.import_module(module)
        for name in names:
            if not hasattr(found, name):
                importlib.import_module(f"{module}.{name}")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a SystemExit raised by a module's import is its failure too
        return _last_line(exc)
    return None


def main(argv: list) -> int:
    if len(argv) != 1:
        print("usage: python -m buildkit_launcher.imports FILE", file=sys.stderr)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as f:
            wanted = json.load(f)
        if not isinstance(wanted, list) or not all(
                isinstance(w, list) and len(w) == 2 and isinstance(w[0], str) and isinstance(w[1], list) for w in wanted):
            raise ValueError("not a list of [module, [names]]")
    except (OSError, ValueError) as exc:
        print(f"buildkit_launcher.imports: cannot read {argv[0]}: {exc}", file=sys.stderr)
        return 2
    # The working directory is no trainer's: nothing importable from it may shadow an installed module.
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    scratch = tempfile.mkdtemp(prefix="buildkit-py-import-check-")
    for name in _CACHE_VARIABLES:
        os.environ[name] = scratch
    started = time.monotonic()
    failed = 0
    try:
        for module, names in wanted:
            print(f"{IMPORT_CHECKING_MARKER} {module}", flush=True)  # the last one named, if an import crashes the process
            error = check(module, names)
            if error is not None:
                failed += 1
                print(f"{IMPORT_FAILED_MARKER} {module}: {error}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    took = time.monotonic() - started
    if failed:
        print(f"buildkit-py import check: {failed} of {len(wanted)} module(s) cannot be imported ({took:.1f} s)", flush=True)
        return 1
    print(f"buildkit-py import check: {len(wanted)} module(s) import ({took:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
