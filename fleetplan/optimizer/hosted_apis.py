r"""Hosted model APIs as supply: what a request costs there, which buckets an API may serve,
and the break-even volume above which self-hosting wins.

An API (``fleet.apis``) serves one model at published prices per million prompt and output
tokens, within a rate limit (requests and/or tokens per minute) and at a published or measured
TTFT and TPOT. A workload bucket may be sent to it when the API serves the workload's model and
its TTFT and TPOT meet the workload's SLOs (an API without a published latency serves only
workloads without that SLO). The MILP's routing share of an API (``api_supply.py``) is priced
per request from the bucket's own prompt and output lengths.

Break-even (per workload and API): the cheapest whole replica that can carry the workload's
request mix costs :math:`C` [USD/h] (its GPUs at their cheapest offer that adds capacity: not
today's committed or owned GPUs, which are few and mostly sunk) and carries at most
:math:`\rho \kappa` requests/s (target utilization times capacity for the mix,
:func:`mix_capacity_req_s`). Sending :math:`r` requests/s to the API costs :math:`3600\, r\, u`
[USD/h] at :math:`u` USD per request (the mix's mean). The break-even rate is

.. math::

    r^* = \frac{C}{3600\, u}

the request rate above which one such replica costs less per hour than the API for the same
requests. It exists only when :math:`r^* \le \rho \kappa`; otherwise the API is cheaper than a
fully loaded replica and self-hosting never wins on price (break-even = inf). Reported per
replica, so it ignores node sizes, N+k spares, reserved terms and the hourly profile (the MILP
accounts for all of them: it may keep a base on replicas and send peaks to the API).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import EXISTING_PRICING, SECONDS_PER_HOUR

#: Columns of the break-even table.
BREAK_EVEN_COLUMNS = ["workload", "api", "usd_per_request", "config", "pricing_type",
                      "replica_usd_per_hour", "replica_req_s", "break_even_req_s",
                      "break_even_tokens_per_month"]


def usd_per_request(input_tokens, output_tokens, usd_per_1m_input_tokens,
                    usd_per_1m_output_tokens):
    """Price of one request at an API [USD].

    Parameters
    ----------
    input_tokens : float or array
        Prompt tokens per request.
    output_tokens : float or array
        Output tokens per request.
    usd_per_1m_input_tokens : float or array
        Price of a million prompt tokens [USD].
    usd_per_1m_output_tokens : float or array
        Price of a million output tokens [USD].

    Returns
    -------
    float or array
        [USD per request].

    Notes
    -----
    :math:`u = (n_{in} \\pi_{in} + n_{out} \\pi_{out}) / 10^6`, the per-token pricing of
    hosted model APIs [1].

    References
    ----------
    .. [1] OpenAI API pricing, https://openai.com/api/pricing/ (per 1M input and output tokens).

    Examples
    --------
    >>> print(round(usd_per_request(1000, 200, 0.5, 1.5), 6))
    0.0008
    """
    return (np.asarray(input_tokens, dtype=float) * np.asarray(usd_per_1m_input_tokens, float)
            + np.asarray(output_tokens, dtype=float)
            * np.asarray(usd_per_1m_output_tokens, float)) / 1e6


def api_usd(req_s, hours, usd_per_request_):
    """Cost of sending a request rate to an API for some hours [USD].

    Parameters
    ----------
    req_s : float or array
        Requests per second [req/s].
    hours : float or array
        Time [h].
    usd_per_request_ : float or array
        Price per request [USD].

    Returns
    -------
    float or array
        [USD].

    Notes
    -----
    :math:`3600\\, r\\, h\\, u` (seed 000, request rates) [1].

    References
    ----------
    .. [1] fleetplan domain seeds, 000 (requests/s over an hour).

    Examples
    --------
    >>> print(round(api_usd(2.0, 730.0, 0.0008), 2))
    4204.8
    """
    return (SECONDS_PER_HOUR * np.asarray(req_s, dtype=float) * np.asarray(hours, dtype=float)
            * np.asarray(usd_per_request_, dtype=float))


def mix_capacity_req_s(shares, req_s_per_replica):
    """Requests/s one replica serves of a request mix [req/s].

    Parameters
    ----------
    shares : array
        Share of the mix's requests in each bucket [fraction; sums to 1].
    req_s_per_replica : array
        Requests/s the replica serves of each bucket alone [req/s]; 0 = cannot.

    Returns
    -------
    float
        [req/s]; 0 when it cannot serve some bucket of the mix.

    Notes
    -----
    Each bucket takes :math:`s_b / \\kappa_b` of a replica's time per request/s, so
    :math:`\\kappa = 1 / \\sum_b s_b / \\kappa_b` (Mélange's linear load model) [1].

    References
    ----------
    .. [1] T. Griggs et al., "Mélange: Cost Efficient Large Language Model Serving by
       Exploiting GPU Heterogeneity", arXiv:2404.14527, 2024, section 5.

    Examples
    --------
    >>> print(mix_capacity_req_s([0.5, 0.5], [2.0, 6.0]))
    3.0
    """
    shares = np.asarray(shares, dtype=float)
    capacity = np.asarray(req_s_per_replica, dtype=float)
    used = shares > 0
    if np.any(capacity[used] <= 0):
        return 0.0
    return float(1.0 / np.sum(shares[used] / capacity[used]))


def break_even_req_s(replica_usd_per_hour, usd_per_request_):
    """Request rate at which a replica costs what the API charges for it [req/s].

    Parameters
    ----------
    replica_usd_per_hour : float or array
        Cost of one replica [USD/h].
    usd_per_request_ : float or array
        API price per request [USD].

    Returns
    -------
    float or array
        [req/s].

    Notes
    -----
    :math:`r^* = C / (3600\\, u)` (module docstring) [1].

    References
    ----------
    .. [1] fleetplan domain seeds, 003 (cost per request of a replica).

    Examples
    --------
    >>> print(round(break_even_req_s(2.5, 0.0008), 3))
    0.868
    """
    return np.asarray(replica_usd_per_hour, dtype=float) / (
        SECONDS_PER_HOUR * np.asarray(usd_per_request_, dtype=float))


def served_by_api(apis: pd.DataFrame, workloads: pd.DataFrame) -> pd.DataFrame:
    """(workload, api) pairs where the API serves the workload's model within its SLOs.

    ``apis``: api, model, ttft_ms, tpot_ms (NaN = not published); ``workloads``: workload,
    model, ttft_slo_ms, tpot_slo_ms (NaN = none)."""
    pairs = workloads[["workload", "model", "ttft_slo_ms", "tpot_slo_ms"]].merge(
        apis[["api", "model", "ttft_ms", "tpot_ms"]], on="model")
    keep = np.ones(len(pairs), dtype=bool)
    for metric in ("ttft", "tpot"):
        slo, have = pairs[f"{metric}_slo_ms"], pairs[f"{metric}_ms"]
        keep &= (slo.isna() | (have <= slo)).to_numpy()
    return pairs.loc[keep, ["workload", "api"]].reset_index(drop=True)


def api_candidates(apis: pd.DataFrame, workloads: pd.DataFrame,
                   buckets: pd.DataFrame) -> pd.DataFrame:
    """workload, bucket, api, tokens_per_request, usd_per_request for every bucket an API may
    serve; ``buckets``: workload, bucket, input_len, output_len."""
    pairs = served_by_api(apis, workloads).merge(
        buckets[["workload", "bucket", "input_len", "output_len"]], on="workload").merge(
        apis[["api", "usd_per_1m_input_tokens", "usd_per_1m_output_tokens"]], on="api")
    pairs["tokens_per_request"] = pairs["input_len"] + pairs["output_len"]
    pairs["usd_per_request"] = usd_per_request(pairs["input_len"], pairs["output_len"],
                                               pairs["usd_per_1m_input_tokens"],
                                               pairs["usd_per_1m_output_tokens"])
    return pairs[["workload", "bucket", "api", "input_len", "output_len", "tokens_per_request",
                  "usd_per_request"]].sort_values(["workload", "bucket", "api"]).reset_index(
        drop=True)


def _replica_costs(problem) -> pd.DataFrame:
    """config, pricing_type, usd_per_hour of one replica at each offer of its GPU that can
    add capacity: today's committed and owned GPUs are few and mostly sunk (a free committed
    GPU would put every break-even at 0 requests/s), so they are left out."""
    offers = problem.offers[~problem.offers["pricing_type"].isin(EXISTING_PRICING)][
        ["gpu", "pricing_type", "usd_per_gpu_hour"]]
    replicas = problem.configs[["config", "gpu", "tp"]].merge(offers, on="gpu")
    replicas["usd_per_hour"] = replicas["usd_per_gpu_hour"] * replicas["tp"]
    return replicas


def break_even_table(problem) -> pd.DataFrame:
    """Per (workload, API): the break-even request rate and monthly tokens (module docstring),
    with the replica it is measured against. Empty without APIs."""
    candidates = problem.api_candidates
    if candidates.empty:
        return pd.DataFrame(columns=BREAK_EVEN_COLUMNS)
    hours = problem.demand["period"].map(problem.periods.set_index("period")["hours"])
    demand = (problem.demand["req_s"] * hours).groupby(  # requests per bucket: the mix
        [problem.demand["workload"], problem.demand["bucket"]]).sum()
    rows = []
    replicas = _replica_costs(problem)
    capacity = problem.candidates.pivot_table(index="config", columns=["workload", "bucket"],
                                              values="req_s_per_replica", aggfunc="max")
    for (workload, api), mine in candidates.groupby(["workload", "api"], sort=True):
        mix = demand.reindex(pd.MultiIndex.from_product([[workload], mine["bucket"]])).fillna(0.0)
        shares = (mix / mix.sum()).to_numpy() if mix.sum() > 0 else np.full(len(mix), 1 / len(mix))
        u = float(np.dot(shares, mine["usd_per_request"]))
        tokens = float(np.dot(shares, mine["tokens_per_request"]))
        best = _best_replica(problem, replicas, capacity, workload, mine["bucket"], shares, u)
        rate = best["break_even_req_s"]
        rows.append({"workload": workload, "api": api, "usd_per_request": u, **best,
                     "break_even_tokens_per_month": rate * tokens * SECONDS_PER_HOUR
                     * problem.hours_per_month})
    return pd.DataFrame(rows, columns=BREAK_EVEN_COLUMNS)


def _best_replica(problem, replicas, capacity, workload, buckets, shares, u) -> dict:
    """The replica with the lowest break-even rate it can carry (inf when none)."""
    best = {"config": "", "pricing_type": "", "replica_usd_per_hour": math.nan,
            "replica_req_s": math.nan, "break_even_req_s": math.inf}
    if workload not in capacity.columns.get_level_values(0):
        return best
    mine = capacity[workload].reindex(columns=list(buckets)).fillna(0.0)
    carry = np.array([mix_capacity_req_s(shares, row) for row in mine.to_numpy()])
    carry = pd.Series(carry * problem.target_utilization, index=mine.index)
    options = replicas[replicas["config"].isin(carry.index[carry > 0])].copy()
    if options.empty:
        return best
    options["replica_req_s"] = options["config"].map(carry).astype(float)
    options["break_even_req_s"] = break_even_req_s(options["usd_per_hour"], u) if u > 0 \
        else math.inf
    options = options[options["break_even_req_s"] <= options["replica_req_s"]]
    if options.empty:
        return best
    row = options.sort_values(["break_even_req_s", "config"]).iloc[0]
    return {"config": row["config"], "pricing_type": row["pricing_type"],
            "replica_usd_per_hour": float(row["usd_per_hour"]),
            "replica_req_s": float(row["replica_req_s"]),
            "break_even_req_s": float(row["break_even_req_s"])}
