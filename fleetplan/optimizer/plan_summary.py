"""Plain-text summary of a FleetPlan for the terminal."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from fleetplan.optimizer.fleet_plan import FleetPlan


def usd(value: float) -> str:
    """Dollars for people: ``$1,234`` from $100 up, ``$1.50`` below, ``n/a`` if unknown."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"${value:,.0f}" if abs(value) >= 100 else f"${value:,.2f}"


def _status_line(plan: FleetPlan) -> str:
    gap = plan.gap
    gap_text = "" if gap is None or not math.isfinite(gap) else f", gap {gap:.3%}"
    bound = getattr(plan, "bound_usd", math.nan)
    months = plan.assumptions.get("horizon_months", math.nan)
    if bound is None or not math.isfinite(bound) or not math.isfinite(months):
        bound_text = ""
    elif math.isfinite(plan.objective_usd):
        bound_text = f" to a bound of {usd(bound / months)} per month"
    else:  # no plan: the bound is what none costs less than
        bound_text = f", none below {usd(bound / months)} per month"
    return (f"status: {plan.status}{gap_text}{bound_text} ({plan.solver}, "
            f"{plan.solve_seconds:.2f} s)")


def _table(title: str, table: pd.DataFrame, columns: list[str], max_rows: int) -> list[str]:
    if table.empty:
        return []
    shown = table[[c for c in columns if c in table.columns]]
    text = shown.head(max_rows).to_string(index=False, float_format=lambda v: f"{v:,.2f}")
    more = [f"  ... {len(shown) - max_rows} more rows"] if len(shown) > max_rows else []
    return ["", title, *("  " + line for line in text.splitlines()), *more]


def _supply_lines(plan: FleetPlan) -> list[str]:
    """One line per site (peak kW of its limit, MWh per month) and per API (share, cost)."""
    lines = []
    power = getattr(plan, "power", pd.DataFrame())
    for site, rows in (power.groupby("site", sort=False) if not power.empty else ()):
        lines.append(f"power {site}: {rows['kw_peak'].max():,.1f} kW at peak of "
                     f"{rows['kw_limit'].iloc[0]:,.0f} kW, {rows['mwh'].mean():,.1f} MWh per month")
    usage = getattr(plan, "api_usage", pd.DataFrame())
    for (workload, api), rows in (usage.groupby(["workload", "api"]) if not usage.empty else ()):
        lines.append(f"api {api}: {rows['share'].mean():.1%} of {workload}'s requests, "
                     f"{usd(rows['usd'].mean())} per month")
    return ["", *lines] if lines else []


def fixed_cost_line(plan: FleetPlan) -> str:
    """The fixed cost per deployed configuration, when the plan pays one: configuration-months
    (each month weighted by the horizon months it stands for), the price and the total; ``""``
    otherwise."""
    fixed = plan.config_fixed_costs
    if fixed.empty:
        return ""
    config_months = float(fixed["month_weight"].sum())
    price = plan.assumptions.get("config_fixed_usd_per_month")
    at = f" at {usd(price)}" if isinstance(price, (int, float)) else ""
    count = fixed["config"].nunique()
    return (f"fixed cost per configuration: {config_months:g} configuration-months{at} = "
            f"{usd(fixed['usd'].sum())} over the horizon ({count} configuration{'s' if count != 1 else ''})")


def months_text(months: float) -> str:
    """A horizon in words.

    >>> months_text(1), months_text(12), months_text(1.5)
    ('1 month', '12 months', '1.5 months')
    """
    return f"{months:g} month" + ("" if months == 1 else "s")


def summary_text(plan: FleetPlan, max_rows: int = 12) -> str:
    """Status, cost, fleet, costs by pricing, binding constraints, unmet demand."""
    months = plan.assumptions.get("horizon_months", float("nan"))
    lines = [
        _status_line(plan),
        f"cost: {usd(plan.usd_per_month)} per month, {usd(plan.objective_usd)} over "
        f"{months_text(months)}",
    ]
    fixed = fixed_cost_line(plan)
    if fixed:
        lines.append(fixed)
    lines += _table("fleet (peak replicas):", plan.fleet,
                    ["config", "pricing_type", "replicas_peak", "replicas_mean", "gpus_peak",
                     "usd_per_gpu_hour", "usd_per_month", "calibration", "error_p10_pct", "error_p90_pct"],
                    max_rows)
    lines += _table("cost by pricing type:", plan.costs_by_pricing,
                    ["pricing_type", "gpus_peak", "usd_per_month", "share"], max_rows)
    lines += _table("workloads:", plan.workloads,
                    ["workload", "demand_req_s_peak", "served_fraction", "tpot_ms_max",
                     "ttft_ms_max", "utilization", "usd_per_month", "usd_per_m_tokens"],
                    max_rows)
    lines += _supply_lines(plan)
    if not plan.binding_constraints.empty:
        lines += ["", "binding constraints:"]
        lines += ["  " + text for text in plan.binding_constraints["description"].head(max_rows)]
    if not plan.unmet_demand.empty:
        unmet = (plan.unmet_demand.groupby("workload", sort=False)["unmet_req_s"].max()
                 .rename("unmet_req_s_peak").reset_index())
        lines += _table("unmet demand:", unmet, ["workload", "unmet_req_s_peak"], max_rows)
    if plan.messages:
        lines += ["", *plan.messages]
    return "\n".join(lines)
