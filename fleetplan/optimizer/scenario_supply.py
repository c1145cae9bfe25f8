"""Supply beyond rented GPUs, from a scenario: sites with power envelopes and hosted APIs as
Problem tables (``power_envelope.py``, ``hosted_apis.py``).

Power per GPU: the ownership catalog's server power divided by its GPUs where it has the GPU
type (``node_power_kw / gpus_per_node``, host included), else the gpus catalog's board power
plus the documented host share (``power_envelope.HOST_SHARE_OF_BOARD_POWER``).
"""

from __future__ import annotations

import math

import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.errors import ScenarioError, UnknownNameError
from fleetplan.optimizer.candidates import fleet_gpu_id
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.hosted_apis import api_candidates
from fleetplan.optimizer.power_envelope import (
    kw_per_gpu_from_board_power,
    kw_per_gpu_from_node_power,
)
from fleetplan.optimizer.scenario import Scenario

_EMPTY = Problem.__dataclass_fields__


def _empty(name: str) -> pd.DataFrame:
    return _EMPTY[name].default_factory()


def kw_per_gpu(catalogs: Catalogs, gpus: list[str]) -> pd.Series:
    """IT kW per GPU of each GPU id (module docstring); NaN when neither catalog knows it."""
    owned = catalogs.ownership.drop_duplicates("gpu").set_index("gpu")
    node = kw_per_gpu_from_node_power(owned["node_power_kw"], owned["gpus_per_node"])
    node = pd.Series(node, index=owned.index).reindex(gpus)
    board = pd.Series(kw_per_gpu_from_board_power(
        catalogs.gpus["tdp_w"].reindex(gpus).to_numpy(float)), index=gpus)
    return node.fillna(board)


def _site_gpu_ids(scenario: Scenario, catalogs: Catalogs, index: int,
                  fleet_gpus: list[str]) -> list[str]:
    site = scenario.fleet.sites[index]
    if site.gpus is None:
        return fleet_gpus
    return [fleet_gpu_id(catalogs, gpu, fleet_gpus, f"fleet.sites[{index}].gpus[{position}]")
            for position, gpu in enumerate(site.gpus)]


def site_tables(scenario: Scenario, catalogs: Catalogs, fleet_gpus: list[str]) -> dict:
    """``sites`` and ``site_gpus`` Problem tables (empty without ``fleet.sites``)."""
    sites = scenario.fleet.sites
    if not sites:
        return {"sites": _empty("sites"), "site_gpus": _empty("site_gpus")}
    power = kw_per_gpu(catalogs, fleet_gpus)
    rows = []
    for index, site in enumerate(sites):
        for gpu in _site_gpu_ids(scenario, catalogs, index, fleet_gpus):
            if not math.isfinite(power[gpu]):
                message = (f"fleet.sites[{index}]: no power figure for GPU '{gpu}' (neither "
                           "node_power_kw in the ownership catalog nor tdp_w in the gpus "
                           "catalog); add one in a catalog override")
                raise ScenarioError(message)
            rows += [(site.name, gpu, pricing, float(power[gpu])) for pricing in site.pricing]
    return {"sites": pd.DataFrame({"site": [s.name for s in sites], "kw": [s.kw for s in sites],
                                   "pue": [s.pue for s in sites]}),
            "site_gpus": pd.DataFrame(rows, columns=["site", "gpu", "pricing_type",
                                                     "kw_per_gpu"])}


def api_table(scenario: Scenario, catalogs: Catalogs) -> pd.DataFrame:
    """One row per ``fleet.apis`` entry, its model a canonical catalog id."""
    rows = []
    for index, api in enumerate(scenario.fleet.apis):
        try:
            model = catalogs.require("model", [api.model])[0]
        except UnknownNameError as problem:
            message = f"fleet.apis[{index}].model: {problem}"
            raise ScenarioError(message) from None
        rows.append({"api": api.name, "provider": api.provider, "model": model,
                     "usd_per_1m_input_tokens": api.usd_per_1m_input_tokens,
                     "usd_per_1m_output_tokens": api.usd_per_1m_output_tokens,
                     "max_requests_per_min": _number(api.max_requests_per_min),
                     "max_tokens_per_min": _number(api.max_tokens_per_min),
                     "ttft_ms": _number(api.ttft_ms), "tpot_ms": _number(api.tpot_ms),
                     "source": api.source, "as_of": api.as_of.isoformat()})
    return pd.DataFrame(rows)


def _number(value: float | None) -> float:
    return math.nan if value is None else float(value)


def api_tables(scenario: Scenario, catalogs: Catalogs, workloads: pd.DataFrame,
               buckets: pd.DataFrame) -> dict:
    """``apis`` and ``api_candidates`` Problem tables (empty without ``fleet.apis``);
    ``workloads``: workload, model, ttft_slo_ms, tpot_slo_ms; ``buckets``: workload, bucket,
    input_len, output_len."""
    if not scenario.fleet.apis:
        return {"apis": _empty("apis"), "api_candidates": _empty("api_candidates")}
    apis = api_table(scenario, catalogs)
    candidates = api_candidates(apis, workloads, buckets)
    return {"apis": apis, "api_candidates": candidates}


def supply_tables(scenario: Scenario, catalogs: Catalogs, fleet_gpus: list[str],
                  workloads: pd.DataFrame, buckets: pd.DataFrame) -> dict:
    """Every supply table of the Problem from ``scenario`` (keyword arguments of Problem)."""
    return {**site_tables(scenario, catalogs, fleet_gpus),
            **api_tables(scenario, catalogs, workloads, buckets)}


def supply_notes(tables: dict) -> list[str]:
    """Notes on APIs that serve no workload (wrong model or SLOs out of reach)."""
    apis, candidates = tables["apis"], tables["api_candidates"]
    if apis.empty:
        return []
    idle = sorted(set(apis["api"]) - set(candidates["api"]))
    return [f"api {name} serves no workload: no workload of its model, or its TTFT/TPOT "
            "misses every such workload's SLO" for name in idle]

