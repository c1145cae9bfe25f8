"""Solving a what-if grid: cases in worker processes (or Dask tasks), resumably.

Cases are handed out in chunks of one group (``whatif_variants.group_chunks``): a chunk
prepares and builds its first case's model once, and every case of it that differs only in
demand, GPU prices and caps is solved as a variant of that model (``whatif_variants.py``). Any
other case is planned in full by :func:`solve_case`. Each row goes to a cache the caller passes
in as soon as it is known (worker processes send their rows one by one through a queue; a Dask
task returns its chunk's rows together), so a rerun skips the cases already solved
(``fleetplan.exports.whatif_cache`` keeps them as JSON files). A case that fails or is
infeasible is reported in its row and never stops the grid.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import queue
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs, load_catalogs
from fleetplan.optimizer.scenario_files import validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario
from fleetplan.optimizer.whatif_grid import (
    RESULT_COLUMNS,
    Grid,
    apply_case,
    case_id,
    scaled_catalogs,
    summarize,
)
from fleetplan.optimizer.whatif_variants import CaseVariants, group_chunks
from fleetplan.sweeps import estimate_cases
from fleetplan.sweeps.distributed import worker_context

log = logging.getLogger(__name__)

#: How long the caller waits for a worker's next row before checking that none has died [s].
ROW_WAIT_S = 1.0


#: Catalog files up to this size [bytes] are told apart by their content, not only their
#: size and modification time (which a file system may record too coarsely to tell two
#: writes within milliseconds apart).
HASHED_CATALOG_BYTES = 2**20


def _grid_catalogs(catalog_paths: tuple[str, ...]) -> Catalogs:
    """The catalogs every case of a grid starts from, read once per worker process while the
    files stay as they are (an edited file is read again)."""
    return _catalogs_of(catalog_paths, tuple(_file_state(path) for path in catalog_paths))


def _file_state(path: str) -> tuple:
    """What tells one version of a file from another: inode, size, modification time and,
    for a file of at most :data:`HASHED_CATALOG_BYTES`, its content's digest."""
    try:
        stat = Path(path).stat()
        digest = (hashlib.sha256(Path(path).read_bytes()).hexdigest()
                  if stat.st_size <= HASHED_CATALOG_BYTES else "")
    except OSError:  # load_catalogs reports a missing file
        return (0, 0, 0, "")
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns, digest)


@functools.lru_cache(maxsize=4)
def _catalogs_of(catalog_paths: tuple[str, ...], states: tuple) -> Catalogs:
    return load_catalogs(list(catalog_paths))


class EstimateMemo:
    """Candidate capacities already estimated in this process, re-used by the cases that ask
    the engine the same question.

    Most axes (demand, prices, caps, pricing) leave every candidate's capacity unchanged, so a
    grid needs one engine call per distinct set of cases, not one per case. The key is the
    cases table's content, the capacity quantile and the identity of the catalogs' non-price
    tables (price rows do not enter a capacity; ``scaled_catalogs`` replaces only those).
    """

    def __init__(self, size: int = 64):
        self.size = size
        self.results: OrderedDict[tuple, pd.DataFrame] = OrderedDict()
        self.hits = 0

    def __call__(self, capacity_quantile: str):
        quantile = {} if capacity_quantile == "p50" else {"capacity_quantile": capacity_quantile}

        def estimate(cases: pd.DataFrame, catalogs: Catalogs) -> pd.DataFrame:
            key = (hashlib.sha256(pd.util.hash_pandas_object(cases, index=True).to_numpy().tobytes()
                                  + "|".join(map(str, cases.columns)).encode()).hexdigest(),
                   capacity_quantile, *(id(catalogs.table(name)) for name in _CAPACITY_CATALOGS))
            if key in self.results:
                self.hits += 1
                self.results.move_to_end(key)
                return self.results[key].copy()
            result = estimate_cases(cases, catalogs, **quantile)
            self.results[key] = result.copy()
            if len(self.results) > self.size:
                self.results.popitem(last=False)
            return result

        return estimate


#: Catalogs a candidate's capacity depends on.
_CAPACITY_CATALOGS = ("gpus", "models", "quants", "efficiency", "engines")
_ESTIMATES = EstimateMemo()


def solve_case(base: dict, case: dict, grid_json: str, catalog_paths: list[str]) -> dict:
    """Solve one case; any failure becomes a row with status ``error`` and its message."""
    identity = {**case, "case_id": case_id(case)}
    try:
        grid = Grid.model_validate_json(grid_json)
        data, multipliers = apply_case(base, case, grid)
        scenario = validate_scenario(data, source=f"case {identity['case_id']}")
        catalogs = scaled_catalogs(_grid_catalogs(tuple(catalog_paths)), multipliers)
        estimate = _ESTIMATES(scenario.fleet.capacity_quantile)
        return {**summarize(identity, plan_scenario(scenario, catalogs, estimate=estimate,
                                                    what_if=False))}
    except Exception as error:  # one case's failure is reported in its row, never aborts the grid
        log.debug("case %s failed", identity["case_id"], exc_info=True)
        return {**identity, "status": "error", "message": str(error).splitlines()[0] if str(error) else repr(error)}


class CaseCache(Protocol):
    """Where solved cases' result rows are kept between runs."""

    def load(self, ids: Iterable[str]) -> list[dict]:
        """The stored rows among ``ids``."""

    def save(self, row: dict) -> None:
        """Keep one result row (its ``case_id`` names it)."""


def solve_grid(grid: Grid, base: dict, cases: list[dict], cache: CaseCache, *, catalog_paths=(),
               workers: int = 1, client=None, progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """Every case's result row, in case order; cases already in ``cache`` are not solved again."""
    ids = [case_id(case) for case in cases]
    done = {row["case_id"]: row for row in cache.load(set(ids))}
    pending = [case for case, identity in zip(cases, ids) if identity not in done]
    log.info("%d cases: %d already solved, %d to solve", len(cases), len(done), len(pending))
    arguments = (grid.model_dump_json(), list(map(str, catalog_paths)))
    for row in _solve_all(base, pending, arguments, workers, client):
        cache.save(row)
        done[row["case_id"]] = row
        if progress is not None:
            progress(len(done), len(cases))
    results = pd.DataFrame([done[identity] for identity in ids])
    missing = [column for column in RESULT_COLUMNS if column not in results]
    return results.assign(**dict.fromkeys(missing, np.nan))  # a grid where every case failed


def iter_chunk(base: dict, cases: list[dict], grid_json: str,
               catalog_paths: list[str]) -> Iterator[dict]:
    """The result row of each case of one chunk, in order: as a variant of the first case's
    built model where that gives the full plan's answer (``whatif_variants.py``), else planned
    in full."""
    variants = _variants_of(base, cases[0], grid_json, catalog_paths) if cases else None
    for case in cases:
        identity = {**case, "case_id": case_id(case)}
        row = _as_variant(variants, case, identity)
        yield row if row is not None else solve_case(base, case, grid_json, catalog_paths)


def solve_chunk(base: dict, cases: list[dict], grid_json: str, catalog_paths: list[str]) -> list[dict]:
    """:func:`iter_chunk` as a list (what a Dask task returns)."""
    return list(iter_chunk(base, cases, grid_json, catalog_paths))


def send_chunk(base: dict, cases: list[dict], grid_json: str, catalog_paths: list[str],
               rows) -> int:
    """:func:`iter_chunk` with each row put on the ``rows`` queue as soon as it is known (what a
    worker process runs, so the caller saves and counts every case, not every chunk); returns
    the number of rows sent."""
    count = 0
    for row in iter_chunk(base, cases, grid_json, catalog_paths):
        rows.put(row)
        count += 1
    return count


def _variants_of(base, case, grid_json, catalog_paths) -> CaseVariants | None:
    try:
        grid = Grid.model_validate_json(grid_json)
        data, _ = apply_case(base, case, grid)
        quantile = validate_scenario(data, source="what-if case").fleet.capacity_quantile
        return CaseVariants.of(base, case, grid, _grid_catalogs(tuple(catalog_paths)),
                               _ESTIMATES(quantile))
    except Exception:  # the cases are then planned one by one, each reporting its own error
        log.debug("no variants of case %s", case, exc_info=True)
        return None


def _as_variant(variants: CaseVariants | None, case: dict, identity: dict) -> dict | None:
    if variants is None:
        return None
    try:
        return variants.solve(case, identity)
    except Exception:  # planned in full instead, which reports any error in its row
        log.debug("case %s not solved as a variant", identity["case_id"], exc_info=True)
        return None


def _solve_all(base, pending, arguments, workers, client):
    if not pending:
        return
    chunks = group_chunks(pending, workers if client is None else 2 * len(client.ncores()))
    if client is not None:
        from distributed import (
            as_completed as dask_completed,  # optional extra, only with a cluster
        )

        futures = [client.submit(solve_chunk, base, chunk, *arguments, pure=False) for chunk in chunks]
        for future in dask_completed(futures):
            yield from future.result()
        return
    if workers <= 1:
        for chunk in chunks:
            yield from iter_chunk(base, chunk, *arguments)
        return
    context = worker_context()  # not a fork: see WORKER_START
    with context.Manager() as manager, ProcessPoolExecutor(max_workers=workers,
                                                           mp_context=context) as pool:
        rows = manager.Queue()
        futures = [pool.submit(send_chunk, base, chunk, *arguments, rows) for chunk in chunks]
        expected = sum(len(chunk) for chunk in chunks)
        for _ in range(expected):
            yield _next_row(rows, futures)


def _next_row(rows, futures) -> dict:
    """The next row a worker sends; a worker that died (its future failed) is reported."""
    while True:
        try:
            return rows.get(timeout=ROW_WAIT_S)
        except queue.Empty:
            failed = [f for f in futures if f.done() and f.exception() is not None]
            if failed:
                raise failed[0].exception()
