"""The plan's cost tables, read from a solved fleet model: cost by GPU type, pricing type and
month, and by workload (with each workload's summary, whose cost is that same split).

Node costs are those the solution's nodes pay for [USD over the horizon]; hosted APIs and the
fixed cost per configuration count beside them, so every table adds up to the plan's total.
A replica's cost is split among the workloads by their share of its load in each period; what
no workload loads is ``(spare)`` and whole-node rounding is ``(idle node GPUs)``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import PRICING_TYPES, RESERVED_PRICING
from fleetplan.optimizer.chargeback import usd_per_m_tokens
from fleetplan.optimizer.config_fixed_cost import (
    fixed_cost_by_workload,
    fixed_usd_by_month,
    wants_fixed_cost,
)
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.plan_checks import ROUTE_NOISE


def optional_column(table: pd.DataFrame, column: str, default=math.nan) -> pd.Series:
    """``table[column]``, or ``default`` in every row of a table without it."""
    return table[column] if column in table else pd.Series(default, index=table.index)


def cost_tables(model: FleetModel, solution: dict) -> dict[str, pd.DataFrame]:
    """costs_by_gpu, costs_by_pricing, costs_by_month."""
    p = model.problem
    nodes, replicas = solution["nodes"], solution["replicas"]
    api_usd = float(solution["api_costs"]["usd"].sum())
    fixed_usd = float(solution["fixed_costs"]["usd"].sum())
    total = float(nodes["usd"].sum()) + api_usd + fixed_usd or 1.0
    gpu_usd = nodes.groupby("gpu")["usd"].sum()
    busy_usd = replicas.groupby("gpu")["usd"].sum().reindex(gpu_usd.index, fill_value=0.0)
    peak = nodes.groupby(["gpu", "period"])["gpus"].sum().groupby("gpu").max()
    by_gpu = pd.DataFrame({"gpu": gpu_usd.index, "gpus_peak": peak.reindex(gpu_usd.index).values,
                           "usd_per_month": gpu_usd.values / p.horizon_months,
                           "idle_usd_per_month": (gpu_usd - busy_usd).clip(lower=0).values
                           / p.horizon_months, "usd_total": gpu_usd.values})
    pricing_usd = nodes.groupby("pricing_type")["usd"].sum()
    pricing_peak = nodes.groupby(["pricing_type", "period"])["gpus"].sum().groupby(
        "pricing_type").max()
    by_pricing = pd.DataFrame({
        "pricing_type": pricing_usd.index,
        "gpus_peak": pricing_peak.reindex(pricing_usd.index).values,
        "usd_per_month": pricing_usd.values / p.horizon_months, "usd_total": pricing_usd.values,
        "share": pricing_usd.values / total})
    # costs with no GPUs: hosted APIs (paid per request) and each configuration's overhead in
    # the months it runs
    for name, extra_usd in (("api", api_usd), ("config_fixed", fixed_usd)):
        if extra_usd > 0:
            by_pricing = pd.concat([by_pricing, pd.DataFrame({
                "pricing_type": [name], "gpus_peak": [0.0],
                "usd_per_month": [extra_usd / p.horizon_months], "usd_total": [extra_usd],
                "share": [extra_usd / total]})], ignore_index=True)
    return {"costs_by_gpu": by_gpu[by_gpu["usd_total"] > 0].reset_index(drop=True),
            "costs_by_pricing": by_pricing[by_pricing["usd_total"] > 0].reset_index(drop=True),
            "costs_by_month": _monthly_costs(model, nodes, solution["api_costs"],
                                             solution["fixed_costs"])}


def _monthly_costs(model: FleetModel, nodes: pd.DataFrame, api_costs: pd.DataFrame,
                   fixed_costs: pd.DataFrame) -> pd.DataFrame:
    """USD per month of the horizon, split by pricing type (hosted APIs as ``api_usd`` and
    the fixed cost per configuration as ``config_fixed_usd`` when the problem has them)."""
    p = model.problem
    with_api, with_fixed = not p.api_candidates.empty, wants_fixed_cost(p)
    if with_api:
        nodes = pd.concat([nodes[["period", "pricing_type", "usd"]],
                           api_costs[["period", "usd"]].assign(pricing_type="api")],
                          ignore_index=True)
    nodes = nodes.merge(p.periods[["period", "month", "month_weight"]], on="period")
    nodes["usd_month"] = nodes["usd"] / nodes["month_weight"]
    if with_fixed:
        fixed = fixed_usd_by_month(p, fixed_costs)
        fixed_rows = pd.DataFrame({"month": fixed.index, "usd_month": fixed.to_numpy(),
                                   "pricing_type": "config_fixed"})
        nodes = pd.concat([nodes, fixed_rows], ignore_index=True)
    table = nodes.pivot_table(index="month", columns="pricing_type", values="usd_month",
                              aggfunc="sum", fill_value=0.0)
    table = table.rename(columns=lambda c: f"{c}_usd")
    for column in (f"{pricing}_usd" for pricing in (*PRICING_TYPES, "api", "config_fixed")):
        if column not in table:
            table[column] = 0.0
    table["reserved_usd"] = sum(table.pop(f"{pricing}_usd") for pricing in RESERVED_PRICING)
    table["usd"] = table.sum(axis=1)
    if len(table) == 1 and p.horizon_months > 1:  # one month stands for the whole horizon
        months = np.arange(math.ceil(p.horizon_months))
        table = table.loc[np.zeros(len(months), dtype=int)].set_axis(months)
    table.index.name = "month"
    columns = ["month", "usd", "reserved_usd", "on_demand_usd", "spot_usd"]
    columns += ["api_usd"] * with_api + ["config_fixed_usd"] * with_fixed
    return table.reset_index()[columns]


def workload_tables(model: FleetModel, solution: dict) -> dict[str, pd.DataFrame]:
    """workloads and costs_by_workload (replica costs split by each workload's load share)."""
    p = model.problem
    routes, replicas = solution["routes"], solution["replicas"]
    hours = p.periods.set_index("period")["hours"]
    routes = routes.assign(full_load=routes["value"] * routes["load"] * p.target_utilization,
                           hours=routes["period"].map(hours))
    config_load = routes.groupby(["config", "period"])["full_load"].transform("sum")
    routes["share"] = np.where(config_load > 0, routes["full_load"] / config_load, 0.0)
    config_usd = replicas.groupby(["config", "period"])["usd"].sum()
    routes["usd"] = routes["share"] * config_usd.reindex(
        pd.MultiIndex.from_frame(routes[["config", "period"]])).fillna(0.0).to_numpy()
    routes["replica_hours"] = routes["share"] * routes["replicas"].fillna(0.0) * routes["hours"]
    by_workload = routes.groupby("workload").agg(
        usd_total=("usd", "sum"), replica_hours=("replica_hours", "sum"))
    # float even when empty: an empty object column would turn usd_total into Python objects
    api_usd = solution["api_costs"].groupby("workload")["usd"].sum().astype(float)
    by_workload = by_workload.reindex(by_workload.index.union(api_usd.index)).fillna(
        {"usd_total": 0.0, "replica_hours": 0.0})
    fixed_usd = fixed_cost_by_workload(p, routes, solution["fixed_costs"])
    by_workload["usd_total"] += api_usd.reindex(by_workload.index).fillna(0.0)
    by_workload["usd_total"] += fixed_usd.reindex(by_workload.index).fillna(0.0)
    load_hours = (routes["full_load"] * routes["hours"]).groupby(routes["workload"]).sum()
    by_workload["utilization"] = load_hours / by_workload["replica_hours"].replace(0, np.nan)
    spare = float(replicas["usd"].sum() + api_usd.sum() + solution["fixed_costs"]["usd"].sum()
                  - by_workload["usd_total"].sum())
    idle = float(solution["nodes"]["usd"].sum() - replicas["usd"].sum())
    costs = by_workload["usd_total"].rename_axis("workload").reset_index()
    extra = pd.DataFrame({"workload": ["(spare)", "(idle node GPUs)"], "usd_total": [spare, idle]})
    costs = pd.concat([costs, extra[extra["usd_total"] > 1e-6]], ignore_index=True)
    costs["usd_per_month"] = costs["usd_total"] / p.horizon_months
    costs["share"] = costs["usd_total"] / (costs["usd_total"].sum() or 1.0)
    costs = costs[["workload", "usd_per_month", "usd_total", "share"]]
    return {"workloads": _workload_summary(model, solution, routes, by_workload),
            "costs_by_workload": costs}


def _workload_summary(model: FleetModel, solution: dict, routes: pd.DataFrame,
                      by_workload: pd.DataFrame) -> pd.DataFrame:
    p = model.problem
    per_period = p.demand[p.demand["req_s"] > 0].groupby(["workload", "period"])["req_s"].sum()
    grouped = served_by_workload(p, routes, solution["api_routing"])
    table = p.workloads[["workload"]].set_index("workload")
    table["model"] = optional_column(p.workloads.set_index("workload"), "model", "")
    table["demand_req_s_mean"] = grouped["weight"] / p.horizon_hours
    table["demand_req_s_peak"] = per_period.groupby("workload").max()
    table["tokens_per_month"] = grouped["tokens"] / p.horizon_months
    table["served_fraction"] = grouped["served"] / grouped["weight"]
    slo = p.workloads.set_index("workload")
    served_routes = routes[routes["value"] > ROUTE_NOISE].merge(
        p.candidates, on=["workload", "bucket", "config"], how="left", suffixes=("", "_c"))
    for metric in ("tpot", "ttft"):
        table[f"{metric}_slo_ms"] = optional_column(slo, f"{metric}_slo_ms")
        column = f"{metric}_ms" if f"{metric}_ms" in served_routes else None
        table[f"{metric}_ms_max"] = (served_routes.groupby("workload")[column].max()
                                     if column else math.nan)
    table["utilization"] = by_workload["utilization"]
    table["usd_per_month"] = by_workload["usd_total"].reindex(table.index).fillna(0.0) \
        / p.horizon_months
    # the chargeback's unit cost: divided as floats, NaN without tokens
    table["usd_per_m_tokens"] = usd_per_m_tokens(table["usd_per_month"], table["tokens_per_month"])
    return table.reset_index()


def served_by_workload(problem, routes: pd.DataFrame, api_routing: pd.DataFrame) -> pd.DataFrame:
    """Per workload: weight (request-hours demanded /3600), served (of them) and tokens served
    over the horizon, from the routes' and APIs' solution shares (``value``, ``fraction``)."""
    hours = problem.periods.set_index("period")["hours"]
    demand = problem.demand[problem.demand["req_s"] > 0]
    demand = demand.assign(hours=demand["period"].map(hours))
    tokens = optional_column(demand, "input_len", 0.0) + optional_column(demand, "output_len", 0.0)
    shares = routes.drop_duplicates(["workload", "bucket", "period", "route"])  # one per route
    api = api_routing.rename(columns={"fraction": "value"})
    served_req_s = pd.concat([shares[["workload", "bucket", "period", "value"]],
                              api[["workload", "bucket", "period", "value"]]]).groupby(
        ["workload", "bucket", "period"])["value"].sum().astype(float)
    served = served_req_s.reindex(pd.MultiIndex.from_frame(
        demand[["workload", "bucket", "period"]])).fillna(0.0).clip(upper=1.0).to_numpy()
    weight = demand["req_s"] * demand["hours"]
    return pd.DataFrame({"workload": demand["workload"], "weight": weight,
                         "served": weight * served,
                         "tokens": weight * served * tokens * 3600}).groupby("workload").sum()
