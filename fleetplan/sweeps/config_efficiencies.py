"""The efficiency constants of each configuration: per-operator values from the efficiency
catalog, then the caller's overrides, and how well the configuration is calibrated.

Precedence, per configuration: a per-case column named like the constant (``gemm_memory``, ...)
beats a per-case ``mbu``/``mfu``/``mfu_prefill``/... column, which beats the call's assumption,
which beats the catalog. ``mbu`` sets every memory efficiency (weight and KV-cache reads), ``mfu``
every decode compute efficiency and, unless ``mfu_prefill`` is given, the prefill ones too (the
seed's single MFU). ``step_overhead_ms`` alone replaces all of the engine's overheads (host time per
sequence and per-layer launch time become 0 unless given too).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.sweeps import operators
from fleetplan.sweeps.assumptions import Assumptions
from fleetplan.sweeps.efficiencies import calibration_labels, operator_efficiencies, require_values
from fleetplan.sweeps.uncertainty import error_band_pct

# Constant -> (operator, catalog column, fallback column): where each efficiency comes from.
SOURCES = {
    "gemm_compute": ("gemm", "compute_efficiency", None),
    "gemm_prefill": ("gemm", "prefill_efficiency", "compute_efficiency"),
    "gemm_memory": ("gemm", "memory_efficiency", None),
    "tp_scaling": ("gemm", "tp_scaling", None),
    "expert_compute": ("expert_gemm", "compute_efficiency", None),
    "expert_prefill": ("expert_gemm", "prefill_efficiency", "compute_efficiency"),
    "expert_memory": ("expert_gemm", "memory_efficiency", None),
    "expert_tile_tokens": ("expert_gemm", "expert_tile_tokens", None),
    "routing_ns_per_token": ("expert_gemm", "routing_ns_per_token", None),
    "attention_compute": ("attention", "compute_efficiency", None),
    "attention_prefill": ("attention", "prefill_efficiency", "compute_efficiency"),
    "attention_memory": ("attention", "memory_efficiency", None),
    "allreduce_efficiency": ("allreduce", "memory_efficiency", None),
    "allreduce_latency_us": ("allreduce", "latency_us", None),
    "crossing_efficiency": ("allreduce", "crossing_efficiency", None),
    "iteration_ms": ("iteration", "overhead_ms", None),
    "iteration_us_per_seq": ("iteration", "overhead_us_per_sequence", None),
    "layer_overhead_us": ("iteration", "overhead_us_per_layer", None),
    "request_overhead_ms": ("iteration", "request_overhead_ms", None),
}
EFFICIENCY_FIELDS = tuple(SOURCES)
# Assumption -> the constants it sets.
SHORTHANDS = {
    "mbu": ("gemm_memory", "expert_memory", "attention_memory"),
    "mfu": ("gemm_compute", "expert_compute", "attention_compute"),
    "mfu_prefill": ("gemm_prefill", "expert_prefill", "attention_prefill"),
    "step_overhead_ms": ("iteration_ms",),
    "step_overhead_us_per_seq": ("iteration_us_per_seq",),
    "layer_overhead_us": ("layer_overhead_us",),
    "allreduce_latency_us": ("allreduce_latency_us",),
    "tp_scaling": ("tp_scaling",),
    "request_overhead_ms": ("request_overhead_ms",),
}
_DEFAULTS = {"tp_scaling": 1.0, "request_overhead_ms": 0.0, "iteration_ms": 0.0, "iteration_us_per_seq": 0.0,
             "layer_overhead_us": 0.0, "allreduce_latency_us": 8.0, "expert_tile_tokens": 0.0,
             "routing_ns_per_token": 0.0, "crossing_efficiency": 1.0}


def add_efficiencies(frame: pd.DataFrame, catalogs: Catalogs, assumptions: Assumptions, per_config) -> None:
    """Add every efficiency constant, the effective all-reduce path, ``calibration`` and its error
    band to ``frame``."""
    precision_of = {"gemm": frame["gemm_precision"], "expert_gemm": frame["gemm_precision"],
                    "attention": frame["attention_precision"], "allreduce": "*", "iteration": "*"}
    looked_up = {op: operator_efficiencies(catalogs.efficiency, frame["engine"], frame["gpu"], op,
                                           np.broadcast_to(np.asarray(p, dtype=object), len(frame)))
                 for op, p in precision_of.items()}
    for name, (op, column, fallback) in SOURCES.items():
        values = looked_up[op][column]
        if fallback is not None:
            values = values.fillna(looked_up[op][fallback])
        frame[name] = values.fillna(_DEFAULTS.get(name, np.nan)).to_numpy(dtype=float)
    for op, columns in (("gemm", ("gemm_compute", "gemm_memory")), ("attention", ("attention_memory",))):
        require_values(frame, columns, op)
    frame["calibration"] = calibration_labels(looked_up["gemm"], frame["engine"], frame["gpu"], frame["gemm_precision"])
    for column, values in error_band_pct(frame["calibration"]).items():
        frame[column] = values
    _apply_overrides(frame, assumptions, per_config)
    frame["allreduce_gb_s"] = operators.allreduce_bandwidth_gb_s(
        frame["tp"], frame["interconnect_gb_s"], frame["interconnect_domain_gpus"], frame["beyond_domain_gb_s"], 1.0)
    # The socket hop's own loss applies only to groups that span domains (1 elsewhere).
    frame["spans_domains"] = operators.spans_domains(frame["tp"], frame["interconnect_domain_gpus"],
                                                     frame["beyond_domain_gb_s"])
    frame["crossing_efficiency"] = np.where(frame["spans_domains"], frame["crossing_efficiency"], 1.0)


def _cells(per_config, name: str, n: int) -> np.ndarray:
    if per_config is None or name not in per_config:
        return np.full(n, np.nan)
    return pd.to_numeric(per_config[name].reset_index(drop=True), errors="coerce").to_numpy(dtype=float)


def _apply_overrides(frame: pd.DataFrame, assumptions: Assumptions, per_config) -> None:
    n = len(frame)
    given_mfu = np.full(n, assumptions.mfu is not None) | ~np.isnan(_cells(per_config, "mfu", n))
    given_prefill = np.full(n, assumptions.mfu_prefill is not None) | ~np.isnan(_cells(per_config, "mfu_prefill", n))
    for shorthand, targets in SHORTHANDS.items():
        call = getattr(assumptions, shorthand)
        cells = _cells(per_config, shorthand, n)
        for target in targets:
            values = frame[target].to_numpy(dtype=float)
            if call is not None:
                values = np.full(n, float(call))
            frame[target] = np.where(np.isnan(cells), values, cells)
    given_step = np.full(n, assumptions.step_overhead_ms is not None) | ~np.isnan(_cells(per_config, "step_overhead_ms", n))
    for name in ("iteration_us_per_seq", "layer_overhead_us"):  # a fixed step overhead replaces the engine's
        shorthand = "step_overhead_us_per_seq" if name == "iteration_us_per_seq" else name
        given = np.full(n, getattr(assumptions, shorthand) is not None) | ~np.isnan(_cells(per_config, shorthand, n))
        frame[name] = np.where(given_step & ~given, 0.0, frame[name])
    follow = given_mfu & ~given_prefill  # a caller who sets MFU alone means it for prefill too
    for decode, prefill in (("gemm_compute", "gemm_prefill"), ("expert_compute", "expert_prefill"),
                            ("attention_compute", "attention_prefill")):
        frame[prefill] = np.where(follow, frame[decode], frame[prefill])
    for name in EFFICIENCY_FIELDS:  # the constants themselves, per case (e.g. from a fit)
        cells = _cells(per_config, name, n)
        frame[name] = np.where(np.isnan(cells), frame[name], cells)
