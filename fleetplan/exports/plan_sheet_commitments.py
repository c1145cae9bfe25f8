"""Plan workbook: the Commitments sheet, what each commitment option risks under uncertain
demand, with a chart of cost against committed capacity in every demand scenario.

The numbers are ``fleetplan.optimizer.commitment_risk``'s: each option's first stage fixed and
its recourse re-solved per scenario. Per option (one row, sorted by committed GPUs): expected,
P90 and CVaR cost per month as numbers; cost-at-risk (P90 minus expected) and the expected cost
above the stochastic plan's as live formulas; then each scenario's cost and the commitment's
utilisation in it. The VSS is the P50-only row's cost above the stochastic plan.
"""

from __future__ import annotations

import pandas as pd
from openpyxl.chart import Reference, ScatterChart, Series
from openpyxl.chart.marker import Marker
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports.xlsx_common import (
    LABEL_FONT,
    NOTE_FONT,
    PERCENT,
    USD_WHOLE,
    clean_text,
    put,
    set_widths,
    title_block,
)
from fleetplan.exports.xlsx_live import LiveColumn, Placed, write_live_table
from fleetplan.exports.xlsx_package import Book
from fleetplan.exports.xlsx_print import PageOptions
from fleetplan.optimizer.commitment_risk import value_of_stochastic_solution

#: The chart's height and width [cm].
CHART_CM = (9.0, 18.0)
_PALETTE = ("2CA02C", "1F77B4", "FF7F0E", "9467BD", "8C564B", "E377C2", "17BECF", "BCBD22")
_NOTES = (
    "Each option fixes the reserved capacity (the commitment, bought once for every outcome) "
    "and re-plans on-demand and spot capacity for each demand scenario. USD per month.",
    "P90: the cost not exceeded with 90 % probability. Cost-at-risk = P90 - expected: what a bad "
    "outcome costs beyond the expected cost. CVaR: the mean cost of the worst outcomes. "
    "Re-solve status time_limit: the recourse was found, not proven the cheapest, in time; "
    "plan: the plan's own recourse, as no re-solve was found in time; lp_rounded: the LP "
    "relaxation rounded up to whole replicas; no_solution: not priced in time.",
)


def option_table(commitments: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One row per option (sorted by committed GPUs) with ``usd:<scenario>`` and
    ``utilization:<scenario>`` columns, and the scenario names in order."""
    scenarios = list(dict.fromkeys(commitments["scenario"]))
    options = commitments.drop_duplicates("option").set_index("option")
    wide = commitments.pivot(index="option", columns="scenario")
    for name in scenarios:
        options[f"usd:{name}"] = wide[("usd_per_month", name)]
        options[f"utilization:{name}"] = wide[("utilization", name)]
    options = options.reset_index().sort_values("reserved_gpus", kind="stable")
    return options.reset_index(drop=True), scenarios


def commitments_sheet(book: Book, ws: Worksheet, plan) -> PageOptions:
    """The risk table, the VSS and the chart (see the module docstring)."""
    row = title_block(ws, "Commitments", _NOTES[0])
    put(ws, row - 1, 1, _NOTES[1], font=NOTE_FONT)
    options, scenarios = option_table(plan.commitments)
    risk = plan.assumptions.get("stochastic") or {}
    vss = value_of_stochastic_solution(plan.commitments)
    put(ws, row, 1, "Value of the stochastic solution (VSS, USD per month)", font=LABEL_FONT)
    put(ws, row, 4, vss, USD_WHOLE)
    median = risk.get("p50_scenario", "P50")
    put(ws, row + 1, 1, f"The P50-only plan (committing as if the {median} scenario were "
        "certain) costs this much more in expectation.", font=NOTE_FONT)
    widths: dict[int, float] = {}
    placed = write_live_table(book, ws, row + 3, _columns(options, scenarios, row + 4),
                              "CommitmentRisk", widths)
    set_widths(ws, {column: max(width, 12) for column, width in widths.items()})
    _chart(ws, placed, scenarios, f"A{placed.last + 2}")
    return PageOptions()


def _columns(options: pd.DataFrame, scenarios: list[str], first: int) -> list[LiveColumn]:
    stochastic = first + int((options["option"] == "stochastic").to_numpy().argmax())
    columns = [
        LiveColumn("option", options["option"].tolist(), header="Commitment option"),
        LiveColumn("reserved_gpus", options["reserved_gpus"].tolist(), number_format="#,##0",
                   header="Reserved GPUs"),
        LiveColumn("expected", options["expected_usd_per_month"].tolist(), number_format=USD_WHOLE,
                   header="Expected cost"),
        LiveColumn("p90", options["p90_usd_per_month"].tolist(), number_format=USD_WHOLE,
                   header="P90 cost"),
        LiveColumn("cvar", options["cvar_usd_per_month"].tolist(), number_format=USD_WHOLE,
                   header="CVaR"),
        LiveColumn("cost_at_risk", options["cost_at_risk_usd_per_month"].tolist(),
                   lambda i, r: f"D{r}-C{r}", number_format=USD_WHOLE, header="Cost-at-risk"),
        LiveColumn("over_stochastic", options["over_stochastic_usd_per_month"].tolist(),
                   lambda i, r: f"C{r}-C${stochastic}", number_format=USD_WHOLE,
                   header="Above the stochastic plan"),
    ]
    columns += [LiveColumn(f"usd:{name}", options[f"usd:{name}"].tolist(),
                           number_format=USD_WHOLE, header=f"Cost if {name}")
                for name in scenarios]
    columns += [LiveColumn(f"utilization:{name}", options[f"utilization:{name}"].tolist(),
                           number_format=PERCENT, header=f"Commitment used if {name}")
                for name in scenarios]
    columns.append(LiveColumn("status", options["status"].tolist(), header="Re-solve status"))
    return columns


def _chart(ws: Worksheet, placed: Placed, scenarios: list[str], anchor: str) -> None:
    """Cost per month against reserved GPUs: one line per scenario, and the expected cost."""
    chart = ScatterChart()
    chart.title = "Cost per month against reserved GPUs, per demand scenario"
    chart.style = 13
    chart.x_axis.title, chart.y_axis.title = "reserved GPUs", "USD per month"
    chart.x_axis.delete = chart.y_axis.delete = False
    chart.x_axis.numFmt, chart.y_axis.numFmt = "0", '"$"#,##0'
    chart.legend.position = "b"
    chart.height, chart.width = CHART_CM
    x_values = Reference(ws, min_col=2, min_row=placed.first, max_row=placed.last)
    lines = [("expected", 3), *((name, 8 + i) for i, name in enumerate(scenarios))]
    for number, (label, column) in enumerate(lines):
        y_values = Reference(ws, min_col=column, min_row=placed.first, max_row=placed.last)
        series = Series(y_values, x_values, title=clean_text(label) or " ")
        series.smooth = False
        series.marker = Marker(symbol="circle", size=5)
        series.graphicalProperties.line.solidFill = _PALETTE[number % len(_PALETTE)]
        if label == "expected":
            series.graphicalProperties.line.width = 32000
        chart.series.append(series)
    ws.add_chart(chart, anchor)

