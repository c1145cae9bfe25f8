"""A whole-replica plan from the LP relaxation: the fallback that is always at hand.

The LP relaxation routes every bucket (its shares meet demand exactly); rounding its replicas
up keeps that routing feasible: each configuration gets the replicas its load needs, rounded
up, plus k spares where a workload with N+k uses it, and never fewer than the LP bought
(which keeps the spot share). Reserved replicas are the LP's rounded down (or the given ones),
spot replicas the LP's rounded down, and on-demand replicas make up the rest. Nodes follow by
packing. The result is checked against every row; a plan that breaks one (an availability cap
the extra replicas exceed) is not returned.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import RESERVED_PRICING
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.milp_tables import per_period
from fleetplan.optimizer.node_packing import nodes_needed

logger = logging.getLogger(__name__)

#: Largest row violation accepted as round-off.
FEASIBLE = 1e-6


def _needed_replicas(model: FleetModel, values: np.ndarray) -> pd.Series:
    """Replicas each (config, period) needs for the LP's routing: load rounded up, k spares."""
    routes = model.routes.assign(share=np.clip(values[model.routes["col"]], 0.0, 1.0))
    routes = routes[routes["share"] > 1e-9]
    if routes.empty:  # everything unserved or sent to a hosted API: no replica needed
        return pd.Series(dtype=float, index=pd.MultiIndex.from_arrays([[], []],
                                                                      names=["config", "period"]))
    k = model.problem.workloads.set_index("workload")["redundancy_k"]
    routes = routes.assign(load=routes["load"] * routes["share"], k=routes["workload"].map(k))
    grouped = routes.groupby(["config", "period"]).agg(load=("load", "sum"), k=("k", "max"))
    return np.ceil(grouped["load"] - 1e-7) + grouped["k"].fillna(0)


def rounded_up(model: FleetModel, values: np.ndarray,
               reserved: np.ndarray | None = None) -> np.ndarray | None:
    """A feasible whole-replica plan from LP values (None if rounding breaks a limit).

    ``reserved``: reserved replica counts to keep (one per reserved replica row of the model);
    default: the LP's rounded down.
    """
    if model.extras.get("patterns") is not None:
        return None  # node patterns: no simple rounding
    out = np.array(values, dtype=float)
    replicas = model.replicas
    lp = replicas.assign(lp=values[replicas["col"]])
    is_reserved = (lp["period"] < 0).to_numpy()
    kept = np.floor(lp.loc[is_reserved, "lp"] + 1e-6).to_numpy() if reserved is None else reserved
    out[lp.loc[is_reserved, "col"]] = kept
    spread = per_period(lp.assign(lp=np.where(is_reserved, 0.0, lp["lp"]))
                        .assign(kept=np.where(is_reserved, out[lp["col"]], 0.0)),
                        model.problem.periods)
    by_config = spread.groupby(["config", "period"]).agg(lp_total=("lp", "sum"),
                                                         reserved=("kept", "sum"))
    lp_total = per_period(lp, model.problem.periods).groupby(["config", "period"])["lp"].sum()
    needed = _needed_replicas(model, values).reindex(by_config.index, fill_value=0.0)
    total = np.maximum(needed, np.ceil(lp_total.reindex(by_config.index) - 1e-6))
    flexible_need = (total - by_config["reserved"]).clip(lower=0.0)
    flexible = lp.loc[~is_reserved].set_index(["config", "period"])
    spot = flexible[flexible["pricing_type"] == "spot"]
    demand_od = flexible[flexible["pricing_type"] == "on_demand"]
    spot_count = np.minimum(np.floor(spot["lp"] + 1e-6),
                            flexible_need.reindex(spot.index, fill_value=0.0))
    out[spot["col"]] = spot_count.to_numpy()
    rest = flexible_need - spot_count.groupby(level=[0, 1]).sum().reindex(
        flexible_need.index, fill_value=0.0)
    out[demand_od["col"]] = rest.reindex(demand_od.index, fill_value=0.0).to_numpy()
    short = rest[~rest.index.isin(demand_od.index)]
    if (short > 0).any():
        return None  # no on-demand offer to make up the rest
    _set_uses(model, values, out)
    _set_nodes(model, out)
    if not model.spare_shortfall.empty:
        out[model.spare_shortfall["col"]] = 0.0
    violation = model.program.violation(out)
    if violation > FEASIBLE:
        logger.debug("rounded-up LP breaks a row by %.3g", violation)
        return None
    return out


def _set_uses(model: FleetModel, values: np.ndarray, out: np.ndarray) -> None:
    rows = model.extras.get("redundancy")
    if rows is None:
        return
    routes = model.routes.assign(share=values[model.routes["col"]])
    used = routes[routes["share"] > 1e-9][["workload", "config", "period"]].drop_duplicates()
    flags = rows.merge(used.assign(used=1.0), on=["workload", "config", "period"], how="left")
    out[flags["col"]] = flags["used"].fillna(0.0).to_numpy()


def _set_nodes(model: FleetModel, out: np.ndarray) -> None:
    replicas = model.replicas.assign(value=out[model.replicas["col"]])
    counts = replicas.groupby(["gpu", "pricing_type", "period", "tp"])["value"].sum()
    nodes = model.nodes
    needed = {key: nodes_needed(dict(zip(group.index.get_level_values("tp"), group)), int(size))
              for (key, group), size in _with_node_size(counts, nodes)}
    keys = list(zip(nodes["gpu"], nodes["pricing_type"], nodes["period"]))
    out[nodes["col"]] = [needed.get(key, 0) for key in keys]


def _with_node_size(counts: pd.Series, nodes: pd.DataFrame):
    size = nodes.groupby("gpu")["gpus_per_node"].first()
    for key, group in counts.groupby(level=[0, 1, 2]):
        yield (key, group), size[key[0]]


def cheapest_routes(model: FleetModel) -> np.ndarray:
    """Column values that send every bucket, in every period, wholly to its cheapest route
    (load x GPUs per replica x the GPU's lowest flexible price, summed over the route's
    stages), with nothing else bought: the start of the greedy fallback."""
    if model.routes.empty:  # nothing can be routed (no usable configuration)
        return np.zeros(model.program.n_cols)
    offers = model.problem.offers
    flexible = offers[~offers["pricing_type"].isin(RESERVED_PRICING)]
    price = flexible.groupby("gpu")["usd_per_gpu_hour"].min()
    configs = model.problem.configs.set_index("config")
    routes = model.routes.assign(
        usd=model.routes["load"] * model.routes["config"].map(configs["tp"])
        * model.routes["config"].map(configs["gpu"]).map(price))
    per_share = routes.groupby("col", as_index=False).agg(
        usd=("usd", "sum"), workload=("workload", "first"), bucket=("bucket", "first"),
        period=("period", "first"))
    per_share = per_share.dropna(subset=["usd"]).sort_values("usd", kind="stable")
    chosen = per_share.drop_duplicates(["workload", "bucket", "period"])
    values = np.zeros(model.program.n_cols)
    values[chosen["col"].to_numpy(dtype=np.int64)] = 1.0
    return values


def greedy_plan(model: FleetModel) -> np.ndarray | None:
    """A whole plan with no LP at all: every bucket on its cheapest route, bought on flexible
    pricing and rounded up (None when that breaks a limit such as an availability cap)."""
    reserved = np.zeros(int((model.replicas["period"] < 0).sum()))
    return rounded_up(model, cheapest_routes(model), reserved=reserved)
