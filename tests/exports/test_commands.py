"""``fleetplan export`` and writing degenerate inputs (no rows, no solution)."""

from __future__ import annotations

import math

import openpyxl
import pandas as pd
import pytest

from fleetplan.cli import main
from fleetplan.exports import write_plan, write_sweep
from fleetplan.exports.parquet import read_provenance
from fleetplan.exports.plan_json import write_plan_json
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.sweeps.columns import SWEEP_COLUMNS
from tests.exports.samples import synthetic_sweep


def test_plan_json_to_workbook_and_parquet(tmp_path, example_plan):
    write_plan_json(example_plan, tmp_path / "plan.json")
    assert main(["export", str(tmp_path / "plan.json"), "-o", str(tmp_path / "plan.xlsx")]) == 0
    wb = openpyxl.load_workbook(tmp_path / "plan.xlsx")
    assert wb.sheetnames[0] == "Summary"
    assert main(["export", str(tmp_path / "plan.json"), "-o", str(tmp_path / "p.parquet"),
                 "--layout", "files"]) == 0
    fleet = pd.read_parquet(tmp_path / "p.fleet.parquet")
    assert fleet["usd_per_month"].sum() == pytest.approx(example_plan.fleet["usd_per_month"].sum())


def test_sweep_parquet_streams_to_other_formats(tmp_path):
    frame = synthetic_sweep()
    source = write_sweep(frame, tmp_path / "s.parquet", metadata={"batches": "1-128"})
    top = tmp_path / "top.xlsx"
    assert main(["export", str(source), "-o", str(top), "--top-n", "5",
                 "--tpot-slo-ms", "20"]) == 0
    assert pd.read_excel(top, sheet_name="Sweep").shape == (5, len(SWEEP_COLUMNS))
    folder = tmp_path / "parts.parquet"
    assert main(["export", str(source), "-o", str(folder), "--partition-by", "gpu"]) == 0
    assert main(["export", str(folder), "-o", str(tmp_path / "back.csv")]) == 0
    back = pd.read_csv(tmp_path / "back.csv")
    assert list(back.columns) == list(SWEEP_COLUMNS)
    assert len(back) == len(frame)
    record = read_provenance(next(folder.rglob("*.parquet")))
    assert record["parameters"]["batches"] == "1-128"
    assert record["parameters"]["converted_from"] == str(source)


@pytest.mark.parametrize(("arguments", "message"), [
    (["missing.json"], "does not exist"),
    (["table.txt"], "must be a plan .json or a sweep .parquet"),
])
def test_export_errors(tmp_path, capsys, arguments, message):
    (tmp_path / "table.txt").write_text("x")
    source = str(tmp_path / arguments[0])
    assert main(["export", source, "-o", str(tmp_path / "out.xlsx")]) == 2
    assert message in capsys.readouterr().err


def test_plan_without_solution_writes_every_format(tmp_path):
    plan = FleetPlan(status="no_solution", gap=math.nan, objective_usd=math.nan,
                     usd_per_month=math.nan, solver="HiGHS", solve_seconds=1.0)
    write_plan(plan, tmp_path / "p.xlsx")
    write_plan(plan, tmp_path / "p.parquet")
    write_plan(plan, tmp_path / "p.json")
    assert pd.read_parquet(tmp_path / "p.parquet" / "summary.parquet")["status"].tolist() == \
        ["no_solution"]
    texts = [c.value for row in openpyxl.load_workbook(tmp_path / "p.xlsx")["Summary"].iter_rows()
             for c in row if isinstance(c.value, str)]
    assert any(t.startswith("no_solution") for t in texts)


@pytest.mark.parametrize("suffix", [".xlsx", ".csv", ".parquet"])
def test_empty_sweep_keeps_its_columns(tmp_path, suffix):
    path = write_sweep(iter([]), tmp_path / f"empty{suffix}")
    reader = {".xlsx": lambda p: pd.read_excel(p, sheet_name="Sweep"), ".csv": pd.read_csv,
              ".parquet": pd.read_parquet}[suffix]
    frame = reader(path)
    assert len(frame) == 0 and len(frame.columns) == len(SWEEP_COLUMNS)
