"""Plan workbook: the costs without GPUs, hosted-API tokens and the fixed cost per configuration,
as live formulas on inputs of the Assumptions sheet.

Two working tables on the Costs sheet hold what the optimizer decided, per month of the plan
(an average month of its month index, as ``costs_by_month``):

- API tokens, per (month, workload, API): prompt and output tokens sent to the API [tokens];
  ``usd = input_tokens / 1e6 * price_<api>_input + output_tokens / 1e6 * price_<api>_output``
  (``hosted_apis.usd_per_request`` summed over the requests).
- Configuration-months, per (month, configuration, workload): the workload's part of the months
  the configuration runs, split by load-hours as the optimizer splits its fixed cost
  (``config_fixed_cost.fixed_cost_by_workload``; a month without load is ``(spare)``)
  [configuration-months]; ``usd = config_months * config_fixed_usd_per_month``.

Costs by pricing type, workload and month add these tables' ``api_usd`` and ``fixed_usd``
columns to the GPU usage, so a changed API price or fixed cost recalculates every total.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports import plan_quantities
from fleetplan.exports.xlsx_common import INTEGER, NOTE_FONT, USD_WHOLE, put
from fleetplan.exports.xlsx_live import LiveColumn, name_range, write_live_table
from fleetplan.exports.xlsx_package import Book
from fleetplan.exports.xlsx_sheets import Assumptions
from fleetplan.optimizer.api_supply import api_costs_by_period
from fleetplan.optimizer.config_fixed_cost import workload_shares
from fleetplan.optimizer.fleet_problem import month_keys

#: The workload a configuration-month without load is charged to (``costs_by_workload``).
SPARE = "(spare)"
#: Token kinds an API prices, and the scenario's price field of each.
TOKEN_PRICES = {"input": "usd_per_1m_input_tokens", "output": "usd_per_1m_output_tokens"}
API_COLUMNS = ["month", "workload", "api", "input_tokens", "output_tokens"]
FIXED_COLUMNS = ["month", "config", "workload", "config_months"]


def api_prices(plan) -> pd.DataFrame:
    """api, provider, model, usd_per_1m_input_tokens, usd_per_1m_output_tokens, as_of, source
    of the scenario's hosted APIs."""
    apis = (plan.scenario.get("fleet") or {}).get("apis") or []
    columns = ["api", "provider", "model", *TOKEN_PRICES.values(), "as_of", "source"]
    table = pd.DataFrame([{**a, "api": a.get("name")} for a in apis])
    return table.reindex(columns=columns)


def _per_month(plan, rows: pd.DataFrame, keys: list[str], amounts: list[str]) -> pd.DataFrame:
    """:func:`plan_quantities.average_month`, one month standing for the whole horizon
    repeated over its months."""
    table = plan_quantities.average_month(plan, rows, keys, amounts)
    return plan_quantities.spread_months(table, plan_quantities.plan_months(plan, table))


def api_token_table(plan) -> pd.DataFrame:
    """month, workload, api, input_tokens, output_tokens sent to hosted APIs [tokens in the
    month]; empty without API routing or with a plan written before routing kept the
    prompt and output lengths."""
    routing = _with_lengths(plan.api_routing, plan.candidates)
    if routing.empty or plan.periods.empty:
        return pd.DataFrame(columns=API_COLUMNS)
    requests = api_costs_by_period(routing, plan.periods)["requests"].to_numpy()
    rows = pd.DataFrame({"workload": routing["workload"], "api": routing["api"],
                         "month": routing["period"].map(plan.periods.set_index("period")["month"]),
                         "input_tokens": requests * routing["input_len"].to_numpy(float),
                         "output_tokens": requests * routing["output_len"].to_numpy(float)})
    table = _per_month(plan, rows, ["workload", "api"], ["input_tokens", "output_tokens"])
    return table[API_COLUMNS].sort_values(API_COLUMNS[:3]).reset_index(drop=True)


def _with_lengths(routing: pd.DataFrame, candidates: pd.DataFrame) -> pd.DataFrame:
    """API routing with each bucket's prompt and output lengths: its own, or for plans
    written before routing kept them, the candidates' of the same bucket (rows of buckets
    without candidates are dropped: their cost stays the plan's number)."""
    lengths = ["input_len", "output_len"]
    if routing.empty or set(lengths) <= set(routing):
        return routing
    if not {"workload", "bucket", *lengths} <= set(candidates):
        return routing.iloc[0:0]
    buckets = candidates[["workload", "bucket", *lengths]].drop_duplicates(["workload", "bucket"])
    return routing.merge(buckets, on=["workload", "bucket"])


def api_token_usd(table: pd.DataFrame, prices: pd.DataFrame) -> np.ndarray:
    """USD of each :func:`api_token_table` row at the APIs' prices [USD per month]."""
    by_api = prices.set_index("api")
    return sum(table[f"{kind}_tokens"].to_numpy(float) / 1e6
               * table["api"].map(by_api[column]).to_numpy(float)
               for kind, column in TOKEN_PRICES.items())


def _load_hours(plan) -> pd.DataFrame:
    """workload, config, period, load_hours: replicas' worth of load routed times hours."""
    load = plan_quantities.route_loads(plan)
    hours = load["period"].map(plan.periods.set_index("period")["hours"])
    return load.assign(load_hours=load["load"] * hours)


def config_month_table(plan) -> pd.DataFrame:
    """month, config, workload, config_months: each workload's part of the months each
    configuration runs [configuration-months], by its load-hours that month; months without
    load go to ``(spare)``."""
    fixed = plan.config_fixed_costs
    if fixed.empty or plan.periods.empty:
        return pd.DataFrame(columns=FIXED_COLUMNS)
    keys = month_keys(plan.periods)
    months = fixed[["config", *keys]].assign(
        config_months=fixed["usd"].to_numpy(float) / plan_quantities.fixed_price(plan))
    load = _load_hours(plan).merge(plan.periods[["period", *keys]], on="period")
    load = workload_shares(load, load["load_hours"], keys)
    split = months.merge(load[["config", *keys, "workload", "share"]], on=["config", *keys],
                         how="left")
    split["workload"] = split["workload"].fillna(SPARE)
    split["config_months"] *= split["share"].fillna(1.0)
    table = _per_month(plan, split, ["config", "workload"], ["config_months"])
    return table[FIXED_COLUMNS].sort_values(FIXED_COLUMNS[:3]).reset_index(drop=True)


@dataclass
class BeyondGpus:
    """The plan's API tokens and configuration-months with their USD, and the names of the
    Assumptions inputs that price them."""

    api: pd.DataFrame
    fixed: pd.DataFrame
    api_price_names: dict[tuple, str] = field(default_factory=dict)

    @classmethod
    def of(cls, plan, names: dict[tuple, str]) -> BeyondGpus:
        api, fixed = api_token_table(plan), config_month_table(plan)
        api = api.assign(usd=api_token_usd(api, api_prices(plan)) if len(api) else 0.0)
        fixed = fixed.assign(usd=fixed["config_months"].to_numpy(float)
                             * plan_quantities.fixed_price(plan)
                             if len(fixed) else 0.0)
        return cls(api, fixed, {k[1:]: v for k, v in names.items() if k[:1] == ("api",)})

    def parts(self) -> list[tuple[str, str, pd.DataFrame]]:
        """(pricing type, name prefix, table) of each non-empty table."""
        return [(kind, prefix, table) for kind, prefix, table in
                (("api", "api", self.api), ("config_fixed", "fixed", self.fixed)) if len(table)]

    def usd_by(self, column: str) -> pd.Series:
        """USD per month summed by ``column`` (``month`` or ``workload``) over both tables."""
        tables = [t[[column, "usd"]] for _, _, t in self.parts()]
        if not tables:
            return pd.Series(dtype=float)
        return pd.concat(tables).groupby(column)["usd"].sum()

    def term(self, test: str | None = None) -> str:
        """Formula text adding both tables' usd, all of it or where ``<prefix>_<test>``:
        ``+SUM(api_usd)`` or ``+SUMPRODUCT((api_month=A7)*api_usd)``."""
        if test is None:
            return "".join(f"+SUM({prefix}_usd)" for _, prefix, _ in self.parts())
        return "".join(f"+SUMPRODUCT(({prefix}_{test})*{prefix}_usd)"
                       for _, prefix, _ in self.parts())


def beyond_gpu_inputs(sheet: Assumptions, plan) -> dict[tuple, str]:
    """The fixed cost per configuration-month and the APIs' token prices as inputs on
    Assumptions; returns the API price names by ("api", api, "input" | "output")."""
    fixed, apis = plan.config_fixed_costs, api_prices(plan)
    if fixed.empty and apis.empty:
        return {}
    sheet.row += 1
    sheet.section("Costs beyond GPUs", "The fixed cost of running a configuration and the hosted "
                  "APIs' token prices; the tokens and configuration-months are the plan's.")
    if not fixed.empty:
        sheet.scalar("config_fixed_usd_per_month", plan_quantities.fixed_price(plan), "USD/month",
                     "Fixed cost per configuration and month it runs", USD_WHOLE)
        sheet.row += 1
    if apis.empty:
        return {}
    rows = apis.melt(id_vars=[c for c in apis if c not in TOKEN_PRICES.values()],
                     value_vars=list(TOKEN_PRICES.values()), var_name="tokens",
                     value_name="usd_per_1m_tokens")
    rows["tokens"] = rows["tokens"].map({v: k for k, v in TOKEN_PRICES.items()})
    rows = rows.sort_values(["api", "tokens"])[
        ["api", "tokens", "usd_per_1m_tokens", "provider", "model", "as_of", "source"]]
    names = sheet.prices(rows, keys=["api", "tokens"], table="ApiPrices",
                         price_column="usd_per_1m_tokens")
    return {("api", *key): name for key, name in names.items()}


def _api_columns(table: pd.DataFrame, prices: dict[tuple, str]) -> list[LiveColumn]:
    """Tokens sent to each API, priced by the API's input and output prices on Assumptions."""
    def usd(i: int, r: int) -> str:
        api = table["api"].iat[i]
        return (f"D{r}/1000000*{prices[(api, 'input')]}"
                f"+E{r}/1000000*{prices[(api, 'output')]}")
    return [LiveColumn("workload", table["workload"].tolist()),
            LiveColumn("api", table["api"].tolist()),
            LiveColumn("input_tokens", table["input_tokens"].tolist(), number_format=INTEGER,
                       header="Prompt tokens"),
            LiveColumn("output_tokens", table["output_tokens"].tolist(), number_format=INTEGER,
                       header="Output tokens"),
            LiveColumn("usd", table["usd"].tolist(), usd, None, USD_WHOLE)]


def _fixed_columns(table: pd.DataFrame) -> list[LiveColumn]:
    """Configuration-months per workload at the fixed cost per configuration-month."""
    return [LiveColumn("config", table["config"].tolist()),
            LiveColumn("workload", table["workload"].tolist()),
            LiveColumn("config_months", table["config_months"].tolist(),
                       number_format="#,##0.0000"),
            LiveColumn("usd", table["usd"].tolist(),
                       lambda i, r: f"D{r}*config_fixed_usd_per_month", None, USD_WHOLE)]


#: Per working table: its Excel table name and the note above it.
_TABLES = {
    "api": ("ApiTokens", "Working table: prompt and output tokens sent to each hosted API per "
            "month (decided by the optimizer), priced at the APIs' prices on Assumptions."),
    "config_fixed": ("ConfigMonths", "Working table: each workload's part of the months each "
                     "configuration runs (by load-hours; (spare): months without load), at the "
                     "fixed cost per configuration-month on Assumptions."),
}


def write_beyond_tables(book: Book, ws: Worksheet, row: int, beyond: BeyondGpus, dates,
                        widths: dict[int, float]) -> int:
    """The API token and configuration-month working tables from ``row``, their columns named
    ``api_month``, ``api_workload``, ``api_usd``, ``fixed_month``, ... ; ``dates`` turns month
    indices into dates. Returns the row after them."""
    for kind, prefix, table in beyond.parts():
        name, note = _TABLES[kind]
        put(ws, row, 1, note, font=NOTE_FONT)
        own = (_api_columns(table, beyond.api_price_names) if kind == "api"
               else _fixed_columns(table))
        columns = [LiveColumn("month", dates(table["month"]), number_format="mmm yyyy"), *own]
        placed = write_live_table(book, ws, row + 1, columns, name, widths)
        for column in ("month", "workload", "usd"):
            name_range(book, ws, f"{prefix}_{column}", placed, column)
        row = placed.last + 2
    return row
