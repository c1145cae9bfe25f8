"""A plan's fixed cost per configuration as FOCUS v1.2 rows, next to the GPU rows of
``focus.py``.

One ``Usage`` row per calendar month and configuration deployed in it
(``fleet.config_fixed_usd_per_month``, ``fleetplan.optimizer.config_fixed_cost``): the
operating overhead of running the configuration (its images, capacity tests, on-call),
``ChargeFrequency`` ``Recurring``, ``PricingQuantity`` in configuration-months at the fixed
cost per configuration and month. Billed and effective cost are the whole cents
``focus.focus_table`` gives each row, so every row together sums to the plan's total to the
cent.
"""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd

from fleetplan.exports.focus_api import monthly_charge_rows
from fleetplan.exports.plan_quantities import fixed_price
from fleetplan.optimizer.config_fixed_cost import config_gpus, fixed_costs_by_period
from fleetplan.optimizer.cost_pools import to_calendar_months

#: Unit of the pricing quantity (FOCUS UnitFormat).
CONFIGURATION_MONTHS = "Configuration-Months"


def fixed_costs_by_month(plan) -> pd.DataFrame:
    """month (calendar, from 0), config, gpu, config_months, usd."""
    columns = ["month", "config", "gpu", "config_months", "usd"]
    costs = fixed_costs_by_period(plan)
    if costs.empty:
        return pd.DataFrame(columns=columns)
    months = to_calendar_months(costs.drop(columns="month"), plan.periods, ["usd"])
    table = months.groupby(["month", "config"], as_index=False)["usd"].sum()
    table["config_months"] = table["usd"] / fixed_price(plan)
    table["gpu"] = table["config"].map(config_gpus(plan)).fillna("")
    return table[columns]


def fixed_focus_rows(table: pd.DataFrame, billed_cents: np.ndarray, plan, start: dt.date,
                     instant) -> pd.DataFrame:
    """FOCUS rows of :func:`fixed_costs_by_month` with their billed cents; ``instant`` formats
    a date as FOCUS date/time."""
    if table.empty:
        return pd.DataFrame()
    config = table["config"]
    unit = np.full(len(table), fixed_price(plan))
    own = "Own operations"
    return monthly_charge_rows(
        table, billed_cents, plan, start, instant, table["config_months"].to_numpy(float), unit, {
            "gpu": table["gpu"].to_numpy(), "pricing_type": "config_fixed",
            "ChargeCategory": "Usage", "ChargeFrequency": "Recurring",
            "PricingUnit": CONFIGURATION_MONTHS,
            "ProviderName": own, "PublisherName": own, "InvoiceIssuerName": own,
            "ResourceId": lambda name, first: (f"fleetplan/{name}/config/" + config).to_numpy(),
            "ResourceName": (config + " deployment configuration").to_numpy(),
            "ResourceType": "Deployment configuration",
            "ServiceCategory": "Management and Governance",
            "ServiceSubcategory": "Other (Management and Governance)",
            "ServiceName": "Configuration operations",
            "SkuId": config.to_numpy(), "SkuPriceId": (config + "/fixed").to_numpy(),
            "SkuMeter": "Configuration-months",
            "SkuPriceDetails": [json.dumps({"Config": c}) for c in config],
            "ChargeDescription": lambda name, first: [
                f"Planned fixed operating cost of configuration {c} (images, capacity tests, "
                f"on-call), {d.strftime('%b %Y')}" for c, d in zip(config, first, strict=True)],
            "Tags": lambda name, first: [json.dumps({"fleetplan/scenario": name,
                                                     "fleetplan/config": c}) for c in config],
        })
