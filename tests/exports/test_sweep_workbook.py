"""Sweep workbooks: structure, live cost formulas, row limits, formula-injection safety."""

from __future__ import annotations

import math

import numpy as np
import openpyxl
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openpyxl.utils.cell import get_column_letter

import fleetplan
from fleetplan.errors import InvalidValueError
from fleetplan.exports import sweep_workbook, write_sweep
from fleetplan.exports.labels import header_of
from fleetplan.exports.sweep_workbook import build_sweep_book, write_sweep_xlsx
from tests.exports.samples import (
    PRICES,
    cell_values,
    formula_cells,
    hostile_sweep,
    synthetic_sweep,
)


def test_sheets_table_names_and_properties(tmp_path, small_sweep):
    path = write_sweep(small_sweep, tmp_path / "s.xlsx", tpot_slo_ms=20.0)
    wb = openpyxl.load_workbook(path)
    assert wb.sheetnames == ["Summary", "Sweep", "Frontier", "Assumptions", "Sources", "Read me"]
    ws = wb["Sweep"]
    assert [c.value for c in ws[1]] == [header_of(c) for c in small_sweep.columns]
    assert ws.max_row == len(small_sweep) + 1
    table = ws.tables["Sweep"]
    assert table.ref == f"A1:AE{len(small_sweep) + 1}"
    assert table.autoFilter is not None
    assert ws.freeze_panes == "E2"
    assert ws.column_dimensions["A"].width >= 6
    assert {f"price_{g.replace('-', '_')}" for g in PRICES} <= set(wb.defined_names)
    assert wb.calculation.fullCalcOnLoad
    assert wb.properties.title == "fleetplan sweep"
    assert wb.properties.version == fleetplan.__version__
    assert wb.properties.created is not None


def test_frontier_chart_is_in_the_package(tmp_path, small_sweep):
    import zipfile

    path = write_sweep(small_sweep, tmp_path / "s.xlsx", tpot_slo_ms=20.0)
    with zipfile.ZipFile(path) as package:
        charts = [n for n in package.namelist() if n.startswith("xl/charts/chart")]
        xml = package.read(charts[0]).decode()
    assert len(charts) == 1
    assert "scatterChart" in xml and "TPOT SLO 20 ms" in xml and "knee" in xml


def test_cost_columns_are_formulas_with_python_values(tmp_path, small_sweep):
    path = write_sweep(small_sweep, tmp_path / "s.xlsx")
    formulas = formula_cells(path)
    values = cell_values(path)
    letters = {name: openpyxl.utils.get_column_letter(i)
               for i, name in enumerate(small_sweep.columns, start=1)}
    assert formulas[("Sweep", f"{letters['usd_per_hour']}2")] == \
        f"={letters['tp']}2*price_{small_sweep.loc[0, 'gpu'].replace('-', '_')}"
    for name in ("usd_per_hour", "usd_per_m_output_tokens", "usd_per_m_total_tokens",
                 "usd_per_k_requests"):
        for row, expected in enumerate(small_sweep[name], start=2):
            key = ("Sweep", f"{letters[name]}{row}")
            assert key in formulas
            assert values[key] == pytest.approx(expected, rel=1e-12)
    assert {sheet for sheet, _ in formulas} == {"Sweep"}


def test_values_the_formula_cannot_reproduce_stay_constants(tmp_path, small_sweep):
    frame = small_sweep.copy()
    frame.loc[3, "usd_per_k_requests"] *= 1.01  # not what the formula gives
    frame.loc[5, "output_tok_s"] = 0.0
    frame.loc[5, "usd_per_m_output_tokens"] = np.nan
    book = build_sweep_book(frame)
    path = book.save(tmp_path / "s.xlsx")
    formulas = formula_cells(path)
    letters = {n: openpyxl.utils.get_column_letter(i) for i, n in enumerate(frame.columns, 1)}
    assert ("Sweep", f"{letters['usd_per_k_requests']}5") not in formulas
    assert cell_values(path)[("Sweep", f"{letters['usd_per_k_requests']}5")] == \
        pytest.approx(frame.loc[3, "usd_per_k_requests"])
    assert ("Sweep", f"{letters['usd_per_m_output_tokens']}7") not in cell_values(path)
    assert book.formula_cell_count() == len(formulas) == 4 * len(frame) - 2


def test_gpu_without_single_price_keeps_constants(tmp_path, small_sweep):
    frame = small_sweep.copy()
    l4 = frame.index[frame["gpu"] == "l4"]
    frame.loc[l4[0], "usd_per_hour"] *= 2  # two prices for l4: no single input to link
    path = write_sweep(frame, tmp_path / "s.xlsx")
    assert "price_l4" not in openpyxl.load_workbook(path).defined_names
    letters = {n: openpyxl.utils.get_column_letter(i) for i, n in enumerate(frame.columns, 1)}
    formulas = formula_cells(path)
    assert not [k for k in formulas if k[1] == f"{letters['usd_per_hour']}{l4[1] + 2}"]


def test_unpriced_sweep_has_no_formulas(tmp_path, small_sweep):
    frame = small_sweep.assign(usd_per_hour=np.nan, usd_per_m_output_tokens=np.nan,
                               usd_per_m_total_tokens=np.nan, usd_per_k_requests=np.nan)
    path = write_sweep(frame, tmp_path / "s.xlsx")
    assert formula_cells(path) == {}
    readme = [c for row in openpyxl.load_workbook(path)["Read me"].iter_rows(values_only=True)
              for c in row if c]
    assert any("Costs are fixed values" in str(c) for c in readme)


def test_no_formula_injection(tmp_path):
    frame = hostile_sweep()
    book = build_sweep_book(frame, metadata={"label": '=HYPERLINK("http://x","y")',
                                             "note": "@SUM(1)"})
    path = book.save(tmp_path / "hostile.xlsx")
    formulas = formula_cells(path)
    bulk = book.bulk["Sweep"]
    allowed = {("Sweep", f"{letter}{row}") for letter in bulk.formula_columns
               for row in range(2, bulk.last_row + 1)}
    allowed |= {(sheet, cell) for sheet, cells in book.formulas.cached.items() for cell in cells}
    assert formulas and set(formulas) <= allowed
    for text in formulas.values():
        assert "HYPERLINK" not in text and "SUM" not in text and "cmd" not in text
    strings = set(cell_values(path).values())
    for hostile in ('=HYPERLINK("http://x","y")', "@SUM(1)", "+1+2", "=1/0", "-2+3",
                    "=cmd|' /C calc'!A0"):
        assert hostile in strings
    assert "price_hyperlink_http_x_y" in openpyxl.load_workbook(path).defined_names


def test_too_many_rows_point_to_parquet(tmp_path):
    frame = pd.DataFrame({"gpu": pd.Categorical(["l4"] * (sweep_workbook.EXCEL_MAX_ROWS + 1)),
                          "usd_per_m_output_tokens": 1.0})
    with pytest.raises(InvalidValueError, match=r"1,048,576 rows .* write \.parquet"):
        write_sweep(frame, tmp_path / "big.xlsx")
    assert not list(tmp_path.iterdir())


def _grid_summary(ws) -> dict[str, list]:
    """The Summary sheet's per GPU and model table, by header."""
    table = ws.tables["GridSummary"]
    rows = list(ws[table.ref])
    headers = [c.value for c in rows[0]]
    return {h: [row[i].value for row in rows[1:]] for i, h in enumerate(headers)}


def test_top_n_keeps_cheapest_rows_and_summarizes(tmp_path):
    n = sweep_workbook.EXCEL_MAX_ROWS + 5
    cost = np.arange(n, 0, -1, dtype=float)
    frame = pd.DataFrame({"gpu": pd.Categorical(np.where(np.arange(n) % 2, "l4", "h100-sxm")),
                          "model": pd.Categorical(["m"] * n), "batch": np.ones(n, np.int32),
                          "usd_per_m_output_tokens": cost})
    path = write_sweep(frame, tmp_path / "top.xlsx", top_n=3)
    wb = openpyxl.load_workbook(path)
    assert wb.sheetnames[:2] == ["Summary", "Sweep"]
    assert [r[3] for r in wb["Sweep"].iter_rows(min_row=2, values_only=True)] == [1.0, 2.0, 3.0]
    summary = _grid_summary(wb["Summary"])
    assert sorted(zip(summary[header_of("gpu")], summary[header_of("rows")],
                      summary[header_of("min_usd_per_m_output_tokens")])) == [("h100-sxm", (n + 1) // 2, 2.0),
                                                                                ("l4", n // 2, 1.0)]


def test_top_n_over_streamed_chunks(tmp_path, monkeypatch, small_sweep):
    monkeypatch.setattr(sweep_workbook, "EXCEL_MAX_ROWS", 25)
    chunks = [small_sweep.iloc[:15], small_sweep.iloc[15:]]
    with pytest.raises(InvalidValueError, match="holds at most 25"):
        write_sweep(iter(chunks), tmp_path / "s.xlsx")
    path = write_sweep(iter(chunks), tmp_path / "s.xlsx", top_n=4)
    rows = pd.read_excel(path, sheet_name="Sweep")
    expected = small_sweep.nsmallest(4, "usd_per_m_output_tokens")
    assert rows[header_of("usd_per_m_output_tokens")].tolist() == pytest.approx(
        expected["usd_per_m_output_tokens"].tolist())
    summary = _grid_summary(openpyxl.load_workbook(path)["Summary"])
    assert sum(summary[header_of("rows")]) == len(small_sweep)


@pytest.mark.parametrize(("top_n", "message"), [(0, "top_n must be >= 1"),
                                                (2.5, "top_n must be a whole number")])
def test_bad_top_n(tmp_path, small_sweep, top_n, message):
    with pytest.raises(InvalidValueError, match=message):
        write_sweep_xlsx(small_sweep, tmp_path / "s.xlsx", top_n=top_n)


def test_bad_slo(tmp_path, small_sweep):
    with pytest.raises(InvalidValueError, match="tpot_slo_ms must be > 0"):
        write_sweep_xlsx(small_sweep, tmp_path / "s.xlsx", tpot_slo_ms=0)


def test_top_n_needs_cost_column(tmp_path):
    with pytest.raises(InvalidValueError, match="needs the column 'usd_per_m_output_tokens'"):
        write_sweep_xlsx(pd.DataFrame({"gpu": ["l4"]}), tmp_path / "s.xlsx", top_n=1)


def test_knees_are_largest_batch_under_slo(tmp_path, small_sweep):
    path = write_sweep(small_sweep, tmp_path / "s.xlsx", tpot_slo_ms=12.0)
    ws = openpyxl.load_workbook(path)["Frontier"]
    knees = ws.tables["FrontierKnees"]
    rows = list(ws[knees.ref])[1:]
    found = {r[0].value: r[1].value for r in rows}
    usable = small_sweep[small_sweep["fits"] & (small_sweep["tpot_ms"] <= 12.0)]
    expected = usable.groupby(["gpu", "tp"], observed=True)["batch"].max()
    assert found == {f"{g} tp{tp}": b for (g, tp), b in expected.items() if f"{g} tp{tp}" in found}
    assert len(found) == min(8, len(expected))


def test_real_sweep_costs_all_linked(tmp_path, real_sweep):
    book = build_sweep_book(real_sweep, tpot_slo_ms=30.0)
    book.save(tmp_path / "real.xlsx")
    finite = sum(int(np.isfinite(real_sweep[c]).sum()) for c in (
        "usd_per_hour", "usd_per_m_output_tokens", "usd_per_m_total_tokens", "usd_per_k_requests"))
    assert book.formula_cell_count() == finite > 0
    assert math.isfinite(real_sweep["usd_per_hour"].iloc[0])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=15), min_size=2, max_size=4, unique=True))
def test_any_text_round_trips_as_text(tmp_path_factory, names):
    from fleetplan.exports.xlsx_common import clean_text

    frame = synthetic_sweep(gpus=("l4",), batches=(1, 8), tps=(1, 2)).head(len(names))
    frame["model"] = pd.Categorical(names)
    frame["id"] = names[::-1]
    path = write_sweep(frame, tmp_path_factory.mktemp("text") / "t.xlsx")
    ws = openpyxl.load_workbook(path)["Sweep"]
    headers = [c.value for c in ws[1]]
    for position, name in enumerate(names):
        model = ws.cell(row=position + 2, column=headers.index(header_of("model")) + 1)
        case = ws.cell(row=position + 2, column=headers.index(header_of("id")) + 1)
        assert model.data_type == "s" and case.data_type == "s"
        assert (model.value or "") == clean_text(name)
        assert (case.value or "") == clean_text(names[::-1][position])


def test_rows_that_cannot_run_show_false_in_red_in_the_cells(tmp_path, small_sweep):
    """Set in each FALSE cell, not by a conditional format (see test_printing's test of
    LibreOffice's default settings); TRUE cells keep the column's plain style."""
    grid = small_sweep.copy()
    grid.loc[grid.index[:3], "fits"] = False
    ws = openpyxl.load_workbook(write_sweep(grid, tmp_path / "s.xlsx"))["Sweep"]
    column = [c.value for c in ws[1]].index(header_of("fits")) + 1
    cells = [ws.cell(row=r, column=column) for r in range(2, ws.max_row + 1)]
    red = [c.value for c in cells if c.font.color is not None and c.font.color.rgb == "00C00000"]
    assert red == [False] * int((~grid["fits"]).sum())
    assert all(c.font.b for c in cells if not c.value)
    assert not any(c.font.b for c in cells if c.value)
    letter = get_column_letter(column)
    assert [str(f.sqref) for f in ws.conditional_formatting
            if str(f.sqref).startswith(f"{letter}2:")] == []
