"""Re-planning from today's fleet: tiny instances checked against a brute force over every
whole plan, written with numpy alone (no MILP code).

Instance: one workload of d[m] requests/s in month m (one period per month of 1 hour), two
GPU types each serving 1 request/s per GPU: ``ga`` (committed GPUs that exist until their end,
on demand at $2, bought at $1.2 from a start month) and ``gb`` (on demand at $3).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fleetplan.optimizer.stay_the_course as stay_the_course_module
from fleetplan.errors import InvalidValueError
from fleetplan.optimizer.constraint_families import FAMILIES
from fleetplan.optimizer.current_fleet import LIFTED_GPUS, diagnose_existing
from fleetplan.optimizer.fleet_changes import changes_table, monthly_diff
from fleetplan.optimizer.fleet_problem import Problem, profile_periods
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.solver import SolveOptions
from fleetplan.optimizer.stay_the_course import UNPRICED, UNSERVABLE, stay_the_course
from tests.optimizer.test_commitment_options import never_built

EXACT = SolveOptions(time_limit_s=30, mip_gap=0.0)
PRICES = {("ga", "committed"): 0.0, ("ga", "on_demand"): 2.0, ("ga", "purchase"): 1.2,
          ("gb", "on_demand"): 3.0}
MOST = 3  # GPUs of one kind per month the brute force tries


def tiny(demand, *, committed=2, end=1, config="a1", start=0, max_new=math.nan, churn=None,
         least=None, owned=0) -> Problem:
    months = len(demand)
    existing = [{"gpu": "ga", "pricing_type": "committed", "config": config, "provider": "x",
                 "gpus": float(committed), "end_month": float(end), "usd_per_month": 10.0}]
    offers = dict(PRICES)
    if owned:
        offers[("ga", "owned")] = 0.5
        existing.append({"gpu": "ga", "pricing_type": "owned", "config": "", "provider": "x",
                         "gpus": float(owned), "end_month": math.nan, "usd_per_month": math.nan})
    lead = pd.DataFrame({"gpu": ["ga"], "pricing_type": ["*"], "start_month": [start],
                         "max_new_gpus_per_month": [max_new]})
    return Problem(
        workloads=pd.DataFrame({"workload": ["w"], "pool": ["p"], "redundancy_k": [0]}),
        periods=profile_periods(1, months, 1.0, float(months)),
        demand=pd.DataFrame({"workload": "w", "bucket": 0, "period": np.arange(months),
                             "req_s": np.asarray(demand, dtype=float)}),
        configs=pd.DataFrame({"config": ["a1", "b1"], "pool": "p", "gpu": ["ga", "gb"],
                              "tp": [1, 1]}),
        candidates=pd.DataFrame({"workload": "w", "bucket": 0, "config": ["a1", "b1"],
                                 "req_s_per_replica": [1.0, 1.0]}),
        offers=pd.DataFrame([(g, p, v, math.nan) for (g, p), v in offers.items()],
                            columns=["gpu", "pricing_type", "usd_per_gpu_hour", "max_gpus"]),
        gpus=pd.DataFrame({"gpu": ["ga", "gb"], "gpus_per_node": 1, "max_gpus": math.nan}),
        hours_per_month=1.0, horizon_months=float(months),
        existing=pd.DataFrame(existing),
        lead_times=lead if start or not math.isnan(max_new) else pd.DataFrame(),
        max_changes_per_month=churn, min_committed_gpus=least)


def brute_force(demand, **limits):
    """Least cost over every plan: per month committed GPUs used c <= what exists, on-demand
    ga a and gb b, and purchased ga P held from the start month on; inf when none is valid.
    ``limits``: those of :func:`least_given_purchase`."""
    return min(least_given_purchase(demand, bought, **limits) for bought in range(MOST + 1))


def least_given_purchase(demand, bought, *, committed=2, end=1, known=True, start=0,
                         max_new=math.inf, churn=math.inf, least=0.0):
    """Least cost over every plan that buys ``bought`` ga GPUs (held from the start month on);
    inf when none is valid."""
    months = len(demand)
    there = np.array([committed if m < end else 0 for m in range(months)])
    options = [np.array(list(itertools.product(range(there[m] + 1),
                                               range(MOST + 1 if m >= start else 1),
                                               range(MOST + 1)))) for m in range(months)]
    choice = np.array(list(itertools.product(*(range(len(o)) for o in options))))
    plans = np.stack([options[m][choice[:, m]] for m in range(months)], axis=1)
    c, a, b = (plans[:, :, k] for k in range(3))  # plans x months
    p = np.where(np.arange(months) >= start, bought, 0)[None, :].repeat(len(plans), 0)
    ok = (c + a + b + p >= np.asarray(demand) - 1e-9).all(1)
    new = np.diff(np.concatenate([np.zeros((len(plans), 1)), a + p], axis=1), axis=1)
    ok &= (new <= max_new).all(1)
    ok &= (there + p >= least).all(1)
    ok &= (_changes(c, a, b, p, there, committed, known) <= churn + _ending(there)).all(1)
    cost = (2.0 * a + 3.0 * b + 1.2 * p).sum(1)
    return float(cost[ok].min()) if ok.any() else math.inf


def _ending(there):
    """GPUs whose commitment ends in each month (released by the contract, not the plan)."""
    return np.maximum(-np.diff(np.concatenate([[there[0]], there])), 0)


def _pair_changes(parts, before):
    """(sum |delta| + |sum delta|) / 2 per month for one (gpu, pricing) pair."""
    stacked = np.stack(parts, axis=2)
    previous = np.concatenate([np.broadcast_to(before, (len(stacked), 1, len(before))),
                               stacked[:, :-1]], axis=1)
    delta = stacked - previous
    return (np.abs(delta).sum(2) + np.abs(delta.sum(2))) / 2


def _changes(c, a, b, p, there, committed, known):
    """GPUs bought + released + migrated per month, today = the committed GPUs on a1 (or,
    not known, wherever month 0 puts them)."""
    held = _pair_changes([c, there[None, :] - c], np.array([committed, 0.0]))
    if not known:  # placing GPUs of unknown use in month 0 is no change
        held[:, 0] = np.abs(there[0] - committed)
    return held + _pair_changes([a], np.zeros(1)) + _pair_changes([b], np.zeros(1)) + \
        _pair_changes([p], np.zeros(1))


def solved(problem):
    plan = optimize_problem(problem, EXACT)
    assert plan.status == "optimal", plan.messages
    return plan


@pytest.mark.parametrize("demand", [[2, 4, 1], [1, 2, 3]])
def test_sunk_commitments_are_used_before_anything_is_bought(demand):
    plan = solved(tiny(demand))
    assert plan.objective_usd == pytest.approx(brute_force(demand))
    by_month = plan.fleet_by_period.groupby(["month", "pricing_type"])["gpus"].sum().unstack(
        fill_value=0.0)
    for month, row in by_month.iterrows():
        if row.get("on_demand", 0.0) > 0 and month < 1:  # (a): nothing rented while it has room
            assert row.get("committed", 0.0) == 2


def test_nothing_is_released_before_its_end_date():
    plan = solved(tiny([2, 1, 3], end=2))
    committed = plan.changes[plan.changes["pricing_type"] == "committed"]
    held = committed.groupby("month")["gpus"].sum().reindex(range(3), fill_value=0.0)
    assert held.tolist() == [2.0, 2.0, 0.0]  # (b): held in full until month 2, gone from it
    assert committed.loc[committed["month"] < 2, "removed"].sum() == \
        committed.loc[committed["month"] < 2, "added"].sum()  # only moved to or from idle


@pytest.mark.parametrize(("start", "max_new"), [(2, math.nan), (1, 1.0), (0, 2.0)])
def test_lead_times_hold_in_every_month(start, max_new):
    demand = [3, 4, 4]
    plan = solved(tiny(demand, end=3, committed=1, start=start, max_new=max_new))
    cap = math.inf if math.isnan(max_new) else max_new
    assert plan.objective_usd == pytest.approx(brute_force(demand, end=3, committed=1,
                                                            start=start, max_new=cap))
    new = plan.fleet_by_period[(plan.fleet_by_period["gpu"] == "ga")
                               & (plan.fleet_by_period["pricing_type"] != "committed")]
    assert (new["month"] >= start).all()  # (c)
    held = plan.changes[(plan.changes["gpu"] == "ga")
                        & (plan.changes["pricing_type"] != "committed")]
    added = held.groupby("month")["gpus"].sum().reindex(range(3), fill_value=0.0).diff()
    assert (added.fillna(0.0) <= cap + 1e-9).all()


@pytest.mark.parametrize(("demand", "limit", "known"), [([2, 4, 1], 2, True),
                                                       ([2, 4, 1], 2, False),
                                                       ([0, 3, 0], 2, True)])
def test_churn_limits_bind_and_agree_with_the_brute_force(demand, limit, known):
    free = brute_force(demand, known=known)
    limited = brute_force(demand, known=known, churn=limit)
    assert free < limited < math.inf  # (e): the limit binds on this instance
    plan = solved(tiny(demand, churn=limit, config="a1" if known else ""))
    assert plan.objective_usd == pytest.approx(limited)
    diff = monthly_diff(plan.changes)
    assert (diff["changes"] <= limit + np.array([0, 2, 0]) + 1e-9).all()


def test_minimum_commitment_buys_committed_capacity_and_agrees_with_the_brute_force():
    demand = [1, 1, 1]
    plan = solved(tiny(demand, least=2))
    assert plan.objective_usd == pytest.approx(brute_force(demand, least=2.0))
    assert set(plan.fleet_by_period.loc[plan.fleet_by_period["month"] >= 1, "pricing_type"]) \
        == {"purchase"}


def test_every_replanning_family_builds_rows():
    model = build_model(tiny([2, 4, 1], start=1, max_new=2.0, churn=4, least=1))
    built = set(model.constraint_table()["family"])
    assert {"existing", "lead_time", "churn", "min_committed"} <= built
    assert {f.name for f in FAMILIES} >= built


def test_stay_the_course_keeps_the_fleet_and_rents_the_gap():
    problem = tiny([2, 4, 1], owned=1)
    plan = solved(problem)
    stay = stay_the_course(problem, plan, EXACT)
    # kept: 2 committed (sunk $10 x 1 month) in month 0, the owned GPU all 3 months at $0.5,
    # the rest on demand at $2: months 1 and 2 need 3 and 0 more
    assert stay["sunk_usd_total"] == pytest.approx(10.0)
    assert stay["stay_usd_total"] == pytest.approx(10.0 + 1.5 + 2.0 * 3)
    assert stay["plan_usd_total"] == pytest.approx(plan.objective_usd + 10.0)
    assert stay["saving_usd_total"] >= -1e-9


def test_churn_limit_with_hourly_periods_is_an_error():
    problem = tiny([1, 1], churn=2)
    hourly = profile_periods(2, 2, 1.0, 2.0)
    demand = pd.DataFrame({"workload": "w", "bucket": 0, "period": hourly["period"],
                           "req_s": 1.0})
    with pytest.raises(InvalidValueError, match="needs one period per month"):
        build_model(problem.with_changes(periods=hourly, demand=demand))


@settings(max_examples=25)
@given(st.lists(st.lists(st.integers(0, 4), min_size=3, max_size=3), min_size=2, max_size=4))
def test_the_monthly_diff_accounts_for_every_gpu(held):
    """Per month: held after = held before + bought - released; each change counted once."""
    problem = tiny([1] * len(held))
    configs = ["a1", "b1", "(idle)"]
    rows = pd.DataFrame([{"gpu": "ga", "pricing_type": "on_demand", "config": c, "month": m,
                          "gpus": float(n)} for m, counts in enumerate(held)
                         for c, n in zip(configs, counts, strict=True)])
    diff = monthly_diff(changes_table(problem.with_changes(existing=pd.DataFrame()), rows))
    totals = [0.0] + [float(sum(counts)) for counts in held]
    for month, row in diff.set_index("month").iterrows():
        assert row["gpus"] == totals[month + 1]
        assert row["bought"] - row["released"] == pytest.approx(totals[month + 1] - totals[month])
        moved = sum(abs(b - a) for a, b in zip(([0] * 3 if month == 0 else held[month - 1]),
                                              held[month], strict=True))
        assert row["changes"] == pytest.approx((moved + abs(totals[month + 1] - totals[month])) / 2)
        assert row["changes"] >= abs(totals[month + 1] - totals[month])


def test_too_few_of_todays_gpus_are_named_when_nothing_else_may_serve():
    # only today's 2 committed GPUs may serve 3 req/s: the plan is short, and says where
    problem = tiny([3.0, 1.0], end=2)
    problem = problem.with_changes(offers=problem.offers[
        problem.offers["pricing_type"] == "committed"].reset_index(drop=True))
    plan = optimize_problem(problem, SolveOptions(time_limit_s=20, mip_gap=0.0))
    assert plan.status == "infeasible"
    assert ("would run 3 committed ga in month 0 but today's fleet has 2 there and no other "
            "pricing type may add them") in " ".join(plan.messages)


def test_the_need_for_todays_gpus_is_counted_from_replicas_not_from_free_nodes():
    # committed GPUs cost nothing, so the plan without their limit may hold any number of them;
    # the diagnosis counts the GPUs its replicas run, in whole nodes (2-GPU nodes here)
    problem = tiny([3.0])
    problem = problem.with_changes(gpus=problem.gpus.assign(gpus_per_node=2))
    committed = {"gpu": "ga", "pricing_type": "committed", "period": 0}
    solution = {"replicas": pd.DataFrame([{**committed, "config": "a1", "gpus": 3.0}]),
                "nodes": pd.DataFrame([{**committed, "gpus": LIFTED_GPUS}])}
    assert diagnose_existing(problem, solution) == [
        ("would run 4 committed ga in month 0 but today's fleet has 2 there and no other pricing "
         "type may add them")]


def test_a_stay_the_course_comparison_out_of_time_is_unpriced_not_unservable():
    # it once said "cannot serve the demand" whenever its solve found nothing in time
    problem = tiny([2, 4, 1], owned=1)
    plan = optimize_problem(problem, EXACT)
    stay = stay_the_course(problem, plan, SolveOptions(time_limit_s=1e-9, mip_gap=0.0))
    assert stay["status"] == UNPRICED and math.isnan(stay["stay_usd_total"])
    assert stay_the_course(problem, plan, EXACT)["status"] == "optimal"


def test_a_stay_the_course_model_expected_to_outlast_its_time_is_not_built(monkeypatch):
    # its model is the plan's own problem with today's fleet kept: as long to build
    problem = tiny([2, 4, 1], owned=1)
    plan = optimize_problem(problem, EXACT)
    monkeypatch.setattr(stay_the_course_module, "build_model", never_built(build_model))
    plan.model_build_s = 60.0
    stay = stay_the_course(problem, plan, EXACT)
    assert stay["status"] == UNPRICED and math.isnan(stay["stay_usd_total"])


def test_a_kept_fleet_that_cannot_serve_the_demand_is_unservable():
    # on-demand capped at 1 GPU of each type: today's 2 committed GPUs and 2 rented serve 4 of
    # the 5 requests/s; the plan buys GPUs, which staying the course never does
    problem = tiny([5])
    on_demand = problem.offers["pricing_type"] == "on_demand"
    problem = problem.with_changes(offers=problem.offers.assign(
        max_gpus=np.where(on_demand, 1.0, math.nan)))
    plan = optimize_problem(problem, EXACT)
    assert plan.feasible
    stay = stay_the_course(problem, plan, EXACT)
    assert stay["status"] == UNSERVABLE and math.isnan(stay["saving_usd_total"])
