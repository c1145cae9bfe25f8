"""Where each price in an exported table came from: the price rule's row next to the price.

A sweep or estimate row is priced at ``usd_per_hour = price x GPUs``; ``price_provider``,
``price_as_of`` and ``price_source`` name the prices-catalog row the rule chose for the row's
GPU (``fleetplan.catalogs.prices``). A row whose price is not that row's (``--price`` or a case's
own ``usd_per_gpu_hour``) says ``given``, a row of a GPU no catalog row prices (its cost columns
empty) says ``none``; a disaggregated row (``prefill_tp`` > 0) is priced with
its prefill replicas too and names its decode GPU's row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Columns added after the sweep or estimate columns, all categorical.
PROVENANCE_COLUMNS = ("price_provider", "price_as_of", "price_source")
GIVEN = "given"
UNPRICED = "none"


def with_price_provenance(frame: pd.DataFrame, chosen: pd.DataFrame) -> pd.DataFrame:
    """``frame`` plus PROVENANCE_COLUMNS for its rows (``chosen``: on-demand rows of
    ``choose_prices``); unchanged when it has no ``gpu`` or ``usd_per_hour`` column."""
    if not {"gpu", "usd_per_hour", "tp"} <= set(frame.columns) or frame.empty:
        return frame
    rows = chosen[chosen["pricing_type"] == "on_demand"].drop_duplicates("gpu").set_index("gpu")
    gpu = frame["gpu"].astype(str)
    price = gpu.map(rows["usd_per_gpu_hour"]).to_numpy(dtype=float)
    gpus = frame["tp"].to_numpy(dtype=float) * (frame["pp"].to_numpy(dtype=float) if "pp" in frame else 1.0)
    with np.errstate(invalid="ignore"):
        same = np.isclose(frame["usd_per_hour"].to_numpy(dtype=float), price * gpus, rtol=1e-9)
    if "prefill_tp" in frame:
        same |= frame["prefill_tp"].to_numpy(dtype=float) > 0
    labels = {"price_provider": (rows["provider"] + " " + rows["region"]).str.strip(),
              "price_as_of": rows["as_of"].astype(str), "price_source": rows["source"].astype(str)}
    unpriced = np.isnan(frame["usd_per_hour"].to_numpy(dtype=float))
    extra = {}
    for name, by_gpu in labels.items():
        text = gpu.map(by_gpu).to_numpy(dtype=object)
        other = np.where(unpriced, UNPRICED, GIVEN) if name != "price_as_of" else ""
        extra[name] = pd.Categorical(np.where(same, text, other))
    return frame.assign(**extra)


def prices_used(chosen: pd.DataFrame) -> list[dict]:
    """The chosen price rows as plain records, for metadata and Sources sheets."""
    columns = [c for c in ("gpu", "pricing_type", "usd_per_gpu_hour", "provider", "region", "source",
                           "as_of", "origin", "warning") if c in chosen.columns]
    return chosen[columns].astype(object).where(chosen[columns].notna(), None).to_dict("records")
