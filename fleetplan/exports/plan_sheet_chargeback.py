"""Plan workbook: the Chargeback sheet, who pays what share of the plan per team and month.

The charges are ``fleetplan.optimizer.chargeback``'s, to the cent: each month's charges per
team and cost center are numbers (the allocation's result); the per-team totals sum their
block of months, the cost per million tokens divides live, and the total row equals the plan's
cost.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports import plan_quantities
from fleetplan.exports.xlsx_common import (
    DECIMAL,
    LABEL_FONT,
    NOTE_FONT,
    PERCENT,
    USD,
    USD_PRECISE,
    put,
    set_widths,
    title_block,
)
from fleetplan.exports.xlsx_live import LiveColumn, Placed, write_live_table
from fleetplan.exports.xlsx_package import Book
from fleetplan.exports.xlsx_print import PageOptions
from fleetplan.optimizer.chargeback import chargeback_table, spare_rule

MONTH = "mmm yyyy"
MONEY = ("usd", "used_usd", "spare_usd")
HEADERS = {"month": "Month", "team": "Team", "cost_center": "Cost center", "usd": "Cost (USD)",
           "share": "Share of the plan (%)", "used_usd": "Used capacity (USD)",
           "spare_usd": "Spare capacity (USD)", "tokens_m": "Tokens served (millions)",
           "usd_per_m_tokens": "Cost per 1M tokens (USD)"}
#: Narrowest column widths [characters]: headers of two lines at most.
MIN_WIDTHS = {1: 14, 2: 12, 3: 14, 4: 14, 5: 15, 6: 15, 7: 15, 8: 15}
_RULES = {"usage": "by usage: the workloads on the same replicas pay it",
          "even": "evenly: each team an equal share"}


def rule_text(plan) -> str:
    """The spare-capacity rule in words."""
    rule = spare_rule(plan)
    return _RULES.get(rule, f"to team {rule.removeprefix('owner:')}")


def chargeback_sheet(book: Book, ws: Worksheet, plan, start: dt.date) -> PageOptions:
    """Totals per team and cost center on top, then the charges per month below them."""
    row = title_block(ws, "Chargeback", "Every dollar of the plan, charged to each team by the "
                      "tokens its workloads process on the replicas they use.")
    put(ws, row - 1, 1, f"Spare capacity (N+k spares, rounding up, idle GPUs) is charged "
        f"{rule_text(plan)}.", font=NOTE_FONT)
    monthly = chargeback_table(plan)
    if monthly.empty:
        put(ws, row, 1, "The plan has no charges (no solution, or nothing to serve).", font=NOTE_FONT)
        return PageOptions()
    monthly = monthly.assign(tokens_m=monthly["tokens"] / 1e6).sort_values(
        ["team", "cost_center", "month"], kind="stable").reset_index(drop=True)
    teams = monthly.groupby(["team", "cost_center"], as_index=False, sort=False)[
        [*MONEY, "tokens_m"]].sum()
    widths: dict[int, float] = {}
    month_row = row + len(teams) + 4  # header, teams, total row, a blank row, the label
    team_placed = _team_table(book, ws, row, teams, month_row + 1, monthly, widths)
    _total_row(book, ws, team_placed, teams)
    put(ws, month_row - 1, 1, "By month", font=LABEL_FONT)
    write_live_table(book, ws, month_row, _month_columns(monthly, start), "ChargebackByMonth", widths)
    set_widths(ws, {column: max(width, MIN_WIDTHS.get(column, 0)) for column, width in widths.items()})
    return PageOptions()


def _per_m_tokens(usd: str, tokens: str, values: pd.DataFrame) -> LiveColumn:
    """Cost per million tokens, live where there are tokens."""
    tokens_m = values["tokens_m"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(tokens_m > 0, values["usd"].to_numpy(float) / tokens_m, np.nan)
    return LiveColumn("usd_per_m_tokens", per.tolist(),
                      lambda i, r: f"{usd}{r}/{tokens}{r}" if tokens_m[i] > 0 else None,
                      number_format=USD_PRECISE, header=HEADERS["usd_per_m_tokens"])


def _month_columns(monthly: pd.DataFrame, start: dt.date) -> list[LiveColumn]:
    dates = [plan_quantities.month_start(start, m) for m in monthly["month"]]
    columns = [LiveColumn("month", dates, number_format=MONTH, header=HEADERS["month"]),
               LiveColumn("team", monthly["team"].tolist(), header=HEADERS["team"]),
               LiveColumn("cost_center", monthly["cost_center"].tolist(), header=HEADERS["cost_center"])]
    columns += [LiveColumn(name, monthly[name].tolist(), number_format=USD, header=HEADERS[name])
                for name in MONEY]
    columns.append(LiveColumn("tokens_m", monthly["tokens_m"].tolist(), number_format=DECIMAL,
                              header=HEADERS["tokens_m"]))
    columns.append(_per_m_tokens("D", "G", monthly))
    return columns


def _team_table(book: Book, ws: Worksheet, row: int, teams: pd.DataFrame, first_month_row: int,
                monthly: pd.DataFrame, widths: dict[int, float]) -> Placed:
    """Per team and cost center: sums of its block of rows in the monthly table (sorted by team
    and cost center, so each block is contiguous)."""
    sizes = monthly.groupby(["team", "cost_center"], sort=False).size().to_numpy()
    ends = first_month_row + np.cumsum(sizes) - 1
    starts = ends - sizes + 1
    source = {"usd": "D", "used_usd": "E", "spare_usd": "F", "tokens_m": "G"}

    def block_sum(name: str):
        letter = source[name]
        return lambda i, r: f"SUM({letter}{starts[i]}:{letter}{ends[i]})"

    total = float(teams["usd"].sum()) or 1.0
    columns = [LiveColumn("team", teams["team"].tolist(), header=HEADERS["team"]),
               LiveColumn("cost_center", teams["cost_center"].tolist(), header=HEADERS["cost_center"]),
               LiveColumn("usd", teams["usd"].tolist(), block_sum("usd"), number_format=USD,
                          header=HEADERS["usd"]),
               LiveColumn("share", (teams["usd"] / total).tolist(),
                          lambda i, r: f"C{r}/C{row + len(teams) + 1}", number_format=PERCENT,
                          header=HEADERS["share"])]
    columns += [LiveColumn(name, teams[name].tolist(), block_sum(name),
                           number_format=DECIMAL if name == "tokens_m" else USD, header=HEADERS[name])
                for name in ("used_usd", "spare_usd", "tokens_m")]
    columns.append(_per_m_tokens("C", "G", teams))
    return write_live_table(book, ws, row, columns, "ChargebackByTeam", widths)


def _total_row(book: Book, ws: Worksheet, placed: Placed, teams: pd.DataFrame) -> None:
    """Sums of the team table under it; the cost is the plan's total to the cent."""
    row = placed.last + 1
    put(ws, row, 1, "Total", font=LABEL_FONT)
    sums = {"usd": "C", "used_usd": "E", "spare_usd": "F", "tokens_m": "G"}
    for name, letter in sums.items():
        number_format = DECIMAL if name == "tokens_m" else USD
        cell = book.formulas.put(ws, row, ord(letter) - 64,
                                 f"SUM({letter}{placed.first}:{letter}{placed.last})",
                                 float(teams[name].sum()), number_format)
        cell.font = LABEL_FONT
    book.formulas.put(ws, row, 4, f"C{row}/C{row}", 1.0, PERCENT)
    tokens = float(teams["tokens_m"].sum())
    if tokens > 0:
        book.formulas.put(ws, row, 8, f"C{row}/G{row}", float(teams["usd"].sum()) / tokens, USD_PRECISE)
