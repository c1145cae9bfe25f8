"""Pick the writer from the output file's suffix."""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fleetplan.errors import InvalidValueError
from fleetplan.exports.atomic import output_path, write_text_atomic
from fleetplan.exports.compare_workbook import write_compare_xlsx
from fleetplan.exports.csv import write_csv, write_sweep_csv
from fleetplan.exports.parquet import empty_sweep, write_sweep_parquet
from fleetplan.exports.plan_json import write_plan_json
from fleetplan.exports.plan_parquet import write_plan_parquet
from fleetplan.exports.plan_workbook import write_plan_xlsx
from fleetplan.exports.sweep_workbook import (
    EXCEL_MAX_ROWS,
    check_rows,
    merge_summaries,
    summarize,
    top_rows,
    write_sweep_xlsx,
)

log = logging.getLogger(__name__)

SWEEP_SUFFIXES: tuple[str, ...] = (".parquet", ".xlsx", ".csv")
PLAN_SUFFIXES: tuple[str, ...] = (".xlsx", ".parquet", ".json")
COMPARE_SUFFIXES: tuple[str, ...] = (".csv", ".json", ".xlsx")


def _suffix(path: str | os.PathLike, allowed: Sequence[str], what: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in allowed:
        message = (f"cannot write a {what} to '{path}': the file name must end with "
                   f"{', '.join(allowed)}")
        raise InvalidValueError(message)
    return suffix


def write_sweep(df_or_chunks: pd.DataFrame | Iterable[pd.DataFrame], path: str | os.PathLike, *,
                metadata: Mapping[str, Any] | None = None, top_n: int | None = None,
                partition_by: Sequence[str] | None = None, tpot_slo_ms: float | None = None,
                catalogs: Any = None) -> Path:
    """Write a sweep (one DataFrame or an iterable of chunks) by suffix; returns ``path``.

    ``.parquet``: streamed chunk by chunk, or hive-partitioned with ``partition_by``.
    ``.xlsx``: live workbook; ``top_n`` keeps the cheapest rows (needed above Excel's limit).
    ``.csv``: text, formula-like text made inert.
    """
    suffix = _suffix(path, SWEEP_SUFFIXES, "sweep")
    if partition_by and suffix != ".parquet":
        message = f"partition_by needs a .parquet output, got '{path}'"
        raise InvalidValueError(message)
    if suffix == ".parquet":
        return write_sweep_parquet(df_or_chunks, path, metadata=metadata,
                                   partition_by=partition_by, catalogs=catalogs)
    if suffix == ".csv":
        return write_sweep_csv(df_or_chunks, path, metadata=metadata)
    frame, summary, total = _collect(df_or_chunks, top_n)
    return write_sweep_xlsx(frame, path, metadata=metadata, top_n=top_n, tpot_slo_ms=tpot_slo_ms,
                            catalogs=catalogs, summary=summary, total_rows=total)


def _collect(data, top_n: int | None) -> tuple[pd.DataFrame, pd.DataFrame | None, int]:
    """One frame for the workbook; with ``top_n``, chunks are reduced as they stream in."""
    if isinstance(data, pd.DataFrame):
        return data, None, len(data)
    check_rows(0, top_n)
    kept: list[pd.DataFrame] = []
    summaries: list[pd.DataFrame] = []
    total = 0
    for chunk in data:
        total += len(chunk)
        if top_n is None:
            check_rows(total, None)
            kept.append(chunk)
            continue
        summaries.append(summarize(chunk))
        kept = [top_rows(pd.concat([*kept, chunk], ignore_index=True), top_n)]
    if not kept:
        kept = [empty_sweep()]
    frame = pd.concat(kept, ignore_index=True)
    summary = merge_summaries(summaries) if summaries else None
    log.debug("collected %d of %d rows (limit %d)", len(frame), total, EXCEL_MAX_ROWS)
    return frame, summary, total


def write_plan(plan: Any, path: str | os.PathLike, *, layout: str = "folder",
               start_date: dt.date | None = None) -> Path:
    """Write a ``FleetPlan`` by suffix; returns ``path``.

    ``.xlsx``: the live workbook, months labelled from ``start_date`` (default: the first of
    next month). ``.json``: ``write_plan_json``. ``.parquet``: one Parquet file per table, in a
    folder named ``path`` (``layout="folder"``) or as ``<stem>.<table>.parquet`` files next to
    it (``layout="files"``).
    """
    suffix = _suffix(path, PLAN_SUFFIXES, "plan")
    if suffix == ".json":
        return write_plan_json(plan, output_path(path))
    if suffix == ".parquet":
        return write_plan_parquet(plan, path, layout=layout)
    return write_plan_xlsx(plan, path, start_date=start_date)


def write_compare(table: pd.DataFrame, path: str | os.PathLike, params: Mapping[str, Any], *,
                  workload: Mapping[str, Any] | None = None, catalogs: Any = None, price_rule: str = "") -> Path:
    """Write a rent-or-buy comparison by suffix: ``.csv``, ``.json`` or a live ``.xlsx``
    (``workload``, ``catalogs`` and ``price_rule`` fill its Summary, Assumptions and Sources)."""
    suffix = _suffix(path, COMPARE_SUFFIXES, "comparison")
    if suffix == ".csv":
        return write_csv(table, path)
    if suffix == ".json":
        return write_text_atomic(path, table.to_json(orient="records", indent=2, double_precision=15))
    return write_compare_xlsx(table, path, params=dict(params), workload=workload, catalogs=catalogs,
                              price_rule=price_rule)
