r"""Linked problems solved reserved capacity first, then every period on its own.

Reserved replicas (and their nodes) are the only columns shared by all periods. With them
fixed, the periods separate: each period's MILP is small and all run side by side. So:

0. with many hours, representative periods at their members' minimum demand give a first
   lower bound within a second (``representative_periods.floor_bound_problem``);
1. the LP relaxation of the whole model gives a lower bound, the row duals, and reserved counts;
2. the rounded-up LP (``rounding.py``) is a whole-replica plan at once: the fallback. When the
   LP is not solved in time, the representative periods' LP routing, spread to every hour they
   stand for and rounded up, is the fallback instead (the greedy plan when there is none);
3. the first candidate reserved counts (those of a plan on representative periods when the
   horizon has many hours, ``representative_start.py``, and the LP's rounded up) are each
   priced by solving every period's MILP with them fixed, warm-started from the best plan
   moved to them (``reserved_candidates.shifted_plan``: a reserved replica given up is
   rented in every period, one added replaces a rented one), so each pass starts from a
   whole plan;
4. once there is a plan (without one, the time goes to finding one), a Lagrangian bound: each
   period's MILP (split by pool, ``pool_split.py``) with its own copy of the reserved columns,
   priced at that period's share of their cost as the LP's duals value it
   (``lagrangian_prices.py``; the prices of each column sum to its cost). For any such prices
   the sum of the period MILPs' bounds is a lower bound of the whole MILP [1]; at the LP's
   duals the period LPs alone sum to the LP bound, so the periods' integrality raises it;
5. the polish: the best plan's periods solved again with its reserved counts, each to its
   share of the slack that would prove the plan (:meth:`ReservedFirst.polish`);
6. the other candidates (the LP's reserved counts rounded to nearest and down, then the
   load-duration choice of ``reserved_candidates.py``), priced the same way; the cheapest
   plan wins;
7. with time left and the gap still open, a local search over the best plan's reserved
   counts, one replica more or fewer of a configuration at a time (``reserved_search.py``);
8. a second bound, the whole horizon split by model pool at the LP's duals (``pool_split.py``;
   each pool's MILP keeps its whole reserved counts, which the Lagrangian periods relax);
9. the Lagrangian periods solved again to a smaller gap (``lagrangian_periods.py``);
10. then the whole MILP from the best plan.

References:
    [1] A. M. Geoffrion, "Lagrangean relaxation for integer programming", Mathematical
        Programming Study 2 (1974) 82-114.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from fleetplan.optimizer.greedy_fallback import greedy_plan
from fleetplan.optimizer.lagrangian_prices import hour_weights
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.period_solves import (
    Deadline,
    PeriodPrograms,
    PeriodRun,
    PeriodTask,
    solve_periods,
)
from fleetplan.optimizer.representative_start import RepresentativeStart
from fleetplan.optimizer.reserved_candidates import (
    load_duration_reserved,
    other_pools_columns,
    reserved_plan,
    reserved_rows,
    shifted_plan,
    support_closure,
)
from fleetplan.optimizer.reserved_first_bounds import ReservedBounds
from fleetplan.optimizer.reserved_first_shares import (
    COMPLETION_SHARE,
    FIRST_PLAN_SHARE,
    GAP_SHARE,
    POLISH_GAP_SHARE,
    POOL_BOUND_SHARE,
    REPRESENTATIVE_SHARE,
    ROUNDING_SHARE,
    SEARCH_SHARE,
    SMALL_SEARCH_SHARE,
    TIGHTEN_SHARE,
    WHOLE_MIN_S,
)
from fleetplan.optimizer.reserved_search import search_reserved
from fleetplan.optimizer.rounding import is_whole, rounded_within_limits
from fleetplan.optimizer.solve_watchdog import WATCHDOG_COLUMNS
from fleetplan.optimizer.solver import (
    Result,
    SolveOptions,
    SolveOutcome,
    gap_between,
    open_solver,
    solver_name,
)

logger = logging.getLogger(__name__)

#: Largest row violation of a plan accepted as round-off, relative to 1 + the row's bound.
FEASIBLE = 1e-6


class ReservedFirst(ReservedBounds):
    """The reserved-first solve of one linked model (see the module docstring)."""

    def __init__(self, model: FleetModel, programs: PeriodPrograms | None,
                 options: SolveOptions, deadline: Deadline) -> None:
        self.model, self._programs = model, programs
        self.options, self.deadline = options, deadline
        self.solver = solver_name(options)  # the name its results report
        self.best: np.ndarray | None = None
        self.best_cost = math.inf
        self.bound = -math.inf
        self.best_floor = math.nan  # least cost of any plan with the best plan's reserved
        self.proven_infeasible = False
        # the deadline of a caller whose whole MILP follows: the first period plan that breaks
        # a row left out of the periods ends this solve while that MILP would still get
        # WHOLE_MIN_S, as the periods cannot see what decides
        self.whole_milp_deadline: Deadline | None = None
        self.periods_break_rows = False
        self.representatives = RepresentativeStart(model, options)
        self.whole_tried_first = False  # set by a caller that tried the whole MILP first

    @property
    def programs(self) -> PeriodPrograms:
        """The periods' programs, cut out when first needed: on a model of millions of columns
        that takes seconds, which a call whose time ran out before any period is solved
        never spends."""
        if self._programs is None:
            self._programs = PeriodPrograms.of(self.model)
        return self._programs

    def offer(self, values: np.ndarray | None, floor: float = math.nan) -> None:
        """Keep ``values`` if it is the cheapest whole plan so far, with ``floor``, the least
        any plan with its reserved counts costs (NaN: unknown). A plan that breaks a row of
        the whole model is not kept: period plans may break the rows of families left out of
        the periods (a monthly budget, lead times), and the best plan must stay a plan."""
        if values is None:
            return
        violation = self.model.program.relative_violation(values)
        if violation > FEASIBLE or not is_whole(self.model.program, values):
            logger.debug("plan at %.1f s breaks a row left out of the periods by %.3g, or "
                         "is not whole", self.deadline.elapsed(), violation)
            follows = self.whole_milp_deadline
            self.periods_break_rows = follows is not None and follows.remaining() >= WHOLE_MIN_S
            return
        cost = float(self.model.cost @ values)
        logger.debug("plan at %.1f s: %.2f, floor %.2f (best %.2f, bound %.2f)",
                     self.deadline.elapsed(), cost, floor, self.best_cost, self.bound)
        if cost < self.best_cost - 1e-9:
            self.best, self.best_cost, self.best_floor = values, cost, floor

    def completion_s(self) -> float:
        """Time a fallback plan's completion may take (``rounding.completed``) [s]."""
        return self.deadline.share(COMPLETION_SHARE)

    def gap(self) -> float:
        return gap_between(self.best_cost, self.bound)

    def done(self) -> bool:
        return (self.gap() <= self.options.mip_gap or self.deadline.remaining() <= 0
                or self.periods_break_rows)

    def relaxation(self) -> Result:
        """The whole model's LP relaxation, with half the time left; not tried on a model of
        :data:`~fleetplan.optimizer.solve_watchdog.WATCHDOG_COLUMNS` columns or more once the
        time is out (building HiGHS's copy of such a model takes longer than the 0.05 s the LP
        would get)."""
        if self.deadline.remaining() <= 0 and self.model.program.n_cols >= WATCHDOG_COLUMNS:
            return Result(SolveOutcome("time_limit", math.nan, math.nan,
                                       self.solver, 0.0), None)
        solver = open_solver(self.model.program, self.model.cost, self.options)
        result = solver.solve(time_limit_s=max(self.deadline.share(0.5), 0.05),
                              mip_gap=self.options.mip_gap, relax=True)
        if result.values is not None and result.outcome.status == "optimal":
            self.bound = max(self.bound, result.outcome.bound)
        return result

    def abs_gaps(self, share: float) -> dict[int, float]:
        """Each period's share (by hours) of ``share`` of the gap the whole plan may have
        [USD]."""
        reference = self.best_cost if math.isfinite(self.best_cost) else self.bound
        return self._by_hours(share * self.options.mip_gap * max(reference, 0.0))

    def _by_hours(self, total: float) -> dict[int, float]:
        """``total`` split over the periods by their hours."""
        return (total * hour_weights(self.model.problem.periods)).to_dict()

    def periods_with(self, reserved: np.ndarray, closed: dict[int, np.ndarray] | None,
                     budget_s: float, *, only_pools: set[str] | None = None) -> None:
        """Every period's MILP with these reserved replicas fixed (their cost is constant),
        warm-started from the best plan moved to them (``shifted_plan``); with
        ``only_pools``, the other pools' columns held at that start
        (``other_pools_columns``). With ``closed`` columns or ``only_pools`` the periods'
        bounds hold only for the restricted periods, so the plan's floor is unknown."""
        start = None if self.best is None else shifted_plan(self.model, self.best, reserved)
        if only_pools is not None and start is not None:
            held = other_pools_columns(self.model, only_pools)
            _, run = self._fixed_run(reserved, closed, budget_s, start, held)
            self.offer(run.values if run.complete() else None)
            return
        task, run = self._fixed_run(reserved, closed, budget_s, start)
        if not run.complete():
            return
        constant = float(self.model.cost[task.fixed["cols"]] @ task.fixed["values"])
        floor = constant + sum(r.outcome.bound for r in run.results.values())
        self.offer(run.values, floor if closed is None else math.nan)

    def _fixed_run(self, reserved: np.ndarray, closed: dict[int, np.ndarray] | None,
                   budget_s: float, start: np.ndarray | None,
                   held: np.ndarray | None = None) -> tuple[PeriodTask, PeriodRun]:
        # one pool's share of the accepted gap would leave its MILP most of it: a tenth
        gap_share = GAP_SHARE if held is None else POLISH_GAP_SHARE
        task = self._fixed_task(reserved, closed, self.abs_gaps(gap_share), held=held,
                                start=start)
        return task, solve_periods(self.programs, task, self.options, self.deadline,
                                   start=start, budget_s=budget_s,
                                   optional=self.best is not None)

    def polish(self, budget_s: float = math.inf) -> None:
        """The best plan's periods solved again with its reserved replicas, with the time
        left, each to its share (by hours) of the slack that brings the plan within the
        accepted gap of the bound; periods the deadline leaves unsolved keep the best plan's.

        With these reserved replicas no plan costs less than their cost plus the periods'
        bounds (``best_floor``), so periods within their share of
        ``bound / (1 - mip_gap) - best_floor`` make the whole plan proven. When that slack is
        not positive, only a different reserved choice or a higher bound can prove it, and
        the periods are solved to :data:`POLISH_GAP_SHARE` of the accepted gap with half
        the time left (other reserved choices get the rest); without a plan there is nothing
        to polish."""
        if self.best is None:
            return
        reserved = self.best[reserved_rows(self.model)["col"].to_numpy()]
        slack = self.bound / (1.0 - self.options.mip_gap) - self.best_floor
        provable = math.isfinite(slack) and slack > 0
        abs_gaps = self._by_hours(slack) if provable else self.abs_gaps(POLISH_GAP_SHARE)
        task = self._fixed_task(reserved, None, abs_gaps)
        logger.debug("polish at %.1f s: slack %.2f over the best reserved's floor %.2f",
                     self.deadline.elapsed(), slack, self.best_floor)
        budget = min(self.deadline.remaining() if provable else self.deadline.share(0.5),
                     budget_s)
        run = solve_periods(self.programs, task, self.options, self.deadline, start=self.best,
                            budget_s=budget, keep_start=True)
        self.offer(run.values if run.complete() else None, self.best_floor)  # same reserved

    def _fixed_task(self, reserved: np.ndarray, closed: dict[int, np.ndarray] | None,
                    abs_gaps: dict[int, float], *, held: np.ndarray | None = None,
                    start: np.ndarray | None = None) -> PeriodTask:
        fixed = reserved_plan(self.model, reserved)
        if held is not None and start is not None:
            fixed = {"cols": np.concatenate([fixed["cols"], held]),
                     "values": np.concatenate([fixed["values"], start[held]])}
        cost = self.model.cost.copy()
        cost[fixed["cols"]] = 0.0
        return PeriodTask(cost, fixed=fixed, closed=closed, abs_gaps=abs_gaps)

    def solve(self) -> SolveOutcome:
        self.floor_bound()
        lp = self.relaxation()
        if lp.values is None:  # no LP in time: the representatives' plan or the greedy one
            if lp.outcome.status == "infeasible":
                return lp.outcome
            self.offer(self.representative_plan())
            if self.best is None:
                self.offer(greedy_plan(self.model, self.options, self.completion_s()))
            return self.outcome()
        self.offer(rounded_within_limits(self.model, lp.values, self.options,
                                         self.deadline.share(ROUNDING_SHARE)))
        if self.best is None:  # the LP's routing breaks a rule the greedy plan keeps
            self.offer(greedy_plan(self.model, self.options, self.completion_s()))
        rows = reserved_rows(self.model)
        lp_reserved = lp.values[rows["col"].to_numpy()]
        keep = set(rows.loc[lp_reserved > 1e-7, "config"])
        closed = support_closure(self.model, lp.values, keep)
        candidates = [np.ceil(lp_reserved - 1e-6) + 0.0, np.round(lp_reserved) + 0.0,
                      np.floor(lp_reserved + 1e-6) + 0.0]  # + 0.0: no -0.0 twins
        typical = self.representative_reserved()
        if typical is not None:
            candidates.insert(0, typical)
        self.periods_with(candidates[0], closed, self.deadline.share(FIRST_PLAN_SHARE))
        tried = {candidates[0].tobytes()}
        first = 2 if typical is not None else 1  # the LP's rounded up is always priced first
        self.price_candidates(candidates[1:first], closed, tried)
        # without a plan yet, the time goes to finding one: a bound alone is no answer
        bounding = not self.done() and self.best is not None
        run = self.lagrangian(lp, self.deadline.share(0.5)) if bounding else None
        if not self.done():
            self.polish()
        duration = load_duration_reserved(self.model, self.programs, run)
        self.price_candidates(candidates[first:] + ([] if duration is None else [duration]),
                              closed, tried)
        small = self.whole_tried_first
        if not self.done():
            search_reserved(self, lp_reserved,
                            self.deadline.share(SMALL_SEARCH_SHARE if small else SEARCH_SHARE))
        if not self.done() and not small:
            self.pool_bound(lp, self.deadline.share(POOL_BOUND_SHARE))
        if not self.done() and not small:
            self.tighten_bound(self.deadline.share(TIGHTEN_SHARE))
        if not self.done() and self.deadline.remaining() >= WHOLE_MIN_S:
            self.whole()
        return self.outcome()

    def price_candidates(self, candidates: list[np.ndarray], closed: dict[int, np.ndarray],
                         tried: set[bytes]) -> None:
        """Each candidate not yet tried, in order, priced with all the time left: a pass ends
        as soon as its periods are solved, and one the deadline cuts short is dropped."""
        for reserved in candidates:
            if self.done() or reserved.tobytes() in tried:
                continue
            tried.add(reserved.tobytes())
            self.periods_with(reserved, closed, self.deadline.remaining())

    def representative_reserved(self) -> np.ndarray | None:
        """The representative periods' LP reserved counts, rounded up (``representative_start``)."""
        return self.representatives.reserved(self.deadline.share(REPRESENTATIVE_SHARE))

    def representative_plan(self) -> np.ndarray | None:
        """The representative periods' plan spread to every hour (``representative_start``)."""
        return self.representatives.plan(self.deadline.share(REPRESENTATIVE_SHARE),
                                         self.completion_s())

    def whole(self) -> None:
        """The whole MILP from the best plan, with the time left: it can still move reserved
        capacity and tighten the bound."""
        result = open_solver(self.model.program, self.model.cost, self.options).solve(
            time_limit_s=max(self.deadline.remaining(), 0.05), mip_gap=self.options.mip_gap,
            start=self.best)
        self.offer(result.values)
        self.proven_infeasible = result.outcome.status == "infeasible"
        if math.isfinite(result.outcome.bound):
            self.bound = max(self.bound, result.outcome.bound)

    def outcome(self) -> SolveOutcome:
        seconds = self.deadline.elapsed()
        if self.best is None:
            status = "infeasible" if self.proven_infeasible else "no_solution"
            return SolveOutcome(status, math.nan, math.nan, self.solver, seconds,
                                self.bound if math.isfinite(self.bound) else math.nan)
        self.model.values = self.best
        gap = self.gap()
        status = "optimal" if gap <= self.options.mip_gap + 1e-12 else "time_limit"
        bound = self.bound if math.isfinite(self.bound) else math.nan
        return SolveOutcome(status, gap, self.best_cost, self.solver, seconds, bound)

