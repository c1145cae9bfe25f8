"""Memory formulas: weights, KV cache, runtime reserve and the batch that fits.

Units: GB = 1e9 bytes (the vendors' nominal GPU memory), parameters in billions, so that
``params_b * bytes_per_weight`` is directly GB. Every function takes scalars or numpy arrays.

References
----------
.. [1] Fleetplan seed 000, "Estimating throughput", sections 1 and 6 (bytes per token, the memory
   limit of the batch).
.. [2] Kwon et al., "Efficient Memory Management for Large Language Model Serving with
   PagedAttention", SOSP 2023, arXiv:2309.06180.
.. [3] DeepSeek-AI, "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts Language
   Model", arXiv:2405.04434, section 2.1 (multi-head latent attention).
"""

from __future__ import annotations

import numpy as np


def weight_gb(params_b, bytes_per_weight):
    """Weight memory of a whole model.

    Parameters
    ----------
    params_b : float or array
        Parameters [1e9 parameters].
    bytes_per_weight : float or array
        Stored bytes per parameter, quantization scales included [bytes].

    Returns
    -------
    float or array
        Weight memory [GB].

    Notes
    -----
    .. math:: W = N \\cdot b

    References
    ----------
    .. [1] Fleetplan seed 000, section 1: a bf16 model of N parameters holds 2N bytes.

    Examples
    --------
    >>> round(float(weight_gb(8.03, 2.0)), 2)
    16.06
    """
    return np.asarray(params_b, dtype=float) * bytes_per_weight


def kv_bytes_per_token(n_layers, n_kv_heads, head_dim, kv_bytes_per_element):
    """KV-cache bytes per token for multi-head or grouped-query attention (MHA/GQA).

    Parameters
    ----------
    n_layers : int or array
        Transformer blocks [layers].
    n_kv_heads : int or array
        Key/value heads [heads].
    head_dim : int or array
        Per-head dimension [elements].
    kv_bytes_per_element : float or array
        Bytes per cached element [bytes].

    Returns
    -------
    float or array
        KV cache of one token, all layers [bytes/token].

    Notes
    -----
    K and V each hold ``kv_heads * head_dim`` elements per layer:

    .. math:: kv = 2 \\cdot n_{layers} \\cdot n_{kv} \\cdot d_{head} \\cdot b_{kv}

    References
    ----------
    .. [1] Fleetplan seed 000, section 1: 1.31e5 bytes per token for Llama 3.1 8B in bf16, so
       L * kv = 2.62e8 bytes at L = 2,000.

    Examples
    --------
    >>> int(kv_bytes_per_token(32, 8, 128, 2.0))
    131072
    """
    return 2.0 * np.asarray(n_layers, dtype=float) * n_kv_heads * head_dim * kv_bytes_per_element


def kv_bytes_per_token_mla(n_layers, kv_lora_rank, qk_rope_head_dim, kv_bytes_per_element):
    """KV-cache bytes per token for multi-head latent attention (MLA).

    Parameters
    ----------
    n_layers : int or array
        Transformer blocks [layers].
    kv_lora_rank : int or array
        Compressed KV latent per token and layer [elements].
    qk_rope_head_dim : int or array
        Decoupled RoPE key per token and layer, cached beside the latent [elements].
    kv_bytes_per_element : float or array
        Bytes per cached element [bytes].

    Returns
    -------
    float or array
        KV cache of one token, all layers [bytes/token].

    Notes
    -----
    MLA caches one latent plus the RoPE key per layer, shared by all heads:

    .. math:: kv = n_{layers} \\cdot (r_{kv} + d_{rope}) \\cdot b_{kv}

    References
    ----------
    .. [1] DeepSeek-V2, arXiv:2405.04434, section 2.1.

    Examples
    --------
    >>> int(kv_bytes_per_token_mla(61, 512, 64, 2.0))
    70272
    """
    return np.asarray(n_layers, dtype=float) * (kv_lora_rank + qk_rope_head_dim) * kv_bytes_per_element


def kv_shard_fraction(n_kv_heads, tp, is_mla):
    """Share of one token's KV cache that each of ``tp`` GPUs holds.

    Parameters
    ----------
    n_kv_heads : int or array
        Key/value heads [heads].
    tp : int or array
        Tensor-parallel degree [GPUs].
    is_mla : bool or array
        True for multi-head latent attention, whose latent every GPU keeps whole.

    Returns
    -------
    float or array
        Share of the KV cache per GPU [fraction].

    Notes
    -----
    Tensor parallelism splits KV heads across GPUs; with more GPUs than KV heads every GPU keeps
    one head (replication):

    .. math:: f = \\max(n_{kv} / tp, 1) / n_{kv} \\quad (f = 1 \\text{ for MLA})

    References
    ----------
    .. [1] Pope et al., "Efficiently Scaling Transformer Inference", MLSys 2023,
       arXiv:2211.05102, section 3.3 (KV heads sharded or replicated).

    Examples
    --------
    >>> float(kv_shard_fraction(8, 16, False)), float(kv_shard_fraction(8, 4, False))
    (0.125, 0.25)
    """
    heads_per_gpu = np.maximum(np.asarray(n_kv_heads, dtype=float) / tp, 1.0)
    return np.where(is_mla, 1.0, heads_per_gpu / n_kv_heads)


def runtime_reserve_gb(memory_gb, reserve_fraction):
    """Memory kept back for activations, CUDA graphs and fragmentation.

    Parameters
    ----------
    memory_gb : float or array
        Device memory per GPU [GB].
    reserve_fraction : float or array
        Share kept back [fraction].

    Returns
    -------
    float or array
        Reserved memory per GPU [GB].

    Notes
    -----
    .. math:: R = M \\cdot f_{reserve}

    References
    ----------
    .. [1] Kwon et al. 2023, arXiv:2309.06180; vLLM's default ``gpu_memory_utilization=0.9``
       keeps 10%.

    Examples
    --------
    >>> float(runtime_reserve_gb(80.0, 0.1))
    8.0
    """
    return np.asarray(memory_gb, dtype=float) * reserve_fraction


def kv_budget_gb(memory_gb, weight_gb_per_gpu, reserve_gb):
    """Memory left for the KV cache on one GPU; negative when the weights do not fit.

    Parameters
    ----------
    memory_gb : float or array
        Device memory per GPU [GB].
    weight_gb_per_gpu : float or array
        Weights held by the GPU [GB].
    reserve_gb : float or array
        Runtime reserve [GB].

    Returns
    -------
    float or array
        KV-cache budget per GPU [GB].

    Notes
    -----
    .. math:: M_{kv} = M - W / tp - R

    References
    ----------
    .. [1] Fleetplan seed 000, section 6 (the memory limit of the batch).

    Examples
    --------
    >>> float(kv_budget_gb(80.0, 16.06, 0.0))
    63.94
    """
    return np.asarray(memory_gb, dtype=float) - weight_gb_per_gpu - reserve_gb


def max_batch_fits(kv_budget_gb_per_gpu, context_len, kv_bytes_per_token_per_gpu):
    """Largest number of sequences whose KV cache fits at ``context_len`` tokens.

    Parameters
    ----------
    kv_budget_gb_per_gpu : float or array
        KV-cache budget per GPU [GB].
    context_len : int or array
        Tokens in each sequence's cache [tokens].
    kv_bytes_per_token_per_gpu : float or array
        KV cache per token held by one GPU [bytes/token].

    Returns
    -------
    int or array
        Sequences that fit; 0 when the weights alone do not fit [sequences].

    Notes
    -----
    .. math:: B_{max} = \\lfloor M_{kv} / (L \\cdot kv) \\rfloor

    References
    ----------
    .. [1] Fleetplan seed 000, section 6: push the batch to the memory limit.

    Examples
    --------
    >>> int(max_batch_fits(63.94, 2000, 131072))
    243
    """
    per_sequence_gb = np.asarray(context_len, dtype=float) * kv_bytes_per_token_per_gpu / 1e9
    with np.errstate(invalid="ignore", divide="ignore"):
        fit = np.floor(np.maximum(kv_budget_gb_per_gpu, 0.0) / per_sequence_gb)
    return np.where(np.isfinite(fit), fit, 0).astype(np.int64)


def kv_gb(batch, context_len, kv_bytes_per_token_per_gpu):
    """KV-cache memory of a batch on one GPU.

    Parameters
    ----------
    batch : int or array
        Sequences [sequences].
    context_len : int or array
        Tokens in each sequence's cache [tokens].
    kv_bytes_per_token_per_gpu : float or array
        KV cache per token held by one GPU [bytes/token].

    Returns
    -------
    float or array
        KV-cache memory [GB].

    Notes
    -----
    .. math:: M_{kv} = B \\cdot L \\cdot kv / 10^9

    References
    ----------
    .. [1] Fleetplan seed 000, section 1: the ``B L kv`` term of the decode step.

    Examples
    --------
    >>> round(float(kv_gb(162, 2000, 131072)), 2)
    42.47
    """
    return np.asarray(batch, dtype=float) * context_len * kv_bytes_per_token_per_gpu / 1e9
