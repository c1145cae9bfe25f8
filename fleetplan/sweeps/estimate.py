"""``estimate_cases``: one operating point per case (a fixed batch, the knee under SLOs, the
offline memory-limited ceiling, a request rate, or the largest rate meeting the SLOs), for single
estimates and bulk procurement comparisons alike.

Each case becomes its own configuration, so per-case overrides (mbu, mfu, price) apply naturally;
all cases are evaluated together by the same vectorized kernel as the sweep. The load modes
("rate", "max_rate") take latency under load from ``fleetplan.sweeps.queueing``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.errors import InvalidValueError
from fleetplan.sweeps import operating_points, queueing, row_kernel, throughput
from fleetplan.sweeps.assumptions import LEVER_RANGES, assumptions_from
from fleetplan.sweeps.columns import LOAD_COLUMNS, SWEEP_COLUMNS
from fleetplan.sweeps.configurations import CONFIG_KEYS, config_frame
from fleetplan.sweeps.inputs import catalog_or_default
from fleetplan.sweeps.replica_constants import ReplicaConstants
from fleetplan.sweeps.sweep_table import build_table

LOAD_MODES = ("rate", "max_rate")
REQUIRED = ("gpu", "model", "quant", "tp", "input_len", "output_len")
OPTIONAL_NUMBERS = {  # column -> (low, low inclusive, high)
    "batch": (1, True, 10_000_000), "tpot_slo_ms": (0, False, 1e7), "ttft_slo_ms": (0, False, 1e8),
    "mbu": (0, False, 1), "mfu": (0, False, 1), "mfu_prefill": (0, False, 1), "step_overhead_ms": (0, True, 1000), "tp_scaling": (0.5, True, 1), "request_overhead_ms": (0, True, 1000),
    "usd_per_gpu_hour": (0, False, 1e4), "rate_req_s": (0, False, 1e7),
}
POSITIVE_INTEGERS = {"tp": 1024, "input_len": 100_000_000, "output_len": 10_000_000}
MODES = ("batch", "slo", "offline", *LOAD_MODES)
REPLACED = ("batch", "kv_quant", "rate_req_s")  # inputs whose output column holds the value used
LEVER_NUMBERS = {name: (low, True, high) for name, (low, high, _) in LEVER_RANGES.items()}


def mean_context_len(input_len, output_len):
    """Mean tokens in a sequence's KV cache over its decode.

    Parameters
    ----------
    input_len : int or array
        Prompt tokens, S [tokens].
    output_len : int or array
        Output tokens, G [tokens].

    Returns
    -------
    float or array
        Mean cached tokens per sequence, rounded up [tokens].

    Notes
    -----
    Under continuous batching requests are at every stage of their decode, so the cache holds on
    average the prompt plus half the output:

    .. math:: \\bar L = \\lceil S + G / 2 \\rceil

    References
    ----------
    .. [1] Kwon et al., "Efficient Memory Management for Large Language Model Serving with
       PagedAttention", SOSP 2023, arXiv:2309.06180 (KV cache growing with each generated token).

    Examples
    --------
    >>> int(mean_context_len(1000, 2000))
    2000
    """
    return np.ceil(np.asarray(input_len, dtype=float) + np.asarray(output_len, dtype=float) / 2.0)


def estimate_cases(cases: pd.DataFrame, catalogs: Catalogs | None = None, **overrides) -> pd.DataFrame:
    """Evaluate each case at its operating point; inputs are repeated, metrics appended.

    Columns: gpu, model, quant, tp, input_len, output_len (required); kv_quant, batch, tpot_slo_ms,
    ttft_slo_ms, mode, mbu, mfu, step_overhead_ms, usd_per_gpu_hour (optional; empty = default).
    The mode defaults to "batch" when a batch is given, "rate" when a ``rate_req_s`` is, "slo" when
    an SLO is, else "offline". "max_rate" finds the largest request rate whose loaded mean TPOT and
    TTFT meet the SLOs (``fleetplan.sweeps.queueing``); the load modes add the columns rate_req_s,
    capacity_req_s, utilization and p90/p99 TPOT and TTFT. Lever columns (pp, prefix_hit_rate,
    spec_tokens, spec_acceptance, spec_draft_cost, dequant_overhead, prefill_chunk_tokens) apply
    per case.
    """
    cases, configs, c, rows = case_arrays(cases, catalogs, **overrides)
    batch, slo_reason = _operating_batch(c, rows, cases)
    loaded = evaluate_load(c, rows, cases)
    if loaded is not None:
        batch = np.where(np.isnan(loaded.rate), batch, loaded.batch())
        slo_reason = np.where(slo_reason == "", loaded.reasons(), slo_reason)
    rows = rows._replace(batch=batch.astype(np.int64))
    metrics = row_kernel.evaluate(c, rows._replace(batch=np.maximum(batch, 1)))
    table = build_table(configs, rows, metrics, extra_reason=slo_reason)
    stopped = batch == 0
    for column in ("decode_tok_s", "decode_tok_s_per_gpu", "output_tok_s", "req_s"):
        table.loc[stopped, column] = 0.0
    for column in ("usd_per_m_output_tokens", "usd_per_m_total_tokens", "usd_per_k_requests"):
        table.loc[stopped, column] = np.nan
    table["valid"] &= slo_reason == ""
    if loaded is not None:
        table = apply_load(table, loaded, c, rows)
    extra = [name for name in (*SWEEP_COLUMNS, *LOAD_COLUMNS)
             if name in table and (name not in cases.columns or name in REPLACED)]
    return pd.concat([cases.drop(columns=list(REPLACED), errors="ignore").reset_index(drop=True),
                      table[extra]], axis=1)


def case_arrays(cases: pd.DataFrame, catalogs: Catalogs | None = None, **overrides):
    """Validated cases, their configuration table and constants, and their kernel rows (batch 0)."""
    catalogs = catalog_or_default(catalogs)
    cases = _checked(cases, catalogs)
    configs = config_frame(catalogs, cases[CONFIG_KEYS], assumptions_from(overrides), per_config=cases)
    n = len(cases)
    context_len = mean_context_len(cases["input_len"], cases["output_len"]).astype(np.int64)
    rows = row_kernel.Rows(np.arange(n), context_len, cases["input_len"].to_numpy(np.int64),
                       cases["output_len"].to_numpy(np.int64), np.zeros(n))
    return cases, configs, ReplicaConstants.from_frame(configs), rows


def _operating_batch(c: ReplicaConstants, rows, cases):
    mode = cases["mode"].to_numpy()
    tpot_slo = cases["tpot_slo_ms"].to_numpy(dtype=float)
    ttft_slo = cases["ttft_slo_ms"].to_numpy(dtype=float)
    knee = operating_points.knee_batch(c, rows, tpot_slo, ttft_slo)
    offline = operating_points.offline_batch(c, rows.context_len)
    given = np.nan_to_num(cases["batch"].to_numpy(dtype=float)).astype(np.int64)
    batch = np.select([mode == "batch", mode == "slo"], [given, knee], offline)
    reason = np.full(len(cases), "", dtype=object)
    in_slo = np.isin(mode, ["slo", "max_rate"])  # an idle replica that misses the SLOs has knee 0
    reason[in_slo] = operating_points.slo_reason(c, rows, knee, tpot_slo, ttft_slo)[in_slo]
    return batch, reason


def _checked(cases: pd.DataFrame, catalogs: Catalogs) -> pd.DataFrame:
    """Validated copy of ``cases`` with ids canonical and optional columns filled."""
    if not isinstance(cases, pd.DataFrame) or cases.empty:
        message = "cases must be a non-empty table with columns " + ", ".join(REQUIRED)
        raise InvalidValueError(message)
    missing = [c for c in REQUIRED if c not in cases.columns]
    if missing:
        message = f"cases lack the required column {missing[0]} (required: {', '.join(REQUIRED)})"
        raise InvalidValueError(message)
    cases = cases.copy()
    for kind in ("gpu", "model", "quant"):
        cases[kind] = catalogs.require(kind, cases[kind].astype(str).tolist())
    _check_numbers(cases)
    if "kv_quant" not in cases or cases["kv_quant"].isna().all():
        cases["kv_quant"] = np.nan
    default_kv = catalogs.quants["default_kv_quant"].reindex(cases["quant"]).to_numpy()
    given_kv = cases["kv_quant"].where(cases["kv_quant"].notna() & (cases["kv_quant"].astype(str) != ""))
    cases["kv_quant"] = np.where(given_kv.isna(), default_kv, given_kv.astype(str))
    cases["kv_quant"] = catalogs.require("quant", cases["kv_quant"].tolist())
    cases["mode"] = _modes(cases)
    return cases


def _check_numbers(cases: pd.DataFrame) -> None:
    for column, high in POSITIVE_INTEGERS.items():
        _check_column(cases, column, 1, True, high, integer=True, required=True)
    for column, (low, inclusive, high) in OPTIONAL_NUMBERS.items():
        if column not in cases:
            cases[column] = np.nan
        _check_column(cases, column, low, inclusive, high, integer=column == "batch", required=False)
    for column, (low, inclusive, high) in LEVER_NUMBERS.items():
        if column in cases:
            _check_column(cases, column, low, inclusive, high, integer=LEVER_RANGES[column][2], required=False)


def _check_column(cases, column, low, inclusive, high, *, integer, required) -> None:
    raw = cases[column]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    blank = raw.isna().to_numpy() | (raw.astype(str).str.strip() == "").to_numpy()
    too_low = values < low if inclusive else values <= low
    bad = (np.isnan(values) & (required | ~blank)) | too_low | (values > high) | ~np.isfinite(values) & ~blank
    if integer:
        bad |= ~np.isnan(values) & (values != np.round(values))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        kind = "a whole number" if integer else "a number"
        bound = f"{'>=' if inclusive else '>'} {low:g} and <= {high:g}"
        message = f"cases row {row + 1}, column {column}: must be {kind} {bound}, got {raw.iloc[row]!r}"
        raise InvalidValueError(message)
    cases[column] = values.astype(np.int64) if required and integer else np.where(blank, np.nan, values)


def _modes(cases: pd.DataFrame) -> np.ndarray:
    has_batch = cases["batch"].notna().to_numpy()
    has_slo = (cases["tpot_slo_ms"].notna() | cases["ttft_slo_ms"].notna()).to_numpy()
    has_rate = cases["rate_req_s"].notna().to_numpy()
    inferred = np.where(has_batch, "batch", np.where(has_rate, "rate", np.where(has_slo, "slo", "offline")))
    if "mode" not in cases:
        return inferred
    given = cases["mode"].astype(object).where(cases["mode"].notna(), "").astype(str).str.strip().str.lower()
    unknown = ~given.isin(MODES + ("",))
    if unknown.any():
        row = int(np.flatnonzero(unknown.to_numpy())[0])
        message = f"cases row {row + 1}, column mode: must be one of {', '.join(MODES)}, got {cases['mode'].iloc[row]!r}"
        raise InvalidValueError(message)
    mode = np.where(given == "", inferred, given)
    for wanted, present, column in (("batch", has_batch, "batch"), ("rate", has_rate, "rate_req_s"),
                                    ("max_rate", has_slo, "tpot_slo_ms")):
        missing = (mode == wanted) & ~present
        if missing.any():
            row = int(np.flatnonzero(missing)[0])
            message = f"cases row {row + 1}, column {column}: mode '{wanted}' needs a {column}"
            raise InvalidValueError(message)
    return mode


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


def evaluate_load(c: ReplicaConstants, rows, cases: pd.DataFrame) -> Loaded | None:
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


def apply_load(table: pd.DataFrame, loaded: Loaded, c: ReplicaConstants, rows) -> pd.DataFrame:
    """Replace latency, throughput and cost of the load-mode rows by their values at the rate."""
    rate, state = loaded.rate, loaded.state
    served = np.where(state["stable"], rate, np.nan)
    updates = {
        "tpot_ms": state["tpot_ms"], "ttft_ms": state["ttft_ms"], "req_s": served,
        "output_tok_s": served * rows.output_len, "decode_tok_s": served * rows.output_len,
        "decode_tok_s_per_gpu": served * rows.output_len / c.gpus,
        "usd_per_m_output_tokens": throughput.usd_per_m_tokens(table["usd_per_hour"], served * rows.output_len),
        "usd_per_m_total_tokens": throughput.usd_per_m_tokens(
            table["usd_per_hour"], served * (rows.input_len + rows.output_len)),
        "usd_per_k_requests": throughput.usd_per_k_requests(table["usd_per_hour"], served),
        "rate_req_s": rate, "capacity_req_s": loaded.capacity,
        "utilization": throughput.safe_divide(rate, loaded.capacity),
        **{name: state[name] for name in list(LOAD_COLUMNS)[3:]},
    }
    chosen = ~np.isnan(rate)
    for name, values in updates.items():
        column = table[name].to_numpy(dtype=float, copy=True) if name in table else np.full(len(table), np.nan)
        column[chosen] = np.asarray(values, dtype=float)[chosen]
        table[name] = column
    return table
