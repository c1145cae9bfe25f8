"""The model against measurements: in sample, and held out by GPU or by model.

In sample, every predictable row is predicted with the catalogs as they are. Held out, each GPU
(or model) in turn is left out: the efficiencies are refitted from the priors on the other rows
(``fitting.fit``), written as catalog rows the way the shipped ones are written
(``fitted_catalog.efficiency_rows``: measured GPUs, and siblings of the same architecture), and
the left-out rows are predicted through that catalog. A left-out GPU with a measured sibling is
thus ``transferred``, one without is ``prior``, and a left-out model on a measured GPU is
``measured``: the error bands of each calibration label come from the held-out errors of its
kind (``error_bands``).
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.errors import InvalidValueError, UnknownNameError, check_range, did_you_mean
from fleetplan.sweeps.distributed import worker_context
from fleetplan.sweeps.efficiencies import CALIBRATION_LABELS
from fleetplan.sweeps.fitted_catalog import efficiency_rows
from fleetplan.sweeps.fitting import fit, priors_only
from fleetplan.sweeps.inputs import catalog_or_default
from fleetplan.sweeps.measurements import (
    NAMED_COLUMNS,
    ape_summary,
    load_measurements,
    predictable,
    with_ids,
)
from fleetplan.sweeps.predictions import MeasurementModel, with_prediction
from fleetplan.sweeps.vllm_results import read_benchmark_json

DIMENSIONS = ("gpu", "model", "quant", "engine_id", "regime")
THROUGHPUT_REGIMES = ("offline", "static")  # the capacity an estimate's error band describes
#: The validation of predictions made with the catalogs as they are.
IN_SAMPLE = "in sample"
HOLDOUTS = {"gpu": "leave-one-GPU-out", "model": "leave-one-model-out"}


def read_measurements(paths, *, gpu: str | None = None, tp: int | None = None, quant: str = "bf16",
                      kv_quant: str | None = None, model: str | None = None,
                      catalogs: Catalogs | None = None) -> pd.DataFrame:
    """Measurement rows from CSV files (the calibration format) and benchmark result JSON files."""
    catalogs = catalog_or_default(catalogs)
    frames = []
    for path in map(Path, paths):
        if path.suffix.lower() == ".json":
            if gpu is None or tp is None:
                message = f"{path.name}: a benchmark JSON does not say its hardware; give --gpu and --tp"
                raise InvalidValueError(message)
            check_range("--tp", tp, 1, 1024, integer=True)
            raw = read_benchmark_json(path, gpu=gpu, tp=tp, quant=quant, kv_quant=kv_quant, model=model)
            frames.append(_known_hardware(with_ids(raw, catalogs), catalogs, path.name,
                                          "--model" if model else "model_id"))
        else:
            frames.append(load_measurements(path, catalogs))
    return pd.concat(frames, ignore_index=True)


def _known_hardware(rows: pd.DataFrame, catalogs: Catalogs, label: str,
                    model_field: str) -> pd.DataFrame:
    """``rows`` of one benchmark JSON, whose GPU, model and precisions (the options, or the
    file's model_id) the catalogs must hold: every row of the file shares them, so an unknown
    one would leave nothing to predict."""
    fields = {"gpu": "--gpu", "model": model_field, "quant": "--quant", "kv_quant": "--quant"}
    for column, (kind, given) in NAMED_COLUMNS.items():
        known = catalogs.table(kind).index
        if len(rows) and rows[column].iloc[0] not in known:
            unknown = did_you_mean(str(rows[given].iloc[0]), known, kind=kind)
            raise UnknownNameError(f"{label}: {fields[column]}: {unknown}")
    return rows


def compare(measurements: pd.DataFrame, catalogs: Catalogs | None = None) -> pd.DataFrame:
    """The predictable rows with ``predicted``, ``error_pct`` (signed) and ``ape_pct`` added."""
    out = with_prediction(predictable(measurements), catalogs)
    out["ape_pct"] = out["error_pct"].abs()
    return out


def with_efficiency(catalogs: Catalogs, rows: pd.DataFrame) -> Catalogs:
    """A copy of ``catalogs`` whose efficiency catalog is the priors plus ``rows``."""
    copy = priors_only(catalogs)
    table = pd.concat([copy.efficiency, rows], ignore_index=True)
    table = table.astype({c: copy.efficiency[c].dtype for c in copy.efficiency.columns if c in table})
    object.__setattr__(copy, "efficiency", table)
    return copy


def fitted_catalogs(rows: pd.DataFrame, catalogs: Catalogs, source: str) -> Catalogs:
    """The catalogs with efficiencies fitted to ``rows`` from the priors."""
    priors = priors_only(catalogs)
    result = fit(rows, priors)
    return with_efficiency(catalogs, efficiency_rows(result, priors, rows, source))


def holdout(rows: pd.DataFrame, catalogs: Catalogs, by: str, workers: int = 1) -> pd.DataFrame:
    """Each group of ``by`` (gpu or model) predicted from a fit to the other rows, with the
    ``calibration`` label its prediction rests on (the fits on ``workers`` processes)."""
    return holdouts(rows, catalogs, (by,), workers)[0]


def holdouts(rows: pd.DataFrame, catalogs: Catalogs, dimensions,
             workers: int = 1) -> list[pd.DataFrame]:
    """:func:`holdout` for each of ``dimensions``, every refit of all of them shared among
    ``workers`` processes: each refit is independent of the others, so the rows are the same
    whatever the number of workers, only sooner (a refit of the shipped data takes 15-25 s)."""
    jobs = [(by, rows[rows[by] != key], rows[rows[by] == key], catalogs,
             f"{HOLDOUTS[by]} fit without {key}")
            for by in dimensions for key in sorted(rows[by].unique()) if (rows[by] != key).any()]
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs)),
                                 mp_context=worker_context()) as pool:
            parts = list(pool.map(_held_out_group, jobs))
    else:
        parts = [_held_out_group(job) for job in jobs]
    tables = []
    for by in dimensions:
        groups = [part for job, part in zip(jobs, parts) if job[0] == by]
        out = pd.concat(groups, ignore_index=True) if groups else \
            rows.iloc[0:0].assign(predicted=np.nan, error_pct=np.nan, calibration="")
        out["ape_pct"] = out["error_pct"].abs()
        out["validation"] = HOLDOUTS[by]
        tables.append(out)
    return tables


def _held_out_group(job) -> pd.DataFrame:
    """The rows of one left-out group predicted from a fit to the others (a worker's task)."""
    _, train, test, catalogs, source = job
    fitted = fitted_catalogs(train, catalogs, source)
    predicted = with_prediction(test, fitted)
    predicted["calibration"] = _labels(predicted, fitted)
    return predicted


def _labels(rows: pd.DataFrame, catalogs: Catalogs) -> np.ndarray:
    return MeasurementModel(rows, catalogs).configs["calibration"].to_numpy(dtype=object)


def with_validation(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its ``validation`` column: rows without one are in sample."""
    return frame if "validation" in frame else frame.assign(validation=IN_SAMPLE)


def error_tables(frame: pd.DataFrame) -> pd.DataFrame:
    """One long table: rows, median and p90 absolute error and median signed error [%] by
    validation (in sample, held out), each dimension of ``DIMENSIONS`` and metric."""
    frame = with_validation(frame)
    parts = []
    for dimension in ("overall", *DIMENSIONS):
        keys = ["validation", "metric"] if dimension == "overall" else ["validation", dimension, "metric"]
        table = ape_summary(frame, keys).reset_index()
        table.insert(1, "dimension", dimension)
        table.insert(2, "key", "all" if dimension == "overall" else table.pop(dimension).astype(str))
        parts.append(table)
    return pd.concat(parts, ignore_index=True)


def error_bands(held_out: pd.DataFrame) -> pd.DataFrame:
    """p10, p50 and p90 of the signed relative error [%] of held-out throughput rows, by the
    calibration label they were predicted under (what ``estimate_cases`` reports as the band)."""
    chosen = held_out[held_out["regime"].isin(THROUGHPUT_REGIMES)]
    rows = []
    for label in CALIBRATION_LABELS:
        errors = chosen.loc[chosen["calibration"] == label, "error_pct"].dropna()
        if len(errors):
            rows.append({"calibration": label, "rows": len(errors), "error_p10_pct": errors.quantile(0.1),
                         "error_p50_pct": errors.quantile(0.5), "error_p90_pct": errors.quantile(0.9),
                         "validation": ", ".join(sorted(chosen.loc[chosen["calibration"] == label, "validation"].unique()))})
    return pd.DataFrame(rows).round({"error_p10_pct": 1, "error_p50_pct": 1, "error_p90_pct": 1})


def summaries(compared: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Median and p90 absolute error by metric, and by each dimension and metric, per validation."""
    frame = with_validation(compared)
    tables = {"by metric": ape_summary(frame, ["validation", "metric"])}
    for dimension in DIMENSIONS:
        tables[f"by {dimension.removesuffix('_id')}"] = ape_summary(frame, ["validation", dimension, "metric"])
    tables["by gpu, model, metric"] = ape_summary(frame, ["validation", "gpu", "model", "metric"])
    return tables
