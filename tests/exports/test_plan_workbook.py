"""Plan workbooks: sheets, live money cells that reproduce the plan, formatting, safety."""

from __future__ import annotations

import os
import zipfile

import openpyxl
import pytest

import fleetplan
from fleetplan.exports import write_plan
from fleetplan.exports.labels import header_of
from fleetplan.exports.plan_sheets_summary import REOPTIMIZE_NOTE
from fleetplan.exports.plan_workbook import SHEETS, build_plan_book
from tests.exports.samples import cell_values, formula_cells

HOSTILE = ('=HYPERLINK("http://x","y")', "@SUM(1)")


@pytest.fixture(scope="module")
def example_book(example_plan, tmp_path_factory):
    book = build_plan_book(example_plan)
    path = book.save(tmp_path_factory.mktemp("plan") / "plan.xlsx")
    return book, path, openpyxl.load_workbook(path)


def _column(ws, header: str) -> list:
    """Cells under the first header cell equal to ``header`` down to the first empty one."""
    for row in ws.iter_rows():
        for cell in row:
            if cell.value == header:
                cells = []
                for below in ws.iter_rows(min_row=cell.row + 1, min_col=cell.column,
                                          max_col=cell.column):
                    if below[0].value is None:
                        return cells
                    cells.append(below[0])
                return cells
    raise AssertionError(f"no header {header!r} on {ws.title}")


def test_sheets_and_properties(example_book):
    _, _, wb = example_book
    hidden = ("Chargeback", "Commitments")  # no teams, no demand scenarios
    assert tuple(wb.sheetnames) == tuple(s for s in SHEETS if s not in hidden)
    assert wb.calculation.fullCalcOnLoad
    assert wb.properties.title == "fleetplan plan: exports example"
    assert wb.properties.version == fleetplan.__version__
    assert wb.properties.created is not None
    assert {"hours_per_month", "horizon_months", "price_h100_sxm_on_demand",
            "fleet_usd_per_month", "usage_usd"} <= set(wb.defined_names)


def test_every_money_cell_is_live_and_matches_the_plan(example_book, example_plan):
    book, path, wb = example_book
    assert book.mismatches == []
    values = cell_values(path)
    fleet = wb["Fleet"]
    for header, column in ((header_of("usd_per_gpu_hour"), "usd_per_gpu_hour"),
                           (header_of("usd_per_month"), "usd_per_month"),
                           (header_of("usd_total"), "usd_total")):
        cells = _column(fleet, header)
        assert len(cells) == len(example_plan.fleet) + (header != header_of("usd_per_gpu_hour"))
        cells = cells[:len(example_plan.fleet)]  # the row below is the total
        assert all(c.data_type == "f" for c in cells)
        assert [values[("Fleet", c.coordinate)] for c in cells] == pytest.approx(
            example_plan.fleet[column].tolist(), rel=1e-9)
    costs = wb["Costs"]
    for header in (header_of("usd_per_month"), header_of("usd_total"), header_of("usd"),
                   header_of("idle_usd_per_month"), header_of("on_demand_usd")):
        assert all(c.data_type == "f" for c in _column(costs, header)), header
    by_month = [values[("Costs", c.coordinate)] for c in _column(costs, header_of("usd"))]
    assert by_month[:12] == pytest.approx(example_plan.costs_by_month["usd"].tolist(), rel=1e-9)
    summary = {row[0].value: row[1] for row in wb["Summary"].iter_rows(max_col=2)
               if row[0].value}
    total = summary["Total cost per month"]
    assert total.data_type == "f"
    assert values[("Summary", total.coordinate)] == pytest.approx(example_plan.usd_per_month)
    horizon = summary["Total over the horizon (12 months)"]
    assert values[("Summary", horizon.coordinate)] == pytest.approx(example_plan.objective_usd)


def test_workload_costs_are_live(example_book, example_plan):
    _, path, wb = example_book
    values = cell_values(path)
    cells = _column(wb["Workloads"], header_of("usd_per_month"))
    assert all(c.data_type == "f" for c in cells)
    assert [values[("Workloads", c.coordinate)] for c in cells] == pytest.approx(
        example_plan.workloads["usd_per_month"].tolist(), rel=1e-9)
    per_token = _column(wb["Workloads"], header_of("usd_per_m_tokens"))
    assert [values[("Workloads", c.coordinate)] for c in per_token] == pytest.approx(
        example_plan.workloads["usd_per_m_tokens"].tolist(), rel=1e-9)


def test_replica_counts_stay_numbers(example_book, example_plan):
    _, _, wb = example_book
    for header in (header_of("replicas_peak"), header_of("replicas_mean"), header_of("gpus_peak")):
        cells = _column(wb["Fleet"], header)[:len(example_plan.fleet)]
        assert all(c.data_type == "n" for c in cells), header
    assert [c.value for c in _column(wb["Fleet"], header_of("replicas_peak"))] == \
        example_plan.fleet["replicas_peak"].tolist()


def test_summary_says_prices_do_not_reoptimize(example_book):
    _, _, wb = example_book
    texts = [c.value for row in wb["Summary"].iter_rows() for c in row if isinstance(c.value, str)]
    assert REOPTIMIZE_NOTE in texts
    assert "do not re-optimize" in REOPTIMIZE_NOTE


def test_formatting(example_book):
    _, _, wb = example_book
    fleet = wb["Fleet"]
    assert fleet.freeze_panes == "B5"
    assert fleet.tables["Fleet"].autoFilter is not None
    money = _column(fleet, header_of("usd_per_month"))[0]
    assert money.number_format == '"$"#,##0'
    assert fleet.column_dimensions["A"].width >= 30
    assumptions = wb["Assumptions"]
    price = assumptions[wb.defined_names["price_l4_on_demand"].attr_text.split("!")[1]
                        .replace("$", "")]
    assert price.fill.fgColor.rgb.endswith("FFF2CC") and price.font.color.rgb.endswith("0000FF")
    hours = assumptions[wb.defined_names["hours_per_month"].attr_text.split("!")[1]
                        .replace("$", "")]
    assert hours.value == 730.0 and hours.fill.fgColor.rgb.endswith("FFF2CC")
    rules = wb["Workloads"].conditional_formatting
    assert len(list(rules)) >= 2


def test_charts(example_book):
    _, path, _ = example_book
    with zipfile.ZipFile(path) as package:
        charts = [package.read(n).decode() for n in package.namelist()
                  if n.startswith("xl/charts/chart")]
    kinds = sorted("scatterChart" if "scatterChart" in c else "barChart" for c in charts)
    assert kinds.count("barChart") == 2  # cost by GPU type, cost over the horizon
    assert kinds.count("scatterChart") == 2  # one frontier per workload
    assert any("TPOT SLO 40 ms" in c for c in charts)


def test_stress_plan_is_fully_live(stress_plan, tmp_path):
    book = build_plan_book(stress_plan)
    path = book.save(tmp_path / "stress.xlsx")
    assert book.mismatches == []
    values = cell_values(path)
    costs = openpyxl.load_workbook(path)["Costs"]
    workloads = {c.value: values[("Costs", c.offset(column=1).coordinate)]
                 for c in _column(costs, header_of("workload"))}
    expected = stress_plan.costs_by_workload.set_index("workload")["usd_per_month"]
    assert set(workloads) == set(expected.index) >= {"(spare)", "(idle node GPUs)"}
    for name, value in workloads.items():
        assert value == pytest.approx(expected[name], rel=1e-9)
    months = [values[("Costs", c.coordinate)] for c in _column(costs, header_of("usd"))][:3]
    assert months == pytest.approx(stress_plan.costs_by_month["usd"].tolist(), rel=1e-9)


def test_no_formula_injection_from_scenario_text(stress_plan, tmp_path):
    book = build_plan_book(stress_plan)
    path = book.save(tmp_path / "stress.xlsx")
    allowed = {(sheet, cell) for sheet, cells in book.formulas.cached.items() for cell in cells}
    formulas = formula_cells(path)
    assert formulas and set(formulas) <= allowed
    texts = {v for v in cell_values(path).values() if isinstance(v, str)}
    assert f"Fleet plan: {HOSTILE[0]}" in texts and HOSTILE[1] in texts
    assert not [f for f in formulas.values() if "HYPERLINK" in f or "SUM(1)" in f]


def test_infeasible_plan_still_writes(infeasible_plan, tmp_path):
    path = write_plan(infeasible_plan, tmp_path / "infeasible.xlsx")
    wb = openpyxl.load_workbook(path)
    texts = [c.value for row in wb["Workloads"].iter_rows() for c in row
             if isinstance(c.value, str)]
    assert "Unmet demand" in texts
    assert any("TPOT SLO 40 ms is below" in t for t in texts)
    assert any("The plan has no fleet" in str(c.value) for row in wb["Fleet"].iter_rows()
               for c in row)


def test_failed_plan_write_keeps_existing_file(example_plan, tmp_path, monkeypatch):
    from fleetplan.exports import xlsx_package

    target = tmp_path / "plan.xlsx"
    write_plan(example_plan, target)
    before = target.read_bytes()

    def broken(xml, cached):
        raise OSError("disk full")

    monkeypatch.setattr(xlsx_package, "cache_values", broken)
    with pytest.raises(OSError, match="disk full"):
        write_plan(example_plan, target)
    assert target.read_bytes() == before
    assert os.listdir(tmp_path) == ["plan.xlsx"]
