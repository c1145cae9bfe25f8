"""Prefill/decode disaggregation: prompts on a prefill pool, generation on a decode pool (possibly
another GPU type), the KV cache moved between them.

Per request the prefill pool spends the prompt's work ``t_p`` (FLOPs and all-reduces, prompts
batched so weight reads amortize) and the decode pool ``G * TPOT / B`` at its operating batch,
with no prefill stretching its steps. Pools are sized in proportion to those demands, so the cost
of a request is ``price_p * gpus_p * t_p + price_d * gpus_d * G * TPOT / B``. TTFT adds the KV
transfer, ``S * kv_bytes_per_token / (links * network)``, to the prompt's prefill.

With a TTFT SLO the prefill pool's capacity is limited too. The fixed part of TTFT (prefill
latency, transfer and the first decode step) must fit in the SLO, else the pair cannot serve;
under the ``load`` capacity model prompts also queue for a prefill replica as an M/D/1 queue with
service ``t_p``, so a replica runs at most at the utilization whose mean wait fits the slack
(``queueing.md1_max_utilization``); under ``knee`` there is no queueing term.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.errors import InvalidValueError
from fleetplan.sweeps import disaggregation_rows as pair
from fleetplan.sweeps import throughput
from fleetplan.sweeps.estimate import case_arrays, estimate_cases
from fleetplan.sweeps.inputs import catalog_or_default
from fleetplan.sweeps.queueing import md1_max_utilization, md1_wait_ms
from fleetplan.sweeps.step_times import prefill_ms

REQUIRED = ("model", "input_len", "output_len", "prefill_gpu", "prefill_tp", "decode_gpu", "decode_tp")
CAPACITY_MODELS = ("load", "knee")


def _side(cases: pd.DataFrame, side: str) -> pd.DataFrame:
    frame = cases.drop(columns=[c for c in cases.columns if c.startswith(("prefill_", "decode_"))])
    return frame.assign(gpu=cases[f"{side}_gpu"], tp=cases[f"{side}_tp"])


def disaggregated(cases: pd.DataFrame, catalogs=None, *, capacity_model: str = "load",
                  **overrides) -> pd.DataFrame:
    """Evaluate each case as a disaggregated pair of pools; inputs repeated, metrics appended.

    Columns: model, input_len, output_len, prefill_gpu, prefill_tp, decode_gpu, decode_tp
    (required); quant, kv_quant, tpot_slo_ms, ttft_slo_ms (optional). The decode pool runs at its
    knee under the TPOT SLO, or at its memory-limited batch without one; ``prefill_req_s`` is the
    prefill replica's capacity under the TTFT SLO (``capacity_model``: load or knee).
    """
    missing = [c for c in REQUIRED if c not in cases.columns]
    if missing:
        message = f"disaggregated cases lack the column {missing[0]} (required: {', '.join(REQUIRED)})"
        raise InvalidValueError(message)
    if capacity_model not in CAPACITY_MODELS:
        message = f"capacity_model must be one of {', '.join(CAPACITY_MODELS)}, got {capacity_model!r}"
        raise InvalidValueError(message)
    catalogs = catalog_or_default(catalogs)
    cases = cases.reset_index(drop=True).assign(quant=cases.get("quant", "bf16"))
    _, prefill_configs, c_p, rows_p = case_arrays(_side(cases, "prefill"), catalogs, **overrides)
    prefill_latency_ms, prefill_work_ms = prefill_ms(c_p, rows_p.input_len)
    # The decode pool holds each prompt's KV cache but does no prompt work: its batch and TPOT
    # come from the decode step alone (the TTFT SLO belongs to the prefill side).
    decode = estimate_cases(_side(cases, "decode").drop(columns=["ttft_slo_ms"], errors="ignore"), catalogs,
                            **overrides)
    transfer_ms = pair.kv_transfer_ms(cases["input_len"].to_numpy(dtype=float), c_p["kv_bytes_per_token_model"],
                                      c_p["network_gb_s"], cases["prefill_tp"].to_numpy(dtype=float),
                                      cases["decode_tp"].to_numpy(dtype=float))
    decode_ms_per_request = _decode_ms_per_request(decode, cases)
    price_p = pair.replica_usd_per_hour(c_p["usd_per_gpu_hour"], c_p["gpus"])
    price_d = decode["usd_per_hour"].to_numpy(dtype=float)
    out = cases.copy()
    tpot_ms = decode["tpot_ms"].to_numpy(dtype=float)
    fixed_ms = pair.disaggregated_ttft_ms(prefill_latency_ms, transfer_ms, tpot_ms)
    ttft_slo_ms = cases["ttft_slo_ms"].to_numpy(dtype=float) if "ttft_slo_ms" in cases else np.full(len(cases), np.nan)
    utilization = prefill_utilization(fixed_ms, prefill_work_ms, ttft_slo_ms, queueing=capacity_model == "load")
    out["prefill_req_s"] = utilization * 1e3 / prefill_work_ms
    out["decode_req_s"] = 1e3 / decode_ms_per_request
    out["prefill_replicas_per_decode_replica"] = throughput.safe_divide(out["decode_req_s"], out["prefill_req_s"])
    out["decode_batch"] = decode["batch"].to_numpy()
    out["kv_transfer_ms"] = transfer_ms
    out["tpot_ms"] = tpot_ms
    queued_ms = md1_wait_ms(utilization, prefill_work_ms) if capacity_model == "load" else 0.0
    out["ttft_ms"] = fixed_ms + np.where(np.isnan(ttft_slo_ms), 0.0, queued_ms)
    # A prefill replica held below full utilization (queueing slack) is paid while idle too.
    prefill_ms_paid = prefill_work_ms / np.where(utilization > 0, utilization, np.nan)
    usd_per_request = (price_p * prefill_ms_paid + price_d * decode_ms_per_request) / 3.6e6
    out["usd_per_k_requests"] = usd_per_request * 1e3
    out["usd_per_m_output_tokens"] = usd_per_request / cases["output_len"].to_numpy(dtype=float) * 1e6
    late = utilization <= 0
    slo_reason = np.full(len(cases), "", dtype=object)
    slo_reason[late] = [f"TTFT SLO {slo:g} ms is below the best achievable {best:.1f} ms on idle pools"
                        for slo, best in zip(ttft_slo_ms[late], fixed_ms[late])]
    config_reason = prefill_configs["config_reason"].to_numpy(dtype=object)
    decode_reason = decode["reason"].astype(str).replace({"nan": ""}).to_numpy(dtype=object)
    out["valid"] = decode["valid"].to_numpy() & (config_reason == "") & ~late
    out["reason"] = np.where(config_reason != "", "prefill: " + config_reason,
                             np.where(decode_reason != "", "decode: " + decode_reason, slo_reason))
    return out


def prefill_utilization(fixed_ms, work_ms, ttft_slo_ms, *, queueing: bool) -> np.ndarray:
    """Share of a prefill replica's time that can be busy while TTFT meets its SLO [fraction].

    1 without an SLO; 0 when the fixed part of TTFT (prefill, transfer, first decode step)
    alone misses it; with ``queueing`` the M/D/1 utilization whose mean wait fits the slack.

    >>> float(prefill_utilization(100.0, 10.0, 105.0, queueing=True)[0])
    0.5
    """
    fixed_ms, slo = np.atleast_1d(np.asarray(fixed_ms, dtype=float)), np.atleast_1d(np.asarray(ttft_slo_ms, dtype=float))
    slack_ms = slo - fixed_ms
    busy = md1_max_utilization(slack_ms, work_ms) if queueing else np.ones_like(slack_ms)
    return np.where(np.isnan(slo), 1.0, np.where(slack_ms < 0, 0.0, busy))


def _decode_ms_per_request(decode: pd.DataFrame, cases: pd.DataFrame) -> np.ndarray:
    """Decode-pool time one request takes: ``G * TPOT / B`` [ms]; infinite where no batch fits."""
    batch = decode["batch"].to_numpy(dtype=float)
    per_request = throughput.safe_divide(cases["output_len"].to_numpy(dtype=float) * decode["tpot_ms"], batch)
    return np.where(batch > 0, per_request, np.inf)
