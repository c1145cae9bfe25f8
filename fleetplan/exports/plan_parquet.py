"""A FleetPlan as Parquet: one typed file per table, plus a one-row ``summary`` table and the
``chargeback`` table (cost per calendar month, team and cost center, to the cent).

``layout="folder"`` writes ``<path>/<table>.parquet`` (the folder named ``path``, replaced
atomically as a whole); ``layout="files"`` writes ``<stem>.<table>.parquet`` next to ``path``.
Each file carries the plan's provenance: fleetplan version, catalog versions, the scenario and
the solve's scalars as JSON.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from fleetplan.catalogs.jsonable import jsonable
from fleetplan.errors import InvalidValueError
from fleetplan.exports.atomic import atomic_dir, output_path
from fleetplan.exports.parquet import write_table_parquet
from fleetplan.exports.provenance import provenance
from fleetplan.optimizer.chargeback import chargeback_table

LAYOUTS = ("folder", "files")


def plan_tables(plan) -> dict[str, pd.DataFrame]:
    """``summary`` (status, gap, costs, solver), every table that has columns, then
    ``chargeback`` (``fleetplan.optimizer.chargeback.chargeback_table``; month = plan month
    counted from 0)."""
    scalars = {name: jsonable(getattr(plan, name)) for name in
               ("status", "gap", "objective_usd", "usd_per_month", "solver", "solve_seconds")}
    summary = pd.DataFrame([scalars]).astype({"gap": float, "objective_usd": float,
                                              "usd_per_month": float, "solve_seconds": float})
    tables = {"summary": summary}
    tables.update({name: table.reset_index(drop=True) for name, table in plan.tables().items()
                   if len(table.columns)})
    tables["chargeback"] = chargeback_table(plan).astype({"usd": float, "used_usd": float,
                                                          "spare_usd": float, "tokens": float})
    return tables


def plan_record(plan, table: str) -> dict[str, Any]:
    """Provenance of one plan table."""
    assumptions = dict(plan.assumptions)
    versions = assumptions.pop("catalog_versions", None)
    parameters = {"scenario": plan.scenario, "assumptions": assumptions,
                  "messages": list(plan.messages), "status": plan.status}
    record = provenance(f"plan.{table}", {**parameters, "catalog_versions": versions or {}})
    return record


def write_plan_parquet(plan, path: str | os.PathLike, *, layout: str = "folder") -> Path:
    """Write every plan table to Parquet (see module docstring); returns ``path``."""
    if layout not in LAYOUTS:
        message = f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}"
        raise InvalidValueError(message)
    tables = plan_tables(plan)
    path = Path(path)
    if layout == "files":
        _write_files(plan, tables, output_path(path))
        return path
    with atomic_dir(path) as folder:
        for name, table in tables.items():
            write_table_parquet(table, folder / f"{name}.parquet", plan_record(plan, name),
                                registry={})
    return path


def _write_files(plan, tables: dict[str, pd.DataFrame], path: Path) -> None:
    """All tables to a scratch folder first; moved next to ``path`` only once all succeeded."""
    stem = path.name.removesuffix(path.suffix)
    scratch = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        written = [write_table_parquet(table, scratch / f"{stem}.{name}.parquet",
                                       plan_record(plan, name), registry={})
                   for name, table in tables.items()]
        for file in written:
            os.replace(file, path.parent / file.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
