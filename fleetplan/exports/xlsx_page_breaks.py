"""Where a sheet's pages end: no table or chart that fits on a page is cut in two.

A sheet printed fit to width breaks its pages wherever a page is full, so a table may start at
the foot of one page and go on, headerless, on the next. :func:`keep_blocks_together` puts a
manual page break before each block (a table with the title and note above it, or a chart) that
would cross a page end yet fits on one page; a sheet's last table, when it is too long for any
page, gets its header row repeated on the pages after it. Only the last: spreadsheets repeat one
set of rows per sheet, on every page after the one they first print on, so the header of a table
above another would print atop the other's pages.

The page is estimated as LibreOffice prints it: the scale the sheet's page setup gives it
(:func:`fleetplan.exports.xlsx_print.printed_scale`), row heights in points, and a little room
kept for rounding (:data:`PAGE_FILL`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from openpyxl.worksheet.pagebreak import Break
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports.xlsx_print import DEFAULT_HEIGHT_PT, chart_corner, chart_top_left, ref_rows

#: A4's height [cm] by orientation.
PAPER_HEIGHT_CM = {"landscape": 21.0, "portrait": 29.7}
#: Share of a page's estimated height a block may fill and still be kept on it.
PAGE_FILL = 0.95
#: Rows above a table's header that belong to it: its section title and note.
TITLE_ROWS = 2
_CM_PER_POINT = 2.54 / 72


@dataclass(frozen=True)
class Block:
    """Rows ``first`` to ``last`` that print on one page when they can (1-based, inclusive)."""

    first: int
    last: int
    header: int | None = None


def page_height_pt(ws: Worksheet, scale: float) -> float:
    """The sheet rows' height one printed page holds at ``scale`` [points]: the paper's height
    less the top and bottom margins (the header and footer print inside them)."""
    orientation = "portrait" if ws.page_setup.orientation == "portrait" else "landscape"
    margins_cm = (ws.page_margins.top + ws.page_margins.bottom) * 2.54
    return (PAPER_HEIGHT_CM[orientation] - margins_cm) / _CM_PER_POINT / scale


def page_breaks(heights_pt: Sequence[float], blocks: Sequence[Block], page_pt: float,
                repeated_row: int | None = None) -> list[int]:
    """The rows after which a manual break keeps each block that fits on a page whole.

    ``heights_pt`` are rows 1..n; pages fill greedily, as a spreadsheet fills them, except that
    a block starting on a page, running past its end and no taller than a page moves to the
    next page. ``repeated_row`` is a header row printed atop every page after its own.

    >>> page_breaks([15.0] * 40, [Block(8, 15)], page_pt=150.0)  # rows 8-15 on page 2
    [7]
    >>> page_breaks([15.0] * 40, [Block(2, 30)], page_pt=150.0)  # taller than a page: cut
    []
    """
    cumulative = np.concatenate([[0.0], np.cumsum(np.asarray(heights_pt, dtype=float))])
    rows = len(cumulative) - 1
    breaks: list[int] = []
    top = 1
    while True:
        above = repeated_row is not None and repeated_row < top
        room = page_pt - (float(heights_pt[repeated_row - 1]) if above else 0.0)
        last = int(np.searchsorted(cumulative, cumulative[top - 1] + room, side="right")) - 1
        if last >= rows or last < top:
            return breaks
        moved = [b.first for b in blocks if top < b.first <= last < b.last
                 and cumulative[b.last] - cumulative[b.first - 1] <= room]
        top = min(moved) if moved else last + 1
        if moved:
            breaks.append(top - 1)


def keep_blocks_together(ws: Worksheet, scale: float) -> None:
    """Manual page breaks before the blocks of ``ws`` that would be cut, and its last table's
    header repeated when that table runs over several pages (and no rows repeat yet); ``scale``
    is the one its page setup prints at (what :func:`~fleetplan.exports.xlsx_print.setup_sheet`
    returns)."""
    area_rows = ref_rows(ws.print_area.split("!")[-1].replace("$", ""))[1]
    room = PAGE_FILL * page_height_pt(ws, scale)
    heights = [ws.row_dimensions[r].height or DEFAULT_HEIGHT_PT for r in range(1, area_rows + 1)]
    blocks = [b for b in sheet_blocks(ws) if b.last <= area_rows]  # not the working tables
    repeated = None
    if blocks and blocks[-1].header and not ws.print_title_rows \
            and sum(heights[blocks[-1].first - 1:blocks[-1].last]) > room:
        repeated = blocks[-1].header
        ws.print_title_rows = f"{repeated}:{repeated}"
    for row in page_breaks(heights, blocks, room, repeated):
        ws.row_breaks.append(Break(id=row))


def sheet_blocks(ws: Worksheet) -> list[Block]:
    """Each table of ``ws`` with the title and note written just above it, and each chart."""
    filled = Counter(row for (row, _), cell in ws._cells.items() if cell.value is not None)
    blocks = []
    for table in ws.tables.values():
        header, last = ref_rows(table.ref)
        first = header
        while (first > 1 and header - first < TITLE_ROWS and filled[first - 1] == 1
               and ws.cell(row=first - 1, column=1).value is not None):  # a title or a note
            first -= 1
        blocks.append(Block(first, last, header))
    for chart in ws._charts:  # openpyxl keeps the sheet's charts here
        bottom, _ = chart_corner(ws, chart)
        blocks.append(Block(chart_top_left(chart)[0], bottom))
    return sorted(blocks, key=lambda b: b.first)

