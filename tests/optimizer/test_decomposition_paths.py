"""The reserved-first decomposition and the cost-cover cut against brute force.

Small linked models are solved whole (``decomposition.WHOLE_MODEL_COLUMNS``), so these tests
force the decomposition on them; the cut is checked to remove no whole plan."""

from __future__ import annotations

import dataclasses

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import fleetplan.optimizer.cost_cover as cost_cover
import fleetplan.optimizer.decomposition as decomposition
import fleetplan.optimizer.milp as milp
import fleetplan.optimizer.optimization as optimization
import fleetplan.optimizer.reserved_first as reserved_first
from fleetplan.optimizer.cost_cover import cover_problem, demand_signatures, least_pool_costs
from fleetplan.optimizer.demand_floor import demand_floor_usd
from fleetplan.optimizer.greedy_fallback import greedy_plan
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.optimization import AFTER_SOLVE_SHARE, optimize_problem
from fleetplan.optimizer.rounding import rounded_up
from fleetplan.optimizer.solver import Result, SolveOptions, SolveOutcome, open_solver
from tests.optimizer.instances import brute_force_usd, make_problem, portfolio_problem
from tests.optimizer.plan_checker import check_plan
from tests.optimizer.test_bruteforce import EXACT, SETTINGS, instances


@pytest.mark.slow
@SETTINGS
@given(instances(n_periods=st.integers(2, 3), reserved=st.just(True)))
@example(make_problem([[0.0, 2.0], [0.0, 2.0]], [[0.0, 0.0], [0.0, 1.0]],  # N+1, capped: infeasible
                      {("g0", "on_demand"): 1.0, ("g0", "reserved_1y"): 0.6,
                       ("g1", "on_demand"): 1.0}, max_gpus={"g0": 1, "g1": 1}, redundancy_k=1))
def test_reserved_first_matches_brute_force(problem):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decomposition, "WHOLE_MODEL_COLUMNS", 0)
        plan = optimize_problem(problem, EXACT)
    assert check_plan(plan, problem) == []
    expected = brute_force_usd(problem, max_replicas=4)
    per_config = plan.fleet_by_period.groupby(["config", "period"])["replicas"].sum() \
        if plan.feasible else None
    if math.isinf(expected):
        assert plan.status == "infeasible" or per_config.max() > 4
        return
    assert plan.feasible
    assert plan.objective_usd <= expected * (1 + 1e-6) + 1e-6 or per_config.max() > 4
    assert plan.objective_usd >= expected * (1 - 1e-6) - 1e-6 or per_config.max() > 4


@pytest.mark.slow
@SETTINGS
@given(instances(n_periods=st.integers(1, 2)))
def test_the_cost_cover_cut_removes_no_whole_plan(problem):
    with_cut = open_solver((model := build_model(problem)).program, model.cost, EXACT).solve(
        time_limit_s=30, mip_gap=0.0)
    bare = build_model(problem, cost_cover=False)
    without = open_solver(bare.program, bare.cost, EXACT).solve(time_limit_s=30, mip_gap=0.0)
    assert with_cut.outcome.status == without.outcome.status
    if without.outcome.status == "optimal":
        assert with_cut.outcome.objective == pytest.approx(without.outcome.objective, rel=1e-6,
                                                           abs=1e-6)


def test_the_cost_cover_is_the_cheapest_whole_fleet_of_each_pool_and_period():
    # 2.5 req/s on replicas of 2 req/s: 2 replicas; g0 at $1 (reserved $0.6), g1 at $1.5
    problem = make_problem([[2.0], [3.0]], [[2.5], [1.0]],
                           {("g0", "on_demand"): 1.0, ("g0", "reserved_1y"): 0.6,
                            ("g1", "on_demand"): 1.5})
    costs = least_pool_costs(problem, lambda part: build_model(part, cost_cover=False),
                             SolveOptions())
    # period 0: 2 x g0 at 0.6 = 1.2 beats 1 x g1 at 1.5; period 1: 1 x g0 at 0.6
    assert costs.set_index("period")["usd_per_hour"].to_dict() == pytest.approx(
        {0: 1.2, 1: 0.6})
    part = cover_problem(problem, demand_signatures(problem))
    assert part.offers["pricing_type"].tolist() == ["on_demand", "on_demand"]
    assert part.gpus["max_gpus"].isna().all()
    assert part.periods["hours"].tolist() == [1.0, 1.0]


def test_the_cost_cover_takes_a_share_of_the_time_left_and_keeps_the_rows_it_solved(
        monkeypatch):
    problem = make_problem([[2.0], [3.0]], [[2.5], [1.0]],
                           {("g0", "on_demand"): 1.0, ("g0", "reserved_1y"): 0.6,
                            ("g1", "on_demand"): 1.5})
    def build(part):
        return build_model(part, cost_cover=False)

    assert least_pool_costs(problem, build, SolveOptions(), seconds=0.0).empty
    class FirstOnly:  # the build and the first small MILP start in time, the second does not
        def __init__(self, seconds):
            self.left = iter([seconds, seconds, 0.0])

        def remaining(self):
            return next(self.left)

    monkeypatch.setattr(cost_cover, "Deadline", FirstOnly)
    costs = least_pool_costs(problem, build, SolveOptions(), seconds=1.0)
    assert costs.set_index("period")["usd_per_hour"].to_dict() == pytest.approx({0: 1.2})
    monkeypatch.undo()
    # a build with a deadline gives the cut at most a quarter of the time left
    given = []
    monkeypatch.setattr(milp, "least_pool_costs",
                        lambda problem, build, options, seconds: given.append(seconds) or
                        least_pool_costs(problem, build, options, seconds))
    families = set(build_model(problem, time_left=lambda: 8.0).constraint_table()["family"])
    assert given == [pytest.approx(2.0)] and "cost_cover" in families


def test_one_pool_in_one_period_gets_no_cost_cover():
    # its small MILP would be the model itself: the cut is skipped, the other rows stay
    problem = make_problem([[2.0], [3.0]], [[2.5]], {("g0", "on_demand"): 1.0,
                                                     ("g1", "on_demand"): 1.5})
    assert least_pool_costs(problem, lambda part: build_model(part, cost_cover=False),
                            SolveOptions()).empty
    families = set(build_model(problem).constraint_table()["family"])
    assert "cost_cover" not in families and "capacity" in families


def test_the_rounded_up_lp_is_a_whole_feasible_plan():
    model = build_model(portfolio_problem(n_models=2, n_gpus=3, n_periods=6))
    lp = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=30, mip_gap=0.0,
                                                             relax=True)
    plan = rounded_up(model, lp.values)
    assert plan is not None
    assert model.program.violation(plan) <= 1e-6
    integer = model.program.integer
    assert (abs(plan[integer] - plan[integer].round()) <= 1e-9).all()
    assert model.cost @ plan >= lp.outcome.objective - 1e-6


def test_the_greedy_plan_needs_no_lp_and_is_whole_and_feasible():
    problem = portfolio_problem(n_models=2, n_gpus=3, n_periods=6)
    model = build_model(problem)
    plan = greedy_plan(model)
    assert plan is not None
    assert model.program.violation(plan) <= 1e-6
    integer = model.program.integer
    assert (abs(plan[integer] - plan[integer].round()) <= 1e-9).all()
    reserved = model.replicas.loc[model.replicas["period"] < 0, "col"].to_numpy()
    assert (plan[reserved] == 0).all()


def test_a_plan_without_a_bound_says_so(monkeypatch):
    problem = portfolio_problem(n_models=2, n_gpus=3, n_periods=6)
    monkeypatch.setattr(decomposition, "WHOLE_MODEL_COLUMNS", 0)
    monkeypatch.setattr(reserved_first.ReservedFirst, "relaxation",
                        lambda self: Result(SolveOutcome("time_limit", math.nan, math.nan,
                                                         "HiGHS", 0.0, math.nan), None))
    plan = optimize_problem(problem, SolveOptions(time_limit_s=5, mip_gap=0.01))
    assert plan.status == "time_limit" and plan.bound_usd < plan.objective_usd
    assert plan.bound_usd == pytest.approx(demand_floor_usd(build_model(problem)))
    assert any("the bound is the demand floor" in m for m in plan.messages)
    assert check_plan(plan, problem) == []
    # without the floor too (a model with a negative price has none), the plan says so
    monkeypatch.setattr(optimization, "demand_floor_usd", lambda model: -math.inf)
    plan = optimize_problem(problem, SolveOptions(time_limit_s=5, mip_gap=0.01))
    assert plan.status == "time_limit" and math.isnan(plan.gap)
    assert any("no bound was proven in time" in m for m in plan.messages)


def test_a_separable_period_cut_short_keeps_the_rounded_up_lp_plan():
    # period 1's branch and bound "stops" with a wasteful incumbent (3 extra on-demand
    # replicas): the plan keeps the rounded-up LP's period instead, and stays feasible
    problem = make_problem([[2.0], [3.0]], [[2.5], [5.5], [1.0]],
                           {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 1.4})
    model = build_model(problem)
    real = decomposition.solve_periods

    def wasteful(programs, task, options, deadline, **kwargs):
        run = real(programs, task, options, deadline, **kwargs)
        period_one = model.replicas[(model.replicas["period"] == 1)
                                    & (model.replicas["config"] == "c0")]
        run.values[period_one["col"].to_numpy()] += 3.0
        nodes = model.nodes[(model.nodes["period"] == 1) & (model.nodes["gpu"] == "g0")]
        run.values[nodes["col"].to_numpy()] += 3.0
        return run

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decomposition, "solve_periods", wasteful)
        outcome = decomposition.solve_fleet(model, EXACT)
    assert model.program.violation(model.values) <= 1e-6
    exact = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=30, mip_gap=0.0)
    lp = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=30, mip_gap=0.0,
                                                             relax=True)
    rounded = float(model.cost @ rounded_up(model, lp.values))
    assert outcome.objective <= rounded + 1e-9
    assert outcome.objective < exact.outcome.objective + 3.0 - 1e-9  # the waste is gone
    assert outcome.bound <= exact.outcome.objective + 1e-9


def test_a_linked_model_its_whole_milp_does_not_prove_goes_on_to_reserved_first(monkeypatch):
    # the whole MILP's share of the time "stops" at the greedy plan with no bound worth the
    # name, as HiGHS's first plans on a hard model do: the reserved-first solve starts from
    # that plan and finds a plan within the gap of the optimum
    problem = portfolio_problem(n_models=2, n_gpus=3, n_periods=2)
    # the optimum to compare with: its whole MILP takes about 2.5 s alone (3 periods took 16 s),
    # so under a loaded test run EXACT's 30 s (9 s of it for the whole MILP first) may not
    # prove it
    best = optimize_problem(problem, dataclasses.replace(EXACT, time_limit_s=120))
    real, shares = decomposition.solve_whole, []

    def cut_short(model, options, deadline, *, start=None):
        if shares:
            return real(model, options, deadline, start=start)
        shares.append(deadline.seconds)
        model.values = greedy_plan(model, options)
        objective = float(model.cost @ model.values)
        return SolveOutcome("time_limit", 1.0, objective, "HiGHS", 0.0, 0.0)

    monkeypatch.setattr(decomposition, "solve_whole", cut_short)
    plan = optimize_problem(problem, SolveOptions(time_limit_s=30, mip_gap=0.01))
    assert shares[0] <= 30 * decomposition.WHOLE_FIRST_SHARE
    assert plan.status == "optimal" and best.status == "optimal"
    assert best.objective_usd - 1e-6 <= plan.objective_usd <= best.objective_usd * 1.01 + 1e-6
    assert plan.objective_usd < build_model(problem).cost @ greedy_plan(build_model(problem))
    assert plan.bound_usd > 0.0 and check_plan(plan, problem) == []


@pytest.mark.parametrize(("limit_s", "whole_share"), [
    (30.0, decomposition.WHOLE_FIRST_SHARE), (2.5, 1.0)])
def test_a_limit_too_short_to_share_is_the_whole_milps_alone(monkeypatch, limit_s, whole_share):
    real, given = decomposition.solve_whole, []

    def recorded(model, options, deadline, *, start=None):
        given.append(deadline.seconds)
        return real(model, options, deadline, start=start)

    monkeypatch.setattr(decomposition, "solve_whole", recorded)
    problem = portfolio_problem(n_models=1, n_gpus=2, n_periods=2)
    plan = optimize_problem(problem, SolveOptions(time_limit_s=limit_s, mip_gap=0.01))
    assert plan.feasible
    share = limit_s * (1 - AFTER_SOLVE_SHARE) * whole_share  # less the build's time before it
    assert share * 0.5 <= given[0] <= share


@pytest.mark.parametrize(("solver", "name"), [("highs", "HiGHS"), ("cbc", "PULP_CBC_CMD")])
def test_a_linked_plan_names_the_solver_that_made_it(monkeypatch, solver, name):
    solved_by = []
    real = reserved_first.ReservedFirst.outcome

    def recorded(self):
        solved_by.append(self)
        return real(self)

    monkeypatch.setattr(decomposition, "WHOLE_MODEL_COLUMNS", 0)
    monkeypatch.setattr(reserved_first.ReservedFirst, "outcome", recorded)
    problem = portfolio_problem(n_models=1, n_gpus=2, n_periods=2)
    plan = optimize_problem(problem, SolveOptions(time_limit_s=30, mip_gap=0.01, solver=solver))
    assert solved_by and plan.feasible and plan.solver == name


def test_period_plans_that_break_a_row_left_out_of_them_leave_the_rest_to_the_whole_milp(
        monkeypatch):
    # hard scenario 187: one configuration per workload over the horizon, a row no period
    # sees; period plans that break it were priced until the reserved-first share ran out,
    # which left the whole MILP too little time to prove the plan (a 12.9% gap at 5 s)
    events, real_offer, real_periods = [], reserved_first.ReservedFirst.offer, \
        reserved_first.solve_periods

    def offer(self, values, floor=math.nan):
        if values is not None and self.model.program.relative_violation(values) > 1e-6:
            events.append("broken")
        real_offer(self, values, floor)

    def periods(*args, **kwargs):
        events.append("periods")
        return real_periods(*args, **kwargs)

    monkeypatch.setattr(decomposition, "WHOLE_MODEL_COLUMNS", 0)
    monkeypatch.setattr(reserved_first.ReservedFirst, "offer", offer)
    monkeypatch.setattr(reserved_first, "solve_periods", periods)
    problem = portfolio_problem(n_models=1, n_gpus=3, n_periods=4).with_changes(
        max_configs_per_workload=1)
    plan = optimize_problem(problem, SolveOptions(time_limit_s=30, mip_gap=0.0))
    assert plan.status == "optimal" and check_plan(plan, problem) == []
    assert "broken" in events and "periods" not in events[events.index("broken"):]


def test_a_small_linked_model_is_solved_whole_from_its_rounded_up_lp(monkeypatch):
    # the whole MILP of a small linked model starts from the rounded-up LP plan: a whole plan,
    # within every row, that costs no less than the LP bound
    model = build_model(portfolio_problem(n_models=1, n_gpus=2, n_periods=3))
    assert model.program.n_cols <= decomposition.WHOLE_MODEL_COLUMNS
    starts = []
    whole = decomposition.solve_whole

    def recording(model, options, deadline, *, start=None, **kwargs):
        starts.append(start)
        return whole(model, options, deadline, start=start, **kwargs)

    monkeypatch.setattr(decomposition, "solve_whole", recording)
    outcome = decomposition.solve_fleet(model, EXACT)
    assert outcome.status == "optimal" and starts[0] is not None
    start = starts[0]
    assert model.program.violation(start) <= 1e-6
    assert model.program.integer.any() and all(
        abs(x - round(x)) <= 1e-9 for x in start[model.program.integer])
    lp = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=30, mip_gap=0.0,
                                                             relax=True)
    assert lp.outcome.objective - 1e-6 <= float(model.cost @ start)
    assert outcome.objective <= float(model.cost @ start) + 1e-6


def one_pool_one_hour(problem, pool, period):
    """The small MILP of one pool and period written out alone: the reference the cover
    model's cut-out blocks must match."""
    workloads = problem.workloads[problem.workloads["pool"] == pool]
    prices = problem.offers.groupby("gpu")["usd_per_gpu_hour"].min()
    mine = problem.demand["workload"].isin(workloads["workload"])
    return dataclasses.replace(
        problem, workloads=workloads,
        periods=problem.periods.iloc[:1].assign(period=0, hours=1.0, month_weight=1.0),
        demand=problem.demand[mine & (problem.demand["period"] == period)].assign(period=0),
        configs=problem.configs[problem.configs["pool"] == pool],
        offers=pd.DataFrame({"gpu": prices.index, "pricing_type": "on_demand",
                             "usd_per_gpu_hour": prices.to_numpy(), "max_gpus": math.nan}),
        gpus=problem.gpus.assign(max_gpus=math.nan), spot_max_share=None)


def checked_cover_costs(max_configs):
    """The cover's costs on a two-pool portfolio, each block checked against its pool and
    hour built alone."""
    problem = dataclasses.replace(portfolio_problem(n_models=2, n_gpus=3, n_periods=4),
                                  max_configs_per_workload=max_configs)
    costs = least_pool_costs(problem, lambda part: build_model(part, cost_cover=False),
                             SolveOptions())
    assert len(costs) == 8
    for pool, period, usd in costs.itertuples(index=False):
        alone = build_model(one_pool_one_hour(problem, pool, period), cost_cover=False)
        solved = open_solver(alone.program, alone.cost, EXACT).solve(time_limit_s=30,
                                                                     mip_gap=0.0)
        assert usd == pytest.approx(solved.outcome.objective, rel=1e-6)
    return costs["usd_per_hour"].to_numpy()


def test_each_block_cut_out_of_the_cover_model_is_its_pool_and_hour_alone():
    # one build holds every (pool, period); its horizon-wide simplicity rows go into each
    # block, where they bind: one configuration per workload costs more in some hours
    free, simple = checked_cover_costs(None), checked_cover_costs(1)
    assert (simple >= free - 1e-9).all() and (simple > free + 1e-6).any()
    # and a block holds only its own hour's routing shares, not every hour's
    problem = dataclasses.replace(portfolio_problem(n_models=2, n_gpus=3, n_periods=4),
                                  max_configs_per_workload=1)
    model = build_model(cover_problem(problem, demand_signatures(problem)), cost_cover=False)
    blocks = cost_cover.row_blocks(model)
    matrix = model.program.matrix.tocsr()
    for block in range(8):
        held = np.unique(matrix[np.flatnonzero((blocks == block) | (blocks < 0))].indices)
        shares = model.routes.drop_duplicates("col")
        assert set(shares.loc[shares["period"] != block, "col"]).isdisjoint(held)
        assert set(shares.loc[shares["period"] == block, "col"]) <= set(held)
