"""Memory formulas: weights, KV cache, runtime reserve and the batch that fits.

Units: GB = 1e9 bytes (the vendors' nominal GPU memory), parameters in billions, so that
``params_b * bytes_per_weight`` is directly GB. Every function takes scalars or numpy arrays.
"""

from __future__ import annotations

import numpy as np


def weight_gb(params_b, bytes_per_weight):
    """Weight memory of a whole model [GB].

    ``W = N * b`` with N [1e9 parameters] and b [bytes/parameter] (seed 000: 2N bytes in bf16).

    >>> round(float(weight_gb(8.03, 2.0)), 2)
    16.06
    """
    return np.asarray(params_b, dtype=float) * bytes_per_weight


def kv_bytes_per_token(n_layers, n_kv_heads, head_dim, kv_bytes_per_element):
    """KV-cache bytes per token for MHA/GQA attention [bytes/token].

    ``kv = 2 (K and V) * layers * kv_heads * head_dim * bytes`` (seed 000: 1.31e5 bytes per token
    for Llama 3.1 8B in bf16, so L * kv = 2.62e8 bytes at L = 2,000).

    >>> int(kv_bytes_per_token(32, 8, 128, 2.0))
    131072
    """
    return 2.0 * np.asarray(n_layers, dtype=float) * n_kv_heads * head_dim * kv_bytes_per_element


def kv_bytes_per_token_mla(n_layers, kv_lora_rank, qk_rope_head_dim, kv_bytes_per_element):
    """KV-cache bytes per token for multi-head latent attention (MLA) [bytes/token].

    MLA caches one compressed latent plus the decoupled RoPE key per layer, shared by all heads:
    ``kv = layers * (kv_lora_rank + qk_rope_head_dim) * bytes`` (DeepSeek-V2 paper, section 2.1).

    >>> int(kv_bytes_per_token_mla(61, 512, 64, 2.0))
    70272
    """
    return np.asarray(n_layers, dtype=float) * (kv_lora_rank + qk_rope_head_dim) * kv_bytes_per_element


def kv_shard_fraction(n_kv_heads, tp, is_mla):
    """Fraction of one token's KV cache each of ``tp`` GPUs holds [-].

    Tensor parallelism splits KV heads across GPUs; with more GPUs than KV heads every GPU keeps
    one head (replication), and an MLA latent is replicated on every GPU.

    >>> float(kv_shard_fraction(8, 16, False)), float(kv_shard_fraction(8, 4, False))
    (0.125, 0.25)
    """
    heads_per_gpu = np.maximum(np.asarray(n_kv_heads, dtype=float) / tp, 1.0)
    return np.where(is_mla, 1.0, heads_per_gpu / n_kv_heads)


def runtime_reserve_gb(memory_gb, reserve_fraction):
    """Memory kept back for activations, CUDA graphs and fragmentation [GB].

    ``reserve = memory * fraction``; vLLM's default ``gpu_memory_utilization=0.9`` keeps 10%.

    >>> float(runtime_reserve_gb(80.0, 0.1))
    8.0
    """
    return np.asarray(memory_gb, dtype=float) * reserve_fraction


def kv_budget_gb(memory_gb, weight_gb_per_gpu, reserve_gb):
    """Memory left for the KV cache on one GPU [GB]; negative when the weights do not fit.

    >>> float(kv_budget_gb(80.0, 16.06, 0.0))
    63.94
    """
    return np.asarray(memory_gb, dtype=float) - weight_gb_per_gpu - reserve_gb


def max_batch_fits(kv_budget_gb_per_gpu, context_len, kv_bytes_per_token_per_gpu):
    """Largest number of sequences whose KV cache fits at ``context_len`` tokens [sequences].

    ``B_max = floor(budget / (L * kv))``; 0 when the weights alone do not fit (seed 000 lesson 04).

    >>> int(max_batch_fits(63.94, 2000, 131072))
    243
    """
    per_sequence_gb = np.asarray(context_len, dtype=float) * kv_bytes_per_token_per_gpu / 1e9
    with np.errstate(invalid="ignore", divide="ignore"):
        fit = np.floor(np.maximum(kv_budget_gb_per_gpu, 0.0) / per_sequence_gb)
    return np.where(np.isfinite(fit), fit, 0).astype(np.int64)


def kv_gb(batch, context_len, kv_bytes_per_token_per_gpu):
    """KV-cache memory of a batch on one GPU [GB]: ``B * L * kv / 1e9``.

    >>> round(float(kv_gb(162, 2000, 131072)), 2)
    42.47
    """
    return np.asarray(batch, dtype=float) * context_len * kv_bytes_per_token_per_gpu / 1e9
