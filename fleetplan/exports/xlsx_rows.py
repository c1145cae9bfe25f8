"""Fast sheet rows for big grids: SpreadsheetML ``<row>`` elements built column by column.

openpyxl creates a Python object per cell (about 20 s per 100,000 sweep rows, even in
write-only mode). A sweep grid has one type and one style per column, so its cells are built
as text a column at a time and spliced into the sheet openpyxl wrote (see
``xlsx_package``). Styles are openpyxl's own: each column's style id comes from a template cell
registered in the same workbook. Formulas carry their Python value as the cached result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

import numpy as np
import pandas as pd
from openpyxl.utils.cell import get_column_letter

from fleetplan.exports.xlsx_common import clean_text

#: Builds the formula text (no leading ``=``) of each row of a block, or None for no formula.
FormulaBuilder = Callable[[pd.DataFrame, list[str]], list[str | None]]


@dataclass
class BulkColumn:
    """One column of a bulk sheet: where its values come from and how they are written.

    kind: ``number``, ``bool``, ``text`` or ``formula`` (the column's values are the cached
    results, the builder gives the formula texts).
    """

    name: str
    kind: str
    style_id: int
    formula: FormulaBuilder | None = None
    #: A boolean column's style for its FALSE cells (e.g. red), set in the cell rather than by
    #: conditional formatting: LibreOffice 7.4 crashes printing a sheet whose boolean cells
    #: carry a conditional format unless it recalculates the workbook on load.
    false_style_id: int | None = None


@dataclass
class BulkSheet:
    """Data rows of one sheet, written below the header row openpyxl wrote."""

    frame: pd.DataFrame
    columns: list[BulkColumn]
    first_row: int = 2
    block_rows: int = 20_000
    formula_cells: int = field(default=0, init=False)

    @property
    def last_row(self) -> int:
        return self.first_row + len(self.frame) - 1

    @property
    def formula_columns(self) -> list[str]:
        """Column letters that may hold formulas."""
        return [get_column_letter(i + 1) for i, c in enumerate(self.columns) if c.kind == "formula"]

    def row_blocks(self) -> Iterator[bytes]:
        """The ``<row>`` elements, a block of rows at a time, UTF-8 encoded."""
        for start in range(0, len(self.frame), self.block_rows):
            block = self.frame.iloc[start:start + self.block_rows]
            first = self.first_row + start
            rows = [str(r) for r in range(first, first + len(block))]
            cells = [self._cells(i, column, block, rows) for i, column in enumerate(self.columns)]
            yield "".join(f'<row r="{r}">{"".join(row_cells)}</row>'
                          for r, row_cells in zip(rows, zip(*cells))).encode("utf-8")

    def _cells(self, index: int, column: BulkColumn, block: pd.DataFrame,
               rows: list[str]) -> list[str]:
        letter = get_column_letter(index + 1)
        series = block[column.name]
        if column.kind == "formula":
            values = series.to_numpy(dtype=float, na_value=np.nan)
            formulas = column.formula(block, rows)
            self.formula_cells += sum(f is not None and ok
                                      for f, ok in zip(formulas, np.isfinite(values).tolist()))
            return formula_cells(letter, column.style_id, formulas, values, rows)
        if column.kind == "bool":
            return bool_cells(letter, column.style_id, series, rows, column.false_style_id)
        if column.kind == "text":
            return text_cells(letter, column.style_id, series, rows)
        return number_cells(letter, column.style_id, series, rows)


def _style(style_id: int) -> str:
    return f' s="{style_id}"' if style_id else ""


def number_cells(letter: str, style_id: int, series: pd.Series, rows: list[str]) -> list[str]:
    """Numeric cells; NaN, infinity and missing values are left empty."""
    values = series.to_numpy(dtype=float, na_value=np.nan)
    finite = np.isfinite(values)
    if pd.api.types.is_integer_dtype(series.dtype):
        texts = [str(v) for v in series.to_numpy().tolist()]
    else:
        texts = [repr(v) for v in values.tolist()]
    s = _style(style_id)
    return [f'<c r="{letter}{r}"{s}><v>{t}</v></c>' if ok else ""
            for r, t, ok in zip(rows, texts, finite.tolist())]


def bool_cells(letter: str, style_id: int, series: pd.Series, rows: list[str],
               false_style_id: int | None = None) -> list[str]:
    """Boolean cells (TRUE/FALSE), FALSE ones in ``false_style_id`` if given; missing values
    left empty."""
    styles = {True: _style(style_id), False: _style(style_id if false_style_id is None
                                                      else false_style_id)}
    values = series.astype("boolean").to_numpy(dtype=object, na_value=None).tolist()
    return [f'<c r="{letter}{r}"{styles[v]} t="b"><v>{int(v)}</v></c>' if v is not None else ""
            for r, v in zip(rows, values)]


def _inline(text: str) -> str:
    # a raw carriage return would become a line feed when the XML is read back
    text = escape(clean_text(text), {"\r": "&#13;"})
    space = ' xml:space="preserve"' if text != text.strip() else ""
    return f' t="inlineStr"><is><t{space}>{text}</t></is></c>'


def text_cells(letter: str, style_id: int, series: pd.Series, rows: list[str]) -> list[str]:
    """Text cells (always text: a leading ``=`` is never a formula here)."""
    s = _style(style_id)
    if isinstance(series.dtype, pd.CategoricalDtype):
        tails = np.array([_inline(str(c)) for c in series.cat.categories] + [None], dtype=object)
        codes = series.cat.codes.to_numpy()
        endings = tails.take(np.where(codes < 0, len(tails) - 1, codes)).tolist()
    else:
        endings = [None if v is None or v != v else _inline(str(v))
                   for v in series.to_numpy(dtype=object).tolist()]
    return [f'<c r="{letter}{r}"{s}{e}' if e is not None else "" for r, e in zip(rows, endings)]


def formula_cells(letter: str, style_id: int, formulas: list[str | None], values: np.ndarray,
                  rows: list[str]) -> list[str]:
    """Formula cells with cached values; rows without a formula keep their value (or blank)."""
    s = _style(style_id)
    finite = np.isfinite(values).tolist()
    cells = []
    for r, formula, value, ok in zip(rows, formulas, values.tolist(), finite):
        if formula is not None and ok:
            cells.append(f'<c r="{letter}{r}"{s}><f>{escape(formula)}</f><v>{value!r}</v></c>')
        elif ok:
            cells.append(f'<c r="{letter}{r}"{s}><v>{value!r}</v></c>')
        else:
            cells.append("")
    return cells
