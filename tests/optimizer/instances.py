"""Small problems built from plain numbers, and a brute-force solver for them."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

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
    return _routing_lps(problem)(period, replicas)


class _RoutingLPs:
    """:func:`least_load` of one problem: its matrices built once per period, each LP solved
    once per replica vector (a brute force asks for the same few vectors thousands of times)."""

    def __init__(self, problem: Problem):
        self.problem = problem
        capacity = problem.candidates.pivot(index="config", columns="bucket",
                                            values="req_s_per_replica").to_numpy()
        self.capacity, self.usable = capacity, capacity > 0
        self.periods: dict[int, tuple] = {}
        self.solved: dict[tuple, float] = {}

    def _matrices(self, period: int) -> tuple:
        if period not in self.periods:
            problem, capacity, usable = self.problem, self.capacity, self.usable
            demand = problem.demand[problem.demand["period"] == period].set_index("bucket")["req_s"]
            n_configs, n_buckets = capacity.shape
            # variables x[c, b] = share of bucket b on config c
            equal = np.zeros((n_buckets, n_configs * n_buckets))
            upper = np.zeros((n_configs, n_configs * n_buckets))
            for c, b in itertools.product(range(n_configs), range(n_buckets)):
                equal[b, c * n_buckets + b] = 1.0
                if usable[c, b]:
                    upper[c, c * n_buckets + b] = demand[b] / (problem.target_utilization
                                                               * capacity[c, b])
            bounds = [(0, 1 if usable[c, b] else 0)
                      for c in range(n_configs) for b in range(n_buckets)]
            need = demand.to_numpy() > 0
            self.periods[period] = (upper, equal[need], np.ones(need.sum()), bounds)
        return self.periods[period]

    def busy(self, period: int) -> bool:
        """Whether the period has any demand."""
        return bool(self._matrices(period)[1].shape[0])

    def __call__(self, period: int, replicas) -> float:
        key = (period, tuple(float(r) for r in replicas))
        if key not in self.solved:
            upper, equal, ones, bounds = self._matrices(period)
            result = linprog(upper.sum(axis=0), A_ub=upper, b_ub=np.asarray(replicas, float),
                             A_eq=equal, b_eq=ones, bounds=bounds, method="highs")
            self.solved[key] = float(result.fun) if result.status == 0 else math.inf
        return self.solved[key]


#: The routing LPs of the problems asked about lately (by identity; a problem is immutable).
_RECENT_LPS: dict[int, _RoutingLPs] = {}


def _routing_lps(problem: Problem) -> _RoutingLPs:
    lps = _RECENT_LPS.get(id(problem))
    if lps is None or lps.problem is not problem:
        if len(_RECENT_LPS) >= 8:
            _RECENT_LPS.clear()
        lps = _RECENT_LPS[id(problem)] = _RoutingLPs(problem)
    return lps


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
    within_caps = _within_caps(configs, caps)
    ok = {t: [v for v in counts if within_caps(v) and _serves(problem, t, v)]
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


def _within_caps(configs, caps) -> Callable[[np.ndarray], bool]:
    """Whether replica counts keep every GPU type within its cap."""
    types, of_config = np.unique(configs["gpu"].to_numpy(), return_inverse=True)
    gpus_per_replica, limits = configs["tp"].to_numpy(), caps.reindex(types).fillna(np.inf).to_numpy()
    return lambda replicas: bool(np.all(np.bincount(
        of_config, weights=replicas * gpus_per_replica, minlength=len(types)) <= limits))


def _serves(problem: Problem, period: int, replicas) -> bool:
    """Demand served by some set of configurations, each keeping k replicas beyond its load
    when the period is busy (N+k per configuration)."""
    k = int(problem.workloads["redundancy_k"].iloc[0])
    if not _routing_lps(problem).busy(period) or k == 0:
        return math.isfinite(least_load(problem, period, replicas))
    for used in itertools.product([False, True], repeat=len(replicas)):
        used = np.array(used)
        if np.any(replicas[used] < k):
            continue
        room = np.where(used, replicas - k, 0)
        if math.isfinite(least_load(problem, period, room)):
            return True
    return False


def portfolio_problem(n_models: int = 3, n_gpus: int = 4, n_periods: int = 12,
                      seed: int = 3) -> Problem:
    """A fleet-sized problem (two workloads per model sharing replicas, TP 1-4, on-demand,
    spot at most 30 %, 1-year reserved, N+1 on half the workloads) that takes real solver
    time."""
    rng = np.random.default_rng(seed)
    gpus = [f"g{g}" for g in range(n_gpus)]
    speed = rng.uniform(1.0, 8.0, n_gpus)
    configs = pd.DataFrame([(f"m{m}/g{g}/tp{t}", f"m{m}", f"g{g}", t)
                            for m in range(n_models) for g in range(n_gpus) for t in (1, 2, 4)],
                           columns=["config", "pool", "gpu", "tp"])
    workloads = pd.DataFrame({"workload": [f"m{m}-{i}" for m in range(n_models) for i in (0, 1)],
                              "pool": [f"m{m}" for m in range(n_models) for _ in (0, 1)],
                              "redundancy_k": [1, 0] * n_models})
    candidates = workloads[["workload", "pool"]].merge(configs, on="pool")
    g = candidates["gpu"].str[1:].astype(int).to_numpy()
    candidates = pd.DataFrame({
        "workload": candidates["workload"], "bucket": 0, "config": candidates["config"],
        "req_s_per_replica": speed[g] * candidates["tp"] ** 0.85 * rng.uniform(
            0.5, 1.5, len(candidates))})
    hours = np.arange(n_periods)
    wave = 1 + 0.6 * np.sin(2 * np.pi * (hours[None, :] - rng.uniform(0, n_periods,
                                                                       (len(workloads), 1)))
                            / n_periods)
    demand = pd.DataFrame({"workload": np.repeat(workloads["workload"], n_periods),
                           "bucket": 0, "period": np.tile(hours, len(workloads)),
                           "req_s": (rng.uniform(20, 80, (len(workloads), 1)) * wave).ravel()})
    price = rng.uniform(1.0, 3.0, n_gpus)
    offers = pd.DataFrame([(f"g{i}", p, price[i] * f, math.nan) for i in range(n_gpus)
                           for p, f in (("on_demand", 1.0), ("spot", 0.4),
                                        ("reserved_1y", 0.62))],
                          columns=["gpu", "pricing_type", "usd_per_gpu_hour", "max_gpus"])
    return Problem(
        workloads=workloads,
        periods=pd.DataFrame({"period": hours, "month": 0, "hour": hours,
                              "hours": 730.0 * 12 / n_periods, "month_weight": 12.0}),
        demand=demand, configs=configs, candidates=candidates, offers=offers,
        gpus=pd.DataFrame({"gpu": gpus, "gpus_per_node": 1, "max_gpus": math.nan}),
        target_utilization=0.8, spot_max_share=0.3)
