"""The fallback plans a time-limited solve falls back on: the greedy plan and the rounded-up LP
must be whole and feasible under every family, including those with columns of their own
(fleet simplicity, a fixed cost per configuration, node patterns), whose columns the solver
completes with the fallback's routing and replicas held (``rounding.completed``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fleetplan.optimizer import decomposition, reserved_first
from fleetplan.optimizer.greedy_fallback import cheapest_routes, greedy_plan
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.period_solves import Deadline, PeriodPrograms, PeriodRun
from fleetplan.optimizer.reserved_first import ReservedFirst
from fleetplan.optimizer.rounding import completed, rounded_up, rounded_within_limits
from fleetplan.optimizer.solver import Result, SolveOptions, SolveOutcome, open_solver
from tests.optimizer.instances import make_problem
from tests.optimizer.test_bruteforce import instances
from tests.optimizer.test_replanning import tiny as replanning_tiny

OPTIONS = SolveOptions(time_limit_s=30, mip_gap=1e-6, threads=1)
ON_DEMAND = {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 1.0}


def whole_and_feasible(model, plan) -> None:
    assert plan is not None
    assert model.program.violation(plan) <= 1e-6
    integer = model.program.integer
    np.testing.assert_allclose(plan[integer], plan[integer].round(), atol=1e-9)


def routes_used(model, plan) -> set[str]:
    shares = model.routes.assign(share=plan[model.routes["col"]])
    return set(shares.loc[shares["share"] > 1e-9, "route"])


def lp_values(model) -> np.ndarray:
    lp = open_solver(model.program, model.cost, OPTIONS).solve(time_limit_s=30, mip_gap=0.0,
                                                               relax=True)
    assert lp.outcome.status == "optimal"
    return lp.values


def two_buckets(**scalars):
    """Bucket 0 is cheapest on c0, bucket 1 on c1; either configuration serves both."""
    return make_problem([[4.0, 1.0], [1.0, 4.0]], [[2.0, 2.0], [3.0, 1.0]], ON_DEMAND, **scalars)


def test_a_gpu_without_an_on_demand_offer_is_not_a_free_route_for_the_greedy_plan():
    # g0 has only a spot price: the greedy plan buys on demand, so it must use c1; it used
    # to price c0 at spot (or at nothing) and then find no on-demand offer for it
    problem = make_problem([[4.0], [1.0]], [[2.0]], {("g0", "spot"): 0.1,
                                                     ("g1", "on_demand"): 1.0})
    model = build_model(problem)
    plan = greedy_plan(model, OPTIONS, 5.0)
    whole_and_feasible(model, plan)
    assert routes_used(model, plan) == {"c1"}


def test_the_greedy_plan_keeps_one_route_per_workload_under_a_configuration_limit():
    model = build_model(two_buckets(max_configs_per_workload=1))
    plan = greedy_plan(model, OPTIONS, 5.0)
    whole_and_feasible(model, plan)
    assert len(routes_used(model, plan)) == 1
    # without the limit every bucket keeps its own cheapest route
    free = build_model(two_buckets())
    assert routes_used(free, greedy_plan(free)) == {"c0", "c1"}


def test_without_any_on_demand_offer_the_greedy_plan_buys_spot_under_a_configuration_limit():
    # nothing can be bought on demand: the greedy plan prices and buys spot (it had no plan
    # at all, and before that crashed on the empty table of routes under the limit)
    spot_only = {("g0", "spot"): 0.5, ("g1", "spot"): 0.5}
    problem = make_problem([[4.0, 1.0], [1.0, 4.0]], [[2.0, 2.0]], spot_only,
                           max_configs_per_workload=1)
    model = build_model(problem)
    plan = greedy_plan(model, OPTIONS, 5.0)
    whole_and_feasible(model, plan)
    assert len(routes_used(model, plan)) == 1
    bought = model.replicas.assign(n=plan[model.replicas["col"]])
    assert set(bought.loc[bought["n"] > 0, "pricing_type"]) == {"spot"}


def two_workloads_one_model(capacity=(4.0, 1.0, 1.0, 3.0), demand=2.0, **scalars):
    """Workloads w and w1 of one model on c0 (fp8, GPU g0) and c1 (bf16, GPU g1):
    ``capacity`` is w on c0, w on c1, w1 on c0, w1 on c1 [req/s per replica]."""
    base = make_problem([[capacity[0]], [capacity[1]]], [[demand]], ON_DEMAND,
                        one_quant_per_model=True, **scalars)
    second = base.candidates.assign(workload="w1", req_s_per_replica=list(capacity[2:]))
    problem = base.with_changes(
        workloads=pd.DataFrame({"workload": ["w", "w1"], "pool": "p", "redundancy_k": 0}),
        demand=pd.concat([base.demand, base.demand.assign(workload="w1")], ignore_index=True),
        candidates=pd.concat([base.candidates, second], ignore_index=True),
        configs=base.configs.assign(model="m", quant=["fp8", "bf16"]))
    return build_model(problem)


def test_the_greedy_plan_keeps_one_quantization_per_model():
    # w is cheapest on c0 (fp8), w1 on c1 (bf16); fp8 for both costs 0.5 + 2.0 replica-hours,
    # bf16 for both 2.0 + 0.67, so both run c0
    model = two_workloads_one_model()
    plan = greedy_plan(model, OPTIONS, 5.0)
    whole_and_feasible(model, plan)
    assert routes_used(model, plan) == {"c0"}


def test_one_quantization_per_model_still_lets_each_bucket_take_its_cheapest_route_in_it():
    # c0 serves bucket 0 and c1 bucket 1, both fp8; c2 (bf16) serves both. Bucket 0 is
    # cheapest on c2, so the cheapest routes mix quantizations; in fp8 the buckets cost 0.5 +
    # 0.5 replica-hours on c0 and c1, in bf16 0.25 + 2.0 on c2: the plan runs c0 and c1
    problem = make_problem([[4.0, 0.0], [0.0, 4.0], [8.0, 1.0]], [[2.0, 2.0]],
                           {**ON_DEMAND, ("g2", "on_demand"): 1.0}, one_quant_per_model=True)
    problem = problem.with_changes(configs=problem.configs.assign(
        model="m", quant=["fp8", "fp8", "bf16"]))
    model = build_model(problem)
    assert routes_used(model, cheapest_routes(model)) == {"c0", "c1"}
    whole_and_feasible(model, greedy_plan(model, OPTIONS, 5.0))


def test_the_rounded_up_lp_never_keeps_the_lps_fractional_flags():
    # with one GPU of g0, the LP sends a fifth of each workload to fp8 and the rest to bf16
    # under flags of 0.2 and 0.8; the rounding used to return them as they were: a plan that
    # runs the model in two quantizations
    model = two_workloads_one_model((4.0, 1.0, 1.0, 4.0), 4.0, max_gpus={"g0": 1})
    values = lp_values(model)
    flags = values[model.program.integer]
    assert (np.abs(flags - flags.round()) > 1e-6).any()
    plan = rounded_up(model, values, options=OPTIONS, seconds=5.0)
    assert plan is None or len(routes_used(model, plan)) == 1
    if plan is not None:
        whole_and_feasible(model, plan)


def test_the_rounded_up_lp_completes_the_deployed_configuration_binaries():
    model = build_model(two_buckets(config_fixed_usd_per_month=5.0))
    values = lp_values(model)
    assert rounded_up(model, values) is None  # no completion without a solver
    whole_and_feasible(model, rounded_up(model, values, options=OPTIONS, seconds=5.0))


def test_the_rounded_up_lp_packs_replicas_into_node_patterns():
    # TP 2 and 3 on 8-GPU nodes are no divisibility chain: nodes are filled by patterns
    problem = make_problem([[3.0], [5.0]], [[7.0], [11.0]], {("g0", "on_demand"): 1.0},
                           gpu=["g0", "g0"], tp=[2, 3], gpus_per_node={"g0": 8})
    model = build_model(problem)
    assert model.extras.get("patterns") is not None
    values = lp_values(model)
    plan = rounded_up(model, values, options=OPTIONS, seconds=5.0)
    whole_and_feasible(model, plan)
    replicas = model.replicas.assign(value=plan[model.replicas["col"]])
    assert (replicas["value"] >= np.floor(values[model.replicas["col"]] - 1e-9)).all()


def test_the_greedy_plan_avoids_a_capped_gpu_when_its_cheapest_routes_break_the_cap():
    # c0 is cheapest but needs two replicas on g0, capped at one GPU: the plan runs c1
    problem = make_problem([[4.0], [1.0]], [[5.0]], ON_DEMAND, max_gpus={"g0": 1})
    model = build_model(problem)
    assert routes_used(model, cheapest_routes(model)) == {"c0"}
    plan = greedy_plan(model, OPTIONS, 5.0)
    whole_and_feasible(model, plan)
    assert routes_used(model, plan) == {"c1"}


def test_a_cap_the_rounding_breaks_is_tightened_in_the_lp_until_the_rounding_holds():
    # c0 serves bucket 0 and c1 bucket 1, both on g0 (2 GPUs); c2 on g1 serves both at three
    # times the price. The LP fills g0 with 0.5 + 1.5 replicas, which round up to 3 GPUs; with
    # the cap tightened by that one GPU the LP moves load to c2, and its rounding holds
    problem = make_problem([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0.5, 1.5]],
                           {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 3.0},
                           gpu=["g0", "g0", "g1"], max_gpus={"g0": 2})
    model = build_model(problem)
    values = lp_values(model)
    assert rounded_up(model, values, options=OPTIONS, seconds=5.0) is None
    plan = rounded_within_limits(model, values, OPTIONS, 5.0)
    whole_and_feasible(model, plan)
    assert "c2" in routes_used(model, plan)


def test_reserved_replicas_round_up_when_on_demand_cannot_make_up_the_rest():
    # relaxed values reserving 2.5 replicas for 2.5 req/s: rounded down, the half left would
    # need an on-demand replica that the offer's cap (0 GPUs) forbids, and no tightening can
    # help; rounded up, the reserved replicas carry it all
    problem = make_problem([[1.0]], [[2.5], [2.5]], {("g0", "on_demand"): 1.0,
                                                      ("g0", "reserved_1y"): 0.6})
    offers = problem.offers.assign(max_gpus=np.where(
        problem.offers["pricing_type"] == "on_demand", 0.0, np.nan))
    model = build_model(problem.with_changes(offers=offers))
    values = lp_values(model)
    for table in (model.replicas, model.nodes):
        values[table.loc[table["period"] < 0, "col"]] = 2.5
    assert rounded_up(model, values) is None
    reserved = model.replicas[model.replicas["period"] < 0]["col"]
    # tightened and rounded again, or completed with the routing alone held
    for plan in (rounded_within_limits(model, values, OPTIONS, 5.0),
                 rounded_up(model, values, options=OPTIONS, seconds=5.0)):
        whole_and_feasible(model, plan)
        assert plan[reserved].sum() == 3


def test_held_columns_that_break_a_row_of_their_own_admit_no_completion():
    # two replicas of c0 against a cap of one GPU: no other column can repair that row
    problem = make_problem([[4.0], [1.0]], [[5.0]], ON_DEMAND, max_gpus={"g0": 1})
    model = build_model(problem)
    values = np.zeros(model.program.n_cols)
    c0 = model.replicas[model.replicas["config"] == "c0"]["col"].to_numpy()
    values[c0] = 2.0
    assert completed(model.program, model.cost, values, c0, OPTIONS, 5.0) is None


def test_a_linked_solve_falls_back_on_the_greedy_plan_when_the_lp_rounds_to_no_plan(
        monkeypatch):
    # the LP's routing spreads over both routes, which the configuration limit forbids; with
    # every later pass finding nothing, the greedy plan is the answer, not "no solution"
    problem = make_problem([[4.0, 1.0], [1.0, 4.0]], [[2.0, 2.0], [3.0, 1.0]],
                           {**ON_DEMAND, ("g0", "reserved_1y"): 0.6}, max_configs_per_workload=1)
    model = build_model(problem)
    unsolved = Result(SolveOutcome("no_solution", math.nan, math.nan, "HiGHS", 0.0), None)
    nothing = PeriodRun({0: unsolved}, None, 0.0)
    monkeypatch.setattr(reserved_first, "solve_periods", lambda *a, **k: nothing)
    monkeypatch.setattr(ReservedFirst, "whole", lambda self: None)
    monkeypatch.setattr(ReservedFirst, "lagrangian", lambda self, lp, budget_s: None)
    monkeypatch.setattr(reserved_first, "rounded_within_limits", lambda *a, **k: None)
    solve = ReservedFirst(model, PeriodPrograms.of(model), OPTIONS, Deadline(30.0))
    outcome = solve.solve()
    assert outcome.has_solution
    whole_and_feasible(model, solve.best)
    assert solve.best_cost == pytest.approx(float(model.cost @ greedy_plan(model, OPTIONS, 5)))


class _NothingFound:
    """A solver that finds no plan in time, whatever it is asked."""

    def __init__(self, *arguments) -> None:
        pass

    def solve(self, **keywords) -> Result:
        return Result(SolveOutcome("no_solution", math.nan, math.nan, "HiGHS", 0.0, 3.0), None)


def test_a_whole_solve_that_finds_nothing_in_time_reports_the_greedy_plan(monkeypatch):
    model = build_model(two_buckets(max_configs_per_workload=1))
    monkeypatch.setattr(decomposition, "open_solver", _NothingFound)
    outcome = decomposition.solve_whole(model, OPTIONS, Deadline(30.0))
    assert outcome.status == "time_limit" and outcome.bound == 3.0
    whole_and_feasible(model, model.values)
    assert outcome.objective == pytest.approx(float(model.cost @ model.values))


def test_a_whole_milp_not_run_keeps_the_linked_solves_plan_and_bound(monkeypatch):
    # a family left out of the periods (a budget) sends the linked plan to the whole MILP as
    # its start; when that MILP finds nothing, the plan and the LP bound are kept
    problem = make_problem([[4.0, 1.0], [1.0, 4.0]], [[2.0, 2.0], [3.0, 1.0]],
                           {**ON_DEMAND, ("g0", "reserved_1y"): 0.6},
                           budget_usd_per_month=1e6)
    model = build_model(problem)
    monkeypatch.setattr(decomposition, "WHOLE_MODEL_COLUMNS", 0)

    def nothing_found(model, options, deadline, start=None, greedy=True):
        model.values = None
        return _NothingFound().solve().outcome

    monkeypatch.setattr(decomposition, "solve_whole", nothing_found)
    outcome = decomposition.solve_fleet(model, OPTIONS, Deadline(30.0))
    assert outcome.has_solution
    whole_and_feasible(model, model.values)
    assert outcome.objective == pytest.approx(float(model.cost @ model.values))
    assert math.isfinite(outcome.bound) and outcome.bound <= outcome.objective + 1e-6


def test_a_replanning_problem_has_a_rounded_up_lp_within_its_monthly_cap():
    # today's 2 committed GPUs and at most 2 new GPUs a month: the LP keeps a fraction of a
    # committed replica, rounded down like spot's, and the rounding holds the month's cap
    # (it used to keep the fraction and need the LP solved again with the cap tightened)
    model = build_model(replanning_tiny([3.5, 1.2, 4.7], max_new=2.0))
    values = lp_values(model)
    for plan in (rounded_up(model, values), rounded_within_limits(model, values, OPTIONS, 5.0)):
        whole_and_feasible(model, plan)


def test_the_greedy_plan_avoids_a_gpu_that_arrives_after_a_lead_time():
    # c0 on g0 is cheapest, but g0 cannot be had before month 1: the plan runs c1 instead
    problem = make_problem([[4.0], [1.0]], [[2.0], [2.0]], ON_DEMAND, horizon_months=2.0)
    problem = problem.with_changes(
        periods=problem.periods.assign(month=[0, 1], month_weight=1.0),
        lead_times=pd.DataFrame({"gpu": ["g0"], "pricing_type": ["*"], "start_month": [1],
                                 "max_new_gpus_per_month": [math.nan]}))
    model = build_model(problem)
    plan = greedy_plan(model, OPTIONS, 5.0)
    whole_and_feasible(model, plan)
    assert routes_used(model, plan) == {"c1"}


@st.composite
def fallback_instances(draw):
    """Brute-force-sized problems with one family that has columns of its own, or none."""
    problem = draw(instances(n_periods=st.integers(1, 3)))
    family = draw(st.sampled_from(["none", "configs", "fixed", "budget"]))
    if family == "configs":
        return problem.with_changes(max_configs_per_workload=1)
    if family == "fixed":
        return problem.with_changes(config_fixed_usd_per_month=draw(st.sampled_from([1.0, 50.0])))
    if family == "budget":
        return problem.with_changes(budget_usd_per_month=draw(st.sampled_from([5.0, 50.0])))
    return problem


@settings(max_examples=30, deadline=None)
@given(fallback_instances())
@example(make_problem([[2.0]], [[0.0]], {("g0", "on_demand"): 1.0}))  # nothing to route
def test_a_fallback_plan_is_whole_feasible_and_never_below_the_optimum(problem):
    model = build_model(problem)
    exact = open_solver(model.program, model.cost, OPTIONS).solve(time_limit_s=30, mip_gap=0.0)
    lp = open_solver(model.program, model.cost, OPTIONS).solve(time_limit_s=30, mip_gap=0.0,
                                                               relax=True)
    plans = [greedy_plan(model, OPTIONS, 5.0)]
    if lp.values is not None:
        plans.append(rounded_within_limits(model, lp.values, OPTIONS, 5.0))
    for plan in plans:
        if plan is None:
            continue
        whole_and_feasible(model, plan)
        assert exact.outcome.status == "optimal"  # a fallback plan proves the problem feasible
        assert float(model.cost @ plan) >= exact.outcome.objective - 1e-6 * max(
            1.0, abs(exact.outcome.objective))
