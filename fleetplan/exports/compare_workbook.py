"""The rent-or-buy workbook: every cost is a live formula over the Assumptions sheet, so a
procurement team can change a price, a server quote, the electricity price or the PUE and see
every total and break-even follow. GPU counts and node counts (sized by the engine) stay numbers.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from fleetplan.catalogs.conventions import PRICING_TYPES
from fleetplan.exports.xlsx_common import (
    add_table,
    define_name,
    defined_name,
    put,
    put_input,
    set_widths,
    style_header,
    table_sheet,
)
from fleetplan.exports.xlsx_package import Book

RENT_TYPES = PRICING_TYPES
GPU_INPUTS = [(f"price_{k}_usd_per_gpu_hour", f"{k} (USD/GPU-hour)", "price", k) for k in RENT_TYPES] + [
    ("usd_per_node", "server price (USD/node)", "server", ""), ("node_power_kw", "server power (kW)", "kw", ""),
    ("life_years", "life (years)", "life", ""), ("hosting_usd_per_node_month", "hosting (USD/node-month)", "hosting", "")]
MONEY, NUMBER = '"$"#,##0', "#,##0.0"


def _assumptions(book: Book, table: pd.DataFrame, params: dict) -> dict[tuple[str, str], str]:
    """Editable inputs with defined names; returns {(gpu, input column): name}."""
    ws = book.wb.active
    ws.title = "Assumptions"
    taken: set[str] = set()
    put(ws, 1, 1, "Inputs (edit the yellow cells; every cost on Compare recalculates)")
    for row, (name, value) in enumerate(params.items(), start=2):
        put(ws, row, 1, name)
        cell = put_input(ws, row, 2, float(value), "#,##0.00")
        define_name(book.wb, defined_name("in", name, taken=taken), ws, cell.coordinate)
    first = len(params) + 4
    style_header(ws, first, 1, ["gpu", *[label for _, label, _, _ in GPU_INPUTS]])
    names = {}
    for offset, record in enumerate(table.to_dict("records"), start=1):
        put(ws, first + offset, 1, record["gpu"])
        for column, (field, _, prefix, kind) in enumerate(GPU_INPUTS, start=2):
            value = record.get(field)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            cell = put_input(ws, first + offset, column, float(value), "#,##0.00")
            names[(record["gpu"], field)] = defined_name(prefix, record["gpu"], kind, taken=taken)
            define_name(book.wb, names[(record["gpu"], field)], ws, cell.coordinate)
    set_widths(ws, {1: 28, **{c: 22 for c in range(2, len(GPU_INPUTS) + 2)}})
    return names


def _row_formulas(names: dict, gpu: str, cells: dict) -> dict[str, str]:
    """The formula of each cost column of one GPU's row (None where an input is missing)."""
    n = lambda field: names.get((gpu, field))  # noqa: E731 - a short lookup
    nodes, gpus = cells["nodes"], cells["gpus_needed"]
    formulas = {"power_kw": f"{nodes}*{n('node_power_kw')}" if n("node_power_kw") else None}
    for kind in RENT_TYPES:
        price = n(f"price_{kind}_usd_per_gpu_hour")
        formulas[f"rent_{kind}_usd_per_month"] = f"{gpus}*{price}*in_hours_per_month" if price else None
    if n("usd_per_node"):
        power = f"{nodes}*{n('node_power_kw')}*in_power_load*in_pue*in_hours_per_month*in_usd_per_kwh"
        opex = f"({power}+{nodes}*{n('hosting_usd_per_node_month')})"
        capex = f"{nodes}*{n('usd_per_node')}"
        formulas.update({"capex_usd": capex, "buy_opex_usd_per_month": opex,
                         "buy_usd_per_month": f"{capex}/(12*{n('life_years')})+{opex}",
                         "tco_1y_buy_usd": f"{capex}+12*{opex}", "tco_3y_buy_usd": f"{capex}+36*{opex}"})
    if formulas.get("rent_on_demand_usd_per_month"):
        formulas["tco_1y_on_demand_usd"] = f"12*{cells['rent_on_demand_usd_per_month']}"
        formulas["tco_3y_on_demand_usd"] = f"36*{cells['rent_on_demand_usd_per_month']}"
    return formulas


COLUMNS = ["gpu", "tp", "replicas", "gpus_needed", "nodes", "power_kw", *[f"rent_{k}_usd_per_month" for k in RENT_TYPES],
           "capex_usd", "buy_opex_usd_per_month", "buy_usd_per_month", "tco_1y_on_demand_usd", "tco_1y_buy_usd",
           "tco_3y_on_demand_usd", "tco_3y_buy_usd", "break_even_months_vs_on_demand"]


def _compare_sheet(book: Book, table: pd.DataFrame, names: dict) -> None:
    ws = book.wb.create_sheet("Compare")
    style_header(ws, 1, 1, COLUMNS)
    letters = {column: ws.cell(row=1, column=i).column_letter for i, column in enumerate(COLUMNS, start=1)}
    for row, record in enumerate(table.to_dict("records"), start=2):
        cells = {column: f"{letters[column]}{row}" for column in COLUMNS}
        formulas = _row_formulas(names, record["gpu"], cells)
        for column_index, column in enumerate(COLUMNS, start=1):
            value = record.get(column)
            formula = formulas.get(column)
            if column == "break_even_months_vs_on_demand" and math.isfinite(value or math.inf) and "capex_usd" in formulas:
                rent, opex, capex = cells["rent_on_demand_usd_per_month"], cells["buy_opex_usd_per_month"], cells["capex_usd"]
                formula = f'IF({rent}>{opex},{capex}/({rent}-{opex}),"never")'
            if formula and isinstance(value, float) and math.isfinite(value):
                book.formulas.put(ws, row, column_index, formula, value, NUMBER if column == "power_kw" else MONEY)
            elif isinstance(value, float) and math.isinf(value):
                put(ws, row, column_index, "never")
            else:
                put(ws, row, column_index, value, None if column == "gpu" else "#,##0")
    add_table(ws, "Compare", 1, 1, COLUMNS, len(table))
    ws.freeze_panes = "B2"
    set_widths(ws, {i: 14 if i > 1 else 16 for i in range(1, len(COLUMNS) + 1)})


def write_compare_xlsx(table: pd.DataFrame, path: str | Path, *, params: dict) -> Path:
    """Write the comparison with live formulas; ``params``: hours_per_month, usd_per_kwh, pue, power_load."""
    book = Book()
    names = _assumptions(book, table, params)
    _compare_sheet(book, table, names)
    source_columns = [c for c in table.columns if c.endswith("_source")]
    table_sheet(book.wb.create_sheet("Sources"), table[["gpu", *source_columns]], "Sources")
    book.wb.properties.title = "fleetplan rent-or-buy comparison"
    return book.save(path)
