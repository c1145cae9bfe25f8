"""CBC through PuLP: the fallback solver for machines without highspy.

PuLP builds its model term by term from the program's arrays for every solve (slow on large
models; that time counts against the solve's limit) and reports no dual bound.
"""

from __future__ import annotations

import logging
import math
import time
import warnings

import numpy as np
import pulp

from fleetplan.optimizer.linear_program import LinearProgram
from fleetplan.optimizer.solve_results import Result, SolveOptions, SolveOutcome

logger = logging.getLogger(__name__)


#: Least time limit CBC is given [s]: it counts its limit in whole seconds.
CBC_LEAST_S = 1.0


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
        lp, columns, constraints = self._model(relax)
        if start is not None:
            for column, value in zip(columns, start, strict=True):
                column.varValue = float(value)
        # building the PuLP model takes time of the limit (term by term: seconds on large
        # models); CBC gets the rest, and at least the 1 s it counts in
        left = time_limit_s - (time.perf_counter() - started)
        options = {"msg": False, "timeLimit": max(left, CBC_LEAST_S), "gapRel": mip_gap}
        if self.options.threads is not None:
            options["threads"] = self.options.threads
        with warnings.catch_warnings():  # PuLP announces CBC's move in 4.0; this is 3.x
            warnings.simplefilter("ignore", DeprecationWarning)
            solver = pulp.PULP_CBC_CMD(mip=not relax, warmStart=start is not None, **options)
        try:
            lp.solve(solver)
        except pulp.PulpSolverError as error:  # CBC stopped early can leave no solution file
            logger.warning("CBC returned no solution: %s", str(error).splitlines()[0])
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
