"""Plan workbook: the Summary and Workloads sheets."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from openpyxl.chart import BarChart, Reference
from openpyxl.formatting.rule import CellIsRule, DataBarRule
from openpyxl.styles import Alignment, Font, PatternFill
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports import plan_quantities
from fleetplan.exports.plan_sheets_costs import CostCells
from fleetplan.exports.xlsx_common import (
    DECIMAL,
    INTEGER,
    LABEL_FONT,
    NOTE_FONT,
    PERCENT,
    USD_PRECISE,
    USD_WHOLE,
    put,
    set_widths,
    title_block,
    wrap,
)
from fleetplan.exports.xlsx_live import LiveColumn, Placed, agrees, write_live_table
from fleetplan.exports.xlsx_package import Book
from fleetplan.exports.xlsx_print import PageOptions, chart_rows
from fleetplan.exports.xlsx_sheets import write_frame
from fleetplan.optimizer.fleet_plan import STATUSES
from fleetplan.optimizer.plan_summary import months_text

REOPTIMIZE_NOTE = ("Costs are live: edit the yellow cells on Assumptions (prices, hours per "
                   "month) and every total recalculates. The fleet itself (replica counts) was "
                   "optimized for the original prices: changed prices do not re-optimize; run "
                   "fleetplan plan again for a new fleet.")
_RED, _AMBER, _GREEN = "F8CBAD", "FFE699", "C6EFCE"
_SUMMARY_WIDTHS = {1: 34, 2: 18, 3: 18, 4: 18, 5: 14, 6: 16}


def workloads_sheet(book: Book, ws: Worksheet, plan, cells: CostCells) -> Placed | None:
    """Demand, SLOs and what was achieved per workload; costs link to the Costs sheet."""
    row = title_block(ws, "Workloads", "Demand and latency promises per workload, the worst "
                      "TPOT/TTFT of the operating points used, utilization and live cost.")
    table = plan.workloads.reset_index(drop=True)
    if table.empty:
        put(ws, row, 1, "The plan has no workloads.", font=NOTE_FONT)
        return None
    table = table.assign(tpot_margin=plan_quantities.slo_margin(table["tpot_ms_max"],
                                                           table["tpot_slo_ms"]),
                         ttft_margin=plan_quantities.slo_margin(table["ttft_ms_max"],
                                                           table["ttft_slo_ms"]))
    order = ["workload", "model", "demand_req_s_mean", "demand_req_s_peak", "tokens_per_month",
             "served_fraction", "tpot_slo_ms", "tpot_ms_max", "tpot_margin", "ttft_slo_ms",
             "ttft_ms_max", "ttft_margin", "utilization"]
    order = [c for c in order if c in table.columns]
    formats = {"demand_req_s_mean": DECIMAL, "demand_req_s_peak": DECIMAL,
               "tokens_per_month": INTEGER, "served_fraction": PERCENT, "tpot_margin": PERCENT,
               "ttft_margin": PERCENT, "utilization": PERCENT}
    columns = [LiveColumn(c, table[c].tolist(), number_format=formats.get(c, DECIMAL)
                          if c not in ("workload", "model") else None) for c in order]
    usd = _workload_usd(cells, table)
    usd_letter = chr(ord("A") + len(columns))
    tokens_letter = chr(ord("A") + order.index("tokens_per_month"))
    rows = cells.workload_rows
    columns.append(LiveColumn("usd_per_month", usd,
                              lambda i, r: _costs_link(rows, table.loc[i, "workload"]),
                              table["usd_per_month"].tolist(), USD_WHOLE))
    tokens = table["tokens_per_month"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_token = np.where(tokens > 0, np.array(usd, float) / (tokens / 1e6), np.nan)
    columns.append(LiveColumn("usd_per_m_tokens", per_token.tolist(),
                              lambda i, r: f"{usd_letter}{r}/({tokens_letter}{r}/1000000)",
                              table["usd_per_m_tokens"].tolist(), USD_PRECISE))
    widths: dict[int, float] = {}
    placed = write_live_table(book, ws, row, columns, "Workloads", widths)
    _highlight(ws, placed)
    ws.freeze_panes = f"B{placed.first}"
    after = placed.last + 2
    if not plan.unmet_demand.empty:
        put(ws, after, 1, "Unmet demand", font=LABEL_FONT)
        after = write_frame(ws, plan.unmet_demand, after + 1, "UnmetDemand", widths) + 1
    set_widths(ws, widths)
    return placed


def _costs_link(rows: dict[str, int], workload: str) -> str | None:
    return f"Costs!B{rows[workload]}" if workload in rows else None


def _workload_usd(cells: CostCells, table: pd.DataFrame) -> list[float]:
    """Python's value of each workload's cost link (the Costs sheet's by-workload row)."""
    return [cells.workload_usd.get(name, float(reported))
            for name, reported in zip(table["workload"], table["usd_per_month"])]


def _highlight(ws: Worksheet, placed: Placed) -> None:
    """Data bars on utilization; SLO margins red below 0, amber below 10 %, green above."""
    if "utilization" in placed.letters:
        cells = placed.column("utilization").replace("$", "")
        ws.conditional_formatting.add(cells, DataBarRule(start_type="num", start_value=0,
                                                         end_type="num", end_value=1,
                                                         color="5B9BD5"))
    for name in ("tpot_margin", "ttft_margin"):
        if name not in placed.letters:
            continue
        cells = placed.column(name).replace("$", "")
        for operator, formula, color in (("lessThan", ["0"], _RED),
                                         ("between", ["0", "0.1"], _AMBER),
                                         ("greaterThan", ["0.1"], _GREEN)):
            ws.conditional_formatting.add(cells, CellIsRule(
                operator=operator, formula=formula, fill=PatternFill("solid", bgColor=color)))


def summary_sheet(book: Book, ws: Worksheet, plan, cells: CostCells,
                  workloads: Placed | None, price_rule: str = "") -> PageOptions:
    """Scenario, totals, cost per workload and per GPU type (with a chart), what binds and the
    notes, laid out in six columns to print on one page."""
    name = str(plan.scenario.get("name") or "scenario")
    row = title_block(ws, f"Fleet plan: {name}", str(plan.scenario.get("description") or ""))
    note = put(ws, row, 1, REOPTIMIZE_NOTE, font=Font(bold=True, color="7F6000"))
    note.fill = PatternFill("solid", fgColor="FFF2CC")
    note.alignment = Alignment(wrap_text=True, vertical="top")
    ws.merge_cells(start_row=row, start_column=1, end_row=row, end_column=6)
    ws.row_dimensions[row].height = 48
    row = _key_figures(book, ws, plan, cells, row + 2, price_rule)
    row = _workload_block(book, ws, plan, cells, workloads, row + 1)
    row = _gpu_block(book, ws, plan, cells, row + 1)
    row = _constraints_block(ws, plan, row + 1)
    if plan.messages:
        put(ws, row, 1, "Notes", font=LABEL_FONT)
        for offset, message in enumerate(plan.messages, start=1):
            ws.merge_cells(start_row=row + offset, start_column=1, end_row=row + offset,
                           end_column=6)
            wrap(ws, put(ws, row + offset, 1, message), sum(_SUMMARY_WIDTHS.values()))
    set_widths(ws, _SUMMARY_WIDTHS)
    return PageOptions(one_page=True)


def _key_figures(book: Book, ws: Worksheet, plan, cells: CostCells, row: int,
                 price_rule: str) -> int:
    months = plan_quantities.horizon_months(plan)
    monthly = cells.total_usd_per_month
    put(ws, row, 1, "Cost", font=LABEL_FONT)
    put(ws, row, 4, "Solve", font=LABEL_FONT)
    figures = [("Total cost per month", "total_usd_per_month", monthly, plan.usd_per_month),
               ("Total cost per year", f"B{row + 1}*12", monthly * 12, plan.usd_per_month * 12),
               (f"Total over the horizon ({months_text(months)})", f"B{row + 1}*horizon_months",
                monthly * months, plan.objective_usd)]
    for offset, (label, formula, value, reported) in enumerate(figures, start=1):
        put(ws, row + offset, 1, label)
        if math.isfinite(value) and agrees(value, reported):
            book.formulas.put(ws, row + offset, 2, formula, value, USD_WHOLE)
        else:
            put(ws, row + offset, 2, reported, USD_WHOLE)
        ws.cell(row=row + offset, column=2).font = Font(bold=True, size=12)
    gpus = float(plan.costs_by_gpu["gpus_peak"].sum()) if not plan.costs_by_gpu.empty else 0.0
    stay = plan.assumptions.get("stay_the_course") or {}  # a re-planned fleet: see Changes
    sunk = ("Sunk, not in the total (Changes)", stay["sunk_usd_total"],
            USD_WHOLE) if stay else ("", None, None)
    more = [("GPUs at peak", gpus, INTEGER),
            ("First month", cells.month_dates([0])[0], "mmmm yyyy"), sunk]
    for offset, (label, value, number_format) in enumerate(more, start=len(figures) + 1):
        put(ws, row + offset, 1, label)
        put(ws, row + offset, 2, value, number_format)
    status = plan.status
    facts = [("Status", status, None), ("", STATUSES.get(status, ""), None), ("", None, None),
             ("Relative gap", plan.gap, "0.000%"), ("Solver", plan.solver, None),
             ("Solve time (s)", plan.solve_seconds, "0.00")]
    for offset, (label, value, number_format) in enumerate(facts, start=1):
        put(ws, row + offset, 4, label)
        put(ws, row + offset, 5, value, number_format).alignment = Alignment(horizontal="left")
    ws.merge_cells(start_row=row + 2, start_column=5, end_row=row + 3, end_column=6)
    explained = ws.cell(row=row + 2, column=5)
    explained.font, explained.alignment = NOTE_FONT, Alignment(wrap_text=True, vertical="top")
    last = row + len(figures) + len(more)
    if price_rule:
        put(ws, last + 1, 1, "Prices").alignment = Alignment(vertical="top")
        ws.merge_cells(start_row=last + 1, start_column=2, end_row=last + 1, end_column=6)
        wrap(ws, put(ws, last + 1, 2, f"{price_rule} (rows on Assumptions)"), 80)
        last += 1
    return last + 2


def _workload_block(book: Book, ws: Worksheet, plan, cells: CostCells, workloads: Placed | None,
                    row: int) -> int:
    if workloads is None:
        return row
    put(ws, row, 1, "Cost per workload", font=LABEL_FONT)
    table = plan.workloads.reset_index(drop=True)
    usd = _workload_usd(cells, table)
    tokens = table["tokens_per_month"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_token = np.where(tokens > 0, np.array(usd) / (tokens / 1e6), np.nan)
    link = workloads.cell
    columns = [
        LiveColumn("workload", table["workload"].tolist()),
        LiveColumn("model", table["model"].tolist()),
        LiveColumn("usd_per_month", usd, lambda i, r: f"Workloads!{link('usd_per_month', i)}",
                   table["usd_per_month"].tolist(), USD_WHOLE),
        LiveColumn("usd_per_m_tokens", per_token.tolist(),
                   lambda i, r: f"Workloads!{link('usd_per_m_tokens', i)}",
                   table["usd_per_m_tokens"].tolist(), USD_PRECISE),
        LiveColumn("served_fraction", table["served_fraction"].tolist(), number_format=PERCENT),
        LiveColumn("tpot_ms_max", table["tpot_ms_max"].tolist(), number_format=DECIMAL),
    ]
    placed = write_live_table(book, ws, row + 1, columns, "SummaryWorkloads")
    return placed.last + 1


def _gpu_block(book: Book, ws: Worksheet, plan, cells: CostCells, row: int) -> int:
    if cells.by_gpu is None:
        return row
    put(ws, row, 1, "GPUs by type", font=LABEL_FONT)
    by_gpu = plan.costs_by_gpu.set_index("gpu").reindex(list(cells.gpu_rows))
    rows = cells.gpu_rows
    gpus = list(rows)
    python = [cells.gpu_usd[gpu] for gpu in gpus]  # the Costs sheet's by-GPU values
    columns = [LiveColumn("gpu", gpus),
               LiveColumn("gpus_peak", by_gpu["gpus_peak"].tolist(), number_format=INTEGER),
               LiveColumn("usd_per_month", python, lambda i, r: f"Costs!C{rows[gpus[i]]}",
                          by_gpu["usd_per_month"].tolist(), USD_WHOLE)]
    placed = write_live_table(book, ws, row + 1, columns, "SummaryGpus")
    chart = BarChart()
    chart.type = "bar"
    chart.title = "Cost by GPU type (USD/month)"
    chart.x_axis.delete = chart.y_axis.delete = False
    chart.y_axis.numFmt = '"$"#,##0'
    chart.legend = None
    chart.height, chart.width = max(4.5, 0.9 * len(gpus) + 2.5), 22
    chart.add_data(Reference(ws, min_col=3, min_row=placed.first - 1, max_row=placed.last),
                   titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=1, min_row=placed.first, max_row=placed.last))
    ws.add_chart(chart, f"A{placed.last + 2}")
    return placed.last + 2 + chart_rows(chart.height)


def _constraints_block(ws: Worksheet, plan, row: int) -> int:
    binding = plan.binding_constraints
    if binding.empty:
        return row
    put(ws, row, 1, "What limits the plan (binding constraints; savings measured by re-solving)",
        font=LABEL_FONT)
    shown = binding[[c for c in ("saving_usd_per_month", "description") if c in binding]]
    after = write_frame(ws, shown.reset_index(drop=True), row + 1, "BindingConstraints")
    for line in range(row + 2, after):  # descriptions are sentences: let them run across
        ws.cell(row=line, column=2).alignment = Alignment(vertical="top", indent=1)
    return after + 1
