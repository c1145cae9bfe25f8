"""Tables mixing constants and live formulas, each formula checked against the plan's value.

A :class:`LiveColumn` holds, per row, the value Python computes with the same formula the cell
gets, and optionally the value the optimizer reported. A row is written as a formula only when
the two agree (relative 1e-9); otherwise the optimizer's value is written as a constant and the
disagreement is recorded on the book, so the workbook never shows a number the plan did not
compute.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from openpyxl.styles import Alignment
from openpyxl.utils.cell import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports.labels import header_of
from fleetplan.exports.xlsx_common import (
    add_table,
    define_name,
    indent_text,
    plain_value,
    put,
    put_input,
    style_header,
    text_width,
)
from fleetplan.exports.xlsx_package import Book

log = logging.getLogger(__name__)

RELATIVE_TOLERANCE = 1e-9

#: (position in the table, Excel row number) -> formula text without "=", or None for a
#: constant in that row
FormulaText = Callable[[int, int], "str | None"]


@dataclass
class LiveColumn:
    """One column: ``values`` are constants, or Python's results of ``formula`` per row."""

    name: str
    values: Sequence[Any]
    formula: FormulaText | None = None
    expected: Sequence[Any] | None = None
    number_format: str | None = None
    editable: bool = False
    header: str | None = None
    #: per row, the magnitude the formula's value comes from (a difference of two totals: the
    #: larger), so a disagreement within rounding of it is not one; None = the value itself
    scale: Sequence[float] | None = None


@dataclass
class Placed:
    """Where a written table landed: first data row, last data row, column letters by name."""

    first: int
    last: int
    letters: dict[str, str]

    def cell(self, name: str, position: int) -> str:
        """Coordinate of column ``name`` at data position ``position`` (0-based)."""
        return f"{self.letters[name]}{self.first + position}"

    def column(self, name: str) -> str:
        """Absolute range of column ``name``'s data, e.g. ``$K$5:$K$10``."""
        letter = self.letters[name]
        return f"${letter}${self.first}:${letter}${max(self.last, self.first)}"


def agrees(computed: Any, expected: Any, scale: float = 0.0) -> bool:
    """Python's formula value reproduces the optimizer's (NaN expected: nothing to check),
    within a relative 1e-9 of the value or of ``scale``, the magnitude it was computed from.

    >>> agrees(6.2281746, 6.2281745), agrees(6.2281746, 6.2281745, scale=82_000.0)
    (False, True)
    """
    expected = plain_value(expected)
    if expected is None:
        return plain_value(computed) is not None
    computed = plain_value(computed)
    return computed is not None and math.isclose(
        float(computed), float(expected), rel_tol=RELATIVE_TOLERANCE,
        abs_tol=max(1e-9, RELATIVE_TOLERANCE * abs(scale)))


def write_live_table(book: Book, ws: Worksheet, first_row: int, columns: list[LiveColumn],
                     table: str, widths: dict[int, float] | None = None,
                     first_column: int = 1) -> Placed:
    """Write a header plus rows; formulas where they agree with the plan, else constants."""
    headers = [c.header or header_of(c.name) for c in columns]
    style_header(ws, first_row, first_column, headers)
    rows = len(columns[0].values) if columns else 0
    letters = {c.name: get_column_letter(first_column + i) for i, c in enumerate(columns)}
    for offset, column in enumerate(columns):
        number = first_column + offset
        for position in range(rows):
            _write_cell(book, ws, first_row + 1 + position, number, column, position)
            cell = ws.cell(row=first_row + 1 + position, column=number)
            if offset:
                indent_text(cell)
            elif isinstance(cell.value, dt.date):  # a row's label: left, as text labels are
                cell.alignment = Alignment(horizontal="left")
        if widths is not None:
            sample = list(column.values[:100])
            widths[number] = max(widths.get(number, 0),
                                 text_width(sample, headers[offset], column.number_format))
    if columns:
        add_table(ws, table, first_row, first_column, headers, rows)
    return Placed(first_row + 1, first_row + rows, letters)


def _write_cell(book: Book, ws: Worksheet, row: int, number: int, column: LiveColumn,
                position: int) -> None:
    value = column.values[position]
    if column.formula is None:
        writer = put_input if column.editable else put
        writer(ws, row, number, value, column.number_format)
        return
    expected = None if column.expected is None else column.expected[position]
    text = column.formula(position, row)
    scale = 0.0 if column.scale is None else column.scale[position]
    if text is not None and agrees(value, expected, scale):
        book.formulas.put(ws, row, number, text, float(value), column.number_format)
        return
    shown = value if expected is None or plain_value(expected) is None else expected
    put(ws, row, number, shown, column.number_format)
    if text is not None and (plain_value(value) is not None or plain_value(expected) is not None):
        note = (f"{ws.title}!{get_column_letter(number)}{row} ({column.name}): formula gives "
                f"{value!r}, plan says {expected!r}; kept the plan's value")
        book.mismatches.append(note)
        log.info(note)


def name_range(book: Book, ws: Worksheet, name: str, placed: Placed, column: str) -> str:
    """Define ``name`` for a placed column's data range and return it."""
    define_name(book.wb, name, ws, placed.column(column).replace("$", ""))
    return name
