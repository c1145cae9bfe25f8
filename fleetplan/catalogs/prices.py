"""Choosing among price rows: the cheapest row per key, or the median price of a GPU.

Every command that prices a GPU goes through these functions, so all of them read the prices
catalog the same way.
"""

from __future__ import annotations

import pandas as pd


def cheapest_rows(rows: pd.DataFrame, keys: tuple[str, ...] = ("pricing_type",)) -> pd.DataFrame:
    """The cheapest row per ``keys`` (ties: first by provider, region)."""
    ordered = rows.sort_values(["usd_per_gpu_hour", "provider", "region"], kind="stable")
    return ordered.drop_duplicates(list(keys))


def median_price_usd_per_gpu_hour(prices: pd.DataFrame, gpus: pd.Index, pricing_type: str = "on_demand") -> pd.Series:
    """Median price of each GPU over the catalog's rows of one pricing type [USD/GPU-hour]; NaN if none."""
    rows = prices[prices["pricing_type"] == pricing_type]
    return rows.groupby("gpu")["usd_per_gpu_hour"].median().reindex(gpus)
