"""The reserved-first Lagrangian bound: period prices of reserved capacity taken from the LP's
duals sum to its cost, keep every period's LP at least its share of the LP bound, and give a
bound between the LP's and the optimum."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.period_solves import Deadline, PeriodPrograms, _local
from fleetplan.optimizer.reserved_first import ReservedFirst, period_prices
from fleetplan.optimizer.solver import SolveOptions, open_solver
from tests.optimizer.instances import portfolio_problem

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


def _period_cost(model, programs, prices, period):
    part = programs.parts[period]
    own = model.cost[part.cols].copy()
    where, which = _local(part, programs.reserved)
    own[where] = prices[period][which]
    return part, own


def test_the_prices_of_each_reserved_column_sum_to_its_cost(linked):
    model, programs, lp = linked
    prices = period_prices(model, programs, lp)
    assert set(prices) == set(model.problem.periods["period"])
    total = np.sum(list(prices.values()), axis=0)
    np.testing.assert_allclose(total, model.cost[programs.reserved], rtol=1e-9, atol=1e-9)
    # the instance needs negative prices: reserved replicas idle in some hours
    assert np.min(list(prices.values())) < -1e-6


def test_the_priced_period_lps_sum_to_the_lp_bound(linked):
    # clipped prices (the old rule) summed 3 % below the LP on bench_portfolio's day case
    model, programs, lp = linked
    prices = period_prices(model, programs, lp)
    total = 0.0
    for period in programs.periods():
        part, own = _period_cost(model, programs, prices, period)
        result = open_solver(part.program, own, EXACT).solve(time_limit_s=30, mip_gap=0.0,
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
