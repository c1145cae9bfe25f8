r"""Lagrangian prices of reserved capacity, from the LP relaxation's row duals.

Reserved columns (replicas and their nodes, paid for the whole horizon) are the only columns
every period shares. Relaxing "every period's copy equals the one count" with prices
:math:`\lambda_{tj}` that sum to each column's cost, every period becomes a MILP of its own,
and the sum of their bounds bounds the whole MILP from below [1]. At the prices the LP's duals
give (:func:`period_prices`), the period LPs sum to exactly the LP bound (:func:`lp_shares`
gives each period's part without solving it), so each period's whole replicas can only raise
it, and a period left unsolved still counts its share.

References:
    [1] A. M. Geoffrion, "Lagrangean relaxation for integer programming", Mathematical
        Programming Study 2 (1974) 82-114.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.period_solves import PeriodPrograms, _local
from fleetplan.optimizer.solver import Result

#: HiGHS's dual feasibility tolerance: reduced costs this small count as 0 in the LP shares.
DUAL_TOLERANCE = 1e-7


def period_prices(model: FleetModel, programs: PeriodPrograms,
                  lp: Result) -> dict[int, np.ndarray] | None:
    r"""Each period's price of each reserved column, from the LP's row duals :math:`\pi`.

    A reserved column :math:`j` of cost :math:`c_j` appears in rows of single periods and in
    horizon-wide rows, which every period program holds a copy of. Period :math:`t` of weight
    :math:`w_t` (its share of the hours) pays

    .. math:: \lambda_{tj} = \sum_{r \in t} a_{rj} \pi_r
              + w_t \Big(\sum_{r \in \text{shared}} a_{rj} \pi_r + d_j\Big),
        \qquad d_j = c_j - \sum_r a_{rj} \pi_r,

    so :math:`\sum_t \lambda_{tj} = c_j` exactly, and the LP duals (a shared row's scaled by
    :math:`w_t`) stay feasible for every period's LP, whose optimal values therefore sum to
    at least the LP bound. Prices may be negative (a reserved replica's share of a node row in
    a period that does not use it): clipping them breaks the sum, and the priced periods
    then sum below the LP bound (``tests/optimizer/test_reserved_first_passes.py``)."""
    if lp.duals is None:
        return None
    reserved = programs.reserved
    row_period = _row_periods(model)
    block = model.program.matrix[:, reserved].tocoo()
    value = block.data * lp.duals[block.row]
    periods = model.problem.periods
    position = pd.Series(np.arange(len(periods)), index=periods["period"].to_numpy())
    mine = row_period[block.row] >= 0
    per_period = np.zeros((len(periods), len(reserved)))
    np.add.at(per_period, (position.reindex(row_period[block.row][mine]).to_numpy(np.int64),
                           block.col[mine]), value[mine])
    shared = np.zeros(len(reserved))
    np.add.at(shared, block.col[~mine], value[~mine])
    reduced = model.cost[reserved] - per_period.sum(axis=0) - shared
    weight = hour_weights(periods)
    prices = per_period + weight.to_numpy()[:, None] * (shared + reduced)[None, :]
    return dict(zip(periods["period"].to_numpy().tolist(), prices))


def priced_cost(programs: PeriodPrograms, prices: dict[int, np.ndarray]):
    """The objective of each period's program with its own copy of the reserved columns at
    its ``prices`` (:func:`period_prices`): a function of the period."""
    model, reserved = programs.model, programs.reserved

    def cost(period: int) -> np.ndarray:
        part = programs.parts[period]
        own = model.cost[part.cols].copy()
        where, which = _local(part, reserved)
        own[where] = prices[period][which]
        return own

    return cost


def hour_weights(periods: pd.DataFrame) -> pd.Series:
    """Each period's share of the horizon's hours, indexed by period."""
    hours = periods.set_index("period")["hours"]
    return hours / hours.sum()


def _row_periods(model: FleetModel) -> np.ndarray:
    """The period of every row of the model, -1 for horizon-wide rows."""
    table = model.constraint_table()
    row_period = np.full(model.program.n_rows, -1)
    row_period[table["row"].to_numpy()] = table["period"].to_numpy()
    return row_period


def lp_shares(programs: PeriodPrograms, lp: Result, cost) -> dict[int, float]:
    r"""Each period's share of the LP bound: the dual objective of its program under its
    Lagrangian prices ``cost(period)`` at the LP's row duals :math:`\pi` (a shared row's
    scaled by the period's weight :math:`w_t`, its share of the hours),

    .. math:: \sum_r \pi_r \, b_r(\pi_r) + \sum_j d_j \, u_j(d_j), \qquad
              d = c_t - A_t^\top \pi,

    with :math:`b_r` the row's lower bound where :math:`\pi_r > 0` and its upper where
    :math:`\pi_r < 0`, and :math:`u_j` the column's lower bound where :math:`d_j > 0` and its
    upper where :math:`d_j < 0`. These duals are feasible for the period's LP, so each share is
    a lower bound of its Lagrangian subproblem, and the shares sum to the LP bound (weak
    duality; reduced costs within HiGHS's dual feasibility tolerance count as 0)."""
    model = programs.model
    shared = _row_periods(model) < 0
    weight = hour_weights(model.problem.periods)
    shares = {}
    for period, part in programs.parts.items():
        program = part.program
        duals = lp.duals[part.rows] * np.where(shared[part.rows], weight[period], 1.0)
        reduced = cost(period) - program.matrix.T @ duals
        reduced[np.abs(reduced) <= DUAL_TOLERANCE] = 0.0
        shares[period] = float(_bound_terms(duals, program.row_lower, program.row_upper).sum()
                               + _bound_terms(reduced, program.col_lower,
                                              program.col_upper).sum())
    return shares


def _bound_terms(multipliers: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Each multiplier times the bound it prices: the lower where positive, the upper where
    negative, nothing where zero (no 0 x inf)."""
    out = np.zeros(len(multipliers))
    up, down = multipliers > 0, multipliers < 0
    out[up] = multipliers[up] * lower[up]
    out[down] = multipliers[down] * upper[down]
    return out
