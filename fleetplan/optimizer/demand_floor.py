r"""A lower bound on any plan's cost read straight from the model, with no solve: what serving
every request would cost at each GPU's lowest charged price, with no replica idle.

Why: under a short time limit the full model's LP may not finish (tens of thousands of
columns in a second or two), and a plan without a bound says nothing of how far it is from
the best. This bound is ready as soon as the model is built, in a fraction of a second even
on millions of routing columns, so every plan of a built model reports one. It is far weaker
than the LP's, which replaces it whenever the LP finishes.

With :math:`\underline{\pi}_g` the lowest price per GPU-hour a replica of GPU type :math:`g`
is charged over its pricing types [USD/GPU-hour] (0 for GPUs already paid for), a replica of
configuration :math:`c` costs at least :math:`\underline{\pi}_c = \tau_c
\underline{\pi}_{g(c)}` per hour it is held [USD/replica-hour]: a node holds at least the GPUs
of the replicas packed into it, and a reserved node is paid for every hour it counts in (its
whole-term charge is no lower). Serving bucket :math:`(w, b)` in period :math:`t` (of
:math:`h_t` hours) on route :math:`r` loads each stage :math:`c \in r` with
:math:`\ell_{wbrct} = d_{wbt} / (\rho\, \kappa_{wbc})` replicas, and the demand row sums its
routing and hosted-API shares to 1, so that bucket costs at least

.. math::

    F_{wbt} = \min\Big(\min_r h_t \sum_{c \in r} \ell_{wbrct}\, \underline{\pi}_c,\;
              \min_a U_{wbta}\Big)

with :math:`U_{wbta}` the cost of sending all of it to API :math:`a` [USD]. A pool's replicas in
a period are also at least its whole-replica count :math:`B_{pt}`
(``milp_constraints.pool_cover_bounds``: each bucket's least load summed and rounded up, plus
its N+k spares), each costing at least the pool's cheapest :math:`\underline{\pi}_c`. Replicas
serve one pool, so

.. math::

    \text{cost} \ge \sum_{p, t} \max\Big(\sum_{(w,b) \in p} F_{wbt},\;
        h_t B_{pt} \min_{c \in p} \underline{\pi}_c\Big)

Every other term of the objective (a deployed configuration's fixed cost, CVaR over scenarios
of non-negative cost) is non-negative, and every other constraint only removes plans. A
negative price would break the argument: the bound is then not given.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from fleetplan.optimizer.api_supply import api_shares
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.milp_constraints import pool_cover_bounds
from fleetplan.optimizer.solver import SolveOutcome, gap_between

#: What a plan's ``assumptions["bound"]`` says when this floor is its bound.
FLOOR_NOTE = ("demand floor: every request served at its GPU's lowest charged price with no "
              "idle replica, and each pool's whole replicas with N+k spares "
              "(optimizer/demand_floor.py)")


def least_gpu_hour_usd(replicas: pd.DataFrame, nodes: pd.DataFrame) -> pd.Series:
    r"""Lowest price per GPU-hour any replica of each GPU type is charged
    :math:`\underline{\pi}_g` [USD/GPU-hour], over the pricing types it has replica columns of;
    a pricing type with no priced node (GPUs already paid for) counts as 0."""
    pairs = replicas[["gpu", "pricing_type"]].drop_duplicates()
    charged = nodes.groupby(["gpu", "pricing_type"])["usd_per_gpu_hour"].min()
    price = pd.MultiIndex.from_frame(pairs).map(charged.to_dict().get)
    return pd.Series(np.nan_to_num(np.asarray(price, dtype=float), nan=0.0),
                     index=pairs["gpu"].to_numpy()).groupby(level=0).min()


def route_floor_usd(load_replicas, replica_hour_usd, hours):
    r"""Least cost of one routing share's stages [USD]: :math:`h_t \ell \underline{\pi}_c`,
    summed over a route's stages by the caller. ``load_replicas`` [replicas],
    ``replica_hour_usd`` [USD/replica-hour], ``hours`` [h]; scalars or arrays."""
    return np.asarray(hours) * np.asarray(load_replicas) * np.asarray(replica_hour_usd)


def bucket_floors_usd(model: FleetModel, replica_hour_usd: pd.Series) -> pd.DataFrame:
    r"""pool, period, usd: :math:`\sum_{(w,b) \in p} F_{wbt}` per pool and period [USD]."""
    routes = model.routes
    hours = model.problem.periods.set_index("period")["hours"]
    stage_usd = route_floor_usd(routes["load"].to_numpy(float),
                                routes["config"].map(replica_hour_usd).to_numpy(float),
                                routes["period"].map(hours).to_numpy(float))
    keys = ["workload", "bucket", "period"]
    per_share = pd.DataFrame({"col": routes["col"].to_numpy(), "usd": stage_usd}).groupby(
        "col")["usd"].sum()  # a route's stages share its routing column
    shares = routes.drop_duplicates("col").set_index("col")[[*keys, "pool"]]
    shares = shares.assign(usd=per_share.reindex(shares.index).to_numpy())
    apis = api_shares(model)
    if not apis.empty:
        pools = model.problem.workloads.set_index("workload")["pool"]
        shares = pd.concat([shares, apis[keys].assign(pool=apis["workload"].map(pools),
                                                      usd=apis["usd"].to_numpy(float))])
    least = shares.groupby([*keys, "pool"], sort=False)["usd"].min()
    return least.groupby(["pool", "period"]).sum().rename("usd").reset_index()


def whole_replica_floors_usd(model: FleetModel, replica_hour_usd: pd.Series) -> pd.DataFrame:
    r"""pool, period, usd: :math:`h_t B_{pt} \min_{c \in p} \underline{\pi}_c` [USD]."""
    whole = pool_cover_bounds(model.problem, model.routes)
    if whole.empty:
        return pd.DataFrame(columns=["pool", "period", "usd"])
    configs = model.routes[["pool", "config"]].drop_duplicates()
    cheapest = configs.assign(usd=configs["config"].map(replica_hour_usd)).groupby(
        "pool")["usd"].min()
    table = whole.rename("replicas").reset_index()
    hours = table["period"].map(model.problem.periods.set_index("period")["hours"])
    usd = table["replicas"] * table["pool"].map(cheapest) * hours
    return table[["pool", "period"]].assign(usd=usd.to_numpy(float))


def demand_floor_usd(model: FleetModel) -> float:
    """The bound of the module docstring [USD over the horizon]; -inf for an elastic model
    (its objective is unmet demand first), a model with no routes, or a negative price."""
    if model.elastic or model.routes.empty or model.nodes.empty:
        return -math.inf
    gpu_hour = least_gpu_hour_usd(model.replicas, model.nodes)
    if (gpu_hour < 0).any():
        return -math.inf
    configs = model.replicas.drop_duplicates("config").set_index("config")
    replica_hour_usd = configs["tp"].astype(float) * configs["gpu"].map(gpu_hour).fillna(0.0)
    keys = ["pool", "period"]
    floors = bucket_floors_usd(model, replica_hour_usd).merge(
        whole_replica_floors_usd(model, replica_hour_usd), on=keys, how="outer",
        suffixes=("_buckets", "_whole"))
    usd = np.fmax(floors["usd_buckets"].to_numpy(float), floors["usd_whole"].to_numpy(float))
    return float(np.nansum(usd))


def floored(outcome: SolveOutcome, floor_usd: float, mip_gap: float) -> SolveOutcome:
    """``outcome`` with ``floor_usd`` as its bound when that is higher than the bound the solve
    proved, or implied by its gap (CBC reports a gap but no bound), or the solve proved none (a
    plan it brings within ``mip_gap`` is ``optimal``); an infeasible or unbounded outcome, or a
    floor that is unknown or not positive (GPUs already paid for cost 0: a bound of $0 says
    nothing), leaves it as it is."""
    proven = outcome.bound if math.isfinite(outcome.bound) \
        else outcome.objective * (1.0 - outcome.gap)  # NaN without a gap or a plan
    if outcome.status in ("infeasible", "unbounded") or not math.isfinite(floor_usd) \
            or floor_usd <= 0 or floor_usd <= proven:
        return outcome
    gap = gap_between(outcome.objective, floor_usd)
    status = "optimal" if outcome.status == "time_limit" and gap <= mip_gap else outcome.status
    return dataclasses.replace(outcome, status=status, bound=floor_usd, gap=gap)
