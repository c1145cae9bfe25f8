"""Predicted-vs-measured report: a per-row CSV, or a workbook with a one-page Summary (error by
metric and a predicted-vs-measured chart per metric), the rows, the error by GPU, model and
metric, Sources and Read me."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from openpyxl.chart import Reference, ScatterChart, Series
from openpyxl.chart.marker import Marker
from openpyxl.chart.shapes import GraphicalProperties
from openpyxl.utils.cell import get_column_letter

from fleetplan.errors import InvalidValueError
from fleetplan.exports.csv import write_csv
from fleetplan.exports.labels import header_of, label_of
from fleetplan.exports.provenance import provenance
from fleetplan.exports.units import unit_of
from fleetplan.exports.xlsx_common import set_widths, title_block
from fleetplan.exports.xlsx_package import Book, set_properties
from fleetplan.exports.xlsx_print import PageOptions, PrintHeader, add_chart_at, chart_rows
from fleetplan.exports.xlsx_sheets import write_frame
from fleetplan.exports.xlsx_sources import catalog_rows, readme_sheet, sources_sheet
from fleetplan.sweeps.model_validation import IN_SAMPLE, summaries

#: A row's columns: which prediction it is (in sample, or held out from the fit) and its inputs,
#: the measured and predicted values and the error, what the prediction's efficiencies rest on,
#: and the measurement's source last (its long text runs into no column beside it).
COLUMNS = ["validation", "gpu", "model", "quant", "engine_id", "tp", "input_len", "output_len",
           "scenario", "qps", "metric", "value", "predicted", "ape_pct", "calibration", "source"]
#: The Rows' source column [characters]: the start of a source names its repository or page,
#: the text is whole in the cell, and the Rows then print one page across at half size or more.
SOURCE_WIDTH = 24
FORMATS = {"value": "#,##0.00", "predicted": "#,##0.00", "ape_pct": "0.0", "qps": "#,##0.00",
           "median_ape_pct": "0.0", "p90_ape_pct": "0.0", "rows": "#,##0", "n": "#,##0"}
_CHART_CM = (8.0, 11.0)
#: Summary charts side by side: three across a landscape page, so six metrics take two rows and
#: the page, table included, prints at more than half size (two across took three rows: 46%).
_CHARTS_ACROSS = 3
_CHART_GAP_CM = 0.3
_SHEETS = (("Summary", "Absolute percentage error of the model's predictions by metric (median and 90th "
            "percentile), and predicted against measured per metric: points on the line are exact."),
           ("Rows", "Every measurement the model could predict: which prediction it is (in "
            "sample, or held out from the fit), its inputs, measured and predicted value, error "
            "and what the prediction rests on. The in-sample rows print, each measurement once; "
            "the held-out rows follow them in the file."),
           ("By GPU, model", "The same errors by GPU, model and metric."),
           ("Sources", "fleetplan version, the measurement files and the catalog rows used."))


def write_validation(compared: pd.DataFrame, path: str | Path, *, catalogs: Any = None,
                     files: list[str] | None = None) -> Path:
    """Write the per-row comparison (``model_validation.compare``) to ``.csv`` or ``.xlsx``."""
    path = Path(path)
    rows = compared[[c for c in COLUMNS if c in compared.columns]].reset_index(drop=True)
    if path.suffix.lower() == ".csv":
        return write_csv(rows, path)
    if path.suffix.lower() != ".xlsx":
        message = f"validation report must be .csv or .xlsx, got '{path.name}'"
        raise InvalidValueError(message)
    book = Book(header=PrintHeader("Model against measurements"))
    wb = book.wb
    wb.active.title = "Summary"
    rows_sheet = wb.create_sheet("Rows")
    widths: dict[int, float] = {}
    ordered = in_report_order(rows)
    write_frame(rows_sheet, ordered, 1, "Validation", widths, formats=FORMATS)
    source = list(ordered.columns).index("source") + 1 if "source" in ordered else None
    if source:
        widths[source] = min(widths.get(source, 30), SOURCE_WIDTH)
    set_widths(rows_sheet, widths)
    rows_sheet.freeze_panes = "B2"
    # one page across: over two, LibreOffice printed each half at the scale one page needs
    book.pages["Rows"] = PageOptions(area=_printed_rows(ordered), max_pages_wide=1)
    tables = summaries(compared)
    by_group = wb.create_sheet("By GPU, model")
    widths = {}
    write_frame(by_group, tables["by gpu, model, metric"].round(2).reset_index(), 1, "ByGpuModel", widths,
                formats=FORMATS)
    set_widths(by_group, widths)
    book.pages["Summary"] = _summary(wb["Summary"], tables["by metric"].round(2).reset_index(), ordered)
    record = provenance("validation", {"files": files or sorted(set(rows.get("source", [])))}, catalogs=catalogs)
    ids = {kind: rows[kind].dropna().astype(str).unique() for kind in ("gpu", "model", "quant") if kind in rows}
    book.pages["Sources"] = sources_sheet(wb.create_sheet("Sources"), record, catalog_rows(catalogs, ids, prices=[]))
    book.pages["Read me"] = readme_sheet(wb.create_sheet("Read me"), "fleetplan validate", "The performance "
                                         "model's predictions against measured benchmark results.", _SHEETS,
                                         ["Filter the Rows table by GPU, model or metric with its header buttons."],
                                         record)
    set_properties(wb, "fleetplan validation", f"{len(rows):,} predicted rows", "fleetplan, validation")
    return book.save(path)


def _printed_rows(ordered: pd.DataFrame) -> str | None:
    """The Rows sheet's print area: its header and in-sample rows, each measurement once (the
    held-out predictions of the same measurements are as many rows again per validation);
    None (all of it) unless both kinds of row are there."""
    in_sample = int((ordered["validation"] == IN_SAMPLE).sum()) if "validation" in ordered else 0
    if in_sample in (0, len(ordered)):
        return None
    return f"A1:{get_column_letter(len(ordered.columns))}{1 + in_sample}"


def in_report_order(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows in sample first, then each held-out validation, each by metric and measured
    value: every metric's in-sample rows are one block, which its Summary chart plots."""
    validation = rows["validation"] if "validation" in rows else pd.Series(IN_SAMPLE, rows.index)
    order = validation.ne(IN_SAMPLE).astype(int)
    return (rows.assign(_held_out=order.to_numpy(), _validation=validation.to_numpy())
            .sort_values(["_held_out", "_validation", "metric", "value"], kind="stable")
            .drop(columns=["_held_out", "_validation"]).reset_index(drop=True))


def _summary(ws, by_metric: pd.DataFrame, rows: pd.DataFrame) -> PageOptions:
    """The error table and, per metric, predicted against measured (Rows sheet data)."""
    row = title_block(ws, "Model against measurements", "Absolute percentage error of the "
                      "predictions (signed: + where the model predicts more than was "
                      "measured); each chart puts one metric's predicted values against the "
                      "measured ones.")
    shown = by_metric.assign(metric=by_metric["metric"].map(header_of))
    needed: dict[int, float] = {}  # "leave-one-model-out" prints whole
    after = write_frame(ws, shown, row, "ByMetric", needed, formats=FORMATS)
    set_widths(ws, {column: max(width, needed.get(column, 0.0)) for column, width in
                    {1: 14, 2: 30, 3: 10, 4: 12, 5: 12, 6: 12}.items()})
    anchor_row = after + 1
    value_column = list(rows.columns).index("value") + 1
    predicted_column = list(rows.columns).index("predicted") + 1
    # the first validation's rows (in sample when there are any), named in the charts' titles
    label = str(rows["validation"].iloc[0]) if "validation" in rows and len(rows) else ""
    charted = rows[rows["validation"] == label] if label else rows
    positions = charted.groupby("metric", sort=False).indices
    for number, (metric, at) in enumerate(positions.items()):
        first, last = 2 + int(at.min()), 2 + int(at.max())
        chart = _scatter(ws.parent["Rows"], metric, first, last, value_column, predicted_column,
                         label)
        across, down = number % _CHARTS_ACROSS, number // _CHARTS_ACROSS
        add_chart_at(ws, chart, anchor_row + down * (chart_rows(_CHART_CM[0]) + 1),
                     across * (_CHART_CM[1] + _CHART_GAP_CM))
    return PageOptions(one_page=True)


def _scatter(rows_ws, metric: str, first: int, last: int, x_column: int, y_column: int,
             validation: str = "") -> ScatterChart:
    chart = ScatterChart()
    # the axes say predicted and measured; a title of three lines would shrink the plot
    chart.title = f"{label_of(metric)}, {validation}" if validation else \
        f"{label_of(metric)}: predicted vs measured"
    chart.style = 13
    chart.scatterStyle = "lineMarker"
    xs = Reference(rows_ws, min_col=x_column, min_row=first, max_row=last)
    ys = Reference(rows_ws, min_col=y_column, min_row=first, max_row=last)
    points = Series(ys, xs, title="measurements")
    points.marker = Marker(symbol="circle", size=5)
    points.marker.graphicalProperties = GraphicalProperties(solidFill="1F77B4")  # LibreOffice draws no
    points.marker.graphicalProperties.line.solidFill = "1F77B4"  # marker without a fill of its own
    points.graphicalProperties.line.noFill = True
    chart.series.append(points)
    diagonal = Series(Reference(rows_ws, min_col=x_column, min_row=first, max_row=last),
                      Reference(rows_ws, min_col=x_column, min_row=first, max_row=last), title="exact")
    diagonal.marker = Marker(symbol="none")
    diagonal.graphicalProperties.line.solidFill = "C00000"
    chart.series.append(diagonal)
    unit = f" ({unit_of(metric)})" if unit_of(metric) else ""
    chart.x_axis.title, chart.y_axis.title = f"measured{unit}", f"predicted{unit}"
    chart.x_axis.delete = chart.y_axis.delete = False
    chart.x_axis.numFmt = chart.y_axis.numFmt = "#,##0"
    chart.legend.position = "b"
    chart.height, chart.width = _CHART_CM
    return chart
