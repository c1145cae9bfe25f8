"""Predicted vs measured: per-row errors and their median / 90th-percentile summaries."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.errors import InvalidValueError
from fleetplan.sweeps.measurements import ape_summary, load_measurements, predict_rows, predictable
from fleetplan.sweeps.vllm_results import read_benchmark_json


def read_measurements(paths, *, gpu: str | None = None, tp: int | None = None, quant: str = "bf16",
                      kv_quant: str | None = None, model: str | None = None) -> pd.DataFrame:
    """Measurement rows from CSV files (the calibration format) and benchmark result JSON files."""
    frames = []
    for path in map(Path, paths):
        if path.suffix.lower() == ".json":
            if gpu is None or tp is None:
                message = f"{path.name}: a benchmark JSON does not say its hardware; give --gpu and --tp"
                raise InvalidValueError(message)
            frames.append(read_benchmark_json(path, gpu=gpu, tp=tp, quant=quant, kv_quant=kv_quant, model=model))
        else:
            frames.append(load_measurements(path))
    return pd.concat(frames, ignore_index=True)


def compare(measurements: pd.DataFrame, catalogs: Catalogs | None = None) -> pd.DataFrame:
    """The predictable rows with ``predicted`` and ``ape_pct`` (absolute percentage error) added."""
    rows = predictable(measurements)
    rows["predicted"] = predict_rows(rows, catalogs)
    rows["ape_pct"] = (rows["predicted"] / rows["value"] - 1.0).abs() * 100.0
    return rows


def summaries(compared: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Median and p90 APE by metric, and by GPU, model and metric."""
    return {"by metric": ape_summary(compared, ["metric"]),
            "by gpu, model, metric": ape_summary(compared, ["gpu", "model", "metric"])}
