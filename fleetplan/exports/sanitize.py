"""The one sanitizer for text fleetplan writes: CSV fields, workbook cells, sheet names, chart
titles and document properties.

User text (scenario names and descriptions, catalog override rows, measurement sources, what-if
case names) may start like a formula or hold control characters. Spreadsheets execute a CSV
field that starts with ``=``, ``+``, ``-``, ``@``, tab, carriage return or line feed (OWASP
CSV-injection guidance): such fields get a leading single quote. Workbook XML cannot hold most
control characters at all (a vertical tab in a document property makes a file Excel refuses):
they are removed. Workbook cells are made inert by their type (see ``xlsx_common.put``), so their
text keeps its first character.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

#: Leading characters that make a spreadsheet read a field as a formula.
UNSAFE_LEADING = ("=", "+", "-", "@", "\t", "\r", "\n")
_UNSAFE = re.compile(r"^[=+\-@\t\r\n]")
#: Longest text a workbook cell holds.
EXCEL_MAX_TEXT = 32_767
#: Longest sheet name Excel accepts.
SHEET_NAME_MAX = 31
_ILLEGAL_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f]+")
_SHEET_UNSAFE = re.compile(r"[\[\]:*?/\\\x00-\x1f]")


def safe_text(value: str) -> str:
    """One CSV field made inert: a leading single quote when it starts like a formula.

    >>> safe_text('=HYPERLINK("http://x","y")'), safe_text("h100-sxm")
    ('\\'=HYPERLINK("http://x","y")', 'h100-sxm')
    """
    return "'" + value if value.startswith(UNSAFE_LEADING) else value


def clean_text(value: object) -> str:
    """``value`` as text a workbook cell can hold: no XML-illegal characters, Excel's length cap.

    >>> clean_text("=1+1\\x0bvertical tab")
    '=1+1vertical tab'
    """
    return _ILLEGAL_XML.sub("", str(value))[:EXCEL_MAX_TEXT]


def property_text(value: object, limit: int = 255) -> str:
    """A document property or chart title: one line, XML-legal, at most ``limit`` characters.

    >>> property_text("fleet\\x0bplan\\nQ3")
    'fleet plan Q3'
    """
    return _LINE_BREAKS.sub(" ", str(value)).strip()[:limit]


def sheet_name(text: str, taken: set[str] | None = None) -> str:
    """A valid, unused sheet name from ``text``: no ``[]:*?/\\``, at most 31 characters, not
    starting or ending with an apostrophe; ``taken`` (names already used) is updated.

    >>> sheet_name("By [x]:*?/ axis", set())
    'By _x_____ axis'
    """
    taken = set() if taken is None else taken
    name = _SHEET_UNSAFE.sub("_", text).strip("'")[:SHEET_NAME_MAX - 3] or "Sheet"
    base, number = name, 1
    while name in taken:
        number += 1
        name = f"{base[:SHEET_NAME_MAX - 4]}_{number}"
    taken.add(name)
    return name


def _is_text(series: pd.Series) -> bool:
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return True
    return dtype == object or pd.api.types.is_string_dtype(dtype)


def safe_frame(frame: pd.DataFrame, round_floats=None) -> pd.DataFrame:
    """A copy of ``frame`` whose text columns (and column names) are made inert for CSV.

    ``round_floats`` (array -> array) is applied to float columns. Categorical columns are fixed
    through their categories only, so big sweeps stay fast.
    """
    safe = frame.copy(deep=False)
    safe.columns = [safe_text(str(name)) for name in frame.columns]
    for position, name in enumerate(frame.columns):
        series = frame[name]
        if round_floats is not None and pd.api.types.is_float_dtype(series.dtype):
            safe.isetitem(position, round_floats(series.to_numpy(dtype=float, na_value=np.nan)))
        if not _is_text(series):
            continue
        if isinstance(series.dtype, pd.CategoricalDtype):
            categories = [safe_text(str(c)) for c in series.cat.categories]
            fixed = series.cat.rename_categories(_dedupe(categories))
        else:
            text = series.astype("str").where(series.notna())
            fixed = text.where(~text.str.match(_UNSAFE, na=False), "'" + text)
        safe.isetitem(position, fixed)
    return safe


def _dedupe(categories: list[str]) -> list[str]:
    """Renamed categories must stay unique: ``'=a`` could already exist next to ``=a``."""
    seen: set[str] = set()
    unique = []
    for category in categories:
        while category in seen:
            category = "'" + category
        seen.add(category)
        unique.append(category)
    return unique
