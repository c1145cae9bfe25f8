"""Large MIP solves run in a child process that is stopped at the time limit
(``solve_watchdog``): the limit holds even where HiGHS does not check it."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import fleetplan.optimizer.solver as solver_module
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.solve_watchdog import (
    GRACE_S,
    MIN_WATCHED_S,
    run_with_watchdog,
    wants_watchdog,
)
from fleetplan.optimizer.solver import SolveOptions, open_solver
from tests.optimizer.instances import portfolio_problem


def remaining_and_sum(remaining_s: float, *numbers: float) -> tuple[float, float]:
    """A child's call: what is left of its limit [s], and a sum."""
    return remaining_s, sum(numbers)


def square_root(remaining_s: float, value: float) -> float:
    return math.sqrt(value)


def sleep_past(remaining_s: float, seconds: float) -> None:
    time.sleep(seconds)


def test_an_answer_comes_back_from_the_child_with_what_is_left_of_its_limit():
    remaining, total = run_with_watchdog(remaining_and_sum, (2, 3), 30.0)
    assert total == 5 and 20.0 < remaining < 30.0  # the child's start-up is counted


def test_a_child_s_error_is_raised_in_the_caller():
    with pytest.raises(ValueError, match="math domain error"):
        run_with_watchdog(square_root, (-1.0,), 30.0)


def test_a_child_past_its_limit_is_stopped():
    started = time.perf_counter()
    assert run_with_watchdog(sleep_past, (60,), MIN_WATCHED_S) is None
    assert time.perf_counter() - started < MIN_WATCHED_S + GRACE_S + 5.0  # child start-up included


def test_only_large_mips_outside_a_child_are_watched(monkeypatch):
    assert wants_watchdog(50_000, True) and not wants_watchdog(50_000, False)
    assert not wants_watchdog(100, True)
    monkeypatch.setenv("FLEETPLAN_SOLVER_CHILD", "1")
    assert not wants_watchdog(50_000, True)


def test_the_day_portfolios_whole_milp_is_watched():
    # bench_portfolio.py --case day --whole 5: HiGHS's root cut loop on this 13,967-column MILP
    # ran 110.8 s against a 5 s limit in the process, and --case day --time-limit 30 took
    # 45.8 s while the watchdog started at 20,000 columns
    assert wants_watchdog(13_967, True)
    # bench_optimizer.py (b)'s 7,465 columns and the year portfolio's 7,043 are watched too
    assert wants_watchdog(7_043, True)
    # the example plan's MILPs (under 600 columns) pay no child start-up
    assert not wants_watchdog(600, True)


def test_a_watched_solve_equals_the_solve_in_this_process(monkeypatch):
    model = build_model(portfolio_problem(n_models=1, n_gpus=2, n_periods=2))
    options = SolveOptions(time_limit_s=30, mip_gap=0.0)
    here = open_solver(model.program, model.cost, options).solve(time_limit_s=30, mip_gap=0.0)
    monkeypatch.setattr(solver_module, "wants_watchdog", lambda n_cols, mip: mip)
    watched = open_solver(model.program, model.cost, options).solve(time_limit_s=30, mip_gap=0.0)
    assert watched.outcome.status == here.outcome.status == "optimal"
    assert watched.outcome.objective == pytest.approx(here.outcome.objective, rel=1e-9)
    assert np.allclose(watched.values, here.values)


def test_a_stopped_solve_keeps_its_start_and_claims_no_bound(monkeypatch):
    model = build_model(portfolio_problem(n_models=1, n_gpus=2, n_periods=2))
    options = SolveOptions(time_limit_s=30, mip_gap=0.0)
    start = open_solver(model.program, model.cost, options).solve(time_limit_s=30, mip_gap=0.0).values
    monkeypatch.setattr(solver_module, "wants_watchdog", lambda n_cols, mip: mip)
    monkeypatch.setattr(solver_module, "run_with_watchdog", lambda *arguments: None)  # stopped
    solver = open_solver(model.program, model.cost, options)
    kept = solver.solve(time_limit_s=1, mip_gap=0.0, start=start)
    assert kept.outcome.status == "time_limit" and math.isnan(kept.outcome.bound)
    assert kept.outcome.objective == pytest.approx(float(model.cost @ start))
    nothing = solver.solve(time_limit_s=1, mip_gap=0.0)
    assert nothing.outcome.status == "no_solution" and nothing.values is None


def test_a_child_ends_with_its_parent():
    script = ("from fleetplan.optimizer.solve_watchdog import run_with_watchdog\n"
              "from tests.optimizer.test_solve_watchdog import sleep_past\n"
              "if __name__ == '__main__':\n    run_with_watchdog(sleep_past, (120,), 120)\n")
    parent = subprocess.Popen([sys.executable, "-c", script])
    child = None
    for _ in range(100):  # the parent starts its child
        found = _children(parent.pid)
        if found:
            child = found[0]
            break
        time.sleep(0.1)
    assert child is not None
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    for _ in range(50):
        if not os.path.exists(f"/proc/{child}") or "zombie" in _state(child):
            break
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{child}") or "zombie" in _state(child)


def _children(parent: int) -> list[int]:
    """Processes whose parent is ``parent`` (from /proc: no procps needed)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if int(fields[1]) == parent:
                found.append(int(entry))
    return found


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as status:
            return status.read().lower()
    except FileNotFoundError:
        return "zombie"


def test_a_limit_too_short_for_a_large_mip_starts_no_child(monkeypatch):
    def no_child(*arguments, **options):
        raise AssertionError("a child process was started")

    monkeypatch.setattr(subprocess, "Popen", no_child)
    assert run_with_watchdog(sleep_past, (60,), 0.1) is None
