"""Drop configurations that another configuration of the same pool dominates.

Configuration c' dominates c when swapping every replica of c for one of c' never costs more
and never breaks a constraint, so some optimal plan does not use c:
- c' serves every workload bucket c serves, at least as many requests/s per replica;
- for every pricing type c can be bought at, c' can too, for no more per replica-hour;
- no constraint family objects to the swap (each family's ``swap_guard`` in
  ``constraint_families.FAMILIES``): its GPUs are no harder to get (the same GPU type with no
  more GPUs per replica, or a GPU type without availability caps bought GPU by GPU), and with a
  spot share cap the same GPUs per replica (a smaller replica would change the share).
Exactly equal configurations keep the first by id.

Configuration c' also dominates c by *splitting* when c' runs on the same GPU type with a TP
degree that divides c's, m = tp(c) / tp(c') > 1, and m replicas of c' (the same GPUs) serve
every bucket at least as fast as one of c, for no more per hour at every pricing type:
each replica of c becomes m of c' on the same GPUs. The swap keeps every GPU count, so GPU
caps, the spot share, power and node packing never notice it (smaller replicas whose size
divides the larger one's fill exactly the node slots it held); its spares stay spares (a
replica of c with k spares becomes m of c' with m k). Only the families whose
``split_guard`` in ``constraint_families.FAMILIES`` objects are asked (one quantization per
model, frozen fleets, fixed costs per configuration). Splits are judged among the
configurations the one-for-one comparison keeps, so the two never remove each other's
dominator: a split always goes to a smaller TP degree.

Stages of disaggregated routes are never pruned and never prune: a stage serves nothing alone,
so comparing it with a whole replica says nothing. Fewer near-identical configurations leave
the branch-and-bound far less to explore: on ``bench_portfolio.py``'s cases splits leave 32 of
the 360 configurations, against 116 without them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fleetplan.optimizer.constraint_families import FAMILIES
from fleetplan.optimizer.fleet_problem import Problem, charged_offers, with_routes


def _capacity_matrix(problem: Problem, configs: list[str]) -> np.ndarray:
    """Requests/s per replica, configurations x (workload, bucket), 0 where it cannot serve."""
    table = problem.candidates[problem.candidates["config"].isin(configs)]
    wide = table.pivot_table(index="config", columns=["workload", "bucket"],
                             values="req_s_per_replica", aggfunc="max", fill_value=0.0)
    return wide.reindex(configs, fill_value=0.0).clip(lower=0.0).to_numpy()


def _replica_prices(problem: Problem, configs: pd.DataFrame) -> np.ndarray:
    """USD per replica-hour, configurations x pricing types (inf where not offered)."""
    prices = charged_offers(problem).pivot_table(index="gpu", columns="pricing_type",
                                        values="usd_per_gpu_hour", aggfunc="min")
    per_gpu = prices.reindex(configs["gpu"]).to_numpy(dtype=float)
    return np.where(np.isnan(per_gpu), np.inf, per_gpu * configs["tp"].to_numpy()[:, None])


def swaps_allowed(problem: Problem, configs: pd.DataFrame, guard: str = "swap_guard"
                  ) -> np.ndarray:
    """[c', c]: every constraint family lets c' replace c (its ``guard`` in FAMILIES:
    ``swap_guard`` one replica for one, ``split_guard`` by splitting)."""
    allowed = np.ones((len(configs), len(configs)), dtype=bool)
    for family in FAMILIES:
        if getattr(family, guard) is not None:
            allowed &= getattr(family, guard)(problem, configs)
    return allowed


def split_counts(configs: pd.DataFrame) -> np.ndarray:
    """[c', c]: replicas of c' that hold one replica of c's GPUs, tp(c) / tp(c'), when c' is
    on c's GPU type with a TP degree that divides c's and is smaller; 0 otherwise.

    >>> split_counts(pd.DataFrame({"gpu": ["h100", "h100", "l4"], "tp": [1, 4, 2]}))
    array([[0, 4, 0],
           [0, 0, 0],
           [0, 0, 0]])
    """
    gpu, tp = configs["gpu"].to_numpy(), configs["tp"].to_numpy(dtype=np.int64)
    splits = (gpu[:, None] == gpu[None, :]) & (tp[None, :] % tp[:, None] == 0) \
        & (tp[:, None] < tp[None, :])
    return np.where(splits, tp[None, :] // tp[:, None], 0)


@dataclass(frozen=True)
class Comparison:
    """What dominance compares that prices do not change: each configuration's capacity per
    bucket, which swaps the families allow, and its pool (configurations sorted by id)."""

    configs: pd.DataFrame
    capacity: np.ndarray
    allowed: np.ndarray
    splits: np.ndarray

    @classmethod
    def of(cls, problem: Problem) -> Comparison:
        staged = set(with_routes(problem.candidates).query("stages > 1")["config"])
        configs = problem.configs[~problem.configs["config"].isin(staged)]
        configs = configs.sort_values("config").reset_index(drop=True)
        splits = split_counts(configs) * swaps_allowed(problem, configs, "split_guard")
        return cls(configs, _capacity_matrix(problem, configs["config"].tolist()),
                   swaps_allowed(problem, configs), splits)

    def dominated(self, problem: Problem) -> list[str]:
        """Ids dominated at ``problem``'s prices (the problem this comparison was made of, or
        one differing from it in prices only)."""
        ids = self.configs["config"].tolist()
        capacity, allowed = self.capacity, self.allowed
        price = _replica_prices(problem, self.configs)
        pool = self.configs["pool"].to_numpy()
        dominated = np.zeros(len(ids), dtype=bool)
        for c in range(len(ids)):  # one vectorized comparison against all others per configuration
            serves = np.all(capacity >= capacity[c], axis=1)
            cheaper = np.all(price <= price[c], axis=1)
            candidate = (pool == pool[c]) & serves & cheaper & allowed[:, c]
            candidate[c] = False
            equal = np.all(capacity == capacity[c], axis=1) & np.all(price == price[c], axis=1)
            strictly = candidate & ~equal
            earlier_equal = candidate & equal & (np.arange(len(ids)) < c)
            dominated[c] = strictly.any() or earlier_equal.any()
        split = self._split(price) & ~dominated[:, None]  # among the configurations kept
        dominated |= split.any(axis=0)
        return [name for name, out in zip(ids, dominated) if out]

    def _split(self, price: np.ndarray) -> np.ndarray:
        """[c', c]: m = ``splits[c', c]`` replicas of c' serve every bucket at least as fast as
        one of c, for no more at every pricing type (``price``, USD per replica-hour). Only
        the pairs a split may join are compared (same GPU type and pool, a dividing TP
        degree): a few per configuration, so no configurations x configurations x buckets
        array is ever made."""
        pool = self.configs["pool"].to_numpy()
        by, of = np.nonzero((self.splits > 1) & (pool[:, None] == pool[None, :]))
        m = self.splits[by, of].astype(float)[:, None]
        serves = np.all(m * self.capacity[by] >= self.capacity[of], axis=1)
        cheaper = np.all(m * price[by] <= price[of], axis=1)  # inf where not offered
        split = np.zeros(self.splits.shape, dtype=bool)
        split[by, of] = serves & cheaper
        return split


def dominated_configs(problem: Problem) -> list[str]:
    """Ids of configurations some other configuration of the same pool dominates."""
    return Comparison.of(problem).dominated(problem)


def prune_dominated(problem: Problem, dropped: list[str] | None = None
                    ) -> tuple[Problem, list[str]]:
    """The problem without dominated configurations (or without ``dropped``), and their ids."""
    dropped = dominated_configs(problem) if dropped is None else dropped
    if not dropped:
        return problem, []
    keep_configs = problem.configs[~problem.configs["config"].isin(dropped)]
    keep_candidates = problem.candidates[~problem.candidates["config"].isin(dropped)]
    return problem.with_changes(configs=keep_configs.reset_index(drop=True),
                                candidates=keep_candidates.reset_index(drop=True)), dropped
