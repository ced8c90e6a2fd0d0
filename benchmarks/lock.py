"""buildkit.lock, measured: time to lock the example trainers (uv's cache cold, then warm) and a TensorFlow CPU
trainer, and the quickstart built locked against unlocked (every layer rebuilt, medians). Docker Hub is not
reachable in the test environment, so each config's base is the stand-in pushed to the loopback registry.

    eval "$(scripts/testenv.sh up)" && python3 benchmarks/lock.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
CA = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"


def cli(*args: str, env: dict | None = None) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "buildkit_py", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    if proc.returncode != 0:
        raise SystemExit(f"buildkit-py {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def trainer(work: Path, example: str, base: str, **keys) -> Path:
    root = work / f"{example}-{len(list(work.iterdir()))}"
    shutil.copytree(REPO / "examples" / example, root, ignore=shutil.ignore_patterns("__pycache__"))
    config = yaml.safe_load((root / "buildkit.yaml").read_text())
    (root / "buildkit.yaml").write_text(yaml.safe_dump({**config, "base_image": base, "image": f"lock-bench/{root.name}",
                                                        **keys}))
    return root / "buildkit.yaml"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    rounds = parser.parse_args().rounds
    docker = os.environ["BUILDKIT_DOCKER"]
    base = f"{os.environ['BUILDKIT_TEST_REGISTRY']}/lock-bench/base:{uuid.uuid4().hex[:8]}"
    subprocess.run([docker, "tag", "buildkit-py/standin:bookworm", base], check=True)
    subprocess.run([docker, "push", base], check=True, capture_output=True)
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="lock-bench-") as tmp:
        work = Path(tmp)
        cases = [(name, trainer(work, name, base)) for name in ("quickstart", "distributed", "make-trainer")]
        cases.append(("tensorflow-2.17.1-cpu", trainer(work, "quickstart", base, framework="tensorflow==2.17.1",
                                                       gpu=False)))
        for name, config in cases:
            uv_cache = {"UV_CACHE_DIR": str(work / f"uv-cache-{name}")}
            results[f"lock {name}, uv cache cold (s)"] = cli("lock", "--config", str(config), "--ca-cert", CA, "--upgrade",
                                                              env=uv_cache)
            results[f"lock {name}, uv cache warm (s)"] = cli("lock", "--config", str(config), "--ca-cert", CA, "--upgrade",
                                                              env=uv_cache)
            packages = yaml.safe_load((config.parent / "buildkit.lock").read_text())["images"]["_base"]["packages"]
            results[f"lock {name}: packages"] = len(packages)
        config = cases[0][1]
        build = ["build", "--config", str(config), "--network", "host", "--ca-cert", CA, "--no-cache", "--progress", "plain"]
        env = {"BUILDKIT_PY_DOCKER": docker}
        locked = [cli(*build, "--locked", env=env) for _ in range(rounds)]
        (config.parent / "buildkit.lock").unlink()
        unlocked = [cli(*build, env=env) for _ in range(rounds)]
        results["quickstart build --no-cache, locked, median (s)"] = statistics.median(locked)
        results["quickstart build --no-cache, unlocked, median (s)"] = statistics.median(unlocked)
    print(json.dumps({k: round(v, 2) for k, v in results.items()}, indent=2))


if __name__ == "__main__":
    main()
