"""Chargeback: hand-solved allocations, every rule, and the plan's total to the cent on random
small plans solved by the real MILP."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fleetplan.errors import FleetplanError, ScenarioError
from fleetplan.optimizer import chargeback
from fleetplan.optimizer.chargeback import chargeback_table, usd_per_m_tokens, workload_charges
from fleetplan.optimizer.cost_pools import calendar_months, largest_remainder
from fleetplan.optimizer.scenario_files import validate_scenario
from tests.optimizer.chargeback_plans import shared_problem, solved

RULES = ("usage", "even", "owner:b")


def charged(plan) -> dict[str, float]:
    return workload_charges(plan).groupby("workload")["usd"].sum().round(2).to_dict()


# One replica ($1/h x 10 h = $10) carries 0.6 + 0.2 = 0.8 of its capacity: $8 used, $2 spare.
# Tokens/s: w1 6 x 200 = 1200, w2 2 x 400 = 800, so used dollars split 60/40: $4.80 and $3.20.
@pytest.mark.parametrize(("rule", "expected"), [
    ("usage", {"w1": 6.00, "w2": 4.00}),   # spare follows used cost 60/40
    ("even", {"w1": 5.80, "w2": 4.20}),    # $1 each
    ("owner:b", {"w1": 4.80, "w2": 5.20}),  # all $2 to team b
])
def test_hand_solved_allocation(rule, expected):
    plan = solved(shared_problem(), rule)
    assert plan.objective_usd == pytest.approx(10.0)
    assert charged(plan) == expected
    spare = workload_charges(plan).groupby("workload")["spare_usd"].sum().round(2).to_dict()
    assert sum(spare.values()) == pytest.approx(2.0)


def test_tokens_not_requests_split_a_shared_replica():
    # same request rates, w2's requests four times the tokens: w2 pays 4/5 of the used part
    plan = solved(shared_problem(demand=((4.0, 4.0),), sizes=((100, 100), (400, 400))))
    charges = charged(plan)
    assert charges["w2"] == pytest.approx(4 * charges["w1"], abs=0.01)


def test_idle_node_gpus_are_spare_and_charged():
    # 0.8 replica of load, nodes of 4 GPUs: 1 GPU of 4 bought ($40) busy; 3 idle ($30) + $2 spare
    plan = solved(shared_problem(gpus_per_node=4), "owner:a")
    assert plan.objective_usd == pytest.approx(40.0)
    table = workload_charges(plan)
    assert table["usd"].sum() == pytest.approx(40.0)
    assert table.set_index("workload")["spare_usd"].round(2).to_dict() == {"w1": 32.0, "w2": 0.0}


def test_reserved_commitment_idle_hours_fall_in_their_months():
    # 1 month, 2 periods of 10 h: 2 replicas, then 1; reserved pays 2 all month (one idle 10 h)
    problem = shared_problem(demand=((9.0, 9.0), (3.0, 3.0)), hours=(10.0, 10.0),
                             offers=(("g", "reserved_1y", 0.5),), horizon_months=12.0,
                             month_weight=12.0)
    plan = solved(problem)
    table = workload_charges(plan)
    assert sorted(table["month"].unique()) == list(range(12))
    by_month = table.groupby("month")["usd"].sum()
    assert by_month.round(2).nunique() <= 2  # even months, a cent apart at most
    assert round(table["usd"].sum() * 100) == round(plan.objective_usd * 100)


def test_team_table_sums_workloads_and_prices_tokens():
    plan = solved(shared_problem(), teams=("a", "a"))
    table = chargeback_table(plan)
    assert list(table.columns) == ["month", "team", "cost_center", "usd", "used_usd", "spare_usd",
                                   "tokens", "usd_per_m_tokens"]
    assert table["usd"].sum() == pytest.approx(10.0)
    assert set(table["team"]) == {"a"} and set(table["cost_center"]) == {"cc-1", "cc-2"}
    row = table.iloc[0]
    assert row["usd_per_m_tokens"] == pytest.approx(row["usd"] / row["tokens"] * 1e6)
    teams = chargeback_table(plan, by=("team",))
    assert len(teams) == 1 and teams["usd"].iloc[0] == pytest.approx(10.0)


def test_workloads_without_team_are_unassigned():
    plan = solved(shared_problem())
    plan.scenario = {}
    assert set(chargeback_table(plan)["team"]) == {"(unassigned)"}


def test_a_plan_without_solution_charges_nothing():
    plan = solved(shared_problem())
    plan.objective_usd = math.nan
    assert chargeback_table(plan).empty


def test_a_plan_without_workloads_charges_nothing():
    plan = solved(shared_problem())
    empty = type(plan)(status="no_solution", gap=math.nan, objective_usd=0.0, usd_per_month=0.0,
                       solver="HiGHS", solve_seconds=1.0)
    assert chargeback_table(empty).empty and workload_charges(empty).empty
    assert list(chargeback_table(empty).columns) == list(chargeback.CHARGEBACK_COLUMNS)


def test_owner_must_be_a_team_of_the_plan():
    plan = solved(shared_problem(), "owner:platfrom", teams=("platform", "search"))
    with pytest.raises(FleetplanError, match="unknown team.*'platfrom'.*did you mean 'platform'"):
        workload_charges(plan)


@pytest.mark.parametrize(("spare", "match"), [
    ("owner:platfrom", r"chargeback: spare: unknown team 'platfrom'; did you mean 'platform'"),
    ("owner:", r"chargeback.spare: must be usage, even or owner:TEAM, got 'owner:'"),
    ("proportional", r"chargeback.spare: must be usage, even or owner:TEAM, got 'proportional'"),
])
def test_scenario_rejects_a_bad_spare_rule(spare, match):
    data = {"workloads": [{"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 1,
                           "input_tokens": 10, "output_tokens": 10, "team": "platform"}],
            "fleet": {"gpus": ["l4"]}, "chargeback": {"spare": spare}}
    with pytest.raises(ScenarioError, match=match):
        validate_scenario(data)


def test_scenario_owner_needs_some_team():
    data = {"workloads": [{"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 1,
                           "input_tokens": 10, "output_tokens": 10}],
            "fleet": {"gpus": ["l4"]}, "chargeback": {"spare": "owner:x"}}
    with pytest.raises(ScenarioError, match="no workload names a team"):
        validate_scenario(data)


def test_largest_remainder_keeps_group_totals():
    cents = largest_remainder(np.array([0.5, 0.5, 0.5, 1.2, 1.8]), np.array([2, 3]),
                              np.array([0, 0, 0, 1, 1]))
    assert cents.tolist() == [1, 1, 0, 1, 2]


def test_calendar_months_split_a_representative_month():
    months = calendar_months(pd.DataFrame({"month": [0, 0], "month_weight": [3.0, 3.0]}))
    assert months["month"].tolist() == [0, 1, 2]
    assert months["share"].sum() == pytest.approx(1.0)


def test_usd_per_m_tokens_is_nan_without_tokens():
    assert math.isnan(usd_per_m_tokens(5.0, 0.0))
    assert usd_per_m_tokens(np.array([2.0]), np.array([4e6])).tolist() == [0.5]


@st.composite
def small_plans(draw):
    periods = draw(st.integers(1, 3))
    demand = draw(st.lists(st.tuples(*[st.sampled_from([0.0, 0.7, 2.5, 6.0, 13.3])] * 2),
                           min_size=periods, max_size=periods))
    hours = draw(st.lists(st.sampled_from([1.0, 7.3, 30.0]), min_size=periods, max_size=periods))
    offers = [("g", "on_demand", draw(st.sampled_from([0.37, 1.0, 2.95])))]
    if draw(st.booleans()):
        offers.append(("g", "reserved_1y", draw(st.sampled_from([0.21, 0.6]))))
    months = draw(st.sampled_from([1.0, 3.0, 12.0]))
    problem = shared_problem(
        demand=demand, hours=hours, offers=tuple(offers), capacity=draw(st.sampled_from([3.0, 10.0])),
        sizes=draw(st.sampled_from([((100, 100), (300, 100)), ((1, 7), (5000, 3))])),
        gpus_per_node=draw(st.sampled_from([1, 2, 8])), redundancy=(draw(st.integers(0, 1)), 0),
        horizon_months=months, month_weight=months)
    problem = problem.with_changes(config_fixed_usd_per_month=draw(st.sampled_from([None, 5.55])))
    return solved(problem, draw(st.sampled_from(RULES)), teams=draw(st.sampled_from([("a", "b"), ("b", "b")])))


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_plans())
@example(solved(shared_problem(demand=((13.3, 0.7),), gpus_per_node=8), "even"))
@example(solved(shared_problem(demand=((0.0, 0.0),)), "usage"))  # no demand, nothing bought
@example(solved(shared_problem(demand=((6.0, 2.0), (0.0, 0.0)), hours=(7.3, 30.0)).with_changes(
    config_fixed_usd_per_month=5.55), "usage"))  # a fixed cost per configuration and month
def test_chargeback_sums_to_the_plan_to_the_cent(plan):
    charges = workload_charges(plan)
    cents = np.rint(charges["usd"].to_numpy() * 100).astype(int)
    assert np.allclose(charges["usd"] * 100, cents)  # whole cents
    assert cents.sum() == round(plan.objective_usd * 100)
    assert (charges["usd"] >= 0).all() and (charges["spare_usd"] <= charges["usd"] + 1e-9).all()
    table = chargeback_table(plan)
    assert round(table["usd"].sum() * 100) == cents.sum()
    months = math.ceil(plan.assumptions["horizon_months"])
    assert sorted(charges["month"].unique()) == (list(range(months)) if len(charges) else [])
