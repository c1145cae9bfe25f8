"""Load the shipped catalogs, merge user override files into them, and validate the result.

Steps, each collecting every problem before raising one ``CatalogErrors``:

1. read each file (CSV, or XLSX with a sheet per catalog) as text cells and check its header,
   cell types, ranges and duplicate keys;
2. merge override rows into the shipped rows by key: a known key takes the override's non-empty
   cells and keeps the rest, a new key is appended; then fill schema defaults and check that
   required cells are set;
3. convert to the schema dtypes and cross-check the catalogs against each other.

The shipped catalogs are read once per process (``functools.lru_cache``); every call returns
its own copies, so a caller that edits a table cannot change what the next caller sees.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fleetplan.catalogs import checks
from fleetplan.catalogs.checks import ORIGIN_COLUMNS, ORIGIN_FILE, ORIGIN_ROW, raise_if_any
from fleetplan.catalogs.input_files import csv_frame, read_text
from fleetplan.catalogs.prices import OVERRIDE
from fleetplan.catalogs.registry import Catalogs
from fleetplan.catalogs.schema import (
    CATALOG_NAMES,
    INDEXED_CATALOGS,
    KEYS,
    catalog_name,
    load_schema,
    typed_table,
)
from fleetplan.catalogs.schema import (
    data_dir as package_data_dir,
)
from fleetplan.catalogs.workbook_files import EXCEL_SUFFIXES, read_workbook, refuse_blank_header
from fleetplan.errors import CatalogError, UnknownNameError

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike
Overrides = PathLike | Iterable[PathLike] | Mapping[str, PathLike | Iterable[PathLike]]

# Folder read when ``data_dir`` is not given; None means the catalogs shipped in the package.
DEFAULT_DATA_DIR: PathLike | None = None
# Text marker carried through the merge: "yes" on rows whose last writer was a user's file.
_FROM_USER = "_from_user"


@dataclass(frozen=True)
class RawTable:
    """One file's (or one sheet's) rows as text cells with provenance columns."""

    label: str
    path: str
    frame: pd.DataFrame
    catalog: str | None = None
    complete: bool = False  # shipped files must have every schema column


# --- public entry points


def load_catalogs(overrides: Overrides = (), *, data_dir: PathLike | None = None) -> Catalogs:
    """The shipped catalogs (or those in ``data_dir``) merged with user ``overrides``.

    ``overrides`` is a path, a sequence of paths (CSV or XLSX; the catalog is told by the file's
    columns or by sheet names) or a mapping ``{"prices": [paths], ...}``. Later files win.
    """
    if _is_empty(overrides):
        return _shipped_catalogs(_dir_key(data_dir)).copy()
    return _load(overrides, data_dir)[0]


def check_files(paths: Overrides, *,
                data_dir: PathLike | None = None) -> list[tuple[str, str, int]]:
    """Validate user files against the schemas and the shipped catalogs.

    Returns ``(file label, catalog, rows)`` per file or sheet; raises ``CatalogErrors`` listing
    every problem found.
    """
    _, tables = _load(paths, data_dir)
    return [(t.label, t.catalog, len(t.frame)) for t in tables]


def clear_cache() -> None:
    """Forget the cached shipped catalogs (after their files changed on disk)."""
    _shipped_tables.cache_clear()
    _shipped_catalogs.cache_clear()


# --- shipped data


def _dir_key(folder: PathLike | None) -> str | None:
    folder = DEFAULT_DATA_DIR if folder is None else folder
    return None if folder is None else str(Path(folder).resolve())


@functools.lru_cache(maxsize=4)
def _shipped_tables(folder: str | None) -> tuple[RawTable, ...]:
    return tuple(_shipped_table(name, folder) for name in CATALOG_NAMES)


def _shipped_table(name: str, folder: str | None) -> RawTable:
    label = f"{name}.csv"
    source = package_data_dir().joinpath(label) if folder is None else Path(folder) / label
    if not source.is_file():
        where = "fleetplan/catalogs/data" if folder is None else folder
        message = f"{label}: catalog file is missing from {where}"
        raise CatalogError(message)
    frame = _clean(_read_csv_text(source.read_text(encoding="utf-8-sig"), label), label)
    return RawTable(label, str(source), load_schema(name).with_key_defaults(frame), catalog=name,
                    complete=True)


@functools.lru_cache(maxsize=4)
def _shipped_catalogs(folder: str | None) -> Catalogs:
    return _build(list(_shipped_tables(folder)))


def _load(overrides: Overrides, folder: PathLike | None) -> tuple[Catalogs, list[RawTable]]:
    extra = _override_tables(overrides)
    return _build([*_shipped_tables(_dir_key(folder)), *extra]), extra


# --- reading files


def _read_csv_text(text: str, label: str) -> pd.DataFrame:
    frame = csv_frame(text, label, CatalogError, dtype=str, keep_default_na=False,
                      skip_blank_lines=False)
    refuse_blank_header(label, frame)
    return frame


def _read_sheets(path: Path) -> dict[str | None, pd.DataFrame]:
    """``{None: frame}`` for a CSV file, ``{sheet name: frame}`` for a workbook."""
    if not path.exists():
        message = f"{path}: no such catalog file"
        raise CatalogError(message)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return {None: _read_csv_text(read_text(path, "catalog file", error=CatalogError), str(path))}
    if path.is_dir():
        message = f"{path}: is a folder, not a catalog file"
        raise CatalogError(message)
    if suffix in EXCEL_SUFFIXES:
        return read_workbook(path)
    message = f"{path}: catalog files must be .csv or .xlsx, got '{path.suffix}'"
    raise CatalogError(message)


def _clean(frame: pd.DataFrame, label: str) -> pd.DataFrame:
    """Trim cells and headers, drop blank rows and unnamed blank columns, add provenance."""
    frame = frame.rename(columns=lambda c: str(c).strip().lower()).astype(str)
    frame = frame.apply(lambda column: column.str.strip())
    frame = frame.loc[:, ~(_unnamed(frame.columns) & (frame == "").all().to_numpy())]
    frame[ORIGIN_FILE] = label
    frame[ORIGIN_ROW] = range(2, len(frame) + 2)  # the header is spreadsheet row 1
    cells = frame.drop(columns=list(ORIGIN_COLUMNS))
    return frame.loc[(cells != "").any(axis=1)].reset_index(drop=True)


def _unnamed(columns: pd.Index) -> np.ndarray:
    return np.array([c == "" or c.startswith("unnamed:") for c in columns], dtype=bool)


# --- overrides: which catalog each file extends


def _is_empty(overrides: Overrides) -> bool:
    if isinstance(overrides, (str, os.PathLike)):
        return False
    return len(overrides) == 0 if isinstance(overrides, (Sequence, Mapping)) else False


def _as_paths(value: PathLike | Iterable[PathLike]) -> list[PathLike]:
    return [value] if isinstance(value, (str, os.PathLike)) else list(value)


def _override_tables(overrides: Overrides) -> list[RawTable]:
    if isinstance(overrides, Mapping):
        pairs = [(catalog_name(name), path)
                 for name, paths in overrides.items() for path in _as_paths(paths)]
    else:
        pairs = [(None, path) for path in _as_paths(overrides)]
    return [table for catalog, path in pairs for table in _tables_of(Path(path), catalog)]


def _tables_of(path: Path, catalog: str | None) -> list[RawTable]:
    sheets = _read_sheets(path)
    chosen = _choose_sheets(sheets, catalog, path)
    tables = []
    for sheet, name in chosen:
        label = str(path) if sheet is None else f"{path} sheet {sheet}"
        frame = _clean(sheets[sheet], label)
        name = name or _detect(frame.columns, label)
        tables.append(RawTable(label, str(path), load_schema(name).with_key_defaults(frame), name))
    return tables


def _choose_sheets(sheets: dict, catalog: str | None, path: Path) -> list[tuple]:
    """``(sheet, catalog or None)`` pairs: sheets named after catalogs win over detection."""
    named = {s: _sheet_catalog(s) for s in sheets if _sheet_catalog(s)}
    if catalog is not None:
        matching = [s for s, c in named.items() if c == catalog]
        return [(matching[0] if matching else _only_sheet(sheets, catalog, path), catalog)]
    if named:
        ignored = [s for s in sheets if s not in named]
        if ignored:
            logger.info("%s: ignoring sheets not named after a catalog: %s", path, ignored)
        return list(named.items())
    return [(sheet, None) for sheet in sheets]


def _sheet_catalog(sheet: str | None) -> str | None:
    if sheet is None:
        return None
    try:
        return catalog_name(sheet)
    except UnknownNameError:
        return None


def _only_sheet(sheets: dict, catalog: str, path: Path) -> str | None:
    if len(sheets) == 1:
        return next(iter(sheets))
    message = f"{path}: no sheet named '{catalog}' (sheets: {', '.join(map(str, sheets))})"
    raise CatalogError(message)


def _detect(columns: Iterable[str], label: str) -> str:
    """The catalog whose key columns are all present and whose schema shares most columns."""
    present = set(columns) - set(ORIGIN_COLUMNS)
    scores = {name: len(present & set(load_schema(name).names))
              for name in CATALOG_NAMES if set(load_schema(name).required_key) <= present}
    if not scores:
        keys = "; ".join(f"{n}: {', '.join(k)}" for n, k in KEYS.items())
        message = f"{label} row 1: no catalog has these key columns (keys are {keys})"
        raise CatalogError(message)
    best = max(scores.values())
    tied = [name for name, score in scores.items() if score == best]
    if len(tied) > 1:
        message = (f"{label}: its columns fit the {' and '.join(tied)} catalogs equally; name "
                   f"the catalog, e.g. overrides={{'{tied[0]}': [path]}}, or a sheet after it")
        raise CatalogError(message)
    return tied[0]


# --- validation and merging


def _build(tables: list[RawTable]) -> Catalogs:
    raise_if_any([p for t in tables for p in _file_problems(t)])
    merged = {name: _merge_all([t for t in tables if t.catalog == name], name)
              for name in CATALOG_NAMES}
    raise_if_any([p for name, m in merged.items() for p in checks.required_problems(
        m, load_schema(name))])
    typed = {name: _typed(frame, name) for name, frame in merged.items()}
    raise_if_any(_cross_problems(typed))
    override_files = {name: tuple(dict.fromkeys(t.path for t in tables
                                                if t.catalog == name and not t.complete))
                      for name in CATALOG_NAMES}
    return Catalogs(**{name: _finished(frame) for name, frame in typed.items()},
                    override_files=override_files)


def _file_problems(table: RawTable) -> list[str]:
    schema = load_schema(table.catalog)
    needed = schema.names if table.complete else schema.override_minimum
    columns = [c for c in table.frame.columns if c not in ORIGIN_COLUMNS]
    header = checks.header_problems(columns, schema, table.label, needed)
    if header:
        return header
    return (checks.cell_problems(table.frame, schema)
            + checks.duplicate_problems(table.frame, schema))


def _merge_all(tables: list[RawTable], name: str) -> pd.DataFrame:
    schema = load_schema(name)
    merged = pd.DataFrame({c: pd.Series(dtype=object)
                           for c in (*schema.names, _FROM_USER, *ORIGIN_COLUMNS)})
    for table in tables:
        frame = table.frame.assign(**{_FROM_USER: "" if table.complete else "yes"})
        merged = merge_rows(merged, frame, list(schema.key), table.label)
    for column in schema.columns:
        if column.default:
            merged[column.name] = merged[column.name].mask(merged[column.name] == "",
                                                           column.default)
    return merged


def merge_rows(base: pd.DataFrame, extra: pd.DataFrame, key: list[str],
               label: str = "") -> pd.DataFrame:
    """Rows of ``extra`` merged into ``base`` by ``key`` (text tables with provenance).

    A known key takes ``extra``'s non-empty cells and keeps its other cells; a new key is
    appended with empty cells for the columns ``extra`` lacks.
    """
    base_by_key, extra_by_key = base.set_index(key), extra.set_index(key)
    known = extra_by_key.index.isin(base_by_key.index)
    updates = extra_by_key[known]
    if len(updates):
        cells = [c for c in updates.columns if c not in ORIGIN_COLUMNS]
        current = base_by_key.loc[updates.index, cells]
        base_by_key.loc[updates.index, cells] = updates[cells].where(updates[cells] != "", current)
        base_by_key.loc[updates.index, list(ORIGIN_COLUMNS)] = updates[list(ORIGIN_COLUMNS)]
    added = extra_by_key[~known].reindex(columns=base_by_key.columns, fill_value="")
    if label and len(base):
        logger.info("%s: %d rows replaced, %d added", label, int(known.sum()), len(added))
    if base_by_key.empty:  # concat with an empty frame would guess dtypes
        return added.reset_index()
    return pd.concat([base_by_key, added]).reset_index()


def _typed(merged: pd.DataFrame, name: str) -> pd.DataFrame:
    typed = typed_table(merged, load_schema(name))
    if name == "prices":  # the price rule lets the user's own rows win
        typed[OVERRIDE] = (merged[_FROM_USER] == "yes").to_numpy()
    typed[ORIGIN_FILE] = merged[ORIGIN_FILE].astype(str)
    typed[ORIGIN_ROW] = merged[ORIGIN_ROW].astype("int64")
    return typed.set_index("id") if name in INDEXED_CATALOGS else typed


def _cross_problems(typed: dict[str, pd.DataFrame]) -> list[str]:
    return (checks.model_problems(typed["models"])
            + checks.quant_problems(typed["quants"])
            + checks.price_problems(typed["prices"], typed["gpus"])
            + checks.efficiency_problems(typed["efficiency"], typed["gpus"], typed["engines"])
            + checks.ownership_problems(typed["ownership"], typed["gpus"]))


def _finished(typed: pd.DataFrame) -> pd.DataFrame:
    return typed.drop(columns=list(ORIGIN_COLUMNS))


__all__ = ["RawTable", "check_files", "clear_cache", "load_catalogs", "merge_rows"]
