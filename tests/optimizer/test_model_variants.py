"""Variants of a built model: the program a variant makes equals the one a fresh build makes,
and what blocks a variant is named."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fleetplan.optimizer import cost_cover
from fleetplan.optimizer.decomposition import solve_fleet
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.model_variants import CoverBuilds, ModelVariation, variation_blocker
from fleetplan.optimizer.solution_tables import assemble_plan
from fleetplan.optimizer.solver import SolveOptions

from .instances import make_problem, portfolio_problem


def redundant_problem():
    """Three periods, two buckets, N+1, nodes of 2 GPUs, a cap, reserved, on-demand and spot."""
    return make_problem(
        [[4.0, 2.0], [9.0, 5.0], [3.0, 0.0]], [[5.0, 3.0], [11.0, 0.5], [2.0, 7.0]],
        {("g0", "on_demand"): 2.0, ("g0", "spot"): 0.9, ("g1", "on_demand"): 4.5,
         ("g1", "reserved_1y"): 3.0, ("g2", "on_demand"): 1.1},
        gpu=["g0", "g1", "g2"], tp=[1, 2, 1], gpus_per_node={"g1": 2}, max_gpus={"g2": 6},
        redundancy_k=1, spot_max_share=0.5)


def changed(problem, demand_factors, price_factors):
    """``problem`` with each demand row and each GPU type's prices scaled."""
    demand = problem.demand.assign(req_s=problem.demand["req_s"] * demand_factors)
    factor = problem.offers["gpu"].map(price_factors).fillna(1.0)
    offers = problem.offers.assign(usd_per_gpu_hour=problem.offers["usd_per_gpu_hour"] * factor)
    return problem.with_changes(demand=demand, offers=offers)


def assert_same_program(varied, fresh):
    a, b = varied.program, fresh.program
    assert (a.n_rows, a.n_cols) == (b.n_rows, b.n_cols)
    assert np.array_equal(a.matrix.indptr, b.matrix.indptr)
    assert np.array_equal(a.matrix.indices, b.matrix.indices)
    np.testing.assert_allclose(a.matrix.data, b.matrix.data, rtol=1e-12)
    for name in ("row_lower", "row_upper", "col_lower", "col_upper"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-12)
    assert np.array_equal(a.integer, b.integer)
    np.testing.assert_allclose(varied.cost, fresh.cost, rtol=1e-12)


@pytest.mark.parametrize("make", [redundant_problem, lambda: portfolio_problem(2, 2, 3)],
                         ids=["redundant", "portfolio"])
def test_a_variant_is_the_program_a_fresh_build_makes(make):
    problem = make()
    rng = np.random.default_rng(5)
    factors = rng.uniform(0.3, 3.0, len(problem.demand))
    prices = {gpu: f for gpu, f in zip(sorted(problem.offers["gpu"].unique()), (0.5, 1.7, 1.2))}
    other = changed(problem, factors, prices)
    base = build_model(problem, cost_cover=False)
    assert variation_blocker(base) == ""
    variation = ModelVariation.of(base)
    assert variation.fits(other)
    varied = variation.apply(other)
    assert_same_program(varied, build_model(other, cost_cover=False))
    # the pool-cover cut moved with the demand: a variant that kept the old rows would differ
    assert not np.allclose(varied.program.row_lower, base.program.row_lower)
    assert base.values is None and varied.problem is other


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.05, 20.0), min_size=6, max_size=6), st.floats(0.1, 10.0))
@example([1.0] * 6, 1.0)
def test_any_positive_demand_and_price_give_the_fresh_program(factors, price):
    problem = redundant_problem()
    other = changed(problem, np.array(factors), {"g1": price})
    variation = ModelVariation.of(build_model(problem, cost_cover=False))
    assert_same_program(variation.apply(other), build_model(other, cost_cover=False))


def test_the_headline_figures_are_the_assembled_plans():
    problem = redundant_problem()
    other = changed(problem, np.linspace(0.5, 2.0, len(problem.demand)), {"g0": 0.7})
    variation = ModelVariation.of(build_model(problem, cost_cover=False))
    varied = variation.apply(other)
    outcome = solve_fleet(varied, SolveOptions(20, 1e-6))
    figures = variation.headline(varied)
    plan = assemble_plan(varied, outcome, outcome.status)
    assert figures["feasible"]
    assert figures["usd_per_month"] == pytest.approx(plan.usd_per_month, rel=1e-12)
    workloads = plan.workloads.set_index("workload")
    pd.testing.assert_series_equal(figures["tokens_per_month"], workloads["tokens_per_month"],
                                   check_names=False, rtol=1e-12)
    pd.testing.assert_series_equal(figures["served_fraction"], workloads["served_fraction"],
                                   check_names=False, rtol=1e-12)
    peaks = plan.costs_by_gpu.set_index("gpu")["gpus_peak"]
    pd.testing.assert_series_equal(figures["gpus_peak"], peaks, check_names=False,
                                   check_index_type=False)
    varied.values = varied.values + 0.5  # a broken solution is caught by the program check
    assert not variation.headline(varied)["feasible"]


def test_a_variant_takes_other_availability_caps():
    problem = redundant_problem()  # g2 capped at 6 GPUs
    other = changed(problem, np.full(len(problem.demand), 1.3), {}).with_changes(
        gpus=problem.gpus.assign(max_gpus=problem.gpus["max_gpus"] * 2))
    variation = ModelVariation.of(build_model(problem))
    assert variation.fits(other)
    assert_same_program(variation.apply(other), build_model(other))
    # another GPU type capped, or the cap lifted, is another structure (other rows, other swaps)
    for caps in ([np.nan, 8.0, 6.0], [np.nan, np.nan, np.nan]):
        assert not variation.fits(problem.with_changes(gpus=problem.gpus.assign(max_gpus=caps)))


def test_a_variant_must_keep_everything_but_demand_and_prices():
    problem = redundant_problem()
    variation = ModelVariation.of(build_model(problem, cost_cover=False))
    zero = np.ones(len(problem.demand))
    zero[0] = 0.0
    assert not variation.fits(changed(problem, zero, {}))  # a bucket without requests
    fewer = problem.with_changes(offers=problem.offers[problem.offers["pricing_type"] != "spot"])
    assert not variation.fits(fewer)
    # anything else is compared whole: a spare fewer, a slower replica, another utilization
    assert not variation.fits(problem.with_changes(
        workloads=problem.workloads.assign(redundancy_k=0)))
    slower = problem.candidates.assign(req_s_per_replica=problem.candidates["req_s_per_replica"] * 0.9)
    assert not variation.fits(problem.with_changes(candidates=slower))
    assert not variation.fits(problem.with_changes(target_utilization=0.7))
    assert variation.fits(problem.with_changes(notes=["a note changes no number"]))


@pytest.mark.parametrize("make", [redundant_problem, lambda: portfolio_problem(2, 2, 3)],
                         ids=["redundant", "portfolio"])
def test_a_variant_with_the_cost_cover_cut_is_the_fresh_build(make):
    # several periods: the model gets the cut, whose bounds are solved again (each small model
    # a variant too) and whose entries follow each GPU's lowest price
    problem = make()
    other = changed(problem, np.random.default_rng(7).uniform(0.4, 2.5, len(problem.demand)),
                    {"g0": 0.6, "g1": 1.4})
    builds = CoverBuilds()
    base = build_model(problem, cover_build=builds)
    assert (base.constraint_table()["family"] == "cost_cover").any()
    assert variation_blocker(base) == ""
    built = len(builds.variations)
    assert built == 1  # one model holds every small MILP, not one per pool or period
    varied = ModelVariation.of(base).apply(other, builds)
    assert len(builds.variations) == built  # the small models were varied, not built again
    fresh = build_model(other)
    assert_same_program(varied, fresh)
    cover = fresh.constraint_table().query("family == 'cost_cover'")["row"].to_numpy()
    assert not np.allclose(varied.program.row_lower[cover], base.program.row_lower[cover])


def test_a_cut_with_other_rows_is_not_varied(monkeypatch):
    # a problem whose cut would have other rows (here none: more distinct pool demands than the
    # cut solves) is built, not varied
    problem = redundant_problem()
    variation = ModelVariation.of(build_model(problem))
    other = changed(problem, np.full(len(problem.demand), 1.5), {})
    assert variation.apply(other) is not None
    monkeypatch.setattr(cost_cover, "MAX_SOLVES", 2)
    assert variation.fits(other)
    assert variation.apply(other) is None


def test_what_blocks_a_variant_is_named():
    problem = redundant_problem()
    assert "elastic" in variation_blocker(build_model(problem, elastic=True))
    budget = problem.with_changes(budget_usd_per_month=1e6)
    assert "budget" in variation_blocker(build_model(budget, cost_cover=False))
