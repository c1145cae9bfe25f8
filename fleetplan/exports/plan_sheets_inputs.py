"""Plan workbook: Assumptions (the inputs), Candidates and Frontier sheets."""

from __future__ import annotations

import datetime as dt
import logging
import math
from typing import Any

import numpy as np
import pandas as pd
from openpyxl.styles import Font
from openpyxl.utils.cell import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.errors import FleetplanError
from fleetplan.exports import plan_quantities
from fleetplan.exports.plan_costs_beyond_gpus import beyond_gpu_inputs
from fleetplan.exports.xlsx_common import NOTE_FONT, column_width, put, set_widths, title_block, wrap
from fleetplan.exports.xlsx_frontier import X_COLUMN, Y_COLUMN, frontier_block
from fleetplan.exports.xlsx_print import PageOptions, chart_rows
from fleetplan.exports.xlsx_sheets import Assumptions, write_frame
from fleetplan.exports.xlsx_sources import engines_looked_up
from fleetplan.sweeps import estimate_cases
from fleetplan.sweeps.efficiencies import WILDCARD

log = logging.getLogger(__name__)

#: Workloads drawn on the Frontier sheet (one chart each).
MAX_FRONTIER_WORKLOADS = 6
_BATCHES = np.unique(np.round(np.geomspace(1, 4096, 40)).astype(np.int64))
#: Price table columns after the key and the price, in order; the source text wraps.
PRICE_DETAILS = ("provider", "region", "as_of", "origin", "warning", "same_provider_on_demand_usd_per_gpu_hour",
                 "instance", "source")
_CHART_CM = (11.0, 16.0)  # height, width of each frontier chart
#: What names a row of the Assumptions' tables on its pages across: a price's GPU, pricing
#: type, price and name in formulas; an efficiency row's engine, GPU, operator and precision.
ASSUMPTIONS_KEY_COLUMNS = 4
CHOSEN_FONT = Font(bold=True, color="375623")
#: The widest the Candidates' reason column gets; longer reasons wrap [characters].
REASON_WIDTH = 60.0


def assumptions_sheet(ws: Worksheet, plan, catalogs: Any, start: dt.date) -> dict[tuple, str]:
    """General inputs, GPU prices (inputs, each with its provider, date and source) and the
    optimizer's own settings; returns the price defined names by (gpu, pricing_type)."""
    sheet = Assumptions(ws)
    info = plan.assumptions
    sheet.section("General", "Edit hours_per_month to restate every cost for a different month "
                  "length; the other values shaped the fleet and need a new plan to change.")
    sheet.scalar("hours_per_month", plan_quantities.hours_per_month(plan), "hours",
                 "Hours in a month: every $/month is $/hour x this", "#,##0.0")
    sheet.scalar("horizon_months", plan_quantities.horizon_months(plan), "months",
                 "Planning horizon of the plan (fixed: re-plan to change)", "0", editable=False,
                 named=True)
    sheet.scalar("currency", "USD", "", "Every amount is in US dollars", editable=False)
    sheet.scalar("first_month", start, "date", "Month 1 of the plan (fleetplan plan --start-date)",
                 "mmmm yyyy", editable=False)
    for key, unit, text, fmt in (
            ("target_utilization", "fraction", "Share of a replica's capacity planned", "0%"),
            ("budget_usd_per_month", "USD/month", "Budget cap (empty = none)", '"$"#,##0'),
            ("spot_max_share", "fraction", "Largest share of GPUs that may be spot", "0%")):
        sheet.scalar(key, _number(info.get(key)), unit, text, fmt, editable=False)
    sheet.row += 1
    sheet.section("GPU prices", "USD per GPU-hour by pricing type, chosen by the price rule on "
                  "Summary; each with the row it came from. The fleet's costs use these.")
    prices = plan_quantities.price_table(plan)
    # shown only when a reserved term runs past the horizon: the fleet's costs multiply by it
    terms = ("term_charge_factor",) if (prices["term_charge_factor"] != 1).any() else ()
    prices = prices[[c for c in ("gpu", "pricing_type", "usd_per_gpu_hour", *terms, *PRICE_DETAILS)
                     if c in prices]]
    names = sheet.prices(prices, keys=["gpu", "pricing_type"], factor_column="term_charge_factor")
    names.update(beyond_gpu_inputs(sheet, plan))
    efficiency = _efficiency(catalogs, plan)
    if not efficiency.empty:
        sheet.row += 1
        sheet.section("Efficiency factors", "Memory-bandwidth and compute utilization the "
                      "performance model assumed (fixed: they shaped the capacities).")
        sheet.info(efficiency, "EfficiencyFactors")
    sheet.finish()
    return names


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _efficiency(catalogs: Any, plan) -> pd.DataFrame:
    """The catalog efficiency rows the plan's capacities could draw on: its engine's (with its
    release and the ``*`` priors; every engine's for a plan that names none) on its GPUs (with
    ``*``), without the columns none of them fills."""
    table = getattr(catalogs, "efficiency", None)
    if table is None or plan.fleet.empty:
        return pd.DataFrame()
    gpus = {g for c in ("gpu", "prefill_gpu") if c in plan.fleet for g in plan.fleet[c].dropna()}
    rows = table[table["gpu"].isin({*gpus, WILDCARD})]
    engine = (plan.assumptions or {}).get("engine")
    if engine is not None:
        rows = rows[rows["engine"].isin(engines_looked_up(catalogs, engine))]
    keys = ["engine", "gpu", "operator", "precision", "n_points", "as_of"]
    shown = [c for c in rows.columns  # source and notes are on Sources
             if c in keys or (c not in ("source", "notes") and rows[c].notna().any())]
    return rows[shown].reset_index(drop=True)


def candidates_sheet(ws: Worksheet, plan) -> PageOptions:
    """Every configuration the optimizer considered per workload bucket; chosen ones marked,
    the columns up to the configuration's frozen (and printed on each page across)."""
    row = title_block(ws, "Candidates", "The capacity table the optimizer chose from: the knee "
                      "operating point of each configuration under each workload's SLOs.")
    table = plan.candidates.reset_index(drop=True)
    if table.empty:
        put(ws, row, 1, "No candidates.", font=NOTE_FONT)
        return PageOptions()
    chosen = set(plan.fleet["config"]) if not plan.fleet.empty else set()
    table.insert(0, "chosen", table["config"].isin(chosen))
    widths: dict[int, float] = {}
    write_frame(ws, table, row, "Candidates", widths)
    # in the cells, not a conditional format: LibreOffice 7.4 crashes printing a sheet whose
    # boolean cells carry one, unless it recalculates the workbook on load
    for line in np.flatnonzero(table["chosen"].to_numpy()) + row + 1:
        ws.cell(row=int(line), column=1).font = CHOSEN_FONT
    if "reason" in table:  # why a configuration cannot serve: a sentence, wrapped
        column = table.columns.get_loc("reason") + 1
        for line in np.flatnonzero(table["reason"].astype(str).str.len() > REASON_WIDTH):
            wrap(ws, ws.cell(row=row + 1 + int(line), column=column), REASON_WIDTH)
        widths[column] = min(widths.get(column, REASON_WIDTH), REASON_WIDTH)
    # the row's names stay in view, and print on each page across
    ws.freeze_panes = f"{get_column_letter(table.columns.get_loc('config') + 2)}{row + 1}"
    set_widths(ws, widths)
    return PageOptions()


def frontier_sheet(ws: Worksheet, plan, catalogs: Any, estimate=None) -> PageOptions:
    """Per workload, decode throughput vs TPOT of the configurations serving it, with its TPOT
    SLO and each configuration's operating point (the knee the optimizer used). The charts come
    first, two abreast, and are what prints; their data follows below."""
    row = title_block(ws, "Frontier: throughput vs TPOT", "For each workload, the "
                      "configurations that serve it as the batch grows; the dashed line is its "
                      "TPOT SLO and the diamonds the operating points the plan uses.")
    used = _used_candidates(plan)
    if used.empty:
        put(ws, row, 1, "No configuration serves a workload in this plan.", font=NOTE_FONT)
        return PageOptions()
    try:
        curves = _curves(used, catalogs, estimate)
    except (FleetplanError, KeyError, ValueError) as error:
        log.info("no frontier curves: %s", error)
        put(ws, row, 1, f"Throughput curves unavailable: {error}", font=NOTE_FONT)
        return PageOptions()
    slos = plan.workloads.set_index("workload")["tpot_slo_ms"] if not plan.workloads.empty \
        else pd.Series(dtype=float)
    groups = list(curves.groupby("workload", sort=False))
    per_chart = chart_rows(_CHART_CM[0]) + 1
    data_row = row + per_chart * math.ceil(len(groups) / 2) + 1
    put(ws, data_row - 1, 1, "Chart data (not printed)", font=NOTE_FONT)
    widths: dict[int, float] = {}
    for number, (workload, group) in enumerate(groups):
        slo = plan_quantities.finite(slos.get(workload)) and float(slos.get(workload)) or None
        knees = group[group["knee"]][["config", "batch", X_COLUMN, Y_COLUMN]]
        put(ws, data_row, 1, f"Workload {workload}", font=Font(bold=True))
        anchor = f"A{row + per_chart * (number // 2)}"
        data_row = frontier_block(ws, data_row + 1, group[["config", "batch", X_COLUMN, Y_COLUMN]], slo,
                                  knees, widths, suffix=str(number + 1),
                                  title=f"{workload}: decode tokens/s per GPU vs TPOT",
                                  anchor=anchor, size=_CHART_CM)
    set_widths(ws, {1: max(widths.get(1, 20), 34), **{k: v for k, v in widths.items() if k > 1}})
    right = _column_after(ws, _CHART_CM[1])
    for number, chart in enumerate(ws._charts):  # every second chart moves beside the first
        if number % 2:
            chart.anchor = f"{get_column_letter(right)}{chart.anchor[1:]}"
    last_chart = row + per_chart * math.ceil(len(groups) / 2) - 1
    return PageOptions(one_page=True, area=f"A1:{get_column_letter(_column_after(ws, 2 * _CHART_CM[1]))}{last_chart}")


def _column_after(ws: Worksheet, width_cm: float) -> int:
    """The first column starting at least ``width_cm`` (plus a gap) right of column A."""
    column, covered = 1, 0.0
    while covered < width_cm + 0.5:
        covered += column_width(ws, column) * 0.23
        column += 1
    return column


def _used_candidates(plan) -> pd.DataFrame:
    """Distinct (workload, config) operating points the routing uses, largest bucket first."""
    if plan.routing.empty or plan.candidates.empty:
        return pd.DataFrame()
    keys = ["workload", "bucket", "config"]
    routed = plan.routing.groupby(keys, as_index=False)["req_s"].sum()
    used = routed.merge(plan.candidates, on=keys, how="left")
    if "stage" in used:  # a prefill stage has no decode frontier of its own
        used = used[used["stage"].fillna("serve") != "prefill"]
    used = used.sort_values("req_s", ascending=False).drop_duplicates(["workload", "config"])
    workloads = list(dict.fromkeys(used["workload"]))[:MAX_FRONTIER_WORKLOADS]
    return used[used["workload"].isin(workloads)].reset_index(drop=True)


def _curves(used: pd.DataFrame, catalogs: Any, estimate) -> pd.DataFrame:
    """Engine throughput and TPOT over a batch grid for each used configuration."""
    estimate = estimate_cases if estimate is None else estimate
    base = used[["workload", "config", "gpu", "model", "quant", "tp", "input_len",
                 "output_len", "batch"]].rename(columns={"batch": "knee_batch"})
    grid = base.merge(pd.DataFrame({"batch": _BATCHES}), how="cross")
    knees = base.assign(batch=base["knee_batch"])
    cases = pd.concat([grid, knees], ignore_index=True).drop_duplicates(
        ["workload", "config", "batch"])
    cases = cases[cases["batch"] > 0].reset_index(drop=True)
    cases["mode"] = "batch"
    result = estimate(cases.drop(columns=["workload", "config", "knee_batch"]), catalogs)
    curves = cases[["workload", "config", "batch"]].assign(
        knee=(cases["batch"] == cases["knee_batch"]).to_numpy(),
        **{X_COLUMN: result[X_COLUMN].to_numpy(float), Y_COLUMN: result[Y_COLUMN].to_numpy(float)})
    ok = result["valid"].to_numpy(bool) & result["fits"].to_numpy(bool)
    ok &= np.isfinite(curves[X_COLUMN]).to_numpy() & np.isfinite(curves[Y_COLUMN]).to_numpy()
    return curves[ok].sort_values(["workload", "config", "batch"], kind="stable")
