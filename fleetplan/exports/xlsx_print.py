"""Page setup for every sheet of every workbook: how it prints.

Each sheet prints landscape (or portrait), fit to one page wide or, when that would print its
type at less than ``MIN_PRINT_SCALE`` of its size, to two or three pages across that repeat its
key columns; with its header rows repeated on every page, a print area around what it holds
(charts included), a header naming the workbook's subject, the sheet and the date, and a footer
with page numbers. A Summary prints on exactly one page; a bulk sheet of many thousand rows
prints its first ``BULK_PRINT_ROWS`` rows (the file has them all). Where the pages of a sheet
end is ``fleetplan.exports.xlsx_page_breaks``'s.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field

from openpyxl.drawing.spreadsheet_drawing import AnchorMarker, OneCellAnchor
from openpyxl.drawing.xdr import XDRPositiveSize2D
from openpyxl.styles import Alignment
from openpyxl.utils.cell import column_index_from_string, coordinate_from_string, get_column_letter
from openpyxl.utils.units import cm_to_EMU
from openpyxl.worksheet.page import PageMargins
from openpyxl.worksheet.worksheet import Worksheet

import fleetplan
from fleetplan.exports.xlsx_common import column_width, ref_rows, wrap, wrapped_lines

#: Data rows a bulk sheet (a sweep grid) prints; the rest stay in the file.
BULK_PRINT_ROWS = 100
#: A single table longer than this repeats its header row on every printed page [rows].
REPEAT_AFTER_ROWS = 30
_CM_PER_WIDTH_UNIT = 0.19  # one Excel column-width character at the default font [cm]
#: Left and right page margins [inches].
MARGIN_INCHES = 0.4
#: One column-width character as LibreOffice prints it at 100% (Carlito for Calibri), measured
#: from the pages of the example plan printed at 100% and fitted to width [cm].
_PRINTED_CM_PER_CHAR = 0.25
#: Characters of column width an A4 page holds between its margins at 100%.
PAGE_WIDTH_CHARS = {orientation: (paper_cm - 2 * MARGIN_INCHES * 2.54) / _PRINTED_CM_PER_CHAR
                    for orientation, paper_cm in (("landscape", 29.7), ("portrait", 21.0))}
#: Smallest share of its size a sheet's type prints at before it goes over more pages.
MIN_PRINT_SCALE = 0.5
#: Most pages a sheet prints across; a sheet wider than that prints smaller.
MAX_PAGES_WIDE = 3
#: Key columns wider than this share of a page printed at MIN_PRINT_SCALE are not repeated.
MAX_KEY_SHARE = 0.45
_CM_PER_POINT = 2.54 / 72
#: A row without a height of its own [points].
DEFAULT_HEIGHT_PT = 15.0


@dataclass
class PageOptions:
    """How one sheet prints: on one page, which rows repeat, and a fixed print area."""

    one_page: bool = False
    repeat_rows: str | None = None
    area: str | None = None
    portrait: bool = False
    #: Most pages it prints across (a reference table of many columns: fewer, smaller pages).
    max_pages_wide: int = 3
    #: The columns that name a row, repeated on each page across (default: :func:`key_columns`).
    key_columns: int | None = None


@dataclass
class PrintHeader:
    """What the header of every printed page says: the subject, the sheet and the date."""

    subject: str
    date: dt.date = field(default_factory=dt.date.today)


def setup_sheet(ws: Worksheet, header: PrintHeader, options: PageOptions | None = None,
                bulk_rows: int | None = None, bulk_columns: int | None = None) -> float:
    """Landscape (unless ``portrait``), fit to width (one page for ``one_page``; a wide sheet
    over :func:`pages_wide` pages, its key columns on each), margins, print area, repeated
    header rows, header and footer. Returns the :func:`printed_scale` of that setup."""
    options = options or PageOptions()
    setup = ws.page_setup
    setup.orientation = "portrait" if options.portrait else "landscape"
    setup.paperSize = ws.PAPERSIZE_A4
    setup.fitToHeight = 1 if options.one_page else 0
    ws.sheet_properties.pageSetUpPr.fitToPage = True
    ws.page_margins = PageMargins(left=MARGIN_INCHES, right=MARGIN_INCHES, top=0.7, bottom=0.6,
                                  header=0.3, footer=0.3)
    ws.print_options.gridLines = False
    ws.print_area = options.area or used_area(ws, bulk_rows, bulk_columns)
    widths = column_widths(ws, ws.print_area)
    keys = repeated_columns(ws, widths, options.portrait, options.key_columns)
    setup.fitToWidth = 1 if options.one_page else min(options.max_pages_wide, pages_wide(
        sum(widths), sum(widths[:keys]), portrait=options.portrait))
    if setup.fitToWidth > 1 and keys:  # each page says which row it continues
        ws.print_title_cols = f"A:{get_column_letter(keys)}"
        setup.pageOrder = "overThenDown"
        wrap_notes_in_key_columns(ws, keys, widths)
    else:
        keys = 0
    repeat = options.repeat_rows or _long_table_header(ws, bulk_rows)
    if repeat:
        ws.print_title_rows = repeat
    _header_and_footer(ws, header)
    return printed_scale(sum(widths), sum(widths[:keys]), setup.fitToWidth, options.portrait)


def printed_scale(width_chars: float, key_chars: float, pages_wide: int,
                  portrait: bool = False) -> float:
    """The share of full size a sheet ``width_chars`` wide prints at, fit to ``pages_wide``
    pages that each repeat its ``key_chars`` of key columns.

    scale = min(1, pages · page width / (width + (pages − 1) · key width))

    >>> round(printed_scale(200, 30, 1), 3), round(printed_scale(300, 30, 2), 3)
    (0.553, 0.671)
    """
    page = PAGE_WIDTH_CHARS["portrait" if portrait else "landscape"]
    keys = key_chars if pages_wide > 1 else 0.0
    return min(1.0, pages_wide * page / max(width_chars + (pages_wide - 1) * keys, 1e-9))


def pages_wide(width: float, key_width: float, portrait: bool = False) -> int:
    """Pages a sheet ``width`` characters wide prints across: one while that keeps its type at
    :data:`MIN_PRINT_SCALE` or more, else the fewest (up to :data:`MAX_PAGES_WIDE`) that do,
    each repeating the ``key_width`` characters of its key columns.

    >>> pages_wide(200, 30), pages_wide(263, 51), pages_wide(324, 24), pages_wide(900, 20)
    (1, 2, 2, 3)
    """
    for pages in range(1, MAX_PAGES_WIDE + 1):
        if printed_scale(width, key_width, pages, portrait) >= MIN_PRINT_SCALE:
            return pages
    return MAX_PAGES_WIDE


def repeated_columns(ws: Worksheet, widths: list[float], portrait: bool = False,
                     keys: int | None = None) -> int:
    """How many of its first columns a sheet printing over pages across repeats on each: its
    ``keys`` (by default :func:`key_columns`), or none when they would take more than
    :data:`MAX_KEY_SHARE` of a page printed at :data:`MIN_PRINT_SCALE`."""
    keys = keys or key_columns(ws)
    page = PAGE_WIDTH_CHARS["portrait" if portrait else "landscape"] / MIN_PRINT_SCALE
    return keys if sum(widths[:keys]) <= MAX_KEY_SHARE * page else 0


def key_columns(ws: Worksheet) -> int:
    """The columns naming a row: those left of the frozen panes, else column A."""
    if ws.freeze_panes:
        letters, _ = coordinate_from_string(ws.freeze_panes)
        return max(column_index_from_string(letters) - 1, 1)
    return 1


def wrap_notes_in_key_columns(ws: Worksheet, keys: int, widths: list[float]) -> None:
    """Wrap, within the key columns, each text outside the tables that would run on past them
    (a title, a note, a setting's description): the pages across repeat those columns and
    would print it cut off at their edge."""
    in_tables = {row for first, last in (ref_rows(t.ref) for t in ws.tables.values())
                 for row in range(first, last + 1)}
    by_row: dict[int, list[int]] = {}
    for (row, column), cell in ws._cells.items():
        if cell.value is not None and row not in in_tables:
            by_row.setdefault(row, []).append(column)
    for row, columns in by_row.items():
        last = max(columns)
        cell = ws.cell(row=row, column=last)
        width = sum(widths[last - 1:keys])
        if last > keys or not isinstance(cell.value, str) \
                or wrapped_lines(cell.value, width, bold=bool(cell.font.b)) == 1:
            continue  # only a row's last text runs on into the empty cells past it
        for other in columns:  # the row's label and value level with its first line
            align = ws.cell(row=row, column=other).alignment
            ws.cell(row=row, column=other).alignment = Alignment(
                horizontal=align.horizontal, vertical="top", wrap_text=align.wrap_text,
                indent=align.indent)
        if keys > last:
            ws.merge_cells(start_row=row, start_column=last, end_row=row, end_column=keys)
        wrap(ws, cell, width)


def column_widths(ws: Worksheet, area: str) -> list[float]:
    """The widths of the print area's columns [characters]."""
    last = area.split("!")[-1].split(":")[-1].replace("$", "")
    columns = column_index_from_string(coordinate_from_string(last)[0])
    return [column_width(ws, c) for c in range(1, columns + 1)]


def _header_and_footer(ws: Worksheet, header: PrintHeader) -> None:
    subject = header.subject.replace("&", "&&")[:80]
    for page in (ws.oddHeader, ws.evenHeader, ws.firstHeader):
        page.left.text, page.center.text = subject, "&A"
        page.right.text = header.date.isoformat()
        page.left.size = page.center.size = page.right.size = 8
    for page in (ws.oddFooter, ws.evenFooter, ws.firstFooter):
        page.left.text = f"fleetplan {fleetplan.__version__}"
        page.right.text = "Page &P of &N"
        page.left.size = page.right.size = 8


def used_area(ws: Worksheet, bulk_rows: int | None = None, bulk_columns: int | None = None) -> str:
    """``A1:<last column><last row>`` covering every written cell and every chart; a bulk sheet
    of ``bulk_rows`` data rows under its header row stops after BULK_PRINT_ROWS of them."""
    last_row, last_column = _written_extent(ws)
    if bulk_rows is not None:
        last_row = max(last_row, 1 + min(bulk_rows, BULK_PRINT_ROWS))
        last_column = max(last_column, bulk_columns or 1)
    for chart in ws._charts:  # openpyxl keeps the sheet's charts here
        row, column = chart_corner(ws, chart)
        last_row, last_column = max(last_row, row), max(last_column, column)
    return f"A1:{get_column_letter(max(last_column, 1))}{max(last_row, 1)}"


def _written_extent(ws: Worksheet) -> tuple[int, int]:
    """The last row and column holding a value (not merely a style)."""
    used = [key for key, cell in ws._cells.items() if cell.value is not None]
    if not used:
        return 1, 1
    return max(r for r, _ in used), max(c for _, c in used)


def chart_top_left(chart) -> tuple[int, int]:
    """The row and column of the cell a chart's top-left corner is anchored in."""
    if isinstance(chart.anchor, OneCellAnchor):
        return chart.anchor._from.row + 1, chart.anchor._from.col + 1
    letters, row = coordinate_from_string(chart.anchor if isinstance(chart.anchor, str) else "A1")
    return row, column_index_from_string(letters)


def chart_corner(ws: Worksheet, chart) -> tuple[int, int]:
    """The row and column of a chart's bottom-right corner, from its anchor and size."""
    width_cm, height_cm = chart.width, chart.height
    row, column = chart_top_left(chart)
    if isinstance(chart.anchor, OneCellAnchor):  # placed by add_chart_at
        width_cm += chart.anchor._from.colOff / cm_to_EMU(1)
    while width_cm > 0:
        width_cm -= _column_cm(ws, column)
        column += 1
    while height_cm > 0:
        height = ws.row_dimensions[row].height or DEFAULT_HEIGHT_PT
        height_cm -= height * _CM_PER_POINT
        row += 1
    return row, column


def add_chart_at(ws: Worksheet, chart, row: int, offset_cm: float) -> None:
    """Add ``chart`` with its top-left corner on ``row``, ``offset_cm`` from the sheet's left
    edge (charts side by side stay an even gap apart, whatever the widths of the columns)."""
    column, start_cm = 1, 0.0
    while start_cm + _column_cm(ws, column) <= offset_cm:
        start_cm += _column_cm(ws, column)
        column += 1
    corner = AnchorMarker(col=column - 1, colOff=cm_to_EMU(offset_cm - start_cm), row=row - 1)
    chart.anchor = OneCellAnchor(_from=corner, ext=XDRPositiveSize2D(cm_to_EMU(chart.width),
                                                                      cm_to_EMU(chart.height)))
    ws.add_chart(chart)


def _column_cm(ws: Worksheet, column: int) -> float:
    return column_width(ws, column) * _CM_PER_WIDTH_UNIT


def _long_table_header(ws: Worksheet, bulk_rows: int | None) -> str | None:
    """The header row of a sheet's only table when it runs over several pages."""
    tables = list(ws.tables.values())
    if len(tables) != 1:
        return None
    first, last = ref_rows(tables[0].ref)
    rows = bulk_rows if bulk_rows is not None else last - first
    return f"{first}:{first}" if rows > REPEAT_AFTER_ROWS else None


def chart_rows(height_cm: float, row_height_pt: float = DEFAULT_HEIGHT_PT) -> int:
    """Rows of the default height a chart of ``height_cm`` covers.

    >>> chart_rows(7.5)
    15
    """
    return math.ceil(height_cm / (row_height_pt * _CM_PER_POINT))
