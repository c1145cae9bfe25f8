"""Plan workbook: the Changes sheet, the plan as changes to the fleet the company has today.

Shown only when the scenario has ``fleet.current``. On top, the whole bill: the plan's own
cost, the sunk fees of today's commitments (paid whatever the plan does) and their sum, next to
staying the course (keeping today's fleet and renting on demand what it cannot serve) and the
plan's saving; live sums and differences. Then per month the GPUs bought, released, migrated
(the same GPUs on another configuration) and kept, and the changes per GPU type, pricing type
and configuration (``fleetplan.optimizer.fleet_changes``); ``(idle)`` GPUs are held and run
nothing.
"""

from __future__ import annotations

import datetime as dt
import math

from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports import plan_quantities
from fleetplan.exports.xlsx_common import (
    DECIMAL,
    INTEGER,
    LABEL_FONT,
    NOTE_FONT,
    USD,
    put,
    set_widths,
    title_block,
)
from fleetplan.exports.xlsx_live import LiveColumn, write_live_table
from fleetplan.exports.xlsx_package import Book
from fleetplan.exports.xlsx_print import PageOptions
from fleetplan.optimizer.fleet_changes import monthly_diff
from fleetplan.optimizer.fleet_problem import outcome_keys
from fleetplan.optimizer.stay_the_course import UNSERVABLE

MONTH = "mmm yyyy"
DIFF_HEADERS = {"month": "Month", "bought": "Bought (GPUs)", "released": "Released (GPUs)",
                "migrated": "Migrated (GPUs)", "kept": "Kept (GPUs)",
                "changes": "Changes (GPUs)", "gpus": "Held (GPUs)"}
DETAIL_HEADERS = {"month": "Month", "gpu": "GPU", "pricing_type": "Pricing",
                  "config": "Configuration", "gpus_before": "GPUs before", "gpus": "GPUs after",
                  "added": "Added (GPUs)", "removed": "Removed (GPUs)", "kept": "Kept (GPUs)"}
# Column A holds the bill's labels; the wide Configuration column comes last, so the monthly
# table's numbers above it stay in narrow columns.
MIN_WIDTHS = {1: 40, 2: 14, 3: 14, 4: 12, 5: 12, 6: 12, 7: 12, 8: 12, 9: 40}


def _count_format(values) -> str:
    """Whole GPUs without decimals; a fractional count (a mean over a month's hours) with two."""
    numbers = values.to_numpy(dtype=float)
    return INTEGER if (numbers == numbers.round()).all() else DECIMAL


def has_current_fleet(plan) -> bool:
    """True when the plan's scenario starts from a fleet (``fleet.current``)."""
    return bool((plan.scenario.get("fleet") or {}).get("current"))


#: The note under the bill of a plan with demand scenarios.
EXPECTED = ("Costs are expected over the demand scenarios (each weighted by its probability); "
            "each scenario changes today's fleet its own way, below")
#: The note under a stay-the-course cost its solve did not prove within its time.
UNPROVEN_STAY = ("Stay the course: the best found in its time, not proven the least; the "
                 "saving may be overstated")


def _bill(book: Book, ws: Worksheet, row: int, plan) -> int:
    """The whole bill and the stay-the-course comparison; returns the next free row."""
    stay = plan.assumptions.get("stay_the_course") or {}
    sunk = float(stay.get("sunk_usd_total", 0.0))
    kept = float(stay.get("stay_usd_total", math.nan))
    labels = [("The plan's decisions over the horizon", plan.objective_usd),
              ("Sunk commitments (paid in any case)", sunk)]
    for offset, (label, value) in enumerate(labels):
        put(ws, row + offset, 1, label)
        put(ws, row + offset, 2, float(value), USD)
    put(ws, row + 2, 1, "Whole bill with the plan", font=LABEL_FONT)
    book.formulas.put(ws, row + 2, 2, f"B{row}+B{row + 1}", plan.objective_usd + sunk, USD)
    put(ws, row + 3, 1, "Stay the course (today's fleet + on demand)")
    if math.isfinite(kept):
        put(ws, row + 3, 2, kept, USD)
        put(ws, row + 4, 1, "Saving of the plan", font=LABEL_FONT)
        book.formulas.put(ws, row + 4, 2, f"B{row + 3}-B{row + 2}", kept - plan.objective_usd - sunk,
                          USD)
    elif stay.get("status") == UNSERVABLE:
        put(ws, row + 3, 2, f"not possible: {UNSERVABLE}")
    else:
        put(ws, row + 3, 2, f"not priced: {stay.get('status', 'not computed')}")
    notes = [EXPECTED] if "scenario" in plan.periods else []
    notes += [UNPROVEN_STAY] if math.isfinite(kept) and stay.get("status") == "time_limit" else []
    for offset, note in enumerate(notes):
        put(ws, row + 5 + offset, 1, note, font=NOTE_FONT)
    return row + 6 + len(notes)


def _outcome_columns(table) -> list[LiveColumn]:
    """The demand scenario of each row, as the first column, when the plan has scenarios."""
    return [LiveColumn("scenario", table["scenario"].astype(str).tolist(), header="Scenario")
            for _ in outcome_keys(table)]


def changes_sheet(book: Book, ws: Worksheet, plan, start: dt.date) -> PageOptions:
    """The bill and comparison, the monthly diff, then the changes per configuration."""
    row = title_block(ws, "Changes", "What to buy, release, migrate and keep each month, from "
                      "the fleet deployed today.")
    widths: dict[int, float] = {}
    row = _bill(book, ws, row, plan)
    changes = plan.changes
    if changes.empty:
        put(ws, row, 1, "The plan has no changes table (no solution).", font=NOTE_FONT)
        return PageOptions()
    diff = monthly_diff(changes)
    outcomes = _outcome_columns(diff)  # each demand scenario changes today's fleet its own way
    dates = [plan_quantities.month_start(start, int(m)) for m in diff["month"]]
    columns = [*outcomes,
               LiveColumn("month", dates, number_format=MONTH, header=DIFF_HEADERS["month"])]
    count = _count_format(diff[list(DIFF_HEADERS)[1:]])
    columns += [LiveColumn(name, diff[name].tolist(), number_format=count,
                           header=DIFF_HEADERS[name])
                for name in ("bought", "released", "migrated", "kept")]
    bought, released, migrated = (get_column_letter(len(outcomes) + n) for n in (2, 3, 4))
    columns.append(LiveColumn("changes", diff["changes"].tolist(),
                              lambda i, r: f"{bought}{r}+{released}{r}+{migrated}{r}",
                              number_format=count, header=DIFF_HEADERS["changes"]))
    columns.append(LiveColumn("gpus", diff["gpus"].tolist(), number_format=count,
                              header=DIFF_HEADERS["gpus"]))
    put(ws, row, 1, "By month", font=LABEL_FONT)
    placed = write_live_table(book, ws, row + 1, columns, "ChangesByMonth", widths)
    row = placed.last + 3
    put(ws, row, 1, "By GPU type, pricing type and configuration", font=LABEL_FONT)
    detail = changes.sort_values([*outcome_keys(changes), "month", "gpu", "pricing_type",
                                  "config"], kind="stable")
    columns = [*_outcome_columns(detail),
               LiveColumn("month", [plan_quantities.month_start(start, int(m))
                                    for m in detail["month"]], number_format=MONTH,
                          header=DETAIL_HEADERS["month"])]
    columns += [LiveColumn(name, detail[name].astype(str).tolist(), header=DETAIL_HEADERS[name])
                for name in ("gpu", "pricing_type")]
    numbers = ["gpus_before", "gpus", "added", "removed", "kept"]
    count = _count_format(detail[numbers])
    columns += [LiveColumn(name, detail[name].tolist(), number_format=count,
                           header=DETAIL_HEADERS[name]) for name in numbers]
    columns.append(LiveColumn("config", detail["config"].astype(str).tolist(),
                              header=DETAIL_HEADERS["config"]))
    write_live_table(book, ws, row + 1, columns, "ChangesByConfiguration", widths)
    least = {**MIN_WIDTHS, 9: 12, 10: 40} if outcome_keys(changes) else MIN_WIDTHS
    set_widths(ws, {c: max(w, least.get(c, 0)) for c, w in widths.items()})
    return PageOptions()
