"""How the formulas combine into the times of one replica: the decode step (TPOT), the prefill of
one prompt, and the time to first token (TTFT). Every caller (the row kernel, the knee search,
the load model, disaggregated pairs) takes its latencies from here.

Both steps are per-operator rooflines (weight matmuls and attention are separate kernels, each
limited by the slower of its memory traffic and its FLOPs; LLM-Viewer, Yuan et al. 2024) on the
busiest pipeline stage, with the serving levers applied:

- pipeline parallelism (``pp`` stages across nodes): each stage holds ``ceil(L / pp)`` layers;
  the batch is split into ``pp`` micro-batches and a token passes every stage in turn
  (``levers.pipeline_time_ms``) with an activation hop between nodes;
- speculative decoding (``spec_tokens`` drafted per step, ``spec_acceptance``, ``spec_draft_cost``
  as a fraction of the verification step): the step verifies ``k + 1`` tokens per sequence and
  emits ``levers.speculative_tokens_per_step`` of them on average;
- weight-only quantization: matmul time grows by ``dequant_cost`` for dequantization;
- prefix caching: a share ``prefix_hit_rate`` of each prompt is already cached, so prefill
  computes only the new tokens (which still attend to the whole prompt);
- chunked prefill: a prompt rides ``ceil(S / chunk)`` decode steps instead of one.

TTFT is composed in ``first_token_ms`` only: queueing wait + request overhead and prefill +
KV transfer (disaggregated pairs) + the decode steps the prompt rides.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fleetplan.sweeps import latency, levers, memory
from fleetplan.sweeps.replica_constants import ReplicaConstants


def _allreduce_ms(c: ReplicaConstants, tokens, fraction):
    message_gb = np.asarray(tokens, dtype=float) * c.hidden_size * c.activation_bytes / 1e9
    return latency.allreduce_time_ms(message_gb, c.tp, c.interconnect_gb_s, 2.0 * c.n_layers * fraction,
                                     c.allreduce_latency_us)


def _hop_ms(c: ReplicaConstants, tokens):
    message_gb = np.asarray(tokens, dtype=float) * c.hidden_size * c.activation_bytes / 1e9
    return levers.hop_time_ms(message_gb, c.network_gb_s, c.pp_hop_latency_us)


def _weights_ms(c: ReplicaConstants, tokens, fraction):
    touched_b = latency.moe_params_touched_b(c.params_total_b, c.params_active_b, c.n_experts, c.n_experts_active,
                                             tokens)
    return latency.memory_time_ms(memory.weight_gb(touched_b, c.bytes_per_weight) * (fraction / c.tp),
                                  c.memory_bw_tb_s, c.mbu)


def _matmul_ms(c: ReplicaConstants, flop, mfu):
    return latency.compute_time_ms(flop, c.peak_tflops, mfu, c.tp) * (1.0 + c.dequant_cost)


def stage_decode_ms(c: ReplicaConstants, micro_batch, context_len):
    """One pipeline stage's decode step for ``micro_batch`` sequences: time, memory and compute parts [ms]."""
    fraction = levers.stage_fraction(c.n_layers, c.pp)
    tokens = micro_batch * (c.spec_tokens + 1.0)  # verified tokens per sequence
    weights_ms = _weights_ms(c, tokens, fraction)
    matmul_ms = _matmul_ms(c, tokens * latency.linear_flop_per_token(c.params_active_b) * fraction, c.mfu)
    kv_ms = latency.memory_time_ms(memory.kv_gb(micro_batch, context_len, c.kv_bytes_per_token),
                                   c.memory_bw_tb_s, c.mbu)
    attention_ms = latency.compute_time_ms(
        tokens * latency.attention_flop_per_token(c.n_layers, c.n_heads, c.head_dim, context_len) * fraction,
        c.peak_tflops, c.mfu, c.tp)
    step = (latency.step_time_ms(weights_ms, matmul_ms, _allreduce_ms(c, tokens, fraction), c.step_overhead_ms)
            + np.maximum(kv_ms, attention_ms))
    return step, weights_ms + kv_ms, matmul_ms + attention_ms


def decode_step_ms(c: ReplicaConstants, batch, context_len):
    """TPOT for ``batch`` sequences, and the memory and compute parts of one stage's step [ms].

    Without levers this is seed 000's ``(W + B L kv) / (BW MBU)`` while memory-bound.
    """
    batch = np.asarray(batch, dtype=float)
    micro_batch = np.maximum(batch / c.pp, np.minimum(batch, 1.0))
    stage_ms, memory_ms, compute_ms = stage_decode_ms(c, micro_batch, context_len)
    verify_ms = levers.pipeline_time_ms(stage_ms, c.pp, _hop_ms(c, micro_batch))
    drafted_ms = verify_ms * (1.0 + c.spec_tokens * c.spec_draft_cost)
    tpot = drafted_ms / levers.speculative_tokens_per_step(c.spec_acceptance, c.spec_tokens)
    return tpot, memory_ms, compute_ms


def prefill_ms(c: ReplicaConstants, input_len):
    """Prefill of one prompt: its latency, and the GPU time it takes from a shared replica [ms].

    The latency is a roofline step over the prompt's new (uncached) tokens on every stage, after
    the request's overhead outside the engine (``request_overhead_ms``). The time taken from a
    replica that interleaves prompts with decode steps is the busiest stage's FLOPs plus
    all-reduces: weight reads ride on the decode steps the prompt joins, and stages work on
    different prompts at once.
    """
    fraction = levers.stage_fraction(c.n_layers, c.pp)
    cached = np.floor(np.asarray(input_len, dtype=float) * c.prefix_hit_rate)
    new = input_len - cached
    flop = (latency.prefill_flop(c.params_active_b, c.n_layers, c.n_heads, c.head_dim, input_len)
            - latency.prefill_flop(c.params_active_b, c.n_layers, c.n_heads, c.head_dim, cached))
    compute_ms = _matmul_ms(c, flop * fraction, c.mfu_prefill)
    comm_ms = _allreduce_ms(c, new, fraction)
    stage_ms = latency.step_time_ms(_weights_ms(c, new, fraction), compute_ms, comm_ms, c.step_overhead_ms)
    total = levers.pipeline_time_ms(stage_ms, c.pp, _hop_ms(c, new)) + c.request_overhead_ms
    return total, compute_ms + comm_ms


def prompt_steps(c: ReplicaConstants, input_len):
    """Decode steps a prompt's prefill rides: ``ceil(S / chunk)`` with chunked prefill, else 1 [steps]."""
    chunk = c.prefill_chunk_tokens
    return np.where(chunk > 0, np.ceil(np.asarray(input_len, dtype=float) / np.where(chunk > 0, chunk, 1.0)), 1.0)


def first_token_ms(prefill_latency_ms, steps, tpot_ms, *, transfer_ms=0.0, wait_ms=None):
    """Time to first token: the one place TTFT is composed [ms].

    Parameters
    ----------
    prefill_latency_ms : float or array
        Request overhead plus the prompt's prefill (``prefill_ms``) [ms].
    steps : float or array
        Decode steps the prompt rides or waits behind (``prompt_steps``; 1 for a disaggregated
        pair's first decode step) [steps].
    tpot_ms : float or array
        Time of one of those steps [ms].
    transfer_ms : float or array, default 0
        KV-cache transfer from a prefill replica to a decode replica [ms].
    wait_ms : float or array, optional
        Queueing wait before the prompt is admitted [ms]; none when not given.

    Returns
    -------
    float or array
        Time to first token [ms].

    Notes
    -----
    .. math:: TTFT = t_{wait} + (t_{prefill} + t_{transfer}) + n_{steps} \\cdot TPOT

    References
    ----------
    .. [1] Fleetplan seed 000, section 2 (prefill) and section 1 (the decode step).
    .. [2] Zhong et al., "DistServe: Disaggregating Prefill and Decoding for Goodput-optimized
       Large Language Model Serving", OSDI 2024, arXiv:2401.09670 (the KV transfer).

    Examples
    --------
    >>> float(first_token_ms(300.0, 2, 20.0, transfer_ms=6.5, wait_ms=10.0))
    356.5
    """
    ready = np.asarray(prefill_latency_ms, dtype=float) + transfer_ms + steps * np.asarray(tpot_ms, dtype=float)
    return ready if wait_ms is None else wait_ms + ready


class Latencies(NamedTuple):
    """TPOT, TTFT and the parts the metrics need, at one batch [ms]."""

    tpot_ms: np.ndarray
    ttft_ms: np.ndarray
    prefill_work_ms: np.ndarray  # GPU time one prompt takes from a shared replica
    memory_ms: np.ndarray  # memory part of one stage's decode step
    compute_ms: np.ndarray  # compute part of one stage's decode step


def latencies_ms(c: ReplicaConstants, batch, context_len, input_len) -> Latencies:
    """TPOT and TTFT at ``batch`` sequences of ``context_len`` tokens, prompts of ``input_len``.

    TTFT is the prompt's prefill plus the in-flight decode step(s) it rides.
    """
    tpot, memory_ms, compute_ms = decode_step_ms(c, batch, context_len)
    prefill_total, prefill_work = prefill_ms(c, input_len)
    ttft = first_token_ms(prefill_total, prompt_steps(c, input_len), tpot)
    return Latencies(tpot, ttft, prefill_work, memory_ms, compute_ms)
