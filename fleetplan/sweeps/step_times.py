"""Forward-step times of one replica: the decode step (TPOT) and the prefill of one prompt.

Both are per-operator rooflines (weight matmuls and attention are separate kernels, each limited
by the slower of its memory traffic and its FLOPs; LLM-Viewer, Yuan et al. 2024) on the busiest
pipeline stage, with the serving levers applied:

- pipeline parallelism (``pp`` stages across nodes): each stage holds ``ceil(L / pp)`` layers;
  the batch is split into ``pp`` micro-batches and a token passes every stage in turn
  (``latency.pipeline_time_ms``) with an activation hop between nodes;
- speculative decoding (``spec_tokens`` drafted per step, ``spec_acceptance``, ``spec_draft_cost``
  as a fraction of the verification step): the step verifies ``k + 1`` tokens per sequence and
  emits ``latency.speculative_tokens_per_step`` of them on average;
- weight-only quantization: matmul time grows by ``dequant_overhead`` for dequantization;
- prefix caching: a share ``prefix_hit_rate`` of each prompt is already cached, so prefill
  computes only the new tokens (which still attend to the whole prompt).
"""

from __future__ import annotations

import numpy as np

from fleetplan.sweeps import latency, memory


def _allreduce_ms(c, tokens, fraction):
    message_gb = np.asarray(tokens, dtype=float) * c["hidden_size"] * c["activation_bytes"] / 1e9
    return latency.allreduce_time_ms(message_gb, c["tp"], c["interconnect_gb_s"], 2.0 * c["n_layers"] * fraction,
                                     c["allreduce_latency_us"])


def _hop_ms(c, tokens):
    message_gb = np.asarray(tokens, dtype=float) * c["hidden_size"] * c["activation_bytes"] / 1e9
    return latency.hop_time_ms(message_gb, c["network_gb_s"], c["pp_hop_latency_us"])


def _weights_ms(c, tokens, fraction):
    touched_b = latency.moe_params_touched_b(c["params_total_b"], c["params_active_b"],
                                             c["n_experts"], c["n_experts_active"], tokens)
    return latency.memory_time_ms(memory.weight_gb(touched_b, c["bytes_per_weight"]) * (fraction / c["tp"]),
                                  c["memory_bw_tb_s"], c["mbu"])


def _matmul_ms(c, flop, mfu="mfu"):
    return latency.compute_time_ms(flop, c["peak_tflops"], c[mfu], c["tp"]) * (1.0 + c["dequant_cost"])


def stage_decode_ms(c, micro_batch, context_len):
    """One pipeline stage's decode step for ``micro_batch`` sequences: time, memory and compute parts [ms]."""
    fraction = latency.stage_fraction(c["n_layers"], c["pp"])
    tokens = micro_batch * (c["spec_tokens"] + 1.0)  # verified tokens per sequence
    weights_ms = _weights_ms(c, tokens, fraction)
    matmul_ms = _matmul_ms(c, tokens * latency.linear_flop_per_token(c["params_active_b"]) * fraction)
    kv_ms = latency.memory_time_ms(memory.kv_gb(micro_batch, context_len, c["kv_bytes_per_token"]),
                                   c["memory_bw_tb_s"], c["mbu"])
    attention_ms = latency.compute_time_ms(
        tokens * latency.attention_flop_per_token(c["n_layers"], c["n_heads"], c["head_dim"], context_len) * fraction,
        c["peak_tflops"], c["mfu"], c["tp"])
    step = (latency.step_time_ms(weights_ms, matmul_ms, _allreduce_ms(c, tokens, fraction), c["step_overhead_ms"])
            + np.maximum(kv_ms, attention_ms))
    return step, weights_ms + kv_ms, matmul_ms + attention_ms


def decode_step_ms(c, batch, context_len):
    """TPOT for ``batch`` sequences, and the memory and compute parts of one stage's step [ms].

    Without levers this is seed 000's ``(W + B L kv) / (BW MBU)`` while memory-bound.
    """
    batch = np.asarray(batch, dtype=float)
    micro_batch = np.maximum(batch / c["pp"], np.minimum(batch, 1.0))
    stage_ms, memory_ms, compute_ms = stage_decode_ms(c, micro_batch, context_len)
    verify_ms = latency.pipeline_time_ms(stage_ms, c["pp"], _hop_ms(c, micro_batch))
    drafted_ms = verify_ms * (1.0 + c["spec_tokens"] * c["spec_draft_cost"])
    tpot = drafted_ms / latency.speculative_tokens_per_step(c["spec_acceptance"], c["spec_tokens"])
    return tpot, memory_ms, compute_ms


def prefill_ms(c, input_len):
    """Prefill of one prompt: its latency, and the GPU time it takes from a shared replica [ms].

    The latency is a roofline step over the prompt's new (uncached) tokens on every stage, after
    the request's overhead outside the engine (``request_overhead_ms``). The
    time taken from a replica that interleaves prompts with decode steps is the busiest stage's
    FLOPs plus all-reduces: weight reads ride on the decode steps the prompt joins, and stages
    work on different prompts at once.
    """
    fraction = latency.stage_fraction(c["n_layers"], c["pp"])
    cached = np.floor(np.asarray(input_len, dtype=float) * c["prefix_hit_rate"])
    new = input_len - cached
    flop = (latency.prefill_flop(c["params_active_b"], c["n_layers"], c["n_heads"], c["head_dim"], input_len)
            - latency.prefill_flop(c["params_active_b"], c["n_layers"], c["n_heads"], c["head_dim"], cached))
    compute_ms = _matmul_ms(c, flop * fraction, "mfu_prefill")
    comm_ms = _allreduce_ms(c, new, fraction)
    stage_ms = latency.step_time_ms(_weights_ms(c, new, fraction), compute_ms, comm_ms, c["step_overhead_ms"])
    total = latency.pipeline_time_ms(stage_ms, c["pp"], _hop_ms(c, new)) + c["request_overhead_ms"]
    return total, compute_ms + comm_ms
