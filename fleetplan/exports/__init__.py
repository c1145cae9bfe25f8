"""Exports: live Excel workbooks, typed Parquet, injection-safe CSV and JSON, all written
atomically through one writer (``fleetplan.exports.atomic``).

Entry points pick the format from the file suffix:

- ``write_sweep(df_or_chunks, path)``: ``.parquet`` (streamed or hive-partitioned), ``.xlsx``,
  ``.csv``; ``sweep_dataset(grid, folder)`` writes one through Dask;
- ``write_plan(plan, path)``: ``.xlsx``, ``.parquet``, ``.json``; ``write_plan_csv`` a folder of
  CSV tables; ``read_plan_json`` reads a saved plan back;
- ``write_compare(table, path, params)``: a rent-or-buy comparison;
- ``write_grid(results, path, axes=...)``: a what-if grid; ``run_grid`` solves one with a
  resumable cache of JSON rows;
- ``write_validation(compared, path)``: predicted vs measured.
"""

from __future__ import annotations

from fleetplan.exports.plan_json import read_plan_json, write_plan_csv, write_plan_json
from fleetplan.exports.sweep_dataset import sweep_dataset
from fleetplan.exports.validation_workbook import write_validation
from fleetplan.exports.whatif_cache import run_grid
from fleetplan.exports.whatif_outputs import write_grid
from fleetplan.exports.writers import (
                                       COMPARE_SUFFIXES,
                                       PLAN_SUFFIXES,
                                       SWEEP_SUFFIXES,
                                       write_compare,
                                       write_plan,
                                       write_sweep,
)

__all__ = ["COMPARE_SUFFIXES", "PLAN_SUFFIXES", "SWEEP_SUFFIXES", "read_plan_json", "run_grid", "sweep_dataset",
           "write_compare", "write_grid", "write_plan", "write_plan_csv", "write_plan_json", "write_sweep",
           "write_validation"]
