"""The demand floor (``optimizer/demand_floor.py``): known values, never above the best plan
(on random instances in ``test_bruteforce.py``, whose plans these share; here with the other
constraint families), and the bound a plan reports when its solve proves none higher in
time."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from fleetplan.optimizer import optimization
from fleetplan.optimizer.demand_floor import (
    FLOOR_NOTE,
    demand_floor_usd,
    floored,
    least_gpu_hour_usd,
    route_floor_usd,
)
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.solver import SolveOptions, SolveOutcome
from tests.optimizer.instances import make_problem
from tests.optimizer.test_disaggregation import paired_problem
from tests.optimizer.test_replanning import tiny as replanning_problem
from tests.optimizer.stochastic_instances import tiny as stochastic_problem
from tests.optimizer.test_supply import with_api

EXACT = SolveOptions(time_limit_s=30, mip_gap=0.0)


def floor_of(problem) -> float:
    return demand_floor_usd(build_model(problem, cost_cover=False))


def test_route_floor_is_hours_times_load_times_price():
    assert route_floor_usd(0.8, 2.0, 10.0) == pytest.approx(16.0)


@pytest.mark.parametrize(("utilization", "k", "expected"), [
    (1.0, 0, 20.0),  # a load of 0.8 replica (16 USD) needs one whole replica (20 USD)
    (0.5, 0, 40.0),  # 1.6 replicas at half utilization (32 USD): two whole ones
    (1.0, 1, 40.0),  # N+1: two whole replicas
    (0.1, 0, 160.0),  # 8 replicas, all whole: the load and the whole count agree
])
def test_known_values(utilization, k, expected):
    # 4 req/s on 5 req/s replicas at 2 USD/GPU-hour for 10 hours
    problem = make_problem([[5.0]], [[4.0]], {("g0", "on_demand"): 2.0}, hours=[10.0],
                           redundancy_k=k, target_utilization=utilization)
    assert floor_of(problem) == pytest.approx(expected)


def test_the_bucket_floor_binds_across_configurations():
    # 3 req/s on a 2 req/s replica at 1 USD (1.5 USD) or a 10 req/s one at 4 USD (1.2 USD):
    # the cheapest per request prices the load, one whole replica at the cheaper 1 USD
    problem = make_problem([[2.0], [10.0]], [[3.0]], {("g0", "on_demand"): 1.0,
                                                     ("g1", "on_demand"): 4.0})
    assert floor_of(problem) == pytest.approx(1.2)


def test_a_reserved_term_counts_at_its_charged_price():
    offers = {("g0", "on_demand"): 2.0, ("g0", "reserved_1y"): 1.2}
    within = make_problem([[5.0]], [[4.0]], offers, hours=[10.0], horizon_months=12.0)
    assert floor_of(within) == pytest.approx(12.0)
    # a 1-year term on a 1-month horizon is charged 12 months: on demand is the cheapest
    beyond = make_problem([[5.0]], [[4.0]], offers, hours=[10.0], horizon_months=1.0)
    assert floor_of(beyond) == pytest.approx(20.0)


def test_a_cheap_api_lowers_the_bucket_floor():
    problem = with_api(make_problem([[5.0]], [[7.0]], {("g0", "on_demand"): 1.0}), 1e-5)
    floor = floor_of(problem)
    assert floor == pytest.approx(3600 * 7.0 * 1e-5)  # all of it to the API
    assert floor <= optimize_problem(problem, EXACT).objective_usd + 1e-9


def test_gpus_already_paid_for_count_as_free():
    replicas = pd.DataFrame({"gpu": ["a", "a", "b"], "pricing_type": ["on_demand", "owned",
                                                                      "spot"]})
    nodes = pd.DataFrame({"gpu": ["a", "b", "b"], "pricing_type": ["on_demand", "spot", "spot"],
                          "usd_per_gpu_hour": [3.0, 1.5, 1.2]})
    least = least_gpu_hour_usd(replicas, nodes)
    assert least.to_dict() == {"a": 0.0, "b": 1.2}


def test_no_floor_for_an_elastic_model_or_a_negative_price():
    problem = make_problem([[5.0]], [[4.0]], {("g0", "on_demand"): 2.0})
    assert demand_floor_usd(build_model(problem, elastic=True)) == -math.inf
    model = build_model(problem, cost_cover=False)
    model.nodes = model.nodes.assign(usd_per_gpu_hour=-1.0)
    assert demand_floor_usd(model) == -math.inf


def test_floored_keeps_a_higher_bound_and_an_infeasible_outcome():
    plan = SolveOutcome("time_limit", math.nan, 100.0, "highs", 1.0)
    assert floored(plan, 40.0, 0.01).bound == 40.0
    assert floored(plan, 40.0, 0.01).gap == pytest.approx(0.6)
    assert floored(plan, 40.0, 0.01).status == "time_limit"
    assert floored(plan, 99.5, 0.01).status == "optimal"  # proven within the accepted gap
    proven = dataclasses.replace(plan, bound=90.0, gap=0.1)
    assert floored(proven, 40.0, 0.01) is proven
    infeasible = SolveOutcome("infeasible", math.nan, math.nan, "highs", 1.0)
    assert floored(infeasible, 40.0, 0.01) is infeasible
    assert floored(plan, -math.inf, 0.01) is plan
    assert floored(plan, 0.0, 0.01) is plan  # GPUs already paid for: $0 bounds nothing
    by_cbc = SolveOutcome("optimal", 0.0, 100.0, "PULP_CBC_CMD", 1.0)  # a gap, no bound
    assert floored(by_cbc, 40.0, 0.01) is by_cbc
    assert floored(dataclasses.replace(by_cbc, status="time_limit", gap=0.7), 40.0, 0.01).bound \
        == 40.0  # above the 30.0 its gap implies


def test_a_plan_cbc_proves_optimal_stays_optimal():
    # CBC reports no dual bound: its proven plan must not fall back to the far weaker floor
    problem = make_problem([[5.0], [3.0]], [[9.0]], {("g0", "on_demand"): 2.0,
                                                   ("g1", "on_demand"): 1.0},
                           hours=[10.0], redundancy_k=1)  # one period: CBC's MILP, whole
    plan = optimize_problem(problem, SolveOptions(time_limit_s=30, mip_gap=0.0, solver="cbc"))
    assert floor_of(problem) < plan.objective_usd
    assert plan.status == "optimal" and plan.gap == 0.0


def test_a_plan_without_a_proven_bound_reports_the_floor(monkeypatch):
    problem = make_problem([[5.0]], [[4.0], [9.0]], {("g0", "on_demand"): 2.0},
                           hours=[10.0, 10.0])
    solve = optimization.solve_fleet

    def unproven(model, options, deadline=None, **kwargs):
        outcome = solve(model, options, deadline, **kwargs)
        return dataclasses.replace(outcome, status="time_limit", bound=math.nan, gap=math.nan)

    monkeypatch.setattr(optimization, "solve_fleet", unproven)
    plan = optimize_problem(problem, SolveOptions(time_limit_s=10, mip_gap=0.0))
    assert plan.bound_usd == pytest.approx(floor_of(problem))  # 1 + 2 replicas, 10 h each
    assert plan.bound_usd == pytest.approx(60.0)
    assert plan.status == "optimal"  # the optimum is the floor here: 3 replica-periods
    assert plan.assumptions["bound"] == FLOOR_NOTE


FAMILIES = {
    "demand scenarios": lambda: stochastic_problem(2.0, 4.0, 1.0, 0.8, 1.6, [1.0, 5.0, 12.0],
                                                   [0.3, 0.4, 0.3]),
    "CVaR": lambda: stochastic_problem(2.0, 4.0, 1.0, 0.8, 1.6, [1.0, 5.0, 12.0],
                                       [0.3, 0.4, 0.3], cvar_alpha=0.9, cvar_weight=3.0),
    "a prefill/decode pair": lambda: paired_problem([2.0, 4.0, 2.0], [3.0, 1.0, 1.0], 6.0),
    "a pair with N+1": lambda: paired_problem([2.0, 4.0, 2.0], [3.0, 1.0, 1.0], 6.0,
                                              redundancy_k=1),
    "today's fleet and lead times": lambda: replanning_problem([2, 4, 1], start=1, max_new=2.0,
                                                               churn=4, least=1),
    "owned GPUs": lambda: replanning_problem([2, 4, 1], owned=1),
    "an API": lambda: with_api(make_problem([[5.0]], [[7.0]], {("g0", "on_demand"): 1.0}),
                               1e-4),
    "8-GPU nodes": lambda: make_problem([[3.0], [5.0]], [[4.0], [11.0]],
                                        {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 1.5},
                                        tp=[2, 1], gpus_per_node={"g0": 8, "g1": 1},
                                        redundancy_k=1),
}


@pytest.mark.parametrize("name", FAMILIES)
def test_floor_never_above_the_optimum_with_other_families(name):
    problem = FAMILIES[name]()
    plan = optimize_problem(problem, EXACT)
    assert plan.status == "optimal"
    floor = floor_of(problem)
    assert math.isfinite(floor) and floor <= plan.objective_usd * (1 + 1e-9) + 1e-9


def test_a_plan_not_found_in_time_says_so_with_the_floor(monkeypatch):
    problem = make_problem([[5.0]], [[4.0], [9.0]], {("g0", "on_demand"): 2.0},
                           hours=[10.0, 10.0], horizon_months=2.0)

    def nothing(model, options, deadline=None, **kwargs):
        return SolveOutcome("no_solution", math.nan, math.nan, "HiGHS", 1.0)

    monkeypatch.setattr(optimization, "solve_fleet", nothing)
    plan = optimize_problem(problem, SolveOptions(time_limit_s=10, mip_gap=0.0))
    assert plan.status == "no_solution" and plan.bound_usd == pytest.approx(60.0)
    assert ("no_solution: no plan that keeps every limit was found in the time, nor was one "
            "proven not to exist; none can cost less than $30.00 per month (the demand floor); "
            "raise solver.time_limit_s") in plan.messages[-1]


@pytest.mark.parametrize(("gap", "status"), [(0.0, "optimal"), (4.6e-8, "optimal"),
                                             (9e-7, "optimal"), (2e-6, "time_limit")])
def test_a_gap_of_round_off_beyond_the_accepted_is_still_optimal(gap, status):
    # CBC's LP bound sat 4.6e-8 under the optimum it proved at mip_gap 0 (every period solved
    # on its own): round-off, not a plan stopped short
    outcome = SolveOutcome("optimal", gap, 70.0, "PULP_CBC_CMD", 0.1, 70.0 * (1 - gap))
    assert optimization.plan_status(outcome, SolveOptions(mip_gap=0.0)) == status
