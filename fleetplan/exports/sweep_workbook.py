"""Sweep workbooks: the grid as an Excel table with live costs, the frontier chart, sources.

The cost columns are formulas on the Assumptions sheet's GPU prices (one defined name per GPU,
e.g. ``price_h100_sxm``): ``usd_per_hour = tp * price``, and the per-token and per-request costs
divide it by the row's throughput. Editing a price recomputes every dependent cost. Grids over
Excel's row limit are refused unless ``top_n`` asks for the cheapest rows plus a summary.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from openpyxl.cell.cell import Cell
from openpyxl.formatting.rule import ColorScaleRule
from openpyxl.styles import Font
from openpyxl.utils.cell import coordinate_from_string, get_column_letter

from fleetplan.catalogs import load_catalogs
from fleetplan.errors import InvalidValueError, check_range
from fleetplan.exports.labels import header_of
from fleetplan.exports.price_provenance import prices_used
from fleetplan.exports.provenance import provenance
from fleetplan.exports.sweep_costs import CostFormulas
from fleetplan.exports.units import unit_of
from fleetplan.exports.xlsx_common import (
    LABEL_FONT,
    NOTE_FONT,
    add_table,
    number_format_for,
    put,
    set_widths,
    style_header,
    text_width,
    title_block,
)
from fleetplan.exports.xlsx_frontier import frontier_curves, frontier_sheet
from fleetplan.exports.xlsx_package import Book, set_properties
from fleetplan.exports.xlsx_print import PageOptions, PrintHeader, used_area
from fleetplan.exports.xlsx_rows import BulkColumn, BulkSheet
from fleetplan.exports.xlsx_sheets import Assumptions, write_frame
from fleetplan.exports.xlsx_sources import catalog_rows, readme_sheet, sources_sheet

log = logging.getLogger(__name__)

#: Data rows an Excel sheet holds below its header row.
EXCEL_MAX_ROWS = 1_048_575
SHEETS = ("Summary", "Sweep", "Frontier", "Assumptions", "Sources", "Read me")
CHEAPEST_SHOWN = 10
CHEAPEST_COLUMNS = ("gpu", "model", "quant", "tp", "context_len", "input_len", "output_len", "batch", "tpot_ms",
                    "ttft_ms", "decode_tok_s_per_gpu", "usd_per_hour", "usd_per_m_output_tokens", "calibration",
                    "error_p10_pct", "error_p90_pct")
#: Rows of the Frontier's curve table printed below its chart (the file has them all).
FRONTIER_PRINT_ROWS = 16
RANK_COLUMN = "usd_per_m_output_tokens"
#: Columns whose FALSE says a row cannot run, and how that FALSE prints.
CANNOT_RUN_COLUMNS = ("valid", "fits")
CANNOT_RUN_FONT = Font(color="C00000", bold=True)
#: The widest a text column of the Sweep sheet gets (why a row cannot run: up to 80) [chars].
BULK_TEXT_WIDTH = 90.0
_CURVE_KEYS = ("gpu", "model", "quant", "kv_quant", "tp", "context_len", "input_len", "output_len")


def check_rows(n_rows: int, top_n: int | None) -> None:
    """Refuse grids Excel cannot hold unless a top-N is asked for."""
    if top_n is not None:
        check_range("top_n", top_n, 1, EXCEL_MAX_ROWS, integer=True)
        return
    if n_rows > EXCEL_MAX_ROWS:
        message = (f"sweep has {n_rows:,} rows but an Excel sheet holds at most "
                   f"{EXCEL_MAX_ROWS:,}: write .parquet (or .csv) instead, or pass top_n to keep "
                   f"the cheapest rows by {RANK_COLUMN} plus a summary")
        raise InvalidValueError(message)


def top_rows(frame: pd.DataFrame, top_n: int) -> pd.DataFrame:
    """The ``top_n`` rows with the lowest finite $/1M output tokens (ties keep grid order)."""
    if RANK_COLUMN not in frame.columns:
        message = f"top_n needs the column '{RANK_COLUMN}' in the sweep"
        raise InvalidValueError(message)
    cost = frame[RANK_COLUMN].to_numpy(dtype=float)
    finite = frame[np.isfinite(cost)]
    return finite.nsmallest(top_n, RANK_COLUMN, keep="first")


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per GPU and model: rows, runnable rows, best $/1M output tokens, best tokens/s per GPU."""
    keys = [k for k in ("gpu", "model") if k in frame.columns]
    ok = np.ones(len(frame), dtype=bool)
    for flag in ("valid", "fits"):
        if flag in frame.columns:
            ok &= frame[flag].to_numpy(dtype=bool)
    data = frame[keys].assign(rows=1, runnable_rows=ok.astype(np.int64))
    aggregations = {"rows": "sum", "runnable_rows": "sum"}
    for column, how in ((RANK_COLUMN, "min"), ("decode_tok_s_per_gpu", "max")):
        if column in frame.columns:
            data[f"{how}_{column}"] = frame[column].where(ok)
            aggregations[f"{how}_{column}"] = how
    if not keys:
        return data.agg(aggregations).to_frame().T
    return data.groupby(keys, observed=True, sort=True).agg(aggregations).reset_index()


def merge_summaries(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Combine :func:`summarize` results of chunks into the summary of the whole grid."""
    frame = pd.concat(parts, ignore_index=True)
    keys = [k for k in ("gpu", "model") if k in frame.columns]
    how = {c: ("sum" if c in ("rows", "runnable_rows") else c.split("_", 1)[0])
           for c in frame.columns if c not in keys}
    if not keys:
        return frame.agg(how).to_frame().T
    return frame.groupby(keys, observed=True, sort=True).agg(how).reset_index()


def write_sweep_xlsx(df: pd.DataFrame, path: str | os.PathLike, *,
                     metadata: Mapping[str, Any] | None = None, top_n: int | None = None,
                     tpot_slo_ms: float | None = None, catalogs: Any = None,
                     summary: pd.DataFrame | None = None, total_rows: int | None = None) -> Path:
    """Write a sweep workbook (see module docstring); returns ``path``.

    ``summary`` and ``total_rows`` let a caller that streamed the grid pass what it already
    aggregated; by default they are computed from ``df``.
    """
    return build_sweep_book(df, metadata=metadata, top_n=top_n, tpot_slo_ms=tpot_slo_ms,
                            catalogs=catalogs, summary=summary, total_rows=total_rows).save(path)


def build_sweep_book(df: pd.DataFrame, *, metadata: Mapping[str, Any] | None = None,
                     top_n: int | None = None, tpot_slo_ms: float | None = None,
                     catalogs: Any = None, summary: pd.DataFrame | None = None,
                     total_rows: int | None = None) -> Book:
    """The sweep workbook, ready to save (tests inspect its formula records)."""
    total_rows = len(df) if total_rows is None else total_rows
    check_rows(total_rows if top_n is None else len(df), top_n)
    metadata = dict(metadata or {})
    tpot_slo_ms = tpot_slo_ms if tpot_slo_ms is not None else metadata.get("tpot_slo_ms")
    if tpot_slo_ms is not None:
        check_range("tpot_slo_ms", tpot_slo_ms, 0, low_inclusive=False)
    summary = summarize(df) if summary is None else summary
    if top_n is not None:
        df = top_rows(df, top_n)
        metadata.update(top_n=top_n, total_rows=total_rows)
    grid = df.reset_index(drop=True)
    catalogs = catalogs or _default_catalogs()
    ids = {kind: [str(i) for i in grid[kind].dropna().unique()] for kind in ("gpu", "model", "quant")
           if kind in grid.columns}
    chosen = _chosen(catalogs, ids.get("gpu", []))
    metadata.setdefault("prices_used", prices_used(chosen) if chosen is not None else [])
    record = provenance("sweep", metadata, catalogs=catalogs)
    book = Book(header=PrintHeader(f"Sweep of {total_rows:,} configurations"))
    wb = book.wb
    wb.active.title = SHEETS[0]
    for title in SHEETS[1:]:
        wb.create_sheet(title)
    assumptions = Assumptions(wb["Assumptions"])
    costs = CostFormulas.from_grid(grid, assumptions, chosen)
    assumptions.finish()
    _grid_sheet(book, grid, costs)
    book.pages["Summary"] = _summary_sheet(wb["Summary"], summary, grid, top_n, total_rows, record)
    keys = [k for k in _CURVE_KEYS if k in grid.columns]
    curves = frontier_curves(grid, keys, RANK_COLUMN if RANK_COLUMN in grid.columns else None)
    table_row = frontier_sheet(wb["Frontier"], curves, tpot_slo_ms,
                               "Decode tokens/s per GPU against TPOT as the batch grows; the "
                               "cheapest configurations by $/1M output tokens.")
    book.pages["Frontier"] = PageOptions(one_page=True,
                                         area=_chart_area(wb["Frontier"], table_row))
    book.pages["Sources"] = sources_sheet(wb["Sources"], record,
                                          catalog_rows(catalogs, ids, prices=record["prices_used"],
                                                       engine=metadata.get("engine") or None))
    book.pages["Read me"] = _readme(wb["Read me"], record, top_n, total_rows, costs.live)
    set_properties(wb, "fleetplan sweep", f"Sweep of {total_rows:,} configurations",
                   "fleetplan, sweep, GPU, LLM serving")
    return book


def _chosen(catalogs: Any, gpus: list[str]) -> pd.DataFrame | None:
    """The price rule's on-demand rows of the grid's GPUs, if the catalogs know them."""
    try:
        return catalogs.chosen_prices(gpus, ["on_demand"])
    except (AttributeError, ValueError, KeyError) as error:
        log.debug("no price rows for the grid's GPUs: %s", error)
        return None


def _chart_area(ws, table_row: int) -> str:
    """The Frontier sheet's printed part: its title, the chart and the first rows of the table
    below it, whose header is ``table_row``."""
    column, last_row = coordinate_from_string(used_area(ws).split(":")[1])
    return f"A1:{column}{min(last_row, table_row + FRONTIER_PRINT_ROWS)}"


def _default_catalogs() -> Any:
    try:
        return load_catalogs()
    except (ImportError, ValueError, OSError) as error:
        log.debug("catalogs unavailable for Sources: %s", error)
        return None


def _grid_sheet(book: Book, grid: pd.DataFrame, costs: CostFormulas) -> None:
    ws = book.wb["Sweep"]
    headers = [header_of(str(c)) for c in grid.columns]
    style_header(ws, 1, 1, headers)
    columns, widths = [], {}
    for position, name in enumerate(grid.columns, start=1):
        series = grid[name]
        kind, number_format = _kind_and_format(series)
        if name in costs.builders:
            kind = "formula"
        template = Cell(ws, row=2, column=position)  # registers the style; never placed
        if number_format:
            template.number_format = number_format
        false_style = None
        if name in CANNOT_RUN_COLUMNS:  # rows that cannot run show FALSE in red
            false_template = Cell(ws, row=2, column=position)
            false_template.font = CANNOT_RUN_FONT
            false_style = false_template.style_id
        columns.append(BulkColumn(str(name), kind, template.style_id, costs.builders.get(name),
                                  false_style))
        # every distinct text, not the first rows': "a100-80gb-sxm" may come after "h100-sxm";
        # a bulk row is one line, so a text column is as wide as its longest text
        sample = [str(v) for v in pd.unique(series.dropna())] if kind == "text" else []
        widths[position] = text_width(sample, headers[position - 1], number_format,
                                      widest=BULK_TEXT_WIDTH)
    book.bulk["Sweep"] = BulkSheet(grid, columns)
    add_table(ws, "Sweep", 1, 1, headers, len(grid), style="TableStyleMedium2")
    ws.freeze_panes = f"{get_column_letter(_leading_labels(columns) + 1)}2"
    set_widths(ws, widths)
    _grid_highlights(ws, grid)


def _leading_labels(columns: list[BulkColumn], at_most: int = 4) -> int:
    """Text columns at the left (gpu, model, ...) that stay visible when scrolling right."""
    count = 0
    for column in columns[:at_most]:
        if column.kind != "text":
            break
        count += 1
    return count


def _kind_and_format(series: pd.Series) -> tuple[str, str | None]:
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return "bool", None
    if pd.api.types.is_numeric_dtype(dtype):
        integer = pd.api.types.is_integer_dtype(dtype)
        return "number", number_format_for(unit_of(str(series.name)), integer)
    return "text", None


def _grid_highlights(ws, grid: pd.DataFrame) -> None:
    """Green-to-red on $/1M output tokens (the FALSE of rows that cannot run is red in the
    cells themselves: see ``BulkColumn.false_style_id``)."""
    last = len(grid) + 1
    if last < 2 or RANK_COLUMN not in grid:
        return
    letter = get_column_letter(list(grid.columns).index(RANK_COLUMN) + 1)
    ws.conditional_formatting.add(f"{letter}2:{letter}{last}", ColorScaleRule(
        start_type="min", start_color="63BE7B", mid_type="percentile", mid_value=50,
        mid_color="FFEB84", end_type="max", end_color="F8696B"))


def _summary_sheet(ws, summary: pd.DataFrame, grid: pd.DataFrame, top_n: int | None, total_rows: int,
                   record: Mapping[str, Any]) -> PageOptions:
    """The whole grid's bests per GPU and model, and its cheapest configurations: one page."""
    held = (f"The Sweep sheet holds the {top_n:,} cheapest rows by cost per 1M output tokens of a grid of "
            f"{total_rows:,} rows; write .parquet for every row." if top_n is not None
            else f"The Sweep sheet holds all {total_rows:,} rows of the grid.")
    row = title_block(ws, "Sweep summary", held)
    if record.get("price_rule"):
        put(ws, row, 1, f"Prices: {record['price_rule']} (rows on Assumptions).", font=NOTE_FONT)
        row += 2
    put(ws, row, 1, "Best values per GPU and model over the whole grid (rows that run only)", font=LABEL_FONT)
    widths: dict[int, float] = {}
    row = write_frame(ws, summary, row + 1, "GridSummary", widths) + 1
    cheapest = top_rows(grid, CHEAPEST_SHOWN) if RANK_COLUMN in grid.columns else grid.head(0)
    shown = [c for c in CHEAPEST_COLUMNS if c in cheapest.columns]
    if len(cheapest) and shown:
        put(ws, row, 1, f"The {len(cheapest)} cheapest configurations by cost per 1M output tokens",
            font=LABEL_FONT)
        write_frame(ws, cheapest[shown].reset_index(drop=True), row + 1, "Cheapest", widths)
    base = {1: 12, 2: 16, **{column: 12 for column in range(3, max(widths, default=2) + 1)}}
    set_widths(ws, {column: max(width, widths.get(column, 0.0)) if column <= 2 else width
                    for column, width in base.items()})  # GPU and model ids print whole
    return PageOptions(one_page=True)


def _readme(ws, record: Mapping[str, Any], top_n: int | None, total_rows: int,
            live: bool) -> PageOptions:
    sheets = [("Sweep", "One row per configuration as an Excel table with filters; units in "
               "the headers. The cost columns are live formulas on the Assumptions prices. "
               "Calibration says what a row's efficiencies rest on (measured on this engine, GPU and "
               "precision; transferred from a sibling; prior only) and the error band is the p10 to "
               "p90 of predicted / measured - 1 of held-out rows with that calibration."),
              ("Frontier", "Decode throughput per GPU against TPOT as the batch grows, for the "
               "cheapest configurations; with a TPOT SLO, the SLO line and each curve's knee."),
              ("Assumptions", "GPU prices per hour: the inputs of every cost in the Sweep sheet."),
              ("Sources", "fleetplan version, sweep parameters, catalog versions and the "
               "catalog rows used, each with its source and date."),
              ("Read me", "This sheet.")]
    kept = (f"the Sweep sheet keeps the {top_n:,} cheapest by cost per 1M output tokens" if top_n is not None
            else "the Sweep sheet has every row")
    sheets.insert(0, ("Summary", f"The grid had {total_rows:,} rows; {kept}. Bests per GPU and model and "
                      "the cheapest configurations. The Sweep sheet prints its first rows only."))
    how_to = ["Filter and sort the Sweep table with the buttons in its header row.",
              "Change a GPU price on Assumptions (yellow cell): usd_per_hour and the per-token "
              "and per-request costs of that GPU's rows recalculate." if live else
              "Costs are fixed values: this sweep had no single price per GPU to link them to.",
              "Throughput, latency and memory are model outputs and do not change with prices."]
    return readme_sheet(ws, "fleetplan sweep", "Performance and cost of LLM serving configurations, "
                        "computed by fleetplan's analytical model.", sheets, how_to, record)
