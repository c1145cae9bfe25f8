"""The stochastic tests' tiny instance: one workload, two configurations, demand scenarios
for one year; and the hypothesis strategies drawing its prices and outcomes."""

from __future__ import annotations

import pandas as pd
from hypothesis import strategies as st

from fleetplan.optimizer.solver import SolveOptions
from fleetplan.optimizer.stochastic_problem import with_demand_factors
from tests.optimizer.instances import make_problem

EXACT = SolveOptions(time_limit_s=30, mip_gap=0.0)
HOURS = 730.0


def tiny(k0, k1, on_demand, reserved, other, demands, probabilities, **risk):
    """One workload, one bucket: configuration c0 on g0 (on-demand or reserved), c1 on g1
    (on-demand only); demand scenario s asks for ``demands[s]`` requests/s for the year."""
    problem = make_problem([[k0], [k1]], [[1.0]],
                           {("g0", "on_demand"): on_demand, ("g0", "reserved_1y"): reserved,
                            ("g1", "on_demand"): other}, hours=[HOURS])
    problem = problem.with_changes(periods=problem.periods.assign(month_weight=12.0))
    names = [f"s{i}" for i in range(len(demands))]
    scenarios = pd.DataFrame({"scenario": names, "probability": probabilities,
                              "factor": demands})
    return with_demand_factors(problem, scenarios, **risk)


PRICES = st.tuples(st.sampled_from([2.0, 3.0, 5.0]), st.sampled_from([2.0, 4.0, 6.0]),
                   st.sampled_from([1.0, 1.5, 2.0]), st.sampled_from([0.5, 0.8, 1.2]),
                   st.sampled_from([1.0, 1.6, 2.5]))
OUTCOMES = st.sampled_from([(0.5, 0.5), (0.3, 0.7), (0.3, 0.4, 0.3), (0.2, 0.5, 0.3)]).flatmap(
    lambda p: st.tuples(st.lists(st.sampled_from([0.0, 1.0, 3.0, 5.0, 8.0, 12.0]),
                                 min_size=len(p), max_size=len(p)), st.just(list(p))))
