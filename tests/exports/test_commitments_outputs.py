"""Commitments under uncertain demand in every output: the example scenario (P10/P50/P90 demand
for two teams) through ``fleetplan plan --focus``, the Parquet ``commitments`` table read by
DuckDB, the Commitments sheet recalculated by LibreOffice, and the scenario file's errors."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import fleetplan
from fleetplan.cli import main
from fleetplan.cli.plan_summary import print_plan
from fleetplan.exports import write_plan
from fleetplan.exports.plan_parquet import write_plan_parquet
from fleetplan.exports.plan_workbook import build_plan_book, plan_sheets
from fleetplan.optimizer.chargeback import chargeback_table
from fleetplan.optimizer.commitment_risk import COLUMNS
from fleetplan.optimizer.fleet_plan import FleetPlan
from tests.exports.samples import cell_values
from tests.exports.test_focus import SPEC

EXAMPLE = Path(fleetplan.__file__).parent / "examples" / "commitments.yaml"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The example through the command line: the plan as JSON, the FOCUS CSV, the summary."""
    folder = tmp_path_factory.mktemp("commitments")
    code = main(["plan", str(EXAMPLE), "-o", str(folder / "plan.json"), "--focus",
                 str(folder / "charges.csv"), "--start-date", "2027-01-01", "-q"])
    plan = FleetPlan.from_dict(json.loads((folder / "plan.json").read_text()))
    return code, plan, folder


@pytest.mark.slow
def test_the_example_plans_commitments_and_charges_to_the_cent(run):
    code, plan, folder = run
    assert code == 0 and plan.status == "optimal"
    table = plan.commitments
    assert list(table.columns) == list(COLUMNS)
    assert set(table["scenario"]) == {"p10", "p50", "p90"}
    options = table.drop_duplicates("option").set_index("option")
    assert options.loc["stochastic", "expected_usd_per_month"] == pytest.approx(
        plan.usd_per_month, rel=1e-6)
    assert (options["over_stochastic_usd_per_month"] >= -1e-6 * plan.usd_per_month).all()
    assert plan.assumptions["stochastic"]["vss_usd_per_month"] == pytest.approx(
        options.loc["P50 only (p50)", "over_stochastic_usd_per_month"])
    charges = chargeback_table(plan)
    assert set(charges["team"]) == {"support", "devtools"}
    assert round(charges["usd"].sum() * 100) == round(plan.objective_usd * 100)
    focus = pd.read_csv(folder / "charges.csv")
    assert list(focus.columns) == list(SPEC["column"])
    assert round(focus["BilledCost"].sum() * 100) == round(plan.objective_usd * 100)


@pytest.mark.slow
def test_the_commitments_table_in_parquet_reads_back_in_duckdb(run, tmp_path):
    _, plan, _ = run
    folder = write_plan_parquet(plan, tmp_path / "plan.parquet")
    read = duckdb.sql(f"SELECT option, scenario, usd_per_month, utilization FROM "
                      f"read_parquet('{folder}/commitments.parquet')").df()
    assert len(read) == len(plan.commitments)
    assert read["usd_per_month"].tolist() == pytest.approx(
        plan.commitments["usd_per_month"].tolist())


@pytest.mark.slow
def test_the_commitments_sheet_has_live_risk_columns_and_a_chart(run):
    _, plan, _ = run
    assert "Commitments" in plan_sheets(plan)
    book = build_plan_book(plan, start_date=dt.date(2027, 1, 1))
    ws = book.wb["Commitments"]
    headers = {c.value: c.column_letter for row in ws.iter_rows() for c in row
               if isinstance(c.value, str)}
    assert {"Cost-at-risk", "Above the stochastic plan", "Cost if p90",
            "Commitment used if p10"} <= set(headers)
    formulas = [c.value for row in ws.iter_rows() for c in row if c.data_type == "f"]
    assert any(f.startswith("=D") and "-C" in f for f in formulas)
    assert len(ws._charts) == 1 and len(ws._charts[0].series) == 4
    assert not book.mismatches


@pytest.mark.slow
def test_the_terminal_summary_names_the_vss(run, capsys):
    print_plan(run[1])
    out = capsys.readouterr().out
    assert "Commitments under uncertain demand" in out
    assert "value of the stochastic solution (VSS)" in out and "p50 scenario" in out


def test_plans_without_demand_scenarios_have_no_commitments_sheet(example_plan):
    assert example_plan.commitments.empty
    assert "Commitments" not in plan_sheets(example_plan)


@pytest.mark.libreoffice
@pytest.mark.slow
def test_the_commitments_sheet_recalculates_to_the_plans_numbers(run, tmp_path, libreoffice):
    _, plan, _ = run
    path = write_plan(plan, tmp_path / "plan.xlsx", start_date=dt.date(2027, 1, 1))
    values = cell_values(libreoffice.recalculate(path))
    sheet = {c: v for (title, c), v in values.items() if title == "Commitments"}
    row = next(int(c[1:]) for c, v in sheet.items() if c.startswith("A") and v == "stochastic")
    stochastic = plan.commitments[plan.commitments["option"] == "stochastic"].iloc[0]
    assert sheet[f"F{row}"] == pytest.approx(stochastic["cost_at_risk_usd_per_month"], rel=1e-9)
    assert sheet[f"G{row}"] == pytest.approx(0.0, abs=1e-6)
