"""Sheet building blocks: the Assumptions sheet of editable inputs, and tables of constants."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from openpyxl.styles import Alignment
from openpyxl.utils.cell import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports.labels import header_of, label_of
from fleetplan.exports.units import unit_of
from fleetplan.exports.xlsx_common import (
    LABEL_FONT,
    NOTE_FONT,
    USD,
    add_table,
    define_name,
    defined_name,
    indent_text,
    number_format_for,
    put,
    put_input,
    set_widths,
    style_header,
    text_width,
    title_block,
    wrap,
)

log = logging.getLogger(__name__)

#: Reference columns of a price table that wrap, with their width [characters].
WRAPPED = {"source": 40, "warning": 24, "instance": 16}
#: The longest source text a price row shows; the Sources sheet holds it whole [characters].
MAX_SOURCE_TEXT = 240
INPUT_NOTE = ("Yellow cells with blue numbers are inputs: edit them and every cost that depends "
              "on them recalculates.")


class Assumptions:
    """The Assumptions sheet: editable inputs, each behind a workbook-level defined name."""

    def __init__(self, ws: Worksheet, note: str = INPUT_NOTE) -> None:
        self.ws = ws
        self.row = title_block(ws, "Assumptions", note)
        self.names: set[str] = set()
        self.widths: dict[int, float] = {1: 24, 2: 16, 3: 12, 4: 26}

    def section(self, title: str, note: str | None = None) -> None:
        """A bold section label (and a note) starting at the next free row."""
        put(self.ws, self.row, 1, title, font=LABEL_FONT)
        if note:
            put(self.ws, self.row + 1, 1, note, font=NOTE_FONT)
            self.row += 1
        self.row += 1

    def scalar(self, name: str, value: Any, unit: str, description: str,
               number_format: str | None = None, editable: bool = True,
               named: bool | None = None, label: str | None = None) -> str:
        """One value under its plain-word label; editable ones are inputs. ``named`` (default:
        editable) values get the workbook-level defined name ``name``, which formulas use."""
        ws, row = self.ws, self.row
        put(ws, row, 1, label or label_of(name), font=LABEL_FONT)
        if editable:
            put_input(ws, row, 2, value, number_format)
        else:
            put(ws, row, 2, value, number_format)
        if editable if named is None else named:
            define_name(ws.parent, name, ws, f"B{row}")
            self.names.add(name)
            description = f"{description} (in formulas: {name})"
        put(ws, row, 3, unit)
        put(ws, row, 4, description)
        self.row += 1
        return name

    def prices(self, frame: pd.DataFrame, keys: Sequence[str], *, table: str = "Prices",
               price_column: str = "usd_per_gpu_hour",
               factor_column: str | None = None,
               wrapped: Mapping[str, float] = WRAPPED) -> dict[tuple, str]:
        """A table of prices, one input cell (and defined name) per row of ``frame``.

        ``keys`` are the columns identifying a price (e.g. gpu, pricing_type); other columns
        (provider, source, as_of, ...) are shown for reference. Returns ``{key tuple: name}``,
        or with ``factor_column`` (a multiplier of the price, such as a reserved term charged
        beyond the horizon) ``name*name_term`` where the factor is not 1, its cell named
        ``name_term``. ``wrapped``: the reference columns that wrap, with their widths
        [characters].
        """
        columns = [*keys, price_column, "name",
                   *[c for c in frame.columns if c not in (*keys, price_column)]]
        headers = ["Name in formulas" if c == "name" else header_of(c) for c in columns]
        ws, first = self.ws, self.row
        style_header(ws, first, 1, headers)
        names, plain = {}, []
        for offset, record in enumerate(frame.to_dict(orient="records"), start=1):
            key = tuple(record[k] for k in keys)
            name = defined_name_for(key, self.names)
            names[key] = name
            plain.append(name)
            for column, field in enumerate(columns, start=1):
                if field == price_column:
                    put_input(ws, first + offset, column, record[field], USD)
                    define_name(ws.parent, name, ws, f"{get_column_letter(column)}{first + offset}")
                elif field == factor_column:
                    put(ws, first + offset, column, record[field], "0.000")
                    if record[field] != 1 and math.isfinite(record[field]):
                        define_name(ws.parent, f"{name}_term", ws,
                                    f"{get_column_letter(column)}{first + offset}")
                        self.names.add(f"{name}_term")
                        names[key] = f"{name}*{name}_term"
                elif field == "name":
                    put(ws, first + offset, column, name)
                elif field == "source":
                    put(ws, first + offset, column, shortened_source(record[field]))
                else:
                    put(ws, first + offset, column, record[field], number_format_for(unit_of(field)))
        add_table(ws, table, first, 1, headers, len(frame))
        for column, field in enumerate(columns, start=1):
            values = plain if field == "name" else frame.get(field, [])
            width = text_width(list(values)[:200], headers[column - 1], USD if field == price_column else None)
            for offset in range(1, len(frame) + 1):
                cell = ws.cell(row=first + offset, column=column)
                cell.alignment = Alignment(vertical="top")
                if column > 1:
                    indent_text(cell)
                if field in wrapped:  # long texts wrap instead of widening the page
                    wrap(ws, cell, wrapped[field])
            if field in wrapped:
                width = wrapped[field]
            self.widths[column] = max(self.widths.get(column, 0), width)
        self.row = first + max(len(frame), 1) + 2
        return names

    def info(self, frame: pd.DataFrame, table: str) -> None:
        """A read-only reference table (e.g. efficiency factors the optimizer used)."""
        self.row = write_frame(self.ws, frame, self.row, table, self.widths) + 1

    def finish(self) -> None:
        set_widths(self.ws, self.widths)


def shortened_source(text: Any, limit: int = MAX_SOURCE_TEXT) -> Any:
    """A source text of at most about ``limit`` characters: a longer one (an ownership row cites
    its price, power, hosting and life, each with its link) is cut at a word and points to
    Sources, which lists it whole, so that its row does not run over pages."""
    if not isinstance(text, str) or len(text) <= limit:
        return text
    head = text[:limit]
    head = head[:head.rfind(" ")] if " " in head else head
    return f"{head.rstrip(' ,;:')} ... (in full on Sources)"


def defined_name_for(key: tuple, taken: set[str]) -> str:
    """``price_<gpu>[_<pricing type>]`` as a unique defined name."""
    return defined_name("price", *[str(k) for k in key], taken=taken)


def write_frame(ws: Worksheet, frame: pd.DataFrame, first_row: int, table: str,
                widths: dict[int, float] | None = None, first_column: int = 1,
                formats: Mapping[str, str] | None = None) -> int:
    """Write ``frame`` as a formatted Excel table of constants (plain-word headers with units,
    a number format per column, or ``formats`` by column name); returns the row after it."""
    headers = [header_of(str(c)) for c in frame.columns]
    style_header(ws, first_row, first_column, headers)
    formats = [(formats or {}).get(str(c)) or _format_of(frame[c]) for c in frame.columns]
    for offset, row in enumerate(frame.itertuples(index=False), start=1):
        for position, value in enumerate(row):
            cell = put(ws, first_row + offset, first_column + position, value, formats[position])
            if position:
                indent_text(cell)
    if headers:
        add_table(ws, table, first_row, first_column, headers, len(frame))
    if widths is not None:
        for position, column in enumerate(frame.columns):
            sample = frame[column].head(200).tolist()
            column_number = first_column + position
            widths[column_number] = max(widths.get(column_number, 0),
                                        text_width(sample, headers[position], formats[position]))
    return first_row + max(len(frame), 1) + 1


def _format_of(series: pd.Series) -> str | None:
    """A column's number format from its unit; whole numbers without decimals."""
    if pd.api.types.is_bool_dtype(series.dtype) or not pd.api.types.is_numeric_dtype(series.dtype):
        return None
    values = series.to_numpy(dtype=float, na_value=float("nan"))
    finite = values[pd.notna(values)]
    integral = pd.api.types.is_integer_dtype(series.dtype) or (
        len(finite) > 0 and bool((finite == finite.round()).all()))
    return number_format_for(unit_of(str(series.name)), integral)
