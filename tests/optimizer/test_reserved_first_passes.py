"""Passes of the reserved-first decomposition on a small linked portfolio.

The Lagrangian bound: period prices of reserved capacity taken from the LP's duals sum to its
cost, keep every period's LP at least its share of the LP bound, and give a bound between the
LP's and the optimum. The polish: the best plan's periods re-solved to the slack that proves
the plan, keeping the best plan's periods when time runs out."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fleetplan.optimizer import reserved_first
from fleetplan.optimizer.lagrangian_prices import lp_shares, period_prices, priced_cost
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.period_solves import Deadline, PeriodPrograms
from fleetplan.optimizer.reserved_candidates import (
    other_pools_columns,
    reserved_rows,
    shifted_plan,
)
from fleetplan.optimizer.reserved_first import ReservedFirst
from fleetplan.optimizer.rounding import rounded_up
from fleetplan.optimizer.solver import SolveOptions, open_solver
from tests.optimizer.instances import make_problem, portfolio_problem
from tests.optimizer.test_bruteforce import SETTINGS, instances

EXACT = SolveOptions(time_limit_s=60, mip_gap=1e-9, threads=1)


@pytest.fixture(scope="module")
def linked():
    """A 6-hour portfolio with reserved pricing (node rows link every period), its model,
    period programs and LP."""
    model = build_model(portfolio_problem(n_models=1, n_gpus=2, n_periods=6))
    lp = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=60, mip_gap=0.0,
                                                             relax=True)
    assert lp.outcome.status == "optimal"
    return model, PeriodPrograms.of(model), lp


def test_the_prices_of_each_reserved_column_sum_to_its_cost(linked):
    model, programs, lp = linked
    prices = period_prices(model, programs, lp)
    assert set(prices) == set(model.problem.periods["period"])
    total = np.sum(list(prices.values()), axis=0)
    np.testing.assert_allclose(total, model.cost[programs.reserved], rtol=1e-9, atol=1e-9)
    # the instance needs negative prices: reserved replicas idle in some hours
    assert np.min(list(prices.values())) < -1e-6


def test_the_priced_period_lps_sum_to_the_lp_bound(linked):
    # clipped prices (the old rule) summed below the LP bound
    model, programs, lp = linked
    cost = priced_cost(programs, period_prices(model, programs, lp))
    total = 0.0
    for period in programs.periods():
        result = open_solver(programs.parts[period].program, cost(period), EXACT).solve(time_limit_s=30, mip_gap=0.0,
                                                             relax=True)
        assert result.outcome.status == "optimal"
        total += result.outcome.objective
    assert total == pytest.approx(lp.outcome.objective, rel=1e-7)


def test_the_lagrangian_bound_lies_between_the_lp_and_the_optimum(linked):
    model, programs, lp = linked
    exact = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=60, mip_gap=0.0)
    assert exact.outcome.status == "optimal"
    linked_solve = ReservedFirst(model, programs, EXACT, Deadline(60))
    linked_solve.bound = -math.inf
    run = linked_solve.lagrangian(lp, budget_s=60)
    assert run is not None and run.complete()
    assert lp.outcome.objective - 1e-6 <= linked_solve.bound
    assert linked_solve.bound <= exact.outcome.objective * (1 + 1e-7)
    # the periods' integrality lifts it above the LP on this instance
    assert linked_solve.bound > lp.outcome.objective * (1 + 1e-4)


def _with_a_plan(model, programs, lp, options, seconds=60.0):
    """A reserved-first solve holding the rounded-up LP and the plan for its reserved counts
    rounded up."""
    linked_solve = ReservedFirst(model, programs, options, Deadline(seconds))
    linked_solve.bound = lp.outcome.objective
    linked_solve.offer(rounded_up(model, lp.values))
    reserved = lp.values[reserved_rows(model)["col"].to_numpy()]
    linked_solve.periods_with(np.ceil(reserved - 1e-6) + 0.0, None, 60)
    return linked_solve


def test_the_floor_of_the_best_reserved_choice_lies_below_its_plan(linked):
    model, programs, lp = linked
    options = SolveOptions(time_limit_s=60, mip_gap=0.01, threads=1)
    linked_solve = _with_a_plan(model, programs, lp, options)
    assert linked_solve.best_floor <= linked_solve.best_cost + 1e-6
    # no plan with those reserved replicas costs less than the floor
    fixed = reserved_rows(model)["col"].to_numpy()
    solver = open_solver(model.program, model.cost, EXACT)
    solver.set_col_bounds(fixed, linked_solve.best[fixed], linked_solve.best[fixed])
    exact = solver.solve(time_limit_s=60, mip_gap=0.0)
    assert exact.outcome.status == "optimal"
    assert linked_solve.best_floor <= exact.outcome.objective * (1 + 1e-7)


def test_polishing_brings_the_plan_within_the_gap_its_floor_allows(linked):
    model, programs, lp = linked
    options = SolveOptions(time_limit_s=60, mip_gap=0.02, threads=1)
    linked_solve = _with_a_plan(model, programs, lp, options)
    # the reserved choice's floor leaves room within the accepted gap of the LP bound
    assert linked_solve.best_floor < linked_solve.bound / (1 - options.mip_gap)
    # a wasteful plan with the same reserved counts: every period 2 on-demand replicas over
    flexible = model.replicas[(model.replicas["period"] >= 0)
                              & (model.replicas["pricing_type"] == "on_demand")]
    first = flexible.groupby("period")["col"].first().to_numpy()
    wasteful = linked_solve.best.copy()
    wasteful[first] += 2.0
    nodes = model.nodes[model.nodes["period"] >= 0]
    used = model.replicas.set_index("col").loc[first]
    for period, gpu, tp in zip(used["period"], used["gpu"], used["tp"]):
        node = nodes[(nodes["period"] == period) & (nodes["gpu"] == gpu)
                     & (nodes["pricing_type"] == "on_demand")]["col"]
        wasteful[node.to_numpy()] += 2.0 * tp
    assert model.program.violation(wasteful) <= 1e-6
    linked_solve.best, linked_solve.best_cost = wasteful, float(model.cost @ wasteful)
    linked_solve.polish()
    assert model.program.violation(linked_solve.best) <= 1e-6
    assert linked_solve.gap() <= options.mip_gap


def test_polishing_past_the_deadline_keeps_the_best_plan(linked):
    model, programs, lp = linked
    options = SolveOptions(time_limit_s=60, mip_gap=0.01, threads=1)
    linked_solve = _with_a_plan(model, programs, lp, options)
    best, cost = linked_solve.best.copy(), linked_solve.best_cost
    linked_solve.deadline = Deadline(0.0)
    linked_solve.polish()
    assert linked_solve.best_cost == cost
    np.testing.assert_array_equal(linked_solve.best, best)


def test_without_a_plan_there_is_nothing_to_polish(linked):
    model, programs, lp = linked
    linked_solve = ReservedFirst(model, programs, EXACT, Deadline(60))
    linked_solve.polish()
    assert linked_solve.best is None and math.isinf(linked_solve.best_cost)


def test_the_periods_lp_shares_sum_to_the_lp_bound_and_bound_each_priced_period(linked):
    model, programs, lp = linked
    cost = priced_cost(programs, period_prices(model, programs, lp))
    shares = lp_shares(programs, lp, cost)
    assert sum(shares.values()) == pytest.approx(lp.outcome.objective, rel=1e-7)
    for period, share in shares.items():
        exact = open_solver(programs.parts[period].program, cost(period), EXACT).solve(time_limit_s=30, mip_gap=0.0)
        assert share <= exact.outcome.objective * (1 + 1e-7) + 1e-6


def test_a_lagrangian_pass_cut_short_still_bounds_at_least_the_lp(linked):
    model, programs, lp = linked
    linked_solve = ReservedFirst(model, programs, EXACT, Deadline(60))
    linked_solve.bound = -math.inf
    run = linked_solve.lagrangian(lp, budget_s=0.0)  # no period solved
    assert not run.complete()
    assert linked_solve.bound == pytest.approx(lp.outcome.objective, rel=1e-7)


@SETTINGS
@given(instances(n_periods=st.integers(2, 3), reserved=st.just(True)))
@example(make_problem([[0.0]], [[0.0], [0.0]],  # no demand: a model without rows
                      {("g0", "on_demand"): 1.0, ("g0", "reserved_1y"): 0.6}))
def test_the_lagrangian_bound_never_exceeds_the_optimum(problem):
    model = build_model(problem)
    lp = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=30, mip_gap=0.0,
                                                             relax=True)
    if lp.outcome.status != "optimal":  # an infeasible instance has no bound to check
        return
    programs = PeriodPrograms.of(model)
    prices = period_prices(model, programs, lp)
    total = np.sum(list(prices.values()), axis=0)
    np.testing.assert_allclose(total, model.cost[programs.reserved], rtol=1e-9, atol=1e-9)
    linked_solve = ReservedFirst(model, programs, EXACT, Deadline(30))
    linked_solve.bound = -math.inf
    linked_solve.lagrangian(lp, budget_s=30)
    exact = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=30, mip_gap=0.0)
    assert exact.outcome.status == "optimal"
    assert lp.outcome.objective - 1e-6 <= linked_solve.bound
    assert linked_solve.bound <= exact.outcome.objective * (1 + 1e-7) + 1e-6


def test_a_better_plan_from_elsewhere_forgets_the_floor_of_the_old_reserved_choice(linked):
    model, programs, lp = linked
    options = SolveOptions(time_limit_s=60, mip_gap=0.01, threads=1)
    linked_solve = _with_a_plan(model, programs, lp, options)
    assert math.isfinite(linked_solve.best_floor)
    exact = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=60, mip_gap=0.0)
    assert exact.outcome.objective < linked_solve.best_cost - 1e-6
    linked_solve.offer(exact.values)  # cheaper, found by another solve
    assert linked_solve.best_cost == pytest.approx(exact.outcome.objective)
    assert math.isnan(linked_solve.best_floor)


@pytest.mark.parametrize(("whole_milp_s", "ends"), [
    (None, False), (reserved_first.WHOLE_MIN_S * 0.9, False),
    (reserved_first.WHOLE_MIN_S * 2, True)])
def test_a_plan_that_breaks_a_row_of_the_whole_model_is_not_kept(linked, whole_milp_s, ends):
    # a period plan may break the rows of families left out of the periods; the best plan
    # must stay a plan (nothing bought here: demand is not met). When the caller's whole MILP
    # follows with time enough, such a plan ends the solve: the periods cannot see the row
    # that decides
    model, programs, lp = linked
    options = SolveOptions(time_limit_s=60, mip_gap=1e-9, threads=1)
    linked_solve = _with_a_plan(model, programs, lp, options)
    if whole_milp_s is not None:
        linked_solve.whole_milp_deadline = Deadline(whole_milp_s)
    best, cost = linked_solve.best, linked_solve.best_cost
    assert not linked_solve.done()
    linked_solve.offer(np.zeros(model.program.n_cols))
    assert linked_solve.best is best and linked_solve.best_cost == cost
    assert linked_solve.done() is ends


def test_a_plan_within_round_off_of_a_budget_in_dollars_is_kept():
    # three replicas cost $2,190 a month; a budget $0.0001 below that is broken by round-off
    # only (a relative 5e-8), as a solver's tolerance leaves it, so the plan is still a plan
    problem = make_problem([[1.0]], [[3.0]], {("g0", "on_demand"): 1.0}, hours=[730.0],
                           horizon_months=1.0)
    model = build_model(problem.with_changes(budget_usd_per_month=2190.0 - 1e-4))
    free = build_model(problem)  # the same columns, no budget row
    plan = open_solver(free.program, free.cost, EXACT).solve(time_limit_s=30, mip_gap=0.0).values
    assert model.program.violation(plan) > 1e-6
    linked_solve = ReservedFirst(model, PeriodPrograms.of(model), EXACT, Deadline(30))
    linked_solve.offer(plan)
    assert linked_solve.best is plan


def test_without_a_plan_the_time_goes_to_finding_one_not_to_the_lagrangian(linked,
                                                                           monkeypatch):
    # hard scenario 199: no fallback plan and the first candidate's periods cut short; the
    # Lagrangian bound then took half the time left and the call ended without a plan
    model, programs, lp = linked
    monkeypatch.setattr(reserved_first, "rounded_within_limits", lambda *a: None)
    monkeypatch.setattr(reserved_first, "greedy_plan", lambda *a: None)
    real_periods, real_lagrangian = ReservedFirst.periods_with, ReservedFirst.lagrangian
    calls, lagrangian_with_a_plan = [], []

    def periods_with(self, reserved, closed, budget_s, **how):
        calls.append(budget_s)
        if len(calls) > 1:  # the first candidate's periods find nothing in time
            real_periods(self, reserved, closed, budget_s, **how)

    def lagrangian(self, relaxation, budget_s):
        lagrangian_with_a_plan.append(self.best is not None)
        return real_lagrangian(self, relaxation, budget_s)

    monkeypatch.setattr(ReservedFirst, "periods_with", periods_with)
    monkeypatch.setattr(ReservedFirst, "lagrangian", lagrangian)
    linked_solve = ReservedFirst(model, programs, SolveOptions(time_limit_s=60, mip_gap=0.01,
                                                               threads=1), Deadline(60))
    outcome = linked_solve.solve()
    assert outcome.status in ("optimal", "time_limit") and linked_solve.best is not None
    assert len(calls) > 1 and all(lagrangian_with_a_plan)


def test_tightening_the_lagrangian_bound_raises_it_and_keeps_it_below_the_optimum(linked):
    model, programs, lp = linked
    loose = SolveOptions(time_limit_s=60, mip_gap=0.05, threads=1)
    linked_solve = ReservedFirst(model, programs, loose, Deadline(60))
    linked_solve.bound = -math.inf
    linked_solve.lagrangian(lp, budget_s=60)
    first = linked_solve.bound
    linked_solve.tighten_bound(60)
    exact = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=60, mip_gap=0.0)
    assert first < linked_solve.bound <= exact.outcome.objective * (1 + 1e-7)


def test_without_a_lagrangian_pass_there_is_no_bound_to_tighten(linked):
    model, programs, lp = linked
    linked_solve = ReservedFirst(model, programs, EXACT, Deadline(60))
    linked_solve.bound = lp.outcome.objective
    linked_solve.tighten_bound(60)
    assert linked_solve.bound == lp.outcome.objective


def test_a_neighbour_priced_one_pool_at_a_time_keeps_the_other_pools_plan(monkeypatch):
    model = build_model(portfolio_problem(n_models=2, n_gpus=2, n_periods=2))
    lp = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=60, mip_gap=0.0,
                                                             relax=True)
    plan = rounded_up(model, lp.values)  # a whole plan of both pools
    linked_solve = ReservedFirst(model, PeriodPrograms.of(model),
                                 SolveOptions(time_limit_s=60, mip_gap=0.01, threads=1),
                                 Deadline(60))
    linked_solve.offer(plan)
    assert linked_solve.best is plan
    rows = reserved_rows(model)
    counts = np.round(plan[rows["col"].to_numpy()])
    counts[np.flatnonzero(rows["pool"].to_numpy() == "m0")[0]] += 1.0
    offered = []
    monkeypatch.setattr(ReservedFirst, "offer",
                        lambda self, values, floor=math.nan: offered.append((values, floor)))
    linked_solve.periods_with(counts, None, 60, only_pools={"m0"})
    (values, floor), = offered
    held = other_pools_columns(model, {"m0"})
    assert len(held) and math.isnan(floor)
    np.testing.assert_allclose(values[held], shifted_plan(model, plan, counts)[held])
    assert model.program.violation(values) <= 1e-6
    pools = np.concatenate([model.routes["pool"], model.replicas["pool"]])
    cols = np.concatenate([model.routes["col"], model.replicas["col"]])
    assert set(pools[np.isin(cols, held)]) == {"m1"}


def test_the_pools_bound_lies_between_the_lp_and_the_optimum():
    # two model pools tied by the spot share over 2 hours: each pool's MILP over the whole
    # horizon keeps its whole reserved counts, and lifts the bound above the LP
    model = build_model(portfolio_problem(n_models=2, n_gpus=2, n_periods=2))
    lp = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=60, mip_gap=0.0,
                                                             relax=True)
    exact = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=60, mip_gap=0.0)
    assert lp.outcome.status == exact.outcome.status == "optimal"
    linked_solve = ReservedFirst(model, None, EXACT, Deadline(60))
    linked_solve.pool_bound(lp, budget_s=30)
    assert lp.outcome.objective * (1 + 1e-4) < linked_solve.bound
    assert linked_solve.bound <= exact.outcome.objective * (1 + 1e-7)
    # too little time to be worth a pool's MILP: no bound
    short = ReservedFirst(model, None, EXACT, Deadline(60))
    short.pool_bound(lp, budget_s=0.5)
    assert short.bound == -math.inf
