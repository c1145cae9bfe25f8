"""A plan's charges as a FOCUS dataset: the FinOps Open Cost and Usage Specification, v1.2.

One CSV row per planned charge, per calendar month, GPU type (``ResourceType`` GPU) and
pricing category, so finance tools that read FOCUS can load a plan next to actual bills:

- on-demand and spot GPUs: one ``Usage`` row (``Standard`` or ``Dynamic`` pricing) per month;
- a hosted model API: one ``Usage`` row per month, priced per million tokens
  (``focus_api.py``);
- a configuration's fixed operating cost: one recurring ``Usage`` row per month it runs
  (``focus_fixed.py``);
- a reserved commitment: a ``Purchase`` row (``Recurring``; ``BilledCost`` is the month's
  commitment fee, ``EffectiveCost`` 0) and two ``Usage`` rows (``Committed`` pricing) that
  amortize it: ``Used`` for the GPU-hours the planned load needs (at the target utilization),
  ``Unused`` for the rest (N+k spares, rounding up to whole replicas and nodes, quiet hours).

``BilledCost`` and ``EffectiveCost`` are whole cents; each sums to the plan's total cost to the
cent (largest remainders, months first), and a commitment's ``Used`` + ``Unused`` effective
cost is its purchase's billed cost in every month. ``ListCost`` and ``ContractedCost`` are unit
price x ``PricingQuantity`` as the specification requires; list prices are on-demand prices.
Every column of the specification is present, in its order; text is made formula-safe and the
file written atomically (``fleetplan.exports.csv.write_csv``).

Reference: FOCUS specification v1.2, https://focus.finops.org/focus-specification/v1-2/
(``specification/columns`` of github.com/FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec, tag v1.2).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import RESERVED_PRICING
from fleetplan.exports.csv import write_csv
from fleetplan.exports.focus_api import api_costs_by_month, api_focus_rows
from fleetplan.exports.focus_fixed import fixed_costs_by_month, fixed_focus_rows
from fleetplan.exports.plan_quantities import month_start
from fleetplan.optimizer.cost_pools import cents, offer_costs, part_cents, plan_total_usd

FOCUS_VERSION = "1.2"
#: Every FOCUS v1.2 column, in the specification's order.
FOCUS_COLUMNS = (
    "AvailabilityZone", "BilledCost", "BillingAccountId", "BillingAccountName", "BillingAccountType",
    "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart", "CapacityReservationId",
    "CapacityReservationStatus", "ChargeCategory", "ChargeClass", "ChargeDescription",
    "ChargeFrequency", "ChargePeriodEnd", "ChargePeriodStart", "CommitmentDiscountCategory",
    "CommitmentDiscountId", "CommitmentDiscountName", "CommitmentDiscountQuantity",
    "CommitmentDiscountStatus", "CommitmentDiscountType", "CommitmentDiscountUnit",
    "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice", "EffectiveCost",
    "InvoiceId", "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory",
    "PricingCurrency", "PricingCurrencyContractedUnitPrice", "PricingCurrencyEffectiveCost",
    "PricingCurrencyListUnitPrice", "PricingQuantity", "PricingUnit", "ProviderName",
    "PublisherName", "RegionId", "RegionName", "ResourceId", "ResourceName", "ResourceType",
    "ServiceCategory", "ServiceName", "ServiceSubcategory", "SkuId", "SkuMeter", "SkuPriceDetails",
    "SkuPriceId", "SubAccountId", "SubAccountName", "SubAccountType", "Tags",
)
#: Unit of every quantity here (FOCUS UnitFormat: ``<singular-unit>-<plural-time-units>``).
GPU_HOURS = "GPU-Hours"
_PRICING_CATEGORY = {"on_demand": "Standard", "spot": "Dynamic"}
_PRICING_WORDS = {"on_demand": "on demand", "spot": "spot", "reserved_1y": "reserved 1 year",
                  "reserved_3y": "reserved 3 years"}
_DATE_TIME = "%Y-%m-%dT%H:%M:%SZ"


def focus_table(plan, start: dt.date) -> pd.DataFrame:
    """The plan's charges as FOCUS rows (all columns, in order); months from ``start``."""
    offers, total_usd = offer_costs(plan), plan_total_usd(plan)
    api, fixed = api_costs_by_month(plan), fixed_costs_by_month(plan)
    if (offers.empty and api.empty and fixed.empty) or np.isnan(total_usd):
        return pd.DataFrame({name: pd.Series(dtype=object) for name in FOCUS_COLUMNS})
    offers = offers.merge(_price_rows(plan), on=["gpu", "pricing_type"], how="left")
    parts = (offers, api, fixed)
    billed = cents(np.concatenate([p["usd"].to_numpy(float) for p in parts]),
                   np.concatenate([p["month"].to_numpy() for p in parts]), total_usd)
    offers["billed_cents"] = billed[:len(offers)]
    reserved = offers["pricing_type"].isin(RESERVED_PRICING)
    rows = pd.concat([_flexible_rows(offers[~reserved]), *_commitment_rows(offers[reserved])],
                     ignore_index=True)
    rows = _with_common_columns(rows, plan, start) if len(rows) else rows
    api_rows = api_focus_rows(api, billed[len(offers):len(offers) + len(api)], plan, start,
                              _instant)
    fixed_rows = fixed_focus_rows(fixed, billed[len(offers) + len(api):], plan, start, _instant)
    rows = pd.concat([r for r in (rows, api_rows, fixed_rows) if len(r)],
                     ignore_index=True).reindex(
        columns=[*FOCUS_COLUMNS, "month", "gpu", "pricing_type"])
    return rows.sort_values(["BillingPeriodStart", "ResourceId", "ChargeCategory"],
                            kind="stable").reset_index(drop=True)[list(FOCUS_COLUMNS)]


def write_focus_csv(plan, path: str | os.PathLike, start: dt.date) -> Path:
    """Write :func:`focus_table` to ``path`` (formula-safe, atomic); returns the path."""
    return write_csv(focus_table(plan, start), path)


def _price_rows(plan) -> pd.DataFrame:
    """Per offer: provider, region, instance and the list (on-demand) price per GPU-hour."""
    columns = ["gpu", "pricing_type", "provider", "region", "instance", "list_usd_per_gpu_hour"]
    prices = plan.prices
    if prices.empty or not {"gpu", "pricing_type", "usd_per_gpu_hour"} <= set(prices.columns):
        return pd.DataFrame(columns=columns)
    prices = prices.drop_duplicates(["gpu", "pricing_type"])
    table = prices.reindex(columns=["gpu", "pricing_type", "provider", "region", "instance", "origin"])
    own = table["origin"].eq("scenario")
    table["provider"] = table["provider"].where(~own & table["provider"].notna(), "Own quote")
    table["region"] = table["region"].where(~table["region"].isin(["any", ""]))
    on_demand = prices[prices["pricing_type"] == "on_demand"].set_index("gpu")["usd_per_gpu_hour"]
    table["list_usd_per_gpu_hour"] = table["gpu"].map(on_demand)
    return table[columns]


def _usage(offers: pd.DataFrame, hours: pd.Series, effective_cents: np.ndarray,
           unit_price: pd.Series, list_price: pd.Series) -> pd.DataFrame:
    """Usage-shaped rows: quantities in GPU-hours, costs from unit prices x quantities."""
    return pd.DataFrame({
        "month": offers["month"].to_numpy(), "gpu": offers["gpu"].to_numpy(),
        "pricing_type": offers["pricing_type"].to_numpy(),
        "provider": offers["provider"].to_numpy(), "region": offers["region"].to_numpy(),
        "instance": offers["instance"].to_numpy(),
        "ChargeCategory": "Usage", "ChargeFrequency": "Usage-Based",
        "PricingQuantity": hours.to_numpy(float), "ConsumedQuantity": hours.to_numpy(float),
        "EffectiveCost": effective_cents / 100.0,
        "ContractedUnitPrice": unit_price.to_numpy(float), "ListUnitPrice": list_price.to_numpy(float),
    })


def _flexible_rows(offers: pd.DataFrame) -> pd.DataFrame:
    """On-demand and spot: billed as used, one row per month."""
    listed = offers["list_usd_per_gpu_hour"].fillna(offers["usd_per_gpu_hour"])
    rows = _usage(offers, offers["gpu_hours"], offers["billed_cents"].to_numpy(),
                  offers["usd_per_gpu_hour"], listed)
    rows["BilledCost"] = rows["EffectiveCost"]
    rows["PricingCategory"] = offers["pricing_type"].map(_PRICING_CATEGORY).fillna("Other").to_numpy()
    return rows


def _commitment_rows(offers: pd.DataFrame) -> list[pd.DataFrame]:
    """Reserved terms: the month's purchase, and its Used and Unused amortization."""
    if offers.empty:
        return []
    price = offers["usd_per_gpu_hour"]
    purchase = _usage(offers, offers["gpu_hours"], np.zeros(len(offers)), price, price).assign(
        ChargeCategory="Purchase", ChargeFrequency="Recurring", PricingCategory="Standard",
        BilledCost=offers["billed_cents"].to_numpy() / 100.0, ConsumedQuantity=np.nan,
        CommitmentDiscountQuantity=offers["gpu_hours"].to_numpy(float))
    billed = offers["billed_cents"].to_numpy()
    used_cents = part_cents(billed, offers["used_usd"].to_numpy(float),
                            offers["usd"].to_numpy(float))
    listed = offers["list_usd_per_gpu_hour"].fillna(price)
    used = _usage(offers, offers["used_gpu_hours"], used_cents, price, listed)
    unused_hours = (offers["gpu_hours"] - offers["used_gpu_hours"]).clip(lower=0.0)
    unused = _usage(offers, unused_hours, billed - used_cents, price, price).assign(
        ConsumedQuantity=np.nan)
    for table, status in ((used, "Used"), (unused, "Unused")):
        table["BilledCost"], table["PricingCategory"] = 0.0, "Committed"
        table["CommitmentDiscountStatus"] = status
        table["CommitmentDiscountQuantity"] = table["PricingQuantity"]
    unused = unused[unused["PricingQuantity"] > 1e-9]
    return [purchase, used, unused]


def _with_common_columns(rows: pd.DataFrame, plan, start: dt.date) -> pd.DataFrame:
    """Periods, account, provider, resource, SKU, commitment and tag columns; costs from prices."""
    name = str(plan.scenario.get("name") or "scenario")
    first = pd.Series([month_start(start, m) for m in rows["month"]], index=rows.index)
    after = pd.Series([month_start(start, m + 1) for m in rows["month"]], index=rows.index)
    rows["BillingPeriodStart"] = rows["ChargePeriodStart"] = first.map(_instant)
    rows["BillingPeriodEnd"] = rows["ChargePeriodEnd"] = after.map(_instant)
    rows["BillingAccountId"] = rows["BillingAccountName"] = f"fleetplan plan: {name}"
    rows["BillingAccountType"] = "Fleet plan"
    rows["BillingCurrency"] = rows["PricingCurrency"] = "USD"
    rows["ProviderName"] = rows["PublisherName"] = rows["InvoiceIssuerName"] = rows["provider"].fillna("Own quote")
    rows["RegionId"] = rows["RegionName"] = rows["region"]
    rows["ResourceId"] = f"fleetplan/{name}/" + rows["gpu"] + "/" + rows["pricing_type"]
    rows["ResourceName"] = rows["gpu"] + " GPUs, " + rows["pricing_type"].map(_PRICING_WORDS).fillna(
        rows["pricing_type"])
    rows["ResourceType"] = "GPU"
    rows["ServiceCategory"], rows["ServiceSubcategory"] = "Compute", "Virtual Machines"
    rows["ServiceName"] = "GPU instances"
    rows["SkuId"] = rows["instance"].replace("", np.nan).fillna(rows["gpu"])
    rows["SkuMeter"] = "GPU usage"
    rows["SkuPriceId"] = rows["SkuId"] + "/" + rows["pricing_type"]
    rows["SkuPriceDetails"] = [json.dumps({"GpuType": g, "PricingType": p}) for g, p in
                               zip(rows["gpu"], rows["pricing_type"])]
    rows["PricingUnit"] = GPU_HOURS
    rows["ConsumedUnit"] = np.where(rows["ConsumedQuantity"].notna(), GPU_HOURS, None)
    rows["ChargeDescription"] = ("Planned " + rows["ResourceName"] + ", "
                                 + rows["ChargeCategory"].str.lower() + ", "
                                 + first.map(lambda d: d.strftime("%b %Y")))
    rows["ContractedCost"] = rows["ContractedUnitPrice"] * rows["PricingQuantity"]
    rows["ListCost"] = rows["ListUnitPrice"] * rows["PricingQuantity"]
    rows["PricingCurrencyContractedUnitPrice"] = rows["ContractedUnitPrice"]
    rows["PricingCurrencyListUnitPrice"] = rows["ListUnitPrice"]
    rows["PricingCurrencyEffectiveCost"] = rows["EffectiveCost"]
    rows = _commitment_columns(rows, name)
    rows["Tags"] = [json.dumps({"fleetplan/scenario": name, "fleetplan/gpu": g, "fleetplan/pricing_type": p})
                    for g, p in zip(rows["gpu"], rows["pricing_type"])]
    return rows.reindex(columns=[*FOCUS_COLUMNS, "month", "gpu", "pricing_type"])


def _commitment_columns(rows: pd.DataFrame, name: str) -> pd.DataFrame:
    """Commitment discount id, name, type, category and unit on the rows of a reserved term."""
    reserved = rows["pricing_type"].isin(RESERVED_PRICING)
    words = rows["pricing_type"].map(_PRICING_WORDS).fillna(rows["pricing_type"])
    rows["CommitmentDiscountId"] = np.where(reserved, f"fleetplan/{name}/commitment/" + rows["gpu"] + "/"
                                            + rows["pricing_type"], None)
    rows["CommitmentDiscountName"] = np.where(reserved, rows["gpu"] + " GPUs, " + words, None)
    rows["CommitmentDiscountType"] = np.where(reserved, "Reserved GPU capacity", None)
    rows["CommitmentDiscountCategory"] = np.where(reserved, "Usage", None)
    rows["CommitmentDiscountUnit"] = np.where(reserved, GPU_HOURS, None)
    return rows


def _instant(day: dt.date) -> str:
    """Midnight UTC of ``day`` in FOCUS date/time format (``YYYY-MM-DDTHH:mm:ssZ``)."""
    return dt.datetime(day.year, day.month, day.day).strftime(_DATE_TIME)
