"""The greedy plan: a whole plan with no LP at all, for when the LP is not solved in time.

Every bucket goes, in every period, wholly to its cheapest route at on-demand prices (load x
GPUs per replica x the GPU's on-demand price, summed over the route's stages). A route with a
stage that has no on-demand offer is priced at its spot price, else its reserved one, and
ranked after every route bought wholly on demand (:data:`OFF_DEMAND_RANK_USD`): the rounding
makes such a configuration's replicas up on spot or reserved, which a spot share or a
reserved cap may not allow. A route with a stage that has no offer at all is unusable. With
one quantization per model, only routes in one quantization count, and for each model only
those in the quantization whose cheapest routes serve all its workloads' buckets for least in
sum. With at most N configurations per workload, each workload keeps one route for all its
buckets and periods (the cheapest in sum among those that serve all of them). The routing is
then rounded up to whole replicas (``rounding.rounded_up``): on demand where offered.

The cheapest routes ignore limits; when their plan breaks one, a second plan avoids GPUs with
an availability cap, a capped on-demand offer or a lead time wherever a workload has another
route (such routes are ranked after every uncapped one).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.optimizer.fleet_simplicity import serving_quants, workload_models
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.reserved_candidates import reserved_rows
from fleetplan.optimizer.rounding import rounded_up
from fleetplan.optimizer.solver import SolveOptions

#: Cost added to a share on a capped GPU when caps are avoided: it ranks every such route
#: after every uncapped one [USD].
CAPPED_RANK_USD = 1e12

#: Cost added to each stage of a share on a GPU with no on-demand offer: it ranks every such
#: route after every route bought on demand [USD].
OFF_DEMAND_RANK_USD = 1e12

#: Prices a GPU's replicas are bought at by the greedy plan, most preferred first.
GREEDY_PRICINGS = ("on_demand", "spot", "reserved")


def cheapest_routes(model: FleetModel, avoid_capped: bool = False) -> np.ndarray:
    """Column values that send every bucket, in every period, wholly to its cheapest route
    (module docstring), with nothing else bought; ``avoid_capped`` ranks routes on capped
    GPUs after all others."""
    if model.routes.empty:  # nothing can be routed (no usable configuration)
        return np.zeros(model.program.n_cols)
    shares = _priced_shares(model, avoid_capped)
    problem = model.problem
    if problem.one_quant_per_model:
        shares = _in_one_quant_per_model(model, shares)
    chosen = _cheapest(shares)
    if problem.max_configs_per_workload is not None:
        chosen = _one_route_per_workload(shares, chosen)
    values = np.zeros(model.program.n_cols)
    values[chosen["col"].to_numpy(dtype=np.int64)] = 1.0
    return values


def capped_gpus(problem) -> set[str]:
    """GPU types with an availability cap, a capped on-demand offer, or a lead time (none
    before a start month, or a cap on those added each month)."""
    gpus, offers, lead = problem.gpus, problem.offers, problem.lead_times
    on_demand = offers[offers["pricing_type"] == "on_demand"]
    capped = (set(gpus.loc[np.isfinite(gpus["max_gpus"].astype(float)), "gpu"])
              | set(on_demand.loc[np.isfinite(on_demand["max_gpus"].astype(float)), "gpu"]))
    if not lead.empty:
        late = (lead["start_month"].astype(float) > 0) | np.isfinite(
            lead["max_new_gpus_per_month"].astype(float))
        capped |= set(lead.loc[late, "gpu"])
    return capped


def _priced_shares(model: FleetModel, avoid_capped: bool) -> pd.DataFrame:
    """One row per routing-share column: col, workload, bucket, period, route, quant (when
    the configurations say) and usd, the cost of its load at :func:`_greedy_prices` (plus
    :data:`OFF_DEMAND_RANK_USD` per stage on a GPU with no on-demand offer, and
    :data:`CAPPED_RANK_USD` per stage on a capped GPU when ``avoid_capped``); routes with a
    stage that has no offer are left out (unusable for the greedy plan, not free)."""
    problem = model.problem
    configs = problem.configs.set_index("config")
    gpu = model.routes["config"].map(configs["gpu"])
    price, off_demand = _greedy_prices(problem.offers)
    rank = gpu.isin(capped_gpus(problem)) * CAPPED_RANK_USD if avoid_capped else 0.0
    rank = rank + gpu.map(off_demand).eq(True) * OFF_DEMAND_RANK_USD
    routes = model.routes.assign(
        usd=model.routes["load"] * model.routes["config"].map(configs["tp"]) * gpu.map(price)
        + rank)
    quant = (routes["config"].map(configs["quant"]) if "quant" in configs
             else pd.Series("", index=routes.index))
    shares = routes.assign(unpriced=routes["usd"].isna(), quant=quant.fillna("")).groupby(
        "col", as_index=False).agg(
        usd=("usd", "sum"), unpriced=("unpriced", "any"), workload=("workload", "first"),
        bucket=("bucket", "first"), period=("period", "first"), route=("route", "first"),
        quant=("quant", "first"), quants=("quant", "nunique"))
    return shares[~shares["unpriced"]].drop(columns="unpriced")


def _greedy_prices(offers: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each GPU's price for the greedy plan [USD/GPU-hour], its least on-demand price, else
    spot, else reserved (``GREEDY_PRICINGS``), and whether it has no on-demand offer."""
    kind = offers["pricing_type"].where(~offers["pricing_type"].str.startswith("reserved"),
                                        "reserved")
    order = kind.map({p: i for i, p in enumerate(GREEDY_PRICINGS)})
    ranked = offers.assign(order=order)[order.notna()].sort_values(
        ["order", "usd_per_gpu_hour"], kind="stable").drop_duplicates("gpu").set_index("gpu")
    return ranked["usd_per_gpu_hour"], ranked["order"] > 0


def _cheapest(shares: pd.DataFrame) -> pd.DataFrame:
    """The cheapest share of every (workload, bucket, period)."""
    return shares.sort_values("usd", kind="stable").drop_duplicates(
        ["workload", "bucket", "period"])


def _in_one_quant_per_model(model: FleetModel, shares: pd.DataFrame) -> pd.DataFrame:
    """``shares`` of routes in one quantization only, and for each model only those in the
    quantization whose cheapest routes serve every bucket of its workloads for least in sum
    (a model no quantization serves wholly keeps all its shares)."""
    shares = shares.assign(model=shares["workload"].map(workload_models(model)))
    needed = _cheapest(shares)["model"].value_counts()
    single = shares[shares["quants"] == 1]
    best = single.sort_values("usd", kind="stable").drop_duplicates(
        ["workload", "bucket", "period", "quant"])
    by_quant = best.groupby(["model", "quant"], as_index=False)["usd"].sum().merge(
        serving_quants(best, needed), on=["model", "quant"])
    keep = by_quant.sort_values("usd", kind="stable").drop_duplicates("model")
    kept = single.merge(keep[["model", "quant"]], on=["model", "quant"])
    return pd.concat([kept, shares[~shares["model"].isin(keep["model"])]],
                     ignore_index=True).drop(columns="model")


def _one_route_per_workload(shares: pd.DataFrame, chosen: pd.DataFrame) -> pd.DataFrame:
    """``chosen`` with each workload that one route serves wholly moved onto its cheapest
    such route; other workloads keep their per-bucket choice."""
    needed = chosen.groupby("workload", as_index=False).size().rename(columns={"size": "needed"})
    totals = shares.groupby(["workload", "route"], as_index=False).agg(
        usd=("usd", "sum"), served=("col", "size")).merge(needed, on="workload")
    totals = totals[totals["served"] == totals["needed"]]
    single = totals.sort_values("usd", kind="stable").drop_duplicates("workload")
    moved = shares.merge(single[["workload", "route"]], on=["workload", "route"])
    return pd.concat([chosen[~chosen["workload"].isin(single["workload"])], moved],
                     ignore_index=True)


def greedy_plan(model: FleetModel, options: SolveOptions | None = None,
                seconds: float = 0.0) -> np.ndarray | None:
    """A whole plan with no LP at all: every bucket on its cheapest route, bought on demand
    and rounded up; when that breaks a limit, the same avoiding capped GPUs (None when both
    do); ``options`` and ``seconds`` (for each) as for :func:`rounding.rounded_up`."""
    reserved = np.zeros(len(reserved_rows(model)))
    plan = rounded_up(model, cheapest_routes(model), reserved=reserved, options=options,
                      seconds=seconds)
    if plan is None and capped_gpus(model.problem):
        plan = rounded_up(model, cheapest_routes(model, avoid_capped=True), reserved=reserved,
                          options=options, seconds=seconds)
    return plan
