"""Solve a what-if grid scenario by scenario, in parallel, resumable.

Each case is solved by ``solve_case`` in a worker process (or a Dask task); its result row goes
to a cache the caller passes in as soon as it is known, so a rerun skips the cases already
solved (``fleetplan.exports.whatif_cache`` keeps them as JSON files). A case that fails or is
infeasible is reported in its row and never stops the grid.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Protocol

import numpy as np
import pandas as pd

from fleetplan.catalogs import load_catalogs
from fleetplan.optimizer.scenario_files import validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario
from fleetplan.optimizer.whatif_grid import Grid, apply_case, case_id, scaled_catalogs

log = logging.getLogger(__name__)


def summarize(case: dict, plan) -> dict:
    """One result row: the case's inputs and the plan's headline outputs."""
    workloads = plan.workloads
    tokens = float(workloads["tokens_per_month"].sum()) if len(workloads) else np.nan
    row = {**case, "status": plan.status, "gap": plan.gap, "usd_per_month": plan.usd_per_month,
           "usd_per_year": plan.usd_per_month * 12.0,
           "usd_per_m_tokens": plan.usd_per_month / tokens * 1e6 if tokens else np.nan,
           "gpus_peak": float(plan.costs_by_gpu["gpus_peak"].sum()) if len(plan.costs_by_gpu) else 0.0,
           "served_fraction_min": float(workloads["served_fraction"].min()) if len(workloads) else np.nan,
           "solve_seconds": plan.solve_seconds, "message": _first_reason(plan)}
    for gpu, peak in zip(plan.costs_by_gpu["gpu"], plan.costs_by_gpu["gpus_peak"]):
        row[f"gpus_{gpu}"] = float(peak)
    return row


def _first_reason(plan) -> str:
    if len(plan.unmet_demand):
        return str(plan.unmet_demand["reason"].iloc[0])
    return ""


def solve_case(base: dict, case: dict, grid_json: str, catalog_paths: list[str]) -> dict:
    """Solve one case; any failure becomes a row with status ``error`` and its message."""
    identity = {**case, "case_id": case_id(case)}
    try:
        grid = Grid.model_validate_json(grid_json)
        data, multipliers = apply_case(base, case, grid)
        scenario = validate_scenario(data, source=f"case {identity['case_id']}")
        catalogs = scaled_catalogs(load_catalogs(catalog_paths), multipliers)
        return {**summarize(identity, plan_scenario(scenario, catalogs, what_if=False))}
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
    return pd.DataFrame([done[identity] for identity in ids])


def _solve_all(base, pending, arguments, workers, client):
    if not pending:
        return
    if client is not None:
        from distributed import (
            as_completed as dask_completed,  # optional extra, only with a cluster
        )

        futures = [client.submit(solve_case, base, case, *arguments, pure=False) for case in pending]
        for future in dask_completed(futures):
            yield future.result()
        return
    if workers <= 1:
        for case in pending:
            yield solve_case(base, case, *arguments)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(solve_case, base, case, *arguments) for case in pending]
        for future in as_completed(futures):
            yield future.result()
