"""Plan workbook: the Supply sheet, shown when the scenario has sites or hosted APIs.

Power: kW at peak and on average, the limit and MWh per site and calendar month (facility
power of the GPUs bought on the site, PUE included). Hosted APIs: per workload, API and month
the requests, tokens and dollars sent to the API and their share of the workload's requests;
then the break-even per workload and API: the request rate above which one replica of its
cheapest configuration costs less per hour than the API (``fleetplan.optimizer.hosted_apis``).
The figures are the plan's own numbers: the API split is the optimizer's decision.
"""

from __future__ import annotations

import datetime as dt
import math

import pandas as pd
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports import plan_quantities
from fleetplan.exports.xlsx_common import (
    DECIMAL,
    INTEGER,
    LABEL_FONT,
    NOTE_FONT,
    PERCENT,
    USD,
    put,
    set_widths,
    title_block,
    wrap,
)
from fleetplan.exports.xlsx_print import PageOptions
from fleetplan.exports.xlsx_sheets import write_frame

MONTH = "mmm yyyy"
#: Number formats by column: kW and MWh to a tenth, counts whole, a request's price to 1e-6 USD.
FORMATS = {"month": MONTH, "kw_peak": DECIMAL, "kw_mean": DECIMAL, "kw_limit": DECIMAL,
           "mwh": DECIMAL, "requests": INTEGER, "tokens": INTEGER, "usd": USD, "share": PERCENT,
           "usd_per_request": '"$"0.000000', "replica_usd_per_hour": USD,
           "replica_req_s": DECIMAL, "break_even_req_s": DECIMAL,
           "break_even_tokens_per_month": INTEGER}
#: The break-even rate when self-hosting never wins on price.
NEVER = "never (the API costs less than a full replica)"


def has_supply(plan) -> bool:
    """True when the scenario has a site with a power envelope or a hosted API."""
    fleet = plan.scenario.get("fleet") or {}
    return bool(fleet.get("sites") or fleet.get("apis") or not plan.power.empty
                or not plan.api_break_even.empty)


def _dated(table: pd.DataFrame, start: dt.date) -> pd.DataFrame:
    return table.assign(month=[plan_quantities.month_start(start, int(m)) for m in table["month"]])


def supply_sheet(ws: Worksheet, plan, start: dt.date) -> PageOptions:
    """Power per site and month, then API use and break-even, one table after the other."""
    row = title_block(ws, "Supply", "Power drawn on each site with an envelope, and the demand "
                      "sent to hosted model APIs.")
    widths: dict[int, float] = {}
    if not plan.power.empty:
        put(ws, row, 1, "Power per site and month (facility kW of the GPUs bought there)",
            font=LABEL_FONT)
        power = _dated(plan.power, start)[["site", "month", "kw_peak", "kw_mean", "kw_limit",
                                           "mwh"]]
        row = write_frame(ws, power, row + 1, "SupplyPower", widths, formats=FORMATS) + 1
    if not plan.api_break_even.empty:
        row = _api_tables(ws, plan, start, row, widths)
    set_widths(ws, widths)
    return PageOptions()


def _api_tables(ws: Worksheet, plan, start: dt.date, row: int, widths: dict) -> int:
    put(ws, row, 1, "Sent to hosted APIs per workload and month", font=LABEL_FONT)
    usage = plan.api_usage
    if usage.empty:
        put(ws, row + 1, 1, "The plan sends no requests to an API: replicas are cheaper at "
            "every hour's load.", font=NOTE_FONT)
        row += 3
    else:
        shown = _dated(usage, start)[["workload", "api", "month", "requests", "tokens", "usd",
                                      "share"]]
        row = write_frame(ws, shown, row + 1, "SupplyApiUsage", widths, formats=FORMATS) + 1
    put(ws, row, 1, "Break-even: self-hosting wins above this request rate", font=LABEL_FONT)
    table = plan.api_break_even.copy()
    table["break_even_req_s"] = [rate if math.isfinite(rate) else NEVER
                                 for rate in table["break_even_req_s"]]
    table["break_even_tokens_per_month"] = [
        tokens if math.isfinite(tokens) else NEVER for tokens in table["break_even_tokens_per_month"]]
    row = write_frame(ws, table, row + 1, "SupplyBreakEven", widths, formats=FORMATS) + 1
    note = put(ws, row, 1, "Break-even rate = replica USD per hour / (3600 x API USD per "
               "request), for the cheapest replica that can carry that rate at the target "
               "utilization; per replica, without node sizes, spares, reserved terms or the "
               "hourly profile, which the plan itself accounts for.", font=NOTE_FONT)
    ws.merge_cells(start_row=row, start_column=1, end_row=row, end_column=8)
    wrap(ws, note, 120)
    return row + 2
