"""Read serving-benchmark result JSON (vLLM's ``benchmark_serving.py --save-result`` and
``vllm bench serve --save-result``) into fleetplan's measurement rows.

The JSON holds what was measured but not on what: the GPU, TP degree and precision come from the
caller. Only aggregate fields are read (``request_rate``, ``completed``, ``total_input_tokens``,
``total_output_tokens``, ``request_throughput``, ``output_throughput``, ``total_token_throughput``,
``mean_ttft_ms``, ``mean_tpot_ms`` or ``mean_itl_ms``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from fleetplan.catalogs.input_files import read_json
from fleetplan.errors import InvalidValueError

_METRICS = {"req_s": "request_throughput", "output_tok_s": "output_throughput",
            "total_tok_s": "total_token_throughput", "ttft_ms": "mean_ttft_ms", "tpot_ms": "mean_tpot_ms"}
_NEEDED = ("completed", "total_input_tokens", "total_output_tokens", "request_throughput")


def model_id_from_hub_name(name: str) -> str:
    """Catalog-style id from a hub model name: ``meta-llama/Llama-3.1-8B-Instruct`` -> ``llama-3.1-8b``.

    >>> model_id_from_hub_name("meta-llama/Llama-3.1-70B-Instruct")
    'llama-3.1-70b'
    """
    base = str(name).rstrip("/").split("/")[-1].lower()
    base = re.sub(r"-(instruct|chat|hf|it|base)(-.*)?$", "", base)
    return re.sub(r"[^a-z0-9.]+", "-", base).strip("-")


def _rate(value) -> float:
    if value is None or str(value).strip().lower() in ("inf", "infinity"):
        return np.inf
    return float(value)


def read_benchmark_json(path: str | Path, *, gpu: str, tp: int, quant: str = "bf16", kv_quant: str | None = None,
                        model: str | None = None) -> pd.DataFrame:
    """Measurement rows (one per metric) from one result file, in the measured.csv format (map
    them to catalog ids with ``measurements.with_ids``)."""
    path = Path(path)
    result = read_json(path, "benchmark result JSON")
    if not isinstance(result, dict):
        message = f"{path}: not a serving-benchmark result (must be a JSON object, got {type(result).__name__})"
        raise InvalidValueError(message)
    missing = [key for key in _NEEDED if key not in result]
    if missing or not result.get("completed"):
        message = f"{path.name}: not a serving-benchmark result (missing {', '.join(missing) or 'completed requests'})"
        raise InvalidValueError(message)
    completed = float(result["completed"])
    model_id = model or model_id_from_hub_name(result.get("model_id") or result.get("model") or "")
    rate = _rate(result.get("request_rate"))
    base = {"source": str(path), "engine": result.get("backend", "vllm"), "gpu": gpu, "tp": int(tp), "n_gpus": int(tp),
            "model": model_id, "precision_weights": quant, "precision_kv": kv_quant or quant, "scenario": "server",
            "input_len": result["total_input_tokens"] / completed, "output_len": result["total_output_tokens"] / completed,
            "concurrency_or_batch": f"request rate QPS={'INF' if np.isinf(rate) else rate}", "n_requests": completed}
    values = {metric: result.get(key) for metric, key in _METRICS.items()}
    if values["tpot_ms"] is None:
        values["tpot_ms"] = result.get("mean_itl_ms")
    rows = [{**base, "metric": metric, "value": float(value)} for metric, value in values.items() if value is not None]
    return pd.DataFrame(rows)
