"""Progress on a terminal: a rows bar for streamed sweeps, a scenarios bar with an ETA for
what-if grids. Both draw only when stderr is a terminal, so pipes and CI logs stay clean. A sweep
printed to stdout streams chunk by chunk."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pandas as pd
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

from fleetplan.errors import InvalidValueError
from fleetplan.exports import write_sweep
from fleetplan.exports.sanitize import safe_frame
from fleetplan.sweeps.sweep_grid import DEFAULT_MAX_ROWS


def with_progress(chunks: Iterable[pd.DataFrame], total_rows: int, *, enabled: bool | None = None) -> Iterator[pd.DataFrame]:
    """Pass chunks through, advancing a rich progress bar (rows) when stderr is a terminal."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield from chunks
        return
    with Progress(console=Console(file=sys.stderr), transient=True) as progress:
        task = progress.add_task("sweeping", total=total_rows)
        for chunk in chunks:
            yield chunk
            progress.advance(task, len(chunk))


def write_stream(chunks: Iterable[pd.DataFrame], total_rows: int, path: Path, *, params: dict, catalogs,
                 **options) -> None:
    """Write chunks to ``path`` (.csv, .parquet or .xlsx, by suffix) with the run's provenance.

    ``options`` go to ``fleetplan.exports.write_sweep`` (``partition_by``, ``top_n``,
    ``tpot_slo_ms``).
    """
    write_sweep(with_progress(chunks, total_rows), Path(path), metadata=params, catalogs=catalogs, **options)


def progress_bar(enabled: bool | None = None) -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    """A ``progress(done, total)`` callback drawing a bar with an ETA on a terminal, and a closer."""
    if not (sys.stderr.isatty() if enabled is None else enabled):
        return None, lambda: None
    bar = Progress("solving scenarios", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   console=Console(file=sys.stderr), transient=True)
    task = bar.add_task("grid", total=None)
    bar.start()

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update, bar.stop


#: Most rows printed to stdout (the in-memory sweep limit); a bigger grid belongs in a file (-o).
MAX_PRINTED_ROWS = DEFAULT_MAX_ROWS


def print_chunks(chunks: Iterable[pd.DataFrame], total_rows: int) -> None:
    """Print chunks as one CSV (a header once), chunk by chunk, text made inert; refuse a grid of
    more than :data:`MAX_PRINTED_ROWS` rows before computing any of it."""
    if total_rows > MAX_PRINTED_ROWS:
        message = (f"the sweep has {total_rows:,} rows, more than the {MAX_PRINTED_ROWS:,} printed at most: "
                   "write them with -o FILE.parquet (streamed) or narrow the axes")
        raise InvalidValueError(message)
    for number, chunk in enumerate(chunks):
        typer.echo(safe_frame(chunk).to_csv(index=False, header=number == 0), nl=False)
