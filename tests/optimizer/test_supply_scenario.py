"""fleet.sites and fleet.apis in scenario files: one-line errors naming the field, and the
Problem tables they become (power per GPU from the catalogs, API prices per request)."""

from __future__ import annotations

import copy
import math

import pandas as pd
import pytest

from fleetplan.errors import ScenarioError
from fleetplan.optimizer.hosted_apis import api_candidates
from fleetplan.optimizer.power_envelope import HOST_SHARE_OF_BOARD_POWER
from fleetplan.optimizer.scenario_files import validate_scenario
from fleetplan.optimizer.scenario_supply import kw_per_gpu, supply_tables

API = {"name": "hosted-8b", "provider": "Example", "model": "llama-3.1-8b",
       "usd_per_1m_input_tokens": 0.2, "usd_per_1m_output_tokens": 0.6,
       "max_requests_per_min": 600, "ttft_ms": 300, "tpot_ms": 20, "source": "price list",
       "as_of": "2026-11-22"}
BASE = {
    "workloads": [{"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 10,
                   "input_tokens": 500, "output_tokens": 200, "tpot_slo_ms": 50},
                  {"name": "fast", "model": "llama-3.1-8b", "requests_per_s": 1,
                   "input_tokens": 100, "output_tokens": 50, "tpot_slo_ms": 10}],
    "fleet": {"gpus": ["h100-sxm", "l4"], "pricing": ["on_demand", "reserved_1y"],
              "sites": [{"name": "hall", "kw": 400, "pue": 1.2, "pricing": ["reserved_1y"],
                         "gpus": ["h100-sxm"]}],
              "apis": [API]},
}


def edited(path: tuple, value) -> dict:
    data = copy.deepcopy(BASE)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize(("path", "value", "message"), [
    (("fleet", "sites", 0, "kw"), -5, r"fleet.sites\[0\].kw: must be > 0"),
    (("fleet", "sites", 0, "kw"), float("inf"), r"fleet.sites\[0\].kw: .*finite"),
    (("fleet", "sites", 0, "pue"), 0.8, r"fleet.sites\[0\].pue: must be >= 1"),
    (("fleet", "sites", 0, "pricing"), ["ownd"], r"unknown pricing type 'ownd'; did you mean 'owned'"),
    (("fleet", "apis", 0, "usd_per_1m_input_tokens"), -1,
     r"fleet.apis\[0\].usd_per_1m_input_tokens: must be >= 0"),
    (("fleet", "apis", 0, "max_requests_per_min"), None,
     r"give max_requests_per_min and/or max_tokens_per_min"),
    (("fleet", "apis", 0, "tpot_ms"), 0, r"fleet.apis\[0\].tpot_ms: must be > 0"),
    (("fleet", "apis"), [API, API], r"api names must be unique, 'hosted-8b' repeats"),
])
def test_bad_sites_and_apis_are_one_line_errors(path, value, message):
    data = edited(path, value)
    with pytest.raises(ScenarioError, match=message):
        validate_scenario(data, source="scenario.yaml")


@pytest.mark.parametrize(("path", "value", "message"), [
    (("fleet", "apis", 0, "model"), "llama-3.1-8",
     r"fleet.apis\[0\].model: unknown model 'llama-3.1-8'; did you mean"),
    (("fleet", "sites", 0, "gpus"), ["h10"],
     r"fleet.sites\[0\].gpus\[0\]: unknown gpu 'h10'; did you mean"),
    (("fleet", "sites", 0, "gpus"), ["a10g"],
     r"fleet.sites\[0\].gpus\[0\]: unknown fleet GPU 'a10g'"),
])
def test_unknown_names_in_sites_and_apis_say_did_you_mean(shipped, path, value, message):
    scenario = validate_scenario(edited(path, value))
    with pytest.raises(ScenarioError, match=message):
        supply_tables(scenario, shipped, ["h100-sxm", "l4"], _workloads(), _buckets())


def _workloads() -> pd.DataFrame:
    return pd.DataFrame({"workload": ["chat", "fast"], "model": "llama-3.1-8b",
                         "ttft_slo_ms": math.nan, "tpot_slo_ms": [50.0, 10.0]})


def _buckets() -> pd.DataFrame:
    return pd.DataFrame({"workload": ["chat", "fast"], "bucket": 0, "input_len": [500, 100],
                         "output_len": [200, 50]})


def test_power_per_gpu_comes_from_the_server_else_the_board(shipped):
    power = kw_per_gpu(shipped, ["h100-sxm", "l4"])
    assert power["h100-sxm"] == pytest.approx(10.2 / 8)  # ownership catalog: HGX H100 10.2 kW
    tdp = float(shipped.gpus.loc["l4", "tdp_w"])
    assert "l4" not in set(shipped.ownership["gpu"])
    assert power["l4"] == pytest.approx(tdp * (1 + HOST_SHARE_OF_BOARD_POWER) / 1000)


def test_supply_tables_from_a_scenario(shipped):
    scenario = validate_scenario(BASE)
    tables = supply_tables(scenario, shipped, ["h100-sxm", "l4"], _workloads(), _buckets())
    assert tables["sites"].to_dict("records") == [{"site": "hall", "kw": 400.0, "pue": 1.2}]
    assert tables["site_gpus"][["gpu", "pricing_type"]].values.tolist() == [["h100-sxm",
                                                                              "reserved_1y"]]
    candidates = tables["api_candidates"]  # 'fast' wants TPOT 10 ms, the API gives 20 ms
    assert candidates["workload"].tolist() == ["chat"]
    assert candidates["usd_per_request"].iloc[0] == pytest.approx((500 * 0.2 + 200 * 0.6) / 1e6)


def test_an_api_without_published_latency_serves_only_workloads_without_that_slo():
    apis = pd.DataFrame({"api": ["x"], "model": "m", "ttft_ms": math.nan, "tpot_ms": math.nan,
                         "usd_per_1m_input_tokens": 1.0, "usd_per_1m_output_tokens": 1.0})
    workloads = pd.DataFrame({"workload": ["slo", "free"], "model": "m",
                              "ttft_slo_ms": math.nan, "tpot_slo_ms": [50.0, math.nan]})
    buckets = pd.DataFrame({"workload": ["slo", "free"], "bucket": 0, "input_len": 10,
                            "output_len": 10})
    assert api_candidates(apis, workloads, buckets)["workload"].tolist() == ["free"]
