"""A plan moved to other reserved counts (``reserved_candidates.shifted_plan``), the warm start
every reserved choice is priced from: it keeps each period's fleet, so it stays a whole plan
of the model, and costs what the reserved replicas moved to renting (or from it) cost."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.period_solves import Deadline, PeriodPrograms
from fleetplan.optimizer.reserved_candidates import reserved_rows, shifted_plan
from fleetplan.optimizer.reserved_first import ReservedFirst
from fleetplan.optimizer.rounding import is_whole
from fleetplan.optimizer.solver import SolveOptions, open_solver
from tests.optimizer.instances import make_problem, portfolio_problem

EXACT = SolveOptions(time_limit_s=60, mip_gap=1e-9, threads=1)


@pytest.fixture(scope="module")
def planned():
    """A 6-hour, two-GPU portfolio with reserved pricing, its model and its optimal plan,
    which reserves replicas of some configurations and rents others."""
    model = build_model(portfolio_problem(n_models=1, n_gpus=2, n_periods=6))
    result = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=60, mip_gap=0.0)
    assert result.outcome.status == "optimal"
    counts = result.values[reserved_rows(model)["col"].to_numpy()]
    assert counts.sum() >= 1  # the instance reserves
    return model, result.values


def _per_period_replicas(model, values):
    flexible = model.replicas[model.replicas["period"] >= 0]
    reserved = reserved_rows(model)
    held = flexible.assign(n=values[flexible["col"].to_numpy()]).groupby(
        ["config", "period"])["n"].sum()
    owned = reserved.assign(n=values[reserved["col"].to_numpy()]).groupby("config")["n"].sum()
    return held.add(owned.reindex(held.index.get_level_values("config")).to_numpy())


def _one_replica_cost(model, config, pricing_type, period):
    """The cost of one replica of ``config`` at ``pricing_type`` in ``period`` (-1: the
    horizon's reserved) [USD]."""
    replica = model.replicas[(model.replicas["config"] == config)
                             & (model.replicas["pricing_type"] == pricing_type)
                             & (model.replicas["period"] == period)].iloc[0]
    node = model.nodes[(model.nodes["gpu"] == replica["gpu"])
                       & (model.nodes["pricing_type"] == pricing_type)
                       & (model.nodes["period"] == period)].iloc[0]
    return float(replica["tp"] * model.cost[int(node["col"])])


def test_one_reserved_replica_fewer_is_rented_on_demand_in_every_period(planned):
    model, values = planned
    rows = reserved_rows(model)
    counts = np.round(values[rows["col"].to_numpy()])
    row = int(np.flatnonzero(counts > 0)[0])
    fewer = counts.copy()
    fewer[row] -= 1
    shifted = shifted_plan(model, values, fewer)
    assert model.program.violation(shifted) <= 1e-6 and is_whole(model.program, shifted)
    np.testing.assert_array_equal(shifted[rows["col"].to_numpy()], fewer)
    # every period keeps its replicas of every configuration
    pd_before, pd_after = (_per_period_replicas(model, v) for v in (values, shifted))
    np.testing.assert_allclose(pd_after.to_numpy(), pd_before.to_numpy(), atol=1e-6)
    config = rows["config"].iloc[row]
    rented = sum(_one_replica_cost(model, config, "on_demand", t)
                 for t in model.problem.periods["period"])
    saved = _one_replica_cost(model, config, rows["pricing_type"].iloc[row], -1)
    assert float(model.cost @ shifted) == pytest.approx(
        float(model.cost @ values) + rented - saved, rel=1e-6)  # the solver's round-off


def test_one_reserved_replica_more_returns_a_rented_one_where_a_period_has_one(planned):
    model, values = planned
    rows = reserved_rows(model)
    counts = np.round(values[rows["col"].to_numpy()])
    before = _per_period_replicas(model, values)
    rented = before.sub(before.groupby(level="config").transform("min"))  # beyond the least
    config = rented[rented > 0].index.get_level_values("config")[0]
    row = int(np.flatnonzero(rows["config"].to_numpy() == config)[0])
    more = counts.copy()
    more[row] += 1
    shifted = shifted_plan(model, values, more)
    assert model.program.violation(shifted) <= 1e-6 and is_whole(model.program, shifted)
    after = _per_period_replicas(model, shifted)
    # a period that rented one of that configuration returns it; one that rented none holds
    # one replica more, the reserved one
    flexible = model.replicas[(model.replicas["period"] >= 0)
                              & (model.replicas["config"] == config)]
    rents = flexible.assign(n=values[flexible["col"].to_numpy()]).groupby("period")["n"].sum()
    extra = (after - before).xs(config, level="config")
    np.testing.assert_allclose(extra.to_numpy(), (rents.reindex(extra.index) < 0.5) * 1.0,
                               atol=1e-6)
    assert float(model.cost @ shifted) < float(model.cost @ values) + _one_replica_cost(
        model, config, rows["pricing_type"].iloc[row], -1)


@given(st.lists(st.integers(-2, 2), min_size=1, max_size=12))
@example([-2, 2, -1, 1])
@example([0])
def test_any_reserved_counts_keep_a_whole_plan_of_the_model(planned, steps):
    model, values = planned
    rows = reserved_rows(model)
    counts = np.round(values[rows["col"].to_numpy()])
    change = np.resize(np.asarray(steps, dtype=float), len(counts))
    target = np.maximum(counts + change, 0.0)
    shifted = shifted_plan(model, values, target)
    assert model.program.violation(shifted) <= 1e-6 and is_whole(model.program, shifted)
    np.testing.assert_array_equal(shifted[rows["col"].to_numpy()], target)
    if np.array_equal(target, counts):  # the same plan, its reserved counts made whole
        np.testing.assert_allclose(shifted, values, atol=1e-6)


def test_a_pass_with_closed_columns_leaves_the_floor_unknown(planned):
    # the periods' bounds with columns closed hold only for the closed periods: the year
    # portfolio's closed pass gave a floor above a plan with the same reserved counts
    model, values = planned
    counts = np.round(values[reserved_rows(model)["col"].to_numpy()])
    programs = PeriodPrograms.of(model)
    options = SolveOptions(time_limit_s=60, mip_gap=0.01, threads=1)
    closed = ReservedFirst(model, programs, options, Deadline(60))
    closed.periods_with(counts, {0: np.array([], dtype=np.int64)}, 60)
    assert closed.best is not None and math.isnan(closed.best_floor)
    open_ = ReservedFirst(model, programs, options, Deadline(60))
    open_.periods_with(counts, None, 60)
    assert open_.best_floor <= open_.best_cost + 1e-6


def test_a_configuration_offered_reserved_only_keeps_its_periods_as_they_are():
    # hard scenario 47: a reserved-only configuration has no rented replica to give or take
    # (an empty table of them once crashed the move)
    model = build_model(make_problem([[4.0], [2.0]], [[3.0], [5.0]],
                                     {("g0", "reserved_1y"): 0.6, ("g1", "on_demand"): 1.0,
                                      ("g1", "reserved_1y"): 0.62}))
    result = open_solver(model.program, model.cost, EXACT).solve(time_limit_s=30, mip_gap=0.0)
    rows = reserved_rows(model)
    counts = np.round(result.values[rows["col"].to_numpy()])
    only_reserved = int(np.flatnonzero(rows["gpu"].to_numpy() == "g0")[0])
    assert counts[only_reserved] >= 1
    fewer = counts.copy()
    fewer[only_reserved] -= 1
    shifted = shifted_plan(model, result.values, fewer)
    np.testing.assert_array_equal(shifted[rows["col"].to_numpy()], fewer)
    flexible = model.replicas.loc[model.replicas["period"] >= 0, "col"].to_numpy()
    np.testing.assert_array_equal(shifted[flexible], result.values[flexible])
