"""Assemble the tidy sweep table from configuration constants, row axes and kernel metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.sweeps.columns import SWEEP_COLUMNS
from fleetplan.sweeps.kernel import Rows

CONTEXT_TOO_LONG = "context_len exceeds the model's max_context"
DOES_NOT_FIT = "KV cache does not fit: batch above max_batch"
_BOUNDS = ["memory", "compute"]


def _category(codes: np.ndarray, categories) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object))


def _config_category(configs: pd.DataFrame, column: str, config_index: np.ndarray) -> pd.Categorical:
    codes, uniques = pd.factorize(configs[column])
    return _category(codes.take(config_index), uniques)


def reason_codes(configs: pd.DataFrame, rows: Rows, fits: np.ndarray, extra=None):
    """Reason per row as categorical codes: configuration reasons first, then context, then fit."""
    config_codes, config_reasons = pd.factorize(configs["config_reason"])
    categories = list(config_reasons)
    if "" not in categories:
        categories.append("")
    categories += [CONTEXT_TOO_LONG, DOES_NOT_FIT]
    codes = config_codes.take(rows.config)
    fine = codes == categories.index("")
    too_long = rows.context_len > configs["max_context"].to_numpy().take(rows.config)
    codes = np.where(fine & too_long, len(categories) - 2, codes)
    codes = np.where((codes == categories.index("")) & ~fits, len(categories) - 1, codes)
    if extra is not None:  # per-row reasons (e.g. a missed SLO) where nothing else is wrong
        extra = np.asarray(extra, dtype=object)
        usable = (codes == categories.index("")) & (extra != "")
        extra_codes, extra_reasons = pd.factorize(np.where(usable, extra, None))
        codes = np.where(usable, extra_codes + len(categories), codes)
        categories += list(extra_reasons)
    return codes, categories


def build_table(configs: pd.DataFrame, rows: Rows, metrics: dict, extra_reason=None) -> pd.DataFrame:
    """The sweep table: label columns, axes and metrics in ``SWEEP_COLUMNS`` order and dtypes."""
    codes, categories = reason_codes(configs, rows, metrics["fits"], extra_reason)
    context_ok = ~(rows.context_len > configs["max_context"].to_numpy().take(rows.config))
    config_ok = (configs["config_reason"] == "").to_numpy().take(rows.config)
    data = {name: _config_category(configs, name, rows.config) for name in ("gpu", "model", "quant", "kv_quant")}
    data.update({
        "tp": configs["tp"].to_numpy().take(rows.config),
        "context_len": rows.context_len, "input_len": rows.input_len, "output_len": rows.output_len,
        "batch": rows.batch, "valid": config_ok & context_ok,
        "reason": _category(codes, categories),
        "bound": _category(metrics["bound_is_compute"].astype(np.int8), _BOUNDS),
    })
    data.update({k: v for k, v in metrics.items() if k in SWEEP_COLUMNS})
    length = len(rows.config)
    columns = {}
    for name, column in SWEEP_COLUMNS.items():
        value = data[name]
        if column.dtype != "category":
            value = np.asarray(value)
            if value.shape != (length,):
                value = np.full(length, value)
            value = value.astype(column.dtype, copy=False)
        columns[name] = value
    return pd.DataFrame(columns, copy=False)
