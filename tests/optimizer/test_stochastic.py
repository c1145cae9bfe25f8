"""Two-stage stochastic planning: the first stage against a brute force over commitment levels,
CVaR, the cost cover cut, and the (scenario, month) grouping of periods in budgets and plan
checks. The commitment options' table is tested in ``test_commitment_options.py``."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings

from fleetplan.optimizer.api_supply import api_shares
from fleetplan.optimizer.commitment_risk import add_commitments
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.period_merging import merge_identical_periods
from fleetplan.optimizer.plan_checks import PlanView, check_budget, scenario_month_usd
from fleetplan.optimizer.solver import open_solver
from fleetplan.optimizer.stochastic_model import cost_quantile, cvar_usd, scenario_costs
from fleetplan.optimizer.stochastic_problem import (
    demand_quantile_scenario,
    outcome_problem,
    with_demand_factors,
)
from tests.optimizer.instances import make_problem
from tests.optimizer.stochastic_instances import EXACT, HOURS, OUTCOMES, PRICES, tiny
from tests.optimizer.test_supply import with_api


def brute_force(k0, k1, on_demand, reserved, other, demands, probabilities, weight=0.0,
                alpha=0.9, max_reserved=8, max_flexible=10):
    """Objective (expected cost + weight x CVaR) per reserved count, each scenario's recourse
    enumerated: on-demand replicas of c0 and c1 covering its demand at least cost."""
    p = np.asarray(probabilities, dtype=float)
    objective = {}
    for held in range(max_reserved + 1):
        costs = []
        for demand in demands:
            costs.append(min(held * reserved * HOURS + (o0 * on_demand + o1 * other) * HOURS
                             for o0, o1 in itertools.product(range(max_flexible + 1), repeat=2)
                             if (held + o0) * k0 + o1 * k1 >= demand - 1e-9))
        costs = np.asarray(costs)
        tail = min(eta + np.dot(p, np.clip(costs - eta, 0, None)) / (1 - alpha) for eta in costs)
        objective[held] = float(np.dot(p, costs) + weight * tail)
    return objective


def reserved_count(plan) -> int:
    fleet = plan.fleet
    return int(fleet.loc[fleet["pricing_type"] == "reserved_1y", "replicas_peak"].sum())


SETTINGS = settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@SETTINGS
@given(PRICES, OUTCOMES)
@example((2.0, 4.0, 1.0, 0.5, 1.6), ([1.0, 5.0, 12.0], [0.3, 0.4, 0.3]))
def test_first_stage_matches_a_brute_force_over_commitment_levels(prices, outcomes):
    demands, probabilities = outcomes
    plan = optimize_problem(tiny(*prices, demands, probabilities), EXACT)
    objective = brute_force(*prices, demands, probabilities)
    assert plan.feasible
    assert objective[reserved_count(plan)] == pytest.approx(min(objective.values()), rel=1e-9)
    assert plan.objective_usd == pytest.approx(min(objective.values()), rel=1e-9)


@pytest.mark.parametrize("weight", [0.5, 3.0])
def test_cvar_first_stage_matches_a_brute_force(weight):
    prices, demands, probabilities = (2.0, 4.0, 1.0, 0.8, 1.6), [1.0, 5.0, 12.0], [0.3, 0.4, 0.3]
    plan = optimize_problem(tiny(*prices, demands, probabilities, cvar_alpha=0.9,
                                 cvar_weight=weight), EXACT)
    objective = brute_force(*prices, demands, probabilities, weight=weight)
    assert objective[reserved_count(plan)] == pytest.approx(min(objective.values()), rel=1e-9)
    neutral = brute_force(*prices, demands, probabilities)
    assert neutral[reserved_count(plan)] > min(neutral.values())  # risk aversion moves it


def test_cvar_with_weight_zero_is_the_expected_cost():
    prices, demands, probabilities = (2.0, 4.0, 1.0, 0.8, 1.6), [1.0, 5.0, 12.0], [0.3, 0.4, 0.3]
    expected = optimize_problem(tiny(*prices, demands, probabilities), EXACT)
    zero = optimize_problem(tiny(*prices, demands, probabilities, cvar_weight=0.0), EXACT)
    model = build_model(tiny(*prices, demands, probabilities, cvar_weight=0.0))
    assert "cvar" not in set(model.constraint_table()["family"])
    assert zero.objective_usd == pytest.approx(expected.objective_usd, rel=1e-12)
    assert reserved_count(zero) == reserved_count(expected)


def test_cost_quantile_and_cvar_of_a_discrete_distribution():
    assert cost_quantile([1.0, 2.0, 3.0], [0.5, 0.3, 0.2], 0.9) == 3.0
    assert cost_quantile([1.0, 2.0, 3.0], [0.5, 0.3, 0.2], 0.5) == 1.0
    assert cvar_usd([1.0, 2.0, 3.0], [0.5, 0.3, 0.2], 0.6) == pytest.approx(
        (0.2 * 2.0 + 0.2 * 3.0) / 0.4)
    assert math.isnan(cost_quantile([], [], 0.9))


def test_scenario_copies_share_hours_by_probability():
    problem = tiny(2.0, 4.0, 1.0, 0.5, 1.6, [1.0, 5.0, 12.0], [0.3, 0.4, 0.3])
    assert problem.horizon_hours == pytest.approx(HOURS)
    assert problem.periods["scenario"].tolist() == ["s0", "s1", "s2"]
    assert demand_quantile_scenario(problem, 0.5) == "s1"
    assert demand_quantile_scenario(problem, 0.9) == "s2"
    alone = outcome_problem(problem, "s2")
    assert alone.horizon_hours == pytest.approx(HOURS)
    assert alone.demand["req_s"].tolist() == [12.0]


def test_identical_periods_merge_only_within_a_scenario():
    base = make_problem([[4.0]], [[2.0], [2.0]], {("g0", "on_demand"): 1.0}, hours=[5.0, 5.0])
    two = pd.DataFrame({"scenario": ["a", "b"], "probability": [0.5, 0.5], "factor": [1.0, 1.0]})
    merged, representative = merge_identical_periods(with_demand_factors(base, two))
    assert merged.periods["scenario"].tolist() == ["a", "b"]
    assert representative.tolist() == [0, 0, 2, 2]


def test_the_budget_holds_in_every_scenario_and_month():
    problem = tiny(2.0, 4.0, 1.0, 0.5, 1.6, [1.0, 5.0, 12.0], [0.3, 0.4, 0.3])
    month = HOURS / 12
    # the high scenario alone needs 6 req/s beyond what the cheapest commitment carries
    capped = problem.with_changes(budget_usd_per_month=4.0 * month)
    model = build_model(capped)
    rows = model.constraint_table().query("family == 'budget'")
    assert sorted(rows["subject"]) == ["s0 month 0", "s1 month 0", "s2 month 0"]
    plan = optimize_problem(capped, EXACT)
    costs = add_commitments(plan, capped, EXACT).commitments
    own = costs[costs["option"] == "stochastic"]
    assert (own["usd_per_month"] <= 4.0 * month * (1 + 1e-9)).all()
    assert plan.objective_usd > optimize_problem(problem, EXACT).objective_usd


def test_hosted_api_spend_is_recourse_in_every_scenario_cost():
    # an API at $0.0002/request ($0.72/h per req/s) undercuts replicas; each scenario's cost
    # counts what it spends there, so the expected scenario cost is the plan's objective
    problem = with_api(tiny(2.0, 4.0, 3.0, 1.0, 1.6, [1.0, 5.0], [0.5, 0.5]),
                       usd_per_request=0.0002)
    model = build_model(problem)
    result = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=30, mip_gap=0.0)
    values = result.values
    shares = api_shares(model)
    api_usd = float((shares["usd"] * values[shares["col"].to_numpy(dtype=np.int64)]).sum())
    assert api_usd > 0
    costs = scenario_costs(model, values)
    assert float((costs["probability"] * costs["usd"]).sum()) == pytest.approx(
        result.outcome.objective, rel=1e-9)


def test_the_cost_cover_cut_bounds_replica_cost_not_the_cvar_term():
    # the cut's small MILPs once kept the CVaR objective, raising their bound above any
    # replica cost and cutting off the optimum (9,738.2 instead of 3,781.4 here)
    problem = tiny(2.0, 4.0, 1.0, 0.8, 1.6, [1.0, 5.0, 12.0], [0.3, 0.4, 0.3], cvar_alpha=0.9,
                   cvar_weight=0.5)
    objectives = []
    for cut in (False, True):
        model = build_model(problem, cost_cover=cut)
        objectives.append(open_solver(model.program, model.cost, EXACT).solve(
            time_limit_s=30, mip_gap=0.0).outcome.objective)
    assert objectives[1] == pytest.approx(objectives[0], rel=1e-9)
    assert objectives[0] == pytest.approx(
        min(brute_force(2.0, 4.0, 1.0, 0.8, 1.6, [1.0, 5.0, 12.0], [0.3, 0.4, 0.3],
                        weight=0.5).values()), rel=1e-9)


def expected_scenario_month(plan, problem) -> tuple[pd.Series, float]:
    """Each scenario-month's cost as the budget check reads it, and their probability-weighted
    month [USD]."""
    costs = scenario_month_usd(PlanView.of(plan, problem))
    probability = problem.periods.groupby("scenario")["probability"].first()
    return costs, float((costs.droplevel("month") * probability).sum())


def test_the_plan_check_reads_the_budget_in_every_scenario_not_on_average():
    problem = tiny(2.0, 4.0, 1.0, 0.5, 1.6, [1.0, 5.0, 12.0], [0.3, 0.4, 0.3])
    plan = optimize_problem(problem, EXACT)
    # the expected month is the probability-weighted scenario months, as the plan reports it
    costs, expected = expected_scenario_month(plan, problem)
    assert expected == pytest.approx(float(plan.costs_by_month["usd"].iloc[0]), rel=1e-6)
    # a budget between the average month and the dearest scenario's is broken only per scenario
    budget = (expected + costs.max()) / 2
    assert costs.max() > budget > expected
    capped = problem.with_changes(budget_usd_per_month=budget)
    problems = check_budget(PlanView.of(plan, capped))
    dearest = costs.idxmax()
    assert problems == [f"budget: {dearest[0]} month {dearest[1]} costs {costs.max():,.2f} USD"
                        f" > {budget:,.2f}"]
    # the optimizer's own plan under that budget passes
    within = optimize_problem(capped, EXACT)
    assert within.feasible and check_budget(PlanView.of(within, capped)) == []


def test_scenario_months_count_hosted_api_spend():
    problem = with_api(tiny(2.0, 4.0, 3.0, 1.0, 1.6, [1.0, 5.0], [0.5, 0.5]),
                       usd_per_request=0.0002)
    plan = optimize_problem(problem, EXACT)
    assert not plan.api_routing.empty
    assert expected_scenario_month(plan, problem)[1] == pytest.approx(
        float(plan.costs_by_month["usd"].iloc[0]), rel=1e-6)


def test_scenario_months_count_the_fixed_cost_per_configuration():
    problem = tiny(2.0, 4.0, 1.0, 0.5, 1.6, [1.0, 5.0, 12.0], [0.3, 0.4, 0.3]).with_changes(
        config_fixed_usd_per_month=500.0)
    plan = optimize_problem(problem, EXACT)
    assert not plan.config_fixed_costs.empty
    assert expected_scenario_month(plan, problem)[1] == pytest.approx(
        float(plan.costs_by_month["usd"].iloc[0]), rel=1e-6)
