"""Demand per workload request bucket and period, in requests/s.

A workload's demand (requests/s, tokens/s or tokens per month) is its mean over the day; an
hourly profile reshapes it (normalized to mean 1) and monthly growth compounds it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import SECONDS_PER_HOUR
from fleetplan.optimizer.fleet_problem import profile_periods
from fleetplan.optimizer.scenario import Scenario, Workload


def requests_per_s_from_tokens_per_s(tokens_per_s, tokens_per_request):
    """Requests/s carrying a token rate: ``tokens_per_s / tokens_per_request`` [req/s].

    >>> requests_per_s_from_tokens_per_s(7000.0, 700.0)
    10.0
    """
    return tokens_per_s / tokens_per_request


def requests_per_s_from_tokens_per_month(tokens_per_month, tokens_per_request, hours_per_month):
    """Mean requests/s of a monthly token volume [req/s]:
    ``tokens_per_month / (hours_per_month * 3600) / tokens_per_request``.

    >>> round(requests_per_s_from_tokens_per_month(2.628e9, 1000.0, 730.0), 3)
    1.0
    """
    return tokens_per_month / (hours_per_month * SECONDS_PER_HOUR) / tokens_per_request


def hour_scale(profile: list[float] | None, n_hours: int) -> np.ndarray:
    """Demand multiplier per hour of an ``n_hours`` cycle: the profile repeated over the cycle
    and normalized to mean 1 (ones without a profile).

    >>> hour_scale([1.0, 3.0], 4).tolist()
    [0.5, 1.5, 0.5, 1.5]
    """
    if profile is None:
        return np.ones(n_hours)
    values = np.tile(np.asarray(profile, dtype=float), n_hours // len(profile))
    return values / values.mean()


def growth_scale(monthly_growth: float, n_months: int) -> np.ndarray:
    """Demand multiplier per month: ``(1 + growth) ** month``.

    >>> growth_scale(0.1, 3).round(2).tolist()
    [1.0, 1.1, 1.21]
    """
    return (1.0 + monthly_growth) ** np.arange(n_months)


def mean_requests_per_s(workload: Workload, hours_per_month: float) -> float:
    """A workload's mean demand in requests/s, whatever unit it was given in."""
    if workload.requests_per_s is not None:
        return float(workload.requests_per_s)
    buckets = np.array(workload.buckets(), dtype=float)
    tokens = buckets[:, 1] if workload.token_basis == "output" else buckets[:, 0] + buckets[:, 1]
    tokens_per_request = float(np.dot(tokens, buckets[:, 2]))
    if workload.tokens_per_s is not None:
        return requests_per_s_from_tokens_per_s(workload.tokens_per_s, tokens_per_request)
    return requests_per_s_from_tokens_per_month(workload.tokens_per_month, tokens_per_request,
                                                hours_per_month)


def cycle_hours(scenario: Scenario) -> int:
    """Hours of the demand cycle: the longest hourly profile (1 without profiles)."""
    return max((len(w.hourly_profile) for w in scenario.workloads if w.hourly_profile),
               default=1)


def plan_periods(scenario: Scenario) -> pd.DataFrame:
    """Periods: one per hour of the profiles' cycle, and one set per month if any workload
    grows."""
    fleet = scenario.fleet
    n_hours = cycle_hours(scenario)
    grows = any(w.monthly_growth != 0 for w in scenario.workloads)
    n_months = math.ceil(fleet.horizon_months) if grows else 1
    return profile_periods(n_hours, n_months, fleet.hours_per_month, fleet.horizon_months)


def workload_buckets(scenario: Scenario) -> pd.DataFrame:
    """One row per workload request bucket: workload, bucket, input_len, output_len, share,
    model, tpot_slo_ms, ttft_slo_ms, req_s (mean demand of the bucket [req/s])."""
    rows = []
    for workload in scenario.workloads:
        total = mean_requests_per_s(workload, scenario.fleet.hours_per_month)
        for bucket, (input_len, output_len, share) in enumerate(workload.buckets()):
            rows.append((workload.name, bucket, input_len, output_len, share, workload.model,
                         workload.tpot_slo_ms, workload.ttft_slo_ms, total * share))
    columns = ["workload", "bucket", "input_len", "output_len", "share", "model", "tpot_slo_ms",
               "ttft_slo_ms", "req_s"]
    table = pd.DataFrame(rows, columns=columns)
    return table.astype({"tpot_slo_ms": float, "ttft_slo_ms": float})


def demand_table(scenario: Scenario, buckets: pd.DataFrame, periods: pd.DataFrame) -> pd.DataFrame:
    """Demand [req/s] per workload bucket and period: mean x hour scale x growth."""
    n_hours = int((periods["month"] == 0).sum())
    n_months = int(periods["month"].nunique())
    scales = {w.name: np.outer(growth_scale(w.monthly_growth, n_months),
                               hour_scale(w.hourly_profile, n_hours)).ravel()
              for w in scenario.workloads}
    table = buckets[["workload", "bucket", "input_len", "output_len", "req_s"]].merge(
        periods[["period"]], how="cross")
    scale = np.concatenate([scales[name] for name in buckets["workload"]])
    table["req_s"] = table["req_s"] * scale
    return table
