"""``estimate_cases``: one operating point per case (a fixed batch, the knee under SLOs, the
offline memory-limited ceiling, a request rate, the largest rate meeting the SLOs, or N requests
in flight), for single estimates and bulk procurement comparisons alike.

Each case becomes its own configuration, so per-case overrides (engine, mbu, mfu, price) apply
naturally; all cases are evaluated together by the same vectorized kernel as the sweep. The load
modes take latency under load from ``fleetplan.sweeps.queueing`` ("rate", "max_rate") and from the
closed-loop model ``fleetplan.sweeps.concurrency`` ("concurrency"). Every row records its engine,
how well it is calibrated and the error band of rows like it (``fleetplan.sweeps.uncertainty``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.sweeps import (
    concurrency,
    operating_points,
    queueing,
    row_kernel,
    step_times,
    throughput,
)
from fleetplan.sweeps.assumptions import assumptions_from
from fleetplan.sweeps.columns import ESTIMATE_COLUMNS, LOAD_COLUMNS, SWEEP_COLUMNS
from fleetplan.sweeps.configurations import CONFIG_KEYS, config_frame
from fleetplan.sweeps.inputs import catalog_or_default, checked_cases
from fleetplan.sweeps.replica_constants import ReplicaConstants
from fleetplan.sweeps.sweep_table import build_table
from fleetplan.sweeps.uncertainty import add_uncertainty, check_quantile

REPLACED = ("batch", "kv_quant", "rate_req_s", "engine")  # inputs whose output column holds the value used


def mean_context_len(input_len, output_len):
    """Mean tokens in a sequence's KV cache over its decode.

    Parameters
    ----------
    input_len : int or array
        Prompt tokens, S [tokens].
    output_len : int or array
        Output tokens, G [tokens].

    Returns
    -------
    float or array
        Mean cached tokens per sequence, rounded up [tokens].

    Notes
    -----
    Under continuous batching requests are at every stage of their decode, so the cache holds on
    average the prompt plus half the output:

    .. math:: \\bar L = \\lceil S + G / 2 \\rceil

    References
    ----------
    .. [1] Kwon et al., "Efficient Memory Management for Large Language Model Serving with
       PagedAttention", SOSP 2023, arXiv:2309.06180 (KV cache growing with each generated token).

    Examples
    --------
    >>> int(mean_context_len(1000, 2000))
    2000
    """
    return np.ceil(np.asarray(input_len, dtype=float) + np.asarray(output_len, dtype=float) / 2.0)


def estimate_cases(cases: pd.DataFrame, catalogs: Catalogs | None = None, *, capacity_quantile: str = "p50",
                   **overrides) -> pd.DataFrame:
    """Evaluate each case at its operating point; inputs are repeated, metrics appended.

    Columns: gpu, model, quant, tp, input_len, output_len (required); kv_quant, engine, batch,
    tpot_slo_ms, ttft_slo_ms, rate_req_s, concurrency, n_requests, mode and the per-case
    assumptions (mbu, mfu, step_overhead_ms, memory_fraction, max_num_seqs, usd_per_gpu_hour, ...;
    empty = default). The mode defaults to "batch" when a batch is given, "rate" when a
    ``rate_req_s`` is, "concurrency" when a ``concurrency`` is, "slo" when an SLO is, else
    "offline". "max_rate" finds the largest request rate whose loaded mean TPOT and TTFT meet the
    SLOs. The load modes add ``columns.LOAD_COLUMNS``; a "rate" case above capacity with an
    ``n_requests`` is a finite benchmark run (served at capacity, TTFT with the run's admission
    wait). Every row carries ``columns.ESTIMATE_COLUMNS``: engine, calibration, its error band and
    ``capacity_quantile`` (p50 | p90: throughput as modelled, or divided by 1 + the band's p90).
    Lever columns (pp, prefix_hit_rate, spec_tokens, ...) apply per case.
    """
    check_quantile(capacity_quantile)
    cases, configs, c, rows = case_arrays(cases, catalogs, **overrides)
    batch, slo_reason = _operating_batch(c, rows, cases)
    loaded = evaluate_load(c, rows, cases)
    if loaded is not None:
        batch = np.where(loaded.chosen, loaded.batch(), batch)
        slo_reason = np.where(slo_reason == "", loaded.reasons(), slo_reason)
    rows = rows._replace(batch=batch.astype(np.int64))
    metrics = row_kernel.evaluate(c, rows._replace(batch=np.maximum(batch, 1)))
    table = build_table(configs, rows, metrics, extra_reason=slo_reason, wide=True)
    stopped = batch == 0
    for column in ("decode_tok_s", "decode_tok_s_per_gpu", "output_tok_s", "req_s"):
        table.loc[stopped, column] = 0.0
    for column in ("usd_per_m_output_tokens", "usd_per_m_total_tokens", "usd_per_k_requests"):
        table.loc[stopped, column] = np.nan
    table["valid"] &= slo_reason == ""
    if loaded is not None:
        table = apply_load(table, loaded, c, rows)
    table["engine"] = configs["engine"].to_numpy(dtype=object)
    table = add_uncertainty(table, configs["calibration"].to_numpy(dtype=object), capacity_quantile)
    ordered = (*(n for n in SWEEP_COLUMNS if n not in ESTIMATE_COLUMNS), *LOAD_COLUMNS, *ESTIMATE_COLUMNS)
    extra = [name for name in ordered if name in table and (name not in cases.columns or name in REPLACED)]
    return pd.concat([cases.drop(columns=list(REPLACED), errors="ignore").reset_index(drop=True),
                      table[extra]], axis=1)


def case_arrays(cases: pd.DataFrame, catalogs: Catalogs | None = None, **overrides):
    """Validated cases, their configuration table and constants, and their kernel rows (batch 0)."""
    catalogs = catalog_or_default(catalogs)
    cases = checked_cases(cases, catalogs)
    configs = config_frame(catalogs, cases[CONFIG_KEYS], assumptions_from(overrides), per_config=cases)
    n = len(cases)
    context_len = mean_context_len(cases["input_len"], cases["output_len"]).astype(np.int64)
    rows = row_kernel.Rows(np.arange(n), context_len, cases["input_len"].to_numpy(np.int64),
                           cases["output_len"].to_numpy(np.int64), np.zeros(n))
    return cases, configs, ReplicaConstants.from_frame(configs), rows


def _operating_batch(c: ReplicaConstants, rows, cases):
    mode = cases["mode"].to_numpy()
    tpot_slo = cases["tpot_slo_ms"].to_numpy(dtype=float)
    ttft_slo = cases["ttft_slo_ms"].to_numpy(dtype=float)
    knee = operating_points.knee_batch(c, rows, tpot_slo, ttft_slo)
    offline = operating_points.offline_batch(c, rows)
    given = np.nan_to_num(cases["batch"].to_numpy(dtype=float)).astype(np.int64)
    batch = np.select([mode == "batch", mode == "slo"], [given, knee], offline)
    reason = np.full(len(cases), "", dtype=object)
    in_slo = np.isin(mode, ["slo", "max_rate"])  # an idle replica that misses the SLOs has knee 0
    reason[in_slo] = operating_points.slo_reason(c, rows, knee, tpot_slo, ttft_slo)[in_slo]
    return batch, reason


@dataclass(frozen=True)
class Loaded:
    """The load models evaluated once for every case: the offered rate (NaN outside "rate" and
    "max_rate"), whether a case is in a load mode, the replica's state there and its capacity."""

    rate: np.ndarray
    chosen: np.ndarray
    state: dict
    capacity: np.ndarray
    finite: np.ndarray  # a "rate" case above capacity run as a finite benchmark

    def batch(self) -> np.ndarray:
        """The decode batch the load sustains, at least one sequence [sequences]."""
        return np.maximum(np.round(np.nan_to_num(self.state["batch"])), 1).astype(np.int64)

    def reasons(self) -> np.ndarray:
        """Why a load-mode case cannot be served: a rate at or beyond the replica's capacity."""
        reason = np.full(len(self.rate), "", dtype=object)
        over = ~np.isnan(self.rate) & (self.rate >= self.capacity) & (self.rate > 0) & ~self.finite
        reason[over] = [f"rate {r:g} req/s is at or beyond the capacity {m:.3g} req/s"
                        for r, m in zip(self.rate[over], self.capacity[over])]
        return reason


def evaluate_load(c: ReplicaConstants, rows, cases: pd.DataFrame) -> Loaded | None:
    """The load models for the cases in a load mode; None when there are none."""
    mode = cases["mode"].to_numpy()
    if not np.isin(mode, ["rate", "max_rate", "concurrency"]).any():
        return None
    rate = np.full(len(cases), np.nan)
    given = mode == "rate"
    rate[given] = cases["rate_req_s"].to_numpy(dtype=float)[given]
    searched = mode == "max_rate"
    if searched.any():
        best = queueing.max_rate_under_slo(c, rows, cases["tpot_slo_ms"].to_numpy(dtype=float),
                                           cases["ttft_slo_ms"].to_numpy(dtype=float))
        rate[searched] = best[searched]
    capacity = queueing.capacity_req_s(c, rows)
    n_requests = cases["n_requests"].to_numpy(dtype=float)
    finite = given & (rate >= capacity) & ~np.isnan(n_requests)
    state = queueing.at_rate(c, rows, np.where(finite, capacity * 0.999, np.nan_to_num(rate)))
    state["served"] = np.where(state["stable"], np.nan_to_num(rate), np.nan)
    if finite.any():
        _finite_run(c, rows, state, rate, capacity, n_requests, finite)
    closed = mode == "concurrency"
    if closed.any():
        _closed_loop(c, rows, state, cases, closed)
    return Loaded(rate, np.isin(mode, ["rate", "max_rate", "concurrency"]), state, capacity, finite)


def _finite_run(c, rows, state, rate, capacity, n_requests, finite) -> None:
    """A run of K requests offered above capacity: served at capacity, TTFT with the admission wait."""
    slots = operating_points.batch_cap(c, rows)
    _, prompt_work_ms = step_times.prefill_ms(c, rows.input_len)
    queue_ms = queueing.finite_run_wait_ms(rate, capacity, np.nan_to_num(n_requests, nan=1.0), slots,
                                           prompt_work_ms)
    for key in ("ttft_ms", "ttft_p90_ms", "ttft_p99_ms"):
        state[key] = np.where(finite, state[key] - state["wait_ms"] + queue_ms, state[key])
    state["served"] = np.where(finite, capacity, state["served"])


def _closed_loop(c, rows, state, cases, closed) -> None:
    """Replace the state of "concurrency" cases by the closed-loop model's."""
    n_requests = cases["n_requests"].to_numpy(dtype=float)
    result = concurrency.closed_loop(c, rows, np.nan_to_num(cases["concurrency"].to_numpy(dtype=float), nan=1.0),
                                     np.where(np.isnan(n_requests), concurrency.DEFAULT_RUN_REQUESTS, n_requests))
    state["batch"] = np.where(closed, result["running"], state["batch"])
    state["served"] = np.where(closed, result["req_s"], state["served"])
    for key in ("tpot_ms", "ttft_ms", "tpot_p90_ms", "tpot_p99_ms", "ttft_p90_ms", "ttft_p99_ms"):
        state[key] = np.where(closed, result[key], state[key])


def apply_load(table: pd.DataFrame, loaded: Loaded, c: ReplicaConstants, rows) -> pd.DataFrame:
    """Replace latency, throughput and cost of the load-mode rows by their values under load."""
    state = loaded.state
    served = state["served"]
    updates = {
        "tpot_ms": state["tpot_ms"], "ttft_ms": state["ttft_ms"], "req_s": served,
        "output_tok_s": served * rows.output_len, "decode_tok_s": served * rows.output_len,
        "decode_tok_s_per_gpu": served * rows.output_len / c.gpus,
        "usd_per_m_output_tokens": throughput.usd_per_m_tokens(table["usd_per_hour"], served * rows.output_len),
        "usd_per_m_total_tokens": throughput.usd_per_m_tokens(
            table["usd_per_hour"], served * (rows.input_len + rows.output_len)),
        "usd_per_k_requests": throughput.usd_per_k_requests(table["usd_per_hour"], served),
        "rate_req_s": np.where(np.isnan(loaded.rate), served, loaded.rate), "capacity_req_s": loaded.capacity,
        "utilization": throughput.safe_divide(np.where(np.isnan(loaded.rate), served, loaded.rate), loaded.capacity),
        **{name: state[name] for name in list(LOAD_COLUMNS)[3:]},
    }
    for name, values in updates.items():
        column = table[name].to_numpy(dtype=float, copy=True) if name in table else np.full(len(table), np.nan)
        column[loaded.chosen] = np.asarray(values, dtype=float)[loaded.chosen]
        table[name] = column
    return table
