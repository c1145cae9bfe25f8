r"""A whole-replica plan from the LP relaxation: the fallback that is always at hand.

The LP relaxation routes every bucket (its shares meet demand exactly); rounding its replicas
up keeps that routing feasible: each configuration gets the replicas its load needs, rounded
up, plus k spares where a workload with N+k uses it, and never fewer than the LP bought
(which keeps the spot share). Reserved replicas are the LP's rounded down (or the given ones),
spot replicas and those on today's fleet the LP's rounded down, and on-demand replicas make up
the rest; a configuration with no on-demand offer makes it up on spot, and one with neither
with more reserved replicas (the most any period lacks). Nodes follow by packing. The result
is checked against every row. Columns of other families (fleet simplicity's flags,
deployed-configuration binaries, re-planning's changes, node patterns) are left to the solver
with the rounding's decisions held (:func:`completed`, below); when the held replicas break a
row of their own (a monthly cap on new GPUs, a least committed fleet), the solver chooses the
replica counts too, with the routing alone held. A plan that still breaks a row (an
availability cap the routing's replicas exceed) is not returned.

The greedy plan (``greedy_fallback.py``) is rounded up here too.

Completion. Fleet simplicity's route and quantization flags, the deployed-configuration
binaries of a fixed cost per configuration, re-planning's bought, released and migrated GPUs,
node patterns under ``whole_nodes`` and the excess cost of a CVaR objective follow from the
routing and replicas, each by its own rule. Rather than a rounding rule per family,
:func:`completed` holds the decided columns at their values and lets the solver choose the
rest: with the decisions held, the rows left

.. math:: l - A_H x_H \le A_F x_F \le u - A_H x_H

(:math:`H` held, :math:`F` free) form a small problem whose rows only link the free columns to
decisions already made, which presolve mostly settles. A row with no free column must already
hold; otherwise the held decisions break it (an availability cap, a budget) and there is no
completion. The result is checked against every row of the whole program.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pandas as pd

from fleetplan.optimizer.linear_program import LinearProgram, column_set
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.milp_tables import per_period
from fleetplan.optimizer.node_packing import nodes_needed_table
from fleetplan.optimizer.reserved_candidates import reserved_rows
from fleetplan.optimizer.solver import SolveOptions, open_solver

logger = logging.getLogger(__name__)

#: Largest row violation accepted as round-off.
FEASIBLE = 1e-6

#: Times the LP is solved again with the rows its rounding broke tightened.
TIGHTENINGS = 3

#: Least time a completion is given, even when the caller's time is spent [s]: presolve
#: settles most completions in a few milliseconds.
LEAST_COMPLETION_S = 0.05


def _needed_replicas(model: FleetModel, values: np.ndarray) -> pd.Series:
    """Replicas each (config, period) needs for the LP's routing: load rounded up, k spares."""
    routes = model.routes.assign(share=np.clip(values[model.routes["col"]], 0.0, 1.0))
    routes = routes[routes["share"] > 1e-9]
    if routes.empty:  # everything unserved or sent to a hosted API: no replica needed
        return pd.Series(dtype=float, index=pd.MultiIndex.from_arrays([[], []],
                                                                      names=["config", "period"]))
    k = model.problem.workloads.set_index("workload")["redundancy_k"]
    routes = routes.assign(load=routes["load"] * routes["share"], k=routes["workload"].map(k))
    grouped = routes.groupby(["config", "period"]).agg(load=("load", "sum"), k=("k", "max"))
    return np.ceil(grouped["load"] - 1e-7) + grouped["k"].fillna(0)


def rounded_up(model: FleetModel, values: np.ndarray, reserved: np.ndarray | None = None, *,
               options: SolveOptions | None = None, seconds: float = 0.0,
               hold_reserved: bool = False) -> np.ndarray | None:
    """A feasible whole-replica plan from LP values (None if rounding breaks a limit).

    ``reserved``: reserved replica counts to start from (one per reserved replica row of the
    model); default: the LP's rounded down. A configuration offered neither on demand nor on
    spot gets more reserved replicas where it needs them, unless ``hold_reserved``. With
    ``options``, the columns of other families (and node patterns) are completed by the
    solver within ``seconds`` (``rounding.completed``); without, a plan that needs them is
    not returned.
    """
    patterns = model.extras.get("patterns") is not None
    out = _rounded_values(model, values, reserved, patterns, hold_reserved)
    return None if out is None else _as_plan(model, out, patterns, options, seconds)


def _as_plan(model: FleetModel, out: np.ndarray, patterns: bool, options: SolveOptions | None,
             seconds: float) -> np.ndarray | None:
    """The rounding's values if they are a plan, else completed (``rounded_up``)."""
    violation = model.program.violation(out)
    if violation <= FEASIBLE and is_whole(model.program, out):
        return out
    # a family's own integer columns keep the LP's fractions (fleet simplicity's flags)
    logger.debug("rounded-up LP breaks a row by %.3g or keeps a fraction", violation)
    if options is None:
        return None
    started = time.perf_counter()
    plan = completed(model.program, model.cost, out, decided_columns(model, patterns), options,
                     seconds)
    if plan is None:
        # the rounded replicas break a row of their own (a lead time's monthly cap, a least
        # committed fleet): the routing alone is held, and the solver chooses the counts
        plan = completed(model.program, model.cost, out, _routing_columns(model, out), options,
                         seconds - (time.perf_counter() - started))
    return plan


def _rounded_values(model: FleetModel, values: np.ndarray, reserved: np.ndarray | None,
                    patterns: bool, hold_reserved: bool = False) -> np.ndarray | None:
    """The rounding's column values before any check (None when no offer can make up a
    configuration's replicas: :func:`_made_up_elsewhere`); other families' columns keep
    ``values``."""
    out = np.array(values, dtype=float)
    replicas = model.replicas
    lp = replicas.assign(lp=values[replicas["col"]])
    is_reserved = (lp["period"] < 0).to_numpy()
    kept = np.floor(lp.loc[is_reserved, "lp"] + 1e-6).to_numpy() if reserved is None else reserved
    out[lp.loc[is_reserved, "col"]] = kept
    spread = per_period(lp.assign(lp=np.where(is_reserved, 0.0, lp["lp"]))
                        .assign(kept=np.where(is_reserved, out[lp["col"]], 0.0)),
                        model.problem.periods)
    by_config = spread.groupby(["config", "period"]).agg(lp_total=("lp", "sum"),
                                                         reserved=("kept", "sum"))
    lp_total = per_period(lp, model.problem.periods).groupby(["config", "period"])["lp"].sum()
    needed = _needed_replicas(model, values).reindex(by_config.index, fill_value=0.0)
    total = np.maximum(needed, np.ceil(lp_total.reindex(by_config.index) - 1e-6))
    flexible_need = (total - by_config["reserved"]).clip(lower=0.0)
    flexible = lp.loc[~is_reserved].set_index(["config", "period"])
    spot = flexible[flexible["pricing_type"] == "spot"]
    demand_od = flexible[flexible["pricing_type"] == "on_demand"]
    # spot and today's fleet (committed, owned) keep the LP's replicas rounded down
    floored_rows = flexible[flexible["pricing_type"] != "on_demand"]
    floored = np.minimum(np.floor(floored_rows["lp"] + 1e-6),
                         flexible_need.reindex(floored_rows.index, fill_value=0.0))
    out[floored_rows["col"]] = floored.to_numpy()
    rest = (flexible_need - floored.groupby(level=[0, 1]).sum().reindex(
        flexible_need.index, fill_value=0.0)).clip(lower=0.0)
    out[demand_od["col"]] = rest.reindex(demand_od.index, fill_value=0.0).to_numpy()
    short = rest[~rest.index.isin(demand_od.index) & (rest > 0)]
    if not short.empty and not _made_up_elsewhere(model, lp[is_reserved], spot, short, out,
                                                  hold_reserved):
        return None
    _set_uses(model, values, out)
    if not patterns:  # patterns are left to the completion
        _set_nodes(model, out)
    if not model.spare_shortfall.empty:
        out[model.spare_shortfall["col"]] = 0.0
    return out


def rounded_within_limits(model: FleetModel, values: np.ndarray, options: SolveOptions,
                          seconds: float, reserved: np.ndarray | None = None) -> np.ndarray | None:
    """:func:`rounded_up`; when the rounding itself breaks rows (an availability or offer cap,
    a budget: rows of decided columns only), the LP is solved again with each such row
    tightened by what the rounding exceeded, and rounded again, up to :data:`TIGHTENINGS`
    times, all within ``seconds``: the tightened cap leaves the next rounding the room this
    one took. Without given ``reserved`` counts, each LP's reserved replicas are also tried
    rounded up (fewer on-demand replicas to make up under an on-demand cap)."""
    started = time.perf_counter()

    def left() -> float:
        return seconds - (time.perf_counter() - started)

    patterns = model.extras.get("patterns") is not None

    def rounded(values: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(plan or None, the rounding's values with the given or rounded-down reserved)."""
        out = _rounded_values(model, values, reserved, patterns)
        plan = None if out is None else _as_plan(model, out, patterns, options, left())
        if plan is None and reserved is None:
            lp_reserved = values[reserved_rows(model)["col"].to_numpy()]
            up = np.ceil(lp_reserved - 1e-6) + 0.0
            if not np.array_equal(up, np.floor(lp_reserved + 1e-6)):  # else the same again
                plan = rounded_up(model, values, up, options=options, seconds=left())
        return plan, out

    plan, out = rounded(values)
    program, solver = model.program, None
    lower, upper = program.row_lower.copy(), program.row_upper.copy()
    decided = decided_columns(model, patterns)
    for _ in range(TIGHTENINGS):
        if plan is not None or out is None or left() <= 0:
            break
        rows, over, under = broken_rows(program, out, decided)
        if not len(rows):
            break
        upper[rows] -= over
        lower[rows] += under
        logger.debug("rounding breaks %d rows by up to %.3g: the LP again with them tightened",
                     len(rows), max(over.max(), under.max()))
        solver = solver or open_solver(program, model.cost, options)
        solver.set_row_bounds(rows, lower[rows], upper[rows])
        result = solver.solve(time_limit_s=max(left(), LEAST_COMPLETION_S),
                              mip_gap=options.mip_gap, relax=True)
        if result.values is None or result.outcome.status != "optimal":
            break
        values = result.values
        plan, out = rounded(values)
    return plan


def is_whole(program: LinearProgram, values: np.ndarray) -> bool:
    """True when every integer column of ``values`` is whole (within round-off)."""
    integer = values[program.integer]
    return bool((np.abs(integer - np.round(integer)) <= FEASIBLE).all())


def decided_columns(model: FleetModel, patterns: bool) -> np.ndarray:
    """Columns the rounding decides: routing and hosted-API shares, replicas, the redundancy
    flags of the routes used, spare shortfalls and (without node patterns) nodes."""
    tables = [model.routes, model.replicas, model.spare_shortfall,
              model.extras.get("api_shares"), model.extras.get("redundancy")]
    if not patterns:
        tables.append(model.nodes)
    return _columns_of(model, tables)


def _columns_of(model: FleetModel, tables: list[pd.DataFrame | None]) -> np.ndarray:
    """The sorted program columns of variable tables (None or empty ones skipped)."""
    return column_set(model.program.n_cols, *[
        t["col"].to_numpy(dtype=np.int64) for t in tables if t is not None and not t.empty])


def _made_up_elsewhere(model: FleetModel, reserved_lp: pd.DataFrame, spot: pd.DataFrame,
                       short: pd.Series, out: np.ndarray, hold_reserved: bool) -> bool:
    """Make up the replicas ``short`` (by config and period) of configurations without an
    on-demand offer in ``out``: spot where the configuration has a spot offer in that period
    (a spot share cap it breaks is left to the caller's check), else more reserved replicas
    of its cheapest reserved offer that covers every period short (the most any period
    lacks), unless ``hold_reserved``. False when some configuration has none of these."""
    first_spot = spot[~spot.index.duplicated()]
    on_spot = short.index.isin(first_spot.index)
    out[first_spot["col"]] += short.reindex(first_spot.index, fill_value=0.0).to_numpy()
    left = short[~on_spot]
    if left.empty:
        return True
    if hold_reserved:
        return False
    most = left.groupby(level="config").max()
    first_month = model.problem.periods.set_index("period")["month"].reindex(
        left.index.get_level_values("period")).groupby(left.index.get_level_values("config")).min()
    offers = reserved_lp[reserved_lp["config"].isin(most.index)]
    offers = offers.assign(usd=_reserved_usd_per_gpu(model, offers) * offers["tp"].to_numpy())
    if "start_month" in offers:
        offers = offers[offers["start_month"] <= offers["config"].map(first_month)]
    cheapest = offers.sort_values("usd", kind="stable").drop_duplicates("config")
    if len(cheapest) < len(most):
        return False
    out[cheapest["col"]] += np.ceil(most.reindex(cheapest["config"]).to_numpy() - 1e-7)
    return True


def _routing_columns(model: FleetModel, values: np.ndarray) -> np.ndarray:
    """Columns of the routing and hosted-API shares, and the replicas of configurations the
    routing in ``values`` leaves idle."""
    used = model.routes.loc[values[model.routes["col"]] > 1e-9, "config"].unique()
    idle = model.replicas[~model.replicas["config"].isin(used)]
    return _columns_of(model, [model.routes, model.extras.get("api_shares"), idle])


def _reserved_usd_per_gpu(model: FleetModel, rows: pd.DataFrame) -> np.ndarray:
    """What one GPU of each reserved replica row costs over the horizon [USD]: its node's
    cost over the GPUs in a node (the nodes carry the cost)."""
    nodes = model.nodes[model.nodes["period"] < 0]
    per_gpu = pd.Series(model.cost[nodes["col"]] / nodes["gpus_per_node"].to_numpy(dtype=float),
                        index=pd.MultiIndex.from_frame(nodes[["gpu", "pricing_type"]]))
    per_gpu = per_gpu.groupby(level=[0, 1]).min()
    return per_gpu.reindex(pd.MultiIndex.from_frame(rows[["gpu", "pricing_type"]])).to_numpy()


def _set_uses(model: FleetModel, values: np.ndarray, out: np.ndarray) -> None:
    rows = model.extras.get("redundancy")
    if rows is None:
        return
    routes = model.routes.assign(share=values[model.routes["col"]])
    used = routes[routes["share"] > 1e-9][["workload", "config", "period"]].drop_duplicates()
    flags = rows.merge(used.assign(used=1.0), on=["workload", "config", "period"], how="left")
    out[flags["col"]] = flags["used"].fillna(0.0).to_numpy()


def _set_nodes(model: FleetModel, out: np.ndarray) -> None:
    keys = ["gpu", "pricing_type", "period"]
    nodes = model.nodes
    replicas = model.replicas.assign(replicas=out[model.replicas["col"]])
    size = nodes.groupby("gpu")["gpus_per_node"].first()
    needed = nodes_needed_table(replicas.assign(node_gpus=replicas["gpu"].map(size)), keys)
    index = pd.MultiIndex.from_frame(nodes[keys])
    out[nodes["col"]] = needed.reindex(index).fillna(0.0).to_numpy()


def _split(program: LinearProgram, values: np.ndarray, held: np.ndarray):
    """(free column mask, row bounds left for the free columns, the free columns' matrix,
    rows with a free column) once the ``held`` columns keep their ``values``."""
    free = np.ones(program.n_cols, dtype=bool)
    free[held] = False
    matrix = program.matrix.tocsc()
    held_activity = matrix[:, ~free] @ values[~free]
    lower = program.row_lower - held_activity
    upper = program.row_upper - held_activity
    rest = matrix[:, free].tocsr()
    return free, lower, upper, rest, np.diff(rest.indptr) > 0


def broken_rows(program: LinearProgram, values: np.ndarray,
                held: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of held columns only that the held ``values`` break: (rows, excess over the upper
    bound, shortfall under the lower bound) [row units; 0 on the side that holds]."""
    _, lower, upper, _, has_free = _split(program, values, held)
    over, under = np.maximum(-upper, 0.0), np.maximum(lower, 0.0)
    rows = np.flatnonzero(~has_free & ((over > FEASIBLE) | (under > FEASIBLE)))
    return rows, over[rows], under[rows]


def free_problem(program: LinearProgram, values: np.ndarray,
                 held: np.ndarray) -> tuple[LinearProgram, np.ndarray] | None:
    """The rows and columns left once the ``held`` columns keep their ``values``: the free
    columns' program and their indices in ``program`` (None when a row with no free column
    is broken by the held values)."""
    free, lower, upper, rest, has_free = _split(program, values, held)
    if (lower[~has_free] > FEASIBLE).any() or (upper[~has_free] < -FEASIBLE).any():
        return None
    columns = np.flatnonzero(free)
    rows = rest[has_free].tocoo()
    sub = LinearProgram()
    sub.add_columns(len(columns), lower=program.col_lower[columns],
                    upper=program.col_upper[columns], integer=program.integer[columns])
    sub.add_rows(int(has_free.sum()), rows.row, rows.col, rows.data,
                 lower=lower[has_free], upper=upper[has_free])
    return sub, columns


def completed(program: LinearProgram, cost: np.ndarray, values: np.ndarray, held: np.ndarray,
              options: SolveOptions, seconds: float) -> np.ndarray | None:
    """``values`` with every column not in ``held`` chosen by the cheapest completion found
    in ``seconds`` (at least :data:`LEAST_COMPLETION_S`); None when the held values admit
    none, or none was found in time."""
    values = np.asarray(values, dtype=float)
    left = free_problem(program, values, held)
    if left is None:
        logger.debug("completion: the held columns break a row of their own")
        return None
    sub, columns = left
    out = values.copy()
    if len(columns):
        result = open_solver(sub, cost[columns], options).solve(
            time_limit_s=max(seconds, LEAST_COMPLETION_S), mip_gap=options.mip_gap)
        if result.values is None:
            logger.debug("completion: %s", result.outcome.status)
            return None
        integer = sub.integer
        out[columns] = np.where(integer, np.round(result.values), result.values)
    violation = program.violation(out)
    if violation > FEASIBLE or not is_whole(program, out):
        logger.debug("completion breaks a row by %.3g", violation)
        return None
    return out
