"""What keeps a model of millions of columns within the call's time: large LPs solved in a
watched child like large MIPs, an infeasible plan's elastic model not begun without the time
its build takes, no rounding tried twice, and column sets that stay fast at that size."""

from __future__ import annotations

import numpy as np
import pytest

import fleetplan.optimizer.optimization as optimization
import fleetplan.optimizer.rounding as rounding
import fleetplan.optimizer.solver as solver_module
from fleetplan.optimizer.linear_program import LinearProgram, column_set, restricted
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.solve_results import Deadline
from fleetplan.optimizer.solve_watchdog import LP_WATCHDOG_COLUMNS, wants_watchdog
from fleetplan.optimizer.solver import SolveOptions, open_solver
from tests.optimizer.instances import make_problem, portfolio_problem
from tests.optimizer.test_fallback_plans import OPTIONS, lp_values, whole_and_feasible


def test_column_sets_are_sorted_and_distinct():
    rng = np.random.default_rng(7)
    parts = [rng.integers(0, 1_000, 300), np.array([999, 0, 0]), np.zeros(0, dtype=np.int64)]
    np.testing.assert_array_equal(column_set(1_000, *parts), np.unique(np.concatenate(parts)))
    assert column_set(5).size == 0


def test_a_restriction_keeps_the_columns_of_its_rows_and_the_extra_ones():
    program = LinearProgram()
    program.add_columns(6, lower=0.0, upper=1.0)
    program.add_rows(2, np.array([0, 0, 1]), np.array([4, 1, 1]), np.ones(3),
                     lower=np.zeros(2), upper=np.ones(2))
    np.testing.assert_array_equal(restricted(program, np.array([0])).cols, [1, 4])
    np.testing.assert_array_equal(
        restricted(program, np.array([1]), extra_cols=np.array([5, 1])).cols, [1, 5])


def test_only_lps_of_a_million_columns_are_watched():
    # bench_large_lp.py at a 3 s limit: HiGHS returned from the LP of hard scenario 38
    # (2,066,385 columns) after 20.2 s, from the others' (up to 431,575) within 0.3 s of it
    assert wants_watchdog(2_066_385, False) and wants_watchdog(LP_WATCHDOG_COLUMNS, False)
    assert not wants_watchdog(LP_WATCHDOG_COLUMNS - 1, False)
    assert not wants_watchdog(431_575, False)  # hard scenario 279's elastic LP


def test_a_watched_lp_equals_the_lp_in_this_process(monkeypatch):
    model = build_model(portfolio_problem(n_models=1, n_gpus=2, n_periods=2))
    options = SolveOptions(time_limit_s=30, mip_gap=0.0)
    here = open_solver(model.program, model.cost, options).solve(
        time_limit_s=30, mip_gap=0.0, relax=True)
    monkeypatch.setattr(solver_module, "wants_watchdog", lambda n_cols, mip: True)
    monkeypatch.setattr(solver_module, "run_with_watchdog", watched := CountedWatchdog())
    solver = open_solver(model.program, model.cost, options)
    child = solver.solve(time_limit_s=30, mip_gap=0.0, relax=True)
    assert watched.calls == 1
    assert child.outcome.status == here.outcome.status == "optimal"
    assert child.outcome.objective == pytest.approx(here.outcome.objective, rel=1e-9)
    assert child.duals is not None and np.allclose(child.duals, here.duals, atol=1e-7)


class CountedWatchdog:
    """``run_with_watchdog`` that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.run = solver_module.run_with_watchdog

    def __call__(self, *arguments):
        self.calls += 1
        return self.run(*arguments)


def test_an_elastic_model_longer_to_build_than_the_time_left_is_not_begun():
    # 50 req/s on two 10 req/s GPUs: no plan exists. With the call's time spent and a like
    # model that took 5 s to build, the elastic model would run 4 s past the least second it
    # is given, so the plan says no plan exists and why the unmet demand is not named
    problem = make_problem([[10.0]], [[50.0]], {("g0", "on_demand"): 1.0}, max_gpus={"g0": 2})
    plan = optimization._elastic_plan(problem, problem, OPTIONS, {}, Deadline(0.0),
                                      like_build_s=5.0)
    assert plan.status == "infeasible" and plan.fleet.empty
    message = plan.messages[-1]
    assert message.startswith("no plan meets every limit and SLO; the elastic model")
    assert "a like model took 5.0 s to build" in message
    assert "raise solver.time_limit_s" in message
    # with the time its build takes, the same call names the unmet demand
    named = optimization._elastic_plan(problem, problem, OPTIONS, {}, Deadline(30.0),
                                       like_build_s=5.0)
    assert named.unmet_demand["unmet_req_s"].sum() == pytest.approx(30.0, abs=1e-3)


def test_a_rounding_without_reserved_rows_is_not_tried_again(monkeypatch):
    # on demand only, so rounding the LP's reserved replicas up changes nothing: the failed
    # rounding is not repeated, and the LP is tightened at once (c2 then serves)
    problem = make_problem([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0.5, 1.5]],
                           {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 3.0},
                           gpu=["g0", "g0", "g1"], max_gpus={"g0": 2})
    model = build_model(problem)
    values = lp_values(model)
    monkeypatch.setattr(rounding, "rounded_up", lambda *a, **k: pytest.fail("rounded again"))
    plan = rounding.rounded_within_limits(model, values, OPTIONS, 5.0)
    whole_and_feasible(model, plan)
