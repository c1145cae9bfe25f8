"""Prefill/decode disaggregation: prompts on a prefill pool, generation on a decode pool (possibly
another GPU type), the KV cache moved between them. Two forms of the one model: ``disaggregated``
sizes the pools of each case at its operating point, ``evaluate_rows`` gives the sweep's rows of
a disaggregated configuration at a given decode batch.

Per request the prefill pool spends the prompt's work ``t_p`` (FLOPs and all-reduces, prompts
batched so weight reads amortize) and the decode pool ``G * TPOT / B`` at its operating batch,
with no prefill stretching its steps. Pools are sized in proportion to those demands, so per
decode replica::

    TPOT             = decode step at (B, L)                                     [ms]
    TTFT             = prefill latency(S) + S * kv / (min(tp_p, tp_d) * BW) + TPOT [ms]
    req_s            = B / (G * TPOT)                                            [requests/s]
    prefill_replicas = req_s * prefill work(S)                                   [replicas]
    usd_per_hour     = price_d * gpus_d + prefill_replicas * price_p * gpus_p    [USD/hour]

With a TTFT SLO the prefill pool's capacity is limited too. The fixed part of TTFT (prefill
latency, transfer and the first decode step) must fit in the SLO, else the pair cannot serve;
under the ``load`` capacity model prompts also queue for a prefill replica as an M/D/1 queue with
service ``t_p``, so a replica runs at most at the utilization whose mean wait fits the slack
(``queueing.md1_max_utilization``); under ``knee`` there is no queueing term. Colocated sweep rows
(``prefill_tp`` 0, ``prefill_gpu`` "none") keep the colocated kernel's values.

References
----------
.. [1] Zhong et al., "DistServe: Disaggregating Prefill and Decoding for Goodput-optimized Large
   Language Model Serving", OSDI 2024, arXiv:2401.09670.
.. [2] Patel et al., "Splitwise: Efficient Generative LLM Inference Using Phase Splitting",
   ISCA 2024, arXiv:2311.18677.
.. [3] Kleinrock, "Queueing Systems, Volume 1: Theory", Wiley 1975, section 5.6.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.errors import InvalidValueError
from fleetplan.sweeps import operators, throughput
from fleetplan.sweeps.estimate import case_arrays, estimate_cases
from fleetplan.sweeps.inputs import catalog_or_default
from fleetplan.sweeps.operating_points import achievable_ms_text
from fleetplan.sweeps.queueing import md1_max_utilization, md1_wait_ms
from fleetplan.sweeps.replica_constants import ReplicaConstants
from fleetplan.sweeps.row_kernel import Rows, memory_limits
from fleetplan.sweeps.step_times import first_token_ms, prefill_ms

REQUIRED = ("model", "input_len", "output_len", "prefill_gpu", "prefill_tp", "decode_gpu", "decode_tp")
CAPACITY_MODELS = ("load", "knee")


def kv_transfer_ms(kv_bytes, network_gb_s, prefill_tp, decode_tp):
    """Time to move one prompt's KV cache from the prefill replica to the decode replica.

    Parameters
    ----------
    kv_bytes : float or array
        KV cache of the prompt, whole model [bytes].
    network_gb_s : float or array
        Network bandwidth per GPU link [GB/s].
    prefill_tp, decode_tp : int or array
        Tensor-parallel degrees of the two replicas [GPUs].

    Returns
    -------
    float or array
        Transfer time [ms].

    Notes
    -----
    Each GPU of the narrower side sends or receives its shard over its own link:

    .. math:: t = \\frac{M_{kv}}{\\min(tp_p, tp_d) \\cdot BW}

    References
    ----------
    .. [1] Zhong et al. 2024, section 4.3 (KV-cache transmission).

    Examples
    --------
    >>> round(float(kv_transfer_ms(4000 * 163840, 50.0, 4, 2)), 4)
    6.5536
    """
    links = np.asarray(np.minimum(prefill_tp, decode_tp), dtype=float)
    return np.asarray(kv_bytes, dtype=float) / (links * np.asarray(network_gb_s) * 1e9) * 1e3


def prompt_kv_bytes(c: ReplicaConstants, input_len):
    """KV cache a prompt leaves behind, whole model (sliding-window layers keep their window) [bytes]."""
    return operators.attended_tokens(input_len, c.full_layers, c.sliding_layers, c.sliding_window) * \
        c.kv_bytes_per_layer_token_model


def decode_only_req_s(batch, tpot_ms, output_len):
    """Requests per second a decode replica completes without prompt work.

    Parameters
    ----------
    batch : int or array
        Sequences decoded per step, B [sequences].
    tpot_ms : float or array
        Decode step [ms].
    output_len : int or array
        Output tokens per request, G [tokens].

    Returns
    -------
    float or array
        Requests per second [requests/s].

    Notes
    -----
    .. math:: r = \\frac{B}{G \\cdot TPOT}

    References
    ----------
    .. [1] Zhong et al. 2024, section 3 (the decode instance's goodput).

    Examples
    --------
    >>> float(decode_only_req_s(64, 20.0, 500))
    6.4
    """
    return throughput.request_rate_req_s(batch, tpot_ms, output_len, 0.0)


def prefill_replicas_per_decode_replica(decode_req_s, prefill_work_ms):
    """Prefill replicas that keep one decode replica fed.

    Parameters
    ----------
    decode_req_s : float or array
        Requests per second of one decode replica [requests/s].
    prefill_work_ms : float or array
        Prefill replica time per prompt [ms].

    Returns
    -------
    float or array
        Prefill replicas [replicas].

    Notes
    -----
    .. math:: n_p = r_d \\cdot t_p / 1000

    References
    ----------
    .. [1] Zhong et al. 2024, section 4.1 (instance ratio from per-phase throughput).

    Examples
    --------
    >>> float(prefill_replicas_per_decode_replica(6.4, 125.0))
    0.8
    """
    return np.asarray(decode_req_s, dtype=float) * prefill_work_ms / 1e3


def replica_usd_per_hour(usd_per_gpu_hour, gpus):
    """Price of one replica.

    Parameters
    ----------
    usd_per_gpu_hour : float or array
        Price of one GPU [USD/GPU-hour].
    gpus : int or array
        GPUs in the replica [GPUs].

    Returns
    -------
    float or array
        Price of the replica [USD/hour].

    Notes
    -----
    .. math:: c = p_{gpu} \\cdot n_{gpus}

    References
    ----------
    .. [1] Fleetplan seed 000, section 4 (price per GPU-hour).

    Examples
    --------
    >>> float(replica_usd_per_hour(2.5, 4))
    10.0
    """
    return np.asarray(usd_per_gpu_hour, dtype=float) * gpus


def pair_usd_per_hour(decode_usd_per_hour, prefill_replicas, prefill_usd_per_hour):
    """Price of a decode replica with its share of prefill replicas.

    Parameters
    ----------
    decode_usd_per_hour : float or array
        Price of the decode replica [USD/hour].
    prefill_replicas : float or array
        Prefill replicas per decode replica [replicas].
    prefill_usd_per_hour : float or array
        Price of one prefill replica [USD/hour].

    Returns
    -------
    float or array
        Price of the pair [USD/hour].

    Notes
    -----
    .. math:: c = c_d + n_p \\cdot c_p

    References
    ----------
    .. [1] Patel et al. 2024, section 5 (cost of phase-split clusters).

    Examples
    --------
    >>> float(pair_usd_per_hour(8.0, 0.8, 10.0))
    16.0
    """
    prefill_share = np.asarray(prefill_replicas, dtype=float) * prefill_usd_per_hour
    return np.asarray(decode_usd_per_hour, dtype=float) + prefill_share


def prefill_utilization(fixed_ms, work_ms, ttft_slo_ms, *, queueing: bool) -> np.ndarray:
    """Share of a prefill replica's time that can be busy while TTFT meets its SLO.

    Parameters
    ----------
    fixed_ms : float or array
        TTFT without queueing: prefill, transfer, first decode step [ms].
    work_ms : float or array
        Prefill replica time per prompt, the M/D/1 service time [ms].
    ttft_slo_ms : float or array
        TTFT SLO; NaN = none [ms].
    queueing : bool
        Keep the M/D/1 mean wait within the slack (else the replica may be fully busy).

    Returns
    -------
    array
        Utilization [fraction]: 1 without an SLO, 0 when ``fixed_ms`` alone misses it.

    Notes
    -----
    .. math:: \\rho = \\frac{2a}{1 + 2a}, \\quad a = \\frac{SLO - t_{fixed}}{t_p}

    References
    ----------
    .. [1] Kleinrock 1975, section 5.6; Zhong et al. 2024, section 4.1.

    Examples
    --------
    >>> float(prefill_utilization(100.0, 10.0, 105.0, queueing=True)[0])
    0.5
    """
    fixed_ms, slo = np.atleast_1d(np.asarray(fixed_ms, dtype=float)), np.atleast_1d(np.asarray(ttft_slo_ms, dtype=float))
    slack_ms = slo - fixed_ms
    busy = md1_max_utilization(slack_ms, work_ms) if queueing else np.ones_like(slack_ms)
    return np.where(np.isnan(slo), 1.0, np.where(slack_ms < 0, 0.0, busy))


def _side(cases: pd.DataFrame, side: str) -> pd.DataFrame:
    frame = cases.drop(columns=[c for c in cases.columns if c.startswith(("prefill_", "decode_"))])
    return frame.assign(gpu=cases[f"{side}_gpu"], tp=cases[f"{side}_tp"])


def disaggregated(cases: pd.DataFrame, catalogs: Catalogs | None = None, *, capacity_model: str = "load",
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
    transfer_ms = kv_transfer_ms(prompt_kv_bytes(c_p, cases["input_len"].to_numpy(dtype=float)), c_p.network_gb_s,
                                 cases["prefill_tp"].to_numpy(dtype=float), cases["decode_tp"].to_numpy(dtype=float))
    decode_ms_per_request = _decode_ms_per_request(decode, cases)
    price_p = replica_usd_per_hour(c_p.usd_per_gpu_hour, c_p.gpus)
    price_d = decode["usd_per_hour"].to_numpy(dtype=float)
    out = cases.copy()
    tpot_ms = decode["tpot_ms"].to_numpy(dtype=float)
    fixed_ms = first_token_ms(prefill_latency_ms, 1.0, tpot_ms, transfer_ms=transfer_ms)
    ttft_slo_ms = cases["ttft_slo_ms"].to_numpy(dtype=float) if "ttft_slo_ms" in cases else np.full(len(cases), np.nan)
    utilization = prefill_utilization(fixed_ms, prefill_work_ms, ttft_slo_ms, queueing=capacity_model == "load")
    out["prefill_req_s"] = utilization * 1e3 / prefill_work_ms
    with np.errstate(divide="ignore"):  # 0 ms: a decode side that cannot run serves nothing
        out["decode_req_s"] = np.where(decode_ms_per_request > 0, 1e3 / decode_ms_per_request, 0.0)
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
    slo_reason[late] = [f"TTFT SLO {slo:g} ms is below the best achievable "
                        f"{achievable_ms_text(best)} ms on idle pools"
                        for slo, best in zip(ttft_slo_ms[late], fixed_ms[late])]
    config_reason = prefill_configs["config_reason"].to_numpy(dtype=object)
    decode_reason = decode["reason"].astype(str).replace({"nan": ""}).to_numpy(dtype=object)
    out["valid"] = decode["valid"].to_numpy() & (config_reason == "") & ~late
    out["reason"] = np.where(config_reason != "", "prefill: " + config_reason,
                             np.where(decode_reason != "", "decode: " + decode_reason, slo_reason))
    return out


def _decode_ms_per_request(decode: pd.DataFrame, cases: pd.DataFrame) -> np.ndarray:
    """Decode-pool time one request takes: ``G * TPOT / B`` [ms]; infinite where no batch fits."""
    batch = decode["batch"].to_numpy(dtype=float)
    per_request = throughput.safe_divide(cases["output_len"].to_numpy(dtype=float) * decode["tpot_ms"], batch)
    return np.where(batch > 0, per_request, np.inf)


def evaluate_rows(c: ReplicaConstants, rows: Rows, colocated: dict) -> dict:
    """The metrics of sweep ``rows`` with disaggregated configurations (``c.split``) replaced by
    their pair's values; ``colocated`` is ``row_kernel.evaluate`` of the same rows. Adds the
    ``prefill_replicas`` and ``kv_transfer_ms`` columns (0 where colocated) and ``prefill_fits``
    (whether the prefill replica holds one prompt's KV cache).
    """
    prefill = c.prefill
    latency_ms, work_ms = prefill_ms(prefill, rows.input_len)
    transfer_ms = kv_transfer_ms(prompt_kv_bytes(prefill, rows.input_len), prefill.network_gb_s, prefill.tp, c.tp)
    tpot_ms = colocated["tpot_ms"]
    req_s = decode_only_req_s(rows.batch, tpot_ms, rows.output_len)
    replicas = prefill_replicas_per_decode_replica(req_s, work_ms)
    usd_per_hour = pair_usd_per_hour(colocated["usd_per_hour"], replicas,
                                     replica_usd_per_hour(prefill.usd_per_gpu_hour, prefill.gpus))
    holds = memory_limits(prefill, rows.input_len)[0] >= 1
    output_tok_s = req_s * rows.output_len
    split = {
        "ttft_ms": first_token_ms(latency_ms, 1.0, tpot_ms, transfer_ms=transfer_ms), "req_s": req_s,
        "output_tok_s": output_tok_s, "usd_per_hour": usd_per_hour, "fits": colocated["fits"] & holds,
        "prefill_tok_s": throughput.prefill_tok_s(rows.input_len, work_ms),
        "usd_per_m_output_tokens": throughput.usd_per_m_tokens(usd_per_hour, output_tok_s),
        "usd_per_m_total_tokens": throughput.usd_per_m_tokens(usd_per_hour, req_s * (rows.input_len + rows.output_len)),
        "usd_per_k_requests": throughput.usd_per_k_requests(usd_per_hour, req_s),
        "prefill_replicas": replicas, "kv_transfer_ms": transfer_ms, "prefill_fits": holds,
    }
    fallback = {"prefill_replicas": 0.0, "kv_transfer_ms": 0.0, "prefill_fits": True}
    return {**colocated, **{name: np.where(c.split, value, colocated.get(name, fallback.get(name)))
                            for name, value in split.items()}}
