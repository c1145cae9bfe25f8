"""Latency formulas: the decode step (TPOT) as a roofline, prefill (TTFT), all-reduce, MoE.

Units: times in milliseconds, bandwidth in TB/s (1e12 bytes/s) or GB/s (1e9 bytes/s), compute in
TFLOPS (1e12 FLOP/s), memory in GB (1e9 bytes). Every function takes scalars or numpy arrays.
"""

from __future__ import annotations

import numpy as np


def memory_time_ms(bytes_gb, memory_bw_tb_s, mbu):
    """Time to stream ``bytes_gb`` from device memory at ``mbu`` of peak bandwidth [ms].

    ``t = bytes / (BW * MBU)`` (roofline; seed 000: 16e9 bytes / 2.35e12 B/s = 6.8 ms).

    >>> round(float(memory_time_ms(16.0, 3.35, 0.7)), 3)
    6.823
    """
    return np.asarray(bytes_gb, dtype=float) * 1e9 / (np.asarray(memory_bw_tb_s) * 1e12 * mbu) * 1e3


def compute_time_ms(flop, tflops, mfu, tp=1):
    """Time for ``flop`` floating-point operations on ``tp`` GPUs at ``mfu`` of peak [ms].

    ``t = FLOP / (peak * MFU * tp)`` (roofline compute roof).

    >>> round(float(compute_time_ms(16e9 * 128, 989.5, 0.5)), 3)
    4.139
    """
    return np.asarray(flop, dtype=float) / (np.asarray(tflops) * 1e12 * mfu * tp) * 1e3


def linear_flop_per_token(params_active_b):
    """FLOPs of the weight matmuls for one token: ``2 * N_active`` [FLOP] (Kaplan et al. 2020).

    >>> float(linear_flop_per_token(8.0)) == 16e9
    True
    """
    return 2.0 * np.asarray(params_active_b, dtype=float) * 1e9


def attention_flop_per_token(n_layers, n_heads, head_dim, context_len):
    """FLOPs of attention for one decoded token over ``context_len`` cached tokens [FLOP].

    ``4 * layers * heads * head_dim * L``: QK^T and AV, two FLOPs per multiply-add.

    >>> float(attention_flop_per_token(32, 32, 128, 1000))
    524288000.0
    """
    return 4.0 * np.asarray(n_layers, dtype=float) * n_heads * head_dim * np.asarray(context_len, dtype=float)


def prefill_flop(params_active_b, n_layers, n_heads, head_dim, input_len):
    """FLOPs to prefill one prompt of ``input_len`` tokens with causal attention [FLOP].

    ``2 * N_active * S + 2 * layers * heads * head_dim * S^2`` (causal masking halves the
    ``4 * S^2 * d`` of full attention).

    >>> float(prefill_flop(8.0, 32, 32, 128, 1)) > 16e9
    True
    """
    s = np.asarray(input_len, dtype=float)
    attention = 2.0 * np.asarray(n_layers, dtype=float) * n_heads * head_dim * s * s
    return 2.0 * np.asarray(params_active_b, dtype=float) * 1e9 * s + attention


def allreduce_time_ms(message_gb, tp, interconnect_gb_s, n_allreduce, latency_us):
    """Time of ``n_allreduce`` ring all-reduces of ``message_gb`` each over ``tp`` GPUs [ms].

    Ring all-reduce moves ``2 (tp - 1) / tp`` of the message over each GPU's link in one
    direction (half the bidirectional ``interconnect_gb_s``), plus a fixed latency per call
    (Patarasuk and Yuan 2009). Zero for ``tp = 1``.

    >>> round(float(allreduce_time_ms(1e-3, 2, 900.0, 64, 8.0)), 4)
    0.6542
    """
    tp = np.asarray(tp, dtype=float)
    ring_gb = 2.0 * (tp - 1.0) / tp * np.asarray(message_gb, dtype=float)
    per_call_ms = ring_gb / (np.asarray(interconnect_gb_s) / 2.0) * 1e3 + latency_us * 1e-3
    return np.where(tp > 1, n_allreduce * per_call_ms, 0.0)


def experts_touched(n_experts, n_experts_active, tokens):
    """Expected distinct experts one MoE layer reads for ``tokens`` routed tokens [experts].

    With uniform routing each token picks k of E experts, so an expert is untouched with
    probability ``(1 - k/E)^T`` and ``E * (1 - (1 - k/E)^T)`` are read.

    >>> round(float(experts_touched(8, 2, 1)), 3), round(float(experts_touched(8, 2, 64)), 3)
    (2.0, 8.0)
    """
    e = np.asarray(n_experts, dtype=float)
    return e * (1.0 - (1.0 - n_experts_active / e) ** np.asarray(tokens, dtype=float))


def moe_params_touched_b(params_total_b, params_active_b, n_experts, n_experts_active, tokens):
    """Parameters one decode step reads for ``tokens`` tokens [1e9 parameters].

    Splits the model into shared weights and equal routed experts from its total and active
    counts (``p_expert = (N_total - N_active) / (E - k)``, ``N_shared = N_total - E * p_expert``),
    then reads the shared part plus the expected touched experts. Dense models (E = k) read all.

    >>> round(float(moe_params_touched_b(46.7, 12.9, 8, 2, 1)), 2)
    12.9
    """
    total = np.asarray(params_total_b, dtype=float)
    routed = np.asarray(n_experts, dtype=float) - n_experts_active
    per_expert = np.divide(total - params_active_b, routed, out=np.zeros_like(total * routed),
                           where=routed > 0)
    shared = total - n_experts * per_expert
    return shared + per_expert * experts_touched(n_experts, n_experts_active, tokens)


def step_time_ms(memory_ms, compute_ms, comm_ms, overhead_ms):
    """One forward step: the slower of memory and compute, plus communication and overhead [ms].

    ``t = max(t_mem, t_comp) + t_comm + t_overhead`` (roofline; seed 000's TPOT).

    >>> float(step_time_ms(6.8, 4.1, 0.0, 0.2))
    7.0
    """
    return np.maximum(memory_ms, compute_ms) + comm_ms + overhead_ms


def speculative_tokens_per_step(acceptance, spec_tokens):
    """Expected tokens one verification step emits with ``k`` drafted tokens [tokens].

    ``E = (1 - a^(k+1)) / (1 - a)`` for per-token acceptance rate ``a`` (Leviathan et al. 2023,
    eq. 1); 1 without speculation (``k = 0``).

    >>> round(float(speculative_tokens_per_step(0.8, 4)), 4), float(speculative_tokens_per_step(0.7, 0))
    (3.3616, 1.0)
    """
    a = np.asarray(acceptance, dtype=float)
    k = np.asarray(spec_tokens, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = (1.0 - a ** (k + 1.0)) / (1.0 - a)
    return np.where(a <= 0.0, 1.0, np.where(a >= 1.0, k + 1.0, expected))


def stage_fraction(n_layers, pp):
    """Share of the layers the busiest of ``pp`` pipeline stages holds: ``ceil(L / pp) / L`` [-].

    >>> float(stage_fraction(80, 3))
    0.3375
    """
    layers = np.asarray(n_layers, dtype=float)
    return np.ceil(layers / np.asarray(pp, dtype=float)) / layers


def pipeline_time_ms(stage_ms, pp, hop_ms):
    """Time for one token of a micro-batch to pass ``pp`` stages: ``pp * t_stage + (pp - 1) * t_hop`` [ms].

    >>> float(pipeline_time_ms(5.0, 4, 0.5))
    21.5
    """
    pp = np.asarray(pp, dtype=float)
    return pp * np.asarray(stage_ms, dtype=float) + (pp - 1.0) * np.asarray(hop_ms, dtype=float)


def hop_time_ms(message_gb, network_gb_s, latency_us):
    """Point-to-point transfer of ``message_gb`` between pipeline stages on different nodes [ms].

    >>> float(hop_time_ms(0.05, 50.0, 20.0))
    1.02
    """
    return np.asarray(message_gb, dtype=float) / np.asarray(network_gb_s, dtype=float) * 1e3 + latency_us * 1e-3


def kv_transfer_time_ms(kv_bytes, network_gb_s, links):
    """Time to move a prompt's KV cache from a prefill replica to a decode replica [ms].

    Each of ``links`` GPUs sends its shard over its own network link at ``network_gb_s``:
    ``t = bytes / (links * BW)``.

    >>> float(kv_transfer_time_ms(2e9, 50.0, 4))
    10.0
    """
    return np.asarray(kv_bytes, dtype=float) / (np.asarray(links, dtype=float) * np.asarray(network_gb_s) * 1e9) * 1e3
