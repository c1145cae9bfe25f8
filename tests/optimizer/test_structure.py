"""Model structure: dominated configurations, merged periods, per-period solving, columns and
rows that map back to tables, and binding constraints priced by re-solving."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleetplan.optimizer import decomposition
from fleetplan.optimizer.decomposition import is_separable, solve_fleet, solve_whole
from fleetplan.optimizer.dominance import Comparison, dominated_configs
from fleetplan.optimizer.marginal_values import BasePlan, binding_limits, marginal_values
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.optimization import WhatIfOptions, optimize_problem
from fleetplan.optimizer.period_merging import merge_identical_periods
from fleetplan.optimizer.period_solves import Deadline
from fleetplan.optimizer.solver import SolveOptions
from tests.optimizer.instances import make_problem

EXACT = SolveOptions(time_limit_s=30, mip_gap=0.0)


def test_a_slower_configuration_on_the_same_gpu_is_dominated():
    problem = make_problem([[10.0, 5.0], [8.0, 5.0], [20.0, 1.0]], [[10.0, 10.0]],
                           {("g0", "on_demand"): 1.0}, gpu=["g0", "g0", "g0"])
    assert dominated_configs(problem) == ["c1"]  # c2 is faster on one bucket only


def test_a_capped_gpu_does_not_dominate():
    offers = {("g0", "on_demand"): 2.0, ("g1", "on_demand"): 1.0}
    free = make_problem([[5.0], [10.0]], [[10.0]], offers)
    capped = make_problem([[5.0], [10.0]], [[10.0]], offers, max_gpus={"g1": 1})
    assert dominated_configs(free) == ["c0"]
    assert dominated_configs(capped) == []


def test_equal_configurations_keep_one():
    problem = make_problem([[5.0], [5.0]], [[10.0]],
                           {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 1.0})
    assert dominated_configs(problem) == ["c1"]


def assert_pruned_plan_is_optimal(problem) -> None:
    """The planner's plan (dominated configurations pruned) costs what the whole MILP with every
    configuration kept proves optimal, or both find no plan."""
    full = solve_whole(build_model(problem), EXACT, Deadline(30))
    plan = optimize_problem(problem, EXACT)
    if full.has_solution:
        assert plan.objective_usd == pytest.approx(full.objective)
    else:
        assert plan.status == "infeasible"


def test_pruning_never_changes_the_optimum():
    rng = np.random.default_rng(7)
    for _ in range(5):
        capacity = rng.choice([0.0, 3.0, 5.0, 8.0], size=(4, 2))
        offers = {(f"g{c}", "on_demand"): float(rng.choice([1.0, 1.5, 2.0])) for c in range(4)}
        problem = make_problem(capacity, [[6.0, 4.0]], offers)
        assert_pruned_plan_is_optimal(problem)


def test_replicas_split_into_smaller_ones_on_the_same_gpus_dominate():
    # two TP 1 replicas (2 x 6 req/s) hold the GPUs of one TP 2 (10 req/s) and serve more;
    # a TP 4 of 30 req/s beats four TP 1 (24 req/s), and c3 is on another GPU type
    offers = {("g0", "on_demand"): 1.0, ("g0", "spot"): 0.4, ("g1", "on_demand"): 1.0}
    problem = make_problem([[6.0], [10.0], [30.0], [12.0]], [[10.0]], offers,
                           gpu=["g0", "g0", "g0", "g1"], tp=[1, 2, 4, 2], spot_max_share=0.3)
    assert dominated_configs(problem) == ["c1"]
    # with a fixed cost per configuration, or a churn limit, no split
    assert dominated_configs(problem.with_changes(config_fixed_usd_per_month=100.0)) == []
    assert dominated_configs(problem.with_changes(max_changes_per_month=4)) == []


def test_pruning_by_splits_never_changes_the_optimum():
    # TP degrees 1, 2 and 4 on two GPU types, N+1, spot capped, whole 4-GPU nodes on g0
    rng = np.random.default_rng(11)
    pruned = 0
    for _ in range(6):
        capacity = rng.choice([0.0, 2.0, 3.0, 5.0, 9.0], size=(5, 2))
        offers = {(g, p): float(rng.choice([1.0, 1.5])) * f for g in ("g0", "g1")
                  for p, f in (("on_demand", 1.0), ("spot", 0.4))}
        problem = make_problem(capacity, [[6.0, 4.0], [11.0, 2.0]], offers,
                               gpu=["g0", "g0", "g0", "g1", "g1"], tp=[1, 2, 4, 1, 2],
                               gpus_per_node={"g0": 4}, redundancy_k=1, spot_max_share=0.3)
        comparison = Comparison.of(problem)
        one_for_one = dataclasses.replace(comparison, splits=0 * comparison.splits)
        pruned += len(set(dominated_configs(problem)) - set(one_for_one.dominated(problem)))
        assert_pruned_plan_is_optimal(problem)
    assert pruned >= 5  # configurations only splits prune


def test_identical_periods_of_a_month_merge():
    problem = make_problem([[10.0]], [[5.0], [7.0], [5.0], [5.0]], {("g0", "on_demand"): 1.0},
                           hours=[1.0, 2.0, 3.0, 4.0])
    merged, representative = merge_identical_periods(problem)
    assert representative.tolist() == [0, 1, 0, 0]
    assert merged.periods.set_index("period")["hours"].to_dict() == {0: 8.0, 1: 2.0}


def test_periods_solved_one_by_one_match_the_whole_model():
    problem = make_problem([[10.0, 4.0], [30.0, 9.0]], [[25.0, 5.0], [12.0, 1.0], [40.0, 9.0]],
                           {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 2.5},
                           hours=[1.0, 2.0, 3.0])
    assert is_separable(problem)
    whole = solve_whole(build_model(problem), EXACT, Deadline(30))
    split = solve_fleet(build_model(problem), EXACT)
    assert split.status == "optimal"
    assert split.objective == pytest.approx(whole.objective)
    assert split.bound <= split.objective + 1e-9


def test_a_separable_model_whose_lp_is_infeasible_solves_no_period(monkeypatch):
    # 2 GPUs serve 20 req/s at most, and the second period asks for 25: no plan at all
    problem = make_problem([[10.0]], [[5.0], [25.0], [5.0]], {("g0", "on_demand"): 1.0},
                           max_gpus={"g0": 2})
    assert is_separable(problem)

    def no_period_solve(*args, **kwargs):
        raise AssertionError("an infeasible LP needs no period solve")

    monkeypatch.setattr(decomposition, "solve_periods", no_period_solve)
    model = build_model(problem)
    outcome = solve_fleet(model, EXACT)
    assert outcome.status == "infeasible"
    assert model.values is None


def test_reserved_pricing_links_periods_and_the_start_is_used():
    problem = make_problem([[10.0]], [[30.0], [10.0], [20.0]],
                           {("g0", "on_demand"): 1.0, ("g0", "reserved_1y"): 0.6})
    assert not is_separable(problem)
    outcome = solve_fleet(build_model(problem), EXACT)
    assert outcome.status == "optimal"
    # 2 reserved for 3 h (3.6) + 1 on-demand for 1 h = 4.6 < 1 reserved + 3 od hours (4.8)
    assert outcome.objective == pytest.approx(4.6)


def test_every_column_and_row_maps_back_to_one_table_row():
    problem = make_problem([[10.0], [5.0]], [[20.0]],
                           {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 1.0},
                           max_gpus={"g0": 4}, redundancy_k=1)
    model = build_model(problem)
    shares = model.routes.drop_duplicates("col")["col"]  # a route's stages share a column
    uses = model.extras["redundancy"]["col"]  # which configurations the workload uses
    columns = np.concatenate([shares, model.replicas["col"], model.nodes["col"], uses])
    assert sorted(columns) == list(range(model.program.n_cols))
    constraints = model.constraint_table()
    assert {"demand", "capacity", "nodes", "availability", "redundancy"} <= set(
        constraints["family"])
    assert sorted(constraints["row"]) == list(range(model.program.n_rows))


def test_binding_availability_is_priced_by_a_re_solve():
    problem = make_problem([[10.0], [10.0]], [[40.0]],
                           {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 2.0},
                           max_gpus={"g0": 2}, horizon_months=1.0)
    plan = optimize_problem(problem, EXACT, WhatIfOptions(enabled=True))
    row = plan.binding_constraints.set_index("family").loc["availability"]
    assert row["subject"] == "g0"
    assert row["saving_usd_per_month"] == pytest.approx(1.0)  # one g0 replaces one g1
    assert row["description"] == ("availability g0: one more g0 available would save $1.00 "
                                  "per month")


def test_slack_limits_are_not_binding():
    problem = make_problem([[10.0]], [[10.0]], {("g0", "on_demand"): 1.0}, max_gpus={"g0": 5})
    model = build_model(problem)
    solve_fleet(model, EXACT)
    assert binding_limits(model).empty
    assert marginal_values(model, BasePlan(1.0, 0.0, EXACT, Deadline(30))).empty
