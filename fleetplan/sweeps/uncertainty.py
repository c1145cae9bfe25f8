"""How sure an estimate is: its calibration label, the error band of rows like it, and capacity at a
pessimistic quantile.

Every estimate rests on efficiency rows that were fitted to measurements of this engine, GPU and
precision (``measured``), carried over from another engine, precision or a sibling GPU of the
same architecture (``transferred``), or only the documented priors (``prior``;
``efficiencies.calibration_labels``). ``error_bands.csv`` (written by
``scripts/fit_efficiency.py``) holds, per label, the p10/p50/p90 of the signed relative error
``predicted / measured - 1`` of throughput rows predicted held out the way the label implies
(leave-one-model-out for ``measured``, leave-one-GPU-out for the other two).

At ``capacity_quantile="p90"`` a case's throughput is divided by ``1 + p90`` (when positive): the
capacity that 9 in 10 configurations like it reached at least, which is what a pessimistic plan
should count on. ``p50`` (the default) leaves the model's numbers as they are.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from fleetplan.errors import InvalidValueError
from fleetplan.sweeps import throughput

CAPACITY_QUANTILES = ("p50", "p90")
BAND_COLUMNS = ("error_p10_pct", "error_p90_pct")
THROUGHPUT_COLUMNS = ("decode_tok_s", "decode_tok_s_per_gpu", "output_tok_s", "req_s")


def error_bands_path() -> Path:
    """The shipped error bands (``scripts/fit_efficiency.py --write``)."""
    return Path(str(resources.files("fleetplan.sweeps") / "data" / "error_bands.csv"))


@functools.lru_cache(maxsize=1)
def shipped_error_bands() -> pd.DataFrame:
    """Error bands by calibration label (empty when none ship)."""
    path = error_bands_path()
    if not path.is_file():
        return pd.DataFrame(columns=["calibration", *BAND_COLUMNS])
    return pd.read_csv(path).set_index("calibration")


def check_quantile(capacity_quantile: str) -> str:
    """``p50`` or ``p90``; anything else raises naming the field."""
    if capacity_quantile not in CAPACITY_QUANTILES:
        message = f"capacity_quantile must be one of {', '.join(CAPACITY_QUANTILES)}, got {capacity_quantile!r}"
        raise InvalidValueError(message)
    return capacity_quantile


def error_band_pct(calibration) -> dict[str, np.ndarray]:
    """The shipped error band of each calibration label: ``BAND_COLUMNS`` -> values [%], NaN where
    no band ships. Called once per configuration (a lookup of three labels), never per grid row."""
    bands = shipped_error_bands()
    labels = np.asarray(calibration, dtype=object)
    return {column: (bands[column].reindex(labels).to_numpy(dtype=float) if column in bands
                     else np.full(len(labels), np.nan)) for column in BAND_COLUMNS}


def add_uncertainty(table: pd.DataFrame, calibration: np.ndarray, capacity_quantile: str = "p50") -> pd.DataFrame:
    """``table`` (estimate rows) with ``calibration``, its error band and ``capacity_quantile``;
    throughput and cost columns at that quantile."""
    out = table.copy()
    out["calibration"] = calibration
    for column, values in error_band_pct(calibration).items():
        out[column] = values
    out["capacity_quantile"] = capacity_quantile
    if capacity_quantile == "p90":
        derate = 1.0 + np.maximum(np.nan_to_num(out["error_p90_pct"].to_numpy(dtype=float)), 0.0) / 100.0
        for column in THROUGHPUT_COLUMNS:
            if column in out:
                out[column] = out[column].to_numpy(dtype=float) / derate
        _reprice(out)
    return out


def _reprice(out: pd.DataFrame) -> None:
    """Cost columns from the (derated) throughput."""
    if "usd_per_hour" not in out or "req_s" not in out:
        return
    price, req_s = out["usd_per_hour"].to_numpy(dtype=float), out["req_s"].to_numpy(dtype=float)
    total = req_s * (out["input_len"].to_numpy(dtype=float) + out["output_len"].to_numpy(dtype=float))
    out["usd_per_m_output_tokens"] = throughput.usd_per_m_tokens(price, out["output_tok_s"].to_numpy(dtype=float))
    out["usd_per_m_total_tokens"] = throughput.usd_per_m_tokens(price, total)
    out["usd_per_k_requests"] = throughput.usd_per_k_requests(price, req_s)
