"""Two-stage stochastic planning: the first stage against a brute force over commitment levels,
the P50-only plan never cheaper in expectation than the stochastic plan, CVaR, and the
(scenario, month) grouping of periods."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import fleetplan.optimizer.commitment_risk as commitment_risk
from fleetplan.optimizer.api_supply import api_shares
from fleetplan.optimizer.commitment_risk import (
    add_commitments,
    commitment_table,
    value_of_stochastic_solution,
)
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.period_merging import merge_identical_periods
from fleetplan.optimizer.plan_checks import PlanView, check_budget, scenario_month_usd
from fleetplan.optimizer.solver import SolveOptions, open_solver
from fleetplan.optimizer.stochastic_model import cost_quantile, cvar_usd, scenario_costs
from fleetplan.optimizer.stochastic_problem import (
    demand_quantile_scenario,
    outcome_problem,
    with_demand_factors,
)
from tests.optimizer.instances import make_problem
from tests.optimizer.test_supply import with_api

EXACT = SolveOptions(time_limit_s=30, mip_gap=0.0)
HOURS = 730.0


def tiny(k0, k1, on_demand, reserved, other, demands, probabilities, **risk):
    """One workload, one bucket: configuration c0 on g0 (on-demand or reserved), c1 on g1
    (on-demand only); demand scenario s asks for ``demands[s]`` requests/s for the year."""
    problem = make_problem([[k0], [k1]], [[1.0]],
                           {("g0", "on_demand"): on_demand, ("g0", "reserved_1y"): reserved,
                            ("g1", "on_demand"): other}, hours=[HOURS])
    problem = problem.with_changes(periods=problem.periods.assign(month_weight=12.0))
    names = [f"s{i}" for i in range(len(demands))]
    scenarios = pd.DataFrame({"scenario": names, "probability": probabilities,
                              "factor": demands})
    return with_demand_factors(problem, scenarios, **risk)


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


PRICES = st.tuples(st.sampled_from([2.0, 3.0, 5.0]), st.sampled_from([2.0, 4.0, 6.0]),
                   st.sampled_from([1.0, 1.5, 2.0]), st.sampled_from([0.5, 0.8, 1.2]),
                   st.sampled_from([1.0, 1.6, 2.5]))
OUTCOMES = st.sampled_from([(0.5, 0.5), (0.3, 0.7), (0.3, 0.4, 0.3), (0.2, 0.5, 0.3)]).flatmap(
    lambda p: st.tuples(st.lists(st.sampled_from([0.0, 1.0, 3.0, 5.0, 8.0, 12.0]),
                                 min_size=len(p), max_size=len(p)), st.just(list(p))))
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


@pytest.mark.slow
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PRICES, OUTCOMES)
@example((2.0, 4.0, 1.0, 0.5, 1.6), ([1.0, 5.0, 12.0], [0.3, 0.4, 0.3]))
def test_no_commitment_option_beats_the_stochastic_plan_in_expectation(prices, outcomes):
    demands, probabilities = outcomes
    problem = tiny(*prices, demands, probabilities)
    plan = add_commitments(optimize_problem(problem, EXACT), problem, EXACT)
    table = plan.commitments
    scale = max(plan.usd_per_month, 1.0)
    assert (table["over_stochastic_usd_per_month"] >= -1e-9 * scale).all()
    assert value_of_stochastic_solution(table) >= -1e-9 * scale
    stochastic = table[table["option"] == "stochastic"]
    assert stochastic["expected_usd_per_month"].iloc[0] == pytest.approx(plan.usd_per_month)


def test_the_commitment_table_of_a_known_instance():
    prices, demands, probabilities = (2.0, 4.0, 1.0, 0.5, 1.6), [1.0, 5.0, 12.0], [0.3, 0.4, 0.3]
    problem = tiny(*prices, demands, probabilities)
    plan = add_commitments(optimize_problem(problem, EXACT), problem, EXACT)
    table = plan.commitments
    assert list(dict.fromkeys(table["option"])) == [
        "stochastic", "P50 only (s1)", "0% of P90 reserved", "25% of P90 reserved",
        "50% of P90 reserved", "75% of P90 reserved", "P90 only (s2)"]
    # brute force: 3 reserved c0 replicas (6 req/s) at 0.5 $/h; s2 needs 6 more req/s on
    # demand, cheapest as one c1 (4 req/s, 1.6 $/h) and one c0 (2 req/s, 1 $/h)
    stochastic = table[table["option"] == "stochastic"].set_index("scenario")
    assert stochastic["reserved_gpus"].iloc[0] == 3
    month = HOURS / 12
    assert stochastic.loc["s2", "usd_per_month"] == pytest.approx((3 * 0.5 + 1.6 + 1.0) * month)
    assert stochastic.loc["s0", "utilization"] == pytest.approx(1.0 / 6.0)
    assert stochastic["cost_at_risk_usd_per_month"].iloc[0] == pytest.approx(
        stochastic.loc["s2", "usd_per_month"] - stochastic["expected_usd_per_month"].iloc[0])
    assert plan.assumptions["stochastic"]["vss_usd_per_month"] == pytest.approx(
        value_of_stochastic_solution(table))


def test_commitment_options_past_the_time_limit_are_not_priced():
    # with no time left only the stochastic plan's own first stage is priced; the others are
    # no_solution with no cost, not plans made up from an empty commitment
    prices, demands, probabilities = (2.0, 4.0, 1.0, 0.5, 1.6), [1.0, 5.0, 12.0], [0.3, 0.4, 0.3]
    problem = tiny(*prices, demands, probabilities)
    plan = optimize_problem(problem, EXACT)
    fleet = plan.fleet[plan.fleet["pricing_type"] == "reserved_1y"]
    chosen = pd.DataFrame({"config": fleet["config"], "pricing_type": fleet["pricing_type"],
                           "replicas": fleet["replicas_peak"].astype(float)})
    table = commitment_table(problem, chosen, EXACT, seconds=0.0)
    status = table.drop_duplicates("option").set_index("option")["status"]
    assert status["stochastic"] == "optimal"
    assert set(status.drop("stochastic")) == {"no_solution"}
    others = table[table["option"] != "stochastic"]
    assert others["expected_usd_per_month"].isna().all()
    assert math.isnan(value_of_stochastic_solution(table))


def test_with_the_plans_own_price_no_option_model_is_built_past_the_time_limit(monkeypatch):
    # the options' model of a huge plan may take longer to build than the call has left: the
    # build stops, the stochastic option keeps the plan's own price and the rest say so
    prices, demands, probabilities = (2.0, 4.0, 1.0, 0.5, 1.6), [1.0, 5.0, 12.0], [0.3, 0.4, 0.3]
    problem = tiny(*prices, demands, probabilities)
    plan = optimize_problem(problem, EXACT)
    monkeypatch.setattr(commitment_risk, "solve_committed", lambda *a, **k: pytest.fail(
        "an option was priced past the time limit"))
    plan = add_commitments(plan, problem, dataclasses.replace(EXACT, time_limit_s=0.0))
    table = plan.commitments
    assert list(dict.fromkeys(table["option"])) == commitment_risk.option_names(problem)
    assert list(table.columns) == list(commitment_risk.COLUMNS)
    status = table.drop_duplicates("option").set_index("option")["status"]
    assert status["stochastic"] == "plan"
    assert set(status.drop("stochastic")) == {"no_solution"}
    stochastic = table[table["option"] == "stochastic"]
    assert stochastic["expected_usd_per_month"].iloc[0] == pytest.approx(plan.usd_per_month)
    assert table.loc[table["option"] != "stochastic", "expected_usd_per_month"].isna().all()
    assert sorted(table["scenario"].unique()) == ["s0", "s1", "s2"]
    assert math.isnan(plan.assumptions["stochastic"]["vss_usd_per_month"])
    assert any(m.startswith("commitment options not priced within the time limit: P50 only")
               for m in plan.messages)


def never_built(build):
    """``build`` (``milp.build_model``), failing the test when it returns a model."""
    def building(*arguments, **keywords):
        build(*arguments, **keywords)
        pytest.fail("the model was built")
    return building


def test_an_options_model_expected_to_outlast_the_time_left_is_not_begun(monkeypatch):
    # the plan's own model took as long to build as the options' will: with less time left
    # than that, the table keeps the plan's own price and builds nothing (scenario 279 built
    # 345,000 columns for 1.4 s past its limit, then priced nothing with them)
    prices, demands, probabilities = (2.0, 4.0, 1.0, 0.5, 1.6), [1.0, 5.0, 12.0], [0.3, 0.4, 0.3]
    problem = tiny(*prices, demands, probabilities)
    plan = optimize_problem(problem, EXACT)
    assert 0.0 < plan.model_build_s < 30.0  # measured on the plan's own build
    monkeypatch.setattr(commitment_risk, "build_model", never_built(build_model))
    plan.model_build_s = 60.0
    plan = add_commitments(plan, problem, dataclasses.replace(EXACT, time_limit_s=30.0))
    status = plan.commitments.drop_duplicates("option").set_index("option")["status"]
    assert status["stochastic"] == "plan" and set(status.drop("stochastic")) == {"no_solution"}


def test_options_are_priced_among_the_plans_configurations_on_merged_periods(monkeypatch):
    # c2 (1 req/s on g1, priced as c1's 4 req/s) is dominated, and the year's two halves ask
    # for the same demand: the plan was solved without c2 on one period, and so are its
    # commitment options now, for the same costs as on the problem as given
    problem = make_problem([[2.0], [4.0], [1.0]], [[1.0], [1.0]],
                           {("g0", "on_demand"): 2.0, ("g0", "reserved_1y"): 0.5,
                            ("g1", "on_demand"): 1.6}, gpu=["g0", "g1", "g1"],
                           hours=[HOURS / 2, HOURS / 2])
    problem = problem.with_changes(periods=problem.periods.assign(month_weight=12.0))
    problem = with_demand_factors(problem, pd.DataFrame(
        {"scenario": ["s0", "s1", "s2"], "probability": [0.3, 0.4, 0.3],
         "factor": [1.0, 5.0, 12.0]}))
    plan = optimize_problem(problem, EXACT)
    assert plan.assumptions["dominated_configs"] == ["c2"]
    built = []
    build = commitment_risk.build_model

    def recorded(part, **kwargs):
        model = build(part, **kwargs)
        built.append((set(part.configs["config"]), len(part.periods)))
        return model

    monkeypatch.setattr(commitment_risk, "build_model", recorded)
    table = add_commitments(plan, problem, EXACT).commitments
    assert built and all(configs == {"c0", "c1"} for configs, _ in built)
    assert built[0][1] == 3  # one period per scenario, not two
    reserved = plan.fleet[plan.fleet["pricing_type"] == "reserved_1y"]
    chosen = pd.DataFrame({"config": reserved["config"], "pricing_type": reserved["pricing_type"],
                           "replicas": reserved["replicas_peak"].astype(float)})
    monkeypatch.setattr(commitment_risk, "build_model", build)
    as_given = commitment_table(problem, chosen, EXACT, seconds=30.0)
    # costs, not utilisation: a tie in routing (idle reserved c0 or a c1 bought anyway) may
    # split either way in each half of the year
    columns = ["usd_per_month", "recourse_usd_per_month", "expected_usd_per_month",
               "p90_usd_per_month"]
    assert table[columns].to_numpy() == pytest.approx(as_given[columns].to_numpy(), nan_ok=True)


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
    assert problems == [f"budget: {dearest[0]} month {dearest[1]} costs {costs.max():,.2f} USD > {budget:,.2f}"]
    # the optimizer's own plan under that budget passes
    within = optimize_problem(capped, EXACT)
    assert within.feasible and check_budget(PlanView.of(within, capped)) == []


def test_scenario_months_count_hosted_api_spend():
    problem = with_api(tiny(2.0, 4.0, 3.0, 1.0, 1.6, [1.0, 5.0], [0.5, 0.5]), usd_per_request=0.0002)
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


def test_the_stochastic_option_costs_what_the_plan_costs_fixed_costs_included():
    # the fixed cost per deployed configuration is recourse in every scenario's cost; it was
    # left out, so the stochastic option cost $500 x months less than the plan
    problem = tiny(2.0, 4.0, 1.0, 0.5, 1.6, [1.0, 5.0, 12.0], [0.3, 0.4, 0.3]).with_changes(
        config_fixed_usd_per_month=500.0)
    plan = add_commitments(optimize_problem(problem, EXACT), problem, EXACT)
    assert not plan.config_fixed_costs.empty
    table = plan.commitments.drop_duplicates("option").set_index("option")
    assert table.loc["stochastic", "expected_usd_per_month"] == pytest.approx(
        plan.usd_per_month, rel=1e-9)


def test_the_plans_own_solution_prices_its_commitment_when_no_re_solve_finds_one(monkeypatch):
    # a huge model's options may get no recourse in their time: the stochastic plan's own
    # commitment is then priced from the plan itself (status "plan"), and every option with
    # the same first stage shares that price instead of being solved again
    problem = tiny(2.0, 4.0, 1.0, 0.5, 1.6, [1.0, 5.0, 12.0], [0.3, 0.4, 0.3])
    plan = optimize_problem(problem, EXACT)
    solved = []

    def nothing_found(model, commitment, options, seconds):
        solved.append(commitment_risk.commitment_key(commitment))
        return None, "no_solution"

    monkeypatch.setattr(commitment_risk, "solve_committed", nothing_found)
    table = add_commitments(plan, problem, EXACT).commitments
    options = table.drop_duplicates("option").set_index("option")
    assert options.loc["stochastic", "status"] == "plan"
    assert options.loc["stochastic", "expected_usd_per_month"] == pytest.approx(
        plan.usd_per_month, rel=1e-9)
    # the known instance's plan: 3 reserved c0 replicas, and s2's recourse 1.6 + 1.0 $/h
    own = table[table["option"] == "stochastic"].set_index("scenario")
    assert own.loc["s2", "usd_per_month"] == pytest.approx((3 * 0.5 + 1.6 + 1.0) * HOURS / 12)
    assert own.loc["s0", "utilization"] == pytest.approx(1.0 / 6.0)
    same = [name for name in options.index if name != "stochastic"
            and options.loc[name, "status"] == "plan"]
    assert same, "the P50-only plan commits the same 3 replicas"
    assert len(solved) == len(set(solved)), "a first stage was solved twice"
    for name in same:
        assert table.loc[table["option"] == name, "usd_per_month"].to_numpy() == pytest.approx(
            own["usd_per_month"].to_numpy())
    assert options.loc["0% of P90 reserved", "status"] == "no_solution"


def test_no_commitment_is_an_option_even_without_a_p90_only_plan(monkeypatch):
    problem = tiny(2.0, 4.0, 1.0, 0.5, 1.6, [1.0, 5.0, 12.0], [0.3, 0.4, 0.3])
    plan = optimize_problem(problem, EXACT)
    monkeypatch.setattr(commitment_risk, "single_outcome_commitment", lambda *a, **k: None)
    options = add_commitments(plan, problem, EXACT).commitments.drop_duplicates(
        "option").set_index("option")
    assert options.loc["0% of P90 reserved", "status"] == "optimal"
    assert options.loc["0% of P90 reserved", "reserved_gpus"] == 0
    # all on demand: c1 (4 req/s at 1.6 $/h) and c0 (2 req/s at 2 $/h) cover every outcome
    assert options.loc["0% of P90 reserved", "over_stochastic_usd_per_month"] > 0
    assert options.loc["25% of P90 reserved", "status"] == "no_solution"


def test_a_re_solved_recourse_is_kept_even_where_the_plans_own_is_cheaper():
    # the options and the VSS compare recourses found the same way: the plan's own solution
    # stands in only where the re-solve found none
    problem = tiny(2.0, 4.0, 1.0, 0.5, 1.6, [1.0, 5.0, 12.0], [0.3, 0.4, 0.3])
    plan = optimize_problem(problem, EXACT)
    own = plan.own_option.assign(
        usd_per_month=plan.own_option["usd_per_month"] / 2,
        expected_usd_per_month=plan.own_option["expected_usd_per_month"] / 2)
    fleet = plan.fleet[plan.fleet["pricing_type"] == "reserved_1y"]
    chosen = pd.DataFrame({"config": fleet["config"], "pricing_type": fleet["pricing_type"],
                           "replicas": fleet["replicas_peak"].astype(float)})
    table = commitment_table(problem, chosen, EXACT, seconds=30.0, own=own)
    stochastic = table[table["option"] == "stochastic"]
    assert (stochastic["status"] == "optimal").all()
    assert stochastic["expected_usd_per_month"].iloc[0] == pytest.approx(plan.usd_per_month)
