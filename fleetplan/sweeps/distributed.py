"""Sweeps on a Dask cluster: one task per (gpu, model) partition, each writing its part of a
hive-partitioned Parquet dataset with the same kernels as a local sweep.

The grid is built once on the client and scattered to the workers; a task evaluates a contiguous
range of configurations in bounded chunks and writes ``gpu=<id>/model=<id>/part-0.parquet``. The
whole dataset appears atomically when every task has finished. Needs the ``distributed`` extra
(``pip install 'fleetplan[distributed]'``).
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from fleetplan.errors import InvalidValueError

log = logging.getLogger(__name__)
SCHEDULER_ENV = "FLEETPLAN_SCHEDULER"
PARTITION_COLUMNS = ("gpu", "model")


def _dask():
    try:
        import distributed
    except ImportError:
        message = "distributed sweeps need Dask: pip install 'fleetplan[distributed]'"
        raise InvalidValueError(message) from None
    return distributed


@contextmanager
def dask_client(scheduler: str | None = None, workers: int | None = None, client=None):
    """A Dask client: the one given, one connected to ``scheduler`` (or ``$FLEETPLAN_SCHEDULER``),
    or a local cluster of ``workers`` processes started for the duration."""
    if client is not None:
        yield client
        return
    distributed = _dask()
    scheduler = scheduler or os.environ.get(SCHEDULER_ENV)
    if scheduler:
        with distributed.Client(scheduler) as connected:
            yield connected
        return
    logging.getLogger("distributed").setLevel(logging.WARNING)  # its INFO chatter is not ours to print
    if workers is None or workers < 1:
        message = f"workers must be >= 1 to start a local Dask cluster, got {workers}"
        raise InvalidValueError(message)
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", silence_logs=logging.WARNING) as cluster, distributed.Client(cluster) as local:
        yield local


def _partition_folder(folder: Path, values: dict) -> Path:
    return folder.joinpath(*(f"{name}={quote(value, safe='')}" for name, value in values.items()))


def write_partition(grid, values: dict, configs: slice, folder: str, chunk_rows: int, metadata: dict) -> int:
    """Evaluate one partition's configurations and write them as one Parquet file; returns rows."""
    from fleetplan.exports.parquet import write_sweep_parquet
    from fleetplan.sweeps.engine import iter_sweep

    rows = 0

    def chunks():
        nonlocal rows
        for chunk in iter_sweep(None, None, None, grid=grid, configs=configs, chunk_rows=chunk_rows):
            rows += len(chunk)
            yield chunk.drop(columns=list(values))  # hive folders carry the partition values

    target = _partition_folder(Path(folder), values)
    target.mkdir(parents=True, exist_ok=True)
    write_sweep_parquet(chunks(), target / "part-0.parquet", metadata=metadata)
    return rows


def sweep_dataset(grid, path: str | Path, *, metadata: dict, chunk_rows: int = 1_000_000, scheduler: str | None = None,
                  workers: int | None = None, client=None) -> int:
    """Write the grid as a hive-partitioned (gpu, model) Parquet dataset through Dask; returns rows."""
    from fleetplan.exports.atomic import atomic_dir

    partitions = grid.partitions(PARTITION_COLUMNS)
    with dask_client(scheduler, workers, client) as dask, atomic_dir(path) as temporary:
        shared = dask.scatter(grid, broadcast=True)
        futures = [dask.submit(write_partition, shared, values, configs, str(temporary), chunk_rows, metadata,
                               pure=False) for values, configs in partitions]
        rows = sum(dask.gather(futures))
    log.info("wrote %d rows in %d partitions to %s", rows, len(partitions), path)
    return rows
