"""Every dollar of a solved plan in pools that can be charged to someone.

A plan's cost (``objective_usd``) is GPUs bought x price x hours. Bought GPUs split in two:

- replica pools, one per (period, configuration, pricing type): the GPUs the replicas occupy,
  ``replicas x tp x usd_per_gpu_hour x hours``;
- idle node pools, one per (period, GPU type, pricing type): GPUs bought with whole nodes (or a
  reserved commitment sized for the busiest period) that no replica occupies.

A replica pool is *used* up to the planned load of its configuration (requests routed to it over
what one replica serves at the target utilization, the MILP's :math:`L_{ct}`); the rest of it
(N+k spares, rounding up to whole replicas) and the idle node pools are *spare*.

Plan months become calendar months here: a month that stands for ``month_weight`` horizon
months (one representative month for a plan without growth) is spread evenly over them, so the
pools of every calendar month sum to the plan's total cost.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import RESERVED_PRICING

#: Counts below this are solver noise.
EPSILON = 1e-9


def largest_remainder(values: np.ndarray, totals: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Whole numbers close to ``values`` whose sum in each group is that group's total.

    Parameters
    ----------
    values : array of float
        Non-negative amounts [any unit, e.g. cents], summing per group to about ``totals``.
    totals : array of int
        Wanted sum per group (index = group number).
    groups : array of int
        Group number of each value.

    Returns
    -------
    array of int64
        ``floor(values)``, plus one for the values with the largest remainders in each group
        until the group's sum is its total (ties: the earlier value).

    Notes
    -----
    Hamilton's largest-remainder method [1]: no value moves by a whole unit or more, and sums
    are exact by construction, so cents charged add up to the cents billed.

    References
    ----------
    .. [1] M. L. Balinski and H. P. Young, "Fair Representation", 2nd ed., Brookings
       Institution Press, 2001, ch. 2 (Hamilton's method).

    Examples
    --------
    >>> largest_remainder(np.array([33.4, 33.3, 33.3]), np.array([100]), np.zeros(3, int)).tolist()
    [34, 33, 33]
    """
    values = np.asarray(values, dtype=float)
    groups = np.asarray(groups, dtype=np.int64)
    floor = np.floor(values + EPSILON)
    short = np.rint(np.asarray(totals, float) - np.bincount(groups, floor, len(totals)))
    order = np.lexsort((np.arange(len(values)), -(values - floor), groups))
    in_order = groups[order]
    rank = np.empty(len(values), dtype=np.int64)
    rank[order] = np.arange(len(values)) - np.searchsorted(in_order, in_order, side="left")
    return (floor + (rank < short[groups])).astype(np.int64)


def scaled_to(values: np.ndarray, total: float) -> np.ndarray:
    """``values`` rescaled to sum to ``total`` (float noise and rounding removed).

    >>> scaled_to(np.array([1.0, 3.0]), 8.0).tolist()
    [2.0, 6.0]
    """
    values = np.clip(np.asarray(values, dtype=float), 0.0, None)
    present = values.sum()
    return values * (total / present) if present > 0 else values


def part_cents(total_cents: np.ndarray, part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """Whole cents of ``part`` within rows of ``total_cents`` for ``whole``: the share
    part / whole (clipped to [0, 1]; 0 where whole is 0) of each row's cents, rounded.

    >>> part_cents(np.array([100, 100]), np.array([0.25, 2.0]), np.array([1.0, 0.0])).tolist()
    [25.0, 0.0]
    """
    whole = np.asarray(whole, dtype=float)
    ratio = np.divide(np.asarray(part, dtype=float), whole, out=np.zeros(len(whole)),
                      where=whole > 0)
    return np.rint(np.asarray(total_cents) * np.clip(ratio, 0.0, 1.0))


def cents(usd: np.ndarray, month: np.ndarray, total_usd: float) -> np.ndarray:
    """Whole cents per row summing to ``total_usd`` in cents: each month first gets its share of
    the total (largest remainders over months), then each row its share of its month's.

    >>> cents(np.array([1.004, 1.004, 1.002]), np.array([0, 0, 1]), 3.01).tolist()
    [101, 100, 100]
    """
    scaled = scaled_to(usd, total_usd * 100.0)
    months, month_index = np.unique(np.asarray(month), return_inverse=True)
    per_month = np.bincount(month_index, scaled, len(months))
    month_total = largest_remainder(per_month, np.array([round(total_usd * 100.0)]),
                                    np.zeros(len(months), dtype=np.int64))
    return largest_remainder(scaled, month_total, month_index)


def calendar_months(periods: pd.DataFrame) -> pd.DataFrame:
    """For each plan month, the calendar months it stands for and its share of each.

    A month of weight ``w`` covers months ``m .. m + ceil(w) - 1``; each takes ``1 / w`` of it,
    the last one ``(w - floor(w)) / w`` when ``w`` is fractional.

    >>> calendar_months(pd.DataFrame({"month": [0], "month_weight": [2.5]}))["share"].tolist()
    [0.4, 0.4, 0.2]
    """
    weights = periods.groupby("month")["month_weight"].first()
    counts = np.ceil(weights.to_numpy(float) - EPSILON).astype(int).clip(min=1)
    month = np.repeat(weights.index.to_numpy(), counts)
    weight = np.repeat(weights.to_numpy(float), counts)
    step = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    share = np.minimum(1.0, weight - step) / weight
    return pd.DataFrame({"plan_month": month, "month": month + step, "share": share})


def to_calendar_months(table: pd.DataFrame, periods: pd.DataFrame,
                       amounts: list[str]) -> pd.DataFrame:
    """``table`` (with a ``period`` column) by calendar month: ``amounts`` columns split by share."""
    plan_month = periods.set_index("period")["month"]
    spread = table.assign(plan_month=table["period"].map(plan_month).to_numpy()).merge(
        calendar_months(periods), on="plan_month")
    spread[amounts] = spread[amounts].mul(spread["share"], axis=0)
    return spread.drop(columns=["plan_month", "share"])


def replica_pools(plan, use: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (period, config, gpu, pricing_type): gpus, hours, usd and used_fraction (planned load
    over replicas of the configuration in that period, at most 1); ``use``: the plan's
    ``workload_use`` when the caller has it already."""
    columns = ["period", "config", "gpu", "pricing_type", "gpus", "hours", "usd_per_gpu_hour",
               "usd", "used_fraction"]
    if plan.fleet_by_period.empty:
        return pd.DataFrame(columns=columns)
    price = plan.fleet.set_index(["config", "pricing_type"])["usd_per_gpu_hour"]
    rows = plan.fleet_by_period.merge(plan.periods[["period", "hours"]], on="period")
    rows["usd_per_gpu_hour"] = price.reindex(
        pd.MultiIndex.from_frame(rows[["config", "pricing_type"]])).to_numpy(float)
    rows["usd"] = rows["gpus"] * rows["usd_per_gpu_hour"] * rows["hours"]
    replicas = rows.groupby(["period", "config"])["replicas"].transform("sum")
    use = workload_use(plan) if use is None else use
    load = use.groupby(["period", "config"])["load"].sum()
    planned = load.reindex(pd.MultiIndex.from_frame(rows[["period", "config"]])).fillna(0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        used = np.where(replicas > 0, planned.to_numpy() / replicas.to_numpy(), 0.0)
    rows["used_fraction"] = np.clip(used, 0.0, 1.0)
    return rows[columns]


def workload_use(plan) -> pd.DataFrame:
    """Per (period, config, workload): ``load`` [replicas at the target utilization] and
    ``token_rate`` [tokens/s the configuration processes: prompts on a prefill stage, output on
    a decode stage, both on a colocated replica]."""
    columns = ["period", "config", "workload", "load", "token_rate"]
    routing, candidates = plan.routing, plan.candidates
    if routing.empty or candidates.empty:
        return pd.DataFrame(columns=columns)
    keys = ["workload", "bucket", "config"]
    extra = [c for c in ("req_s_per_replica", "stage") if c in candidates]
    routes = routing.drop(columns=[c for c in extra if c in routing]).merge(
        candidates[[*keys, *extra]].drop_duplicates(keys), on=keys, how="left")
    stage = routes["stage"] if "stage" in routes else pd.Series("", index=routes.index)
    prompt = np.where(stage == "decode", 0.0, _column(routes, "input_len"))
    output = np.where(stage == "prefill", 0.0, _column(routes, "output_len"))
    target = float(plan.assumptions.get("target_utilization", 1.0) or 1.0)
    capacity = routes["req_s_per_replica"].to_numpy(float) * target
    with np.errstate(divide="ignore", invalid="ignore"):
        routes["load"] = np.where(capacity > 0, routes["req_s"] / capacity, 0.0)
    routes["token_rate"] = routes["req_s"] * (prompt + output)
    return routes.groupby(columns[:3], as_index=False)[["load", "token_rate"]].sum()


def _column(table: pd.DataFrame, name: str) -> np.ndarray:
    """A numeric column, zeros when the plan has none (plans built from bare capacity tables)."""
    return table[name].to_numpy(float) if name in table else np.zeros(len(table))


def served_tokens(plan) -> pd.DataFrame:
    """Tokens served (prompt + output) per (period, workload) over the period's hours."""
    if plan.routing.empty:
        return pd.DataFrame(columns=["period", "workload", "tokens"])
    keys = ["workload", "bucket", "period", "route"]
    routes = plan.routing.drop_duplicates(keys)  # the stages of a route serve the same requests
    hours = routes["period"].map(plan.periods.set_index("period")["hours"])
    tokens = routes["req_s"] * (_column(routes, "input_len") + _column(routes, "output_len")) * 3600.0 * hours
    return routes.assign(tokens=tokens).groupby(["period", "workload"], as_index=False)["tokens"].sum()


def idle_pools(plan, replicas: pd.DataFrame) -> pd.DataFrame:
    """Per (period, gpu, pricing_type): usd of bought GPUs no replica occupies.

    Each offer's idle cost (its node cost minus its replica cost) is spread over the periods in
    proportion to the idle GPU-hours of the whole-node cover of its replicas (reserved: the
    busiest period's cover, all horizon long); exact when the plan bought that cover, which an
    optimal plan does. Without cover idle hours it follows the replica GPU-hours, else the hours.
    """
    columns = ["period", "gpu", "pricing_type", "usd"]
    nodes = plan.nodes
    if nodes.empty or plan.periods.empty:
        return pd.DataFrame(columns=columns)
    offers = ["gpu", "pricing_type"]
    grid = nodes[[*offers, "gpus_per_node", "usd_per_month"]].merge(
        plan.periods[["period", "hours"]], how="cross")
    used = replicas.groupby([*offers, "period"])["gpus"].sum()
    grid["used"] = used.reindex(pd.MultiIndex.from_frame(grid[[*offers, "period"]])).fillna(0.0).to_numpy()
    size = grid["gpus_per_node"].fillna(1.0).clip(lower=1.0)
    grid["cover"] = np.ceil(grid["used"] / size - EPSILON) * size
    reserved = grid["pricing_type"].isin(RESERVED_PRICING)
    peak = grid.groupby(offers)["cover"].transform("max")
    grid["cover"] = np.where(reserved, peak, grid["cover"])
    months = float(plan.assumptions.get("horizon_months", 1.0))
    busy = replicas.groupby(offers)["usd"].sum()
    total = grid.groupby(offers)["usd_per_month"].first() * months
    idle = (total - busy.reindex(total.index).fillna(0.0)).clip(lower=0.0)
    weight = _first_positive(grid, offers, [(grid["cover"] - grid["used"]).clip(lower=0) * grid["hours"],
                                            grid["used"] * grid["hours"], grid["hours"]])
    share = weight / weight.groupby([grid[c] for c in offers]).transform("sum")
    grid["usd"] = share * idle.reindex(pd.MultiIndex.from_frame(grid[offers])).to_numpy()
    return grid[grid["usd"] > 0][columns].reset_index(drop=True)


def _first_positive(grid: pd.DataFrame, keys: list[str], candidates: list[pd.Series]) -> pd.Series:
    """Per group of ``keys``, the first candidate weight series whose group sum is positive."""
    chosen = candidates[-1].astype(float)
    for weight in reversed(candidates[:-1]):
        positive = weight.groupby([grid[c] for c in keys]).transform("sum") > 0
        chosen = weight.where(positive, chosen).astype(float)
    return chosen


def offer_costs(plan) -> pd.DataFrame:
    """Per (calendar month, gpu, pricing_type): usd_per_gpu_hour (the price charged), usd (all
    GPUs bought), used_usd (the used part of the replica pools: the planned load), gpu_hours
    and used_gpu_hours."""
    columns = ["month", "gpu", "pricing_type", "usd_per_gpu_hour", "usd", "used_usd", "gpu_hours",
               "used_gpu_hours"]
    replicas = replica_pools(plan)
    keys = ["period", "gpu", "pricing_type"]
    parts = [replicas[[*keys, "usd"]].assign(used_usd=replicas["usd"] * replicas["used_fraction"]),
             idle_pools(plan, replicas).assign(used_usd=0.0)]
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=columns)
    rows = to_calendar_months(pd.concat(parts, ignore_index=True), plan.periods, ["usd", "used_usd"])
    table = rows.groupby(["month", "gpu", "pricing_type"], as_index=False)[["usd", "used_usd"]].sum()
    price = _offer_prices(plan, replicas)
    table["usd_per_gpu_hour"] = price.reindex(
        pd.MultiIndex.from_frame(table[["gpu", "pricing_type"]])).to_numpy(float)
    table["gpu_hours"] = table["usd"] / table["usd_per_gpu_hour"]
    table["used_gpu_hours"] = table["used_usd"] / table["usd_per_gpu_hour"]
    return table[columns]


def _offer_prices(plan, replicas: pd.DataFrame) -> pd.Series:
    """The price charged per GPU-hour of each (gpu, pricing_type): the replicas' (reserved terms
    beyond the horizon included), else the plan's price row."""
    charged = replicas.groupby(["gpu", "pricing_type"])["usd_per_gpu_hour"].first()
    if {"gpu", "pricing_type", "usd_per_gpu_hour"} <= set(plan.prices.columns):
        listed = plan.prices.drop_duplicates(["gpu", "pricing_type"]).set_index(
            ["gpu", "pricing_type"])["usd_per_gpu_hour"]
        charged = charged.combine_first(listed)
    return charged


def plan_total_usd(plan) -> float:
    """The plan's total cost [USD]; NaN without a solution."""
    value = plan.objective_usd
    return float(value) if value is not None and math.isfinite(float(value)) else math.nan
