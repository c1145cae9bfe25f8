"""The workbook's Changes sheet: shown only with a current fleet, its bill recalculates in
LibreOffice to the plan's numbers, and its monthly diff to the library's."""

from __future__ import annotations

import datetime as dt
import math

import openpyxl
import pytest

from fleetplan.exports import write_plan
from fleetplan.exports.plan_sheet_changes import UNPROVEN_STAY
from fleetplan.exports.plan_workbook import plan_sheets
from fleetplan.optimizer.fleet_changes import monthly_diff
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.stay_the_course import UNPRICED, UNSERVABLE, stay_the_course
from tests.exports.samples import cell_values
from tests.optimizer.test_replanning import EXACT, tiny


@pytest.fixture(scope="module")
def replan_plan():
    problem = tiny([2, 4, 1], owned=1)
    plan = optimize_problem(problem, EXACT)
    plan.scenario = {"name": "replan", "workloads": [{"name": "w", "model": "m"}],
                     "fleet": {"current": [{"gpu": "ga", "pricing_type": "committed",
                                            "count": 2, "end_month": 1}]}}
    plan.assumptions["stay_the_course"] = stay_the_course(problem, plan, EXACT)
    return plan


def test_the_changes_sheet_needs_a_current_fleet(replan_plan):
    assert "Changes" in plan_sheets(replan_plan)
    without = {**replan_plan.scenario, "fleet": {}}
    replan_plan.scenario, saved = without, replan_plan.scenario
    try:
        assert "Changes" not in plan_sheets(replan_plan)
    finally:
        replan_plan.scenario = saved


@pytest.mark.libreoffice
def test_the_changes_sheet_recalculates_to_the_plan(tmp_path, libreoffice, replan_plan):
    path = write_plan(replan_plan, tmp_path / "plan.xlsx", start_date=dt.date(2027, 1, 1))
    values = cell_values(libreoffice.recalculate(path))
    sheet = {c: v for (title, c), v in values.items() if title == "Changes"}
    label = {v: int(c[1:]) for c, v in sheet.items() if c.startswith("A") and isinstance(v, str)}
    stay = replan_plan.assumptions["stay_the_course"]
    assert sheet[f"B{label['Whole bill with the plan']}"] == pytest.approx(stay["plan_usd_total"])
    assert sheet[f"B{label['Saving of the plan']}"] == pytest.approx(stay["saving_usd_total"])
    header = label["By month"] + 1
    diff = monthly_diff(replan_plan.changes)
    shown = [sheet[f"F{header + 1 + i}"] for i in range(len(diff))]
    assert shown == pytest.approx(diff["changes"].tolist())


def test_the_summary_names_the_sunk_commitments(tmp_path, replan_plan):
    path = write_plan(replan_plan, tmp_path / "plan.xlsx", start_date=dt.date(2027, 1, 1))
    sheet = openpyxl.load_workbook(path)["Summary"]
    rows = {sheet.cell(r, 1).value: sheet.cell(r, 2).value for r in range(1, 20)}
    label = "Sunk, not in the total (Changes)"
    assert rows[label] == pytest.approx(replan_plan.assumptions["stay_the_course"]["sunk_usd_total"])


@pytest.mark.parametrize(("status", "noted"), [("time_limit", True), ("optimal", False)])
def test_a_stay_the_course_cost_cut_short_is_noted_under_the_saving(tmp_path, replan_plan,
                                                                   status, noted):
    stay = replan_plan.assumptions["stay_the_course"]
    replan_plan.assumptions["stay_the_course"] = {**stay, "status": status}
    try:
        path = write_plan(replan_plan, tmp_path / "plan.xlsx", start_date=dt.date(2027, 1, 1))
    finally:
        replan_plan.assumptions["stay_the_course"] = stay
    sheet = openpyxl.load_workbook(path)["Changes"]
    labels = [sheet.cell(r, 1).value for r in range(1, 15)]
    assert (UNPROVEN_STAY in labels) is noted
    if noted:  # right under the saving
        assert labels.index(UNPROVEN_STAY) == labels.index("Saving of the plan") + 1


@pytest.mark.parametrize(("status", "shown"), [
    (UNSERVABLE, f"not possible: {UNSERVABLE}"), (UNPRICED, f"not priced: {UNPRICED}")])
def test_a_stay_the_course_without_a_cost_says_whether_it_cannot_serve_or_ran_out_of_time(
        tmp_path, replan_plan, status, shown):
    stay = replan_plan.assumptions["stay_the_course"]
    replan_plan.assumptions["stay_the_course"] = {**stay, "status": status,
                                                  "stay_usd_total": math.nan}
    try:
        path = write_plan(replan_plan, tmp_path / "plan.xlsx", start_date=dt.date(2027, 1, 1))
    finally:
        replan_plan.assumptions["stay_the_course"] = stay
    sheet = openpyxl.load_workbook(path)["Changes"]
    rows = {sheet.cell(r, 1).value: sheet.cell(r, 2).value for r in range(1, 15)}
    assert rows["Stay the course (today's fleet + on demand)"] == shown
