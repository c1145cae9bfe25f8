"""The "stay the course" comparison: what keeping today's fleet would cost instead of the plan.

Staying the course keeps every GPU of ``fleet.current`` until its end (owned servers powered
and hosted for the whole horizon, commitments paid until they end), commits to nothing new (no
reserved terms, no purchases, no spot) and rents on demand whatever today's GPUs cannot serve,
month by month. Today's GPUs serve any configuration of their GPU type, as in the plan; lead
times on on-demand GPUs still hold, change limits do not (nothing is changed on purpose).

Both sides carry the same sunk commitment fees, so the difference is what the plan saves.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import EXISTING_PRICING
from fleetplan.optimizer.current_fleet import months_held, sunk_total_usd
from fleetplan.optimizer.decomposition import solve_fleet
from fleetplan.optimizer.dominance import prune_dominated
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.milp import BuildStopped, build_model
from fleetplan.optimizer.period_merging import merge_identical_periods
from fleetplan.optimizer.solve_results import Deadline
from fleetplan.optimizer.solver import SolveOptions

logger = logging.getLogger(__name__)

#: Status of a comparison whose kept fleet plus on-demand GPUs cannot serve the demand.
UNSERVABLE = "cannot serve the demand"
#: Status of a comparison not solved within its time (nothing is known of its cost).
UNPRICED = "no plan found in time"


def owned_usd_total(problem: Problem) -> float:
    """Running cost of every owned GPU kept for the months it is there [USD]."""
    existing = problem.existing
    if existing.empty:
        return 0.0
    owned = existing[existing["pricing_type"] == "owned"]
    price = problem.offers.set_index(["gpu", "pricing_type"])["usd_per_gpu_hour"]
    per_hour = price.reindex(pd.MultiIndex.from_frame(owned[["gpu", "pricing_type"]])).fillna(0.0)
    hours = months_held(owned, problem.horizon_months) * problem.hours_per_month
    return float((owned["gpus"].to_numpy() * per_hour.to_numpy() * hours).sum())


def kept_fleet_problem(problem: Problem) -> Problem:
    """Today's GPUs (owned ones free: all of them are paid for anyway) and on-demand renting,
    nothing else, no change limits."""
    offers = problem.offers[problem.offers["pricing_type"].isin((*EXISTING_PRICING, "on_demand"))]
    offers = offers.assign(usd_per_gpu_hour=np.where(offers["pricing_type"].isin(EXISTING_PRICING),
                                                     0.0, offers["usd_per_gpu_hour"]))
    return problem.with_changes(offers=offers.reset_index(drop=True),
                                max_changes_per_month=None, min_committed_gpus=None)


def stay_the_course(problem: Problem, plan: FleetPlan, options: SolveOptions) -> dict:
    """Plan and stay-the-course totals over the horizon [USD], both with the sunk fees:
    plan_usd_total, stay_usd_total, sunk_usd_total, saving_usd_total (stay - plan; NaN when
    today's fleet plus on-demand cannot serve the demand, or no plan was found in its time),
    per month and a status (the solver's, or :data:`UNSERVABLE` or :data:`UNPRICED`). The
    comparison's build and solve share ``options.time_limit_s``."""
    sunk = sunk_total_usd(problem)
    months = problem.horizon_months
    deadline = Deadline(options.time_limit_s)  # building counts, as for the plan
    kept, _ = merge_identical_periods(kept_fleet_problem(problem))  # the same costs, as the plan
    kept, _ = prune_dominated(kept)
    try:  # one solve: the cut would cost more than it saves
        model = build_model(kept, cost_cover=False, time_left=deadline.remaining,
                            expected_s=plan.model_build_s)
    except BuildStopped as stopped:
        outcome = stopped.outcome(deadline.elapsed())
    else:
        outcome = solve_fleet(model, options, deadline)
    status = outcome.status if outcome.has_solution else (
        UNSERVABLE if outcome.status == "infeasible" else UNPRICED)
    stay = outcome.objective + owned_usd_total(problem) + sunk if outcome.has_solution \
        else math.nan
    whole = plan.objective_usd + sunk
    logger.debug("stay the course: %s, %.2f USD against the plan's %.2f", status, stay, whole)
    return {"plan_usd_total": whole, "stay_usd_total": stay, "sunk_usd_total": sunk,
            "saving_usd_total": stay - whole, "plan_usd_per_month": whole / months,
            "stay_usd_per_month": stay / months, "status": status}
