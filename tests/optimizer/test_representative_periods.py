"""Representative periods: deterministic clusters within months, peak demand (so a plan for
the representatives serves every hour), and a week of hours planned through them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fleetplan.optimizer.decomposition as decomposition
import fleetplan.optimizer.reserved_first as reserved_first
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.representative_periods import (
    cluster_periods,
    demand_matrix,
    floor_bound_problem,
    kmeans_labels,
    representative_problem,
    wants_representatives,
)
from fleetplan.optimizer.solver import Result, SolveOptions, SolveOutcome, open_solver
from tests.optimizer.instances import portfolio_problem
from tests.optimizer.plan_checker import check_plan


def two_month_problem(hours: int = 48):
    problem = portfolio_problem(n_models=1, n_gpus=2, n_periods=2 * hours, seed=4)
    periods = problem.periods.assign(month=np.repeat([0, 1], hours), month_weight=1.0)
    return problem.with_changes(periods=periods)


def test_clusters_stay_within_months_and_are_deterministic():
    problem = two_month_problem()
    first = cluster_periods(problem, per_month=5)
    assert first.equals(cluster_periods(problem, per_month=5))
    month = problem.periods.set_index("period")["month"]
    assert (month.reindex(first.to_numpy()).to_numpy() == month.reindex(first.index)
            .to_numpy()).all()
    assert first.groupby(month.reindex(first.index).to_numpy()).nunique().tolist() == [5, 5]
    assert (first <= first.index).all()  # each cluster named by its first period


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.floats(0, 100), min_size=2, max_size=2), min_size=1, max_size=40),
       st.integers(1, 8))
def test_kmeans_labels_are_at_most_count_clusters(points, count):
    labels = kmeans_labels(np.array(points), count)
    assert len(labels) == len(points)
    assert labels.max() + 1 <= count
    assert sorted(set(labels)) == list(range(labels.max() + 1))


def test_representatives_carry_the_peak_of_their_members_and_their_hours():
    problem = two_month_problem()
    first = cluster_periods(problem, per_month=4)
    small = representative_problem(problem, first)
    assert small.periods["hours"].sum() == pytest.approx(problem.periods["hours"].sum())
    peak = demand_matrix(small).reindex(first.to_numpy()).to_numpy()
    assert (peak >= demand_matrix(problem).to_numpy() - 1e-12).all()
    assert not wants_representatives(small)


@pytest.mark.slow
def test_a_week_of_hours_is_planned_from_representatives_and_checked_in_every_hour():
    problem = portfolio_problem(n_models=1, n_gpus=2, n_periods=168, seed=7)
    calls = []
    original = reserved_first.ReservedFirst.representative_reserved

    def spy(self):
        counts = original(self)
        calls.append(counts)
        return counts

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decomposition, "WHOLE_MODEL_COLUMNS", 0)
        patch.setattr(reserved_first.ReservedFirst, "representative_reserved", spy)
        plan = optimize_problem(problem, SolveOptions(time_limit_s=15, mip_gap=0.05))
    assert len(calls) == 1 and calls[0] is not None
    assert plan.feasible
    assert plan.assumptions["recheck"] == "passed"
    assert check_plan(plan, problem) == []
    assert plan.fleet_by_period["period"].nunique() == 168
    assert isinstance(plan.fleet_by_period, pd.DataFrame)


def _lp_value(problem) -> float:
    model = build_model(problem, cost_cover=False)
    result = open_solver(model.program, model.cost, SolveOptions()).solve(
        time_limit_s=60, mip_gap=1e-9, relax=True)
    assert result.outcome.status == "optimal"
    return result.outcome.objective


def test_the_floor_problem_carries_the_minimum_of_its_members_and_bounds_the_lp():
    problem = portfolio_problem(n_models=2, n_gpus=2, n_periods=60, seed=5)
    assert wants_representatives(problem)
    floor = floor_bound_problem(problem)
    first = cluster_periods(problem)
    assert floor.periods["hours"].sum() == pytest.approx(problem.periods["hours"].sum())
    least = demand_matrix(floor).reindex(first.to_numpy()).to_numpy()
    full = demand_matrix(problem).to_numpy()
    assert (least <= full + 1e-12).all()
    members = pd.DataFrame(full).groupby(first.to_numpy()).min()
    np.testing.assert_allclose(demand_matrix(floor).to_numpy(), members.to_numpy())
    assert _lp_value(floor) <= _lp_value(problem) * (1 + 1e-9)


@pytest.mark.slow
def test_a_long_horizon_whose_lp_runs_out_of_time_gets_the_representatives_plan_and_a_bound():
    problem = portfolio_problem(n_models=2, n_gpus=2, n_periods=60, seed=5)
    floor_lp = _lp_value(floor_bound_problem(problem))

    def no_lp(self):  # what a time limit shorter than the full model's LP leaves
        return Result(SolveOutcome("no_solution", float("nan"), float("nan"), "HiGHS", 0.0), None)

    plans = []
    original = reserved_first.ReservedFirst.representative_plan

    def spy(self):
        values = original(self)
        plans.append(None if values is None else float(self.model.cost @ values))
        return values

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decomposition, "WHOLE_MODEL_COLUMNS", 0)
        patch.setattr(reserved_first.ReservedFirst, "relaxation", no_lp)
        patch.setattr(reserved_first.ReservedFirst, "representative_plan", spy)
        plan = optimize_problem(problem, SolveOptions(time_limit_s=20, mip_gap=0.005))
    # the plan is the representatives' routing spread to every hour and rounded up
    assert plans and plans[0] is not None
    assert plan.objective_usd == pytest.approx(plans[0], rel=1e-9)
    assert plan.status == "time_limit"
    assert plan.bound_usd == pytest.approx(floor_lp, rel=1e-6)
    assert plan.bound_usd <= plan.objective_usd
    assert check_plan(plan, problem) == []
    assert any("gap of" in message for message in plan.messages)
