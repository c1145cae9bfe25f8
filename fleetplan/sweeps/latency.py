"""Latency formulas: the roofline pieces of a forward step (memory and compute times), matmul
FLOPs, the tensor-parallel all-reduce and the experts a mixture-of-experts step reads.

Units: times in milliseconds, bandwidth in TB/s (1e12 bytes/s) or GB/s (1e9 bytes/s), compute in
TFLOPS (1e12 FLOP/s), memory in GB (1e9 bytes). Every function takes scalars or numpy arrays.

References
----------
.. [1] Fleetplan seed 000, "Estimating throughput", sections 1-2 (TPOT as bytes over bandwidth,
   prefill on the compute roof).
.. [2] Williams, Waterman and Patterson, "Roofline: an insightful visual performance model for
   multicore architectures", Communications of the ACM 52(4), 2009.
.. [3] Yuan et al., "LLM Inference Unveiled: Survey and Roofline Model Insights" (LLM-Viewer),
   arXiv:2402.16363, 2024.
.. [4] Kaplan et al., "Scaling Laws for Neural Language Models", arXiv:2001.08361, 2020, section 2.1.
.. [5] Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
   workstations", J. Parallel Distrib. Comput. 69(2), 2009.
.. [6] Fedus, Zoph and Shazeer, "Switch Transformers", JMLR 23, 2022, arXiv:2101.03961 (top-k
   routing of tokens to experts).
"""

from __future__ import annotations

import numpy as np


def memory_time_ms(bytes_gb, memory_bw_tb_s, mbu):
    """Time to stream ``bytes_gb`` from device memory at a share ``mbu`` of peak bandwidth.

    Parameters
    ----------
    bytes_gb : float or array
        Bytes read [GB].
    memory_bw_tb_s : float or array
        Peak memory bandwidth [TB/s].
    mbu : float or array
        Memory-bandwidth utilization [fraction].

    Returns
    -------
    float or array
        Time [ms].

    Notes
    -----
    .. math:: t = \\frac{bytes}{BW \\cdot MBU}

    References
    ----------
    .. [1] Seed 000, section 1: 16e9 bytes / 2.35e12 B/s = 6.8 ms.
    .. [2] Williams et al. 2009 (the memory roof).

    Examples
    --------
    >>> round(float(memory_time_ms(16.0, 3.35, 0.7)), 3)
    6.823
    """
    return np.asarray(bytes_gb, dtype=float) * 1e9 / (np.asarray(memory_bw_tb_s) * 1e12 * mbu) * 1e3


def compute_time_ms(flop, tflops, mfu, tp=1):
    """Time for ``flop`` floating-point operations on ``tp`` GPUs at a share ``mfu`` of peak.

    Parameters
    ----------
    flop : float or array
        Operations [FLOP].
    tflops : float or array
        Dense peak tensor throughput per GPU [TFLOPS].
    mfu : float or array
        Model FLOPs utilization [fraction].
    tp : int or array, default 1
        GPUs sharing the work [GPUs].

    Returns
    -------
    float or array
        Time [ms].

    Notes
    -----
    .. math:: t = \\frac{FLOP}{peak \\cdot MFU \\cdot tp}

    References
    ----------
    .. [1] Seed 000, section 2: prefill on the FLOP roof.
    .. [2] Williams et al. 2009 (the compute roof).

    Examples
    --------
    >>> round(float(compute_time_ms(16e9 * 128, 989.5, 0.5)), 3)
    4.139
    """
    return np.asarray(flop, dtype=float) / (np.asarray(tflops) * 1e12 * mfu * tp) * 1e3


def linear_flop_per_token(params_active_b):
    """FLOPs of the weight matmuls for one token.

    Parameters
    ----------
    params_active_b : float or array
        Parameters used per token [1e9 parameters].

    Returns
    -------
    float or array
        Operations [FLOP].

    Notes
    -----
    One multiply-add (2 FLOP) per active parameter:

    .. math:: F = 2 N_{active}

    References
    ----------
    .. [1] Kaplan et al. 2020, section 2.1.

    Examples
    --------
    >>> float(linear_flop_per_token(8.0)) == 16e9
    True
    """
    return 2.0 * np.asarray(params_active_b, dtype=float) * 1e9


def allreduce_time_ms(message_gb, tp, interconnect_gb_s, n_allreduce, latency_us):
    """Time of ``n_allreduce`` ring all-reduces of ``message_gb`` each over ``tp`` GPUs.

    Parameters
    ----------
    message_gb : float or array
        Bytes reduced per call [GB].
    tp : int or array
        GPUs in the ring [GPUs].
    interconnect_gb_s : float or array
        Link bandwidth per GPU, both directions [GB/s].
    n_allreduce : float or array
        Calls [calls].
    latency_us : float or array
        Fixed latency per call [us].

    Returns
    -------
    float or array
        Time [ms]; 0 for ``tp = 1``.

    Notes
    -----
    A ring moves ``2 (tp - 1) / tp`` of the message over each GPU's link in one direction, half
    the bidirectional bandwidth:

    .. math:: t = n \\left(\\frac{2 (tp - 1)}{tp} \\cdot \\frac{m}{BW / 2} + t_{lat}\\right)

    References
    ----------
    .. [1] Patarasuk and Yuan 2009.

    Examples
    --------
    >>> round(float(allreduce_time_ms(1e-3, 2, 900.0, 64, 8.0)), 4)
    0.6542
    """
    tp = np.asarray(tp, dtype=float)
    ring_gb = 2.0 * (tp - 1.0) / tp * np.asarray(message_gb, dtype=float)
    per_call_ms = ring_gb / (np.asarray(interconnect_gb_s) / 2.0) * 1e3 + latency_us * 1e-3
    return np.where(tp > 1, n_allreduce * per_call_ms, 0.0)


def experts_touched(n_experts, n_experts_active, tokens):
    """Expected distinct experts one MoE layer reads for ``tokens`` routed tokens.

    Parameters
    ----------
    n_experts : int or array
        Routed experts per layer, E [experts].
    n_experts_active : int or array
        Experts chosen per token, k [experts].
    tokens : float or array
        Tokens routed in the step, T [tokens].

    Returns
    -------
    float or array
        Expected experts read [experts].

    Notes
    -----
    With uniform routing an expert is untouched with probability ``(1 - k/E)^T``:

    .. math:: E_{touched} = E \\left(1 - (1 - k/E)^T\\right)

    References
    ----------
    .. [1] Fedus et al. 2022 (top-k routing).

    Examples
    --------
    >>> round(float(experts_touched(8, 2, 1)), 3), round(float(experts_touched(8, 2, 64)), 3)
    (2.0, 8.0)
    """
    e = np.asarray(n_experts, dtype=float)
    return e * (1.0 - (1.0 - n_experts_active / e) ** np.asarray(tokens, dtype=float))
