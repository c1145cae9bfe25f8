"""Sweep of >= 200 million configurations through Dask to a gpu/model-partitioned Parquet dataset.

Prints rows/s, the dataset's size and the peak resident memory of each worker process.

Usage: python benchmarks/bench_distributed_sweep.py [--workers 2] [--quick]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

GPUS = ["h100-sxm", "h200", "a100-80gb-sxm", "l40s", "b200", "mi300x", "l4", "gh200"]
MODELS = ["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen2.5-72b", "qwen3-30b-a3b"]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    import distributed

    from fleetplan.exports.sweep_dataset import sweep_dataset
    from fleetplan.sweeps.sweep_grid import make_grid

    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n_contexts = 20 if args.quick else 1221
    grid = make_grid(GPUS, MODELS, ["bf16", "fp8"], tps=[1, 8], contexts=list(range(64, 64 * (n_contexts + 1), 64)),
                     batches=list(range(1, 1025)))
    folder = Path(tempfile.mkdtemp()) / "sweep"
    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        start = time.perf_counter()
        rows = sweep_dataset(grid, folder, metadata={"benchmark": "bench_distributed_sweep"}, chunk_rows=2_000_000,
                             client=client)
        seconds = time.perf_counter() - start
        peaks = client.run(peak_rss_mb)
    size_gb = sum(p.stat().st_size for p in folder.rglob("*.parquet")) / 1e9
    shutil.rmtree(folder.parent)
    print(f"Dask sweep, {args.workers} local worker processes: {rows:,} rows in {seconds:.1f} s = "
          f"{rows / seconds / 1e6:.2f} M rows/s; dataset {size_gb:.1f} GB in {len(grid.partitions())} partitions")
    print("peak RSS per worker: " + ", ".join(f"{mb:,.0f} MB" for mb in peaks.values()))


if __name__ == "__main__":
    main()
