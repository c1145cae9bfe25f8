"""The base plan carried onto the model of a looser SLO (``optimizer/carried_plan.py``)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from fleetplan.catalogs import load_catalogs
from fleetplan.optimizer import optimization, resolve_queue
from fleetplan.optimizer.carried_plan import carried_start, counterparts, hardware_ids
from fleetplan.optimizer.decomposition import solve_whole
from fleetplan.optimizer.dominance import prune_dominated
from fleetplan.optimizer.example import example_scenario
from fleetplan.optimizer.marginal_values import slo_relaxation, slo_subjects
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.period_merging import merge_identical_periods
from fleetplan.optimizer.period_solves import Deadline
from fleetplan.optimizer.scenario_planning import plan_scenario, prepare
from fleetplan.optimizer.solver import SolveOptions


@pytest.fixture(scope="module")
def example():
    """The example's merged problem, its solved base model and its looser-SLO models."""
    prepared = prepare(example_scenario(), load_catalogs())
    problem, _ = merge_identical_periods(prepared.problem)
    base = build_model(prune_dominated(problem)[0])
    solve_whole(base, SolveOptions(30.0, 0.005, 1), Deadline(30.0))
    looser = {workload: build_model(slo_relaxation(problem, prepared.relaxed_candidates,
                                                   workload), cost_cover=False)
              for workload, _ in slo_subjects(problem, prepared.relaxed_candidates)}
    return base, looser


def test_hardware_ids_drop_the_slo_level_only():
    ids = pd.Series(["m/h100/bf16/tp1@tpot40ms+ttft1500ms", "m/h100/bf16/tp1", "chat:m/l4/fp8/tp1",
                     "m/fp8/l40s-tp1>h100-tp2@tpot40ms#decode"])
    assert hardware_ids(ids).tolist() == ["m/h100/bf16/tp1", "m/h100/bf16/tp1",
                                          "chat:m/l4/fp8/tp1", "m/fp8/l40s-tp1>h100-tp2#decode"]


def test_the_carried_plan_keeps_every_row_and_costs_what_the_base_plan_costs(example):
    base, looser = example
    assert set(looser) == {"chat", "rag", "summaries"}
    base_cost = float(base.cost @ base.values)
    for workload, model in looser.items():
        start = carried_start(base, model)
        assert start is not None, workload
        assert model.program.violation(start) <= 1e-6
        assert np.all(np.abs(start[model.program.integer] - np.round(
            start[model.program.integer])) < 1e-9)
        # the same replicas and nodes: the same cost, to the cent
        assert float(model.cost @ start) == pytest.approx(base_cost, abs=0.01), workload


def test_a_configuration_runs_at_a_looser_level_of_no_less_capacity(example):
    base, looser = example
    mapping = counterparts(base, looser["chat"], base.values)
    assert mapping is not None and not mapping.empty
    assert (hardware_ids(pd.Series(mapping.index)).to_numpy()
            == hardware_ids(pd.Series(mapping.to_numpy())).to_numpy()).all()
    # chat at 40 ms moves to its looser 60 ms level
    assert any("@tpot40ms" in old and "@tpot60ms" in new for old, new in mapping.items())
    routes = base.routes[base.values[base.routes["col"]] > 1e-9]
    offered = looser["chat"].routes.drop_duplicates(["workload", "bucket", "config"])
    moved = routes.assign(config=routes["config"].map(mapping)).merge(
        offered, on=["workload", "bucket", "config"], suffixes=("", "_looser"))
    assert len(moved) == len(routes)
    assert (moved["req_s_per_replica_looser"] >= moved["req_s_per_replica"] * (1 - 1e-9)).all()


def test_no_plan_is_carried_when_a_configuration_has_no_counterpart(example):
    base, looser = example
    model = looser["rag"]
    used = base.routes.loc[base.values[base.routes["col"]] > 1e-9, "config"]
    gone = hardware_ids(used[used.str.startswith("llama-3.1-70b")]).iloc[0]
    model = type(model)(**{**vars(model), "routes": model.routes[
        hardware_ids(model.routes["config"]) != gone]})
    assert counterparts(base, model, base.values) is None
    assert carried_start(base, model) is None


def test_no_plan_is_carried_that_breaks_a_row_of_the_looser_model(example):
    base, looser = example
    model = looser["summaries"]
    program = model.program
    lowered = program.row_upper.copy()
    capacity = model.constraint_table().query("family == 'capacity'")["row"].to_numpy()
    lowered[capacity] = -1.0  # every configuration short of a replica
    changed = type(model)(**{**vars(model), "program": program.with_changes(row_upper=lowered)})
    assert carried_start(base, model) is not None
    assert carried_start(base, changed) is None


@pytest.mark.parametrize(("early", "wait_s"), [(True, 600.0), (False, 600.0), (True, 0.0)])
def test_looser_slo_resolves_begin_from_the_base_plan_once_it_is_solved(monkeypatch, early,
                                                                        wait_s):
    """Begun during the base solve (a model of up to ``EARLY_PRICING_COLUMNS``) or after it, a
    looser SLO's re-solve begins from the base plan carried onto it; one whose wait for the
    base plan ran out (``CARRY_WAIT_S``, here 0 s in the last case) begins from scratch. The
    other cases wait as long as any machine takes: with the shipped 2 s, a loaded CI machine
    once solved the example's base plan after the wait had run out."""
    events = []
    solve, solved = resolve_queue.solve_fleet, resolve_queue.ReSolves.base_solved

    def record(model, options, deadline=None, *, start=None):
        # the binding limit priced is chat's N+1: its re-solve alone has no spare replicas
        spares = int(model.problem.workloads["redundancy_k"].sum())
        events.append(("N+1 re-solve" if spares == 0 else "looser SLO", start is not None))
        return solve(model, options, deadline, start=start)

    monkeypatch.setattr(resolve_queue, "solve_fleet", record)
    monkeypatch.setattr(resolve_queue.ReSolves, "base_solved",
                        lambda self, base: events.append(("base solved", True))
                        or solved(self, base))
    if not early:
        monkeypatch.setattr(optimization, "EARLY_PRICING_COLUMNS", 0)
    monkeypatch.setattr(resolve_queue, "CARRY_WAIT_S", wait_s)
    plan = plan_scenario(example_scenario(), load_catalogs(), what_if=True)
    priced = plan.binding_constraints
    assert set(priced.loc[priced["family"] == "tpot_slo", "subject"]) == {"chat", "rag"}
    after = events.index(("base solved", True))
    looser = [(i > after, carried) for i, (kind, carried) in enumerate(events)
              if kind == "looser SLO"]
    assert len(looser) == 3
    assert all(begun_after for begun_after, carried in looser if carried)  # none before it
    if wait_s > 0:  # the example's base plan comes within the wait
        assert all(carried for _, carried in looser)
    else:  # the worker's first did not wait for it
        assert not looser[0][1]
    # the binding limit is changed from the base model and solved from its plan either way
    assert [carried for kind, carried in events if kind == "N+1 re-solve"] == [True]


def test_each_looser_model_gets_the_base_plan_carried_once(monkeypatch):
    # the caller carries the base plan onto the models built while the worker already takes
    # the re-solves; a slow carry makes the worker reach a model the caller is still carrying,
    # which it waits for instead of carrying it a second time beside it
    carried = []

    def slow_carry(base, model):
        carried.append(id(model))
        time.sleep(0.3)
        return carried_start(base, model)

    monkeypatch.setattr(resolve_queue, "carried_start", slow_carry)
    plan = plan_scenario(example_scenario(), load_catalogs(), what_if=True)
    assert set(plan.binding_constraints["family"]) >= {"tpot_slo"}
    assert len(carried) == 3 and len(set(carried)) == 3
