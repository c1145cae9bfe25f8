"""The Sources and Read me sheets every workbook ends with.

Sources is a table a reader can audit: one row per catalog and source, the catalog rows used
from it, their date and the catalog's SHA-256, then the run's parameters as name/value rows.
Read me says what each sheet is for and how to edit the workbook.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
from openpyxl.styles import Alignment, Font
from openpyxl.worksheet.worksheet import Worksheet

from fleetplan.errors import FleetplanError
from fleetplan.exports.xlsx_common import LABEL_FONT, NOTE_FONT, put, set_widths, title_block, wrap
from fleetplan.exports.xlsx_print import PageOptions
from fleetplan.exports.xlsx_sheets import write_frame
from fleetplan.sweeps.efficiencies import engine_chain

log = logging.getLogger(__name__)

SOURCE_COLUMNS = ["catalog", "key", "source", "as_of"]
README_WIDTH = 100
_KINDS = {"gpu": "gpus", "model": "models", "quant": "quants"}
_SOURCE_WIDTHS = {1: 14, 2: 64, 3: 76, 4: 11, 5: 36}
_TOP = Alignment(vertical="top", wrap_text=True)
_SMALL = Font(size=8, name="Courier New")
_MAX_VALUE_TEXT = 400
#: Share of a column's width its wrapped text fills: row keys break at hyphens and commas.
_FILL = {2: 0.85}


def catalog_rows(catalogs: Any, ids: Mapping[str, Iterable[str]],
                 prices: Iterable[Mapping[str, Any]] | None = None,
                 extra: Sequence[str] = (), engine: str | None = None) -> pd.DataFrame:
    """The catalog rows used (catalog, key, source, as_of); empty if catalogs are unavailable.

    ``ids`` maps gpu/model/quant to the ids an export uses; their efficiency rows are included
    (with ``engine``, only the rows that engine's cases look up), and their price rows: the
    ``prices`` chosen (records with gpu, provider, region, pricing_type, source, as_of) or else
    every price row of those GPUs. ``extra`` names further catalogs (e.g. ``ownership``) whose
    rows of those GPUs were used.
    """
    if catalogs is None or not hasattr(catalogs, "sources"):
        return pd.DataFrame(columns=SOURCE_COLUMNS)
    known = {kind: sorted({str(i) for i in ids.get(kind, ())} & set(map(str, catalogs.table(name).index)))
             for kind, name in _KINDS.items()}
    requests = [*known.items(), ("efficiency", known["gpu"]), *((name, known["gpu"]) for name in extra)]
    if prices is None:
        requests.append(("prices", known["gpu"]))
    frames = [_chosen_prices(prices)] if prices is not None else []
    for kind, values in requests:
        if values:
            frames.append(catalogs.sources(kind, values))
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=SOURCE_COLUMNS)
    rows = pd.concat(frames, ignore_index=True)
    if engine is not None:
        rows = rows[(rows["catalog"] != "efficiency")
                    | rows["key"].str.split("/").str[0].isin(engines_looked_up(catalogs, engine))]
    return rows[SOURCE_COLUMNS].astype(str)


def engines_looked_up(catalogs: Any, engine: str) -> set[str]:
    """The engines whose efficiency rows ``engine``'s cases look up; every engine when these
    catalogs do not know it (a plan saved with other catalogs)."""
    try:
        return engine_chain(catalogs, engine)
    except FleetplanError as error:
        log.info("efficiency rows of every engine listed: %s", error)
        return set(catalogs.efficiency["engine"].astype(str))


def _chosen_prices(prices: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    records = [p for p in prices if p.get("source")]
    keys = ["/".join(str(p.get(k, "")) for k in ("gpu", "provider", "region", "pricing_type")) for p in records]
    return pd.DataFrame({"catalog": "prices", "key": keys, "source": [p["source"] for p in records],
                         "as_of": [p.get("as_of") or "" for p in records]}, columns=SOURCE_COLUMNS)


#: Most characters of row keys in one cell of the Sources table: a longer list goes on to the
#: next row, as a cell taller than a spreadsheet's 409-point row would hide its end in print.
MAX_KEYS_TEXT = 800


def sources_table(used: pd.DataFrame, versions: Mapping[str, Any]) -> pd.DataFrame:
    """One row per (catalog, source, as_of): the rows used from it and the catalog's SHA-256;
    a list of rows longer than :data:`MAX_KEYS_TEXT` characters is continued on further rows."""
    if used.empty:
        return pd.DataFrame(columns=["catalog", "rows_used", "source", "as_of", "sha256"])
    def pieces(keys: pd.Series) -> list[str]:
        return _key_lines(compact_keys(list(dict.fromkeys(keys))))

    grouped = used.groupby(["catalog", "source", "as_of"], sort=False)["key"].agg(pieces)
    grouped = grouped.rename("rows_used").reset_index().explode("rows_used", ignore_index=True)
    sha = {name: str((info or {}).get("sha256", "")) for name, info in versions.items()}
    grouped["sha256"] = grouped["catalog"].map(sha).fillna("")
    return grouped[["catalog", "rows_used", "source", "as_of", "sha256"]]


def compact_keys(keys: list[str]) -> list[str]:
    """Row keys that differ only in their last part written once, that part in braces (as a
    shell expands them), in the order first seen.

    >>> compact_keys(["vllm/h100-sxm/gemm/bf16", "vllm/h100-sxm/gemm/fp8", "h100-sxm",
    ...               "*/l4/gemm/*"])
    ['vllm/h100-sxm/gemm/{bf16,fp8}', 'h100-sxm', '*/l4/gemm/*']
    """
    groups: dict[tuple[str, bool], list[str]] = {}
    for key in keys:
        head, slash, last = key.rpartition("/")
        groups.setdefault((head, True) if slash else (key, False), []).append(last)
    return [head if not slash else f"{head}/{{{','.join(lasts)}}}" if len(lasts) > 1
            else f"{head}/{lasts[0]}" for (head, slash), lasts in groups.items()]


def _key_lines(keys: list[str]) -> list[str]:
    """``keys`` joined by commas, in pieces of at most :data:`MAX_KEYS_TEXT` characters.

    >>> [len(piece) for piece in _key_lines(["a" * 500, "b" * 500, "c"])]
    [500, 503]
    """
    pieces, current = [], ""
    for key in keys:
        joined = f"{current}, {key}" if current else key
        if current and len(joined) > MAX_KEYS_TEXT:
            pieces.append(current)
            joined = key
        current = joined
    return [*pieces, current]


def flat_parameters(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested parameters as ``(path, text)`` rows: ``fleet.gpus[0].id``; empty values left out.

    >>> flat_parameters({"fleet": {"tp": [1, 2], "gpus": [{"id": "l4"}]}, "name": "x", "gap": None})
    [('fleet.tp', '1, 2'), ('fleet.gpus[0].id', 'l4'), ('name', 'x')]
    """
    if isinstance(value, Mapping):
        return [row for key, item in value.items()
                for row in flat_parameters(item, f"{prefix}.{key}" if prefix else str(key))]
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (Mapping, list, tuple)) for v in value):
            return [(prefix, ", ".join(map(str, value)))] if value else []
        return [row for i, item in enumerate(value) for row in flat_parameters(item, f"{prefix}[{i}]")]
    if value is None or value == "":
        return []
    return [(prefix, str(value)[:_MAX_VALUE_TEXT])]


def sources_sheet(ws: Worksheet, record: Mapping[str, Any], used: pd.DataFrame) -> PageOptions:
    """Where every number comes from: the run, the catalog rows used (a table) and the
    parameters (name/value rows). Returns how the sheet prints."""
    row = title_block(ws, "Sources", "Where every number in this workbook comes from: the catalog "
                      "rows used, each with its source, date and the SHA-256 of its catalog "
                      "(a/b/{c,d} stands for the rows a/b/c and a/b/d).")
    for label, key in (("Version", "fleetplan_version"), ("Written", "created"),
                       ("Output", "kind"), ("Price rule", "price_rule")):
        if record.get(key):
            put(ws, row, 1, label, font=LABEL_FONT)
            put(ws, row, 2, str(record[key]))
            row += 1
    versions = record.get("catalog_versions") or {}
    files = sorted({str(f) for info in versions.values() for f in (info or {}).get("overrides") or []})
    if files:
        put(ws, row, 1, "Your files", font=LABEL_FONT)
        put(ws, row, 2, ", ".join(files))
        row += 1
    row += 1
    put(ws, row, 1, "Catalog rows used", font=LABEL_FONT)
    table = sources_table(used, versions)
    if table.empty:
        put(ws, row + 1, 1, "No catalog rows were available when this file was written.", font=NOTE_FONT)
        row += 3
    else:
        after = write_frame(ws, table, row + 1, "CatalogRows")
        for line in range(row + 2, after):
            for column in (3, 2, 5):  # a SHA-256 takes two lines of its small type
                wrap(ws, ws.cell(row=line, column=column),
                     _SOURCE_WIDTHS[column] * _FILL.get(column, 1.0))
            for column in range(1, 6):
                ws.cell(row=line, column=column).alignment = _TOP
            ws.cell(row=line, column=5).font = _SMALL
        row = after + 1
    parameters = flat_parameters(record.get("parameters") or {})
    if parameters:
        put(ws, row, 1, "Parameters", font=LABEL_FONT)
        frame = pd.DataFrame(parameters, columns=["name", "value"])
        # in the wide columns: a name such as scenario.workloads[0].requests_per_s prints whole
        after = write_frame(ws, frame, row + 1, "Parameters", first_column=2)
        for line in range(row + 2, after):
            if len(str(ws.cell(row=line, column=3).value or "")) > _SOURCE_WIDTHS[3]:
                wrap(ws, ws.cell(row=line, column=3), _SOURCE_WIDTHS[3])
                ws.cell(row=line, column=2).alignment = _TOP
    set_widths(ws, _SOURCE_WIDTHS)
    return PageOptions()


def readme_sheet(ws: Worksheet, title: str, intro: str, sheets: Sequence[tuple[str, str]],
                 how_to: Sequence[str], record: Mapping[str, Any]) -> PageOptions:
    """What each sheet is, how to edit, units, and the provenance in one glance; prints on one
    portrait page."""
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
    put(ws, row, 1, "Units", font=LABEL_FONT).alignment = Alignment(vertical="top")
    wrap(ws, put(ws, row, 2, "Headers say what a column holds and its unit in brackets, e.g. Cost "
                 "(USD/month). Money is in US dollars; a month is the hours per month on Assumptions. "
                 "Parquet and CSV files keep the code names (usd_per_month) with the same units."),
         README_WIDTH)
    row += 2
    put(ws, row, 1, "Provenance", font=LABEL_FONT)
    put(ws, row + 1, 1, "fleetplan version")
    put(ws, row + 1, 2, record.get("fleetplan_version", ""))
    put(ws, row + 2, 1, "Written")
    put(ws, row + 2, 2, record.get("created", ""))
    put(ws, row + 3, 1, "Catalogs")
    put(ws, row + 3, 2, "see Sources: every catalog row used, with its source, date and SHA-256")
    set_widths(ws, {1: 22, 2: README_WIDTH})
    return PageOptions(one_page=True, portrait=True)
