"""The lower bounds of the reserved-first solve (``reserved_first.py``), one method each.

A mixin of :class:`~fleetplan.optimizer.reserved_first.ReservedFirst`: each pass reads the
solve's model, options, deadline and best plan, and raises its ``bound``, never lowers it:

- the floor: the representative periods at their minimum demand, before any LP;
- the Lagrangian periods: every period's MILP with its own priced copy of the reserved columns
  (``lagrangian_periods.py``), and the same periods solved again to a smaller gap;
- the pools: the whole horizon split by model pool at the LP's duals (``pool_split.py``), each
  pool's MILP keeping the whole reserved counts the Lagrangian periods relax.
"""

from __future__ import annotations

import dataclasses
import logging

from fleetplan.optimizer.lagrangian_periods import LagrangianPeriods, tighter
from fleetplan.optimizer.period_solves import PERIOD_THREADS, PeriodRun
from fleetplan.optimizer.pool_split import pool_bound
from fleetplan.optimizer.representative_start import floor_bound
from fleetplan.optimizer.reserved_first_shares import (
    FLOOR_SHARE,
    GAP_SHARE,
    POOL_BOUND_MIN_S,
    TIGHT_GAP_SHARE,
)
from fleetplan.optimizer.solver import Result

logger = logging.getLogger(__name__)


class ReservedBounds:
    """The bound passes of the reserved-first solve (module docstring)."""

    _lagrangian: LagrangianPeriods | None = None

    def floor_bound(self) -> None:
        """A first bound from the representative periods at their minimum demand (see
        :func:`floor_bound`): the full model's LP may not finish in a short time limit."""
        self.bound = max(self.bound, floor_bound(self.model, self.options,
                                                 self.deadline.share(FLOOR_SHARE)))
        logger.debug("floor bound at %.1f s: %.2f", self.deadline.elapsed(), self.bound)

    def lagrangian(self, lp: Result, budget_s: float) -> PeriodRun | None:
        """Lower bound: every period's MILP with its own priced copy of the reserved columns
        (module docstring, ``lagrangian_periods.py``); a run cut short still bounds."""
        self._lagrangian, run = LagrangianPeriods.solved(
            self.programs, lp, self.options, self.deadline, start=self.best,
            abs_gaps=self.abs_gaps(GAP_SHARE), budget_s=budget_s)
        if self._lagrangian is None:
            return None
        self.bound = max(self.bound, self._lagrangian.bound())
        logger.debug("Lagrangian bound at %.1f s: %.2f (%d of %d periods solved)",
                     self.deadline.elapsed(), self.bound, len(self._lagrangian.proven),
                     len(self._lagrangian.shares))
        return run

    def pool_bound(self, lp: Result, budget_s: float) -> None:
        """Lower bound: the whole horizon split by model pool at the LP's duals
        (``pool_split.pool_bound``), each pool's MILP over every period with its own whole
        reserved counts, the pools side by side on both cores. It keeps the integrality the
        Lagrangian periods relax (whole reserved counts, each serving every period) and relaxes
        what they keep (the rows that tie pools: the spot share, shared nodes)."""
        if budget_s < POOL_BOUND_MIN_S or lp.duals is None:
            return
        program = self.model.program
        split = pool_bound(program, self.model.cost, program.col_lower, program.col_upper,
                           lp.duals, self.programs.groups,
                           dataclasses.replace(self.options, threads=1), budget_s,
                           threads=PERIOD_THREADS)
        if split is not None:
            self.bound = max(self.bound, split.bound)
        logger.debug("pool bound at %.1f s: %.2f", self.deadline.elapsed(), self.bound)

    def tighten_bound(self, budget_s: float) -> None:
        """The Lagrangian periods solved again, each from its plan, to
        :data:`TIGHT_GAP_SHARE` of the accepted gap: their bound can only rise."""
        if self._lagrangian is None or budget_s <= 0:
            return
        self._lagrangian.tighten(
            self.programs, tighter(self.options, TIGHT_GAP_SHARE / GAP_SHARE), self.deadline,
            start=self.best, abs_gaps=self.abs_gaps(TIGHT_GAP_SHARE), budget_s=budget_s)
        self.bound = max(self.bound, self._lagrangian.bound())
        logger.debug("tightened bound at %.1f s: %.2f", self.deadline.elapsed(), self.bound)
