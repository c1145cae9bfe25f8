"""Local search over reserved counts: the best plan's neighbours, one reserved replica away.

The reserved-first solve (``reserved_first.py``) prices a handful of reserved choices, all
derived from the LP relaxation. On a small fleet the best choice is often a replica away from
all of them: the LP spreads reserved capacity in fractions, and one whole replica more or less
of one configuration changes what every period must rent. So, with the time left, each
neighbour of the best plan's reserved counts is priced the same way (every period's MILP with
those counts fixed), first improvement first: one replica fewer of each configuration it
reserves, then one more of each it reserves or the LP reserves a fraction of. A cheaper
neighbour becomes the best plan and the search goes on from it; it stops when no neighbour is
cheaper, the plan is proven within the gap, or the time is out.

Measured with ``bench_portfolio.py --case day --pool m8b`` (one model's pool of the portfolio
alone: 24 hours, on-demand, spot capped at 30 % and 1-year reserved): see README, Speed.
"""

from __future__ import annotations

import logging
from typing import Protocol

import numpy as np

from fleetplan.optimizer.period_solves import Deadline
from fleetplan.optimizer.reserved_candidates import reserved_rows

logger = logging.getLogger(__name__)


class LinkedSolve(Protocol):
    """What the search needs of a reserved-first solve (``reserved_first.ReservedFirst``)."""

    model: object
    best: np.ndarray | None
    best_cost: float

    def done(self) -> bool: ...

    def periods_with(self, reserved: np.ndarray, closed, budget_s: float) -> None: ...


def reserved_neighbours(counts: np.ndarray, lp_counts: np.ndarray) -> np.ndarray:
    """Reserved counts one replica away from ``counts`` [replicas], one row each: one fewer of
    each configuration reserved, then one more of each reserved or fractionally reserved by
    the LP (``lp_counts``)."""
    counts = np.asarray(counts, dtype=float)
    fewer = np.flatnonzero(counts > 0.5)
    more = np.flatnonzero((counts > 0.5) | (np.asarray(lp_counts) > 1e-7))
    rows = np.concatenate([fewer, more])
    steps = np.concatenate([-np.ones(len(fewer)), np.ones(len(more))])
    neighbours = np.repeat(counts[None, :], len(rows), axis=0)
    neighbours[np.arange(len(rows)), rows] += steps
    return neighbours


def search_reserved(solve: LinkedSolve, lp_counts: np.ndarray, seconds: float) -> int:
    """Move ``solve``'s best plan to cheaper neighbouring reserved counts within ``seconds``
    (module docstring); the number of neighbours priced."""
    if solve.best is None or seconds <= 0:
        return 0
    stop = Deadline(seconds)
    cols = reserved_rows(solve.model)["col"].to_numpy()
    tried = {np.round(solve.best[cols]).tobytes()}
    priced = 0
    moved = True
    while moved and not solve.done() and stop.remaining() > 0:
        moved = False
        for counts in reserved_neighbours(np.round(solve.best[cols]), lp_counts):
            if counts.tobytes() in tried:
                continue
            tried.add(counts.tobytes())
            before = solve.best_cost
            solve.periods_with(counts, None, stop.remaining())
            priced += 1
            if solve.best_cost < before - 1e-9:
                logger.debug("reserved search: %.2f after %d neighbours", solve.best_cost, priced)
                moved = True
                break
            if solve.done() or stop.remaining() <= 0:
                break
    return priced
