"""FleetPlan files: JSON round trip, a folder of CSVs, atomic writes, the terminal summary."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from fleetplan.exports.plan_json import read_plan_json, write_plan_csv, write_plan_json
from fleetplan.optimizer.fleet_plan import SCALAR_FIELDS, STATUSES, TABLE_FIELDS, FleetPlan
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.plan_summary import usd
from fleetplan.optimizer.solver import SolveOptions
from tests.optimizer.instances import make_problem


@pytest.fixture(scope="module")
def plan() -> FleetPlan:
    problem = make_problem([[10.0, 4.0], [30.0, 20.0]], [[25.0, 5.0], [10.0, 2.0]],
                           {("g0", "on_demand"): 1.0, ("g1", "on_demand"): 3.0,
                            ("g1", "reserved_1y"): 2.0}, max_gpus={"g1": 1})
    return optimize_problem(problem, SolveOptions(mip_gap=0.0), scenario={"name": "t"})


def test_every_table_field_is_a_dataframe_with_units_in_column_names(plan):
    for name in TABLE_FIELDS:
        assert isinstance(getattr(plan, name), pd.DataFrame), name
    assert {"replicas_peak", "gpus_peak", "usd_per_gpu_hour", "usd_per_month"} <= set(plan.fleet)
    assert {"fraction", "req_s"} <= set(plan.routing)
    assert plan.status in STATUSES


def test_json_round_trip_keeps_scalars_and_tables(plan, tmp_path):
    path = write_plan_json(plan, tmp_path / "plan.json")
    back = read_plan_json(path)
    for name in SCALAR_FIELDS:
        assert getattr(back, name) == pytest.approx(getattr(plan, name)), name
    pd.testing.assert_frame_equal(back.fleet.reset_index(drop=True),
                                  plan.fleet.reset_index(drop=True), check_dtype=False)
    assert back.scenario == {"name": "t"}
    assert not list(tmp_path.glob(".*tmp"))  # no temporary files left behind


def test_json_has_no_nan(plan, tmp_path):
    plan.gap = math.nan
    text = write_plan_json(plan, tmp_path / "p.json").read_text()
    assert "NaN" not in text
    assert json.loads(text)["gap"] is None


def test_csv_folder_has_one_file_per_non_empty_table(plan, tmp_path):
    folder = write_plan_csv(plan, tmp_path / "plan")
    names = {p.stem for p in folder.glob("*.csv")}
    assert {"fleet", "routing", "costs_by_gpu", "workloads"} <= names
    assert "unmet_demand" not in names  # empty
    fleet = pd.read_csv(folder / "fleet.csv")
    assert fleet["usd_per_month"].sum() == pytest.approx(plan.fleet["usd_per_month"].sum())
    assert json.loads((folder / "plan.json").read_text())["status"] == plan.status


def test_summary_text_names_status_cost_and_fleet(plan):
    text = plan.summary_text()
    assert text.startswith(f"status: {plan.status}")
    assert "fleet (peak replicas):" in text and "c1" in text
    assert "per month" in text


def test_failed_write_leaves_the_old_file(plan, tmp_path, monkeypatch):
    path = tmp_path / "plan.json"
    path.write_text("old")

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", broken)
    with pytest.raises(OSError, match="disk full"):
        write_plan_json(plan, path)
    assert path.read_text() == "old"
    assert not list(tmp_path.glob(".*tmp"))


@pytest.mark.parametrize(("value", "text"), [
    (1234.5, "$1,234"), (99.5, "$99.50"), (1.5, "$1.50"), (np.nan, "n/a"), (None, "n/a")])
def test_usd_text(value, text):
    assert usd(value) == text
