"""SIGTERM and SIGKILL at random points never leave a partial or stale output, and a resumed run
gives the same result as an uninterrupted one. Bounded in time: a few interruptions each."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.adversarial.conftest import temporaries, tiny_scenario

pytestmark = pytest.mark.slow
FLEETPLAN = [sys.executable, "-m", "fleetplan.cli"]
SWEEP = ["sweep", "--gpu", "h100-sxm,l40s", "--model", "llama-3.1-8b,llama-3.1-70b", "--quant", "bf16,fp8",
         "--tp", "1,2,4", "--context", "128-65536:512", "--batch", "1-512:4", "--chunk-rows", "200000"]
GRID_ROWS = 2 * 2 * 2 * 3 * 128 * 128  # gpus x models x quants x tps x contexts x batches


def start(args, cwd):
    return subprocess.Popen([*FLEETPLAN, *args], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def interrupt_at(process, seconds: float, how: int) -> None:
    time.sleep(seconds)
    if process.poll() is None:
        process.send_signal(how)
    process.wait(timeout=60)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_interrupted_parquet_sweeps_leave_nothing_half_written(tmp_path, how):
    rng = random.Random(7)  # fixed: the same interruption points every run
    for attempt in range(3):
        process = start([*SWEEP, "-o", "grid.parquet"], tmp_path)
        interrupt_at(process, rng.uniform(1.0, 3.0), how)
        if how == signal.SIGTERM:
            assert temporaries(tmp_path) == [], f"attempt {attempt}: temporaries left"
        assert not (tmp_path / "grid.parquet").exists() or pq.read_metadata(tmp_path / "grid.parquet").num_rows
    finished = subprocess.run([*FLEETPLAN, *SWEEP, "-o", "grid.parquet"], cwd=tmp_path, capture_output=True)
    assert finished.returncode == 0, finished.stderr
    assert temporaries(tmp_path) == []  # the next run removed what SIGKILL left
    assert pq.read_metadata(tmp_path / "grid.parquet").num_rows == GRID_ROWS


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_interrupted_whatif_grids_resume_to_the_same_result(tmp_path, how):
    import yaml

    (tmp_path / "base.yaml").write_text(yaml.safe_dump(tiny_scenario()))
    (tmp_path / "grid.yaml").write_text("base: base.yaml\naxes:\n  demand_multiplier: [0.5, 1, 2]\n"
                                        "  tpot_slo_ms: [40, 60]\n")
    args = ["whatif", "grid.yaml", "-o", "grid.csv", "--workers", "1", "--no-base-plan"]
    process = start(args, tmp_path)
    interrupt_at(process, 3.0, how)  # after start-up (about 2 s), while cases are being solved
    assert not (tmp_path / "grid.csv").exists() or os.path.getsize(tmp_path / "grid.csv") > 0
    resumed = subprocess.run([*FLEETPLAN, *args], cwd=tmp_path, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    fresh_dir = tmp_path / "fresh"
    fresh_dir.mkdir()
    for name in ("base.yaml", "grid.yaml"):
        (fresh_dir / name).write_text((tmp_path / name).read_text())
    fresh = subprocess.run([*FLEETPLAN, *args], cwd=fresh_dir, capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stderr
    resumed_table = pd.read_csv(tmp_path / "grid.csv").drop(columns=["solve_seconds"])
    fresh_table = pd.read_csv(fresh_dir / "grid.csv").drop(columns=["solve_seconds"])
    pd.testing.assert_frame_equal(resumed_table, fresh_table)
    assert temporaries(tmp_path) == []
