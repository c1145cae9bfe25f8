"""A scenario's re-planning inputs as Problem tables: today's fleet, purchase prices, lead times.

- ``fleet.current`` rows (or a CSV of the same columns, :func:`read_current_csv`) become the
  ``existing`` table, the ``committed`` and ``owned`` offers and their price rows (provenance:
  the row's own monthly cost, or the ownership catalog row it was priced from);
- ``purchase`` in a GPU's pricing becomes an offer priced from the ownership catalog
  (``current_fleet.purchase_usd_per_gpu_hour``) unless the scenario gives its own price;
- ``fleet.gpus[].lead_time_months`` / ``max_new_gpus_per_month`` become ``lead_times`` rows.

A plan that re-plans (:func:`replans`) is solved month by month: end dates and lead times need
every month to be its own period.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd
from pydantic import ValidationError

from fleetplan.catalogs import Catalogs
from fleetplan.catalogs.input_files import read_csv_table
from fleetplan.errors import ScenarioError, UnknownNameError, did_you_mean
from fleetplan.optimizer.current_fleet import (
    EXISTING_COLUMNS,
    owned_usd_per_gpu_hour,
    purchase_usd_per_gpu_hour,
)
from fleetplan.optimizer.lead_times import LEAD_COLUMNS
from fleetplan.optimizer.scenario import Scenario
from fleetplan.optimizer.scenario_current import CURRENT_COLUMNS, CurrentGpus
from fleetplan.optimizer.scenario_files import TOP_LEVEL, error_message
from fleetplan.sweeps.rent_or_buy import financing_words


@dataclass
class ReplanTables:
    """existing and lead_times (Problem tables), offers and price rows to add, notes."""

    existing: pd.DataFrame
    lead_times: pd.DataFrame
    offers: pd.DataFrame
    prices: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def replans(scenario: Scenario) -> bool:
    """True when the scenario starts from a fleet, limits how it changes, or waits for GPUs."""
    return bool(replan_fields(scenario))


def replan_fields(scenario: Scenario) -> list[str]:
    """The re-planning fields the scenario sets (today's fleet, change limits, lead times)."""
    fleet = scenario.fleet
    named = {"fleet.current": bool(fleet.current),
             "fleet.max_changes_per_month": fleet.max_changes_per_month is not None,
             "fleet.min_committed_gpus": fleet.min_committed_gpus is not None,
             "fleet.gpus[].lead_time_months": any(o.lead_time_months for o in fleet.gpus),
             "fleet.gpus[].max_new_gpus_per_month": any(o.max_new_gpus_per_month is not None
                                                        for o in fleet.gpus)}
    return [name for name, given in named.items() if given]


def months_between(start: dt.date, end: dt.date) -> int:
    """Whole calendar months from ``start``'s month to ``end``'s month.

    >>> months_between(dt.date(2027, 1, 1), dt.date(2027, 5, 15))
    4
    """
    return (end.year - start.year) * 12 + end.month - start.month


def _canonical(catalogs: Catalogs, kind: str, name: str, path: str) -> str:
    try:
        return catalogs.require(kind, [name])[0]
    except UnknownNameError as problem:
        message = f"{path}: {problem}"
        raise ScenarioError(message) from None


def _ownership(catalogs: Catalogs, gpu: str) -> pd.Series | None:
    rows = catalogs.ownership[catalogs.ownership["gpu"] == gpu]
    return None if rows.empty else rows.iloc[0]


def _end_month(row: CurrentGpus, start: dt.date | None, path: str) -> float:
    if row.end_date is None:
        return math.nan if row.end_month is None else float(row.end_month)
    if start is None:
        message = f"{path}.end_date: needs fleet.start_date (the date of the plan's first month)"
        raise ScenarioError(message)
    return float(max(0, months_between(start, row.end_date)))


def _owned_price(scenario: Scenario, catalogs: Catalogs, row: CurrentGpus, gpu: str,
                 path: str) -> tuple[float, str, str]:
    """USD per GPU-hour of owned GPUs, with its source and date."""
    hours = scenario.fleet.hours_per_month
    if row.usd_per_month is not None:
        return row.usd_per_month / (row.count * hours), f"{path}.usd_per_month", ""
    server = _ownership(catalogs, gpu)
    if server is None:
        message = f"{path}: no ownership catalog row for {gpu}; give usd_per_month"
        raise ScenarioError(message)
    price = owned_usd_per_gpu_hour(server["node_power_kw"], server["hosting_usd_per_node_month"],
                                   server["gpus_per_node"], scenario.fleet.energy_usd_per_kwh, hours)
    return float(price), f"ownership catalog (power and hosting): {server['source']}", \
        str(server["as_of"])


def _existing(scenario: Scenario, catalogs: Catalogs, gpu_ids: list[str]) -> tuple[pd.DataFrame, list[dict]]:
    rows, prices = [], []
    for index, row in enumerate(scenario.fleet.current or []):
        path = f"fleet.current[{index}]"
        gpu = _canonical(catalogs, "gpu", row.gpu, f"{path}.gpu")
        if gpu not in gpu_ids:
            message = f"{path}.gpu: {did_you_mean(gpu, gpu_ids, kind='fleet GPU')}; add it to fleet.gpus"
            raise ScenarioError(message)
        config = ""
        if row.model is not None:
            model = _canonical(catalogs, "model", row.model, f"{path}.model")
            quant = _canonical(catalogs, "quant", row.quant or "bf16", f"{path}.quant")
            config = f"{model}/{gpu}/{quant}/tp{row.tp}"
        price, source, as_of = (0.0, f"{path} (sunk commitment)", "") \
            if row.pricing_type == "committed" else _owned_price(scenario, catalogs, row, gpu, path)
        rows.append({"gpu": gpu, "pricing_type": row.pricing_type, "config": config,
                     "provider": row.provider or "", "gpus": float(row.count),
                     "end_month": _end_month(row, scenario.fleet.start_date, path),
                     "usd_per_month": math.nan if row.usd_per_month is None else row.usd_per_month,
                     "usd_per_gpu_hour": price})
        prices.append({"gpu": gpu, "pricing_type": row.pricing_type, "usd_per_gpu_hour": price,
                       "gpus": float(row.count), "provider": row.provider or "", "source": source,
                       "as_of": as_of})
    return pd.DataFrame(rows, columns=[*EXISTING_COLUMNS, "usd_per_gpu_hour"]), prices


def _purchases(scenario: Scenario, catalogs: Catalogs, gpu_ids: list[str]) -> tuple[list[dict], list[str]]:
    rows, notes = [], []
    fleet = scenario.fleet
    for option, gpu in zip(fleet.gpus, gpu_ids, strict=True):
        if "purchase" not in (option.pricing or fleet.pricing) or \
                "purchase" in (option.usd_per_gpu_hour or {}):
            continue
        server = _ownership(catalogs, gpu)
        if server is None:
            notes.append(f"no purchase price for {gpu} (no ownership catalog row); purchase not used for it")
            continue
        price = purchase_usd_per_gpu_hour(
            server["usd_per_node"], server["life_years"], server["node_power_kw"],
            server["hosting_usd_per_node_month"], server["gpus_per_node"], fleet.energy_usd_per_kwh,
            fleet.hours_per_month, cost_of_capital=fleet.cost_of_capital,
            residual_value=fleet.residual_value)
        rows.append({"gpu": gpu, "pricing_type": "purchase", "usd_per_gpu_hour": float(price),
                     "gpus": math.nan, "provider": "ownership catalog",
                     "source": f"ownership catalog ({_recovery(server['life_years'], fleet)}, "
                               f"power, hosting): {server['source']}",
                     "as_of": str(server["as_of"])})
    return rows, notes


def _recovery(life_years: float, fleet) -> str:
    """How a purchase's price is recovered, as its price row's source says it."""
    return f"price over {life_years:g} years" + financing_words(fleet.cost_of_capital,
                                                                fleet.residual_value)


def _lead_times(scenario: Scenario, gpu_ids: list[str]) -> pd.DataFrame:
    rows = []
    for option, gpu in zip(scenario.fleet.gpus, gpu_ids, strict=True):
        if not option.lead_time_months and option.max_new_gpus_per_month is None:
            continue
        cap = math.nan if option.max_new_gpus_per_month is None else float(option.max_new_gpus_per_month)
        rows += [{"gpu": gpu, "pricing_type": pricing, "start_month": option.lead_time_months or 0,
                  "max_new_gpus_per_month": cap} for pricing in (option.lead_time_pricing or ["*"])]
    return pd.DataFrame(rows, columns=LEAD_COLUMNS)


def replan_tables(scenario: Scenario, catalogs: Catalogs, gpu_ids: list[str]) -> ReplanTables:
    """The scenario's re-planning inputs (module docstring)."""
    existing, existing_prices = _existing(scenario, catalogs, gpu_ids)
    purchases, notes = _purchases(scenario, catalogs, gpu_ids)
    rows = pd.DataFrame(existing_prices + purchases,
                        columns=["gpu", "pricing_type", "usd_per_gpu_hour", "gpus", "provider",
                                 "source", "as_of"])
    prices = merged_price_rows(rows).assign(region="", instance="", origin="scenario")
    prices.loc[prices["pricing_type"] == "purchase", "origin"] = "catalog"
    offers = prices[["gpu", "pricing_type", "usd_per_gpu_hour"]].assign(max_gpus=math.nan)
    return ReplanTables(existing.drop(columns="usd_per_gpu_hour"), _lead_times(scenario, gpu_ids),
                        offers, prices, notes)


def merged_price_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """One price row per (gpu, pricing_type): today's fleet may hold one GPU type under one
    pricing type at several costs (two contracts, two halls), which the plan prices as one
    offer at their GPU-weighted mean price; the row names each part in its source.

    >>> rows = pd.DataFrame({"gpu": ["h100", "h100"], "pricing_type": ["owned", "owned"],
    ...                      "usd_per_gpu_hour": [0.5, 2.0], "gpus": [8.0, 4.0],
    ...                      "provider": ["hall", "colo"], "source": ["catalog", "quote"],
    ...                      "as_of": ["2025-02-10", ""]})
    >>> row = merged_price_rows(rows).iloc[0]
    >>> float(row["usd_per_gpu_hour"]), row["provider"], row["as_of"]
    (1.0, 'hall; colo', '2025-02-10')
    >>> row["source"]
    'GPU-weighted mean of 8 GPUs at $0.5/GPU-hour (catalog); 4 GPUs at $2/GPU-hour (quote)'
    """
    columns = ["gpu", "pricing_type", "usd_per_gpu_hour", "provider", "source", "as_of"]
    if rows.empty:
        return rows.reindex(columns=columns)
    gpus = rows["gpus"].fillna(1.0)
    rows = rows.assign(gpus=gpus, paid=rows["usd_per_gpu_hour"] * gpus, part=[
        f"{g:g} GPUs at ${p:.4g}/GPU-hour ({s})"
        for g, p, s in zip(gpus, rows["usd_per_gpu_hour"], rows["source"], strict=True)])
    merged = rows.groupby(["gpu", "pricing_type"], sort=False).agg(
        paid=("paid", "sum"), gpus=("gpus", "sum"), count=("part", "size"),
        source=("source", "first"), parts=("part", "; ".join),
        provider=("provider", lambda p: "; ".join(dict.fromkeys(x for x in p if x))),
        as_of=("as_of", lambda d: min((x for x in d if x), default=""))).reset_index()
    merged["source"] = merged["source"].where(merged["count"] == 1,
                                              "GPU-weighted mean of " + merged["parts"])
    merged["usd_per_gpu_hour"] = merged["paid"] / merged["gpus"]
    return merged[columns]


def read_current_csv(path: str | os.PathLike) -> list[dict]:
    """``fleet.current`` rows from a CSV with :data:`CURRENT_COLUMNS` headers (gpu,
    pricing_type and count required); each row checked like the scenario's, errors naming the
    file, line and column."""
    table = read_csv_table(path, "current fleet CSV", error=ScenarioError, dtype=str,
                           keep_default_na=False)
    unknown = [c for c in table.columns if c not in CURRENT_COLUMNS]
    if unknown:
        message = f"{path}: unknown column {did_you_mean(unknown[0], CURRENT_COLUMNS, kind='column')}"
        raise ScenarioError(message)
    rows = []
    for line, record in enumerate(table.to_dict("records"), start=2):
        given = {k: v.strip() for k, v in record.items() if isinstance(v, str) and v.strip()}
        try:
            rows.append(CurrentGpus.model_validate(given).model_dump(mode="json"))
        except ValidationError as problem:
            message = error_message(problem.errors()[0], CurrentGpus)
            raise ScenarioError(f"{path}: line {line}: {message.removeprefix(TOP_LEVEL)}") from None
    return rows


#: How a message about one ``fleet.current`` row begins (:func:`fleetplan.errors.relocated`).
CURRENT_ROW = r"fleet\.current\[(\d+)\]\.?:? ?"


def current_csv_line(path: str | os.PathLike) -> Callable[[int], str]:
    """Where row ``index`` of ``fleet.current`` read by :func:`read_current_csv` from ``path``
    sits in the file (its order kept, the header on line 1): checks that need the catalogs or the
    rest of the scenario run after the file is read."""
    return lambda index: f"{path}: line {index + 2}: "
