r"""Linked problems solved reserved capacity first, then every period on its own.

Reserved replicas (and their nodes) are the only columns shared by all periods. With them
fixed, the periods separate: each period's MILP is small and all run side by side. So:

0. with many hours, representative periods at their members' minimum demand give a first
   lower bound within a second (``representative_periods.floor_bound_problem``);
1. the LP relaxation of the whole model gives a lower bound, the row duals, and reserved counts;
2. the rounded-up LP (``rounding.py``) is a whole-replica plan at once: the fallback. When the
   LP is not solved in time, the representative periods' LP routing, spread to every hour they
   stand for and rounded up, is the fallback instead (the greedy plan when there is none);
3. candidate reserved counts (those of a plan on representative periods when the horizon has
   many hours (``representative_periods.py``), the LP's rounded up, to nearest and down, and
   the load-duration choice below) are each priced by solving every period's MILP with them fixed; the cheapest
   plan wins;
4. a Lagrangian bound: each period's MILP (split by pool, ``pool_split.py``) with its own copy
   of the reserved columns, priced at that period's share of their cost as the LP's duals value
   it (:func:`period_prices`; the prices of each column sum to its cost). For any such prices
   the sum of the period MILPs' bounds is a lower bound of the whole MILP [1]; at the LP's
   duals the period LPs alone sum to the LP bound, so the periods' integrality raises it.

5. with time left and the gap still open, the whole MILP from the best plan.

The load-duration choice: the r-th reserved replica of a configuration is worth buying when
the periods that use at least r replicas of it (in the Lagrangian periods' plans) make up at
least the reserved-to-on-demand price ratio of the hours.

References:
    [1] A. M. Geoffrion, "Lagrangean relaxation for integer programming", Mathematical
        Programming Study 2 (1974) 82-114.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from fleetplan.optimizer.milp import FleetModel, build_model
from fleetplan.optimizer.period_solves import (
    Deadline,
    PeriodPrograms,
    PeriodRun,
    PeriodTask,
    _local,
    solve_periods,
)
from fleetplan.optimizer.representative_periods import (
    cluster_periods,
    floor_bound_problem,
    representative_problem,
    spread_to_hours,
    wants_representatives,
)
from fleetplan.optimizer.rounding import greedy_plan, rounded_up
from fleetplan.optimizer.solver import Result, SolveOptions, SolveOutcome, gap_between, open_solver

logger = logging.getLogger(__name__)

#: Share of the time left the first reserved candidate's periods may take.
FIRST_PLAN_SHARE = 0.6

#: Share of the time left the representative-period problem may take.
REPRESENTATIVE_SHARE = 0.25

#: Least time left for which the whole MILP is run at the end [s]. HiGHS checks its time limit
#: only between root cut rounds: given under 2 s, the 7,465-column MILP of bench_optimizer.py's
#: case (b) ran past the call's deadline.
WHOLE_MIN_S = 2.0

#: Share of the time left the floor bound's LP may take (it takes well under a second).
FLOOR_SHARE = 0.2


def reserved_rows(model: FleetModel) -> pd.DataFrame:
    """The reserved replica rows of the model (one value for the whole horizon)."""
    return model.replicas[model.replicas["period"] < 0]


def reserved_plan(model: FleetModel, replicas: np.ndarray) -> dict[str, np.ndarray]:
    """Reserved replica counts (one per reserved replica row) with the nodes they need:
    ``{'cols', 'values'}`` for fixing them."""
    table = reserved_rows(model).assign(value=replicas)
    nodes = model.nodes[model.nodes["period"] < 0]
    gpus = (table["value"] * table["tp"]).groupby([table["gpu"], table["pricing_type"]]).sum()
    needed = gpus.reindex(nodes.set_index(["gpu", "pricing_type"]).index, fill_value=0.0)
    per_node = nodes["gpus_per_node"].to_numpy(dtype=float)
    node_values = needed.to_numpy() / per_node
    node_values = np.where(per_node > 1, np.ceil(node_values - 1e-9), node_values)
    return {"cols": np.concatenate([table["col"], nodes["col"]]).astype(np.int64),
            "values": np.concatenate([replicas, node_values]).astype(float)}


def support_closure(model: FleetModel, values: np.ndarray,
                    keep: set[str] | None = None) -> dict[int, np.ndarray]:
    """Per period, the routing and flexible replica columns of configurations the LP does not
    use in that period (nor in ``keep``): closed in quick period solves."""
    routes = model.routes.assign(share=values[model.routes["col"]])
    used = routes.loc[routes["share"] > 1e-7, ["config", "period"]].drop_duplicates()
    used = pd.MultiIndex.from_frame(used)
    keep = keep or set()
    closed = []
    for table in (model.routes, model.replicas[model.replicas["period"] >= 0]):
        key = pd.MultiIndex.from_frame(table[["config", "period"]])
        shut = ~key.isin(used) & ~table["config"].isin(keep).to_numpy()
        closed.append(table.loc[shut, ["period", "col"]])
    closed = pd.concat(closed, ignore_index=True)
    return {int(t): group["col"].to_numpy(dtype=np.int64)
            for t, group in closed.groupby("period")}


class ReservedFirst:
    """The reserved-first solve of one linked model (see the module docstring)."""

    def __init__(self, model: FleetModel, programs: PeriodPrograms, options: SolveOptions,
                 deadline: Deadline) -> None:
        self.model, self.programs = model, programs
        self.options, self.deadline = options, deadline
        self.best: np.ndarray | None = None
        self.best_cost = math.inf
        self.bound = -math.inf
        self.proven_infeasible = False
        self._representative: tuple | None = None  # representative_lp's answer, once solved

    def offer(self, values: np.ndarray | None) -> None:
        """Keep ``values`` if it is the cheapest whole plan so far."""
        if values is None:
            return
        cost = float(self.model.cost @ values)
        logger.debug("plan at %.1f s: %.2f (best %.2f, bound %.2f)", self.deadline.elapsed(),
                     cost, self.best_cost, self.bound)
        if cost < self.best_cost - 1e-9:
            self.best, self.best_cost = values, cost

    def gap(self) -> float:
        return gap_between(self.best_cost, self.bound)

    def done(self) -> bool:
        return self.gap() <= self.options.mip_gap or self.deadline.remaining() <= 0

    def relaxation(self) -> Result:
        solver = open_solver(self.model.program, self.model.cost, self.options)
        result = solver.solve(time_limit_s=max(self.deadline.share(0.5), 0.05),
                              mip_gap=self.options.mip_gap, relax=True)
        if result.values is not None and result.outcome.status == "optimal":
            self.bound = max(self.bound, result.outcome.bound)
        return result

    def abs_gaps(self) -> dict[int, float]:
        """Each period's share (by hours) of half the gap the whole plan may have [USD]."""
        hours = self.model.problem.periods.set_index("period")["hours"]
        reference = self.best_cost if math.isfinite(self.best_cost) else self.bound
        target = self.options.mip_gap * max(reference, 0.0)
        return (0.5 * target * hours / hours.sum()).to_dict()

    def periods_with(self, reserved: np.ndarray, closed: dict[int, np.ndarray] | None,
                     budget_s: float) -> None:
        """Every period's MILP with these reserved replicas fixed (their cost is constant)."""
        fixed = reserved_plan(self.model, reserved)
        cost = self.model.cost.copy()
        cost[fixed["cols"]] = 0.0
        task = PeriodTask(cost, fixed=fixed, closed=closed, abs_gaps=self.abs_gaps())
        run = solve_periods(self.programs, task, self.options, self.deadline, start=self.best,
                            budget_s=budget_s, optional=self.best is not None)
        self.offer(run.values if run.complete() else None)

    def lagrangian(self, lp: Result, budget_s: float) -> PeriodRun | None:
        """Lower bound: every period's root node with its own priced copy of the reserved
        columns (module docstring)."""
        prices = period_prices(self.model, self.programs, lp)
        if prices is None:
            return None
        reserved = self.programs.reserved

        def cost(period: int) -> np.ndarray:
            part = self.programs.parts[period]
            own = self.model.cost[part.cols].copy()
            where, which = _local(part, reserved)
            own[where] = prices[period][which]
            return own

        task = PeriodTask(cost, abs_gaps=self.abs_gaps(), split_by_pool=True)
        run = solve_periods(self.programs, task, self.options, self.deadline, start=self.best,
                            budget_s=budget_s, optional=True)
        bounds = [r.outcome.bound for r in run.results.values()]
        if len(bounds) == len(self.programs.parts) and all(math.isfinite(b) for b in bounds):
            self.bound = max(self.bound, float(sum(bounds)))
        logger.debug("Lagrangian bound at %.1f s: %.2f", self.deadline.elapsed(), self.bound)
        return run

    def solve(self) -> SolveOutcome:
        self.floor_bound()
        lp = self.relaxation()
        if lp.values is None:  # no LP in time: the representatives' plan or the greedy one
            if lp.outcome.status == "infeasible":
                return lp.outcome
            self.offer(self.representative_plan())
            if self.best is None:
                self.offer(greedy_plan(self.model))
            return self.outcome()
        self.offer(rounded_up(self.model, lp.values))
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
        run = self.lagrangian(lp, self.deadline.share(0.5)) if not self.done() else None
        self.price_candidates(candidates[1:], closed, tried)
        duration = load_duration_reserved(self.model, self.programs, run)
        if duration is not None:
            self.price_candidates([duration], closed, tried)
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

    def floor_bound(self) -> None:
        """A first bound from the representative periods at their minimum demand (see
        :func:`floor_bound`): the full model's LP may not finish in a short time limit."""
        self.bound = max(self.bound, floor_bound(self.model, self.options,
                                                 self.deadline.share(FLOOR_SHARE)))
        logger.debug("floor bound at %.1f s: %.2f", self.deadline.elapsed(), self.bound)

    def representative_lp(self) -> tuple[FleetModel, np.ndarray, pd.Series] | None:
        """The representative problem's model, its LP solution and the period mapping
        (``representative_periods``), solved once; None when the problem is short enough to
        need none or the LP is not solved in time."""
        if self._representative is not None:
            return self._representative or None
        self._representative = ()
        problem = self.model.problem
        if not wants_representatives(problem):
            return None
        first = cluster_periods(problem)
        small = build_model(representative_problem(problem, first))
        # the LP only: HiGHS's root cut rounds on these models can run far past a time limit
        # (100 s against a 2 s limit on 12 representatives of bench_portfolio's day case)
        result = open_solver(small.program, small.cost, self.options).solve(
            time_limit_s=max(self.deadline.share(REPRESENTATIVE_SHARE), 0.05),
            mip_gap=self.options.mip_gap, relax=True)
        if result.values is None:
            return None
        logger.debug("representative periods: %d for %d, LP %.2f (full-model bound %.2f)",
                     len(small.problem.periods), len(problem.periods), result.outcome.objective,
                     self.bound)
        self._representative = (small, result.values, first)
        return self._representative

    def representative_reserved(self) -> np.ndarray | None:
        """Reserved counts of the representative periods' LP relaxation, rounded up."""
        solved = self.representative_lp()
        if solved is None:
            return None
        small, values, _ = solved
        keys = ["config", "pricing_type"]
        chosen = reserved_rows(small)
        chosen = chosen.assign(value=values[chosen["col"]])
        counts = reserved_rows(self.model)[keys].merge(chosen[[*keys, "value"]], on=keys,
                                                       how="left")["value"]
        return np.ceil(counts.fillna(0.0).to_numpy() - 1e-6) + 0.0

    def representative_plan(self) -> np.ndarray | None:
        """A whole plan without the full model's LP: every hour routed as its representative's
        LP routes (it carries the peak of its members), rounded up, with the representatives'
        reserved counts rounded up; None without representatives or when rounding breaks a
        limit."""
        solved = self.representative_lp()
        if solved is None:
            return None
        small, values, first = solved
        spread = spread_to_hours(
            [(self.model.routes, small.routes, ["workload", "bucket", "route", "config"]),
             (self.model.replicas, small.replicas, ["config", "pricing_type"])],
            values, first, self.model.program.n_cols)
        return rounded_up(self.model, spread, reserved=self.representative_reserved())

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
            return SolveOutcome(status, math.nan, math.nan, "HiGHS", seconds,
                                self.bound if math.isfinite(self.bound) else math.nan)
        self.model.values = self.best
        gap = self.gap()
        status = "optimal" if gap <= self.options.mip_gap + 1e-12 else "time_limit"
        bound = self.bound if math.isfinite(self.bound) else math.nan
        return SolveOutcome(status, gap, self.best_cost, "HiGHS", seconds, bound)


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


def period_prices(model: FleetModel, programs: PeriodPrograms,
                  lp: Result) -> dict[int, np.ndarray] | None:
    r"""Each period's price of each reserved column, from the LP's row duals :math:`\pi`.

    A reserved column :math:`j` of cost :math:`c_j` appears in rows of single periods and in
    horizon-wide rows, which every period program holds a copy of. Period :math:`t` of weight
    :math:`w_t` (its share of the hours) pays

    .. math:: \lambda_{tj} = \sum_{r \in t} a_{rj} \pi_r
              + w_t \Big(\sum_{r \in \text{shared}} a_{rj} \pi_r + d_j\Big),
        \qquad d_j = c_j - \sum_r a_{rj} \pi_r,

    so :math:`\sum_t \lambda_{tj} = c_j` exactly, and the LP duals (a shared row's scaled by
    :math:`w_t`) stay feasible for every period's LP, whose optimal values therefore sum to
    at least the LP bound. Prices may be negative (a reserved replica's share of a node row in
    a period that does not use it): clipping them breaks the sum and, on ``bench_portfolio``'s
    day case, took the bound 3 % below the LP's."""
    if lp.duals is None:
        return None
    reserved = programs.reserved
    table = model.constraint_table()
    row_period = np.full(model.program.n_rows, -1)
    row_period[table["row"].to_numpy()] = table["period"].to_numpy()
    block = model.program.matrix[:, reserved].tocoo()
    value = block.data * lp.duals[block.row]
    periods = model.problem.periods
    position = pd.Series(np.arange(len(periods)), index=periods["period"].to_numpy())
    mine = row_period[block.row] >= 0
    per_period = np.zeros((len(periods), len(reserved)))
    np.add.at(per_period, (position.reindex(row_period[block.row][mine]).to_numpy(np.int64),
                           block.col[mine]), value[mine])
    shared = np.zeros(len(reserved))
    np.add.at(shared, block.col[~mine], value[~mine])
    reduced = model.cost[reserved] - per_period.sum(axis=0) - shared
    weight = (periods["hours"] / periods["hours"].sum()).to_numpy()
    prices = per_period + weight[:, None] * (shared + reduced)[None, :]
    return dict(zip(periods["period"].to_numpy().tolist(), prices))


def load_duration_reserved(model: FleetModel, programs: PeriodPrograms,
                           run: PeriodRun | None) -> np.ndarray | None:
    """Reserved counts from the periods' own reserved usage: the r-th replica is reserved when
    the hours of periods using at least r of it reach the price ratio (module docstring)."""
    if run is None or not run.complete():
        return None
    rows = reserved_rows(model)
    periods = model.problem.periods
    usage = np.zeros((len(periods), len(rows)))
    for i, period in enumerate(periods["period"]):
        result, part = run.results[period], programs.parts[period]
        if result.values is None:
            return None
        where, which = _local(part, rows["col"].to_numpy())
        usage[i, which] = np.round(result.values[where])
    hours = periods["hours"].to_numpy()
    offers = model.problem.offers.set_index(["gpu", "pricing_type"])["usd_per_gpu_hour"]
    on_demand = offers.reindex(pd.MultiIndex.from_arrays(
        [rows["gpu"], pd.Series("on_demand", index=rows.index)])).to_numpy(dtype=float)
    reserved_price = offers.reindex(pd.MultiIndex.from_frame(
        rows[["gpu", "pricing_type"]])).to_numpy(dtype=float)
    ratio = np.nan_to_num(reserved_price / on_demand, nan=1.0)
    levels = np.arange(1, int(usage.max(initial=0)) + 1)
    # hours of periods using at least each level of each reserved row: [level, row]
    covered = ((usage[None, :, :] >= levels[:, None, None]) * hours[None, :, None]).sum(axis=1)
    return ((covered / hours.sum()) >= ratio[None, :]).sum(axis=0).astype(float)
