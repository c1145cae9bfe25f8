"""The load-based modes of ``estimate_cases``: latency at a given request rate ("rate") and the
largest request rate meeting the SLOs ("max_rate"), both from ``fleetplan.sweeps.queueing``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fleetplan.sweeps import queueing, throughput

LOAD_MODES = ("rate", "max_rate")
LOAD_COLUMNS = ("rate_req_s", "capacity_req_s", "utilization", "tpot_p90_ms", "tpot_p99_ms", "ttft_p90_ms",
                "ttft_p99_ms")


@dataclass(frozen=True)
class Loaded:
    """The load model evaluated once for every case: rate (NaN outside the load modes), the
    replica's state at that rate and its capacity."""

    rate: np.ndarray
    state: dict
    capacity: np.ndarray

    def batch(self) -> np.ndarray:
        """The decode batch the rate sustains (Little's law), at least one sequence [sequences]."""
        return np.maximum(np.round(np.nan_to_num(self.state["batch"])), 1).astype(np.int64)

    def reasons(self) -> np.ndarray:
        """Why a load-mode case cannot be served: a rate at or beyond the replica's capacity."""
        reason = np.full(len(self.rate), "", dtype=object)
        over = ~np.isnan(self.rate) & (self.rate >= self.capacity) & (self.rate > 0)
        reason[over] = [f"rate {r:g} req/s is at or beyond the capacity {m:.3g} req/s"
                        for r, m in zip(self.rate[over], self.capacity[over])]
        return reason


def evaluate_load(c, rows, cases: pd.DataFrame) -> Loaded | None:
    """The load model for the cases in a load mode; None when there are none."""
    mode = cases["mode"].to_numpy()
    if not np.isin(mode, LOAD_MODES).any():
        return None
    rate = np.full(len(cases), np.nan)
    given = mode == "rate"
    rate[given] = cases["rate_req_s"].to_numpy(dtype=float)[given]
    searched = mode == "max_rate"
    if searched.any():
        best = queueing.max_rate_under_slo(c, rows, cases["tpot_slo_ms"].to_numpy(dtype=float),
                                       cases["ttft_slo_ms"].to_numpy(dtype=float))
        rate[searched] = best[searched]
    return Loaded(rate, queueing.at_rate(c, rows, np.nan_to_num(rate)), queueing.capacity_req_s(c, rows))


def apply_load(table: pd.DataFrame, loaded: Loaded, c, rows) -> pd.DataFrame:
    """Replace latency, throughput and cost of the load-mode rows by their values at the rate."""
    rate, state = loaded.rate, loaded.state
    served = np.where(state["stable"], rate, np.nan)
    updates = {
        "tpot_ms": state["tpot_ms"], "ttft_ms": state["ttft_ms"], "req_s": served,
        "output_tok_s": served * rows.output_len, "decode_tok_s": served * rows.output_len,
        "decode_tok_s_per_gpu": served * rows.output_len / c["gpus"],
        "usd_per_m_output_tokens": throughput.usd_per_m_tokens(table["usd_per_hour"], served * rows.output_len),
        "usd_per_m_total_tokens": throughput.usd_per_m_tokens(
            table["usd_per_hour"], served * (rows.input_len + rows.output_len)),
        "usd_per_k_requests": throughput.usd_per_k_requests(table["usd_per_hour"], served),
        "rate_req_s": rate, "capacity_req_s": loaded.capacity,
        "utilization": throughput.safe_divide(rate, loaded.capacity),
        **{name: state[name] for name in LOAD_COLUMNS[3:]},
    }
    chosen = ~np.isnan(rate)
    for name, values in updates.items():
        column = table[name].to_numpy(dtype=float, copy=True) if name in table else np.full(len(table), np.nan)
        column[chosen] = np.asarray(values, dtype=float)[chosen]
        table[name] = column
    return table
