"""Solve strategies that exploit the model's period structure, within one deadline.

When no constraint family links two periods (``links_periods`` in
``constraint_families.FAMILIES``: reserved pricing, a monthly budget), the MILP splits into one
small MILP per period, solved side by side, and the sums of their objectives and bounds are the
whole problem's (exact, and far faster than one big branch-and-bound). Every period starts from
the rounded-up LP plan, so a period cut short by the deadline keeps that plan, never a worse
first incumbent; each is first split by pool at the LP's duals (``pool_split.py``), which
bounds it and plans it quickly, and only periods still far from their bound get their whole
MILP.

Otherwise reserved replicas (paid for the whole horizon) link the periods: they are decided
first, then every period is solved on its own (``reserved_first.py``), with a Lagrangian lower
bound. A small linked model is first solved whole, with a share of the time; only one that
share does not prove goes on to the reserved-first solve, from the whole MILP's plan. A
monthly budget (or another family left out of the periods: fleet simplicity over the horizon,
lead times, churn) links periods in a way period programs cannot see: the whole MILP is then
solved, started from the reserved-first plan when that keeps those rows. The reserved-first
solve ends at the first period plan that breaks one of them, since its other period plans will
not see that row either, and the whole MILP gets the rest of the time (unless the rest is too
short for it: then the other reserved choices are still priced).
"""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np

from fleetplan.optimizer.constraint_families import FAMILIES, FAMILY
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.greedy_fallback import greedy_plan
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.period_solves import Deadline, PeriodPrograms, PeriodTask, solve_periods
from fleetplan.optimizer.representative_start import floor_bound
from fleetplan.optimizer.reserved_first import ReservedFirst
from fleetplan.optimizer.reserved_first_shares import (
    COMPLETION_SHARE,
    FLOOR_SHARE,
    ROUNDING_SHARE,
)
from fleetplan.optimizer.rounding import rounded_within_limits
from fleetplan.optimizer.solver import (
    Result,
    SolveOptions,
    SolveOutcome,
    gap_between,
    open_solver,
)

logger = logging.getLogger(__name__)

#: Share of the time left the starting plan of a linked problem may take. The start is where
#: the plan's quality comes from: from a good start the whole MILP is proven within its gap in
#: a fraction of a second, while from a start cut short it rarely closes the gap in the time
#: left.
START_TIME_SHARE = 0.8

#: Largest linked model solved whole first [columns]. Below it HiGHS's own branch and bound
#: beats the reserved-first decomposition (measured on the example plan: 662 columns, solved
#: whole faster than decomposed, and to a cheaper plan). Above it HiGHS's first plans can cost
#: several times the reserved-first plan, and its root cut loop runs past short limits: on one
#: model's pool of ``bench_portfolio.py``'s day case (3,198 columns, ``--pool m8b``) a 10 s
#: solve ended at $29.43/h against the reserved-first solve's $6.30/h. The year case (1,980
#: columns once dominance splits replicas) ended at 1.22% solved whole first, its whole MILP's
#: 18 s finding a plan of $141.83/h, and proven within 1% (0.95%, 53.9 s) decomposed from the
#: start, where the pools' bound has the time.
WHOLE_MODEL_COLUMNS = 1_000

#: Share of the time the whole MILP of a linked model of at most :data:`WHOLE_MODEL_COLUMNS`
#: columns gets; a plan it does not prove in that time goes on to the reserved-first solve,
#: which starts from its plan and keeps its bound.
WHOLE_FIRST_SHARE = 0.3

#: Share of a small linked model's whole-MILP time its rounded-up LP start may take (the LP,
#: then the rounding); both take milliseconds on such a model.
START_LP_SHARE = 0.1

#: Least time worth handing to the reserved-first solve after the whole MILP's share [s].
LINKED_MIN_S = 2.0

#: Shortest run given to a solve when the deadline has passed [s] (it still returns a plan).
LAST_CHANCE_S = 0.05

#: Share of the time left the LP relaxation of a separable model may take: its rounded-up plan
#: starts every period and is what a period short of time keeps.
LP_TIME_SHARE = 0.3


def is_separable(problem: Problem) -> bool:
    """True when no constraint family links two periods."""
    return not any(family.links_periods(problem) for family in FAMILIES
                   if family.links_periods is not None)


def solve_whole(model: FleetModel, options: SolveOptions, deadline: Deadline, *,
                start: np.ndarray | None = None, greedy: bool = True) -> SolveOutcome:
    """Solve the whole model; an elastic model lexicographically: first the least unmet demand
    (share of request-hours), then the cheapest fleet that leaves no more unmet. A solve that
    finds nothing keeps ``start``, else the greedy plan unless ``greedy`` is False (the caller
    has tried it)."""
    program = model.program
    if program.n_rows == 0:  # nothing to serve
        model.values = np.clip(np.zeros(program.n_cols), program.col_lower, program.col_upper)
        objective = float(model.cost @ model.values)
        return SolveOutcome("optimal", 0.0, objective, "none", 0.0, objective)
    if not model.elastic or model.unmet_share is None:
        solver = open_solver(program, model.cost, options)
        result = solver.solve(time_limit_s=max(deadline.remaining(), LAST_CHANCE_S),
                              mip_gap=options.mip_gap, start=start)
        if result.values is None and result.outcome.status == "no_solution":
            return fallen_back(model, result.outcome, start, options, greedy)
        model.values = result.values
        return result.outcome
    solver = open_solver(program, model.unmet_share, options)
    first = solver.solve(time_limit_s=max(deadline.share(0.5), LAST_CHANCE_S),
                         mip_gap=options.mip_gap)
    if first.values is None:
        return first.outcome
    least = float(model.unmet_share @ first.values)
    columns = np.flatnonzero(model.unmet_share)
    solver.add_row(columns, model.unmet_share[columns], -math.inf, least + 1e-7 + 1e-6 * least)
    solver.set_cost(model.cost)
    second = solver.solve(time_limit_s=max(deadline.remaining(), LAST_CHANCE_S),
                          mip_gap=options.mip_gap, start=first.values)  # phase 1 is feasible
    chosen = second if second.values is not None else first
    model.values = chosen.values
    status = "time_limit" if "time_limit" in (first.outcome.status, second.outcome.status) \
        else chosen.outcome.status
    return SolveOutcome(status, math.nan, float(model.cost @ chosen.values), chosen.outcome.solver,
                        first.outcome.seconds + second.outcome.seconds)


def fallen_back(model: FleetModel, outcome: SolveOutcome, start: np.ndarray | None,
                options: SolveOptions, greedy: bool = True) -> SolveOutcome:
    """The plan of a solve that found none in time: its start, else the greedy plan
    (``greedy_fallback.greedy_plan``, when ``greedy``), labelled ``time_limit`` with the
    solve's bound; ``outcome`` itself when there is neither."""
    plan = start if start is not None or not greedy else \
        greedy_plan(model, options, LAST_CHANCE_S)
    if plan is None:
        return outcome
    model.values = plan
    objective = float(model.cost @ plan)
    return dataclasses.replace(outcome, status="time_limit", objective=objective,
                               gap=gap_between(objective, outcome.bound))


def solve_fleet(model: FleetModel, options: SolveOptions, deadline: Deadline | None = None, *,
                start: np.ndarray | None = None) -> SolveOutcome:
    """Solve ``model`` with the strategy its structure allows (see module docstring).
    ``start``: a feasible plan of ``model`` (all its columns) to begin from; the whole model's
    solve takes it as its incumbent and the reserved-first solve as its first plan (the
    separable solve makes its own start from the LP)."""
    deadline = deadline or Deadline(options.time_limit_s)
    n_periods = len(model.problem.periods)
    if n_periods == 1 or model.elastic or model.program.n_rows == 0:
        return solve_whole(model, options, deadline, start=start)
    if is_separable(model.problem):
        return solve_separable(model, options, deadline)
    first = None
    if model.program.n_cols <= WHOLE_MODEL_COLUMNS:
        # a limit too short to share is the whole MILP's alone, as it always was
        share = WHOLE_FIRST_SHARE \
            if deadline.remaining() * (1 - WHOLE_FIRST_SHARE) >= LINKED_MIN_S else 1.0
        whole_deadline = Deadline(deadline.share(share))
        if start is None:
            start = rounded_lp_start(model, options, whole_deadline)
        first = solve_whole(model, options, whole_deadline, start=start)
        if first.status in ("optimal", "infeasible") or deadline.remaining() < LINKED_MIN_S:
            return first
    linked = ReservedFirst(model, None, options, deadline)
    linked.whole_tried_first = first is not None
    if first is not None:  # the whole MILP's plan and bound, not proven in its share
        if math.isfinite(first.bound):
            linked.bound = first.bound
        start = model.values if model.values is not None else start
    if start is not None and model.program.violation(start) <= 1e-6:
        linked.offer(start)
    if not _cut_by_periods(model):
        return linked.solve()
    linked.deadline = Deadline(deadline.share(START_TIME_SHARE))
    linked.whole_milp_deadline = deadline  # the rest is the whole MILP's
    linked.solve()  # which tries the greedy plan when it has no other
    outcome = solve_whole(model, options, deadline, start=linked.best, greedy=False)
    if model.values is None and linked.best is not None:  # the whole MILP was not run
        outcome = linked.outcome()
    if math.isfinite(linked.bound) and not linked.bound <= outcome.bound:
        outcome = dataclasses.replace(outcome, bound=linked.bound,
                                      gap=gap_between(outcome.objective, linked.bound))
    return dataclasses.replace(outcome, seconds=deadline.elapsed())


def rounded_lp(model: FleetModel, options: SolveOptions, deadline: Deadline, lp_share: float,
               rounding_share: float) -> tuple[Result, np.ndarray | None]:
    """The model's LP relaxation, within ``lp_share`` of the time left, and its rounded-up plan
    (``rounding.rounded_within_limits``), within ``rounding_share`` of the time then left;
    the plan is None when the LP is not solved to optimality or no rounding keeps every row."""
    lp = open_solver(model.program, model.cost, options).solve(
        time_limit_s=max(deadline.share(lp_share), LAST_CHANCE_S), mip_gap=options.mip_gap,
        relax=True)
    if lp.values is None or lp.outcome.status != "optimal":
        return lp, None
    return lp, rounded_within_limits(model, lp.values, options, deadline.share(rounding_share))


def rounded_lp_start(model: FleetModel, options: SolveOptions,
                     deadline: Deadline) -> np.ndarray | None:
    """The rounded-up LP plan (:func:`rounded_lp`) as a small linked model's first incumbent,
    within :data:`START_LP_SHARE` of the time for each step; None without one. From it HiGHS
    proves the example plan's merged MILP (219 columns) in 0.45 s instead of 0.85 s, its root
    heuristics no longer searching for a first plan (same plan, same gap target)."""
    return rounded_lp(model, options, deadline, START_LP_SHARE, START_LP_SHARE)[1]


def solve_separable(model: FleetModel, options: SolveOptions, deadline: Deadline) -> SolveOutcome:
    """Every period on its own, each started from the rounded-up LP plan and never reported
    worse than it: a period whose share of the time runs out keeps the LP's plan rather than
    the first incumbent branch and bound found. The LP's value bounds the whole from below; an
    infeasible LP answers ``infeasible`` at once."""
    floor = floor_bound(model, options, deadline.share(FLOOR_SHARE))
    lp, start = rounded_lp(model, options, deadline, LP_TIME_SHARE, ROUNDING_SHARE)
    if lp.outcome.status == "infeasible":  # no fractional plan, so no period has a plan either
        model.values = None
        return dataclasses.replace(lp.outcome, seconds=deadline.elapsed())
    lp_optimal = lp.values is not None and lp.outcome.status == "optimal"
    # without the LP in time, the greedy plan: periods the deadline leaves unsolved keep it
    if start is None:
        start = greedy_plan(model, options, deadline.share(COMPLETION_SHARE))
    programs = PeriodPrograms.of(model)
    task = PeriodTask(model.cost, split_by_pool=True)
    run = solve_periods(programs, task, options, deadline, start=start, keep_start=True)
    if not run.complete():
        model.values = None
        return run.outcome(math.nan)
    values = run.values
    if start is not None:
        values = cheaper_by_period(programs, model.cost, values, start)
    model.values = values
    outcome = run.outcome(float(model.cost @ values))
    # the best of the periods' summed bounds (NaN when one kept its start), the LP's, the floor's
    bound = max((b for b in (outcome.bound, lp.outcome.bound if lp_optimal else math.nan, floor)
                 if math.isfinite(b)), default=math.nan)
    if math.isfinite(bound) and not bound <= outcome.bound:
        outcome = dataclasses.replace(outcome, bound=bound,
                                      gap=gap_between(outcome.objective, bound))
    if outcome.status == "time_limit" and outcome.gap <= options.mip_gap:  # proven in sum
        outcome = dataclasses.replace(outcome, status="optimal")
    return outcome


def cheaper_by_period(programs: PeriodPrograms, cost: np.ndarray, values: np.ndarray,
                      start: np.ndarray) -> np.ndarray:
    """``values`` with each period's columns taken from ``start`` where that period costs less
    there (periods of a separable model share no column)."""
    out = values.copy()
    for part in programs.parts.values():
        cols = part.cols
        if cost[cols] @ start[cols] < cost[cols] @ values[cols] - 1e-9:
            out[cols] = start[cols]
    return out


def _cut_by_periods(model: FleetModel) -> bool:
    """True when a family's rows are left out of period programs (a monthly budget): period
    plans may then break them, and the whole MILP decides."""
    table = model.constraint_table()
    return bool((~table["family"].map(
        lambda name: FAMILY[name].in_period_subproblems)).any())
