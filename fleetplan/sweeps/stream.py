"""Stream sweep chunks to a file through the exports, with a progress bar on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

import fleetplan


def run_metadata(params: dict, catalogs) -> dict:
    """Provenance written beside every export: version, catalog versions, parameters, time."""
    return {
        "fleetplan_version": fleetplan.__version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "catalogs": catalogs.versions(),
        "parameters": params,
    }


def with_progress(chunks: Iterable[pd.DataFrame], total_rows: int, *, enabled: bool | None = None) -> Iterator[pd.DataFrame]:
    """Pass chunks through, advancing a rich progress bar (rows) when stderr is a terminal."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield from chunks
        return
    from rich.progress import Progress

    with Progress(transient=True) as progress:
        task = progress.add_task("sweeping", total=total_rows)
        for chunk in chunks:
            yield chunk
            progress.advance(task, len(chunk))


def write_stream(chunks: Iterable[pd.DataFrame], total_rows: int, path: Path, *, params: dict, catalogs) -> None:
    """Write chunks to ``path`` (.csv, .parquet or .xlsx, chosen by suffix) with provenance."""
    from fleetplan.exports import write_sweep

    write_sweep(with_progress(chunks, total_rows), Path(path), metadata=run_metadata(params, catalogs))
