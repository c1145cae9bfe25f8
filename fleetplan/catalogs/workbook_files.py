"""Catalog workbooks (``--catalog mine.xlsx``): each sheet's cells as the text a CSV would hold.

A workbook is read for the values its cells last showed (the values a spreadsheet program
saves next to each formula). Two layouts that would otherwise be misread are refused with the
cell to fix: a formula with no saved value (a workbook written by a script and never opened
in a spreadsheet program, which would read as a blank cell), and a sheet (or CSV file) whose
first row is blank while rows below hold data (a title row left above the column names would
make every column unnamed).
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import openpyxl
import pandas as pd

from fleetplan.catalogs.input_files import MAX_TABLE_BYTES, check_file
from fleetplan.errors import CatalogError

#: Workbook suffixes read as catalog files.
EXCEL_SUFFIXES = (".xlsx", ".xlsm")


def read_workbook(path: Path) -> dict[str | None, pd.DataFrame]:
    """``{sheet name: frame of cell texts}`` of a catalog workbook, the first row as header."""
    check_file(path, "catalog workbook", CatalogError, MAX_TABLE_BYTES)
    try:
        sheets = pd.read_excel(path, sheet_name=None, dtype=object, header=0,
                               keep_default_na=False, na_values=[], engine="openpyxl")
        for name, frame in sheets.items():
            refuse_blank_header(f"{path} sheet {name}", frame)
        _refuse_formulas_without_values(path)
    except CatalogError:
        raise
    except Exception as error:  # openpyxl raises many kinds for a damaged workbook
        message = f"{path}: not a readable XLSX workbook ({type(error).__name__})"
        raise CatalogError(message) from None
    return {name: frame.map(cell_text) for name, frame in sheets.items()}


def cell_text(value: object) -> str:
    """Spreadsheet cell -> the text a CSV would hold (dates as YYYY-MM-DD)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, dt.datetime):
        return value.date().isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def refuse_blank_header(label: str, frame: pd.DataFrame) -> None:
    """A table whose header row is blank while rows below hold data is refused."""
    names = [str(column) for column in frame.columns]
    if all(name.startswith("Unnamed:") for name in names) and len(frame):
        message = (f"{label} row 1 is blank: the first row must hold the column names (move "
                   f"any title rows elsewhere)")
        raise CatalogError(message)


def _refuse_formulas_without_values(path: Path) -> None:
    """A cell holding a formula whose saved value is empty is named, with its formula."""
    formulas = openpyxl.load_workbook(path, read_only=True, data_only=False)
    values = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        for sheet in formulas.worksheets:
            shown = values[sheet.title].iter_rows(values_only=True)
            header: tuple = ()
            for number, (written, saved) in enumerate(
                    zip(sheet.iter_rows(values_only=True), shown), start=1):
                header = header or (written if any(v is not None for v in written) else ())
                for column, (formula, value) in enumerate(zip(written, saved)):
                    if isinstance(formula, str) and formula.startswith("=") and value is None:
                        name = header[column] if column < len(header) else column + 1
                        message = (f"{path} sheet {sheet.title} row {number}, column {name}: "
                                   f"the formula {formula[:40]} has no saved value; open and save "
                                   f"the workbook in a spreadsheet program, or type the value")
                        raise CatalogError(message)
    finally:
        formulas.close()
        values.close()
