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

from fleetplan.catalogs import Catalogs
from fleetplan.errors import ScenarioError, UnknownNameError, did_you_mean
from fleetplan.optimizer.problem_checks import MIN_REQ_S_PER_REPLICA
from fleetplan.optimizer.scenario import Scenario
from fleetplan.optimizer.slo_levels import slo_levels
from fleetplan.sweeps import estimate_cases
from fleetplan.sweeps.assumptions import check_engine

#: Columns of the candidate table the optimizer reads (plus ``variant`` for what-ifs).
#: How sure each candidate's capacity is (``fleetplan.sweeps.uncertainty``): measured, transferred or
#: prior efficiency rows, and the p10/p90 signed error [%] of held-out rows like it.
UNCERTAINTY_COLUMNS = ("calibration", "error_p10_pct", "error_p90_pct")
CANDIDATE_COLUMNS = ["workload", "bucket", "config", "route", "stage", "stages", "pool", "model",
                     "gpu", "quant", "tp", "input_len", "output_len", "tpot_slo_ms",
                     "ttft_slo_ms", "req_s_per_replica", "batch", "tpot_ms", "ttft_ms", "valid",
                     "reason", *UNCERTAINTY_COLUMNS]


def config_ids(model, gpu, quant, tp) -> pd.Series:
    """``model/gpu/quant/tpN`` ids (vectorized over Series)."""
    return model.astype(str) + "/" + gpu.astype(str) + "/" + quant.astype(str) + "/tp" + \
        tp.astype(int).astype(str)


def canonical_names(scenario: Scenario, catalogs: Catalogs) -> dict:
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
    engine = scenario.fleet.engine.strip().lower() if scenario.fleet.engine else None
    try:
        check_engine(catalogs.efficiency, engine)
    except UnknownNameError as problem:
        message = f"fleet.engine: {problem}"
        raise ScenarioError(message) from None
    return {"models": models, "quants": quants, "gpus": gpus, "engine": engine}


def fleet_gpu_id(catalogs: Catalogs, name: str, fleet_gpus: list[str], where: str) -> str:
    """The canonical id of ``name``, which must be one of the fleet's GPUs; a ScenarioError
    naming the field ``where`` otherwise (``fleet.sites[0].gpus[1]: unknown gpu 'x'; ...``)."""
    try:
        gpu = catalogs.require("gpu", [name])[0]
    except UnknownNameError as problem:
        message = f"{where}: {problem}"
        raise ScenarioError(message) from None
    if gpu not in fleet_gpus:
        message = f"{where}: {did_you_mean(name, fleet_gpus, kind='fleet GPU')}"
        raise ScenarioError(message)
    return gpu


def workload_slos(scenario: Scenario, names: dict) -> pd.DataFrame:
    """workload, pool, tpot_slo_ms, ttft_slo_ms (NaN = none): a pool is a model when replicas
    are shared, else the workload."""
    workloads = scenario.workloads
    return pd.DataFrame({
        "workload": [w.name for w in workloads],
        "pool": names["models"] if scenario.fleet.share_replicas else [w.name for w in workloads],
        "tpot_slo_ms": [np.nan if w.tpot_slo_ms is None else w.tpot_slo_ms for w in workloads],
        "ttft_slo_ms": [np.nan if w.ttft_slo_ms is None else w.ttft_slo_ms for w in workloads]})


def slo_variants(scenario: Scenario, names: dict) -> list[tuple[str, pd.DataFrame]]:
    """(variant, workload SLO levels): ``base``, and with what-if re-solves one
    ``relaxed:<workload>`` per workload with a TPOT SLO: its pool's levels with that workload's
    TPOT SLO loosened by the what-if factor."""
    slos = workload_slos(scenario, names)
    variants = [("base", slo_levels(slos))]
    if not scenario.what_if.enabled:
        return variants
    for workload, pool, tpot in zip(slos["workload"], slos["pool"], slos["tpot_slo_ms"]):
        if np.isnan(tpot):
            continue
        looser = slos[slos["pool"] == pool].copy()
        looser.loc[looser["workload"] == workload, "tpot_slo_ms"] = \
            tpot * scenario.what_if.tpot_slo_factor
        variants.append((f"relaxed:{workload}", slo_levels(looser)))
    return variants


def bucket_cases(scenario: Scenario, buckets: pd.DataFrame, names: dict) -> pd.DataFrame:
    """Every (workload bucket, quant, SLO level) with the level's SLOs, for the base scenario
    and each what-if variant (see ``slo_levels``)."""
    per_workload = pd.DataFrame({
        "workload": [w.name for w in scenario.workloads], "model": names["models"],
        "quant": names["quants"]}).explode("quant")
    sizes = buckets.drop(columns=["model", "req_s", "share", "tpot_slo_ms", "ttft_slo_ms"])
    cases = pd.concat([sizes.merge(levels, on="workload").assign(variant=variant)
                       for variant, levels in slo_variants(scenario, names)], ignore_index=True)
    cases = cases.merge(per_workload, on="workload")
    if scenario.fleet.engine is not None:
        cases["engine"] = names["engine"]
    return cases


def node_sizes(scenario: Scenario, gpu_ids: list[str], catalog_gpus: pd.DataFrame) -> pd.Series:
    """GPUs per node of each allowed GPU type (``gpu_ids``: canonical ids in ``fleet.gpus``
    order) [GPUs]: the scenario's own ``gpus_per_node`` where given, else the catalog's. It caps
    the TP degree of a replica, whether or not the plan buys whole nodes."""
    catalog = catalog_gpus["gpus_per_node"].reindex(gpu_ids).to_numpy(dtype=float)
    own = np.array([np.nan if o.gpus_per_node is None else o.gpus_per_node
                    for o in scenario.fleet.gpus], dtype=float)
    return pd.Series(np.where(np.isnan(own), catalog, own), index=gpu_ids)


def replica_options(gpus: list[str], tps: list[int], gpus_per_node: pd.Series) -> pd.DataFrame:
    """(gpu, tp) pairs; TP degrees larger than a GPU's node are left out (TP stays in a node)."""
    options = pd.DataFrame({"gpu": gpus}).merge(pd.DataFrame({"tp": tps}), how="cross")
    return options[options["tp"] <= options["gpu"].map(gpus_per_node).fillna(np.inf)]


def engine_cases(scenario: Scenario, buckets: pd.DataFrame, names: dict,
                 gpus_per_node: pd.Series) -> pd.DataFrame:
    """Every (workload bucket, GPU, quant, TP) case, and a looser-TPOT variant per workload."""
    configs = replica_options(names["gpus"], scenario.fleet.tp, gpus_per_node)
    if configs.empty:
        nodes = ", ".join(f"{gpu} {int(gpus_per_node[gpu])}" for gpu in names["gpus"])
        message = (f"fleet.tp: no allowed TP degree ({', '.join(map(str, scenario.fleet.tp))}) fits "
                   f"in one node of an allowed GPU (GPUs per node: {nodes}); tensor parallelism "
                   f"stays inside a node")
        raise ScenarioError(message)
    cases = bucket_cases(scenario, buckets, names).merge(configs, how="cross")
    has_slo = cases["tpot_slo_ms"].notna() | cases["ttft_slo_ms"].notna()
    with_slo = "max_rate" if scenario.fleet.capacity_model == "load" else "slo"
    cases["mode"] = np.where(has_slo, with_slo, "offline")
    return cases.reset_index(drop=True)


def from_engine(cases: pd.DataFrame, catalogs: Catalogs, estimate=None,
                capacity_quantile: str = "p50") -> pd.DataFrame:
    """Run the cases through the performance engine in one call; candidate columns out
    (capacities at ``capacity_quantile`` of the calibration error band)."""
    if estimate is None:
        quantile = {} if capacity_quantile == "p50" else {"capacity_quantile": capacity_quantile}
        result = estimate_cases(cases, catalogs, **quantile)
    else:
        result = estimate(cases, catalogs)
    valid = result["valid"].astype(bool) & result["fits"].astype(bool) \
        if "fits" in result else result["valid"].astype(bool)
    capacity = np.where(valid, result["req_s"].to_numpy(dtype=float), 0.0)
    out = cases[["workload", "bucket", "model", "gpu", "quant", "tp", "input_len", "output_len",
                 "tpot_slo_ms", "ttft_slo_ms", "level", "variant"]].reset_index(drop=True).copy()
    out["req_s_per_replica"] = np.nan_to_num(capacity)
    for column in ("batch", "tpot_ms", "ttft_ms"):
        out[column] = result[column].to_numpy() if column in result else np.nan
    out["valid"] = valid.to_numpy()
    out["reason"] = result["reason"].astype(str).replace({"nan": ""}).to_numpy() \
        if "reason" in result else ""
    for column in UNCERTAINTY_COLUMNS:
        if column in result:
            out[column] = result[column].to_numpy()
    return out


def finish(candidates: pd.DataFrame, share_replicas: bool) -> pd.DataFrame:
    """Add config, route and pool ids; a pool is a model (shared) or a workload (not shared).

    A colocated configuration is its own route; the two stages of a disaggregated pair share
    the route ``model/quant/prefill-gpu-tpN>decode-gpu-tpM`` and are configurations
    ``<route>#prefill`` and ``<route>#decode``. A configuration run at one of several SLO levels
    of its pool has the level appended (``...@tpot40ms``).
    """
    candidates = candidates.copy()
    level = candidates["level"].fillna("") if "level" in candidates \
        else pd.Series("", candidates.index)
    config = config_ids(candidates["model"], candidates["gpu"], candidates["quant"],
                        candidates["tp"]) + level
    stage = candidates["stage"].fillna("serve") if "stage" in candidates \
        else pd.Series("serve", candidates.index)
    staged = (stage != "serve").to_numpy()
    route = config.copy()
    if staged.any():
        pairs = candidates[staged]
        route[staged] = (pairs["model"].astype(str) + "/" + pairs["quant"].astype(str) + "/"
                         + pairs["prefill_gpu"].astype(str) + "-tp"
                         + pairs["prefill_tp"].astype(int).astype(str) + ">"
                         + pairs["decode_gpu"].astype(str) + "-tp"
                         + pairs["decode_tp"].astype(int).astype(str) + level[staged])
        config[staged] = route[staged] + "#" + stage[staged]
    candidates["stage"], candidates["stages"] = stage, np.where(staged, 2, 1)
    # a replica serving under 3.6 requests an hour (a huge prompt on a slow GPU) is unusable:
    # thousands of them per request/s, and a coefficient the solver cannot take
    trickle = candidates["req_s_per_replica"].to_numpy(dtype=float) < MIN_REQ_S_PER_REPLICA
    candidates["req_s_per_replica"] = np.where(trickle, 0.0, candidates["req_s_per_replica"])
    if share_replicas:
        candidates["config"], candidates["route"] = config, route
        candidates["pool"] = candidates["model"].astype(str)
    else:
        candidates["config"] = candidates["workload"] + ":" + config
        candidates["route"] = candidates["workload"] + ":" + route
        candidates["pool"] = candidates["workload"]
    columns = [c for c in CANDIDATE_COLUMNS if c in candidates] + ["variant"]
    return candidates[columns].reset_index(drop=True)
