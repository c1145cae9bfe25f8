"""The quantities behind a plan workbook's live formulas, computed from a FleetPlan's tables.

Money in the workbook is always ``quantity the optimizer decided x price x hours``:

- Fleet: ``usd_per_month = replicas_mean * tp * usd_per_gpu_hour * hours_per_month``, where
  ``replicas_mean`` is the hour-weighted mean over the horizon [replicas].
- Usage: mean GPUs bought per (month, GPU, pricing type) [GPUs]; ``usd = gpus_mean *
  usd_per_gpu_hour * hours_per_month`` per month. Costs by GPU, pricing type and month sum it.
- Allocation: the share of each fleet row's cost that each workload uses (its load share of the
  configuration, hour- and replica-weighted, as the optimizer splits costs) [fraction].

Every function returns plain DataFrames; no workbook code here.
"""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import HOURS_PER_MONTH, LINKING_PRICING, RESERVED_PRICING

RESERVED = RESERVED_PRICING


def first_of_next_month(today: dt.date | None = None) -> dt.date:
    """The default start of a plan: the first day of the coming month.

    >>> first_of_next_month(dt.date(2026, 12, 5))
    datetime.date(2027, 1, 1)
    """
    today = today or dt.date.today()
    return dt.date(today.year + today.month // 12, today.month % 12 + 1, 1)


def month_start(start: dt.date, month: int) -> dt.date:
    """The first day of plan month ``month`` (0 = the month of ``start``).

    >>> month_start(dt.date(2026, 12, 1), 13)
    datetime.date(2028, 1, 1)
    """
    index = start.year * 12 + start.month - 1 + int(month)
    return dt.date(index // 12, index % 12 + 1, 1)


def hours_per_month(plan) -> float:
    """Hours in a month the plan was costed with [h]."""
    return float(plan.assumptions.get("hours_per_month", HOURS_PER_MONTH))


def horizon_months(plan) -> float:
    """Planning horizon [months]."""
    return float(plan.assumptions.get("horizon_months", 12.0))


def price_table(plan) -> pd.DataFrame:
    """Prices the plan used: gpu, pricing_type, usd_per_gpu_hour (the listed price),
    term_charge_factor (USD charged per GPU-hour of the horizon over it: above 1 for a reserved
    term longer than the horizon, which is paid in full), start_month (the first month new GPUs
    of it can be had), then reference columns."""
    prices = plan.prices.copy()
    if prices.empty and not plan.fleet.empty:
        prices = plan.fleet[["gpu", "pricing_type", "usd_per_gpu_hour"]].drop_duplicates(
            ["gpu", "pricing_type"])
    if not {"gpu", "pricing_type", "usd_per_gpu_hour"} <= set(prices.columns):
        return pd.DataFrame(columns=["gpu", "pricing_type", "usd_per_gpu_hour",
                                     "term_charge_factor", "start_month"])
    if "term_charge_factor" not in prices:  # plans written before the columns
        prices["term_charge_factor"] = 1.0
    if "start_month" not in prices:
        prices["start_month"] = 0
    keep = [c for c in ("gpu", "pricing_type", "usd_per_gpu_hour", "term_charge_factor",
                        "start_month", "provider", "region", "instance", "source", "as_of",
                        "origin", "warning", "same_provider_on_demand_usd_per_gpu_hour")
            if c in prices.columns]
    return prices[keep].drop_duplicates(["gpu", "pricing_type"]).reset_index(drop=True)


def fixed_price(plan) -> float:
    """USD per configuration-month: the scenario's, else the plan's own table's (usd over
    weighted months)."""
    given = plan.assumptions.get("config_fixed_usd_per_month")
    if given:
        return float(given)
    fixed = plan.config_fixed_costs
    return float(fixed["usd"].sum() / fixed["month_weight"].astype(float).sum())


def charged_prices(prices: pd.DataFrame) -> pd.Series:
    """USD charged per GPU-hour of the horizon by (gpu, pricing_type), from a
    :func:`price_table`: the listed price times its term charge factor."""
    charged = prices["usd_per_gpu_hour"].astype(float) * prices["term_charge_factor"].fillna(1.0)
    return pd.Series(charged.to_numpy(), index=pd.MultiIndex.from_frame(
        prices[["gpu", "pricing_type"]]), name="usd_per_gpu_hour")


def _gpus_by_period(plan) -> pd.DataFrame:
    """GPUs the replicas occupy per period, GPU type and pricing type."""
    columns = ["period", "gpu", "pricing_type", "gpus"]
    if plan.fleet_by_period.empty:
        return pd.DataFrame(columns=columns)
    return plan.fleet_by_period.groupby(columns[:3], as_index=False)["gpus"].sum()


def _bought_by_period(plan, used: pd.DataFrame, prices: pd.DataFrame) -> pd.DataFrame:
    """GPUs bought per period: the plan's own ``nodes_by_period``, else (a plan written before
    it existed) whole nodes covering the used GPUs (the cheapest cover).

    Flexible pricing buys ``ceil(used / node) * node`` per period; a reserved term or a
    purchase is one count held from its start month (after a lead time) to the end of the
    horizon: the plan's GPUs bought at peak, else the cover of its busiest period
    (``prices``, a :func:`price_table`, holds the start months).
    """
    keys = ["gpu", "pricing_type"]
    if not plan.nodes_by_period.empty:
        return plan.nodes_by_period[["period", *keys, "gpus"]]
    node = plan.nodes.set_index(keys)["gpus_per_node"]
    size = node.reindex(pd.MultiIndex.from_frame(used[keys])).fillna(1.0)
    size = size.to_numpy(dtype=float)
    bought = used.assign(gpus=np.ceil(used["gpus"].to_numpy(float) / size - 1e-9) * size)
    held = bought["pricing_type"].isin(LINKING_PRICING)
    if held.any():
        peak = bought[held].groupby(keys, as_index=False)["gpus"].max()
        index = pd.MultiIndex.from_frame(peak[keys])
        counted = plan.nodes.set_index(keys)["gpus_bought_peak"].reindex(index).to_numpy(float)
        starts = prices.set_index(keys)["start_month"].reindex(index).to_numpy(float)
        peak = peak.assign(gpus=np.fmax(peak["gpus"].to_numpy(float), counted),
                           start_month=np.nan_to_num(starts))
        spread = peak.merge(plan.periods[["period", "month"]], how="cross")
        spread = spread[spread["month"] >= spread["start_month"]]
        bought = pd.concat([bought[~held], spread[["period", *keys, "gpus"]]], ignore_index=True)
    return bought


def _gpu_hours_by_month(plan, by_period: pd.DataFrame) -> pd.DataFrame:
    """GPU-hours per calendar month, GPU and pricing type from GPUs per period."""
    if by_period.empty:
        return pd.DataFrame(columns=["month", "gpu", "pricing_type", "gpu_hours"])
    rows = by_period.merge(plan.periods[["period", "month", "hours"]], on="period")
    rows["gpu_hours"] = rows["gpus"] * rows["hours"]
    return average_month(plan, rows, ["gpu", "pricing_type"], ["gpu_hours"])


def average_month(plan, rows: pd.DataFrame, keys: list[str], amounts: list[str]) -> pd.DataFrame:
    """``amounts`` of ``rows`` (a table with a plan ``month`` column) in an average month of
    each month index, over the horizon months it stands for (``month_weight``), summed by
    month and ``keys``."""
    weight = plan.periods.drop_duplicates("month").set_index("month")["month_weight"]
    rows = rows.assign(**{a: rows[a] / rows["month"].map(weight) for a in amounts})
    return rows.groupby(["month", *keys], as_index=False)[amounts].sum()


def usage_table(plan) -> pd.DataFrame:
    """Mean GPUs bought per (month, gpu, pricing_type), over the months of costs_by_month.

    Bought GPUs are the plan's nodes in each period (``nodes_by_period``); a plan written
    before that table existed has the whole-node cover of its used GPUs instead, and where
    that does not reproduce the plan's node cost of a GPU and pricing type (a solve stopped
    short of the optimum may buy spare nodes), its bought GPU-hours are spread over the months
    in proportion to use: exact in total, approximate per month.
    """
    columns = ["month", "gpu", "pricing_type", "gpus_mean"]
    nodes = plan.nodes
    if nodes.empty or plan.periods.empty:
        return pd.DataFrame(columns=columns)
    hpm, months_total = hours_per_month(plan), horizon_months(plan)
    used_by_period = _gpus_by_period(plan)
    used = _gpu_hours_by_month(plan, used_by_period)
    listed = price_table(plan)
    cover = _gpu_hours_by_month(plan, _bought_by_period(plan, used_by_period, listed))
    months = plan_months(plan, used)
    used, cover = spread_months(used, months), spread_months(cover, months)
    prices = charged_prices(listed)
    key = pd.MultiIndex.from_frame(nodes[["gpu", "pricing_type"]])
    price = prices.reindex(key).to_numpy()
    paid = price * hpm  # free GPUs (sunk commitments) say nothing of their count by cost
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(paid > 0, nodes["usd_per_month"].to_numpy() / paid, np.nan)
    bought = pd.DataFrame({"gpu": nodes["gpu"], "pricing_type": nodes["pricing_type"],
                           "bought_gpus_mean": mean})
    grid = bought.merge(pd.DataFrame({"month": months}), how="cross")
    for name, table in (("used_hours", used), ("cover_hours", cover)):
        grid = grid.merge(table.rename(columns={"gpu_hours": name}),
                          on=["month", "gpu", "pricing_type"], how="left").fillna({name: 0.0})
    by_offer = grid.groupby(["gpu", "pricing_type"])
    cover_mean = by_offer["cover_hours"].transform("sum") / (hpm * months_total)
    grid["bought_gpus_mean"] = grid["bought_gpus_mean"].fillna(cover_mean)
    exact = np.isclose(cover_mean, grid["bought_gpus_mean"], rtol=1e-9, atol=1e-12)
    total_used = by_offer["used_hours"].transform("sum").to_numpy()
    share = np.where(total_used > 0, grid["used_hours"] / np.where(total_used > 0, total_used, 1),
                     1.0 / len(months))
    proportional = grid["bought_gpus_mean"] * len(months) * share
    grid["gpus_mean"] = np.where(exact, grid["cover_hours"] / hpm, proportional)
    return grid.sort_values(["month", "gpu", "pricing_type"])[columns].reset_index(drop=True)


def plan_months(plan, used: pd.DataFrame) -> list[int]:
    """The months of costs_by_month, else those of ``used`` (a table with a month column)."""
    if not plan.costs_by_month.empty:
        return [int(m) for m in plan.costs_by_month["month"]]
    return sorted(int(m) for m in used["month"].unique()) or [0]


def spread_months(used: pd.DataFrame, months: list[int]) -> pd.DataFrame:
    """``used`` (a table with a month column); when one representative month stands for the
    horizon, repeated for every month of ``months``."""
    if used.empty or used["month"].nunique() != 1 or len(months) == 1:
        return used
    one = used.drop(columns="month")
    return one.merge(pd.DataFrame({"month": months}), how="cross")


def usage_usd(usage: pd.DataFrame, prices: pd.DataFrame, hpm: float) -> np.ndarray:
    """USD of each usage row: gpus_mean * charged price * hours_per_month [USD/month]
    (``prices`` a :func:`price_table`)."""
    price = charged_prices(prices).reindex(pd.MultiIndex.from_frame(usage[["gpu", "pricing_type"]]))
    return usage["gpus_mean"].to_numpy(dtype=float) * price.to_numpy(dtype=float) * hpm


def route_loads(plan) -> pd.DataFrame:
    """Per (workload, config, period): the load routed there [replicas' worth: requests/s over
    one replica's capacity for the bucket]."""
    routing, candidates = plan.routing, plan.candidates
    if routing.empty or candidates.empty:
        return pd.DataFrame(columns=["workload", "config", "period", "load"])
    capacity = candidates[["workload", "bucket", "config", "req_s_per_replica"]]
    routes = routing.merge(capacity, on=["workload", "bucket", "config"], how="left")
    with np.errstate(divide="ignore", invalid="ignore"):
        routes["load"] = routes["req_s"] / routes["req_s_per_replica"]
    return routes.groupby(["workload", "config", "period"], as_index=False)["load"].sum()


def _load_shares(plan) -> pd.DataFrame:
    """Per (workload, config, period): the workload's share of the configuration's load."""
    load = route_loads(plan)
    total = load.groupby(["config", "period"])["load"].transform("sum")
    load["share"] = np.where(total > 0, load["load"] / total, 0.0)
    return load[["workload", "config", "period", "share"]]


def allocation_table(plan) -> pd.DataFrame:
    """Share of each fleet row's cost (config, pricing_type) used by each workload.

    One column per workload; rows in plan.fleet order. A row's shares sum to at most 1: the
    rest is spare capacity (redundancy).
    """
    fleet = plan.fleet
    workloads = list(plan.workloads["workload"]) if not plan.workloads.empty else []
    if fleet.empty or not workloads:
        return pd.DataFrame(columns=["config", "pricing_type"])
    table = fleet[["config", "pricing_type"]].copy()
    periods = plan.periods[["period", "hours"]]
    replicas = plan.fleet_by_period.merge(periods, on="period")
    replicas["replica_hours"] = replicas["replicas"] * replicas["hours"]
    shares = _load_shares(plan)
    weighted = replicas.merge(shares, on=["config", "period"], how="left").fillna({"share": 0.0})
    weighted["used_hours"] = weighted["share"] * weighted["replica_hours"]
    keys = ["config", "pricing_type"]
    used = weighted.pivot_table(index=keys, columns="workload", values="used_hours",
                                aggfunc="sum", fill_value=0.0)
    total = replicas.groupby(keys)["replica_hours"].sum()
    index = pd.MultiIndex.from_frame(table[keys])
    for workload in workloads:
        column = used[workload] if workload in used.columns else pd.Series(0.0, index=used.index)
        share = (column.reindex(index).fillna(0.0) / total.reindex(index)).to_numpy()
        table[workload] = np.nan_to_num(share, nan=0.0)
    return table


def slo_margin(achieved_ms: pd.Series, slo_ms: pd.Series) -> pd.Series:
    """Headroom under an SLO: ``1 - achieved / SLO`` [fraction]; NaN without an SLO.

    >>> float(slo_margin(pd.Series([30.0]), pd.Series([40.0])).iloc[0])
    0.25
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = 1.0 - achieved_ms.astype(float) / slo_ms.astype(float)
    return margin.where(np.isfinite(margin))


def finite(value) -> bool:
    """True for a finite number."""
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
