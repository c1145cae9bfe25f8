"""Export speed and memory: plan workbook, 100,000-row sweep workbook, 10-million-row Parquet.

Each case runs in its own child process (so peak memory is that case's alone) with Arrow and
BLAS limited to one thread, and prints the seconds spent writing and the child's peak RSS
(``resource.getrusage``), next to its RSS just before writing (the data it was given).

Targets: (b) 100,000-row sweep workbook under 15 s; (c) 10 million rows to Parquet under 10 s.

Usage: python benchmarks/bench_exports.py [--quick] [--case NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

GPUS = ["h100-sxm", "h200", "a100-80gb-sxm", "l40s", "b200", "mi300x", "l4", "gh200"]
MODELS = ["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen2.5-72b", "qwen3-30b-a3b"]
TARGETS = {"sweep-xlsx": 15.0, "sweep-parquet": 10.0}
def _rss_mb() -> float:
    """Resident memory now [MB] (Linux /proc)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _single_thread() -> None:
    import pyarrow as pa

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


def _example_plan():
    """The plan of the built-in example scenario (what `fleetplan plan` writes)."""
    from fleetplan.optimizer.example import example_scenario
    from fleetplan.optimizer.scenario_planning import plan_scenario

    return plan_scenario(example_scenario())


def _sweep_frame(rows: int):
    from fleetplan.sweeps import sweep

    batches = list(range(1, rows // 160 + 2))
    return sweep(GPUS, MODELS, ["bf16", "fp8"], tps=[1, 8], contexts=[2048, 8192],
                 batches=batches).head(rows)


def _sweep_chunks(rows: int):
    from fleetplan.sweeps.sweep_grid import iter_sweep, make_grid

    contexts = max(1, -(-rows // (160 * 1024)))
    grid = make_grid(GPUS, MODELS, ["bf16", "fp8"], tps=[1, 8],
                     contexts=list(range(256, 256 * (contexts + 1), 256)),
                     batches=list(range(1, 1025)))
    return _take(iter_sweep(None, None, None, grid=grid, chunk_rows=1_000_000), rows)


def _take(chunks, rows: int):
    """The first ``rows`` rows of a chunk stream."""
    for chunk in chunks:
        if rows <= 0:
            return
        yield chunk.iloc[:rows] if len(chunk) > rows else chunk
        rows -= len(chunk)


def child(case: str, rows: int, folder: Path) -> dict:
    """Run one case; returns its measurements."""
    _single_thread()
    from fleetplan.exports import write_plan, write_sweep

    if case == "plan":
        try:
            data = _example_plan()
        except ImportError as missing:
            return {"case": case, "skipped": f"optimizer not available: {missing}"}
        target, rows = folder / "plan.xlsx", len(data.fleet)
    elif case == "sweep-xlsx":
        data, target = _sweep_frame(rows), folder / "sweep.xlsx"
    elif case == "sweep-parquet":
        data, target = list(_sweep_chunks(rows)), folder / "sweep.parquet"
        rows = sum(len(chunk) for chunk in data)
    else:  # sweep-parquet-stream: the engine produces chunks while the writer consumes them
        data, target = _sweep_chunks(rows), folder / "sweep-stream.parquet"
    before = _rss_mb()
    start = time.perf_counter()
    if case == "plan":
        write_plan(data, target)
    else:
        write_sweep(data, target, metadata={"benchmark": case})
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"case": case, "rows": rows, "seconds": seconds, "rss_before_mb": before,
            "peak_rss_mb": peak, "file_mb": target.stat().st_size / 1e6}


def run(case: str, rows: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run([sys.executable, __file__, "--child", case, "--rows", str(rows),
                               "--folder", folder], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"case": case, "skipped": f"failed: {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(result: dict) -> str:
    if "skipped" in result:
        return f"{result['case']:<22} skipped: {result['skipped']}"
    target = TARGETS.get(result["case"])
    verdict = "" if target is None else (
        f"  target < {target:g} s: {'met' if result['seconds'] < target else 'MISSED'}")
    rows = f"{result['rows']:,}" if result["case"] != "plan" else f"{result['rows']} fleet rows"
    return (f"{result['case']:<22} {rows:>18}  {result['seconds']:7.2f} s  peak RSS "
            f"{result['peak_rss_mb']:7.0f} MB (data before writing {result['rss_before_mb']:.0f}"
            f" MB)  file {result['file_mb']:.1f} MB{verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x smaller sweeps")
    parser.add_argument("--case", choices=["plan", "sweep-xlsx", "sweep-parquet",
                                           "sweep-parquet-stream"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.rows, Path(args.folder))))
        return
    scale = 10 if args.quick else 1
    cases = [("plan", 0), ("sweep-xlsx", 100_000 // scale), ("sweep-parquet", 10_000_000 // scale),
             ("sweep-parquet-stream", 10_000_000 // scale)]
    for case, rows in cases:
        if args.case in (None, case):
            print(report(run(case, rows)), flush=True)


if __name__ == "__main__":
    main()
