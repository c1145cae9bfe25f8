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
from fleetplan.catalogs.schema import CATALOG_NAMES, INDEXED_CATALOGS, catalog_name, load_schema
from fleetplan.cli.options import CatalogOption, named_ids
from fleetplan.cli.tables import WIDTH, exact_text
from fleetplan.errors import CatalogError, did_you_mean, one_line
from fleetplan.exports.sanitize import safe_frame

FORMATS = ("table", "csv", "json")
MAX_LISTED_ERRORS = 100
#: Columns a table shows by default, to fit WIDTH characters (--columns all shows every one).
TABLE_COLUMNS = {
    "gpus": ("id", "memory_gb", "memory_unit", "memory_bw_tb_s", "tflops_bf16", "tflops_fp8", "tflops_fp4", "gpus_per_node",
             "as_of"),
    "models": ("id", "params_total_b", "params_active_b", "n_layers", "n_kv_heads", "head_dim", "max_context",
               "as_of"),
    "quants": ("id", "bytes_per_weight", "kv_bytes_per_element", "compute_precision", "weight_only", "as_of"),
    "prices": ("gpu", "provider", "region", "pricing_type", "usd_per_gpu_hour", "as_of", "override"),
    "efficiency": ("engine", "gpu", "operator", "precision", "compute_efficiency", "memory_efficiency",
                   "overhead_ms", "n_points", "as_of"),
    "ownership": ("gpu", "gpus_per_node", "usd_per_node", "node_power_kw", "life_years",
                  "hosting_usd_per_node_month", "as_of"),
    "engines": ("id", "version", "kv_memory_rule", "memory_fraction", "max_num_seqs", "max_batched_tokens",
                "chunked_prefill", "as_of"),
}

catalog_app = typer.Typer(
    help="Browse the GPU, model, quantization, price, efficiency and ownership catalogs; "
         "check your own.",
    no_args_is_help=True,
    rich_markup_mode="markdown",  # as the main app: brackets in help texts are units
)


def register(app: typer.Typer) -> None:
    """Add the ``catalog`` command group to the ``fleetplan`` app."""
    app.add_typer(catalog_app, name="catalog")


ColumnsOption = Annotated[str | None, typer.Option(
    help="Comma-separated columns to show, or 'all' (a table shows a readable selection by default; "
         "csv and json show every column)")]
GpuFilter = Annotated[str | None, typer.Option("--gpu", help="Only rows of these GPU ids, comma-separated")]
FormatOption = Annotated[str | None, typer.Option(
    "--format", help="table, csv or json (default: table on a terminal, csv otherwise).")]


@catalog_app.command("show")
def show(
    name: Annotated[str, typer.Argument(
        help="gpus, models, quants, prices, efficiency or ownership")],
    catalog: CatalogOption = None,
    columns: ColumnsOption = None,
    gpu: GpuFilter = None,
    output_format: FormatOption = None,
) -> None:
    """Print one catalog, with its sources (quants get a native_gpus column: GPUs with its
    compute precision). Also ``fleetplan catalog gpus`` and so on."""
    output_format = _format(output_format)
    canonical = catalog_name(name)
    frame = _rows_of(catalog_frame(name, catalog or ()), canonical, gpu, catalog or ())
    if columns is None and output_format == "table":
        columns = ",".join(c for c in TABLE_COLUMNS[canonical] if c in frame.columns)
    frame = _select(frame, None if columns == "all" else columns)
    if output_format == "table":
        _print_rich(frame, canonical)
    elif output_format == "json":
        typer.echo(frame.to_json(orient="records", indent=2))
    else:
        typer.echo(safe_frame(frame).to_csv(index=False, lineterminator="\n"), nl=False)


@catalog_app.command("check")
def check(
    paths: Annotated[list[Path], typer.Argument(help="CSV or XLSX files with catalog rows.")],
) -> None:
    """Validate files against the schemas and the shipped catalogs; exit 2 on any problem."""
    try:
        results = check_files(paths)
    except CatalogErrors as errors:
        if len(errors.messages) == 1:  # one problem is one line
            raise CatalogError(errors.messages[0]) from None
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


def _shortcut(name: str):
    def command(catalog: CatalogOption = None, columns: ColumnsOption = None, gpu: GpuFilter = None,
                output_format: FormatOption = None) -> None:
        show(name, catalog, columns, gpu, output_format)

    command.__doc__ = f"Same as fleetplan catalog show {name}."
    return command


for _name in CATALOG_NAMES:
    catalog_app.command(_name)(_shortcut(_name))


def _rows_of(frame: pd.DataFrame, canonical: str, gpus: str | None, overrides) -> pd.DataFrame:
    """Rows of the ``--gpu`` ids (the id of gpus, the gpu column elsewhere)."""
    if gpus is None:
        return frame
    wanted = load_catalogs(overrides=list(overrides)).require("gpu", named_ids(gpus, "--gpu"))
    column = "id" if canonical == "gpus" else "gpu"
    if column not in frame.columns:
        message = f"--gpu filters gpus, prices, efficiency and ownership, not {canonical}"
        raise CatalogError(message)
    return frame[frame[column].isin(wanted)]


def _fitting(whole: list[list[str]], folded: list[list[str]], widest: list[int]) -> list[list[str]]:
    """Whole header names where the table still fits WIDTH; the widest ones broken first."""
    def width(lines, values):
        return max(values, *(len(line) for line in lines))

    chosen = list(whole)
    order = sorted(range(len(whole)), key=lambda i: width(folded[i], widest[i]) - width(whole[i], widest[i]))
    for i in order:
        if sum(width(h, w) + 3 for h, w in zip(chosen, widest)) + 1 <= WIDTH:
            break
        chosen[i] = folded[i]
    return chosen


def _header_lines(name: str, unit: str, width: int) -> list[str]:
    """A column name broken after underscores to fit ``width``, and its unit in brackets."""
    lines = [""]
    for part in name.replace("_", "_ ").split(" "):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return lines + ([f"[{line}]" if len(unit.splitlines()) == 1 else line
                     for line in _bracketed(unit)] if unit else [])


def _bracketed(unit: str) -> list[str]:
    parts = unit.splitlines()
    return [f"[{parts[0]}", *parts[1:-1], f"{parts[-1]}]"] if len(parts) > 1 else parts


def _short_unit(unit: str) -> str:
    """A unit that folds in a narrow header: ``USD/GPU-hour`` over two lines, ``fraction`` as share."""
    unit = "share" if unit == "fraction" else unit
    return unit.replace("/", "/\n") if len(unit) > 8 else unit


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
        typer.echo(f"error: {one_line(message)}", err=True)
    if len(messages) > MAX_LISTED_ERRORS:
        typer.echo(f"error: ... and {len(messages) - MAX_LISTED_ERRORS} more", err=True)


def _print_rich(frame: pd.DataFrame, title: str) -> None:
    """A table whose headers carry each column's unit (from the catalog's schema)."""
    units = {c.name: c.unit for c in load_schema(title).columns}
    table = Table(title=f"{title} ({len(frame)} rows)", header_style="bold")
    rows = [[exact_text(value) for value in row] for row in frame.astype(object).where(frame.notna(), None).to_numpy()]
    widest = [min(max((len(row[i]) for row in rows), default=1), 24) for i in range(len(frame.columns))]
    units = [_short_unit(units.get(str(c), "")) for c in frame.columns]
    whole = [_header_lines(str(c), u, 999) for c, u in zip(frame.columns, units)]
    folded = [_header_lines(str(c), u, max(w, 8)) for c, u, w in zip(frame.columns, units, widest)]
    headers = _fitting(whole, folded, widest)
    for column, lines, width in zip(frame.columns, headers, widest):
        numeric = pd.api.types.is_numeric_dtype(frame[column]) and not pd.api.types.is_bool_dtype(frame[column])
        table.add_column("\n".join(lines), justify="right" if numeric else "left", overflow="fold",
                         width=max(width, *(len(line) for line in lines)))
    for row in rows:
        table.add_row(*row)
    Console(width=WIDTH).print(table)
