r"""One period's MILP split by model pool: a Lagrangian lower bound and a quick plan.

Within a period, the pools of a fleet (one model's configurations and the workloads they
serve) meet only in a few rows: the nodes of a GPU type and pricing type (replicas of every
pool draw on them), the spot share, availability caps, power envelopes, hosted-API limits.
Those few rows are what make a period's MILP hard for branch and bound: an hour of
``bench_portfolio``'s flexible case is proven within 0.5 % many times faster with the spot
share lifted than with it at 30 %.

**Bound.** Relax every row that touches columns of two or more pools, priced by multipliers
:math:`y_r` (the LP relaxation's row duals, HiGHS's sign: :math:`y_r \le 0` on an upper
bound, :math:`\ge 0` on a lower bound). What is left splits into one small MILP per pool
(a connected component of the remaining rows), so

.. math::

    L(y) = \sum_r y_r\, b_r + \sum_{q} \min_{x_q \in X_q}\, (c_q - A_{Rq}^\top y)\, x_q,
    \qquad b_r = \begin{cases} u_r & y_r < 0 \\ l_r & y_r > 0 \end{cases}

For a feasible plan :math:`y_r (a_r x - b_r) \ge 0` on every relaxed row, so
:math:`c x \ge L(y)`: a lower bound of the period's optimum for any multipliers of these
signs [1]. At the LP's duals it is at least the LP bound, and above it by what integrality
adds inside each pool (whole replicas, N+k spares, SLO levels), which is most of the gap.
Each pool's MILP contributes its dual bound, so a pool stopped early keeps L valid.

**Plan.** The pools' solutions may break a relaxed row (too much spot). The quick plan is the
period's whole MILP restricted to the configurations the pools' solutions or the starting
plan use: small, so solved in a fraction of the time, and feasible whenever the start is.

References:
    [1] A. M. Geoffrion, "Lagrangean relaxation for integer programming", Mathematical
        Programming Study 2 (1974) 82-114.
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
import pandas as pd
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from fleetplan.optimizer.linear_program import LinearProgram, restricted
from fleetplan.optimizer.solver import (
    Result,
    SolveOptions,
    SolveOutcome,
    gap_between,
    open_solver,
    solver_name,
)

logger = logging.getLogger(__name__)

#: Share of a period's time the pools' MILPs may take; the quick plan gets the same again.
POOL_TIME_SHARE = 0.4

#: Shortest run given to one pool's MILP or the quick plan [s].
MIN_SOLVE_S = 0.05

#: Share of the accepted gap the quick plan is solved to. It is judged against the pools'
#: bound, not its own, so it needs a tighter gap than the period: bench_portfolio.py's
#: flexible case took 9.6-9.9 s to 0.49-0.51% at half the accepted gap, 8.7-9.6 s to
#: 0.47-0.49% at a tenth (three runs each).
QUICK_PLAN_GAP_SHARE = 0.1

#: Reduced cost below which a column bounded by nothing makes the relaxation unbounded,
#: relative to the largest cost (smaller ones are round-off in the duals).
COST_TOLERANCE = 1e-9

#: Row violation accepted as round-off when a pools' solution is checked as a plan.
FEASIBLE = 1e-6


@dataclass(frozen=True)
class ColumnGroups:
    """For every column of a model: its pool's code and its configuration's code (-1 for
    columns of no pool: nodes, spare binaries, API shares, ...)."""

    pool: np.ndarray
    config: np.ndarray

    @classmethod
    def of(cls, n_cols: int, routes: pd.DataFrame, replicas: pd.DataFrame) -> ColumnGroups:
        tables = [t for t in (routes, replicas) if not t.empty]
        codes = {}
        for key in ("pool", "config"):
            codes[key] = np.full(n_cols, -1)
            if not tables:
                continue
            columns = pd.concat([t[["col", key]] for t in tables], ignore_index=True)
            codes[key][columns["col"].to_numpy(dtype=np.int64)] = \
                pd.factorize(columns[key].astype(str), sort=True)[0]
        return cls(codes["pool"], codes["config"])

    def local(self, cols: np.ndarray) -> ColumnGroups:
        """The groups of some columns (a period program's)."""
        return ColumnGroups(self.pool[cols], self.config[cols])


def coupling_rows(matrix: sp.csr_matrix, pool: np.ndarray) -> np.ndarray:
    """Rows that touch columns of two or more pools (bool per row)."""
    coo = matrix.tocoo()
    pooled = pool[coo.col] >= 0
    pairs = np.unique(np.stack([coo.row[pooled], pool[coo.col[pooled]]]), axis=1)
    return np.bincount(pairs[0], minlength=matrix.shape[0]) >= 2


def relaxed_costs(program: LinearProgram, cost: np.ndarray, duals: np.ndarray,
                  relax: np.ndarray, free: np.ndarray) -> tuple[np.ndarray, float]:
    r"""Lagrangian costs :math:`c - A_R^\top y` and the constant :math:`\sum y_r b_r`.

    Multipliers of the wrong sign for their row's finite bounds are set to 0, and those of
    rows whose ``free`` columns (columns left in no kept row) would get a cost that drives them
    to an infinite bound are scaled down until that cost is 0: any such multipliers keep the
    bound valid, only weaker. (Reserved node columns priced per period need it: their price is
    a share of the dual value of the rows they sit in.)"""
    y = np.where(relax, np.nan_to_num(duals), 0.0)
    upper, lower = program.row_upper, program.row_lower
    y = np.where((y < 0) & ~np.isfinite(upper), 0.0, y)
    y = np.where((y > 0) & ~np.isfinite(lower), 0.0, y)
    matrix = program.matrix.tocsc()
    reduced = cost - matrix.T @ y
    unbounded = free & (((reduced < 0) & ~np.isfinite(program.col_upper))
                        | ((reduced > 0) & ~np.isfinite(program.col_lower)))
    if unbounded.any():
        block = matrix[:, unbounded].tocoo()
        pull = block.data * y[block.row]  # what each relaxed row takes off the column's cost
        column_pull = np.bincount(block.col, weights=pull, minlength=unbounded.sum())
        keep = np.clip(cost[unbounded] / np.where(column_pull != 0, column_pull, 1.0), 0.0, 1.0)
        factor = np.ones(len(y))
        np.minimum.at(factor, block.row, keep[block.col])
        y = y * factor
        reduced = cost - matrix.T @ y
    side = np.where(y < 0, np.where(np.isfinite(upper), upper, 0.0),
                    np.where(np.isfinite(lower), lower, 0.0))
    return reduced, float(y @ side)


@dataclass
class PoolBound:
    """L(y), the pools' solutions (one full-length vector of the period's columns) and the
    relaxed objective at them, ``ceiling``: no pool MILP proven further would lift L(y) past
    it, so ``ceiling - bound`` is what the pools' own gaps leave open."""

    bound: float
    values: np.ndarray
    ceiling: float = math.nan


def pool_bound(program: LinearProgram, cost: np.ndarray, lower: np.ndarray,
               upper: np.ndarray, duals: np.ndarray, groups: ColumnGroups,
               options: SolveOptions, seconds: float, threads: int = 1) -> PoolBound | None:
    """L(y) of the module docstring; None when no row couples two pools (the split would be
    the period itself) or a pool's MILP gives no finite bound. With ``threads`` > 1 the pools'
    MILPs run side by side (HiGHS releases the interpreter lock). Each pool gets, when it starts,
    the threads' time left over the pools not yet finished (itself and those running
    included), so a pool proven early leaves its time to the others and none ends past
    ``seconds``."""
    started = time.perf_counter()
    matrix = program.matrix.tocsr()
    relax = coupling_rows(matrix, groups.pool)
    if not relax.any():
        return None
    kept = np.flatnonzero(~relax)
    block = matrix[kept]
    free = block.getnnz(axis=0) == 0
    lagrangian, constant = relaxed_costs(program, cost, duals, relax, free)
    graph = sp.bmat([[None, block], [block.T, None]], format="csr")
    _, labels = connected_components(graph, directed=False)
    row_label, col_label = labels[:len(kept)], labels[len(kept):]
    bound, ceiling, values = constant, constant, np.zeros(program.n_cols)
    tolerance = COST_TOLERANCE * max(float(np.abs(cost).max(initial=0.0)), 1.0)
    pools = []  # (columns, rows) of every component with rows: one MILP each
    for component in np.unique(col_label):
        cols = np.flatnonzero(col_label == component)
        rows = kept[row_label == component]
        if len(rows):
            pools.append((cols, rows))
            continue
        # bounded by nothing but its own bounds
        c = np.where(np.abs(lagrangian[cols]) <= tolerance, 0.0, lagrangian[cols])
        if np.any((c < 0) & ~np.isfinite(upper[cols])) or \
                np.any((c > 0) & ~np.isfinite(lower[cols])):
            logger.debug("pool split: a column bounded by nothing has a negative cost")
            return None
        x = np.where(c > 0, lower[cols], np.where(c < 0, upper[cols], lower[cols]))
        values[cols], bound, ceiling = x, bound + float(c @ x), ceiling + float(c @ x)
    unfinished = [len(pools)]  # pools not started or still running
    lock = threading.Lock()

    def solve_pool(pool: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, Result]:
        with lock:  # the threads' time left, shared among the pools not yet finished
            left = seconds - (time.perf_counter() - started)
            each_s = max(min(left, left * threads / unfinished[0]), MIN_SOLVE_S)
        part = restricted(program, pool[1], extra_cols=pool[0])
        solver = open_solver(part.program, lagrangian[part.cols], options)
        solver.set_col_bounds(np.arange(len(part.cols)), lower[part.cols], upper[part.cols])
        result = solver.solve(time_limit_s=each_s, mip_gap=options.mip_gap / 10)
        with lock:
            unfinished[0] -= 1
        return part.cols, result

    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(pools)))) as executor:
        solved = list(executor.map(solve_pool, pools))
    for cols, result in solved:
        pool_min = result.outcome.bound
        if result.values is None or not math.isfinite(pool_min):
            logger.debug("pool split: a pool's MILP ended %s", result.outcome.status)
            return None
        values[cols], bound = result.values, bound + pool_min
        ceiling += float(lagrangian[cols] @ result.values)
    return PoolBound(bound, values, ceiling)


def quick_plan(program: LinearProgram, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray,
               groups: ColumnGroups, used: np.ndarray, start: np.ndarray | None,
               options: SolveOptions, seconds: float) -> np.ndarray | None:
    """The period's MILP with only the configurations of ``used`` columns open (module
    docstring); None without a plan."""
    configs = np.unique(groups.config[used & (groups.config >= 0)])
    shut = (groups.config >= 0) & ~np.isin(groups.config, configs) & (lower <= 0)
    solver = open_solver(program, cost, options)
    solver.set_col_bounds(np.arange(program.n_cols), lower, np.where(shut, 0.0, upper))
    result = solver.solve(time_limit_s=max(seconds, MIN_SOLVE_S),
                          mip_gap=options.mip_gap * QUICK_PLAN_GAP_SHARE, start=start)
    return result.values


def split_solve(program: LinearProgram, cost: np.ndarray, lower: np.ndarray,
                upper: np.ndarray, duals: np.ndarray, groups: ColumnGroups,
                start: np.ndarray | None, options: SolveOptions, seconds: float, *,
                abs_gap: float | None = None) -> Result | None:
    """The pools' bound and the best of the quick plan, the pools' own solution (when it keeps
    every row) and ``start``: a Result whose bound is L(y), or None (no split). Its status is
    ``optimal`` when the plan is within ``options.mip_gap`` or ``abs_gap`` [USD] of L(y)."""
    started = time.perf_counter()
    split = pool_bound(program, cost, lower, upper, duals, groups, options,
                       seconds * POOL_TIME_SHARE)
    if split is None:
        return None
    plans = [split.values] if _feasible(program, lower, upper, split.values) else []
    if start is not None and _feasible(program, lower, upper, start):
        plans.append(start)
    used = np.abs(split.values) > 1e-7
    if start is not None:
        used |= np.abs(start) > 1e-7
    left = seconds - (time.perf_counter() - started)
    quick = quick_plan(program, cost, lower, upper, groups, used, plans[-1] if plans else None,
                       options, min(left, seconds * POOL_TIME_SHARE))
    if quick is not None and _feasible(program, lower, upper, quick):
        plans.append(quick)
    seconds_taken = time.perf_counter() - started
    solver = solver_name(options)
    if not plans:
        outcome = SolveOutcome("no_solution", math.nan, math.nan, solver, seconds_taken,
                               split.bound)
        return Result(outcome, None)
    best = min(plans, key=lambda x: float(cost @ x))
    objective = float(cost @ best)
    bound = min(split.bound, objective)
    gap = gap_between(objective, bound)
    status = "optimal" if _within(objective, bound, options.mip_gap, abs_gap) else "time_limit"
    logger.debug("pool split: bound %.2f, plan %.2f, %.2f s", bound, objective, seconds_taken)
    return Result(SolveOutcome(status, gap, objective, solver, seconds_taken, bound), best)


def better_of(first: Result, second: Result) -> Result:
    """The cheaper plan of two solves of one period (``first`` on a tie), with the higher of
    their bounds (never above that plan's cost); ``second`` when neither has a plan."""
    plans = [r for r in (first, second) if r.values is not None]
    if not plans:
        return second
    best = min(plans, key=lambda r: r.outcome.objective)
    bounds = [r.outcome.bound for r in (first, second) if math.isfinite(r.outcome.bound)]
    bound = min(max(bounds), best.outcome.objective) if bounds else math.nan
    return dataclasses.replace(best, outcome=dataclasses.replace(
        best.outcome, bound=bound, gap=gap_between(best.outcome.objective, bound)))


def combined(split: Result, whole: Result, mip_gap: float, abs_gap: float | None = None) -> Result:
    """:func:`better_of` the split and the whole solve of one period, its status from its gap
    and the two solves' time."""
    best = better_of(split, whole)
    if best.values is None:
        return best
    outcome = best.outcome
    status = "optimal" if _within(outcome.objective, outcome.bound, mip_gap, abs_gap) \
        else "time_limit"
    seconds = split.outcome.seconds + whole.outcome.seconds
    return dataclasses.replace(best, outcome=dataclasses.replace(outcome, status=status,
                                                                 seconds=seconds))


def _within(objective: float, bound: float, mip_gap: float, abs_gap: float | None) -> bool:
    """True when ``objective`` is within the relative or the absolute gap of ``bound``."""
    if not (math.isfinite(objective) and math.isfinite(bound)):
        return False
    return gap_between(objective, bound) <= mip_gap or (
        abs_gap is not None and objective - bound <= abs_gap)


def _feasible(program: LinearProgram, lower: np.ndarray, upper: np.ndarray,
              values: np.ndarray) -> bool:
    integer = program.integer
    whole = np.all(np.abs(values[integer] - np.round(values[integer])) <= FEASIBLE)
    inside = np.all(values >= lower - FEASIBLE) and np.all(values <= upper + FEASIBLE)
    return bool(whole and inside and program.violation(values) <= FEASIBLE)
