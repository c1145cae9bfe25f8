"""What the representative periods give a long linked horizon before its full LP is solved:
a floor bound, reserved counts and a whole plan.

A horizon with many hours (``representative_periods.wants_representatives``) is first
clustered into representative periods. Their LP relaxation, far smaller than the full model's,
gives the reserved-first solve (``reserved_first.py``) its first reserved candidate (the LP's
reserved counts rounded up) and, when the full LP is not solved in time, its fallback plan
(every hour routed as its representative, rounded up). At their members' minimum demand the
same periods give a lower bound within a second (:func:`floor_bound`).
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from fleetplan.optimizer.milp import FleetModel, build_model
from fleetplan.optimizer.representative_periods import (
    cluster_periods,
    floor_bound_problem,
    representative_problem,
    spread_to_hours,
    wants_representatives,
)
from fleetplan.optimizer.reserved_candidates import reserved_rows
from fleetplan.optimizer.rounding import rounded_up
from fleetplan.optimizer.solver import SolveOptions, open_solver

logger = logging.getLogger(__name__)


class RepresentativeStart:
    """The representative periods of one linked model, their LP solved once when first asked."""

    def __init__(self, model: FleetModel, options: SolveOptions) -> None:
        self.model, self.options = model, options
        self._solved: tuple | None = None  # (small model, LP values, period mapping) or ()

    def lp(self, seconds: float) -> tuple[FleetModel, np.ndarray, pd.Series] | None:
        """The representative problem's model, its LP solution and the period mapping
        (``representative_periods``), solved once within ``seconds``; None when the problem is
        short enough to need none or the LP is not solved in time."""
        if self._solved is not None:
            return self._solved or None
        self._solved = ()
        problem = self.model.problem
        if not wants_representatives(problem):
            return None
        first = cluster_periods(problem)
        small = build_model(representative_problem(problem, first))
        # the LP only: HiGHS's root cut rounds on these models can run far past a time limit
        # (100 s against a 2 s limit on 12 representatives of bench_portfolio's day case)
        result = open_solver(small.program, small.cost, self.options).solve(
            time_limit_s=max(seconds, 0.05), mip_gap=self.options.mip_gap, relax=True)
        if result.values is None:
            return None
        logger.debug("representative periods: %d for %d, LP %.2f", len(small.problem.periods),
                     len(problem.periods), result.outcome.objective)
        self._solved = (small, result.values, first)
        return self._solved

    def reserved(self, seconds: float) -> np.ndarray | None:
        """Reserved counts of the representative periods' LP relaxation, rounded up, one per
        reserved row of the full model."""
        solved = self.lp(seconds)
        if solved is None:
            return None
        small, values, _ = solved
        keys = ["config", "pricing_type"]
        chosen = reserved_rows(small)
        chosen = chosen.assign(value=values[chosen["col"]])
        counts = reserved_rows(self.model)[keys].merge(chosen[[*keys, "value"]], on=keys,
                                                       how="left")["value"]
        return np.ceil(counts.fillna(0.0).to_numpy() - 1e-6) + 0.0

    def plan(self, seconds: float, completion_s: float) -> np.ndarray | None:
        """A whole plan without the full model's LP: every hour routed as its representative's
        LP routes (it carries the peak of its members), rounded up, with the representatives'
        reserved counts rounded up (the rounding's completion within ``completion_s``); None
        without representatives or when rounding breaks a limit."""
        solved = self.lp(seconds)
        if solved is None:
            return None
        small, values, first = solved
        spread = spread_to_hours(
            [(self.model.routes, small.routes, ["workload", "bucket", "route", "config"]),
             (self.model.replicas, small.replicas, ["config", "pricing_type"])],
            values, first, self.model.program.n_cols)
        return rounded_up(self.model, spread, reserved=self.reserved(seconds),
                          options=self.options, seconds=completion_s)


def floor_bound(model: FleetModel, options: SolveOptions, seconds: float) -> float:
    """The LP bound of the representative periods at their members' minimum demand
    (``representative_periods.floor_bound_problem``) when the horizon is long enough to have
    them; -inf otherwise or when that LP is not solved in ``seconds``."""
    if not wants_representatives(model.problem):
        return -math.inf
    small = build_model(floor_bound_problem(model.problem), cost_cover=False)
    result = open_solver(small.program, small.cost, options).solve(
        time_limit_s=max(seconds, 0.05), mip_gap=options.mip_gap, relax=True)
    if result.outcome.status == "optimal" and math.isfinite(result.outcome.bound):
        return result.outcome.bound
    return -math.inf
