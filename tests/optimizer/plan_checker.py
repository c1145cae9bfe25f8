"""An independent check of a FleetPlan against every constraint of its Problem.

It reads only the plan's tables (routing, fleet_by_period, unmet_demand) and the problem's
inputs, never the MILP, and recomputes the cost from scratch.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import RESERVED_PRICING
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
    gpus = replicas.groupby(["gpu", "pricing_type", "period"], as_index=False)["gpus"].sum()
    gpus = gpus.merge(problem.gpus[["gpu", "gpus_per_node"]], on="gpu")
    gpus["bought"] = np.ceil(gpus["gpus"] / gpus["gpus_per_node"] - 1e-9) * gpus["gpus_per_node"]
    reserved = gpus["pricing_type"].isin(RESERVED_PRICING)
    # a reserved commitment is the same in every period: its largest count is paid throughout
    peak = gpus[reserved].groupby(["gpu", "pricing_type"], as_index=False)["bought"].max()
    hours = gpus["period"].map(problem.periods.set_index("period")["hours"])
    prices = problem.offers.set_index(["gpu", "pricing_type"])["usd_per_gpu_hour"]
    flexible = gpus[~reserved]
    flexible_usd = (flexible["bought"] * hours[~reserved]
                    * prices.reindex(pd.MultiIndex.from_frame(flexible[["gpu", "pricing_type"]]))
                    .to_numpy()).sum()
    reserved_usd = (peak["bought"] * problem.horizon_hours
                    * prices.reindex(pd.MultiIndex.from_frame(peak[["gpu", "pricing_type"]]))
                    .to_numpy()).sum()
    return float(flexible_usd + reserved_usd)


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
    k_by_workload = problem.workloads.set_index("workload")
    pool_load = routes.merge(problem.configs[["config", "pool"]], on="config").groupby(
        ["pool", "period"])["load"].sum()
    pool_replicas = replicas.groupby(["pool", "period"])["replicas"].sum()
    busy = problem.demand[problem.demand["req_s"] > 0][["workload", "period"]].drop_duplicates()
    for workload, period in busy.itertuples(index=False):
        k = k_by_workload.loc[workload, "redundancy_k"]
        pool = k_by_workload.loc[workload, "pool"]
        spare = pool_replicas.get((pool, period), 0.0) - pool_load.get((pool, period), 0.0)
        if k > 0 and spare < k - TOLERANCE and (plan.feasible or not any(
                "spare replicas" in m for m in plan.messages)):
            problems.append(f"redundancy of {workload} in period {period}: spare {spare:.3f} < {k}")
    return problems


def _check_limits(plan: FleetPlan, problem: Problem, replicas: pd.DataFrame) -> list[str]:
    problems = []
    replicas = replicas.assign(gpus=replicas["replicas"] * replicas["tp"])
    gpus = replicas.groupby(["gpu", "pricing_type", "period"], as_index=False)["gpus"].sum()
    gpus = gpus.merge(problem.gpus[["gpu", "gpus_per_node", "max_gpus"]], on="gpu")
    gpus["bought"] = np.ceil(gpus["gpus"] / gpus["gpus_per_node"] - 1e-9) * gpus["gpus_per_node"]
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
