"""The Frontier sheet: decode throughput per GPU against TPOT, one curve per configuration.

Each curve walks the batch axis of one configuration. With a TPOT SLO the sheet adds the SLO
as a vertical line and marks each curve's knee: the largest batch whose TPOT meets the SLO.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from openpyxl.chart import Reference, ScatterChart, Series
from openpyxl.chart.marker import Marker
from openpyxl.chart.shapes import GraphicalProperties
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports.xlsx_common import NOTE_FONT, clean_text, put, set_widths, title_block
from fleetplan.exports.xlsx_print import chart_rows
from fleetplan.exports.xlsx_sheets import write_frame
from fleetplan.sweeps.operating_points import mark_knees

#: Curves drawn at most; the chart stays readable and the cheapest configurations come first.
MAX_CURVES = 8
#: Points kept per curve (evenly spaced along the batch axis) so big sweeps stay light.
MAX_POINTS = 200
X_COLUMN, Y_COLUMN = "tpot_ms", "decode_tok_s_per_gpu"
#: The Frontier sheet's chart, height and width [cm]: a landscape page's width less margins.
FRONTIER_CHART_CM = (11.0, 24.0)
_PALETTE = ("1F77B4", "FF7F0E", "2CA02C", "9467BD", "8C564B", "E377C2", "17BECF", "BCBD22")


def knee_rows(curves: pd.DataFrame, tpot_slo_ms: float | None) -> pd.DataFrame:
    """Per configuration, the point with the largest batch whose TPOT meets the SLO."""
    if tpot_slo_ms is None or curves.empty:
        return curves.iloc[0:0]
    marked = mark_knees(curves, tpot_slo_ms, curve_keys=["config"])
    return curves[marked["is_knee"].to_numpy()]


def frontier_curves(frame: pd.DataFrame, keys: list[str], rank_by: str | None) -> pd.DataFrame:
    """Long table config, batch, tpot_ms, decode_tok_s_per_gpu for the best few configurations.

    Rows that cannot run, do not fit or lack a finite TPOT or throughput are left out.
    """
    needed = {"batch", X_COLUMN, Y_COLUMN}
    if not needed <= set(frame.columns):
        return pd.DataFrame(columns=["config", "batch", X_COLUMN, Y_COLUMN])
    usable = np.isfinite(frame[X_COLUMN].to_numpy(dtype=float)) & np.isfinite(
        frame[Y_COLUMN].to_numpy(dtype=float))
    for flag in ("valid", "fits"):
        if flag in frame.columns:
            usable &= frame[flag].to_numpy(dtype=bool)
    rows = frame.loc[usable, [*keys, "batch", X_COLUMN, Y_COLUMN, *([rank_by] if rank_by else [])]]
    labels = _labels(rows, keys)
    rows = rows.assign(config=labels)
    score = (rows.groupby("config", sort=False)[rank_by].min() if rank_by
             else -rows.groupby("config", sort=False)[Y_COLUMN].max())
    best = score.sort_values(kind="stable").index[:MAX_CURVES]
    chosen = rows[rows["config"].isin(best)]
    order = {label: number for number, label in enumerate(best)}
    chosen = chosen.assign(rank=chosen["config"].map(order)).sort_values(["rank", "batch"],
                                                                         kind="stable")
    chosen = chosen.drop_duplicates(["config", "batch"])
    return chosen[["config", "batch", X_COLUMN, Y_COLUMN]].reset_index(drop=True)


def thin_curves(curves: pd.DataFrame, max_points: int = MAX_POINTS) -> pd.DataFrame:
    """At most ``max_points`` per curve, evenly spaced, always keeping both ends."""
    position = curves.groupby("config", sort=False).cumcount().to_numpy()
    size = curves.groupby("config", sort=False)["batch"].transform("size").to_numpy()
    step = np.maximum(size / max_points, 1.0)
    keep = (np.floor(position / step) != np.floor((position - 1) / step)) | (position == size - 1)
    return curves[keep].reset_index(drop=True)


def _labels(rows: pd.DataFrame, keys: list[str]) -> pd.Series:
    """``h100-sxm llama-3.1-8b bf16 tp2 ctx2048``: only the keys that vary get shown."""
    varying = [k for k in keys if rows[k].nunique(dropna=False) > 1] or keys[:2]
    prefix = {"tp": "tp", "context_len": "ctx", "input_len": "in", "output_len": "out"}
    parts = [prefix.get(k, "") + rows[k].astype(str) for k in varying]
    label = parts[0]
    for part in parts[1:]:
        label = label + " " + part
    return label.astype(str)


def frontier_sheet(ws: Worksheet, curves: pd.DataFrame, tpot_slo_ms: float | None,
                   note: str) -> int:
    """Draw the frontier chart and write its curve data as a table below it; returns the
    table's header row (the chart prints at the size of a page's width, above the data, not
    squeezed beside a long table)."""
    row = title_block(ws, "Frontier: throughput vs TPOT", note)
    if curves.empty:
        put(ws, row, 1, "No configuration in this export has a usable throughput curve.",
            font=NOTE_FONT)
        return row
    widths: dict[int, float] = {}
    table_row = row + chart_rows(FRONTIER_CHART_CM[0]) + 1
    frontier_block(ws, table_row, curves, tpot_slo_ms, knee_rows(curves, tpot_slo_ms), widths,
                   anchor=f"A{row}", size=FRONTIER_CHART_CM)
    set_widths(ws, {1: max(widths.get(1, 20), 20), **{k: v for k, v in widths.items() if k > 1}})
    return table_row


def frontier_block(ws: Worksheet, row: int, curves: pd.DataFrame, tpot_slo_ms: float | None,
                   knees: pd.DataFrame, widths: dict[int, float], suffix: str = "",
                   title: str = "Decode throughput per GPU vs time per output token",
                   anchor: str | None = None, size: tuple[float, float] = (12, 20)) -> int:
    """One chart with its data tables from ``row``; returns the first free row below both.
    The chart sits beside its data (column G) unless an ``anchor`` cell places it elsewhere;
    ``size`` is its height and width [cm]."""
    curves = thin_curves(curves)
    after = write_frame(ws, curves, row, f"FrontierCurves{suffix}", widths)
    chart = ScatterChart()
    chart.title = clean_text(title)
    chart.style = 13
    chart.x_axis.title = "TPOT (ms)"
    chart.y_axis.title = "decode tokens/s per GPU"
    chart.x_axis.delete = chart.y_axis.delete = False
    chart.x_axis.numFmt, chart.y_axis.numFmt = "0", "#,##0"
    chart.legend.position = "b"
    chart.height, chart.width = size
    starts = curves.groupby("config", sort=False).indices
    for number, (label, positions) in enumerate(starts.items()):
        first, last = row + 1 + positions.min(), row + 1 + positions.max()
        series = _series(ws, 3, 4, first, last, label)
        series.graphicalProperties.line.solidFill = _PALETTE[number % len(_PALETTE)]
        series.marker = Marker(symbol="circle", size=4)
        chart.series.append(series)
    if tpot_slo_ms is not None:
        after = _slo_and_knees(ws, chart, curves, knees, tpot_slo_ms, after + 1, widths, suffix)
    ws.add_chart(chart, anchor or f"G{row}")
    return (max(after, row + 24) if anchor is None else after) + 1


def _series(ws: Worksheet, x_column: int, y_column: int, first: int, last: int,
            label: str) -> Series:
    x_values = Reference(ws, min_col=x_column, min_row=first, max_row=last)
    y_values = Reference(ws, min_col=y_column, min_row=first, max_row=last)
    series = Series(y_values, x_values, title=clean_text(label) or " ")
    series.smooth = False
    return series


def _slo_and_knees(ws: Worksheet, chart: ScatterChart, curves: pd.DataFrame,
                   knees: pd.DataFrame, tpot_slo_ms: float, row: int,
                   widths: dict[int, float], suffix: str = "") -> int:
    """The SLO as a two-point vertical line, and a marker on each knee."""
    top = float(curves[Y_COLUMN].max()) * 1.05
    line = pd.DataFrame({"config": ["TPOT SLO", "TPOT SLO"], "batch": [math.nan, math.nan],
                         X_COLUMN: [tpot_slo_ms, tpot_slo_ms], Y_COLUMN: [0.0, top]})
    put(ws, row, 1, f"TPOT SLO {tpot_slo_ms:g} ms and the knee of each curve", font=NOTE_FONT)
    after = write_frame(ws, line, row + 1, f"FrontierSLO{suffix}", widths)
    slo = _series(ws, 3, 4, row + 2, row + 3, f"TPOT SLO {tpot_slo_ms:g} ms")
    slo.graphicalProperties.line.solidFill = "C00000"
    slo.graphicalProperties.line.dashStyle = "dash"
    slo.graphicalProperties.line.width = 22000
    slo.marker = Marker(symbol="none")
    chart.series.append(slo)
    if knees.empty:
        return after
    after = write_frame(ws, knees.reset_index(drop=True), after + 1, f"FrontierKnees{suffix}",
                        widths)
    first = after - len(knees)
    knee = _series(ws, 3, 4, first, after - 1, "knee (operating point under the SLO)")
    knee.marker = Marker(symbol="diamond", size=11)
    knee.marker.graphicalProperties = GraphicalProperties(solidFill="000000")
    knee.graphicalProperties.line.noFill = True
    chart.series.append(knee)
    return after
