"""The edit loop, side by side in one run (issue 41): a one-line code edit built and pushed to the same tag and to a
new tag (a CI's commit tag), with and without attestations, against the hand-layered BuildKit Dockerfile (the floor);
a repeated dry run (`dockerfile`; `dockerfile --resolve` once the resolution is kept) and one whose index nobody
answers; `--version` against a bare interpreter. The floor and the new-tag edits again with the registry --rtt ms
away (latency.py): a loopback registry answers in a millisecond, so there CPU time hides what round trips cost.
And the new-tag edit once more, RTT ms away behind a token service (login.py), as cloud registries are: what the
login costs an edit, in seconds, challenges met and token requests. Needs the test environment:

    eval "$(scripts/testenv.sh up)" && python3 benchmarks/edit.py [--rounds 5] [--rtt 20]

Each round edits the trainer once per way and times the command as users type it (pip's console script in a virtual
environment of its own, as compare.py's --interpreter has it); the table gives medians and each ratio against its
target; `python3 -c pass` is that environment's interpreter. The trainer is compare.py's small one (six), so a cold
build is a minute at most.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import (  # noqa: E402
    REPO,
    SMALL,
    BuildkitPy,
    HandLayered,
    byte_compile,
    edit_code,
    fresh_registry,
    installed,
    machine,
    wait_listening,
    warm_process,
    write_trainer,
)
from latency import far  # noqa: E402
from login import token_registry  # noqa: E402

# (row, target ratio, against which row): what issue 41 asks.
TARGETS = (("edit, new tag", 0.5, "floor"), ("edit, new tag, warm process", 0.5, "floor"),
           ("repeated dry run (`dockerfile`)", None, None), ("`--version`", 3.0, "`python3 -c pass`"))


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def quiet(*argv: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run([str(BuildkitPy.console), *argv], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})  # this checkout's code, as builds run
    if proc.returncode != 0:
        raise SystemExit(f"buildkit-py {' '.join(argv[:2])} failed ({proc.returncode}): {proc.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rtt", type=float, default=20.0, help="the far registry's round trip, in ms (default 20)")
    parser.add_argument("--interpreter", choices=("venv", "system"), default="venv",
                        help="venv: buildkit-py as a user's install runs it (default); system: this interpreter's own")
    arguments = parser.parse_args()
    rounds, rtt = arguments.rounds, arguments.rtt
    byte_compile()
    times: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)

    with tempfile.TemporaryDirectory(prefix="bk-edit-") as tmp_name, fresh_registry(Path(tmp_name)) as (registry, _), \
            far(registry, rtt) as distant, token_registry(registry) as tokens, far(tokens.address, rtt) as guarded, \
            warm_process(Path(tmp_name)) as warm:
        tmp = Path(tmp_name)
        install = installed(arguments.interpreter, tmp)
        BuildkitPy.console = install.console
        floor_root, ours_root = tmp / "floor" / "src", tmp / "ours" / "src"
        write_trainer(floor_root, SMALL)
        write_trainer(ours_root, SMALL)
        floor, ours = HandLayered(floor_root, registry, tmp / "floor"), BuildkitPy(ours_root, registry, tmp / "ours")
        floor.build(cold=True)
        ours.build(True, "--tag", f"{ours.image}:dev")
        # The same two ways to the same registry, RTT ms away: their first push there sends every layer once.
        floor_far = HandLayered(floor_root, distant, tmp / "floor")
        ours_far = BuildkitPy(ours_root, distant, tmp / "ours")
        floor_far.build(cold=False)
        ours_far.build(False, "--tag", f"{ours_far.image}:dev")
        # And behind a token service, as every cloud registry is: the engine's first push goes in open, each edit then
        # logs in with the credentials given (BUILDKIT_PY_REGISTRY_*) and the registry's challenge kept.
        ours_login = BuildkitPy(ours_root, guarded, tmp / "ours")
        tokens.open = True
        ours_login.build(False, "--tag", f"{ours_login.image}:dev")
        tokens.open = False
        login_env = {"BUILDKIT_PY_REGISTRY_USERNAME": "bench", "BUILDKIT_PY_REGISTRY_PASSWORD": "bench-pass"}
        counts: dict[str, list[int]] = {"challenges met per edit": [], "token requests per edit": []}
        away = f"{rtt:g} ms away"
        with socket.socket() as closed:  # a loopback port nothing listens on: the index nobody answers
            closed.bind(("127.0.0.1", 0))
            nobody = f"http://127.0.0.1:{closed.getsockname()[1]}/simple"
        unreachable = tmp / "unreachable"
        write_trainer(unreachable, SMALL)
        with (unreachable / "buildkit.yaml").open("a") as config:
            config.write(f"pip_index_url: {nobody}\n")
        config_file = str(ours_root / "buildkit.yaml")
        quiet("dockerfile", "--resolve", "--config", config_file)  # the resolution kept for the repeated dry runs
        edit_code(ours_root)  # the first command with the warm setting runs alone and starts the warm process
        ours.build(False, "--tag", f"{ours.image}:warm", env=warm)
        wait_listening(warm)
        for number in range(rounds):
            edit_code(floor_root)
            add("floor", timed(lambda: floor.build(cold=False)))
            for name, flags in (("edit, same tag", ("--tag", f"{ours.image}:dev")),
                                ("edit, new tag", ("--tag", f"{ours.image}:ci-{number}")),
                                ("edit, new tag, --no-attest", ("--tag", f"{ours.image}:na-{number}", "--no-attest"))):
                edit_code(ours_root)
                add(name, timed(lambda flags=flags: ours.build(False, *flags)))
                if not ours.last.get("fast_path"):
                    raise SystemExit(f"{name}: the edit did not take the fast path")
            edit_code(ours_root)
            add("edit, new tag, warm process", timed(lambda number=number: ours.build(
                False, "--tag", f"{ours.image}:w-{number}", env=warm)))
            if not ours.last.get("fast_path"):
                raise SystemExit("edit, new tag, warm process: the edit did not take the fast path")
            edit_code(floor_root)
            add(f"floor, {away}", timed(lambda: floor_far.build(cold=False)))
            for name, flags in ((f"edit, new tag, {away}", ("--tag", f"{ours_far.image}:ci-{number}")),
                                (f"edit, new tag, --no-attest, {away}",
                                 ("--tag", f"{ours_far.image}:na-{number}", "--no-attest"))):
                edit_code(ours_root)
                add(name, timed(lambda flags=flags: ours_far.build(False, *flags)))
                if not ours_far.last.get("fast_path"):
                    raise SystemExit(f"{name}: the edit did not take the fast path")
            edit_code(ours_root)
            add(f"edit, new tag, warm process, {away}", timed(lambda number=number: ours_far.build(
                False, "--tag", f"{ours_far.image}:w-{number}", env=warm)))
            edit_code(ours_root)
            asked, challenged = len(tokens.issued), tokens.challenged
            add(f"edit, new tag, token login, {away}", timed(lambda number=number: ours_login.build(
                False, "--tag", f"{ours_login.image}:ci-{number}", env=login_env)))
            if not ours_login.last.get("fast_path"):
                raise SystemExit("edit, new tag, token login: the edit did not take the fast path")
            counts["challenges met per edit"].append(tokens.challenged - challenged)
            counts["token requests per edit"].append(len(tokens.issued) - asked)
            add("repeated dry run (`dockerfile`)", timed(lambda: quiet("dockerfile", "--config", config_file)))
            add("repeated dry run (`dockerfile`), warm process",
                timed(lambda: quiet("dockerfile", "--config", config_file, env=warm)))
            add("repeated dry run (`dockerfile --resolve`)",
                timed(lambda: quiet("dockerfile", "--resolve", "--config", config_file)))
            add("dry run, no index answers (`dockerfile --resolve`)",
                timed(lambda: quiet("dockerfile", "--resolve", "--config", str(unreachable / "buildkit.yaml"))))
            add("`--version`", timed(lambda: quiet("--version")))
            add("`python3 -c pass`", timed(lambda: subprocess.run([str(install.python), "-c", "pass"], check=True)))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"{machine()}; {rounds} rounds, medians; buildkit-py: {install.what}\n")
    print("| step | seconds | against | ratio | target |\n|---|---|---|---|---|")
    goals = {name: (ratio, base) for name, ratio, base in TARGETS}
    for name, seconds in medians.items():
        ratio, base = goals.get(name, (None, None))
        if name.startswith("edit, new tag, token login"):
            base = f"edit, new tag, {away}"  # what the login costs, against the same edit on an open registry
        elif name.startswith("edit") and not base:
            base = f"floor, {away}" if name.endswith(away) else "floor"
        shown = f"{seconds / medians[base]:.2f}x" if base else ""
        wanted = f"<= {ratio:g}x" if ratio else ("<= 0.2 s" if name.startswith("repeated") else "")
        print(f"| {name} | {seconds:.3f} | {base or ''} | {shown} | {wanted} |")
    counted = {name: statistics.median(values) for name, values in counts.items()}
    print(f"\nWith the token login, per edit: {counted['challenges met per edit']:g} challenges (HTTP 401) met, "
          f"{counted['token requests per edit']:g} token request(s).")
    print(f"\n{json.dumps({**medians, **counted})}")


if __name__ == "__main__":
    main()
