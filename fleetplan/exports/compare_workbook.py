"""The rent-or-buy workbook: a ranked Summary with a chart, every option's costs as live
formulas over the Assumptions sheet, and the Sources of every price and server quote.

Sheets (each prints on one page): Summary (the options ranked by their lowest 3-year cost, a
chart of 3-year costs, one sentence per option on reserved against on-demand prices), Options
(one column per GPU option: sizing, rent, buy, TCO and break-even, each cost a formula),
Assumptions (hours, electricity, PUE, load; every rental price with its provider, date and
source; server quotes) and Sources. GPU and node counts come from the performance model and
stay numbers; change a price, a quote, the electricity price or the PUE and every cost follows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from openpyxl.styles import Alignment
from openpyxl.utils.cell import get_column_letter

from fleetplan.exports.compare_summary import (
    KW,
    MONEY,
    MONTHS,
    PER_TOKEN,
    RATE,
    RENT_TYPES,
    summary_sheet,
)
from fleetplan.exports.labels import label_of
from fleetplan.exports.provenance import provenance
from fleetplan.exports.xlsx_common import (
    NOTE_FONT,
    add_table,
    define_name,
    defined_name,
    put,
    put_input,
    set_widths,
    style_header,
    title_block,
)
from fleetplan.exports.xlsx_package import Book, set_properties
from fleetplan.exports.xlsx_print import PageOptions, PrintHeader
from fleetplan.exports.xlsx_sheets import Assumptions
from fleetplan.exports.xlsx_sources import catalog_rows, sources_sheet
from fleetplan.sweeps.efficiencies import WILDCARD
from fleetplan.sweeps.rent_or_buy import financing_of

SERVER_INPUTS = (("usd_per_node", "Server price (USD/node)", "server", MONEY),
                 ("node_power_kw", "Power (kW/node)", "kw", KW),
                 ("life_years", "Life (years)", "life", "0.0"),
                 ("hosting_usd_per_node_month", "Hosting (USD per node-month)", "hosting", MONEY))
GENERAL_INPUTS = (("hours_per_month", "hours", "Hours in a month: every $/month is $/hour x this", "#,##0.0"),
                  ("usd_per_kwh", "USD/kWh", "Electricity price of owned servers", '"$"#,##0.000'),
                  ("pue", "ratio", "Data-center power usage effectiveness (cooling overhead)", "0.00"),
                  ("power_load", "fraction", "Average draw as a share of the servers' maximum power", "0%"),
                  ("cost_of_capital", "per year",
                   "Annual cost of capital (discount rate) of bought servers; 0 = straight-line "
                   "write-off", "0.0%"),
                  ("residual_value", "fraction",
                   "What a server sells for at the end of its life, as a share of its price", "0%"))
#: The price table's wrapped columns [characters]: narrower than the plan's, whose Assumptions
#: print two pages across anyway, so that this one prints on one page across at a legible size.
COMPARE_WRAPPED = {"source": 32, "warning": 20}


@dataclass(frozen=True)
class Metric:
    """One row of the Options sheet: its column in the comparison table, label, format and
    formula (``{name}`` placeholders are cells of the same option or defined names)."""

    name: str
    label: str
    number_format: str
    formula: str | None = None


METRICS = (
    Metric("tp", "Tensor parallel (GPUs per replica)", MONTHS),
    Metric("capacity_req_s", "Capacity per replica (requests/s)", RATE),
    Metric("replicas", "Replicas", MONTHS),
    Metric("gpus_needed", "GPUs", MONTHS),
    Metric("nodes", "Nodes", MONTHS),
    Metric("power_kw", "Power (kW)", KW, "{nodes}*{kw}"),
    *(Metric(f"rent_{k}_usd_per_month", f"Rent, {k.replace('_', ' ')} (USD/month)", MONEY,
             f"{{gpus_needed}}*{{price_{k}}}*in_hours_per_month") for k in RENT_TYPES),
    Metric("usd_per_m_output_tokens_on_demand", "Rent on demand per 1M output tokens (USD)", PER_TOKEN,
           "{rent_on_demand_usd_per_month}/(in_output_tokens_per_hour*in_hours_per_month)*1000000"),
    Metric("capex_usd", "Buy: servers (USD)", MONEY, "{nodes}*{server}"),
    Metric("buy_opex_usd_per_month", "Buy: power and hosting (USD/month)", MONEY,
           "{nodes}*{kw}*in_power_load*in_pue*in_hours_per_month*in_usd_per_kwh+{nodes}*{hosting}"),
    # PMT: the level payment repaying the servers less their resale's present value (rent_or_buy)
    Metric("buy_capital_usd_per_month",
           "Buy: servers' capital recovered over their life (USD/month)", MONEY,
           "PMT((1+in_cost_of_capital)^(1/12)-1,12*{life},-{capex_usd},"
           "{capex_usd}*in_residual_value)"),
    Metric("buy_usd_per_month", "Buy: capital, power and hosting (USD/month)", MONEY,
           "{buy_capital_usd_per_month}+{buy_opex_usd_per_month}"),
    Metric("usd_per_m_output_tokens_buy", "Buy per 1M output tokens (USD)", PER_TOKEN,
           "{buy_usd_per_month}/(in_output_tokens_per_hour*in_hours_per_month)*1000000"),
    Metric("tco_1y_on_demand_usd", "1 year: rent on demand (USD)", MONEY, "12*{rent_on_demand_usd_per_month}"),
    Metric("tco_1y_reserved_usd", "1 year: reserve 1 year (USD)", MONEY, "12*{rent_reserved_1y_usd_per_month}"),
    Metric("tco_1y_buy_usd", "1 year: buy (USD)", MONEY, "{capex_usd}+12*{buy_opex_usd_per_month}"),
    Metric("tco_3y_on_demand_usd", "3 years: rent on demand (USD)", MONEY, "36*{rent_on_demand_usd_per_month}"),
    Metric("tco_3y_reserved_usd", "3 years: reserve 3 years (USD)", MONEY, "36*{rent_reserved_3y_usd_per_month}"),
    Metric("tco_3y_buy_usd", "3 years: buy (USD)", MONEY, "{capex_usd}+36*{buy_opex_usd_per_month}"),
    Metric("break_even_months_vs_on_demand", "Buying breaks even with renting on demand after (months)", MONTHS,
           'IF({rent_on_demand_usd_per_month}>{buy_opex_usd_per_month},{capex_usd}/'
           '({rent_on_demand_usd_per_month}-{buy_opex_usd_per_month}),"never")'),
    Metric("break_even_months_vs_reserved_3y", "... with a 3-year reservation after (months)", MONTHS,
           'IF({rent_reserved_3y_usd_per_month}>{buy_opex_usd_per_month},{capex_usd}/'
           '({rent_reserved_3y_usd_per_month}-{buy_opex_usd_per_month}),"never")'),
)


def write_compare_xlsx(table: pd.DataFrame, path: str | Path, *, params: dict,
                       workload: Mapping[str, Any] | None = None, catalogs: Any = None,
                       price_rule: str = "") -> Path:
    """Write the comparison workbook; ``params``: hours_per_month, usd_per_kwh, pue, power_load
    (the cost of capital and resale value come from the table, ``rent_or_buy.financing_of``);
    ``workload``: the compared workload (model, quant, demand_req_s, lengths, SLOs)."""
    workload = dict(workload or {})
    params = {**params, **financing_of(table)}
    subject = f"Rent or buy: {workload.get('model', 'workload')}"
    book = Book(header=PrintHeader(subject))
    wb = book.wb
    wb.active.title = "Summary"
    for title in ("Options", "Assumptions", "Sources"):
        wb.create_sheet(title)
    names = _assumptions(book, table, params, workload)
    cells = _options(book, table, names, params, workload)
    summary_sheet(book, table, cells, workload, price_rule)
    record = provenance("compare", {**params, **workload, "price_rule": price_rule,
                                    "prices_used": _price_records(table)}, catalogs=catalogs)
    ids = {"gpu": list(table["gpu"]), "model": [workload.get("model", "")], "quant": [workload.get("quant", "")]}
    # the options' capacities are estimated with the workload's engine, else the default one
    used = catalog_rows(catalogs, ids, prices=_price_records(table), extra=("ownership",),
                        engine=workload.get("engine") or WILDCARD)
    book.pages["Sources"] = sources_sheet(wb["Sources"], record, used)
    # the ranking and the options each read on one page; the inputs and sources are as long as
    # the price rows and catalog rows behind them, printed fit to width over as many pages
    book.pages.update({"Summary": PageOptions(one_page=True), "Options": PageOptions(one_page=True),
                       "Assumptions": PageOptions()})
    set_properties(wb, "fleetplan rent-or-buy comparison", subject, "fleetplan, rent or buy, GPU, TCO")
    return book.save(path)


def _price_records(table: pd.DataFrame) -> list[dict]:
    """The chosen rental price rows of every option (gpu, pricing type, price and provenance)."""
    records = []
    for row in table.to_dict("records"):
        for kind in RENT_TYPES:
            price = row.get(f"price_{kind}_usd_per_gpu_hour")
            if price is None or not math.isfinite(float(price)):
                continue
            provider, _, region = str(row.get(f"price_{kind}_provider", "")).partition(" ")
            records.append({"gpu": row["gpu"], "pricing_type": kind, "usd_per_gpu_hour": float(price),
                            "provider": provider, "region": region, "as_of": row.get(f"price_{kind}_as_of", ""),
                            "same_provider_on_demand_usd_per_gpu_hour":
                                row.get(f"price_{kind}_same_provider_on_demand_usd_per_gpu_hour"),
                            "warning": row.get(f"price_{kind}_warning", ""),
                            "source": row.get(f"price_{kind}_source", "")})
    return records


def _assumptions(book: Book, table: pd.DataFrame, params: dict, workload: dict) -> dict[tuple[str, str], str]:
    """Inputs with defined names: general settings, rental prices, server quotes. Returns
    ``{(gpu, input): defined name}`` (inputs: ``price_<type>``, ``server``, ``kw``, ``life``,
    ``hosting``)."""
    sheet = Assumptions(book.wb["Assumptions"])
    sheet.section("General", "Edit the yellow cells: every cost on Options and Summary recalculates.")
    for name, unit, text, number_format in GENERAL_INPUTS:
        if name in params:
            sheet.scalar(f"in_{name}", float(params[name]), unit, text, number_format, label=label_of(name))
    hours = float(params.get("hours_per_month", math.nan))
    tokens = float(table["output_tokens_per_month"].iloc[0]) / hours if len(table) else math.nan
    sheet.scalar("in_output_tokens_per_hour", tokens, "tokens/hour", "Output tokens an hour at the demand (fixed: "
                 "the fleet was sized for it)", "#,##0", editable=False, named=True, label="Output tokens per hour")
    _workload_rows(sheet, workload)
    sheet.row += 1
    # the servers before the rental prices: the last table, the longest, repeats its header on
    # each page it runs on (xlsx_page_breaks)
    sheet.section("Servers to buy",
                  "Price, power, life and hosting of one node (ownership catalog), all inputs.")
    names = _server_rows(book, sheet, table)
    sheet.section("Rental prices", "USD per GPU-hour chosen by the price rule on Summary; each with the "
                  "provider, date and source of its row.")
    prices = pd.DataFrame(_price_records(table))
    if not prices.empty:  # one column for both: the sheet prints at a legible size
        prices["provider"] = (prices["provider"] + " " + prices.pop("region")).str.strip()
        for (gpu, kind), name in sheet.prices(prices, keys=["gpu", "pricing_type"],
                                              wrapped=COMPARE_WRAPPED).items():
            names[(gpu, f"price_{kind}")] = name
    sheet.finish()
    return names


def _workload_rows(sheet: Assumptions, workload: dict) -> None:
    shown = [("model", ""), ("quant", ""), ("demand_req_s", "requests/s"), ("input_len", "tokens"),
             ("output_len", "tokens"), ("tpot_slo_ms", "ms"), ("ttft_slo_ms", "ms"), ("utilization", "fraction")]
    sheet.row += 1
    sheet.section("Workload", "What the options were sized for (fixed: change them and run fleetplan compare).")
    for name, unit in shown:
        value = workload.get(name)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        number_format = "0%" if unit == "fraction" else None
        sheet.scalar(name, value, unit, "", number_format, editable=False)


def _server_rows(book: Book, sheet: Assumptions, table: pd.DataFrame) -> dict[tuple[str, str], str]:
    ws, first = sheet.ws, sheet.row
    headers = ["GPU", *[label for _, label, _, _ in SERVER_INPUTS]]
    style_header(ws, first, 1, headers)
    taken = set(book.wb.defined_names.keys())
    names = {}
    for offset, record in enumerate(table.to_dict("records"), start=1):
        put(ws, first + offset, 1, record["gpu"])
        for column, (field, _, prefix, number_format) in enumerate(SERVER_INPUTS, start=2):
            value = record.get(field)
            if value is None or not math.isfinite(float(value)):
                put(ws, first + offset, column, "not listed", font=NOTE_FONT)
                continue
            cell = put_input(ws, first + offset, column, float(value), number_format)
            names[(record["gpu"], prefix)] = defined_name(prefix, record["gpu"], taken=taken)
            define_name(book.wb, names[(record["gpu"], prefix)], ws, cell.coordinate)
    add_table(ws, "Servers", first, 1, headers, len(table))
    put(ws, first + len(table) + 1, 1, "Each quote's sources (price, power, hosting, life) are on Sources.",
        font=NOTE_FONT)
    sheet.row = first + len(table) + 3
    return names


def _options(book: Book, table: pd.DataFrame, names: dict, params: dict, workload: dict) -> dict[str, dict]:
    """One column per option, one row per metric; returns ``{gpu: {metric: coordinate}}``."""
    ws = book.wb["Options"]
    row = title_block(ws, "Options: rent or buy, per GPU", "Each cost is a formula over Assumptions; GPUs "
                      "and nodes were sized by the performance model for the workload there.")
    style_header(ws, row, 1, ["Per option", *list(table["gpu"])])
    cells: dict[str, dict] = {gpu: {} for gpu in table["gpu"]}
    for offset, metric in enumerate(METRICS, start=1):
        put(ws, row + offset, 1, metric.label)
        for column, record in enumerate(table.to_dict("records"), start=2):
            cells[record["gpu"]][metric.name] = f"{get_column_letter(column)}{row + offset}"
    for offset, metric in enumerate(METRICS, start=1):
        for column, record in enumerate(table.to_dict("records"), start=2):
            _option_cell(book, ws, row + offset, column, metric, record, names, cells[record["gpu"]])
    set_widths(ws, {1: 52, **{c: 16 for c in range(2, len(table) + 2)}})
    ws.freeze_panes = f"B{row + 1}"
    return cells


def _option_cell(book: Book, ws, row: int, column: int, metric: Metric, record: dict, names: dict,
                 own: dict) -> None:
    value = record.get(metric.name)
    number = float(value) if isinstance(value, (int, float, np.floating)) else math.nan
    formula = _formula(metric, record["gpu"], names, own)
    if metric.name.startswith("break_even") and math.isinf(number):
        put(ws, row, column, "never")
    elif formula is not None and math.isfinite(number):
        book.formulas.put(ws, row, column, formula, number, metric.number_format)
    elif math.isfinite(number):
        put(ws, row, column, number, metric.number_format)
    else:
        put(ws, row, column, "not listed", font=NOTE_FONT)
    ws.cell(row=row, column=column).alignment = Alignment(horizontal="right")


def _formula(metric: Metric, gpu: str, names: dict, own: dict) -> str | None:
    """The metric's formula for one option, or None when an input it needs is missing."""
    if metric.formula is None:
        return None
    lookups = {**own, **{key: name for (g, key), name in names.items() if g == gpu}}
    try:
        return metric.formula.format(**lookups)
    except KeyError:
        return None
