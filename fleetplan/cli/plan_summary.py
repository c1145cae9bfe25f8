"""What ``fleetplan plan`` prints: the plan's status and cost, its fleet with each price's
origin, its workloads, what binds and what could not be served, in the tables' number style."""

from __future__ import annotations

import math

import typer

from fleetplan.cli.plan_supply import print_supply
from fleetplan.cli.tables import number_text, print_table
from fleetplan.exports.plan_quantities import price_table
from fleetplan.optimizer.chargeback import chargeback_table
from fleetplan.optimizer.fleet_changes import monthly_diff
from fleetplan.optimizer.fleet_problem import outcome_keys
from fleetplan.optimizer.fleet_plan import STATUSES
from fleetplan.optimizer.plan_summary import fixed_cost_line, months_text
from fleetplan.optimizer.stay_the_course import UNSERVABLE

MAX_ROWS = 12


def print_plan(plan) -> None:
    """The terminal summary of a FleetPlan."""
    months = plan.assumptions.get("horizon_months", math.nan)
    gap = "" if plan.gap is None or not math.isfinite(plan.gap) else f", gap {plan.gap:.2%}"
    typer.echo(f"status: {plan.status}{gap} ({plan.solver}, {plan.solve_seconds:.1f} s)")
    if plan.status == "no_solution" and not plan.messages:  # a failed re-check says its own
        typer.echo(f"  {STATUSES['no_solution']}: give it more time (--time-limit, or "
                   f"solver.time_limit_s in the scenario)")
    if plan.usd_per_month is None or not math.isfinite(plan.usd_per_month):
        typer.echo("cost: none (no plan)")
    else:
        typer.echo(f"cost: ${number_text(plan.usd_per_month)} per month, "
                   f"${number_text(plan.objective_usd)} over {months_text(months)}")
    fixed = fixed_cost_line(plan)
    if fixed:
        typer.echo(fixed)
    _fleet(plan)
    _workloads(plan)
    _chargeback(plan)
    _commitments(plan)
    print_supply(plan)
    _changes(plan)
    if not plan.binding_constraints.empty:
        typer.echo("\nWhat limits the plan:")
        for text in plan.binding_constraints["description"].head(MAX_ROWS):
            typer.echo(f"  {text}")
    if not plan.unmet_demand.empty:
        unmet = plan.unmet_demand.groupby("workload", sort=False)["unmet_req_s"].max()
        typer.echo("\nUnmet demand at peak: " + ", ".join(f"{w} {number_text(v)} requests/s" for w, v in unmet.items()))
    for message in plan.messages:
        typer.echo(message)


def _fleet(plan) -> None:
    fleet = plan.fleet.head(MAX_ROWS)
    if fleet.empty:
        return
    prices = price_table(plan).set_index(["gpu", "pricing_type"])
    rows = []
    for record in fleet.to_dict("records"):
        origin = ""
        if (record["gpu"], record["pricing_type"]) in prices.index:
            price = prices.loc[(record["gpu"], record["pricing_type"])]
            origin = "scenario" if price.get("origin") == "scenario" else str(price.get("provider") or "")
        rows.append([record["config"], record["pricing_type"], record["replicas_peak"], record["gpus_peak"],
                     record["usd_per_gpu_hour"], origin, record["usd_per_month"]])
    print_table("\nFleet", ["configuration", "pricing", "replicas at peak", "GPUs at peak", "USD per GPU-hour",
                            "price from", "USD per month"], rows, numeric=[False, False, True, True, True, False, True])
    line = calibration_line(plan.fleet)
    if line:
        typer.echo(line)


def calibration_line(fleet) -> str:
    """How sure the fleet's capacities are: each calibration label, how many configurations rest
    on it (the Fleet sheet names them) and the error band of held-out rows like them."""
    if "calibration" not in fleet or fleet["calibration"].isna().all():
        return ""
    configs = fleet.drop_duplicates("config").dropna(subset=["calibration"])
    parts = []
    for (label, low, high), group in configs.groupby(["calibration", "error_p10_pct", "error_p90_pct"], sort=False):
        count = len(group)
        parts.append(f"{label} for {count} configuration{'s' if count != 1 else ''} "
                     f"(error of held-out rows like them: p10 {low:+.0f}%, p90 {high:+.0f}%)")
    return "Capacity calibration: " + "; ".join(parts) + "."


def _workloads(plan) -> None:
    workloads = plan.workloads.head(MAX_ROWS)
    if workloads.empty:
        return
    rows = [[w["workload"], w["demand_req_s_peak"], f"{w['served_fraction']:.1%}", w["tpot_ms_max"],
             w["ttft_ms_max"], w["usd_per_month"], w["usd_per_m_tokens"]] for w in workloads.to_dict("records")]
    print_table("\nWorkloads", ["workload", "peak requests/s", "served", "TPOT worst ms", "TTFT worst ms",
                                "USD per month", "USD per 1M tokens"], rows,
                numeric=[False, True, True, True, True, True, True])


def _chargeback(plan) -> None:
    """Cost per team and cost center over the horizon, when the scenario names any."""
    if not any(w.get("team") or w.get("cost_center") for w in plan.scenario.get("workloads") or ()):
        return
    table = chargeback_table(plan)
    if table.empty:
        return
    teams = table.groupby(["team", "cost_center"], as_index=False)[["usd", "spare_usd", "tokens"]].sum()
    months = max(table["month"].nunique(), 1)
    rows = [[t["team"], t["cost_center"], t["usd"] / months, t["usd"], f"{t['usd'] / teams['usd'].sum():.1%}",
             t["spare_usd"], t["usd"] / (t["tokens"] / 1e6) if t["tokens"] > 0 else float("nan")]
            for t in teams.to_dict("records")]
    print_table("\nChargeback", ["team", "cost center", "USD per month", "USD over the horizon", "share",
                                 "of it spare USD", "USD per 1M tokens"], rows,
                numeric=[False, False, True, True, True, True, True])


def _commitments(plan) -> None:
    """Each commitment option's expected cost and risk, and the VSS, under demand scenarios."""
    table = plan.commitments
    if table.empty:
        return
    options = table.drop_duplicates("option")
    rows = [[o["option"], o["reserved_gpus"], o["expected_usd_per_month"], o["p90_usd_per_month"],
             o["cost_at_risk_usd_per_month"], o["over_stochastic_usd_per_month"]]
            for o in options.to_dict("records")]
    print_table("\nCommitments under uncertain demand (USD per month; costs are expected over the "
                "demand scenarios)", ["commitment option", "reserved GPUs", "expected", "P90",
                                      "cost-at-risk", "above the stochastic plan"], rows,
                numeric=[False, True, True, True, True, True])
    risk = plan.assumptions.get("stochastic") or {}
    vss = risk.get("vss_usd_per_month", math.nan)
    typer.echo(f"value of the stochastic solution (VSS): ${number_text(vss)} per month, against "
               f"committing as if demand were the {risk.get('p50_scenario', 'P50')} scenario")
def _changes(plan) -> None:
    """The monthly diff from today's fleet and the stay-the-course comparison, when the plan
    re-plans a fleet."""
    if plan.changes.empty:
        return
    diff = monthly_diff(plan.changes)
    outcomes = outcome_keys(diff)  # each demand scenario changes today's fleet its own way
    rows = [[*(d[k] for k in outcomes), int(d["month"]), d["bought"], d["released"],
             d["migrated"], d["kept"], d["changes"], d["gpus"]] for d in diff.to_dict("records")]
    title = "\nChanges from today's fleet (GPUs" + (", in each demand scenario)" if outcomes
                                                   else ")")
    print_table(title, [*outcomes, "month", "bought", "released", "migrated", "kept", "changes",
                        "held"], rows, numeric=[False] * len(outcomes) + [True] * 7)
    stay = plan.assumptions.get("stay_the_course")
    if not stay:
        return
    expected = " (expected over the demand scenarios)" if outcomes else ""
    typer.echo(f"sunk commitments: ${number_text(stay['sunk_usd_total'])} (paid whatever the plan "
               f"does); whole bill with the plan: ${number_text(stay['plan_usd_total'])}"
               + expected)
    if math.isfinite(stay["stay_usd_total"]):
        typer.echo(f"stay the course (keep today's fleet, rent on demand the rest): "
                   f"${number_text(stay['stay_usd_total'])}; the plan saves "
                   f"${number_text(stay['saving_usd_total'])} over the horizon{expected}")
        if stay["status"] == "time_limit":
            typer.echo("  (the stay-the-course cost is the best found in its time, not proven "
                       "the least: the saving may be overstated)")
    elif stay["status"] == UNSERVABLE:
        typer.echo(f"stay the course: not possible ({stay['status']})")
    else:
        typer.echo(f"stay the course: not priced ({stay['status']}; raise solver.time_limit_s)")
