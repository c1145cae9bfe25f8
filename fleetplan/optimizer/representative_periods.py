r"""Representative periods: a week of hours planned from a few typical ones.

Energy-system planners size long-lived capacity on a handful of representative periods instead
of every hour [1, 2]. Here the long-lived capacity is reserved replicas (the only decisions shared by
all periods), so:

1. the hours of each month are clustered by their demand (requests/s per workload bucket) with
   k-means, started deterministically from the hours ranked by total demand, so the same input
   always gives the same clusters;
2. each cluster becomes one period that stands for its members' hours, with the element-wise
   **peak** of their demand: a fleet that serves the representative serves every member hour,
   so the representative plan is feasible hour by hour by construction (never optimistic);
3. the small representative problem's LP relaxation is solved, and its reserved counts,
   rounded up, are one of the candidates the reserved-first decomposition prices on the full hourly model, where every hour
   is solved on its own with those reserved replicas fixed;
4. the same clusters at their members' element-wise *minimum* demand give a lower bound
   (:func:`floor_bound_problem`) within a second, so a call cut short before the full model's
   LP finishes still reports a proven bound.

The plan reported is therefore always a full-resolution plan, re-checked in every hour; the
representative problem only proposes its reserved capacity. Its LP value against the full
model's bound is logged as the clustering's error.

References:
    [1] K. Poncelet, H. Hoeschle, E. Delarue, A. Virag, W. D'haeseleer, "Selecting
        representative days for capturing the implications of integrating intermittent
        renewables in generation expansion planning problems", IEEE Transactions on Power
        Systems 32(3) (2017) 1936-1948.
    [2] L. Kotzur, P. Markewitz, M. Robinius, D. Stolten, "Impact of different time series
        aggregation methods on optimal energy system design", Renewable Energy 117 (2018)
        474-487 (k-means of typical periods; peak periods kept to stay feasible).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from fleetplan.optimizer.fleet_problem import Problem, month_keys
from fleetplan.optimizer.period_merging import demand_matrix, merged_periods

logger = logging.getLogger(__name__)

#: Representative periods per month.
REPRESENTATIVES_PER_MONTH = 12

#: Months with more periods than this are planned through representatives (a day of hours is
#: not: its 24-period model is solved as it is).
REPRESENTATIVE_THRESHOLD = 48

#: Lloyd iterations of the k-means (it converges in a few on demand profiles).
KMEANS_ITERATIONS = 30


def kmeans_labels(points: np.ndarray, count: int) -> np.ndarray:
    """Cluster labels of ``points`` (rows) into at most ``count`` clusters, deterministic.

    Centers start at the points ranked at evenly spaced quantiles of their total, then Lloyd
    iterations move them to their members' means. Empty clusters keep their center.
    """
    n = len(points)
    if n <= count:
        return np.arange(n)
    order = np.argsort(points.sum(axis=1), kind="stable")
    centers = points[order[np.linspace(0, n - 1, count).round().astype(int)]].copy()
    labels = np.full(n, -1)
    for _ in range(KMEANS_ITERATIONS):
        distance = ((points[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
        new = distance.argmin(axis=1)
        if np.array_equal(new, labels):  # converged
            break
        labels = new
        sums = np.zeros_like(centers)
        np.add.at(sums, labels, points)
        sizes = np.bincount(labels, minlength=count)
        filled = sizes > 0
        centers[filled] = sums[filled] / sizes[filled, None]
    return np.unique(labels, return_inverse=True)[1]


def cluster_periods(problem: Problem, per_month: int = REPRESENTATIVES_PER_MONTH) -> pd.Series:
    """For each period, the first period of its cluster (clusters never cross months)."""
    wide = demand_matrix(problem)
    periods = problem.periods.set_index("period")
    first = pd.Series(wide.index.to_numpy(), index=wide.index)
    months = month_keys(problem.periods)
    for _, members in periods.groupby(months if len(months) > 1 else months[0]).groups.items():
        members = np.asarray(members)
        points = wide.loc[members].to_numpy(dtype=float)
        scale = np.where(points.max(axis=0) > 0, points.max(axis=0), 1.0)
        labels = kmeans_labels(points / scale, per_month)
        heads = pd.Series(members).groupby(labels).transform("min").to_numpy()
        first.loc[members] = heads
    return first.rename("representative")


def representative_problem(problem: Problem, representative: pd.Series, *,
                           floor: bool = False) -> Problem:
    """One period per cluster, standing for its members' hours, at their peak demand (or, with
    ``floor``, their element-wise minimum: see :func:`floor_bound_problem`)."""
    merged = merged_periods(problem.periods, representative)
    demand = problem.demand.assign(period=problem.demand["period"].map(representative))
    grouped = demand.groupby(["workload", "bucket", "period"], as_index=False)["req_s"]
    return problem.with_changes(periods=merged, demand=grouped.min() if floor else grouped.max())


def floor_bound_problem(problem: Problem) -> Problem:
    r"""The representative problem at each cluster's element-wise **minimum** demand: a lower
    bound, fast to compute when the full model's LP is not.

    Lowering demand keeps every plan feasible (loads and spares only shrink), so the full model
    at the members' minimum costs no more than the full model. In it the members of a cluster
    are identical periods, and averaging a solution over them keeps it feasible and its cost
    (every row is linear and the reserved columns are shared), so one merged period standing for
    their hours has the same LP value. Hence LP(floor) <= LP(full) <= the optimum."""
    return representative_problem(problem, cluster_periods(problem), floor=True)


def spread_to_hours(tables: list[tuple[pd.DataFrame, pd.DataFrame, list[str]]],
                    small_values: np.ndarray, representative: pd.Series,
                    n_cols: int) -> np.ndarray:
    """Column values of the full model that repeat in every period its representative's values.

    ``tables``: (full table, representative table, key columns) pairs of variable tables with
    ``period`` and ``col`` columns (reserved rows, period -1, map to themselves). Columns of no
    pair stay 0. Because a representative carries its members' peak demand, its routing serves
    every member hour; ``rounding.rounded_up`` turns the spread values into a whole plan."""
    values = np.zeros(n_cols)
    for full, small, keys in tables:
        if full.empty or small.empty:
            continue
        period = full["period"].map(representative).fillna(full["period"]).astype(int)
        wanted = full[keys].assign(period=period.to_numpy(), target=full["col"].to_numpy())
        source = small[[*keys, "period"]].assign(value=small_values[small["col"].to_numpy()])
        matched = wanted.merge(source, on=[*keys, "period"], how="inner")
        values[matched["target"].to_numpy(dtype=np.int64)] = matched["value"].to_numpy()
    return values


def wants_representatives(problem: Problem) -> bool:
    """True when some month has more than :data:`REPRESENTATIVE_THRESHOLD` periods."""
    counts = problem.periods.groupby(month_keys(problem.periods)).size()
    return bool((counts > REPRESENTATIVE_THRESHOLD).any())
