"""The row kernel: every metric of every grid row from gathered configuration constants.

Rows point at their configuration through an index array; constants are gathered with one
``take`` each and every formula runs once over whole arrays. The same kernel serves ``sweep``,
``estimate_cases`` and the knee search.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fleetplan.sweeps import memory, throughput
from fleetplan.sweeps.step_times import decode_step_ms, prefill_ms

__all__ = ["Rows", "decode_step_ms", "evaluate", "gather", "latencies_ms", "memory_limits", "prefill_ms"]


class Rows(NamedTuple):
    """Row coordinates: configuration index and the four numeric axes (equal-length arrays)."""

    config: np.ndarray
    context_len: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    batch: np.ndarray


def gather(config: dict[str, np.ndarray], index: np.ndarray) -> dict[str, np.ndarray]:
    """Configuration constants repeated onto rows; lazily, one ``take`` per constant used."""
    return _Gathered(config, index)


class _Gathered(dict):
    def __init__(self, config, index):
        super().__init__()
        self._config, self._index = config, index

    def __missing__(self, name):
        value = self[name] = self._config[name].take(self._index)
        return value


def memory_limits(c, context_len):
    """Memory-limited batch at ``context_len`` [sequences] and the runtime reserve [GB]."""
    reserve = memory.runtime_reserve_gb(c["memory_gb"], c["reserve_fraction"])
    budget = memory.kv_budget_gb(c["memory_gb"], c["weight_gb"], reserve)
    return memory.max_batch_fits(budget, context_len, c["kv_bytes_per_token"]), reserve


def prompt_steps(c, input_len):
    """Decode steps a prompt's prefill rides: ``ceil(S / chunk)`` with chunked prefill, else 1 [steps]."""
    chunk = c["prefill_chunk_tokens"]
    return np.where(chunk > 0, np.ceil(np.asarray(input_len, dtype=float) / np.where(chunk > 0, chunk, 1.0)), 1.0)


def latencies_ms(c, rows: Rows):
    """(TPOT, TTFT) at each row's batch; TTFT is the prefill plus the in-flight step(s) it rides."""
    tpot, _, _ = decode_step_ms(c, rows.batch, rows.context_len)
    prefill_total, _ = prefill_ms(c, rows.input_len)
    return tpot, prefill_total + prompt_steps(c, rows.input_len) * tpot


def evaluate(c, rows: Rows) -> dict[str, np.ndarray]:
    """Every metric column of the sweep table for ``rows`` (see ``columns.SWEEP_COLUMNS``)."""
    batch = rows.batch.astype(float)
    tpot, memory_ms, compute_ms = decode_step_ms(c, batch, rows.context_len)
    prefill_total, prefill_work = prefill_ms(c, rows.input_len)
    max_batch, reserve = memory_limits(c, rows.context_len)
    kv = memory.kv_gb(batch, rows.context_len, c["kv_bytes_per_token"])
    req_s = throughput.request_rate_req_s(batch, tpot, rows.output_len, prefill_work)
    output_tok_s = req_s * rows.output_len
    usd_per_hour = c["usd_per_gpu_hour"] * c["gpus"]
    decode = throughput.decode_tok_s(batch, tpot)
    return {
        "weight_gb": c["weight_gb"], "kv_gb": kv, "memory_gb": c["weight_gb"] + kv + reserve,
        "max_batch": max_batch, "fits": (rows.batch <= max_batch) & (max_batch > 0),
        "bound_is_compute": compute_ms > memory_ms,
        "tpot_ms": tpot, "ttft_ms": prefill_total + prompt_steps(c, rows.input_len) * tpot,
        "decode_tok_s": decode, "decode_tok_s_per_gpu": decode / c["gpus"],
        "prefill_tok_s": throughput.prefill_tok_s(rows.input_len, prefill_work),
        "output_tok_s": output_tok_s, "req_s": req_s, "usd_per_hour": usd_per_hour,
        "usd_per_m_output_tokens": throughput.usd_per_m_tokens(usd_per_hour, output_tok_s),
        "usd_per_m_total_tokens": throughput.usd_per_m_tokens(
            usd_per_hour, req_s * (rows.input_len + rows.output_len)),
        "usd_per_k_requests": throughput.usd_per_k_requests(usd_per_hour, req_s),
    }
