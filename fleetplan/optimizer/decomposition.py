"""Solve strategies that exploit the model's period structure.

When no constraint family links two periods (``links_periods`` in
``constraint_families.FAMILIES``: reserved pricing, a monthly budget), the MILP splits into one
small MILP per period, solved one after the other, and the sums of their objectives and bounds
are the whole problem's (exact, and far faster than one big branch-and-bound).

Otherwise reserved replicas (paid for the whole horizon) and the monthly budget link the
periods. The whole MILP is solved, started from a plan built period by period: reserved
replicas rounded down from the LP relaxation, then each period's MILP with them fixed. The
start gives HiGHS a good incumbent at once; its own bound then proves (or bounds) the gap.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time

import numpy as np
import pandas as pd

from fleetplan.optimizer.constraint_families import FAMILIES
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.milp import FleetModel, build_model
from fleetplan.optimizer.milp_tables import per_period
from fleetplan.optimizer.solver import SolveOptions, SolveOutcome, solve_lp, solve_model

logger = logging.getLogger(__name__)

#: Key columns of each variable table, used to copy values between models.
VARIABLE_KEYS = {"routes": ["workload", "bucket", "config", "period"],
                 "replicas": ["config", "pricing_type", "period"],
                 "nodes": ["gpu", "pricing_type", "period"],
                 "unmet": ["workload", "bucket", "period"],
                 "spare_shortfall": ["workload", "period"]}

#: Share of the time limit the starting plan of a linked problem may take, and the loosest
#: relative gap its period MILPs stop at (the closer the start, the sooner HiGHS proves the
#: whole problem). The start is where the plan's quality comes from: from a good start the
#: whole MILP is proven within its gap in a fraction of a second, while from a start cut short
#: it rarely closes the gap in the time left (benchmarks/bench_optimizer.py (b): at a 50 %
#: share an 8 s limit ended at a 1.05 % gap, at 80 % even a 6 s limit is optimal).
START_TIME_SHARE = 0.8
START_GAP = 0.001


def is_separable(problem: Problem) -> bool:
    """True when no constraint family links two periods."""
    return not any(family.links_periods(problem) for family in FAMILIES
                   if family.links_periods is not None)


def period_problem(problem: Problem, period: int) -> Problem:
    """The problem restricted to one period, without the families that span several periods
    (a monthly budget) and so cannot be cut to one."""
    problem = problem.with_changes(periods=problem.periods[problem.periods["period"] == period],
                                   demand=problem.demand[problem.demand["period"] == period])
    for family in FAMILIES:
        if not family.in_period_subproblems and family.lift is not None:
            problem = family.lift(problem) or problem
    return problem


def _copy_values(source: FleetModel, target: FleetModel) -> None:
    for name, keys in VARIABLE_KEYS.items():
        have, want = getattr(source, name), getattr(target, name)
        if have.empty or want.empty:
            continue
        values = have[keys].assign(value=[v.varValue for v in have["var"]])
        merged = want[[*keys, "var"]].merge(values, on=keys)
        for variable, value in zip(merged["var"], merged["value"], strict=True):
            variable.varValue = value


def _fix_reserved(model: FleetModel, reserved: pd.DataFrame) -> None:
    rows = model.replicas[model.replicas["period"] < 0]
    fixed = rows[["config", "pricing_type", "var"]].merge(reserved, on=["config", "pricing_type"],
                                                          how="left").fillna({"value": 0.0})
    for variable, value in zip(fixed["var"], fixed["value"], strict=True):
        variable.lowBound = variable.upBound = float(value)


def _restricted(problem: Problem, configs: set[str] | None) -> Problem:
    if configs is None:
        return problem
    return problem.with_changes(
        configs=problem.configs[problem.configs["config"].isin(configs)],
        candidates=problem.candidates[problem.candidates["config"].isin(configs)])


def _solve_period(model: FleetModel, period: int, options: SolveOptions,
                  reserved: pd.DataFrame | None, configs: set[str] | None) -> SolveOutcome:
    """One period's MILP (restricted to ``configs`` if given, else all) copied into ``model``."""
    for allowed in ((configs, None) if configs is not None else (None,)):
        sub = build_model(_restricted(period_problem(model.problem, period), allowed),
                          elastic=model.elastic)
        if reserved is not None:
            _fix_reserved(sub, reserved)
        outcome = solve_model(sub, options)
        if outcome.has_solution:
            _copy_values(sub, model)
            return outcome
    return outcome


def solve_by_period(model: FleetModel, options: SolveOptions,
                    reserved: pd.DataFrame | None = None,
                    configs: dict[int, set[str]] | None = None) -> SolveOutcome:
    """Solve each period on its own and copy the answers into ``model``'s variables.

    With ``reserved`` (config, pricing_type, value) the reserved replicas are fixed, and with
    ``configs`` each period first tries only its listed configurations: a quick starting plan
    whose combined objective and bound are then not the whole problem's.
    """
    started = time.perf_counter()
    periods = model.problem.periods["period"].tolist()
    outcomes = []
    for done, period in enumerate(periods):
        remaining = options.time_limit_s - (time.perf_counter() - started)
        # an even share, but at least a second while time remains: most periods solve in a
        # fraction of that, and a period stopped early gives a poor plan
        share = max(min(remaining, max(remaining / (len(periods) - done), 1.0)),
                    0.05 * options.time_limit_s / len(periods))
        allowed = None if configs is None else configs.get(period, set())
        outcome = _solve_period(model, period, dataclasses.replace(options, time_limit_s=share),
                                reserved, allowed)
        if not outcome.has_solution:
            return dataclasses.replace(outcome, seconds=time.perf_counter() - started)
        outcomes.append(outcome)
    return _combined(outcomes, time.perf_counter() - started)


def _combined(outcomes: list[SolveOutcome], seconds: float) -> SolveOutcome:
    objective = float(sum(o.objective for o in outcomes))
    bound = float(sum(o.bound for o in outcomes))
    gap = max(0.0, (objective - bound) / objective) if objective > 0 else 0.0
    status = "time_limit" if any(o.status == "time_limit" for o in outcomes) else "optimal"
    solver = next((o.solver for o in outcomes if o.solver != "none"), "none")
    return SolveOutcome(status, gap if math.isfinite(gap) else math.nan, objective, solver,
                        seconds, bound)


def _start_from_relaxation(model: FleetModel, options: SolveOptions) -> bool:
    """Set every variable to a feasible plan: LP relaxation -> reserved -> period MILPs."""
    relaxation = solve_lp(model.lp, options, relax=True)
    if not relaxation.has_solution:
        return False
    replicas = model.replicas.assign(value=[v.varValue or 0.0 for v in model.replicas["var"]])
    rows = replicas[replicas["period"] < 0]
    reserved = rows[["config", "pricing_type"]].assign(value=np.floor(rows["value"] + 1e-6))
    used = per_period(replicas[replicas["value"] > 1e-6], model.problem.periods)
    configs = used.groupby("period")["config"].agg(set).to_dict()
    quick = dataclasses.replace(options, mip_gap=min(options.mip_gap, START_GAP))
    start = solve_by_period(model, quick, reserved=reserved, configs=configs)
    return start.has_solution


def solve_fleet(model: FleetModel, options: SolveOptions) -> SolveOutcome:
    """Solve ``model`` with the strategy its structure allows (see module docstring)."""
    n_periods = len(model.problem.periods)
    if n_periods > 1 and is_separable(model.problem):
        return solve_by_period(model, options)
    if n_periods == 1 or model.elastic:
        return solve_model(model, options)
    started = time.perf_counter()
    budget = dataclasses.replace(options, time_limit_s=START_TIME_SHARE * options.time_limit_s)
    warm = _start_from_relaxation(model, budget)
    remaining = max(options.time_limit_s - (time.perf_counter() - started),
                    0.1 * options.time_limit_s)
    outcome = solve_model(model, dataclasses.replace(options, time_limit_s=remaining),
                          warm_start=warm)
    return dataclasses.replace(outcome, seconds=time.perf_counter() - started)
