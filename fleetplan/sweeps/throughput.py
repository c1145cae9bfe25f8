"""Throughput, request capacity and cost formulas.

Units: tokens/s, requests/s, milliseconds, USD per hour. Scalars or numpy arrays throughout.
"""

from __future__ import annotations

import numpy as np


def safe_divide(numerator, denominator):
    """``numerator / denominator``, NaN where the denominator is not positive."""
    denominator = np.asarray(denominator, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        result = np.asarray(numerator, dtype=float) / denominator
    not_positive = ~(denominator > 0)
    return np.where(not_positive, np.nan, result) if not_positive.any() else result


def decode_tok_s(batch, tpot_ms):
    """Decode throughput of one replica: ``B / TPOT`` [tokens/s] (seed 000, section 1).

    >>> round(float(decode_tok_s(1, 6.823)), 1)
    146.6
    """
    return safe_divide(np.asarray(batch, dtype=float) * 1e3, tpot_ms)


def decode_ceiling_tok_s(memory_bw_tb_s, mbu, context_len, kv_bytes_per_token):
    """Bandwidth ceiling of decode as the batch grows without bound [tokens/s].

    ``ceiling = BW * MBU / (L * kv)`` (seed 000: 2.35e12 / 2.62e8 = 8,950 tokens/s).

    >>> round(float(decode_ceiling_tok_s(3.35, 0.7, 2000, 131072)))
    8945
    """
    return safe_divide(np.asarray(memory_bw_tb_s, dtype=float) * 1e12 * mbu,
                        np.asarray(context_len, dtype=float) * kv_bytes_per_token)


def prefill_tok_s(input_len, prefill_work_ms):
    """Prompt tokens one replica ingests per second on the compute roof [tokens/s].

    ``S / t_prefill``; for a short prompt ``peak * MFU / 2N`` (seed 000: 4.95e14 / 16e9 = 30,900).

    >>> round(float(prefill_tok_s(128, 4.139)))
    30925
    """
    return safe_divide(np.asarray(input_len, dtype=float) * 1e3, prefill_work_ms)


def request_rate_req_s(batch, tpot_ms, output_len, prefill_work_ms):
    """Requests/s one replica completes when prefill and decode share its time [requests/s].

    In steady state of continuous batching each request costs its prompt's compute time plus its
    share of ``G`` decode steps run ``B`` at a time: ``r = 1 / (t_prefill + G * TPOT / B)``.

    >>> round(float(request_rate_req_s(162, 24.96, 256, 4.1)), 2)
    22.97
    """
    per_request_ms = np.asarray(prefill_work_ms, dtype=float) + safe_divide(
        np.asarray(output_len, dtype=float) * tpot_ms, batch)
    return safe_divide(1e3, per_request_ms)


def little_concurrency(req_s, latency_ms):
    """Requests in flight by Little's law: ``L = lambda * W`` [requests].

    >>> float(little_concurrency(10.0, 2500.0))
    25.0
    """
    return np.asarray(req_s, dtype=float) * np.asarray(latency_ms, dtype=float) / 1e3


def usd_per_m_tokens(usd_per_hour, tok_s):
    """Cost of one million tokens: ``price / (tok_s * 3600) * 1e6`` [USD/1M tokens] (seed 000).

    >>> round(float(usd_per_m_tokens(2.0, 6000)), 4)
    0.0926
    """
    return safe_divide(np.asarray(usd_per_hour, dtype=float) * 1e6, np.asarray(tok_s, dtype=float) * 3600.0)


def usd_per_k_requests(usd_per_hour, req_s):
    """Cost of one thousand requests: ``price / (req_s * 3600) * 1e3`` [USD/1k requests].

    >>> round(float(usd_per_k_requests(3.6, 1.0)), 3)
    1.0
    """
    return safe_divide(np.asarray(usd_per_hour, dtype=float) * 1e3, np.asarray(req_s, dtype=float) * 3600.0)
