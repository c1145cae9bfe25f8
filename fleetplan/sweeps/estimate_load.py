"""The load-based modes of ``estimate_cases``: latency at a given request rate ("rate") and the
largest request rate meeting the SLOs ("max_rate"), both from ``fleetplan.sweeps.load``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.sweeps import load, throughput

LOAD_MODES = ("rate", "max_rate")
LOAD_COLUMNS = ("rate_req_s", "capacity_req_s", "utilization", "tpot_p90_ms", "tpot_p99_ms", "ttft_p90_ms",
                "ttft_p99_ms")


def load_rates(c, rows, cases: pd.DataFrame) -> np.ndarray:
    """Request rate per case: given ("rate"), largest within the SLOs ("max_rate"), NaN otherwise."""
    mode = cases["mode"].to_numpy()
    rate = np.full(len(cases), np.nan)
    given = mode == "rate"
    rate[given] = cases["rate_req_s"].to_numpy(dtype=float)[given]
    searched = mode == "max_rate"
    if searched.any():
        best = load.max_rate_under_slo(c, rows, cases["tpot_slo_ms"].to_numpy(dtype=float),
                                       cases["ttft_slo_ms"].to_numpy(dtype=float))
        rate[searched] = best[searched]
    return rate


def loaded_batch(c, rows, rate: np.ndarray, cases: pd.DataFrame) -> np.ndarray:
    """The decode batch the rate sustains (Little's law), at least one sequence [sequences]."""
    state = load.at_rate(c, rows, np.nan_to_num(rate))
    return np.maximum(np.round(np.nan_to_num(state["batch"])), 1).astype(np.int64)


def apply_load(table: pd.DataFrame, c, rows, rate: np.ndarray, cases: pd.DataFrame) -> pd.DataFrame:
    """Replace latency, throughput and cost of the load-mode rows by their values at ``rate``."""
    chosen = ~np.isnan(rate)
    state = load.at_rate(c, rows, np.nan_to_num(rate))
    capacity = load.capacity_req_s(c, rows)
    served = np.where(state["stable"], rate, np.nan)
    updates = {
        "tpot_ms": state["tpot_ms"], "ttft_ms": state["ttft_ms"], "req_s": served,
        "output_tok_s": served * rows.output_len, "decode_tok_s": served * rows.output_len,
        "decode_tok_s_per_gpu": served * rows.output_len / c["gpus"],
        "usd_per_m_output_tokens": throughput.usd_per_m_tokens(table["usd_per_hour"], served * rows.output_len),
        "usd_per_m_total_tokens": throughput.usd_per_m_tokens(
            table["usd_per_hour"], served * (rows.input_len + rows.output_len)),
        "usd_per_k_requests": throughput.usd_per_k_requests(table["usd_per_hour"], served),
        "rate_req_s": rate, "capacity_req_s": capacity, "utilization": throughput.safe_divide(rate, capacity),
        **{name: state[name] for name in LOAD_COLUMNS[3:]},
    }
    for name, values in updates.items():
        column = table[name].to_numpy(dtype=float, copy=True) if name in table else np.full(len(table), np.nan)
        column[chosen] = np.asarray(values, dtype=float)[chosen]
        table[name] = column
    return table


def load_reasons(rate: np.ndarray, c, rows) -> np.ndarray:
    """Why a load-mode case cannot be served: a rate at or beyond the replica's capacity."""
    capacity = load.capacity_req_s(c, rows)
    reason = np.full(len(rate), "", dtype=object)
    over = ~np.isnan(rate) & (rate >= capacity) & (rate > 0)
    reason[over] = [f"rate {r:g} req/s is at or beyond the capacity {m:.3g} req/s" for r, m in zip(rate[over], capacity[over])]
    return reason
