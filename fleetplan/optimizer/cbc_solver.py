"""CBC through PuLP: the fallback solver for machines without highspy.

PuLP builds its model term by term from the program's arrays for every solve (slow on large
models; that time counts against the solve's limit) and reports no dual bound.

CBC checks its time limit between the steps of branch and bound, not inside its root LP or
cut loop: on 30,000 columns a 1 s limit took 6.6 s, and 8 s (``bench_time_limits.py``'s
scenario 189). So CBC runs as PuLP would run it, but under a watch (:func:`run_cbc`): past
its limit and :data:`CBC_GRACE_S` it is interrupted (SIGINT: it stops at its next check and
writes the best plan it has, "Stopped on iterations", as on Ctrl-C), and :data:`CBC_STOP_S`
later killed, with no plan. A large MIP given less than CBC's least limit is not started
(:func:`too_short`).
"""

from __future__ import annotations

import logging
import math
import os
import signal
import subprocess
import tempfile
import time
import warnings

import numpy as np
import pulp

from fleetplan.optimizer.linear_program import LinearProgram
from fleetplan.optimizer.solve_results import Result, SolveOptions, SolveOutcome, stopped_solve
from fleetplan.optimizer.solve_watchdog import WATCHDOG_COLUMNS

logger = logging.getLogger(__name__)


#: Least time limit CBC is given [s]: it counts its limit in whole seconds.
CBC_LEAST_S = 1.0

#: Time CBC may run past its limit before it is interrupted [s].
CBC_GRACE_S = 1.0

#: Time an interrupted CBC gets to write its plan before it is killed [s]: in branch and
#: bound it stopped 0.06-0.37 s after SIGINT (a 3,198-column portfolio pool, one-off runs).
CBC_STOP_S = 0.5


class CbcSolver:
    """CBC through PuLP: the model is rebuilt from the arrays for every solve."""

    name = "PULP_CBC_CMD"

    def __init__(self, program: LinearProgram, cost: np.ndarray, options: SolveOptions) -> None:
        self.program, self.cost, self.options = program, cost, options
        self.col_lower, self.col_upper = program.col_lower.copy(), program.col_upper.copy()
        self.row_lower, self.row_upper = program.row_lower.copy(), program.row_upper.copy()
        self.extra: list[tuple[np.ndarray, np.ndarray, float, float]] = []

    def set_cost(self, cost: np.ndarray) -> None:
        self.cost = np.asarray(cost, dtype=float)

    def set_col_bounds(self, cols, lower, upper) -> None:
        self.col_lower[cols], self.col_upper[cols] = lower, upper

    def set_row_bounds(self, rows, lower, upper) -> None:
        self.row_lower[rows], self.row_upper[rows] = lower, upper

    def add_row(self, cols, coefs, lower, upper) -> None:
        self.extra.append((np.asarray(cols), np.asarray(coefs, dtype=float), lower, upper))

    def _model(self, relax: bool) -> tuple[pulp.LpProblem, list, list]:
        lp = pulp.LpProblem("fleet", pulp.LpMinimize)
        integer = self.program.integer & (not relax)
        columns = [lp.add_variable(f"x{i}", None if math.isinf(lo) else float(lo),
                                   None if math.isinf(hi) else float(hi),
                                   pulp.LpInteger if whole else pulp.LpContinuous)
                   for i, (lo, hi, whole) in enumerate(zip(self.col_lower, self.col_upper,
                                                           integer, strict=True))]
        lp.setObjective(pulp.LpAffineExpression(
            [(columns[i], c) for i, c in enumerate(self.cost) if c != 0.0]))
        matrix = self.program.matrix
        rows = [(matrix.indices[s:e], matrix.data[s:e], lo, hi) for s, e, lo, hi in zip(
            matrix.indptr[:-1], matrix.indptr[1:], self.row_lower, self.row_upper, strict=True)]
        constraints = []
        for i, (cols, coefs, lo, hi) in enumerate(rows + self.extra):
            expression = pulp.LpAffineExpression([(columns[c], v) for c, v in zip(cols, coefs)])
            for sense, rhs, tag in ((pulp.LpConstraintGE, lo, "l"), (pulp.LpConstraintLE, hi, "u")):
                if math.isfinite(rhs):
                    constraint = pulp.LpConstraint(expression, sense, f"r{i}{tag}", float(rhs))
                    lp.addConstraint(constraint)
                    constraints.append((i, constraint))
        return lp, columns, constraints

    def solve(self, *, time_limit_s: float, mip_gap: float, start: np.ndarray | None = None,
              relax: bool = False, abs_gap: float | None = None,
              root_only: bool = False) -> Result:
        started = time.perf_counter()
        if not relax and too_short(self.program.n_cols, time_limit_s):
            logger.info("%.2f s is too short for a MIP of this size: CBC not started",
                        time_limit_s)
            return stopped_solve(start, self.cost, self.name, time.perf_counter() - started)
        lp, columns, constraints = self._model(relax)
        if start is not None:
            for column, value in zip(columns, start, strict=True):
                column.varValue = float(value)
        # building the PuLP model takes time of the limit (term by term: seconds on large
        # models); CBC gets the rest, and at least the 1 s it counts in
        left = time_limit_s - (time.perf_counter() - started)
        options = {"msg": False, "timeLimit": max(left, CBC_LEAST_S), "gapRel": mip_gap}
        threads = cbc_threads(self.options.threads)
        if threads is not None:
            options["threads"] = threads
        with warnings.catch_warnings():  # PuLP announces CBC's move in 4.0; this is 3.x
            warnings.simplefilter("ignore", DeprecationWarning)
            solver = pulp.PULP_CBC_CMD(mip=not relax, warmStart=start is not None, **options)
        ending = run_cbc(lp, solver, options["timeLimit"])
        if ending == "killed":
            return stopped_solve(start, self.cost, self.name, time.perf_counter() - started)
        if ending == "failed":  # CBC stopped by its limit can exit without a solution too
            logger.warning("CBC ended without a solution")
            return Result(SolveOutcome("no_solution", math.nan, math.nan, self.name,
                                       time.perf_counter() - started), None)
        seconds = time.perf_counter() - started
        status = _pulp_status(lp)
        if status not in ("optimal", "time_limit"):
            return Result(SolveOutcome(status, math.nan, math.nan, self.name, seconds), None)
        values = np.array([c.varValue or 0.0 for c in columns])
        objective = float(self.cost @ values)
        duals = None
        if relax:
            duals = np.zeros(self.program.n_rows + len(self.extra))
            for i, constraint in constraints:
                duals[i] += constraint.pi or 0.0
        bound = objective if status == "optimal" and relax else math.nan
        gap = 0.0 if status == "optimal" else math.nan
        return Result(SolveOutcome(status, gap, objective, self.name, seconds, bound), values,
                      duals)


def cbc_threads(threads: int | None) -> int | None:
    """CBC's ``-threads`` for ``threads``: none (its serial search) for one thread or the
    default. ``-threads 1`` starts CBC's threaded search with one worker, whose start stalled
    for 10 s now and then on period MILPs of 215 columns solved two at a time (its log:
    "Thread 0 ... waiting to start 10.000187"; ``bench_time_limits.py``'s scenario 62, CBC
    2.10.3 as PuLP 3.3 ships it)."""
    return threads if threads is not None and threads > 1 else None


def too_short(n_cols: int, time_limit_s: float) -> bool:
    """True when a MIP of :data:`~fleetplan.optimizer.solve_watchdog.WATCHDOG_COLUMNS` columns
    or more is given less than :data:`CBC_LEAST_S`: CBC would run to that least limit, after
    building, writing and reading the model, and large ones past it (module docstring); as a
    HiGHS MIP too short for a watchdog's child, it is not started."""
    return n_cols >= WATCHDOG_COLUMNS and time_limit_s < CBC_LEAST_S


def run_cbc(lp: pulp.LpProblem, command: pulp.PULP_CBC_CMD, limit_s: float) -> str:
    """Solve ``lp`` with CBC as ``command`` would (PuLP's files, arguments and solution
    reader), stopping CBC :data:`CBC_GRACE_S` past ``limit_s`` (module docstring). How it
    ended: ``solved`` (a solution file, now assigned to ``lp``'s variables and status),
    ``killed`` (past its limit, deaf to the interrupt) or ``failed`` (no solution file, or a
    crash: CBC's warm start can end in a segmentation fault)."""
    with tempfile.TemporaryDirectory(prefix="fleetplan-cbc-") as folder:
        mps, start, solution = (os.path.join(folder, f"model.{kind}")
                                for kind in ("mps", "mst", "sol"))
        lp.fixObjective()  # as PuLP's solve: a constant objective gets a dummy column
        variables, names, rows, _ = lp.writeMPS(mps, rename=1)
        arguments = [command.path, mps]
        if command.optionsDict.get("warmStart"):
            command.writesol(start, lp, variables, names, rows)
            arguments += ["-mips", start]
        arguments += ["-sec", str(command.timeLimit)]
        for option in command.options + command.getOptions():
            arguments += ("-" + option).split()
        arguments += ["-solve" if command.mip else "-initialSolve", "-printingOptions", "all",
                      "-solution", solution]
        ending = _run_watched(arguments, limit_s)
        if ending != "solved":
            return ending
        if not os.path.exists(solution):
            return "failed"
        status, values, reduced, prices, slacks, solution_status = command.readsol_MPS(
            solution, lp, variables, names, rows)
    lp.assignVarsVals(values)
    lp.assignVarsDj(reduced)
    lp.assignConsPi(prices)
    lp.assignConsSlack(slacks, activity=True)
    lp.assignStatus(status, solution_status)
    return "solved"


def _run_watched(arguments: list[str], limit_s: float) -> str:
    """Run CBC; interrupt it :data:`CBC_GRACE_S` past ``limit_s`` and kill it
    :data:`CBC_STOP_S` later. ``solved`` when it exited cleanly (on its own or interrupted),
    so its solution file is whole; ``killed``; ``failed`` on any other exit code."""
    cbc = subprocess.Popen(arguments, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        try:
            return _ending(cbc.wait(timeout=limit_s + CBC_GRACE_S))
        except subprocess.TimeoutExpired:
            logger.warning("CBC ran %.1f s past its %.1f s limit: interrupted", CBC_GRACE_S,
                           limit_s)
            cbc.send_signal(signal.SIGINT)
        try:
            return _ending(cbc.wait(timeout=CBC_STOP_S))
        except subprocess.TimeoutExpired:
            logger.warning("CBC did not stop when interrupted: killed, without a plan")
            return "killed"
    finally:
        if cbc.poll() is None:  # killed, also when this process is stopped meanwhile
            cbc.kill()
            cbc.wait()


def _ending(exit_code: int) -> str:
    return "solved" if exit_code == 0 else "failed"


def _pulp_status(lp: pulp.LpProblem) -> str:
    if lp.sol_status == pulp.LpSolutionOptimal and lp.status == pulp.LpStatusOptimal:
        return "optimal"
    if lp.sol_status == pulp.LpSolutionIntegerFeasible:
        return "time_limit"
    if lp.status == pulp.LpStatusInfeasible or lp.sol_status == pulp.LpSolutionInfeasible:
        return "infeasible"
    if lp.status == pulp.LpStatusUnbounded or lp.sol_status == pulp.LpSolutionUnbounded:
        return "unbounded"
    return "no_solution"
