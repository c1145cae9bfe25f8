"""Predicted-vs-measured report: a per-row CSV, or a workbook with a table, summaries and a chart."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from openpyxl import Workbook
from openpyxl.chart import Reference, ScatterChart, Series

from fleetplan.errors import InvalidValueError
from fleetplan.exports.atomic import atomic_path
from fleetplan.exports.csv import write_csv
from fleetplan.exports.xlsx_common import table_sheet
from fleetplan.sweeps.model_validation import summaries

COLUMNS = ["source", "gpu", "model", "quant", "tp", "input_len", "output_len", "scenario", "qps", "metric",
           "value", "predicted", "ape_pct"]


def _chart(ws, n_rows: int, value_column: int, predicted_column: int) -> ScatterChart:
    chart = ScatterChart()
    chart.title, chart.style = "Predicted vs measured", 13
    chart.x_axis.title, chart.y_axis.title = "measured", "predicted"
    chart.x_axis.scaling.logBase = chart.y_axis.scaling.logBase = 10
    xs = Reference(ws, min_col=value_column, min_row=2, max_row=n_rows + 1)
    ys = Reference(ws, min_col=predicted_column, min_row=2, max_row=n_rows + 1)
    series = Series(ys, xs, title="rows")
    series.marker.symbol, series.graphicalProperties.line.noFill = "circle", True
    chart.series.append(series)
    chart.height, chart.width = 12, 18
    return chart


def write_validation(compared: pd.DataFrame, path: str | Path) -> Path:
    """Write the per-row comparison (``validation.compare``) to ``.csv`` or ``.xlsx`` atomically."""
    path = Path(path)
    rows = compared[[c for c in COLUMNS if c in compared.columns]]
    if path.suffix.lower() == ".csv":
        return write_csv(rows, path)
    if path.suffix.lower() != ".xlsx":
        message = f"validation report must be .csv or .xlsx, got '{path.name}'"
        raise InvalidValueError(message)
    wb = Workbook()
    ws = wb.active
    ws.title = "Rows"
    table_sheet(ws, rows, "Validation")
    ws.add_chart(_chart(ws, len(rows), rows.columns.get_loc("value") + 1, rows.columns.get_loc("predicted") + 1),
                 "P2")
    for name, table in summaries(compared).items():
        sheet = wb.create_sheet(name.replace(",", "")[:31])
        table_sheet(sheet, table.round(2).reset_index(), "Summary_" + name.replace(",", "").replace(" ", "_"))
    with atomic_path(path) as temporary:
        wb.save(temporary)
    return path

