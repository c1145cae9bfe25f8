"""Solve a what-if grid scenario by scenario, in parallel, resumable.

Each case is solved by ``solve_case`` in a worker process (or a Dask task); its result row is
written to ``<results folder>/<case id>.json`` as soon as it is known, so a rerun skips the
cases already solved. A case that fails or is infeasible is reported in its row and never stops
the grid.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pandas as pd

from fleetplan.optimizer.whatif import Grid, apply_case, case_id, scaled_catalogs

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
    from fleetplan.catalogs import load_catalogs
    from fleetplan.optimizer.planner import plan_scenario
    from fleetplan.optimizer.scenario_io import validate_scenario

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


def _write_row(folder: Path, row: dict) -> None:
    from fleetplan.exports.atomic import write_text_atomic

    write_text_atomic(folder / f"{row['case_id']}.json", json.dumps(row, default=float))


def _read_rows(folder: Path, ids: set[str]) -> list[dict]:
    rows = []
    for path in folder.glob("*.json"):
        if path.stem in ids:
            rows.append(json.loads(path.read_text()))
    return rows


def run_grid(grid: Grid, base: dict, cases: list[dict], folder: Path, *, catalog_paths=(), workers: int = 1,
             client=None, progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """Every case's result row, in case order; cases already in ``folder`` are not solved again."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = [case_id(case) for case in cases]
    done = {row["case_id"]: row for row in _read_rows(folder, set(ids))}
    pending = [case for case, identity in zip(cases, ids) if identity not in done]
    log.info("%d cases: %d already solved, %d to solve", len(cases), len(done), len(pending))
    arguments = (grid.model_dump_json(), list(map(str, catalog_paths)))
    for row in _solve_all(base, pending, arguments, workers, client):
        _write_row(folder, row)
        done[row["case_id"]] = row
        if progress is not None:
            progress(len(done), len(cases))
    return pd.DataFrame([done[identity] for identity in ids])


def _solve_all(base, pending, arguments, workers, client):
    if not pending:
        return
    if client is not None:
        from distributed import as_completed as dask_completed

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


def progress_bar(enabled: bool | None = None):
    """A ``progress(done, total)`` callback drawing a bar with an ETA on a terminal, and a closer."""
    if not (sys.stderr.isatty() if enabled is None else enabled):
        return None, lambda: None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    bar = Progress("solving scenarios", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   console=Console(file=sys.stderr), transient=True)
    task = bar.add_task("grid", total=None)
    bar.start()

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update, bar.stop
