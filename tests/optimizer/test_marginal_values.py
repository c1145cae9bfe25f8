"""Pricing binding limits and looser SLOs by re-solving, some while the base plan is solved."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetplan.catalogs import load_catalogs
from fleetplan.optimizer import optimization, resolve_queue
from fleetplan.optimizer.resolve_queue import ReSolve, ReSolves
from fleetplan.optimizer.period_solves import Deadline
from fleetplan.optimizer.scenario_files import load_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario
from fleetplan.optimizer.solver import SolveOptions

SMALL = Path(__file__).parent / "fixtures" / "small_scenario.yaml"


@pytest.fixture(scope="module")
def catalogs():
    return load_catalogs()


def finish(resolves: ReSolves, own: list[ReSolve], started: list) -> list[list]:
    """The results of ``own`` re-solves, queued behind the ``started`` ones."""
    return resolves.results(resolves.queue(own), started)


def recording(monkeypatch, module, name: str, events: list, label: str) -> None:
    """``module.name`` replaced by itself, first noting ``label`` in ``events``."""
    function = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: events.append(label) or function(*a, **k))


def small_scenario(tpot_slo_ms: float = 50.0, *, what_if: bool = True):
    """One chat workload at 20 req/s on H100, L40S and A100 (``fixtures/small_scenario.yaml``)."""
    scenario = load_scenario(SMALL)
    workloads = [scenario.workloads[0].model_copy(update={"tpot_slo_ms": tpot_slo_ms})]
    return scenario.model_copy(update={
        "workloads": workloads, "what_if": scenario.what_if.model_copy(update={"enabled": what_if})})


def test_a_looser_slo_saves_what_the_plan_at_that_slo_saves(catalogs):
    plan = plan_scenario(small_scenario(), catalogs)
    row = plan.binding_constraints.set_index("family").loc["tpot_slo"]
    assert row["subject"] == "chat" and row["change"] == "x1.5"
    looser = plan_scenario(small_scenario(75.0, what_if=False), catalogs)
    assert row["saving_usd_per_month"] == pytest.approx(plan.usd_per_month - looser.usd_per_month,
                                                        abs=0.01)
    assert row["saving_usd_per_month"] > 100.0  # it binds: the H100s batch more at 75 ms


def test_pricing_begun_during_the_base_solve_equals_pricing_after_it(catalogs, monkeypatch):
    events = []
    recording(monkeypatch, optimization, "solve_fleet", events, "base solve")
    recording(monkeypatch, optimization, "start_slo_pricing", events, "slo pricing begun")
    early = plan_scenario(small_scenario(), catalogs).binding_constraints
    assert events == ["slo pricing begun", "base solve"]
    events.clear()
    monkeypatch.setattr(optimization, "EARLY_PRICING_COLUMNS", 0)  # as a large model does
    late = plan_scenario(small_scenario(), catalogs).binding_constraints
    assert events == ["base solve"]
    assert not early.empty
    pd.testing.assert_frame_equal(early, late)


@pytest.mark.parametrize(("threads", "side_by_side"), [(None, 1), (2, 2)])
def test_solves_side_by_side_run_on_one_thread_each_unless_the_scenario_says(
        catalogs, monkeypatch, threads, side_by_side):
    used = {"base": [], "re-solves": []}
    solve, relaxed_cost = optimization.solve_fleet, resolve_queue.relaxed_cost

    def record_base(model, options, *args, **kwargs):
        used["base"].append(options.threads)
        return solve(model, options, *args, **kwargs)

    def record_resolve(problem, options, *args, **kwargs):
        used["re-solves"].append(options.threads)
        return relaxed_cost(problem, options, *args, **kwargs)

    monkeypatch.setattr(optimization, "solve_fleet", record_base)
    monkeypatch.setattr(resolve_queue, "relaxed_cost", record_resolve)
    scenario = small_scenario()
    scenario = scenario.model_copy(update={"solver": scenario.solver.model_copy(
        update={"threads": threads})})
    assert not plan_scenario(scenario, catalogs).binding_constraints.empty
    assert used["base"] == [side_by_side]  # beside the looser SLO's re-solve
    assert used["re-solves"] and set(used["re-solves"]) == {side_by_side}
    used["base"].clear()
    monkeypatch.setattr(optimization, "EARLY_PRICING_COLUMNS", 0)  # the base solve alone
    plan_scenario(scenario, catalogs)
    assert used["base"] == [threads]


@pytest.fixture
def named_problems(monkeypatch):
    """Problems that stand for themselves: their models are not built (``relaxed_cost`` is
    faked), and no base plan is awaited."""
    monkeypatch.setattr(resolve_queue, "build_model", lambda problem, **kwargs: object())


def worker_held_by_slow(release_after: str):
    """A stand-in for ``relaxed_cost`` that holds the thread solving "slow" until the problem
    ``release_after`` is solved; with the event set once "slow" has begun, and the problems in
    the order they were solved."""
    running, release, solved = threading.Event(), threading.Event(), []

    def fake_relaxed_cost(problem, options, deadline, variant=None, start=None):
        if problem == "slow":
            running.set()
            release.wait(10)
        solved.append(problem)
        if problem == release_after:
            release.set()
        return problem, threading.current_thread().name

    return fake_relaxed_cost, running, solved


def test_the_caller_takes_over_problems_the_worker_has_not_begun(monkeypatch, named_problems):
    fake_relaxed_cost, running, solved = worker_held_by_slow("own")  # while still on "slow"
    monkeypatch.setattr(resolve_queue, "relaxed_cost", fake_relaxed_cost)
    resolves = ReSolves(SolveOptions(), Deadline(30))
    resolves.base_solved(None)
    try:
        started = resolves.start([lambda: "slow", lambda: "a", lambda: "b"])
        assert running.wait(10)  # the worker is busy with "slow" before the caller goes on
        own, begun = finish(resolves, [ReSolve("own")], started)
    finally:
        resolves.close()
    caller = threading.current_thread().name
    assert own == [("own", caller)]
    assert [problem for problem, _ in begun] == ["slow", "a", "b"]  # in the order started
    assert begun[0][1].startswith("fleetplan-resolve")
    # "a" and "b" were waiting behind "slow": the caller takes them, first to last, then its own
    assert [thread for _, thread in begun[1:]] == [caller, caller]
    assert solved == ["a", "b", "own", "slow"]


def test_models_built_anew_are_solved_before_those_begun_from_the_base_plan(monkeypatch,
                                                                           named_problems):
    fake_relaxed_cost, running, solved = worker_held_by_slow("varied too")
    monkeypatch.setattr(resolve_queue, "relaxed_cost", fake_relaxed_cost)
    changed_base = object()  # stands for the base model changed to the relaxed problem
    resolves = ReSolves(SolveOptions(), Deadline(30))
    resolves.base_solved(None)
    try:
        started = resolves.start([lambda: "slow"])
        assert running.wait(10)
        own, _ = finish(resolves, [ReSolve("varied", changed_base, np.zeros(1)),
                                  ReSolve("rebuilt"), ReSolve("varied too", changed_base)],
                                 started)
    finally:
        resolves.close()
    assert [problem for problem, _ in own] == ["varied", "rebuilt", "varied too"]  # as given
    assert solved[:3] == ["rebuilt", "varied", "varied too"]  # the longest first


def test_a_failed_resolve_reaches_the_caller(monkeypatch, named_problems):
    def fake_relaxed_cost(problem, options, deadline, variant=None, start=None):
        raise RuntimeError(f"solver lost {problem}")

    monkeypatch.setattr(resolve_queue, "relaxed_cost", fake_relaxed_cost)
    with ReSolves(SolveOptions(), Deadline(30)) as resolves, \
            pytest.raises(RuntimeError, match="solver lost"):
        resolves.base_solved(None)
        finish(resolves, [ReSolve("own")], resolves.start([lambda: "started"]))


def test_an_exit_during_a_resolve_stops_the_caller_at_once(monkeypatch):
    solved = []

    def fake_relaxed_cost(problem, options, deadline, variant=None, start=None):
        solved.append(problem)
        if problem == "interrupted":
            raise SystemExit(143)  # as SIGTERM's handler ends the command
        return problem, 0.0

    monkeypatch.setattr(resolve_queue, "relaxed_cost", fake_relaxed_cost)
    resolves = ReSolves(SolveOptions(), Deadline(30))
    resolves._worker.submit(threading.Event().wait, 0.5)  # the worker busy: the caller solves
    with resolves, pytest.raises(SystemExit):
        finish(resolves, [ReSolve("interrupted"), ReSolve("next")], [])
    assert solved == ["interrupted"]


def test_an_infeasible_base_drops_the_pricing_it_began(catalogs, monkeypatch):
    begun = []
    start = optimization.start_slo_pricing
    monkeypatch.setattr(optimization, "start_slo_pricing",
                        lambda *a, **k: begun.append(start(*a, **k)) or begun[-1])
    scenario = small_scenario()
    fleet = scenario.fleet.model_copy(update={"gpus": [scenario.fleet.gpus[0]]})  # 16 H100s only
    workload = scenario.workloads[0].model_copy(update={"requests_per_s": 2000.0})
    plan = plan_scenario(scenario.model_copy(update={"fleet": fleet, "workloads": [workload]}),
                         catalogs)
    assert plan.status == "infeasible" and not plan.unmet_demand.empty  # the elastic plan
    assert plan.binding_constraints.empty
    assert [subject for subject, _ in begun[0][0]] == ["chat"]  # its looser SLO was being priced
    assert all(future.done() for future in begun[0][1])
    assert not [t for t in threading.enumerate() if t.name.startswith("fleetplan-resolve")]


def test_a_failed_build_of_a_looser_problem_reaches_the_caller():
    def broken_relaxation():
        raise RuntimeError("could not make the looser problem")

    with ReSolves(SolveOptions(), Deadline(30)) as resolves, \
            pytest.raises(RuntimeError, match="could not make the looser problem"):
        finish(resolves, [], resolves.start([broken_relaxation]))


def test_a_started_resolve_waits_for_the_base_plan_to_begin_from(monkeypatch, named_problems):
    began_from = []
    monkeypatch.setattr(resolve_queue, "relaxed_cost",
                        lambda problem, options, deadline, model=None, start=None:
                        began_from.append((problem, start)) or (0.0, 0.0))
    monkeypatch.setattr(resolve_queue, "carried_start", lambda base, model: f"from {base}")
    with ReSolves(SolveOptions(), Deadline(30)) as resolves:
        started = resolves.start([lambda: "looser"])
        resolves.base_solved(SolvedBase())
        resolves.results(started)
    assert began_from == [("looser", "from base")]


def test_a_started_resolve_begins_from_scratch_beside_a_long_base_solve(monkeypatch,
                                                                          named_problems):
    began_from = []
    monkeypatch.setattr(resolve_queue, "relaxed_cost",
                        lambda problem, options, deadline, model=None, start=None:
                        began_from.append((problem, start)) or (0.0, 0.0))
    monkeypatch.setattr(resolve_queue, "CARRY_WAIT_S", 0.05)
    monkeypatch.setattr(resolve_queue, "carried_start", lambda base, model: f"from {base}")
    with ReSolves(SolveOptions(), Deadline(30)) as resolves:
        started = resolves.start([lambda: "looser"])
        assert started[0].result(10) == (0.0, 0.0)  # solved before the base plan came
        resolves.base_solved(SolvedBase())
    assert began_from == [("looser", None)]


def test_the_caller_carries_the_base_plan_onto_the_models_already_built(monkeypatch,
                                                                         named_problems):
    carried_on, reported = [], threading.Event()

    def fake_relaxed_cost(problem, options, deadline, model=None, start=None):
        reported.wait(10)  # the worker's first solve holds it until the caller is done
        return 0.0, 0.0

    monkeypatch.setattr(resolve_queue, "relaxed_cost", fake_relaxed_cost)
    monkeypatch.setattr(resolve_queue, "carried_start",
                        lambda base, model: carried_on.append(
                            threading.current_thread().name) or "carried")
    with ReSolves(SolveOptions(), Deadline(30)) as resolves:
        started = resolves.start([lambda: "a", lambda: "b"])
        waited = Deadline(10)
        while not started[0].running() and waited.remaining() > 0:
            threading.Event().wait(0.01)  # both built: the worker waits on the first
        resolves.base_solved(SolvedBase())
        reported.set()
        resolves.results(started)
    assert carried_on == [threading.current_thread().name] * 2  # once each, by the caller


def test_a_resolve_waiting_for_the_base_plan_gives_up_when_there_is_none(monkeypatch,
                                                                         named_problems):
    monkeypatch.setattr(resolve_queue, "relaxed_cost",
                        lambda *args, **kwargs: pytest.fail("nothing to compare with"))
    monkeypatch.setattr(resolve_queue, "CARRY_WAIT_S", 30.0)
    resolves = ReSolves(SolveOptions(), Deadline(60))
    started = resolves.start([lambda: "looser"])
    waited = Deadline(10)
    while not started[0].running() and waited.remaining() > 0:  # built, now waiting
        threading.Event().wait(0.01)
    closed = Deadline(60)
    resolves.close()  # as an infeasible base plan closes them
    assert closed.elapsed() < 5.0  # not the 30 s wait
    assert np.isnan(started[0].result(1)).all()


class SolvedBase:
    """Stands for a solved base model."""

    values = np.zeros(1)

    def __str__(self) -> str:
        return "base"


def test_a_plan_is_spread_and_rechecked_once_while_its_resolves_run(catalogs, monkeypatch):
    events = []
    recording(monkeypatch, optimization, "recheck", events, "recheck")
    recording(monkeypatch, optimization, "priced_values", events, "priced")
    plan = plan_scenario(small_scenario(), catalogs)
    assert events == ["recheck", "priced"]  # the re-solves were queued before it
    assert plan.assumptions["recheck"] == "passed" and not plan.binding_constraints.empty
    events.clear()
    plain = plan_scenario(small_scenario(what_if=False), catalogs)
    assert events == ["recheck"]
    pd.testing.assert_frame_equal(plan.fleet_by_period, plain.fleet_by_period)
    assert plan.usd_per_month == plain.usd_per_month
