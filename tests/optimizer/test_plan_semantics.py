"""What a plan promises, each against a hand-solvable case: N+k survives losing the largest
replicas (also with prefill/decode pairs), shared replicas run at the tightest SLO they serve,
reserved terms are paid in full, whole nodes hold real replica sizes, measured profiles keep to
the fleet's TP degrees."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fleetplan.optimizer.infeasibility as infeasibility
import fleetplan.optimizer.optimization as optimization
from fleetplan.optimizer.dominance import dominated_configs
from fleetplan.optimizer.fleet_problem import Problem, configs_of
from fleetplan.optimizer.linear_program import LinearProgram
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.scenario_files import validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario, prepare
from fleetplan.optimizer.slo_levels import slo_levels
from fleetplan.optimizer.solve_results import SolveOutcome
from fleetplan.optimizer.solver import SolveOptions
from tests.optimizer.instances import brute_force_usd, least_load, make_problem
from tests.optimizer.plan_checker import check_plan
from tests.optimizer.test_candidates import FakeEngine, scenario

EXACT = SolveOptions(time_limit_s=30, mip_gap=0.0)


def survives_losses(plan, problem: Problem, k: int) -> bool:
    """Losing any k replicas of any one configuration in any period still serves the demand."""
    replicas = plan.fleet_by_period.groupby(["period", "config"])["replicas"].sum()
    configs = list(problem.configs["config"])
    for period in problem.periods["period"]:
        have = np.array([replicas.get((period, c), 0.0) for c in configs])
        for lost in np.flatnonzero(have > 0):
            left = have.copy()
            left[lost] = max(left[lost] - k, 0)
            if not math.isfinite(least_load(problem, period, left)):
                return False
    return True


def test_repeated_entries_of_a_row_are_summed():
    program = LinearProgram()
    x = program.add_columns(1)
    program.add_rows(1, [0, 0], [x[0], x[0]], [1.0, 2.0], upper=6.0)
    assert program.matrix.toarray().tolist() == [[3.0]]


def test_n_plus_k_survives_losing_the_largest_replica():
    # 100 req/s replicas at $10/h and 1 req/s replicas at $1.5/h for 10 req/s with N+1: one
    # large replica plus one small spare ($11.5) cannot lose the large one
    problem = make_problem([[100.0], [1.0]], [[10.0]],
                           {("g0", "on_demand"): 10.0, ("g1", "on_demand"): 1.5}, redundancy_k=1)
    plan = optimize_problem(problem, EXACT)
    assert plan.objective_usd == pytest.approx(16.5)  # eleven small replicas
    assert survives_losses(plan, problem, 1)
    assert check_plan(plan, problem) == []


def test_a_pair_keeps_spares_in_both_of_its_pools():
    # prefill and decode replicas of 1 req/s each at $1/h, 1.2 req/s with N+1: each stage
    # carries a load of 1.2 replicas and keeps one spare, 3 replicas each
    problem = make_problem([[0.0], [1.0], [1.0]], [[1.2]],
                           {(f"g{c}", "on_demand"): 1.0 for c in range(3)}, redundancy_k=1)
    problem = problem.with_changes(candidates=problem.candidates.assign(
        route=["c0", "pair", "pair"], stages=[1, 2, 2]))
    plan = optimize_problem(problem, EXACT)
    assert plan.fleet.set_index("config")["replicas_peak"].to_dict() == {"c1": 3, "c2": 3}
    assert plan.objective_usd == pytest.approx(6.0)
    assert check_plan(plan, problem) == []


def test_a_zero_demand_bucket_lends_no_spares():
    # c1 serves only a bucket without demand: its replicas cannot stand in for c0's
    problem = make_problem([[2.0, 0.0], [0.0, 5.0]], [[1.0, 0.0]],
                           {("g0", "on_demand"): 2.0, ("g1", "on_demand"): 1.0}, redundancy_k=1)
    plan = optimize_problem(problem, EXACT)
    assert plan.objective_usd == pytest.approx(4.0) == brute_force_usd(problem, 4)


def test_a_reserved_term_longer_than_the_horizon_is_paid_in_full():
    # a 1-month horizon: reserving for a year at $0.4/h costs $4.8 per hour of the month
    problem = make_problem([[10.0]], [[10.0]],
                           {("g0", "on_demand"): 1.0, ("g0", "reserved_1y"): 0.4},
                           horizon_months=1.0)
    plan = optimize_problem(problem, EXACT)
    assert set(plan.fleet["pricing_type"]) == {"on_demand"}
    cheap = problem.with_changes(offers=problem.offers.assign(
        usd_per_gpu_hour=[1.0, 1.0 / 24]))  # $0.5 per hour of the month: cheaper than $1
    plan = optimize_problem(cheap, EXACT)
    assert set(plan.fleet["pricing_type"]) == {"reserved_1y"}
    assert plan.objective_usd == pytest.approx(0.5 * problem.horizon_hours)
    assert check_plan(plan, cheap) == []


def three_month_scenario(**fleet) -> dict:
    data = scenario(pricing=["on_demand", "reserved_3y"], horizon_months=3, **fleet)
    data["what_if"] = {"enabled": False}
    data["workloads"] = data["workloads"][:1]
    return data


def test_a_three_month_plan_pays_three_years_of_a_3y_reservation(shipped):
    charged = prepare(validate_scenario(three_month_scenario()), shipped, estimate=FakeEngine())
    offers = charged.problem.offers.set_index(["gpu", "pricing_type"])
    prices = charged.prices.set_index(["gpu", "pricing_type"])["usd_per_gpu_hour"]
    plan = plan_scenario(validate_scenario(three_month_scenario()), shipped,
                         estimate=FakeEngine())
    reserved = plan.fleet[plan.fleet["pricing_type"] == "reserved_3y"]
    assert ((reserved["usd_per_gpu_hour"] / prices.reindex(
        pd.MultiIndex.from_frame(reserved[["gpu", "pricing_type"]])).to_numpy()) == 12).all()
    assert ("h100-sxm", "reserved_3y") in offers.index
    forbidden = prepare(validate_scenario(three_month_scenario(
        reserved_beyond_horizon="forbid")), shipped, estimate=FakeEngine())
    assert set(forbidden.problem.offers["pricing_type"]) == {"on_demand"}
    assert ("reserved_3y not used: its 36-month term is longer than the 3-month horizon "
            "(fleet.reserved_beyond_horizon: forbid)") in forbidden.problem.notes


def test_forbidding_every_pricing_type_is_a_one_line_error(shipped):
    data = three_month_scenario(reserved_beyond_horizon="forbid")
    data["fleet"]["pricing"] = ["reserved_3y"]
    from fleetplan.errors import ScenarioError

    with pytest.raises(ScenarioError, match="fleet.reserved_beyond_horizon: forbid leaves no"):
        prepare(validate_scenario(data), shipped, estimate=FakeEngine())


@pytest.mark.parametrize(("tp", "node_gpus", "demand", "nodes"), [
    (3, 8, 45.0, 3),    # 5 replicas of 3 GPUs: two per node
    (16, 72, 45.0, 2),  # 5 replicas of 16 GPUs: four per 72-GPU domain
    (2, 8, 45.0, 2),    # 5 replicas of 2 GPUs: four per node
])
def test_whole_nodes_hold_real_replica_sizes(tp, node_gpus, demand, nodes):
    problem = make_problem([[10.0]], [[demand]], {("g0", "on_demand"): 1.0}, tp=[tp],
                           gpus_per_node={"g0": node_gpus})
    plan = optimize_problem(problem, EXACT)
    assert plan.nodes["nodes_peak"].iloc[0] == nodes
    assert plan.objective_usd == pytest.approx(nodes * node_gpus)
    assert check_plan(plan, problem) == []


def test_mixed_replica_sizes_share_nodes_by_pattern():
    # TP 3 ($1 per GPU) and TP 2 replicas of one GPU type on 8-GPU nodes
    problem = make_problem([[30.0], [10.0]], [[100.0]], {("g0", "on_demand"): 1.0},
                           gpu=["g0", "g0"], tp=[3, 2], gpus_per_node={"g0": 8})
    plan = optimize_problem(problem, EXACT)
    assert check_plan(plan, problem) == []
    assert plan.objective_usd == pytest.approx(16.0)  # 2 x TP3 + 1 x TP2 per node, 2 nodes


def test_capacity_profiles_keep_to_the_fleet_tp(shipped, tmp_path):
    profile = tmp_path / "capacity.csv"
    profile.write_text("gpu,tp,input_tokens,output_tokens,max_req_s\n"
                       "h100-sxm,1,4096,512,10\nh100-sxm,2,4096,512,25\n")
    data = scenario(tp=[1])
    data["capacity_profiles"] = str(profile)
    data["workloads"] = data["workloads"][:1]
    prepared = prepare(validate_scenario(data), shipped, estimate=FakeEngine())
    assert set(prepared.candidates["tp"]) == {1}


def mixed_slo_scenario() -> dict:
    data = scenario()
    data["what_if"] = {"enabled": False}
    data["workloads"] = [
        {"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 20, "input_tokens": 1000,
         "output_tokens": 200, "tpot_slo_ms": 20, "quants": ["bf16"]},
        {"name": "summaries", "model": "llama-3.1-8b", "requests_per_s": 30,
         "input_tokens": 1000, "output_tokens": 200, "tpot_slo_ms": 100, "quants": ["bf16"]}]
    return data


def assert_each_replica_meets_every_slo_it_serves(plan, candidates):
    routed = plan.routing[plan.routing["fraction"] > 1e-9].merge(
        candidates[["workload", "bucket", "config", "tpot_slo_ms"]],
        on=["workload", "bucket", "config"])
    slo = plan.workloads.set_index("workload")["tpot_slo_ms"]
    routed["own_slo"] = routed["workload"].map(slo)
    per_replica = routed.groupby(["config", "period"]).agg(
        tpot=("tpot_ms", "max"), level=("tpot_slo_ms", "max"), tightest=("own_slo", "min"))
    assert (per_replica["tpot"] <= per_replica["tightest"] + 1e-9).all()
    assert (per_replica["level"] <= per_replica["tightest"] + 1e-9).all()


def test_shared_replicas_run_at_the_tightest_slo_they_serve(shipped):
    plan = plan_scenario(validate_scenario(mixed_slo_scenario()), shipped, estimate=FakeEngine())
    assert plan.status == "optimal"
    assert_each_replica_meets_every_slo_it_serves(plan, plan.candidates)
    levels = set(plan.candidates["config"].str.extract(r"@(.*)$")[0])
    assert levels == {"tpot20ms", "tpot100ms"}


@pytest.mark.slow
def test_the_example_plan_serves_chat_at_its_own_slo_in_hour_7(shipped):
    from fleetplan.optimizer.example import example_scenario

    plan = plan_scenario(example_scenario(), shipped, what_if=False)
    hour7 = plan.routing[plan.routing["period"] == 7]
    chat_configs = set(hour7.loc[hour7["workload"] == "chat", "config"])
    sharing = hour7[hour7["config"].isin(chat_configs)]
    assert (sharing["tpot_ms"] <= 40 + 1e-9).all()  # summaries on chat's replicas run at 40 ms
    assert_each_replica_meets_every_slo_it_serves(plan, plan.candidates)


def level_problem(demand, base_req_s, price) -> Problem:
    """Two workloads of one model (TPOT 40 and 100 ms) on one GPU type; a replica's capacity
    grows with the TPOT it may run at (capacity = base x level / 100)."""
    workloads = pd.DataFrame({"workload": ["a", "b"], "pool": "m", "redundancy_k": 0,
                              "tpot_slo_ms": [40.0, 100.0], "ttft_slo_ms": np.nan})
    levels = slo_levels(workloads)
    candidates = levels.assign(
        bucket=0, config="g0/tp1" + levels["level"], pool="m", gpu="g0", tp=1,
        req_s_per_replica=levels["workload"].map(dict(zip("ab", base_req_s)))
        * levels["tpot_slo_ms"] / 100.0)
    problem = make_problem([[1.0]], [[0.0]], {("g0", "on_demand"): price})
    return problem.with_changes(
        workloads=workloads, candidates=candidates, configs=configs_of(candidates),
        demand=pd.DataFrame({"workload": ["a", "b"], "bucket": 0, "period": 0,
                             "req_s": demand}))


def level_brute_force(demand, base_req_s, price, most=15) -> float:
    """Replicas at 40 ms serve a and b; replicas at 100 ms serve b only."""
    a40, b40, b100 = (base_req_s[0] * 0.4, base_req_s[1] * 0.4, base_req_s[1])
    best = math.inf
    for tight, loose in itertools.product(range(most + 1), repeat=2):
        room = tight - demand[0] / a40
        if room >= -1e-9 and demand[1] <= b40 * room + b100 * loose + 1e-9:
            best = min(best, price * (tight + loose))
    return best


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([0.0, 1.0, 3.0, 7.0]), min_size=2, max_size=2),
       st.lists(st.sampled_from([2.0, 5.0, 10.0]), min_size=2, max_size=2))
def test_mixed_slos_on_shared_configurations_match_brute_force(demand, base_req_s):
    problem = level_problem(demand, base_req_s, 1.0)
    plan = optimize_problem(problem, EXACT)
    expected = level_brute_force(demand, base_req_s, 1.0)
    assert plan.objective_usd == pytest.approx(expected, abs=1e-6)  # one 1-hour period


def test_a_workload_left_unserved_has_no_unit_cost():
    # w is served on g0; v's only GPU type has no availability, so the elastic plan serves none
    # of it: its cost per 1M tokens is unknown (NaN), not a division by zero
    base = make_problem([[10.0], [10.0]], [[5.0]], {("g0", "on_demand"): 1.0,
                                                     ("g1", "on_demand"): 1.0},
                        gpu=["g0", "g1"], max_gpus={"g1": 0})
    problem = base.with_changes(
        workloads=pd.DataFrame({"workload": ["w", "v"], "pool": ["p", "q"], "redundancy_k": 0}),
        configs=base.configs.assign(pool=["p", "q"]),
        candidates=base.candidates.assign(workload=["w", "v"]),
        demand=pd.concat([base.demand, base.demand.assign(workload="v")], ignore_index=True))
    plan = optimize_problem(problem, SolveOptions(time_limit_s=10))
    table = plan.workloads.set_index("workload")
    assert table.loc["v", "served_fraction"] == 0.0 and table.loc["w", "served_fraction"] == 1.0
    assert np.isnan(table.loc["v", "usd_per_m_tokens"])


def test_explaining_unmet_demand_shares_the_time_it_is_given(monkeypatch):
    # each limit lifted is re-solved within a share of the seconds given (the call's remaining
    # time), instead of each taking the whole time limit
    given = []

    def record(problem, options, seconds):
        given.append(seconds)
        return float("inf"), None

    monkeypatch.setattr(infeasibility, "_unmet_share", record)
    problem = make_problem([[10.0]], [[50.0]], {("g0", "on_demand"): 1.0, ("g0", "spot"): 0.5},
                           max_gpus={"g0": 2}, budget_usd_per_month=100.0, spot_max_share=0.1)
    assert infeasibility.limit_reasons(problem, SolveOptions(time_limit_s=60), 0.5, 3.0) == []
    # the mocked solves take no time, so each is offered a share of what is left, never more
    assert len(given) >= 2 and given[0] <= 3.0 / 2 and max(given) <= 3.0


def test_the_elastic_model_leaves_out_dominated_configurations(monkeypatch):
    # c1 serves less on the same capped GPU: swapping its replicas for c0's never serves less,
    # so the elastic model and the lifted limits' models are built without it
    problem = make_problem([[10.0], [8.0]], [[50.0]], {("g0", "on_demand"): 1.0},
                           gpu=["g0", "g0"], max_gpus={"g0": 2}, horizon_months=1.0)
    assert dominated_configs(problem) == ["c1"]
    built = []
    for module in (optimization, infeasibility):
        def recorded(part, build=module.build_model, **kwargs):
            if kwargs.get("elastic"):
                built.append(set(part.configs["config"]))
            return build(part, **kwargs)

        monkeypatch.setattr(module, "build_model", recorded)
    plan = optimize_problem(problem, SolveOptions(time_limit_s=30, mip_gap=0.0))
    assert plan.status == "infeasible"
    assert len(built) >= 2 and all(configs == {"c0"} for configs in built)
    assert plan.unmet_demand["unmet_req_s"].sum() == pytest.approx(30.0, abs=1e-3)  # 2 x 10 served


def test_a_lifted_limit_out_of_time_is_not_built_or_solved(monkeypatch):
    # a lift's elastic model stops building at the end of its share of the time, so a large
    # model's explanation cannot outlast the call; the lift then explains nothing
    monkeypatch.setattr(infeasibility, "solve_fleet", lambda *a, **k: pytest.fail(
        "a lift was solved past its time"))
    problem = make_problem([[10.0]], [[50.0]], {("g0", "on_demand"): 1.0}, max_gpus={"g0": 2})
    assert infeasibility._unmet_share(problem, SolveOptions(time_limit_s=60), 0.0) == (
        math.inf, None)


def test_an_elastic_milp_without_a_plan_in_time_gives_its_lp_relaxations_unmet_demand(
        monkeypatch):
    # 20 req/s on 10 req/s replicas at $1/h with a $1.50 budget: whole replicas serve 10 req/s,
    # fractional ones 15. When the elastic MILP finds no plan in time (whether the time was too
    # short to start it depends on the machine), the LP's 5 req/s are reported as what it is,
    # at least what every plan leaves unmet, instead of nothing at all
    problem = make_problem([[10.0]], [[20.0]], {("g0", "on_demand"): 1.0},
                           budget_usd_per_month=1.5, horizon_months=1.0)
    whole = optimize_problem(problem, EXACT)
    solve = optimization.solve_fleet

    def elastic_finds_nothing(model, options, deadline=None, **kwargs):
        if model.elastic:
            return SolveOutcome("no_solution", math.nan, math.nan, "HiGHS", 0.0)
        return solve(model, options, deadline, **kwargs)

    monkeypatch.setattr(optimization, "solve_fleet", elastic_finds_nothing)
    relaxed = optimize_problem(problem, EXACT)
    assert relaxed.status == "infeasible" and relaxed.fleet.empty
    assert relaxed.unmet_demand["unmet_req_s"].sum() == pytest.approx(5.0, rel=1e-6)
    assert whole.unmet_demand["unmet_req_s"].sum() >= relaxed.unmet_demand["unmet_req_s"].sum()
    assert optimization.RELAXED_UNMET_MESSAGE in relaxed.messages
    assert set(relaxed.unmet_demand["reason"]) == {"needs $2.00 per month but the budget is $1.50"}
