"""Launcher overhead: container start to the trainer's first line, through the launcher (the
image's ENTRYPOINT) vs. the trainer run directly, alternated in one run; also as plain processes
on this machine. The trainer is the same `python -m trainer.task` everywhere. Needs the test
environment:

    eval "$(scripts/testenv.sh up)" && python3 benchmarks/launcher.py [--rounds 15] [--baseline REV]

--baseline REV adds the launcher of git revision REV (e.g. HEAD before a change), in the same
image and as a process, to the same alternation: a before/after comparison on one noisy machine.
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
LAUNCHER = "buildkit_py/launcher"


def first_line_seconds(args: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=cwd, env=env)
    proc.stdout.readline()
    elapsed = time.perf_counter() - start
    proc.wait()
    return elapsed


def write_trainer(root: Path) -> None:
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text("print('first line', flush=True)\n")


def build_image(tmp: Path) -> str:
    write_trainer(tmp)
    (tmp / "buildkit.yaml").write_text("framework: none\npython: '3.11'\ngpu: false\nhypertune: false\n"
                                       "trainer: {module: trainer.task}\n")
    proc = subprocess.run([sys.executable, "-m", "buildkit_py", "build", "--config", str(tmp / "buildkit.yaml"),
                           "--network", "host", "--progress", "plain", "--json"],
                          capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    return json.loads(proc.stdout)["tags"][0]


def launcher_at(rev: str | None, target: Path) -> Path:
    """The launcher package as images have it (buildkit_launcher), from the work tree or git revision rev."""
    package = target / "buildkit_launcher"
    package.mkdir(parents=True)
    if rev is None:
        names = [p.name for p in (REPO / LAUNCHER).glob("*.py")]
    else:
        listing = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", f"{rev}:{LAUNCHER}"],
                                 capture_output=True, text=True, check=True).stdout.split()
        names = [n for n in listing if n.endswith(".py")]
    for name in names:
        source = ((REPO / LAUNCHER / name).read_bytes() if rev is None else
                  subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{LAUNCHER}/{name}"],
                                 capture_output=True, check=True).stdout)
        (package / name).write_bytes(source)
    return package


def image_with_launcher(image: str, package: Path, tag: str) -> str:
    """image with its buildkit_launcher replaced by package (same place, so nothing else differs)."""
    where = subprocess.run([DOCKER, "run", "--rm", "--network", "none", "--entrypoint", "python", image, "-c",
                            "import buildkit_launcher, os; print(os.path.dirname(buildkit_launcher.__file__))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    context = package.parent
    (context / "Dockerfile").write_text(f"FROM {image}\nRUN rm -rf {where}\nCOPY buildkit_launcher {where}\n")
    subprocess.run([DOCKER, "build", "-q", "--network", "host", "-t", tag, str(context)], check=True,
                   capture_output=True, env={**os.environ, "DOCKER_BUILDKIT": "1"})
    return tag


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--baseline", metavar="REV", help="also time the launcher of this git revision")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        image = build_image(tmp_path / "image")
        write_trainer(tmp_path / "process")
        launchers = {"launcher": launcher_at(None, tmp_path / "current")}
        run = [DOCKER, "run", "--rm", "--network", "none"]
        cases = {"container, launcher": (run + [image], None)}
        if args.baseline:
            launchers[f"launcher@{args.baseline}"] = launcher_at(args.baseline, tmp_path / "baseline")
            baseline = image_with_launcher(image, launchers[f"launcher@{args.baseline}"],
                                           f"{image.rsplit(':', 1)[0]}:launcher-baseline")
            cases[f"container, launcher@{args.baseline}"] = (run + [baseline], None)
        cases["container, direct"] = (run + ["--entrypoint", "python", image, "-m", "trainer.task"], None)
        trainer = [sys.executable, "-m", "trainer.task"]
        for name, package in launchers.items():
            cases[f"process, {name}"] = ([sys.executable, "-m", "buildkit_launcher", "--", *trainer],
                                         {**os.environ, "PYTHONPATH": str(package.parent)})
        cases["process, direct"] = (trainer, None)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):  # alternate, so drift on a noisy machine hits every case alike
            for name, (command, env) in cases.items():
                times[name].append(first_line_seconds(command, cwd=tmp_path / "process", env=env))
    print(f"{'start to first line':<32} {'median ms':>10} {'min ms':>8}")
    for name, values in times.items():
        print(f"{name:<32} {statistics.median(values) * 1000:>10.1f} {min(values) * 1000:>8.1f}")
    for kind in ("container", "process"):
        for name in launchers:
            extra = statistics.median(times[f"{kind}, {name}"]) - statistics.median(times[f"{kind}, direct"])
            print(f"{name} overhead ({kind}): {extra * 1000:.1f} ms")


if __name__ == "__main__":
    main()
