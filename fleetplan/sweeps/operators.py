"""Per-operator formulas of the roofline step: how a model's work splits into dense and expert
GEMMs, attention over full and sliding-window layers (multi-head latent attention included),
the all-reduce path of a tensor-parallel group, and the engine's per-iteration host time.

``step_times`` combines them: each operator takes the slower of its memory and compute time at
its own efficiency (the efficiency catalog, keyed engine, GPU, operator and precision), and a
step takes the larger of the GPU time and the host time. Units: parameters in billions, tokens,
FLOPs, bytes, GB/s, milliseconds. Scalars or numpy arrays throughout.

References
----------
.. [1] Yuan et al., "LLM Inference Unveiled: Survey and Roofline Model Insights" (LLM-Viewer),
   arXiv:2402.16363, 2024 (a roofline per operator).
.. [2] Fedus, Zoph and Shazeer, "Switch Transformers", JMLR 23, 2022, arXiv:2101.03961.
.. [3] Beltagy, Peters and Cohan, "Longformer: The Long-Document Transformer", arXiv:2004.05150,
   2020 (sliding-window attention); Gemma Team, "Gemma 2", arXiv:2408.00118 (alternating local
   and global layers).
.. [4] DeepSeek-AI, "DeepSeek-V2", arXiv:2405.04434, section 2.1 and appendix C (MLA with the
   up-projections absorbed for decoding).
.. [5] Kwon et al., "Efficient Memory Management for Large Language Model Serving with
   PagedAttention", SOSP 2023, arXiv:2309.06180 (the engine loop around the GPU steps).
"""

from __future__ import annotations

import numpy as np


def expert_params_b(params_total_b, params_active_b, n_experts, n_experts_active):
    """Parameters of one routed expert, summed over the MoE layers.

    Parameters
    ----------
    params_total_b, params_active_b : float or array
        All parameters and those used per token [1e9 parameters].
    n_experts, n_experts_active : int or array
        Routed experts per layer, E, and chosen per token, k [experts].

    Returns
    -------
    float or array
        Parameters of one expert [1e9 parameters]; 0 for a dense model (E = k).

    Notes
    -----
    A token uses the shared weights and k of the E equal experts:

    .. math:: p_{expert} = \\frac{N_{total} - N_{active}}{E - k}

    References
    ----------
    .. [1] Fedus et al. 2022, section 2.

    Examples
    --------
    >>> round(float(expert_params_b(46.7, 12.9, 8, 2)), 3)
    5.633
    """
    total = np.asarray(params_total_b, dtype=float)
    routed = np.asarray(n_experts, dtype=float) - n_experts_active
    return np.divide(total - params_active_b, routed, out=np.zeros_like(total * routed), where=routed > 0)


def dense_params_b(params_total_b, n_experts, expert_b):
    """Parameters every token uses: attention, dense layers, shared experts, embeddings.

    Parameters
    ----------
    params_total_b : float or array
        All parameters [1e9 parameters].
    n_experts : int or array
        Routed experts per layer, E [experts].
    expert_b : float or array
        Parameters of one routed expert (``expert_params_b``) [1e9 parameters].

    Returns
    -------
    float or array
        Shared (dense) parameters [1e9 parameters].

    Notes
    -----
    .. math:: N_{dense} = N_{total} - E \\, p_{expert}

    References
    ----------
    .. [1] Fedus et al. 2022, section 2.

    Examples
    --------
    >>> round(float(dense_params_b(46.7, 8, 5.633333)), 2)
    1.63
    """
    return np.asarray(params_total_b, dtype=float) - np.asarray(n_experts, dtype=float) * expert_b


def attended_tokens(context_len, full_layers, sliding_layers, window):
    """Cached tokens all layers hold (or attend to) for one sequence, summed over layers.

    Parameters
    ----------
    context_len : int or array
        Tokens in the sequence, L [tokens].
    full_layers : int or array
        Layers attending to the whole context [layers].
    sliding_layers : int or array
        Layers attending to the last ``window`` tokens only [layers].
    window : int or array
        Sliding window, W [tokens]; ignored where ``sliding_layers`` is 0.

    Returns
    -------
    float or array
        Token-layers [tokens x layers].

    Notes
    -----
    .. math:: A(L) = n_{full} L + n_{sliding} \\min(L, W)

    References
    ----------
    .. [1] Beltagy et al. 2020; Gemma Team 2024.

    Examples
    --------
    >>> float(attended_tokens(1000, 12, 12, 128))
    13536.0
    """
    length = np.asarray(context_len, dtype=float)
    return full_layers * length + sliding_layers * np.minimum(length, window)


def causal_pairs(input_len, window):
    """Query-key pairs of causal attention over a prompt of S tokens, per layer.

    Parameters
    ----------
    input_len : int or array
        Prompt tokens, S [tokens].
    window : float or array
        Attention window, W [tokens]; ``inf`` for full attention.

    Returns
    -------
    float or array
        Pairs [pairs].

    Notes
    -----
    Token i attends to ``min(i, W)`` tokens:

    .. math:: P(S) = \\sum_{i=1}^{S} \\min(i, W) = \\begin{cases} S^2 / 2 & S \\le W \\\\
              W S - W^2 / 2 & S > W \\end{cases}

    References
    ----------
    .. [1] Beltagy et al. 2020, section 3.1 (cost linear in the sequence for a fixed window).

    Examples
    --------
    >>> float(causal_pairs(100, np.inf)), float(causal_pairs(1000, 128))
    (5000.0, 119808.0)
    """
    s = np.asarray(input_len, dtype=float)
    w = np.minimum(np.asarray(window, dtype=float), s)
    return w * s - w * w / 2.0


def attention_flop_per_pair(n_heads, head_dim, is_mla, kv_lora_rank, qk_rope_head_dim, decode):
    """FLOPs of attention for one query-key pair in one layer.

    Parameters
    ----------
    n_heads : int or array
        Query heads [heads].
    head_dim : int or array
        Per-head query/key dimension [elements].
    is_mla : bool or array
        Multi-head latent attention.
    kv_lora_rank, qk_rope_head_dim : int or array
        MLA latent and RoPE key dimensions [elements]; ignored otherwise.
    decode : bool
        Decoding (MLA runs in its absorbed form against the cached latent) or prefill.

    Returns
    -------
    float or array
        FLOPs per pair and layer [FLOP].

    Notes
    -----
    ``QK^T`` and ``AV``, two FLOPs per multiply-add each. Standard attention: ``4 h d``. MLA
    decoding scores against the latent and the RoPE key and reads values from the latent:
    ``2 h (2 r + d_rope)``; MLA prefill runs as multi-head attention with ``d = head_dim``.

    References
    ----------
    .. [1] DeepSeek-V2, arXiv:2405.04434, appendix C (weight absorption).

    Examples
    --------
    >>> float(attention_flop_per_pair(32, 128, False, 0, 0, True))
    16384.0
    >>> float(attention_flop_per_pair(128, 192, True, 512, 64, True))
    278528.0
    """
    heads = np.asarray(n_heads, dtype=float)
    absorbed = 2.0 * heads * (2.0 * np.nan_to_num(kv_lora_rank) + np.nan_to_num(qk_rope_head_dim))
    standard = 4.0 * heads * np.asarray(head_dim, dtype=float)
    return np.where(np.asarray(is_mla, dtype=bool) & np.asarray(decode, dtype=bool), absorbed, standard)


def allreduce_bandwidth_gb_s(tp, interconnect_gb_s, domain_gpus, beyond_domain_gb_s, efficiency):
    """Bandwidth one GPU of a tensor-parallel ring sends at, one direction.

    Parameters
    ----------
    tp : int or array
        GPUs in the group [GPUs].
    interconnect_gb_s : float or array
        Link bandwidth within the domain, both directions [GB/s].
    domain_gpus : int or array
        GPUs linked at that bandwidth (NVLink domain, PCIe cards under one socket) [GPUs].
    beyond_domain_gb_s : float or array
        Bandwidth once the group spans domains, both directions; NaN = never [GB/s].
    efficiency : float or array
        Share of the link a ring all-reduce reaches [fraction].

    Returns
    -------
    float or array
        Effective bandwidth [GB/s].

    Notes
    -----
    A ring is as fast as its slowest hop, the socket link once the group spans domains:

    .. math:: BW = \\eta \\cdot \\frac{1}{2} \\begin{cases} BW_{link} & tp \\le n_{domain} \\\\
              \\min(BW_{link}, BW_{beyond}) & tp > n_{domain} \\end{cases}

    References
    ----------
    .. [1] Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
       workstations", J. Parallel Distrib. Comput. 69(2), 2009.

    Examples
    --------
    >>> float(allreduce_bandwidth_gb_s(8, 64.0, 4, 56.0, 1.0)), float(allreduce_bandwidth_gb_s(4, 64.0, 4, 56.0, 1.0))
    (28.0, 32.0)
    """
    link = np.asarray(interconnect_gb_s, dtype=float)
    beyond = np.where(np.isnan(beyond_domain_gb_s), link, np.minimum(link, np.nan_to_num(beyond_domain_gb_s)))
    return np.where(np.asarray(tp) > domain_gpus, beyond, link) / 2.0 * efficiency


def spans_domains(tp, domain_gpus, beyond_domain_gb_s):
    """Whether a tensor-parallel group reaches beyond its interconnect domain.

    Parameters
    ----------
    tp : int or array
        GPUs in the group [GPUs].
    domain_gpus : int or array
        GPUs linked at the domain's bandwidth (NVLink domain, PCIe cards under one socket) [GPUs].
    beyond_domain_gb_s : float or array
        Bandwidth once the group spans domains; NaN = the domain holds every group [GB/s].

    Returns
    -------
    bool or array
        True where the ring crosses the domain boundary (e.g. the CPU socket link of PCIe cards).

    Notes
    -----
    .. math:: \\text{spans} = (tp > n_{domain}) \\wedge BW_{beyond} \\text{ given}

    NCCL uses peer-to-peer copies only inside a socket; across sockets it stages the ring's hop
    through host memory (its SHM transport), so that hop loses more than the link's share
    ``crossing_efficiency`` of the efficiency catalog describes.

    References
    ----------
    .. [1] NCCL environment variables, ``NCCL_P2P_LEVEL`` (default: peer-to-peer up to PCIe host
       bridges, not across the CPU interconnect, "SYS"),
       https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html

    Examples
    --------
    >>> spans_domains(np.array([4, 8]), 4, 56.0).tolist(), bool(spans_domains(8, 8, np.nan))
    ([False, True], False)
    """
    return (np.asarray(tp) > np.asarray(domain_gpus)) & ~np.isnan(np.asarray(beyond_domain_gb_s, dtype=float))


def host_time_ms(overhead_ms, overhead_us_per_sequence, sequences):
    """Host time of one engine iteration: scheduling, input preparation, sampling, launches.

    Parameters
    ----------
    overhead_ms : float or array
        Fixed part, a [ms].
    overhead_us_per_sequence : float or array
        Part per running sequence, b [us].
    sequences : float or array
        Sequences in the iteration, B [sequences].

    Returns
    -------
    float or array
        Host time [ms]; the step takes the larger of it and the GPU time.

    Notes
    -----
    .. math:: t_{host} = a + b B

    The step overlaps it with the GPU work (``overlapped_ms``).

    References
    ----------
    .. [1] Kwon et al. 2023, section 4 (the scheduler loop around each model step).

    Examples
    --------
    >>> float(host_time_ms(0.5, 4.0, 256))
    1.524
    """
    return overhead_ms + np.asarray(overhead_us_per_sequence, dtype=float) * sequences / 1e3


OVERLAP_NORM = 8.0  # p of the p-norm that blends GPU and host time near their crossover


def overlapped_ms(gpu_ms, host_ms, norm=OVERLAP_NORM):
    """Time of a step whose host work runs alongside its GPU work.

    Parameters
    ----------
    gpu_ms : float or array
        GPU time of the step [ms].
    host_ms : float or array
        Host time of the iteration (``host_time_ms``) [ms].
    norm : float, default 8
        Order p of the norm; infinity gives the plain maximum.

    Returns
    -------
    float or array
        Step time [ms]: the larger of the two, blended near the crossover where overlap is
        imperfect (9% above either at equality for p = 8); exactly ``gpu_ms`` when the host time
        is 0.

    Notes
    -----
    .. math:: t = (t_{GPU}^p + t_{host}^p)^{1/p}

    References
    ----------
    .. [1] Kwon et al. 2023, section 4; SGLang's overlap scheduler (Zheng et al., "SGLang:
       Efficient Execution of Structured Language Model Programs", arXiv:2312.07104) hides host
       work behind the GPU step until the host work is the longer.

    Examples
    --------
    >>> round(float(overlapped_ms(10.0, 2.0)), 4), float(overlapped_ms(10.0, 0.0))
    (10.0, 10.0)
    """
    gpu = np.asarray(gpu_ms, dtype=float)
    host = np.asarray(host_ms, dtype=float)
    top = np.maximum(gpu, host)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.minimum(gpu, host) / top  # <= 1, so the powers stay finite
    if norm == OVERLAP_NORM:  # x^8 by squaring and the 8th root by three square roots: cheap on big arrays
        ratio *= ratio
        ratio *= ratio
        ratio *= ratio
        blended = np.sqrt(np.sqrt(np.sqrt(1.0 + ratio)))
    else:
        blended = (1.0 + ratio**norm) ** (1.0 / norm)
    return np.where(top > 0, top * blended, 0.0)
