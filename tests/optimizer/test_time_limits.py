"""Time limits mean the whole call: a plan stopped short of the accepted gap says so, with its
bound, and ``fleetplan plan`` exits 3 for it unless ``--allow-gap``."""

from __future__ import annotations

import math

import pytest

import fleetplan.cli.plan
from fleetplan.cli import main
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.solver import SolveOptions
from tests.optimizer.instances import portfolio_problem
from tests.optimizer.plan_checker import check_plan


@pytest.mark.slow
def test_a_short_time_limit_returns_an_honest_plan():
    problem = portfolio_problem()
    # how close to the limit the call returns is measured by benchmarks/bench_portfolio.py
    plan = optimize_problem(problem, SolveOptions(time_limit_s=1.5, mip_gap=0.0))
    assert plan.status == "time_limit"
    assert math.isfinite(plan.bound_usd) and plan.bound_usd <= plan.objective_usd + 1e-6
    assert plan.gap == pytest.approx((plan.objective_usd - plan.bound_usd) / plan.objective_usd)
    assert any(m.startswith("time_limit: stopped at a gap of") for m in plan.messages)
    assert check_plan(plan, problem) == []
    assert plan.assumptions["recheck"] == "passed"


def test_a_generous_limit_proves_the_gap():
    problem = portfolio_problem(n_models=1, n_gpus=2, n_periods=3)
    plan = optimize_problem(problem, SolveOptions(time_limit_s=30, mip_gap=0.02))
    assert plan.status == "optimal" and plan.gap <= 0.02
    assert plan.bound_usd <= plan.objective_usd + 1e-6
    assert check_plan(plan, problem) == []


@pytest.mark.parametrize(("arguments", "code"), [([], 3), (["--allow-gap"], 0)])
def test_plan_exits_3_on_a_gap_above_the_accepted_one(monkeypatch, tmp_path, arguments, code):
    def stopped(scenario, what_if=None):
        return FleetPlan(status="time_limit", gap=0.2, objective_usd=10.0, usd_per_month=1.0,
                         solver="HiGHS", solve_seconds=5.0, bound_usd=8.0,
                         assumptions={"horizon_months": 10.0})

    monkeypatch.setattr(fleetplan.cli.plan, "plan_scenario", stopped)
    assert main(["plan", "-o", str(tmp_path / "plan.json"), "-q", *arguments]) == code
