"""``fleetplan validate`` and ``fleetplan calibrate``: the model against measurements."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from fleetplan.cli.options import CatalogOption, catalogs_from
from fleetplan.errors import InvalidValueError, check_range
from fleetplan.exports.atomic import atomic_path
from fleetplan.exports.csv import write_csv
from fleetplan.exports.validation_workbook import write_validation
from fleetplan.sweeps.fitted_catalog import efficiency_rows
from fleetplan.sweeps.fitting import fit, priors_only
from fleetplan.sweeps.measurements import ape_summary, predictable, unknown_names
from fleetplan.sweeps.model_validation import (
    IN_SAMPLE,
    compare,
    error_tables,
    holdouts,
    read_measurements,
    with_efficiency,
)
from fleetplan.sweeps.predictions import with_prediction

Paths = Annotated[list[Path], typer.Argument(help="Measurement CSV files (calibration format) or benchmark result JSON")]
GpuOption = Annotated[str | None, typer.Option(help="GPU id of JSON results (they do not record it)")]
TpOption = Annotated[int | None, typer.Option(help="Tensor-parallel degree of JSON results")]
QuantOption = Annotated[str, typer.Option(help="Weight quantization of JSON results")]
ModelOption = Annotated[str | None, typer.Option(help="Model id of JSON results; default: from its model_id")]
SHOWN = ("overall", "gpu", "model", "quant", "engine_id", "regime")


def _load(paths, gpu, tp, quant, model, catalog):
    for path in paths:
        if not path.is_file():
            message = f"measurements file {path} does not exist"
            raise InvalidValueError(message)
    catalogs = catalogs_from(catalog)
    measurements = read_measurements(paths, gpu=gpu, tp=tp, quant=quant, model=model, catalogs=catalogs)
    for note in unknown_names(measurements, catalogs):
        typer.echo(f"note: {note}", err=True)
    return measurements, catalogs


def _echo_tables(tables: pd.DataFrame, title: str) -> None:
    typer.echo(title)
    for dimension in SHOWN:
        part = tables[tables["dimension"] == dimension].drop(columns="dimension")
        if not part.empty:
            typer.echo(f"\nby {dimension.removesuffix('_id')} (absolute and signed percentage error, %):")
            typer.echo(part.set_index(["validation", "key", "metric"]).round(1).to_string())


def validate_command(paths: Paths, gpu: GpuOption = None, tp: TpOption = None, quant: QuantOption = "bf16",
                     model: ModelOption = None, catalog: CatalogOption = None,
                     output: Annotated[Path | None, typer.Option("-o", "--output", help="Per-row report .csv or .xlsx")] = None,
                     tables: Annotated[Path | None, typer.Option(help="Write the error tables to this CSV")] = None,
                     held_out: Annotated[bool, typer.Option("--holdout/--no-holdout", help=(
                         "Also predict each GPU and each model from a fit without it (refits: minutes on the "
                         "shipped data)"))] = True,
                     workers: Annotated[int, typer.Option(help=(
                         "Processes the held-out refits share (the rows are the same whatever "
                         "the number)"))] = 2) -> None:
    """Predicted vs measured: error by GPU, model, precision, engine and regime, in sample and held out."""
    check_range("--workers", workers, 1, 64, integer=True)
    measurements, catalogs = _load(paths, gpu, tp, quant, model, catalog)
    rows = predictable(measurements)
    if rows.empty:
        message = "no row the model can predict (offline or static throughput, latency, or serving metrics at a known rate)"
        raise InvalidValueError(message)
    compared = compare(measurements, catalogs).assign(validation=IN_SAMPLE)
    parts = [compared]
    if held_out:
        parts += holdouts(rows, catalogs, [by for by in ("gpu", "model") if rows[by].nunique() > 1],
                          workers)
    everything = pd.concat(parts, ignore_index=True)
    report = error_tables(everything)
    _echo_tables(report, f"{len(compared)} predictable rows of {len(measurements)}")
    if tables is not None:
        write_csv(report, tables)
        typer.echo(f"wrote {tables}", err=True)
    if output is not None:
        write_validation(everything, output, catalogs=catalogs, files=[str(p) for p in paths])
        typer.echo(f"wrote {output}", err=True)


def calibrate_command(paths: Paths, output: Annotated[Path, typer.Option("-o", "--output", help="Fitted efficiency rows CSV")],
                      gpu: GpuOption = None, tp: TpOption = None, quant: QuantOption = "bf16", model: ModelOption = None,
                      catalog: CatalogOption = None) -> None:
    """Fit the per-operator efficiencies to measurements from the documented priors; print errors
    before and after.

    The output has the efficiency catalog's columns, rows per (engine, GPU, operator, precision)
    for the GPUs measured (and their siblings of the same architecture): use it with
    ``--catalog factors.csv`` and ``--engine``.
    """
    measurements, catalogs = _load(paths, gpu, tp, quant, model, catalog)
    rows = predictable(measurements)
    if rows.empty:
        message = "no row to fit: give offline or static throughput rows, latency rows, or serving rows at a known rate"
        raise InvalidValueError(message)
    typer.echo("before (current catalogs):\n" + ape_summary(with_prediction(rows, catalogs), ["metric"]).round(1).to_string())
    priors = priors_only(catalogs)
    table = efficiency_rows(fit(rows, priors), priors, rows, f"fleetplan calibrate {' '.join(p.name for p in paths)}",
                            date.today().isoformat())
    after = with_prediction(rows, with_efficiency(catalogs, table))
    typer.echo("\nafter (fitted rows):\n" + ape_summary(after, ["metric"]).round(1).to_string())
    with atomic_path(output) as temporary:
        table.to_csv(temporary, index=False)
    typer.echo(f"wrote {output} ({len(table)} efficiency rows)", err=True)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate_command)
    app.command("calibrate")(calibrate_command)
