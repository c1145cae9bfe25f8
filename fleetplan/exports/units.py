"""Units and descriptions of exported columns.

Sweep columns are documented in ``fleetplan.sweeps.columns.SWEEP_COLUMNS``; plan tables follow
the naming convention of ``fleetplan.optimizer.fleet_plan`` (units in column names), so their units
are read from the name. Both feed Parquet field metadata and workbook headers
(``fleetplan.exports.labels``).
"""

from __future__ import annotations

from fleetplan.sweeps.columns import ALL_SWEEP_COLUMNS

# (suffix or whole name, unit), first match wins; most specific first.
_NAME_UNITS: tuple[tuple[str, str], ...] = (
    ("usd_per_gpu_hour", "USD/GPU-hour"),
    ("usd_per_hour", "USD/hour"),
    ("saving_usd_per_month", "USD/month"),
    ("usd_per_month", "USD/month"),
    ("usd_per_year", "USD/year"),
    ("usd_total", "USD"),
    ("usd_per_m_output_tokens", "USD/1M tokens"),
    ("usd_per_m_total_tokens", "USD/1M tokens"),
    ("usd_per_m_tokens", "USD/1M tokens"),
    ("usd_per_k_requests", "USD/1k requests"),
    ("objective_usd", "USD"),
    ("_usd", "USD"),
    ("usd", "USD"),
    ("_ms", "ms"),
    ("_ms_max", "ms"),
    ("_margin", "fraction"),
    ("_gb", "GB"),
    ("req_s_per_replica", "requests/s"),
    ("req_s_mean", "requests/s"),
    ("req_s_peak", "requests/s"),
    ("req_s", "requests/s"),
    ("tok_s_per_gpu", "tokens/s/GPU"),
    ("tok_s", "tokens/s"),
    ("tokens_per_month", "tokens/month"),
    ("fraction", "fraction"),
    ("share", "fraction"),
    ("utilization", "fraction"),
    ("gpus_per_node", "GPUs/node"),
    ("gpus_peak", "GPUs"),
    ("max_gpus", "GPUs"),
    ("gpus", "GPUs"),
    ("hours", "hours"),
    ("_len", "tokens"),
    ("input_tokens", "tokens"),
    ("output_tokens", "tokens"),
    ("_per_decode_replica", "replicas/replica"),
    ("replicas_mean", "replicas"),
    ("replicas_peak", "replicas"),
    ("replicas", "replicas"),
    ("nodes_peak", "nodes"),
    ("tp", "GPUs"),
    ("batch", "sequences"),
    ("solve_seconds", "s"),
    ("_efficiency", "fraction"),
    ("tp_scaling", "fraction"),
    ("_us_per_sequence", "µs"),
    ("_us_per_layer", "µs"),
    ("_us", "µs"),
    ("_ns_per_token", "ns"),
    ("_tile_tokens", "tokens"),
)


def unit_of(name: str) -> str:
    """Unit of a column: from the sweep registry, else from its name; ``""`` for labels.

    >>> unit_of("usd_per_month"), unit_of("tpot_slo_ms"), unit_of("gpu")
    ('USD/month', 'ms', '')
    """
    column = ALL_SWEEP_COLUMNS.get(name)
    if column is not None:
        return column.unit
    for pattern, unit in _NAME_UNITS:
        if name == pattern or name.endswith(pattern):
            return unit
    return ""


def description_of(name: str) -> str:
    """Description of a sweep column; ``""`` for other columns."""
    column = ALL_SWEEP_COLUMNS.get(name)
    return column.description if column is not None else ""
