"""Small problems built from plain numbers, and a brute-force solver for them."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy.optimize import linprog

from fleetplan.catalogs.conventions import RESERVED_TERM_MONTHS
from fleetplan.optimizer.fleet_problem import Problem


def make_problem(capacity, demand, offers, *, gpu=None, tp=None, hours=None, gpus_per_node=None,
                 max_gpus=None, redundancy_k=0, horizon_months=12.0, **scalars) -> Problem:
    """One workload; capacity[c][b] req/s per replica; demand[t][b] req/s; offers maps
    (gpu, pricing_type) -> USD/GPU-hour; hours[t] hours each period stands for, together the
    horizon of ``horizon_months`` months."""
    capacity = np.asarray(capacity, dtype=float)
    demand = np.atleast_2d(np.asarray(demand, dtype=float))
    n_configs, n_buckets = capacity.shape
    n_periods = demand.shape[0]
    gpu = gpu or [f"g{c}" for c in range(n_configs)]
    tp = tp or [1] * n_configs
    hours = hours or [1.0] * n_periods
    configs = pd.DataFrame({"config": [f"c{c}" for c in range(n_configs)], "pool": "p",
                            "gpu": gpu, "tp": tp})
    gpu_ids = sorted(set(gpu))
    node = gpus_per_node or {}
    caps = max_gpus or {}
    return Problem(
        workloads=pd.DataFrame({"workload": ["w"], "pool": ["p"], "redundancy_k": [redundancy_k]}),
        periods=pd.DataFrame({"period": range(n_periods), "month": 0, "hour": range(n_periods),
                              "hours": hours, "month_weight": 1.0}),
        demand=pd.DataFrame({"workload": "w",
                             "bucket": np.tile(np.arange(n_buckets), n_periods),
                             "period": np.repeat(np.arange(n_periods), n_buckets),
                             "req_s": demand.ravel()}),
        configs=configs,
        candidates=pd.DataFrame({"workload": "w",
                                 "bucket": np.tile(np.arange(n_buckets), n_configs),
                                 "config": np.repeat(configs["config"], n_buckets).to_numpy(),
                                 "req_s_per_replica": capacity.ravel()}),
        offers=pd.DataFrame([(g, p, price, math.nan) for (g, p), price in offers.items()],
                            columns=["gpu", "pricing_type", "usd_per_gpu_hour", "max_gpus"]),
        gpus=pd.DataFrame({"gpu": gpu_ids, "gpus_per_node": [node.get(g, 1) for g in gpu_ids],
                           "max_gpus": [caps.get(g, math.nan) for g in gpu_ids]}),
        hours_per_month=float(sum(hours)) / horizon_months, horizon_months=horizon_months,
        **scalars)


def least_load(problem: Problem, period: int, replicas: np.ndarray) -> float:
    """Smallest total load [replicas] of a routing that ``replicas[c]`` replicas can carry in
    the period (an LP); inf when they cannot serve the demand."""
    demand = problem.demand[problem.demand["period"] == period].set_index("bucket")["req_s"]
    capacity = problem.candidates.pivot(index="config", columns="bucket",
                                        values="req_s_per_replica").to_numpy()
    n_configs, n_buckets = capacity.shape
    usable = capacity > 0
    # variables x[c, b] = share of bucket b on config c
    equal = np.zeros((n_buckets, n_configs * n_buckets))
    upper = np.zeros((n_configs, n_configs * n_buckets))
    for c, b in itertools.product(range(n_configs), range(n_buckets)):
        equal[b, c * n_buckets + b] = 1.0
        if usable[c, b]:
            upper[c, c * n_buckets + b] = demand[b] / (problem.target_utilization * capacity[c, b])
    bounds = [(0, 1 if usable[c, b] else 0) for c in range(n_configs) for b in range(n_buckets)]
    need = demand.to_numpy() > 0
    result = linprog(upper.sum(axis=0), A_ub=upper, b_ub=replicas,
                     A_eq=equal[need], b_eq=np.ones(need.sum()), bounds=bounds, method="highs")
    return float(result.fun) if result.status == 0 else math.inf


def charged_months(problem: Problem, pricing_type: str) -> float:
    """Months a reserved commitment is paid for: whole terms covering the horizon."""
    term = RESERVED_TERM_MONTHS[pricing_type]
    return math.ceil(problem.horizon_months / term - 1e-9) * term


def brute_force_usd(problem: Problem, max_replicas: int) -> float:
    """Cheapest cost by enumerating replica counts (on-demand and reserved, one GPU type per
    configuration, GPU-granular nodes); inf if nothing up to ``max_replicas`` works.

    A reserved replica is paid for whole terms (12 months for reserved_1y) even beyond the
    horizon; N+k means every configuration that carries load keeps k replicas beyond it."""
    configs = problem.configs
    n = len(configs)
    prices = problem.offers.set_index(["gpu", "pricing_type"])["usd_per_gpu_hour"]
    caps = problem.gpus.set_index("gpu")["max_gpus"]
    tp = configs["tp"].to_numpy()
    hours = problem.periods["hours"].to_numpy()
    busy = problem.demand.loc[problem.demand["req_s"] > 0, "bucket"].unique()
    serving = problem.candidates[problem.candidates["bucket"].isin(busy)]
    useful = serving.groupby("config")["req_s_per_replica"].max().reindex(
        configs["config"]).fillna(0.0).to_numpy() > 0  # a replica serving no demand is no spare
    counts = [np.array(v) for v in itertools.product(range(max_replicas + 1), repeat=n)
              if not np.any(np.array(v)[~useful])]
    ok = {t: [v for v in counts if _within_caps(v, configs, caps)
              and _serves(problem, t, v)]
          for t in problem.periods["period"]}
    best = math.inf
    factor = charged_months(problem, "reserved_1y") / problem.horizon_months
    reserved_price = factor * np.array([prices.get((g, "reserved_1y"), math.inf)
                                        for g in configs["gpu"]])
    flexible_price = np.array([prices.get((g, "on_demand"), math.inf) for g in configs["gpu"]])
    for reserved in counts:
        if np.any(reserved[reserved_price == math.inf] > 0):
            continue
        total = float(np.sum(reserved * tp * np.where(reserved > 0, reserved_price, 0.0))
                      * hours.sum())
        for t, options in ok.items():
            extra = [v - reserved for v in options if np.all(v >= reserved)
                     and np.all((v - reserved)[flexible_price == math.inf] == 0)]
            if not extra:
                total = math.inf
                break
            total += hours[t] * min(float(np.sum(e * tp * np.where(e > 0, flexible_price, 0.0)))
                                    for e in extra)
        best = min(best, total)
    return best


def _within_caps(replicas, configs, caps) -> bool:
    gpus = pd.Series(replicas * configs["tp"].to_numpy()).groupby(configs["gpu"].to_numpy()).sum()
    return bool(np.all(gpus <= caps.reindex(gpus.index).fillna(np.inf)))


def _serves(problem: Problem, period: int, replicas) -> bool:
    """Demand served by some set of configurations, each keeping k replicas beyond its load
    when the period is busy (N+k per configuration)."""
    k = int(problem.workloads["redundancy_k"].iloc[0])
    busy = (problem.demand.loc[problem.demand["period"] == period, "req_s"] > 0).any()
    if not busy or k == 0:
        return math.isfinite(least_load(problem, period, replicas))
    for used in itertools.product([False, True], repeat=len(replicas)):
        used = np.array(used)
        if np.any(replicas[used] < k):
            continue
        room = np.where(used, replicas - k, 0)
        if math.isfinite(least_load(problem, period, room)):
            return True
    return False
