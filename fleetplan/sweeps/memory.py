"""Memory formulas: weights, KV cache, runtime reserve and the batch that fits.

Units: GB = 1e9 bytes, parameters in billions, so that ``params_b * bytes_per_weight`` is
directly GB. Vendors' memory figures are converted once, by the unit they mean
(``capacity_gb``: GiB for HBM parts). Every function takes scalars or numpy arrays.

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


GIB_BYTES = 2.0**30
KV_MEMORY_RULES = ("fraction_of_free", "fraction_of_total", "static_fraction")  # codes 0, 1, 2


def capacity_gb(memory, is_gib):
    """Device memory in GB (1e9 bytes) from the vendor's figure and its unit.

    Parameters
    ----------
    memory : float or array
        Memory as the vendor prints it [GB or GiB].
    is_gib : bool or array
        True where the vendor's "GB" means GiB (2^30 bytes), as for HBM parts.

    Returns
    -------
    float or array
        Memory [GB].

    Notes
    -----
    .. math:: M = m \\cdot 2^{30} / 10^9 \\text{ (GiB)}, \\quad M = m \\text{ (GB)}

    References
    ----------
    .. [1] IEC 80000-13:2008 (binary prefixes); NVIDIA's "80 GB" H100 reports 81,559 MiB in
       nvidia-smi.

    Examples
    --------
    >>> round(float(capacity_gb(80, True)), 2), float(capacity_gb(48, False))
    (85.9, 48.0)
    """
    return np.asarray(memory, dtype=float) * np.where(is_gib, GIB_BYTES / 1e9, 1.0)


def engine_workspace_gb(workspace_gib, max_batched_tokens, hidden_size, bytes_per_token_hidden, tp):
    """Memory per GPU an engine keeps outside its KV cache: runtime buffers plus activations.

    Parameters
    ----------
    workspace_gib : float or array
        Fixed part: CUDA graphs, runtime buffers, libraries [GiB].
    max_batched_tokens : int or array
        Token budget of one iteration, whose activations the engine profiles [tokens].
    hidden_size : int or array
        Model width [elements].
    bytes_per_token_hidden : float or array
        Activation bytes per batched token per hidden element [bytes].
    tp : int or array
        Tensor-parallel degree sharing the activations [GPUs].

    Returns
    -------
    float or array
        Workspace [GB].

    Notes
    -----
    .. math:: M_{ws} = w \\cdot 2^{30} / 10^9 + T_{max} \\cdot h \\cdot a / (tp \\cdot 10^9)

    References
    ----------
    .. [1] vLLM's memory profiling run (gpu_worker.determine_available_memory): the peak
       activation of a forward pass over max_num_batched_tokens tokens stays outside the KV cache.

    Examples
    --------
    >>> round(float(engine_workspace_gb(1.0, 8192, 4096, 36.0, 1)), 3)
    2.282
    """
    activations = np.asarray(max_batched_tokens, dtype=float) * hidden_size * bytes_per_token_hidden / tp / 1e9
    return np.asarray(workspace_gib, dtype=float) * GIB_BYTES / 1e9 + activations


def engine_kv_budget_gb(rule, memory_gb, weight_gb_per_gpu, workspace_gb, fraction):
    """Memory one GPU gives to the KV cache, computed as the serving engine computes it.

    Parameters
    ----------
    rule : int or array
        0 = fraction_of_free (TensorRT-LLM), 1 = fraction_of_total (vLLM), 2 = static_fraction
        (SGLang); ``KV_MEMORY_RULES``.
    memory_gb : float or array
        Device memory [GB].
    weight_gb_per_gpu : float or array
        Weights held by the GPU [GB].
    workspace_gb : float or array
        Runtime buffers and activations (``engine_workspace_gb``) [GB].
    fraction : float or array
        kv_cache_free_gpu_mem_fraction, gpu_memory_utilization or mem_fraction_static [fraction].

    Returns
    -------
    float or array
        KV-cache budget [GB]; negative when the weights do not fit.

    Notes
    -----
    .. math:: M_{kv} = \\begin{cases} f (M - W - M_{ws}) & \\text{fraction of free} \\\\
              f M - W - M_{ws} & \\text{fraction of total} \\\\
              f M - W & \\text{static fraction} \\end{cases}

    References
    ----------
    .. [1] TensorRT-LLM KvCacheConfig.free_gpu_memory_fraction; vLLM gpu_memory_utilization;
       SGLang mem_fraction_static (the engines' documentation, engines catalog sources).
    .. [2] Kwon et al. 2023, arXiv:2309.06180 (memory left for the KV cache bounds the batch).

    Examples
    --------
    >>> [round(float(engine_kv_budget_gb(r, 85.9, 16.06, 2.0, 0.9)), 3) for r in (0, 1, 2)]
    [61.056, 59.25, 61.25]
    """
    memory = np.asarray(memory_gb, dtype=float)
    free = fraction * (memory - weight_gb_per_gpu - workspace_gb)
    of_total = fraction * memory - weight_gb_per_gpu
    return np.where(rule == 0, free, np.where(rule == 1, of_total - workspace_gb, of_total))


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
