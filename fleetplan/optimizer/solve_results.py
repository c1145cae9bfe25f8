"""What a solve is asked and what it answers: its deadline, options, outcome, result, and the
gap between an objective and its bound.

The HiGHS solver (``solver.py``) and the CBC fallback (``cbc_solver.py``) share them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np


class Deadline:
    """Wall-clock budget of one whole optimization call; ``spent_s`` [s] of it went before the
    clock was made (a command's process start and imports, reading its inputs)."""

    def __init__(self, seconds: float, spent_s: float = 0.0) -> None:
        self.seconds = float(seconds)
        self.started = time.perf_counter() - spent_s

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def remaining(self) -> float:
        return max(0.0, self.seconds - self.elapsed())

    def share(self, fraction: float) -> float:
        """A fraction of the time left [s]."""
        return self.remaining() * fraction


@dataclass(frozen=True)
class SolveOptions:
    """time_limit_s [s] for the whole optimization; mip_gap [fraction] accepted as optimal;
    threads (None = solver default); solver ``auto`` (HiGHS, CBC if highspy is missing),
    ``highs`` or ``cbc``."""

    time_limit_s: float = 60.0
    mip_gap: float = 5e-3
    threads: int | None = None
    solver: str = "auto"


@dataclass(frozen=True)
class SolveOutcome:
    """status: optimal | time_limit | infeasible | unbounded | no_solution; gap [fraction, NaN =
    unknown]; objective [USD, NaN without a solution]; seconds [s]; bound: best proven lower
    bound on the objective [USD, NaN = unknown]."""

    status: str
    gap: float
    objective: float
    solver: str
    seconds: float
    bound: float = math.nan

    @property
    def has_solution(self) -> bool:
        return self.status in ("optimal", "time_limit")


@dataclass(frozen=True)
class Result:
    """A solve's outcome, column values (None without a solution) and, for an LP, row duals."""

    outcome: SolveOutcome
    values: np.ndarray | None
    duals: np.ndarray | None = None


def gap_between(objective: float, bound: float) -> float:
    """Relative gap (objective - bound) / objective, 0 for a zero objective."""
    if not (math.isfinite(objective) and math.isfinite(bound)):
        return math.nan
    return max(0.0, (objective - bound) / objective) if objective > 1e-12 else 0.0


def stopped_solve(start: np.ndarray | None, cost: np.ndarray, solver: str,
                  seconds: float) -> Result:
    """A solve stopped, or not started, without a plan of its own: its start stays the best
    plan known (``time_limit``, the start's cost, no bound), or there is none
    (``no_solution``)."""
    if start is None:
        return Result(SolveOutcome("no_solution", math.nan, math.nan, solver, seconds), None)
    values = np.asarray(start, dtype=float)
    return Result(SolveOutcome("time_limit", math.nan, float(cost @ values), solver, seconds),
                  values)
