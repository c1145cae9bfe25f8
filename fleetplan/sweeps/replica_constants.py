"""Typed constants of serving replicas: the arrays the performance model's stages pass along.

``config_frame`` gathers one row of constants per configuration from the catalogs; the kernels
read them as ``ReplicaConstants``, one float array per field with one value per configuration,
and ``gather`` repeats them onto the rows being evaluated. A disaggregated configuration carries
its prefill replica's constants as a nested instance (``prefill``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

PREFILL_PREFIX = "prefill."  # prefill replica constants next to a disaggregated configuration's own


@dataclass(frozen=True)
class ReplicaConstants:
    """Per-configuration constants of one replica (arrays of equal shape, float64).

    Attributes
    ----------
    tp : tensor-parallel degree [GPUs]
    pp : pipeline-parallel stages [stages]
    gpus : GPUs in one replica, ``tp * pp`` [GPUs]
    stage_fraction : share of the layers the busiest pipeline stage holds [fraction]
    memory_gb : device memory per GPU, converted from the vendor's unit [GB]
    memory_bw_tb_s : peak device memory bandwidth per GPU [TB/s]
    peak_tflops : dense peak tensor throughput at the GEMM precision [TFLOPS]
    attention_tflops : dense peak tensor throughput at the attention precision [TFLOPS]
    allreduce_gb_s : one-direction bandwidth of the TP group's all-reduce path, before its
        efficiency (the socket link once the group spans CPU sockets) [GB/s]
    n_layers : transformer blocks [layers]
    full_layers : layers attending to the whole context [layers]
    sliding_layers : layers attending to the last ``sliding_window`` tokens [layers]
    sliding_window : window of the sliding layers; inf without [tokens]
    hidden_size : residual stream width [elements]
    dense_params_b : parameters every token uses (attention, dense FFN, shared experts,
        embeddings) [1e9 parameters]
    expert_params_b : parameters of one routed expert over all MoE layers [1e9 parameters]
    n_experts : routed experts per MoE layer [experts]
    n_experts_active : routed experts chosen per token [experts]
    bytes_per_weight : stored bytes per parameter, scales included [bytes]
    attention_flop_per_pair_decode : attention FLOPs per query-key pair and layer when decoding
        (MLA in its absorbed form) [FLOP]
    attention_flop_per_pair_prefill : attention FLOPs per query-key pair and layer of a prompt [FLOP]
    weight_gb : weight memory per GPU of the busiest pipeline stage [GB]
    kv_bytes_per_layer_token : KV cache per token and layer held by one GPU [bytes]
    kv_bytes_per_layer_token_model : KV cache per token and layer of the whole model [bytes]
    kv_budget_gb : memory per GPU the engine gives to the KV cache (its memory rule) [GB]
    reserve_gb : memory per GPU outside weights and KV cache [GB]
    max_num_seqs : the engine's cap on running sequences [sequences]
    max_batched_tokens : the engine's token budget of one iteration [tokens]
    chunked_prefill : 1 where the engine splits prompts longer than its budget, else 0 [-]
    reserves_full_sequence : 1 where the engine sets aside a sequence's whole prompt plus output
        of KV cache at admission, else 0 [-]
    gemm_compute, gemm_prefill, gemm_memory : dense GEMM FLOPs utilization in decode steps and on
        prompt tokens, and bandwidth utilization of their weight reads [fraction]
    expert_compute, expert_prefill, expert_memory : the same for routed-expert GEMMs [fraction]
    attention_compute, attention_prefill, attention_memory : attention FLOPs utilization in
        decode and prefill, bandwidth utilization of KV-cache reads [fraction]
    expert_tile_tokens : tokens each touched expert computes at least (tile padding) [tokens]
    routing_ns_per_token : time per routed token copy and MoE layer outside the GEMM roofline [ns]
    tp_scaling : share of the GEMM efficiencies kept per doubling of ``tp`` [fraction]
    allreduce_efficiency : share of ``allreduce_gb_s`` a ring all-reduce reaches [fraction]
    crossing_efficiency : share of ``allreduce_efficiency`` kept by a group spanning interconnect
        domains (CPU sockets), whose boundary hop NCCL stages through host memory; 1 for groups
        inside one domain [fraction]
    iteration_ms : fixed host time of one engine iteration [ms]
    iteration_us_per_seq : host time per running sequence of one iteration [us]
    layer_overhead_us : GPU time per layer and step outside the operators' rooflines [us]
    request_overhead_ms : time a request spends outside the forward steps before its prefill [ms]
    allreduce_latency_us : fixed latency of one all-reduce of two GPUs; ``log2(tp)`` times it for tp [us]
    activation_bytes : bytes per activation element exchanged between GPUs [bytes]
    network_gb_s : inter-node bandwidth per GPU [GB/s]
    pp_hop_latency_us : fixed latency of one hop between pipeline stages [us]
    usd_per_gpu_hour : price of one GPU-hour [USD/GPU-hour]
    prefix_hit_rate : share of each prompt already in the prefix cache [fraction]
    spec_tokens : tokens drafted per speculative step [tokens]
    spec_acceptance : probability each drafted token is accepted [fraction]
    spec_draft_cost : draft cost per drafted token, share of a verification step [fraction]
    dequant_cost : extra matmul time of weight-only quantized weights; 0 otherwise [fraction]
    prefill_chunk_tokens : chunked prefill, prompt tokens per step; 0 = whole prompt [tokens]
    prefill : the prefill replica's constants of a disaggregated configuration (colocated
        configurations stand in their own GPU and TP there); ``None`` without the axis
    split : True where the configuration has a separate prefill replica; ``None`` without the axis
    """

    tp: np.ndarray
    pp: np.ndarray
    gpus: np.ndarray
    stage_fraction: np.ndarray
    memory_gb: np.ndarray
    memory_bw_tb_s: np.ndarray
    peak_tflops: np.ndarray
    attention_tflops: np.ndarray
    allreduce_gb_s: np.ndarray
    n_layers: np.ndarray
    full_layers: np.ndarray
    sliding_layers: np.ndarray
    sliding_window: np.ndarray
    hidden_size: np.ndarray
    dense_params_b: np.ndarray
    expert_params_b: np.ndarray
    n_experts: np.ndarray
    n_experts_active: np.ndarray
    bytes_per_weight: np.ndarray
    attention_flop_per_pair_decode: np.ndarray
    attention_flop_per_pair_prefill: np.ndarray
    weight_gb: np.ndarray
    kv_bytes_per_layer_token: np.ndarray
    kv_bytes_per_layer_token_model: np.ndarray
    kv_budget_gb: np.ndarray
    reserve_gb: np.ndarray
    max_num_seqs: np.ndarray
    max_batched_tokens: np.ndarray
    chunked_prefill: np.ndarray
    reserves_full_sequence: np.ndarray
    gemm_compute: np.ndarray
    gemm_prefill: np.ndarray
    gemm_memory: np.ndarray
    expert_compute: np.ndarray
    expert_prefill: np.ndarray
    expert_memory: np.ndarray
    attention_compute: np.ndarray
    attention_prefill: np.ndarray
    attention_memory: np.ndarray
    expert_tile_tokens: np.ndarray
    routing_ns_per_token: np.ndarray
    tp_scaling: np.ndarray
    allreduce_efficiency: np.ndarray
    crossing_efficiency: np.ndarray
    iteration_ms: np.ndarray
    iteration_us_per_seq: np.ndarray
    layer_overhead_us: np.ndarray
    request_overhead_ms: np.ndarray
    allreduce_latency_us: np.ndarray
    activation_bytes: np.ndarray
    network_gb_s: np.ndarray
    pp_hop_latency_us: np.ndarray
    usd_per_gpu_hour: np.ndarray
    prefix_hit_rate: np.ndarray
    spec_tokens: np.ndarray
    spec_acceptance: np.ndarray
    spec_draft_cost: np.ndarray
    dequant_cost: np.ndarray
    prefill_chunk_tokens: np.ndarray
    prefill: ReplicaConstants | None = None
    split: np.ndarray | None = None

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> ReplicaConstants:
        """The constants of every configuration in ``frame`` (a ``config_frame``, possibly with
        its prefill side's columns prefixed ``prefill.``)."""
        prefill = None
        if PREFILL_PREFIX + "tp" in frame:
            side = frame[[c for c in frame.columns if c.startswith(PREFILL_PREFIX)]]
            prefill = cls.from_frame(side.rename(columns=lambda c: c[len(PREFILL_PREFIX):]))
        split = (frame["prefill_tp"].to_numpy(dtype=float) > 0) if prefill is not None else None
        arrays = {name: frame[name].to_numpy(dtype=float) for name in ARRAY_FIELDS}
        return cls(**arrays, prefill=prefill, split=split)

    def gather(self, index: np.ndarray) -> ReplicaConstants:
        """The constants repeated onto rows: one ``take`` per field, ``index`` = configuration of each row."""
        arrays = {name: getattr(self, name).take(index) for name in ARRAY_FIELDS}
        prefill = None if self.prefill is None else self.prefill.gather(index)
        split = None if self.split is None else self.split.take(index)
        return ReplicaConstants(**arrays, prefill=prefill, split=split)


ARRAY_FIELDS = tuple(f.name for f in fields(ReplicaConstants) if f.name not in ("prefill", "split"))
