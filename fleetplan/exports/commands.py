"""``fleetplan export``: convert a saved plan or sweep into another format.

A plan saved as JSON becomes a live workbook or Parquet tables; a sweep saved as Parquet (one
file or a hive-partitioned folder) streams into CSV, a workbook (``--top-n`` for big grids) or
a re-partitioned Parquet dataset, without loading it whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from fleetplan.errors import InvalidValueError
from fleetplan.sweeps.columns import SWEEP_COLUMNS

#: Rows read from a Parquet sweep at a time.
BATCH_ROWS = 1_000_000


def _sweep_batches(source: Path) -> Iterator[pd.DataFrame]:
    import pyarrow.dataset as ds

    dataset = ds.dataset(source, format="parquet", partitioning="hive")
    for batch in dataset.to_batches(batch_size=BATCH_ROWS):
        frame = batch.to_pandas()
        known = [c for c in SWEEP_COLUMNS if c in frame.columns]  # partitions come back last
        yield frame[known + [c for c in frame.columns if c not in SWEEP_COLUMNS]]


def _parameters(source: Path) -> dict:
    from fleetplan.exports.parquet import read_provenance

    file = source if source.is_file() else next(iter(sorted(source.rglob("*.parquet"))), None)
    if file is None:
        return {}
    record = read_provenance(file)
    parameters = dict(record.get("parameters") or {})
    parameters["converted_from"] = str(source)
    if record.get("catalog_versions"):
        parameters["catalog_versions"] = record["catalog_versions"]
    return parameters


def export_command(
    source: Annotated[Path, typer.Argument(help="A plan (.json) or a sweep (.parquet file or "
                                                "folder)")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Write .xlsx, .parquet, .csv "
                                                               "(sweeps) or .json (plans)")],
    top_n: Annotated[int | None, typer.Option(help="Sweep workbooks: keep the N cheapest rows "
                                                   "by $/1M output tokens plus a summary")] = None,
    tpot_slo_ms: Annotated[float | None, typer.Option(help="Sweep workbooks: TPOT SLO line on "
                                                           "the frontier chart [ms]")] = None,
    partition_by: Annotated[str | None, typer.Option(help="Sweep Parquet: hive partition "
                                                          "columns, e.g. gpu,model")] = None,
    layout: Annotated[str, typer.Option(help="Plan Parquet: 'folder' or 'files'")] = "folder",
) -> None:
    """Convert a saved plan or sweep into a workbook, Parquet or CSV."""
    from fleetplan.exports import write_plan, write_sweep

    if not source.exists():
        message = f"input '{source}' does not exist"
        raise InvalidValueError(message)
    if source.suffix.lower() == ".json":
        from fleetplan.optimizer.plan import FleetPlan

        write_plan(FleetPlan.from_json(source), output, layout=layout)
    elif source.suffix.lower() == ".parquet" or source.is_dir():
        partitions = [p.strip() for p in partition_by.split(",")] if partition_by else None
        write_sweep(_sweep_batches(source), output, metadata=_parameters(source), top_n=top_n,
                    tpot_slo_ms=tpot_slo_ms, partition_by=partitions)
    else:
        message = f"input '{source}' must be a plan .json or a sweep .parquet file or folder"
        raise InvalidValueError(message)
    typer.echo(f"wrote {output}", err=True)


def register(app: typer.Typer) -> None:
    """Add ``fleetplan export`` to the CLI."""
    app.command("export")(export_command)
