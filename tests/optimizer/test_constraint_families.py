"""The constraint-family table: every family the MILP builds has one entry, and the library's
plan check (each family's check) agrees with the independent test checker."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetplan.optimizer.constraint_families import (
    FAMILIES,
    FAMILY,
    priced_families,
    verify_plan,
)
from fleetplan.optimizer.decomposition import solve_fleet
from fleetplan.optimizer.family_rules import (
    diagnose_budget,
    diagnose_spot_share,
    lift_spot_share,
)
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.solution_tables import assemble_plan
from fleetplan.optimizer.solver import SolveOptions
from fleetplan.optimizer.stochastic_problem import with_demand_factors
from tests.optimizer.instances import make_problem
from tests.optimizer.plan_checker import check_plan
from tests.optimizer.test_bruteforce import instances
from tests.optimizer.test_supply import sited, with_api

EXACT = SolveOptions(time_limit_s=30, mip_gap=0.0)


def every_family_problem():
    """A problem that has a row of every family."""
    problem = make_problem([[10.0], [6.0]], [[20.0], [8.0]],
                           {("g0", "on_demand"): 1.0, ("g0", "spot"): 0.4,
                            ("g1", "on_demand"): 0.7, ("g1", "reserved_1y"): 0.5},
                           gpus_per_node={"g1": 2}, max_gpus={"g0": 6}, redundancy_k=1,
                           spot_max_share=0.5, budget_usd_per_month=100.0,
                           max_configs_per_workload=2, one_quant_per_model=True,
                           config_fixed_usd_per_month=5.0)
    problem = problem.with_changes(configs=problem.configs.assign(model="m", quant="bf16"))
    return sited(problem, 10.0, pricing="reserved_1y")


def test_every_family_built_has_one_entry_and_every_entry_builds():
    outcomes = pd.DataFrame({"scenario": ["low", "high"], "probability": [0.5, 0.5],
                             "factor": [0.8, 1.2]})
    model = build_model(with_demand_factors(every_family_problem(), outcomes, cvar_weight=1.0))
    built = list(dict.fromkeys(model.constraint_table()["family"]))
    with_builders = [f.name for f in FAMILIES if f.build is not None]
    # no offer caps, APIs or a fleet to re-plan here (tests/optimizer/test_replanning.py builds
    # those); the cost cover is built last, from small models of the others
    absent = ("offer_cap", "api_rate", "existing", "lead_time", "churn", "min_committed")
    assert built == [name for name in with_builders if name not in absent] + ["cost_cover"]
    assert len(FAMILY) == len(FAMILIES)
    # an API may serve the pool: no whole-replica cuts, a rate-limit row per period
    served = build_model(with_api(every_family_problem(), 1e-4, max_requests_per_min=60.0))
    families = set(served.constraint_table()["family"])
    assert "api_rate" in families and not families & {"cost_cover", "pool_cover"}


def test_priced_families_have_a_step_and_lifted_families_a_diagnosis():
    assert priced_families() == ("availability", "offer_cap", "spot_share", "redundancy",
                                  "simplicity", "budget", "power", "api_rate", "existing",
                                  "lead_time", "churn", "min_committed", "config_fixed")
    for family in FAMILIES:
        assert (family.relax is None) == (family.binding_step is None), family.name
        assert (family.lift is None) == (family.diagnose is None), family.name
        assert family.problem_fields, family.name


def test_lifts_exist_only_for_limits_the_problem_has():
    plain = make_problem([[10.0]], [[20.0]], {("g0", "on_demand"): 1.0})
    assert [f.name for f in FAMILIES if f.lift and f.lift(plain) is not None] == []
    limited = with_api(every_family_problem(), 1e-4, max_requests_per_min=60.0)
    assert [f.name for f in FAMILIES if f.lift and f.lift(limited) is not None] == [
        "availability", "spot_share", "simplicity", "budget", "power", "api_rate"]


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(n_periods=st.integers(1, 3)))
def test_library_check_passes_every_plan_the_checker_passes(problem):
    plan = optimize_problem(problem, EXACT)
    assert verify_plan(plan, problem) == check_plan(plan, problem) == []


@pytest.mark.parametrize(("break_plan", "family"), [
    (lambda plan: plan.fleet_by_period.assign(replicas=plan.fleet_by_period["replicas"] - 1),
     "capacity"),
    (lambda plan: plan.fleet_by_period.assign(replicas=plan.fleet_by_period["replicas"] + 0.5),
     "nodes"),
    (lambda plan: plan.fleet_by_period.assign(replicas=plan.fleet_by_period["replicas"] + 10),
     "availability"),
])
def test_each_broken_plan_is_named_by_its_family(break_plan, family):
    problem = make_problem([[10.0]], [[20.0]], {("g0", "on_demand"): 1.0},
                           max_gpus={"g0": 6})
    plan = optimize_problem(problem, EXACT)
    assert verify_plan(plan, problem) == []
    plan.fleet_by_period = break_plan(plan)
    messages = verify_plan(plan, problem)
    assert any(m.startswith(f"{family}: ") for m in messages), messages
    assert check_plan(plan, problem) != []


def test_unserved_demand_and_uneven_reserves_are_named():
    problem = make_problem([[10.0]], [[20.0], [10.0]],
                           {("g0", "on_demand"): 1.0, ("g0", "reserved_1y"): 0.4})
    plan = optimize_problem(problem, EXACT)
    assert verify_plan(plan, problem) == []
    plan.routing = plan.routing[plan.routing["period"] == 0]
    plan.fleet_by_period = plan.fleet_by_period[plan.fleet_by_period["period"] == 0]
    messages = verify_plan(plan, problem)
    assert any(m.startswith("demand: ") for m in messages)
    assert any(m.startswith("reserved_baseline: ") for m in messages)


@pytest.mark.parametrize(("share", "flagged"), [(5e-7, False), (1e-3, True)])
def test_a_share_within_the_solvers_tolerance_asks_for_no_spares(share, flagged):
    # eleven small replicas serve 10 req/s with N+1; the large configuration is left unused.
    # HiGHS may leave a share as small as its MIP tolerance on it while its "used" binary says
    # 0, so it keeps no spare: that is not routing. A real share of 1e-3 needs one.
    problem = make_problem([[100.0], [1.0]], [[10.0]],
                           {("g0", "on_demand"): 10.0, ("g1", "on_demand"): 1.5}, redundancy_k=1)
    model = build_model(problem, cost_cover=False)
    outcome = solve_fleet(model, SolveOptions(mip_gap=0.0))
    config = model.routes["config"].to_numpy()
    cols = model.routes["col"].to_numpy()
    model.values[cols[config == "c0"]] += share
    model.values[cols[config == "c1"]] -= share
    plan = assemble_plan(model, outcome, "optimal")
    assert (plan.routing["config"] == "c0").any() == flagged
    assert any(m.startswith("redundancy: c0") for m in verify_plan(plan, problem)) == flagged


@pytest.mark.parametrize("share", [None, 1.0])
def test_a_spot_share_cap_of_100_percent_or_none_has_nothing_to_lift(share):
    problem = make_problem([[1.0]], [[1.0]], {("g0", "on_demand"): 1.0, ("g0", "spot"): 0.4},
                           spot_max_share=share)
    assert lift_spot_share(problem) is None


def test_a_spot_share_within_the_cap_is_no_reason():
    # the plan without the cap used 25% spot against a 50% cap: the cap did not bind
    problem = make_problem([[1.0]], [[1.0]], {("g0", "on_demand"): 1.0, ("g0", "spot"): 0.4},
                           spot_max_share=0.5)
    replicas = pd.DataFrame({"period": 0, "pricing_type": ["spot", "on_demand"],
                             "gpus": [1.0, 3.0]})
    assert diagnose_spot_share(problem, {"replicas": replicas}) == []
    over = replicas.assign(gpus=[3.0, 1.0])
    assert diagnose_spot_share(problem, {"replicas": over}) == [
        "needs 75% spot GPUs but the spot share cap is 50%"]


def test_a_plan_within_the_budget_is_no_reason():
    # the plan without the budget spends $730 a month (1 GPU at $1/h): within $1,000 it did not
    # bind; against $500 it did
    problem = make_problem([[1.0]], [[1.0]], {("g0", "on_demand"): 1.0}, hours=[730.0],
                           horizon_months=1.0, budget_usd_per_month=1000.0)
    nodes = pd.DataFrame({"period": [0], "usd": [730.0]})
    assert diagnose_budget(problem, {"nodes": nodes}) == []
    tight = problem.with_changes(budget_usd_per_month=500.0)
    assert diagnose_budget(tight, {"nodes": nodes}) == [
        "needs $730 per month but the budget is $500"]
