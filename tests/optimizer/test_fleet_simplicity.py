"""Fleet simplicity (at most N configurations per workload, one quantization per model) against
brute force: the MILP's binaries must pick the best subset of configurations."""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fleetplan.errors import ScenarioError
from fleetplan.optimizer import optimization
from fleetplan.optimizer.example import example_scenario
from fleetplan.optimizer.fleet_simplicity import check_simplicity, models_no_quant_serves
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.plan_checks import PlanView
from fleetplan.optimizer.scenario_planning import plan_scenario
from tests.optimizer.instances import brute_force_usd, make_problem
from tests.optimizer.plan_checker import check_plan
from tests.optimizer.test_bruteforce import EXACT, SETTINGS
from tests.optimizer.test_supply import with_api

MAX_REPLICAS = 4


def restricted(problem, configs):
    """``problem`` with only ``configs`` offered."""
    return problem.with_changes(
        configs=problem.configs[problem.configs["config"].isin(configs)],
        candidates=problem.candidates[problem.candidates["config"].isin(configs)])


def best_subset_usd(problem, subsets) -> float:
    return min((brute_force_usd(restricted(problem, s), MAX_REPLICAS) for s in subsets),
               default=math.inf)


@st.composite
def three_configs(draw):
    capacity = draw(st.lists(st.lists(st.sampled_from([0.0, 2.0, 3.0, 5.0]), min_size=2,
                                      max_size=2), min_size=3, max_size=3))
    demand = draw(st.lists(st.lists(st.sampled_from([0.0, 1.0, 2.5, 4.0]), min_size=2,
                                    max_size=2), min_size=1, max_size=2))
    offers = {(f"g{c}", "on_demand"): draw(st.sampled_from([1.0, 1.5, 2.0])) for c in range(3)}
    if draw(st.booleans()):
        offers[("g0", "reserved_1y")] = 0.6
    return make_problem(capacity, demand, offers, redundancy_k=draw(st.integers(0, 1)))


def agree(problem, expected):
    plan = optimize_problem(problem, EXACT)
    if math.isinf(expected):
        assert not plan.feasible or plan.fleet_by_period["replicas"].max() > MAX_REPLICAS
        return
    assert plan.status == "optimal"
    assert check_plan(plan, problem) == []
    if plan.fleet_by_period.groupby(["config", "period"])["replicas"].sum().max() <= MAX_REPLICAS:
        assert plan.objective_usd == pytest.approx(expected, rel=1e-6, abs=1e-6)


@pytest.mark.slow
@SETTINGS
@given(three_configs(), st.integers(1, 2))
@example(make_problem([[2.0, 0.0], [0.0, 2.0], [3.0, 3.0]], [[1.0, 1.0]],  # 2 cheap or 1 dear
                      {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 1.0,
                       ("g2", "on_demand"): 2.5}), 1)
def test_at_most_n_configurations_matches_brute_force(problem, limit):
    configs = problem.configs["config"].tolist()
    subsets = [s for n in range(1, limit + 1) for s in itertools.combinations(configs, n)]
    agree(problem.with_changes(max_configs_per_workload=limit), best_subset_usd(problem, subsets))


@pytest.mark.slow
@SETTINGS
@given(three_configs(), st.lists(st.sampled_from(["bf16", "fp8"]), min_size=3, max_size=3))
def test_one_quantization_per_model_matches_brute_force(problem, quants):
    configs = problem.configs.assign(model="m", quant=quants)
    problem = problem.with_changes(configs=configs)
    subsets = [configs.loc[configs["quant"] == q, "config"].tolist() for q in set(quants)]
    agree(problem.with_changes(one_quant_per_model=True), best_subset_usd(problem, subsets))


def test_the_rule_binds_and_is_priced():
    # two cheap single-bucket configurations, or one dear one serving both buckets
    problem = make_problem([[2.0, 0.0], [0.0, 2.0], [3.0, 3.0]], [[1.0, 1.0]],
                           {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 1.0,
                            ("g2", "on_demand"): 2.5})
    free = optimize_problem(problem, EXACT)
    assert free.objective_usd == pytest.approx(2.0)
    simple = optimize_problem(problem.with_changes(max_configs_per_workload=1), EXACT)
    assert simple.objective_usd == pytest.approx(2.5)
    assert set(simple.routing.loc[simple.routing["fraction"] > 0, "config"]) == {"c2"}
    view = PlanView.of(free, problem.with_changes(max_configs_per_workload=1))
    assert check_simplicity(view) == ["simplicity: w uses 2 configurations, more than 1"]


def test_one_quant_needs_the_quantization_of_every_configuration():
    problem = make_problem([[2.0]], [[1.0]], {("g0", "on_demand"): 1.0})
    with pytest.raises(ScenarioError, match="one_quant_per_model needs the model and "
                                            "quantization of every configuration"):
        optimize_problem(problem.with_changes(one_quant_per_model=True), EXACT)


@pytest.mark.slow
def test_the_example_runs_each_model_in_one_quantization_with_two_variants_at_most():
    scenario = example_scenario()
    fleet = scenario.fleet.model_copy(update={"one_quant_per_model": True,
                                              "max_configs_per_workload": 2})
    scenario = scenario.model_copy(update={"fleet": fleet})
    for workload in scenario.workloads:
        workload.quants = ["bf16", "fp8"]
    plan = plan_scenario(scenario, what_if=False)
    assert plan.feasible
    used = plan.routing[plan.routing["fraction"] > 1e-6]
    assert used.groupby("workload")["config"].nunique().max() <= 2
    quants = used["config"].str.split("/").str[2].str.split("@").str[0]
    assert quants.groupby(used["config"].str.split("/").str[0]).nunique().max() == 1
    assert plan.assumptions["recheck"] == "passed"


def _split_quants(api: bool = False):
    """Workload w runs only fp8 (c0), w1 only bf16 (c1), both of model m."""
    base = make_problem([[2.0], [0.0]], [[1.0]], {("g0", "on_demand"): 1.0,
                                                  ("g1", "on_demand"): 1.0},
                        one_quant_per_model=True)
    second = base.candidates.assign(workload="w1", req_s_per_replica=[0.0, 2.0])
    problem = base.with_changes(
        workloads=pd.DataFrame({"workload": ["w", "w1"], "pool": "p", "redundancy_k": 0}),
        demand=pd.concat([base.demand, base.demand.assign(workload="w1")], ignore_index=True),
        candidates=pd.concat([base.candidates, second], ignore_index=True),
        configs=base.configs.assign(model="m", quant=["fp8", "bf16"]))
    return with_api(problem, usd_per_request=0.01) if api else problem


def test_a_model_no_one_quantization_serves_is_infeasible_without_a_solve(monkeypatch):
    # the LP relaxation serves both workloads with flags of 0.5; the check proves no plan
    # exists before any solve, and the elastic plan explains the unmet demand
    problem = _split_quants()
    assert models_no_quant_serves(build_model(problem)) == ["m"]
    solved = []
    real = optimization.solve_fleet

    def recorded(model, *arguments, **keywords):
        solved.append(model.elastic)
        return real(model, *arguments, **keywords)

    monkeypatch.setattr(optimization, "solve_fleet", recorded)
    plan = optimize_problem(problem, EXACT)
    assert plan.status == "infeasible" and solved == [True]
    assert plan.messages[0] == (
        "one_quant_per_model: no single quantization serves every workload of m (w, w1); "
        "allow more (fleet.one_quant_per_model: false) or give the workloads a quantization "
        "in common (workloads[].quants)")


def test_a_bucket_a_hosted_api_may_serve_needs_no_quantization():
    # w may go to the API, so bf16 for w1 alone serves the model
    model = build_model(_split_quants(api=True))
    assert models_no_quant_serves(model) == []
    assert optimize_problem(model.problem, EXACT).status == "optimal"
