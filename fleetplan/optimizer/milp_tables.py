"""Building blocks that turn tidy tables into columns and rows of the fleet MILP.

Coefficients are computed column-wise in DataFrames. A family of constraints comes from one
table of terms (key columns, ``col``, ``coef``): every distinct key is one row, every term one
matrix entry, added in a single ``LinearProgram.add_rows`` call. Each row is recorded in a table
(family, subject, period, limit, sense, unit, row) so solutions map back onto named rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fleetplan.optimizer.linear_program import INF

if TYPE_CHECKING:
    from fleetplan.optimizer.milp import FleetModel

#: Row senses: the bound a row's limit is.
SENSES = ("<=", ">=", "=")


def grouped(terms: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """The distinct keys of ``terms`` (sorted) and each term's position among them."""
    if terms.empty:
        return pd.DataFrame(columns=keys), np.zeros(0, dtype=np.int64)
    codes = terms.groupby(keys, sort=True).ngroup().to_numpy()
    first = np.unique(codes, return_index=True)[1]
    table = terms.iloc[first][keys].reset_index(drop=True)
    return table, codes


def add_family_rows(model: FleetModel, family: str, rows: pd.DataFrame, terms: pd.DataFrame,
                    position: np.ndarray, sense: str, limit, *, subject: pd.Series,
                    unit: str) -> np.ndarray:
    """Add one row per line of ``rows``: sum over its terms (``position`` = its line) of
    coef * x[col] (sense) limit. Records the rows; returns their indices."""
    if rows.empty:
        return np.zeros(0, dtype=np.int64)
    limit = np.broadcast_to(np.asarray(limit, dtype=float), (len(rows),))
    lower = limit if sense in (">=", "=") else -INF
    upper = limit if sense in ("<=", "=") else INF
    index = model.program.add_rows(len(rows), position, terms["col"].to_numpy(),
                                   terms["coef"].to_numpy(dtype=float), lower=lower, upper=upper)
    period = rows["period"].to_numpy() if "period" in rows else np.full(len(rows), -1)
    model.constraints.append(pd.DataFrame({
        "family": family, "subject": subject.astype(str).to_numpy(), "period": period,
        "limit": limit, "sense": sense, "unit": unit, "row": index}))
    return index


def add_keyed_rows(model: FleetModel, family: str, terms: pd.DataFrame, keys: list[str],
                   sense: str, limit, *, subject, unit: str,
                   rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows keyed by ``keys``: one per distinct key of ``terms`` (or per line of ``rows``, whose
    keys may have no terms); ``limit`` and ``subject`` may be functions of the row table.
    Returns the row table with each row's index (``row``)."""
    table, position = grouped(terms, keys)
    if rows is not None:
        lookup = pd.MultiIndex.from_frame(rows[keys]) if len(keys) > 1 else pd.Index(rows[keys[0]])
        found = pd.MultiIndex.from_frame(table[keys]) if len(keys) > 1 else pd.Index(table[keys[0]])
        position = lookup.get_indexer(found)[position] if len(table) else position
        keep = position >= 0
        terms, position, table = terms[keep], position[keep], rows.reset_index(drop=True)
    limit = limit(table) if callable(limit) else limit
    subject = subject(table) if callable(subject) else subject
    index = add_family_rows(model, family, table, terms, position, sense, limit,
                            subject=subject, unit=unit)
    return table.assign(row=index) if len(index) else table.assign(row=np.zeros(0, np.int64))


def per_period(table: pd.DataFrame, periods: pd.DataFrame) -> pd.DataFrame:
    """Rows of reserved capacity (period -1) repeated in every period (from their
    ``start_month`` on, when the table has one); others unchanged."""
    reserved = table[table["period"] < 0].drop(columns="period")
    spread = reserved.merge(periods[["period", "month"]].rename(columns={"month": "_month"}),
                            how="cross")
    if "start_month" in spread:
        spread = spread[spread["_month"] >= spread["start_month"]]
    spread = spread.drop(columns="_month")
    return pd.concat([table[table["period"] >= 0], spread], ignore_index=True)
