r"""Demand scenarios as one Problem: every (scenario, period) is a period of its own.

The two-stage stochastic program [1] needs commitments decided once and on-demand or spot
capacity decided per outcome. The fleet MILP already has that shape: reserved replicas are
shared by every period and flexible replicas are chosen per period. Copying every period once
per scenario :math:`s`, with its hours weighted by the scenario's probability :math:`p_s`, makes

.. math::

    \sum_{g, p \in R} c_{gp} n_{gp} + \sum_s p_s \sum_{t} h_t \sum_{g, p \in F} c_{gp} n_{gpst}

the objective: the first-stage (reserved) cost, paid once over the horizon whatever happens,
plus the expected recourse cost. The horizon's hours are unchanged (the probabilities sum to 1),
so reserved capacity is charged exactly once. Periods carry ``scenario`` and ``probability``;
whatever groups periods by month groups them by (scenario, month)
(``fleet_problem.month_keys``).

References:
    [1] J. R. Birge and F. Louveaux, Introduction to Stochastic Programming, 2nd ed.,
        Springer (2011), ch. 2-3.
"""

from __future__ import annotations

import pandas as pd

from fleetplan.optimizer.demand import demand_table, plan_periods, workload_buckets
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.scenario import Scenario
from fleetplan.optimizer.uncertainty_inputs import workload_scenarios


def scenario_set(scenario: Scenario) -> pd.DataFrame:
    """The joint demand scenarios: scenario, probability (empty without any)."""
    for workload in scenario.workloads:
        scenarios = workload_scenarios(workload)
        if scenarios is not None:
            return pd.DataFrame({"scenario": [s.name for s in scenarios],
                                 "probability": [s.probability for s in scenarios]})
    return pd.DataFrame(columns=["scenario", "probability"])


def outcome_scenario(scenario: Scenario, name: str) -> Scenario:
    """The scenario as it would be if demand scenario ``name`` happened."""
    workloads = []
    for workload in scenario.workloads:
        given = {s.name: s for s in workload_scenarios(workload) or ()}
        outcome = given.get(name)
        update = {}
        if outcome is not None and outcome.factor is not None:
            update = {field: getattr(workload, field) * outcome.factor
                      for field in ("requests_per_s", "tokens_per_s", "tokens_per_month")
                      if getattr(workload, field) is not None}
        elif outcome is not None and outcome.requests_per_s is not None:
            update = {"requests_per_s": outcome.requests_per_s, "tokens_per_s": None,
                      "tokens_per_month": None}
        elif outcome is not None:
            update = {"monthly_growth": outcome.growth}
        workloads.append(workload.model_copy(update=update))
    return scenario.model_copy(update={"workloads": workloads})


def expand_periods(periods: pd.DataFrame, scenarios: pd.DataFrame) -> pd.DataFrame:
    """Each period once per scenario: new period ids, hours x probability.

    >>> base = pd.DataFrame({"period": [0, 1], "month": 0, "hour": [0, 1], "hours": 10.0,
    ...                      "month_weight": 1.0})
    >>> out = expand_periods(base, pd.DataFrame({"scenario": ["lo", "hi"],
    ...                                          "probability": [0.25, 0.75]}))
    >>> out[["period", "scenario", "hours"]].values.tolist()
    [[0, 'lo', 2.5], [1, 'lo', 2.5], [2, 'hi', 7.5], [3, 'hi', 7.5]]
    """
    stride = int(periods["period"].max()) + 1
    parts = []
    for index, (name, probability) in enumerate(zip(scenarios["scenario"],
                                                    scenarios["probability"], strict=True)):
        parts.append(periods.assign(period=periods["period"] + index * stride,
                                    hours=periods["hours"] * probability,
                                    scenario=name, probability=float(probability)))
    return pd.concat(parts, ignore_index=True)


def with_demand_scenarios(scenario: Scenario, problem: Problem,
                          buckets: pd.DataFrame) -> Problem:
    """``problem`` with one copy of its periods and demand per demand scenario of ``scenario``
    (unchanged without scenarios); the CVaR settings from ``fleet.stochastic``."""
    scenarios = scenario_set(scenario)
    if scenarios.empty:
        return problem
    outcomes = [outcome_scenario(scenario, name) for name in scenarios["scenario"]]
    periods = max((plan_periods(o) for o in outcomes), key=len)  # growth may add months
    stride = int(periods["period"].max()) + 1
    demand = []
    for index, outcome in enumerate(outcomes):
        own = workload_buckets(outcome)[["workload", "bucket", "req_s"]]
        rates = buckets.drop(columns="req_s").merge(own, on=["workload", "bucket"])
        table = demand_table(outcome, rates, periods)
        demand.append(table.assign(period=table["period"] + index * stride))
    risk = scenario.fleet.stochastic
    weight = risk.cvar_weight if risk.objective == "cvar" else 0.0
    return problem.with_changes(periods=expand_periods(periods, scenarios),
                                demand=pd.concat(demand, ignore_index=True),
                                cvar_alpha=risk.cvar_alpha, cvar_weight=weight)


def has_scenarios(problem: Problem) -> bool:
    """True when the problem's periods carry demand scenarios."""
    return "scenario" in problem.periods


def outcome_problem(problem: Problem, name: str) -> Problem:
    """The problem of one demand scenario alone, as if it were certain (probability 1)."""
    periods = problem.periods[problem.periods["scenario"] == name]
    probability = float(periods["probability"].iloc[0])
    periods = periods.assign(hours=periods["hours"] / probability, probability=1.0)
    demand = problem.demand[problem.demand["period"].isin(periods["period"])]
    return problem.with_changes(periods=periods.reset_index(drop=True),
                                demand=demand.reset_index(drop=True), cvar_weight=0.0)


def demand_quantile_scenario(problem: Problem, quantile: float) -> str:
    """The scenario at a quantile of total demand: scenarios sorted by request-hours, the
    first whose cumulative probability reaches ``quantile`` (P50: the median outcome)."""
    hours = problem.periods.set_index("period")["hours"]
    volume = (problem.demand["req_s"] * problem.demand["period"].map(hours)).groupby(
        problem.demand["period"].map(problem.periods.set_index("period")["scenario"])).sum()
    table = problem.periods.drop_duplicates("scenario").set_index("scenario")["probability"]
    volume = (volume.reindex(table.index).fillna(0.0) / table).sort_values(kind="stable")
    cumulative = table.reindex(volume.index).cumsum()
    return str(cumulative.index[(cumulative >= quantile - 1e-9).argmax()])


def with_demand_factors(problem: Problem, scenarios: pd.DataFrame, *,
                        cvar_alpha: float = 0.9, cvar_weight: float = 0.0) -> Problem:
    """``problem`` with one copy of its periods per row of ``scenarios`` (scenario,
    probability, factor): every workload's demand x factor in that scenario (tests,
    benchmarks and problems built from numbers)."""
    stride = int(problem.periods["period"].max()) + 1
    demand = [problem.demand.assign(period=problem.demand["period"] + index * stride,
                                    req_s=problem.demand["req_s"] * factor)
              for index, factor in enumerate(scenarios["factor"])]
    return problem.with_changes(periods=expand_periods(problem.periods, scenarios),
                                demand=pd.concat(demand, ignore_index=True),
                                cvar_alpha=cvar_alpha, cvar_weight=cvar_weight)
