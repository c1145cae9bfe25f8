"""Serving-lever formulas: speculative decoding and pipeline parallelism across nodes.

The levers themselves (their ranges and defaults) are ``assumptions.LEVER_RANGES``;
``step_times`` applies these formulas to the decode step and the prefill. Units: times in
milliseconds, bandwidth in GB/s, messages in GB. Scalars or numpy arrays throughout.

References
----------
.. [1] Leviathan, Kalman and Matias, "Fast Inference from Transformers via Speculative
   Decoding", ICML 2023, arXiv:2211.17192.
.. [2] Huang et al., "GPipe: Efficient Training of Giant Neural Networks using Pipeline
   Parallelism", NeurIPS 2019, arXiv:1811.06965 (stages and micro-batches).
.. [3] Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
   Megatron-LM", SC 2021, arXiv:2104.04473, section 2.2 (point-to-point activation hops).
"""

from __future__ import annotations

import numpy as np


def speculative_tokens_per_step(acceptance, spec_tokens):
    """Expected tokens one verification step emits with ``k`` drafted tokens.

    Parameters
    ----------
    acceptance : float or array
        Probability each drafted token is accepted, a [fraction].
    spec_tokens : int or array
        Tokens drafted per step, k [tokens].

    Returns
    -------
    float or array
        Tokens emitted per step [tokens]; 1 without speculation (k = 0).

    Notes
    -----
    .. math:: E = \\frac{1 - a^{k+1}}{1 - a}

    References
    ----------
    .. [1] Leviathan et al. 2023, equation 1.

    Examples
    --------
    >>> round(float(speculative_tokens_per_step(0.8, 4)), 4), float(speculative_tokens_per_step(0.7, 0))
    (3.3616, 1.0)
    """
    a = np.asarray(acceptance, dtype=float)
    k = np.asarray(spec_tokens, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = (1.0 - a ** (k + 1.0)) / (1.0 - a)
    return np.where(a <= 0.0, 1.0, np.where(a >= 1.0, k + 1.0, expected))


def stage_fraction(n_layers, pp):
    """Share of the layers the busiest of ``pp`` pipeline stages holds.

    Parameters
    ----------
    n_layers : int or array
        Transformer blocks [layers].
    pp : int or array
        Pipeline stages [stages].

    Returns
    -------
    float or array
        Share of the layers [fraction].

    Notes
    -----
    .. math:: f = \\lceil n_{layers} / pp \\rceil / n_{layers}

    References
    ----------
    .. [1] Huang et al. 2019 (a model cut into consecutive stages).

    Examples
    --------
    >>> float(stage_fraction(80, 3))
    0.3375
    """
    layers = np.asarray(n_layers, dtype=float)
    return np.ceil(layers / np.asarray(pp, dtype=float)) / layers


def pipeline_time_ms(stage_ms, pp, hop_ms):
    """Time for one token of a micro-batch to pass ``pp`` stages.

    Parameters
    ----------
    stage_ms : float or array
        Time of the busiest stage [ms].
    pp : int or array
        Pipeline stages [stages].
    hop_ms : float or array
        Activation transfer between two stages [ms].

    Returns
    -------
    float or array
        Time through the pipeline [ms].

    Notes
    -----
    .. math:: t = pp \\cdot t_{stage} + (pp - 1) \\cdot t_{hop}

    References
    ----------
    .. [1] Huang et al. 2019; Narayanan et al. 2021, section 2.2.

    Examples
    --------
    >>> float(pipeline_time_ms(5.0, 4, 0.5))
    21.5
    """
    pp = np.asarray(pp, dtype=float)
    return pp * np.asarray(stage_ms, dtype=float) + (pp - 1.0) * np.asarray(hop_ms, dtype=float)


def hop_time_ms(message_gb, network_gb_s, latency_us):
    """Point-to-point transfer of ``message_gb`` between pipeline stages on different nodes.

    Parameters
    ----------
    message_gb : float or array
        Activations sent [GB].
    network_gb_s : float or array
        Inter-node bandwidth per GPU [GB/s].
    latency_us : float or array
        Fixed latency per hop [us].

    Returns
    -------
    float or array
        Time [ms].

    Notes
    -----
    .. math:: t = m / BW_{net} + t_{lat}

    References
    ----------
    .. [1] Narayanan et al. 2021, section 2.2.

    Examples
    --------
    >>> float(hop_time_ms(0.05, 50.0, 20.0))
    1.02
    """
    return np.asarray(message_gb, dtype=float) / np.asarray(network_gb_s, dtype=float) * 1e3 + latency_us * 1e-3
