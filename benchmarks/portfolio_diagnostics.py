"""Where the portfolio benchmark's gap lies: ``bench_portfolio.py``'s diagnostics, each run on
one case instead of the planner (``--fixed-reserved S``, ``--fixed-by-period S``,
``--lagrangian-gap G``, ``--whole S``, ``--pool-split S``, ``--partial S``,
``--pool-moves S``).
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pandas as pd
from portfolio_cases import TARGETS, planned, relaxed

from fleetplan.optimizer.decomposition import solve_fleet
from fleetplan.optimizer.lagrangian_periods import LagrangianPeriods
from fleetplan.optimizer.lagrangian_prices import hour_weights
from fleetplan.optimizer.period_solves import PeriodPrograms, _local
from fleetplan.optimizer.pool_split import ColumnGroups, pool_bound
from fleetplan.optimizer.reserved_candidates import (
    other_pools_columns,
    reserved_plan,
    reserved_rows,
)
from fleetplan.optimizer.solve_results import Deadline
from fleetplan.optimizer.solver import SolveOptions, open_solver


def fixed_reserved_bounds(case: str, seconds: float, **variant) -> dict:
    """Where the gap lies: the whole MILP with the reserved counts fixed at the LP's rounded up
    and rounded to nearest, each solved for ``seconds`` on one thread. Its dual bound is the
    least any plan with those reserved counts costs: when it sits well above the plan's reported
    bound, the bound, not the plan, holds the gap open (for those reserved counts)."""
    hours, model, lp = relaxed(case, **variant)
    reserved = lp.values[reserved_rows(model)["col"].to_numpy()]
    figures = {"case": case, "lp_usd_per_hour": lp.outcome.objective / hours}
    for name, counts in (("ceil", np.ceil(reserved - 1e-6)), ("round", np.round(reserved))):
        fixed = reserved_plan(model, counts + 0.0)
        solver = open_solver(model.program, model.cost, SolveOptions(threads=1))
        solver.set_col_bounds(fixed["cols"], fixed["values"], fixed["values"])
        result = solver.solve(time_limit_s=seconds, mip_gap=1e-3)
        figures[name] = {"reserved_replicas": float(counts.sum()), "status": result.outcome.status,
                         "usd_per_hour": result.outcome.objective / hours,
                         "bound_usd_per_hour": result.outcome.bound / hours}
    return figures


def fixed_by_period(case: str, seconds: float, **variant) -> dict:
    """Reserved counts fixed, and every period then solved on its own to 0.01 % for up to
    ``seconds`` (two HiGHS threads): the LP's counts rounded up and to nearest, and the
    planner's own (its plan at the case's target time, ``planned``). With the reserved counts
    fixed the periods separate, so the summed plans and bounds bracket the best plan with those
    counts far more tightly than the whole MILP solved at once."""
    hours, model, lp = relaxed(case, **variant)
    programs = PeriodPrograms.of(model)
    rows = reserved_rows(model)
    reserved = lp.values[rows["col"].to_numpy()]
    _, plan, _ = planned(case, **variant)
    figures = {"case": case, "lp_usd_per_hour": lp.outcome.objective / hours,
               "planned_usd_per_hour": plan.objective_usd / hours}
    for name, counts in (("ceil", np.ceil(reserved - 1e-6)), ("round", np.round(reserved)),
                         ("planned", planned_reserved(rows, plan.fleet))):
        fixed = reserved_plan(model, counts + 0.0)
        cost = bound = float(model.cost[fixed["cols"]] @ fixed["values"])
        statuses = []
        for period in programs.periods():
            part = programs.parts[period]
            where, which = _local(part, fixed["cols"])
            own = model.cost[part.cols].copy()
            own[where] = 0.0  # the reserved replicas' cost is counted once, above
            solver = open_solver(part.program, own, SolveOptions(threads=2))
            solver.set_col_bounds(where, fixed["values"][which], fixed["values"][which])
            result = solver.solve(time_limit_s=seconds, mip_gap=1e-4)
            cost, bound = cost + result.outcome.objective, bound + result.outcome.bound
            statuses.append(result.outcome.status)
        figures[name] = {"reserved_replicas": float(counts.sum()), "usd_per_hour": cost / hours,
                         "bound_usd_per_hour": bound / hours,
                         "periods_proven": statuses.count("optimal"), "periods": len(statuses)}
    return figures


def planned_reserved(rows: pd.DataFrame, fleet: pd.DataFrame) -> np.ndarray:
    """The reserved replicas of a plan's ``fleet`` table on each reserved row of the model
    (``rows``: config, pricing_type) [replicas]."""
    held = fleet[fleet["pricing_type"].isin(rows["pricing_type"].unique())]
    held = held.set_index(["config", "pricing_type"])["replicas_peak"]
    index = pd.MultiIndex.from_frame(rows[["config", "pricing_type"]])
    if not held.index.isin(index).all():
        raise ValueError("the plan reserves a configuration the diagnostic's model lacks")
    return held.reindex(index).fillna(0.0).to_numpy(dtype=float)


def lagrangian_at_lp_prices(case: str, gap: float, **variant) -> dict:
    """The planner's Lagrangian pass (``lagrangian_periods.py``) at the LP's prices, its
    periods solved to a relative gap of ``gap`` without a time limit: how high a bound those
    prices can give at all, and how long it takes."""
    hours, model, lp = relaxed(case, **variant)
    programs = PeriodPrograms.of(model)
    options = SolveOptions(mip_gap=gap)
    weights = hour_weights(model.problem.periods)
    started = time.perf_counter()
    periods, _ = LagrangianPeriods.solved(
        programs, lp, options, Deadline(3600.0), start=None,
        abs_gaps=(0.5 * gap * lp.outcome.objective * weights).to_dict(), budget_s=3600.0)
    return {"case": case, "gap": gap, "lp_usd_per_hour": lp.outcome.objective / hours,
            "bound_usd_per_hour": periods.bound() / hours,
            "seconds": time.perf_counter() - started}


def whole_milp(case: str, seconds: float, **variant) -> dict:
    """The whole MILP handed to HiGHS alone for ``seconds`` (one thread, gap 0.01 %): how far
    plain branch and bound gets, and, where it proves its plan, how far the optimum lies above
    the LP relaxation (the integrality gap any bound must close)."""
    hours, model, lp = relaxed(case, **variant)
    solver = open_solver(model.program, model.cost, SolveOptions(threads=1))
    result = solver.solve(time_limit_s=seconds, mip_gap=1e-4)
    return {"case": case, "columns": model.program.n_cols,
            "integer_columns": int(model.program.integer.sum()), "status": result.outcome.status,
            "lp_usd_per_hour": lp.outcome.objective / hours,
            "usd_per_hour": result.outcome.objective / hours,
            "bound_usd_per_hour": result.outcome.bound / hours,
            "seconds": result.outcome.seconds}


def pool_split_bound(case: str, seconds: float, **variant) -> dict:
    """The whole horizon split by model pool (``pool_split.pool_bound``): the rows that tie two
    pools (the spot share) priced at the LP's duals, each pool's MILP, all its periods and
    reserved columns together, solved for ``seconds``. Its Lagrangian bound keeps every
    integrality inside the pools; where it stays near the LP, the pools themselves, not their
    coupling, hold the bound down. Its ceiling is the same relaxed objective at the pools'
    plans: however long the pools' MILPs ran, the bound at these prices stays below it."""
    hours, model, lp = relaxed(case, **variant)
    program = model.program
    groups = ColumnGroups.of(program.n_cols, model.routes, model.replicas)
    pools = int(groups.pool.max()) + 1
    started = time.perf_counter()
    split = pool_bound(program, model.cost, program.col_lower, program.col_upper, lp.duals,
                       groups, SolveOptions(threads=1, mip_gap=1e-3), seconds * pools)
    figures = {"case": case, "pools": pools, "lp_usd_per_hour": lp.outcome.objective / hours,
               "seconds": time.perf_counter() - started}
    return {**figures, "bound_usd_per_hour": split.bound / hours if split else math.nan,
            "ceiling_usd_per_hour": split.ceiling / hours if split else math.nan}


def pool_moves(case: str, seconds: float, **variant) -> dict:
    """Whether the planner's plan is the best its neighbours allow: the reserved-first solve of
    the diagnostics' model for the case's target time (``decomposition.solve_fleet``), then
    every pool and every pair of pools solved again over the whole horizon, reserved counts
    included, with the other pools' columns held at the plan (the columns all pools share, such
    as nodes, stay free), each for ``seconds`` on one thread from the plan. A cheaper plan
    found is kept for the moves after it; each move's dual bound is the least any plan that
    changes only those pools costs."""
    hours, model, _ = relaxed(case, **variant)
    target_s, target_gap = TARGETS[case]
    outcome = solve_fleet(model, SolveOptions(time_limit_s=target_s, mip_gap=target_gap))
    values = model.values
    figures = {"case": case, "planned_usd_per_hour": outcome.objective / hours,
               "planned_bound_usd_per_hour": outcome.bound / hours, "moves": []}
    pools = sorted(model.replicas["pool"].unique())
    reserved = model.replicas[model.replicas["period"] < 0]
    for size in (1, 2):
        for group in itertools.combinations(pools, size):
            others = reserved.loc[~reserved["pool"].isin(group), "col"].to_numpy()
            held = np.union1d(other_pools_columns(model, set(group)), others)
            solver = open_solver(model.program, model.cost, SolveOptions(threads=1))
            solver.set_col_bounds(held, values[held], values[held])
            result = solver.solve(time_limit_s=seconds, mip_gap=1e-4, start=values)
            found = result.values
            if found is not None and model.program.violation(found) <= 1e-6 \
                    and model.cost @ found < model.cost @ values - 1e-6:
                values = found
            figures["moves"].append({"pools": list(group), "status": result.outcome.status,
                                     "usd_per_hour": float(model.cost @ values) / hours,
                                     "bound_usd_per_hour": result.outcome.bound / hours})
    figures["usd_per_hour"] = float(model.cost @ values) / hours
    return figures


def partial_integrality(case: str, seconds: float, **variant) -> dict:
    """The whole MILP with one family of integer columns kept integer and the others relaxed,
    each solved for ``seconds`` on one thread: the reserved counts, the N+k binaries (does a
    workload use a configuration), the replicas of each period. Each is a relaxation, so its
    dual bound is a bound of the whole MILP; how far each rises above the LP shows which
    integrality the LP misses."""
    hours, model, lp = relaxed(case, **variant)
    program = model.program
    replicas = model.replicas
    spares = model.extras.get("redundancy", pd.DataFrame({"col": []}))["col"]
    families = {"reserved": replicas.loc[replicas["period"] < 0, "col"], "spares": spares,
                "period_replicas": replicas.loc[replicas["period"] >= 0, "col"]}
    figures = {"case": case, "lp_usd_per_hour": lp.outcome.objective / hours}
    for name, cols in families.items():
        integer = np.zeros(program.n_cols, dtype=bool)
        integer[cols.to_numpy(dtype=np.int64)] = True
        part = program.with_changes(integer=integer & program.integer)
        result = open_solver(part, model.cost, SolveOptions(threads=1)).solve(
            time_limit_s=seconds, mip_gap=1e-4)
        figures[name] = {"integer_columns": int(part.integer.sum()),
                         "status": result.outcome.status,
                         "bound_usd_per_hour": result.outcome.bound / hours}
    return figures


#: ``--fixed-reserved``, ``--whole``, ``--pool-split``, ``--partial`` and ``--pool-moves``: where
#: the gap lies, each with its help text.
DIAGNOSTICS = {
    "fixed_reserved": (fixed_reserved_bounds, "the LP's reserved counts fixed, S seconds each"),
    "fixed_by_period": (fixed_by_period, "the LP's and the planner's reserved counts fixed, "
                                         "each period alone for S seconds"),
    "lagrangian_gap": (lagrangian_at_lp_prices,
                       "the Lagrangian pass at the LP's prices, its periods to gap S"),
    "whole": (whole_milp, "the whole MILP in HiGHS alone for S seconds"),
    "pool_split": (pool_split_bound, "the pools' Lagrangian bound, S seconds per pool"),
    "partial": (partial_integrality, "one family of integer columns at a time, S seconds each"),
    "pool_moves": (pool_moves, "the planner's plan, each pool and pair of pools solved again "
                               "with the others held, S seconds each"),
}
