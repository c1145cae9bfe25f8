"""Read a solved fleet model back into the tidy tables of a FleetPlan."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import PRICING_TYPES, RESERVED_PRICING
from fleetplan.optimizer.api_supply import (
    api_costs_by_period,
    api_routing_table,
    api_shares,
    api_usage_table,
)
from fleetplan.optimizer.chargeback import usd_per_m_tokens
from fleetplan.optimizer.config_fixed_cost import (
    fixed_cost_by_workload,
    fixed_cost_table,
    fixed_usd_by_month,
    wants_fixed_cost,
)
from fleetplan.optimizer.fleet_changes import changes_table, held_from_solution, wants_changes
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.fleet_problem import charged_offers
from fleetplan.optimizer.hosted_apis import break_even_table
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.milp_tables import per_period
from fleetplan.optimizer.plan_checks import ROUTE_NOISE
from fleetplan.optimizer.power_envelope import power_table
from fleetplan.optimizer.solver import SolveOutcome

#: Shares and counts below this are solver noise.
EPSILON = 1e-7

def values(model: FleetModel, table: pd.DataFrame, *, integer=False) -> np.ndarray:
    """Solution values of a variable table's columns (``rounded``)."""
    return rounded(model.value(table), integer)


def rounded(raw: np.ndarray, integer) -> np.ndarray:
    """Solution values: integer ones (``integer``, per value or for all) rounded, others with
    noise below :data:`EPSILON` set to 0."""
    return np.where(integer, np.round(raw), np.where(np.abs(raw) < EPSILON, 0.0, raw))


def _optional(table: pd.DataFrame, column: str, default=math.nan) -> pd.Series:
    return table[column] if column in table else pd.Series(default, index=table.index)


def solution_tables(model: FleetModel) -> dict[str, pd.DataFrame]:
    """Variable tables with a ``value`` column and per-period costs [USD]."""
    p = model.problem
    hours = p.periods.set_index("period")["hours"]
    replicas = model.replicas.assign(value=values(model, model.replicas, integer=True))
    replicas = per_period(replicas, p.periods).merge(
        charged_offers(p)[["gpu", "pricing_type", "usd_per_gpu_hour"]], on=["gpu", "pricing_type"])
    replicas["hours"] = replicas["period"].map(hours)
    replicas["gpus"] = replicas["value"] * replicas["tp"]
    replicas["usd"] = replicas["gpus"] * replicas["usd_per_gpu_hour"] * replicas["hours"]
    nodes = nodes_by_period(model)
    routes = model.routes.assign(value=values(model, model.routes))
    routes = routes.merge(replicas.groupby(["config", "period"], as_index=False)["value"].sum()
                          .rename(columns={"value": "replicas"}), on=["config", "period"],
                          how="left")
    unmet = model.unmet.assign(value=values(model, model.unmet)) if model.elastic else None
    api = api_routing_table(model, model.value(api_shares(model)))
    return {"replicas": replicas, "nodes": nodes, "routes": routes, "unmet": unmet,
            "api_routing": api, "api_costs": api_costs_by_period(api, p.periods),
            "fixed_costs": fixed_cost_table(model)}


def nodes_by_period(model: FleetModel) -> pd.DataFrame:
    """Nodes bought in every period (reserved ones repeated) with value, hours, gpus and usd
    [USD over the period's hours]; nodes of more than one GPU are whole."""
    p = model.problem
    node_values = values(model, model.nodes, integer=(model.nodes["gpus_per_node"] > 1).to_numpy())
    nodes = per_period(model.nodes.drop(columns="hours").assign(value=node_values), p.periods)
    nodes["hours"] = nodes["period"].map(p.periods.set_index("period")["hours"])
    nodes["gpus"] = nodes["value"] * nodes["gpus_per_node"]
    nodes["usd"] = nodes["gpus"] * nodes["usd_per_gpu_hour"] * nodes["hours"]
    return nodes


def fleet_tables(model: FleetModel, solution: dict) -> dict[str, pd.DataFrame]:
    """fleet_by_period, fleet and nodes tables."""
    p = model.problem
    replicas = solution["replicas"]
    configs = p.configs.assign(model=_optional(p.configs, "model", ""),
                               quant=_optional(p.configs, "quant", ""))
    by_period = replicas[replicas["value"] > 0].merge(p.periods[["period", "month", "hour"]],
                                                      on="period")
    by_period = by_period[["period", "month", "hour", "config", "gpu", "pricing_type", "value",
                           "gpus"]].rename(columns={"value": "replicas"})
    horizon_hours = p.horizon_hours
    fleet = replicas.groupby(["config", "pricing_type"], as_index=False).agg(
        replicas_peak=("value", "max"), usd_total=("usd", "sum"),
        usd_per_gpu_hour=("usd_per_gpu_hour", "first"))
    weighted = (replicas["value"] * replicas["hours"]).groupby(
        [replicas["config"], replicas["pricing_type"]]).sum() / horizon_hours
    fleet["replicas_mean"] = weighted.reindex(
        pd.MultiIndex.from_frame(fleet[["config", "pricing_type"]])).to_numpy()
    fleet = fleet[fleet["replicas_peak"] > 0].merge(
        configs[["config", "model", "gpu", "quant", "tp"]], on="config")
    fleet["gpus_peak"] = fleet["replicas_peak"] * fleet["tp"]
    fleet["usd_per_month"] = fleet["usd_total"] / p.horizon_months
    fleet = fleet[["config", "pricing_type", "model", "gpu", "quant", "tp", "replicas_peak",
                   "replicas_mean", "gpus_peak", "usd_per_gpu_hour", "usd_per_month",
                   "usd_total"]].sort_values(["usd_total", "config"], ascending=[False, True])
    return {"fleet_by_period": by_period.reset_index(drop=True),
            "fleet": fleet.reset_index(drop=True), "nodes": _nodes_table(model, solution),
            "nodes_by_period": _nodes_by_period_table(model, solution)}


def _nodes_by_period_table(model: FleetModel, solution: dict) -> pd.DataFrame:
    """(period, gpu, pricing_type): month, hour, nodes and GPUs bought then (reserved ones in
    every period from their start month): what the node cost is paid for, period by period,
    spare nodes a solve stopped short of the optimum kept included."""
    p = model.problem
    nodes = solution["nodes"]
    nodes = nodes[nodes["gpus"] > EPSILON]
    table = nodes.groupby(["period", "gpu", "pricing_type"], as_index=False).agg(
        nodes=("value", "sum"), gpus=("gpus", "sum"))
    table = table.merge(p.periods[["period", "month", "hour"]], on="period")
    return table[["period", "month", "hour", "gpu", "pricing_type", "nodes", "gpus"]].sort_values(
        ["period", "gpu", "pricing_type"]).reset_index(drop=True)


def _nodes_table(model: FleetModel, solution: dict) -> pd.DataFrame:
    p = model.problem
    nodes, replicas = solution["nodes"], solution["replicas"]
    keys = ["gpu", "pricing_type", "period"]
    used = replicas.groupby(keys, as_index=False)["gpus"].sum().rename(
        columns={"gpus": "gpus_used"})
    nodes = nodes.merge(used, on=keys, how="left").fillna({"gpus_used": 0.0})
    table = nodes.groupby(["gpu", "pricing_type"], as_index=False).agg(
        gpus_per_node=("gpus_per_node", "first"), nodes_peak=("value", "max"),
        gpus_bought_peak=("gpus", "max"), gpus_used_peak=("gpus_used", "max"),
        usd_total=("usd", "sum"))
    table = table.merge(p.offers[["gpu", "pricing_type", "max_gpus"]], on=["gpu", "pricing_type"])
    table["usd_per_month"] = table["usd_total"] / p.horizon_months
    table = table[table["gpus_bought_peak"] > EPSILON]
    return table.drop(columns="usd_total").reset_index(drop=True)


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
        nodes = pd.concat([nodes, pd.DataFrame({"month": fixed.index, "usd_month": fixed.to_numpy(),
                                                "pricing_type": "config_fixed"})], ignore_index=True)
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


def routing_table(model: FleetModel, solution: dict) -> pd.DataFrame:
    """Share of each bucket's demand sent to each configuration in each period."""
    routes = solution["routes"]
    routes = routes[routes["value"] > ROUTE_NOISE]
    keys = ["workload", "bucket", "config"]
    extras = [c for c in ("input_len", "output_len", "batch", "tpot_ms", "ttft_ms")
              if c in model.problem.candidates]
    routes = routes.drop(columns=[c for c in extras if c in routes]).merge(
        model.problem.candidates[[*keys, *extras]], on=keys, how="left")
    routes = routes.assign(fraction=routes["value"], req_s=routes["value"] * routes["req_s"])
    columns = ["workload", "bucket", "period", "config", "route", "fraction", "req_s", *extras]
    return routes[columns].sort_values(["workload", "bucket", "period", "config"]).reset_index(
        drop=True)


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
    table["model"] = _optional(p.workloads.set_index("workload"), "model", "")
    table["demand_req_s_mean"] = grouped["weight"] / p.horizon_hours
    table["demand_req_s_peak"] = per_period.groupby("workload").max()
    table["tokens_per_month"] = grouped["tokens"] / p.horizon_months
    table["served_fraction"] = grouped["served"] / grouped["weight"]
    slo = p.workloads.set_index("workload")
    served_routes = routes[routes["value"] > ROUTE_NOISE].merge(
        p.candidates, on=["workload", "bucket", "config"], how="left", suffixes=("", "_c"))
    for metric in ("tpot", "ttft"):
        table[f"{metric}_slo_ms"] = _optional(slo, f"{metric}_slo_ms")
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
    tokens = _optional(demand, "input_len", 0.0) + _optional(demand, "output_len", 0.0)
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


def unmet_table(model: FleetModel, solution: dict) -> pd.DataFrame:
    """Unmet demand per workload bucket and period (elastic model); reason filled later."""
    unmet = solution["unmet"]
    columns = ["workload", "bucket", "period", "demand_req_s", "unmet_req_s", "unmet_fraction",
               "reason"]
    if unmet is None or unmet.empty:
        return pd.DataFrame(columns=columns)
    unmet = unmet[unmet["value"] > 1e-6]
    return pd.DataFrame({
        "workload": unmet["workload"], "bucket": unmet["bucket"], "period": unmet["period"],
        "demand_req_s": unmet["req_s"], "unmet_req_s": unmet["value"] * unmet["req_s"],
        "unmet_fraction": unmet["value"], "reason": ""}).reset_index(drop=True)[columns]


def assemble_plan(model: FleetModel, outcome: SolveOutcome, status: str, **metadata) -> FleetPlan:
    """A FleetPlan from a solved model; ``metadata`` fills scenario, assumptions, prices..."""
    p = model.problem
    if not outcome.has_solution:
        return FleetPlan(status=status, gap=outcome.gap, objective_usd=math.nan,
                         usd_per_month=math.nan, solver=outcome.solver,
                         solve_seconds=outcome.seconds, periods=p.periods,
                         candidates=p.candidates, **metadata)
    solution = solution_tables(model)
    objective = (float(solution["nodes"]["usd"].sum()) + float(solution["api_costs"]["usd"].sum())
                 + float(solution["fixed_costs"]["usd"].sum()))
    if wants_changes(p):
        metadata["changes"] = changes_table(p, held_from_solution(p, solution))
    return FleetPlan(
        status=status, gap=outcome.gap, objective_usd=objective,
        usd_per_month=objective / p.horizon_months, solver=outcome.solver,
        solve_seconds=outcome.seconds, bound_usd=outcome.bound,
        routing=routing_table(model, solution),
        unmet_demand=unmet_table(model, solution), periods=p.periods, candidates=p.candidates,
        **fleet_tables(model, solution), **cost_tables(model, solution),
        **workload_tables(model, solution), **supply_tables(model, solution),
        config_fixed_costs=solution["fixed_costs"], **metadata)


def supply_tables(model: FleetModel, solution: dict) -> dict[str, pd.DataFrame]:
    """power (per site and month), api_routing, api_usage and api_break_even."""
    p = model.problem
    return {"power": power_table(p, solution["nodes"]), "api_routing": solution["api_routing"],
            "api_usage": api_usage_table(p, solution["api_routing"]),
            "api_break_even": break_even_table(p)}
