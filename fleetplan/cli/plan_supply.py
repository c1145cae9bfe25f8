"""What ``fleetplan plan`` prints about supply beyond rented GPUs: kW and MWh per month of each
site with a power envelope, and the share of each workload sent to hosted APIs with the
break-even rate above which self-hosting wins."""

from __future__ import annotations

import math

from fleetplan.cli.tables import number_text, print_table


def print_supply(plan) -> None:
    """Power per site and month, and API use per workload (only what the scenario has)."""
    _power(plan)
    _apis(plan)


def _power(plan) -> None:
    power = plan.power
    if power.empty:
        return
    rows = [[r["site"], int(r["month"]), r["kw_peak"], r["kw_mean"], r["kw_limit"], r["mwh"]]
            for r in power.to_dict("records")]
    print_table("\nPower (facility kW of the GPUs bought on each site)",
                ["site", "month", "kW at peak", "kW mean", "kW limit", "MWh"], rows,
                numeric=[False, True, True, True, True, True])


def _apis(plan) -> None:
    usage, break_even = plan.api_usage, plan.api_break_even
    if break_even.empty:
        return
    totals = (usage.groupby(["workload", "api"])[["requests", "tokens", "usd"]].sum()
              if not usage.empty else None)
    months = max(float(plan.assumptions.get("horizon_months", 1.0) or 1.0), 1.0)
    rows = []
    for r in break_even.to_dict("records"):
        key = (r["workload"], r["api"])
        sent = totals.loc[key] if totals is not None and key in totals.index else None
        share = _share(plan, r["workload"], 0.0 if sent is None else float(sent["requests"]))
        rate = r["break_even_req_s"]
        rows.append([r["workload"], r["api"], f"{share:.1%}",
                     0.0 if sent is None else float(sent["tokens"]) / months,
                     0.0 if sent is None else float(sent["usd"]) / months,
                     r["usd_per_request"] * 1e6,
                     "never" if not math.isfinite(rate) else number_text(rate)])
    print_table("\nHosted APIs (share of requests sent; self-hosting wins above the break-even rate)",
                ["workload", "api", "share", "tokens per month", "USD per month",
                 "USD per 1M requests", "break-even requests/s"], rows,
                numeric=[False, False, True, True, True, True, True])


def _share(plan, workload: str, requests: float) -> float:
    """Requests sent to the API over all the workload's requests in the horizon."""
    mine = plan.workloads.set_index("workload")
    hours = float(plan.periods["hours"].sum())
    total = float(mine.loc[workload, "demand_req_s_mean"]) * hours * 3600.0 \
        if workload in mine.index else 0.0
    return requests / total if total > 0 else 0.0
