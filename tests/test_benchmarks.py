"""Smoke test of the side-by-side benchmark: one small round of every way on the real engine and
registries; it checks that each way built, pushed and was measured, never how fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO


def test_one_small_round_measures_every_way(testenv, tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "compare.py"), "--small", "--rounds", "1",
                           "--out", str(tmp_path)], capture_output=True, text=True, env={**os.environ, **testenv},
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    result = json.loads((tmp_path / "results.json").read_text())
    medians = result["medians"]
    assert len(medians) == 5
    for way, figures in medians.items():
        for step in ("cold", "edit", "requirements"):
            assert figures[f"{step}_s"] > 0, (way, step)
            # Every push stored something (at least a manifest) at that way's own registry.
            assert figures[f"{step}_bytes"] > 0, (way, step)
        # The cold push stored the image's layers, base included, compressed: tens of MB here.
        assert figures["cold_bytes"] > 10_000_000, way
        assert figures["layers"] >= 3, way
        assert 0 < figures["cold_push_s"] < figures["cold_s"], way  # the push's share of the cold build, timed
    assert medians["buildkit-py"]["dockerfile_s"] > 0 and medians["buildkit-py"]["package_s"] > 0
    # The fast path: the one-line edit stored only its code layer, config and manifest, with or without an engine;
    # the same edit through BuildKit and the engine was measured beside it.
    ours = medians["buildkit-py"]
    assert ours["edit_bytes"] < 200_000 and ours["edit_no_engine_bytes"] < 200_000 and ours["edit_engine_bytes"] > 0
    assert all(ours[f"fast_{stage}_s"] > 0 for stage in ("scan", "base", "tar", "upload", "manifest"))
    assert ours["startup_s"] > 0
    assert ours["edit_warm_s"] > 0  # the same edit through the warm process, as a terminal has it
    assert "| buildkit-py |" in (tmp_path / "results.md").read_text()
    assert "Where a cold build's time goes" in (tmp_path / "results.md").read_text()


def test_the_start_up_benchmark_times_each_command():
    """benchmarks/startup.py runs each command as the console script and prints its medians; no target is asserted
    here (timings on a shared machine are the benchmark's to report, not a test's)."""
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "startup.py"), "--runs", "1"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == ["python3 -c pass", "buildkit-py --version",
                                                   "buildkit-py print image-uri", "buildkit-py dockerfile"]
    assert all(" ms |" in row for row in rows)
