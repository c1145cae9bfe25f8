"""Checks of a finished plan against its problem, one per constraint family.

A check reads only the plan's tables (replicas per period, routing shares, unmet demand, monthly
costs) and the problem's inputs, never the MILP: it says in words which limit a plan breaks.
``constraint_families.FAMILIES`` names each family's check; ``verify_plan`` runs them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import LINKING_PRICING
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.fleet_problem import (
    Problem,
    charged_offers,
    month_keys,
    start_months,
    with_month_keys,
)
from fleetplan.optimizer.hosted_apis import api_usd
from fleetplan.optimizer.node_packing import nodes_needed_table

#: Slack allowed for solver round-off [replicas, shares, GPUs].
TOLERANCE = 1e-5

#: Routing shares at or below this are not routing: HiGHS accepts a binary within its MIP
#: feasibility tolerance (1e-6) of 0 or 1, so a workload may keep a share that small on a
#: configuration whose "used" binary says it carries none (and keeps no N+k spares for it).
#: The plan's routing table drops them (``solution_tables``), and the N+k check counts no less.
ROUTE_NOISE = 1e-6


@dataclass
class PlanView:
    """A plan's decisions next to the problem they answer.

    replicas: config, pricing_type, period, replicas, gpu, tp, pool, gpus [GPUs of replicas].
    routing: workload, bucket, period, config, route, fraction [share of the bucket], req_s.
    unmet: workload, bucket, period, unmet_fraction. costs_by_month: month, usd [USD].
    nodes: gpu, pricing_type, nodes_peak. api_routing: workload, bucket, period, api,
    fraction, req_s, tokens_per_request (shares sent to hosted APIs).
    """

    problem: Problem
    replicas: pd.DataFrame
    routing: pd.DataFrame
    unmet: pd.DataFrame
    costs_by_month: pd.DataFrame
    feasible: bool
    messages: list[str] = field(default_factory=list)
    nodes: pd.DataFrame = field(default_factory=pd.DataFrame)
    api_routing: pd.DataFrame = field(default_factory=pd.DataFrame)
    changes: pd.DataFrame = field(default_factory=pd.DataFrame)
    config_fixed_costs: pd.DataFrame = field(default_factory=pd.DataFrame)

    @classmethod
    def of(cls, plan: FleetPlan, problem: Problem) -> PlanView:
        """The view of ``plan``'s tables."""
        fleet = plan.fleet_by_period
        if fleet.empty:
            fleet = pd.DataFrame(columns=["config", "pricing_type", "period", "replicas"])
        replicas = fleet[["config", "pricing_type", "period", "replicas"]].merge(
            problem.configs[["config", "gpu", "tp", "pool"]], on="config")
        replicas["gpus"] = replicas["replicas"] * replicas["tp"]
        unmet = plan.unmet_demand
        if unmet.empty:
            unmet = pd.DataFrame(columns=["workload", "bucket", "period", "unmet_fraction"])
        routing = plan.routing
        if routing.empty:
            routing = pd.DataFrame(columns=["workload", "bucket", "period", "config", "route",
                                            "fraction", "req_s"])
        return cls(problem, replicas, routing, unmet, plan.costs_by_month, plan.feasible,
                   list(plan.messages), plan.nodes, plan.api_routing, plan.changes,
                   plan.config_fixed_costs)

    def loads(self) -> pd.DataFrame:
        """Routing rows with ``load`` [replicas at the target utilization] and ``pool``."""
        p = self.problem
        routes = self.routing.merge(
            p.candidates[["workload", "bucket", "config", "req_s_per_replica"]],
            on=["workload", "bucket", "config"], how="left")
        routes = routes.merge(p.configs[["config", "pool"]], on="config", how="left")
        capacity = routes["req_s_per_replica"].astype(float)
        routes["load"] = routes["req_s"] / (p.target_utilization * capacity.where(capacity > 0))
        return routes

    def gpus_bought(self) -> pd.DataFrame:
        """GPUs bought per (gpu, pricing_type, period): replicas' GPUs rounded up to nodes."""
        gpus = self.replicas.groupby(["gpu", "pricing_type", "period"], as_index=False)["gpus"].sum()
        gpus = gpus.merge(self.problem.gpus[["gpu", "gpus_per_node", "max_gpus"]], on="gpu")
        node = gpus["gpus_per_node"].astype(float)
        gpus["bought"] = np.ceil(gpus["gpus"] / node - 1e-9) * node
        return gpus


    def held_gpus(self) -> pd.DataFrame:
        """GPUs held per (gpu, pricing_type, month): the plan's changes table when it has one
        (nodes bought, idle ones included), else its replicas' GPUs rounded up to nodes."""
        months = month_keys(self.problem.periods)  # and demand scenarios: each its own fleet
        if not self.changes.empty:
            return self.changes.groupby(["gpu", "pricing_type", *months], as_index=False)[
                "gpus"].sum()
        gpus = with_month_keys(self.gpus_bought(), self.problem.periods)
        gpus = gpus.groupby(["gpu", "pricing_type", *months], as_index=False)["bought"].max()
        return gpus.rename(columns={"bought": "gpus"})


def _keys(frame: pd.DataFrame, columns: list[str]) -> pd.MultiIndex:
    return pd.MultiIndex.from_frame(frame[columns])


def check_demand(view: PlanView) -> list[str]:
    """Every bucket with demand is routed (or declared unmet) exactly once in every period."""
    keys = ["workload", "bucket", "period"]
    demand = view.problem.demand[view.problem.demand["req_s"] > 0]
    routed = view.routing.drop_duplicates([*keys, "route"]).groupby(keys)["fraction"].sum()
    unmet = view.unmet.groupby(keys)["unmet_fraction"].sum()
    index = _keys(demand, keys)
    total = (routed.reindex(index, fill_value=0.0).to_numpy(dtype=float)
             + unmet.reindex(index, fill_value=0.0).to_numpy(dtype=float))
    if not view.api_routing.empty:  # shares sent to hosted APIs
        total += view.api_routing.groupby(keys)["fraction"].sum().reindex(
            index, fill_value=0.0).to_numpy(dtype=float)
    problems = []
    if view.feasible and len(unmet) and unmet.max() > TOLERANCE:
        problems.append("demand: a feasible plan leaves demand unmet")
    bad = np.flatnonzero(np.abs(total - 1.0) > 1e-4)
    return problems + [f"demand: {index[i]} is covered {total[i]:.6f} times" for i in bad]


def check_capacity(view: PlanView) -> list[str]:
    """The load routed to each configuration fits its replicas at the target utilization."""
    routes = view.loads()
    if routes.empty:
        return []
    if routes["load"].isna().any():
        return ["capacity: demand routed to a configuration that cannot serve it"]
    load = routes.groupby(["config", "period"])["load"].sum()
    have = view.replicas.groupby(["config", "period"])["replicas"].sum().reindex(
        load.index, fill_value=0.0)
    over = load.index[(load - have > TOLERANCE).to_numpy()]
    return [f"capacity: {k} carries a load of {load[k]:.4f} replicas on {have[k]:.0f}"
            for k in over]


def check_node_cover(view: PlanView) -> list[str]:
    """Replicas are whole, and the nodes bought hold them (``node_packing``)."""
    replicas = view.replicas["replicas"].astype(float)
    if (np.abs(replicas - np.round(replicas)) > TOLERANCE).any():
        return ["nodes: replica counts must be whole numbers"]
    if view.nodes.empty:
        return []
    node_gpus = view.problem.gpus.set_index("gpu")["gpus_per_node"]
    keys = ["gpu", "pricing_type", "period"]
    replicas = view.replicas[[*keys, "tp", "replicas"]].astype({"replicas": float})
    needed = nodes_needed_table(replicas.assign(node_gpus=replicas["gpu"].map(node_gpus)),
                                keys).rename("needed").reset_index()
    peak = view.nodes.groupby(["gpu", "pricing_type"], as_index=False)["nodes_peak"].max()
    needed = needed.merge(peak, on=["gpu", "pricing_type"], how="left").fillna(
        {"nodes_peak": 0.0})
    short = needed[(needed["needed"] > needed["nodes_peak"] + TOLERANCE)
                   & (needed["gpu"].map(node_gpus) > 1)]
    whole = short[["period", "needed", "nodes_peak"]].round().astype(int).astype(str)
    return ("nodes: " + short["gpu"].astype(str) + "/" + short["pricing_type"].astype(str)
            + " in period " + whole["period"] + " needs " + whole["needed"] + " nodes, "
            + whole["nodes_peak"] + " bought").tolist()


def check_availability(view: PlanView) -> list[str]:
    """GPUs of each type bought in any period stay within its availability cap."""
    gpus = view.gpus_bought()
    per_gpu = gpus.groupby(["gpu", "period"]).agg(bought=("bought", "sum"),
                                                  cap=("max_gpus", "first"))
    over = per_gpu[per_gpu["bought"] > per_gpu["cap"].astype(float).fillna(np.inf) + TOLERANCE]
    return [f"availability: {gpu} in period {period}: {bought:.0f} GPUs > cap {cap:.0f}"
            for (gpu, period), bought, cap in zip(over.index, over["bought"], over["cap"], strict=True)]


def check_offer_caps(view: PlanView) -> list[str]:
    """GPUs bought at each offer stay within its cap, and only at offered pricing types."""
    gpus = view.gpus_bought()
    offers = view.problem.offers[["gpu", "pricing_type", "max_gpus"]].rename(
        columns={"max_gpus": "offer_cap"})
    gpus = gpus.merge(offers, on=["gpu", "pricing_type"], how="left", indicator=True)
    problems = [f"offer_cap: {g} is bought at {p}, which is not offered" for g, p in
                gpus.loc[gpus["_merge"] == "left_only", ["gpu", "pricing_type"]].to_numpy()]
    over = gpus[gpus["bought"] > gpus["offer_cap"].astype(float).fillna(np.inf) + TOLERANCE]
    return problems + [f"offer_cap: {g}/{p} in period {t}: {b:.0f} GPUs > cap {c:.0f}"
                       for g, p, t, b, c in over[["gpu", "pricing_type", "period", "bought",
                                                  "offer_cap"]].to_numpy()]


def check_spot_share(view: PlanView) -> list[str]:
    """Spot replicas hold at most the allowed share of the replicas' GPUs in every period."""
    share = view.problem.spot_max_share
    if share is None:
        return []
    gpus = view.replicas
    total = gpus.groupby("period")["gpus"].sum()
    spot = gpus[gpus["pricing_type"] == "spot"].groupby("period")["gpus"].sum()
    excess = spot.reindex(total.index, fill_value=0.0) - share * total
    return [f"spot_share: period {t}: {spot.get(t, 0.0):.0f} spot GPUs of {total[t]:.0f}"
            for t in excess.index[(excess > TOLERANCE).to_numpy()]]


def check_redundancy(view: PlanView) -> list[str]:
    """A configuration carrying load of a workload with N+k keeps k replicas beyond its load."""
    p = view.problem
    k = p.workloads.set_index("workload")["redundancy_k"]
    if not (k > 0).any() or (not view.feasible and any("spare replicas" in m
                                                       for m in view.messages)):
        return []
    routes = view.loads()
    load = routes.groupby(["config", "period"])["load"].sum()
    have = view.replicas.groupby(["config", "period"])["replicas"].sum()
    used = routes[routes["fraction"] > ROUTE_NOISE].assign(k=lambda r: r["workload"].map(k))
    need = used[used["k"] > 0].groupby(["config", "period"])["k"].max()
    spare = (have.reindex(need.index, fill_value=0.0) - load.reindex(need.index, fill_value=0.0))
    short = need.index[(spare < need - TOLERANCE).to_numpy()]
    return [f"redundancy: {config} in period {period} keeps {spare[(config, period)]:.3f} spare "
            f"replicas < {need[(config, period)]:.0f}" for config, period in short]


def check_budget(view: PlanView) -> list[str]:
    """The fleet's cost in every month stays within the budget; with demand scenarios, in
    every month of every scenario (not only on average)."""
    budget = view.problem.budget_usd_per_month
    if budget is None or not view.feasible or view.costs_by_month.empty:
        return []
    months = view.costs_by_month.set_index("month")["usd"].rename(lambda m: f"month {m}")
    if "scenario" in view.problem.periods:
        months = scenario_month_usd(view)
        months.index = [f"{scenario} month {month}" for scenario, month in months.index]
    over = months[months > budget * (1 + 1e-7) + 1e-6]
    return [f"budget: {m} costs {usd:,.2f} USD > {budget:,.2f}" for m, usd in over.items()]


def scenario_month_usd(view: PlanView) -> pd.Series:
    """What the plan costs in each month of each demand scenario [USD], from its replicas on
    whole nodes (reserved capacity in every month at its monthly charge, flexible capacity and
    hosted APIs for the hours of that scenario's periods) and its configurations' fixed monthly
    costs, indexed by (scenario, month)."""
    p = view.problem
    periods = p.periods.set_index("period")
    gpus = view.replicas.groupby(["gpu", "pricing_type", "period"], as_index=False)["gpus"].sum()
    gpus = gpus.merge(p.gpus[["gpu", "gpus_per_node"]], on="gpu").merge(
        charged_offers(p)[["gpu", "pricing_type", "usd_per_gpu_hour"]], on=["gpu", "pricing_type"])
    per_node = gpus["gpus_per_node"].to_numpy(dtype=float)
    nodes = np.ceil(gpus["gpus"].to_numpy(dtype=float) / per_node - TOLERANCE)
    usd_per_hour = pd.Series(nodes * per_node * gpus["usd_per_gpu_hour"].to_numpy(dtype=float),
                             index=gpus.index)
    keys = p.periods[["scenario", "month"]].drop_duplicates()
    reserved = float(usd_per_hour[gpus["period"] < 0].sum()) * p.hours_per_month
    flexible = gpus["period"] >= 0
    # a scenario's period stands for its hours x probability of a month_weight of its month
    weight = periods["hours"] / (periods["month_weight"] * periods["probability"])
    charges = [pd.DataFrame({"period": gpus.loc[flexible, "period"],
                             "usd": usd_per_hour[flexible] * gpus.loc[flexible, "period"].map(weight)})]
    routed = view.api_routing
    if not routed.empty:
        charges.append(pd.DataFrame({"period": routed["period"], "usd": api_usd(
            routed["req_s"], routed["period"].map(weight), routed["usd_per_request"])}))
    charged = pd.concat(charges, ignore_index=True).join(periods[["scenario", "month"]], on="period")
    usd = charged.groupby(["scenario", "month"])["usd"].sum()
    index = pd.MultiIndex.from_frame(keys)
    usd = usd.reindex(index, fill_value=0.0) + reserved
    fixed = view.config_fixed_costs
    if not fixed.empty:  # each deployed configuration-month's overhead
        deployed = fixed.groupby(["scenario", "month"])["deployed"].sum()
        usd = usd + deployed.reindex(index, fill_value=0.0) * float(p.config_fixed_usd_per_month)
    return usd


def check_reserved_baseline(view: PlanView) -> list[str]:
    """Reserved (and purchased) replicas are the same in every period of the horizon from
    their start month, and absent before it."""
    reserved = view.replicas[view.replicas["pricing_type"].isin(LINKING_PRICING)]
    if reserved.empty:
        return []
    spread = reserved.groupby(["config", "pricing_type"]).agg(
        min=("replicas", "min"), max=("replicas", "max"), size=("replicas", "size"),
        gpu=("gpu", "first")).reset_index()
    months = view.problem.periods["month"].to_numpy()
    expected = (months[None, :] >= start_months(view.problem, spread)[:, None]).sum(axis=1)
    uneven = ((spread["min"] != spread["max"]) | (spread["size"] != expected)).to_numpy()
    spread = spread.set_index(["config", "pricing_type"])
    return [f"reserved_baseline: {c}/{p} changes between periods" for c, p in spread.index[uneven]]
