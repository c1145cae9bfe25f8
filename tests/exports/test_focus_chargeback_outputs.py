"""Chargeback in every output: the example scenario of two teams through ``fleetplan plan
--focus``, the workbook's Chargeback sheet recalculated by LibreOffice, the Parquet table read
by DuckDB, and the scenario schema."""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path

import duckdb
import openpyxl
import pandas as pd
import pytest

import fleetplan
from fleetplan.cli import main
from fleetplan.exports import write_plan
from fleetplan.exports.plan_workbook import build_plan_book
from fleetplan.optimizer.chargeback import chargeback_table
from fleetplan.optimizer.scenario import scenario_json_schema
from fleetplan.optimizer.scenario_files import load_scenario
from tests.exports.conftest import pages_by_sheet
from tests.exports.samples import cell_values
from tests.exports.test_focus import SPEC

EXAMPLE = Path(fleetplan.__file__).parent / "examples" / "chargeback.yaml"


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return openpyxl.load_workbook(path)


def test_the_example_names_two_teams_with_cost_centers():
    scenario = load_scenario(EXAMPLE)
    owners = {(w.team, w.cost_center) for w in scenario.workloads}
    assert owners == {("support", "CC-1001"), ("devtools", "CC-2002")}
    assert scenario.chargeback.spare == "usage"


@pytest.mark.slow
def test_plan_command_writes_focus_and_prints_each_team(tmp_path, capsys):
    focus = tmp_path / "charges.csv"
    code = main(["plan", str(EXAMPLE), "-o", str(tmp_path / "plan.parquet"), "--focus", str(focus),
                 "--start-date", "2027-03-01"])
    out, err = capsys.readouterr()
    assert code == 0 and f"wrote {focus}" in err
    lines = out[out.index("Chargeback"):].splitlines()
    assert any("support" in line and "CC-1001" in line for line in lines)
    assert any("devtools" in line and "CC-2002" in line for line in lines)
    table = pd.read_csv(focus)
    assert list(table.columns) == list(SPEC["column"])
    assert table["BillingPeriodStart"].min() == "2027-03-01T00:00:00Z"
    folder = tmp_path / "plan.parquet"
    charges = duckdb.sql(f"SELECT team, month, usd, tokens FROM read_parquet('{folder}/chargeback.parquet')").df()
    objective = duckdb.sql(f"SELECT objective_usd FROM read_parquet('{folder}/summary.parquet')").fetchall()[0][0]
    assert set(charges["team"]) == {"support", "devtools"} and charges["month"].nunique() == 12
    assert round(charges["usd"].sum() * 100) == round(objective * 100)
    assert round(table["BilledCost"].sum() * 100) == round(objective * 100)
    assert (charges["tokens"] > 0).all()


def test_focus_option_refuses_a_missing_folder(tmp_path, capsys):
    code = main(["plan", str(EXAMPLE), "-o", str(tmp_path / "plan.json"), "-q", "--no-what-if",
                 "--focus", str(tmp_path / "nowhere" / "charges.csv")])
    _, err = capsys.readouterr()
    assert code == 2 and "output folder" in err and "does not exist" in err


def test_schema_documents_teams_cost_centers_and_the_rule():
    schema = scenario_json_schema()
    workload = schema["$defs"]["Workload"]["properties"]
    assert {"team", "cost_center"} <= set(workload)
    assert schema["$defs"]["Chargeback"]["properties"]["spare"]["default"] == "usage"
    assert "chargeback" in schema["properties"]


@pytest.fixture(scope="module")
def team_plan(stress_plan):
    """The stress plan (spare replicas, idle node GPUs, growth) with teams, one of them a
    formula."""
    plan = type(stress_plan)(**stress_plan.__dict__)
    plan.scenario = {**stress_plan.scenario, "workloads": [
        {**w, "team": team, "cost_center": "=1+1"}
        for w, team in zip(stress_plan.scenario["workloads"], ['=HYPERLINK("http://x","y")', "batch"])]}
    return plan


@pytest.mark.libreoffice
def test_chargeback_sheet_recalculates_to_the_plans_total(tmp_path, libreoffice, team_plan):
    path = write_plan(team_plan, tmp_path / "plan.xlsx", start_date=dt.date(2027, 1, 1))
    values = cell_values(libreoffice.recalculate(path))
    sheet = {coordinate: value for (title, coordinate), value in values.items() if title == "Chargeback"}
    total_row = next(int(c[1:]) for c, v in sheet.items() if c.startswith("A") and v == "Total")
    assert round(sheet[f"C{total_row}"] * 100) == round(team_plan.objective_usd * 100)
    assert sheet[f"D{total_row}"] == pytest.approx(1.0)
    teams = chargeback_table(team_plan).groupby("team")["usd"].sum()
    shown = {sheet[f"A{r}"]: sheet[f"C{r}"] for r in range(5, total_row)}
    assert shown == pytest.approx(teams.to_dict())


@pytest.mark.libreoffice
def test_the_chargeback_sheet_prints_on_one_page(tmp_path, libreoffice, team_plan):
    path = write_plan(team_plan, tmp_path / "plan.xlsx", start_date=dt.date(2027, 1, 1))
    assert pages_by_sheet(libreoffice.print(path))["Chargeback"] == 1


def test_chargeback_sheet_keeps_names_as_text_and_months_as_dates(tmp_path, team_plan):
    book = build_plan_book(team_plan, start_date=dt.date(2027, 5, 1))
    book.save(tmp_path / "plan.xlsx")
    ws = _load(tmp_path / "plan.xlsx")["Chargeback"]
    names = [c for row in ws.iter_rows() for c in row if isinstance(c.value, str) and c.value.startswith("=")
             and c.data_type != "f"]
    assert {c.value for c in names} == {'=HYPERLINK("http://x","y")', "=1+1"}
    headers = {c.value for row in ws.iter_rows() for c in row if c.font.bold and isinstance(c.value, str)}
    assert {"Cost (USD)", "Tokens served (millions)", "Cost per 1M tokens (USD)", "Month"} <= headers
    months = sorted({c.value for row in ws.iter_rows() for c in row if isinstance(c.value, dt.datetime)})
    assert months[0] == dt.datetime(2027, 5, 1) and len(months) == 3
