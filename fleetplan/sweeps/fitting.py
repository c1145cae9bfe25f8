"""Fit efficiency factors (MBU, MFU, step overhead, TP scaling, request overhead) to measurements.

Least squares on log(predicted / measured) with a weak prior on each factor, so groups with little
data stay near the seed's values and groups with much data follow the data.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from fleetplan.catalogs import Catalogs
from fleetplan.sweeps.assumptions import WILDCARD
from fleetplan.sweeps.measurements import predict_rows

PRIOR = {"mbu": 0.7, "mfu": 0.5, "mfu_prefill": 0.5, "step_overhead_ms": 0.5, "tp_scaling": 0.9,
         "request_overhead_ms": 0.0}
# Spread of the prior: in log space for the utilizations, absolute for the overheads [ms] and the
# TP scaling; wide enough that data dominates wherever there is some.
PRIOR_SIGMA = {"mbu": 0.5, "mfu": 0.5, "mfu_prefill": 0.5, "step_overhead_ms": 2.0, "tp_scaling": 0.2,
               "request_overhead_ms": 10.0}
BOUNDS = ([0.2, 0.1, 0.1, 0.0, 0.5, 0.0], [0.95, 0.95, 0.95, 10.0, 1.0, 100.0])
FACTORS = list(PRIOR)
_LOG_FACTORS = ("mbu", "mfu", "mfu_prefill")


def constant_factors(rows: pd.DataFrame, theta) -> pd.DataFrame:
    """The same factors on every row, as the per-row table ``predict_offline`` takes."""
    return pd.DataFrame({name: theta[i] for i, name in enumerate(FACTORS)}, index=rows.index)


def _residuals(theta, rows, catalogs: Catalogs) -> np.ndarray:
    predicted = predict_rows(rows, catalogs, constant_factors(rows, theta))
    data = np.log(predicted / rows["value"].to_numpy(dtype=float))
    prior = [np.log(theta[i] / PRIOR[name]) / PRIOR_SIGMA[name] if name in _LOG_FACTORS
             else (theta[i] - PRIOR[name]) / PRIOR_SIGMA[name] for i, name in enumerate(FACTORS)]
    return np.concatenate([np.nan_to_num(data, nan=10.0), prior])


def fit_factors(rows: pd.DataFrame, catalogs: Catalogs | None = None) -> dict[str, float]:
    """Factors that best explain the measured ``rows`` (columns as ``load_measurements``; rows the model
    cannot predict must have been left out, see ``calibration.predictable``)."""
    start = [PRIOR[name] for name in FACTORS]
    result = least_squares(_residuals, start, bounds=BOUNDS, args=(rows, catalogs), diff_step=1e-3)
    return dict(zip(FACTORS, result.x))


def fit_by_gpu(rows: pd.DataFrame, catalogs: Catalogs, engine: str = WILDCARD) -> pd.DataFrame:
    """One fit per (GPU, weight quantization) group, keyed like the efficiency catalog by
    (engine, GPU, compute precision)."""
    fitted = []
    for (gpu, quant), group in rows.groupby(["gpu", "quant"]):
        precision = catalogs.quants.loc[quant, "compute_precision"]
        fitted.append({"engine": engine, "gpu": gpu, "precision": precision, **fit_factors(group, catalogs),
                       "n_points": len(group)})
    return pd.DataFrame(fitted)


def fit_profiles(rows: pd.DataFrame, catalogs: Catalogs) -> pd.DataFrame:
    """Efficiency rows fitted to ``rows``: per (GPU, precision) over every engine (engine ``*``),
    and, when the rows come from two or more engines, per (engine, GPU, precision) as well, so that
    each engine gets its own profile and any other engine the pooled one."""
    pooled = fit_by_gpu(rows, catalogs)
    engines = sorted(set(rows["engine_id"]) - {WILDCARD}) if "engine_id" in rows else []
    if len(engines) < 2:
        return pooled
    per_engine = [fit_by_gpu(rows[rows["engine_id"] == engine], catalogs, engine) for engine in engines]
    return pd.concat([pooled, *per_engine], ignore_index=True)


def factors_for_rows(rows: pd.DataFrame, groups: pd.DataFrame, catalogs: Catalogs) -> pd.DataFrame:
    """Each row's fitted factors from ``fit_profiles`` or ``fit_by_gpu`` output, matched on GPU and
    compute precision, and on the row's engine where the fit has a profile for it."""
    precision = catalogs.quants["compute_precision"].reindex(rows["quant"]).to_numpy()
    engine = rows["engine_id"].to_numpy(dtype=object) if "engine_id" in rows else WILDCARD
    keys = pd.DataFrame({"engine": engine, "gpu": rows["gpu"].to_numpy(), "precision": precision})
    own = keys.merge(groups, on=["engine", "gpu", "precision"], how="left")[FACTORS]
    pooled = keys.assign(engine=WILDCARD).merge(groups, on=["engine", "gpu", "precision"], how="left")[FACTORS]
    return own.fillna(pooled)


def with_prediction(rows: pd.DataFrame, catalogs: Catalogs, factors: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with a ``predicted`` column under per-row ``factors``."""
    out = rows.copy()
    out["predicted"] = predict_rows(rows, catalogs, factors)
    return out


def leave_one_gpu_out(rows: pd.DataFrame, catalogs: Catalogs) -> pd.DataFrame:
    """Predictions for each GPU from factors fitted to the other GPUs only."""
    held_out = []
    for gpu in sorted(rows["gpu"].unique()):
        train, test = rows[rows["gpu"] != gpu], rows[rows["gpu"] == gpu]
        theta = list(fit_factors(train, catalogs).values())
        held_out.append(with_prediction(test, catalogs, constant_factors(test, theta)))
    return pd.concat(held_out, ignore_index=True)
