"""Plan workbook: the Costs sheet, every money cell a formula on Assumptions.

Costs by GPU type, pricing type, workload and month sum working tables below the chart: the
GPUs bought per month (``usage_usd``), each workload's share of every Fleet row, and the costs
beyond GPUs (``plan_costs_beyond_gpus.py``: ``api_usd``, ``fixed_usd``). Formulas refer to
prices through defined names (``price_h100_sxm_on_demand``), to ``hours_per_month`` and
``horizon_months``, and to whole columns through names such as ``usage_usd`` or
``fleet_usd_per_month``. Sums use SUMPRODUCT with exact comparisons, so ids
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
from fleetplan.exports.plan_costs_beyond_gpus import SPARE, BeyondGpus, write_beyond_tables
from fleetplan.exports.xlsx_common import (
    INTEGER,
    LABEL_FONT,
    NOTE_FONT,
    PERCENT,
    USD_WHOLE,
    define_name,
    defined_name,
    put,
    set_widths,
    title_block,
)
from fleetplan.exports.xlsx_live import LiveColumn, Placed, agrees, name_range, write_live_table
from fleetplan.exports.xlsx_package import Book
from fleetplan.exports.xlsx_print import PageOptions, chart_rows

MONTH = "mmm yyyy"
#: The row of the cost by workload for GPUs of whole nodes no replica uses.
IDLE = "(idle node GPUs)"
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
    workload_usd: dict[str, float] = field(default_factory=dict)
    gpu_usd: dict[str, float] = field(default_factory=dict)
    beyond: BeyondGpus | None = None
    start: dt.date = field(default_factory=plan_quantities.first_of_next_month)

    def month_dates(self, months) -> list[dt.date]:
        """Calendar months (their first days) of plan months 0, 1, ..."""
        return [plan_quantities.month_start(self.start, m) for m in months]


def costs_sheet(book: Book, ws: Worksheet, plan, cells: CostCells,
                names: dict[tuple, str]) -> PageOptions:
    """Costs by GPU type, pricing type, workload and month, from the usage table below them.
    The printout ends with the chart: the working tables stay in the file."""
    row = title_block(ws, "Costs", "Live totals: every figure is computed from the GPU usage and "
                      "the prices on Assumptions (working tables below the chart, not printed).")
    usage = plan_quantities.usage_table(plan)
    cells.beyond = BeyondGpus.of(plan, names)
    if usage.empty and not cells.beyond.parts():
        put(ws, row, 1, "The plan bought no GPUs.", font=NOTE_FONT)
        return PageOptions()
    prices = plan_quantities.price_table(plan)
    hpm, months = plan_quantities.hours_per_month(plan), plan_quantities.horizon_months(plan)
    usage = usage.assign(usd=plan_quantities.usage_usd(usage, prices, hpm))
    widths: dict[int, float] = {1: 30}
    workloads = [] if plan.workloads.empty else list(plan.workloads["workload"])
    cells.allocation_names = allocation_names(workloads)
    sections = (_by_gpu,) * (not usage.empty) + (_by_pricing, _by_workload, _by_month)
    for section in sections:
        row = section(book, ws, plan, usage, months, row, widths, cells) + 2
    printed = row - 2
    row = _usage_and_allocation(book, ws, plan, usage, row, widths, cells, names)
    row = write_beyond_tables(book, ws, row, cells.beyond, cells.month_dates, widths)
    _total_line(book, ws, plan, usage, row, cells)
    set_widths(ws, widths)
    # the month table grows a column per cost beyond GPUs: print to its last one
    last = max([6, *(len(p.letters) for p in (cells.by_month, cells.by_pricing) if p)])
    return PageOptions(one_page=True, area=f"A1:{get_column_letter(last)}{printed}")


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
    cells.gpu_usd = dict(zip(table["gpu"], table["usd_per_month"], strict=True))
    return cells.by_gpu.last


def _idle_formula(row: int) -> str:
    difference = f"C{row}-SUMPRODUCT((fleet_gpu=A{row})*fleet_usd_per_month)"
    return f"IF(ABS({difference})<0.000001,0,MAX(0,{difference}))"


def _by_pricing(book, ws, plan, usage, months, row, widths, cells: CostCells) -> int:
    row = _section(ws, row, "Cost by pricing type")
    expected = (plan.costs_by_pricing.set_index("pricing_type")
                if not plan.costs_by_pricing.empty else None)
    table = usage.groupby("pricing_type", sort=True)["usd"].sum().rename("usd_total").reset_index()
    formulas = ["SUMPRODUCT((usage_pricing_type=A{r})*usage_usd)/horizon_months"] * len(table)
    for kind, prefix, part in cells.beyond.parts():  # hosted APIs, fixed cost per configuration
        table.loc[len(table)] = [kind, float(part["usd"].sum())]
        formulas.append(f"SUM({prefix}_usd)/horizon_months")
    if expected is not None:  # a cost without its working table (an older plan): the number
        for kind in expected.index.difference(table["pricing_type"]):
            table.loc[len(table)] = [kind, float(expected.loc[kind, "usd_total"])]
            formulas.append(None)
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
                   lambda i, r: formulas[i] and formulas[i].format(r=r),
                   _expected(expected, table["pricing_type"], "usd_per_month"), USD_WHOLE),
        LiveColumn("usd_total", table["usd_total"].tolist(), lambda i, r: f"C{r}*horizon_months",
                   _expected(expected, table["pricing_type"], "usd_total"), USD_WHOLE),
        LiveColumn("share", shares, lambda i, r: f"D{r}/SUM($D${first}:$D${first + n - 1})",
                   _expected(expected, table["pricing_type"], "share"), PERCENT),
    ]
    cells.by_pricing = write_live_table(book, ws, row, columns, "CostsByPricing", widths)
    name_range(book, ws, "total_usd_per_month_by_pricing", cells.by_pricing, "usd_per_month")
    return cells.by_pricing.last


def _by_workload(book, ws, plan, usage, months, row, widths, cells: CostCells) -> int:
    row = _section(ws, row, "Cost by workload (a configuration's cost split by load share)")
    costs = plan.costs_by_workload.reset_index(drop=True)
    if costs.empty:
        put(ws, row, 1, "No workload was served.", font=NOTE_FONT)
        return row
    first, n = row + 1, len(costs)
    python, formulas, scale = _workload_rows(plan, usage, months, costs["workload"].tolist(),
                                             first, cells)
    total = sum(python) or 1.0
    columns = [
        LiveColumn("workload", costs["workload"].tolist()),
        LiveColumn("usd_per_month", python, lambda i, r: formulas[i],
                   costs["usd_per_month"].tolist(), USD_WHOLE, scale=scale),
        LiveColumn("usd_total", [v * months for v in python], lambda i, r: f"B{r}*horizon_months",
                   costs["usd_total"].tolist(), USD_WHOLE, scale=[v * months for v in scale]),
        LiveColumn("share", [v / total for v in python],
                   lambda i, r: f"C{r}/SUM($C${first}:$C${first + n - 1})",
                   costs["share"].tolist(), PERCENT),
    ]
    cells.by_workload = write_live_table(book, ws, row, columns, "CostsByWorkload", widths)
    cells.workload_rows = {w: first + i for i, w in enumerate(costs["workload"])}
    return cells.by_workload.last


def _workload_rows(plan, usage: pd.DataFrame, months: float, names: list[str], first: int,
                   cells: CostCells) -> tuple[list[float], list[str], list[float]]:
    """Per row of the cost by workload (Excel rows from ``first``): Python's value [USD/month],
    its formula, and the total it is a difference of (0: none). A workload pays its share of
    the fleet rows, its API tokens and its configuration-months; ``(spare)`` is everything less
    the workloads; idle node GPUs are the GPUs bought less the fleet's. Fills
    ``cells.workload_usd``."""
    allocation = plan_quantities.allocation_table(plan)
    fleet_usd = plan.fleet["usd_per_month"].to_numpy(float) if not plan.fleet.empty else np.zeros(0)
    beyond_usd = cells.beyond.usd_by("workload") / months
    fleet_sum = "SUM(fleet_usd_per_month)" if cells.fleet is not None else "0"
    fleet_total, bought_total = float(fleet_usd.sum()), float(usage["usd"].sum()) / months
    python, formulas = [], []
    for position, name in enumerate(names):
        shared = name in allocation.columns
        python.append(float(allocation[name].to_numpy(float) @ fleet_usd) if shared else 0.0)
        formulas.append(f"SUMPRODUCT(allocation_usd_per_month,{cells.allocation_names[name]})"
                        if shared else "0")
        extra = cells.beyond.term(f"workload=A{first + position}")
        if extra:
            python[-1] += float(beyond_usd.get(name, 0.0))
            formulas[-1] += f"+({extra[1:]})/horizon_months"
    served = [i for i, name in enumerate(names) if name not in (SPARE, IDLE)]
    cells.workload_usd = {names[i]: python[i] for i in served}
    all_total = fleet_total + float(beyond_usd.sum())
    extra = cells.beyond.term()
    everything = f"{fleet_sum}+({extra[1:]})/horizon_months" if extra else fleet_sum
    workload_sum = "+".join(f"B{first + i}" for i in served) or "0"
    rest = {SPARE: (all_total - sum(python[i] for i in served), f"{everything}-({workload_sum})"),
            IDLE: (bought_total - fleet_total, f"gpu_usd_per_month-{fleet_sum}")}
    for position, name in enumerate(names):
        if name in rest:
            python[position], formulas[position] = rest[name]
    # the spare and idle rows are differences of totals: a total's rounding is theirs too
    scales = {SPARE: all_total, IDLE: bought_total}
    return python, formulas, [scales.get(name, 0.0) for name in names]


def _by_month(book, ws, plan, usage, months, row, widths, cells: CostCells) -> int:
    row = _section(ws, row, "Cost by month over the horizon")
    expected = plan.costs_by_month.set_index("month") if not plan.costs_by_month.empty else None
    beyond = cells.beyond
    gpu_usd = usage.groupby("month")["usd"].sum()
    extra_usd = beyond.usd_by("month")
    table = pd.DataFrame({"month": sorted(set(gpu_usd.index) | set(extra_usd.index))})
    table["usd"] = (gpu_usd.reindex(table["month"]).fillna(0.0).to_numpy()
                    + extra_usd.reindex(table["month"]).fillna(0.0).to_numpy())
    gpu_term = "SUMPRODUCT((usage_month=A{r})*usage_usd)" if not usage.empty else "0"
    columns = [LiveColumn("month", cells.month_dates(table["month"]), number_format=MONTH),
               LiveColumn("usd", table["usd"].tolist(),
                          lambda i, r: gpu_term.format(r=r) + beyond.term(f"month=A{r}"),
                          _expected(expected, table["month"], "usd"), USD_WHOLE)]
    parts = {"reserved_usd": plan_quantities.RESERVED, "on_demand_usd": ("on_demand",),
             "spot_usd": ("spot",)}
    for name, kinds in parts.items():
        chosen = usage[usage["pricing_type"].isin(kinds)].groupby("month")["usd"].sum()
        values = chosen.reindex(table["month"]).fillna(0.0).tolist()
        test = "+".join(f'(usage_pricing_type="{k}")' for k in kinds)
        formula = f"SUMPRODUCT((usage_month=A{{r}})*({test})*usage_usd)"
        columns.append(LiveColumn(
            name, values, lambda i, r, f=formula: f.format(r=r) if not usage.empty else "0",
            _expected(expected, table["month"], name), USD_WHOLE))
    for kind, prefix, part in beyond.parts():  # hosted APIs, fixed cost per configuration
        values = part.groupby("month")["usd"].sum().reindex(table["month"]).fillna(0.0)
        columns.append(LiveColumn(
            f"{kind}_usd", values.tolist(),
            lambda i, r, p=prefix: f"SUMPRODUCT(({p}_month=A{r})*{p}_usd)",
            _expected(expected, table["month"], f"{kind}_usd"), USD_WHOLE))
    cells.by_month = write_live_table(book, ws, row, columns, "CostsByMonth", widths)
    _horizon_chart(ws, cells.by_month, len(columns))
    return cells.by_month.last + chart_rows(_HORIZON_CHART_CM) + 2


def _horizon_chart(ws: Worksheet, placed: Placed, columns: int) -> None:
    """Stacked columns per month of every cost part (the table's columns from the third)."""
    chart = BarChart()
    chart.type, chart.grouping, chart.overlap = "col", "stacked", 100
    chart.title = "Cost over the horizon by pricing type (USD/month)"
    chart.y_axis.title, chart.x_axis.title = "USD per month", "month"
    chart.y_axis.numFmt, chart.x_axis.number_format = '"$"#,##0', "mmm yy"
    chart.x_axis.delete = chart.y_axis.delete = False
    chart.height, chart.width = _HORIZON_CHART_CM, 18
    first, last = placed.first, placed.last
    data = Reference(ws, min_col=3, max_col=columns, min_row=first - 1, max_row=last)
    chart.add_data(data, titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=1, min_row=first, max_row=last))
    ws.add_chart(chart, f"A{last + 2}")


def _usage_and_allocation(book, ws, plan, usage, row, widths, cells: CostCells,
                          price_names: dict[tuple, str]) -> int:
    """The GPU usage and allocation working tables from ``row``; returns the row after them."""
    if usage.empty:
        return row
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
    define_name(book.wb, "gpu_usd_per_month", ws, f"E{placed.last + 1}")
    return _allocation(book, ws, plan, placed.last + 3, widths, cells)


def _total_line(book: Book, ws: Worksheet, plan, usage: pd.DataFrame, row: int,
                cells: CostCells) -> None:
    """The plan's cost per month, GPUs and costs beyond them, named ``total_usd_per_month``:
    a formula when it adds up to the costs by pricing type, else their sum as a number."""
    extra = cells.beyond.term()
    gpus = "gpu_usd_per_month" if not usage.empty else "0"
    formula = f"{gpus}+({extra[1:]})/horizon_months" if extra else gpus
    months = plan_quantities.horizon_months(plan)
    value = (float(usage["usd"].sum()) + float(cells.beyond.usd_by("month").sum())) / months
    put(ws, row, 1, "All costs (USD/month)", font=LABEL_FONT)
    if agrees(value, cells.total_usd_per_month):
        book.formulas.put(ws, row, 2, formula, value, USD_WHOLE)
    else:
        put(ws, row, 2, cells.total_usd_per_month, USD_WHOLE)
    define_name(book.wb, "total_usd_per_month", ws, f"B{row}")


def _allocation(book, ws, plan, row, widths, cells: CostCells) -> int:
    allocation = plan_quantities.allocation_table(plan)
    if plan.fleet.empty or cells.fleet is None:
        return row
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
    return placed.last + 2


def allocation_names(workloads) -> dict[str, str]:
    """A unique defined name per workload's allocation column."""
    taken = {"allocation_usd_per_month"}  # the range name of the cost column
    return {w: defined_name("allocation", w, taken=taken) for w in workloads}


def _expected(expected: pd.DataFrame | None, keys: pd.Series, column: str) -> list:
    if expected is None or column not in expected.columns:
        return [np.nan] * len(keys)
    return expected[column].reindex(list(keys)).tolist()

