"""Solve a built fleet model one period at a time, in parallel, within a shared deadline.

The model is built once; each period's program is cut out of it (the period's rows, plus the
horizon-wide rows of reserved capacity, and the columns they use). Reserved columns are shared
by every period: they are either fixed (a plan for given reserved capacity) or priced per period
(a Lagrangian lower bound). Periods run on two threads (HiGHS releases the interpreter lock),
warm-started from a given plan (a second run from its first); the time left is shared out as periods
finish, so no period is starved, and a period still short of the gap gets a second run with
whatever time the others did not need.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from fleetplan.optimizer.constraint_families import FAMILY
from fleetplan.optimizer.linear_program import Restriction, restricted
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.solver import Result, SolveOptions, SolveOutcome, gap_between, open_solver

logger = logging.getLogger(__name__)

#: Threads that solve periods side by side (the machine's two cores).
PERIOD_THREADS = 2

#: Smallest time a period is given [s]; the first run of a small period takes far less.
MIN_PERIOD_SECONDS = 0.2


class Deadline:
    """Wall-clock budget of one whole optimization call."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def remaining(self) -> float:
        return max(0.0, self.seconds - self.elapsed())

    def share(self, fraction: float) -> float:
        """A fraction of the time left [s]."""
        return self.remaining() * fraction


def reserved_columns(model: FleetModel) -> np.ndarray:
    """Columns of reserved replicas and nodes (one value for the whole horizon)."""
    return np.concatenate([model.replicas.loc[model.replicas["period"] < 0, "col"],
                           model.nodes.loc[model.nodes["period"] < 0, "col"]]).astype(np.int64)


def period_rows(model: FleetModel) -> dict[int, np.ndarray]:
    """Rows of each period's program: its own rows and the horizon-wide rows of families kept
    in period subproblems (reserved nodes and offer caps)."""
    table = model.constraint_table()
    kept = table["family"].map(lambda name: FAMILY[name].in_period_subproblems).to_numpy(bool)
    period = table["period"].to_numpy()
    shared = table["row"].to_numpy()[kept & (period < 0)]
    return {int(t): np.concatenate([table["row"].to_numpy()[kept & (period == t)], shared])
            for t in model.problem.periods["period"]}


@dataclass
class PeriodPrograms:
    """Each period's program cut out of one model."""

    model: FleetModel
    parts: dict[int, Restriction]
    reserved: np.ndarray

    @classmethod
    def of(cls, model: FleetModel) -> PeriodPrograms:
        reserved = reserved_columns(model)
        parts = {t: restricted(model.program, rows, extra_cols=reserved)
                 for t, rows in period_rows(model).items()}
        return cls(model, parts, reserved)

    def periods(self) -> list[int]:
        return list(self.parts)


def _local(part: Restriction, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions in the part, positions in ``columns``) of the columns the part holds."""
    position = np.searchsorted(part.cols, columns)
    position = np.minimum(position, len(part.cols) - 1)
    held = part.cols[position] == columns if len(part.cols) else np.zeros(len(columns), bool)
    return position[held], np.flatnonzero(held)


def solve_period(part: Restriction, cost: np.ndarray, options: SolveOptions, seconds: float, *,
                 fixed: dict[str, np.ndarray] | None = None,
                 start: np.ndarray | None = None, relax: bool = False) -> Result:
    """One period's program with objective ``cost`` (full-length vector) and, if given, the
    columns ``fixed['cols']`` fixed at ``fixed['values']``."""
    solver = open_solver(part.program, cost[part.cols], options)
    if fixed is not None:
        where, which = _local(part, fixed["cols"])
        solver.set_col_bounds(where, fixed["values"][which], fixed["values"][which])
    local_start = None if start is None else start[part.cols]
    return solver.solve(time_limit_s=seconds, mip_gap=options.mip_gap, start=local_start,
                        relax=relax)


@dataclass
class PeriodRun:
    """The result of solving every period: results by period and the assembled values."""

    results: dict[int, Result]
    values: np.ndarray
    seconds: float

    def complete(self) -> bool:
        return all(r.values is not None for r in self.results.values())

    def outcome(self, objective: float, *, constant_bound: float = 0.0) -> SolveOutcome:
        """Combined outcome: ``objective`` of the assembled plan; bound = sum of period bounds
        plus ``constant_bound`` (costs every period shares)."""
        statuses = [r.outcome.status for r in self.results.values()]
        solver = next((r.outcome.solver for r in self.results.values()), "none")
        if not self.complete():
            worst = "infeasible" if "infeasible" in statuses else "no_solution"
            return SolveOutcome(worst, math.nan, math.nan, solver, self.seconds)
        bound = constant_bound + sum(r.outcome.bound for r in self.results.values())
        gap = gap_between(objective, bound)
        status = "optimal" if all(s == "optimal" for s in statuses) else "time_limit"
        return SolveOutcome(status, gap, objective, solver, self.seconds, bound)


def solve_periods(programs: PeriodPrograms, cost: np.ndarray, options: SolveOptions,
                  deadline: Deadline, *, fixed: dict[str, np.ndarray] | None = None,
                  start: np.ndarray | None = None, budget_s: float | None = None) -> PeriodRun:
    """Solve every period's program on two threads within ``budget_s`` (default: the time
    left); a second pass gives periods stopped short of the gap the time others left."""
    started = time.perf_counter()
    budget_s = deadline.remaining() if budget_s is None else min(budget_s, deadline.remaining())
    finish = started + budget_s
    periods = programs.periods()
    values = np.zeros(programs.model.program.n_cols) if start is None else start.copy()
    if fixed is not None:
        values[fixed["cols"]] = fixed["values"]
    threads = 1 if options.threads is not None else PERIOD_THREADS
    single = dataclasses.replace(options, threads=1 if options.threads is None else options.threads)
    results: dict[int, Result] = {}

    def run(period: int, position: int) -> tuple[int, Result]:
        left = max(finish - time.perf_counter(), 0.0)
        share = max(left * threads / max(len(periods) - position, 1), MIN_PERIOD_SECONDS)
        seconds = min(share, max(left, MIN_PERIOD_SECONDS))
        warm = values if start is not None or period in results else None
        return period, solve_period(programs.parts[period], cost, single, seconds, fixed=fixed,
                                    start=warm)

    _run_all(run, list(enumerate(periods)), threads, results, programs, values)
    short = [t for t, r in results.items() if r.outcome.status == "time_limit"]
    if short and finish - time.perf_counter() > MIN_PERIOD_SECONDS:
        _run_all(run, list(enumerate(short)), threads, results, programs, values,
                 keep_better=True)
    return PeriodRun(results, values, time.perf_counter() - started)


def _run_all(run, jobs, threads, results, programs, values, *, keep_better=False) -> None:
    """Run ``run(period, position)`` for every job; copy each solution into ``values``."""
    def accept(period: int, result: Result) -> None:
        old = results.get(period)
        if keep_better and old is not None and old.values is not None and (
                result.values is None or result.outcome.objective > old.outcome.objective):
            result = dataclasses.replace(old, outcome=dataclasses.replace(
                old.outcome, bound=max(old.outcome.bound, result.outcome.bound)))
        results[period] = result
        if result.values is not None:
            programs.parts[period].lift(result.values, values)

    if threads <= 1:
        for position, period in jobs:
            accept(*run(period, position))
        return
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for period, result in pool.map(lambda job: run(job[1], job[0]), jobs):
            accept(period, result)
