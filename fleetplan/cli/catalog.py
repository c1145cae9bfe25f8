"""``fleetplan catalog show|check``: browse the catalogs and validate user catalog files."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from fleetplan.catalogs import CatalogErrors, check_files, load_catalogs
from fleetplan.catalogs.schema import INDEXED_CATALOGS, catalog_name
from fleetplan.cli.options import CatalogOption
from fleetplan.errors import CatalogError, did_you_mean

FORMATS = ("table", "csv", "json")
MAX_LISTED_ERRORS = 100

catalog_app = typer.Typer(
    help="Browse the GPU, model, quantization, price, efficiency and ownership catalogs; "
         "check your own.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``catalog`` command group to the ``fleetplan`` app."""
    app.add_typer(catalog_app, name="catalog")


@catalog_app.command("show")
def show(
    name: Annotated[str, typer.Argument(
        help="gpus, models, quants, prices, efficiency or ownership")],
    catalog: CatalogOption = None,
    columns: Annotated[str | None, typer.Option(help="Comma-separated columns to show.")] = None,
    output_format: Annotated[str | None, typer.Option(
        "--format", help="table, csv or json (default: table on a terminal, csv otherwise).",
    )] = None,
) -> None:
    """Print one catalog; quants get a native_gpus column (GPUs with its compute precision)."""
    output_format = _format(output_format)
    frame = _select(catalog_frame(name, catalog or ()), columns)
    if output_format == "table":
        _print_rich(frame, catalog_name(name))
    elif output_format == "json":
        typer.echo(frame.to_json(orient="records", indent=2))
    else:
        typer.echo(frame.to_csv(index=False, lineterminator="\n"), nl=False)


@catalog_app.command("check")
def check(
    paths: Annotated[list[Path], typer.Argument(help="CSV or XLSX files with catalog rows.")],
) -> None:
    """Validate files against the schemas and the shipped catalogs; exit 2 on any problem."""
    try:
        results = check_files(paths)
    except CatalogErrors as errors:
        _echo_errors(errors.messages)
        files = ", ".join(map(str, paths))
        message = f"{len(errors.messages)} problem(s) in {files}"
        raise CatalogError(message) from None
    for label, catalog, rows in results:
        typer.echo(f"ok: {rows} rows in {catalog} ({label})")


def catalog_frame(name: str, overrides: list[Path] | tuple = ()) -> pd.DataFrame:
    """The catalog ``name`` as a flat table (``id`` as first column), quants with native GPUs."""
    canonical = catalog_name(name)
    catalogs = load_catalogs(overrides=list(overrides))
    frame = catalogs.table(canonical)
    if canonical == "quants":
        frame = frame.assign(native_gpus=catalogs.native_gpu_lists())
    return frame.reset_index() if canonical in INDEXED_CATALOGS else frame


def _format(output_format: str | None) -> str:
    if output_format is None:
        return "table" if sys.stdout.isatty() else "csv"
    wanted = output_format.strip().lower()
    if wanted not in FORMATS:
        raise did_you_mean(output_format, FORMATS, kind="format")
    return wanted


def _select(frame: pd.DataFrame, columns: str | None) -> pd.DataFrame:
    if not columns:
        return frame
    wanted = [c.strip().lower() for c in columns.split(",") if c.strip()]
    for column in wanted:
        if column not in frame.columns:
            raise did_you_mean(column, frame.columns, kind="column")
    return frame[wanted]


def _echo_errors(messages: tuple[str, ...]) -> None:
    for message in messages[:MAX_LISTED_ERRORS]:
        typer.echo(f"error: {message}", err=True)
    if len(messages) > MAX_LISTED_ERRORS:
        typer.echo(f"error: ... and {len(messages) - MAX_LISTED_ERRORS} more", err=True)


def _print_rich(frame: pd.DataFrame, title: str) -> None:
    table = Table(title=title, header_style="bold")
    for column in frame.columns:
        numeric = pd.api.types.is_numeric_dtype(frame[column])
        table.add_column(str(column), justify="right" if numeric else "left")
    for row in frame.astype(object).where(frame.notna(), "").to_numpy():
        table.add_row(*(_cell(value) for value in row))
    Console().print(table)


def _cell(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
