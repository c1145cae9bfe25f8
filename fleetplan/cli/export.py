"""``fleetplan export``: convert a saved plan or sweep into another format.

A plan saved as JSON becomes a live workbook or Parquet tables; a sweep saved as Parquet (one
file or a hive-partitioned folder) streams into CSV, a workbook (``--top-n`` for big grids) or
a re-partitioned Parquet dataset, without loading it whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fleetplan.cli.plan import parse_date
from fleetplan.errors import InvalidValueError
from fleetplan.exports import read_plan_json, write_plan, write_sweep
from fleetplan.exports.parquet import read_sweep_batches, sweep_parameters


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
    start_date: Annotated[str | None, typer.Option(
        help="Plan workbooks: first month, YYYY-MM-DD; default: the first of next month")] = None,
) -> None:
    """Convert a saved plan or sweep into a workbook, Parquet or CSV."""
    if not source.exists():
        message = f"input '{source}' does not exist"
        raise InvalidValueError(message)
    if source.suffix.lower() == ".json":
        write_plan(read_plan_json(source), output, layout=layout, start_date=parse_date(start_date))
    elif source.suffix.lower() == ".parquet" or source.is_dir():
        partitions = [p.strip() for p in partition_by.split(",")] if partition_by else None
        write_sweep(read_sweep_batches(source), output, metadata=sweep_parameters(source), top_n=top_n,
                    tpot_slo_ms=tpot_slo_ms, partition_by=partitions)
    else:
        message = f"input '{source}' must be a plan .json or a sweep .parquet file or folder"
        raise InvalidValueError(message)
    typer.echo(f"wrote {output}", err=True)


def register(app: typer.Typer) -> None:
    """Add ``fleetplan export`` to the CLI."""
    app.command("export")(export_command)
