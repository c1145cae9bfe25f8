"""A sweep as a hive-partitioned Parquet dataset, written by Dask workers.

``sweep_dataset`` starts (or connects to) a Dask cluster, has each worker evaluate one
(gpu, model) partition with ``fleetplan.sweeps.distributed`` and write it here as
``gpu=<id>/model=<id>/part-0.parquet``; the whole dataset appears atomically when every task has
finished.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from fleetplan.exports.atomic import atomic_dir
from fleetplan.exports.parquet import write_sweep_parquet
from fleetplan.sweeps.distributed import dask_client, evaluate_partitions, partition_chunks
from fleetplan.sweeps.sweep_grid import Grid

log = logging.getLogger(__name__)


def _partition_folder(folder: Path, values: dict) -> Path:
    return folder.joinpath(*(f"{name}={quote(value, safe='')}" for name, value in values.items()))


def write_part(chunks: Iterator[pd.DataFrame], folder: str, values: dict, metadata: dict) -> int:
    """Write one partition's chunks as ``<folder>/<hive path>/part-0.parquet``; returns rows."""
    rows = 0

    def counted():
        nonlocal rows
        for chunk in chunks:
            rows += len(chunk)
            yield chunk

    target = _partition_folder(Path(folder), values)
    target.mkdir(parents=True, exist_ok=True)  # inside the dataset's own temporary folder
    write_sweep_parquet(counted(), target / "part-0.parquet", metadata=metadata)
    return rows


def write_partition(grid: Grid, values: dict, configs: slice, folder: str, chunk_rows: int, metadata: dict) -> int:
    """Evaluate and write one partition in this process; returns rows."""
    return write_part(partition_chunks(grid, values, configs, chunk_rows), folder, values, metadata)


def sweep_dataset(grid: Grid, path: str | Path, *, metadata: dict, chunk_rows: int = 1_000_000,
                  scheduler: str | None = None, workers: int | None = None, client=None) -> int:
    """Write the grid as a hive-partitioned (gpu, model) Parquet dataset through Dask; returns rows."""
    with dask_client(scheduler, workers, client) as dask, atomic_dir(path) as temporary:
        rows = evaluate_partitions(grid, str(temporary), write_part, metadata=metadata, chunk_rows=chunk_rows,
                                   client=dask)
    log.info("wrote %d rows to %s", rows, path)
    return rows
