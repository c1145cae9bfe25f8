"""The what-if workbook: every scenario of a grid, how each input moves the cost, and where the
numbers come from.

Sheets: Summary (one page: the grid at a glance, the cheapest and dearest scenarios, and a
tornado chart when the grid varies one input at a time), Scenarios (one row per scenario, from
A1 so it reads back as a plain table), a ``By <axis>`` sheet per axis (mean, min and max cost at
each value; a line chart for a numeric axis, a bar chart for named alternatives), the base
plan's fleet, Sources and Read me. Every number has a number format.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from openpyxl.chart import BarChart, Reference, ScatterChart, Series
from openpyxl.chart.marker import Marker

from fleetplan.exports.labels import label_of
from fleetplan.exports.provenance import provenance
from fleetplan.exports.sanitize import sheet_name
from fleetplan.exports.xlsx_common import LABEL_FONT, NOTE_FONT, put, set_widths, title_block, wrap
from fleetplan.exports.xlsx_package import Book, set_properties
from fleetplan.exports.xlsx_print import PageOptions, PrintHeader, chart_rows
from fleetplan.exports.xlsx_sheets import write_frame
from fleetplan.exports.xlsx_sources import catalog_rows, readme_sheet, sources_sheet

SOLVED = ("optimal", "time_limit")
OUTPUTS = ("usd_per_month", "usd_per_m_tokens", "gpus_peak")
FORMATS = {"usd_per_month": '"$"#,##0', "usd_per_year": '"$"#,##0', "usd_per_m_tokens": '"$"#,##0.0000',
           "gap": "0.00%", "served_fraction_min": "0.0%", "solve_seconds": "0.0", "scenarios": "#,##0",
           "usd_per_month_mean": '"$"#,##0', "usd_per_month_min": '"$"#,##0', "usd_per_month_max": '"$"#,##0',
           "usd_per_m_tokens_mean": '"$"#,##0.0000', "usd_per_m_tokens_min": '"$"#,##0.0000',
           "usd_per_m_tokens_max": '"$"#,##0.0000', "low_usd_per_month": '"$"#,##0',
           "high_usd_per_month": '"$"#,##0', "swing_usd_per_month": '"$"#,##0'}
_CHART_CM = 8.0


def pivots(results: pd.DataFrame, axes: Sequence[str],
           base_values: Mapping[str, float] | None = None) -> dict[str, pd.DataFrame]:
    """Per axis: scenarios solved, and mean, min and max of the outputs at each axis value
    (numeric values in ascending order, named ones as they first appear).

    ``base_values`` (the base scenario's value on an axis, ``whatif_grid.base_axis_values``)
    count the grid's base cases, the solved rows that change no input, at that value;
    ``includes_base`` says which value holds them."""
    solved = results[results["status"].isin(SOLVED)]
    solved = solved.reindex(columns=list(dict.fromkeys([*solved.columns, *axes])))
    unchanged = solved[solved[list(axes)].isna().all(axis=1)] if len(axes) else solved.iloc[0:0]
    tables = {}
    for axis in axes:
        rows = solved[solved[axis].notna()].assign(includes_base=False)
        if axis in (base_values or {}) and len(unchanged):
            at_base = unchanged.assign(**{axis: base_values[axis], "includes_base": True})
            rows = pd.concat([rows, at_base])
        keys = pd.to_numeric(rows[axis], errors="coerce")
        numeric = len(rows) > 0 and bool(keys.notna().all())
        grouped = rows.groupby(keys if numeric else rows[axis].astype(str), sort=numeric)
        table = grouped[list(OUTPUTS)].agg(["mean", "min", "max"])
        table.columns = [f"{column}_{stat}" for column, stat in table.columns]
        table.insert(0, "scenarios", grouped.size())
        table["includes_base"] = grouped["includes_base"].any()
        tables[axis] = table.rename_axis(axis).reset_index()
    return tables


def inputs_first(results: pd.DataFrame, axes: Sequence[str]) -> pd.DataFrame:
    """The result rows with each case's name and inputs (the axes) before its outputs, and its
    ``case_id`` (the key of its saved result) last: a grid that lists a case changing no input
    first had that row alone set the order."""
    leading = [c for c in ("name", *axes) if c in results]
    trailing = [c for c in ("case_id",) if c in results and c not in leading]
    middle = [c for c in results.columns if c not in leading and c not in trailing]
    return results[leading + middle + trailing]


def one_at_a_time(results: pd.DataFrame, axes: Sequence[str]) -> bool:
    """True when every scenario sets at most one input and at least two inputs are varied."""
    if not axes:
        return False
    changed = results[list(axes)].notna().sum(axis=1)
    return bool((changed <= 1).all()) and int((results[list(axes)].notna().sum() > 0).sum()) >= 2


def tornado_table(results: pd.DataFrame, axes: Sequence[str], base_usd_per_month: float) -> pd.DataFrame:
    """Per input: the lowest and highest cost change against the base, largest swing first
    [USD/month]."""
    solved = results[results["status"].isin(SOLVED)]
    rows = []
    for axis in axes:
        varied = solved[solved[axis].notna()]
        if varied.empty:
            continue
        cost = varied["usd_per_month"].to_numpy(dtype=float) - base_usd_per_month
        values = [f"{v:,g}" if isinstance(v, (int, float)) else str(v) for v in varied[axis].tolist()]
        low, high = int(np.argmin(cost)), int(np.argmax(cost))
        rows.append({"input": f"{label_of(axis)}: {values[low]} to {values[high]}",
                     "low_usd_per_month": min(cost[low], 0.0), "high_usd_per_month": max(cost[high], 0.0),
                     "swing_usd_per_month": float(cost[high] - cost[low])})
    table = pd.DataFrame(rows, columns=["input", "low_usd_per_month", "high_usd_per_month", "swing_usd_per_month"])
    return table.sort_values("swing_usd_per_month", kind="stable").reset_index(drop=True)


def write_grid_xlsx(results: pd.DataFrame, path: str | Path, *, axes: Sequence[str],
                    base_fleet: pd.DataFrame | None, metadata: Mapping[str, Any],
                    base_usd_per_month: float | None = None, catalogs: Any = None,
                    prices_used: list | None = None, base_values: Mapping[str, float] | None = None,
                    engine: str | None = None, ids: Mapping[str, Sequence[str]] | None = None) -> Path:
    """Write the what-if workbook (see module doc); returns ``path``.

    ``base_values`` place the base case on the By sheets (:func:`pivots`); ``engine`` (the
    engine every case ran, None when the grid varies it) limits Sources to its efficiency rows;
    ``ids`` (model and quant ids of the workloads) and the GPUs of :func:`grid_gpus` choose the
    catalog rows Sources lists.
    """
    name = str(metadata.get("base", "grid"))
    book = Book(header=PrintHeader(f"What-if grid: {name}"))
    wb = book.wb
    wb.active.title = "Summary"
    scenarios = wb.create_sheet("Scenarios")
    widths: dict[int, float] = {}
    write_frame(scenarios, inputs_first(results, axes), 1, "Scenarios", widths, formats=FORMATS)
    set_widths(scenarios, widths)
    scenarios.freeze_panes = "B2"
    taken = {"Summary", "Scenarios"}
    for axis, table in pivots(results, axes, base_values).items():
        sheet = wb.create_sheet(_sheet_name(f"By {axis}", taken))
        book.pages[sheet.title] = _axis_sheet(sheet, axis, table)
    if base_fleet is not None:
        fleet_sheet = wb.create_sheet(_sheet_name("Base plan fleet", taken))
        widths = {}
        write_frame(fleet_sheet, base_fleet.reset_index(drop=True), 1, "Base_fleet", widths)
        set_widths(fleet_sheet, widths)
    book.pages["Summary"] = _summary(wb["Summary"], results, axes, base_usd_per_month, name)
    record = provenance("whatif", {**metadata, "prices_used": prices_used or []}, catalogs=catalogs)
    sources = wb.create_sheet(_sheet_name("Sources", taken))
    book.pages[sources.title] = sources_sheet(sources, record, _grid_rows(
        catalogs, {**(ids or {}), "gpu": grid_gpus(results, base_fleet)}, prices_used, engine))
    readme = wb.create_sheet(_sheet_name("Read me", taken))
    book.pages[readme.title] = readme_sheet(readme, "fleetplan what-if grid", "Scenario variants of one base "
                                            "scenario, each solved for its cheapest fleet.", _sheet_notes(axes),
                                            _HOW_TO, record)
    set_properties(wb, f"fleetplan what-if: {name}", f"{len(results)} scenarios", "fleetplan, what-if, GPU fleet")
    return book.save(path)


def grid_gpus(results: pd.DataFrame, base_fleet: pd.DataFrame | None) -> list[str]:
    """The GPUs some case's plan runs at its peak (a ``gpus_<id>`` column above 0) or the base
    plan's fleet holds: those whose catalog and price rows the grid's costs rest on."""
    used = [column[len("gpus_"):] for column in results.columns
            if column.startswith("gpus_") and column != "gpus_peak"
            and bool((pd.to_numeric(results[column], errors="coerce") > 0).any())]
    if base_fleet is not None and "gpu" in base_fleet:
        used += base_fleet["gpu"].dropna().astype(str).tolist()
    return sorted(set(used))


def _grid_rows(catalogs: Any, ids: Mapping[str, Sequence[str]], prices_used: list | None,
               engine: str | None) -> pd.DataFrame:
    """Sources' catalog rows: the base plan's price rows, and every price row of a GPU that only
    other cases run (their plans' price choices are not kept)."""
    rows = catalog_rows(catalogs, ids, prices=prices_used, engine=engine)
    priced = {str(p.get("gpu")) for p in prices_used or []}
    others = [g for g in ids["gpu"] if g not in priced]
    if prices_used is None or not others:
        return rows
    extra = catalog_rows(catalogs, {"gpu": others})
    return pd.concat([rows, extra[extra["catalog"] == "prices"]], ignore_index=True)


_HOW_TO = ("Each row of Scenarios is a full optimization of the base scenario with that row's inputs "
           "changed; costs are the optimizer's results (not formulas).",
           "Status other than optimal or time_limit means the scenario could not be served; its reason "
           "is in the Reason column and it is left out of the By sheets and charts.")


def _sheet_notes(axes: Sequence[str]) -> list[tuple[str, str]]:
    return [("Summary", "The grid at a glance: cheapest and dearest scenarios, and how far each input "
             "moves the monthly cost (tornado chart, when inputs are varied one at a time)."),
            ("Scenarios", "One row per scenario: its inputs, status, cost per month and year, cost per "
             "1M tokens, GPUs at peak, GPUs by type."),
            *((f"By {axis}", f"Mean, lowest and highest cost at each value of {label_of(axis)}.") for axis in axes),
            ("Base plan fleet", "The fleet of the base scenario; its full plan workbook is written beside this file."),
            ("Sources", "fleetplan version, the price rule, the catalog rows and prices used, and the grid's settings.")]


def _sheet_name(text: str, taken: set[str]) -> str:
    return sheet_name(text, taken)


def _numeric(values: pd.Series) -> bool:
    return bool(pd.to_numeric(values, errors="coerce").notna().all())


def _axis_sheet(ws, axis: str, table: pd.DataFrame) -> PageOptions:
    """The pivot of one axis and its chart: a line over a numeric axis, bars over named values."""
    note = "Mean, lowest and highest over the solved scenarios at each value."
    at_base = table.loc[table["includes_base"], axis] if "includes_base" in table else ()
    if len(at_base):
        note += f" The base scenario, which changes no input, is counted at {at_base.iloc[0]:,g}."
    row = title_block(ws, f"Cost by {label_of(axis)}", note)
    numeric = len(table) > 0 and _numeric(table[axis])
    shown = table.assign(**{axis: pd.to_numeric(table[axis])}) if numeric else table
    widths: dict[int, float] = {}
    after = write_frame(ws, shown, row, f"By_{re.sub(r'[^A-Za-z0-9]', '_', axis)}", widths, formats=FORMATS)
    set_widths(ws, widths)
    if table.empty:
        return PageOptions(one_page=True)
    first, last = row + 1, row + len(table)
    cost_column = list(table.columns).index("usd_per_month_mean") + 1
    chart = _line_chart(ws, first, last, cost_column, axis) if numeric else _bar_chart(ws, first, last, cost_column, axis)
    ws.add_chart(chart, f"A{after + 1}")
    return PageOptions(one_page=True)


def _line_chart(ws, first: int, last: int, column: int, axis: str) -> ScatterChart:
    chart = ScatterChart()
    chart.title = f"Mean cost vs {label_of(axis)}"
    chart.style = 13
    series = Series(Reference(ws, min_col=column, min_row=first, max_row=last),
                    Reference(ws, min_col=1, min_row=first, max_row=last), title="Mean cost (USD/month)")
    series.marker = Marker(symbol="circle", size=7)
    chart.series.append(series)
    return _axes(chart, axis)


def _bar_chart(ws, first: int, last: int, column: int, axis: str) -> BarChart:
    chart = BarChart()
    chart.type = "col"
    chart.title = f"Mean cost by {label_of(axis)}"
    chart.add_data(Reference(ws, min_col=column, min_row=first - 1, max_row=last), titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=1, min_row=first, max_row=last))
    chart.legend = None
    return _axes(chart, axis)


def _axes(chart, axis: str):
    chart.y_axis.title, chart.x_axis.title = "USD per month", label_of(axis)
    chart.y_axis.numFmt = '"$"#,##0'
    chart.x_axis.delete = chart.y_axis.delete = False
    chart.height, chart.width = _CHART_CM, 16
    return chart


def _summary(ws, results: pd.DataFrame, axes: Sequence[str], base: float | None, name: str) -> PageOptions:
    row = title_block(ws, f"What-if grid: {name}", f"{len(results):,} scenarios of the base scenario, each "
                      "solved for its cheapest fleet.")
    solved = results[results["status"].isin(SOLVED)]
    facts = [("Scenarios", len(results), "#,##0"), ("Solved", len(solved), "#,##0"),
             ("Not served or failed", len(results) - len(solved), "#,##0")]
    if base is not None and math.isfinite(base):
        facts.append(("Base scenario cost (USD/month)", base, '"$"#,##0'))
    for label, value, number_format in facts:
        put(ws, row, 1, label, font=LABEL_FONT)
        put(ws, row, 2, value, number_format)
        row += 1
    if not solved.empty:
        row += 1
        extremes = pd.concat([solved.nsmallest(3, "usd_per_month"), solved.nlargest(3, "usd_per_month")])
        put(ws, row, 1, "Cheapest and dearest scenarios", font=LABEL_FONT)
        columns = [c for c in ("name", *axes, "usd_per_month", "usd_per_m_tokens", "gpus_peak") if c in extremes]
        row = write_frame(ws, extremes[columns].drop_duplicates().reset_index(drop=True), row + 1, "Extremes",
                          formats=FORMATS) + 1
    if base is not None and math.isfinite(base) and one_at_a_time(results, axes):
        row = _tornado(ws, tornado_table(results, axes, base), row)
    elif axes:
        put(ws, row, 1, "Each By sheet charts the cost against one input.", font=NOTE_FONT)
    set_widths(ws, {1: 34, **{c: 16 for c in range(2, len(axes) + 5)}})
    return PageOptions(one_page=True)


def _tornado(ws, table: pd.DataFrame, row: int) -> int:
    """The cost change each input causes, lowest and highest, as horizontal bars around zero."""
    put(ws, row, 1, "Sensitivity: change of the monthly cost against the base scenario", font=LABEL_FONT)
    after = write_frame(ws, table, row + 1, "Tornado", formats=FORMATS)
    for line in range(row + 2, after):
        wrap(ws, ws.cell(row=line, column=1), 34)
    chart = BarChart()
    chart.type, chart.grouping, chart.overlap, chart.gapWidth = "bar", "clustered", 100, 40
    chart.title = "Tornado: cost change per input (USD/month)"
    for column in (2, 3):
        chart.add_data(Reference(ws, min_col=column, min_row=row + 1, max_row=after - 1), titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=1, min_row=row + 2, max_row=after - 1))
    chart.x_axis.delete = chart.y_axis.delete = False
    chart.x_axis.tickLblPos = "low"  # input names left of the bars, not on the zero line
    chart.y_axis.numFmt = '"$"#,##0'
    chart.legend.position = "b"
    chart.height, chart.width = max(6.0, 1.2 * len(table) + 3), 20
    ws.add_chart(chart, f"A{after + 1}")
    return after + 2 + chart_rows(chart.height)
