r"""Binding limits relaxed on the built model: the re-solves of marginal values without a rebuild.

Relaxing a limit by one step (``constraint_families``: ``relax``) only loosens the MILP, so the
base plan stays feasible. When the relaxation changes nothing but bounds and coefficients of
rows the base model already has, the relaxed model is the base program with those changes: it
is not rebuilt, and its solve begins from the base plan (``solve_fleet(start=...)``), so branch
and bound starts with an incumbent at the base cost and only has to find a cheaper plan or
show that there is none within the gap.

Two kinds of change, each to exactly what ``build_model`` makes of the relaxed problem or to a
looser, still valid, version of a cut:

- a limit (:data:`ROW_FAMILIES`: GPU and offer caps, the budget, power envelopes, API rate
  limits, the committed floor): the family's rows are built again, alone, for the relaxed
  problem on a scratch model with the base model's columns (:func:`family_rows`); when they
  have the base rows' keys and bring no columns of their own, they take the base rows' place,
  else the model is rebuilt;
- ``redundancy``: the spare binaries' coefficients in the workload's rows
  :math:`Y_{ct} - L_{ct} - k_w v_{wct} \ge 0`, from :math:`-k_w` to :math:`-(k_w - 1)`; the
  pool-cover cut's right-hand sides recomputed for the relaxed spares
  (``milp_constraints.pool_cover_bounds``); the cost-cover cut of the workload's pool dropped
  (its small MILPs kept :math:`k_w` spares; dropping a valid cut never removes a plan).

Other families (fleet simplicity, whose rule the cost-cover cut's small MILPs also follow;
churn, whose rows bring change columns of their own; today's fleet and lead times, which change
offers and columns; looser SLOs, which change the candidates) are rebuilt from the relaxed
problem (``resolve_queue.relaxed_cost``). Either way the relaxed problem keeps the base
model's pruned configurations, as every re-solve always has.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fleetplan.optimizer.constraint_families import FAMILY
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.milp_constraints import pool_cover_bounds

#: A family's change: (model, its constraint table, family, subject, relaxed problem) -> the
#: new matrix, row lower bounds, row upper bounds and constraint table, or None when the
#: relaxation is not a change of this model's rows.
Change = Callable[[FleetModel, pd.DataFrame, str, str, Problem], tuple | None]


def relaxed_variant(model: FleetModel, family: str, subject: str, relaxed: Problem,
                    table: pd.DataFrame | None = None) -> FleetModel | None:
    """The solved base ``model`` changed to the ``relaxed`` problem (``family``'s limit on
    ``subject`` one step looser), unsolved; None when the family has no change here, the model
    is elastic or unsolved, or the relaxation touches rows the model does not have.
    ``table``: the model's constraint table, when the caller has it already."""
    change = CHANGES.get(family)
    if change is None or model.elastic or model.values is None:
        return None
    table = model.constraint_table() if table is None else table
    changed = change(model, table, family, subject, relaxed)
    if changed is None:
        return None
    matrix, row_lower, row_upper, table = changed
    program = model.program.with_changes(matrix=matrix, row_lower=row_lower, row_upper=row_upper)
    return dataclasses.replace(model, problem=relaxed, program=program, constraints=[table],
                               values=None, extras=dict(model.extras))


def _rows(table: pd.DataFrame, family: str, subject: str | None = None) -> pd.DataFrame:
    mine = table["family"] == family
    if subject is not None:
        mine &= table["subject"].astype(str) == subject
    return table[mine]


def _bound(row_lower: np.ndarray, row_upper: np.ndarray, table: pd.DataFrame,
           rows: pd.DataFrame, lower, upper=None) -> None:
    """In place: ``rows`` bounded below by ``lower`` and, when given, above by ``upper``; the
    table's limit is the finite one of the two (the upper where both are)."""
    index = rows["row"].to_numpy(dtype=np.int64)
    row_lower[index] = lower
    if upper is not None:
        row_upper[index] = upper
    limit = lower if upper is None else np.where(np.isfinite(upper), upper, lower)
    table.loc[rows.index, "limit"] = limit


def family_rows(model: FleetModel, family: str, problem: Problem) -> FleetModel:
    """``family``'s rows alone, built for ``problem`` on the columns of ``model``: a scratch
    model with ``model``'s variable tables and an empty program of as many columns."""
    scratch = FleetModel(problem=problem, elastic=model.elastic, routes=model.routes,
                         replicas=model.replicas, nodes=model.nodes, unmet=model.unmet,
                         spare_shortfall=model.spare_shortfall, extras=dict(model.extras))
    program = model.program
    scratch.program.add_columns(program.n_cols, lower=program.col_lower,
                                upper=program.col_upper, integer=program.integer)
    FAMILY[family].build(scratch)
    return scratch


def change_rows(model: FleetModel, table: pd.DataFrame, family: str, subject: str,
                relaxed: Problem) -> tuple | None:
    """The family's rows as its builder makes them for ``relaxed`` (terms and bounds), when it
    makes rows of the same keys on the same columns as for the base problem; None otherwise."""
    rows = _rows(table, family).sort_values("row")
    scratch = family_rows(model, family, relaxed)
    built = scratch.constraint_table().sort_values("row")
    same_keys = len(built) == len(rows) and all(
        np.array_equal(built[key].to_numpy(), rows[key].to_numpy())
        for key in ("subject", "period", "sense", "unit"))
    if rows.empty or scratch.program.n_cols != model.program.n_cols or not same_keys:
        return None
    index = rows["row"].to_numpy(np.int64)
    built_index = built["row"].to_numpy(np.int64)
    n_rows = model.program.n_rows
    kept = np.ones(n_rows)
    kept[index] = 0.0
    # the base rows emptied, then the rebuilt rows placed where they were
    place = sp.csr_matrix((np.ones(len(index)), (index, np.arange(len(index)))),
                          shape=(n_rows, len(index)))
    matrix = (sp.diags(kept) @ model.program.matrix.tocsr()
              + place @ scratch.program.matrix.tocsr()[built_index]).tocsr()
    matrix.eliminate_zeros()
    row_lower, row_upper = model.program.row_lower.copy(), model.program.row_upper.copy()
    table = table.copy()
    _bound(row_lower, row_upper, table, rows, scratch.program.row_lower[built_index],
           scratch.program.row_upper[built_index])
    return matrix, row_lower, row_upper, table


def change_redundancy(model: FleetModel, table: pd.DataFrame, family: str, subject: str,
                      relaxed: Problem) -> tuple | None:
    """The workload's N+k rows with its relaxed k, the pool-cover cut recomputed and the
    cost-cover cut of its pool dropped (module docstring)."""
    spares = model.extras.get("redundancy")
    workloads = model.problem.workloads.set_index("workload")
    if spares is None or subject not in workloads.index:
        return None
    old = float(workloads.loc[subject, "redundancy_k"])
    new = float(relaxed.workloads.set_index("workload").loc[subject, "redundancy_k"])
    mine = spares[spares["workload"] == subject]
    if mine.empty or not 0 <= new < old:
        return None
    # -k on each spare binary becomes -(k - 1): add the difference, then drop the zeros k = 0 leaves
    shape = (model.program.n_rows, model.program.n_cols)
    delta = sp.csr_matrix((np.full(len(mine), old - new), (mine["row"].to_numpy(np.int64),
                                                            mine["col"].to_numpy(np.int64))),
                          shape=shape)
    matrix = (model.program.matrix.tocsr() + delta).tocsr()
    matrix.eliminate_zeros()
    row_lower, row_upper = model.program.row_lower.copy(), model.program.row_upper.copy()
    table = table.copy()
    cover = _rows(table, "pool_cover")
    if not cover.empty:
        keys = pd.MultiIndex.from_arrays([cover["subject"].to_numpy(), cover["period"].to_numpy()])
        bound = pool_cover_bounds(relaxed, model.routes).reindex(keys).fillna(0.0).to_numpy()
        _bound(row_lower, row_upper, table, cover, bound)
    pool = str(workloads.loc[subject, "pool"])
    _bound(row_lower, row_upper, table, _rows(table, "cost_cover", pool), -np.inf)
    return matrix, row_lower, row_upper, table


#: Families whose relaxation changes only the limits of their own rows, in fields that no other
#: family's rows and no cut read (each checked against a model built anew in
#: ``tests/optimizer/test_relaxed_variants.py``). The spot share's relaxation changes only its
#: own rows' terms and would vary as exactly, but on the example with spot capped at 20 % its
#: re-solve took longer from the base model than built anew, so it is built anew.
ROW_FAMILIES = ("availability", "offer_cap", "budget", "power", "api_rate", "min_committed")


#: Families whose relaxation is a change of the built model's rows.
CHANGES: dict[str, Change] = {**dict.fromkeys(ROW_FAMILIES, change_rows),
                              "redundancy": change_redundancy}
