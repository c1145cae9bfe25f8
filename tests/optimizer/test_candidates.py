"""Scenario -> candidates -> plan, with a stand-in performance engine, measured capacity
profiles, price selection, and infeasibility reasons."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from fleetplan.errors import ScenarioError
from fleetplan.exports.plan_quantities import usage_table
from fleetplan.optimizer.candidates import finish
from fleetplan.optimizer.scenario_files import validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario, prepare
from tests.optimizer.plan_checker import check_plan

#: Stand-in engine: best achievable TPOT [ms] and output tokens/s per GPU at the knee.
BEST_TPOT_MS = {"h100-sxm": 7.1, "l4": 20.0, "a10g": 25.0}
TOKENS_PER_S = {"h100-sxm": 3000.0, "l4": 600.0, "a10g": 500.0}


class FakeEngine:
    """Records its calls; capacity = tokens/s x tp / output_len when the TPOT SLO is met."""

    def __init__(self):
        self.calls: list[pd.DataFrame] = []

    def __call__(self, cases: pd.DataFrame, catalogs=None) -> pd.DataFrame:
        self.calls.append(cases.copy())
        best = cases["gpu"].map(BEST_TPOT_MS).to_numpy()
        slo = cases["tpot_slo_ms"].fillna(np.inf).to_numpy()
        meets = slo >= best
        req_s = cases["gpu"].map(TOKENS_PER_S).to_numpy() * cases["tp"] / cases["output_len"]
        reason = np.where(meets, "", [f"TPOT SLO {s:g} ms is below the best achievable {b:g} ms"
                                      for s, b in zip(slo, best, strict=True)])
        return cases.assign(req_s=np.where(meets, req_s * np.minimum(1, slo / 50), 0.0),
                            valid=meets, fits=True, reason=reason, batch=np.where(meets, 32, 0),
                            tpot_ms=np.minimum(slo, 50.0), ttft_ms=200.0)


def scenario(**fleet) -> dict:
    return {
        "workloads": [
            {"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 20,
             "input_tokens": 1000, "output_tokens": 200, "tpot_slo_ms": 40,
             "quants": ["bf16", "fp8"], "redundancy_k": 1},
            {"name": "rag", "model": "llama-3.1-70b", "tokens_per_s": 6000,
             "histogram": [{"input_tokens": 2000, "output_tokens": 200, "weight": 1},
                           {"input_tokens": 500, "output_tokens": 100, "weight": 1}],
             "tpot_slo_ms": 60, "hourly_profile": [0.5] * 12 + [1.5] * 12}],
        "fleet": {"gpus": ["h100-sxm", {"id": "l4", "usd_per_gpu_hour": {"on_demand": 0.5}}],
                  "tp": [1, 2, 16], **fleet},
        "solver": {"mip_gap": 0.0},
    }


def test_one_engine_call_for_every_case_and_variant(shipped):
    engine = FakeEngine()
    prepared = prepare(validate_scenario(scenario()), shipped, estimate=engine)
    assert len(engine.calls) == 1
    cases = engine.calls[0]
    # chat: 1 bucket x 2 quants; rag: 2 buckets x 1 quant; x 2 GPUs x tp 1,2 (16 > node);
    # twice: at the SLO and at the looser what-if SLO
    assert len(cases) == (2 + 2) * 2 * 2 * 2
    assert set(cases["tp"]) == {1, 2}
    assert set(cases["mode"]) == {"max_rate"}  # capacity from the load model by default
    assert set(prepared.candidates["pool"]) == {"llama-3.1-8b", "llama-3.1-70b"}
    assert (prepared.relaxed_candidates["req_s_per_replica"].to_numpy()
            >= prepared.candidates["req_s_per_replica"].to_numpy()).all()


def test_plan_from_a_scenario_passes_the_checker(shipped):
    data = scenario()
    plan = plan_scenario(validate_scenario(data), shipped, estimate=FakeEngine())
    prepared = prepare(validate_scenario(data), shipped, estimate=FakeEngine())
    assert plan.status == "optimal"
    assert check_plan(plan, prepared.problem) == []
    assert len(plan.periods) == 24 and plan.periods["solved_as"].nunique() == 2
    assert set(plan.workloads["workload"]) == {"chat", "rag"}
    assert plan.workloads["served_fraction"].tolist() == [1.0, 1.0]
    assert plan.assumptions["capacity_source"] == "engine"
    assert "catalog_versions" in plan.assumptions


def test_prices_default_to_the_cheapest_catalog_row_and_say_which(shipped):
    prepared = prepare(validate_scenario(scenario()), shipped, estimate=FakeEngine())
    prices = prepared.prices.set_index(["gpu", "pricing_type"])
    h100 = prices.loc[("h100-sxm", "on_demand")]
    catalog = shipped.prices
    cheapest = catalog[(catalog["gpu"] == "h100-sxm") & (catalog["pricing_type"] == "on_demand")]
    assert h100["usd_per_gpu_hour"] == cheapest["usd_per_gpu_hour"].min()
    assert h100["origin"] == "catalog" and h100["source"]
    assert prices.loc[("l4", "on_demand"), "usd_per_gpu_hour"] == 0.5
    assert prices.loc[("l4", "on_demand"), "origin"] == "scenario"


def test_prices_given_by_the_scenario_alone_stay_numbers(shipped):
    # l4 has a pricing type of its own that only the scenario prices, so the price rule's rows
    # for it are an empty table of objects: concatenated with them, the prices once became
    # objects, and the workbook's usage table failed on them
    data = scenario()
    data["fleet"]["gpus"][1] = {"id": "l4", "pricing": ["reserved_1y"],
                                "usd_per_gpu_hour": {"reserved_1y": 0.4}}
    prices = shipped.prices
    catalogs = dataclasses.replace(shipped, prices=prices[
        (prices["gpu"] != "l4") | (prices["pricing_type"] != "reserved_1y")])
    prepared = prepare(validate_scenario(data), catalogs, estimate=FakeEngine())
    numbers = ["usd_per_gpu_hour", "same_provider_on_demand_usd_per_gpu_hour"]
    assert (prepared.prices[numbers].dtypes == float).all()
    assert prepared.problem.offers["usd_per_gpu_hour"].dtype == float
    plan = plan_scenario(validate_scenario(data), catalogs, estimate=FakeEngine(), what_if=False)
    assert plan.nodes["usd_per_month"].dtype == float
    usage = usage_table(plan)
    assert (usage["gpus_mean"] > 0).any()


def test_provider_pin_and_missing_prices(shipped):
    providers = shipped.prices.loc[shipped.prices["gpu"] == "h100-sxm", "provider"]
    pinned = prepare(validate_scenario(scenario(provider=providers.iloc[0])), shipped,
                     estimate=FakeEngine()).prices
    assert set(pinned.loc[pinned["gpu"] == "h100-sxm", "provider"]) == {providers.iloc[0]}
    with pytest.raises(ScenarioError, match=r"fleet.gpus\[0\]: no price for h100-sxm with "
                                            r"pricing on_demand \(provider nobody\)"):
        prepare(validate_scenario(scenario(provider="nobody")), shipped, estimate=FakeEngine())
    prices = shipped.prices
    on_demand_only = dataclasses.replace(shipped,
                                         prices=prices[prices["pricing_type"] == "on_demand"])
    noted = prepare(validate_scenario(scenario(pricing=["on_demand", "reserved_3y"])),
                    on_demand_only, estimate=FakeEngine())
    assert "no reserved_3y price for h100-sxm; reserved_3y not used for it" in noted.problem.notes
    assert set(noted.prices["pricing_type"]) == {"on_demand"}


@pytest.mark.parametrize(("path", "value", "message"), [
    (("workloads", 0, "model"), "llama-8b", r"workloads\[0\].model: unknown model 'llama-8b'"),
    (("workloads", 1, "quants"), ["fp9"], r"workloads\[1\].quants: unknown quant 'fp9'"),
    (("fleet", "gpus", 0), "h100", r"fleet.gpus\[0\].id: unknown gpu 'h100'; did you mean"),
])
def test_unknown_ids_name_their_field(shipped, path, value, message):
    data = scenario()
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ScenarioError, match=message):
        prepare(validate_scenario(data), shipped, estimate=FakeEngine())


def test_an_unreachable_tpot_slo_is_explained(shipped):
    data = scenario()
    data["workloads"][1]["tpot_slo_ms"] = 5
    plan = plan_scenario(validate_scenario(data), shipped, estimate=FakeEngine())
    assert plan.status == "infeasible"
    unmet = plan.unmet_demand
    assert set(unmet["workload"]) == {"rag"}
    assert unmet["unmet_fraction"].min() == pytest.approx(1.0)
    expected = ("TPOT SLO 5 ms is below the best achievable 7.1 ms for llama-3.1-70b "
                "on any allowed GPU")
    assert set(unmet["reason"]) == {expected}
    assert f"rag: {expected}" in plan.messages
    assert plan.workloads.set_index("workload").loc["chat", "served_fraction"] == pytest.approx(
        1.0, abs=1e-6)  # the solver's feasibility tolerance


def test_an_availability_cap_is_explained(shipped):
    data = scenario()
    data["fleet"]["gpus"] = [{"id": "l4", "max_gpus": 2}]
    plan = plan_scenario(validate_scenario(data), shipped, estimate=FakeEngine())
    assert plan.status == "infeasible"
    assert any(m.startswith("chat: needs") and "l4 but availability is 2" in m
               for m in plan.messages)
    assert (plan.unmet_demand["unmet_req_s"] > 0).all()


def test_measured_capacity_profiles_replace_the_engine(shipped, tmp_path):
    profile = tmp_path / "capacity.csv"
    profile.write_text("gpu,tp,input_tokens,output_tokens,max_req_s,model\n"
                       "h100-sxm,1,1024,256,10,llama-3.1-8b\n"
                       "h100-sxm,1,4096,256,4,\n"
                       "l4,1,1024,256,2,llama-3.1-8b\n"
                       "l4,1,4096,512,0,\n")
    data = scenario()
    data["capacity_profiles"] = str(profile)
    data["workloads"] = data["workloads"][:1]
    engine = FakeEngine()
    plan = plan_scenario(validate_scenario(data), shipped, estimate=engine)
    assert engine.calls == []
    assert plan.assumptions["capacity_source"] == "profiles"
    chat = plan.candidates[plan.candidates["workload"] == "chat"]
    assert sorted(chat["req_s_per_replica"]) == [2.0, 10.0]  # smallest covering buckets
    assert plan.status == "optimal"


@pytest.mark.parametrize(("content", "message"), [
    ("gpu,tp,input_tokens,output_tokens\nl4,1,1,1\n", "lacks the column max_req_s"),
    ("gpu,tp,input_tokens,output_tokens,max_req_s\nl4,1,1,1,-3\n",
     r"row 2, column max_req_s: must be 0 \(cannot meet the SLO\) or a finite number >= 0.001 and <= 1e\+06, got '-3'"),
    ("gpu,tp,input_tokens,output_tokens,max_req_s\nl4,0.5,1,1,3\n",
     r"row 2, column tp: must be a whole number >= 1 and <= 64"),
    ("gpu,tp,input_tokens,output_tokens,max_req_s\nl4,16,1024,256,5\n",
     r"capacity_profiles: l4 tp 16 does not fit in one node of 8 GPUs"),
])
def test_bad_capacity_profiles(shipped, tmp_path, content, message):
    profile = tmp_path / "capacity.csv"
    profile.write_text(content)
    data = scenario()
    data["capacity_profiles"] = str(profile)
    with pytest.raises(ScenarioError, match=message):
        prepare(validate_scenario(data), shipped, estimate=FakeEngine())


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # engine's own
def test_the_real_engine_gives_usable_candidates(shipped):
    data = scenario()
    data["what_if"] = {"enabled": False}
    prepared = prepare(validate_scenario(data), shipped)
    candidates = prepared.candidates
    assert (candidates["req_s_per_replica"] > 0).any()
    served = candidates[candidates["req_s_per_replica"] > 0]
    assert (served["tpot_ms"] <= 60 + 1e-9).all()
    plan = plan_scenario(validate_scenario(data), shipped)
    assert plan.feasible
    assert check_plan(plan, prepared.problem) == []


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # engine's own
def test_a_looser_slo_never_costs_more_with_the_real_engine(shipped):
    data = scenario()
    data["what_if"] = {"enabled": False}
    data["workloads"] = data["workloads"][:1]
    tight = plan_scenario(validate_scenario(data), shipped)
    data["workloads"][0]["tpot_slo_ms"] = 80
    loose = plan_scenario(validate_scenario(data), shipped)
    assert loose.objective_usd <= tight.objective_usd * (1 + 1e-9)


def test_capacity_model_load_is_queueing_aware_and_knee_is_available(shipped):
    load = prepare(validate_scenario(scenario()), shipped).candidates.set_index(["workload", "bucket", "config"])
    knee = prepare(validate_scenario(scenario(capacity_model="knee")), shipped).candidates.set_index(
        ["workload", "bucket", "config"])
    shared = load.index.intersection(knee.index)
    assert len(shared) > 0
    # The load model keeps the SLO under queueing, so a replica is never credited with more than the
    # knee's rate.
    assert (load.loc[shared, "req_s_per_replica"] <= knee.loc[shared, "req_s_per_replica"] * 1.0001).all()


def test_a_gpus_own_node_size_caps_its_tp_degree(shipped):
    # the scenario's gpus_per_node, not only the catalog's, bounds a replica: TP stays in a node
    data = scenario(tp=[1, 2, 4], gpus=[{"id": "h100-sxm", "gpus_per_node": 2}, "l4"])
    engine = FakeEngine()
    prepare(validate_scenario(data), shipped, estimate=engine)
    cases = pd.concat(engine.calls)
    assert sorted(cases.loc[cases["gpu"] == "h100-sxm", "tp"].unique()) == [1, 2]
    assert sorted(cases.loc[cases["gpu"] == "l4", "tp"].unique()) == [1, 2, 4]


def test_no_tp_degree_that_fits_a_node_is_an_error(shipped):
    data = scenario(tp=[4], gpus=[{"id": "h100-sxm", "gpus_per_node": 2}])
    with pytest.raises(ScenarioError, match=r"fleet.tp: no allowed TP degree \(4\) fits in one node of "
                                            r"an allowed GPU \(GPUs per node: h100-sxm 2\)"):
        prepare(validate_scenario(data), shipped, estimate=FakeEngine())


def test_a_replica_below_the_capacity_floor_is_unusable():
    table = pd.DataFrame({"workload": "w", "bucket": 0, "model": "m", "gpu": "g", "quant": "bf16",
                          "tp": 1, "req_s_per_replica": [5e-4, 2e-3], "variant": "base"})
    assert list(finish(table, share_replicas=True)["req_s_per_replica"]) == [0.0, 2e-3]
