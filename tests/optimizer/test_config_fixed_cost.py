"""The fixed monthly cost per deployed configuration against brute force, and its reporting."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math

import numpy as np
import openpyxl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fleetplan.cli import main
from fleetplan.errors import ScenarioError
from fleetplan.exports.focus import focus_table
from fleetplan.exports.plan_costs_beyond_gpus import config_month_table
from fleetplan.exports.plan_workbook import write_plan_xlsx
from fleetplan.optimizer.chargeback import chargeback_table
from fleetplan.optimizer.config_fixed_cost import fixed_charges
from fleetplan.optimizer.constraint_families import verify_plan
from fleetplan.optimizer.cost_pools import workload_use
from fleetplan.optimizer.optimization import WhatIfOptions, optimize_problem
from fleetplan.optimizer.scenario_files import validate_scenario
from tests.optimizer.chargeback_plans import shared_problem, solved
from tests.optimizer.instances import _serves, make_problem
from tests.optimizer.plan_checker import check_plan
from tests.optimizer.test_bruteforce import EXACT
from tests.optimizer.test_scenario import BASE, changed, set_in

MAX_REPLICAS = 3

#: Two cheap configurations, one per bucket, or one dear one serving both.
SPLIT_OR_ONE = ([[2.0, 0.0], [0.0, 2.0], [3.0, 3.0]], {("g0", "on_demand"): 1.0,
                                                        ("g1", "on_demand"): 1.0,
                                                        ("g2", "on_demand"): 2.5})


def with_months(capacity, demand, offers, months, fixed_usd):
    """One workload, on-demand offers, one hour per period, ``months[t]`` the month of
    period t (0, 1, ...), each month standing for itself."""
    problem = make_problem(capacity, demand, offers, horizon_months=float(max(months) + 1),
                           config_fixed_usd_per_month=fixed_usd)
    return problem.with_changes(periods=problem.periods.assign(month=months))


def brute_force_usd(problem) -> float:
    """Cheapest cost by enumerating, per month, the set of configurations deployed and, per
    period, replica counts within that set (each tested by an LP that routes the demand)."""
    configs = problem.configs
    price = problem.offers.set_index("gpu")["usd_per_gpu_hour"].reindex(configs["gpu"]).to_numpy()
    hours = problem.periods.set_index("period")["hours"]
    counts = [np.array(v) for v in itertools.product(range(MAX_REPLICAS + 1),
                                                     repeat=len(configs))]
    serving = {t: [(v, hours[t] * float(np.sum(v * configs["tp"].to_numpy() * price)))
                   for v in counts if _serves(problem, t, v)]
               for t in problem.periods["period"]}
    total = 0.0
    for month, periods in problem.periods.groupby("month")["period"]:
        weight = problem.periods.loc[problem.periods["month"] == month, "month_weight"].iloc[0]
        best = math.inf
        for deployed in itertools.product([False, True], repeat=len(configs)):
            off = ~np.array(deployed)
            cost = problem.config_fixed_usd_per_month * weight * sum(deployed)
            for t in periods:
                cost += min((usd for v, usd in serving[t] if not np.any(v[off])), default=math.inf)
            best = min(best, cost)
        total += best
    return total


@st.composite
def monthly_instances(draw):
    capacity = draw(st.lists(st.lists(st.sampled_from([0.0, 2.0, 3.0, 5.0]), min_size=2,
                                      max_size=2), min_size=2, max_size=3))
    n_periods = draw(st.integers(1, 3))
    demand = draw(st.lists(st.lists(st.sampled_from([0.0, 1.0, 2.5, 4.0]), min_size=2,
                                    max_size=2), min_size=n_periods, max_size=n_periods))
    months = sorted(draw(st.lists(st.integers(0, 1), min_size=n_periods, max_size=n_periods)))
    months = list(np.unique(months, return_inverse=True)[1])
    offers = {(f"g{c}", "on_demand"): draw(st.sampled_from([1.0, 1.5, 2.5]))
              for c in range(len(capacity))}
    return with_months(capacity, demand, offers, months, draw(st.sampled_from([0.5, 2.0, 6.0])))


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(monthly_instances())
@example(with_months(SPLIT_OR_ONE[0], [[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]], SPLIT_OR_ONE[1],
                     [0, 1, 1], 0.8))
def test_the_fixed_cost_matches_brute_force(problem):
    expected = brute_force_usd(problem)
    plan = optimize_problem(problem, EXACT)
    assert plan.status == "optimal"
    assert check_plan(plan, problem) == []
    assert verify_plan(plan, problem) == []
    if plan.fleet_by_period["replicas"].max() <= MAX_REPLICAS:
        assert plan.objective_usd == pytest.approx(expected, rel=1e-6, abs=1e-6)


def test_a_large_fixed_cost_consolidates_the_fleet():
    capacity, offers = SPLIT_OR_ONE
    free = optimize_problem(with_months(capacity, [[1.0, 1.0]], offers, [0], 0.0), EXACT)
    assert set(free.fleet["config"]) == {"c0", "c1"}
    assert free.objective_usd == pytest.approx(2.0)
    assert free.config_fixed_costs.empty
    problem = with_months(capacity, [[1.0, 1.0]], offers, [0], 1.0)
    plan = optimize_problem(problem, EXACT)
    assert set(plan.fleet["config"]) == {"c2"}
    replica_usd = float(plan.costs_by_gpu["usd_total"].sum())
    config_months = float(plan.config_fixed_costs["month_weight"].sum())
    assert (replica_usd, config_months) == (pytest.approx(2.5), 1.0)
    assert plan.objective_usd == pytest.approx(replica_usd + 1.0 * config_months)
    line = plan.costs_by_pricing.set_index("pricing_type").loc["config_fixed"]
    assert line["usd_total"] == pytest.approx(1.0)
    assert plan.costs_by_month["config_fixed_usd"].sum() == pytest.approx(1.0)
    assert plan.costs_by_workload["usd_total"].sum() == pytest.approx(plan.objective_usd)
    text = "fixed cost per configuration: 1 configuration-months at $1.00 = $1.00 over the horizon (1 configuration)"
    assert text in plan.summary_text()


def test_a_configuration_pays_in_every_month_it_runs_and_only_then():
    capacity, offers = SPLIT_OR_ONE  # month 0 needs bucket 0 only, month 1 both buckets
    problem = with_months(capacity, [[1.0, 0.0], [1.0, 1.0]], offers, [0, 1], 0.2)
    plan = optimize_problem(problem, EXACT)
    charged = plan.config_fixed_costs.groupby("month")["config"].apply(set).to_dict()
    assert charged == {0: {"c0"}, 1: {"c0", "c1"}}
    assert plan.objective_usd == pytest.approx(1.0 + 2.0 + 0.2 * 3)


def test_verify_plan_flags_a_wrong_or_missing_fixed_cost():
    capacity, offers = SPLIT_OR_ONE
    problem = with_months(capacity, [[1.0, 1.0]], offers, [0], 0.3)
    plan = optimize_problem(problem, EXACT)
    assert verify_plan(plan, problem) == []
    fixed = plan.config_fixed_costs
    plan.config_fixed_costs = fixed.iloc[1:]
    assert verify_plan(plan, problem) == [
        f"config_fixed: {fixed['config'].iloc[0]} runs in month 0 but pays no fixed cost"]
    plan.config_fixed_costs = fixed.assign(usd=fixed["usd"] * 2)
    assert verify_plan(plan, problem)[0] == (
        f"config_fixed: {fixed['config'].iloc[0]} in month 0 is charged $0.60, not $0.30")


@pytest.mark.parametrize(("value", "message"), [
    (-1.0, r"fleet.config_fixed_usd_per_month: must be >= 0, got -1"),
    (math.inf, r"fleet.config_fixed_usd_per_month: must be a finite number"),
    (math.nan, r"fleet.config_fixed_usd_per_month: must be a finite number"),
])
def test_the_fixed_cost_must_be_finite_and_not_negative(value, message):
    with pytest.raises(ScenarioError, match=message):
        validate_scenario(changed(set_in(("fleet", "config_fixed_usd_per_month"), value)))


def test_the_scenario_field_reaches_the_problem():
    scenario = validate_scenario(changed(set_in(("fleet", "config_fixed_usd_per_month"), 500)))
    assert scenario.fleet.config_fixed_usd_per_month == 500.0
    assert BASE["fleet"].get("config_fixed_usd_per_month") is None


def test_every_output_totals_the_same_with_a_fixed_cost():
    problem = shared_problem(demand=((6.0, 2.0), (13.3, 0.7)), hours=(1000.0, 1190.0),
                             horizon_months=3.0, month_weight=3.0)
    plan = solved(problem.with_changes(config_fixed_usd_per_month=123.45))
    fixed = plan.config_fixed_costs
    assert fixed["usd"].sum() == pytest.approx(123.45 * 3)
    total = round(plan.objective_usd * 100)
    assert round(plan.costs_by_pricing["usd_total"].sum() * 100) == total
    assert round(plan.costs_by_month["usd"].sum() * 100) == total
    assert round(plan.costs_by_workload["usd_total"].sum() * 100) == total
    assert round(chargeback_table(plan)["usd"].sum() * 100) == total
    focus = focus_table(plan, dt.date(2027, 1, 1))
    assert round(focus["BilledCost"].sum() * 100) == total
    rows = focus[focus["ChargeDescription"].str.contains("fixed operating cost")]
    assert len(rows) == 3 and rows["ChargeFrequency"].eq("Recurring").all()
    assert rows["BilledCost"].sum() == pytest.approx(123.45 * 3, abs=0.011)
    assert rows["PricingQuantity"].sum() == pytest.approx(3.0)


def test_chargeback_splits_a_configuration_month_by_tokens():
    # one shared configuration; w2's requests are twice as large, so it pays 2/3 per request
    problem = shared_problem(demand=((4.0, 4.0),), sizes=((100, 100), (200, 200)))
    plan = solved(problem.with_changes(config_fixed_usd_per_month=30.0))
    charged = fixed_charges(plan, workload_use(plan))[0].groupby("workload")["usd"].sum()
    assert charged.to_dict() == {"w1": pytest.approx(10.0), "w2": pytest.approx(20.0)}


def test_the_workbook_prices_the_configuration_months_at_the_fixed_cost(tmp_path):
    problem = shared_problem(hours=(2190.0,), horizon_months=3.0, month_weight=3.0)
    plan = solved(problem.with_changes(config_fixed_usd_per_month=250.0))
    path = write_plan_xlsx(plan, tmp_path / "plan.xlsx")
    book = openpyxl.load_workbook(path)
    rows = list(book["Costs"].iter_rows(values_only=True))
    line = next(row for row in rows if row[0] == "config_fixed")
    assert line[2:4] == ("=SUM(fixed_usd)/horizon_months", "=C{}*horizon_months".format(
        next(i for i, row in enumerate(rows, start=1) if row[0] == "config_fixed")))
    # one configuration for one representative month standing for three: three months, each
    # split between the two workloads by their load (3:1)
    months = config_month_table(plan)
    assert months.groupby("month")["config_months"].sum().to_dict() == {
        0: pytest.approx(1.0), 1: pytest.approx(1.0), 2: pytest.approx(1.0)}
    assert months.groupby("workload")["config_months"].sum().to_dict() == {
        "w1": pytest.approx(2.25), "w2": pytest.approx(0.75)}


def test_a_lower_fixed_cost_is_priced_by_a_re_solve():
    capacity, offers = SPLIT_OR_ONE
    problem = with_months(capacity, [[1.0, 1.0]], offers, [0], 0.4)
    plan = optimize_problem(problem, EXACT, WhatIfOptions())
    assert plan.binding_constraints["description"].tolist() == [
        "config_fixed configurations: a fixed cost of $0.36 instead of $0.40 per configuration "
        "and month would save $0.08 per month"]


def test_the_printed_plan_names_the_fixed_cost(tmp_path, capsys):
    scenario = {"workloads": [{"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 30, "input_tokens": 1000,
                               "output_tokens": 200, "tpot_slo_ms": 50}],
                "fleet": {"gpus": ["h100-sxm", "l40s"], "tp": [1], "config_fixed_usd_per_month": 2000},
                "what_if": {"enabled": False}}
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario), encoding="utf-8")
    assert main(["plan", str(path), "-o", str(tmp_path / "plan.xlsx")]) == 0
    printed = capsys.readouterr().out
    assert "fixed cost per configuration: 12 configuration-months at $2,000 = $24,000 over the horizon" in printed


def test_a_budget_counts_the_fixed_cost_of_each_month():
    capacity, offers = SPLIT_OR_ONE
    problem = with_months(capacity, [[1.0, 1.0]], offers, [0], 1.0)
    plan = optimize_problem(problem, EXACT)
    monthly = float(plan.costs_by_month["usd"].iloc[0])
    assert monthly == pytest.approx(3.5)  # the dear configuration $2.50 + its $1.00 overhead
    within = optimize_problem(problem.with_changes(budget_usd_per_month=monthly), EXACT)
    assert within.status == "optimal" and within.assumptions["recheck"] == "passed"
    short = optimize_problem(problem.with_changes(budget_usd_per_month=3.0), EXACT)
    assert short.status == "infeasible"
    assert any("needs $3.50 per month but the budget is $3.00" in m for m in short.messages)
