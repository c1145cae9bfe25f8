"""Re-solves of relaxed problems, two at a time from one queue: the worker thread and the
caller's each take the next.

Marginal values (``marginal_values.py``) price each binding limit and each looser SLO by
solving the problem again with it relaxed. This module holds that re-solve (``relaxed_cost``)
and the queue that runs them (``ReSolves``): which begin before the base plan is solved, which
wait for it to begin from (``carried_plan.py``), and how the caller takes over the tasks the
worker has not begun.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import NamedTuple

import numpy as np

from fleetplan.optimizer.carried_plan import carried_start
from fleetplan.optimizer.decomposition import solve_fleet
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.milp import FleetModel, build_model
from fleetplan.optimizer.solve_results import Deadline
from fleetplan.optimizer.solver import SolveOptions

#: Least time worth a re-solve [s]; with less left in the call a limit is not priced.
MIN_RESOLVE_S = 0.05

#: Re-solves run side by side (HiGHS releases the interpreter while it solves), the caller's
#: thread one of them: one per core of the 2-core machines this is sized for.
PARALLEL_RESOLVES = 2

#: How long a looser SLO's re-solve begun while the base plan is solved waits, once its model
#: is built, for the base plan to begin from [s] (counted from when it was begun). The
#: example's base MILP is solved in 0.55 s (``bench_example_plan.py``), well within it; a base
#: plan that takes longer (the example with spot capped at 20 %, 11 s without its marginal
#: values, whose looser SLOs run to their 10 s limit either way) leaves them to begin from
#: scratch beside it. Whichever way one begins, its plan is within the accepted gap.
CARRY_WAIT_S = 2.0


class ReSolve(NamedTuple):
    """A relaxed problem and, when its family's relaxation is a change of the base model's rows
    (``relaxed_variants``), that changed model and the base plan to begin from."""

    problem: Problem
    variant: FleetModel | None = None
    start: np.ndarray | None = None


def relaxed_cost(problem: Problem, options: SolveOptions, deadline: Deadline,
                 variant: FleetModel | None = None,
                 start: np.ndarray | None = None) -> tuple[float, float]:
    """Cost [USD/month] and gap of the relaxed ``problem``'s plan; NaN when the call's time is
    up or no plan was found. ``variant``: a model of ``problem`` made before (the base model
    changed to it, or one built for it while the base plan was solved), solved from ``start``
    (a plan of ``variant``: the base plan, or the base plan carried onto it) instead of a
    model built anew."""
    seconds = min(options.time_limit_s, deadline.remaining())
    if seconds < MIN_RESOLVE_S:
        return math.nan, math.nan
    # Built anew without the cost-cover cut: a valid cut changes no optimum, and building it
    # takes a small MILP per pool, longer than the re-solve itself on plans of the example's size.
    model = variant if variant is not None else build_model(problem, cost_cover=False)
    outcome = solve_fleet(model, options, Deadline(seconds), start=start)
    if not outcome.has_solution:
        return math.nan, math.nan
    return outcome.objective / problem.horizon_months, outcome.gap


class ReSolves:
    """Relaxed problems solved two at a time from one queue, by a worker thread and by the
    caller's.

    Problems handed to ``start`` begin on the worker at once, so a caller may start those that
    do not depend on the base plan (looser SLOs) before solving it: the worker builds their
    models while HiGHS, which releases the interpreter, solves the base plan. Each solve begins
    from the base plan carried onto its model (``carried_plan.py``) when the caller reports it
    solved (``base_solved``) within :data:`CARRY_WAIT_S`, and from scratch beside a base plan
    that takes longer. ``queue`` puts the binding limits' re-solves
    behind them, models built anew before those begun from the base plan (a re-solve built
    anew takes longer, so the longest come first and the two threads end close together), and
    ``results`` has the caller take tasks from the head of the queue as the worker does; two
    re-solves share the 2-core machines this is sized for.
    """

    def __init__(self, options: SolveOptions, deadline: Deadline) -> None:
        self.options, self.deadline = options, deadline
        self._queue: deque[tuple[Callable[[], tuple[float, float]], Future]] = deque()
        self._lock = threading.Lock()
        self._base: FleetModel | None = None
        self._base_ready, self._closing = threading.Event(), False
        self._built_models: list[Future] = []  # of the looser problems started
        self._carried: dict[Future, np.ndarray | None] = {}  # base plan carried, by build
        self._carrying: dict[Future, threading.Lock] = {}  # one carry per build, by either thread
        self._worker = ThreadPoolExecutor(max_workers=PARALLEL_RESOLVES - 1,
                                          thread_name_prefix="fleetplan-resolve")

    def _queued(self, solves: list[Callable[[], object]]) -> list[Future]:
        """Futures of ``solves``, queued; the worker is told once per solve to take the next."""
        futures = [Future() for _ in solves]
        with self._lock:
            self._queue.extend(zip(solves, futures, strict=True))
        for _ in solves:
            self._worker.submit(self._run_next)
        return futures

    def _run_next(self) -> bool:
        """Run the task at the head of the queue; False when none is left."""
        with self._lock:
            if not self._queue:
                return False
            solve, future = self._queue.popleft()
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(solve())
            except BaseException as error:  # handed to whoever waits for it
                future.set_exception(error)
                if not isinstance(error, Exception):  # an interrupt or SIGTERM's exit
                    raise  # stops this thread at once
        return True

    def start(self, make_problems: list[Callable[[], Problem]]) -> list[Future]:
        """Begin solving the problems ``make_problems`` make (callables, so making them runs on
        the worker too): all their models built first, then each solve begun from the base plan
        carried onto it when that plan is solved (``base_solved``) within
        :data:`CARRY_WAIT_S` of now, else from scratch."""
        wait_until = time.perf_counter() + CARRY_WAIT_S
        built = self._queued([partial(self._built, make) for make in make_problems])
        self._built_models += built
        self._carrying.update((future, threading.Lock()) for future in built)
        return self._queued([partial(self._looser, model, wait_until) for model in built])

    def base_solved(self, base: FleetModel | None) -> None:
        """The base model, solved (None: no base plan), for the started re-solves to begin
        from. The base plan is carried onto the models already built here, on the caller's
        thread, the first before the waiting re-solves are let go: carried on the worker it
        would compete for the interpreter with the caller's assembling of the plan."""
        self._base = base if base is not None and base.values is not None else None
        for index, built in enumerate(self._built_models):
            model = built.result()[1] if built.done() and built.exception() is None else None
            if self._base is not None and model is not None:
                self._carry(built, model)
            if index == 0:
                self._base_ready.set()
        self._base_ready.set()

    def _built(self, make: Callable[[], Problem]) -> tuple[Problem, FleetModel | None]:
        problem = make()
        if self.deadline.remaining() < MIN_RESOLVE_S:
            return problem, None
        return problem, build_model(problem, cost_cover=False)

    def _looser(self, built: Future, wait_until: float) -> tuple[float, float]:
        problem, model = built.result()
        self._base_ready.wait(max(0.0, wait_until - time.perf_counter()))
        if self._closing or model is None:  # no plan to compare with, or no time left
            return math.nan, math.nan
        base = self._base if self._base_ready.is_set() else None
        start = None if base is None else self._carry(built, model)
        return relaxed_cost(problem, self.options, self.deadline, model, start)

    def _carry(self, built: Future, model: FleetModel) -> np.ndarray | None:
        """The base plan carried onto ``built``'s model, carried once: a thread that finds the
        other carrying it waits for that carry rather than repeating it beside it."""
        with self._carrying[built]:
            if built not in self._carried:
                self._carried[built] = carried_start(self._base, model)
            return self._carried[built]

    def queue(self, resolves: list[ReSolve]) -> list[Future]:
        """Queue ``relaxed_cost`` of ``resolves``, models built anew before those changed from
        the base model, behind the tasks queued before; their futures, in the given order."""
        order = sorted(range(len(resolves)), key=lambda i: resolves[i].variant is not None)
        futures = dict(zip(order, self._queued([
            partial(relaxed_cost, resolves[i].problem, self.options, self.deadline,
                    resolves[i].variant, resolves[i].start) for i in order]), strict=True))
        return [futures[i] for i in range(len(resolves))]

    def results(self, *groups: list[Future]) -> list[list]:
        """Take tasks from the head of the queue, as the worker does, until none is left; then
        the results of each group of futures."""
        while self._run_next():
            pass
        return [[future.result() for future in group] for group in groups]

    def close(self) -> None:
        """Drop problems not yet begun and wait for the one running (bounded by its limit)."""
        self._closing = True
        self._base_ready.set()  # a re-solve waiting for the base plan gives up at once
        with self._lock:
            dropped, self._queue = self._queue, deque()
        for _, future in dropped:
            future.cancel()
        self._worker.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ReSolves:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
