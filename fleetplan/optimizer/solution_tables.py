"""Read a solved fleet model back into the tidy tables of a FleetPlan: the fleet, its nodes,
routing and unmet demand here, the cost tables in ``plan_cost_tables.py``."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fleetplan.optimizer.api_supply import (
    api_costs_by_period,
    api_routing_table,
    api_shares,
    api_usage_table,
)
from fleetplan.optimizer.config_fixed_cost import fixed_cost_table
from fleetplan.optimizer.fleet_changes import changes_table, held_from_solution, wants_changes
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.fleet_problem import charged_offers
from fleetplan.optimizer.hosted_apis import break_even_table
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.milp_tables import per_period
from fleetplan.optimizer.plan_checks import ROUTE_NOISE
from fleetplan.optimizer.plan_cost_tables import cost_tables, optional_column, workload_tables
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
    configs = p.configs.assign(model=optional_column(p.configs, "model", ""),
                               quant=optional_column(p.configs, "quant", ""))
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


def plan_without_solution(problem, outcome: SolveOutcome, status: str,
                          **metadata) -> FleetPlan:
    """The plan of a solve that found none: its status, solver and bound (no plan costs
    less), no cost, and the problem's periods and candidates."""
    return FleetPlan(status=status, gap=outcome.gap, objective_usd=math.nan,
                     usd_per_month=math.nan, solver=outcome.solver,
                     solve_seconds=outcome.seconds, bound_usd=outcome.bound,
                     periods=problem.periods,
                     candidates=problem.candidates, **metadata)


def assemble_plan(model: FleetModel, outcome: SolveOutcome, status: str, **metadata) -> FleetPlan:
    """A FleetPlan from a solved model; ``metadata`` fills scenario, assumptions, prices..."""
    p = model.problem
    if not outcome.has_solution:
        return plan_without_solution(p, outcome, status, **metadata)
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
