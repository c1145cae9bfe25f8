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
    memory_gb : device memory per GPU [GB]
    memory_bw_tb_s : peak device memory bandwidth per GPU [TB/s]
    peak_tflops : dense peak tensor throughput at the compute precision [TFLOPS]
    interconnect_gb_s : scale-up bandwidth per GPU, both directions [GB/s]
    params_total_b : all parameters of the model [1e9 parameters]
    params_active_b : parameters used per token [1e9 parameters]
    n_layers : transformer blocks [layers]
    hidden_size : residual stream width [elements]
    n_heads : query attention heads [heads]
    head_dim : per-head dimension [elements]
    n_experts : routed experts per MoE layer [experts]
    n_experts_active : routed experts chosen per token [experts]
    bytes_per_weight : stored bytes per parameter, scales included [bytes]
    weight_gb : weight memory per GPU of the busiest pipeline stage [GB]
    kv_bytes_per_token : KV cache per token per GPU of the busiest stage [bytes/token]
    kv_bytes_per_token_model : KV cache per token of the whole model [bytes/token]
    mbu : memory-bandwidth utilization, TP loss applied [fraction]
    mfu : decode model FLOPs utilization, TP loss applied [fraction]
    mfu_prefill : prefill model FLOPs utilization, TP loss applied [fraction]
    step_overhead_ms : fixed time added to every forward step [ms]
    request_overhead_ms : time a request spends outside the forward steps before its prefill [ms]
    reserve_fraction : share of GPU memory kept for activations and fragmentation [fraction]
    max_num_seqs : the serving engine's cap on concurrent sequences [sequences]
    allreduce_latency_us : fixed latency of one tensor-parallel all-reduce [us]
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
    memory_gb: np.ndarray
    memory_bw_tb_s: np.ndarray
    peak_tflops: np.ndarray
    interconnect_gb_s: np.ndarray
    params_total_b: np.ndarray
    params_active_b: np.ndarray
    n_layers: np.ndarray
    hidden_size: np.ndarray
    n_heads: np.ndarray
    head_dim: np.ndarray
    n_experts: np.ndarray
    n_experts_active: np.ndarray
    bytes_per_weight: np.ndarray
    weight_gb: np.ndarray
    kv_bytes_per_token: np.ndarray
    kv_bytes_per_token_model: np.ndarray
    mbu: np.ndarray
    mfu: np.ndarray
    mfu_prefill: np.ndarray
    step_overhead_ms: np.ndarray
    request_overhead_ms: np.ndarray
    reserve_fraction: np.ndarray
    max_num_seqs: np.ndarray
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
