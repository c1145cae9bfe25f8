"""Solve a LinearProgram: HiGHS in-process through highspy, CBC (through PuLP) as the fallback.

``open_solver`` passes the program to the solver once; the returned solver is then re-solved
with changed costs, column bounds and row bounds (per-period solves, marginal values, the
second phase of an elastic model), each run warm-started from a given solution.

HiGHS gets the whole matrix in one call (``passModel``) and reports its true status, the dual
bound and the gap. CBC (``cbc_solver.py``) is for machines without highspy: PuLP builds its
model term by term from the same arrays (slow for large models) and reports no bound. Both
answer with the types of ``solve_results.py``, which this module also exports.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time

import numpy as np

from fleetplan.errors import InvalidValueError
from fleetplan.optimizer.cbc_solver import CbcSolver
from fleetplan.optimizer.linear_program import LinearProgram
from fleetplan.optimizer.solve_results import (
    Result,
    SolveOptions,
    SolveOutcome,
    gap_between,
    stopped_solve,
)
from fleetplan.optimizer.solve_watchdog import run_with_watchdog, wants_watchdog

try:
    import highspy
except ImportError:  # optional: CBC (PuLP) solves without it
    highspy = None

logger = logging.getLogger(__name__)

SOLVERS: tuple[str, ...] = ("auto", "highs", "cbc")

#: Relative difference between a reported objective and its values' cost taken as round-off.
CONSISTENT = 1e-7

#: Least time left worth a second run when the first returned an inconsistent answer [s].
LAST_RUN_S = 0.05

#: HiGHS's restart of the root node once presolve and the first cuts fix many integer columns.
#: Off: over the built-in example, eleven variants of it and the shipped scenarios
#: (``benchmarks/bench_solver_settings.py``) whole plans were faster without restarts in six
#: (the example plan 1.86 s against 2.31 s), within 5 % in nine and slower in one (the example
#: with spot capped at 20 %); ``bench_portfolio.py``'s cases and ``bench_whatif.py`` were
#: unchanged.
MIP_RESTARTS = False

#: Guards the first HiGHS instance of the process (see :func:`new_highs`).
_FIRST_HIGHS = {"lock": threading.Lock(), "done": False}

#: Per OS thread, the ``threads`` its HiGHS scheduler was started with (match_thread_scheduler).
_SCHEDULER = threading.local()


def new_highs():
    """A HiGHS instance. The first one of a process is built with standard output closed:
    highspy 1.16 prints its banner there from the constructor, before any option can silence
    it, and fleetplan's own output (a plan summary, JSON on stdout) must stay clean."""
    with _FIRST_HIGHS["lock"]:
        if _FIRST_HIGHS["done"]:
            return highspy.Highs()
        sys.stdout.flush()
        saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
            return highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(null)
            _FIRST_HIGHS["done"] = True


def match_thread_scheduler(threads: int | None) -> None:
    """Restart this OS thread's HiGHS scheduler when a solve asks for another thread count.

    HiGHS starts one scheduler per calling thread with its first run's ``threads`` and ends a
    later run asking for another count with an error and no solution: a plan with
    ``solver.threads: 1`` whose cost-cover cut had solved first with the default found none."""
    wanted = 0 if threads is None else int(threads)
    started = getattr(_SCHEDULER, "threads", None)
    reset = getattr(highspy.Highs, "resetThreadScheduler", None)  # not in every highspy>=1.7
    if started is not None and started != wanted and reset is not None:
        reset(True)
    _SCHEDULER.threads = wanted


def check_solver(options: SolveOptions) -> str:
    """The solver to use: ``highs`` or ``cbc`` (InvalidValueError for an unknown name)."""
    if options.solver not in SOLVERS:
        message = f"solver must be one of {', '.join(SOLVERS)}, got {options.solver!r}"
        raise InvalidValueError(message)
    if options.solver == "cbc":
        return "cbc"
    if highspy is None:
        if options.solver == "highs":
            message = "solver 'highs' is not available: install highspy"
            raise InvalidValueError(message)
        logger.warning("HiGHS (highspy) is not available; falling back to CBC")
        return "cbc"
    return "highs"


def solver_class(options: SolveOptions):
    """The solver class ``options`` choose: :class:`HighsSolver` or ``CbcSolver``."""
    return HighsSolver if check_solver(options) == "highs" else CbcSolver


def solver_name(options: SolveOptions) -> str:
    """The name a result solved under ``options`` reports (``HiGHS`` or CBC's)."""
    return solver_class(options).name


def open_solver(program: LinearProgram, cost: np.ndarray, options: SolveOptions):
    """A solver holding ``program`` with objective ``cost`` (minimized)."""
    return solver_class(options)(program, np.asarray(cost, dtype=float), options)


class HighsSolver:
    """One HiGHS instance holding the program, built when first needed: a large MIP solved
    unchanged runs in a watchdog's child, which builds its own, so this process never builds
    one for it (seconds on a model of millions of columns)."""

    name = "HiGHS"

    def __init__(self, program: LinearProgram, cost: np.ndarray, options: SolveOptions) -> None:
        self.program, self.cost, self.options = program, cost, options
        self.changed = False  # a re-solve with changed costs, bounds or rows stays in this process
        self.integer = program.integer.copy()
        self.n_cols, self.n_rows = program.n_cols, program.n_rows
        self.empty_rows_ok = bool(np.all(program.row_lower <= 1e-9)
                                  and np.all(program.row_upper >= -1e-9))
        self._highs = None

    @property
    def highs(self):
        """The HiGHS instance holding the program, built on first use."""
        if self._highs is None:
            self._highs = self._built()
        return self._highs

    def _built(self):
        program, options = self.program, self.options
        highs = new_highs()
        highs.silent()
        if options.threads is not None:
            highs.setOptionValue("threads", int(options.threads))
        highs.setOptionValue("mip_allow_restart", MIP_RESTARTS)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = program.n_cols, program.n_rows
        lp.col_cost_, lp.col_lower_ = self.cost, program.col_lower
        lp.col_upper_ = program.col_upper
        lp.row_lower_, lp.row_upper_ = program.row_lower, program.row_upper
        matrix = program.matrix.tocsc()
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = program.n_cols, program.n_rows
        lp.a_matrix_.start_, lp.a_matrix_.index_ = matrix.indptr, matrix.indices
        lp.a_matrix_.value_ = matrix.data
        if self.integer.any():
            kinds = [highspy.HighsVarType.kContinuous, highspy.HighsVarType.kInteger]
            lp.integrality_ = [kinds[i] for i in self.integer.astype(int)]
        highs.passModel(lp)
        return highs

    def set_cost(self, cost: np.ndarray) -> None:
        self.changed = True
        self.cost = np.asarray(cost, dtype=float)
        index = np.arange(self.n_cols, dtype=np.int32)
        self.highs.changeColsCost(self.n_cols, index, self.cost)

    def set_col_bounds(self, cols: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        self.changed = True
        cols = np.asarray(cols, dtype=np.int32)
        self.highs.changeColsBounds(len(cols), cols, np.broadcast_to(lower, cols.shape).astype(
            float), np.broadcast_to(upper, cols.shape).astype(float))

    def set_row_bounds(self, rows: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        self.changed = True
        rows = np.asarray(rows, dtype=np.int32)
        self.highs.changeRowsBounds(len(rows), rows, np.asarray(lower, dtype=float),
                                    np.asarray(upper, dtype=float))

    def add_row(self, cols: np.ndarray, coefs: np.ndarray, lower: float, upper: float) -> None:
        self.changed = True
        cols = np.asarray(cols, dtype=np.int32)
        self.highs.addRow(float(lower), float(upper), len(cols), cols,
                          np.asarray(coefs, dtype=float))
        self.n_rows += 1

    def solve(self, *, time_limit_s: float, mip_gap: float, start: np.ndarray | None = None,
              relax: bool = False, abs_gap: float | None = None,
              root_only: bool = False) -> Result:
        """Run with a time limit [s], a relative gap and, if given, an absolute gap [USD];
        ``root_only`` stops after the root node (its dual bound is valid). A large MIP or LP runs in
        a child process stopped at the limit (``solve_watchdog``)."""
        mip = bool(self.integer.any()) and not relax
        if wants_watchdog(self.n_cols, mip) and not self.changed:
            return self._solve_watched(time_limit_s, mip_gap, start, abs_gap, root_only, relax)
        started = time.perf_counter()
        highs = self.highs
        highs.setOptionValue("mip_max_nodes", 1 if root_only else 2147483647)
        highs.setOptionValue("time_limit", max(float(time_limit_s), 1e-3))
        highs.setOptionValue("mip_rel_gap", float(mip_gap))
        highs.setOptionValue("mip_abs_gap", 1e-6 if abs_gap is None else max(float(abs_gap),
                                                                              1e-6))
        if relax and self.integer.any():
            self._integrality(np.zeros(self.n_cols, dtype=bool))
        if start is not None and mip:
            index = np.arange(self.n_cols, dtype=np.int32)
            highs.setSolution(self.n_cols, index, np.asarray(start, dtype=float))
        match_thread_scheduler(self.options.threads)
        highs.run()
        result = self._result(mip, time.perf_counter() - started)
        if start is not None and mip and not self._consistent(result):
            # HiGHS 1.16 may return the start it was given while reporting another objective
            # (measured: "optimal" at $3.12M, below the LP bound of $3.16M, with the start's
            # $3.32M plan): solve again without the start, with the time left
            logger.info("HiGHS reported an objective of %.6g for a plan that costs %.6g; "
                        "solving again without the start", result.outcome.objective,
                        float(self.cost @ result.values))
            highs.clearSolver()
            left = float(time_limit_s) - (time.perf_counter() - started)
            if left > LAST_RUN_S:
                highs.setOptionValue("time_limit", left)
                highs.run()
                result = self._result(mip, time.perf_counter() - started)
        result = self._honest(result)
        if relax and self.integer.any():  # changing the model clears its status: read it first
            self._integrality(self.integer)
        return result

    def _solve_watched(self, time_limit_s: float, mip_gap: float, start: np.ndarray | None,
                       abs_gap: float | None, root_only: bool, relax: bool) -> Result:
        started = time.perf_counter()
        arguments = (self.program, self.cost, self.options, float(mip_gap), start, abs_gap,
                     root_only, relax)
        result = run_with_watchdog(solve_in_child, arguments, float(time_limit_s))
        if result is not None:
            return result
        return stopped_solve(start, self.cost, self.name, time.perf_counter() - started)

    def _consistent(self, result: Result) -> bool:
        """True when the reported objective is the cost of the returned values."""
        if result.values is None:
            return True
        cost = float(self.cost @ result.values)
        return abs(cost - result.outcome.objective) <= CONSISTENT * max(1.0, abs(cost))

    def _honest(self, result: Result) -> Result:
        """``result``, or, when its objective is not its values' cost, the values with their
        own cost, labelled ``time_limit`` with no bound (neither figure can be trusted)."""
        if self._consistent(result):
            return result
        cost = float(self.cost @ result.values)
        outcome = SolveOutcome("time_limit", math.nan, cost, self.name, result.outcome.seconds)
        return Result(outcome, result.values, result.duals)

    def _integrality(self, integer: np.ndarray) -> None:
        index = np.arange(self.n_cols, dtype=np.int32)
        self.highs.changeColsIntegrality(self.n_cols, index, integer.astype(np.uint8))

    def _result(self, mip: bool, seconds: float) -> Result:
        highs, statuses = self.highs, highspy.HighsModelStatus
        model_status, info = highs.getModelStatus(), highs.getInfo()
        has_values = info.primal_solution_status == 2
        if model_status == statuses.kOptimal:
            status = "optimal"
        elif model_status in (statuses.kInfeasible, statuses.kUnboundedOrInfeasible):
            status = "infeasible"
        elif model_status == statuses.kUnbounded:
            status = "unbounded"
        elif model_status == statuses.kModelEmpty:  # no columns: rows hold at zero or never
            status, has_values = ("optimal", True) if self.empty_rows_ok else ("infeasible", False)
        else:
            status = "time_limit" if has_values else "no_solution"
        if status not in ("optimal", "time_limit"):
            bound = float(info.mip_dual_bound) if mip and status == "no_solution" else math.nan
            bound = bound if math.isfinite(bound) else math.nan
            return Result(SolveOutcome(status, math.nan, math.nan, self.name, seconds, bound),
                          None)
        solution = highs.getSolution()
        values = np.array(solution.col_value, dtype=float)
        if len(values) != self.n_cols:  # an empty model reports no values
            values = np.zeros(self.n_cols)
        objective = float(info.objective_function_value)
        bound = float(info.mip_dual_bound) if mip else objective
        if not math.isfinite(bound):
            bound = objective if status == "optimal" and not mip else math.nan
        gap = gap_between(objective, bound)
        duals = None if mip else np.array(solution.row_dual, dtype=float)
        return Result(SolveOutcome(status, gap, objective, self.name, seconds, bound), values,
                      duals)


def solve_in_child(time_limit_s: float, program: LinearProgram, cost: np.ndarray, options: SolveOptions,
                   mip_gap: float, start: np.ndarray | None, abs_gap: float | None, root_only: bool,
                   relax: bool = False) -> Result:
    """One HiGHS solve in a watchdog's child process (``HighsSolver.solve`` there runs
    in-process: a daemonic child starts no children)."""
    return HighsSolver(program, cost, options).solve(
        time_limit_s=time_limit_s, mip_gap=mip_gap, start=start, abs_gap=abs_gap,
        root_only=root_only, relax=relax)
