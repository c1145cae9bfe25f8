"""The rent-or-buy workbook's Summary sheet: the options ranked by their lowest 3-year cost
(each figure a link to its cell on Options), a chart of the 3-year cost of renting, reserving
and buying, one sentence per option on reserved against on-demand prices, and the notes on
price warnings and options not priced to buy."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from openpyxl.chart import BarChart, Reference
from openpyxl.styles import Alignment
from openpyxl.utils.cell import get_column_letter

from fleetplan.catalogs.conventions import PRICING_TYPES as RENT_TYPES
from fleetplan.exports.xlsx_common import (
    LABEL_FONT,
    NOTE_FONT,
    add_table,
    indent_text,
    put,
    set_widths,
    style_header,
    title_block,
    wrap,
)
from fleetplan.exports.xlsx_package import Book
from fleetplan.exports.xlsx_print import chart_rows
from fleetplan.sweeps.rent_or_buy import financing_of, financing_words

MONEY, KW, MONTHS, RATE = '"$"#,##0', "#,##0.0", '#,##0', "#,##0.00"
PER_TOKEN = '"$"#,##0.0000'
#: Summary columns: (Options metric or a Summary formula, header, format).
SUMMARY = (("gpus_needed", "GPUs", MONTHS), ("nodes", "Nodes", MONTHS),
           ("power_kw", "Power (kW)", KW),
           ("rent_on_demand_usd_per_month", "Rent on demand (USD/month)", MONEY),
           ("usd_per_m_output_tokens_on_demand", "Rent per 1M output tokens (USD)", PER_TOKEN),
           ("tco_1y_on_demand_usd", "1 year, rent (USD)", MONEY),
           ("tco_1y_buy_usd", "1 year, buy (USD)", MONEY),
           ("tco_3y_on_demand_usd", "3 years, rent (USD)", MONEY),
           ("tco_3y_reserved_usd", "3 years, reserved (USD)", MONEY),
           ("tco_3y_buy_usd", "3 years, buy (USD)", MONEY),
           ("break_even_months_vs_on_demand", "Break-even of buying (months)", MONTHS))


def summary_sheet(book: Book, table: pd.DataFrame, cells: dict, workload: dict,
                  price_rule: str) -> None:
    """The Summary: the options ranked by their lowest 3-year cost (each figure a link to its
    Options cell), the 3-year chart and the sentences on prices; ``cells`` maps each GPU's
    metric to its Options cell."""
    ws = book.wb["Summary"]
    row = title_block(ws, f"Rent or buy: {workload.get('model', '')} ({workload.get('quant', '')})",
                      _workload_text(workload))
    put(ws, row, 1, "Options ranked by their lowest 3-year cost (rent on demand, reserve 3 years "
        "or buy)",
        font=LABEL_FONT)
    best = table[["tco_3y_on_demand_usd", "tco_3y_reserved_usd", "tco_3y_buy_usd"]].min(axis=1)
    ranked = table.assign(best_3y_usd=best).sort_values("best_3y_usd", kind="stable",
                                                        na_position="last")
    first = row + 2
    headers = ["Rank", "GPU", *[h for _, h, _ in SUMMARY], "Lowest 3-year cost (USD)"]
    style_header(ws, first - 1, 1, headers)
    best_column = get_column_letter(len(headers))
    ranks = ranked["best_3y_usd"].rank(method="min").to_numpy()
    last = first + len(ranked) - 1
    for offset, record in enumerate(ranked.to_dict("records")):
        line, own = first + offset, cells[record["gpu"]]
        indent_text(put(ws, line, 2, record["gpu"]))
        for column, (metric, _, number_format) in enumerate(SUMMARY, start=3):
            _link(book, ws, line, column, record, metric, own, number_format)
        tco = [f"Options!{own[m]}"
               for m in ("tco_3y_on_demand_usd", "tco_3y_reserved_usd", "tco_3y_buy_usd")]
        if math.isfinite(record["best_3y_usd"]):
            book.formulas.put(ws, line, len(headers), f"MIN({','.join(tco)})",
                              record["best_3y_usd"], MONEY)
            span = f"${best_column}${first}:${best_column}${last}"
            book.formulas.put(ws, line, 1, f"RANK({best_column}{line},{span},1)",
                              ranks[offset], MONTHS)
        else:
            put(ws, line, 1, "-")
    for line in range(first - 1, last + 1):  # a rank is a short ordinal: centred under its header
        cell = ws.cell(row=line, column=1)
        cell.alignment = Alignment(horizontal="center", vertical=cell.alignment.vertical,
                                   wrap_text=cell.alignment.wrap_text)
    add_table(ws, "Ranking", first - 1, 1, headers, len(ranked))
    after = _tco_chart(ws, first, last, len(ranked))
    after = _sentences(ws, after, ranked, price_rule)
    set_widths(ws, {1: 10, 2: 14, **{c: 13 for c in range(3, len(headers) + 1)}})
    ws.row_dimensions[first - 1].height = 45


def _workload_text(workload: dict) -> str:
    parts = [f"{workload.get('demand_req_s', 0):,g} requests/s",
             f"prompts of {workload.get('input_len', 0):,} "
             f"and answers of {workload.get('output_len', 0):,} tokens"]
    for key, label in (("tpot_slo_ms", "TPOT"), ("ttft_slo_ms", "TTFT")):
        value = workload.get(key)
        if value is not None and pd.notna(value):
            parts.append(f"{label} at most {value:g} ms")
    return "; ".join(parts) + "."


def _link(book: Book, ws, row: int, column: int, record: dict, metric: str, own: dict,
          number_format: str) -> None:
    value = record.get(metric)
    number = float(value) if isinstance(value, (int, float, np.floating)) else math.nan
    if metric.startswith("break_even") and math.isinf(number):
        put(ws, row, column, "never")
    elif math.isfinite(number):
        book.formulas.put(ws, row, column, f"Options!{own[metric]}", number, number_format)
    else:
        put(ws, row, column, "-")
    ws.cell(row=row, column=column).alignment = Alignment(horizontal="right")


def _tco_chart(ws, first: int, last: int, options: int) -> int:
    """Clustered bars of the 3-year cost of renting, reserving and buying, per option."""
    chart = BarChart()
    chart.type, chart.grouping = "col", "clustered"
    chart.title = "Cost over 3 years by option (USD)"
    chart.y_axis.numFmt = '"$"#,##0'
    chart.y_axis.title = "USD over 3 years"
    chart.x_axis.delete = chart.y_axis.delete = False
    columns = [3 + [m for m, _, _ in SUMMARY].index(m) for m in
               ("tco_3y_on_demand_usd", "tco_3y_reserved_usd", "tco_3y_buy_usd")]
    for column in columns:
        chart.add_data(Reference(ws, min_col=column, min_row=first - 1, max_row=last),
                       titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=2, min_row=first, max_row=last))
    chart.height, chart.width = 7.5, max(16.0, 3.5 * options + 6)
    chart.legend.position = "b"
    ws.add_chart(chart, f"B{last + 2}")
    return last + 3 + chart_rows(chart.height)


def not_priced_to_buy(table: pd.DataFrame) -> str:
    """The sentence on options with no server to buy ('' when every option has one)."""
    unowned = [r["gpu"] for r in table.to_dict("records") if pd.isna(r.get("tco_3y_buy_usd"))]
    if not unowned:
        return ""
    one = len(unowned) == 1
    return (f"Not priced to buy: {', '.join(unowned)} (the ownership catalog holds no server "
            f"for {'it' if one else 'them'}; add one with --catalog), so "
            f"{'its' if one else 'their'} power and buy columns show '-'.")


def buying_basis(table: pd.DataFrame) -> str:
    """How buying is costed per month, with the table's cost of capital and resale value.

    >>> buying_basis(pd.DataFrame({"cost_of_capital": [0.08], "residual_value": [0.1]}))
    'server list prices recovered over their life at a cost of capital of 8.0% a year, less a ...'
    >>> buying_basis(pd.DataFrame({"cost_of_capital": [0.0], "residual_value": [0.0]}))[:60]
    'server list prices written off straight-line over their life'
    """
    financing = financing_of(table)
    rate, resale = financing["cost_of_capital"], financing["residual_value"]
    capital = (f"recovered over their life{financing_words(rate, 0.0)}" if rate > 0
               else "written off straight-line over their life (no cost of capital)")
    sold = financing_words(0.0, resale) if resale > 0 else ", no resale value"
    return f"server list prices {capital}{sold}, plus power and hosting"


def _sentences(ws, row: int, ranked: pd.DataFrame, price_rule: str) -> int:
    put(ws, row, 1, "Reserved against on-demand prices", font=LABEL_FONT)
    row += 1
    for record in ranked.to_dict("records"):  # the GPU id over two columns prints whole
        put(ws, row, 1, record["gpu"], font=LABEL_FONT).alignment = Alignment(vertical="top")
        ws.merge_cells(start_row=row, start_column=1, end_row=row, end_column=2)
        ws.merge_cells(start_row=row, start_column=3, end_row=row, end_column=12)
        wrap(ws, put(ws, row, 3, str(record.get("reserved_vs_on_demand", ""))), 136)
        row += 1
    warnings = sorted({f"{r['gpu']} {k}: {r[f'price_{k}_warning']}"
                       for r in ranked.to_dict("records")
                       for k in RENT_TYPES if r.get(f"price_{k}_warning")})
    notes = ([f"Prices: {price_rule}."] if price_rule else [])
    notes += [f"Price warning, {w}." for w in warnings]
    notes += [note for note in (not_priced_to_buy(ranked),) if note]
    notes.append(f"Buying: {buying_basis(ranked)}; the 1- and 3-year costs are cash paid, "
                 "undiscounted and before any resale.")
    for note in notes:
        ws.merge_cells(start_row=row + 1, start_column=1, end_row=row + 1, end_column=12)
        wrap(ws, put(ws, row + 1, 1, note, font=NOTE_FONT), 160)
        row += 1
    return row + 1
