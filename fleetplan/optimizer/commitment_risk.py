"""What each commitment risks: expected and P90 cost, cost-at-risk, utilisation per scenario,
and the value of the stochastic solution.

A commitment option is a first stage: reserved replicas per configuration and pricing type
(reserved terms, and purchases where the plan may buy servers: both are held for the horizon
whatever the outcome; ``reserved_gpus`` counts both).
Each option is priced by re-solving the stochastic problem with that first stage fixed, so the
recourse (on-demand and spot capacity) is chosen per scenario as it would be once the outcome
is known. Options: the stochastic plan's own commitment, the P50-only plan's (the plan made as
if the median demand scenario were certain), the P90-only plan's, and fractions of the P90-only
plan's reserved replicas between zero and all of them (:data:`COMMITTED_SHARES`; zero is no
commitment at all, an option even when the P90-only plan is not found). Options that commit the
same replicas share one pricing. The stochastic plan's own commitment also has the plan's own
solution as a recourse: when its re-solve finds none in its time, the option is priced from the
plan itself (status ``plan``), so it always has a price. A re-solve that found a recourse is
kept even when the plan's own is cheaper, so that the options, the VSS above all, compare
recourses found the same way (an LP rounded up against the plan's MILP would inflate the VSS
by the rounding).

The whole table is given ``solver.time_limit_s``, shared evenly by the options; an option whose
recourse was not proven within ``solver.mip_gap`` in its share says ``time_limit`` (its costs
are those of the recourse found, possibly above the best), one without any plan
``no_solution`` (NaN costs). A model too large to solve whole (more than
:data:`WHOLE_OPTION_COLUMNS` columns) prices every option by its LP relaxation rounded
up to whole replicas (``lp_rounded``): one quick solve per option, the same method for all, so
the options compare like with like, but each cost may sit above the best recourse by the
rounding, and the stochastic option's above the plan's own. The options' models stop building
at the table's deadline; when the options' own model is not built in time, only the stochastic
option is priced, from the plan itself, and the others are ``no_solution``.

Definitions (per option, costs per month of the horizon):
    expected: sum over scenarios of probability x cost; P90 cost: the smallest scenario cost
    whose cumulative probability reaches 0.9; CVaR: the mean cost of the worst 1 - alpha of
    outcomes (``stochastic_model.cvar_usd``); cost-at-risk: P90 cost minus expected cost (how
    much a bad year costs beyond the budgeted expectation); utilisation: the share of committed
    GPU-hours carrying load in that scenario. VSS (value of the stochastic solution [1]): the
    P50-only option's expected cost minus the stochastic plan's, both with recourse re-solved
    per scenario; never negative up to the solver's gap.

References:
    [1] J. R. Birge, "The value of the stochastic solution in stochastic linear programs with
        fixed recourse", Mathematical Programming 24 (1982) 314-325.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import LINKING_PRICING
from fleetplan.optimizer.decomposition import solve_fleet
from fleetplan.optimizer.dominance import prune_dominated
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.milp import BuildStopped, FleetModel, build_model
from fleetplan.optimizer.period_merging import merge_identical_periods
from fleetplan.optimizer.reserved_candidates import reserved_plan, reserved_rows
from fleetplan.optimizer.rounding import rounded_up
from fleetplan.optimizer.solve_results import Deadline
from fleetplan.optimizer.solver import SolveOptions, open_solver
from fleetplan.optimizer.stochastic_model import (
    commitment_utilization,
    cost_quantile,
    cvar_usd,
    reserved_replicas,
    scenario_costs,
)
from fleetplan.optimizer.stochastic_problem import (
    demand_quantile_scenario,
    has_scenarios,
    outcome_problem,
)

logger = logging.getLogger(__name__)

#: Largest model whose options' recourse is solved as a MILP, its first stage fixed [columns];
#: a larger one's is its LP relaxation rounded up (``lp_rounded``).
WHOLE_OPTION_COLUMNS = 5_000

#: Shares of the P90-only plan's reserved replicas offered as commitment options.
COMMITTED_SHARES = (0.0, 0.25, 0.5, 0.75)

#: Quantile of the cost distribution reported as "P90 cost".
P90 = 0.9

#: Columns of the commitments table (one row per option and scenario).
COLUMNS = ("option", "status", "reserved_gpus", "scenario", "probability", "usd_per_month",
           "recourse_usd_per_month", "utilization", "first_stage_usd_per_month",
           "expected_usd_per_month", "p90_usd_per_month", "cvar_usd_per_month",
           "cost_at_risk_usd_per_month", "over_stochastic_usd_per_month")


def first_stage(model: FleetModel, values: np.ndarray) -> pd.DataFrame:
    """The first stage of a solved model, reserved terms and purchases: config, pricing_type,
    replicas."""
    return reserved_replicas(model, values)[["config", "pricing_type", "replicas"]]


def committed_values(model: FleetModel, commitment: pd.DataFrame) -> np.ndarray:
    """One reserved count per reserved replica row of ``model`` (0 where not committed)."""
    keys = ["config", "pricing_type"]
    rows = reserved_rows(model)[keys].merge(commitment, on=keys, how="left")
    return rows["replicas"].fillna(0.0).to_numpy(dtype=float)


def solve_committed(model: FleetModel, commitment: pd.DataFrame, options: SolveOptions,
                    seconds: float) -> tuple[np.ndarray | None, str]:
    """Values of the cheapest plan found with the first stage fixed to ``commitment`` (None
    when none was found in ``seconds``) and how it was found: the solver's status, or
    ``lp_rounded`` for a model too large to solve whole (its LP relaxation rounded up to whole
    replicas: a feasible recourse, costing at most the rounding above the best)."""
    counts = committed_values(model, commitment)
    fixed = reserved_plan(model, counts)
    solver = open_solver(model.program, model.cost, options)
    solver.set_col_bounds(fixed["cols"], fixed["values"], fixed["values"])
    whole = model.program.n_cols <= WHOLE_OPTION_COLUMNS
    result = solver.solve(time_limit_s=max(seconds, 0.05), mip_gap=options.mip_gap,
                          relax=not whole)
    if result.values is None:
        return None, "no_solution"
    if whole:
        return result.values, result.outcome.status
    values = rounded_up(model, result.values, reserved=counts, options=options,
                        seconds=seconds - result.outcome.seconds, hold_reserved=True)
    return (values, "lp_rounded") if values is not None else (None, "no_solution")


def single_outcome_commitment(problem: Problem, scenario: str, options: SolveOptions,
                              seconds: float) -> pd.DataFrame | None:
    """The first stage of the plan made as if ``scenario`` were certain (None when no plan
    was found in ``seconds``, or none are left)."""
    if seconds <= 0:
        return None
    deadline = Deadline(seconds)
    try:
        model = build_model(outcome_problem(problem, scenario), cost_cover=False,
                            time_left=deadline.remaining)
    except BuildStopped:
        return None
    outcome = solve_fleet(model, options, deadline)
    if not outcome.has_solution or model.values is None:
        return None
    return first_stage(model, model.values)


def option_rows(model: FleetModel, values: np.ndarray | None, status: str, name: str,
                alpha: float) -> pd.DataFrame:
    """One row per scenario of one option (NaN costs when it has no plan)."""
    months = model.problem.horizon_months
    costs = scenario_costs(model, values if values is not None else np.zeros(
        model.program.n_cols))
    if values is None:
        costs[["first_stage_usd", "recourse_usd", "usd"]] = math.nan
    reserved = reserved_replicas(model, values if values is not None else np.zeros(
        model.program.n_cols))
    usd, probability = costs["usd"].to_numpy(), costs["probability"].to_numpy(float)
    expected = float(np.dot(usd, probability))
    p90 = cost_quantile(usd, probability, P90)
    utilization = commitment_utilization(model, values) if values is not None else None
    return pd.DataFrame({
        "option": name, "status": status,
        "reserved_gpus": float((reserved["replicas"] * reserved["tp"]).sum()),
        "scenario": costs["scenario"], "probability": probability,
        "usd_per_month": usd / months, "recourse_usd_per_month": costs["recourse_usd"] / months,
        "utilization": np.nan if utilization is None else
        costs["scenario"].map(utilization).to_numpy(float),
        "first_stage_usd_per_month": costs["first_stage_usd"] / months,
        "expected_usd_per_month": expected / months, "p90_usd_per_month": p90 / months,
        "cvar_usd_per_month": cvar_usd(usd, probability, alpha) / months,
        "cost_at_risk_usd_per_month": (p90 - expected) / months})


def option_names(problem: Problem) -> list[str]:
    """The options' names in the table's order: the stochastic plan's, the P50-only plan's,
    the shares of the P90-only plan's reserved replicas, the P90-only plan's."""
    return ["stochastic", f"P50 only ({demand_quantile_scenario(problem, 0.5)})",
            *(f"{share:.0%} of P90 reserved" for share in COMMITTED_SHARES),
            f"P90 only ({demand_quantile_scenario(problem, P90)})"]


def commitment_options(problem: Problem, chosen: pd.DataFrame, options: SolveOptions,
                       deadline: Deadline) -> dict[str, pd.DataFrame | None]:
    """Named first stages (:func:`option_names`): the stochastic plan's, the P50-only and
    P90-only plans', and shares of the P90-only plan's reserved replicas (rounded down to
    whole replicas); None for a single-outcome plan not found within the deadline."""
    stochastic, p50_name, *share_names, p90_name = option_names(problem)
    p50 = single_outcome_commitment(problem, demand_quantile_scenario(problem, 0.5), options,
                                    deadline.share(0.25))
    p90 = single_outcome_commitment(problem, demand_quantile_scenario(problem, P90), options,
                                    deadline.share(0.3))
    nothing = chosen.iloc[:0].assign(replicas=0.0)
    shares = {name: nothing if share == 0 else (  # none of the P90-only plan's: no commitment
        None if p90 is None else p90.assign(replicas=np.floor(p90["replicas"] * share + 1e-9)))
        for name, share in zip(share_names, COMMITTED_SHARES, strict=True)}
    return {stochastic: chosen, p50_name: p50, **shares, p90_name: p90}


def commitment_key(commitment: pd.DataFrame) -> tuple:
    """The reserved replicas of a first stage as a sorted tuple (zero counts left out): two
    options with the same key commit to the same thing."""
    held = commitment[commitment["replicas"] > 0.5]
    return tuple(sorted(zip(held["config"], held["pricing_type"], held["replicas"].round(),
                            strict=True)))


def resolved_or_own(resolved: pd.DataFrame, own: pd.DataFrame | None) -> pd.DataFrame:
    """The stochastic option's rows: its re-solved recourse, or the plan's own solution
    (``own``, status ``plan``) when the re-solve found none in its time."""
    if own is None or math.isfinite(float(resolved["expected_usd_per_month"].iloc[0])):
        return resolved
    return own


def with_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with each option's expected cost over the stochastic option's, in the order
    of :data:`COLUMNS`."""
    stochastic = table.loc[table["option"] == "stochastic", "expected_usd_per_month"]
    table["over_stochastic_usd_per_month"] = table["expected_usd_per_month"] - float(
        stochastic.iloc[0])
    return table[list(COLUMNS)]


def commitment_table(problem: Problem, chosen: pd.DataFrame, options: SolveOptions,
                     seconds: float, own: pd.DataFrame | None = None,
                     expected_build_s: float = 0.0) -> pd.DataFrame:
    """The commitments table (:data:`COLUMNS`) for a problem with demand scenarios, given the
    stochastic plan's first stage ``chosen`` (config, pricing_type, replicas) and, as
    ``own``, that option's rows priced from the plan's own solution (see
    :func:`resolved_or_own`). With ``own``, a model not built within ``seconds``, or expected
    to take longer (``expected_build_s`` [s], the plan's own model's), prices no option but
    the plan's own (:func:`unpriced_table`)."""
    deadline = Deadline(seconds)
    problem, _ = merge_identical_periods(problem)  # the same costs, as the plan was solved
    own = None if own is None or own.empty else own
    try:  # without the plan's own price, the stochastic option's model is built anyway
        model = build_model(problem.with_changes(cvar_weight=0.0), cost_cover=False,
                            time_left=None if own is None else deadline.remaining,
                            expected_s=expected_build_s)
    except BuildStopped as stopped:
        logger.info("commitment options not priced: their model stopped building after its "
                    "%s at %.1f s", stopped.after, deadline.elapsed())
        return unpriced_table(problem, own)
    found = commitment_options(problem, chosen, options, deadline)
    parts, priced = [], {}
    for position, (name, commitment) in enumerate(found.items()):
        same = None if commitment is None else priced.get(commitment_key(commitment))
        if same is not None:  # one first stage, one recourse: priced once
            parts.append(same.assign(option=name))
            continue
        left = deadline.remaining() / max(len(found) - position, 1)
        # the stochastic plan's own first stage (position 0) is always priced: the others
        # are compared with it
        if commitment is None or (left <= 0 and position > 0):
            values, status = None, "no_solution"
        else:
            values, status = solve_committed(model, commitment, options, left)
        rows = option_rows(model, values, status, name, problem.cvar_alpha)
        parts.append(resolved_or_own(rows, own) if position == 0 else rows)
        if values is not None or position == 0:
            priced[commitment_key(commitment)] = parts[-1]
    return with_comparison(pd.concat(parts, ignore_index=True))


def unpriced_table(problem: Problem, own: pd.DataFrame) -> pd.DataFrame:
    """The commitments table when the options' model was not built in time: the stochastic
    option priced from the plan's own solution (``own``), every other option ``no_solution``
    with NaN figures."""
    scenarios = problem.periods.drop_duplicates("scenario")
    blank = pd.DataFrame({column: math.nan for column in COLUMNS}, index=range(len(scenarios)))
    blank = blank.assign(status="no_solution", scenario=scenarios["scenario"].to_numpy(),
                         probability=scenarios["probability"].to_numpy(float))
    stochastic, *others = option_names(problem)
    return with_comparison(pd.concat([own.assign(option=stochastic),
                                      *(blank.assign(option=name) for name in others)],
                                     ignore_index=True))


def value_of_stochastic_solution(table: pd.DataFrame) -> float:
    """VSS [USD/month]: the P50-only option's expected cost minus the stochastic plan's."""
    p50 = table[table["option"].str.startswith("P50 only")]
    return float(p50["over_stochastic_usd_per_month"].iloc[0]) if len(p50) else math.nan


def add_commitments(plan: FleetPlan, problem: Problem, options: SolveOptions) -> FleetPlan:
    """``plan`` with its commitments table and, in ``assumptions["stochastic"]``, the demand
    scenarios, the objective and the VSS; unchanged without demand scenarios or a plan."""
    if not has_scenarios(problem) or not plan.feasible:
        return plan
    fleet = plan.fleet
    reserved = fleet[fleet["pricing_type"].isin(LINKING_PRICING)]  # terms and purchases
    chosen = pd.DataFrame({"config": reserved["config"], "pricing_type": reserved["pricing_type"],
                           "replicas": reserved["replicas_peak"].astype(float)})
    # the configurations the plan was chosen among: a dominated one never prices an option lower
    problem, _ = prune_dominated(problem, plan.assumptions.get("dominated_configs"))
    plan.commitments = commitment_table(problem, chosen, options, options.time_limit_s,
                                        own=plan.own_option,
                                        expected_build_s=plan.model_build_s)
    unpriced = plan.commitments.loc[plan.commitments["status"] == "no_solution", "option"]
    if not unpriced.empty:
        plan.messages.append(
            f"commitment options not priced within the time limit: "
            f"{', '.join(unpriced.unique())}; raise solver.time_limit_s to price them")
    scenarios = problem.periods.drop_duplicates("scenario")
    plan.assumptions["stochastic"] = {
        "scenarios": dict(zip(scenarios["scenario"], scenarios["probability"], strict=True)),
        "objective": "cvar" if problem.cvar_weight > 0 else "expected",
        "cvar_alpha": problem.cvar_alpha, "cvar_weight": problem.cvar_weight,
        "p50_scenario": demand_quantile_scenario(problem, 0.5),
        "vss_usd_per_month": value_of_stochastic_solution(plan.commitments)}
    return plan
