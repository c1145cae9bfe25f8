"""The plan workbook: a live, finance-grade Excel model of a FleetPlan.

Sheets: Summary, Fleet, Costs, Workloads, Chargeback, Commitments, Supply, Changes,
Assumptions, Candidates, Frontier, Sources, Read me.
Every money cell of Fleet, Costs, Workloads and Summary is a formula that reaches the prices
and hours on Assumptions through defined names; replica counts and GPU usage stay numbers (the
optimizer's decisions). Formulas are written only where they reproduce the plan's own numbers.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from pathlib import Path
from typing import Any

from fleetplan.catalogs import PriceRule, load_catalogs
from fleetplan.exports import plan_quantities
from fleetplan.exports.plan_sheet_changes import changes_sheet, has_current_fleet
from fleetplan.exports.plan_sheet_chargeback import chargeback_sheet
from fleetplan.exports.plan_sheet_commitments import commitments_sheet
from fleetplan.exports.plan_sheet_fleet import fleet_sheet
from fleetplan.exports.plan_sheet_supply import has_supply, supply_sheet
from fleetplan.exports.plan_sheets_costs import CostCells, costs_sheet
from fleetplan.exports.plan_sheets_inputs import (
    ASSUMPTIONS_KEY_COLUMNS,
    assumptions_sheet,
    candidates_sheet,
    frontier_sheet,
)
from fleetplan.exports.plan_sheets_summary import summary_sheet, workloads_sheet
from fleetplan.exports.provenance import provenance
from fleetplan.exports.xlsx_package import Book, set_properties
from fleetplan.exports.xlsx_print import PageOptions, PrintHeader
from fleetplan.exports.xlsx_sources import catalog_rows, readme_sheet, sources_sheet

log = logging.getLogger(__name__)

SHEETS = ("Summary", "Fleet", "Costs", "Workloads", "Chargeback", "Commitments", "Supply",
          "Changes", "Assumptions", "Candidates", "Frontier", "Sources", "Read me")

_SHEET_NOTES = (
    ("Summary", "Scenario, total cost per month, year and horizon, cost and $/1M tokens per "
     "workload, GPUs by type, the solver's status and gap, and what limits the plan."),
    ("Fleet", "One row per chosen configuration and pricing type: replicas (the optimizer's "
     "decision, fixed numbers), GPUs, price and cost per month and over the horizon (live)."),
    ("Costs", "Cost by GPU type, pricing type, workload and month (chart), computed live from "
     "the working tables below them: GPUs bought per month, each workload's cost share, and "
     "the tokens sent to hosted APIs and configuration-months, when the plan has them."),
    ("Workloads", "Demand, SLOs, achieved TPOT/TTFT and their margin, utilization, cost per "
     "month and per million tokens. Unmet demand, if any, is listed below."),
    ("Chargeback", "Cost per team and cost center, per month and in total, with tokens served "
     "and cost per million tokens; spare capacity charged by the scenario's chargeback rule."),
    ("Commitments", "Under demand scenarios: each commitment option's expected, P90 and CVaR "
     "cost, cost-at-risk and utilisation per scenario, the value of the stochastic solution, "
     "and a chart of cost against committed capacity. Other sheets show expected costs."),
    ("Supply", "kW and MWh per month of each site with a power envelope; the requests, tokens "
     "and dollars sent to hosted model APIs, and the break-even rate above which a replica of "
     "your own is cheaper."),
    ("Changes", "The plan as changes to today's fleet: the whole bill with the sunk "
     "commitments, staying the course instead, and per month the GPUs bought, released, "
     "migrated and kept."),
    ("Assumptions", "The inputs: hours per month, GPU prices per pricing type and, when the "
     "plan has them, hosted-API token prices and the fixed cost per configuration-month "
     "(yellow); the settings that shaped the fleet (utilization target, budget, efficiency "
     "factors)."),
    ("Candidates", "Every configuration considered for every workload bucket, at its knee "
     "under the SLOs; chosen configurations marked TRUE."),
    ("Frontier", "Throughput per GPU against TPOT as the batch grows, per workload, with the "
     "TPOT SLO line and the operating points used."),
    ("Sources", "fleetplan version, the price rule, every catalog row used with its source, "
     "date and catalog SHA-256, and the scenario's settings."),
    ("Read me", "This sheet."),
)
_HOW_TO = (
    "Change a GPU price or hours_per_month on Assumptions (yellow cells): Fleet, Costs, "
    "Workloads and Summary recalculate, in Excel and LibreOffice alike.",
    "Replica counts and GPU usage are the optimizer's decisions for the original prices and "
    "stay fixed: changed prices do not re-optimize. Run fleetplan plan again for a new fleet.",
    "Tables have filter buttons in their header rows; units are in the headers.",
    "Prices come from the price rule named on Summary; rows from your own catalog files win over "
    "public listings. Each price's provider, date and source are on Assumptions and Fleet.",
)


def write_plan_xlsx(plan, path: str | os.PathLike, *, catalogs: Any = None,
                    estimate=None, start_date: dt.date | None = None) -> Path:
    """Write the plan workbook to ``path`` atomically; returns the path. Months are labelled
    from ``start_date`` (default: the first of next month)."""
    return build_plan_book(plan, catalogs=catalogs, estimate=estimate,
                           start_date=start_date).save(path)


def plan_catalogs(plan) -> Any:
    """The catalogs the plan was made with (its scenario's override files), if loadable."""
    try:
        overrides = tuple(plan.scenario.get("catalogs") or ())
        try:
            return load_catalogs(overrides)
        except (ValueError, OSError):
            return load_catalogs()
    except (ImportError, ValueError, OSError) as error:
        log.debug("catalogs unavailable: %s", error)
        return None


def plan_sheets(plan) -> tuple[str, ...]:
    """The plan workbook's sheets: Chargeback only when some workload names its team,
    Commitments only when the plan has demand scenarios, Supply only when the scenario has
    sites or hosted APIs, Changes only when it has a current fleet."""
    teams = any(w.get("team") for w in plan.scenario.get("workloads") or [])
    shown = {"Chargeback": teams, "Commitments": not plan.commitments.empty,
             "Supply": has_supply(plan), "Changes": has_current_fleet(plan)}
    return tuple(t for t in SHEETS if shown.get(t, True))


def build_plan_book(plan, *, catalogs: Any = None, estimate=None,
                    start_date: dt.date | None = None) -> Book:
    """The plan workbook, ready to save (tests inspect its formula records)."""
    catalogs = catalogs if catalogs is not None else plan_catalogs(plan)
    name = str(plan.scenario.get("name") or "scenario")
    book = Book(header=PrintHeader(f"Fleet plan: {name}"))
    wb = book.wb
    titles = plan_sheets(plan)
    wb.active.title = titles[0]
    for title in titles[1:]:
        wb.create_sheet(title)
    cells = CostCells(start=start_date or plan_quantities.first_of_next_month())
    names = assumptions_sheet(wb["Assumptions"], plan, catalogs, cells.start)
    book.pages["Assumptions"] = PageOptions(key_columns=ASSUMPTIONS_KEY_COLUMNS)
    cells.fleet = fleet_sheet(book, wb["Fleet"], plan, names)
    book.pages["Costs"] = costs_sheet(book, wb["Costs"], plan, cells, names)
    workloads = workloads_sheet(book, wb["Workloads"], plan, cells)
    if "Chargeback" in titles:
        book.pages["Chargeback"] = chargeback_sheet(book, wb["Chargeback"], plan, cells.start)
    if "Commitments" in titles:
        book.pages["Commitments"] = commitments_sheet(book, wb["Commitments"], plan)
    if "Supply" in titles:
        book.pages["Supply"] = supply_sheet(wb["Supply"], plan, cells.start)
    if "Changes" in titles:
        book.pages["Changes"] = changes_sheet(book, wb["Changes"], plan, cells.start)
    rule = price_rule_text(plan.scenario)
    book.pages["Summary"] = summary_sheet(book, wb["Summary"], plan, cells, workloads, rule)
    book.pages["Candidates"] = candidates_sheet(wb["Candidates"], plan)
    book.pages["Frontier"] = frontier_sheet(wb["Frontier"], plan, catalogs, estimate)
    used = plan.assumptions.get("prices_used")
    record = provenance("plan", {"scenario": plan.scenario, "catalog_versions":
                                 plan.assumptions.get("catalog_versions"), "price_rule": rule,
                                 "prices_used": used or []})
    book.pages["Sources"] = sources_sheet(wb["Sources"], record,
                                          catalog_rows(catalogs, _ids(plan), prices=used,
                                                       engine=plan.assumptions.get("engine")))
    book.pages["Read me"] = readme_sheet(wb["Read me"], "fleetplan plan", "The cheapest GPU fleet "
                                         "found for the scenario, as a live cost model.",
                                         [n for n in _SHEET_NOTES if n[0] in titles], _HOW_TO,
                                         record)
    set_properties(wb, f"fleetplan plan: {name}", f"GPU fleet plan for {name}, status "
                   f"{plan.status}", "fleetplan, GPU, fleet plan, LLM serving")
    if book.mismatches:
        log.warning("%d workbook cells kept the plan's numbers instead of a formula",
                    len(book.mismatches))
    return book


def price_rule_text(scenario: dict) -> str:
    """The scenario's price rule in words (older plans without one: the default rule)."""
    fleet = scenario.get("fleet") or {}
    try:
        rule = PriceRule(fleet.get("price_rule") or "cheapest", fleet.get("provider"), fleet.get("region"),
                         int(fleet.get("max_price_age_days") or PriceRule().max_age_days),
                         bool(fleet.get("mix_providers")))
    except ValueError:
        return str(fleet.get("price_rule") or "")
    return rule.describe()


def _ids(plan) -> dict[str, list[str]]:
    frames = [t for t in (plan.fleet, plan.candidates) if not t.empty]
    ids: dict[str, set[str]] = {"gpu": set(), "model": set(), "quant": set()}
    for frame in frames:
        for kind in ids:
            if kind in frame.columns:
                ids[kind] |= set(frame[kind].dropna().astype(str))
    return {kind: sorted(values) for kind, values in ids.items()}
