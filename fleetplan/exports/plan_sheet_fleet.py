"""Plan workbook: the Fleet sheet, one row per configuration and pricing type chosen.

Replica counts are the optimizer's decisions; each row's price is a live reference to its
defined name on Assumptions (``price_h100_sxm_on_demand``, times ``..._term`` for a reserved
term charged past the horizon), and its costs are formulas on that price and
``hours_per_month``. The price's provider, region and date are shown next to it.
"""

from __future__ import annotations

import numpy as np
from openpyxl.utils.cell import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports import plan_quantities
from fleetplan.exports.xlsx_common import (
    INTEGER,
    LABEL_FONT,
    NOTE_FONT,
    USD,
    USD_WHOLE,
    put,
    set_widths,
    title_block,
)
from fleetplan.exports.xlsx_live import LiveColumn, Placed, name_range, write_live_table
from fleetplan.exports.xlsx_package import Book


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
    sureness = [LiveColumn(c, fleet[c].tolist(),
                           number_format=None if c == "calibration" else "0.0")
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
