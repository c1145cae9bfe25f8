"""Local search over reserved counts: the best plan's neighbours, one reserved replica away.

The reserved-first solve (``reserved_first.py``) prices a handful of reserved choices, all
derived from the LP relaxation. On a small fleet the best choice is often a replica away from
all of them: the LP spreads reserved capacity in fractions, and one whole replica more or less
of one configuration changes what every period must rent. So, with the time left, each
neighbour of the best plan's reserved counts is priced the same way (every period's MILP with
those counts fixed), first improvement first: one replica fewer of each configuration it
reserves, then one more of each it reserves or the LP reserves a fraction of, then one more of
each other configuration it rents, the most rented first. A cheaper neighbour becomes the best
plan and the search goes on from it; it stops when no neighbour is cheaper, the plan is proven
within the gap, or the time is out.

Measured with ``bench_portfolio.py --case day --pool m8b`` (one model's pool of the portfolio
alone: 24 hours, on-demand, spot capped at 30 % and 1-year reserved): see README, Speed.
"""

from __future__ import annotations

import logging
from typing import Protocol

import numpy as np
import pandas as pd

from fleetplan.optimizer.reserved_candidates import reserved_rows
from fleetplan.optimizer.solve_results import Deadline

logger = logging.getLogger(__name__)


class LinkedSolve(Protocol):
    """What the search needs of a reserved-first solve (``reserved_first.ReservedFirst``)."""

    model: object
    best: np.ndarray | None
    best_cost: float

    def done(self) -> bool: ...

    def periods_with(self, reserved: np.ndarray, closed, budget_s: float) -> None: ...


def reserved_neighbours(counts: np.ndarray, lp_counts: np.ndarray,
                        rented: np.ndarray | None = None) -> np.ndarray:
    """Reserved counts one replica away from ``counts`` [replicas], one row each: one fewer of
    each configuration reserved, then one more of each reserved or fractionally reserved by
    the LP (``lp_counts``), then one more of each other configuration the plan rents
    (``rented`` [replica-hours] per reserved row), the most rented first."""
    counts = np.asarray(counts, dtype=float)
    fewer = np.flatnonzero(counts > 0.5)
    in_support = (counts > 0.5) | (np.asarray(lp_counts) > 1e-7)
    more = np.flatnonzero(in_support)
    if rented is not None:
        rented = np.asarray(rented, dtype=float)
        others = np.flatnonzero(~in_support & (rented > 1e-9))
        more = np.concatenate([more, others[np.argsort(-rented[others], kind="stable")]])
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
    rows = reserved_rows(solve.model)
    cols = rows["col"].to_numpy()
    tried = {np.round(solve.best[cols]).tobytes()}
    priced = 0
    moved = True
    while moved and not solve.done() and stop.remaining() > 0:
        moved = False
        rented = rented_replica_hours(solve.model, solve.best, rows)
        for counts in reserved_neighbours(np.round(solve.best[cols]), lp_counts, rented):
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


def rented_replica_hours(model, values: np.ndarray, rows: pd.DataFrame) -> np.ndarray:
    """Replica-hours ``values`` rents (flexible pricing, every period) of each reserved row's
    configuration [replica-hours]: where reserving one more replica could replace renting."""
    flexible = model.replicas[model.replicas["period"] >= 0]
    hours = flexible["period"].map(model.problem.periods.set_index("period")["hours"])
    used = (values[flexible["col"].to_numpy()] * hours.to_numpy()).astype(float)
    per_config = pd.Series(used, index=flexible["config"].to_numpy()).groupby(level=0).sum()
    return per_config.reindex(rows["config"].to_numpy()).fillna(0.0).to_numpy()
