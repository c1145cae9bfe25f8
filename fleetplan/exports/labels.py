"""Plain-word labels for exported columns: what a workbook header says instead of a code name.

Workbooks show ``Cost (USD/month)`` where Parquet, CSV and JSON keep ``usd_per_month``: the
label says what the number is, the unit (from :mod:`fleetplan.exports.units`) how it is
measured. A name without a label here reads as its words (``gpus_peak`` -> ``Gpus peak``).
"""

from __future__ import annotations

import re

from fleetplan.exports.units import unit_of

LABELS: dict[str, str] = {
    # ids and keys
    "gpu": "GPU", "model": "Model", "quant": "Weights", "kv_quant": "KV cache", "tp": "Tensor parallel",
    "pp": "Pipeline stages", "config": "Configuration", "pricing_type": "Pricing", "workload": "Workload",
    "bucket": "Request bucket", "period": "Period", "month": "Month", "hour": "Hour", "route": "Route",
    "stage": "Stage", "provider": "Provider", "region": "Region", "instance": "Instance", "source": "Source",
    "as_of": "As of", "origin": "From", "name": "Name", "id": "Id", "case_id": "Case", "status": "Status",
    "message": "Reason", "reason": "Reason", "note": "Note", "warning": "Warning", "description": "What",
    "family": "Limit", "subject": "Applies to", "chosen": "Chosen", "valid": "Can run", "fits": "Fits memory",
    "bound": "Limited by", "mode": "Mode", "catalog": "Catalog", "key": "Row", "sha256": "SHA-256",
    "includes_host": "Price covers host", "engine": "Engine", "gap": "Gap to the bound",
    "calibration": "Calibration", "error_p10_pct": "Error band, p10", "error_p90_pct": "Error band, p90",
    # sizes and load
    "context_len": "Context", "input_len": "Prompt", "output_len": "Output", "batch": "Batch",
    "max_batch": "Largest batch that fits", "weight_gb": "Weights per GPU", "kv_gb": "KV cache per GPU",
    "memory_gb": "Memory per GPU", "input_tokens": "Prompt", "output_tokens": "Output",
    "tpot_ms": "Time per output token", "ttft_ms": "Time to first token", "tpot_slo_ms": "TPOT target",
    "ttft_slo_ms": "TTFT target", "tpot_ms_max": "TPOT, worst", "ttft_ms_max": "TTFT, worst",
    "tpot_margin": "TPOT headroom", "ttft_margin": "TTFT headroom", "kv_transfer_ms": "KV transfer",
    "decode_tok_s": "Decode throughput", "decode_tok_s_per_gpu": "Decode throughput per GPU",
    "prefill_tok_s": "Prefill throughput", "output_tok_s": "Output throughput",
    "req_s_per_replica": "Capacity per replica", "capacity_req_s": "Capacity", "rate_req_s": "Request rate",
    "demand_req_s": "Demand", "demand_req_s_mean": "Demand, mean", "demand_req_s_peak": "Demand, peak",
    "unmet_req_s": "Unmet demand", "unmet_fraction": "Unmet share", "served_fraction": "Served",
    "served_fraction_min": "Served, worst workload", "tokens_per_month": "Tokens per month",
    "utilization": "Utilization", "fraction": "Share", "share": "Share",
    "prefill_gpu": "Prefill GPU", "prefill_tp": "Prefill tensor parallel", "prefill_replicas": "Prefill replicas",
    # fleet
    "replicas": "Replicas", "replicas_peak": "Replicas at peak", "replicas_mean": "Replicas, mean",
    "gpus": "GPUs", "gpus_peak": "GPUs at peak", "gpus_mean": "GPUs, mean", "gpus_needed": "GPUs",
    "gpus_per_node": "GPUs per node", "nodes": "Nodes", "nodes_peak": "Nodes at peak", "max_gpus": "GPU cap",
    "gpus_bought_peak": "GPUs bought at peak", "gpus_used_peak": "GPUs used at peak", "power_kw": "Power",
    "hours": "Hours", "value": "Value", "limit": "Limit", "unit": "Unit", "change": "Change tried",
    # money
    "usd_per_gpu_hour": "Price", "usd_per_hour": "Price per replica", "usd_per_month": "Cost",
    "usd_per_year": "Cost", "usd_total": "Cost over the horizon", "usd": "Cost",
    "idle_usd_per_month": "Idle GPUs", "saving_usd_per_month": "Saving",
    "usd_per_m_output_tokens": "Cost per 1M output tokens", "usd_per_m_total_tokens": "Cost per 1M tokens",
    "usd_per_m_tokens": "Cost per 1M tokens", "usd_per_k_requests": "Cost per 1k requests",
    "reserved_usd": "Reserved", "on_demand_usd": "On demand", "spot_usd": "Spot",
    "same_provider_on_demand_usd_per_gpu_hour": "Provider's on-demand",
    "term_charge_factor": "Charged per listed (a term past the horizon is paid in full)",
    "objective_usd": "Cost over the horizon", "solve_seconds": "Solve time",
    # efficiency factors
    "mbu": "Memory bandwidth used", "mfu": "Compute used, decode", "mfu_prefill": "Compute used, prefill",
    "step_overhead_ms": "Step overhead", "tp_scaling": "Efficiency kept per TP doubling",
    "request_overhead_ms": "Request overhead", "n_points": "Fitted on", "precision": "Precision",
    "operator": "Operator", "compute_efficiency": "Compute efficiency",
    "prefill_efficiency": "Compute efficiency, prefill",
    "memory_efficiency": "Bandwidth efficiency",
    "overhead_ms": "Host time per iteration", "overhead_us_per_sequence": "Host time per sequence",
    "overhead_us_per_layer": "GPU time per layer", "expert_tile_tokens": "Expert tile",
    "routing_ns_per_token": "MoE routing per token", "latency_us": "All-reduce latency",
    "crossing_efficiency": "Bandwidth kept across sockets",
    # validation
    "qps": "Offered rate", "metric": "Metric", "predicted": "Predicted", "ape_pct": "Error",
    "engine_id": "Engine",
    "median_ape_pct": "Median error", "p90_ape_pct": "90th percentile error", "rows": "Rows",
    "median_signed_pct": "Median signed error", "e2e_ms": "End-to-end latency",
    "req_s": "Request rate", "total_tok_s": "Total throughput",
    "runnable_rows": "Rows that run", "min_usd_per_m_output_tokens": "Lowest cost per 1M output tokens",
    "max_decode_tok_s_per_gpu": "Best throughput per GPU",
    "scenario": "Scenario",
    # settings
    "hours_per_month": "Hours per month", "horizon_months": "Horizon", "currency": "Currency",
    "first_month": "First month", "target_utilization": "Target utilization",
    "budget_usd_per_month": "Budget", "spot_max_share": "Spot share, at most", "usd_per_kwh": "Electricity price",
    "pue": "Power usage effectiveness (PUE)", "power_load": "Average power draw",
    # what-if axes and results
    "demand_multiplier": "Demand multiplier", "monthly_growth": "Monthly growth", "scenarios": "Scenarios",
    "input": "Input", "low_usd_per_month": "Lowest change", "high_usd_per_month": "Highest change",
    "swing_usd_per_month": "Swing", "includes_base": "Holds the base scenario",
    # supply: sites with a power envelope, hosted APIs
    "site": "Site", "kw_peak": "Power at peak", "kw_mean": "Power, mean", "kw_limit": "Power limit",
    "mwh": "Energy", "api": "API", "requests": "Requests", "tokens": "Tokens",
    "usd_per_request": "API price per request", "replica_usd_per_hour": "Replica price",
    "replica_req_s": "Replica capacity", "break_even_req_s": "Break-even rate",
    "break_even_tokens_per_month": "Break-even tokens per month", "api_usd": "Hosted APIs",
    # costs beyond GPUs: API token prices, the fixed cost per configuration
    "usd_per_1m_tokens": "Price per 1M tokens", "config_months": "Configuration-months",
    "config_fixed_usd": "Fixed per configuration",
    "config_fixed_usd_per_month": "Fixed cost per configuration-month",
}
_WORDS = {"usd": "USD", "gpu": "GPU", "gpus": "GPUs", "tp": "TP", "kv": "KV", "ms": "ms", "req": "requests",
          "tok": "tokens", "slo": "target", "ttft": "TTFT", "tpot": "TPOT", "id": "id"}
_EXTRA_UNITS = {"ape_pct": "%", "median_ape_pct": "%", "p90_ape_pct": "%", "median_signed_pct": "%",
                "qps": "requests/s", "predicted": "", "value": "",
                "usd_per_m_output_tokens": "USD", "usd_per_m_total_tokens": "USD", "usd_per_m_tokens": "USD",
                "usd_per_k_requests": "USD", "min_usd_per_m_output_tokens": "USD",
                "kw_peak": "kW", "kw_mean": "kW", "kw_limit": "kW", "mwh": "MWh",
                "usd_per_request": "USD", "replica_usd_per_hour": "USD/h",
                "usd_per_1m_tokens": "USD",
                "config_months": "configuration-months", "n_points": "rows"}
_SHOWN_UNITS = {"fraction": "%"}  # shares print as percentages


_STATISTICS = {"_mean": "mean", "_min": "lowest", "_max": "highest"}


def _statistic(name: str) -> tuple[str, str] | None:
    """``("usd_per_month", "mean")`` for ``usd_per_month_mean``; None for other names."""
    for suffix, word in _STATISTICS.items():
        if name.endswith(suffix) and name[:-len(suffix)] in LABELS:
            return name[:-len(suffix)], word
    return None


def label_of(name: str) -> str:
    """Plain words for a column: its label, else its words.

    >>> label_of("usd_per_month"), label_of("gpus_h100-sxm"), label_of("usd_per_month_max")
    ('Cost', 'GPUs h100-sxm', 'Cost, highest')
    """
    if name in LABELS:
        return LABELS[name]
    statistic = _statistic(name)
    if statistic is not None:
        return f"{label_of(statistic[0])}, {statistic[1]}"
    words = [_WORDS.get(w, w) for w in str(name).split("_") if w]
    text = " ".join(words)
    return text[:1].upper() + text[1:] if text else str(name)


def header_of(name: str, unit: str | None = None) -> str:
    """A workbook header: plain words plus the unit, e.g. ``Cost (USD/month)``.

    >>> header_of("tpot_ms"), header_of("gpu"), header_of("solve_seconds"), header_of("gpus_peak")
    ('Time per output token (ms)', 'GPU', 'Solve time (s)', 'GPUs at peak')
    """
    statistic = _statistic(name)
    base = statistic[0] if statistic else name
    unit = _EXTRA_UNITS.get(base, unit_of(base)) if unit is None else unit
    unit = _SHOWN_UNITS.get(unit, unit)
    label = label_of(name)
    # "GPUs at peak" needs no "(GPUs)"; a unit of one letter ("s") is a word of its own
    said = re.search(rf"\b{re.escape(unit.lower().replace('/', ' per '))}\b", label.lower())
    return f"{label} ({unit})" if unit and not said else label
