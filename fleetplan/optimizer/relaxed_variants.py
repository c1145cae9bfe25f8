r"""Binding limits relaxed on the built model: the re-solves of marginal values without a rebuild.

Relaxing a limit by one step (``constraint_families``: ``relax``) only loosens the MILP, so the
base plan stays feasible. When the relaxation changes nothing but bounds and coefficients of
rows the base model already has, the relaxed model is the base program with those changes: it
is not rebuilt, and its solve begins from the base plan (``solve_fleet(start=...)``), so branch
and bound starts with an incumbent at the base cost and only has to find a cheaper plan or
show that there is none within the gap.

Families changed here, each to exactly what ``build_model`` makes of the relaxed problem or to a
looser, still valid, version of a cut:

- ``availability``: the GPU type's rows :math:`\sum s_g N_{gpt} \le A_g`, to the relaxed cap;
- ``offer_cap``: the offer's rows :math:`s_g N_{gpt} \le A_{gp}`, to the relaxed cap;
- ``budget``: every month's row, to the relaxed budget [USD/month];
- ``redundancy``: the spare binaries' coefficients in the workload's rows
  :math:`Y_{ct} - L_{ct} - k_w v_{wct} \ge 0`, from :math:`-k_w` to :math:`-(k_w - 1)`; the
  pool-cover cut's right-hand sides recomputed for the relaxed spares
  (``milp_constraints.pool_cover_bounds``); the cost-cover cut of the workload's pool dropped
  (its small MILPs kept :math:`k_w` spares; dropping a valid cut never removes a plan).

Other families (and looser SLOs, which change the candidates) are rebuilt from the relaxed
problem (``marginal_values.relaxed_cost``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.milp_constraints import pool_cover_bounds

#: A family's change: (model, its constraint table, subject, relaxed problem) -> the new matrix
#: (None: unchanged), row lower bounds, row upper bounds and constraint table, or None when
#: the relaxation is not a change of this model's rows.
Change = Callable[[FleetModel, pd.DataFrame, str, Problem], tuple | None]


def relaxed_variant(model: FleetModel, family: str, subject: str,
                    relaxed: Problem) -> FleetModel | None:
    """The solved base ``model`` changed to the ``relaxed`` problem (``family``'s limit on
    ``subject`` one step looser), unsolved; None when the family has no change here, the model
    is elastic or unsolved, or the relaxation touches rows the model does not have."""
    change = CHANGES.get(family)
    if change is None or model.elastic or model.values is None:
        return None
    changed = change(model, model.constraint_table(), subject, relaxed)
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


def _with_limits(model: FleetModel, table: pd.DataFrame, rows: pd.DataFrame, limits,
                 upper: bool) -> tuple:
    """Row bounds and table with ``rows``' upper (or lower) bound set to ``limits``."""
    row_lower, row_upper = model.program.row_lower.copy(), model.program.row_upper.copy()
    index = rows["row"].to_numpy(dtype=np.int64)
    (row_upper if upper else row_lower)[index] = limits
    table = table.copy()
    table.loc[rows.index, "limit"] = limits
    return None, row_lower, row_upper, table


def change_availability(model: FleetModel, table: pd.DataFrame, subject: str,
                        relaxed: Problem) -> tuple | None:
    """The GPU type's availability rows at its relaxed cap [GPUs]."""
    rows = _rows(table, "availability", subject)
    cap = relaxed.gpus.set_index("gpu")["max_gpus"].get(subject, np.nan)
    if rows.empty or not np.isfinite(cap):
        return None
    return _with_limits(model, table, rows, float(cap), upper=True)


def change_offer_cap(model: FleetModel, table: pd.DataFrame, subject: str,
                     relaxed: Problem) -> tuple | None:
    """The offer's rows (subject ``gpu/pricing_type``) at its relaxed cap [GPUs]."""
    rows = _rows(table, "offer_cap", subject)
    gpu, _, pricing = subject.partition("/")
    offers = relaxed.offers.set_index(["gpu", "pricing_type"])["max_gpus"]
    cap = offers.get((gpu, pricing), np.nan)
    if rows.empty or not np.isfinite(cap):
        return None
    return _with_limits(model, table, rows, float(cap), upper=True)


def change_budget(model: FleetModel, table: pd.DataFrame, subject: str,
                  relaxed: Problem) -> tuple | None:
    """Every month's budget row at the relaxed budget [USD/month]."""
    rows = _rows(table, "budget")
    if rows.empty or relaxed.budget_usd_per_month is None:
        return None
    return _with_limits(model, table, rows, float(relaxed.budget_usd_per_month), upper=True)


def change_redundancy(model: FleetModel, table: pd.DataFrame, subject: str,
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
        bound = pool_cover_bounds(relaxed, model.routes)
        keys = pd.MultiIndex.from_arrays([cover["subject"].to_numpy(), cover["period"].to_numpy()])
        limits = bound.reindex(keys).fillna(0.0).to_numpy()
        row_lower[cover["row"].to_numpy(np.int64)] = limits
        table.loc[cover.index, "limit"] = limits
    pool = str(workloads.loc[subject, "pool"])
    cost = _rows(table, "cost_cover", pool)
    row_lower[cost["row"].to_numpy(np.int64)] = -np.inf
    table.loc[cost.index, "limit"] = -np.inf
    return matrix, row_lower, row_upper, table


#: Families whose relaxation is a change of the built model's rows.
CHANGES: dict[str, Change] = {"availability": change_availability,
                              "offer_cap": change_offer_cap, "budget": change_budget,
                              "redundancy": change_redundancy}
