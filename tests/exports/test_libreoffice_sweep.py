"""Sweep workbooks opened and recalculated by a real spreadsheet (LibreOffice headless)."""

from __future__ import annotations

import math

import openpyxl
import pytest

from fleetplan.exports import write_sweep
from fleetplan.exports.labels import header_of
from fleetplan.exports.xlsx_package import Book
from tests.exports.samples import (
    assert_recalculation_matches,
    cell_values,
    error_cells,
    formula_cells,
    hostile_sweep,
)

pytestmark = pytest.mark.libreoffice


def test_fixture_really_recalculates(tmp_path, libreoffice):
    book = Book()
    ws = book.wb.active
    ws.title = "Check"
    book.formulas.put(ws, 1, 1, "1+1", value=5.0)  # a deliberately wrong cached value
    path = book.save(tmp_path / "check.xlsx")
    assert cell_values(path)[("Check", "A1")] == 5.0
    assert cell_values(libreoffice.recalculate(path))[("Check", "A1")] == 2.0


@pytest.mark.parametrize("sweep_fixture", ["small_sweep", "real_sweep"])
def test_recalculated_values_equal_python(tmp_path, libreoffice, request, sweep_fixture):
    frame = request.getfixturevalue(sweep_fixture)
    path = write_sweep(frame, tmp_path / "sweep.xlsx", tpot_slo_ms=30.0)
    compared = assert_recalculation_matches(path, libreoffice.recalculate(path))
    assert compared >= len(frame)


def test_hostile_text_stays_text_in_a_spreadsheet(tmp_path, libreoffice):
    hostile = {'=HYPERLINK("http://x","y")', "@SUM(1)", "=1/0", "-2+3", "+1+2"}
    path = write_sweep(hostile_sweep(), tmp_path / "hostile.xlsx")
    recalculated_path = libreoffice.recalculate(path)
    recalculated = cell_values(recalculated_path)
    assert not error_cells(recalculated)
    hostile_cells = {key for key, value in cell_values(path).items() if value in hostile}
    assert len(hostile_cells) > 10
    assert all(recalculated[key] == cell_values(path)[key] for key in hostile_cells)
    assert not hostile_cells & set(formula_cells(recalculated_path))


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)
    return a == b


def _bump_price(path, name: str, delta: float, target):
    wb = openpyxl.load_workbook(path)
    sheet, coordinate = next(wb.defined_names[name].destinations)
    cell = wb[sheet][coordinate.replace("$", "")]
    cell.value += delta
    wb.save(target)
    return target, (sheet, cell.coordinate)


def test_raising_one_gpu_price_raises_exactly_its_costs(tmp_path, libreoffice, small_sweep):
    delta = 1.0
    path = write_sweep(small_sweep, tmp_path / "base.xlsx")
    edited, price_cell = _bump_price(path, "price_l4", delta, tmp_path / "edited.xlsx")
    before = cell_values(libreoffice.recalculate(path))
    after = cell_values(libreoffice.recalculate(edited))
    letters = {n: openpyxl.utils.get_column_letter(i)
               for i, n in enumerate(small_sweep.columns, start=1)}
    hourly = small_sweep["tp"] * delta
    expected_change = {
        "usd_per_hour": hourly,
        "usd_per_m_output_tokens": hourly * 1e6 / (small_sweep["output_tok_s"] * 3600),
        "usd_per_m_total_tokens": hourly * 1e6 / (
            small_sweep["req_s"] * (small_sweep["input_len"] + small_sweep["output_len"]) * 3600),
        "usd_per_k_requests": hourly * 1e3 / (small_sweep["req_s"] * 3600),
    }
    # LibreOffice stores 15 significant digits and openpyxl re-saves inputs with 16: compare
    # unchanged cells to 1e-12, far below the smallest expected change
    changed = {key for key in before if not _same(before[key], after.get(key))}
    expected_keys = {price_cell}
    for name, change in expected_change.items():
        for index, row in small_sweep.iterrows():
            key = ("Sweep", f"{letters[name]}{index + 2}")
            if row["gpu"] == "l4":
                expected_keys.add(key)
                assert after[key] - before[key] == pytest.approx(change[index], rel=1e-9)
            else:
                assert _same(after[key], before[key])
    assert changed == expected_keys
    assert math.isclose(after[price_cell], 0.7 + delta)


def test_disaggregated_sweep_recalculates_and_keeps_colocated_prices_live(tmp_path, libreoffice):
    from fleetplan.exports.sweep_costs import gpu_prices
    from fleetplan.sweeps import sweep

    frame = sweep(["h200"], ["llama-3.1-70b"], ["fp8"], tps=[2], contexts=[4250], input_lens=[4000],
                  output_lens=[500], batches=[8, 64], prefill_gpus=["none", "h100-sxm"], prefill_tps=[2])
    # colocated rows still give H200 one price per GPU-hour; the pair rows do not spoil it
    assert gpu_prices(frame).to_dict() == pytest.approx(
        {"h200": frame.loc[frame["prefill_tp"] == 0, "usd_per_hour"].iloc[0] / 2})
    path = write_sweep(frame, tmp_path / "disaggregated.xlsx")
    assert assert_recalculation_matches(path, libreoffice.recalculate(path)) >= len(frame)
    header = [c.value for c in next(openpyxl.load_workbook(path)["Sweep"].iter_rows(max_row=1))]
    assert {header_of("prefill_gpu"), header_of("prefill_replicas"), header_of("kv_transfer_ms")} <= set(header)
