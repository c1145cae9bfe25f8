"""The latency-throughput frontier of a sweep table and its knee under an SLO."""

from __future__ import annotations

import pandas as pd

from fleetplan.errors import check_range

CURVE_KEYS = ["gpu", "model", "quant", "kv_quant", "tp", "context_len", "input_len", "output_len"]


def mark_knees(table: pd.DataFrame, tpot_slo_ms: float, ttft_slo_ms: float | None = None) -> pd.DataFrame:
    """Add ``meets_slo`` and ``is_knee`` to a sweep table.

    A row meets the SLO when it is valid, fits, and its TPOT (and TTFT, if given) are within the
    SLO; the knee of each curve (one configuration at one context, over batch) is its largest
    batch that meets the SLO (seed 000, section 3).
    """
    check_range("tpot_slo_ms", tpot_slo_ms, 0, None, low_inclusive=False)
    meets = table["valid"] & table["fits"] & (table["tpot_ms"] <= tpot_slo_ms)
    if ttft_slo_ms is not None:
        check_range("ttft_slo_ms", ttft_slo_ms, 0, None, low_inclusive=False)
        meets &= table["ttft_ms"] <= ttft_slo_ms
    batch_meeting = table["batch"].where(meets)
    best = batch_meeting.groupby([table[k] for k in CURVE_KEYS], observed=True, sort=False).transform("max")
    out = table.copy()
    out["meets_slo"] = meets.to_numpy()
    out["is_knee"] = (meets & (table["batch"] == best)).to_numpy()
    return out


def knees(table: pd.DataFrame, tpot_slo_ms: float, ttft_slo_ms: float | None = None) -> pd.DataFrame:
    """One row per curve: its knee, cheapest first by $/1M output tokens."""
    marked = mark_knees(table, tpot_slo_ms, ttft_slo_ms)
    chosen = marked[marked["is_knee"]].drop(columns=["meets_slo", "is_knee"])
    return chosen.sort_values("usd_per_m_output_tokens", kind="stable").reset_index(drop=True)


__all__ = ["CURVE_KEYS", "knees", "mark_knees"]
