"""What-if grid outputs: the comparison workbook (one row per scenario, a pivot sheet and chart
per axis, the base plan's fleet) and the same tables as Parquet."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from openpyxl import Workbook
from openpyxl.chart import LineChart, Reference

from fleetplan.errors import InvalidValueError
from fleetplan.exports.atomic import atomic_dir, atomic_path
from fleetplan.exports.csv import write_csv
from fleetplan.exports.parquet import write_table_parquet
from fleetplan.exports.provenance import provenance
from fleetplan.exports.xlsx_common import table_sheet

OUTPUTS = ("usd_per_month", "usd_per_m_tokens", "gpus_peak")


def pivots(results: pd.DataFrame, axes: list[str]) -> dict[str, pd.DataFrame]:
    """Per axis: mean, min and max of the outputs over the solved scenarios at each axis value."""
    solved = results[results["status"].isin(["optimal", "time_limit"])]
    tables = {}
    for axis in axes:
        grouped = solved.groupby(solved[axis].astype(str), sort=False)[list(OUTPUTS)]
        table = grouped.agg(["mean", "min", "max"])
        table.columns = [f"{column}_{stat}" for column, stat in table.columns]
        table.insert(0, "scenarios", grouped.size())
        tables[axis] = table.reset_index().rename(columns={axis: axis})
    return tables


def _sheet_name(text: str, taken: set[str]) -> str:
    name = re.sub(r"[\[\]:*?/\\]", "_", text)[:28]
    while name in taken:
        name = name[:26] + f"_{len(taken)}"
    taken.add(name)
    return name


def _cost_chart(ws, n_rows: int, axis: str) -> LineChart:
    chart = LineChart()
    chart.title, chart.style = f"Mean cost vs {axis}", 12
    chart.y_axis.title, chart.x_axis.title = "USD/month", axis
    data = Reference(ws, min_col=3, min_row=1, max_row=n_rows + 1)  # usd_per_month_mean
    chart.add_data(data, titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=1, min_row=2, max_row=n_rows + 1))
    chart.height, chart.width = 8, 16
    return chart


def write_grid_xlsx(results: pd.DataFrame, path: Path, *, axes: list[str], base_fleet: pd.DataFrame | None,
                    metadata: dict) -> Path:
    wb = Workbook()
    ws = wb.active
    ws.title = "Scenarios"
    table_sheet(ws, results, "Scenarios")
    taken = {"Scenarios"}
    for axis, table in pivots(results, axes).items():
        sheet = wb.create_sheet(_sheet_name(f"By {axis}", taken))
        table_sheet(sheet, table, "By_" + re.sub(r"\W", "_", axis))
        if len(table):
            sheet.add_chart(_cost_chart(sheet, len(table), axis), f"A{len(table) + 4}")
    if base_fleet is not None:
        table_sheet(wb.create_sheet(_sheet_name("Base plan fleet", taken)), base_fleet, "Base_fleet")
    notes = wb.create_sheet(_sheet_name("Read me", taken))
    table_sheet(notes, pd.DataFrame({"key": list(metadata), "value": [str(v) for v in metadata.values()]}),
                      "Provenance")
    with atomic_path(path) as temporary:
        wb.save(temporary)
    return path


def write_grid_parquet(results: pd.DataFrame, folder: Path, *, axes: list[str], base_fleet: pd.DataFrame | None,
                       metadata: dict) -> Path:
    record = provenance("whatif", metadata)
    tables = {"scenarios": results, **{f"by_{re.sub(r'[^A-Za-z0-9_.-]', '_', a)}": t for a, t in pivots(results, axes).items()}}
    if base_fleet is not None:
        tables["base_fleet"] = base_fleet
    with atomic_dir(folder) as temporary:
        for name, table in tables.items():
            write_table_parquet(table.reset_index(drop=True), temporary / f"{name}.parquet", record, registry={})
    return folder


def write_grid(results: pd.DataFrame, path: str | Path, *, axes: list[str], base_fleet=None, metadata=None) -> Path:
    """Write the grid's tables by suffix: ``.xlsx``, ``.parquet`` (a folder) or ``.csv`` (scenarios)."""
    path, metadata = Path(path), dict(metadata or {})
    suffix = path.suffix.lower()
    if suffix == ".xlsx":
        return write_grid_xlsx(results, path, axes=axes, base_fleet=base_fleet, metadata=metadata)
    if suffix == ".parquet":
        return write_grid_parquet(results, path, axes=axes, base_fleet=base_fleet, metadata=metadata)
    if suffix == ".csv":
        return write_csv(results, path)
    message = f"what-if output must be .xlsx, .parquet or .csv, got '{path.name}'"
    raise InvalidValueError(message)
