"""Which $/GPU-hour the optimizer uses per (GPU, pricing type), and where it came from.

Order of precedence for each allowed (GPU, pricing type):
1. the scenario's own ``usd_per_gpu_hour`` for that GPU (origin ``scenario``);
2. the catalog row the price rule chooses (``fleetplan.catalogs.prices``: the fleet's
   ``price_rule``, the GPU's or else the fleet's provider and region filters; origin ``catalog``,
   or ``your file`` for a row from the scenario's catalog files; provider, region, instance,
   source and as_of name the row; a warning note for an old or single-provider price).
A pricing type without a price is dropped for that GPU with a note; a GPU left without any
price is an error naming the field to fill.
"""

from __future__ import annotations

import math

import pandas as pd

from fleetplan.catalogs.conventions import ON_PREMISES_PRICING
from fleetplan.catalogs.prices import PriceRule, choose_prices, warning_lines
from fleetplan.errors import ScenarioError
from fleetplan.optimizer.scenario import Scenario

PRICE_COLUMNS = ["gpu", "pricing_type", "usd_per_gpu_hour", "provider", "region", "instance",
                 "includes_host", "source", "as_of", "origin", "same_provider_on_demand_usd_per_gpu_hour",
                 "warning"]


def select_prices(scenario: Scenario, catalog_prices: pd.DataFrame,
                  gpu_ids: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """Price table (PRICE_COLUMNS) for the allowed GPUs, and notes on dropped pricing types.

    ``gpu_ids`` are the canonical ids of ``scenario.fleet.gpus`` in the same order.
    """
    fleet = scenario.fleet
    rule = PriceRule(fleet.price_rule, max_age_days=fleet.max_price_age_days, mix_providers=fleet.mix_providers)
    tables, notes = [], []
    wanted = []  # per GPU option: allowed pricing types, provider, region
    for option in fleet.gpus:
        allowed = list(option.pricing or fleet.pricing)
        own_hall = [p for p in allowed if p in ON_PREMISES_PRICING]  # ownership catalog prices
        allowed = [p for p in allowed if p not in own_hall or p in (option.usd_per_gpu_hour or {})]
        wanted.append((tuple(allowed), option.provider or fleet.provider, option.region or fleet.region, own_hall))
    chosen = _chosen_by_filters(catalog_prices, gpu_ids, wanted, rule)
    for index, (option, gpu) in enumerate(zip(fleet.gpus, gpu_ids, strict=True)):
        allowed, provider, region, own_hall = wanted[index]
        allowed = list(allowed)
        own = {p: v for p, v in (option.usd_per_gpu_hour or {}).items() if p in allowed}
        rows = chosen[wanted[index][:3]]
        rows = rows[(rows["gpu"] == gpu) & rows["pricing_type"].isin([p for p in allowed if p not in own])]
        notes += [f"price warning: {line}" for line in warning_lines(rows)]
        table = pd.concat([_own_rows(gpu, own), rows], ignore_index=True)
        missing = [p for p in allowed if p not in set(table["pricing_type"])]
        if table.empty and not own_hall:
            message = _no_price_message(index, gpu, allowed, provider, region)
            raise ScenarioError(message)
        notes += [f"no {p} price for {gpu}{_where(provider, region)}; {p} not used for it"
                  for p in missing]
        tables.append(table)
    prices = pd.concat(tables, ignore_index=True)
    for column in PRICE_COLUMNS:
        if column not in prices:
            prices[column] = math.nan
    # a GPU the price rule found no row for adds an empty table of objects, which would turn
    # the prices into objects
    prices = prices.astype({"usd_per_gpu_hour": float,
                            "same_provider_on_demand_usd_per_gpu_hour": float})
    return prices[PRICE_COLUMNS].reset_index(drop=True), notes


def _chosen_by_filters(catalog_prices: pd.DataFrame, gpu_ids: list[str], wanted: list[tuple],
                       rule: PriceRule) -> dict[tuple, pd.DataFrame]:
    """The price rule's rows for the GPUs sharing each (pricing types, provider, region), chosen
    once per such group rather than once per GPU."""
    groups: dict[tuple, list[str]] = {}
    for gpu, (allowed, provider, region, _) in zip(gpu_ids, wanted, strict=True):
        groups.setdefault((allowed, provider, region), []).append(gpu)
    return {key: choose_prices(catalog_prices, list(dict.fromkeys(gpus)), list(key[0]), rule.narrowed(key[1], key[2]))
            for key, gpus in groups.items()}


def _own_rows(gpu: str, own: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame({"gpu": gpu, "pricing_type": list(own),
                         "usd_per_gpu_hour": [float(v) for v in own.values()],
                         "provider": "scenario", "region": "any", "instance": "",
                         "source": "scenario fleet.gpus usd_per_gpu_hour", "as_of": "",
                         "origin": "scenario"})


def _where(provider: str | None, region: str | None) -> str:
    parts = [f"provider {provider}" if provider else "", f"region {region}" if region else ""]
    text = ", ".join(p for p in parts if p)
    return f" ({text})" if text else ""


def _no_price_message(index: int, gpu: str, allowed: list[str], provider: str | None,
                      region: str | None) -> str:
    return (f"fleet.gpus[{index}]: no price for {gpu} with pricing {', '.join(allowed)}"
            f"{_where(provider, region)} in the prices catalog; give usd_per_gpu_hour")
