"""A plan's hosted-API charges as FOCUS v1.2 rows, next to the GPU rows of ``focus.py``.

One ``Usage`` row per calendar month and API: ``PricingQuantity`` in millions of tokens
(prompt + output, ``PricingUnit`` ``1M Tokens``), ``ConsumedQuantity`` in tokens, the blended
unit price of the month's prompt and output tokens, ``ServiceCategory`` ``AI and Machine
Learning``. Billed and effective cost are the whole cents ``focus.focus_table`` gives each row,
so GPU and API rows together sum to the plan's total to the cent.
"""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd

from fleetplan.exports.plan_quantities import month_start
from fleetplan.optimizer.api_supply import plan_api_costs
from fleetplan.optimizer.cost_pools import to_calendar_months

#: Unit of an API's pricing quantity (FOCUS UnitFormat).
MILLION_TOKENS = "1M Tokens"


def api_costs_by_month(plan) -> pd.DataFrame:
    """month (calendar, from 0), api, provider, requests, tokens, usd."""
    costs = plan_api_costs(plan)
    columns = ["month", "api", "provider", "requests", "tokens", "usd"]
    if costs.empty:
        return pd.DataFrame(columns=columns)
    amounts = ["requests", "tokens", "usd"]
    months = to_calendar_months(costs, plan.periods, amounts)
    table = months.groupby(["month", "api"], as_index=False)[amounts].sum()
    providers = {a.get("name"): a.get("provider") for a in
                 (plan.scenario.get("fleet") or {}).get("apis") or []}
    table["provider"] = table["api"].map(providers).fillna(table["api"])
    return table[columns]


def monthly_charge_rows(table: pd.DataFrame, billed_cents: np.ndarray, plan, start: dt.date,
                        instant, quantity: np.ndarray, unit: np.ndarray, own: dict) -> pd.DataFrame:
    """FOCUS rows, one per month of ``table`` (a ``month`` column), billed ``billed_cents``
    for ``quantity`` at ``unit`` USD: the columns every monthly charge of a plan shares, then
    ``own`` (column -> values; a callable gets the scenario's name and the months' first
    days). ``instant`` formats a date as FOCUS date/time."""
    name = str(plan.scenario.get("name") or "scenario")
    first = [month_start(start, m) for m in table["month"]]
    after = [month_start(start, m + 1) for m in table["month"]]
    cost = billed_cents / 100.0
    rows = pd.DataFrame({
        "month": table["month"].to_numpy(),
        "BillingPeriodStart": [instant(d) for d in first],
        "BillingPeriodEnd": [instant(d) for d in after],
        "BilledCost": cost, "EffectiveCost": cost, "PricingCurrencyEffectiveCost": cost,
        "PricingCategory": "Standard", "PricingQuantity": quantity,
        "ContractedUnitPrice": unit, "ListUnitPrice": unit, "ContractedCost": unit * quantity,
        "ListCost": unit * quantity, "PricingCurrencyContractedUnitPrice": unit,
        "PricingCurrencyListUnitPrice": unit,
        **{column: values(name, first) if callable(values) else values
           for column, values in own.items()},
    })
    rows["ChargePeriodStart"] = rows["BillingPeriodStart"]
    rows["ChargePeriodEnd"] = rows["BillingPeriodEnd"]
    rows["BillingAccountId"] = rows["BillingAccountName"] = f"fleetplan plan: {name}"
    rows["BillingAccountType"] = "Fleet plan"
    rows["BillingCurrency"] = rows["PricingCurrency"] = "USD"
    return rows


def api_focus_rows(table: pd.DataFrame, billed_cents: np.ndarray, plan, start: dt.date,
                   instant) -> pd.DataFrame:
    """FOCUS rows of :func:`api_costs_by_month` with their billed cents; ``instant`` formats a
    date as FOCUS date/time."""
    if table.empty:
        return pd.DataFrame()
    millions = table["tokens"].to_numpy(float) / 1e6
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = np.where(millions > 0, table["usd"].to_numpy(float) / millions, 0.0)
    api, provider = table["api"], table["provider"].to_numpy()
    return monthly_charge_rows(table, billed_cents, plan, start, instant, millions, unit, {
        "gpu": api.to_numpy(), "pricing_type": "api",
        "ChargeCategory": "Usage", "ChargeFrequency": "Usage-Based", "PricingUnit": MILLION_TOKENS,
        "ConsumedQuantity": table["tokens"].to_numpy(float), "ConsumedUnit": "Tokens",
        "ProviderName": provider, "PublisherName": provider, "InvoiceIssuerName": provider,
        "ResourceId": lambda name, first: (f"fleetplan/{name}/api/" + api).to_numpy(),
        "ResourceName": (api + " hosted model API").to_numpy(),
        "ResourceType": "Hosted model API", "ServiceCategory": "AI and Machine Learning",
        "ServiceSubcategory": "Generative AI", "ServiceName": "Hosted model API",
        "SkuId": api.to_numpy(), "SkuPriceId": (api + "/tokens").to_numpy(), "SkuMeter": "Tokens",
        "SkuPriceDetails": [json.dumps({"Api": a}) for a in api],
        "ChargeDescription": lambda name, first: [
            f"Planned {a} hosted model API tokens, {d.strftime('%b %Y')}"
            for a, d in zip(api, first, strict=True)],
        "Tags": lambda name, first: [json.dumps({"fleetplan/scenario": name, "fleetplan/api": a})
                                     for a in api],
    })
