"""The commitment options' table of a stochastic plan: no option cheaper in expectation than
the stochastic plan, a known instance's table, options past the time limit, options priced on
the plan's own configurations and merged periods, and the plan's own solution standing in where
no re-solve prices its commitment."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings

import fleetplan.optimizer.commitment_risk as commitment_risk
from fleetplan.optimizer.commitment_risk import (
    add_commitments,
    commitment_table,
    value_of_stochastic_solution,
)
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.stochastic_problem import with_demand_factors
from tests.optimizer.instances import make_problem
from tests.optimizer.stochastic_instances import EXACT, HOURS, OUTCOMES, PRICES, tiny


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
