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


def api_focus_rows(table: pd.DataFrame, billed_cents: np.ndarray, plan, start: dt.date,
                   instant) -> pd.DataFrame:
    """FOCUS rows of :func:`api_costs_by_month` with their billed cents; ``instant`` formats a
    date as FOCUS date/time."""
    if table.empty:
        return pd.DataFrame()
    name = str(plan.scenario.get("name") or "scenario")
    first = [month_start(start, m) for m in table["month"]]
    after = [month_start(start, m + 1) for m in table["month"]]
    millions = table["tokens"].to_numpy(float) / 1e6
    cost = billed_cents / 100.0
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = np.where(millions > 0, table["usd"].to_numpy(float) / millions, 0.0)
    rows = pd.DataFrame({
        "month": table["month"].to_numpy(), "gpu": table["api"].to_numpy(), "pricing_type": "api",
        "BillingPeriodStart": [instant(d) for d in first], "BillingPeriodEnd": [instant(d) for d in after],
        "BilledCost": cost, "EffectiveCost": cost, "PricingCurrencyEffectiveCost": cost,
        "ChargeCategory": "Usage", "ChargeFrequency": "Usage-Based", "PricingCategory": "Standard",
        "PricingQuantity": millions, "PricingUnit": MILLION_TOKENS,
        "ConsumedQuantity": table["tokens"].to_numpy(float), "ConsumedUnit": "Tokens",
        "ContractedUnitPrice": unit, "ListUnitPrice": unit, "ContractedCost": unit * millions,
        "ListCost": unit * millions, "PricingCurrencyContractedUnitPrice": unit,
        "PricingCurrencyListUnitPrice": unit,
        "ProviderName": table["provider"].to_numpy(), "PublisherName": table["provider"].to_numpy(),
        "InvoiceIssuerName": table["provider"].to_numpy(),
        "ResourceId": (f"fleetplan/{name}/api/" + table["api"]).to_numpy(),
        "ResourceName": (table["api"] + " hosted model API").to_numpy(),
        "ResourceType": "Hosted model API", "ServiceCategory": "AI and Machine Learning",
        "ServiceSubcategory": "Generative AI", "ServiceName": "Hosted model API",
        "SkuId": table["api"].to_numpy(), "SkuPriceId": (table["api"] + "/tokens").to_numpy(),
        "SkuMeter": "Tokens",
        "SkuPriceDetails": [json.dumps({"Api": a}) for a in table["api"]],
        "ChargeDescription": [f"Planned {a} hosted model API tokens, {d.strftime('%b %Y')}"
                              for a, d in zip(table["api"], first, strict=True)],
        "Tags": [json.dumps({"fleetplan/scenario": name, "fleetplan/api": a}) for a in table["api"]],
    })
    rows["ChargePeriodStart"], rows["ChargePeriodEnd"] = rows["BillingPeriodStart"], rows["BillingPeriodEnd"]
    rows["BillingAccountId"] = rows["BillingAccountName"] = f"fleetplan plan: {name}"
    rows["BillingAccountType"] = "Fleet plan"
    rows["BillingCurrency"] = rows["PricingCurrency"] = "USD"
    return rows
