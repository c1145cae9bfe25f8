"""Latency under load: TPOT and TTFT of one replica at a given request rate.

Method (continuous batching with chunked prefill, one replica, Poisson arrivals at rate lambda):

1. Prompts and decode steps share the GPUs. A prompt costs ``t_p`` of GPU time (its FLOPs and
   all-reduces, ``step_times.prefill_ms``), so prefill takes the share ``rho_p = lambda * t_p``
   and every decode step is stretched to ``TPOT = t_dec(B) / (1 - rho_p)``.
2. The decode batch is what the rate sustains by Little's law, ``B = lambda * G * TPOT``: the least
   fixed point of ``B -> lambda * G * TPOT(B)``, found by safeguarded vectorized Newton passes
   from B = 0 (``least_fixed_batch``).
3. Prompts queue for the prefill share as an M/D/1 queue with service ``t_p`` and utilization
   ``rho_p``: mean wait ``rho_p / (2 (1 - rho_p)) * t_p`` (Pollaczek-Khinchine). TTFT is that wait
   plus the prompt's prefill latency plus the in-flight decode step it joins
   (``step_times.first_token_ms``).
4. Percentiles: the wait is 0 with probability ``1 - rho`` and otherwise exponential with the mean
   that keeps the M/D/1 mean (an exponential-tail approximation); TTFT's quantiles are never
   reported below its mean (the approximation has no spread there). A step is ``t_dec`` long, or
   ``t_dec + t_p / chunks`` on the share ``f = lambda * chunks * TPOT`` of steps that carry a prompt
   chunk, so a request's mean TPOT over its ``G - 1`` steps has the standard deviation
   ``t_p / chunks * sqrt(f (1 - f) / (G - 1))``; its p90 and p99 are the normal quantiles above
   the mean, as benchmarks report per-request TPOT percentiles.
5. At or beyond capacity (``rho_p >= 1`` or a batch above the memory and engine cap) the steady
   state does not exist: TTFT is infinite. For a finite benchmark run of N requests the fluid
   approximation gives the mean wait instead (see ``finite_run_wait_ms``).

Near-zero load gives the unloaded latencies of ``step_times.latencies_ms`` at batch 1.

References
----------
.. [1] Kleinrock, "Queueing Systems, Volume 1: Theory", Wiley 1975, section 5.6
   (Pollaczek-Khinchine mean value formula for M/G/1).
.. [2] Little, "A Proof for the Queuing Formula: L = lambda W", Operations Research 9(3), 1961.
.. [3] Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve",
   OSDI 2024, arXiv:2403.02310 (chunked prefill riding decode steps).
.. [4] Newell, "Applications of Queueing Theory", Chapman and Hall 1982, chapter 2 (fluid
   approximation of a queue in overload).
"""

from __future__ import annotations

import numpy as np

from fleetplan.sweeps import operating_points, row_kernel, throughput
from fleetplan.sweeps.replica_constants import ReplicaConstants
from fleetplan.sweeps.step_times import decode_step_ms, first_token_ms, prefill_ms, prompt_steps

#: Most Newton passes of the decode batch's fixed point; each pass evaluates the decode step at two
#: batches. A piecewise-linear step converges in a few passes (on the example plan's candidates:
#: 1 to 13, ``benchmarks/bench_load_model.py``), smooth parts quadratically.
FIXED_POINT_PASSES = 40
#: A batch is the fixed point when ``f(B) - B`` is under this share of ``max(B, 1)``.
FIXED_POINT_TOLERANCE = 1e-12
RATE_BISECTION_PASSES = 40


def least_fixed_batch(step_ms, load, limit, start=0.0):
    """The least batch with ``B = min(load * step_ms(B), limit)``: the decode batch a request rate
    sustains by Little's law [sequences].

    Parameters
    ----------
    step_ms : callable
        Decode step time at a batch [ms], vectorized (called with arrays of shape ``(2, ...)``),
        non-decreasing in the batch.
    load : float or array
        ``rate * G * stretch``: sequences added per ms of step time [sequences/ms].
    limit : float or array
        Batch beyond which the replica is unstable (the batch cap plus one) [sequences].
    start : float or array
        A batch known to lie at or below the least fixed point, where the passes begin
        (default 0) [sequences]: the batch a lower rate sustains, since the load grows with the
        rate and so does every fixed point.

    Returns
    -------
    array
        ``f(B*)`` at the least fixed point ``B*``; ``limit`` where the rate sustains none below it.

    Notes
    -----
    Passes of ``B <- f(B)`` from ``B = 0`` climb to the least fixed point but slow down near
    capacity, where the step's slope times the load nears 1 (0.2 % short after 60 passes on some
    of the example's candidates, ``benchmarks/bench_load_model.py``). Newton's step on ``g(B) =
    f(B) - B`` from the highest batch known to lie below it, ``B + g(B) / (1 - f'(B))`` with a
    forward-difference slope, never passes the fixed point while the step is convex in the batch
    (a maximum of linear rooflines) and is at least the plain pass. Where it does pass it (the
    concave expert-count term of MoE models), the batch tried becomes an upper bound and the
    next passes stay below it: Newton's step when it lands inside the bracket, else the secant
    through both ends (kept 1 % off them).

    References
    ----------
    .. [1] Little, "A Proof for the Queuing Formula: L = lambda W", Operations Research 9(3), 1961.
    .. [2] Press et al., "Numerical Recipes", 3rd ed., Cambridge 2007, section 9.4 (Newton's
       method safeguarded by a bracket, ``rtsafe``).

    Examples
    --------
    A 10 ms step growing 0.5 ms per sequence at 0.1 sequences per ms: ``B = 0.1 (10 + 0.5 B)``.

    >>> round(float(least_fixed_batch(lambda b: 10.0 + 0.5 * b, 0.1, 100.0)), 6)
    1.052632
    >>> float(least_fixed_batch(lambda b: 10.0 + 0.5 * b, 3.0, 100.0))  # no fixed point below the limit
    100.0
    """
    load = np.asarray(load, dtype=float)
    limit = np.asarray(limit, dtype=float)
    start = np.asarray(start, dtype=float)
    shape = np.broadcast_shapes(load.shape, limit.shape, start.shape)
    low, gain, slope = np.zeros(shape), np.full(shape, np.nan), np.zeros(shape)
    high, excess = np.full(shape, np.inf), np.zeros(shape)
    batch = np.minimum(np.broadcast_to(np.nan_to_num(start), shape), limit)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for _ in range(FIXED_POINT_PASSES):
            step = np.maximum(batch * 1e-7, 1e-7)
            times = step_ms(np.stack([batch, batch + step]))
            value = np.minimum(load * times[0], limit)
            below = ~(value < batch)  # NaN rows (no configuration) count as below and stop
            low, high = np.where(below, batch, low), np.where(below, high, batch)
            gain = np.where(below, value - batch, gain)
            excess = np.where(below, excess, batch - value)
            slope = np.where(below, load * (times[1] - times[0]) / step, slope)
            if not np.any(gain > FIXED_POINT_TOLERANCE * np.maximum(low, 1.0)):
                break
            newton = np.where(slope < 1.0, low + gain / (1.0 - slope), np.inf)
            # Inside a bracket: the secant through g(low) > 0 > g(high), kept off its ends.
            secant = low + (high - low) * gain / (gain + excess)
            secant = np.where(np.isfinite(high), np.clip(secant, low + 0.01 * (high - low),
                                                         high - 0.01 * (high - low)), low + gain)
            batch = np.where(newton < high, newton, np.maximum(low + gain, secant))
            batch = np.minimum(batch, limit)
    return low + gain


def md1_wait_ms(utilization, service_ms):
    """Mean wait in an M/D/1 queue.

    Parameters
    ----------
    utilization : float or array
        Server utilization, rho [fraction].
    service_ms : float or array
        Deterministic service time, s [ms].

    Returns
    -------
    float or array
        Mean wait before service [ms]; infinite at ``rho >= 1``.

    Notes
    -----
    Pollaczek-Khinchine with a deterministic service time:

    .. math:: W = \\frac{\\rho}{2 (1 - \\rho)} s

    References
    ----------
    .. [1] Kleinrock 1975, section 5.6.

    Examples
    --------
    >>> float(md1_wait_ms(0.5, 10.0)), float(md1_wait_ms(1.0, 10.0))
    (5.0, inf)
    """
    rho = np.asarray(utilization, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = rho / (2.0 * (1.0 - rho)) * np.asarray(service_ms, dtype=float)
    return np.where(rho >= 1.0, np.inf, np.maximum(wait, 0.0))


def md1_max_utilization(slack_ms, service_ms):
    """Largest utilization whose M/D/1 mean wait stays within ``slack_ms``.

    Parameters
    ----------
    slack_ms : float or array
        Wait allowed [ms].
    service_ms : float or array
        Deterministic service time, s [ms].

    Returns
    -------
    float or array
        Utilization [fraction]; 0 without slack, 1 with unlimited slack.

    Notes
    -----
    The inverse of ``md1_wait_ms``, with ``a = slack / s``:

    .. math:: \\rho = \\frac{2a}{1 + 2a}

    References
    ----------
    .. [1] Kleinrock 1975, section 5.6.

    Examples
    --------
    >>> float(md1_max_utilization(5.0, 10.0))
    0.5
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.maximum(np.asarray(slack_ms, dtype=float), 0.0) / np.asarray(service_ms, dtype=float)
    return np.where(np.isinf(ratio), 1.0, np.nan_to_num(2.0 * ratio / (1.0 + 2.0 * ratio)))


def wait_quantile_ms(mean_wait_ms, utilization, quantile):
    """Quantile of the queueing wait under an exponential-tail approximation.

    Parameters
    ----------
    mean_wait_ms : float or array
        Mean wait, W [ms].
    utilization : float or array
        Utilization, rho: the share of arrivals that wait at all [fraction].
    quantile : float
        Quantile, q [fraction].

    Returns
    -------
    float or array
        The q-quantile of the wait [ms].

    Notes
    -----
    The wait is 0 with probability ``1 - rho``, else exponential with mean ``W / rho``:

    .. math:: w_q = \\frac{W}{\\rho} \\ln\\frac{\\rho}{1 - q} \\quad (0 \\text{ if } \\rho \\le 1 - q)

    References
    ----------
    .. [1] Kleinrock 1975, section 5.7 (the waiting-time distribution and its exponential tail).

    Examples
    --------
    >>> round(float(wait_quantile_ms(5.0, 0.5, 0.9)), 3)
    16.094
    """
    rho = np.clip(np.asarray(utilization, dtype=float), 1e-12, None)
    tail = 1.0 - quantile
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.asarray(mean_wait_ms, dtype=float) / rho * np.log(rho / tail)
    return np.where(rho <= tail, 0.0, value)


def finite_run_wait_ms(rate_req_s, capacity_req_s, n_requests, slots, prefill_work_ms=0.0):
    """Mean wait before a request's own prefill over a finite run of ``n_requests`` offered at
    ``rate_req_s``: for a free slot, and behind the prompts that arrived before it.

    Parameters
    ----------
    rate_req_s : float or array
        Offered rate; ``inf`` = all requests at once [requests/s].
    capacity_req_s : float or array
        Rate the replica completes requests, mu [requests/s].
    n_requests : int or array
        Requests in the run, N [requests].
    slots : int or array
        Requests admitted at once without waiting [requests].
    prefill_work_ms : float or array
        GPU time one prompt's prefill takes from the replica, w (``step_times.prefill_ms``)
        [ms]; 0 leaves the prompt queue out.

    Returns
    -------
    float or array
        Mean wait before a request's own prefill starts [ms]; 0 while ``rate < mu``.

    Notes
    -----
    Fluid approximation: request i arrives at ``i / rate``. It needs a slot, free once
    ``i - slots`` requests have finished, and, since engines schedule waiting prompts before
    decode steps (in-flight batching admits context work first), the prefills of the ``i - 1``
    prompts before it:

    .. math:: \\bar w = \\frac{1}{N} \\sum_{i=1}^{N} \\max\\left(0, \\frac{i - slots}{\\mu}
              - \\frac{i}{\\lambda}, (i - 1)\\, w - \\frac{i}{\\lambda}\\right)

    A run offered all at once thus waits about ``N w / 2`` on average even when every request
    finds a slot, which is what benchmarks of short outputs measure.

    References
    ----------
    .. [1] Newell 1982, chapter 2.

    Examples
    --------
    >>> round(float(finite_run_wait_ms(np.inf, 10.0, 100, 0)), 1)
    5050.0
    >>> round(float(finite_run_wait_ms(np.inf, 10.0, 100, 100, prefill_work_ms=20.0)), 1)
    990.0
    """
    i = np.arange(1, int(np.max(n_requests)) + 1, dtype=float)
    rate = np.asarray(rate_req_s, dtype=float)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        arrival = np.where(np.isinf(rate), 0.0, i / rate)
        wait = np.maximum((i - np.asarray(slots, dtype=float)[..., None]) / np.asarray(capacity_req_s)[..., None]
                          - arrival, 0.0)
        prompts = (i - 1.0) * np.asarray(prefill_work_ms, dtype=float)[..., None] / 1e3 - arrival
        wait = np.maximum(wait, prompts)
    counted = i <= np.asarray(n_requests)[..., None]
    return (wait * counted).sum(axis=-1) / np.asarray(n_requests, dtype=float) * 1e3


def _decode_ms(c: ReplicaConstants, rows, batch):
    tpot, _, _ = decode_step_ms(c, np.maximum(batch, 1.0), rows.context_len)
    return tpot


def capacity_req_s(c: ReplicaConstants, rows: row_kernel.Rows) -> np.ndarray:
    """Largest sustainable request rate of one replica: the rate at the batch cap [requests/s]."""
    cap = np.maximum(operating_points.batch_cap(c, rows), 0).astype(float)
    _, work_ms = prefill_ms(c, rows.input_len)
    return np.where(cap > 0, throughput.request_rate_req_s(cap, _decode_ms(c, rows, cap), rows.output_len, work_ms),
                    0.0)


def at_rate(c: ReplicaConstants, rows: row_kernel.Rows, rate_req_s, start_batch=0.0) -> dict:
    """Mean and p90/p99 TPOT and TTFT, decode batch and stability at ``rate_req_s`` [ms, sequences].

    ``start_batch``: a batch at or below the one the rate sustains (the batch of a lower rate),
    where the fixed point's passes begin [sequences].

    Chunked prefill (the ``prefill_chunk_tokens`` lever) splits prompts into chunks, each riding one
    decode step: lower tail inter-token latency, a prompt spread over more steps.
    """
    with np.errstate(invalid="ignore"):  # configurations that cannot run carry NaN through
        return _at_rate(c, rows, rate_req_s, start_batch)


def _at_rate(c: ReplicaConstants, rows, rate_req_s, start_batch) -> dict:
    rate = np.asarray(rate_req_s, dtype=float) / 1e3  # requests per ms
    latency_ms, work_ms = prefill_ms(c, rows.input_len)
    rho_p = rate * work_ms
    stretch = np.where(rho_p < 1.0, 1.0 / np.maximum(1.0 - rho_p, 1e-12), np.inf)
    cap = np.maximum(operating_points.batch_cap(c, rows), 0).astype(float)
    load = rate * rows.output_len * stretch
    batch = least_fixed_batch(lambda b: _decode_ms(c, rows, b), load, cap + 1.0, start_batch)
    stable = (rho_p < 1.0) & (batch <= cap) & (rate * 1e3 < capacity_req_s(c, rows))
    t_dec = _decode_ms(c, rows, np.minimum(batch, cap))
    tpot = np.where(stable, t_dec * stretch, np.inf)
    wait = np.where(stable, md1_wait_ms(rho_p, work_ms), np.inf)
    chunks = prompt_steps(c, rows.input_len)
    share = np.clip(rate * chunks * tpot, 0.0, 1.0)
    prompt_ms = first_token_ms(latency_ms, chunks, tpot)  # each chunk joins one (stretched) decode step
    out = {"batch": np.minimum(batch, cap), "stable": stable, "tpot_ms": tpot, "ttft_ms": wait + prompt_ms,
           "wait_ms": wait, "prefill_share": rho_p}
    spread = work_ms / chunks * np.sqrt(share * (1.0 - share) / np.maximum(rows.output_len - 1.0, 1.0))
    for q, z in ((0.9, 1.2816), (0.99, 2.3263)):
        out[f"tpot_p{int(q * 100)}_ms"] = np.where(stable, tpot + z * spread, np.inf)
        out[f"ttft_p{int(q * 100)}_ms"] = np.maximum(wait_quantile_ms(wait, rho_p, q) + prompt_ms, out["ttft_ms"])
    return out


def max_rate_under_slo(c: ReplicaConstants, rows: row_kernel.Rows, tpot_slo_ms, ttft_slo_ms) -> np.ndarray:
    """Largest request rate whose mean TPOT and TTFT meet the SLOs (NaN = none) [requests/s].

    TPOT and TTFT grow with the rate, so a vectorized bisection over ``[0, capacity]`` finds it for
    all rows at once; 0 where even an idle replica misses an SLO. Each pass's decode batch begins
    from the batch of the bracket's lower end, which the higher rate's batch cannot be below.
    """
    high = capacity_req_s(c, rows) * (1.0 - 1e-9)
    low = np.zeros_like(high)
    low_batch = np.zeros_like(high)
    for _ in range(RATE_BISECTION_PASSES):
        middle = (low + high) / 2.0
        state = at_rate(c, rows, middle, low_batch)
        ok = state["stable"] & (np.isnan(tpot_slo_ms) | (state["tpot_ms"] <= tpot_slo_ms)) & (
            np.isnan(ttft_slo_ms) | (state["ttft_ms"] <= ttft_slo_ms))
        low, high = np.where(ok, middle, low), np.where(ok, high, middle)
        low_batch = np.where(ok, state["batch"], low_batch)
    idle = at_rate(c, rows, np.zeros_like(high))
    meets_idle = (np.isnan(tpot_slo_ms) | (idle["tpot_ms"] <= tpot_slo_ms)) & (
        np.isnan(ttft_slo_ms) | (idle["ttft_ms"] <= ttft_slo_ms))
    return np.where(meets_idle, low, 0.0)
