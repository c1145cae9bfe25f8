"""Plan workbook: the Fleet and Costs sheets, every money cell a formula on Assumptions.

Formulas refer to prices through defined names (``price_h100_sxm_on_demand``), to
``hours_per_month`` and ``horizon_months``, and to whole columns through names such as
``usage_usd`` or ``fleet_usd_per_month``. Sums use SUMPRODUCT with exact comparisons, so ids
are never read as SUMIFS wildcards or operators.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from openpyxl.chart import BarChart, Reference
from openpyxl.utils.cell import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports import plan_quantities
from fleetplan.exports.xlsx_common import (
    INTEGER,
    LABEL_FONT,
    NOTE_FONT,
    PERCENT,
    USD,
    USD_WHOLE,
    define_name,
    defined_name,
    put,
    set_widths,
    title_block,
)
from fleetplan.exports.xlsx_live import LiveColumn, Placed, name_range, write_live_table
from fleetplan.exports.xlsx_package import Book
from fleetplan.exports.xlsx_print import PageOptions, chart_rows

MONTH = "mmm yyyy"
_HORIZON_CHART_CM = 8.0


@dataclass
class CostCells:
    """Where the Costs sheet put the numbers other sheets link to."""

    fleet: Placed | None = None
    by_gpu: Placed | None = None
    by_pricing: Placed | None = None
    by_workload: Placed | None = None
    by_month: Placed | None = None
    workload_rows: dict[str, int] = field(default_factory=dict)
    gpu_rows: dict[str, int] = field(default_factory=dict)
    allocation_names: dict[str, str] = field(default_factory=dict)
    total_usd_per_month: float = float("nan")
    start: dt.date = field(default_factory=plan_quantities.first_of_next_month)

    def month_dates(self, months) -> list[dt.date]:
        """Calendar months (their first days) of plan months 0, 1, ..."""
        return [plan_quantities.month_start(self.start, m) for m in months]


def fleet_sheet(book: Book, ws: Worksheet, plan, names: dict[tuple, str]) -> Placed | None:
    """One row per chosen configuration and pricing type; costs are live."""
    row = title_block(ws, "Fleet", "One row per configuration and pricing type chosen. Replica "
                      "counts are the optimizer's decisions; prices and costs are live formulas.")
    fleet = plan.fleet.reset_index(drop=True)
    if fleet.empty:
        put(ws, row, 1, "The plan has no fleet (see Summary for the solver status).",
            font=NOTE_FONT)
        return None
    hpm, months = plan_quantities.hours_per_month(plan), plan_quantities.horizon_months(plan)
    prices = plan_quantities.charged_prices(plan_quantities.price_table(plan))
    keys = list(zip(fleet["gpu"], fleet["pricing_type"]))
    price = np.array([prices.get(k, np.nan) for k in keys], dtype=float)
    hourly_names = [names.get(k) for k in keys]
    monthly = fleet["replicas_mean"].to_numpy(float) * fleet["tp"].to_numpy(float) * price * hpm
    labels = [LiveColumn(c, fleet[c].tolist()) for c in ("config", "pricing_type", "model", "gpu",
                                                         "quant")]
    origin = _price_origin(plan, keys)
    numbers = [LiveColumn("tp", fleet["tp"].tolist(), number_format=INTEGER),
               LiveColumn("replicas_peak", fleet["replicas_peak"].tolist(), number_format=INTEGER),
               LiveColumn("replicas_mean", fleet["replicas_mean"].tolist(),
                          number_format="#,##0.000"),
               LiveColumn("gpus_peak", fleet["gpus_peak"].tolist(), number_format=INTEGER)]
    order = [c.name for c in labels + numbers] + ["usd_per_gpu_hour", "price_from", "usd_per_month",
                                                   "usd_total"]
    at = {name: get_column_letter(i) for i, name in enumerate(order, start=1)}
    money = [
        LiveColumn("usd_per_gpu_hour", price.tolist(), lambda i, r: hourly_names[i],
                   fleet["usd_per_gpu_hour"].tolist(), USD),
        LiveColumn("price_from", origin, header="Price from (provider, as of)"),
        LiveColumn("usd_per_month", monthly.tolist(),
                   lambda i, r: (f"{at['replicas_mean']}{r}*{at['tp']}{r}"
                                 f"*{at['usd_per_gpu_hour']}{r}*hours_per_month"),
                   fleet["usd_per_month"].tolist(), USD_WHOLE),
        LiveColumn("usd_total", (monthly * months).tolist(),
                   lambda i, r: f"{at['usd_per_month']}{r}*horizon_months",
                   fleet["usd_total"].tolist(), USD_WHOLE),
    ]
    sureness = [LiveColumn(c, fleet[c].tolist(), number_format=None if c == "calibration" else "0.0")
                for c in ("calibration", "error_p10_pct", "error_p90_pct") if c in fleet]
    widths: dict[int, float] = {}
    placed = write_live_table(book, ws, row, labels + numbers + money + sureness, "Fleet", widths)
    for column in ("gpu", "pricing_type", "usd_per_month", "gpus_peak"):
        name_range(book, ws, f"fleet_{column}", placed, column)
    total_row = placed.last + 1
    put(ws, total_row, 1, "Total", font=LABEL_FONT)
    # the totals' stored values add up what the rows show: the plan's figure where a formula
    # disagreed with it and the cell kept the plan's number
    totals = (("gpus_peak", fleet["gpus_peak"].to_numpy(float), INTEGER),
              ("usd_per_month", fleet["usd_per_month"].to_numpy(float), USD_WHOLE),
              ("usd_total", fleet["usd_total"].to_numpy(float), USD_WHOLE))
    for name, values, number_format in totals:
        book.formulas.put(ws, total_row, order.index(name) + 1, f"SUM({placed.column(name)})",
                          float(np.nansum(values)), number_format)
    widths[1] = max(widths.get(1, 0), 34)
    set_widths(ws, widths)
    ws.freeze_panes = f"B{placed.first}"
    return placed


def _price_origin(plan, keys: list[tuple]) -> list[str]:
    """Per fleet row, where its price came from: ``nebius eu-north1, 2026-11-22``."""
    prices = plan_quantities.price_table(plan).set_index(["gpu", "pricing_type"])
    texts = []
    for key in keys:
        if key not in prices.index:
            texts.append("")
            continue
        row = prices.loc[key]
        if row.get("origin") == "scenario":
            texts.append("the scenario's own price")
            continue
        where = " ".join(str(row.get(c) or "") for c in ("provider", "region")).strip()
        mine = " (your file)" if row.get("origin") == "your file" else ""
        texts.append(f"{where}{mine}, {row.get('as_of') or 'no date'}")
    return texts


def costs_sheet(book: Book, ws: Worksheet, plan, cells: CostCells,
                names: dict[tuple, str]) -> PageOptions:
    """Costs by GPU type, pricing type, workload and month, from the usage table below them.
    The printout ends with the chart: the working tables stay in the file."""
    row = title_block(ws, "Costs", "Live totals: every figure is computed from the GPU usage and "
                      "the prices on Assumptions (working tables below the chart, not printed).")
    usage = plan_quantities.usage_table(plan)
    if usage.empty:
        put(ws, row, 1, "The plan bought no GPUs.", font=NOTE_FONT)
        return PageOptions()
    prices = plan_quantities.price_table(plan)
    hpm, months = plan_quantities.hours_per_month(plan), plan_quantities.horizon_months(plan)
    usage = usage.assign(usd=plan_quantities.usage_usd(usage, prices, hpm))
    widths: dict[int, float] = {1: 30}
    workloads = [] if plan.workloads.empty else list(plan.workloads["workload"])
    cells.allocation_names = allocation_names(workloads)
    for section in (_by_gpu, _by_pricing, _by_workload, _by_month):
        row = section(book, ws, plan, usage, months, row, widths, cells) + 2
    printed = row - 2
    _usage_and_allocation(book, ws, plan, usage, row, widths, cells, names)
    set_widths(ws, widths)
    return PageOptions(one_page=True, area=f"A1:F{printed}")


def _section(ws: Worksheet, row: int, title: str) -> int:
    put(ws, row, 1, title, font=LABEL_FONT)
    return row + 1


def _by_gpu(book, ws, plan, usage, months, row, widths, cells: CostCells) -> int:
    row = _section(ws, row, "Cost by GPU type")
    expected = plan.costs_by_gpu.set_index("gpu") if not plan.costs_by_gpu.empty else None
    table = usage.groupby("gpu", sort=True)["usd"].sum().rename("usd_total").reset_index()
    table["usd_per_month"] = table["usd_total"] / months
    fleet = plan.fleet.groupby("gpu")["usd_per_month"].sum()
    busy = fleet.reindex(table["gpu"]).fillna(0.0).to_numpy()
    # below a micro-dollar the difference of two equal sums is floating-point noise, which
    # spreadsheets snap to zero: both sides call it zero
    idle = table["usd_per_month"].to_numpy() - busy
    table["idle_usd_per_month"] = np.where(np.abs(idle) < 1e-6, 0.0, np.maximum(0.0, idle))
    peak = _expected(expected, table["gpu"], "gpus_peak")
    columns = [
        LiveColumn("gpu", table["gpu"].tolist()),
        LiveColumn("gpus_peak", peak, number_format=INTEGER),
        LiveColumn("usd_per_month", table["usd_per_month"].tolist(),
                   lambda i, r: f"SUMPRODUCT((usage_gpu=A{r})*usage_usd)/horizon_months",
                   _expected(expected, table["gpu"], "usd_per_month"), USD_WHOLE),
        LiveColumn("idle_usd_per_month", table["idle_usd_per_month"].tolist(),
                   lambda i, r: _idle_formula(r),
                   _expected(expected, table["gpu"], "idle_usd_per_month"), USD_WHOLE),
        LiveColumn("usd_total", (table["usd_per_month"] * months).tolist(),
                   lambda i, r: f"C{r}*horizon_months",
                   _expected(expected, table["gpu"], "usd_total"), USD_WHOLE),
    ]
    cells.by_gpu = write_live_table(book, ws, row, columns, "CostsByGpu", widths)
    cells.gpu_rows = {g: cells.by_gpu.first + i for i, g in enumerate(table["gpu"])}
    return cells.by_gpu.last


def _idle_formula(row: int) -> str:
    difference = f"C{row}-SUMPRODUCT((fleet_gpu=A{row})*fleet_usd_per_month)"
    return f"IF(ABS({difference})<0.000001,0,MAX(0,{difference}))"


def _by_pricing(book, ws, plan, usage, months, row, widths, cells: CostCells) -> int:
    row = _section(ws, row, "Cost by pricing type")
    expected = (plan.costs_by_pricing.set_index("pricing_type")
                if not plan.costs_by_pricing.empty else None)
    table = usage.groupby("pricing_type", sort=True)["usd"].sum().rename("usd_total").reset_index()
    total = float(table["usd_total"].sum())
    cells.total_usd_per_month = total / months
    n = len(table)
    first = row + 1
    shares = (table["usd_total"] / (total or 1.0)).tolist()
    columns = [
        LiveColumn("pricing_type", table["pricing_type"].tolist()),
        LiveColumn("gpus_peak", _expected(expected, table["pricing_type"], "gpus_peak"),
                   number_format=INTEGER),
        LiveColumn("usd_per_month", (table["usd_total"] / months).tolist(),
                   lambda i, r: f"SUMPRODUCT((usage_pricing_type=A{r})*usage_usd)/horizon_months",
                   _expected(expected, table["pricing_type"], "usd_per_month"), USD_WHOLE),
        LiveColumn("usd_total", table["usd_total"].tolist(), lambda i, r: f"C{r}*horizon_months",
                   _expected(expected, table["pricing_type"], "usd_total"), USD_WHOLE),
        LiveColumn("share", shares, lambda i, r: f"D{r}/SUM($D${first}:$D${first + n - 1})",
                   _expected(expected, table["pricing_type"], "share"), PERCENT),
    ]
    cells.by_pricing = write_live_table(book, ws, row, columns, "CostsByPricing", widths)
    name_range(book, ws, "total_usd_per_month_by_pricing", cells.by_pricing, "usd_per_month")
    return _fixed_cost_line(ws, plan, months, cells.by_pricing.last)


def _fixed_cost_line(ws: Worksheet, plan, months: float, row: int) -> int:
    """The fixed cost per configuration below the pricing types, as numbers with a note."""
    fixed = plan.config_fixed_costs
    if fixed.empty:
        return row
    total = float(fixed["usd"].sum())
    put(ws, row + 1, 1, "config_fixed")
    put(ws, row + 1, 3, total / months, USD_WHOLE)
    put(ws, row + 1, 4, total, USD_WHOLE)
    put(ws, row + 1, 5, total / plan.objective_usd if plan.objective_usd else 0.0, PERCENT)
    put(ws, row + 2, 1, f"Fixed cost per configuration: {fixed['month_weight'].sum():g} "
        "configuration-months; a number, not a live formula (it counts the months each "
        "configuration runs); the totals on Summary include it.", font=NOTE_FONT)
    return row + 2


def _by_workload(book, ws, plan, usage, months, row, widths, cells: CostCells) -> int:
    row = _section(ws, row, "Cost by workload (a configuration's cost split by load share)")
    costs = plan.costs_by_workload.reset_index(drop=True)
    if costs.empty:
        put(ws, row, 1, "No workload was served.", font=NOTE_FONT)
        return row
    allocation = plan_quantities.allocation_table(plan)
    fleet_usd = plan.fleet["usd_per_month"].to_numpy(float) if not plan.fleet.empty else np.zeros(0)
    fleet_total, bought_total = float(fleet_usd.sum()), float(usage["usd"].sum()) / months
    python, formulas = [], []
    for name in costs["workload"]:
        if name in allocation.columns:
            python.append(float(allocation[name].to_numpy(float) @ fleet_usd))
            formulas.append(f"SUMPRODUCT(allocation_usd_per_month,{cells.allocation_names[name]})")
        elif name == "(spare)":
            python.append(fleet_total - sum(python))
            formulas.append(None)
        else:  # idle GPUs of whole nodes
            python.append(bought_total - fleet_total)
            formulas.append("total_usd_per_month-SUM(fleet_usd_per_month)")
    first = row + 1
    n = len(costs)
    spare = [i for i, f in enumerate(formulas) if f is None]
    workload_rows = [first + i for i, name in enumerate(costs["workload"])
                     if name in allocation.columns]
    for i in spare:
        workload_sum = "+".join(f"B{r}" for r in workload_rows) or "0"
        formulas[i] = f"SUM(fleet_usd_per_month)-({workload_sum})"
    total = sum(python) or 1.0
    columns = [
        LiveColumn("workload", costs["workload"].tolist()),
        LiveColumn("usd_per_month", python, lambda i, r: formulas[i],
                   costs["usd_per_month"].tolist(), USD_WHOLE),
        LiveColumn("usd_total", [v * months for v in python], lambda i, r: f"B{r}*horizon_months",
                   costs["usd_total"].tolist(), USD_WHOLE),
        LiveColumn("share", [v / total for v in python],
                   lambda i, r: f"C{r}/SUM($C${first}:$C${first + n - 1})",
                   costs["share"].tolist(), PERCENT),
    ]
    cells.by_workload = write_live_table(book, ws, row, columns, "CostsByWorkload", widths)
    cells.workload_rows = {w: first + i for i, w in enumerate(costs["workload"])}
    return cells.by_workload.last


def _by_month(book, ws, plan, usage, months, row, widths, cells: CostCells) -> int:
    row = _section(ws, row, "Cost by month over the horizon")
    expected = plan.costs_by_month.set_index("month") if not plan.costs_by_month.empty else None
    month = usage.groupby("month", sort=True)
    table = month["usd"].sum().rename("usd").reset_index()
    parts = {"reserved_usd": plan_quantities.RESERVED, "on_demand_usd": ("on_demand",),
             "spot_usd": ("spot",)}
    columns = [LiveColumn("month", cells.month_dates(table["month"]), number_format=MONTH),
               LiveColumn("usd", table["usd"].tolist(),
                          lambda i, r: f"SUMPRODUCT((usage_month=A{r})*usage_usd)",
                          _expected(expected, table["month"], "usd"), USD_WHOLE)]
    for name, kinds in parts.items():
        chosen = usage[usage["pricing_type"].isin(kinds)].groupby("month")["usd"].sum()
        values = chosen.reindex(table["month"]).fillna(0.0).tolist()
        test = "+".join(f'(usage_pricing_type="{k}")' for k in kinds)
        columns.append(LiveColumn(
            name, values, lambda i, r, t=test: f"SUMPRODUCT((usage_month=A{r})*({t})*usage_usd)",
            _expected(expected, table["month"], name), USD_WHOLE))
    cells.by_month = write_live_table(book, ws, row, columns, "CostsByMonth", widths)
    _horizon_chart(ws, cells.by_month)
    return cells.by_month.last + chart_rows(_HORIZON_CHART_CM) + 2


def _horizon_chart(ws: Worksheet, placed: Placed) -> None:
    chart = BarChart()
    chart.type, chart.grouping, chart.overlap = "col", "stacked", 100
    chart.title = "Cost over the horizon by pricing type (USD/month)"
    chart.y_axis.title, chart.x_axis.title = "USD per month", "month"
    chart.y_axis.numFmt, chart.x_axis.number_format = '"$"#,##0', "mmm yy"
    chart.x_axis.delete = chart.y_axis.delete = False
    chart.height, chart.width = _HORIZON_CHART_CM, 18
    first, last = placed.first, placed.last
    data = Reference(ws, min_col=3, max_col=5, min_row=first - 1, max_row=last)
    chart.add_data(data, titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=1, min_row=first, max_row=last))
    ws.add_chart(chart, f"A{last + 2}")


def _usage_and_allocation(book, ws, plan, usage, row, widths, cells: CostCells,
                          price_names: dict[tuple, str]) -> None:
    put(ws, row, 1, "Working tables: mean GPUs bought per month (decided by the optimizer) and "
        "each workload's share of every fleet row's cost.", font=NOTE_FONT)
    keys = list(zip(usage["gpu"], usage["pricing_type"]))
    names = [price_names.get(k) for k in keys]
    columns = [LiveColumn("month", cells.month_dates(usage["month"]), number_format=MONTH),
               LiveColumn("gpu", usage["gpu"].tolist()),
               LiveColumn("pricing_type", usage["pricing_type"].tolist()),
               LiveColumn("gpus_mean", usage["gpus_mean"].tolist(), number_format="#,##0.0000"),
               LiveColumn("usd", usage["usd"].tolist(),
                          lambda i, r: f"D{r}*{names[i]}*hours_per_month", None, USD_WHOLE)]
    placed = write_live_table(book, ws, row + 1, columns, "Usage", widths)
    for column, name in (("month", "usage_month"), ("gpu", "usage_gpu"),
                         ("pricing_type", "usage_pricing_type"), ("usd", "usage_usd")):
        name_range(book, ws, name, placed, column)
    book.formulas.put(ws, placed.last + 1, 5, "SUM(usage_usd)/horizon_months",
                      float(usage["usd"].sum()) / plan_quantities.horizon_months(plan), USD_WHOLE)
    put(ws, placed.last + 1, 4, "USD/month", font=LABEL_FONT)
    define_name(book.wb, "total_usd_per_month", ws, f"E{placed.last + 1}")
    _allocation(book, ws, plan, placed.last + 3, widths, cells)


def _allocation(book, ws, plan, row, widths, cells: CostCells) -> None:
    allocation = plan_quantities.allocation_table(plan)
    if plan.fleet.empty or cells.fleet is None:
        return
    fleet_rows = cells.fleet
    monthly = plan.fleet["usd_per_month"].tolist()
    columns = [LiveColumn("config", allocation["config"].tolist()),
               LiveColumn("pricing_type", allocation["pricing_type"].tolist()),
               LiveColumn("usd_per_month", monthly,
                          lambda i, r: f"Fleet!{fleet_rows.cell('usd_per_month', i)}", monthly,
                          USD_WHOLE)]
    workloads = [c for c in allocation.columns if c not in ("config", "pricing_type")]
    for name in workloads:
        columns.append(LiveColumn(name, allocation[name].tolist(), number_format=PERCENT,
                                  header=f"share {name} (fraction)"))
    placed = write_live_table(book, ws, row, columns, "Allocation", widths)
    name_range(book, ws, "allocation_usd_per_month", placed, "usd_per_month")
    for name in workloads:
        name_range(book, ws, cells.allocation_names[name], placed, name)


def allocation_names(workloads) -> dict[str, str]:
    """A unique defined name per workload's allocation column."""
    taken = {"allocation_usd_per_month"}  # the range name of the cost column
    return {w: defined_name("allocation", w, taken=taken) for w in workloads}


def _expected(expected: pd.DataFrame | None, keys: pd.Series, column: str) -> list:
    if expected is None or column not in expected.columns:
        return [np.nan] * len(keys)
    return expected[column].reindex(list(keys)).tolist()

