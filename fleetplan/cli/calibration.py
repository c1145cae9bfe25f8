"""``fleetplan validate`` and ``fleetplan calibrate``: the model against measurements."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from fleetplan.cli.options import CatalogOption, catalogs_from
from fleetplan.errors import InvalidValueError
from fleetplan.exports.atomic import atomic_path
from fleetplan.exports.validation_workbook import write_validation
from fleetplan.sweeps.fitting import factors_for_rows, fit_profiles, with_prediction
from fleetplan.sweeps.measurements import predictable
from fleetplan.sweeps.model_validation import compare, read_measurements, summaries

Paths = Annotated[list[Path], typer.Argument(help="Measurement CSV files (calibration format) or benchmark result JSON")]
GpuOption = Annotated[str | None, typer.Option(help="GPU id of JSON results (they do not record it)")]
TpOption = Annotated[int | None, typer.Option(help="Tensor-parallel degree of JSON results")]
QuantOption = Annotated[str, typer.Option(help="Weight quantization of JSON results")]
ModelOption = Annotated[str | None, typer.Option(help="Model id of JSON results; default: from its model_id")]


def _load(paths, gpu, tp, quant, model, catalog):
    for path in paths:
        if not path.is_file():
            message = f"measurements file {path} does not exist"
            raise InvalidValueError(message)
    return read_measurements(paths, gpu=gpu, tp=tp, quant=quant, model=model), catalogs_from(catalog)


def _echo_summary(compared: pd.DataFrame, title: str) -> None:
    typer.echo(title)
    for name, table in summaries(compared).items():
        typer.echo(f"\n{name} (absolute percentage error, %):")
        typer.echo(table.round(1).to_string())


def validate_command(paths: Paths, gpu: GpuOption = None, tp: TpOption = None, quant: QuantOption = "bf16",
                     model: ModelOption = None, catalog: CatalogOption = None,
                     output: Annotated[Path | None, typer.Option("-o", "--output", help="Per-row report .csv or .xlsx")] = None) -> None:
    """Predicted vs measured for every row the model can predict, with median and p90 errors."""
    measurements, catalogs = _load(paths, gpu, tp, quant, model, catalog)
    compared = compare(measurements, catalogs)
    if compared.empty:
        message = "no row the model can predict (offline output_tok_s, or serving metrics at a known rate)"
        raise InvalidValueError(message)
    _echo_summary(compared, f"{len(compared)} predictable rows of {len(measurements)}")
    if output is not None:
        write_validation(compared, output, catalogs=catalogs, files=[str(p) for p in paths])
        typer.echo(f"wrote {output}", err=True)


def calibrate_command(paths: Paths, output: Annotated[Path, typer.Option("-o", "--output", help="Fitted factors CSV")],
                      gpu: GpuOption = None, tp: TpOption = None, quant: QuantOption = "bf16", model: ModelOption = None,
                      catalog: CatalogOption = None) -> None:
    """Fit MBU, MFUs, overheads and TP scaling per GPU and precision; print errors before and after.

    With measurements from two or more serving engines each engine also gets its own profile
    (rows keyed by its engine id, used with --engine). The output has the efficiency catalog's
    columns: use it with ``--catalog factors.csv``.
    """
    measurements, catalogs = _load(paths, gpu, tp, quant, model, catalog)
    rows = predictable(measurements)
    if rows.empty:
        message = "no row to fit: give offline output_tok_s rows or serving rows at a known rate"
        raise InvalidValueError(message)
    _echo_summary(with_prediction(rows, catalogs, None), "before (current factors):")
    groups = fit_profiles(rows, catalogs)
    per_row = factors_for_rows(rows, groups, catalogs)
    _echo_summary(with_prediction(rows, catalogs, per_row), "\nafter (fitted factors):")
    table = groups.assign(source=f"fleetplan calibrate {' '.join(p.name for p in paths)}",
                          as_of=date.today().isoformat(), notes="fitted with priors MBU 0.7, MFU 0.5")
    with atomic_path(output) as temporary:
        table.round(4).to_csv(temporary, index=False)
    typer.echo(f"wrote {output} ({len(table)} factor rows)", err=True)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate_command)
    app.command("calibrate")(calibrate_command)
