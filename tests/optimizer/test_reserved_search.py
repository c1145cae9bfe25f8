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
    from ``target`` plus 10 [USD]; ``done`` once within ``gap`` of 10."""

    def __init__(self, start, target, gap=0.0):
        self.target, self.gap = np.asarray(target, dtype=float), gap
        self.model = None
        self.best = np.asarray(start, dtype=float)
        self.best_cost = self.cost(self.best)
        self.priced = []

    def cost(self, counts) -> float:
        return float(((counts - self.target) ** 2).sum() + 10.0)

    def done(self) -> bool:
        return self.best_cost <= 10.0 * (1 + self.gap)

    def periods_with(self, counts, closed, budget_s) -> None:
        self.priced.append(counts.copy())
        if self.cost(counts) < self.best_cost:
            self.best, self.best_cost = counts.copy(), self.cost(counts)


@pytest.fixture
def columns(monkeypatch):
    # the stand-in's plan is its reserved counts, one column each, and it rents nothing
    monkeypatch.setattr(reserved_search, "reserved_rows",
                        lambda model: pd.DataFrame({"col": [0, 1, 2]}))
    monkeypatch.setattr(reserved_search, "rented_replica_hours",
                        lambda model, values, rows: np.zeros(len(rows)))


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
