"""Binding limits relaxed on the built model (``relaxed_variants``): each variant is solved to the
optimum a model built anew from the relaxed problem reaches, from the base plan, and the base
model is left as it was."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.optimizer import decomposition, marginal_values, resolve_queue
from fleetplan.optimizer.constraint_families import FAMILY
from fleetplan.optimizer.decomposition import solve_fleet, solve_whole
from fleetplan.optimizer.marginal_values import BasePlan
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.optimization import WhatIfOptions, optimize_problem
from fleetplan.optimizer.period_solves import Deadline
from fleetplan.optimizer.relaxed_variants import relaxed_variant
from fleetplan.optimizer.reserved_first import ReservedFirst
from fleetplan.optimizer.solver import SolveOptions
from tests.optimizer.instances import make_problem
from tests.optimizer.test_replanning import tiny
from tests.optimizer.test_supply import ON_SITE, sited, with_api

EXACT = SolveOptions(time_limit_s=30, mip_gap=0.0)


def capped(**scalars):
    """g0 is cheaper per request but capped at 2 GPUs; g1 takes the rest."""
    return make_problem([[10.0], [10.0]], [[40.0], [25.0]],
                        {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 2.0},
                        max_gpus={"g0": 2}, horizon_months=1.0, **scalars)


def offer_capped():
    """g0's spot offer is capped at 1 GPU; on demand it costs more than g1."""
    problem = make_problem([[10.0], [10.0]], [[30.0], [30.0]],
                           {("g0", "spot"): 0.5, ("g0", "on_demand"): 3.0,
                            ("g1", "on_demand"): 2.0}, horizon_months=1.0)
    offers = problem.offers.copy()
    offers.loc[(offers["gpu"] == "g0") & (offers["pricing_type"] == "spot"), "max_gpus"] = 1.0
    return problem.with_changes(offers=offers)


def spared(k: int):
    """N+k on three configurations of different sizes over two periods (so the cost-cover and
    pool-cover cuts are both built)."""
    return make_problem([[10.0], [25.0], [4.0]], [[38.0], [12.0]],
                        {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 2.2,
                         ("g2", "on_demand"): 0.45}, redundancy_k=k, horizon_months=1.0)


def budgeted():
    """Month 0 is idle, month 1 busy: on demand is cheapest in total, but a budget on month 1
    forces part of it onto reserved capacity, paid in both months."""
    problem = make_problem([[10.0]], [[0.0], [40.0]],
                           {("g0", "on_demand"): 1.0, ("g0", "reserved_1y"): 0.62},
                           hours=[4380.0, 4380.0], horizon_months=12.0)
    periods = problem.periods.assign(month=[0, 1], month_weight=6.0)
    return problem.with_changes(periods=periods, budget_usd_per_month=2500.0)


def powered():
    """Owned GPUs at a 1 kW site (one fits), rented ones dearer (test_supply's instance)."""
    return sited(make_problem([[5.0]], [[9.0]], {("g0", ON_SITE): 1.0, ("g0", "on_demand"): 4.0},
                              horizon_months=1.0), kw=1.0)


def rate_limited():
    """An API limited to 1 req/s: 6.05 req/s need a second 5 req/s replica until the limit
    rises to 1.1 req/s."""
    return with_api(make_problem([[5.0]], [[6.05]], {("g0", "on_demand"): 1.0},
                                 horizon_months=1.0), 1e-5, max_requests_per_min=60.0)


CASES = {"availability": (capped, "g0"), "offer_cap": (offer_capped, "g0/spot"),
         "redundancy k=1": (lambda: spared(1), "w"), "redundancy k=2": (lambda: spared(2), "w"),
         "budget": (budgeted, "month 1"), "power": (powered, "hall"),
         "api_rate": (rate_limited, "api (requests)"),
         "min_committed": (lambda: tiny([1, 1, 1], least=2), "")}


def solved(problem):
    model = build_model(problem)
    outcome = solve_fleet(model, EXACT)
    assert outcome.status == "optimal"
    return model, outcome.objective


@pytest.mark.parametrize("case", list(CASES))
def test_a_variant_reaches_the_optimum_of_the_relaxed_model_built_anew(case):
    make, subject = CASES[case]
    family = case.split()[0]
    model, base_cost = solved(make())
    program = model.program
    before = (program.matrix.copy(), program.row_lower.copy(), program.row_upper.copy())
    relaxed = FAMILY[family].relax(model.problem, subject).problem
    variant = relaxed_variant(model, family, subject, relaxed)
    assert variant is not None and variant.problem is relaxed
    assert variant.program.violation(model.values) <= 1e-9  # the base plan is a valid start
    _, rebuilt_cost = solved(relaxed)
    assert rebuilt_cost < base_cost - 1e-6  # the limit binds: relaxing it saves money
    for start in (None, model.values):
        outcome = solve_fleet(variant, EXACT, start=start)
        assert outcome.status == "optimal"
        assert outcome.objective == pytest.approx(rebuilt_cost, rel=1e-9)
    # the base model is left as it was
    assert (program.matrix != before[0]).nnz == 0
    assert np.array_equal(program.row_lower, before[1])
    assert np.array_equal(program.row_upper, before[2])


def test_the_redundancy_variant_drops_only_its_pools_cost_cover_and_lowers_the_pool_cover():
    model, _ = solved(spared(2))
    relaxed = FAMILY["redundancy"].relax(model.problem, "w").problem
    variant = relaxed_variant(model, "redundancy", "w", relaxed)
    table = variant.constraint_table().set_index("row")
    base = model.constraint_table().set_index("row")
    cover = base.index[base["family"] == "pool_cover"]
    assert len(cover) == 2
    assert np.array_equal(variant.program.row_lower[cover], model.program.row_lower[cover] - 1)
    cost = base.index[base["family"] == "cost_cover"]
    assert len(cost) == 2 and np.all(np.isneginf(variant.program.row_lower[cost]))
    assert np.all(np.isneginf(table.loc[cost, "limit"]))


def test_families_without_a_change_new_rows_and_unsolved_models_get_no_variant():
    model = build_model(capped())
    relaxed = FAMILY["availability"].relax(model.problem, "g0").problem
    assert relaxed_variant(model, "availability", "g0", relaxed) is None  # not solved yet
    solve_fleet(model, EXACT)
    share = model.problem.with_changes(spot_max_share=0.5)
    assert relaxed_variant(model, "spot_share", "spot", share) is None  # built anew
    assert relaxed_variant(model, "simplicity", "w", model.problem) is None  # not varied
    gpus = model.problem.gpus.assign(max_gpus=[2.0, 5.0])  # a cap the model has no rows of
    new_cap = model.problem.with_changes(gpus=gpus)
    assert relaxed_variant(model, "availability", "g1", new_cap) is None


def test_binding_limits_are_priced_on_variants_with_the_savings_of_rebuilt_models(monkeypatch):
    problem = spared(1)
    built = []
    monkeypatch.setattr(resolve_queue, "build_model",
                        lambda *a, **k: built.append(a) or build_model(*a, **k))
    plan = optimize_problem(problem, EXACT, WhatIfOptions(enabled=True))
    row = plan.binding_constraints.set_index("family").loc["redundancy"]
    relaxed = optimize_problem(FAMILY["redundancy"].relax(problem, "w").problem, EXACT,
                               WhatIfOptions(enabled=False))
    assert row["saving_usd_per_month"] == pytest.approx(
        plan.usd_per_month - relaxed.usd_per_month, rel=1e-9)
    assert not built  # the re-solve changed the base model instead of building one


def test_marginal_values_begin_each_variant_from_the_base_plan(monkeypatch):
    model, base_cost = solved(capped())
    starts = []
    solve = resolve_queue.solve_fleet

    def solve_and_keep_start(model, options, deadline, start=None):
        starts.append(start)
        return solve(model, options, deadline, start=start)

    monkeypatch.setattr(resolve_queue, "solve_fleet", solve_and_keep_start)
    base = BasePlan(base_cost, 0.0, EXACT, Deadline(30))
    rows = marginal_values.marginal_values(model, base)
    assert list(rows["family"]) == ["availability"]
    assert len(starts) == 1 and np.array_equal(starts[0], model.values)
    _, relaxed_cost = solved(FAMILY["availability"].relax(model.problem, "g0").problem)
    # one more g0 replaces a g1 in each of the two periods (a one-month horizon)
    assert rows["saving_usd_per_month"].iloc[0] == pytest.approx(base_cost - relaxed_cost) == 2.0


def test_a_start_is_the_first_plan_of_either_linked_solve(monkeypatch):
    # reserved pricing links the periods: solved whole, the start goes to HiGHS; forced onto
    # the reserved-first solve, it is the first plan offered, before any period is solved
    problem = make_problem([[10.0]], [[30.0], [10.0], [20.0]],
                           {("g0", "on_demand"): 1.0, ("g0", "reserved_1y"): 0.6})
    model, _ = solved(problem)
    start = model.values.copy()
    given, offered = [], []
    solve, offer = solve_whole, ReservedFirst.offer
    monkeypatch.setattr(decomposition, "solve_whole",
                        lambda *a, start=None, **k: given.append(start) or solve(
                            *a, start=start, **k))
    monkeypatch.setattr(ReservedFirst, "offer",
                        lambda self, values, *a: offered.append(values) or offer(
                            self, values, *a))
    solve_fleet(build_model(problem), EXACT, start=start)
    assert len(given) == 1 and given[0] is start
    monkeypatch.setattr(decomposition, "WHOLE_MODEL_COLUMNS", 0)
    solve_fleet(build_model(problem), EXACT, start=start)
    assert offered[0] is start
