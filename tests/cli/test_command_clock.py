"""``fleetplan plan``'s time limit is the whole command's: its clock starts with the process
(or with ``main`` called from Python), and it keeps time for writing the plan."""

from __future__ import annotations

import math
import subprocess
import sys
import time

import pytest

import fleetplan.cli.command_clock as command_clock
import fleetplan.cli.plan
from fleetplan.cli import main
from fleetplan.cli.command_clock import process_age_s, writing_s
from fleetplan.optimizer.fleet_plan import FleetPlan
from tests.optimizer.instances import make_problem

SLEPT_S = 0.5
AGES = (f"import time; time.sleep({SLEPT_S}); "
        "from fleetplan.cli import command_clock as c; "
        "c.start_command({at_start}); print(c.command_elapsed_s(), c.process_age_s())")


@pytest.mark.parametrize("at_start", [True, False])
def test_a_command_run_as_the_process_counts_from_the_process_start(at_start):
    # the half second slept before the import is the process's, and so the command's when the
    # process runs it; a command started from Python counts from its own start
    done = subprocess.run([sys.executable, "-c", AGES.format(at_start=at_start)],
                          capture_output=True, text=True, check=True)
    elapsed, age = map(float, done.stdout.split())
    assert SLEPT_S <= age < 60.0
    # two clocks (perf_counter, CLOCK_BOOTTIME) read in turn: equal within a millisecond or so
    assert (elapsed >= SLEPT_S) is at_start and elapsed <= age + 0.05


def unreadable(*arguments, **keywords):
    raise OSError("no /proc here")


def test_without_proc_the_age_is_the_time_since_the_clock_was_imported(monkeypatch):
    monkeypatch.setattr(command_clock, "open", unreadable, raising=False)
    since_import = time.perf_counter() - command_clock._IMPORTED
    assert since_import <= process_age_s() <= time.perf_counter() - command_clock._IMPORTED


def test_a_boot_clock_that_disagrees_falls_back_to_the_time_since_import(monkeypatch):
    monkeypatch.setattr(command_clock.time, "clock_gettime", lambda clock: 0.0)  # before start
    assert 0.0 <= process_age_s() <= time.perf_counter() - command_clock._IMPORTED


def test_before_a_command_starts_nothing_is_spent(monkeypatch):
    monkeypatch.setitem(command_clock._command, "started", None)
    assert command_clock.command_elapsed_s() == 0.0


@pytest.mark.parametrize(("rows", "suffix", "printing", "focus", "seconds"), [
    (10_000, ".json", False, False, 0.05 + 0.12 + 0.1),
    (10_000, ".JSON", True, True, 0.05 + 0.12 + 0.1 + 0.2 + 0.2),
    (1_000_000, ".xlsx", False, False, 0.75 + 0.1),  # a workbook holds months, not hours
    (20_000, "", False, False, 0.1 + 0.2 + 0.1),  # a folder of CSVs
    (20_000, ".parquet", True, False, 0.25 + 0.04 + 0.1 + 0.2)])
def test_writing_time_by_output(rows, suffix, printing, focus, seconds):
    assert writing_s(rows, suffix, printing, focus) == pytest.approx(seconds)


def test_plan_tells_the_library_what_went_before_and_what_to_keep(monkeypatch, tmp_path):
    given = {}

    def planned(scenario, what_if=None, **clock):
        given.update(clock)
        return FleetPlan(status="optimal", gap=0.0, objective_usd=10.0, usd_per_month=1.0,
                         solver="HiGHS", solve_seconds=1.0, bound_usd=10.0,
                         assumptions={"horizon_months": 10.0})

    monkeypatch.setattr(fleetplan.cli.plan, "plan_scenario", planned)
    started = time.perf_counter()
    assert main(["plan", "-o", str(tmp_path / "plan.json"), "-q"]) == 0
    # main called from Python: the command began then, reading the example scenario counts
    assert 0.0 < given["spent_s"] < time.perf_counter() - started
    problem = make_problem([[2.0]], [[1.0], [0.0], [3.0]], {("g0", "on_demand"): 1.0})
    rows = int((problem.demand["req_s"] > 0).sum())
    assert rows == 2
    assert given["kept_s"](problem) == pytest.approx(writing_s(rows, ".json", False, False))
    assert math.isfinite(given["kept_s"](problem))
