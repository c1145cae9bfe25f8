"""Prefill/decode disaggregation: prompts on a prefill pool, generation on a decode pool (possibly
another GPU type), the KV cache moved between them.

Per request the prefill pool spends the prompt's work ``t_p`` (FLOPs and all-reduces, prompts
batched so weight reads amortize) and the decode pool ``G * TPOT / B`` at its operating batch,
with no prefill stretching its steps. Pools are sized in proportion to those demands, so the cost
of a request is ``price_p * gpus_p * t_p + price_d * gpus_d * G * TPOT / B``. TTFT adds the KV
transfer, ``S * kv_bytes_per_token / (links * network)``, to the prompt's prefill.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.errors import InvalidValueError
from fleetplan.sweeps import latency, throughput
from fleetplan.sweeps.estimate import case_arrays, estimate_cases
from fleetplan.sweeps.validate import catalog_or_default

REQUIRED = ("model", "input_len", "output_len", "prefill_gpu", "prefill_tp", "decode_gpu", "decode_tp")


def _side(cases: pd.DataFrame, side: str) -> pd.DataFrame:
    frame = cases.drop(columns=[c for c in cases.columns if c.startswith(("prefill_", "decode_"))])
    return frame.assign(gpu=cases[f"{side}_gpu"], tp=cases[f"{side}_tp"])


def disaggregated(cases: pd.DataFrame, catalogs=None, **overrides) -> pd.DataFrame:
    """Evaluate each case as a disaggregated pair of pools; inputs repeated, metrics appended.

    Columns: model, input_len, output_len, prefill_gpu, prefill_tp, decode_gpu, decode_tp
    (required); quant, kv_quant, tpot_slo_ms, ttft_slo_ms (optional). The decode pool runs at its
    knee under the TPOT SLO, or at its memory-limited batch without one.
    """
    missing = [c for c in REQUIRED if c not in cases.columns]
    if missing:
        message = f"disaggregated cases lack the column {missing[0]} (required: {', '.join(REQUIRED)})"
        raise InvalidValueError(message)
    catalogs = catalog_or_default(catalogs)
    cases = cases.reset_index(drop=True).assign(quant=cases.get("quant", "bf16"))
    _, prefill_configs, c_p, rows_p = case_arrays(_side(cases, "prefill"), catalogs, **overrides)
    prefill_latency_ms, prefill_work_ms = _prefill(c_p, rows_p)
    # The decode pool holds each prompt's KV cache but does no prompt work: its batch and TPOT
    # come from the decode step alone (the TTFT SLO belongs to the prefill side).
    decode = estimate_cases(_side(cases, "decode").drop(columns=["ttft_slo_ms"], errors="ignore"), catalogs,
                            **overrides)
    kv_bytes = prefill_configs["kv_bytes_per_token_model"].to_numpy() * cases["input_len"].to_numpy(dtype=float)
    links = np.minimum(cases["prefill_tp"], cases["decode_tp"]).to_numpy(dtype=float)
    transfer_ms = latency.kv_transfer_time_ms(kv_bytes, c_p["network_gb_s"], links)
    decode_ms_per_request = _decode_ms_per_request(decode, cases)
    price_p = c_p["usd_per_gpu_hour"] * c_p["gpus"]
    price_d = decode["usd_per_hour"].to_numpy(dtype=float)
    usd_per_request = (price_p * prefill_work_ms + price_d * decode_ms_per_request) / 3.6e6
    out = cases.copy()
    out["prefill_req_s"] = 1e3 / prefill_work_ms
    out["decode_req_s"] = 1e3 / decode_ms_per_request
    out["prefill_replicas_per_decode_replica"] = out["decode_req_s"] / out["prefill_req_s"]
    out["decode_batch"] = decode["batch"].to_numpy()
    out["kv_transfer_ms"] = transfer_ms
    out["tpot_ms"] = decode["tpot_ms"].to_numpy()
    out["ttft_ms"] = prefill_latency_ms + transfer_ms + out["tpot_ms"]
    out["usd_per_k_requests"] = usd_per_request * 1e3
    out["usd_per_m_output_tokens"] = usd_per_request / cases["output_len"].to_numpy(dtype=float) * 1e6
    out["valid"] = decode["valid"].to_numpy() & (prefill_configs["config_reason"] == "").to_numpy()
    out["reason"] = np.where(prefill_configs["config_reason"] != "", "prefill: " + prefill_configs["config_reason"],
                             np.where(decode["reason"].astype(str) != "", "decode: " + decode["reason"].astype(str), ""))
    return out


def _prefill(c, rows):
    from fleetplan.sweeps.steps import prefill_ms

    return prefill_ms(c, rows.input_len)


def _decode_ms_per_request(decode: pd.DataFrame, cases: pd.DataFrame) -> np.ndarray:
    """Decode-pool time one request takes: ``G * TPOT / B`` [ms]; infinite where no batch fits."""
    batch = decode["batch"].to_numpy(dtype=float)
    per_request = throughput.safe_divide(cases["output_len"].to_numpy(dtype=float) * decode["tpot_ms"], batch)
    return np.where(batch > 0, per_request, np.inf)
