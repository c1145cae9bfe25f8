"""Disaggregated prefill/decode pairs as candidate configurations of the fleet MILP: brute force
on small instances, and whole scenarios through the performance model."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetplan.errors import ScenarioError
from fleetplan.optimizer.dominance import dominated_configs
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.scenario_files import validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario, prepare
from fleetplan.optimizer.solver import SolveOptions
from tests.optimizer.instances import make_problem
from tests.optimizer.plan_checker import check_plan

EXACT = SolveOptions(time_limit_s=30, mip_gap=0.0)


def paired_problem(capacity, prices, demand, *, target_utilization=1.0, redundancy_k=0):
    """c0 colocated; c1 (prefill) and c2 (decode) one disaggregated route; one bucket."""
    offers = {(f"g{c}", "on_demand"): price for c, price in enumerate(prices)}
    problem = make_problem([[k] for k in capacity], [[demand]], offers,
                           target_utilization=target_utilization, redundancy_k=redundancy_k)
    candidates = problem.candidates.assign(route=["c0", "pair", "pair"], stages=[1, 2, 2])
    return problem.with_changes(candidates=candidates)


def brute_force_usd(capacity, prices, demand, rho=1.0, most=12, k=0) -> float:
    """Cheapest replicas (y0, y1, y2): the colocated share plus the pair's share (the smaller
    of its two pools) must carry the demand; with N+k every configuration that carries load
    keeps k replicas beyond it."""
    best = math.inf
    for y in itertools.product(range(most + 1), repeat=3):
        room = np.maximum(np.array(y) - k, 0)
        colocated = room[0] * capacity[0] if y[0] > k else 0.0
        pair = min(room[1] * capacity[1], room[2] * capacity[2]) if min(y[1], y[2]) > k else 0.0
        if rho * (colocated + pair) >= demand - 1e-9:
            best = min(best, float(np.dot(y, prices)))
    return best


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0, 8.0]), min_size=3, max_size=3),
       st.lists(st.sampled_from([0.5, 1.0, 1.5, 3.0]), min_size=3, max_size=3),
       st.sampled_from([1.0, 2.5, 4.0, 7.0]), st.sampled_from([1.0, 0.8]), st.integers(0, 1))
def test_pairs_match_brute_force(capacity, prices, demand, rho, k):
    problem = paired_problem(capacity, prices, demand, target_utilization=rho, redundancy_k=k)
    plan = optimize_problem(problem, EXACT)
    expected = brute_force_usd(capacity, prices, demand, rho, k=k)
    if math.isinf(expected):
        assert plan.status == "infeasible"
        return
    assert plan.status == "optimal"
    assert plan.objective_usd == pytest.approx(expected, rel=1e-6, abs=1e-6)
    assert check_plan(plan, problem) == []


def test_a_pair_is_sized_in_both_pools():
    # Colocated at $3 serves 2 req/s; the pair is $1 prefill (4 req/s) + $1 decode (2 req/s).
    plan = optimize_problem(paired_problem([2.0, 4.0, 2.0], [3.0, 1.0, 1.0], 6.0), EXACT)
    replicas = plan.fleet.set_index("config")["replicas_peak"]
    assert replicas.to_dict() == {"c1": 2, "c2": 3}
    assert set(plan.routing["route"]) == {"pair"} and plan.routing["fraction"].tolist() == [1.0, 1.0]


def test_a_pair_missing_a_stage_serves_nothing():
    # The decode stage cannot serve: the pair's cheap prefill replicas alone must not be used.
    plan = optimize_problem(paired_problem([2.0, 50.0, 0.0], [3.0, 0.1, 0.1], 4.0), EXACT)
    assert plan.fleet.set_index("config")["replicas_peak"].to_dict() == {"c0": 2}
    assert plan.objective_usd == pytest.approx(6.0)


def test_stages_are_never_pruned():
    problem = paired_problem([2.0, 1.0, 1.0], [1.0, 5.0, 5.0], 4.0)
    assert dominated_configs(problem) == []


def scenario(**disaggregation):
    return validate_scenario({
        "name": "rag", "what_if": {"enabled": False},
        "workloads": [{"name": "rag", "model": "llama-3.1-70b", "requests_per_s": 20,
                       "input_tokens": 6000, "output_tokens": 300, "tpot_slo_ms": 50,
                       "ttft_slo_ms": 3000, "quants": ["fp8"]}],
        "fleet": {"gpus": ["h100-sxm", "l40s", "h200"], "tp": [1, 2, 4, 8],
                  "disaggregation": disaggregation}})


@pytest.fixture(scope="module")
def rag_plans():
    paired = plan_scenario(scenario())
    plain = scenario()
    plain.fleet.disaggregation = None
    return paired, plan_scenario(plain)


def test_long_prompts_under_a_tight_tpot_slo_are_cheaper_disaggregated(rag_plans):
    paired, colocated = rag_plans
    assert paired.status == "optimal" and colocated.status == "optimal"
    assert paired.usd_per_month < 0.9 * colocated.usd_per_month
    stages = paired.fleet["config"].str.extract(r"#(prefill|decode)$")[0].dropna()
    assert set(stages) == {"prefill", "decode"}


def test_each_pool_carries_its_load_at_the_target_utilization(rag_plans):
    paired, _ = rag_plans
    routed = paired.routing.merge(paired.candidates[["workload", "bucket", "config", "stage",
                                                     "req_s_per_replica"]],
                                  on=["workload", "bucket", "config"])
    staged = routed[routed["stage"] != "serve"]
    load = (staged["req_s"] / (0.8 * staged["req_s_per_replica"])).groupby(staged["config"]).sum()
    replicas = paired.fleet.set_index("config")["replicas_peak"].reindex(load.index)
    assert (replicas >= load - 1e-6).all() and (replicas < load + 1 + 1e-6).all()
    # every routed pair shows both of its stages with the same share of the bucket
    shares = staged.groupby("route")["fraction"].agg(["min", "max", "size"])
    assert (shares["size"] == 2).all() and np.allclose(shares["min"], shares["max"])
    assert paired.workloads["ttft_ms_max"].iloc[0] <= 3000 + 1e-6
    assert paired.workloads["tpot_ms_max"].iloc[0] <= 50 + 1e-6


def test_pair_candidates_follow_the_performance_model():
    from fleetplan.sweeps.disaggregation import disaggregated

    prepared = prepare(scenario(prefill_gpus=["h100-sxm"], decode_gpus=["h200", "l40s"],
                                prefill_tp=[2], decode_tp=[4], colocated=False))
    table = prepared.candidates.set_index("config")
    assert set(table["stage"]) == {"prefill", "decode"} and len(table) == 4
    prefill = table.loc["llama-3.1-70b/fp8/h100-sxm-tp2>h200-tp4#prefill"]
    decode = table.loc["llama-3.1-70b/fp8/h100-sxm-tp2>h200-tp4#decode"]
    pair = disaggregated(pd.DataFrame([{
        "model": "llama-3.1-70b", "quant": "fp8", "input_len": 6000, "output_len": 300,
        "prefill_gpu": "h100-sxm", "prefill_tp": 2, "decode_gpu": "h200", "decode_tp": 4,
        "tpot_slo_ms": 50.0, "ttft_slo_ms": 3000.0}])).iloc[0]
    assert pair["valid"] and prefill["req_s_per_replica"] == pytest.approx(pair["prefill_req_s"])
    assert decode["req_s_per_replica"] == pytest.approx(pair["decode_req_s"])
    assert decode["tp"] == 4 and decode["gpu"] == "h200" and prefill["gpu"] == "h100-sxm"
    # the four-L40S pair follows the same model
    slow = disaggregated(pd.DataFrame([{
        "model": "llama-3.1-70b", "quant": "fp8", "input_len": 6000, "output_len": 300,
        "prefill_gpu": "h100-sxm", "prefill_tp": 2, "decode_gpu": "l40s", "decode_tp": 4,
        "tpot_slo_ms": 50.0, "ttft_slo_ms": 3000.0}])).iloc[0]
    decode_l40s = table.loc["llama-3.1-70b/fp8/h100-sxm-tp2>l40s-tp4#decode"]
    assert decode_l40s["req_s_per_replica"] == pytest.approx(slow["decode_req_s"] if slow["valid"] else 0.0)


def test_pairs_only_with_no_pair_that_fits_a_node_is_an_error():
    # decode TP 16 fits no node of 8 GPUs, and colocated: false leaves nothing else
    with pytest.raises(ScenarioError, match=r"fleet.disaggregation: no prefill/decode pair .* and "
                                            r"colocated: false leaves no other configuration"):
        prepare(scenario(prefill_tp=[2], decode_tp=[16], colocated=False))


def test_a_ttft_slo_no_pair_can_meet_is_explained():
    tight = scenario(colocated=False)
    tight.workloads[0].ttft_slo_ms, tight.workloads[0].tpot_slo_ms = 50.0, None
    plan = plan_scenario(tight)
    assert plan.status == "infeasible"
    assert plan.messages == ["rag: TTFT SLO 50 ms is below the best achievable 244 ms for "
                             "llama-3.1-70b on any allowed GPU"]
    reasons = plan.candidates["reason"]
    assert reasons.str.fullmatch(r"TTFT SLO 50 ms is below the best achievable [0-9.]+ ms on idle pools"
                                 r"|(prefill|decode): .*").all()


@pytest.mark.parametrize(("options", "message"), [
    ({"prefill_gpus": ["h100"]}, r"fleet\.disaggregation\.prefill_gpus\[0\]: unknown gpu 'h100'; did you mean"),
    ({"decode_gpus": ["a100-80gb-sxm"]},
     r"fleet\.disaggregation\.decode_gpus\[0\]: unknown fleet GPU 'a100-80gb-sxm'.*valid: h100-sxm, h200, l40s"),
])
def test_pool_gpus_must_be_fleet_gpus(options, message):
    with pytest.raises(ScenarioError, match=message):
        prepare(scenario(**options))


def test_disaggregation_needs_the_model_not_measured_profiles(tmp_path):
    profiles = tmp_path / "profiles.csv"
    profiles.write_text("gpu,tp,input_tokens,output_tokens,max_req_s\nh100-sxm,2,8000,500,3\n")
    measured = scenario()
    measured.capacity_profiles = str(profiles)
    with pytest.raises(ScenarioError, match="fleet.disaggregation: not available with capacity_profiles"):
        prepare(measured)


def test_bad_tp_is_a_one_line_error():
    with pytest.raises(ScenarioError, match=r"fleet\.disaggregation\.prefill_tp.*between 1 and 1024"):
        scenario(prefill_tp=[0])


def test_fleet_engine_picks_its_efficiency_rows(tmp_path):
    from pathlib import Path

    import fleetplan.catalogs
    from fleetplan.catalogs import load_catalogs

    slow = tmp_path / "slow.csv"
    pd.DataFrame([{"engine": "slow", "gpu": "*", "operator": "gemm", "precision": "*", "compute_efficiency": 0.2,
                   "memory_efficiency": 0.3, "tp_scaling": 0.9, "n_points": 0, "source": "test profile",
                   "as_of": "2026-11-22"},
                  {"engine": "slow", "gpu": "*", "operator": "iteration", "precision": "*", "overhead_ms": 3.0,
                   "overhead_us_per_sequence": 20.0, "request_overhead_ms": 0.0, "n_points": 0,
                   "source": "test profile", "as_of": "2026-11-22"}]).to_csv(slow, index=False)
    profile = tmp_path / "slow_engine.csv"
    engines = pd.read_csv(Path(fleetplan.catalogs.__file__).parent / "data" / "engines.csv", dtype=str, keep_default_na=False)
    engines[engines["id"] == "vllm"].assign(id="slow", aliases="").to_csv(profile, index=False)
    catalogs = load_catalogs([slow, profile])
    plain = scenario()
    plain.fleet.disaggregation = None
    chosen = plain.model_copy(deep=True)
    chosen.fleet.engine = "Slow"
    base = prepare(plain, catalogs).candidates.set_index("config")["req_s_per_replica"]
    slower = prepare(chosen, catalogs).candidates.set_index("config")["req_s_per_replica"]
    served = base > 0
    assert (slower[served] < base[served]).all()
    chosen.fleet.engine = "slw"
    with pytest.raises(ScenarioError, match=r"fleet\.engine: unknown engine .*'slw'; did you mean 'slow'"):
        prepare(chosen, catalogs)
