"""Operating points: the knee under latency SLOs and the memory-limited offline ceiling.

TPOT and TTFT grow monotonically with the batch (every term of the step time does), so the
largest batch meeting both SLOs is found for all rows at once by integer bisection: each pass
evaluates the kernel on every row, and ``ceil(log2(cap + 1))`` passes (about 11 for a 2,048 cap)
settle every row together, with no per-row Python loop. For dense models without TP this equals
the closed form of seed 000, ``B* = (SLO - W / BW_eff) / (L * kv / BW_eff)``.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sweeps import kernel


def batch_cap(c, context_len) -> np.ndarray:
    """Largest batch the memory and the serving engine allow [sequences]."""
    max_batch, _ = kernel.memory_limits(c, context_len)
    return np.minimum(max_batch, c["max_num_seqs"].astype(np.int64))


def _meets(c, rows: kernel.Rows, tpot_slo_ms, ttft_slo_ms) -> np.ndarray:
    tpot, ttft = kernel.latencies_ms(c, rows)
    ok_tpot = np.isnan(tpot_slo_ms) | (tpot <= tpot_slo_ms)
    ok_ttft = np.isnan(ttft_slo_ms) | (ttft <= ttft_slo_ms)
    return ok_tpot & ok_ttft


def knee_batch(c, rows: kernel.Rows, tpot_slo_ms, ttft_slo_ms) -> np.ndarray:
    """Largest batch in ``[0, cap]`` whose TPOT and TTFT meet the SLOs (NaN SLO = none) [sequences].

    ``rows.batch`` is ignored; 0 means not even one sequence meets the SLOs or fits.
    """
    tpot_slo_ms = np.broadcast_to(np.asarray(tpot_slo_ms, dtype=float), rows.config.shape)
    ttft_slo_ms = np.broadcast_to(np.asarray(ttft_slo_ms, dtype=float), rows.config.shape)
    low = np.zeros(rows.config.shape, dtype=np.int64)
    high = np.maximum(batch_cap(c, rows.context_len), 0)
    while np.any(low < high):
        middle = (low + high + 1) // 2
        ok = _meets(c, rows._replace(batch=middle.astype(float)), tpot_slo_ms, ttft_slo_ms)
        ok |= low >= high
        low = np.where(ok, middle, low)
        high = np.where(ok, high, middle - 1)
    return low


def offline_batch(c, context_len) -> np.ndarray:
    """Offline (no SLO) operating batch: as many sequences as memory and the engine allow."""
    return np.maximum(batch_cap(c, context_len), 0)


def slo_reason(c, rows: kernel.Rows, knee, tpot_slo_ms, ttft_slo_ms) -> np.ndarray:
    """Why a knee is 0: the SLO that even one sequence misses, with the best achievable value."""
    best_tpot, best_ttft = kernel.latencies_ms(c, rows._replace(batch=np.ones(rows.config.shape)))
    cap = batch_cap(c, rows.context_len)
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
    text = [f"{metric} SLO {s:g} ms is below the best achievable {b:.1f} ms" for s, b in zip(slo_ms, best_ms)]
    return np.asarray(text, dtype=object)
