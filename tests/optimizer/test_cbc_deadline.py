"""CBC under a watch: a CBC that ignores its time limit is interrupted, then killed, so a
solve with the fallback solver ends near its limit (``cbc_solver.run_cbc``).

The real CBC stops in time on small models; one that overruns is played by a script given as
PuLP's CBC executable: it reads the solution path from its arguments like CBC, and on SIGINT
writes a plan (as CBC does on Ctrl-C) or ignores it.
"""

from __future__ import annotations

import stat
import sys
import time
from pathlib import Path

import numpy as np
import pulp
import pytest

import fleetplan.optimizer.cbc_solver as cbc_solver
from fleetplan.optimizer.linear_program import LinearProgram
from fleetplan.optimizer.solve_watchdog import WATCHDOG_COLUMNS
from fleetplan.optimizer.solver import CbcSolver, SolveOptions, open_solver

#: Bash prologue of every stand-in: the path CBC is told to write its solution to.
FIND_SOLUTION = """#!/bin/bash
while [ $# -gt 0 ]; do
  if [ "$1" = "-solution" ]; then solution="$2"; fi
  shift
done
"""

#: A CBC that writes its best plan (x = 3) when interrupted, and never stops on its own. It is
#: a Python script, not a shell one: a shell cannot trap a signal ignored when it started, and
#: this one also unblocks SIGINT, so it hears the interrupt whatever its parent passed on.
WRITES_ON_INTERRUPT = """#!{python}
import signal, sys, time
solution = sys.argv[sys.argv.index("-solution") + 1]
def stop(number, frame):
    with open(solution, "w") as out:
        out.write("Stopped on ctrl-c - objective value 3.00000000\\n      0 X0000000 3 0\\n")
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
time.sleep(60)
"""

#: A CBC that ignores interrupts too.
DEAF = FIND_SOLUTION + """
trap '' INT
for i in $(seq 600); do sleep 0.1; done
"""

#: A CBC that fails at once without writing a solution.
FAILS = FIND_SOLUTION + "exit 1\n"

#: A CBC that proves every column 0 optimal at once (PuLP reads unlisted columns as 0).
ALL_ZERO = FIND_SOLUTION + 'echo "Optimal - objective value 0" > "$solution"\n'


def at_least_two() -> LinearProgram:
    """One integer column in [0, 10] that must be at least 2."""
    program = LinearProgram()
    program.add_columns(1, lower=0.0, upper=10.0, integer=True)
    program.add_rows(1, np.array([0]), np.array([0]), np.array([1.0]), lower=np.array([2.0]),
                     upper=np.array([np.inf]))
    return program


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """Install a script as PuLP's CBC executable; returns the installer."""
    real = pulp.PULP_CBC_CMD

    def install(script: str) -> None:
        path = Path(tmp_path) / "cbc"
        path.write_text(script.replace("{python}", sys.executable))
        path.chmod(path.stat().st_mode | stat.S_IEXEC)

        def command(*arguments, **options):
            made = real(*arguments, **options)
            made.path = str(path)
            return made

        monkeypatch.setattr(pulp, "PULP_CBC_CMD", command)

    monkeypatch.setattr(cbc_solver, "CBC_GRACE_S", 0.3)
    monkeypatch.setattr(cbc_solver, "CBC_STOP_S", 0.3)  # the tests' timings assume these
    return install


def solve_with_cbc(start: np.ndarray | None = None):
    started = time.perf_counter()
    result = open_solver(at_least_two(), np.array([1.0]), SolveOptions(solver="cbc")).solve(
        time_limit_s=1.0, mip_gap=0.0, start=start)
    return result, time.perf_counter() - started


def test_real_cbc_solves_within_its_limit():
    result, seconds = solve_with_cbc()
    assert result.outcome.status == "optimal" and result.values.tolist() == [2.0]
    assert seconds < 1.0 + cbc_solver.CBC_GRACE_S


def test_cbc_past_its_limit_is_interrupted_and_its_plan_kept(stand_in):
    stand_in(WRITES_ON_INTERRUPT)
    result, seconds = solve_with_cbc()
    assert result.outcome.status == "time_limit"
    assert result.values.tolist() == [3.0] and result.outcome.objective == 3.0
    assert 1.0 + 0.3 <= seconds < 1.0 + 0.3 + 0.3 + 1.0  # limit, grace, then it stops at once


def test_cbc_deaf_to_the_interrupt_is_killed_without_a_plan(stand_in):
    stand_in(DEAF)
    result, seconds = solve_with_cbc()
    assert result.outcome.status == "no_solution" and result.values is None
    assert 1.0 + 0.3 + 0.3 <= seconds < 1.0 + 0.3 + 0.3 + 1.0


def test_a_killed_cbc_given_a_start_keeps_it_as_a_stopped_highs_child_does(stand_in):
    stand_in(DEAF)
    result, _ = solve_with_cbc(start=np.array([5.0]))
    assert result.outcome.status == "time_limit"
    assert result.values.tolist() == [5.0] and result.outcome.objective == 5.0


@pytest.mark.parametrize("start", [None, np.array([5.0])])
def test_cbc_failing_without_a_solution_file_is_no_solution_not_a_crash(stand_in, start):
    # CBC stopped by a short time limit can exit without writing its solution, and its warm
    # start can crash it; a start it was given is no plan it vouched for
    stand_in(FAILS)
    result, seconds = solve_with_cbc(start)
    assert result.outcome.status == "no_solution" and result.values is None
    assert seconds < 1.0


@pytest.mark.parametrize(("n_cols", "seconds", "expected"), [
    (WATCHDOG_COLUMNS, 0.99, True), (WATCHDOG_COLUMNS, 1.0, False),
    (WATCHDOG_COLUMNS - 1, 0.01, False)])
def test_too_short_means_a_large_mip_under_cbcs_least_limit(n_cols, seconds, expected):
    assert cbc_solver.too_short(n_cols, seconds) is expected


def test_a_large_mip_too_short_for_cbc_is_not_started_and_keeps_its_start(stand_in):
    stand_in(ALL_ZERO)  # would prove all zeros optimal if it were started
    program = LinearProgram()
    program.add_columns(WATCHDOG_COLUMNS, lower=0.0, upper=1.0, integer=True)
    cost = np.ones(WATCHDOG_COLUMNS)
    solver = open_solver(program, cost, SolveOptions(solver="cbc"))
    started = time.perf_counter()
    kept = solver.solve(time_limit_s=0.5, mip_gap=0.0, start=np.zeros(WATCHDOG_COLUMNS))
    assert time.perf_counter() - started < 0.5
    assert kept.outcome.status == "time_limit" and kept.outcome.objective == 0.0
    assert solver.solve(time_limit_s=0.5, mip_gap=0.0).outcome.status == "no_solution"
    relaxed = solver.solve(time_limit_s=0.5, mip_gap=0.0, relax=True)  # LPs always run
    assert relaxed.outcome.status == "optimal" and not relaxed.values.any()


@pytest.mark.parametrize(("threads", "given"), [(None, None), (1, None), (2, 2)])
def test_one_thread_runs_cbcs_serial_search_not_its_threaded_one(monkeypatch, threads, given):
    real, options = pulp.PULP_CBC_CMD, []

    def recorded(*arguments, **keywords):
        options.append(keywords)
        return real(*arguments, **keywords)

    monkeypatch.setattr(pulp, "PULP_CBC_CMD", recorded)
    result = open_solver(at_least_two(), np.array([1.0]),
                         SolveOptions(solver="cbc", threads=threads)).solve(time_limit_s=5.0,
                                                                            mip_gap=0.0)
    assert result.outcome.status == "optimal"
    assert options[0].get("threads") == given


def test_the_warning_names_the_overrun(stand_in, caplog):
    stand_in(DEAF)
    with caplog.at_level("WARNING", logger="fleetplan.optimizer.cbc_solver"):
        solve_with_cbc()
    messages = [r.getMessage() for r in caplog.records]
    assert any("past its 1.0 s limit: interrupted" in m for m in messages)
    assert "CBC did not stop when interrupted: killed, without a plan" in messages


def test_cbc_is_given_the_time_left_once_its_model_is_built(monkeypatch):
    # the PuLP model is built term by term; that time counts against the limit
    given = []
    real_model, real_command = CbcSolver._model, pulp.PULP_CBC_CMD

    def slow_model(self, relax):
        time.sleep(0.6)
        return real_model(self, relax)

    def recorded(*arguments, **options):
        given.append(options["timeLimit"])
        return real_command(*arguments, **options)

    monkeypatch.setattr(CbcSolver, "_model", slow_model)
    monkeypatch.setattr(pulp, "PULP_CBC_CMD", recorded)
    result = open_solver(at_least_two(), np.array([1.0]), SolveOptions(solver="cbc")).solve(
        time_limit_s=3.0, mip_gap=0.0)
    assert result.outcome.status == "optimal"
    assert len(given) == 1 and 1.0 <= given[0] <= 3.0 - 0.6
