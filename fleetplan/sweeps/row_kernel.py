"""The row kernel: every metric of every grid row from gathered configuration constants.

Rows point at their configuration through an index array; ``ReplicaConstants.gather`` repeats
the constants onto them with one ``take`` each and every formula runs once over whole arrays.
The same kernel serves ``sweep``, ``estimate_cases`` and the knee search; the latencies come
from ``step_times``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fleetplan.sweeps import memory, operators, throughput
from fleetplan.sweeps.replica_constants import ReplicaConstants
from fleetplan.sweeps.step_times import latencies_ms


class Rows(NamedTuple):
    """Row coordinates: configuration index and the four numeric axes (equal-length arrays)."""

    config: np.ndarray
    context_len: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    batch: np.ndarray


def cached_token_layers(c: ReplicaConstants, context_len):
    """Token-layers one sequence of ``context_len`` tokens keeps on the busiest stage's GPUs
    (sliding-window layers keep at most their window) [tokens x layers]."""
    return operators.attended_tokens(context_len, c.full_layers, c.sliding_layers, c.sliding_window) * c.stage_fraction


def memory_limits(c: ReplicaConstants, context_len):
    """Memory-limited batch at ``context_len`` [sequences] and the memory outside weights and KV [GB]."""
    per_sequence = cached_token_layers(c, context_len)
    return memory.max_batch_fits(c.kv_budget_gb, per_sequence, c.kv_bytes_per_layer_token), c.reserve_gb


def row_latencies_ms(c: ReplicaConstants, rows: Rows):
    """TPOT and TTFT (and their parts) at each row's batch (``step_times.latencies_ms``)."""
    return latencies_ms(c, rows.batch, rows.context_len, rows.input_len)


def evaluate(c: ReplicaConstants, rows: Rows) -> dict[str, np.ndarray]:
    """Every metric column of the sweep table for ``rows`` (see ``columns.SWEEP_COLUMNS``)."""
    batch = rows.batch.astype(float)
    times = latencies_ms(c, batch, rows.context_len, rows.input_len)
    tpot = times.tpot_ms
    max_batch, reserve = memory_limits(c, rows.context_len)
    kv = memory.kv_gb(batch, cached_token_layers(c, rows.context_len), c.kv_bytes_per_layer_token)
    req_s = throughput.request_rate_req_s(batch, tpot, rows.output_len, times.prefill_work_ms)
    output_tok_s = req_s * rows.output_len
    usd_per_hour = c.usd_per_gpu_hour * c.gpus
    decode = throughput.decode_tok_s(batch, tpot)
    return {
        "weight_gb": c.weight_gb, "kv_gb": kv, "memory_gb": c.weight_gb + kv + reserve,
        "max_batch": max_batch, "fits": (rows.batch <= max_batch) & (max_batch > 0),
        "bound_is_compute": times.compute_ms > times.memory_ms,
        "tpot_ms": tpot, "ttft_ms": times.ttft_ms,
        "decode_tok_s": decode, "decode_tok_s_per_gpu": decode / c.gpus,
        "prefill_tok_s": throughput.prefill_tok_s(rows.input_len, times.prefill_work_ms),
        "output_tok_s": output_tok_s, "req_s": req_s, "usd_per_hour": usd_per_hour,
        "usd_per_m_output_tokens": throughput.usd_per_m_tokens(usd_per_hour, output_tok_s),
        "usd_per_m_total_tokens": throughput.usd_per_m_tokens(
            usd_per_hour, req_s * (rows.input_len + rows.output_len)),
        "usd_per_k_requests": throughput.usd_per_k_requests(usd_per_hour, req_s),
    }
