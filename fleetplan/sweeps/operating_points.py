"""Operating points: the knee under latency SLOs and the memory-limited offline ceiling.

Two forms of the one knee: ``knee_batch`` searches the model for the largest batch meeting the
SLOs, ``mark_knees`` picks it among the rows of a sweep table that already has the batches.

TPOT and TTFT grow monotonically with the batch (every term of the step time does), so the
largest batch meeting both SLOs is found for all rows at once by integer bisection: each pass
evaluates the kernel on every row, and ``ceil(log2(cap + 1))`` passes (about 11 for a 2,048 cap)
settle every row together, with no per-row Python loop. For dense models without TP this equals
the closed form of seed 000, ``B* = (SLO - W / BW_eff) / (L * kv / BW_eff)``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.errors import check_range
from fleetplan.sweeps import row_kernel
from fleetplan.sweeps.replica_constants import ReplicaConstants


def admission_len(c: ReplicaConstants, rows: row_kernel.Rows) -> np.ndarray:
    """Tokens of KV cache the engine sets aside per admitted sequence [tokens]: the whole prompt
    plus output for engines that reserve it at admission (TensorRT-LLM's default
    GUARANTEED_NO_EVICT scheduler), the mean occupancy for engines that allocate as tokens come
    (vLLM, SGLang; they preempt when full)."""
    return np.where(c.reserves_full_sequence > 0, rows.input_len + rows.output_len, rows.context_len)


def batch_cap(c: ReplicaConstants, rows: row_kernel.Rows) -> np.ndarray:
    """Largest batch the memory and the serving engine allow [sequences]."""
    max_batch, _ = row_kernel.memory_limits(c, admission_len(c, rows))
    return np.minimum(max_batch, c.max_num_seqs.astype(np.int64))


def _meets(c: ReplicaConstants, rows: row_kernel.Rows, tpot_slo_ms, ttft_slo_ms) -> np.ndarray:
    tpot, ttft = row_kernel.row_latencies_ms(c, rows)[:2]
    ok_tpot = np.isnan(tpot_slo_ms) | (tpot <= tpot_slo_ms)
    ok_ttft = np.isnan(ttft_slo_ms) | (ttft <= ttft_slo_ms)
    return ok_tpot & ok_ttft


def knee_batch(c: ReplicaConstants, rows: row_kernel.Rows, tpot_slo_ms, ttft_slo_ms) -> np.ndarray:
    """Largest batch in ``[0, cap]`` whose TPOT and TTFT meet the SLOs (NaN SLO = none) [sequences].

    ``rows.batch`` is ignored; 0 means not even one sequence meets the SLOs or fits.
    """
    tpot_slo_ms = np.broadcast_to(np.asarray(tpot_slo_ms, dtype=float), rows.config.shape)
    ttft_slo_ms = np.broadcast_to(np.asarray(ttft_slo_ms, dtype=float), rows.config.shape)
    low = np.zeros(rows.config.shape, dtype=np.int64)
    high = np.maximum(batch_cap(c, rows), 0)
    while np.any(low < high):
        middle = (low + high + 1) // 2
        ok = _meets(c, rows._replace(batch=middle.astype(float)), tpot_slo_ms, ttft_slo_ms)
        ok |= low >= high
        low = np.where(ok, middle, low)
        high = np.where(ok, high, middle - 1)
    return low


def offline_batch(c: ReplicaConstants, rows: row_kernel.Rows) -> np.ndarray:
    """Offline (no SLO) operating batch: as many sequences as memory and the engine allow."""
    return np.maximum(batch_cap(c, rows), 0)


def slo_reason(c: ReplicaConstants, rows: row_kernel.Rows, knee, tpot_slo_ms, ttft_slo_ms) -> np.ndarray:
    """Why a knee is 0: the SLO that even one sequence misses, with the best achievable value."""
    best_tpot, best_ttft = row_kernel.row_latencies_ms(c, rows._replace(batch=np.ones(rows.config.shape)))[:2]
    cap = batch_cap(c, rows)
    tpot_slo_ms = np.broadcast_to(np.asarray(tpot_slo_ms, dtype=float), rows.config.shape)
    ttft_slo_ms = np.broadcast_to(np.asarray(ttft_slo_ms, dtype=float), rows.config.shape)
    reason = np.full(rows.config.shape, "", dtype=object)
    miss_ttft = (knee == 0) & (best_ttft > ttft_slo_ms)
    miss_tpot = (knee == 0) & (best_tpot > tpot_slo_ms)
    no_room = (knee == 0) & (cap <= 0)
    reason[miss_ttft] = _below("TTFT", ttft_slo_ms[miss_ttft], best_ttft[miss_ttft])
    reason[miss_tpot] = _below("TPOT", tpot_slo_ms[miss_tpot], best_tpot[miss_tpot])
    reason[no_room] = "KV cache for one sequence does not fit at this context"
    return reason


def _below(metric: str, slo_ms: np.ndarray, best_ms: np.ndarray) -> np.ndarray:
    text = [f"{metric} SLO {s:g} ms is below the best achievable {achievable_ms_text(b)} ms"
            for s, b in zip(slo_ms, best_ms)]
    return np.asarray(text, dtype=object)


def achievable_ms_text(value_ms: float) -> str:
    """A latency in a reason: one decimal, or three significant digits past a million ms (an
    absurd efficiency factor would otherwise print hundreds of digits).

    >>> achievable_ms_text(7.14), achievable_ms_text(2.4185e300)
    ('7.1', '2.42e+300')
    """
    return f"{value_ms:.1f}" if abs(value_ms) < 1e6 else f"{value_ms:.3g}"


CURVE_KEYS = ["gpu", "model", "quant", "kv_quant", "tp", "context_len", "input_len", "output_len"]


def mark_knees(table: pd.DataFrame, tpot_slo_ms: float, ttft_slo_ms: float | None = None, *,
               curve_keys: list[str] = CURVE_KEYS) -> pd.DataFrame:
    """Add ``meets_slo`` and ``is_knee`` to a sweep table.

    A row meets the SLO when it is valid and fits (where the table says so) and its TPOT (and
    TTFT, if given) are within the SLO; the knee of each curve (by default one configuration at
    one context, over batch; rows sharing ``curve_keys``) is its largest batch that meets the
    SLO (seed 000, section 3).
    """
    check_range("tpot_slo_ms", tpot_slo_ms, 0, None, low_inclusive=False)
    meets = table["tpot_ms"] <= tpot_slo_ms
    for flag in ("valid", "fits"):
        if flag in table:
            meets &= table[flag]
    if ttft_slo_ms is not None:
        check_range("ttft_slo_ms", ttft_slo_ms, 0, None, low_inclusive=False)
        meets &= table["ttft_ms"] <= ttft_slo_ms
    batch_meeting = table["batch"].where(meets)
    best = batch_meeting.groupby([table[k] for k in curve_keys], observed=True, sort=False).transform("max")
    out = table.copy()
    out["meets_slo"] = meets.to_numpy()
    out["is_knee"] = (meets & (table["batch"] == best)).to_numpy()
    return out


def knees(table: pd.DataFrame, tpot_slo_ms: float, ttft_slo_ms: float | None = None) -> pd.DataFrame:
    """One row per curve: its knee, cheapest first by $/1M output tokens."""
    marked = mark_knees(table, tpot_slo_ms, ttft_slo_ms)
    chosen = marked[marked["is_knee"]].drop(columns=["meets_slo", "is_knee"])
    return chosen.sort_values("usd_per_m_output_tokens", kind="stable").reset_index(drop=True)
