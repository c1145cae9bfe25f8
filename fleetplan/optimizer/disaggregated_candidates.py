"""Disaggregated candidates: prefill/decode pairs the optimizer may route a workload bucket to.

For every (workload bucket, quant, prefill GPU and TP, decode GPU and TP) the performance model's
``disaggregated`` gives what one replica of each pool serves under the workload's SLOs: the
decode replica at its knee under the TPOT SLO, the prefill replica at the utilization its TTFT
SLO allows (with the KV transfer and the first decode step in TTFT). Each pair becomes two
candidate rows, one per stage, that the MILP loads together from one routing share.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.errors import ScenarioError
from fleetplan.optimizer.candidates import bucket_cases, fleet_gpu_id, node_sizes, replica_options
from fleetplan.optimizer.scenario import Scenario
from fleetplan.sweeps.disaggregation import disaggregated

logger = logging.getLogger(__name__)

_STAGE_COLUMNS = {"prefill": ("prefill_gpu", "prefill_tp", "prefill_req_s"),
                  "decode": ("decode_gpu", "decode_tp", "decode_req_s")}


def pool_gpus(scenario: Scenario, catalogs: Catalogs, fleet_gpus: list[str]) -> dict[str, list[str]]:
    """Canonical prefill and decode GPU ids, each one of the fleet's GPUs (a ScenarioError naming
    the field otherwise)."""
    options = scenario.fleet.disaggregation
    chosen = {}
    for side in ("prefill", "decode"):
        given = getattr(options, f"{side}_gpus")
        if given is None:
            chosen[side] = list(fleet_gpus)
            continue
        chosen[side] = [fleet_gpu_id(catalogs, name, fleet_gpus,
                                     f"fleet.disaggregation.{side}_gpus[{index}]")
                         for index, name in enumerate(given)]
    return chosen


def pair_cases(scenario: Scenario, buckets: pd.DataFrame, names: dict, pools: dict,
               gpus_per_node: pd.Series) -> pd.DataFrame:
    """Every (workload bucket, quant, variant) crossed with every (prefill, decode) pair."""
    options, fleet_tp = scenario.fleet.disaggregation, scenario.fleet.tp
    sides = []
    for side in ("prefill", "decode"):
        tps = getattr(options, f"{side}_tp") or fleet_tp
        sides.append(replica_options(pools[side], tps, gpus_per_node).rename(
            columns={"gpu": f"{side}_gpu", "tp": f"{side}_tp"}))
    pairs = sides[0].merge(sides[1], how="cross")
    cases = bucket_cases(scenario, buckets, names).merge(pairs, how="cross")
    logger.info("%d disaggregated cases (%d pairs)", len(cases), len(pairs))
    return cases.reset_index(drop=True)


def from_pairs(cases: pd.DataFrame, catalogs: Catalogs, capacity_model: str) -> pd.DataFrame:
    """Two candidate rows per pair, one per stage, with engine-compatible columns."""
    if cases.empty:
        return pd.DataFrame()
    result = disaggregated(cases.drop(columns=["variant", "workload", "bucket", "level"]), catalogs,
                           capacity_model=capacity_model)
    valid = result["valid"].to_numpy(dtype=bool)
    keep = ["workload", "bucket", "model", "quant", "input_len", "output_len", "tpot_slo_ms",
            "ttft_slo_ms", "level", "variant", "prefill_gpu", "prefill_tp", "decode_gpu",
            "decode_tp"]
    common = cases[keep].reset_index(drop=True).assign(
        batch=result["decode_batch"].to_numpy(dtype=float),
        tpot_ms=result["tpot_ms"].to_numpy(dtype=float),
        ttft_ms=result["ttft_ms"].to_numpy(dtype=float), valid=valid,
        reason=result["reason"].astype(str).to_numpy())
    stages = []
    for stage, (gpu, tp, capacity) in _STAGE_COLUMNS.items():
        req_s = np.where(valid, np.nan_to_num(result[capacity].to_numpy(dtype=float)), 0.0)
        stages.append(common.assign(stage=stage, gpu=common[gpu], tp=common[tp].astype(int),
                                    req_s_per_replica=req_s))
    return pd.concat(stages, ignore_index=True)


def disaggregated_candidates(scenario: Scenario, catalogs: Catalogs, buckets: pd.DataFrame,
                             names: dict) -> pd.DataFrame:
    """The candidate rows of every prefill/decode pair the scenario allows (empty if none)."""
    if scenario.fleet.disaggregation is None:
        return pd.DataFrame()
    if scenario.capacity_profiles is not None:
        message = ("fleet.disaggregation: not available with capacity_profiles (measured "
                   "capacities are for whole replicas)")
        raise ScenarioError(message)
    gpus_per_node = catalogs.gpus["gpus_per_node"].astype(float)  # pools may name other GPUs
    gpus_per_node.update(node_sizes(scenario, names["gpus"], catalogs.gpus))
    pools = pool_gpus(scenario, catalogs, names["gpus"])
    cases = pair_cases(scenario, buckets, names, pools, gpus_per_node)
    return from_pairs(cases, catalogs, scenario.fleet.capacity_model)
