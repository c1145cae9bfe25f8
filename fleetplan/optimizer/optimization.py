"""From a problem (or a scenario) to a FleetPlan: solve, fall back to the elastic model when
demand cannot be met, explain, and price the binding limits."""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field

import pandas as pd

from fleetplan.optimizer.commitment_risk import option_rows
from fleetplan.optimizer.constraint_families import verify_plan
from fleetplan.optimizer.decomposition import solve_fleet
from fleetplan.optimizer.demand_floor import FLOOR_NOTE, demand_floor_usd, floored
from fleetplan.optimizer.dominance import prune_dominated
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.fleet_simplicity import models_no_quant_serves, no_quant_message
from fleetplan.optimizer.infeasibility import explain_unmet, relaxed_unmet
from fleetplan.optimizer.marginal_values import COLUMNS as BINDING_COLUMNS
from fleetplan.optimizer.marginal_values import (
    BasePlan,
    ReSolves,
    begin_marginal_values,
    priced_values,
    start_slo_pricing,
)
from fleetplan.optimizer.milp import BuildStopped, build_model
from fleetplan.optimizer.period_merging import merge_identical_periods, spread_periods
from fleetplan.optimizer.plan_summary import usd
from fleetplan.optimizer.problem_checks import check_problem
from fleetplan.optimizer.solution_tables import assemble_plan, plan_without_solution
from fleetplan.optimizer.solve_results import Deadline
from fleetplan.optimizer.solver import SolveOptions

logger = logging.getLogger(__name__)

#: A gap this far beyond the accepted one is round-off, not a plan stopped short: an LP bound
#: from CBC sat 4.6e-8 (relative) under the optimum it proved at ``mip_gap: 0``.
GAP_ROUND_OFF = 1e-6

#: Least time an infeasible problem's elastic model gets, even past the deadline [s]: its
#: plan names the unmet demand, which no other answer does.
ELASTIC_MIN_S = 1.0

#: What an infeasible plan says when its unmet demand is the elastic LP relaxation's
#: (``infeasibility.relaxed_unmet``): the MILP found no whole-replica plan in time.
RELAXED_UNMET_MESSAGE = (
    "no whole-replica plan was found within the time limit: the unmet demand shown is the LP "
    "relaxation's (fractional replicas), and every plan leaves at least as much unmet in all")

#: Share of ``solver.time_limit_s`` kept for the work after the solve (the plan's tables,
#: spreading merged periods, the full re-check), so the whole call ends within the limit:
#: 0.2-0.3 s of a 10 s limit on bench_optimizer.py's case (b).
AFTER_SOLVE_SHARE = 0.03

#: Largest model whose looser SLOs are priced while the base plan is solved [columns]. Those
#: re-solves do not depend on the base plan, and on models of the example's size (488 columns)
#: they would otherwise wait for it; a larger model keeps both cores for its own solve.
EARLY_PRICING_COLUMNS = 5_000

#: HiGHS threads of a solve that runs beside another (the base plan beside the looser SLOs'
#: re-solves, re-solves two at a time) unless the scenario sets ``solver.threads``: two solves
#: of one thread each fill the 2-core machines this is sized for. With HiGHS's default threads
#: the example plan took 1.88-1.89 s, against 1.72-1.76 s (``bench_example_plan.py
#: --side-by-side-threads 0``); alone, a solve keeps HiGHS's default.
SIDE_BY_SIDE_THREADS = 1


#: Ratio of a time-limited plan's cost to its bound from which the summary warns that the
#: cost is no estimate of the best plan's.
FAR_FROM_BOUND = 2.0


@dataclass
class WhatIfOptions:
    """enabled: re-solve to price binding limits; tpot_factor: looser TPOT SLO tried (x SLO);
    relaxed_candidates: candidates at the looser SLO (from the engine); time_limit_s [s]."""

    enabled: bool = True
    tpot_factor: float = 1.5
    relaxed_candidates: pd.DataFrame = field(default_factory=pd.DataFrame)
    time_limit_s: float = 10.0


def optimize_problem(problem: Problem, options: SolveOptions | None = None,
                     what_if: WhatIfOptions | None = None, **metadata) -> FleetPlan:
    """Solve ``problem`` within ``options.time_limit_s`` for the whole call; an infeasible one
    is answered by the elastic model with reasons. The plan is re-checked against every
    constraint family at full resolution (every period of ``problem``) before it is returned."""
    options = options or SolveOptions()
    deadline = solve_deadline(options)
    check_problem(problem)
    original = problem
    problem, representative = merge_identical_periods(problem)
    finish = PlanFinish(original, representative)
    plan = _solve(problem, options, what_if or WhatIfOptions(enabled=False), metadata, deadline,
                  finish)
    return finish(plan)


class PlanFinish:
    """A solved plan spread from the merged periods to every period of the original problem
    and re-checked there (``recheck``), once: a plan with marginal values is finished while
    the worker begins its re-solves, which do not change it."""

    def __init__(self, original: Problem, representative: pd.Series) -> None:
        self.original, self.representative = original, representative
        self.finished: FleetPlan | None = None

    def __call__(self, plan: FleetPlan) -> FleetPlan:
        if plan is not self.finished:
            plan = spread_periods(plan, self.representative, self.original.periods,
                                  self.original.demand)
            self.finished = recheck(plan, self.original)
        return self.finished


def side_by_side(options: SolveOptions) -> SolveOptions:
    """``options`` for a solve that runs beside another: the scenario's ``solver.threads`` when
    it sets them, else :data:`SIDE_BY_SIDE_THREADS`."""
    if options.threads is not None:
        return options
    return dataclasses.replace(options, threads=SIDE_BY_SIDE_THREADS)


def solve_deadline(options: SolveOptions) -> Deadline:
    """The solve's share of the call's time limit (the rest is for the work after it)."""
    return Deadline(options.time_limit_s * (1.0 - AFTER_SOLVE_SHARE))


def plan_status(outcome, options: SolveOptions) -> str:
    """A solved plan's status: ``time_limit`` when its gap exceeds the accepted one by more
    than :data:`GAP_ROUND_OFF`."""
    status = outcome.status if outcome.has_solution else "no_solution"
    if status == "optimal" and outcome.gap > options.mip_gap + GAP_ROUND_OFF:
        return "time_limit"
    return status


def recheck(plan: FleetPlan, problem: Problem) -> FleetPlan:
    """A plan that breaks a limit in some period is never reported as feasible."""
    if not plan.feasible:
        return plan
    problems = verify_plan(plan, problem)
    plan.assumptions["recheck"] = "passed" if not problems else problems[:20]
    if problems:
        logger.error("the plan breaks %d limits: %s", len(problems), problems[:3])
        plan.status = "no_solution"
        plan.messages.append(f"the plan failed its re-check in every period: {problems[0]}")
    return plan


def _solve(problem: Problem, options: SolveOptions, what_if: WhatIfOptions,
           metadata: dict, deadline: Deadline, finish: PlanFinish) -> FleetPlan:
    metadata.setdefault("assumptions", {})
    metadata["assumptions"] = {**problem_assumptions(problem), **metadata["assumptions"]}
    pruned, dropped = prune_dominated(problem)
    metadata["assumptions"]["dominated_configs"] = dropped
    try:  # the cost-cover cut's small MILPs come from one model, built once (no variants)
        model = build_model(pruned, time_left=deadline.remaining)
    except BuildStopped as stopped:
        return unbuilt_plan(pruned, stopped, deadline, metadata)
    resolve_options = side_by_side(SolveOptions(what_if.time_limit_s, options.mip_gap,
                                                options.threads, options.solver))
    unservable = models_no_quant_serves(model)
    if unservable:  # no plan exists, though the LP relaxation has one: no solve proves it
        plan = _elastic_plan(problem, pruned, options, metadata, deadline, model.build_s)
        plan.messages.insert(0, no_quant_message(model.problem, unservable))
        return plan
    with ReSolves(resolve_options, deadline) as resolves:  # starts no thread until given work
        slo_pricing, base_options = None, options
        if what_if.enabled and model.program.n_cols <= EARLY_PRICING_COLUMNS:
            slo_pricing = start_slo_pricing(resolves, problem, what_if.relaxed_candidates)
            base_options = side_by_side(options)
        floor = demand_floor_usd(model)  # before the solve: variants change the model
        solved = solve_fleet(model, base_options, deadline)
        outcome = floored(solved, floor, options.mip_gap)
        if outcome.status == "infeasible":
            resolves.close()  # no plan to compare with: drop the re-solves begun
            return _elastic_plan(problem, pruned, options, metadata, deadline, model.build_s)
        pending = None
        if outcome.has_solution and what_if.enabled:  # the worker takes them at once
            pending = begin_marginal_values(
                model, resolves, slo_problem=problem,
                relaxed_candidates=what_if.relaxed_candidates, slo_pricing=slo_pricing)
        status = plan_status(outcome, options)
        plan = assemble_plan(model, outcome, status, **metadata)
        plan.candidates, plan.model_build_s = problem.candidates, model.build_s
        if outcome is not solved:
            plan.assumptions["bound"] = FLOOR_NOTE
        if outcome.has_solution and "scenario" in problem.periods:
            plan.own_option = option_rows(model, model.values, "plan", "stochastic",
                                          problem.cvar_alpha)
        if pending is not None:
            plan = finish(plan)  # while the worker solves the re-solves queued
            base = BasePlan(plan.usd_per_month, plan.gap, resolve_options, deadline)
            plan.binding_constraints = priced_values(resolves, pending, base,
                                                     what_if.tpot_factor)
    if plan.binding_constraints.empty:
        plan.binding_constraints = pd.DataFrame(columns=BINDING_COLUMNS)
    if status == "time_limit" and math.isfinite(plan.gap):
        plan.messages.append(
            f"time_limit: stopped at a gap of {plan.gap:.2%} to the bound of "
            f"{usd(plan.bound_usd / problem.horizon_months)} per month, above the accepted "
            f"{options.mip_gap:.2%}; raise solver.time_limit_s for a proven plan"
            + ("; the bound is the demand floor, as the solve proved none higher in time"
               if plan.assumptions.get("bound") == FLOOR_NOTE else "")
            + far_from_bound(plan.objective_usd, plan.bound_usd))
    elif status == "time_limit":
        plan.messages.append(
            "time_limit: no bound was proven in time, so how far this plan is from the best "
            "is unknown; raise solver.time_limit_s for a proven plan")
    elif status == "no_solution":
        plan.messages.append(no_plan_message(plan, problem))
    return plan


def unbuilt_plan(problem: Problem, stopped: BuildStopped, deadline: Deadline,
                 metadata: dict) -> FleetPlan:
    """The ``no_solution`` plan of a model not built within the time limit, saying how large
    it was and what would let it be built."""
    periods = len(problem.periods)
    plan = _stopped_plan(problem, stopped, deadline, metadata, "no_solution")
    plan.messages.append(
        f"no plan: the model did not finish building within the solve's {deadline.seconds:.1f} "
        f"s (stopped after its {stopped.after}, {deadline.elapsed():.1f} s in, with "
        f"{stopped.columns:,} columns so far for {stopped.routes:,} routes over {periods:,} "
        f"period(s)); raise solver.time_limit_s, or plan fewer periods, workloads or "
        f"configurations")
    return plan


def no_plan_message(plan: FleetPlan, problem: Problem) -> str:
    """What a built model's plan that found no plan in time says: that none was found (not
    that none exists), the bound when known, and what to change."""
    floor = " (the demand floor)" if plan.assumptions.get("bound") == FLOOR_NOTE else ""
    bound = (f"; none can cost less than {usd(plan.bound_usd / problem.horizon_months)} per "
             f"month{floor}") if math.isfinite(plan.bound_usd) else ""
    return (f"no_solution: no plan that keeps every limit was found in the time, nor was one "
            f"proven not to exist{bound}; raise solver.time_limit_s, or loosen a budget or cap "
            f"the fallback plans could not keep")


def far_from_bound(objective: float, bound: float) -> str:
    """The warning a plan that costs at least :data:`FAR_FROM_BOUND` times its bound gets:
    such a plan holds every limit, but its cost is no estimate of the best plan's."""
    if not bound > 0 or objective < FAR_FROM_BOUND * bound:
        return ""
    return (f". This plan costs {objective / bound:.1f} times its bound: it holds every limit, "
            f"but its cost is no estimate of the best plan's")


def _elastic_plan(problem: Problem, pruned: Problem, options: SolveOptions, metadata: dict,
                  deadline: Deadline, like_build_s: float = 0.0) -> FleetPlan:
    """The plan of an infeasible ``problem``: the elastic model, built on ``pruned`` (its
    dominated configurations dropped: a swap that holds every limit serves no less demand),
    and the reasons its unmet demand is unmet. The build, like the elastic solves, gets what
    is left of ``deadline`` or at least :data:`ELASTIC_MIN_S`; one expected to take longer
    (``like_build_s`` [s], the feasible model's build) is not begun."""
    least = Deadline(max(deadline.remaining(), ELASTIC_MIN_S))
    try:  # a model as large as the one just built takes as long: not begun without the time
        model = build_model(pruned, elastic=True, time_left=least.remaining,
                            expected_s=like_build_s)
    except BuildStopped as stopped:
        return _unexplained_plan(problem, stopped, deadline, metadata)
    outcome = solve_fleet(model, options, Deadline(max(deadline.remaining(), ELASTIC_MIN_S)))
    plan = assemble_plan(model, outcome, "infeasible", **metadata)
    plan.candidates = problem.candidates
    plan.binding_constraints = pd.DataFrame(columns=BINDING_COLUMNS)
    relaxed = None if outcome.has_solution else relaxed_unmet(
        model, options, max(deadline.remaining(), ELASTIC_MIN_S))
    if relaxed is not None:
        plan.unmet_demand = relaxed
        plan.messages.append(RELAXED_UNMET_MESSAGE)
    if not plan.unmet_demand.empty:
        hours = plan.unmet_demand["period"].map(problem.periods.set_index("period")["hours"])
        demand = problem.demand[problem.demand["req_s"] > 0]
        all_hours = demand["period"].map(problem.periods.set_index("period")["hours"])
        unmet_share = float((plan.unmet_demand["unmet_req_s"] * hours).sum()
                            / (demand["req_s"] * all_hours).sum())
        plan.unmet_demand, reasons = explain_unmet(  # within the call's time, at least 1 s
            problem, plan.unmet_demand, options, unmet_share,
            max(deadline.remaining(), ELASTIC_MIN_S), pruned)
        plan.messages = [*plan.messages, *reasons]
    elif relaxed is None and not outcome.has_solution:
        plan.messages.append("the elastic model found no plan within the time limit")
    if outcome.has_solution:
        plan.messages += spare_shortfall_messages(model)
    return plan


def _stopped_plan(problem: Problem, stopped: BuildStopped, deadline: Deadline, metadata: dict,
                  status: str) -> FleetPlan:
    """A plan with ``status`` and no solution, for a model whose build ``stopped``."""
    plan = plan_without_solution(problem, stopped.outcome(deadline.elapsed()), status,
                                 **metadata)
    plan.binding_constraints = pd.DataFrame(columns=BINDING_COLUMNS)
    return plan


def _unexplained_plan(problem: Problem, stopped: BuildStopped, deadline: Deadline,
                      metadata: dict) -> FleetPlan:
    """The ``infeasible`` plan of a problem whose elastic model was not built in time: no
    plan exists, but which demand goes unmet is not known."""
    plan = _stopped_plan(problem, stopped, deadline, metadata, "infeasible")
    step = stopped.after if stopped.columns == 0 else f"stopped after its {stopped.after}"
    plan.messages.append(
        f"no plan meets every limit and SLO; the elastic model that names the unmet demand "
        f"was not built in the time left ({step}; {deadline.elapsed():.1f} s of the solve's "
        f"{deadline.seconds:.1f} s spent): raise solver.time_limit_s to see which demand goes "
        f"unmet and why")
    return plan


def spare_shortfall_messages(model) -> list[str]:
    """Workloads whose N+k spares the elastic plan could not keep."""
    short = model.spare_shortfall
    if short.empty:
        return []
    short = short.assign(value=model.value(short))
    short = short[short["value"] > 1e-6]
    worst = short.groupby("workload").agg(k=("redundancy_k", "first"), v=("value", "max"))
    return [f"{w}: cannot keep N+{int(k)} spare replicas within the limits "
            f"(short by up to {v:.2f} replicas)"
            for w, k, v in zip(worst.index, worst["k"], worst["v"], strict=True)]


def problem_assumptions(problem: Problem) -> dict:
    """The numbers every cost in the plan rests on."""
    return {"hours_per_month": problem.hours_per_month,
            "horizon_months": problem.horizon_months,
            "horizon_hours": problem.horizon_hours,
            "target_utilization": problem.target_utilization,
            "budget_usd_per_month": problem.budget_usd_per_month,
            "spot_max_share": problem.spot_max_share,
            **({"config_fixed_usd_per_month": problem.config_fixed_usd_per_month}
               if problem.config_fixed_usd_per_month else {}),
            "notes": list(problem.notes)}


def usd_per_hour(plan: FleetPlan) -> float:
    """Mean fleet cost per hour of the horizon [USD/h]."""
    hours = plan.assumptions.get("horizon_hours", math.nan)
    return plan.objective_usd / hours
