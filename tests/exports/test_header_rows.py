"""Header rows print whole: every column is at least as wide as its header's longest word (up to
30 characters), and every header row is as tall as its most wrapped header needs, whichever
sheet styled it and whatever widths the sheet set afterwards; text beside a number is indented
so the two never run together."""

from __future__ import annotations

import openpyxl
import pandas as pd
import pytest
from openpyxl.styles import Alignment
from openpyxl.utils.cell import get_column_letter

from fleetplan.exports import write_plan, write_sweep
from fleetplan.exports.xlsx_common import (HEADER_FILL, fit_header_rows, put, style_header,
                                           wrapped_lines)
from fleetplan.exports.xlsx_sheets import write_frame


def _header_cells(book):
    for ws in book.worksheets:
        for row in ws.iter_rows():
            for cell in row:
                if cell.fill.fgColor.rgb == HEADER_FILL.fgColor.rgb and cell.value:
                    yield ws, cell


@pytest.fixture(params=["sweep", "plan"])
def book(request, tmp_path, small_sweep, example_plan):
    if request.param == "sweep":
        path = write_sweep(small_sweep, tmp_path / "s.xlsx", tpot_slo_ms=20.0)
    else:
        path = write_plan(example_plan, tmp_path / "plan.xlsx")
    return openpyxl.load_workbook(path)


def test_headers_fit_their_columns_and_rows(book):
    cells = list(_header_cells(book))
    assert len(cells) > 20
    for ws, cell in cells:
        width = ws.column_dimensions[get_column_letter(cell.column)].width or 8.43
        longest = max(len(word) for word in str(cell.value).split())
        assert width >= min(longest * 1.15 + 2, 30.0) - 1e-9, (ws.title, cell.coordinate)
        height = ws.row_dimensions[cell.row].height or 15.0
        assert height >= 15.0 * wrapped_lines(cell.value, width), (ws.title, cell.coordinate)


def test_a_long_header_word_takes_lines_of_its_own():
    assert wrapped_lines("Best throughput per GPU (tokens/s/GPU)", 12) == 5
    assert wrapped_lines("Rows", 6) == 1 and wrapped_lines("", 10) == 1


def test_text_beside_a_number_is_indented(tmp_path):
    book = openpyxl.Workbook()
    ws = book.active
    write_frame(ws, pd.DataFrame({"gpu": ["l40s"], "usd_per_hour": [0.86],
                                  "calibration": ["measured"]}), 1, "T")
    assert ws["A2"].alignment.indent == 0  # the first column starts at the table's edge
    assert ws["C2"].alignment.indent == 1 and ws["B2"].alignment.indent == 0


def test_headers_over_numbers_sit_right_above_them(tmp_path, example_plan):
    """A left-set header over right-set numbers sat over the neighbouring column's figures."""
    book = openpyxl.load_workbook(write_plan(example_plan, tmp_path / "plan.xlsx"))
    ws = book["Workloads"]
    header = next(row for row in ws.iter_rows() if row[0].value == "Workload")
    below = ws[header[0].row + 1]
    sides = {cell.value: cell.alignment.horizontal for cell in header if cell.value}
    assert sides["Workload"] != "right" and sides["Model"] != "right"
    numbers = [h.value for h, b in zip(header, below) if isinstance(b.value, (int, float))
               or str(b.value).startswith("=")]
    assert len(numbers) >= 8 and all(sides[name] == "right" for name in numbers), sides


def test_a_header_over_a_missing_number_sits_right_and_text_after_a_number_is_indented():
    """The comparison's reserved cost shows '-' where no reserved price is listed (set right
    like the numbers under it); its GPU header followed the right-set rank header unspaced."""
    ws = openpyxl.Workbook().active
    style_header(ws, 1, 1, ["Rank", "GPU", "Reserved (USD)", "Note"])
    put(ws, 2, 1, 1)
    put(ws, 2, 2, "mi300x")
    put(ws, 2, 3, "-").alignment = Alignment(horizontal="right")
    put(ws, 2, 4, "no reserved price")
    fit_header_rows(ws)
    sides = [ws.cell(row=1, column=c).alignment for c in range(1, 5)]
    assert [a.horizontal for a in sides] == ["right", None, "right", None]
    assert [a.indent for a in sides] == [0, 1, 0, 1]


def test_a_header_over_numbers_below_an_empty_first_cell_sits_right():
    """A case that changes no input leaves its input cells empty: the header goes by the first
    value under it, within its own table."""
    ws = openpyxl.Workbook().active
    write_frame(ws, pd.DataFrame({"name": ["base", "low"], "demand_multiplier": [None, 0.7],
                                  "pricing": [None, None]}), 1, "Cases")
    put(ws, 5, 3, 42.0)  # a number below the table, in the column of its empty pricing
    fit_header_rows(ws)
    assert ws["B1"].alignment.horizontal == "right" and ws["C1"].alignment.horizontal != "right"
