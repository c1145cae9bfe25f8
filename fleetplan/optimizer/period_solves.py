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
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from fleetplan.optimizer.constraint_families import FAMILY
from fleetplan.optimizer.linear_program import Restriction, restricted
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.pool_split import ColumnGroups, better_of, combined, split_solve
from fleetplan.optimizer.solve_results import Deadline, stopped_solve
from fleetplan.optimizer.solver import (
    Result,
    SolveOptions,
    SolveOutcome,
    gap_between,
    open_solver,
    solver_name,
)

logger = logging.getLogger(__name__)

#: Threads that solve periods side by side (the machine's two cores).
PERIOD_THREADS = 2

#: Smallest time a period is given [s]; the first run of a small period takes far less.
MIN_PERIOD_SECONDS = 0.2

#: Share of a period's time its LP relaxation may take when it is split by pool (its duals
#: price the rows that couple pools; it takes milliseconds).
LP_SHARE = 0.2


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
    groups: ColumnGroups

    @classmethod
    def of(cls, model: FleetModel) -> PeriodPrograms:
        reserved = reserved_columns(model)
        parts = {t: restricted(model.program, rows, extra_cols=reserved)
                 for t, rows in period_rows(model).items()}
        groups = ColumnGroups.of(model.program.n_cols, model.routes, model.replicas)
        return cls(model, parts, reserved, groups)

    def periods(self) -> list[int]:
        return list(self.parts)


def _local(part: Restriction, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions in the part, positions in ``columns``) of the columns the part holds."""
    position = np.searchsorted(part.cols, columns)
    position = np.minimum(position, len(part.cols) - 1)
    held = part.cols[position] == columns if len(part.cols) else np.zeros(len(columns), bool)
    return position[held], np.flatnonzero(held)


@dataclass(frozen=True)
class PeriodTask:
    """What to solve in every period.

    cost: the objective (full-length vector), or a function of the period giving that period's
    own (one entry per column of its part); fixed: ``{'cols', 'values'}`` columns fixed for all
    periods; closed: per period, columns held at 0 (configurations left out of a quick solve;
    a period that cannot be served without them is solved again with them); abs_gaps: each
    period's accepted absolute gap [USD]; root_only: stop after the root node (for bounds);
    split_by_pool: first split each period by pool (``pool_split.py``), its coupling rows
    priced at the duals of the period's own LP relaxation.
    """

    cost: object
    fixed: dict[str, np.ndarray] | None = None
    closed: dict[int, np.ndarray] | None = None
    abs_gaps: dict[int, float] | None = None
    root_only: bool = False
    split_by_pool: bool = False


def solve_period(part: Restriction, task: PeriodTask, period: int, options: SolveOptions,
                 seconds: float, *, start: np.ndarray | None = None, closed: bool = True,
                 groups: ColumnGroups | None = None, split_only: bool = False) -> Result:
    """One period's program as ``task`` says: first split by pool when the task asks and
    ``groups`` are given (a bound and a quick plan, ``pool_split.py``), then, unless that is
    within the gap or ``split_only``, the whole period's MILP from the better start with the
    time left."""
    started = time.perf_counter()
    cost = _period_cost(task, period, part)
    lower, upper = part.program.col_lower.copy(), part.program.col_upper.copy()
    if task.fixed is not None:
        where, which = _local(part, task.fixed["cols"])
        lower[where] = upper[where] = task.fixed["values"][which]
    if closed and _closes(task, period):
        where, _ = _local(part, np.sort(task.closed[period]))
        lower[where] = upper[where] = 0.0
    local_start = None if start is None else start[part.cols]
    abs_gap = (task.abs_gaps or {}).get(period)
    solver = open_solver(part.program, cost, options)
    changed = np.flatnonzero((lower != part.program.col_lower) | (upper != part.program.col_upper))
    if len(changed):
        solver.set_col_bounds(changed, lower[changed], upper[changed])
    split = None
    if task.split_by_pool and groups is not None:
        lp = solver.solve(time_limit_s=seconds * LP_SHARE, mip_gap=options.mip_gap, relax=True)
        if lp.duals is not None and lp.outcome.status == "optimal":
            left = seconds - (time.perf_counter() - started)
            split = split_solve(part.program, cost, lower, upper, lp.duals, groups, local_start,
                                options, left, abs_gap=abs_gap)
        if split is not None and (split.outcome.status == "optimal" or split_only):
            return split
        if split is not None and split.values is not None:
            local_start = split.values
    left = max(seconds - (time.perf_counter() - started), MIN_PERIOD_SECONDS / 4)
    whole = solver.solve(time_limit_s=left, mip_gap=options.mip_gap, start=local_start,
                         abs_gap=abs_gap, root_only=task.root_only)
    return whole if split is None else combined(split, whole, options.mip_gap, abs_gap)


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


def solve_periods(programs: PeriodPrograms, task: PeriodTask, options: SolveOptions,
                  deadline: Deadline, *, start: np.ndarray | None = None,
                  budget_s: float | None = None, optional: bool = False,
                  keep_start: bool = False,
                  period_starts: dict[int, np.ndarray] | None = None) -> PeriodRun:
    """Solve every period's program on two threads within ``budget_s`` (default: the time
    left), each given an even share of what is left when it starts.

    With ``split_by_pool``, a first pass splits every period by pool (a bound and a quick plan
    each, ``pool_split.py``); then the periods furthest from their bound get their whole MILP,
    largest gap first, until the periods' summed gap is within the accepted one. A last pass
    reopens the closed columns of periods that found no plan and gives periods stopped short of
    their gap the time others did not need.

    An ``optional`` run (one whose caller has a plan already) never runs past its budget:
    periods reached after it are not solved, and the run is incomplete. With ``keep_start`` (a
    separable model, whose ``start`` is a plan for every period), periods reached after the
    budget keep their part of ``start``, with no bound. Otherwise every period gets at least
    :data:`MIN_PERIOD_SECONDS`, so that each has a plan. ``period_starts`` (per period, one
    value per column of its part) warm-starts those periods instead of ``start``: the plans
    an earlier run found under the same task. Once a period is proven infeasible with none of
    its columns closed, no period after it is solved: the run can no longer be whole."""
    started = time.perf_counter()
    budget_s = deadline.remaining() if budget_s is None else min(budget_s, deadline.remaining())
    finish = started + budget_s
    periods = programs.periods()
    values = np.zeros(programs.model.program.n_cols) if start is None else start.copy()
    if task.fixed is not None:
        values[task.fixed["cols"]] = task.fixed["values"]
    threads = 1 if options.threads is not None else PERIOD_THREADS
    single = dataclasses.replace(options, threads=1 if options.threads is None else options.threads)
    results: dict[int, Result] = {}
    solver = solver_name(options)  # the name an unsolved period's result reports

    def enough() -> bool:
        """True when every period has a plan and their summed gap is within the accepted."""
        if len(results) < len(periods) or any(
                r.values is None or not math.isfinite(r.outcome.bound) for r in results.values()):
            return False
        slack = sum(r.outcome.objective - r.outcome.bound for r in results.values())
        if task.abs_gaps is not None:
            return slack <= sum(task.abs_gaps.values())
        return slack <= options.mip_gap * sum(r.outcome.objective for r in results.values())

    proven_infeasible = threading.Event()  # a period no plan can meet: the run cannot be whole

    def run(period: int, position: int, count: int, *, split_only: bool = False,
            skip_when_enough: bool = False, task: PeriodTask = task) -> tuple[int, Result]:
        if skip_when_enough and period in results and enough():
            return period, results[period]
        if proven_infeasible.is_set():
            return period, results.get(period) or _unsolved(programs.parts[period], task,
                                                            period, None, solver)
        left = max(finish - time.perf_counter(), 0.0)
        bounded = optional or (keep_start and start is not None)
        if bounded and left < MIN_PERIOD_SECONDS / 2:
            return period, results.get(period) or _unsolved(
                programs.parts[period], task, period, start if keep_start else None, solver)
        share = max(left * threads / max(count - position, 1), MIN_PERIOD_SECONDS)
        seconds = min(share, left if bounded else max(left, MIN_PERIOD_SECONDS))
        reopened = period in results and results[period].values is None
        warm = values if start is not None or period in results else None
        part = programs.parts[period]
        if period_starts is not None and period in period_starts and period not in results:
            warm = np.zeros(programs.model.program.n_cols)
            part.lift(period_starts[period], warm)
        result = solve_period(part, task, period, single, seconds, start=warm,
                              closed=not reopened, groups=programs.groups.local(part.cols),
                              split_only=split_only)
        if result.outcome.status == "infeasible" and (reopened or not _closes(task, period)):
            proven_infeasible.set()  # with nothing closed, no later pass can find it a plan
        return period, result

    if task.split_by_pool:
        _run_all(lambda *job: run(*job, split_only=True), periods, threads, results, programs,
                 values)
        if enough():
            return PeriodRun(results, values, time.perf_counter() - started)
    else:
        _run_all(run, periods, threads, results, programs, values)
    again = [t for t, r in results.items() if r.values is None
             or (r.outcome.status == "time_limit" and not task.root_only)]
    again.sort(key=lambda t: -_slack(results[t]))
    if again and finish - time.perf_counter() > MIN_PERIOD_SECONDS \
            and not proven_infeasible.is_set():
        whole = dataclasses.replace(task, split_by_pool=False)  # pass 1's bounds are kept
        _run_all(lambda *job: run(*job, skip_when_enough=True, task=whole), again, threads,
                 results, programs, values, keep_better=True)
    return PeriodRun(results, values, time.perf_counter() - started)


def _closes(task: PeriodTask, period: int) -> bool:
    """True when ``task`` closes columns of ``period`` in its first solve."""
    return task.closed is not None and len(task.closed.get(period, ())) > 0


def _period_cost(task: PeriodTask, period: int, part: Restriction) -> np.ndarray:
    """The period's objective, one entry per column of its part."""
    return task.cost(period) if callable(task.cost) else task.cost[part.cols]


def _unsolved(part: Restriction, task: PeriodTask, period: int,
              start: np.ndarray | None, solver: str) -> Result:
    """A period left unsolved: its part of ``start`` (no bound), or no plan; ``solver`` is
    the name its result reports."""
    values = None if start is None else start[part.cols]
    return stopped_solve(values, _period_cost(task, period, part), solver, 0.0)


def _slack(result: Result) -> float:
    """How far a period's plan is from its bound [USD] (infinite without either)."""
    gap = result.outcome.objective - result.outcome.bound
    return gap if result.values is not None and math.isfinite(gap) else math.inf


def _run_all(run, periods, threads, results, programs, values, *, keep_better=False) -> None:
    """Run ``run(period, position, count)`` for every period; copy each solution into
    ``values``."""
    def accept(period: int, result: Result) -> None:
        old = results.get(period)
        if keep_better and old is not None and old.values is not None:
            result = better_of(result, old)  # the new plan on a tie
        results[period] = result
        if result.values is not None:
            programs.parts[period].lift(result.values, values)

    if threads <= 1:
        for position, period in enumerate(periods):
            accept(*run(period, position, len(periods)))
        return
    with ThreadPoolExecutor(max_workers=threads) as pool:
        jobs = [(period, position, len(periods)) for position, period in enumerate(periods)]
        for period, result in pool.map(lambda job: run(*job), jobs):
            accept(period, result)
