"""Read serving-benchmark result JSON (vLLM's ``benchmark_serving.py --save-result`` and
``vllm bench serve --save-result``) into fleetplan's measurement rows.

The JSON holds what was measured but not on what: the GPU, TP degree and precision come from the
caller. Only aggregate fields are read (``request_rate``, ``completed``, ``total_input_tokens``,
``total_output_tokens``, ``request_throughput``, ``output_throughput``, ``total_token_throughput``,
``mean_ttft_ms``, ``mean_tpot_ms`` or ``mean_itl_ms``), each checked before it is used: a field
of the wrong kind or out of range is named with its file. The mean prompt and output lengths
(totals over completed requests) are rounded to whole tokens, as the model predicts whole
lengths; a real run's mean is rarely whole.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from fleetplan.catalogs.input_files import read_json
from fleetplan.errors import InvalidValueError, check_range, shown

_METRICS = {"req_s": "request_throughput", "output_tok_s": "output_throughput",
            "total_tok_s": "total_token_throughput", "ttft_ms": "mean_ttft_ms",
            "tpot_ms": "mean_tpot_ms"}
_NEEDED = ("completed", "total_input_tokens", "total_output_tokens", "request_throughput")
#: The largest count, token total or metric a result may hold (beyond it: a damaged file).
_HIGHEST = 1e15


def model_id_from_hub_name(name: str) -> str:
    """Catalog-style id from a hub model name: ``meta-llama/Llama-3.1-8B-Instruct`` ->
    ``llama-3.1-8b``.

    >>> model_id_from_hub_name("meta-llama/Llama-3.1-70B-Instruct")
    'llama-3.1-70b'
    """
    base = str(name).rstrip("/").split("/")[-1].lower()
    base = re.sub(r"-(instruct|chat|hf|it|base)(-.*)?$", "", base)
    return re.sub(r"[^a-z0-9.]+", "-", base).strip("-")


def _number(result: dict, key: str, label: str, *, low: float, inclusive: bool = False,
            integer: bool = False) -> float:
    """``result[key]`` as a finite number within (``low``, 1e15], or an error naming it."""
    check_range(f"{label}: {key}", result[key], low, _HIGHEST, low_inclusive=inclusive,
                integer=integer)
    return float(result[key])


def _rate(result: dict, label: str) -> float:
    """The offered request rate [req/s]: a number > 0, or inf (absent, null or "inf": all
    requests sent at once)."""
    value = result.get("request_rate")
    if value is None or str(value).strip().lower() in ("inf", "infinity"):
        return np.inf
    if isinstance(value, str):
        message = f"{label}: request_rate must be a number > 0 or \"inf\", got {shown(value)}"
        raise InvalidValueError(message)
    if isinstance(value, float) and np.isinf(value) and value > 0:
        return np.inf
    return _number(result, "request_rate", label, low=0.0)


def _text(result: dict, key: str, label: str, default: str) -> str:
    value = result.get(key)
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip():
        message = f"{label}: {key} must be text, not blank, got {shown(value)}"
        raise InvalidValueError(message)
    return value


def _model_id(result: dict, label: str) -> str:
    """The catalog-style model id from the result's ``model_id`` (or ``model``) field."""
    key = "model_id" if result.get("model_id") is not None else "model"
    if result.get(key) is None:
        message = f"{label}: no model_id (the model's hub name); give --model"
        raise InvalidValueError(message)
    model_id = model_id_from_hub_name(_text(result, key, label, ""))
    if not model_id:
        message = f"{label}: {key} {shown(result[key])} names no model; give --model"
        raise InvalidValueError(message)
    return model_id


def _mean_length(result: dict, key: str, completed: float, label: str) -> int:
    """A total over the completed requests as whole tokens per request [tokens], at least 1."""
    total = _number(result, key, label, low=0.0, inclusive=True)
    mean = int(round(total / completed))
    if mean < 1:
        message = (f"{label}: {key} must be at least 1 token per completed request, got "
                   f"{shown(total)} over {shown(completed)} requests")
        raise InvalidValueError(message)
    return mean


def read_benchmark_json(path: str | Path, *, gpu: str, tp: int, quant: str = "bf16",
                        kv_quant: str | None = None, model: str | None = None) -> pd.DataFrame:
    """Measurement rows (one per metric) from one result file, in the measured.csv format (map
    them to catalog ids with ``measurements.with_ids``)."""
    path = Path(path)
    result = read_json(path, "benchmark result JSON")
    if not isinstance(result, dict):
        message = (f"{path}: not a serving-benchmark result (must be a JSON object, got "
                   f"{type(result).__name__})")
        raise InvalidValueError(message)
    missing = [key for key in _NEEDED if result.get(key) is None]
    if missing:
        message = f"{path.name}: not a serving-benchmark result (missing {', '.join(missing)})"
        raise InvalidValueError(message)
    label = path.name
    completed = _number(result, "completed", label, low=1.0, inclusive=True, integer=True)
    rate = _rate(result, label)
    base = {"source": str(path), "engine": _text(result, "backend", label, "vllm"), "gpu": gpu,
            "tp": int(tp), "n_gpus": int(tp), "model": model or _model_id(result, label),
            "precision_weights": quant, "precision_kv": kv_quant or quant, "scenario": "server",
            "input_len": _mean_length(result, "total_input_tokens", completed, label),
            "output_len": _mean_length(result, "total_output_tokens", completed, label),
            "concurrency_or_batch": f"request rate QPS={'INF' if np.isinf(rate) else rate}",
            "n_requests": completed}
    keys = dict(_METRICS)
    if result.get("mean_tpot_ms") is None:
        keys["tpot_ms"] = "mean_itl_ms"
    rows = [{**base, "metric": metric, "value": _number(result, key, label, low=0.0)}
            for metric, key in keys.items() if result.get(key) is not None]
    return pd.DataFrame(rows)
