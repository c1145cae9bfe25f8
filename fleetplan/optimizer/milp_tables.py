"""Building blocks that turn tidy tables into PuLP variables and constraints.

Coefficients are computed column-wise in DataFrames; one ``LpAffineExpression`` is built per
constraint from a slice of (variable, coefficient) rows, and every constraint is recorded in a
table (family, name, subject, period, limit) so solutions and slacks map back onto rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pulp


def variables(lp: pulp.LpProblem, prefix: str, table: pd.DataFrame, codes: list[str], *,
               cat: str | np.ndarray, low: float = 0,
               up: float | None = None) -> list[pulp.LpVariable]:
    """One variable per row, named ``prefix_<code columns>`` (``m1`` = -1) to parse back."""
    names = pd.Series([prefix] * len(table), index=table.index, dtype=object)
    for column in codes:
        names = names + "_" + table[column].astype(int).astype(str).str.replace("-", "m")
    cats = np.broadcast_to(np.asarray(cat, dtype=object), (len(table),))
    return [lp.add_variable(name, low, up, c) for name, c in zip(names, cats, strict=True)]


def coded(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Add ``<column>_code`` integer columns (positions of sorted labels) for naming."""
    table = table.copy()
    for column in columns:
        table[f"{column}_code"] = pd.factorize(table[column], sort=True)[0]
    return table


def expressions(terms: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One ``LpAffineExpression`` per key combination from rows (keys..., var, coef).

    A variable must appear at most once per key combination.
    """
    if terms.empty:
        return pd.DataFrame(columns=[*keys, "expr"])
    terms = terms.sort_values(keys, kind="stable").reset_index(drop=True)
    group = terms.groupby(keys, sort=False).ngroup().to_numpy()
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    ends = np.r_[starts[1:], len(group)]
    variables, coefs = terms["var"].to_numpy(), terms["coef"].to_numpy(dtype=float).tolist()
    exprs = [pulp.LpAffineExpression(zip(variables[s:e], coefs[s:e]))
             for s, e in zip(starts, ends, strict=True)]
    out = terms.loc[starts, keys].reset_index(drop=True)
    out["expr"] = exprs
    return out


def add_constraints(model, family: str, rows: pd.DataFrame, sense: int,
                    rhs: np.ndarray | float, *, subject: pd.Series, unit: str) -> None:
    """Add ``rows.expr (sense) rhs`` named ``family_<i>``; record them for reporting."""
    if rows.empty:
        return
    rhs = np.broadcast_to(np.asarray(rhs, dtype=float), (len(rows),))
    names = [f"{family}_{i}" for i in range(len(rows))]
    built = [pulp.LpConstraint(e, sense, name, float(r))
             for e, name, r in zip(rows["expr"], names, rhs, strict=True)]
    for constraint in built:
        model.lp.addConstraint(constraint)
    period = rows["period"].to_numpy() if "period" in rows else np.full(len(rows), -1)
    model.constraints.append(pd.DataFrame({
        "family": family, "name": names, "subject": subject.astype(str).to_numpy(),
        "period": period, "limit": rhs, "unit": unit, "constraint": built}))


def per_period(table: pd.DataFrame, periods: pd.DataFrame) -> pd.DataFrame:
    """Rows of reserved capacity (period -1) repeated in every period; others unchanged."""
    reserved = table[table["period"] < 0].drop(columns="period")
    spread = reserved.merge(periods[["period"]], how="cross")
    return pd.concat([table[table["period"] >= 0], spread], ignore_index=True)
