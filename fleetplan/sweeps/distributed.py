"""Sweeps on a Dask cluster: one task per (gpu, model) partition, evaluated with the same kernels
as a local sweep, each task handing its rows to a writer the caller passes in.

The grid is built once on the client and scattered to the workers; a task evaluates a contiguous
range of configurations in bounded chunks. Writing is not this layer's business: the caller
passes ``write_part(chunks, folder, values, metadata) -> rows`` (``fleetplan.exports`` writes a
hive-partitioned Parquet dataset that way). Needs the ``distributed`` extra
(``pip install 'fleetplan[distributed]'``).

Work shared among local processes instead (what-if grids, the validation's refits) starts them
with :func:`worker_context`.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pandas as pd

from fleetplan.errors import InvalidValueError, UnavailableError
from fleetplan.sweeps.sweep_grid import Grid, iter_sweep

log = logging.getLogger(__name__)
SCHEDULER_ENV = "FLEETPLAN_SCHEDULER"
#: Seconds to wait for a Dask scheduler before giving up.
CONNECT_TIMEOUT_S = 10
PARTITION_COLUMNS = ("gpu", "model")

#: How local worker processes start: each from a fresh server process, not a fork of the
#: caller. A process that has already run HiGHS (highspy 1.16) hands its forked children a
#: solver that never returns, and a fork copies solver and BLAS threads mid-state.
WORKER_START = "forkserver"


def worker_context():
    """The ``multiprocessing`` context local worker pools use (:data:`WORKER_START`)."""
    return multiprocessing.get_context(WORKER_START)


#: ``write_part(chunks, folder, partition values, metadata)`` -> rows written.
PartWriter = Callable[[Iterator[pd.DataFrame], str, dict, dict], int]


def _dask():
    try:
        import distributed  # optional extra: imported only when a cluster is asked for
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
        try:
            connected = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT_S)
        except OSError as problem:  # TimeoutError included
            message = f"cannot reach the Dask scheduler at {scheduler} within {CONNECT_TIMEOUT_S} s ({problem})"
            raise UnavailableError(message) from None
        with connected:
            yield connected
        return
    logging.getLogger("distributed").setLevel(logging.WARNING)  # its INFO chatter is not ours to print
    if workers is None or workers < 1:
        message = f"workers must be >= 1 to start a local Dask cluster, got {workers}"
        raise InvalidValueError(message)
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", silence_logs=logging.WARNING) as cluster, distributed.Client(cluster) as local:
        yield local


def partition_chunks(grid: Grid, values: dict, configs: slice, chunk_rows: int) -> Iterator[pd.DataFrame]:
    """One partition's rows in chunks, without the partition columns (hive folders carry them)."""
    for chunk in iter_sweep(None, None, None, grid=grid, configs=configs, chunk_rows=chunk_rows):
        yield chunk.drop(columns=list(values))


def _partition_task(grid: Grid, values: dict, configs: slice, folder: str, chunk_rows: int, metadata: dict,
                    write_part: PartWriter) -> int:
    return write_part(partition_chunks(grid, values, configs, chunk_rows), folder, values, metadata)


def evaluate_partitions(grid: Grid, folder: str, write_part: PartWriter, *, metadata: dict,
                        chunk_rows: int, client) -> int:
    """Evaluate every (gpu, model) partition of ``grid`` on ``client``; each task hands its chunks
    to ``write_part`` with ``folder``. Returns the rows written."""
    partitions = grid.partitions(PARTITION_COLUMNS)
    shared = client.scatter(grid, broadcast=True)
    futures = [client.submit(_partition_task, shared, values, configs, str(folder), chunk_rows, metadata,
                             write_part, pure=False) for values, configs in partitions]
    rows = sum(client.gather(futures))
    log.info("evaluated %d rows in %d partitions", rows, len(partitions))
    return rows
