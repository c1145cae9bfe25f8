"""How the formulas combine into the times of one replica: the decode step (TPOT), the prefill of
one prompt, a mixed step of both, and the time to first token (TTFT). Every caller (the row
kernel, the knee search, the load and concurrency models, disaggregated pairs) takes its
latencies from here.

A step is a per-operator roofline on the busiest pipeline stage (LLM-Viewer, Yuan et al. 2024):
dense GEMMs, routed-expert GEMMs, attention and the tensor-parallel all-reduce each take the
slower of their memory traffic and their FLOPs at their own efficiency (``operators``), and the
GPU time is their sum plus a fixed time per layer (kernel launches and gaps); the engine's
host work for the iteration runs alongside, so the step takes about ``max(GPU time, a + b *
sequences)`` (``operators.overlapped_ms``). The all-reduce's fixed latency grows with
``log2(tp)`` (tree and ring steps of small messages); a group spanning interconnect domains
(PCIe cards under both CPU sockets) runs at the socket link's bandwidth and keeps only
``crossing_efficiency`` of the ring's efficiency there (NCCL's host-memory hop across sockets). The serving levers apply on top:

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

from fleetplan.sweeps import latency, levers, memory, operators
from fleetplan.sweeps.replica_constants import ReplicaConstants


class StageTimes(NamedTuple):
    """One pipeline stage's step and its parts [ms]."""

    step_ms: np.ndarray  # max(GPU time, host time)
    memory_ms: np.ndarray  # weight and KV-cache reads
    compute_ms: np.ndarray  # GEMM and attention FLOPs
    work_ms: np.ndarray  # FLOPs and all-reduce of the prompt tokens alone (no weight reads)


def _bytes_ms(c: ReplicaConstants, gigabytes, efficiency):
    return latency.memory_time_ms(gigabytes, c.memory_bw_tb_s, efficiency)


def _flop_ms(peak_tflops, flop, tp):
    return np.asarray(flop, dtype=float) / (peak_tflops * 1e12 * tp) * 1e3


def stage_step(c: ReplicaConstants, decode_seqs, context_len, prefill_tokens=0.0, prefill_pair_layers=0.0,
               prefill_seqs=0.0) -> StageTimes:
    """The busiest stage's step for ``decode_seqs`` decoding sequences at ``context_len`` cached
    tokens plus ``prefill_tokens`` prompt tokens whose attention spans ``prefill_pair_layers``
    query-key pairs summed over the model's layers."""
    fraction = c.stage_fraction
    decode_tokens = np.asarray(decode_seqs, dtype=float) * (c.spec_tokens + 1.0)  # verified tokens per sequence
    tokens = decode_tokens + prefill_tokens
    tp_loss = c.tp_scaling ** np.log2(c.tp)  # smaller per-GPU matrices of the dense decode GEMMs
    stretch = 1.0 + c.dequant_cost
    # FLOP-weighted tokens: decode and prompt tokens run at their own efficiencies.
    gemm_tokens = decode_tokens / (c.gemm_compute * tp_loss) + prefill_tokens / c.gemm_prefill
    touched = latency.experts_touched(c.n_experts, c.n_experts_active, tokens)
    # Expert GEMMs compute the routed token copies, each touched expert padded to whole tiles.
    copies = tokens * c.n_experts_active + touched * c.expert_tile_tokens
    share = np.where(tokens > 0, decode_tokens / np.maximum(tokens, 1e-30), 0.0)
    expert_copies = copies * (share / c.expert_compute + (1.0 - share) / c.expert_prefill)
    dense_memory = _bytes_ms(c, memory.weight_gb(c.dense_params_b, c.bytes_per_weight) * (fraction / c.tp),
                             c.gemm_memory * tp_loss)
    dense_compute = _flop_ms(c.peak_tflops, 2e9 * c.dense_params_b * fraction * gemm_tokens, c.tp) * stretch
    expert_memory = _bytes_ms(c, memory.weight_gb(touched * c.expert_params_b, c.bytes_per_weight) * (fraction / c.tp),
                              c.expert_memory)
    expert_compute = _flop_ms(c.peak_tflops, 2e9 * c.expert_params_b * fraction * expert_copies, c.tp) * stretch
    attended = operators.attended_tokens(context_len, c.full_layers, c.sliding_layers, c.sliding_window) * fraction
    kv_memory = _bytes_ms(c, memory.kv_gb(decode_seqs, attended, c.kv_bytes_per_layer_token), c.attention_memory)
    attention_compute = _flop_ms(c.attention_tflops, decode_tokens * attended * c.attention_flop_per_pair_decode,
                                 c.tp) / c.attention_compute
    prompt_attention = _flop_ms(c.attention_tflops, np.asarray(prefill_pair_layers, dtype=float) * fraction
                                * c.attention_flop_per_pair_prefill, c.tp) / c.attention_prefill
    message_gb = tokens * c.hidden_size * c.activation_bytes / 1e9
    ring_gb_s = 2.0 * c.allreduce_gb_s * c.allreduce_efficiency * c.crossing_efficiency
    comm = latency.allreduce_time_ms(message_gb, c.tp, ring_gb_s,
                                     2.0 * c.n_layers * fraction, c.allreduce_latency_us * np.log2(np.maximum(c.tp, 2.0)))
    launches = c.n_layers * fraction * c.layer_overhead_us / 1e3
    moe = c.n_experts > c.n_experts_active  # routing, permutation and combination of each routed copy
    routing = np.where(moe, tokens * c.n_experts_active * c.n_layers * fraction * c.routing_ns_per_token / c.tp / 1e6,
                       0.0)
    # Parts of the step's shape (no context axis) first, so the full-size arrays see few passes.
    weights_part = (np.maximum(dense_memory, dense_compute) + np.maximum(expert_memory, expert_compute)
                    + comm + launches + routing)
    gpu = (weights_part + prompt_attention) + np.maximum(kv_memory, attention_compute)
    host = operators.host_time_ms(c.iteration_ms, c.iteration_us_per_seq, np.asarray(decode_seqs) + prefill_seqs)
    work = _prompt_work_ms(c, prefill_tokens, prompt_attention, comm, fraction, stretch)
    step = gpu if _host_negligible(host, weights_part) else operators.overlapped_ms(gpu, host)
    return StageTimes(step, (dense_memory + expert_memory) + kv_memory,
                      (dense_compute + expert_compute + prompt_attention) + attention_compute, work)


def _host_negligible(host, gpu_floor) -> bool:
    """Host time under a tenth of every step's GPU time moves the blended step by under 2e-9."""
    return bool(np.all(np.asarray(host) <= 0.1 * np.asarray(gpu_floor)))


def _prompt_work_ms(c: ReplicaConstants, prefill_tokens, prompt_attention, comm, fraction, stretch):
    """Replica time prompt tokens take when they ride a decode step: their FLOPs and all-reduces."""
    flop = 2e9 * fraction * (c.dense_params_b / c.gemm_prefill
                             + c.n_experts_active * c.expert_params_b / c.expert_prefill) * prefill_tokens
    return _flop_ms(c.peak_tflops, flop, c.tp) * stretch + prompt_attention + comm


def _hop_ms(c: ReplicaConstants, tokens):
    message_gb = np.asarray(tokens, dtype=float) * c.hidden_size * c.activation_bytes / 1e9
    return levers.hop_time_ms(message_gb, c.network_gb_s, c.pp_hop_latency_us)


def decode_step_ms(c: ReplicaConstants, batch, context_len):
    """TPOT for ``batch`` sequences, and the memory and compute parts of one stage's step [ms].

    Without levers and overheads this is seed 000's ``(W + B L kv) / (BW MBU)`` while memory-bound.
    """
    batch = np.asarray(batch, dtype=float)
    if not np.any(c.pp != 1) and not np.any(c.spec_tokens > 0):  # no pipeline, no speculation
        stage = stage_step(c, batch, context_len)
        return stage.step_ms, stage.memory_ms, stage.compute_ms
    micro_batch = np.maximum(batch / c.pp, np.minimum(batch, 1.0))
    stage = stage_step(c, micro_batch, context_len)
    verify_ms = levers.pipeline_time_ms(stage.step_ms, c.pp, _hop_ms(c, micro_batch))
    drafted_ms = verify_ms * (1.0 + c.spec_tokens * c.spec_draft_cost)
    tpot = drafted_ms / levers.speculative_tokens_per_step(c.spec_acceptance, c.spec_tokens)
    return tpot, stage.memory_ms, stage.compute_ms


def prompt_pair_layers(c: ReplicaConstants, input_len, cached_len=0.0):
    """Query-key pairs of a prompt's new tokens, summed over the model's layers [pairs x layers]."""
    def pairs(length):
        return (c.full_layers * operators.causal_pairs(length, np.inf)
                + c.sliding_layers * operators.causal_pairs(length, c.sliding_window))
    return pairs(input_len) - pairs(cached_len)


def prefill_ms(c: ReplicaConstants, input_len):
    """Prefill of one prompt: its latency, and the GPU time it takes from a shared replica [ms].

    The latency is a roofline step over the prompt's new (uncached) tokens on every stage, after
    the request's overhead outside the engine (``request_overhead_ms``). The time taken from a
    replica that interleaves prompts with decode steps is the busiest stage's FLOPs plus
    all-reduces: weight reads ride on the decode steps the prompt joins, and stages work on
    different prompts at once.
    """
    cached = np.floor(np.asarray(input_len, dtype=float) * c.prefix_hit_rate)
    new = input_len - cached
    stage = stage_step(c, 0.0, 0.0, new, prompt_pair_layers(c, input_len, cached), 1.0)
    total = levers.pipeline_time_ms(stage.step_ms, c.pp, _hop_ms(c, new)) + c.request_overhead_ms
    return total, stage.work_ms


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
