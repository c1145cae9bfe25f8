"""A period's MILP split by model pool (``pool_split.py``): its bound against the period's
exact optimum and LP, its plan against every row, and the separable solve that uses both."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fleetplan.optimizer import pool_split
from fleetplan.optimizer.linear_program import LinearProgram
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.period_solves import PeriodPrograms
from fleetplan.optimizer.pool_split import (
    ColumnGroups,
    coupling_rows,
    pool_bound,
    relaxed_costs,
    split_solve,
)
from fleetplan.optimizer.solver import SolveOptions, open_solver
from tests.optimizer.instances import make_problem, portfolio_problem
from tests.optimizer.plan_checker import check_plan
from tests.optimizer.test_bruteforce import SETTINGS

# threads left to HiGHS: a process whose HiGHS ran with its default threads refuses 1 later
EXACT_OPTIONS = SolveOptions(mip_gap=1e-9)


def flexible_portfolio(seed: int = 3):
    """Three models on three GPU types, on-demand and spot (at most 30 %), two hours: no
    reserved capacity, so every hour is a MILP of its own and pools meet in the spot share."""
    problem = portfolio_problem(n_models=3, n_gpus=3, n_periods=2, seed=seed)
    offers = problem.offers[problem.offers["pricing_type"] != "reserved_1y"]
    return problem.with_changes(offers=offers.reset_index(drop=True))


@pytest.fixture(scope="module")
def split_period():
    """The first hour's program, its cost, column groups, the whole LP's duals for its rows,
    its exact optimum and its LP value."""
    model = build_model(flexible_portfolio(), cost_cover=False)
    lp = open_solver(model.program, model.cost, EXACT_OPTIONS).solve(
        time_limit_s=30, mip_gap=1e-9, relax=True)
    programs = PeriodPrograms.of(model)
    part = programs.parts[0]
    cost = model.cost[part.cols]
    exact = open_solver(part.program, cost, EXACT_OPTIONS).solve(time_limit_s=60, mip_gap=1e-9)
    period_lp = open_solver(part.program, cost, EXACT_OPTIONS).solve(
        time_limit_s=30, mip_gap=1e-9, relax=True)
    assert exact.outcome.status == "optimal"
    return {"part": part, "cost": cost, "groups": programs.groups.local(part.cols),
            "duals": lp.duals[part.rows], "optimum": exact.outcome.objective,
            "lp": period_lp.outcome.objective}


def _bound(split_period, duals):
    part = split_period["part"]
    program = part.program
    return pool_bound(program, split_period["cost"], program.col_lower, program.col_upper,
                      duals, split_period["groups"], EXACT_OPTIONS, 5.0)


def test_the_pool_bound_lies_between_the_lp_and_the_period_optimum(split_period):
    split = _bound(split_period, split_period["duals"])
    assert split is not None
    assert split.bound <= split_period["optimum"] * (1 + 1e-9)
    assert split.bound >= split_period["lp"] * (1 - 1e-9)
    # integrality inside each pool is most of the LP's gap: the split closes part of it
    assert split.bound > split_period["lp"] + 1e-6
    # each pool proven optimal: the relaxed objective at the pools' plans is the bound itself
    assert split.ceiling == pytest.approx(split.bound, rel=1e-6)


def test_the_ceiling_is_the_relaxed_objective_at_the_pools_plans(split_period, monkeypatch):
    # pools stopped at their first plan: the bound falls short, the ceiling is where the
    # relaxed objective stands at their plans, which no longer solve could lift it past
    monkeypatch.setattr(pool_split, "MIN_SOLVE_S", 0.0)
    proven = _bound(split_period, split_period["duals"])
    part = split_period["part"]
    program = part.program
    early = pool_bound(program, split_period["cost"], program.col_lower, program.col_upper,
                       split_period["duals"], split_period["groups"],
                       dataclasses.replace(EXACT_OPTIONS, mip_gap=0.5), 5.0)
    assert early.bound <= proven.bound + 1e-9 <= early.ceiling + 2e-9
    relax = coupling_rows(program.matrix, split_period["groups"].pool)
    free = program.matrix[np.flatnonzero(~relax)].getnnz(axis=0) == 0
    lagrangian, constant = relaxed_costs(program, split_period["cost"], split_period["duals"],
                                         relax, free)
    assert early.ceiling == pytest.approx(constant + lagrangian @ early.values, rel=1e-9)


@SETTINGS
@given(st.lists(st.floats(-3.0, 3.0), min_size=1, max_size=8))
@example([0.0])  # no multiplier: the pools priced alone
@example([-1.0])  # every multiplier of the wrong sign, clipped to 0
def test_any_multipliers_give_a_bound_below_the_optimum(split_period, factors):
    duals = split_period["duals"] * np.resize(np.asarray(factors), len(split_period["duals"]))
    split = _bound(split_period, duals)
    assert split is None or split.bound <= split_period["optimum"] * (1 + 1e-9) + 1e-6


def test_the_split_plan_keeps_every_row_and_its_status_matches_its_gap(split_period):
    part, cost = split_period["part"], split_period["cost"]
    program = part.program
    result = split_solve(program, cost, program.col_lower, program.col_upper,
                         split_period["duals"], split_period["groups"], None,
                         SolveOptions(mip_gap=5e-3), 5.0)
    values = result.values
    assert program.violation(values) <= 1e-6
    assert np.allclose(values[program.integer], np.round(values[program.integer]))
    assert result.outcome.objective == pytest.approx(float(cost @ values))
    assert result.outcome.bound <= split_period["optimum"] * (1 + 1e-9)
    assert result.outcome.objective >= split_period["optimum"] * (1 - 1e-9)
    within = result.outcome.gap <= 5e-3
    assert (result.outcome.status == "optimal") == within


def test_a_period_of_one_pool_is_not_split():
    problem = make_problem([[2.0], [3.0]], [[4.0]], {("g0", "on_demand"): 1.0,
                                                     ("g1", "on_demand"): 1.4})
    model = build_model(problem, cost_cover=False)
    groups = ColumnGroups.of(model.program.n_cols, model.routes, model.replicas)
    program = model.program
    assert not coupling_rows(program.matrix, groups.pool).any()
    assert pool_bound(program, model.cost, program.col_lower, program.col_upper,
                      np.zeros(program.n_rows), groups, EXACT_OPTIONS, 1.0) is None


def test_a_node_column_left_free_keeps_a_cost_of_at_least_zero():
    # replicas y1 (pool a) and y2 (pool b) on one node column n: y1 + y2 - n <= 0, n costs 1.
    # A multiplier of -2 on that row would price n at 1 - 2 = -1 with nothing to stop it:
    # the row's multiplier is halved, to -1, which leaves n at cost 0.
    program = LinearProgram()
    program.add_columns(3)
    program.add_rows(1, np.zeros(3, int), np.arange(3), np.array([1.0, 1.0, -1.0]), upper=0.0)
    cost = np.array([0.0, 0.0, 1.0])
    free = np.array([False, False, True])
    reduced, constant = relaxed_costs(program, cost, np.array([-2.0]), np.array([True]), free)
    np.testing.assert_allclose(reduced, [1.0, 1.0, 0.0])
    assert constant == 0.0


def test_the_separable_solve_is_as_cheap_as_the_whole_milp_within_its_gap():
    problem = flexible_portfolio(seed=4)
    options = SolveOptions(time_limit_s=60, mip_gap=5e-3)
    plan = optimize_problem(problem, options)
    assert check_plan(plan, problem) == []
    assert plan.status == "optimal" and plan.gap <= 5e-3
    model = build_model(problem, cost_cover=False)
    whole = open_solver(model.program, model.cost, SolveOptions(mip_gap=1e-6)).solve(
        time_limit_s=60, mip_gap=1e-6)
    assert whole.outcome.status == "optimal"
    assert plan.objective_usd <= whole.outcome.objective * (1 + 5e-3) + 1e-6
    assert plan.bound_usd <= whole.outcome.objective * (1 + 1e-9) + 1e-6
    assert math.isfinite(plan.bound_usd)


def test_each_pool_gets_its_share_of_the_time_and_free_columns_none(split_period, monkeypatch):
    # the period's node columns sit in no kept row, each a component of its own: they are set
    # to a bound, so the time is shared by the pools alone (before, 6 s over 3 pools gave each
    # pool 6 s divided by every component, free columns included)
    limits = []

    def recording(program, cost, options):
        solver = open_solver(program, cost, options)
        solve = solver.solve

        def solve_recorded(*, time_limit_s, **kwargs):
            limits.append(time_limit_s)
            return solve(time_limit_s=time_limit_s, **kwargs)

        solver.solve = solve_recorded
        return solver

    monkeypatch.setattr(pool_split, "open_solver", recording)
    program = split_period["part"].program
    pools = len(np.unique(split_period["groups"].pool[split_period["groups"].pool >= 0]))
    split = pool_bound(program, split_period["cost"], program.col_lower, program.col_upper,
                       split_period["duals"], split_period["groups"], EXACT_OPTIONS, 6.0)
    assert split is not None and pools == 3
    # the first pool gets its share; each later one the time left over the pools left, so a
    # pool proven early (these take milliseconds) leaves its time to the pools after it
    assert len(limits) == pools and limits[0] == pytest.approx(6.0 / pools, abs=0.1)
    left = [6.0 / n for n in range(pools, 0, -1)]  # had each taken no time
    assert all(share - 0.5 <= limit <= share + 1e-9 for limit, share in zip(limits, left))
    # two threads: the first two pools start together, each with two shares of the time
    # (two threads' 6 s over the three pools)
    limits.clear()
    side_by_side = pool_bound(program, split_period["cost"], program.col_lower,
                              program.col_upper, split_period["duals"], split_period["groups"],
                              EXACT_OPTIONS, 6.0, threads=2)
    assert sorted(limits)[:2] == pytest.approx([4.0, 4.0], abs=0.5)
    assert side_by_side.bound == pytest.approx(split.bound)
