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

    def periods_with(self, reserved: np.ndarray, closed, budget_s: float, *,
                     only_pools: set[str] | None = None) -> None: ...

    def polish(self, budget_s: float = ...) -> None: ...


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


#: How the search prices a neighbour, cheapest first (``search_reserved``).
PHASES = ("pool", "polish", "whole")


def search_reserved(solve: LinkedSolve, lp_counts: np.ndarray, seconds: float) -> int:
    """Move ``solve``'s best plan to cheaper neighbouring reserved counts within ``seconds``
    (module docstring); the number of neighbours priced.

    Each neighbour is first priced with every other pool held at the best plan (``pool``:
    one pool's MILP per period, a tenth of a second on the portfolio benchmark's year case
    against about 5 s for the whole period). When none priced so is cheaper, the best plan
    is polished (``polish``: its periods solved whole again, every pool free, which lets the
    pools share out what the moves freed, such as spot share), then the neighbours are
    priced with every pool free (``whole``); a cheaper plan found either way starts the
    cheap passes again. (Re-solving the other pools one at a time after the changed one
    found nothing on the year case that the whole periods did not.)"""
    if solve.best is None or seconds <= 0:
        return 0
    stop = Deadline(seconds)
    rows = reserved_rows(solve.model)
    phases = PHASES if rows["pool"].nunique() > 1 else PHASES[-1:]
    tried: dict[str, set[bytes]] = {phase: set() for phase in phases}
    priced, phase = 0, 0
    while not solve.done() and stop.remaining() > 0 and phase < len(phases):
        moved, count = _first_cheaper(solve, lp_counts, rows, tried[phases[phase]],
                                      phases[phase], stop)
        priced += count
        phase = 0 if moved else phase + 1
    return priced


def _first_cheaper(solve: LinkedSolve, lp_counts: np.ndarray, rows: pd.DataFrame,
                   tried: set[bytes], phase: str, stop: Deadline) -> tuple[bool, int]:
    """Price the best plan's untried neighbours the ``phase``'s way until one is cheaper:
    (moved, how many were priced)."""
    cols = rows["col"].to_numpy()
    current = np.round(solve.best[cols])
    if phase == "polish":
        before = solve.best_cost
        solve.polish(stop.remaining())
        return solve.best_cost < before - 1e-9, 0
    tried.add(current.tobytes())
    rented = rented_replica_hours(solve.model, solve.best, rows)
    names = rows["pool"].to_numpy()
    priced = 0
    for counts in reserved_neighbours(current, lp_counts, rented):
        if counts.tobytes() in tried:
            continue
        tried.add(counts.tobytes())
        before = solve.best_cost
        changed = set(names[counts != current])
        solve.periods_with(counts, None, stop.remaining(),
                           only_pools=changed if phase == "pool" else None)
        priced += 1
        if solve.best_cost < before - 1e-9:
            logger.debug("reserved search: %.2f after %d neighbours (%s)", solve.best_cost,
                         priced, phase)
            return True, priced
        if solve.done() or stop.remaining() <= 0:
            break
    return False, priced


def rented_replica_hours(model, values: np.ndarray, rows: pd.DataFrame) -> np.ndarray:
    """Replica-hours ``values`` rents (flexible pricing, every period) of each reserved row's
    configuration [replica-hours]: where reserving one more replica could replace renting."""
    flexible = model.replicas[model.replicas["period"] >= 0]
    hours = flexible["period"].map(model.problem.periods.set_index("period")["hours"])
    used = (values[flexible["col"].to_numpy()] * hours.to_numpy()).astype(float)
    per_config = pd.Series(used, index=flexible["config"].to_numpy()).groupby(level=0).sum()
    return per_config.reindex(rows["config"].to_numpy()).fillna(0.0).to_numpy()
