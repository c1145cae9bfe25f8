"""CSV export safe to open in a spreadsheet (OWASP CSV-injection guidance).

Text fields pass the one sanitizer (``fleetplan.exports.sanitize``): one that starts like a
formula gets a leading single quote, and every text field is enclosed in double quotes
(embedded quotes doubled). Numbers are left alone: ``-1.5`` in a numeric column is a number,
not a formula.
"""

from __future__ import annotations

import csv
import logging
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from fleetplan.exports.atomic import atomic_open
from fleetplan.exports.parquet import empty_sweep
from fleetplan.exports.sanitize import UNSAFE_LEADING, safe_text
from fleetplan.exports.sanitize import safe_frame as sanitized_frame

log = logging.getLogger(__name__)

#: Significant digits kept in CSV: 49961.2 rather than binary noise such as 49961.20000000001.
SIGNIFICANT_DIGITS = 12


def significant(values: np.ndarray, digits: int = SIGNIFICANT_DIGITS) -> np.ndarray:
    """Floats rounded to ``digits`` significant digits, so they print as short decimals.

    >>> significant(np.array([49961.20000000001, 0.1 + 0.2, -7.0])).tolist()
    [49961.2, 0.3, -7.0]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        exponent = digits - 1 - np.floor(np.log10(np.abs(values)))
    exact = np.isfinite(exponent) & (np.abs(exponent) <= 22)  # powers of ten a double holds exactly
    power = 10.0 ** np.where(exact, np.abs(exponent), 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = np.where(exponent >= 0, np.round(values * power) / power, np.round(values / power) * power)
    return np.where(exact, rounded, values)


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` made inert for CSV (``sanitize.safe_frame``), floats kept short."""
    return sanitized_frame(frame, round_floats=significant)


def write_csv(data: pd.DataFrame | Iterable[pd.DataFrame], path: str | os.PathLike) -> Path:
    """Write one DataFrame or an iterable of chunks (same columns) to a safe CSV, atomically."""
    chunks = [data] if isinstance(data, pd.DataFrame) else data
    rows = 0
    with atomic_open(path, "w", encoding="utf-8", newline="") as stream:
        for number, chunk in enumerate(chunks):
            safe_frame(chunk).to_csv(stream, index=False, header=number == 0,
                                     quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
            rows += len(chunk)
    log.info("wrote %d rows to %s", rows, path)
    return Path(path)


def write_sweep_csv(data: pd.DataFrame | Iterable[pd.DataFrame], path: str | os.PathLike, *,
                    metadata=None) -> Path:
    """Write a sweep (DataFrame or chunks) to CSV.

    CSV has no place for metadata: ``metadata`` is accepted for a uniform call and logged.
    """
    log.debug("CSV keeps no metadata; dropped %s", sorted(metadata or {}))
    return write_csv(_header_at_least(data), path)


def _header_at_least(data: pd.DataFrame | Iterable[pd.DataFrame]):
    """The chunks, or one empty sweep table when there are none (the file keeps a header)."""
    if isinstance(data, pd.DataFrame):
        yield data
        return
    empty = True
    for chunk in data:
        empty = False
        yield chunk
    if empty:
        yield empty_sweep()


__all__ = ["UNSAFE_LEADING", "safe_frame", "safe_text", "significant", "write_csv", "write_sweep_csv"]
