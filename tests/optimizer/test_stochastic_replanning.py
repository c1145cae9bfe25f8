"""Demand scenarios on a fleet the company already has: two-stage plans checked against a brute
force over the first-stage decision, and each scenario's changes checked against its limits.

Instance: ``test_replanning.tiny`` (committed ga GPUs that exist until their end, ga on demand
at $2 or bought at $1.2 from a start month, gb on demand at $3) with its demand scaled by each
scenario's factor. Purchases are decided once for every scenario (first stage); what runs on
today's GPUs, what is rented and how the fleet changes month by month are decided per scenario
(recourse), each scenario within the same churn limit, lead times and minimum commitment.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fleetplan.optimizer.fleet_changes import (
    changes_table,
    churn_breaks,
    min_committed_breaks,
    monthly_diff,
)
from fleetplan.optimizer.commitment_risk import add_commitments
from fleetplan.optimizer.lead_times import lead_time_breaks
from fleetplan.optimizer.stochastic_problem import with_demand_factors
from tests.optimizer.plan_checker import check_plan
from tests.optimizer.test_replanning import EXACT, MOST, least_given_purchase, solved, tiny

#: Three outcomes of the tiny instance's demand: factors and probabilities.
OUTCOMES = pd.DataFrame({"scenario": ["lo", "mid", "hi"], "probability": [0.3, 0.4, 0.3],
                         "factor": [0.5, 1.0, 1.5]})


def stochastic_tiny(demand, outcomes=OUTCOMES, **limits):
    """``tiny(demand, **limits)`` under ``outcomes``' demand factors."""
    return with_demand_factors(tiny(demand, **limits), outcomes)


def two_stage_brute_force(demand, outcomes=OUTCOMES, **limits) -> tuple[float, int]:
    """(least expected cost, ga GPUs bought): every first-stage purchase tried, each scenario's
    recourse the least-cost plan given it (``least_given_purchase``)."""
    expected = [sum(probability * least_given_purchase(np.asarray(demand) * factor, bought,
                                                       **limits)
                    for probability, factor in zip(outcomes["probability"], outcomes["factor"],
                                                   strict=True))
                for bought in range(MOST + 1)]
    return min(expected), int(np.argmin(expected))


def _bought(plan) -> float:
    """ga GPUs the plan buys (the most held in any period)."""
    fleet = plan.fleet_by_period
    return float(fleet.loc[fleet["pricing_type"] == "purchase", "gpus"].max()
                 if (fleet["pricing_type"] == "purchase").any() else 0.0)


def _brute_limits(limits: dict) -> dict:
    """The brute force's form of ``tiny``'s limits: no configuration named = not known."""
    brute = dict(limits)
    if "config" in brute:
        brute["known"] = bool(brute.pop("config"))
    return brute


def _expected_given_purchase(demand, bought, limits) -> float:
    return sum(probability * least_given_purchase(np.asarray(demand) * factor, bought, **limits)
               for probability, factor in zip(OUTCOMES["probability"], OUTCOMES["factor"],
                                              strict=True))


#: Demands of at most 2 requests/s, so no outcome needs more than MOST GPUs of a kind in a
#: month and the brute force's plans include the optimum.
INSTANCES = [
    ([1, 2, 1], {}),
    ([2, 2, 1], {"end": 2}),
    ([1, 2, 0], {"churn": 2}),
    ([2, 2, 0], {"churn": 2, "config": ""}),
    ([2, 2, 2], {"end": 3, "committed": 1, "start": 1, "max_new": 1.0}),
    ([1, 1, 1], {"least": 2}),
    ([0, 1, 0], {"churn": 1}),
]


@pytest.mark.parametrize(("demand", "limits"), INSTANCES)
def test_first_stage_purchases_equal_the_two_stage_brute_force(demand, limits):
    assert max(demand) * OUTCOMES["factor"].max() <= MOST
    problem = stochastic_tiny(demand, **limits)
    plan = solved(problem)
    best, _ = two_stage_brute_force(demand, **_brute_limits(limits))
    assert math.isfinite(best)
    assert plan.objective_usd == pytest.approx(best)
    # the plan's purchase is a best first stage: its recourse costs the optimum
    assert _expected_given_purchase(demand, round(_bought(plan)), _brute_limits(limits)) == \
        pytest.approx(best)
    assert check_plan(plan, problem) == []


def test_the_limits_of_the_instances_bind_under_demand_scenarios():
    free = {tuple(demand): two_stage_brute_force(demand)[0] for demand, _ in INSTANCES}
    limited = [two_stage_brute_force(demand, **_brute_limits(limits))[0]
               for demand, limits in INSTANCES if limits.get("churn") or limits.get("least")
               or limits.get("max_new")]
    free_of = [free[tuple(demand)] for demand, limits in INSTANCES
               if limits.get("churn") or limits.get("least") or limits.get("max_new")]
    assert sum(b > a + 1e-9 for a, b in zip(free_of, limited, strict=True)) >= 3


def test_the_commitment_options_hold_the_plans_purchases():
    demand = [1, 2, 1]
    problem = stochastic_tiny(demand)
    plan = add_commitments(solved(problem), problem, EXACT)
    best, bought = two_stage_brute_force(demand)
    assert bought == 1  # buying is worth it here: an option forcing 0 would cost more
    own = plan.commitments[plan.commitments["option"] == "stochastic"].iloc[0]
    assert own["reserved_gpus"] == pytest.approx(_bought(plan)) == pytest.approx(1.0)
    assert own["expected_usd_per_month"] * problem.horizon_months == pytest.approx(best)
    nothing = plan.commitments[plan.commitments["option"] == "0% of P90 reserved"].iloc[0]
    assert nothing["expected_usd_per_month"] * problem.horizon_months == pytest.approx(
        _expected_given_purchase(demand, 0, {}))


def test_planning_for_the_mean_outcome_alone_costs_at_least_as_much():
    demand, limits = [1, 2, 0], {"churn": 2}
    expected, _ = two_stage_brute_force(demand, **limits)
    single = pd.DataFrame({"scenario": ["mid"], "probability": [1.0], "factor": [1.0]})
    mean_bought = two_stage_brute_force(demand, single, **limits)[1]
    mean_plan_expected = _expected_given_purchase(demand, mean_bought, limits)
    assert solved(stochastic_tiny(demand, churn=2)).objective_usd <= mean_plan_expected + 1e-6
    assert expected <= mean_plan_expected + 1e-9


def test_every_scenario_changes_todays_fleet_within_the_churn_limit():
    plan = solved(stochastic_tiny([1, 2, 0], churn=2))
    assert list(plan.changes.columns[:2]) == ["scenario", "month"]
    diff = monthly_diff(plan.changes)
    assert set(diff["scenario"]) == {"lo", "mid", "hi"}
    assert diff.groupby("scenario").size().tolist() == [3, 3, 3]
    ending = diff["month"].map({0: 0.0, 1: 2.0, 2: 0.0})  # the 2 committed GPUs end in month 1
    assert (diff["changes"] <= 2 + ending + 1e-9).all()
    today = plan.changes[(plan.changes["month"] == 0) & (plan.changes["pricing_type"]
                                                          == "committed")]
    # every scenario starts from today's 2 committed GPUs
    assert today.groupby("scenario")["gpus_before"].sum().tolist() == [2.0, 2.0, 2.0]


def test_identical_scenarios_plan_as_the_single_outcome_does():
    same = OUTCOMES.assign(factor=1.0)
    demand = [1, 2, 0]
    stochastic = solved(stochastic_tiny(demand, same, churn=2))
    single = solved(tiny(demand, churn=2))
    assert stochastic.objective_usd == pytest.approx(single.objective_usd)
    one = monthly_diff(single.changes)
    for _, diff in monthly_diff(stochastic.changes).groupby("scenario"):
        assert diff["changes"].sum() == pytest.approx(one["changes"].sum())


def _scenario_changes(problem, rows):
    """A changes table of (scenario, month, gpus_before, gpus) rows for ga on_demand."""
    table = pd.DataFrame(rows, columns=["scenario", "month", "gpus_before", "gpus"]).assign(
        gpu="ga", pricing_type="on_demand", config="a1")
    table["added"] = (table["gpus"] - table["gpus_before"]).clip(lower=0.0)
    table["removed"] = (table["gpus_before"] - table["gpus"]).clip(lower=0.0)
    table["kept"] = np.minimum(table["gpus"], table["gpus_before"])
    return table


def test_churn_breaks_name_the_month_and_the_scenario():
    problem = stochastic_tiny([2, 4, 1], churn=2)
    changes = _scenario_changes(problem, [("lo", 0, 0, 1), ("lo", 1, 1, 1), ("lo", 2, 1, 1),
                                          ("hi", 0, 0, 1), ("hi", 1, 1, 2), ("hi", 2, 2, 5)])
    assert churn_breaks(problem, changes) == [
        "churn: month 2 of scenario hi changes 3 GPUs, more than 2"]


def test_min_committed_breaks_count_each_scenario_apart():
    problem = stochastic_tiny([1, 1, 1], least=2)
    changes = _scenario_changes(problem, [("lo", m, 2, 2) for m in range(3)]).assign(
        pricing_type="purchase")
    breaks = min_committed_breaks(problem, changes)
    # lo holds 2 purchased GPUs (plus 2 committed in month 0); mid and hi hold none
    assert "min_committed: month 1 of scenario mid holds 0 committed GPUs, fewer than 2" \
        in breaks
    assert not any("scenario lo" in line for line in breaks)


def test_lead_time_caps_count_growth_within_a_scenario_not_across_scenarios():
    problem = stochastic_tiny([3, 4, 4], end=3, committed=1, start=0, max_new=1.0)
    held = pd.DataFrame({"gpu": "ga", "pricing_type": "on_demand",
                         "scenario": ["lo", "lo", "lo", "hi", "hi", "hi"],
                         "month": [0, 1, 2, 0, 1, 2], "gpus": [1.0, 1.0, 1.0, 1.0, 2.0, 4.0]})
    # lo's month 2 to hi's month 0 is no growth; hi's month 1 to 2 adds 2 GPUs, over the cap
    assert lead_time_breaks(problem, held) == [
        "lead_time: ga grows by 2 GPUs in month 2 of scenario hi, more than 1"]


def test_changes_table_keeps_one_table_per_scenario():
    problem = stochastic_tiny([2, 4, 1])
    held = pd.DataFrame({"gpu": "ga", "pricing_type": "on_demand", "config": "a1",
                         "scenario": ["lo", "hi"], "month": [1, 2], "gpus": [1.0, 3.0]})
    table = changes_table(problem, held)
    assert set(table["scenario"]) == {"lo", "mid", "hi"}
    rented = table[table["pricing_type"] == "on_demand"]
    assert rented[["scenario", "month", "added"]].values.tolist() == [
        ["lo", 1, 1.0], ["lo", 2, 0.0], ["hi", 2, 3.0]]
