"""An independent check of a FleetPlan against every constraint of its Problem.

It reads only the plan's tables (routing, fleet_by_period, unmet_demand) and the problem's
inputs, never the MILP, and recomputes the cost from scratch.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import RESERVED_PRICING, RESERVED_TERM_MONTHS
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.fleet_problem import Problem

TOLERANCE = 1e-5


def _replicas(plan: FleetPlan, problem: Problem) -> pd.DataFrame:
    """Replicas per (config, pricing_type, period) for every period, zeros included."""
    fleet = plan.fleet_by_period
    if fleet.empty:
        return pd.DataFrame(columns=["config", "pricing_type", "period", "replicas"])
    return fleet[["config", "pricing_type", "period", "replicas"]]


def plan_cost_usd(plan: FleetPlan, problem: Problem) -> float:
    """Cost over the horizon recomputed from replicas, node rounding and prices [USD]."""
    replicas = _replicas(plan, problem).merge(problem.configs[["config", "gpu", "tp"]], on="config")
    replicas["gpus"] = replicas["replicas"] * replicas["tp"]
    gpus = _bought(replicas, problem)
    reserved = gpus["pricing_type"].isin(RESERVED_PRICING)
    # a reserved commitment is the same in every period: its largest count is paid throughout
    peak = gpus[reserved].groupby(["gpu", "pricing_type"], as_index=False)["bought"].max()
    hours = gpus["period"].map(problem.periods.set_index("period")["hours"])
    prices = problem.offers.set_index(["gpu", "pricing_type"])["usd_per_gpu_hour"]
    flexible = gpus[~reserved]
    flexible_usd = (flexible["bought"] * hours[~reserved]
                    * prices.reindex(pd.MultiIndex.from_frame(flexible[["gpu", "pricing_type"]]))
                    .to_numpy()).sum()
    # a reserved commitment is paid for whole terms, even past the horizon
    terms = peak["pricing_type"].map(RESERVED_TERM_MONTHS).astype(float)
    charged = np.ceil(problem.horizon_months / terms - 1e-9) * terms / problem.horizon_months
    reserved_usd = (peak["bought"] * problem.horizon_hours * charged
                    * prices.reindex(pd.MultiIndex.from_frame(peak[["gpu", "pricing_type"]]))
                    .to_numpy()).sum()
    return float(flexible_usd + reserved_usd + _fixed_usd(plan, problem))


def _fixed_usd(plan: FleetPlan, problem: Problem) -> float:
    """The fixed cost of every configuration in every month it has a replica."""
    if not problem.config_fixed_usd_per_month:
        return 0.0
    replicas = _replicas(plan, problem)
    held = replicas[replicas["replicas"] > 0.5].merge(
        problem.periods[["period", "month", "month_weight"]], on="period")
    months = held.drop_duplicates(["config", "month"])
    return problem.config_fixed_usd_per_month * float(months["month_weight"].sum())


def fewest_nodes(sizes: tuple[int, ...], node_gpus: int) -> int:
    """Fewest nodes that hold replicas of these sizes, by trying every placement."""
    @functools.cache
    def pack(items: tuple[int, ...], free: tuple[int, ...]) -> int:
        if not items:
            return len(free)
        first, rest = items[0], items[1:]
        options = [pack(rest, tuple(sorted(free[:i] + (room - first,) + free[i + 1:])))
                   for i, room in enumerate(free) if room >= first]
        options.append(pack(rest, tuple(sorted((*free, node_gpus - first)))))
        return min(options)

    return pack(tuple(sorted(sizes, reverse=True)), ())


def _bought(replicas: pd.DataFrame, problem: Problem) -> pd.DataFrame:
    """GPUs used and bought (whole nodes packed with the real replica sizes) per gpu, pricing
    type and period."""
    node = problem.gpus.set_index("gpu")["gpus_per_node"]
    rows = []
    for (gpu, pricing, period), group in replicas.groupby(["gpu", "pricing_type", "period"]):
        sizes = tuple(np.repeat(group["tp"].to_numpy(), group["replicas"].astype(int)))
        bought = sum(sizes) if node[gpu] == 1 else fewest_nodes(sizes, int(node[gpu])) * node[gpu]
        rows.append((gpu, pricing, period, float(sum(sizes)), float(bought)))
    table = pd.DataFrame(rows, columns=["gpu", "pricing_type", "period", "gpus", "bought"])
    return table.merge(problem.gpus[["gpu", "gpus_per_node", "max_gpus"]], on="gpu")


def check_plan(plan: FleetPlan, problem: Problem) -> list[str]:
    """Every violated constraint as a message; an empty list means the plan is valid."""
    problems: list[str] = []
    replicas = _replicas(plan, problem).merge(problem.configs[["config", "gpu", "tp", "pool"]],
                                              on="config")
    if (replicas["replicas"] != np.round(replicas["replicas"])).any():
        problems.append("replicas must be whole numbers")
    reserved = replicas[replicas["pricing_type"].isin(RESERVED_PRICING)]
    spread = reserved.groupby(["config", "pricing_type"])["replicas"].agg(["min", "max"])
    n_periods = len(problem.periods)
    counts = reserved.groupby(["config", "pricing_type"]).size()
    if ((spread["min"] != spread["max"]) | (counts != n_periods)).any():
        problems.append("reserved replicas must be the same in every period")
    problems += _check_demand(plan, problem)
    problems += _check_capacity(plan, problem, replicas)
    problems += _check_limits(plan, problem, replicas)
    problems += _check_simplicity(plan, problem)
    if plan.feasible and not math.isclose(plan.objective_usd, plan_cost_usd(plan, problem),
                                          rel_tol=1e-6, abs_tol=1e-6):
        problems.append(f"objective {plan.objective_usd} != recomputed "
                        f"{plan_cost_usd(plan, problem)}")
    return problems


def _check_demand(plan: FleetPlan, problem: Problem) -> list[str]:
    demand = problem.demand[problem.demand["req_s"] > 0]
    keys = ["workload", "bucket", "period"]
    routing = plan.routing.drop_duplicates([*keys, "route"])  # a route's stages share a share
    routed = routing.groupby(keys)["fraction"].sum() if not routing.empty else \
        pd.Series(dtype=float)
    unmet = plan.unmet_demand.groupby(keys)["unmet_fraction"].sum() \
        if not plan.unmet_demand.empty else pd.Series(dtype=float)
    index = pd.MultiIndex.from_frame(demand[keys])
    total = routed.reindex(index, fill_value=0.0).to_numpy() + \
        unmet.reindex(index, fill_value=0.0).to_numpy()
    if plan.feasible and not unmet.empty and unmet.max() > TOLERANCE:
        return ["a feasible plan leaves demand unmet"]
    bad = np.abs(total - 1.0) > 1e-4
    return [f"demand of {index[i]} covered {total[i]:.6f} times" for i in np.flatnonzero(bad)]


def _check_capacity(plan: FleetPlan, problem: Problem, replicas: pd.DataFrame) -> list[str]:
    if plan.routing.empty:
        return []
    routes = plan.routing.merge(problem.candidates[["workload", "bucket", "config",
                                                    "req_s_per_replica"]],
                                on=["workload", "bucket", "config"])
    if (routes["req_s_per_replica"] <= 0).any():
        return ["routing to a configuration that cannot serve the bucket"]
    routes["load"] = routes["req_s"] / (problem.target_utilization * routes["req_s_per_replica"])
    load = routes.groupby(["config", "period"])["load"].sum()
    have = replicas.groupby(["config", "period"])["replicas"].sum()
    have = have.reindex(load.index, fill_value=0.0)
    over = load - have > TOLERANCE
    problems = [f"capacity of {k} exceeded: load {load[k]:.4f} > {have[k]:.0f}"
                for k in load.index[over]]
    # N+k: losing any k replicas of a configuration that carries a needy workload's load
    # still leaves that configuration's load served by its own replicas
    k = problem.workloads.set_index("workload")["redundancy_k"]
    checked = plan.feasible or not any("spare replicas" in m for m in plan.messages)
    for (config, period), group in routes[routes["fraction"] > 1e-9].groupby(["config", "period"]):
        needed = int(group["workload"].map(k).max())
        if checked and needed > 0 and have[(config, period)] - needed < load[(config, period)] - TOLERANCE:
            problems.append(f"redundancy of {config} in period {period}: losing {needed} "
                            f"replicas leaves {have[(config, period)] - needed:.0f} for a load "
                            f"of {load[(config, period)]:.3f}")
    return problems


def _check_limits(plan: FleetPlan, problem: Problem, replicas: pd.DataFrame) -> list[str]:
    problems = []
    gpus = _bought(replicas, problem)
    per_gpu = gpus.groupby(["gpu", "period"]).agg(bought=("bought", "sum"),
                                                  cap=("max_gpus", "first"))
    over = per_gpu[per_gpu["bought"] > per_gpu["cap"].astype(float).fillna(np.inf) + TOLERANCE]
    problems += [f"availability of {k} exceeded" for k in over.index]
    offers = gpus.merge(problem.offers[["gpu", "pricing_type", "max_gpus"]].rename(
        columns={"max_gpus": "offer_cap"}), on=["gpu", "pricing_type"], how="left")
    if (offers["bought"] > offers["offer_cap"].astype(float).fillna(np.inf) + TOLERANCE).any():
        problems.append("an offer cap is exceeded")
    if (~offers.set_index(["gpu", "pricing_type"]).index.isin(
            problem.offers.set_index(["gpu", "pricing_type"]).index)).any():
        problems.append("a GPU is bought at a pricing type it is not offered at")
    if problem.spot_max_share is not None:
        total = gpus.groupby("period")["gpus"].sum()
        spot = gpus[gpus["pricing_type"] == "spot"].groupby("period")["gpus"].sum()
        share = spot.reindex(total.index, fill_value=0.0) - problem.spot_max_share * total
        if (share > TOLERANCE).any():
            problems.append("spot share exceeded")
    if problem.budget_usd_per_month is not None and plan.feasible:
        months = plan.costs_by_month["usd"]
        if (months > problem.budget_usd_per_month * (1 + 1e-7) + 1e-6).any():
            problems.append("budget exceeded")
    return problems


def _check_simplicity(plan: FleetPlan, problem: Problem) -> list[str]:
    """Routes per workload over the horizon, quantizations per model."""
    routing = plan.routing
    if routing.empty:
        return []
    used = routing[routing["fraction"] > TOLERANCE]
    problems = []
    limit = problem.max_configs_per_workload
    if limit is not None and (used.groupby("workload")["route"].nunique() > limit).any():
        problems.append("too many configurations for a workload")
    if problem.one_quant_per_model:
        quants = used.merge(problem.configs[["config", "model", "quant"]], on="config")
        if (quants.groupby("model")["quant"].nunique() > 1).any():
            problems.append("a model runs in two quantizations")
    return problems
