"""Measured capacity profiles: the form serving benchmarks produce (Mélange, AIBrix).

CSV columns: ``gpu``, ``tp``, ``input_tokens``, ``output_tokens``, ``max_req_s`` (requests/s one
replica sustains under the SLO; 0 = cannot meet it); optional ``model``, ``quant``,
``workload`` (empty = any) and ``tpot_ms``, ``ttft_ms`` (measured latencies).

A row covers a workload bucket when its GPU is allowed, its model/quant/workload match (or are
empty) and the bucket's input and output lengths are at most the row's: the smallest covering
row is used (buckets are upper bounds, so lookups are conservative).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from fleetplan.catalogs.input_files import read_csv_table
from fleetplan.errors import ScenarioError, did_you_mean

REQUIRED = ("gpu", "tp", "input_tokens", "output_tokens", "max_req_s")
OPTIONAL_TEXT = ("model", "quant", "workload")
OPTIONAL_NUMBERS = ("tpot_ms", "ttft_ms")


#: Allowed range of each numeric column: a positive ``max_req_s`` below the lower bound is a
#: typo (1e-300 would make the fleet astronomically large), above the upper one a lost unit.
BOUNDS = {"tp": (1, 64), "input_tokens": (1, 10_000_000), "output_tokens": (1, 10_000_000),
          "max_req_s": (1e-3, 1e6), "tpot_ms": (0, 1e6), "ttft_ms": (0, 1e7)}


def read_profiles(path: str | Path, known_gpus=None) -> pd.DataFrame:
    """A validated profile table (one-line ScenarioError naming the row and column if not).

    ``known_gpus`` (catalog ids): a GPU outside it is an error with a "did you mean".
    """
    path = Path(path)
    where = f"capacity_profiles: {path}"
    table = read_csv_table(path, "capacity profile", error=ScenarioError, dtype=str, keep_default_na=False)
    table.columns = [c.strip().lower() for c in table.columns]
    missing = [c for c in REQUIRED if c not in table.columns]
    if missing:
        message = f"{where}: lacks the column {missing[0]} (required: {', '.join(REQUIRED)})"
        raise ScenarioError(message)
    for column in OPTIONAL_TEXT:
        table[column] = table[column].str.strip().str.lower() if column in table else ""
    table["gpu"] = table["gpu"].str.strip().str.lower()
    _check_gpus(table["gpu"], known_gpus, where)
    for column in ("tp", "input_tokens", "output_tokens", "max_req_s", *OPTIONAL_NUMBERS):
        table[column] = _numbers(table, column, where)
    return table


def _numbers(table: pd.DataFrame, column: str, where: str) -> pd.Series:
    if column not in table:
        return pd.Series(np.nan, index=table.index)
    raw = table[column].str.strip()
    values = pd.to_numeric(raw, errors="coerce")
    optional = column in OPTIONAL_NUMBERS
    low, high = BOUNDS[column]
    bad = (values.isna() & ~(optional & (raw == ""))) | (values < low) | (values > high)
    if column == "max_req_s":  # 0 says the configuration cannot meet the SLO
        bad = (values.isna() | (values > high) | ((values != 0) & ~(values >= low)))
        kind = f"0 (cannot meet the SLO) or a finite number >= {low:g} and <= {high:g}"
    elif optional:
        kind = f"a finite number >= {low:g} and <= {high:g}"
    else:
        bad |= values != values.round()
        kind = f"a whole number >= {low:g} and <= {high:g}"
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        message = f"{where}: row {row + 2}, column {column}: must be {kind}, got {raw.iloc[row]!r}"
        raise ScenarioError(message)
    return values


def _check_gpus(gpus: pd.Series, known, where: str) -> None:
    if known is None:
        return
    unknown = sorted(set(gpus) - set(known))
    if unknown:
        row = int(np.flatnonzero((gpus == unknown[0]).to_numpy())[0])
        message = f"{where}: row {row + 2}, column gpu: {did_you_mean(unknown[0], known, kind='gpu')}"
        raise ScenarioError(message)


def profile_candidates(profiles: pd.DataFrame, buckets: pd.DataFrame, names: dict,
                       workload_quants: dict[str, list[str]]) -> pd.DataFrame:
    """Candidate rows (engine-compatible columns) for every bucket a profile row covers."""
    allowed = profiles[profiles["gpu"].isin(names["gpus"])]
    pairs = buckets[["workload", "bucket", "model", "input_len", "output_len"]].merge(
        allowed.rename(columns={"model": "profile_model", "workload": "profile_workload"}),
        how="cross")
    allowed_quants = pd.DataFrame(
        [(w, q) for w, quants in workload_quants.items() for q in quants],
        columns=["workload", "quant"]).assign(quant_allowed=True)
    pairs = pairs.merge(allowed_quants, on=["workload", "quant"], how="left")
    quant_ok = pairs["quant_allowed"].eq(True) | (pairs["quant"] == "")
    covers = (((pairs["profile_model"] == "") | (pairs["profile_model"] == pairs["model"]))
              & ((pairs["profile_workload"] == "")
                 | (pairs["profile_workload"] == pairs["workload"].str.lower()))
              & quant_ok & (pairs["input_len"] <= pairs["input_tokens"])
              & (pairs["output_len"] <= pairs["output_tokens"]))
    pairs = pairs[covers]
    pairs = pairs.assign(quant=np.where(pairs["quant"] == "", "measured", pairs["quant"]))
    pairs = pairs.sort_values(["input_tokens", "output_tokens"], kind="stable").drop_duplicates(
        ["workload", "bucket", "gpu", "tp", "quant"])
    out = pairs[["workload", "bucket", "model", "gpu", "quant", "tp", "input_len", "output_len"]]
    out = out.assign(tp=pairs["tp"].astype(int), req_s_per_replica=pairs["max_req_s"],
                     batch=np.nan, tpot_ms=pairs["tpot_ms"], ttft_ms=pairs["ttft_ms"],
                     valid=pairs["max_req_s"] > 0, variant="base")
    out["reason"] = np.where(out["valid"], "", "measured capacity is 0 (cannot meet the SLO)")
    return out.reset_index(drop=True)


def uncovered_reasons(buckets: pd.DataFrame, candidates: pd.DataFrame) -> pd.DataFrame:
    """Buckets no profile row covers, with a reason."""
    covered = candidates[["workload", "bucket"]].drop_duplicates().assign(covered=True)
    table = buckets.merge(covered, on=["workload", "bucket"], how="left")
    table = table[table["covered"].isna()]
    reason = ("no measured capacity covers " + table["input_len"].astype(str) + " input / "
              + table["output_len"].astype(str) + " output tokens for " + table["model"])
    return table[["workload", "bucket"]].assign(reason=reason.to_numpy())
