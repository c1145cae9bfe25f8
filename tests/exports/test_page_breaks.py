"""How a sheet's pages divide it: page breaks keep each table and chart that fits on a page
whole (a property over random sheets paginated as a spreadsheet paginates them; the printed
check of the example plan is in test_printing.py), the rules for which header repeats, and the
key columns repeated on the pages across, with the texts in them wrapped to fit."""

from __future__ import annotations

import numpy as np
import openpyxl
import pandas as pd
from hypothesis import example, given
from hypothesis import strategies as st
from openpyxl import Workbook
from openpyxl.chart import BarChart
from openpyxl.cell.cell import MergedCell
from openpyxl.utils.cell import column_index_from_string, get_column_letter

from fleetplan.exports import write_plan
from fleetplan.exports.xlsx_common import put, wrapped_lines
from fleetplan.exports.xlsx_page_breaks import (
    PAGE_FILL,
    Block,
    keep_blocks_together,
    page_breaks,
    page_height_pt,
    sheet_blocks,
)
from fleetplan.exports.xlsx_print import (
    PageOptions,
    PrintHeader,
    add_chart_at,
    chart_rows,
    chart_top_left,
    printed_scale,
    ref_rows,
    repeated_columns,
    setup_sheet,
)
from fleetplan.exports.xlsx_sheets import write_frame


def paginate(heights: list[float], breaks: list[int], page_pt: float) -> list[int]:
    """The page each row prints on, filling pages greedily and breaking after ``breaks``."""
    pages, used, page = [], 0.0, 0
    for row, height in enumerate(heights, start=1):
        if used and used + height > page_pt:
            page, used = page + 1, 0.0
        pages.append(page)
        used += height
        if row in breaks:
            page, used = page + 1, 0.0
    return pages


@st.composite
def sheets(draw):
    """Row heights and non-overlapping blocks, some of them taller than a page."""
    heights = draw(st.lists(st.sampled_from([15.0, 30.0, 45.0]), min_size=1, max_size=120))
    cuts = sorted(set(draw(st.lists(st.integers(1, len(heights)), max_size=20))))
    blocks = [Block(first, last) for first, last in zip(cuts[::2], cuts[1::2])]
    return heights, blocks


@given(sheets(), st.sampled_from([150.0, 300.0, 600.0]))
@example(([15.0] * 40, [Block(8, 15), Block(16, 24)]), 150.0)
def test_every_block_that_fits_a_page_prints_on_one(sheet, page_pt):
    heights, blocks = sheet
    breaks = page_breaks(heights, blocks, page_pt)
    pages = paginate(heights, breaks, page_pt)
    for block in blocks:
        if sum(heights[block.first - 1:block.last]) <= page_pt:
            assert pages[block.first - 1] == pages[block.last - 1], (block, breaks)
    assert all(1 <= row < len(heights) for row in breaks) and breaks == sorted(set(breaks))
    unbroken = paginate(heights, [], page_pt)
    assert max(pages) <= max(unbroken) + len(breaks)  # a break costs at most one page


def test_a_block_taller_than_a_page_is_not_moved():
    assert page_breaks([15.0] * 40, [Block(2, 30)], page_pt=150.0) == []


def _sheet(rows_per_table: list[int]):
    """A sheet of tables, each under a bold title and a note, as the workbooks write them, and
    the scale its page setup prints it at."""
    ws = Workbook().active
    row = 1
    for number, rows in enumerate(rows_per_table):
        put(ws, row, 1, f"Table {number}")
        put(ws, row + 1, 1, "What it holds.")
        frame = {"name": [f"t{number}r{r}" for r in range(rows)], "value": np.arange(rows)}
        row = write_frame(ws, pd.DataFrame(frame), row + 2, f"T{number}") + 1
    return ws, setup_sheet(ws, PrintHeader("test"), PageOptions())


def test_blocks_take_the_title_and_note_above_each_table():
    ws, _ = _sheet([3, 4])
    assert sheet_blocks(ws) == [Block(1, 6, 3), Block(8, 14, 10)]


def test_a_chart_placed_beside_others_is_a_block_from_its_own_row():
    ws = Workbook().active
    chart = BarChart()
    chart.height, chart.width = 7.5, 10.0
    add_chart_at(ws, chart, 30, 12.0)  # 12 cm from the left edge: 0.8 cm into column H
    assert chart_top_left(chart) == (30, 8)
    assert sheet_blocks(ws) == [Block(30, 30 + chart_rows(7.5))]
    assert not ws.column_dimensions  # measured, not widened to openpyxl's 13 characters


def test_the_last_tables_header_repeats_when_it_runs_over_pages():
    ws, scale = _sheet([5, 200])
    keep_blocks_together(ws, scale)
    assert ws.print_title_rows == "$12:$12"  # the long table's header, on the pages after


def test_a_long_table_with_another_below_repeats_no_header():
    """Its header would print atop the next table's pages too."""
    ws, scale = _sheet([210, 5])
    room = PAGE_FILL * page_height_pt(ws, scale=1.0)  # two narrow columns print at full size
    heights = [15.0] * ws.max_row
    short = sheet_blocks(ws)[-1]
    unbroken = paginate(heights, [], room)
    assert unbroken[short.first - 1] != unbroken[short.last - 1]  # it would be cut
    keep_blocks_together(ws, scale)
    assert not ws.print_title_rows
    breaks = [b.id for b in ws.row_breaks.brk]
    assert breaks == [short.first - 1]
    pages = paginate(heights, breaks, room)
    assert pages[short.first - 1] == pages[short.last - 1]


def test_key_columns_too_wide_to_repeat_are_not_repeated():
    """Key columns over 45% of a page at half size would leave the pages across little room."""
    ws = Workbook().active
    for column in range(1, 31):
        put(ws, 1, column, f"column {column}")
        ws.column_dimensions[get_column_letter(column)].width = 35.0 if column <= 3 else 12.0
    ws.freeze_panes = "D2"
    widths = [35.0] * 3 + [12.0] * 27
    assert repeated_columns(ws, widths) == 0
    ws.column_dimensions["A"].width = ws.column_dimensions["B"].width = 10.0
    ws.column_dimensions["C"].width = 10.0
    assert repeated_columns(ws, [10.0] * 3 + [12.0] * 27) == 3
    setup_sheet(ws, PrintHeader("test"), PageOptions())
    assert ws.page_setup.fitToWidth == 2 and ws.print_title_cols == "$A:$C"


def test_texts_in_repeated_columns_wrap_within_them(tmp_path, example_plan):
    """On the pages across, a note or description running on past the repeated columns would
    print cut off at their edge: in the example plan each one wraps within them instead."""
    book = openpyxl.load_workbook(write_plan(example_plan, tmp_path / "plan.xlsx"))
    checked = 0
    for ws in book.worksheets:
        if not ws.print_title_cols:
            continue
        keys = column_index_from_string(ws.print_title_cols.split(":")[-1].strip("$"))
        widths = [ws.column_dimensions[get_column_letter(c)].width for c in range(1, keys + 1)]
        tables = set()
        for table in ws.tables.values():
            first, last = ref_rows(table.ref)
            tables.update(range(first, last + 1))
        for row in ws.iter_rows(max_col=ws.max_column):
            texts = [c for c in row if c.value is not None and not isinstance(c, MergedCell)]
            if not texts or texts[-1].row in tables or texts[-1].column > keys:
                continue
            cell = texts[-1]
            width = sum(widths[cell.column - 1:keys])
            lines = wrapped_lines(str(cell.value), width, bold=bool(cell.font.b))
            checked += 1
            if lines > 1:
                assert cell.alignment.wrap_text, (ws.title, cell.coordinate)
                assert ws.row_dimensions[cell.row].height >= 15 * lines, (ws.title, cell.coordinate)
    assert checked >= 10  # the titles, notes and settings of Fleet, Assumptions and Candidates


def test_the_pages_are_estimated_at_the_scale_the_repeated_columns_leave():
    """The key columns repeated on each page across shrink the print: a sheet whose repeated
    columns were ignored was estimated at a larger scale, its pages shorter, and a table that
    fitted under the first was moved to a page of its own."""
    ws, _ = _sheet([20, 30])
    for column in range(3, 25):
        put(ws, 4, column, "wide")
        ws.column_dimensions[get_column_letter(column)].width = 12.0
    ws.column_dimensions["A"].width = ws.column_dimensions["B"].width = 40.0
    scale = setup_sheet(ws, PrintHeader("test"), PageOptions(key_columns=2))
    assert ws.page_setup.fitToWidth == 2 and ws.print_title_cols == "$A:$B"
    widths = [40.0, 40.0] + [12.0] * 22
    heights = [15.0] * ws.max_row
    shown = PAGE_FILL * page_height_pt(ws, printed_scale(sum(widths), 80.0, 2))
    one_key = PAGE_FILL * page_height_pt(ws, printed_scale(sum(widths), 40.0, 2))
    second = sheet_blocks(ws)[-1]
    assert paginate(heights, [], shown)[second.last - 1] == 0  # both tables fit page 1
    assert paginate(heights, [], one_key)[second.last - 1] == 1  # not on the shorter page
    keep_blocks_together(ws, scale)
    assert list(ws.row_breaks.brk) == []
