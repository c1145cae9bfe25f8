"""The fallback plans beyond on-demand offers: the rounded-up LP makes a configuration's
replicas up on spot when it has no on-demand offer, else with more reserved replicas, and
rounds today's fleet down like spot; the greedy plan prices a GPU with no on-demand offer at
spot or reserved, ranked after every route bought on demand."""

from __future__ import annotations

import numpy as np

from fleetplan.optimizer.greedy_fallback import greedy_plan
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.rounding import rounded_up
from tests.optimizer.instances import make_problem
from tests.optimizer.test_fallback_plans import OPTIONS, whole_and_feasible
from tests.optimizer.test_replanning import tiny as replanning_tiny


def bought(model, plan):
    """Replicas of the plan by pricing type (reserved counted once for the horizon)."""
    table = model.replicas.assign(n=plan[model.replicas["col"]])
    return table.groupby("pricing_type")["n"].sum().to_dict()


def routed(model, replicas: dict[int, float]) -> np.ndarray:
    """Relaxed values that route every bucket to its one configuration, with ``replicas``
    [replicas of each period; -1 for reserved] as a relaxation buys them (the pool-cover
    cut makes these tiny LPs whole, so they are written out)."""
    values = np.zeros(model.program.n_cols)
    values[model.routes["col"]] = 1.0
    for period, count in replicas.items():
        values[model.replicas.loc[model.replicas["period"] == period, "col"]] = count
    return values


def test_the_rounding_makes_up_on_spot_what_no_on_demand_offer_can():
    # 2 req/s on replicas of 4 req/s: a relaxation buys half a spot replica, rounded down to
    # none; with no on-demand offer the rounding used to give up
    model = build_model(make_problem([[4.0]], [[2.0]], {("g0", "spot"): 1.0}))
    plan = rounded_up(model, routed(model, {0: 0.5}))
    whole_and_feasible(model, plan)
    assert bought(model, plan) == {"spot": 1.0}


def test_with_reserved_alone_the_rounding_reserves_what_the_busiest_period_lacks():
    # 2 and 6 req/s on replicas of 4 req/s: 1.5 reserved replicas rounded down to 1, and the
    # second period lacks one more; held at the given counts there is no plan
    model = build_model(make_problem([[4.0]], [[2.0], [6.0]], {("g0", "reserved_1y"): 1.0}))
    values = routed(model, {-1: 1.5})
    plan = rounded_up(model, values)
    whole_and_feasible(model, plan)
    assert bought(model, plan) == {"reserved_1y": 2.0}
    assert rounded_up(model, values, hold_reserved=True) is None


def test_the_rounding_reserves_on_the_cheapest_reserved_offer_for_the_horizon():
    # over three years the 3-year term costs less (over one it is charged its whole term)
    offers = {("g0", "reserved_1y"): 1.0, ("g0", "reserved_3y"): 0.7}
    model = build_model(make_problem([[4.0]], [[2.0], [6.0]], offers, horizon_months=36.0))
    plan = rounded_up(model, routed(model, {}))
    whole_and_feasible(model, plan)
    assert bought(model, plan) == {"reserved_1y": 0.0, "reserved_3y": 2.0}


def test_the_greedy_plan_reserves_when_nothing_else_is_offered():
    model = build_model(make_problem([[4.0]], [[2.0], [6.0]], {("g0", "reserved_1y"): 1.0}))
    plan = greedy_plan(model, OPTIONS, 5.0)
    whole_and_feasible(model, plan)
    assert bought(model, plan) == {"reserved_1y": 2.0}


def test_the_greedy_plan_buys_on_demand_before_a_cheaper_spot_only_gpu():
    # c0 on g0 (spot only) costs far less, but is ranked after c1, which is bought on demand;
    # without c1 the plan runs on c0's spot replicas
    offers = {("g0", "spot"): 0.1, ("g1", "on_demand"): 1.0}
    model = build_model(make_problem([[4.0], [1.0]], [[2.0]], offers))
    plan = greedy_plan(model, OPTIONS, 5.0)
    whole_and_feasible(model, plan)
    assert bought(model, plan) == {"on_demand": 2.0, "spot": 0.0}
    alone = build_model(make_problem([[4.0]], [[2.0]], {("g0", "spot"): 0.1}))
    assert bought(alone, greedy_plan(alone, OPTIONS, 5.0)) == {"spot": 1.0}


def test_the_rounding_keeps_todays_fleet_rounded_down_and_buys_the_rest_on_demand():
    # 2.5 req/s on a1, which runs on today's 2 committed GPUs: a relaxation's 1.5 committed
    # replicas are rounded down like spot's (they used to keep the fraction, so the rounding
    # was no plan), and on demand makes up the 3 replicas the load needs
    model = build_model(replanning_tiny([2.5], committed=2, end=2))
    values = np.zeros(model.program.n_cols)
    routes, replicas = model.routes, model.replicas
    values[routes.loc[routes["config"] == "a1", "col"]] = 1.0
    on_a1 = replicas[replicas["config"] == "a1"].set_index("pricing_type")["col"]
    values[on_a1[["committed", "on_demand"]]] = [1.5, 1.0]
    plan = rounded_up(model, values)
    whole_and_feasible(model, plan)
    assert list(plan[on_a1[["committed", "on_demand"]]]) == [1.0, 2.0]
