"""The local search over reserved counts (``reserved_search.py``): its neighbours, and a search
that walks to the cheapest reserved choice one replica at a time, on a stand-in for the
reserved-first solve whose prices are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fleetplan.optimizer import reserved_search
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.reserved_candidates import reserved_rows
from fleetplan.optimizer.reserved_search import (
    rented_replica_hours,
    reserved_neighbours,
    search_reserved,
)
from tests.optimizer.instances import make_problem


def test_neighbours_are_one_replica_fewer_of_each_reserved_row_then_one_more():
    neighbours = reserved_neighbours(np.array([2.0, 0.0, 1.0, 0.0]),
                                     np.array([1.7, 0.3, 0.0, 0.0]))
    assert neighbours.tolist() == [[1, 0, 1, 0], [2, 0, 0, 0],  # fewer of rows 0 and 2
                                   [3, 0, 1, 0], [2, 1, 1, 0], [2, 0, 2, 0]]  # more of 0-2


def test_then_one_more_of_each_configuration_rented_the_most_rented_first():
    neighbours = reserved_neighbours(np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(4),
                                     rented=np.array([3.0, 5.0, 0.0, 9.0]))
    assert neighbours.tolist() == [[0, 0, 0, 0], [2, 0, 0, 0], [1, 0, 0, 1], [1, 1, 0, 0]]


def test_rented_replica_hours_count_each_configurations_flexible_replicas_by_hours():
    model = build_model(make_problem([[4.0, 1.0], [1.0, 4.0]], [[2.0, 2.0], [3.0, 1.0]],
                                     {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 1.0,
                                      ("g0", "reserved_1y"): 0.6, ("g1", "reserved_1y"): 0.6}))
    values = np.zeros(model.program.n_cols)
    flexible = model.replicas[model.replicas["period"] >= 0]
    values[flexible["col"].to_numpy()] = 1.0  # one replica of every offer in every period
    rows = reserved_rows(model)
    hours = model.problem.periods.set_index("period")["hours"]
    expected = [flexible.loc[flexible["config"] == config, "period"].map(hours).sum()
                for config in rows["config"]]
    assert rented_replica_hours(model, values, rows).tolist() == pytest.approx(expected)
    assert min(expected) > 0


def test_no_neighbours_without_any_reserved_replica_or_lp_fraction():
    assert reserved_neighbours(np.zeros(3), np.zeros(3)).shape == (0, 3)


class _Priced:
    """A stand-in for the reserved-first solve: a reserved choice costs its squared distance
    from ``target`` plus 10 [USD], and ``held_penalty`` more when the other pools are held
    (``only_pools`` given); ``done`` once within ``gap`` of 10. ``calls`` logs what was priced,
    with its pools, and each polish."""

    def __init__(self, start, target, gap=0.0, held_penalty=0.0):
        self.target, self.gap = np.asarray(target, dtype=float), gap
        self.held_penalty = held_penalty
        self.model = None
        self.best = np.asarray(start, dtype=float)
        self.best_cost = self.cost(self.best)
        self.priced = []
        self.calls = []

    def cost(self, counts) -> float:
        return float(((counts - self.target) ** 2).sum() + 10.0)

    def done(self) -> bool:
        return self.best_cost <= 10.0 * (1 + self.gap)

    def periods_with(self, counts, closed, budget_s, *, only_pools=None) -> None:
        self.priced.append(counts.copy())
        cost = self.cost(counts) + (self.held_penalty if only_pools is not None else 0.0)
        self.calls.append(("priced", None if only_pools is None else sorted(only_pools),
                           cost < self.best_cost))
        if cost < self.best_cost:
            self.best, self.best_cost = counts.copy(), cost

    def polish(self, budget_s=float("inf")) -> None:
        self.calls.append(("polish", None, False))


@pytest.fixture
def columns(monkeypatch):
    # the stand-in's plan is its reserved counts, one column each, all of one pool, and it
    # rents nothing
    monkeypatch.setattr(reserved_search, "reserved_rows",
                        lambda model: pd.DataFrame({"col": [0, 1, 2], "pool": "p0"}))
    monkeypatch.setattr(reserved_search, "rented_replica_hours",
                        lambda model, values, rows: np.zeros(len(rows)))


@pytest.fixture
def two_pools(monkeypatch):
    # rows 0 and 1 of pool p0, row 2 of pool p1
    monkeypatch.setattr(reserved_search, "reserved_rows",
                        lambda model: pd.DataFrame({"col": [0, 1, 2],
                                                    "pool": ["p0", "p0", "p1"]}))
    monkeypatch.setattr(reserved_search, "rented_replica_hours",
                        lambda model, values, rows: np.zeros(len(rows)))


def test_with_one_pool_every_neighbour_is_priced_whole(columns):
    solve = _Priced(start=[3.0, 0.0, 1.0], target=[1.0, 2.0, 1.0])
    search_reserved(solve, np.array([0.0, 0.4, 0.0]), seconds=30.0)
    assert {call for call, _, _ in solve.calls} == {"priced"}
    assert all(pools is None for _, pools, _ in solve.calls)


def test_neighbours_are_priced_one_pool_first_then_polished_then_whole(two_pools):
    # held pools price every neighbour too high: only the whole pricing finds the moves
    solve = _Priced(start=[3.0, 0.0, 1.0], target=[1.0, 0.0, 1.0], held_penalty=5.0)
    search_reserved(solve, np.zeros(3), seconds=30.0)
    assert solve.best.tolist() == [1.0, 0.0, 1.0]
    phases = [("whole" if pools is None else "pool") if call == "priced" else call
              for call, pools, _ in solve.calls]
    first_polish = phases.index("polish")
    assert set(phases[:first_polish]) == {"pool"} and phases[first_polish + 1] == "whole"
    # each neighbour held the pools it does not change: [3, 0, 1] -> [2, 0, 1] changes p0
    assert solve.calls[0][:2] == ("priced", ["p0"])
    assert ["p1"] in [pools for _, pools, _ in solve.calls]
    # the whole pass's first move ([2, 0, 1]) starts the pool passes again
    moved_at = next(i for i, (_, pools, improved) in enumerate(solve.calls)
                    if pools is None and improved)
    assert phases[moved_at + 1] == "pool" and phases.count("polish") == 2


def test_the_search_walks_to_the_cheapest_reserved_counts(columns):
    solve = _Priced(start=[3.0, 0.0, 1.0], target=[1.0, 2.0, 1.0])
    priced = search_reserved(solve, np.array([0.0, 0.4, 0.0]), seconds=30.0)
    assert solve.best.tolist() == [1.0, 2.0, 1.0] and solve.best_cost == 10.0
    assert priced == len(solve.priced)
    assert len({c.tobytes() for c in solve.priced}) == priced  # none priced twice


def test_the_search_stops_once_the_plan_is_proven(columns):
    solve = _Priced(start=[3.0, 0.0, 1.0], target=[1.0, 2.0, 1.0], gap=0.5)
    search_reserved(solve, np.array([0.0, 0.4, 0.0]), seconds=30.0)
    assert solve.best_cost <= 15.0 and solve.best.tolist() != [1.0, 2.0, 1.0]


@pytest.mark.parametrize("seconds", [0.0, -1.0])
def test_no_search_without_time_or_without_a_plan(columns, seconds):
    solve = _Priced(start=[3.0, 0.0, 1.0], target=[1.0, 2.0, 1.0])
    assert search_reserved(solve, np.zeros(3), seconds) == 0
    solve.best = None
    assert search_reserved(solve, np.zeros(3), 30.0) == 0
