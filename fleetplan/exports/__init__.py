"""Exports: live Excel workbooks, typed Parquet and injection-safe CSV, all written atomically.

``write_sweep(df_or_chunks, path)`` and ``write_plan(plan, path)`` pick the format from the
file suffix (``.xlsx``, ``.parquet``, ``.csv``; plans also ``.json``).
"""

from __future__ import annotations

from fleetplan.exports.dispatch import SWEEP_SUFFIXES, PLAN_SUFFIXES, write_plan, write_sweep

__all__ = ["PLAN_SUFFIXES", "SWEEP_SUFFIXES", "write_plan", "write_sweep"]
