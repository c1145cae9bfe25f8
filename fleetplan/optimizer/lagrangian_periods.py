"""The Lagrangian bound's periods: every period's MILP with its own priced copy of the
reserved columns, solved once quickly and, with time left, again to a smaller gap.

The prices are the LP's (``lagrangian_prices.period_prices``). For any prices summing to the
reserved columns' costs, the periods' bounds sum to a lower bound of the whole MILP [1]; a
period no pass solved, or whose solve proves less, counts its share of the LP bound
(``lagrangian_prices.lp_shares``), so a pass cut short still bounds the whole. Each period's
best bound over the passes is kept, so solving again can only raise the sum: on the portfolio
benchmark's year case the first pass leaves its periods 0.2 % of the bound from their plans,
and solving them again to a fifth of that gap lifts the bound from $136.11/h to $136.16/h in
about 4 s (``bench_portfolio.py --case year``).

References:
    [1] A. M. Geoffrion, "Lagrangean relaxation for integer programming", Mathematical
        Programming Study 2 (1974) 82-114.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from fleetplan.optimizer.lagrangian_prices import lp_shares, period_prices, priced_cost
from fleetplan.optimizer.period_solves import (
    PeriodPrograms,
    PeriodRun,
    PeriodTask,
    solve_periods,
)
from fleetplan.optimizer.solve_results import Deadline
from fleetplan.optimizer.solver import Result, SolveOptions


@dataclass
class LagrangianPeriods:
    """The periods' priced objective (a function of the period), their shares of the LP
    bound [USD], the best bound each has proven [USD] and the plan each found (one value per
    column of its part)."""

    cost: object
    shares: dict[int, float]
    proven: dict[int, float] = field(default_factory=dict)
    plans: dict[int, np.ndarray] = field(default_factory=dict)

    @classmethod
    def solved(cls, programs: PeriodPrograms, lp: Result, options: SolveOptions,
               deadline: Deadline, *, start: np.ndarray | None, abs_gaps: dict[int, float],
               budget_s: float) -> tuple[LagrangianPeriods | None, PeriodRun | None]:
        """The first pass: every period split by pool (``pool_split.py``), then the periods
        furthest from their bounds whole, within ``abs_gaps`` [USD] and ``budget_s``; (None,
        None) when the LP gives no prices."""
        prices = period_prices(programs.model, programs, lp)
        if prices is None:
            return None, None
        cost = priced_cost(programs, prices)
        task = PeriodTask(cost, abs_gaps=abs_gaps, split_by_pool=True)
        run = solve_periods(programs, task, options, deadline, start=start, budget_s=budget_s,
                            optional=True)
        periods = cls(cost, lp_shares(programs, lp, cost))
        periods.record(run)
        return periods, run

    def tighten(self, programs: PeriodPrograms, options: SolveOptions, deadline: Deadline, *,
                start: np.ndarray | None, abs_gaps: dict[int, float], budget_s: float) -> None:
        """Every period solved again the same way, from its plan, within the smaller
        ``abs_gaps`` [USD] and ``options.mip_gap`` (each period's pools are held to the
        relative gap too)."""
        task = PeriodTask(self.cost, abs_gaps=abs_gaps, split_by_pool=True)
        run = solve_periods(programs, task, options, deadline, start=start, budget_s=budget_s,
                            optional=True, period_starts=self.plans)
        self.record(run)

    def record(self, run: PeriodRun) -> None:
        """Keep each period's higher bound, and its plan."""
        for period, result in run.results.items():
            if math.isfinite(result.outcome.bound):
                self.proven[period] = max(self.proven.get(period, -math.inf),
                                          result.outcome.bound)
            if result.values is not None:
                self.plans[period] = result.values

    def bound(self) -> float:
        """The periods' bounds summed, each at least its share of the LP bound [USD]."""
        return sum(max(self.proven.get(t, -math.inf), share)
                   for t, share in self.shares.items())


def tighter(options: SolveOptions, share: float) -> SolveOptions:
    """``options`` with ``share`` of its accepted gap."""
    return dataclasses.replace(options, mip_gap=options.mip_gap * share)
