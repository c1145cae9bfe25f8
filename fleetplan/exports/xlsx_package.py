"""Saving a workbook: every sheet gets its page setup, openpyxl writes the package, then
fleetplan finishes it.

Finishing rewrites the ZIP package once, streaming: each formula cell openpyxl wrote gets its
Python value as cached result, and each bulk sheet (``xlsx_rows``) gets its data rows spliced
in after the header row. The result goes to a temporary file that replaces the destination only
when complete.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import math
import os
import posixpath
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from openpyxl import Workbook
from openpyxl.packaging.custom import StringProperty
from openpyxl.utils.cell import get_column_letter

import fleetplan
from fleetplan.exports.atomic import atomic_path
from fleetplan.exports.sanitize import property_text
from fleetplan.exports.xlsx_common import Formulas, fit_header_rows
from fleetplan.exports.xlsx_page_breaks import keep_blocks_together
from fleetplan.exports.xlsx_print import PageOptions, PrintHeader, setup_sheet
from fleetplan.exports.xlsx_rows import BulkSheet

log = logging.getLogger(__name__)

_MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_PACKAGE_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_FORMULA_CELL = re.compile(rb'<c r="([A-Z]+[0-9]+)"([^>]*)><f>([^<]*)</f><v\s*/>')
_DIMENSION = re.compile(rb'<dimension ref="[^"]*"\s*/>')
_SHEET_DATA_END = b"</sheetData>"


@dataclass
class Book:
    """A workbook being built: openpyxl's object plus fleetplan's formula and bulk records, and
    how each sheet prints (``pages``: options by sheet title; ``header``: the printed pages'
    subject and date, by default the workbook's title and today)."""

    wb: Workbook = field(default_factory=Workbook)
    formulas: Formulas = field(default_factory=Formulas)
    bulk: dict[str, BulkSheet] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)
    pages: dict[str, PageOptions] = field(default_factory=dict)
    header: PrintHeader | None = None

    def setup_pages(self) -> None:
        """Page setup for every sheet (``fleetplan.exports.xlsx_print``)."""
        header = self.header or PrintHeader(self.wb.properties.title or "fleetplan")
        for ws in self.wb.worksheets:
            bulk = self.bulk.get(ws.title)
            options = self.pages.get(ws.title)
            scale = setup_sheet(ws, header, options, bulk_rows=len(bulk.frame) if bulk else None,
                                bulk_columns=len(bulk.columns) if bulk else None)
            if bulk is None and not (options and options.one_page):
                keep_blocks_together(ws, scale)

    def formula_cell_count(self) -> int:
        """Formula cells in the saved workbook (bulk sheets counted after saving)."""
        return self.formulas.count() + sum(b.formula_cells for b in self.bulk.values())

    def save(self, path: str | os.PathLike) -> Path:
        """Write the finished workbook to ``path`` atomically."""
        for ws in self.wb.worksheets:  # first: the pages depend on the columns' widths
            fit_header_rows(ws)
        self.setup_pages()
        self.wb.calculation.fullCalcOnLoad = True
        buffer = io.BytesIO()
        self.wb.save(buffer)
        with zipfile.ZipFile(buffer) as source, atomic_path(path) as temporary:
            parts = sheet_parts(source)
            with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED, compresslevel=1,
                                 allowZip64=True) as target:
                for info in source.infolist():
                    self._copy_part(source, target, info, parts)
        log.info("wrote workbook %s (%d formula cells)", path, self.formula_cell_count())
        return Path(path)

    def _copy_part(self, source: zipfile.ZipFile, target: zipfile.ZipFile, info: zipfile.ZipInfo,
                   parts: dict[str, str]) -> None:
        title = parts.get(info.filename)
        data = source.read(info)
        if title is not None and self.formulas.cached.get(title):
            data = cache_values(data, self.formulas.cached[title])
        if title in self.bulk:
            _write_bulk(target, info.filename, data, self.bulk[title])
        else:
            target.writestr(info.filename, data)


def sheet_parts(package: zipfile.ZipFile) -> dict[str, str]:
    """Map each worksheet's part name (``xl/worksheets/sheet1.xml``) to its sheet title."""
    workbook = ElementTree.fromstring(package.read("xl/workbook.xml"))
    rels = ElementTree.fromstring(package.read("xl/_rels/workbook.xml.rels"))
    targets = {rel.get("Id"): rel.get("Target") for rel in rels.iter(f"{_PACKAGE_REL}Relationship")}
    parts = {}
    for sheet in workbook.iter(f"{_MAIN}sheet"):
        target = targets[sheet.get(f"{_REL}id")]
        part = target.lstrip("/") if target.startswith("/") else posixpath.join("xl", target)
        parts[posixpath.normpath(part)] = sheet.get("name")
    return parts


def cache_values(xml: bytes, cached: dict[str, float]) -> bytes:
    """Give each formula cell of a sheet its cached value (``<v/>`` -> ``<v>1.5</v>``)."""

    def fill(match: re.Match) -> bytes:
        value = cached.get(match.group(1).decode())
        if value is None or not math.isfinite(value):
            return match.group(0)
        return _with_value(match, value)

    return _FORMULA_CELL.sub(fill, xml)


def _with_value(match: re.Match, value: float) -> bytes:
    coordinate, attributes, formula = match.groups()
    return b'<c r="%s"%s><f>%s</f><v>%s</v>' % (coordinate, attributes, formula,
                                                repr(float(value)).encode())


def _write_bulk(target: zipfile.ZipFile, name: str, xml: bytes, bulk: BulkSheet) -> None:
    end = xml.index(_SHEET_DATA_END) if _SHEET_DATA_END in xml else None
    if end is None:
        message = f"sheet part {name} has no header row to write data rows under"
        raise RuntimeError(message)
    last_column = get_column_letter(len(bulk.columns))
    dimension = b'<dimension ref="A1:%s%d"/>' % (last_column.encode(), max(bulk.last_row, 1))
    head = _DIMENSION.sub(dimension, xml[:end], count=1)
    with target.open(name, "w", force_zip64=True) as stream:
        stream.write(head)
        for block in bulk.row_blocks():
            stream.write(block)
        stream.write(xml[end:])


def set_properties(wb: Workbook, title: str, description: str, keywords: str,
                   created: dt.datetime | None = None) -> None:
    """Document properties: title, subject, fleetplan version, creation time (UTC)."""
    created = (created or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    created = created.replace(tzinfo=None, microsecond=0)
    props = wb.properties
    props.title = property_text(title)
    props.subject = "GPU fleet planning"
    props.creator = f"fleetplan {fleetplan.__version__}"
    props.lastModifiedBy = f"fleetplan {fleetplan.__version__}"
    props.description = property_text(description, limit=2000)
    props.keywords = property_text(keywords)
    props.version = fleetplan.__version__
    props.created = created
    props.modified = created
    version = StringProperty(name="fleetplan_version", value=fleetplan.__version__)
    wb.custom_doc_props.append(version)
