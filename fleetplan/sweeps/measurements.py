"""Published measurements and the model's prediction of each, for calibration and validation.

The measurement format is the one of ``fleetplan/sweeps/data/measured.csv`` (see
``measured.README.md`` beside it): one published figure per row with its source. Names as the
sources wrote them (``H100 80GB HBM3 (SXM)``, ``Llama-3.1-8B``, ``FP8``) are mapped to catalog ids through the
catalogs' ``aliases`` columns (``Catalogs.alias_map``).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.errors import InvalidValueError
from fleetplan.sweeps import operating_points, queueing
from fleetplan.sweeps.estimate import case_arrays, estimate_cases
from fleetplan.sweeps.inputs import catalog_or_default

# TensorRT-LLM's benchmark defaults: kv_cache_free_gpu_mem_fraction 0.95, max batch 2048.
TRTLLM_ASSUMPTIONS = {"reserve_fraction": 0.05, "max_num_seqs": 2048}
# The online-serving table ran the Triton backend, whose example configurations cap the batch at
# 256 sequences; the source states no cap, so this one is an assumption.
SERVING_ASSUMPTIONS = {"reserve_fraction": 0.05, "max_num_seqs": 256}
DEFAULT_RUN_REQUESTS = 1000  # vLLM's benchmark default num_prompts, for runs that do not say
FACTOR_COLUMNS = ("mbu", "mfu", "mfu_prefill", "step_overhead_ms", "tp_scaling", "request_overhead_ms")
SERVER_METRICS = ("tpot_ms", "ttft_ms", "req_s", "output_tok_s", "total_tok_s")
REQUIRED = ("gpu", "tp", "model", "precision_weights", "input_len", "output_len", "scenario", "metric", "value")


def shipped_measurements_path() -> Path:
    """The published measurements that ship with fleetplan."""
    return Path(str(resources.files("fleetplan.sweeps") / "data" / "measured.csv"))


def _canonical(name: str, aliases: dict[str, str]) -> str:
    key = str(name).strip().lower()
    return aliases.get(key, re.sub(r"[^a-z0-9.]+", "-", key).strip("-"))


def load_measurements(path: str | Path | None = None, catalogs: Catalogs | None = None) -> pd.DataFrame:
    """Measurements with catalog ids (gpu, model, quant, kv_quant) and numeric ``qps`` added."""
    catalogs = catalog_or_default(catalogs)
    gpu_names, quant_names = catalogs.alias_map("gpu"), catalogs.alias_map("quant")
    path = Path(path) if path is not None else shipped_measurements_path()
    if not path.is_file():
        message = f"measurements file {path} does not exist"
        raise InvalidValueError(message)
    frame = pd.read_csv(path)
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        message = f"{path.name}: missing column {missing[0]} (required: {', '.join(REQUIRED)})"
        raise InvalidValueError(message)
    frame["gpu_name"], frame["model_name"] = frame["gpu"], frame["model"]
    frame["gpu"] = frame["gpu_name"].map(lambda n: _canonical(n, gpu_names))
    frame["model"] = frame["model_name"].map(lambda n: _canonical(n, {}))
    frame["quant"] = frame["precision_weights"].map(lambda n: _canonical(n, quant_names))
    kv = frame["precision_kv"] if "precision_kv" in frame else frame["precision_weights"]
    frame["kv_quant"] = kv.map(lambda n: _canonical(n, quant_names))
    frame["tp"] = frame["tp"].astype(int)
    frame["engine_id"] = engine_ids(frame)
    frame["qps"] = _qps(frame.get("concurrency_or_batch", pd.Series("", index=frame.index)))
    if "n_requests" not in frame:
        counted = frame.get("dataset", pd.Series("", index=frame.index)).astype(str).str.extract(r"(\d+) requests")[0]
        frame["n_requests"] = pd.to_numeric(counted, errors="coerce").fillna(DEFAULT_RUN_REQUESTS)
    return frame


def engine_ids(frame: pd.DataFrame) -> pd.Series:
    """Catalog ids of the rows' serving engines (``TensorRT-LLM`` -> ``tensorrt-llm``); ``*`` if unnamed."""
    names = frame["engine"] if "engine" in frame else pd.Series("", index=frame.index)
    ids = names.fillna("").astype(str).map(lambda n: _canonical(n, {}))
    return ids.where(ids != "", "*")


def _qps(text: pd.Series) -> np.ndarray:
    found = text.astype(str).str.extract(r"QPS\s*=?\s*([0-9.]+|INF)", flags=re.IGNORECASE)[0]
    return pd.to_numeric(found.str.upper().replace("INF", "inf"), errors="coerce").to_numpy(dtype=float)


def offline_throughput_rows(measurements: pd.DataFrame) -> pd.DataFrame:
    """The rows the offline model predicts: maximum-load output tokens/s of one TP group."""
    chosen = (measurements["scenario"] == "offline") & (measurements["metric"] == "output_tok_s")
    return measurements[chosen].reset_index(drop=True)


def predict_offline(rows: pd.DataFrame, catalogs: Catalogs | None = None, factors: pd.DataFrame | None = None,
                    **assumptions) -> np.ndarray:
    """Predicted output tokens/s for offline rows [tokens/s], one vectorized call for all rows.

    ``factors`` may hold per-row columns mbu, mfu, step_overhead_ms, tp_scaling (NaN = catalog default).
    """
    cases = _cases(rows, factors)
    cases["mode"] = "offline"
    merged = {**TRTLLM_ASSUMPTIONS, **assumptions}
    return estimate_cases(cases, catalogs, **merged)["output_tok_s"].to_numpy(dtype=float)


def _cases(rows: pd.DataFrame, factors: pd.DataFrame | None) -> pd.DataFrame:
    """Engine cases of measurement rows: their configuration, engine and (optional) factors."""
    cases = rows[["gpu", "model", "quant", "kv_quant", "tp", "input_len", "output_len"]].copy()
    if "engine_id" in rows:  # an engine's own efficiency rows apply where the catalog has them
        cases["engine"] = rows["engine_id"].to_numpy(dtype=object)
    return _with_factors(cases, factors)


def _with_factors(cases: pd.DataFrame, factors: pd.DataFrame | None) -> pd.DataFrame:
    if factors is not None:
        for column in FACTOR_COLUMNS:
            cases[column] = factors[column].to_numpy(dtype=float)
    return cases


def _kinds(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    offline = ((rows["scenario"] == "offline") & (rows["metric"] == "output_tok_s")).to_numpy()
    server = ((rows["scenario"] == "server") & rows["metric"].isin(SERVER_METRICS)).to_numpy() & ~np.isnan(
        rows["qps"].to_numpy(dtype=float))
    return offline, server


def predictable(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows the model predicts: offline output tokens/s, and serving metrics at a known rate."""
    offline, server = _kinds(rows)
    return rows[offline | server].reset_index(drop=True)


def predict_rows(rows: pd.DataFrame, catalogs: Catalogs | None = None, factors: pd.DataFrame | None = None) -> np.ndarray:
    """The model's value for every measurement row it can predict (NaN for the others)."""
    predicted = np.full(len(rows), np.nan)
    offline, server = _kinds(rows)
    for mask, predict in ((offline, predict_offline), (server, predict_server)):
        if mask.any():
            part = rows[mask].reset_index(drop=True)
            part_factors = None if factors is None else factors[mask].reset_index(drop=True)
            predicted[mask] = predict(part, catalogs, part_factors)
    return predicted


def ape_summary(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Median and 90th-percentile absolute percentage error of ``predicted`` vs ``value`` [%]."""
    ape = (frame["predicted"] / frame["value"] - 1.0).abs() * 100.0
    grouped = ape.groupby([frame[b] for b in by]) if by else ape.groupby(np.zeros(len(ape)))
    return pd.DataFrame({"rows": grouped.size(), "median_ape_pct": grouped.median(),
                         "p90_ape_pct": grouped.quantile(0.9)})


def predict_server(rows: pd.DataFrame, catalogs: Catalogs | None = None, factors: pd.DataFrame | None = None, **assumptions) -> np.ndarray:
    """Predicted value of each online-serving row's metric at its offered rate (``qps``).

    Below capacity the steady-state load model (``fleetplan.sweeps.queueing``) applies; at or above it
    (including an unlimited rate) the replica runs at capacity and TTFT includes the admission
    wait of a finite run of ``n_requests`` requests.
    """
    cases = _cases(rows, factors)
    _, _, c, kernel_rows = case_arrays(cases, catalogs, **{**SERVING_ASSUMPTIONS, **assumptions})
    capacity = queueing.capacity_req_s(c, kernel_rows)
    offered = rows["qps"].to_numpy(dtype=float)
    achieved = np.minimum(offered, capacity)
    state = queueing.at_rate(c, kernel_rows, np.minimum(offered, capacity * 0.999))
    slots = operating_points.batch_cap(c, kernel_rows.context_len)
    queue_ms = queueing.finite_run_wait_ms(offered, capacity, rows["n_requests"].to_numpy(dtype=float), slots)
    # Overloaded runs: the finite run's admission wait replaces the steady-state queueing wait.
    ttft = np.where(offered < capacity, state["ttft_ms"], state["ttft_ms"] - state["wait_ms"] + queue_ms)
    by_metric = {"tpot_ms": state["tpot_ms"], "ttft_ms": ttft, "req_s": achieved,
                 "output_tok_s": achieved * kernel_rows.output_len,
                 "total_tok_s": achieved * (kernel_rows.input_len + kernel_rows.output_len)}
    metric = rows["metric"].to_numpy()
    return np.select([metric == name for name in by_metric], list(by_metric.values()), np.nan)

