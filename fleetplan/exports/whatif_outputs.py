"""What-if grid outputs by suffix: the workbook (``fleetplan.exports.whatif_workbook``), the same
tables as a folder of Parquet files, or the scenarios as CSV."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from fleetplan.errors import InvalidValueError
from fleetplan.exports.atomic import atomic_dir
from fleetplan.exports.csv import write_csv
from fleetplan.exports.parquet import write_table_parquet
from fleetplan.exports.provenance import provenance
from fleetplan.exports.whatif_workbook import inputs_first, pivots, write_grid_xlsx


def write_grid_parquet(results: pd.DataFrame, folder: Path, *, axes: list[str],
                       base_fleet: pd.DataFrame | None, metadata: dict, catalogs: Any = None,
                       prices_used: list | None = None,
                       base_values: Mapping[str, float] | None = None) -> Path:
    record = provenance("whatif", {**metadata, "prices_used": prices_used or []}, catalogs=catalogs)
    by_axis = pivots(results, axes, base_values)
    tables = {"scenarios": results,
              **{f"by_{re.sub(r'[^A-Za-z0-9_.-]', '_', a)}": t for a, t in by_axis.items()}}
    if base_fleet is not None:
        tables["base_fleet"] = base_fleet
    with atomic_dir(folder) as temporary:
        for name, table in tables.items():
            write_table_parquet(table.reset_index(drop=True), temporary / f"{name}.parquet", record,
                                registry={})
    return folder


def write_grid(results: pd.DataFrame, path: str | Path, *, axes: list[str], base_fleet=None,
               metadata=None, base_usd_per_month: float | None = None, catalogs: Any = None,
               prices_used: list | None = None, base_values: Mapping[str, float] | None = None,
               engine: str | None = None, ids: Mapping[str, list[str]] | None = None) -> Path:
    """Write the grid's tables by suffix: ``.xlsx``, ``.parquet`` (a folder) or ``.csv``
    (scenarios).

    ``base_usd_per_month`` (the base scenario's cost) lets the workbook draw a tornado chart of a
    grid that varies one input at a time; ``catalogs`` and ``prices_used`` (the base plan's price
    rows) fill its Sources; ``engine`` (the engine of every case, None when the grid varies it)
    limits Sources to its efficiency rows, and ``ids`` (the workloads' model and quant ids) add
    their catalog rows there. ``base_values`` (the base scenario's value on each
    axis that has one) count the grid's base case on its By tables.
    """
    path, metadata = Path(path), dict(metadata or {})
    results, suffix = inputs_first(results, axes), path.suffix.lower()
    common = {"axes": axes, "base_fleet": base_fleet, "metadata": metadata, "catalogs": catalogs,
              "prices_used": prices_used, "base_values": base_values}
    if suffix == ".xlsx":
        return write_grid_xlsx(results, path, base_usd_per_month=base_usd_per_month, engine=engine,
                               ids=ids, **common)
    if suffix == ".parquet":
        return write_grid_parquet(results, path, **common)
    if suffix == ".csv":
        return write_csv(results, path)
    message = f"what-if output must be .xlsx, .parquet or .csv, got '{path.name}'"
    raise InvalidValueError(message)
