"""Sheets every fleetplan workbook has: Assumptions (the inputs), Sources and Read me."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
from openpyxl.styles import Alignment
from openpyxl.utils.cell import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.exports.provenance import to_json
from fleetplan.exports.units import header_of, unit_of
from fleetplan.exports.xlsx_common import (
    LABEL_FONT,
    NOTE_FONT,
    USD,
    add_table,
    define_name,
    defined_name,
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

README_WIDTH = 100
INPUT_NOTE = ("Yellow cells with blue numbers are inputs: edit them and every cost that depends "
              "on them recalculates.")


class Assumptions:
    """The Assumptions sheet: editable inputs, each behind a workbook-level defined name."""

    def __init__(self, ws: Worksheet, note: str = INPUT_NOTE) -> None:
        self.ws = ws
        self.row = title_block(ws, "Assumptions", note)
        self.names: set[str] = set()
        self.widths: dict[int, float] = {1: 24, 2: 16, 3: 16, 4: 26}

    def section(self, title: str, note: str | None = None) -> None:
        """A bold section label (and a note) starting at the next free row."""
        put(self.ws, self.row, 1, title, font=LABEL_FONT)
        if note:
            put(self.ws, self.row + 1, 1, note, font=NOTE_FONT)
            self.row += 1
        self.row += 1

    def scalar(self, name: str, value: Any, unit: str, description: str,
               number_format: str | None = None, editable: bool = True,
               named: bool | None = None) -> str:
        """One labelled value; editable ones are inputs. ``named`` (default: editable) values
        get the workbook-level defined name ``name``."""
        ws, row = self.ws, self.row
        put(ws, row, 1, name, font=LABEL_FONT)
        if editable:
            put_input(ws, row, 2, value, number_format or "General")
        else:
            put(ws, row, 2, value, number_format)
        if editable if named is None else named:
            define_name(ws.parent, name, ws, f"B{row}")
            self.names.add(name)
        put(ws, row, 3, unit)
        put(ws, row, 4, description)
        self.row += 1
        return name

    def prices(self, frame: pd.DataFrame, keys: Sequence[str], *, table: str = "Prices",
               price_column: str = "usd_per_gpu_hour") -> dict[tuple, str]:
        """A table of prices, one input cell (and defined name) per row of ``frame``.

        ``keys`` are the columns identifying a price (e.g. gpu, pricing_type); other columns
        (provider, source, as_of, ...) are shown for reference. Returns ``{key tuple: name}``.
        """
        columns = [*keys, price_column, "name",
                   *[c for c in frame.columns if c not in (*keys, price_column)]]
        headers = [header_of(c) for c in columns]
        ws, first = self.ws, self.row
        style_header(ws, first, 1, headers)
        names = {}
        for offset, record in enumerate(frame.to_dict(orient="records"), start=1):
            key = tuple(record[k] for k in keys)
            name = defined_name_for(key, self.names)
            names[key] = name
            for column, field in enumerate(columns, start=1):
                if field == price_column:
                    put_input(ws, first + offset, column, record[field], USD)
                    define_name(ws.parent, name, ws, f"{get_column_letter(column)}{first + offset}")
                elif field == "name":
                    put(ws, first + offset, column, name)
                else:
                    put(ws, first + offset, column, record[field])
        add_table(ws, table, first, 1, headers, len(frame))
        for column, field in enumerate(columns, start=1):
            values = [name for name in names.values()] if field == "name" else frame.get(field, [])
            self.widths[column] = max(self.widths.get(column, 0), text_width(
                list(values)[:200], headers[column - 1]))
        self.row = first + max(len(frame), 1) + 2
        return names

    def info(self, frame: pd.DataFrame, table: str) -> None:
        """A read-only reference table (e.g. efficiency factors the optimizer used)."""
        self.row = write_frame(self.ws, frame, self.row, table, self.widths) + 1

    def finish(self) -> None:
        set_widths(self.ws, self.widths)


def defined_name_for(key: tuple, taken: set[str]) -> str:
    """``price_<gpu>[_<pricing type>]`` as a unique defined name."""
    return defined_name("price", *[str(k) for k in key], taken=taken)


def write_frame(ws: Worksheet, frame: pd.DataFrame, first_row: int, table: str,
                widths: dict[int, float] | None = None, first_column: int = 1) -> int:
    """Write ``frame`` as a formatted Excel table of constants; returns the row after it."""
    headers = [header_of(str(c)) for c in frame.columns]
    style_header(ws, first_row, first_column, headers)
    formats = [_format_of(frame[c]) for c in frame.columns]
    for offset, row in enumerate(frame.itertuples(index=False), start=1):
        for position, value in enumerate(row):
            put(ws, first_row + offset, first_column + position, value, formats[position])
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
    if pd.api.types.is_bool_dtype(series.dtype) or not pd.api.types.is_numeric_dtype(series.dtype):
        return None
    return number_format_for(unit_of(str(series.name)), pd.api.types.is_integer_dtype(series.dtype))


SOURCE_COLUMNS = ["catalog", "key", "source", "as_of"]
_KINDS = {"gpu": "gpus", "model": "models", "quant": "quants"}


def catalog_rows(catalogs: Any, ids: Mapping[str, Iterable[str]]) -> pd.DataFrame:
    """The catalog rows used (catalog, key, source, as_of); empty if catalogs are unavailable.

    ``ids`` maps gpu/model/quant to the ids an export uses; prices and efficiency factors of
    those GPUs are included. Ids no catalog holds (user-made tables) are skipped.
    """
    if catalogs is None or not hasattr(catalogs, "sources"):
        return pd.DataFrame(columns=SOURCE_COLUMNS)
    known = {kind: sorted({str(i) for i in ids.get(kind, ())}
                          & set(map(str, catalogs.table(name).index)))
             for kind, name in _KINDS.items()}
    requests = [*known.items(), ("prices", known["gpu"]), ("efficiency", known["gpu"])]
    frames = []
    for kind, values in requests:
        if not values:
            continue
        try:
            frames.append(catalogs.sources(kind, values))
        except (KeyError, ValueError) as error:
            log.debug("no %s sources: %s", kind, error)
    if not frames:
        return pd.DataFrame(columns=SOURCE_COLUMNS)
    rows = pd.concat(frames, ignore_index=True)
    return rows[[c for c in rows.columns if c in SOURCE_COLUMNS]].astype(str)


def sources_sheet(ws: Worksheet, record: Mapping[str, Any], used: pd.DataFrame) -> None:
    """Provenance (version, time, parameters, catalog versions) and every catalog row used."""
    row = title_block(ws, "Sources", "Where every number in this workbook comes from.")
    widths = {1: 16, 2: 44, 3: 12, 4: 12, 5: 66, 6: 24}
    for key in ("fleetplan_version", "created", "kind"):
        put(ws, row, 1, key, font=LABEL_FONT)
        put(ws, row, 2, record.get(key, ""))
        row += 1
    put(ws, row, 1, "parameters", font=LABEL_FONT).alignment = Alignment(vertical="top")
    parameters = put(ws, row, 2, to_json(record.get("parameters", {})))
    ws.merge_cells(start_row=row, start_column=2, end_row=row, end_column=6)
    wrap(ws, parameters, sum(widths[c] for c in range(2, 7)))
    row += 2
    versions = pd.DataFrame([_version_row(name, info) for name, info in
                             (record.get("catalog_versions") or {}).items()])
    if not versions.empty:
        put(ws, row, 1, "Catalog versions", font=LABEL_FONT)
        row = write_frame(ws, versions, row + 1, "CatalogVersions") + 1
    put(ws, row, 1, "Catalog rows used", font=LABEL_FONT)
    if used.empty:
        put(ws, row + 1, 1, "No catalog rows were available when this file was written.",
            font=NOTE_FONT)
    else:
        write_frame(ws, used[[c for c in ("catalog", "key", "as_of", "source")
                              if c in used.columns]], row + 1, "CatalogRows")
    set_widths(ws, widths)


def _version_row(name: str, info: Mapping[str, Any]) -> dict[str, Any]:
    overrides = info.get("overrides") or []
    return {"catalog": name, "rows": info.get("rows"), "as_of_min": info.get("as_of_min"),
            "as_of_max": info.get("as_of_max"), "sha256": info.get("sha256"),
            "overrides": ", ".join(map(str, overrides)) if isinstance(overrides, list)
            else overrides}


def readme_sheet(ws: Worksheet, title: str, intro: str, sheets: Sequence[tuple[str, str]],
                 how_to: Sequence[str], record: Mapping[str, Any]) -> None:
    """What each sheet is, units, how to edit, and the provenance in one glance."""
    row = title_block(ws, title, intro)
    put(ws, row, 1, "Sheets", font=LABEL_FONT)
    row += 1
    for sheet, what in sheets:
        put(ws, row, 1, sheet, font=LABEL_FONT).alignment = Alignment(vertical="top")
        wrap(ws, put(ws, row, 2, what), README_WIDTH)
        row += 1
    row += 1
    put(ws, row, 1, "How to use", font=LABEL_FONT)
    row += 1
    for line in how_to:
        wrap(ws, put(ws, row, 2, line), README_WIDTH)
        row += 1
    row += 1
    put(ws, row, 1, "Units", font=LABEL_FONT)
    wrap(ws, put(ws, row + 1, 2, "Units are in the column headers, e.g. tpot_ms (ms) or "
                 "usd_per_month (USD/month). Money is in US dollars; a month is the "
                 "hours_per_month on Assumptions."), README_WIDTH)
    row += 3
    put(ws, row, 1, "Provenance", font=LABEL_FONT)
    for offset, key in enumerate(("fleetplan_version", "created"), start=1):
        put(ws, row + offset, 1, key)
        put(ws, row + offset, 2, record.get(key, ""))
    catalogs = record.get("catalog_versions") or {}
    for offset, (name, info) in enumerate(catalogs.items(), start=3):
        put(ws, row + offset, 1, f"catalog {name}")
        put(ws, row + offset, 2, f"{info.get('rows', '?')} rows, as of {info.get('as_of_min', '?')}"
            f" to {info.get('as_of_max', '?')}, sha256 {str(info.get('sha256', ''))[:12]}")
    set_widths(ws, {1: 24, 2: README_WIDTH})
