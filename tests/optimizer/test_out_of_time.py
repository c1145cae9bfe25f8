"""What a solve whose time has run out still does, and what it skips: on a model of millions of
columns each step costs seconds past the limit (``benchmarks/hard_scenarios/random_38.yaml``),
so a step that cannot help is not taken, and none is taken twice."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from fleetplan.optimizer import decomposition, milp, optimization, reserved_first, solver
from fleetplan.optimizer.decomposition import solve_fleet, solve_whole
from fleetplan.optimizer.milp import BuildStopped, build_model
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.period_solves import Deadline, PeriodPrograms
from fleetplan.optimizer.reserved_first import ReservedFirst
from fleetplan.optimizer.solver import Result, SolveOptions, SolveOutcome
from tests.optimizer.instances import make_problem

OPTIONS = SolveOptions(time_limit_s=30, mip_gap=1e-6, threads=1)
PRICES = {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 1.0, ("g0", "reserved_1y"): 0.6}


def linked_problem(**scalars):
    return make_problem([[4.0, 1.0], [1.0, 4.0]], [[2.0, 2.0], [3.0, 1.0]], PRICES, **scalars)


def never_opened(*arguments, **keywords):
    raise AssertionError("a solver was opened")


def test_a_whole_solve_too_short_to_watch_builds_no_highs_model_and_keeps_its_start(
        monkeypatch):
    # a large MIP unchanged runs in the watchdog's child, which builds its own copy: this
    # process builds none, even when the time is too short to start the child
    model = build_model(linked_problem())
    monkeypatch.setattr(solver, "wants_watchdog", lambda n_cols, mip: mip)
    monkeypatch.setattr(solver.HighsSolver, "_built", never_opened)
    start = np.ones(model.program.n_cols)
    outcome = solve_whole(model, OPTIONS, Deadline(0.0), start=start)
    assert outcome.status == "time_limit" and model.values is start
    assert solve_whole(model, OPTIONS, Deadline(0.0), greedy=False).status == "no_solution"


def test_a_large_model_out_of_time_gets_no_lp(monkeypatch):
    model = build_model(linked_problem())
    monkeypatch.setattr(reserved_first, "WATCHDOG_COLUMNS", model.program.n_cols)
    monkeypatch.setattr(reserved_first, "open_solver", never_opened)
    result = ReservedFirst(model, None, OPTIONS, Deadline(0.0)).relaxation()
    assert result.values is None and result.outcome.status == "time_limit"


def test_the_periods_programs_are_cut_out_only_when_a_period_is_solved(monkeypatch):
    # no LP in time: the greedy plan is the answer, and no period was ever solved
    model = build_model(linked_problem())
    cut_out = []
    real = PeriodPrograms.of
    monkeypatch.setattr(PeriodPrograms, "of", staticmethod(
        lambda model: cut_out.append(1) or real(model)))
    monkeypatch.setattr(ReservedFirst, "relaxation", lambda self: Result(
        SolveOutcome("time_limit", math.nan, math.nan, "HiGHS", 0.0), None))
    solve = ReservedFirst(model, None, OPTIONS, Deadline(30.0))
    assert solve.solve().has_solution and cut_out == []
    assert solve.programs is solve.programs and cut_out == [1]


class _NothingFound:
    """A solver that finds no plan in time, whatever it is asked."""

    def __init__(self, *arguments) -> None:
        pass

    def solve(self, **keywords) -> Result:
        return Result(SolveOutcome("no_solution", math.nan, math.nan, "HiGHS", 0.0), None)


def test_a_budget_problem_without_a_linked_plan_tries_the_greedy_plan_once(monkeypatch):
    # no LP in time and a greedy plan that breaks the budget: the whole MILP, which finds
    # nothing either, does not build the same greedy plan again as its fallback
    model = build_model(linked_problem(budget_usd_per_month=1e6))
    monkeypatch.setattr(decomposition, "WHOLE_MODEL_COLUMNS", 0)
    monkeypatch.setattr(ReservedFirst, "relaxation", lambda self: Result(
        SolveOutcome("time_limit", math.nan, math.nan, "HiGHS", 0.0), None))
    monkeypatch.setattr(decomposition, "open_solver", _NothingFound)
    calls = []
    for module in (reserved_first, decomposition):
        monkeypatch.setattr(module, "greedy_plan", lambda *a, **k: calls.append(1))
    outcome = solve_fleet(model, OPTIONS, Deadline(5.0))
    assert outcome.status == "no_solution" and calls == [1]


def test_a_model_not_built_by_the_deadline_stops_after_the_step_that_ran_out():
    # each step is checked once it ends: the first ending with no time left raises
    left = iter([1.0, 1.0, 0.0])
    with pytest.raises(BuildStopped, match="model build stopped after nodes columns") as stopped:
        build_model(linked_problem(), time_left=lambda: next(left))
    assert stopped.value.routes == 8  # 1 workload x 2 buckets x 2 configurations x 2 periods
    assert stopped.value.columns > stopped.value.routes
    assert build_model(linked_problem(), time_left=lambda: 1.0).program.n_cols > 0


def test_a_plan_whose_model_is_not_built_in_time_says_so_without_solving(monkeypatch):
    monkeypatch.setattr(solver.HighsSolver, "_built", never_opened)
    monkeypatch.setattr(optimization, "solve_deadline", lambda options: Deadline(0.0))
    plan = optimize_problem(linked_problem(), OPTIONS)
    assert plan.status == "no_solution" and math.isnan(plan.usd_per_month)
    assert plan.solver == "none"
    assert any("the model did not finish building within the solve's 0.0 s (stopped after "
               "its routes columns" in message and "for 8 routes over 2 period(s)" in message
               and "raise solver.time_limit_s" in message for message in plan.messages)


def test_a_build_expected_to_outlast_the_time_left_is_not_begun():
    with pytest.raises(BuildStopped, match=r"^model build stopped after no step: a like model "
                                           r"took 2\.0 s to build$"):
        build_model(linked_problem(), time_left=lambda: 1.0, expected_s=2.0)
    assert build_model(linked_problem(), time_left=lambda: 3.0, expected_s=2.0).program.n_cols


def test_a_models_build_time_leaves_out_its_cost_cover_solves(monkeypatch):
    # the follow-ups that read it build without the cut, whose small MILPs may take seconds
    real = milp.define_cost_cover

    def slow_cover(*arguments, **keywords):
        time.sleep(0.3)
        return real(*arguments, **keywords)

    monkeypatch.setattr(milp, "define_cost_cover", slow_cover)
    started = time.perf_counter()
    model = build_model(linked_problem())
    assert 0.0 < model.build_s <= time.perf_counter() - started - 0.3
