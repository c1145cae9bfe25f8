"""Stream sweep chunks to a file through the exports, with a progress bar on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd


def with_progress(chunks: Iterable[pd.DataFrame], total_rows: int, *, enabled: bool | None = None) -> Iterator[pd.DataFrame]:
    """Pass chunks through, advancing a rich progress bar (rows) when stderr is a terminal."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield from chunks
        return
    from rich.console import Console
    from rich.progress import Progress

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
    from fleetplan.exports import write_sweep

    write_sweep(with_progress(chunks, total_rows), Path(path), metadata=params, catalogs=catalogs, **options)
