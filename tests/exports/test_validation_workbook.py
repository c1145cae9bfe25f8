"""The validation report says which prediction each row is: in sample, or held out from the fit,
with what its efficiencies rest on; in-sample rows come first, and each Summary chart plots one
metric's in-sample rows only."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from openpyxl import load_workbook
from openpyxl.utils.cell import get_column_letter

from fleetplan.exports.validation_workbook import IN_SAMPLE, in_report_order, write_validation
from fleetplan.sweeps.model_validation import compare, read_measurements

MEASURED = Path(__file__).resolve().parents[2] / "fleetplan" / "sweeps" / "data" / "measured.csv"


@pytest.fixture(scope="module")
def report(shipped):
    """Each row in sample and held out by GPU (as ``fleetplan validate`` concatenates them,
    held-out rows listed first here), the held-out predictions 10% higher."""
    measured = read_measurements([MEASURED])
    some = measured[measured["metric"].isin(["output_tok_s", "ttft_ms", "tpot_ms", "e2e_ms"])]
    in_sample = compare(some.groupby("metric").head(12), shipped).assign(
        validation=IN_SAMPLE, calibration="measured")
    held_out = in_sample.assign(validation="leave-one-GPU-out", calibration="transferred",
                                predicted=in_sample["predicted"] * 1.1)
    return pd.concat([held_out, in_sample], ignore_index=True)


def test_rows_say_which_prediction_they_are_in_sample_first(report, tmp_path):
    path = write_validation(report, tmp_path / "validation.xlsx")
    rows = pd.read_excel(path, sheet_name="Rows")
    assert list(rows.columns[:5]) == ["Validation", "GPU", "Model", "Weights", "Engine"]
    assert list(rows.columns[-2:]) == ["Calibration", "Source"]
    count = (report["validation"] == IN_SAMPLE).sum()
    assert (rows["Validation"].iloc[:count] == IN_SAMPLE).all()
    assert (rows["Validation"].iloc[count:] == "leave-one-GPU-out").all()
    assert set(rows.loc[rows["Validation"] == IN_SAMPLE, "Calibration"]) == {"measured"}
    csv = pd.read_csv(write_validation(report, tmp_path / "validation.csv"))
    assert {"validation", "calibration", "engine_id"} <= set(csv.columns)


def test_each_summary_chart_plots_one_metrics_in_sample_rows(report, tmp_path):
    path = write_validation(report, tmp_path / "validation.xlsx")
    rows = pd.read_excel(path, sheet_name="Rows")
    measured = get_column_letter(list(rows.columns).index("Value") + 1)
    with zipfile.ZipFile(path) as archive:
        charts = [archive.read(name).decode() for name in archive.namelist()
                  if name.startswith("xl/charts/chart")]
    metrics = rows.loc[rows["Validation"] == IN_SAMPLE, "Metric"]
    assert len(charts) == metrics.nunique() > 1
    for chart in charts:
        first, last = map(int, re.search(rf"Rows'?!\$?{measured}\$?(\d+):\$?{measured}\$?(\d+)",
                                         chart).groups())
        block = rows.iloc[first - 2:last - 1]  # sheet rows 2.. are the table's first rows
        assert (block["Validation"] == IN_SAMPLE).all() and block["Metric"].nunique() == 1
        assert len(block) == (metrics == block["Metric"].iloc[0]).sum()
        assert "in sample" in chart


def test_rows_without_a_validation_column_keep_their_order_by_metric_and_value():
    rows = pd.DataFrame({"metric": ["b", "a", "a"], "value": [1.0, 3.0, 2.0]})
    assert in_report_order(rows).to_dict("list") == {"metric": ["a", "a", "b"],
                                                     "value": [2.0, 3.0, 1.0]}


def test_the_rows_sheet_prints_each_measurement_once(report, tmp_path):
    """With held-out rows the sheet holds each measurement once per validation; its print area
    is the header and the in-sample rows."""
    path = write_validation(report, tmp_path / "validation.xlsx")
    ws = load_workbook(path)["Rows"]
    in_sample = int((report["validation"] == IN_SAMPLE).sum())
    assert ws.print_area.endswith(f"${1 + in_sample}") and ws.max_row == 1 + len(report)
    alone = write_validation(report[report["validation"] == IN_SAMPLE], tmp_path / "alone.xlsx")
    assert load_workbook(alone)["Rows"].print_area.endswith(f"${1 + in_sample}")
