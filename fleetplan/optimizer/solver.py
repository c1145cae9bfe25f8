"""Solve a built fleet model with HiGHS (in-process through highspy), CBC as the fallback.

The status returned is the solver's own: PuLP may call a time-limited solve "Optimal", so both
``prob.status`` and ``prob.sol_status`` are read, and HiGHS's MIP gap is reported.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import pulp

from fleetplan.errors import InvalidValueError
from fleetplan.optimizer.milp import FleetModel

logger = logging.getLogger(__name__)

SOLVERS: tuple[str, ...] = ("auto", "highs", "cbc")


@dataclass(frozen=True)
class SolveOptions:
    """time_limit_s [s] per solve; mip_gap [fraction] accepted as optimal; threads (None = solver
    default); solver ``auto`` (HiGHS, CBC if highspy is missing), ``highs`` or ``cbc``."""

    time_limit_s: float = 60.0
    mip_gap: float = 5e-3
    threads: int | None = None
    solver: str = "auto"


@dataclass(frozen=True)
class SolveOutcome:
    """status: optimal | time_limit | infeasible | unbounded | no_solution; gap [fraction, NaN =
    unknown]; objective [USD over the horizon, NaN without a solution]; seconds [s]; bound:
    best proven lower bound on the objective [USD, NaN = unknown]."""

    status: str
    gap: float
    objective: float
    solver: str
    seconds: float
    bound: float = math.nan


    @property
    def has_solution(self) -> bool:
        return self.status in ("optimal", "time_limit")


class _HiGHSFromStart(pulp.HiGHS):
    """HiGHS in-process, handed the variables' current values as a starting solution."""

    def callSolver(self, lp):  # noqa: N802 (PuLP's name)
        columns = lp.variables()
        index = np.array([v.index for v in columns], dtype=np.int32)
        value = np.array([v.varValue if v.varValue is not None else 0.0 for v in columns])
        lp.solverModel.setSolution(len(index), index, value)
        super().callSolver(lp)


def make_solver(options: SolveOptions, *, warm_start: bool = False,
                relax: bool = False) -> pulp.LpSolver:
    """The PuLP solver for ``options``: HiGHS unless unavailable or CBC requested.

    ``warm_start`` hands HiGHS the variables' current values; ``relax`` solves the LP
    relaxation (integrality dropped).
    """
    if options.solver not in SOLVERS:
        message = f"solver must be one of {', '.join(SOLVERS)}, got {options.solver!r}"
        raise InvalidValueError(message)
    common = {"msg": False, "timeLimit": options.time_limit_s, "gapRel": options.mip_gap}
    if options.threads is not None:
        common["threads"] = options.threads
    if options.solver != "cbc":
        highs_class = _HiGHSFromStart if warm_start else pulp.HiGHS
        highs = highs_class(mip=not relax, **common)
        if highs.available():
            return highs
        if options.solver == "highs":
            message = "solver 'highs' is not available: install highspy"
            raise InvalidValueError(message)
        logger.warning("HiGHS (highspy) is not available; falling back to CBC")
    with warnings.catch_warnings():  # PuLP announces CBC's move in 4.0; this is 3.x
        warnings.simplefilter("ignore", DeprecationWarning)
        return pulp.PULP_CBC_CMD(mip=not relax, warmStart=warm_start, **common)


def _status(lp: pulp.LpProblem) -> str:
    if lp.sol_status == pulp.LpSolutionOptimal and lp.status == pulp.LpStatusOptimal:
        return "optimal"
    if lp.sol_status == pulp.LpSolutionIntegerFeasible:
        return "time_limit"
    if lp.status == pulp.LpStatusInfeasible or lp.sol_status == pulp.LpSolutionInfeasible:
        return "infeasible"
    if lp.status == pulp.LpStatusUnbounded or lp.sol_status == pulp.LpSolutionUnbounded:
        return "unbounded"
    return "no_solution"


def _gap_and_bound(lp: pulp.LpProblem, status: str) -> tuple[float, float]:
    """Relative MIP gap and dual bound HiGHS reports (gap 0 for a proven LP/MIP optimum)."""
    info = getattr(getattr(lp, "solverModel", None), "getInfo", None)
    gap = bound = math.nan
    if info is not None:
        report = info()
        gap = report.mip_gap if math.isfinite(report.mip_gap) and report.mip_gap >= 0 else gap
        finite = math.isfinite(report.mip_dual_bound) and report.mip_node_count >= 0
        bound = report.mip_dual_bound if finite else bound
    if status == "optimal" and not math.isfinite(gap):
        gap = 0.0
    return gap, bound


def solve_lp(lp: pulp.LpProblem, options: SolveOptions, *, warm_start: bool = False,
             relax: bool = False) -> SolveOutcome:
    """Solve ``lp`` once and read back its true status, gap, bound and objective."""
    if lp.numConstraints() == 0:  # nothing to serve: solvers call an empty model unsolved
        for variable in lp.variables():
            variable.varValue = variable.lowBound or 0.0
        objective = float(pulp.value(lp.objective) or 0.0)
        return SolveOutcome("optimal", 0.0, objective, "none", 0.0, objective)
    solver = make_solver(options, warm_start=warm_start, relax=relax)
    started = time.perf_counter()
    lp.solve(solver)
    seconds = time.perf_counter() - started
    status = _status(lp)
    objective = pulp.value(lp.objective) if status in ("optimal", "time_limit") else None
    objective = math.nan if objective is None else float(objective)
    gap, bound = _gap_and_bound(lp, status)
    if relax or (status == "optimal" and not math.isfinite(bound)):
        bound = objective
    logger.debug("%s: %s in %.3f s, objective %s", solver.name, status, seconds, objective)
    return SolveOutcome(status, gap, objective, solver.name, seconds, bound)


def solve_model(model: FleetModel, options: SolveOptions, *,
                warm_start: bool = False) -> SolveOutcome:
    """Solve a fleet model. An elastic model is solved lexicographically: first the least
    unmet demand (share of request-hours), then the cheapest fleet that leaves no more unmet."""
    if not model.elastic or model.unmet.empty:
        outcome = solve_lp(model.lp, options, warm_start=warm_start)
        return _with_cost(outcome, model)
    model.lp.setObjective(model.unmet_share)
    first = solve_lp(model.lp, options)
    if not first.has_solution:
        return first
    least_unmet = float(pulp.value(model.unmet_share) or 0.0)
    tolerance = 1e-7 + 1e-6 * least_unmet
    model.lp.addConstraint(pulp.LpConstraint(model.unmet_share, pulp.LpConstraintLE,
                                             "least_unmet", least_unmet + tolerance))
    model.lp.setObjective(model.cost)
    second = solve_lp(model.lp, options, warm_start=True)  # phase 1's plan is feasible
    if not second.has_solution:
        return _with_cost(first, model)
    return dataclasses.replace(second, status=_worst(first.status, second.status),
                               seconds=first.seconds + second.seconds)


def _worst(first: str, second: str) -> str:
    return "time_limit" if "time_limit" in (first, second) else second


def _with_cost(outcome: SolveOutcome, model: FleetModel) -> SolveOutcome:
    if not outcome.has_solution:
        return outcome
    cost = float(pulp.value(model.cost) or 0.0)
    bound = outcome.bound if not model.elastic else math.nan
    return dataclasses.replace(outcome, objective=cost, bound=bound)
