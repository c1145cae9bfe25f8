"""Assemble the tidy sweep table from configuration constants, row axes and kernel metrics.

Kernel outputs arrive at their natural broadcast shapes (a per-configuration constant has the
shape of the configuration axis alone); each column is expanded to the full block only here,
once, as it is written into the table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.errors import InvalidValueError, did_you_mean
from fleetplan.sweeps.columns import (
    ALL_SWEEP_COLUMNS,
    DISAGGREGATION_KEYS,
    LEVER_COLUMNS,
    SWEEP_COLUMNS,
)
from fleetplan.sweeps.efficiencies import CALIBRATION_LABELS
from fleetplan.sweeps.row_kernel import Rows
from fleetplan.sweeps.uncertainty import BAND_COLUMNS

CONTEXT_TOO_LONG = "context_len exceeds the model's max_context"
DOES_NOT_FIT = "KV cache does not fit: batch above max_batch"
PREFILL_DOES_NOT_FIT = "prefill replica cannot hold one prompt's KV cache"
_BOUNDS = ["memory", "compute"]
_LABELS = ("gpu", "model", "quant", "kv_quant", "prefill_gpu")
_SMALL_CATEGORIES = ("bound", "calibration")  # stored as int8 codes


def _category(codes: np.ndarray, categories) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object), validate=False)


def reason_codes(configs: pd.DataFrame, rows: Rows, fits: np.ndarray, extra=None, prefill_fits=None):
    """Reason per row as categorical codes: configuration reasons first, then context, then fit
    (with ``prefill_fits``, a prefill replica too small for one prompt before a decode batch
    too large)."""
    config_codes, config_reasons = pd.factorize(configs["config_reason"])
    categories = list(config_reasons)
    if "" not in categories:
        categories.append("")
    fine_code = categories.index("")
    categories += [CONTEXT_TOO_LONG, DOES_NOT_FIT]
    codes = config_codes.astype(np.int16).take(rows.config)
    too_long = rows.context_len > configs["max_context"].to_numpy().take(rows.config)
    codes = np.where((codes == fine_code) & too_long, np.int16(len(categories) - 2), codes)
    if prefill_fits is not None:  # no batch fits on that pair, whatever the decode batch
        categories.append(PREFILL_DOES_NOT_FIT)
        codes = np.where((codes == fine_code) & ~prefill_fits, np.int16(len(categories) - 1), codes)
    codes = np.where((codes == fine_code) & ~fits, np.int16(categories.index(DOES_NOT_FIT)), codes)
    if extra is not None:  # per-row reasons (e.g. a missed SLO) where nothing else is wrong
        extra = np.asarray(extra, dtype=object)
        usable = (codes == fine_code) & (extra != "")
        extra_codes, extra_reasons = pd.factorize(np.where(usable, extra, None))
        codes = np.where(usable, extra_codes + len(categories), codes)
        categories += list(extra_reasons)
    return codes, categories


def _output_dtype(name: str, wide: bool = False) -> str:
    """The column's stored dtype (codes for categories); ``wide`` keeps metrics in float64."""
    dtype = ALL_SWEEP_COLUMNS[name].dtype
    if wide and dtype == "float32":
        return "float64"
    return "int8" if name in _SMALL_CATEGORIES else "int16" if dtype == "category" else dtype


def table_columns(extra_columns=(), columns=None) -> tuple[str, ...]:
    """The output columns in table order: ``SWEEP_COLUMNS`` with swept lever (and prefill replica)
    keys after the configuration keys and the disaggregation metrics last; with ``columns``, only
    those, in the order given (unknown names get "did you mean")."""
    keys = [name for name in extra_columns if name in LEVER_COLUMNS or name in DISAGGREGATION_KEYS]
    trailing = [name for name in extra_columns if name not in keys]
    every = (*list(SWEEP_COLUMNS)[:5], *keys, *list(SWEEP_COLUMNS)[5:], *trailing)
    if columns is None:
        return every
    chosen = tuple(dict.fromkeys(str(name).strip() for name in columns))
    if not chosen:
        message = f"columns: name at least one column (one of: {', '.join(every)})"
        raise InvalidValueError(message)
    for name in chosen:
        if name not in every:
            raise did_you_mean(name, list(every), kind="sweep column")
    return chosen


def column_arrays(configs: pd.DataFrame, rows: Rows, metrics: dict, extra_reason=None, *,
                  out: dict | None = None, offset: int = 0, names=None, wide: bool = False) -> tuple[dict, dict]:
    """The columns ``names`` (default: every ``SWEEP_COLUMNS`` column) as flat arrays,
    categorical ones as codes, and the categories of those. Only these are expanded to full length.

    With ``out`` (arrays of the whole table, by column), the block is written in place at
    ``offset`` instead of into new arrays.
    """
    names = tuple(SWEEP_COLUMNS) if names is None else tuple(names)
    shape = np.broadcast_shapes(*(np.shape(v) for v in (*rows, *metrics.values())))
    size = int(np.prod(shape))

    def full(name, value):
        array = np.asarray(value).astype(_output_dtype(name, wide), copy=False)
        if out is not None:
            np.copyto(out[name][offset:offset + size].reshape(shape), np.broadcast_to(array, shape))
            return out[name][offset:offset + size]
        return array.ravel() if array.shape == shape else np.broadcast_to(array, shape).ravel()

    categories = {"bound": _BOUNDS}
    max_context = configs["max_context"].to_numpy().take(rows.config)
    values = {"tp": configs["tp"].to_numpy().take(rows.config), "context_len": rows.context_len,
              "input_len": rows.input_len, "output_len": rows.output_len, "batch": rows.batch,
              "valid": (configs["config_reason"] == "").to_numpy().take(rows.config) & ~(rows.context_len > max_context),
              "bound": metrics["bound_is_compute"], **metrics}
    if "reason" in names:
        values["reason"], categories["reason"] = reason_codes(configs, rows, metrics["fits"], extra_reason,
                                                              metrics.get("prefill_fits"))
    for name in (label for label in _LABELS if label in names):
        label_codes, categories[name] = pd.factorize(configs[name])
        values[name] = label_codes.take(rows.config)
    # How sure each configuration is: labelled and banded once per configuration, repeated onto its rows.
    categories["calibration"] = list(CALIBRATION_LABELS)
    values["calibration"] = pd.Categorical(configs["calibration"], categories=CALIBRATION_LABELS).codes.take(rows.config)
    values.update({name: configs[name].to_numpy().take(rows.config) for name in BAND_COLUMNS})
    values.update({name: metrics[name] if name in metrics else configs[name].to_numpy().take(rows.config)
                   for name in names if name not in values})
    return {name: full(name, values[name]) for name in names}, {k: v for k, v in categories.items() if k in names}


def as_frame(arrays: dict, categories: dict, names) -> pd.DataFrame:
    """The sweep table from flat column arrays (in ``names`` order) and the categories of the coded ones."""
    columns = {name: _category(arrays[name], categories[name]) if name in categories else arrays[name]
               for name in names}
    return pd.DataFrame(columns, copy=False)


def empty_arrays(n_rows: int, names) -> dict:
    """Uninitialized arrays of the columns ``names`` for a table of ``n_rows`` rows."""
    return {name: np.empty(n_rows, dtype=_output_dtype(name)) for name in names}


def build_table(configs: pd.DataFrame, rows: Rows, metrics: dict, extra_reason=None, extra_columns=(),
                wide: bool = False, columns=None) -> pd.DataFrame:
    """The sweep table of ``table_columns(extra_columns, columns)`` in their dtypes (``wide``:
    metrics in float64, as ``estimate_cases`` returns them)."""
    names = table_columns(extra_columns, columns)
    return as_frame(*column_arrays(configs, rows, metrics, extra_reason, names=names, wide=wide), names)
