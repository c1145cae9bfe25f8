"""pandas' string storage: fleetplan sets Python-stored strings on import, and a plan is the same
under either storage."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys

import pandas as pd
import pandas.testing as pdt
import pytest

import fleetplan
from fleetplan import chosen_string_storage
from fleetplan.catalogs import load_catalogs
from fleetplan.cli import main
from fleetplan.exports.plan_json import read_plan_json
from fleetplan.optimizer.optimization import optimize_problem
from tests.optimizer.instances import make_problem

#: The plan's tables that must agree row for row (solve times and dates may not).
PLAN_TABLES = ("fleet", "fleet_by_period", "nodes", "routing", "workloads", "binding_constraints")


def test_importing_fleetplan_stores_the_strings_it_makes_in_python():
    assert pd.get_option("mode.string_storage") == fleetplan.STRING_STORAGE == "python"
    gpus = load_catalogs().gpus
    assert gpus.index.dtype.storage == gpus["name"].dtype.storage == "python"


@pytest.mark.parametrize(("value", "storage"), [(None, "python"), ("pyarrow", "pyarrow"),
                                                (" PyArrow ", "pyarrow"), ("", "python")])
def test_the_environment_chooses_the_storage(value, storage):
    environ = {} if value is None else {"FLEETPLAN_STRING_STORAGE": value}
    assert chosen_string_storage(environ) == storage


def test_an_unknown_storage_is_logged_and_python_kept(caplog):
    with caplog.at_level(logging.WARNING, logger="fleetplan"):
        assert chosen_string_storage({"FLEETPLAN_STRING_STORAGE": "arrow"}) == "python"
    assert "FLEETPLAN_STRING_STORAGE='arrow' is not one of python, pyarrow" in caplog.text


def test_an_unknown_storage_in_the_environment_does_not_stop_the_import():
    done = subprocess.run(
        [sys.executable, "-c", "import fleetplan, pandas; "
         "print(pandas.get_option('mode.string_storage'))"],
        capture_output=True, text=True, env={**os.environ, "FLEETPLAN_STRING_STORAGE": "arrow"},
        check=True)
    assert done.stdout.strip() == "python"
    assert "is not one of python, pyarrow; using python" in done.stderr


@pytest.mark.slow
def test_the_example_plan_is_the_same_on_arrow_strings(tmp_path, capsys):
    """Every frame in a process of its own made with Arrow-stored strings, the example plan
    (marginal values included) has the same cost, fleet, routing and binding limits."""
    here, there = tmp_path / "python.json", tmp_path / "pyarrow.json"
    assert main(["plan", "-o", str(here), "-q"]) == 0, capsys.readouterr().err
    subprocess.run([sys.executable, "-m", "fleetplan.cli", "plan", "-o", str(there), "-q"],
                   env={**os.environ, "FLEETPLAN_STRING_STORAGE": "pyarrow"}, check=True)
    ours, theirs = read_plan_json(here), read_plan_json(there)
    assert (ours.status, ours.usd_per_month) == (theirs.status, theirs.usd_per_month)
    for name in PLAN_TABLES:
        pdt.assert_frame_equal(getattr(ours, name), getattr(theirs, name), obj=name)
    assert not ours.binding_constraints.empty


def _on_arrow_strings(frame: pd.DataFrame) -> pd.DataFrame:
    text = [c for c in frame.columns if pd.api.types.is_string_dtype(frame[c])]
    return frame.astype({c: pd.StringDtype("pyarrow", na_value=float("nan")) for c in text})


def test_a_problem_made_of_arrow_strings_plans_the_same():
    """Frames a caller made before importing fleetplan (or with Arrow storage on purpose) mix
    with the package's own: their merges give ``object`` keys, and the plan is the same."""
    problem = make_problem([[2.0, 1.0], [5.0, 3.0]], [[3.0, 1.0], [1.0, 2.0]],
                           {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 2.2,
                            ("g1", "reserved_1y"): 1.5}, redundancy_k=1)
    arrow = dataclasses.replace(problem, **{
        field.name: _on_arrow_strings(getattr(problem, field.name))
        for field in dataclasses.fields(problem)
        if isinstance(getattr(problem, field.name), pd.DataFrame)})
    assert arrow.configs["config"].dtype.storage == "pyarrow"
    ours, theirs = optimize_problem(problem), optimize_problem(arrow)
    assert (theirs.status, theirs.usd_per_month) == (ours.status, ours.usd_per_month)
    assert theirs.fleet["replicas_peak"].tolist() == ours.fleet["replicas_peak"].tolist()
    assert theirs.fleet["config"].tolist() == ours.fleet["config"].tolist()
