"""A scenario, end to end: catalogs and prices, candidates, the MILP, and the FleetPlan."""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fleetplan.catalogs import RESERVED_TERM_MONTHS, Catalogs, load_catalogs
from fleetplan.errors import ScenarioError
from fleetplan.optimizer import candidates as candidate_tables
from fleetplan.optimizer.capacity_profiles import (
    profile_candidates,
    read_profiles,
    uncovered_reasons,
)
from fleetplan.optimizer.commitment_risk import add_commitments
from fleetplan.optimizer.constraint_families import scenario_settings
from fleetplan.optimizer.current_fleet_inputs import replan_tables, replans
from fleetplan.optimizer.demand import cycle_hours, demand_table, plan_periods, workload_buckets
from fleetplan.optimizer.disaggregated_candidates import disaggregated_candidates
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.fleet_problem import (
    Problem,
    configs_of,
    profile_periods,
    start_months,
    term_charge_factors,
)
from fleetplan.optimizer.optimization import WhatIfOptions, optimize_problem
from fleetplan.optimizer.scenario import Scenario
from fleetplan.optimizer.scenario_prices import select_prices
from fleetplan.optimizer.scenario_supply import supply_notes, supply_tables
from fleetplan.optimizer.slo_levels import slo_levels
from fleetplan.optimizer.solve_results import Deadline
from fleetplan.optimizer.solver import SolveOptions
from fleetplan.optimizer.stay_the_course import stay_the_course
from fleetplan.optimizer.stochastic_problem import has_scenarios, with_demand_scenarios

logger = logging.getLogger(__name__)

#: Share of ``solver.time_limit_s`` kept for what follows the plan's own solve: a re-planning
#: scenario's stay-the-course comparison (one more solve, ``stay_the_course.py``) or the
#: commitments table of a plan with demand scenarios (a solve per commitment option,
#: ``commitment_risk.py``); it also gets whatever the plan's own solve leaves of the limit.
FOLLOW_UP_SHARE = 0.2

#: Least share of ``solver.time_limit_s`` the solves get when preparing the scenario (the
#: candidates' performance estimates, the problem's tables) took more of the limit: a call on
#: a scenario that slow to prepare ends past its limit rather than without a plan.
LEAST_SOLVE_SHARE = 0.5

#: Largest share of ``solver.time_limit_s`` kept for the work after the call (``plan_scenario``'s
#: ``kept_s``: a command writing the plan), so a short limit still leaves the solve most of it.
MOST_KEPT_SHARE = 0.25


@dataclass
class PreparedScenario:
    """A scenario turned into optimizer tables, with what the plan must report about them."""

    problem: Problem
    prices: pd.DataFrame
    candidates: pd.DataFrame
    relaxed_candidates: pd.DataFrame
    capacity_source: str
    catalog_versions: dict = field(default_factory=dict)


def _gpu_table(scenario: Scenario, gpu_ids: list[str], catalog_gpus: pd.DataFrame) -> pd.DataFrame:
    """gpu, gpus_per_node (1 unless buying whole nodes), max_gpus (NaN = no cap)."""
    options = scenario.fleet.gpus
    catalog_node = catalog_gpus["gpus_per_node"].reindex(gpu_ids).fillna(1).astype(int).to_numpy()
    own_node = np.array([o.gpus_per_node or 0 for o in options])
    node = np.where(own_node > 0, own_node, catalog_node if scenario.fleet.whole_nodes else 1)
    return pd.DataFrame({"gpu": gpu_ids, "gpus_per_node": node.astype(int),
                         "max_gpus": gpu_caps(scenario)})


def gpu_caps(scenario: Scenario) -> list[float]:
    """Each allowed GPU type's availability cap [GPUs], NaN for none, in ``fleet.gpus`` order."""
    return [math.nan if o.max_gpus is None else float(o.max_gpus) for o in scenario.fleet.gpus]


def _offer_table(scenario: Scenario, gpu_ids: list[str], prices: pd.DataFrame) -> pd.DataFrame:
    caps = pd.DataFrame([(gpu, pricing, float(cap))
                         for option, gpu in zip(scenario.fleet.gpus, gpu_ids, strict=True)
                         for pricing, cap in (option.max_gpus_by_pricing or {}).items()],
                        columns=["gpu", "pricing_type", "max_gpus"])
    offers = prices[["gpu", "pricing_type", "usd_per_gpu_hour"]].merge(
        caps, on=["gpu", "pricing_type"], how="left")
    return offers.astype({"max_gpus": float})


def _with_offers(offers: pd.DataFrame, more: pd.DataFrame) -> pd.DataFrame:
    """Offers with ``more`` (today's fleet, purchases) in place of any for the same (gpu,
    pricing_type)."""
    if more.empty:
        return offers
    joined = pd.concat([offers, more], ignore_index=True).drop_duplicates(
        ["gpu", "pricing_type"], keep="last")
    return joined.astype({"usd_per_gpu_hour": float, "max_gpus": float}).reset_index(drop=True)


def _within_terms(scenario: Scenario, prices: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Prices without reserved terms longer than the horizon when the scenario forbids them
    (``fleet.reserved_beyond_horizon: forbid``), and notes naming what was left out."""
    horizon = scenario.fleet.horizon_months
    terms = prices["pricing_type"].map(RESERVED_TERM_MONTHS)
    beyond = (terms > horizon).to_numpy() & (scenario.fleet.reserved_beyond_horizon == "forbid")
    notes = [f"{pricing} not used: its {RESERVED_TERM_MONTHS[pricing]}-month term is longer "
             f"than the {horizon}-month horizon (fleet.reserved_beyond_horizon: forbid)"
             for pricing in dict.fromkeys(prices.loc[beyond, "pricing_type"])]
    kept = prices[~beyond].reset_index(drop=True)
    if kept.empty:
        message = ("fleet.reserved_beyond_horizon: forbid leaves no pricing type; allow "
                   "on_demand or spot, or a reserved term within the horizon")
        raise ScenarioError(message)
    return kept, notes


def _check_profile_nodes(profiles: pd.DataFrame, node_gpus: pd.Series) -> None:
    """A measured replica larger than its GPU's node is refused: tensor parallelism stays inside
    a node, and the node rows could not place it."""
    limit = profiles["gpu"].map(node_gpus).to_numpy(dtype=float)
    too_large = profiles["tp"].to_numpy(dtype=float) > limit  # NaN (a GPU not in the fleet): no
    if too_large.any():
        row = profiles[too_large].iloc[0]
        message = (f"capacity_profiles: {row['gpu']} tp {int(row['tp'])} does not fit in one node of "
                   f"{int(node_gpus[row['gpu']])} GPUs (tensor parallelism stays inside a node; "
                   f"fleet.gpus[].gpus_per_node sets the node size)")
        raise ScenarioError(message)


def _workload_table(scenario: Scenario, models: list[str]) -> pd.DataFrame:
    workloads = scenario.workloads
    names = [w.name for w in workloads]
    return pd.DataFrame({
        "workload": names, "pool": models if scenario.fleet.share_replicas else names,
        "redundancy_k": [w.redundancy_k for w in workloads], "model": models,
        "tpot_slo_ms": [np.nan if w.tpot_slo_ms is None else w.tpot_slo_ms for w in workloads],
        "ttft_slo_ms": [np.nan if w.ttft_slo_ms is None else w.ttft_slo_ms for w in workloads]})


def _candidates(scenario: Scenario, catalogs: Catalogs, buckets: pd.DataFrame, names: dict,
                estimate) -> tuple[pd.DataFrame, str, list[str]]:
    pairs = disaggregated_candidates(scenario, catalogs, buckets, names)
    if scenario.capacity_profiles is not None:
        quants = {w.name: q for w, q in zip(scenario.workloads, names["quants"], strict=True)}
        profiles = read_profiles(scenario.capacity_profiles, catalogs.gpus.index)
        profiles = profiles[profiles["tp"].isin(scenario.fleet.tp)]
        _check_profile_nodes(profiles, candidate_tables.node_sizes(scenario, names["gpus"],
                                                                   catalogs.gpus))
        table = profile_candidates(profiles, buckets, names, quants)
        own_level = slo_levels(candidate_tables.workload_slos(scenario, names), shared=False)
        table = table.merge(own_level, on="workload")
        uncovered = uncovered_reasons(buckets, table)
        notes = [f"{w} bucket {b}: {r}" for w, b, r in
                 zip(uncovered["workload"], uncovered["bucket"], uncovered["reason"])]
        return table, "profiles", notes
    options = scenario.fleet.disaggregation
    if options is not None and not options.colocated:
        if pairs.empty:
            message = ("fleet.disaggregation: no prefill/decode pair of the allowed GPUs and TP "
                       "degrees fits (each side's TP within its GPU's node), and colocated: false "
                       "leaves no other configuration")
            raise ScenarioError(message)
        return pairs, "engine", []
    cases = candidate_tables.engine_cases(
        scenario, buckets, names, candidate_tables.node_sizes(scenario, names["gpus"], catalogs.gpus))
    colocated = candidate_tables.from_engine(cases, catalogs, estimate, scenario.fleet.capacity_quantile)
    return pd.concat([colocated, pairs], ignore_index=True), "engine", []


def prepare(scenario: Scenario, catalogs: Catalogs | None = None, *, estimate=None) -> PreparedScenario:
    """Scenario -> optimizer tables (one vectorized engine call for every candidate)."""
    if catalogs is None:
        catalogs = load_catalogs(scenario.catalogs)
    names = candidate_tables.canonical_names(scenario, catalogs)
    prices, notes = select_prices(scenario, catalogs.prices, names["gpus"])
    model_of = dict(zip([w.name for w in scenario.workloads], names["models"], strict=True))
    buckets = workload_buckets(scenario)
    buckets["model"] = buckets["workload"].map(model_of)
    periods = plan_periods(scenario)
    if replans(scenario):  # end dates and lead times need every month to be its own period
        periods = profile_periods(cycle_hours(scenario), math.ceil(scenario.fleet.horizon_months),
                                  scenario.fleet.hours_per_month, scenario.fleet.horizon_months)
    replan = replan_tables(scenario, catalogs, names["gpus"])
    workloads = _workload_table(scenario, names["models"])
    supply = supply_tables(scenario, catalogs, names["gpus"], workloads, buckets)  # names first
    table, source, more_notes = _candidates(scenario, catalogs, buckets, names, estimate)
    table = candidate_tables.finish(table, scenario.fleet.share_replicas)
    base = table[table["variant"] == "base"].drop(columns="variant").reset_index(drop=True)
    relaxed = table[table["variant"] != "base"].reset_index(drop=True)
    relaxed = relaxed.assign(relaxed_for=relaxed.pop("variant").str.removeprefix("relaxed:"))
    prices, term_notes = _within_terms(scenario, prices)
    if not replan.prices.empty:  # an empty frame's object columns would make prices objects
        prices = pd.concat([prices, replan.prices.reindex(columns=prices.columns)],
                           ignore_index=True).astype({"usd_per_gpu_hour": float})
    fleet = scenario.fleet
    problem = Problem(
        workloads=workloads, periods=periods,
        demand=demand_table(scenario, buckets, periods), configs=configs_of(base),
        candidates=base, offers=_with_offers(_offer_table(scenario, names["gpus"], prices),
                                             replan.offers),
        gpus=_gpu_table(scenario, names["gpus"], catalogs.gpus),
        target_utilization=fleet.target_utilization, hours_per_month=fleet.hours_per_month,
        horizon_months=float(fleet.horizon_months),
        notes=notes + term_notes + more_notes + supply_notes(supply) + replan.notes,
        existing=replan.existing, lead_times=replan.lead_times, **scenario_settings(scenario),
        **supply)
    problem = with_demand_scenarios(scenario, problem, buckets)
    prices = prices.assign(term_charge_factor=term_charge_factors(problem, prices),
                           start_month=start_months(problem, prices))
    return PreparedScenario(problem, prices, base, relaxed, source, catalogs.versions())


def plan_scenario(scenario: Scenario, catalogs: Catalogs | None = None, *, estimate=None,
                  what_if: bool | None = None, spent_s: float = 0.0,
                  kept_s: Callable[[Problem], float] | None = None) -> FleetPlan:
    """The cheapest fleet for ``scenario`` (see FleetPlan for what it holds), within
    ``solver.time_limit_s`` of which ``spent_s`` [s] went before this call (a command's process
    start, reading the scenario) and ``kept_s(problem)`` [s] are kept for after it (writing the
    plan of the prepared problem; at most :data:`MOST_KEPT_SHARE` of the limit)."""
    options = solve_options(scenario)
    call = Deadline(options.time_limit_s, spent_s)  # the whole call: preparing counts
    prepared = prepare(scenario, catalogs, estimate=estimate)
    if kept_s is not None:
        kept = min(kept_s(prepared.problem), MOST_KEPT_SHARE * call.seconds)
        call = Deadline(call.seconds - kept, call.elapsed())
    solve_s = max(call.remaining(), call.seconds * LEAST_SOLVE_SHARE)
    comparing = replans(scenario)
    if comparing or has_scenarios(prepared.problem):  # a follow-up shares the time limit
        solve_s *= 1 - FOLLOW_UP_SHARE
    options = dataclasses.replace(options, time_limit_s=solve_s)
    enabled = scenario.what_if.enabled if what_if is None else what_if
    what_if_options = WhatIfOptions(enabled, scenario.what_if.tpot_slo_factor,
                                    prepared.relaxed_candidates, scenario.what_if.time_limit_s)
    assumptions = {"catalog_versions": prepared.catalog_versions,
                   "capacity_source": prepared.capacity_source,
                   "engine": scenario.fleet.engine or "*",
                   "capacity_quantile": scenario.fleet.capacity_quantile,
                   "prices_used": prepared.prices.to_dict(orient="records")}
    plan = optimize_problem(prepared.problem, options, what_if_options,
                            scenario=scenario.model_dump(mode="json"), assumptions=assumptions,
                            prices=prepared.prices)
    follow_ups = 2 if comparing and has_scenarios(prepared.problem) else 1
    plan = add_commitments(plan, prepared.problem, _follow_up(options, call, follow_ups,
                                                              follow_ups))
    plan.fleet = with_calibration(plan.fleet, prepared.candidates)
    if comparing and plan.feasible:
        plan.assumptions["stay_the_course"] = stay_the_course(prepared.problem, plan,
                                                              _follow_up(options, call, 1,
                                                                         follow_ups))
    plan.messages = [*prepared.problem.notes, *plan.messages, *prior_warnings(plan.fleet)]
    return plan


def _follow_up(options: SolveOptions, call: Deadline, left: int, every: int) -> SolveOptions:
    """``options`` for the next of the ``left`` follow-ups still to run after the plan, of
    ``every`` in all (the commitments table, the stay-the-course comparison): an even share of
    the time the call has left, and at least an even share of :data:`FOLLOW_UP_SHARE`."""
    seconds = max(call.remaining() / left, call.seconds * FOLLOW_UP_SHARE / every)
    return dataclasses.replace(options, time_limit_s=seconds)


def solve_options(scenario: Scenario) -> SolveOptions:
    """The solver settings of ``scenario.solver``."""
    solver = scenario.solver
    return SolveOptions(solver.time_limit_s, solver.mip_gap, solver.threads, solver.solver)


def with_calibration(fleet: pd.DataFrame, candidates: pd.DataFrame) -> pd.DataFrame:
    """The fleet table with each configuration's calibration label and error band."""
    columns = [c for c in candidate_tables.UNCERTAINTY_COLUMNS if c in candidates]
    if fleet.empty or not columns:
        return fleet
    labels = candidates.drop_duplicates("config").set_index("config")[columns]
    return fleet.join(labels, on="config")


def prior_warnings(fleet: pd.DataFrame) -> list[str]:
    """One line per chosen configuration whose capacity rests on priors only."""
    if fleet.empty or "calibration" not in fleet:
        return []
    prior = fleet[fleet["calibration"] == "prior"].drop_duplicates("config")
    return [f"warning: {config} rests on prior efficiencies (no measurements of this engine, GPU and "
            f"precision or a sibling); held-out rows like it were off by {low:+.0f}% to {high:+.0f}% (p10 to p90)"
            for config, low, high in zip(prior["config"], prior["error_p10_pct"], prior["error_p90_pct"])]
