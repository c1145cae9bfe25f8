"""Closed-loop load: what a benchmark client holding N requests in flight measures.

``vllm bench serve --max-concurrency N``, genai-perf and SGLang's benchmark send N fixed-length
requests at once and a new one whenever one finishes. The engine runs at most ``R = min(N,
cap)`` of them (cap: its sequence limit and the KV cache its memory rule admits); the others
wait. Every iteration has a token budget ``M`` (``max_batched_tokens``): decode tokens first,
then prompt tokens (chunked where the engine chunks).

Because everybody starts together, requests move in cohorts: the first iteration prefills as
many prompts as the budget holds, the next one the next cohort while the first decodes, and so
on; a cohort that finishes re-enters together one iteration later. With ``k`` cohorts of ``c``
requests a cycle of ``G`` iterations (one prefill iteration and ``G - 1`` decode iterations per
request) holds ``k`` iterations that carry a cohort's prompts next to ``R - c`` decoding
sequences and ``G - k`` pure decode iterations of ``R`` sequences::

    cycle  = k * t(R - c, c S) + (G - k) * t(R, 0)       [ms]
    X      = R / cycle                                   [requests/ms]
    TPOT   = (cycle - t(R - c, c S)) / (G - 1)           [ms], less the last round's share
    TTFT   = t(R - c, c S) + (N - R) / X                 [ms]

where ``t(d, p)`` is the mixed step of ``d`` decoding sequences and ``p`` prompt tokens
(``step_times.stage_step``). When the prompts of a cycle do not fit the budget (``k > G``) every
iteration is full, ``d + p = M``, requests complete at ``M / (S + G - 1)`` per iteration and the
prompts queue for the budget: the steps are uniform, ``TPOT = t(d, p)`` and TTFT adds the time in
that queue. A finite run of K requests adds the first cycle's stagger to the mean TTFT, and its
last round (``R / K`` of the requests) sees on average ``(k - 1) / 2`` fewer prefill iterations in
its decode window, which lowers the mean TPOT.

References
----------
.. [1] Little, "A Proof for the Queuing Formula: L = lambda W", Operations Research 9(3), 1961
   (closed-loop throughput N / response time).
.. [2] Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve",
   OSDI 2024, arXiv:2403.02310 (token budgets mixing prompt chunks and decodes).
.. [3] vLLM, ``benchmarks/benchmark_serving.py`` / ``vllm bench serve`` (``--max-concurrency``: a
   semaphore over requests sent at an unlimited rate).
"""

from __future__ import annotations

import numpy as np

from fleetplan.sweeps import operating_points, row_kernel, step_times
from fleetplan.sweeps.replica_constants import ReplicaConstants

DEFAULT_RUN_REQUESTS = 1000  # requests in a benchmark run when a case does not say


def cohort_size(budget_tokens, running, input_len, chunked=True):
    """Requests whose prompts one iteration prefills next to the others' decode tokens.

    Parameters
    ----------
    budget_tokens : float or array
        Token budget of one iteration, M [tokens].
    running : float or array
        Sequences the engine runs, R [sequences].
    input_len : float or array
        Prompt tokens, S [tokens].
    chunked : bool or array, default True
        The engine splits prompts across iterations (a cohort may end in part of a prompt);
        otherwise only whole prompts count.

    Returns
    -------
    float or array
        Cohort size c, between 1 and R [requests].

    Notes
    -----
    A cohort's prompts share an iteration with the other ``R - c`` sequences' decode tokens:

    .. math:: c = \\min\\left(R, \\max\\left(1, \\min\\left(\\frac{M - R}{S - 1}, \\frac{M}{S}\\right)\\right)\\right)

    (the first iteration of a run, with nobody decoding yet, admits ``M / S``; the smaller of the
    two persists); whole prompts only without chunked prefill.

    References
    ----------
    .. [1] Agrawal et al. 2024 (the token budget of an iteration).

    Examples
    --------
    >>> round(float(cohort_size(8192, 64, 1000)), 3), float(cohort_size(8192, 64, 1000, chunked=False))
    (8.136, 8.0)
    """
    m, r, s = (np.asarray(v, dtype=float) for v in (budget_tokens, running, input_len))
    with np.errstate(divide="ignore", invalid="ignore"):
        steady = np.where(s > 1, (m - r) / np.maximum(s - 1.0, 1e-9), r)
    first = m / np.maximum(s, 1.0)
    size = np.minimum(steady, first)
    return np.clip(np.where(chunked, size, np.floor(size)), 1.0, np.maximum(r, 1.0))


def _step_ms(c: ReplicaConstants, decode_seqs, context_len, prompts, input_len):
    """Mixed iteration: ``decode_seqs`` decoding plus ``prompts`` whole prompts of ``input_len``."""
    pairs = step_times.prompt_pair_layers(c, input_len)
    stage = step_times.stage_step(c, decode_seqs, context_len, prompts * input_len, prompts * pairs, prompts)
    return stage.step_ms * c.pp


def closed_loop(c: ReplicaConstants, rows: row_kernel.Rows, concurrency, n_requests=DEFAULT_RUN_REQUESTS) -> dict:
    """Throughput, mean TPOT and TTFT (and their p90/p99) a closed-loop benchmark measures.

    ``concurrency`` is N requests in flight, ``n_requests`` the run's length K; ``rows`` give
    the fixed prompt and output lengths. Returns arrays: ``running`` (R), ``req_s``, ``tpot_ms``,
    ``ttft_ms``, ``tpot_p90_ms``, ``tpot_p99_ms``, ``ttft_p90_ms``, ``ttft_p99_ms``.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        return _closed_loop(c, rows, np.asarray(concurrency, dtype=float), np.asarray(n_requests, dtype=float))


def _closed_loop(c, rows, concurrency, n_requests) -> dict:
    s = rows.input_len.astype(float)
    g = np.maximum(rows.output_len.astype(float), 2.0)
    cap = np.maximum(operating_points.batch_cap(c, rows), 1).astype(float)
    running = np.minimum(concurrency, cap)
    budget = np.where(c.chunked_prefill > 0, c.max_batched_tokens, np.maximum(c.max_batched_tokens, s))
    context = rows.context_len
    cohort = cohort_size(budget, running, s, chunked=c.chunked_prefill > 0)
    cohorts = running / cohort  # prefill iterations per cycle: together they carry R * S prompt tokens
    prefill_step = _step_ms(c, running - cohort, context, cohort, s)
    decode_step = _step_ms(c, running, context, 0.0, s)
    cycle = cohorts * prefill_step + np.maximum(g - cohorts, 0.0) * decode_step
    last_round = np.minimum(running, n_requests) / n_requests  # share of requests in the run's last round
    # A request's decode window holds the other cohorts' prefill iterations, but in the last round
    # nobody re-enters behind it: on average (k - 1) / 2 of them are missing there.
    cohort_tpot = (cycle - prefill_step - last_round * (cohorts - 1.0) / 2.0 * (prefill_step - decode_step)) / (g - 1.0)
    # Budget-bound: every iteration full; requests complete at M / (S + G - 1) per iteration.
    per_step = budget / (s + g - 1.0)
    decoding = np.minimum(per_step * (g - 1.0), running)
    full_step = _step_ms(c, decoding, context, (budget - decoding) / np.maximum(s, 1.0), s)
    full_wait_steps = np.maximum(running - decoding, 0.0) / per_step
    bound = cohorts > g
    req_per_ms = np.where(bound, per_step / full_step, running / cycle)
    tpot = np.where(bound, full_step, cohort_tpot)
    prefill_ms = np.where(bound, full_wait_steps * full_step, prefill_step)
    queue_ms = np.maximum(concurrency - running, 0.0) / req_per_ms
    base = prefill_ms + queue_ms + c.request_overhead_ms
    spread = (np.minimum(cohorts, g) - 1.0) * prefill_step
    stagger = last_round  # the first round's share: the same R of K requests
    out = {"running": running, "req_s": req_per_ms * 1e3, "tpot_ms": tpot, "ttft_ms": base + stagger * spread / 2.0,
           # Fixed lengths and a deterministic engine make every request alike once the run settles.
           "tpot_p90_ms": tpot, "tpot_p99_ms": tpot}
    for q in (0.9, 0.99):  # the first cycle's cohorts wait 0 .. k - 1 prefill iterations
        tail = np.clip((q - (1.0 - stagger)) / np.maximum(stagger, 1e-12), 0.0, 1.0)
        out[f"ttft_p{int(q * 100)}_ms"] = np.maximum(base + tail * spread, out["ttft_ms"])
    return out
