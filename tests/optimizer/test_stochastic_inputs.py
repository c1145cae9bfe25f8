"""Demand scenarios in the scenario file: the shorthand, what each outcome does to demand, and a
one-line error naming the field for every bad input."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import fleetplan
from fleetplan.cli import main
from fleetplan.errors import ScenarioError
from fleetplan.optimizer import scenario_planning
from fleetplan.optimizer.demand import workload_buckets
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.scenario_files import read_data, validate_scenario
from fleetplan.optimizer.scenario_planning import prepare
from fleetplan.optimizer.solver import SolveOptions
from fleetplan.optimizer.stochastic_problem import scenario_set, with_demand_scenarios
from fleetplan.optimizer.uncertainty_inputs import quantile_scenarios
from tests.optimizer.instances import make_problem

EXAMPLE = Path(fleetplan.__file__).parent / "examples" / "commitments.yaml"


def example(**changes) -> dict:
    data = read_data(EXAMPLE)
    for path, value in changes.items():
        target, *keys = path.split("__")
        node = data
        for key in [target, *keys][:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        last = [target, *keys][-1]
        if isinstance(node, list):
            node[int(last)] = value
        elif value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return data


def test_the_shorthand_is_swansons_three_points():
    scenarios = quantile_scenarios({"p10": 0.7, "p50": 1.0, "p90": 1.4})
    assert [(s.name, s.probability, s.factor) for s in scenarios] == [
        ("p10", 0.3, 0.7), ("p50", 0.4, 1.0), ("p90", 0.3, 1.4)]


def test_each_outcome_scales_sets_or_grows_demand():
    scenario = validate_scenario(example(workloads__0__demand_quantiles=None,
                                         workloads__0__demand_scenarios=[
                                             {"name": "p10", "probability": 0.3, "factor": 0.5},
                                             {"name": "p50", "probability": 0.4, "factor": 1.0},
                                             {"name": "p90", "probability": 0.3, "growth": 0.1}]))
    assert scenario_set(scenario)["probability"].tolist() == [0.3, 0.4, 0.3]
    base = make_problem([[10.0]], [[1.0]], {("g0", "on_demand"): 1.0})
    problem = with_demand_scenarios(scenario, base, workload_buckets(scenario))
    periods = problem.periods.set_index("period")
    assert len(periods) == 3 * 12  # growth in one outcome gives every outcome its months
    demand = problem.demand.assign(scenario=problem.demand["period"].map(periods["scenario"]),
                                   month=problem.demand["period"].map(periods["month"]))
    rate = demand.groupby(["workload", "scenario", "month"])["req_s"].sum()
    assert rate[("support-chat", "p10", 0)] == pytest.approx(20.0)
    assert rate[("support-chat", "p90", 11)] == pytest.approx(40.0 * 1.1 ** 11)
    assert rate[("code-assist", "p90", 5)] == pytest.approx(20.0)  # its own requests_per_s
    assert rate[("code-assist", "p10", 0)] == pytest.approx(12.0)
    assert problem.horizon_hours == pytest.approx(12 * 730.0)


@pytest.mark.parametrize(("changes", "match"), [
    ({"workloads__1__demand_scenarios__1": {"name": "p5O", "probability": 0.4, "factor": 1.0}},
     r"workloads\[1\].demand_scenarios: unknown scenario 'p5O'; did you mean 'p50'"),
    ({"workloads__1__demand_scenarios__1": {"name": "p50", "probability": 0.5, "factor": 1.0}},
     r"workloads\[1\].demand_scenarios: probabilities must sum to 1 \(within 1e-06\), got 1.1"),
    ({"workloads__1__demand_scenarios": [{"name": "p10", "probability": 0.4, "factor": 0.8},
                                         {"name": "p50", "probability": 0.3, "factor": 1.0},
                                         {"name": "p90", "probability": 0.3, "factor": 1.2}]},
     r"'p10' has probability 0.4, workloads\[0\] gives it 0.3"),
    ({"workloads__1__demand_scenarios": [{"name": "p10", "probability": 0.6, "factor": 0.8},
                                         {"name": "p50", "probability": 0.4, "factor": 1.0}]},
     r"workloads\[1\].demand_scenarios: missing 'p90'"),
    ({"workloads__1__demand_scenarios": [{"name": "a", "probability": 0.5, "factor": 0.8},
                                         {"name": "a", "probability": 0.5, "factor": 1.0}]},
     r"scenario names must be unique, 'a' repeats"),
    ({"workloads__1__demand_quantiles": {"p10": 0.5, "p50": 1.0, "p90": 2.0}},
     r"workloads\[1\]: give either demand_scenarios or demand_quantiles, not both"),
    ({"workloads__0__demand_quantiles": {"p10": 0.7, "p5": 1.0, "p90": 1.4}},
     r"demand_quantiles: unknown quantile 'p5'; did you mean 'p50'"),
    ({"workloads__0__demand_quantiles": {"p10": 0.7, "p50": 1.0}},
     r"demand_quantiles: give p10, p50 and p90, missing p90"),
    ({"workloads__0__demand_quantiles": {"p10": 1.2, "p50": 1.0, "p90": 1.4}},
     r"demand_quantiles: factors must not decrease from p10 to p90"),
    ({"workloads__0__demand_quantiles": {"p10": 0.0, "p50": 1.0, "p90": 1.4}},
     r"demand_quantiles: factors must be finite numbers > 0 and <= 1000"),
    ({"workloads__1__demand_scenarios__0": {"name": "p10", "probability": 0.3, "factor": 0.8,
                                            "growth": 0.1}},
     r"demand_scenarios\[0\]: give exactly one of factor, requests_per_s, growth"),
    ({"workloads__1__demand_scenarios__0": {"name": "p10", "probability": 1.3, "factor": 0.8}},
     r"demand_scenarios\[0\]\.probability: must be <= 1, got 1.3"),
    ({"fleet__stochastic": {"objective": "worst"}}, r"fleet.stochastic.objective"),
    ({"fleet__stochastic": {"objective": "cvar", "cvar_weight": 1.0},
      "workloads__0__demand_quantiles": None, "workloads__1__demand_scenarios": None},
     r"fleet.stochastic: objective cvar needs demand scenarios"),
    ({"fleet__stochastic": {"objective": "cvar", "cvar_alpha": 1.0}},
     r"fleet.stochastic.cvar_alpha: must be < 1, got 1.0"),
])
def test_bad_scenarios_fail_with_one_line_naming_the_field(changes, match):
    with pytest.raises(ScenarioError, match=match):
        validate_scenario(example(**changes), source="commitments.yaml")


def test_the_command_line_exits_2_on_probabilities_that_do_not_sum_to_one(tmp_path, capsys):
    text = EXAMPLE.read_text().replace("{name: p90, probability: 0.3, requests_per_s: 20}",
                                       "{name: p90, probability: 0.35, requests_per_s: 20}")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    code = main(["plan", str(path), "-o", str(tmp_path / "plan.json"), "-q"])
    _, err = capsys.readouterr()
    assert code == 2 and "probabilities must sum to 1" in err and len(err.strip().splitlines()) == 1


def test_a_plan_is_p90_safe_against_demand_and_model_error_together(shipped):
    median = prepare(validate_scenario(example()), shipped)
    safe = prepare(validate_scenario(example(fleet__capacity_quantile="p90")), shipped)
    assert set(safe.problem.periods["scenario"]) == {"p10", "p50", "p90"}  # demand outcomes kept
    keys = ["workload", "bucket", "config"]
    both = median.candidates.merge(safe.candidates, on=keys, suffixes=("", "_safe"))
    assert len(both) == len(median.candidates) > 0
    derate = 1.0 + both["error_p90_pct"] / 100.0  # the model's error band on every capacity
    assert (both["req_s_per_replica_safe"] * derate).to_numpy() == pytest.approx(
        both["req_s_per_replica"].to_numpy(), rel=1e-9)
    options = SolveOptions(time_limit_s=60, mip_gap=1e-4)
    cheap, careful = (optimize_problem(p.problem, options) for p in (median, safe))
    assert careful.feasible and careful.objective_usd > cheap.objective_usd


def test_the_commitments_table_shares_the_calls_time_limit(monkeypatch, shipped):
    # the plan's solve gets all but FOLLOW_UP_SHARE of the limit; the commitments table gets
    # what the plan left (at least that share), so both together stay within the call's limit
    given, started = {}, time.perf_counter()
    real_optimize = scenario_planning.optimize_problem
    real_commitments = scenario_planning.add_commitments

    def optimize(problem, options, *arguments, **keywords):
        given["prepared"] = time.perf_counter() - started
        given["plan"], solving = options.time_limit_s, time.perf_counter()
        plan = real_optimize(problem, options, *arguments, **keywords)
        given["solving"] = time.perf_counter() - solving
        return plan

    def commitments(plan, problem, options):
        given["commitments"], given["at"] = options.time_limit_s, time.perf_counter() - started
        return real_commitments(plan, problem, options)

    monkeypatch.setattr(scenario_planning, "optimize_problem", optimize)
    monkeypatch.setattr(scenario_planning, "add_commitments", commitments)
    scenario = validate_scenario(example())
    scenario = scenario.model_copy(update={"solver": scenario.solver.model_copy(
        update={"time_limit_s": 40.0})})
    plan = scenario_planning.plan_scenario(scenario, shipped, what_if=False)
    assert not plan.commitments.empty
    share = scenario_planning.FOLLOW_UP_SHARE
    # what preparing the scenario took is the call's too
    assert (40.0 - given["prepared"]) * (1 - share) <= given["plan"] <= 40.0 * (1 - share)
    assert 40.0 - given["at"] <= given["commitments"] <= 40.0 - given["solving"]
