"""Merge periods with identical demand before solving, and spread the answer back.

Two periods of the same month with the same demand in every bucket have the same constraints,
so an optimal plan can use the same flexible fleet in both: solving one period that stands for
their summed hours is exact and makes hourly profiles with repeated values much cheaper.
"""

from __future__ import annotations

import pandas as pd

from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.fleet_problem import Problem, month_keys

#: Plan tables with a ``period`` column, spread back to every original period after solving.
PERIOD_TABLES = ("fleet_by_period", "nodes_by_period", "routing", "unmet_demand",
                 "api_routing")


def demand_matrix(problem: Problem) -> pd.DataFrame:
    """Requests/s per period (rows, in ``problem.periods`` order) and (workload, bucket)."""
    wide = problem.demand.pivot_table(index="period", columns=["workload", "bucket"],
                                      values="req_s", aggfunc="sum", fill_value=0.0)
    return wide.reindex(problem.periods["period"], fill_value=0.0)


def merged_periods(periods: pd.DataFrame, representative: pd.Series) -> pd.DataFrame:
    """One period per representative, standing for the hours of the periods it represents."""
    periods = periods.assign(representative=periods["period"].map(representative))
    kept = {name: (name, "first") for name in ("scenario", "probability") if name in periods}
    return periods.groupby("representative", as_index=False).agg(
        month=("month", "first"), hour=("hour", "first"), hours=("hours", "sum"),
        month_weight=("month_weight", "first"), **kept).rename(
        columns={"representative": "period"})


def representative_periods(problem: Problem) -> pd.Series:
    """For each period, the first period of the same month (of the same demand scenario) with
    identical demand."""
    wide = demand_matrix(problem).round(9)
    months = month_keys(problem.periods)
    calendar = problem.periods.set_index("period")[months].reindex(wide.index)
    key = pd.util.hash_pandas_object(wide, index=False).to_numpy()
    groups = calendar.reset_index(drop=True).assign(period=wide.index.to_numpy(), key=key)
    first = groups.groupby([*months, "key"])["period"].transform("min")
    return pd.Series(first.to_numpy(), index=groups["period"].to_numpy(), name="representative")


def merge_identical_periods(problem: Problem) -> tuple[Problem, pd.Series]:
    """A problem with one period per distinct (month, demand), and the period mapping."""
    representative = representative_periods(problem)
    if representative.nunique() == len(representative):
        return problem, representative
    merged = merged_periods(problem.periods, representative)
    demand = problem.demand[problem.demand["period"].isin(merged["period"])]
    return problem.with_changes(periods=merged, demand=demand.reset_index(drop=True)), \
        representative


def spread_periods(plan: FleetPlan, representative: pd.Series,
                   original_periods: pd.DataFrame, original_demand: pd.DataFrame) -> FleetPlan:
    """Copy each representative period's rows to every period it stood for."""
    plan.periods = original_periods.assign(
        solved_as=original_periods["period"].map(representative))
    if representative.nunique() == len(representative):
        return plan
    mapping = pd.DataFrame({"period": representative.index,
                            "representative": representative.to_numpy()})
    for name in PERIOD_TABLES:
        table = getattr(plan, name)
        if table.empty or "period" not in table:
            continue
        spread = mapping.merge(table.rename(columns={"period": "representative"}),
                               on="representative").drop(columns="representative")
        if "month" in spread and "hour" in spread:
            calendar = original_periods.set_index("period")
            spread["month"] = spread["period"].map(calendar["month"])
            spread["hour"] = spread["period"].map(calendar["hour"])
        if name == "unmet_demand":
            spread = _with_demand(spread, original_demand)
        setattr(plan, name, spread.sort_values("period", kind="stable").reset_index(drop=True))
    return plan


def _with_demand(unmet: pd.DataFrame, demand: pd.DataFrame) -> pd.DataFrame:
    """Unmet rows of merged periods: same shares, each period's own demand."""
    keys = ["workload", "bucket", "period"]
    own = demand.set_index(keys)["req_s"]
    unmet["demand_req_s"] = own.reindex(pd.MultiIndex.from_frame(unmet[keys])).to_numpy()
    unmet["unmet_req_s"] = unmet["unmet_fraction"] * unmet["demand_req_s"]
    return unmet
