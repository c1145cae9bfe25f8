"""Workbook building blocks: styles, safe cells, live formulas, tables, defined names.

Two rules hold for every workbook fleetplan writes:

- Text is always a text cell. openpyxl turns any ``str`` starting with ``=`` into a formula;
  :func:`put` forces the cell type back to string, so a catalog name such as
  ``=HYPERLINK(...)`` stays inert text.
- Formulas are written only through :class:`Formulas`, which also records the value Python
  computed for each one. The saved file carries those values as cached results (readers that do
  not recalculate, such as pandas, see numbers) and tests compare them with a real spreadsheet's
  recalculation.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import weakref
from collections import defaultdict
from typing import Any

from openpyxl.cell.cell import Cell
from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
from openpyxl.utils.cell import coordinate_from_string, get_column_letter
from openpyxl.workbook.defined_name import DefinedName
from openpyxl.worksheet.filters import AutoFilter
from openpyxl.worksheet.table import Table, TableColumn, TableStyleInfo
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports.sanitize import clean_text

# Finance convention: inputs in blue on a pale yellow fill; headers white on dark blue.
HEADER_FONT = Font(bold=True, color="FFFFFF")
HEADER_FILL = PatternFill("solid", fgColor="1F4E78")
INPUT_FONT = Font(color="0000FF", bold=True)
INPUT_FILL = PatternFill("solid", fgColor="FFF2CC")
INPUT_BORDER = Border(*(Side(style="thin", color="BF9000"),) * 4)
TITLE_FONT = Font(bold=True, size=14, color="1F4E78")
NOTE_FONT = Font(italic=True, color="595959")
LABEL_FONT = Font(bold=True)

USD = '"$"#,##0.00'
USD_WHOLE = '"$"#,##0'
USD_PRECISE = '"$"#,##0.0000'
INTEGER = "#,##0"
DECIMAL = "#,##0.00"
PERCENT = "0.0%"

_UNIT_FORMATS = {
    "USD/1M tokens": USD_PRECISE, "USD/1k requests": USD_PRECISE, "USD/GPU-hour": USD,
    "USD/hour": USD, "USD/month": USD_WHOLE, "USD": USD_WHOLE, "fraction": PERCENT,
    "ms": DECIMAL, "GB": DECIMAL, "tokens/s": INTEGER, "tokens/s/GPU": INTEGER,
    "requests/s": DECIMAL, "tokens/month": INTEGER, "tokens": INTEGER, "sequences": INTEGER,
    "GPUs": INTEGER, "replicas": DECIMAL, "nodes": INTEGER, "hours": INTEGER,
}
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.]+")


def default_format(value: Any) -> str | None:
    """The display format of a lone number: whole numbers with separators, small fractions with
    three decimals, others with two; None for anything but a number.

    >>> default_format(12), default_format(0.0042), default_format(1234.5), default_format("x")
    ('#,##0', '0.000', '#,##0.00', None)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) or (math.isfinite(value) and value == round(value)):
        return INTEGER
    return "0.000" if abs(value) < 1 else DECIMAL


def number_format_for(unit: str, integer: bool = False) -> str:
    """The display format of a column of this unit (integers without decimals)."""
    if integer and unit not in ("fraction",) and not unit.startswith("USD"):
        return INTEGER
    return _UNIT_FORMATS.get(unit, DECIMAL)


def plain_value(value: Any) -> Any:
    """A cell value: numpy scalars unwrapped, NaN/inf/NA as empty."""
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dt.datetime) and value.tzinfo is not None:  # Excel has no time zones
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if value is not None and not isinstance(value, (str, int, float, bool, dt.datetime, dt.date)):
        try:
            return None if value != value else str(value)  # pandas NA/NaT compare unequal
        except TypeError:
            return None
    return value


def put(ws: Worksheet, row: int, column: int, value: Any, number_format: str | None = None,
        font: Font | None = None) -> Cell:
    """Write a constant: text is always a text cell, never a formula; a number without a format
    gets :func:`default_format`. Returns the cell."""
    cell = ws.cell(row=row, column=column)
    value = plain_value(value)
    if isinstance(value, str):
        cell.value = clean_text(value)
        cell.data_type = "s"  # openpyxl made "=..." a formula on assignment: undo it
    else:
        cell.value = value
    number_format = number_format or default_format(value)
    if number_format:
        cell.number_format = number_format
    if font is not None:
        cell.font = font
    return cell


def indent_text(cell: Cell) -> Cell:
    """Indent a text cell of a table by one character, so it never runs into the right-aligned
    number beside it (``$0.1079measured``)."""
    if isinstance(cell.value, str) and cell.data_type == "s":
        old = cell.alignment
        cell.alignment = Alignment(indent=1, wrap_text=old.wrap_text, vertical=old.vertical)
    return cell


def put_input(ws: Worksheet, row: int, column: int, value: Any, number_format: str) -> Cell:
    """Write an editable input: blue on yellow with a thin border."""
    cell = put(ws, row, column, value, number_format, INPUT_FONT)
    cell.fill = INPUT_FILL
    cell.border = INPUT_BORDER
    return cell


class Formulas:
    """Every formula of a workbook with the value Python computed for it.

    ``cached[sheet_title][coordinate] = value``: the finishing step writes these as cached
    results, and tests list them as the only cells allowed to hold formulas.
    """

    def __init__(self) -> None:
        self.cached: dict[str, dict[str, float]] = defaultdict(dict)

    def put(self, ws: Worksheet, row: int, column: int, formula: str, value: float,
            number_format: str | None = None) -> Cell:
        """Write ``=formula`` whose Python value is ``value``."""
        cell = ws.cell(row=row, column=column)
        cell.value = "=" + formula
        cell.data_type = "f"
        if number_format:
            cell.number_format = number_format
        self.cached[ws.title][cell.coordinate] = float(value)
        return cell

    def count(self) -> int:
        """Number of formula cells recorded."""
        return sum(len(cells) for cells in self.cached.values())


#: Header rows styled per worksheet: (row, first column, last column).
_HEADER_ROWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: Rows under a header searched for the first value, which says how the column aligns.
_ROWS_LOOKED_AT = 50
#: A spreadsheet's width of a column given none [characters].
DEFAULT_WIDTH = 8.43


def style_header(ws: Worksheet, row: int, first_column: int, headers: list[str]) -> None:
    """Header cells: text, white bold on dark blue, wrapped (:func:`fit_header_rows` gives the
    row the height its wrapped words need once the column widths are known)."""
    for offset, header in enumerate(headers):
        cell = put(ws, row, first_column + offset, header, font=HEADER_FONT)
        cell.fill = HEADER_FILL
        cell.alignment = Alignment(wrap_text=True, vertical="center")
    lines = max((math.ceil(len(str(h)) / 12) for h in headers), default=1)
    ws.row_dimensions[row].height = min(60, max(30, 15 * lines))  # room for wrapped words and units
    _HEADER_ROWS.setdefault(ws, set()).add((row, first_column, first_column + len(headers) - 1))



def wrapped_lines(text: str, width_chars: float, bold: bool = True) -> int:
    """Lines ``text`` takes wrapped at word ends (and at its line breaks) in a column
    ``width_chars`` wide, in bold (header) or regular type; a word longer than a line breaks
    inside it, as spreadsheets break it.

    >>> wrapped_lines("Best throughput per GPU (tokens/s/GPU)", 20), wrapped_lines("GPU", 12)
    (3, 1)
    >>> wrapped_lines("github.com/skypilot-org/skypilot-catalog catalogs/v7/vms.csv", 40,
    ...               bold=False)
    2
    """
    # bold characters are wider, and cells pad
    per_line = max(int(width_chars / (1.15 if bold else 1.0)) - 1, 1)
    total = 0
    for part in str(text).split("\n"):
        lines, used = 1, 0
        for word in part.split():
            if used and used + 1 + len(word) <= per_line:
                used += 1 + len(word)
                continue
            lines += 1 if used else 0
            lines += (len(word) - 1) // per_line
            used = (len(word) - 1) % per_line + 1
        total += lines
    return total


def fit_header_rows(ws: Worksheet) -> None:
    """Widen each column of a styled header row of ``ws`` to its header's longest word (up to
    30 characters: ``(tokens/s/GPU)`` is not broken inside), then give the row the height its
    widest wrapped header needs; a header over numbers is set right, above them, and a header
    set left just after one set right is indented, so the two do not run together."""
    table_ends = dict(ref_rows(table.ref) for table in ws.tables.values())
    for row, first, last in _HEADER_ROWS.get(ws, ()):
        right = False
        end = min(table_ends.get(row, row + 1), row + _ROWS_LOOKED_AT)
        for column in range(first, last + 1):
            below = _first_filled(ws, column, row + 1, end)
            header = ws.cell(row=row, column=column)
            if below is not None and _holds_numbers(below):
                header.alignment = Alignment(horizontal="right", wrap_text=True, vertical="center")
            elif right:
                header.alignment = Alignment(indent=1, wrap_text=True, vertical="center")
            right = header.alignment.horizontal == "right"
            words = str(ws.cell(row=row, column=column).value or "").split()
            needed = min(max((len(w) for w in words), default=0) * 1.15 + 2, 30.0)
            if column_width(ws, column) < needed:
                ws.column_dimensions[get_column_letter(column)].width = needed
        lines = max(wrapped_lines(ws.cell(row=row, column=column).value or "",
                                  column_width(ws, column))
                    for column in range(first, last + 1))
        ws.row_dimensions[row].height = min(409.0, max(ws.row_dimensions[row].height or 15.0,
                                                       15.0 * lines + 3.0))


def ref_rows(ref: str) -> tuple[int, int]:
    """The first and last row of a range such as ``A3:F20`` (or of one cell)."""
    start, _, end = ref.partition(":")
    return coordinate_from_string(start)[1], coordinate_from_string(end or start)[1]


def _first_filled(ws: Worksheet, column: int, first: int, last: int) -> Cell | None:
    """The first cell of ``column`` in rows ``first`` to ``last`` that holds a value (a case
    that leaves an input unset has none); not ``ws.cell``, which would add cells, and a bulk
    sheet's rows are written later."""
    for row in range(first, last + 1):
        cell = ws._cells.get((row, column))
        if cell is not None and cell.value is not None:
            return cell
    return None


def _holds_numbers(cell: Cell) -> bool:
    """Whether a column's first cell prints a number right-aligned: a number, a formula with a
    number format, or a text set right (the ``-`` of a missing number)."""
    if cell.alignment.horizontal in ("left", "center"):
        return False
    if cell.alignment.horizontal == "right":
        return True
    if isinstance(cell.value, bool):
        return False
    if isinstance(cell.value, (int, float)):
        return True
    return isinstance(cell.value, str) and cell.value.startswith("=") \
        and cell.number_format not in ("General", "@")


def table_name(text: str) -> str:
    """A valid, readable Excel table name from ``text``."""
    name = _NAME_CHARS.sub("_", text).strip("_.") or "Table"
    return name if name[0].isalpha() else "T_" + name


def add_table(ws: Worksheet, name: str, first_row: int, first_column: int, headers: list[str],
              n_rows: int, style: str = "TableStyleLight9") -> Table:
    """An Excel table with filter buttons over a header row plus ``n_rows`` data rows.

    Column names are given explicitly so openpyxl never has to read the cells back.
    """
    last_row = first_row + max(n_rows, 1)
    ref = (f"{get_column_letter(first_column)}{first_row}:"
           f"{get_column_letter(first_column + len(headers) - 1)}{last_row}")
    table = Table(displayName=table_name(name), ref=ref)
    table.tableColumns = [TableColumn(id=i + 1, name=clean_text(h)) for i, h in enumerate(headers)]
    table.tableStyleInfo = TableStyleInfo(name=style, showRowStripes=True)
    table.autoFilter = AutoFilter(ref=ref)
    ws.add_table(table)
    return table


def defined_name(prefix: str, *parts: str, taken: set[str]) -> str:
    """A unique defined name such as ``price_h100_sxm_on_demand`` built from ids.

    Names may hold letters, digits, ``_`` and ``.``; a prefix keeps them from looking like cell
    references (``L4``) and from starting with a digit.
    """
    body = "_".join(_NAME_CHARS.sub("_", str(p)).strip("_") for p in parts if str(p))
    base = f"{prefix}_{body}".lower() if body else prefix.lower()
    name, number = base[:250], 2
    while name in taken:
        name, number = f"{base[:245]}_{number}", number + 1
    taken.add(name)
    return name


def define_name(wb, name: str, ws: Worksheet, coordinate: str) -> None:
    """Workbook-level name for one cell or range on ``ws`` (absolute reference)."""
    absolute = "$" + coordinate.replace(":", ":$")
    absolute = re.sub(r"\$([A-Z]+)(\d+)", r"$\1$\2", absolute)
    sheet = ws.title.replace("'", "''")
    wb.defined_names[name] = DefinedName(name, attr_text=f"'{sheet}'!{absolute}")


def column_width(ws: Worksheet, column: int) -> float:
    """The width of ``column`` (1-based) [characters]: the one set, else the default. Read
    without indexing ``ws.column_dimensions``, which would add the column at openpyxl's 13
    characters, a width the file would then keep."""
    dimension = ws.column_dimensions.get(get_column_letter(column))
    return dimension.width if dimension is not None and dimension.width else DEFAULT_WIDTH


def set_widths(ws: Worksheet, widths: dict[int, float]) -> None:
    """Column widths in characters, keyed by 1-based column number."""
    for column, width in widths.items():
        ws.column_dimensions[get_column_letter(column)].width = max(6.0, min(width, 110.0))


def text_width(values, header: str, number_format: str | None = None,
               widest: float = 60.0) -> float:
    """Width that fits a header and sample values, in characters, at most ``widest``."""
    longest = max((_shown_length(v) for v in values), default=0)
    if number_format and number_format != "General":
        longest = max(longest, 10)
    words = max((len(word) for word in str(header).split()), default=0)
    return min(max(len(header) / 2.2, words, longest) + 2, widest)  # headers wrap over 3 lines


def _shown_length(value: Any) -> int:
    """Characters a value takes on screen: numbers with separators, a currency sign and decimals."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return len(f"{value:,.2f}") + 1 if math.isfinite(value) else 0
    return len(str(value))


def wrap(ws: Worksheet, cell: Cell, width_chars: float) -> Cell:
    """Wrap a long text cell and give its row the height its lines need at word ends in a
    column ``width_chars`` wide (Excel caps a row at 409 points)."""
    cell.alignment = Alignment(wrap_text=True, vertical=cell.alignment.vertical or "top",
                               indent=cell.alignment.indent)
    lines = wrapped_lines(str(cell.value or ""), width_chars - cell.alignment.indent, bold=False)
    current = ws.row_dimensions[cell.row].height or 15.0
    ws.row_dimensions[cell.row].height = min(409.0, max(current, 15.0 * lines))
    return cell


def title_block(ws: Worksheet, title: str, subtitle: str | None = None) -> int:
    """A bold title in A1 and an optional note in A2; returns the next free row."""
    put(ws, 1, 1, title, font=TITLE_FONT)
    if subtitle:
        put(ws, 2, 1, subtitle, font=NOTE_FONT)
        return 4
    return 3


def table_sheet(ws: Worksheet, frame, name: str) -> None:
    """``frame`` as an Excel table named ``name`` from A1: header, text-safe cells, frozen header."""
    headers = [str(c) for c in frame.columns]
    style_header(ws, 1, 1, headers)
    for r, record in enumerate(frame.itertuples(index=False), start=2):
        for c, value in enumerate(record, start=1):
            put(ws, r, c, value if not isinstance(value, float) or value == value else None)
    add_table(ws, name, 1, 1, headers, len(frame))
    ws.freeze_panes = "A2"
    set_widths(ws, {i + 1: max(10, min(40, len(h) + 4)) for i, h in enumerate(headers)})
