"""Throughput, request capacity and cost formulas.

Units: tokens/s, requests/s, milliseconds, USD per hour. Scalars or numpy arrays throughout.

References
----------
.. [1] Fleetplan seed 000, "Estimating throughput", sections 1-5.
.. [2] Fleetplan seed 003, "Tokens per second per GPU" (throughput is the planning metric).
.. [3] Little, "A Proof for the Queuing Formula: L = lambda W", Operations Research 9(3), 1961.
.. [4] Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve",
   OSDI 2024, arXiv:2403.02310 (prompts and decode steps sharing one replica).
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
    """Decode throughput of one replica.

    Parameters
    ----------
    batch : int or array
        Sequences decoded per step [sequences].
    tpot_ms : float or array
        Time per output token, one decode step [ms].

    Returns
    -------
    float or array
        Output tokens per second [tokens/s]; NaN where TPOT is not positive.

    Notes
    -----
    .. math:: X = B / TPOT

    References
    ----------
    .. [1] Seed 000, section 1.

    Examples
    --------
    >>> round(float(decode_tok_s(1, 6.823)), 1)
    146.6
    """
    return safe_divide(np.asarray(batch, dtype=float) * 1e3, tpot_ms)


def decode_ceiling_tok_s(memory_bw_tb_s, mbu, context_len, kv_bytes_per_token):
    """Bandwidth ceiling of decode as the batch grows without bound.

    Parameters
    ----------
    memory_bw_tb_s : float or array
        Peak memory bandwidth [TB/s].
    mbu : float or array
        Memory-bandwidth utilization [fraction].
    context_len : int or array
        Tokens in each sequence's cache [tokens].
    kv_bytes_per_token : float or array
        KV cache per token [bytes/token].

    Returns
    -------
    float or array
        Ceiling [tokens/s].

    Notes
    -----
    .. math:: X_{max} = \\frac{BW \\cdot MBU}{L \\cdot kv}

    References
    ----------
    .. [1] Seed 000, section 1: 2.35e12 / 2.62e8 = 8,950 tokens/s.

    Examples
    --------
    >>> round(float(decode_ceiling_tok_s(3.35, 0.7, 2000, 131072)))
    8945
    """
    return safe_divide(np.asarray(memory_bw_tb_s, dtype=float) * 1e12 * mbu,
                       np.asarray(context_len, dtype=float) * kv_bytes_per_token)


def prefill_tok_s(input_len, prefill_work_ms):
    """Prompt tokens one replica ingests per second on the compute roof.

    Parameters
    ----------
    input_len : int or array
        Prompt tokens [tokens].
    prefill_work_ms : float or array
        Replica time one prompt takes [ms].

    Returns
    -------
    float or array
        Prompt tokens per second [tokens/s].

    Notes
    -----
    For a short prompt this is ``peak * MFU / 2N``:

    .. math:: X_{prefill} = S / t_{prefill}

    References
    ----------
    .. [1] Seed 000, section 2: 4.95e14 / 16e9 = 30,900 tokens/s.

    Examples
    --------
    >>> round(float(prefill_tok_s(128, 4.139)))
    30925
    """
    return safe_divide(np.asarray(input_len, dtype=float) * 1e3, prefill_work_ms)


def request_rate_req_s(batch, tpot_ms, output_len, prefill_work_ms):
    """Requests per second one replica completes when prefill and decode share its time.

    Parameters
    ----------
    batch : int or array
        Sequences decoded per step [sequences].
    tpot_ms : float or array
        Decode step [ms].
    output_len : int or array
        Output tokens per request, G [tokens].
    prefill_work_ms : float or array
        Replica time one prompt takes [ms].

    Returns
    -------
    float or array
        Requests per second [requests/s].

    Notes
    -----
    In steady state of continuous batching each request costs its prompt's compute time plus its
    share of G decode steps run B at a time:

    .. math:: r = \\frac{1}{t_{prefill} + G \\cdot TPOT / B}

    References
    ----------
    .. [1] Seed 000, section 5 (requests/s = throughput / G).
    .. [2] Agrawal et al. 2024 (prompts and decodes sharing a replica).

    Examples
    --------
    >>> round(float(request_rate_req_s(162, 24.96, 256, 4.1)), 2)
    22.97
    """
    per_request_ms = np.asarray(prefill_work_ms, dtype=float) + safe_divide(
        np.asarray(output_len, dtype=float) * tpot_ms, batch)
    return safe_divide(1e3, per_request_ms)


def little_concurrency(req_s, latency_ms):
    """Requests in flight by Little's law.

    Parameters
    ----------
    req_s : float or array
        Arrival (or completion) rate [requests/s].
    latency_ms : float or array
        Time each request spends in the system [ms].

    Returns
    -------
    float or array
        Requests in flight [requests].

    Notes
    -----
    .. math:: L = \\lambda W

    References
    ----------
    .. [1] Little 1961.

    Examples
    --------
    >>> float(little_concurrency(10.0, 2500.0))
    25.0
    """
    return np.asarray(req_s, dtype=float) * np.asarray(latency_ms, dtype=float) / 1e3


def usd_per_m_tokens(usd_per_hour, tok_s):
    """Cost of one million tokens.

    Parameters
    ----------
    usd_per_hour : float or array
        Price of the replica [USD/hour].
    tok_s : float or array
        Tokens per second it serves [tokens/s].

    Returns
    -------
    float or array
        Cost [USD/1M tokens]; NaN where nothing is served.

    Notes
    -----
    .. math:: c = \\frac{price}{X \\cdot 3600} \\cdot 10^6

    References
    ----------
    .. [1] Seed 000, section 4: $2/GPU-hour at 6,000 tokens/s is $0.093 per 1M tokens.

    Examples
    --------
    >>> round(float(usd_per_m_tokens(2.0, 6000)), 4)
    0.0926
    """
    return safe_divide(np.asarray(usd_per_hour, dtype=float) * 1e6, np.asarray(tok_s, dtype=float) * 3600.0)


def usd_per_k_requests(usd_per_hour, req_s):
    """Cost of one thousand requests.

    Parameters
    ----------
    usd_per_hour : float or array
        Price of the replica [USD/hour].
    req_s : float or array
        Requests per second it completes [requests/s].

    Returns
    -------
    float or array
        Cost [USD/1k requests]; NaN where nothing is served.

    Notes
    -----
    .. math:: c = \\frac{price}{r \\cdot 3600} \\cdot 10^3

    References
    ----------
    .. [1] Seed 000, section 4 (the same price over requests instead of tokens).

    Examples
    --------
    >>> round(float(usd_per_k_requests(3.6, 1.0)), 3)
    1.0
    """
    return safe_divide(np.asarray(usd_per_hour, dtype=float) * 1e3, np.asarray(req_s, dtype=float) * 3600.0)
