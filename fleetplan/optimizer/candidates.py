"""Candidate capacities: for each workload bucket and (GPU, quantization, TP) configuration,
the requests/s one replica serves at the knee that meets the workload's SLOs.

All cases (every workload bucket x GPU x quant x TP, plus the looser-SLO variants used for
what-if re-solves) go to the performance engine in ONE vectorized ``estimate_cases`` call.
Measured capacity profiles (``capacity_profiles.py``) replace the engine when a scenario has
them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.errors import ScenarioError, UnknownNameError
from fleetplan.optimizer.scenario import Scenario

#: Columns of the candidate table the optimizer reads (plus ``variant`` for what-ifs).
CANDIDATE_COLUMNS = ["workload", "bucket", "config", "pool", "model", "gpu", "quant", "tp",
                     "input_len", "output_len", "req_s_per_replica", "batch", "tpot_ms",
                     "ttft_ms", "valid", "reason"]


def config_ids(model, gpu, quant, tp) -> pd.Series:
    """``model/gpu/quant/tpN`` ids (vectorized over Series)."""
    return model.astype(str) + "/" + gpu.astype(str) + "/" + quant.astype(str) + "/tp" + \
        tp.astype(int).astype(str)


def canonical_names(scenario: Scenario, catalogs) -> dict:
    """Canonical catalog ids of the scenario's models, quants and GPUs; an unknown id raises a
    ScenarioError naming its field (``workloads[1].model: unknown model 'x'; did you mean``)."""
    def require(kind, names, path):
        try:
            return catalogs.require(kind, names)
        except UnknownNameError as problem:
            message = f"{path}: {problem}"
            raise ScenarioError(message) from None

    models = [require("model", [w.model], f"workloads[{i}].model")[0]
              for i, w in enumerate(scenario.workloads)]
    quants = [require("quant", w.quants, f"workloads[{i}].quants")
              for i, w in enumerate(scenario.workloads)]
    gpus = [require("gpu", [g.id], f"fleet.gpus[{i}].id")[0]
            for i, g in enumerate(scenario.fleet.gpus)]
    return {"models": models, "quants": quants, "gpus": gpus}


def engine_cases(scenario: Scenario, buckets: pd.DataFrame, names: dict,
                 gpus_per_node: pd.Series) -> pd.DataFrame:
    """Every (workload bucket, GPU, quant, TP) case, and a looser-TPOT variant per workload.

    TP degrees larger than a GPU's node are left out (tensor parallelism stays in one node).
    """
    per_workload = pd.DataFrame({
        "workload": [w.name for w in scenario.workloads], "model": names["models"],
        "quant": names["quants"]}).explode("quant")
    configs = pd.DataFrame({"gpu": names["gpus"]}).merge(
        pd.DataFrame({"tp": scenario.fleet.tp}), how="cross")
    configs = configs[configs["tp"] <= configs["gpu"].map(gpus_per_node).fillna(np.inf)]
    cases = buckets.drop(columns=["model", "req_s", "share"]).merge(per_workload, on="workload")
    cases = cases.merge(configs, how="cross").assign(variant="base")
    if scenario.what_if.enabled:
        looser = cases[cases["tpot_slo_ms"].notna()].assign(variant="tpot_relaxed")
        looser["tpot_slo_ms"] = looser["tpot_slo_ms"] * scenario.what_if.tpot_slo_factor
        cases = pd.concat([cases, looser], ignore_index=True)
    has_slo = cases["tpot_slo_ms"].notna() | cases["ttft_slo_ms"].notna()
    with_slo = "max_rate" if scenario.fleet.capacity_model == "load" else "slo"
    cases["mode"] = np.where(has_slo, with_slo, "offline")
    return cases.reset_index(drop=True)


def from_engine(cases: pd.DataFrame, catalogs, estimate=None) -> pd.DataFrame:
    """Run the cases through the performance engine in one call; candidate columns out."""
    if estimate is None:
        from fleetplan.sweeps import estimate_cases as estimate
    result = estimate(cases, catalogs)
    valid = result["valid"].astype(bool) & result["fits"].astype(bool) \
        if "fits" in result else result["valid"].astype(bool)
    capacity = np.where(valid, result["req_s"].to_numpy(dtype=float), 0.0)
    out = cases[["workload", "bucket", "model", "gpu", "quant", "tp", "input_len", "output_len",
                 "variant"]].reset_index(drop=True).copy()
    out["req_s_per_replica"] = np.nan_to_num(capacity)
    for column in ("batch", "tpot_ms", "ttft_ms"):
        out[column] = result[column].to_numpy() if column in result else np.nan
    out["valid"] = valid.to_numpy()
    out["reason"] = result["reason"].astype(str).replace({"nan": ""}).to_numpy() \
        if "reason" in result else ""
    return out


def finish(candidates: pd.DataFrame, share_replicas: bool) -> pd.DataFrame:
    """Add config and pool ids; a pool is a model (shared) or a workload (not shared)."""
    candidates = candidates.copy()
    config = config_ids(candidates["model"], candidates["gpu"], candidates["quant"],
                        candidates["tp"])
    if share_replicas:
        candidates["config"], candidates["pool"] = config, candidates["model"].astype(str)
    else:
        candidates["config"] = candidates["workload"] + ":" + config
        candidates["pool"] = candidates["workload"]
    columns = [c for c in CANDIDATE_COLUMNS if c in candidates] + ["variant"]
    return candidates[columns].reset_index(drop=True)

