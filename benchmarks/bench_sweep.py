"""Sweep speed: in-memory rows/s, peak memory of a streamed 100M-row sweep, and a scalar loop.

Prints:
  1. rows/s of ``sweep`` over >= 10 million configurations in memory (one process, one core):
     the first run in a fresh process (which pays for faulting in the table's fresh pages), for
     every column and for the columns a capacity planner asks for (``PLANNER_COLUMNS``), each
     in its own child process, and the best of three runs in one process;
  2. peak RSS of a >= 100-million-row sweep streamed to Parquet chunk by chunk (child process);
  3. rows/s of a plain per-configuration Python loop over the same scalar formulas on a
     10,000-row grid, and the ratio of (1) to it.

Usage: python benchmarks/bench_sweep.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

GPUS = ["h100-sxm", "h200", "a100-80gb-sxm", "l40s", "b200", "mi300x", "l4", "gh200"]
MODELS = ["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen2.5-72b", "qwen3-30b-a3b"]
#: What a capacity planner reads off a sweep: the configuration, the point, whether it fits, its
#: latencies, throughput and cost.
PLANNER_COLUMNS = ["gpu", "model", "quant", "tp", "context_len", "batch", "fits", "tpot_ms", "ttft_ms",
                   "output_tok_s", "usd_per_m_output_tokens"]


def in_memory(n_contexts: int, repeats: int = 3, columns=None) -> tuple[int, list[float], float]:
    """Seconds of each of ``repeats`` identical sweeps (the first pays for fresh memory pages),
    and the table's size [MB]."""
    from fleetplan.sweeps import sweep

    axes = {"quants": ["bf16", "fp8"], "tps": [1, 8], "contexts": list(range(256, 256 * (n_contexts + 1), 256)),
            "batches": list(range(1, 257)), "columns": columns}
    sweep(GPUS[:1], MODELS[:1], **{**axes, "contexts": [256]})  # warm caches and imports
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        frame = sweep(GPUS, MODELS, max_rows=None, **axes)
        seconds.append(time.perf_counter() - start)
        rows, megabytes = len(frame), frame.memory_usage(deep=False).sum() / 1e6
        del frame
    return rows, seconds, megabytes


def first_run(n_contexts: int, columns: list[str] | None) -> tuple[int, float, float]:
    """Rows, seconds and table size [MB] of one sweep in a fresh child process."""
    command = [sys.executable, __file__, "--first-child", str(n_contexts), ",".join(columns or [])]
    rows, seconds, megabytes = subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()
    return int(rows), float(seconds), float(megabytes)


def streamed_child(path: str, n_contexts: int) -> None:
    from fleetplan.catalogs import load_catalogs
    from fleetplan.cli.progress import write_stream
    from fleetplan.sweeps.sweep_grid import iter_sweep, make_grid

    grid = make_grid(GPUS, MODELS, ["bf16", "fp8"], tps=[1, 8], contexts=list(range(64, 64 * (n_contexts + 1), 64)),
                     batches=list(range(1, 1025)))
    start = time.perf_counter()
    write_stream(iter_sweep(None, None, None, grid=grid, chunk_rows=2_000_000), grid.n_rows, path,
                 params={"benchmark": "bench_sweep"}, catalogs=load_catalogs())
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{grid.n_rows} {seconds} {peak_mb}")


def streamed(n_contexts: int) -> tuple[int, float, float, float]:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "sweep.parquet")
        done = subprocess.run([sys.executable, __file__, "--child", path, str(n_contexts)], check=True,
                              capture_output=True, text=True)
        rows, seconds, peak_mb = done.stdout.split()
        size_mb = os.path.getsize(path) / 1e6
    return int(rows), float(seconds), float(peak_mb), size_mb


def scalar_loop(n_rows: int = 10_000) -> float:
    """The same kernel called once per configuration from a Python loop, as per-config estimators run."""
    import numpy as np

    from fleetplan.sweeps import row_kernel
    from fleetplan.sweeps.sweep_grid import make_grid

    grid = make_grid(["h100-sxm"], ["llama-3.1-8b"], ["bf16"], contexts=range(256, 256 * 41, 256),
                     batches=range(1, 251))
    constants = grid.constants().gather(np.zeros(1, dtype=np.int64))
    contexts = np.repeat(grid.context_len, len(grid.batch))[:n_rows]
    batches = np.tile(grid.batch, len(grid.context_len))[:n_rows]
    start = time.perf_counter()
    for context, batch in zip(contexts, batches):
        one = row_kernel.Rows(np.zeros(1, dtype=np.int64), np.array([context]), np.array([context]),
                          np.array([256]), np.array([batch]))
        row_kernel.evaluate(constants, one)
    return n_rows / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller grids, for a smoke run")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--first-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        streamed_child(args.child[0], int(args.child[1]))
        return
    if args.first_child:
        columns = [c for c in args.first_child[1].split(",") if c] or None
        rows, seconds, megabytes = in_memory(int(args.first_child[0]), repeats=1, columns=columns)
        print(rows, seconds[0], megabytes)
        return
    n_contexts = 10 if args.quick else 245
    for label, columns in (("every column", None), (f"{len(PLANNER_COLUMNS)} planner columns", PLANNER_COLUMNS)):
        rows, seconds, megabytes = first_run(n_contexts, columns)
        print(f"first run in a fresh process, {label}: {rows:,} rows in {seconds:.2f} s = "
              f"{rows / seconds / 1e6:.2f} M rows/s ({megabytes:,.0f} MB table, {megabytes * 1e6 / rows:.0f} B/row)")
    rows, seconds, _ = in_memory(n_contexts)
    vector_rate = rows / min(seconds)
    print(f"in-memory sweep, every column: {rows:,} rows; best of {len(seconds)} runs in one process "
          f"{min(seconds):.2f} s = {vector_rate / 1e6:.2f} M rows/s")
    rows, seconds, peak_mb, size_mb = streamed(10 if args.quick else 611)
    print(f"streamed to Parquet: {rows:,} rows in {seconds:.1f} s ({rows / seconds / 1e6:.2f} M rows/s), "
          f"peak RSS {peak_mb:,.0f} MB, file {size_mb:,.0f} MB")
    loop_rate = scalar_loop()
    print(f"scalar Python loop: {loop_rate:,.0f} rows/s on a 10,000-row grid; "
          f"vectorized / loop = {vector_rate / loop_rate:,.0f}x")


if __name__ == "__main__":
    main()
