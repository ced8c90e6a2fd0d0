#!/usr/bin/env python3
"""Run `autopackage DIR --dry-run --target local --json` on every trainer directory under a folder
(trainers written by others: a public sample collection) and tabulate how each ends, judged against
what the code imports, found here independently of autopackage (a line scan, no AST, so Python 2
code counts too):

    match        the image's framework is one the code imports or its requirements declare (or none is
                 imported and none is chosen) and its release satisfies every range declared for it
    missing      the code imports a framework, the image has none
    other        the image has a framework, but not one the code imports
    outside      the framework matches, its release violates a declared range
    refused      exit 2 (the first line of the message is shown)
    internal     any other exit code, or a traceback

A directory holding a legacy config.yaml (trainingInput) is run a second time with --from-aiplatform.

    python3 scripts/realworld_report.py TRAINERS_DIR [--json OUT.json] [--verbose]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
# Import name -> the framework it trains with (transformers: its Trainer runs on torch); the order is autopackage's
# FRAMEWORK_ORDER.
FRAMEWORKS = {"torch": "torch", "tensorflow": "tensorflow", "tensorflow_transform": "tensorflow",
              "tensorflow_hub": "tensorflow", "keras": "tensorflow", "jax": "jax", "flax": "jax",
              "xgboost": "xgboost", "sklearn": "scikit-learn", "transformers": "torch"}
ORDER = ("torch", "tensorflow", "jax", "xgboost", "scikit-learn")
DISTRIBUTIONS = {"torch": "torch", "tensorflow": "tensorflow", "tensorflow-gpu": "tensorflow", "tensorflow-cpu": "tensorflow",
                 "jax": "jax", "xgboost": "xgboost", "scikit-learn": "scikit-learn", "sklearn": "scikit-learn"}
_IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)
_DECLARED = re.compile(r"""(?:^|['"\s])(tensorflow-gpu|tensorflow-cpu|tensorflow|torch|jax|xgboost|scikit-learn|sklearn)"""
                       r"""\s*((?:[<>=!~]=?\s*[0-9][0-9A-Za-z.*]*\s*,?\s*)+)""", re.MULTILINE)
_TEST = re.compile(r"(?:^|/)(?:tests?/|conftest\.py$|test_[^/]*\.py$|[^/]*_test\.py$)")


def imported(directory: Path) -> set[str]:
    found = set()
    for path in directory.rglob("*.py"):
        if _TEST.search(path.relative_to(directory).as_posix()):
            continue
        for name in _IMPORT.findall(path.read_text(errors="replace")):
            if name in FRAMEWORKS:
                found.add(FRAMEWORKS[name])
    return found


def declared(directory: Path) -> dict[str, list[str]]:
    ranges = collections.defaultdict(list)
    for name in ("requirements.txt", "setup.py", "setup.cfg", "pyproject.toml"):
        path = directory / name
        if path.is_file():
            for dist, spec in _DECLARED.findall(path.read_text(errors="replace")):
                ranges[DISTRIBUTIONS[dist]].append(spec.strip().rstrip(","))
    return ranges


def legacy_config(directory: Path) -> Path | None:
    for path in sorted(directory.rglob("*.yaml")):
        try:
            if re.search(r"^\s*trainingInput\s*:", path.read_text(errors="replace"), re.MULTILINE):
                return path
        except OSError:
            continue
    return None


def judge(directory: Path, extra: list[str]) -> tuple[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "buildkit_py", "autopackage", str(directory), "--dry-run", "--target", "local",
               "--json", *extra]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    except subprocess.TimeoutExpired:
        return "internal", "timed out after 120 s"
    if "Traceback (most recent call last)" in done.stderr:
        return "internal", done.stderr.strip().splitlines()[-1]
    if done.returncode == 2:
        lines = [json.loads(x).get("text", x) if x.startswith("{") else x for x in done.stderr.strip().splitlines()]
        error = next((x for x in lines if "error:" in x), lines[-1] if lines else "")
        return "refused", error[:300]
    if done.returncode != 0:
        return "internal", f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
    result = json.loads(done.stdout)
    framework = (result.get("plan") or {}).get("framework") or {}
    name, version = framework.get("name"), framework.get("version")
    wanted = imported(directory)
    primary = next((f for f in ORDER if f in wanted), None)
    if name is None:
        return ("missing", f"imports {sorted(wanted)}") if wanted else ("match", "no framework imported, none chosen")
    if name not in wanted and name not in declared(directory):
        return "other", f"chose {name}=={version}, imports {sorted(wanted)}"
    for spec in declared(directory).get(name, []):
        try:
            if Version(version) not in SpecifierSet(spec.replace(" ", "")):
                return "outside", f"{name}=={version} outside declared {spec}"
        except InvalidSpecifier:
            continue
    detail = f"{name}=={version}" + ("" if name == primary else f" (imports also {primary})")
    return "match", detail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trainers", type=Path)
    parser.add_argument("--json", type=Path, help="write every row here")
    parser.add_argument("--verbose", action="store_true", help="one line per run")
    args = parser.parse_args()
    rows = []
    for directory in sorted(p for p in args.trainers.iterdir() if p.is_dir()):
        runs = [("", [])]
        config = legacy_config(directory)
        if config:
            runs.append(("--from-aiplatform", ["--from-aiplatform", str(config)]))
        for label, extra in runs:
            outcome, detail = judge(directory, extra)
            rows.append({"trainer": directory.name, "run": label or "plain", "outcome": outcome, "detail": detail})
            if args.verbose:
                print(f"{outcome:9} {directory.name} {label} :: {detail}")
    for label in ("plain", "--from-aiplatform"):
        counts = collections.Counter(r["outcome"] for r in rows if r["run"] == label)
        total = sum(counts.values())
        print(f"\n{label} ({total} runs)\n| outcome | runs |\n|---|---|")
        for outcome in ("match", "missing", "other", "outside", "refused", "internal"):
            print(f"| {outcome} | {counts.get(outcome, 0)} |")
    refusals = collections.Counter(re.sub(r"'[^']*'|\"[^\"]*\"|\d+(\.\d+)*", "…", r["detail"])[:120]
                                   for r in rows if r["outcome"] == "refused")
    if refusals:
        print("\nrefusals, by message:")
        for text, count in refusals.most_common():
            print(f"  {count:3} {text}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
