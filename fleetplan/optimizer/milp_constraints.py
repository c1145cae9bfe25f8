"""Constraint builders of the fleet MILP, one ``define_*`` per constraint family.

Each builder reads the model's variable tables (routes, replicas, nodes, unmet), computes its
coefficients column-wise, and adds its rows through ``milp_tables.add_constraints`` under the
family's name; it returns early when the problem has nothing for it to do. The families, their
fields and what else each one needs are listed in ``constraint_families.FAMILIES``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pulp

from fleetplan.optimizer.milp_tables import (
    add_constraints,
    coded,
    expressions,
    per_period,
    variables,
)

if TYPE_CHECKING:
    from fleetplan.optimizer.milp import FleetModel

LE, GE, EQ = pulp.LpConstraintLE, pulp.LpConstraintGE, pulp.LpConstraintEQ

def define_demand(model: FleetModel) -> None:
    """Every bucket's demand is routed (or, elastic, declared unmet) in every period."""
    keys = ["workload", "bucket", "period"]
    demand = model.problem.demand
    demand = demand[demand["req_s"] > 0][keys]
    shares = model.routes.drop_duplicates([*keys, "route"])  # stages share one variable
    terms = [shares[[*keys, "var"]].assign(coef=1.0)]
    if model.elastic:
        terms.append(model.unmet[[*keys, "var"]].assign(coef=1.0))
    rows = demand.merge(expressions(pd.concat(terms, ignore_index=True), keys), on=keys,
                        how="left")
    rows["expr"] = [e if isinstance(e, pulp.LpAffineExpression) else pulp.LpAffineExpression()
                    for e in rows["expr"]]
    add_constraints(model, "demand", rows, EQ, 1.0,
                    subject=rows["workload"] + "#" + rows["bucket"].astype(str), unit="share")


def _replicas_per_period(model: FleetModel) -> pd.DataFrame:
    return per_period(model.replicas, model.problem.periods)


def define_capacity(model: FleetModel) -> None:
    """Load routed to a configuration never exceeds its replicas (at target utilization)."""
    load = model.routes[["config", "period", "var", "load"]].rename(columns={"load": "coef"})
    replicas = _replicas_per_period(model)[["config", "period", "var"]].assign(coef=-1.0)
    rows = expressions(pd.concat([load, replicas], ignore_index=True), ["config", "period"])
    add_constraints(model, "capacity", rows, LE, 0.0, subject=rows["config"], unit="replicas")


def define_node_cover(model: FleetModel) -> None:
    """GPUs of the replicas of each GPU and pricing type fit in the nodes bought."""
    keys = ["gpu", "pricing_type", "period"]
    gpus = model.replicas[[*keys, "var", "tp"]].rename(columns={"tp": "coef"})
    nodes = model.nodes[[*keys, "var"]].assign(coef=-model.nodes["gpus_per_node"].astype(float))
    rows = expressions(pd.concat([gpus, nodes], ignore_index=True), keys)
    add_constraints(model, "nodes", rows, LE, 0.0,
                    subject=rows["gpu"] + "/" + rows["pricing_type"], unit="GPUs")


def _node_gpus_per_period(model: FleetModel) -> pd.DataFrame:
    nodes = per_period(model.nodes, model.problem.periods)
    return nodes.assign(coef=nodes["gpus_per_node"].astype(float))


def define_availability(model: FleetModel) -> None:
    """GPUs of each type in use at any time stay within its availability cap."""
    caps = model.problem.gpus.dropna(subset=["max_gpus"])
    if caps.empty:
        return
    nodes = _node_gpus_per_period(model)
    nodes = nodes[nodes["gpu"].isin(caps["gpu"])]
    rows = expressions(nodes[["gpu", "period", "var", "coef"]], ["gpu", "period"])
    rows = rows.merge(caps[["gpu", "max_gpus"]], on="gpu")
    add_constraints(model, "availability", rows, LE, rows["max_gpus"].to_numpy(),
                    subject=rows["gpu"], unit="GPUs")


def define_offer_caps(model: FleetModel) -> None:
    """GPUs of one GPU type bought at one pricing type stay within that offer's cap."""
    caps = model.problem.offers.dropna(subset=["max_gpus"])
    if caps.empty:
        return
    keys = ["gpu", "pricing_type", "period"]
    nodes = model.nodes.merge(caps[["gpu", "pricing_type", "max_gpus"]],
                              on=["gpu", "pricing_type"])
    terms = nodes[[*keys, "var"]].assign(coef=nodes["gpus_per_node"].astype(float))
    rows = expressions(terms, keys).merge(caps[["gpu", "pricing_type", "max_gpus"]],
                                          on=["gpu", "pricing_type"])
    add_constraints(model, "offer_cap", rows, LE, rows["max_gpus"].to_numpy(),
                    subject=rows["gpu"] + "/" + rows["pricing_type"], unit="GPUs")


def define_spot_share(model: FleetModel) -> None:
    """GPUs of spot replicas are at most a share sigma of all replicas' GPUs in every period.

    Counted on replicas rather than nodes bought, so idle GPUs cannot dilute the share.
    """
    share = model.problem.spot_max_share
    replicas = _replicas_per_period(model)
    is_spot = (replicas["pricing_type"] == "spot").to_numpy()
    if share is None or share >= 1 or not is_spot.any():
        return
    terms = replicas[["period", "var"]].assign(coef=replicas["tp"] * (is_spot - share))
    rows = expressions(terms, ["period"])
    add_constraints(model, "spot_share", rows, LE, 0.0,
                    subject=pd.Series(["spot"] * len(rows)), unit="GPUs")


def define_redundancy(model: FleetModel) -> None:
    """Each workload's pool keeps k spare replicas beyond its load in every busy period."""
    p = model.problem
    needy = p.workloads[p.workloads["redundancy_k"] > 0]
    if needy.empty:
        return
    busy = p.demand[p.demand["req_s"] > 0][["workload", "period"]].drop_duplicates()
    busy = busy.merge(needy[["workload", "pool", "redundancy_k"]], on="workload")
    replicas = _replicas_per_period(model)[["pool", "period", "var"]].assign(coef=1.0)
    load = model.routes[["pool", "period", "var"]].assign(coef=-model.routes["load"])
    terms = busy[["workload", "pool", "period"]].merge(
        pd.concat([replicas, load], ignore_index=True), on=["pool", "period"])
    if model.elastic:  # spares may fall short too, tracked like unmet demand
        short = coded(busy.reset_index(drop=True), ["workload"])
        short["var"] = variables(model.lp, "spare_short", short, ["workload_code", "period"],
                                  cat="Continuous", up=None)
        model.spare_shortfall = short
        terms = pd.concat([terms, short[["workload", "period", "var"]].assign(coef=1.0)],
                          ignore_index=True)
    rows = expressions(terms, ["workload", "period"])
    rows = rows.merge(busy[["workload", "period", "redundancy_k"]], on=["workload", "period"])
    add_constraints(model, "redundancy", rows, GE, rows["redundancy_k"].to_numpy(),
                    subject=rows["workload"], unit="replicas")


def define_pool_cover(model: FleetModel) -> None:
    """Valid cut: a pool's replicas in a period are at least its whole-replica lower bound.

    Routing each bucket to its highest-capacity configuration needs the fewest replicas;
    rounding that number up (plus the pool's largest redundancy) tightens the LP relaxation,
    which otherwise spreads fractions of replicas over many configurations.
    """
    p = model.problem
    routes = model.routes
    if routes.empty or model.elastic:  # unmet demand needs no replicas
        return
    per_route = routes.groupby(["workload", "bucket", "period", "route"]).agg(
        pool=("pool", "first"), load=("load", "sum"))  # a route's stages all need replicas
    best = per_route.groupby(["workload", "bucket", "period"]).agg(
        pool=("pool", "first"), load=("load", "min"))
    need = best.groupby(["pool", "period"])["load"].sum()
    busy = best.reset_index()[["workload", "pool", "period"]].drop_duplicates().merge(
        p.workloads[["workload", "redundancy_k"]], on="workload")
    spare = busy.groupby(["pool", "period"])["redundancy_k"].max().reindex(need.index)
    needed = need.reset_index()[["pool", "period"]].assign(
        bound=np.ceil(need.to_numpy() - 1e-6) + spare.fillna(0).to_numpy())
    replicas = _replicas_per_period(model)[["pool", "period", "var"]].assign(coef=1.0)
    rows = expressions(replicas, ["pool", "period"]).merge(needed, on=["pool", "period"])
    add_constraints(model, "pool_cover", rows, GE, rows["bound"].to_numpy(),
                    subject=rows["pool"], unit="replicas")


def _monthly_cost_terms(model: FleetModel) -> pd.DataFrame:
    """Cost of each node variable in each month: (month, var, coef [USD per node])."""
    p = model.problem
    nodes = model.nodes.assign(
        usd_per_node_hour=model.nodes["gpus_per_node"] * model.nodes["usd_per_gpu_hour"])
    reserved = nodes[nodes["period"] < 0].merge(p.periods[["month"]].drop_duplicates(),
                                                how="cross")
    reserved["coef"] = reserved["usd_per_node_hour"] * p.hours_per_month
    flexible = nodes[nodes["period"] >= 0].merge(p.periods[["period", "month", "month_weight"]],
                                                 on="period")
    flexible["coef"] = flexible["usd_per_node_hour"] * flexible["hours"] / flexible["month_weight"]
    return pd.concat([reserved[["month", "var", "coef"]], flexible[["month", "var", "coef"]]],
                     ignore_index=True)


def define_budget(model: FleetModel) -> None:
    """The fleet's cost in every month stays within the budget."""
    budget = model.problem.budget_usd_per_month
    if budget is None:
        return
    rows = expressions(_monthly_cost_terms(model), ["month"])
    add_constraints(model, "budget", rows, LE, float(budget),
                    subject=rows["month"].map(lambda m: f"month {m}"), unit="USD/month")
