"""The sweep table's columns: name, dtype, unit and meaning, in output order.

Metrics are stored as float32 in sweep tables (seven significant digits; half the memory and
bandwidth of float64 on grids of millions of rows) and as float64 in ``estimate_cases`` output.
Prices, costs and the rates they divide by (``output_tok_s``, ``req_s``) stay float64, so a cost equals
its formula on the stored inputs exactly, in Python and in a recalculated workbook.
Every row says how sure its throughput is: ``calibration`` and the error band of held-out rows
with that label (``fleetplan.sweeps.uncertainty``), one value per configuration repeated onto its rows.

One registry serves the sweep engine (column order and dtypes), the exports (Parquet field
metadata, workbook headers) and the README's column reference. A unit of ``""`` means the column
is a label or a count without unit.
"""

from __future__ import annotations

from typing import NamedTuple


class Column(NamedTuple):
    dtype: str
    unit: str
    description: str


SWEEP_COLUMNS: dict[str, Column] = {
    "gpu": Column("category", "", "GPU id (gpus catalog)"),
    "model": Column("category", "", "Model id (models catalog)"),
    "quant": Column("category", "", "Weight quantization id (quants catalog)"),
    "kv_quant": Column("category", "", "KV-cache quantization id (quants catalog)"),
    "tp": Column("int16", "GPUs", "Tensor-parallel degree: GPUs in one replica"),
    "context_len": Column("int32", "tokens", "Tokens held in each sequence's KV cache during decode"),
    "input_len": Column("int32", "tokens", "Prompt tokens per request (prefill)"),
    "output_len": Column("int32", "tokens", "Generated tokens per request"),
    "batch": Column("int32", "sequences", "Concurrent sequences decoded per step"),
    "weight_gb": Column("float32", "GB", "Weight memory per GPU"),
    "kv_gb": Column("float32", "GB", "KV-cache memory per GPU for the whole batch"),
    "memory_gb": Column("float32", "GB", "Weights + KV + runtime reserve per GPU"),
    "max_batch": Column("int32", "sequences", "Largest batch whose KV cache fits at this context"),
    "fits": Column("bool", "", "Weights, KV cache and reserve fit in GPU memory"),
    "valid": Column("bool", "", "The combination can run at all (see reason)"),
    "reason": Column("category", "", "Why a row is invalid or does not fit; empty when fine"),
    "bound": Column("category", "", "What limits the decode step: memory or compute"),
    "tpot_ms": Column("float32", "ms", "Time per output token (one decode step)"),
    "ttft_ms": Column("float32", "ms", "Time to first token: prompt prefill plus the step it waits behind"),
    "decode_tok_s": Column("float32", "tokens/s", "Decode throughput of one replica = batch / TPOT"),
    "decode_tok_s_per_gpu": Column("float32", "tokens/s/GPU", "Decode throughput per GPU"),
    "prefill_tok_s": Column("float32", "tokens/s", "Prompt tokens one replica ingests per second (compute roof)"),
    "output_tok_s": Column("float64", "tokens/s", "Output tokens/s per replica when prefill and decode share the GPUs"),
    "req_s": Column("float64", "requests/s", "Requests/s one replica completes = output_tok_s / output_len"),
    "usd_per_hour": Column("float64", "USD/hour", "Price of one replica (tp GPUs) per hour"),
    "usd_per_m_output_tokens": Column("float64", "USD/1M tokens", "Cost of one million output tokens"),
    "usd_per_m_total_tokens": Column("float64", "USD/1M tokens", "Cost of one million prompt + output tokens"),
    "usd_per_k_requests": Column("float64", "USD/1k requests", "Cost of one thousand requests"),
    "calibration": Column("category", "", "measured: efficiencies fitted to this engine, GPU and precision; "
                                          "transferred: from another engine, precision or a sibling GPU; "
                                          "prior: documented priors only"),
    "error_p10_pct": Column("float32", "%", "p10 of the held-out relative error (predicted / measured - 1) of "
                                            "throughput for rows with this calibration"),
    "error_p90_pct": Column("float32", "%", "p90 of that error: over-prediction 9 in 10 such rows stay under"),
}

# Lever columns appear after ``tp`` when the lever is a sweep axis.
LEVER_COLUMNS: dict[str, Column] = {
    "pp": Column("float64", "stages", "Pipeline-parallel stages across nodes (GPUs per replica = tp * pp)"),
    "prefix_hit_rate": Column("float64", "fraction", "Share of each prompt served from the prefix cache"),
    "spec_tokens": Column("float64", "tokens", "Tokens drafted per speculative decoding step"),
    "spec_acceptance": Column("float64", "fraction", "Acceptance rate of each drafted token"),
    "spec_draft_cost": Column("float64", "fraction", "Draft cost per drafted token, as a share of a verification step"),
    "dequant_overhead": Column("float64", "fraction", "Extra matmul time of weight-only quantization"),
    "prefill_chunk_tokens": Column("float64", "tokens", "Chunked prefill: prompt tokens per step (0 = whole prompt)"),
}

# Disaggregation columns appear when ``prefill_gpus`` is a sweep axis: the prefill replica's keys
# after the lever columns, its per-row metrics after the cost columns. With the axis on, ``gpu``
# and ``tp`` are the decode replica and ``usd_per_hour`` prices it with its share of prefill replicas.
DISAGGREGATION_KEYS = ("prefill_gpu", "prefill_tp")
DISAGGREGATION_COLUMNS: dict[str, Column] = {
    "prefill_gpu": Column("category", "", "Prefill replica GPU id; 'none' = prefill on the decode replica (colocated)"),
    "prefill_tp": Column("int16", "GPUs", "Tensor-parallel degree of the prefill replica (0 = colocated)"),
    "prefill_replicas": Column("float32", "replicas", "Prefill replicas per decode replica"),
    "kv_transfer_ms": Column("float32", "ms", "Time to move a prompt's KV cache to the decode replica"),
}

# Columns ``estimate_cases`` adds for the load modes ("rate", "max_rate"); NaN in other modes.
LOAD_COLUMNS: dict[str, Column] = {
    "rate_req_s": Column("float64", "requests/s", "Request rate the case is evaluated at (given, or the largest meeting the SLOs)"),
    "capacity_req_s": Column("float64", "requests/s", "Largest sustainable request rate of one replica"),
    "utilization": Column("float64", "fraction", "rate_req_s / capacity_req_s"),
    "tpot_p90_ms": Column("float64", "ms", "90th percentile over requests of each request's mean TPOT (never below the mean)"),
    "tpot_p99_ms": Column("float64", "ms", "99th percentile over requests of each request's mean TPOT"),
    "ttft_p90_ms": Column("float64", "ms", "90th percentile of TTFT under load (never below the mean)"),
    "ttft_p99_ms": Column("float64", "ms", "99th percentile of TTFT under load"),
}

# Columns every ``estimate_cases`` row carries: what the estimate rests on and how sure it is.
ESTIMATE_COLUMNS: dict[str, Column] = {
    "engine": Column("str", "", "Serving engine whose profile (memory rule, batch cap) and efficiencies were used"),
    "calibration": Column("str", "", "measured: fitted to this engine, GPU and precision; transferred: from another "
                                     "engine, precision or a sibling GPU; prior: documented priors only"),
    "error_p10_pct": Column("float64", "%", "p10 of the held-out relative error (predicted / measured - 1) of "
                                            "throughput for estimates with this calibration"),
    "error_p90_pct": Column("float64", "%", "p90 of that error: over-prediction 9 in 10 such estimates stay under"),
    "capacity_quantile": Column("str", "", "p50: throughput as modelled; p90: divided by 1 + error_p90_pct / 100 "
                                           "(a pessimistic capacity)"),
}

#: Every column a sweep table may have (the estimate-only columns are described above), for lookups of units, descriptions and types.
ALL_SWEEP_COLUMNS: dict[str, Column] = {**SWEEP_COLUMNS, **LEVER_COLUMNS, **DISAGGREGATION_COLUMNS}
