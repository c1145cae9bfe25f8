"""Scenario-file inputs for planning under uncertain demand: demand scenarios per workload, the
P10/P50/P90 shorthand, and the stochastic objective (``fleet.stochastic``).

A workload's ``demand_scenarios`` list named outcomes with probabilities, each a ``factor`` on
its demand, its own ``requests_per_s`` or its own ``monthly_growth`` (``growth``). The shorthand
``demand_quantiles: {p10: 0.7, p50: 1.0, p90: 1.4}`` is the usual three-point discretisation of
a forecast: the P10, P50 and P90 factors with probabilities 0.3, 0.4 and 0.3 (Swanson's rule
[1]), so the three points keep the forecast's mean for a roughly symmetric distribution.
Scenario names must agree across workloads: together they form one joint scenario set.

References:
    [1] A. Hurst, G. C. Brown and R. I. Swanson, "Swanson's 30-40-30 rule", AAPG Bulletin 84
        (2000) 1883-1891; see also J. E. Bickel, L. W. Lake and J. Lehman, "Discretization,
        simulation, and Swanson's (inaccurate) mean", SPE Economics & Management 3 (2011)
        128-140.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, model_validator

from fleetplan.errors import did_you_mean
from fleetplan.optimizer.strict_model import StrictModel

#: Swanson's rule: probabilities of the P10, P50 and P90 points of a forecast.
SWANSON_PROBABILITIES: dict[str, float] = {"p10": 0.3, "p50": 0.4, "p90": 0.3}

#: How far the probabilities of one scenario set may sum away from 1.
PROBABILITY_TOLERANCE = 1e-6

#: Most scenarios one set may hold: the MILP has a copy of every period per scenario.
MAX_SCENARIOS = 20


class DemandScenario(StrictModel):
    """One outcome of a workload's demand: a factor on it, its own rate, or its own growth."""

    name: str = Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_.\-]+$")
    probability: float = Field(gt=0, le=1, description="Probability of this outcome")
    factor: float | None = Field(None, gt=0, le=1000, description="Demand x this factor")
    requests_per_s: float | None = Field(None, gt=0, le=1e7,
                                         description="Mean demand in this outcome [requests/s]")
    growth: float | None = Field(None, gt=-1, le=10,
                                 description="Monthly growth in this outcome [fraction]")

    @model_validator(mode="after")
    def _one_change(self) -> DemandScenario:
        given = [n for n in ("factor", "requests_per_s", "growth") if getattr(self, n) is not None]
        if len(given) != 1:
            message = ("give exactly one of factor, requests_per_s, growth, got "
                       f"{', '.join(given) or 'none'}")
            raise ValueError(message)
        return self


class Stochastic(StrictModel):
    """The objective of a plan under demand scenarios."""

    objective: Literal["expected", "cvar"] = Field(
        "expected", description="'expected' cost, or expected cost + cvar_weight x CVaR")
    cvar_alpha: float = Field(0.9, ge=0.5, lt=1, description="CVaR level: the mean cost of "
                                                             "the worst 1 - alpha of outcomes")
    cvar_weight: float = Field(0.0, ge=0, le=100, description="Weight of CVaR in the objective")


def quantile_scenarios(quantiles: dict[str, float]) -> list[DemandScenario]:
    """The P10/P50/P90 shorthand as three demand scenarios (Swanson's 0.3/0.4/0.3).

    >>> [(s.name, s.probability) for s in quantile_scenarios({"p10": 0.7, "p50": 1, "p90": 1.4})]
    [('p10', 0.3), ('p50', 0.4), ('p90', 0.3)]
    """
    return [DemandScenario(name=name, probability=probability, factor=quantiles[name])
            for name, probability in SWANSON_PROBABILITIES.items()]


def check_quantiles(quantiles: dict[str, float] | None) -> dict[str, float] | None:
    """Exactly the keys p10, p50, p90, finite factors > 0 that do not decrease (ValueError)."""
    if quantiles is None:
        return None
    for key in quantiles:
        if key not in SWANSON_PROBABILITIES:
            message = str(did_you_mean(key, SWANSON_PROBABILITIES, kind="quantile"))
            raise ValueError(message)
    missing = [k for k in SWANSON_PROBABILITIES if k not in quantiles]
    if missing:
        message = f"give p10, p50 and p90, missing {', '.join(missing)}"
        raise ValueError(message)
    values = [quantiles[k] for k in SWANSON_PROBABILITIES]
    if not all(math.isfinite(v) and 0 < v <= 1000 for v in values):
        message = f"factors must be finite numbers > 0 and <= 1000, got {values}"
        raise ValueError(message)
    if values != sorted(values):
        message = f"factors must not decrease from p10 to p90, got {values}"
        raise ValueError(message)
    return quantiles


def check_scenario_set(scenarios: list[DemandScenario] | None) -> list[DemandScenario] | None:
    """Unique names, at most MAX_SCENARIOS, probabilities summing to 1 (ValueError)."""
    if scenarios is None:
        return None
    names = [s.name for s in scenarios]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        message = f"scenario names must be unique, '{repeated[0]}' repeats"
        raise ValueError(message)
    if len(scenarios) > MAX_SCENARIOS:
        message = f"at most {MAX_SCENARIOS} scenarios, got {len(scenarios)}"
        raise ValueError(message)
    total = sum(s.probability for s in scenarios)
    if abs(total - 1.0) > PROBABILITY_TOLERANCE:
        message = (f"probabilities must sum to 1 (within {PROBABILITY_TOLERANCE:g}), "
                   f"got {total:.6g}")
        raise ValueError(message)
    return scenarios


def workload_scenarios(workload) -> list[DemandScenario] | None:
    """A workload's demand scenarios, from either form (None without any)."""
    if workload.demand_quantiles is not None:
        return quantile_scenarios(workload.demand_quantiles)
    return workload.demand_scenarios


def check_joint_scenarios(workloads: list) -> None:
    """Every workload with scenarios names the same scenarios with the same probabilities."""
    given = [(i, workload_scenarios(w)) for i, w in enumerate(workloads)]
    given = [(i, s) for i, s in given if s is not None]
    if not given:
        return
    first, reference = given[0]
    probability = {s.name: s.probability for s in reference}
    for index, scenarios in given[1:]:
        where = f"workloads[{index}].demand_scenarios"
        unknown = [s.name for s in scenarios if s.name not in probability]
        if unknown:
            problem = did_you_mean(unknown[0], probability, kind="scenario")
            message = (f"{where}: {problem}; every workload names the scenarios of "
                       f"workloads[{first}]")
            raise ValueError(message)
        missing = sorted(set(probability) - {s.name for s in scenarios})
        if missing:
            message = (f"{where}: missing {missing[0]!r}; every workload names the scenarios of "
                       f"workloads[{first}]")
            raise ValueError(message)
        for scenario in scenarios:
            if abs(scenario.probability - probability[scenario.name]) > PROBABILITY_TOLERANCE:
                message = (f"{where}: '{scenario.name}' has probability {scenario.probability:g}, "
                           f"workloads[{first}] gives it {probability[scenario.name]:g}; one "
                           "joint scenario set")
                raise ValueError(message)


def check_risk_needs_scenarios(stochastic: Stochastic, workloads: list) -> None:
    """A CVaR objective without demand scenarios would silently do nothing (ValueError)."""
    if stochastic.objective == "cvar" and all(workload_scenarios(w) is None for w in workloads):
        message = ("fleet.stochastic: objective cvar needs demand scenarios; give a workload "
                   "demand_scenarios or demand_quantiles")
        raise ValueError(message)
