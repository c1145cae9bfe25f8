"""Known answers: Mélange's toy example and tiny instances solvable by hand."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from fleetplan.optimizer.fleet_problem import table_problem
from fleetplan.optimizer.optimization import optimize_problem, usd_per_hour
from fleetplan.optimizer.solver import SolveOptions
from tests.optimizer.plan_checker import check_plan

EXACT = SolveOptions(time_limit_s=30, mip_gap=0.0)

# Mélange (Griggs et al. 2024), toy example: throughputs per (input bucket, output bucket)
A10G_REQ_S = [[2, 1], [5, 2]]
A100_REQ_S = [[20, 20], [40, 20]]
BUCKET_SHARES = [[0.2, 0.1], [0.5, 0.2]]


def melange_problem(**scalars):
    capacity = np.array([np.ravel(A10G_REQ_S), np.ravel(A100_REQ_S)], dtype=float)
    demand = 30.0 * np.ravel(BUCKET_SHARES)
    return table_problem(capacity, np.array([1.01, 3.67]), demand, **scalars)


def test_melange_toy_mixes_one_a10g_and_one_a100():
    problem = melange_problem()
    plan = optimize_problem(problem, EXACT)
    replicas = plan.fleet.set_index("gpu")["replicas_peak"]
    assert plan.status == "optimal"
    assert replicas.to_dict() == {"gpu0": 1, "gpu1": 1}  # gpu0 = A10G, gpu1 = A100
    assert usd_per_hour(plan) == pytest.approx(4.68)
    assert check_plan(plan, problem) == []


def test_melange_toy_routes_part_of_one_bucket_to_the_a10g():
    plan = optimize_problem(melange_problem(), EXACT)
    on_a10g = plan.routing[plan.routing["config"] == "c0"]
    # the A10G takes 5 req/s of the (long input, short output) bucket: exactly its capacity
    assert on_a10g["req_s"].sum() == pytest.approx(5.0)
    assert set(on_a10g["bucket"]) == {2}


def test_melange_toy_slicing_would_cost_more():
    # Mélange's own solver slices demand and returns $5.69 or $6.70; the best single type:
    a100_only = table_problem(np.array([np.ravel(A100_REQ_S)], float), np.array([3.67]),
                              30.0 * np.ravel(BUCKET_SHARES))
    plan = optimize_problem(a100_only, EXACT)
    assert usd_per_hour(plan) == pytest.approx(2 * 3.67)


@pytest.mark.parametrize(("capacity", "price", "demand", "usd_per_hour"), [
    ([[10.0]], [1.0], [25.0], 3.0),            # ceil(25 / 10) replicas
    ([[10.0]], [1.0], [30.0], 3.0),            # exactly full replicas
    ([[10.0], [25.0]], [1.0, 2.0], [25.0], 2.0),  # one big replica beats three small ones
    ([[10.0], [25.0]], [1.0, 2.0], [30.0], 3.0),  # 1 big + 1 small = 3 < 2 big = 4
    ([[10.0, 0.0], [0.0, 5.0]], [1.0, 1.0], [10.0, 10.0], 3.0),  # each bucket its own GPU
])
def test_hand_solvable_instances(capacity, price, demand, usd_per_hour):
    problem = table_problem(np.array(capacity), np.array(price), np.array(demand))
    plan = optimize_problem(problem, EXACT)
    assert plan.objective_usd == pytest.approx(usd_per_hour)
    assert check_plan(plan, problem) == []


def test_target_utilization_adds_headroom():
    problem = table_problem(np.array([[10.0]]), np.array([1.0]), np.array([16.0]),
                            target_utilization=0.8)  # 16 / (0.8 * 10) = 2 replicas exactly
    assert optimize_problem(problem, EXACT).objective_usd == pytest.approx(2.0)
    tighter = table_problem(np.array([[10.0]]), np.array([1.0]), np.array([16.5]),
                            target_utilization=0.8)
    assert optimize_problem(tighter, EXACT).objective_usd == pytest.approx(3.0)


def test_tensor_parallel_replicas_pay_for_every_gpu():
    problem = table_problem(np.array([[10.0], [30.0]]), np.array([1.0, 1.0]), np.array([30.0]),
                            tp=np.array([1, 4]))
    plan = optimize_problem(problem, EXACT)
    assert plan.objective_usd == pytest.approx(3.0)  # 3 x tp1 ($3) beats 1 x tp4 ($4)
    assert plan.fleet["gpus_peak"].sum() == 3


def test_costs_add_up_across_tables():
    plan = optimize_problem(melange_problem(horizon_months=12, hours_per_month=730), EXACT)
    total = plan.objective_usd
    assert plan.costs_by_gpu["usd_total"].sum() == pytest.approx(total)
    assert plan.costs_by_pricing["usd_total"].sum() == pytest.approx(total)
    assert plan.costs_by_workload["usd_total"].sum() == pytest.approx(total)
    assert plan.costs_by_month["usd"].sum() == pytest.approx(total)
    assert len(plan.costs_by_month) == 12
    assert plan.usd_per_month == pytest.approx(4.68 * 730)


def test_cbc_gives_the_same_answer():
    problem = melange_problem()
    plan = optimize_problem(problem, SolveOptions(time_limit_s=30, mip_gap=0.0, solver="cbc"))
    assert plan.solver == "PULP_CBC_CMD"
    assert usd_per_hour(plan) == pytest.approx(4.68)
    assert check_plan(plan, problem) == []


def test_unknown_solver_is_rejected():
    with pytest.raises(ValueError, match="solver must be one of auto, highs, cbc"):
        optimize_problem(melange_problem(), SolveOptions(solver="gurobi"))


def test_time_limited_solve_reports_its_own_status():
    plan = optimize_problem(melange_problem(), SolveOptions(time_limit_s=30))
    assert plan.status in ("optimal", "time_limit")
    assert math.isfinite(plan.gap) and plan.gap >= 0


def test_unused_configurations_are_not_in_the_fleet():
    problem = table_problem(np.array([[10.0], [10.0]]), np.array([1.0, 5.0]), np.array([5.0]))
    plan = optimize_problem(problem, EXACT)
    assert list(plan.fleet["config"]) == ["c0"]
    assert isinstance(plan.fleet, pd.DataFrame)


def test_a_solve_prints_nothing_on_standard_output():
    # highspy 1.16 prints a banner from its first constructor, before options can silence it
    code = ("import numpy as np\n"
            "from fleetplan.optimizer.fleet_problem import table_problem\n"
            "from fleetplan.optimizer.optimization import optimize_problem\n"
            "from fleetplan.optimizer.solver import SolveOptions\n"
            "problem = table_problem(np.array([[2.0], [20.0]]), np.array([1.0, 3.0]),"
            " np.array([4.0]))\n"
            "plan = optimize_problem(problem, SolveOptions(time_limit_s=10, mip_gap=0.0))\n"
            "print(plan.status)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout == "optimal\n"
