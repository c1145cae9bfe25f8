"""Constraint builders of the fleet MILP, one ``define_*`` per constraint family.

Each builder reads the model's variable tables (routes, replicas, nodes, unmet), computes its
coefficients column-wise into one table of terms (keys, ``col``, ``coef``), and adds all its rows
at once under the family's name; it returns early when the problem has nothing for it to do.
The families, their fields and what else each one needs are listed in
``constraint_families.FAMILIES``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fleetplan.optimizer.api_supply import api_shares
from fleetplan.optimizer.fleet_problem import Problem, month_keys, period_probability
from fleetplan.optimizer.milp_tables import add_keyed_rows, per_period
from fleetplan.optimizer.node_packing import chain_capacity, is_chain, patterns

if TYPE_CHECKING:
    from fleetplan.optimizer.milp import FleetModel


def _terms(table: pd.DataFrame, keys: list[str], coef) -> pd.DataFrame:
    coef = np.broadcast_to(np.asarray(coef, dtype=float), (len(table),))
    return table[keys].assign(col=table["col"].to_numpy(), coef=coef)


def define_demand(model: FleetModel) -> None:
    """Every bucket's demand is routed (or, elastic, declared unmet) in every period."""
    keys = ["workload", "bucket", "period"]
    demand = model.problem.demand
    demand = demand[demand["req_s"] > 0][keys].sort_values(keys)
    shares = model.routes.drop_duplicates([*keys, "route"])  # stages share one variable
    terms = [_terms(shares, keys, 1.0)]
    if model.elastic:
        terms.append(_terms(model.unmet, keys, 1.0))
    if not api_shares(model).empty:
        terms.append(_terms(api_shares(model), keys, 1.0))
    add_keyed_rows(model, "demand", pd.concat(terms, ignore_index=True), keys, "=", 1.0,
                   rows=demand, unit="share",
                   subject=lambda t: t["workload"] + "#" + t["bucket"].astype(str))


def replicas_per_period(model: FleetModel) -> pd.DataFrame:
    """Replica columns of every period (reserved columns repeated in each); made once per
    replica table, as several families read it (callers never change it)."""
    replicas, periods, table = model.replicas_spread
    if replicas is not model.replicas or periods is not model.problem.periods:
        table = per_period(model.replicas, model.problem.periods)
        model.replicas_spread = (model.replicas, model.problem.periods, table)
    return table


def define_capacity(model: FleetModel) -> None:
    """Load routed to a configuration never exceeds its replicas (at target utilization)."""
    keys = ["config", "period"]
    terms = pd.concat([_terms(model.routes, keys, model.routes["load"]),
                       _terms(replicas_per_period(model), keys, -1.0)], ignore_index=True)
    add_keyed_rows(model, "capacity", terms, keys, "<=", 0.0, unit="replicas",
                   subject=lambda t: t["config"])


def define_node_cover(model: FleetModel) -> None:
    """The replicas of each GPU and pricing type pack into the nodes bought (``node_packing``):
    by GPU count per size of a divisibility chain of TP degrees, else by node patterns. GPUs
    bought one at a time (``gpus_per_node`` 1) only count GPUs."""
    keys = ["gpu", "pricing_type", "period"]
    nodes = model.nodes
    node_gpus = nodes.groupby("gpu")["gpus_per_node"].first()
    chains: list[tuple[str, int, int]] = []  # GPU types in a row packed by chains: one call
    for gpu, replicas in model.replicas.groupby("gpu", sort=True):
        s = int(node_gpus[gpu])
        sizes = sorted(int(t) for t in replicas["tp"].unique())
        if s == 1:  # bought GPU by GPU: a replica's GPUs need not share a node
            chains += [(gpu, 1, 1)]
        elif is_chain(sizes):
            chains += [(gpu, size, s) for size in chain_sizes(sizes, s)]
        else:
            _chain_rows(model, chains, keys)
            chains = []
            _pattern_rows(model, replicas, nodes[nodes["gpu"] == gpu], sizes, s, keys)
    _chain_rows(model, chains, keys)


def chain_sizes(sizes: list[int], node_gpus: int) -> list[int]:
    """The sizes of a chain whose rows are needed: the smallest, and each that does not divide
    the node (the others are implied).

    >>> chain_sizes([1, 2, 4, 16], 72), chain_sizes([1, 2, 4, 8], 8)
    ([1, 16], [1])
    """
    return [sizes[0]] + [t for t in sizes[1:] if node_gpus % t]


def _node_subject(table: pd.DataFrame) -> pd.Series:
    return table["gpu"] + "/" + table["pricing_type"]


def _chain_rows(model, chains: list[tuple[str, int, int]], keys) -> None:
    """For each (GPU type, size tau, node GPUs s) of ``chains``: replicas of size >= tau fill
    at most tau floor(s / tau) GPUs of each node (rows ordered by GPU type, then size)."""
    if not chains:
        return
    rows = pd.DataFrame(chains, columns=["gpu", "size", "node_gpus"])
    rows["fill"] = [max(chain_capacity(size, s), 1) for _, size, s in chains]
    replicas = model.replicas.merge(rows, on="gpu")
    # with GPUs bought one at a time every replica counts, whatever its size
    replicas = replicas[(replicas["tp"] >= replicas["size"]) | (replicas["node_gpus"] == 1)]
    nodes = model.nodes.merge(rows, on="gpu")
    row_keys = ["gpu", "size", *keys[1:]]
    terms = pd.concat([_terms(replicas, row_keys, replicas["tp"]),
                       _terms(nodes, row_keys, -nodes["fill"].astype(float))],
                      ignore_index=True)
    add_keyed_rows(model, "nodes", terms, row_keys, "<=", 0.0, unit="GPUs",
                   subject=_node_subject)


def _pattern_rows(model, replicas, nodes, sizes, node_gpus, keys) -> None:
    """Nodes filled by patterns: y_tau <= sum_p a_p,tau z_p, n >= sum_p z_p."""
    fills = patterns(sizes, node_gpus)
    filled = nodes[keys].merge(pd.DataFrame({"pattern": range(len(fills))}), how="cross")
    filled = model.new_columns(filled, integer=True)
    model.extras["patterns"] = pd.concat([model.extras.get("patterns"), filled])
    terms = [_terms(nodes, keys, -1.0), _terms(filled, keys, 1.0)]
    add_keyed_rows(model, "nodes", pd.concat(terms, ignore_index=True), keys, "<=", 0.0,
                   unit="GPUs", subject=_node_subject)
    for size in sizes:
        held = filled["pattern"].map(lambda p, size=size: fills[p][size]).to_numpy(float)
        mine = replicas[replicas["tp"] == size]
        terms = pd.concat([_terms(mine, keys, 1.0), _terms(filled, keys, -held)],
                          ignore_index=True)
        add_keyed_rows(model, "nodes", terms, keys, "<=", 0.0, unit="GPUs",
                       subject=_node_subject)


def _node_gpus_per_period(model: FleetModel) -> pd.DataFrame:
    return per_period(model.nodes, model.problem.periods)


def define_availability(model: FleetModel) -> None:
    """GPUs of each type in use at any time stay within its availability cap."""
    caps = model.problem.gpus.dropna(subset=["max_gpus"])
    if caps.empty:
        return
    nodes = _node_gpus_per_period(model)
    nodes = nodes[nodes["gpu"].isin(caps["gpu"])]
    terms = _terms(nodes, ["gpu", "period"], nodes["gpus_per_node"])
    add_keyed_rows(model, "availability", terms, ["gpu", "period"], "<=",
                   lambda t: t["gpu"].map(caps.set_index("gpu")["max_gpus"]).to_numpy(),
                   unit="GPUs", subject=lambda t: t["gpu"])


def define_offer_caps(model: FleetModel) -> None:
    """GPUs of one GPU type bought at one pricing type stay within that offer's cap."""
    caps = model.problem.offers.dropna(subset=["max_gpus"])
    if caps.empty:
        return
    keys = ["gpu", "pricing_type", "period"]
    nodes = model.nodes.merge(caps[["gpu", "pricing_type"]], on=["gpu", "pricing_type"])
    cap = caps.set_index(["gpu", "pricing_type"])["max_gpus"]
    add_keyed_rows(model, "offer_cap", _terms(nodes, keys, nodes["gpus_per_node"]), keys, "<=",
                   lambda t: cap.reindex(pd.MultiIndex.from_frame(
                       t[["gpu", "pricing_type"]])).to_numpy(),
                   unit="GPUs", subject=lambda t: t["gpu"] + "/" + t["pricing_type"])


def define_spot_share(model: FleetModel) -> None:
    """GPUs of spot replicas are at most a share sigma of all replicas' GPUs in every period.

    Counted on replicas rather than nodes bought, so idle GPUs cannot dilute the share.
    """
    share = model.problem.spot_max_share
    if share is None or share >= 1 or not (model.replicas["pricing_type"] == "spot").any():
        return
    replicas = replicas_per_period(model)
    is_spot = (replicas["pricing_type"] == "spot").to_numpy()
    terms = _terms(replicas, ["period"], replicas["tp"] * (is_spot - share))
    add_keyed_rows(model, "spot_share", terms, ["period"], "<=", 0.0, unit="GPUs",
                   subject=lambda t: pd.Series(["spot"] * len(t)))


def define_redundancy(model: FleetModel) -> None:
    """N+k per configuration: a configuration that carries load of a workload with k spares in
    a period keeps k replicas beyond its load then.

    Losing any k replicas (the largest included) then leaves every configuration enough of its
    own replicas for its load, so no request ever waits on a configuration sized for other
    requests (a 1 req/s replica never stands in for a 100 req/s one). A binary u per
    (workload, configuration, period) says whether the workload uses the configuration:
    every routing share x <= u, and Y - L >= k u.
    """
    p = model.problem
    k = p.workloads.set_index("workload")["redundancy_k"]
    routes = model.routes.assign(redundancy_k=model.routes["workload"].map(k).fillna(0))
    routes = routes[routes["redundancy_k"] > 0]
    if routes.empty:
        return
    keys = ["workload", "config", "period"]
    uses = model.new_columns(routes[[*keys, "pool", "redundancy_k"]].drop_duplicates(keys),
                             upper=1.0, integer=True)
    linked = routes[[*keys, "col", "bucket", "route"]].merge(
        uses[[*keys, "col"]].rename(columns={"col": "use"}), on=keys)
    link_terms = pd.concat([linked.assign(coef=1.0), linked.assign(col=linked["use"],
                                                                  coef=-1.0)])
    add_keyed_rows(model, "redundancy", link_terms, [*keys, "bucket", "route"], "<=", 0.0,
                   unit="share", subject=lambda t: t["workload"])
    capacity = pd.concat([_terms(replicas_per_period(model), ["config", "period"], 1.0),
                          _terms(model.routes, ["config", "period"], -model.routes["load"])])
    terms = uses[keys].merge(capacity, on=["config", "period"])
    terms = pd.concat([terms, _terms(uses, keys, -uses["redundancy_k"])], ignore_index=True)
    if model.elastic:  # spares may fall short too, tracked like unmet demand
        short = model.new_columns(uses[[*keys, "pool", "redundancy_k"]])
        model.spare_shortfall = short
        terms = pd.concat([terms, _terms(short, keys, 1.0)], ignore_index=True)
    rows = add_keyed_rows(model, "redundancy", terms, keys, ">=", 0.0, unit="replicas",
                          subject=lambda t: t["workload"])
    model.extras["redundancy"] = rows.merge(uses[[*keys, "col"]], on=keys)


def define_pool_cover(model: FleetModel) -> None:
    """Valid cut: a pool's replicas in a period are at least its whole-replica lower bound
    (``pool_cover_bounds``); it tightens the LP relaxation, which otherwise spreads fractions
    of replicas over many configurations."""
    if model.routes.empty or model.elastic:  # unmet demand needs no replicas
        return
    bound = pool_cover_bounds(model.problem, model.routes)
    if bound.empty:
        return
    add_keyed_rows(model, "pool_cover", _terms(replicas_per_period(model), ["pool", "period"],
                                               1.0), ["pool", "period"], ">=",
                   lambda t: bound.reindex(pd.MultiIndex.from_frame(t)).fillna(0).to_numpy(),
                   unit="replicas", subject=lambda t: t["pool"])


def pool_cover_bounds(problem: Problem, routes: pd.DataFrame) -> pd.Series:
    """Fewest whole replicas each (pool, period) needs [replicas]: route every bucket to its
    highest-capacity configuration, round the pool's summed load up, add its largest N+k.
    Buckets an API may serve count for nothing."""
    per_route = routes.groupby(["workload", "bucket", "period", "route"]).agg(
        pool=("pool", "first"), load=("load", "sum"))  # a route's stages all need replicas
    best = per_route.groupby(["workload", "bucket", "period"]).agg(
        pool=("pool", "first"), load=("load", "min"))
    by_api = pd.MultiIndex.from_frame(problem.api_candidates[["workload", "bucket"]])
    best = best[~best.index.droplevel("period").isin(by_api)]  # an API may serve them instead
    if best.empty:
        return pd.Series(dtype=float)
    need = best.groupby(["pool", "period"])["load"].sum()
    busy = best.reset_index()[["workload", "pool", "period"]].drop_duplicates().merge(
        problem.workloads[["workload", "redundancy_k"]], on="workload")
    spare = busy.groupby(["pool", "period"])["redundancy_k"].max().reindex(need.index)
    return pd.Series(pool_cover_bound(need.to_numpy(), spare.fillna(0).to_numpy()),
                     index=need.index)


def pool_cover_bound(need_replicas, spare_replicas):
    """Whole replicas a pool needs [replicas]: its least load rounded up (round-off below 1e-6
    replicas forgiven) plus its spares."""
    return np.ceil(np.asarray(need_replicas) - 1e-6) + spare_replicas


def monthly_cost_terms(model: FleetModel) -> pd.DataFrame:
    """Cost of each node column in each month: (month, col, coef [USD per node]); with demand
    scenarios per (scenario, month), each scenario's hours at their own weight. Hosted-API shares
    and the fixed cost per deployed configuration count too."""
    p = model.problem
    months = month_keys(p.periods)
    nodes = model.nodes.assign(
        usd_per_node_hour=model.nodes["gpus_per_node"] * model.nodes["usd_per_gpu_hour"])
    reserved = nodes[nodes["period"] < 0].merge(p.periods[months].drop_duplicates(),
                                                how="cross")
    reserved["coef"] = reserved["usd_per_node_hour"] * p.hours_per_month
    flexible = nodes[nodes["period"] >= 0].merge(
        p.periods[["period", *months, "month_weight"]], on="period")
    probability = period_probability(p.periods)
    flexible["coef"] = flexible["usd_per_node_hour"] * flexible["hours"] / (
        flexible["month_weight"] * flexible["period"].map(probability))
    shares = api_shares(model).merge(p.periods[["period", *months, "month_weight"]],
                                     on="period")
    shares["coef"] = shares["usd"] / (shares["month_weight"] * shares["period"].map(probability))
    terms = [reserved[[*months, "col", "coef"]], flexible[[*months, "col", "coef"]],
             shares[[*months, "col", "coef"]]]
    fixed = model.extras.get("config_fixed")  # deployed binaries (config_fixed_cost.py), built first
    if fixed is not None and not fixed.empty:
        terms.append(fixed[[*months, "col"]].assign(coef=float(p.config_fixed_usd_per_month)))
    return pd.concat(terms, ignore_index=True)


def define_budget(model: FleetModel) -> None:
    """The fleet's cost in every month stays within the budget."""
    budget = model.problem.budget_usd_per_month
    if budget is None:
        return
    months = month_keys(model.problem.periods)
    add_keyed_rows(model, "budget", monthly_cost_terms(model), months, "<=", float(budget),
                   unit="USD/month", subject=lambda t: _month_names(t, months))


def _month_names(table: pd.DataFrame, months: list[str]) -> pd.Series:
    names = table["month"].map(lambda m: f"month {m}")
    return names if months == ["month"] else table["scenario"].astype(str) + " " + names
