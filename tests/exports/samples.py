"""Sample sweeps and scenarios for export tests, and workbook inspection."""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import openpyxl
import pandas as pd

from fleetplan.sweeps.columns import SWEEP_COLUMNS
from fleetplan.sweeps.model_validation import compare, read_measurements

PRICES = {"h100-sxm": 2.5, "a100-80gb-sxm": 1.75, "l4": 0.7}
ERROR_VALUES = ("#REF!", "#NAME?", "#N/A", "#VALUE!", "#DIV/0!", "#NUM!", "#NULL!")


def synthetic_sweep(gpus=tuple(PRICES), batches=(1, 8, 32, 64, 128), tps=(1, 2),
                    prices=PRICES) -> pd.DataFrame:
    """A small sweep table with SWEEP_COLUMNS and costs computed by the engine's formulas."""
    grid = pd.MultiIndex.from_product([list(gpus), list(tps), list(batches)],
                                      names=["gpu", "tp", "batch"]).to_frame(index=False)
    slow = grid["gpu"].map({"l4": 2.0}).fillna(1.0).to_numpy()
    tpot = 5.0 + grid["batch"].to_numpy() * 0.2 * slow / grid["tp"].to_numpy()
    decode = grid["batch"].to_numpy() * 1e3 / tpot
    frame = grid.assign(
        model="llama-3.1-8b", quant="bf16", kv_quant="bf16", context_len=2048, input_len=1024,
        output_len=256, weight_gb=16.06 / grid["tp"], kv_gb=grid["batch"] * 0.134,
        memory_gb=16.06 / grid["tp"] + grid["batch"] * 0.134, max_batch=208,
        fits=grid["batch"] <= 64, valid=True, reason="", bound="memory", tpot_ms=tpot,
        ttft_ms=tpot * 3.0, decode_tok_s=decode, decode_tok_s_per_gpu=decode / grid["tp"],
        prefill_tok_s=30_000.0, output_tok_s=decode * 0.9, req_s=decode * 0.9 / 256,
        usd_per_hour=grid["gpu"].map(prices).to_numpy(dtype=float) * grid["tp"])
    frame.loc[~frame["fits"], "reason"] = "KV cache does not fit: batch above max_batch"
    frame["usd_per_m_output_tokens"] = frame.usd_per_hour * 1e6 / (frame.output_tok_s * 3600)
    frame["usd_per_m_total_tokens"] = frame.usd_per_hour * 1e6 / (
        frame.req_s * (frame.input_len + frame.output_len) * 3600)
    frame["usd_per_k_requests"] = frame.usd_per_hour * 1e3 / (frame.req_s * 3600)
    frame["calibration"] = pd.Categorical(np.where(frame["gpu"] == "l4", "prior", "measured"),
                                          categories=["measured", "transferred", "prior"])
    frame["error_p10_pct"] = np.where(frame["gpu"] == "l4", -11.2, -17.0)
    frame["error_p90_pct"] = np.where(frame["gpu"] == "l4", 31.4, 24.4)
    columns = {name: frame[name].astype(column.dtype) for name, column in SWEEP_COLUMNS.items()}
    return pd.DataFrame(columns)


def hostile_sweep() -> pd.DataFrame:
    """A sweep whose names are spreadsheet formulas, as a malicious catalog override would be."""
    frame = synthetic_sweep(gpus=("l4", "h100-sxm"), batches=(1, 16))
    gpu = frame["gpu"].astype(str).replace({"l4": '=HYPERLINK("http://x","y")'})
    frame["gpu"] = gpu.astype("category")
    frame["model"] = pd.Categorical(np.where(frame.index % 2 == 0, "@SUM(1)", "+1+2"))
    frame["reason"] = pd.Categorical(np.where(frame.index % 3 == 0, "=1/0", "-2+3"))
    frame["id"] = [f"=cmd|' /C calc'!A{i}" for i in range(len(frame))]
    return frame


def formula_cells(path: Path) -> dict[tuple[str, str], str]:
    """Every formula cell of a workbook: ``{(sheet, coordinate): formula text}``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        book = openpyxl.load_workbook(path)
    return {(ws.title, cell.coordinate): cell.value
            for ws in book.worksheets for row in ws.iter_rows() for cell in row
            if cell.data_type == "f"}


def cell_values(path: Path) -> dict[tuple[str, str], object]:
    """Every non-empty value (cached results for formulas) of a workbook."""
    with warnings.catch_warnings():  # LibreOffice's extensions (data bars) are not read
        warnings.simplefilter("ignore", UserWarning)
        book = openpyxl.load_workbook(path, data_only=True)
    return {(ws.title, cell.coordinate): cell.value
            for ws in book.worksheets for row in ws.iter_rows() for cell in row
            if cell.value is not None}


def error_cells(values: dict[tuple[str, str], object]) -> dict[tuple[str, str], object]:
    """Cells showing a spreadsheet error (Excel's #... or LibreOffice's Err:...)."""
    return {key: value for key, value in values.items() if isinstance(value, str)
            and (value in ERROR_VALUES or value.startswith("Err:"))}


def assert_recalculation_matches(original: Path, recalculated: Path) -> int:
    """Each formula's recalculated value equals fleetplan's cached value (rel 1e-9).

    Returns the number of formula cells compared.
    """
    formulas = formula_cells(original)
    python = cell_values(original)
    spreadsheet = cell_values(recalculated)
    assert not error_cells(spreadsheet)
    mismatches = []
    for key, formula in formulas.items():
        expected, actual = python.get(key), spreadsheet.get(key)
        if not (isinstance(expected, (int, float)) and isinstance(actual, (int, float))
                and math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12)):
            mismatches.append((key, formula, expected, actual))
    assert not mismatches, mismatches[:5]
    return len(formulas)


HOURLY = [0.5] * 8 + [1.5] * 8 + [1.0] * 8

#: Two models on three GPU types with an hourly profile (what-if re-solves on).
EXAMPLE_SCENARIO = {
    "name": "exports example",
    "description": "chat and summarization on H100, A100 and L4",
    "workloads": [
        {"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 40, "input_tokens": 1000,
         "output_tokens": 250, "tpot_slo_ms": 40, "ttft_slo_ms": 1000, "hourly_profile": HOURLY},
        {"name": "summarize", "model": "llama-3.1-70b", "requests_per_s": 3,
         "input_tokens": 3000, "output_tokens": 400, "tpot_slo_ms": 60, "quants": ["bf16", "fp8"]},
    ],
    "fleet": {"gpus": ["h100-sxm", "a100-80gb-sxm", "l4"], "tp": [1, 2, 4, 8]},
}

#: Whole nodes, spot and reserved prices, growth, shared replicas, spare and idle GPUs, and
#: names that are spreadsheet formulas.
STRESS_SCENARIO = {
    "name": '=HYPERLINK("http://x","y")',
    "description": "@SUM(1)",
    "workloads": [
        {"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 12, "input_tokens": 1000,
         "output_tokens": 250, "tpot_slo_ms": 40, "hourly_profile": HOURLY,
         "monthly_growth": 0.2, "redundancy_k": 1},
        {"name": "batch-jobs", "model": "llama-3.1-8b", "requests_per_s": 4,
         "input_tokens": 2000, "output_tokens": 200},
    ],
    "fleet": {
        "gpus": [{"id": "h100-sxm", "gpus_per_node": 4,
                  "usd_per_gpu_hour": {"on_demand": 2.95, "reserved_1y": 2.1}},
                 {"id": "l4", "gpus_per_node": 2,
                  "usd_per_gpu_hour": {"on_demand": 0.8, "spot": 0.35}}],
        "pricing": ["on_demand", "reserved_1y", "spot"], "tp": [1], "whole_nodes": True,
        "horizon_months": 3, "spot_max_share": 0.5},
    "what_if": {"enabled": False},
}

#: Nothing can be served: TPOT SLOs below what L4 achieves, a model that does not fit.
INFEASIBLE_SCENARIO = {
    "workloads": [
        {"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 100, "input_tokens": 1000,
         "output_tokens": 250, "tpot_slo_ms": 40},
        {"name": "fast", "model": "llama-3.1-70b", "requests_per_s": 1, "input_tokens": 100,
         "output_tokens": 100, "tpot_slo_ms": 2}],
    "fleet": {"gpus": [{"id": "l4", "max_gpus": 2}], "tp": [1]},
    "what_if": {"enabled": False},
}


#: Long prompts under a tight TPOT SLO: prefill on H100, decode on H200 beats colocation.
DISAGGREGATED_SCENARIO = {
    "name": "disaggregated",
    "workloads": [
        {"name": "rag", "model": "llama-3.1-70b", "requests_per_s": 6, "input_tokens": 6000,
         "output_tokens": 300, "tpot_slo_ms": 50, "ttft_slo_ms": 3000, "quants": ["fp8"]}],
    "fleet": {"gpus": ["h100-sxm", "h200"], "tp": [1, 2], "disaggregation": {}},
}


def expanded_keys(cell: str) -> list[str]:
    """The keys a Sources cell stands for (``a/{b,c}`` is ``a/b`` and ``a/c``)."""
    keys = []
    for part in re.findall(r"[^,{}]*\{[^}]*\}|[^,]+", cell):
        part = part.strip(", ")
        found = re.fullmatch(r"(.*)\{(.*)\}", part)
        keys += [found.group(1) + last for last in found.group(2).split(",")] if found else [part]
    return keys


def make_plan(scenario: dict):
    """Optimize a scenario dict into a FleetPlan."""
    from fleetplan.optimizer.scenario import Scenario
    from fleetplan.optimizer.scenario_planning import plan_scenario

    with warnings.catch_warnings():  # PuLP's own deprecation notices are not ours to test
        warnings.simplefilter("ignore", DeprecationWarning)
        return plan_scenario(Scenario.model_validate(scenario))


#: The workload of the rent-or-buy samples: a 70B model at 50 requests/s under SLOs.
COMPARE_WORKLOAD = {"model": "llama-3.1-70b", "quant": "fp8", "input_len": 1000, "output_len": 300,
                    "tpot_slo_ms": 40.0, "ttft_slo_ms": 1000.0, "demand_req_s": 50.0}


def compare_table(catalogs, gpus=("h100-sxm", "h200", "mi300x", "b200"), **options) -> pd.DataFrame:
    """The rent-or-buy comparison of COMPARE_WORKLOAD on ``gpus`` (``options``: ``compare``'s)."""
    from fleetplan.sweeps.rent_or_buy import compare

    return compare(COMPARE_WORKLOAD, list(gpus), catalogs, **options)


def whatif_results() -> tuple[pd.DataFrame, list[str]]:
    """Result rows of a what-if grid that varies one input at a time (as ``run_grid`` returns
    them), and its axes: costs are made up, shaped like a real grid's."""
    cases = [("base", {}, 30_000.0), ("demand-low", {"demand_multiplier": 0.7}, 22_500.0),
             ("demand-high", {"demand_multiplier": 1.5}, 44_000.0), ("tpot-tight", {"tpot_slo_ms": 30.0}, 39_000.0),
             ("tpot-loose", {"tpot_slo_ms": 80.0}, 27_900.0), ("short", {"input_tokens": 600}, 25_100.0),
             ("long", {"input_tokens": 2400}, 36_400.0), ("fails", {"tpot_slo_ms": 1.0}, float("nan"))]
    axes = ["demand_multiplier", "tpot_slo_ms", "input_tokens"]
    rows = []
    for name, change, cost in cases:
        solved = not math.isnan(cost)
        rows.append({"name": name, **{axis: change.get(axis, np.nan) for axis in axes}, "case_id": name,
                     "status": "optimal" if solved else "infeasible", "gap": 0.0042 if solved else np.nan,
                     "usd_per_month": cost, "usd_per_year": cost * 12, "usd_per_m_tokens": cost / 4.2e5,
                     "gpus_peak": round(cost / 1500.0) if solved else np.nan, "served_fraction_min": 1.0 if solved else 0.4,
                     "solve_seconds": 1.25, "message": "" if solved else "TPOT SLO 1 ms is below the best achievable",
                     "gpus_h100-sxm": round(cost / 2000.0) if solved else np.nan})
    return pd.DataFrame(rows), axes


def validation_rows(catalogs, rows: int | None = 240) -> pd.DataFrame:
    """Predicted against measured for the first ``rows`` rows of the shipped measurements (all
    of them with None)."""
    measured = Path(__file__).resolve().parents[2] / "fleetplan" / "sweeps" / "data" / "measured.csv"
    table = read_measurements([measured])
    return compare(table if rows is None else table.head(rows), catalogs)
