r"""A valid cut from whole replicas: each pool's fleet in a period costs at least what the
cheapest whole-replica fleet for that pool and period alone costs.

Why: a replica is a large block of cost (one H100 for a year is about $26k), so the LP
relaxation, which buys fractions of replicas, sits several percent below the best whole plan,
and branch and bound spends most of its time closing that gap. The cut closes the part of it
that comes from rounding each pool's replicas up in each period.

For every pool :math:`p` and period :math:`t` a small MILP finds

.. math::

    K_{pt} = \min \sum_c \underline{c}_{g(c)}\, \mathrm{tp}_c\, Y_c
    \quad \text{s.t. } Y \text{ serves } p\text{'s demand in } t \text{ (routing, capacity,
    N+k, SLO levels as in the whole model)}

with :math:`\underline{c}_g` the lowest price of GPU type :math:`g` over its offers [USD/GPU-hour]
and no caps, budgets, spot shares or node sizes. Any plan of the whole model restricted to
:math:`(p, t)` is feasible there and priced no lower, so

.. math::

    \sum_{c \in p,\, \text{pricing}} \underline{c}_{g(c)}\, \mathrm{tp}_c\, Y_{c,t} \ge K_{pt}

holds for every feasible plan: the row removes no plan, only fractional points. The cut is a
lower bound in the sense of the dual bound: it uses each small MILP's dual bound, never its
incumbent, so a small MILP stopped early still gives a valid (weaker) row.

Pools and periods with the same demand share one small MILP; a model of one pool in one
period gets no cut (its small MILP would be the model itself, solved twice). A model with more than
:data:`MAX_SOLVES` distinct ones gets no cut at all (it stays correct, only its relaxation is
weaker): a week of hours is first planned on representative periods
(``representative_periods.py``), whose model is small enough for the cut. The small MILPs are
built as one model (:func:`cover_problem`): each distinct (pool, period) becomes an hour of its
own there, and each small MILP is that hour's rows cut out of it (``linear_program.restricted``),
so a plan pays for one build rather than one per pool (within the example's plan, two builds
and six variants took 0.37-0.47 s, the one build and its cuts 0.21-0.24 s). The caller's ``build`` may make that
model as a variant of an earlier one (``model_variants.CoverBuilds``). The small MILPs share a
time budget (the plan's build gives them a quarter of the time left, ``milp.COVER_SHARE``):
those not started in it give no row, and the rows solved stay valid.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.linear_program import restricted
from fleetplan.optimizer.solve_results import Deadline
from fleetplan.optimizer.solver import SolveOptions, open_solver

logger = logging.getLogger(__name__)

#: Most small MILPs solved for one model (each takes 0.05-0.5 s to build and solve).
MAX_SOLVES = 16
#: Time limit of each small MILP [s]; its dual bound is valid however it stops.
SOLVE_LIMIT_S = 0.5
#: Relative tolerance taken off each bound, so round-off never cuts a feasible plan.
SAFETY = 1e-7


def lowest_gpu_prices(problem: Problem) -> pd.Series:
    """The lowest price of each GPU type over its offers [USD/GPU-hour]."""
    return problem.offers.groupby("gpu")["usd_per_gpu_hour"].min()


def demand_signatures(problem: Problem) -> pd.DataFrame:
    """pool, period and a key shared by (pool, period) pairs with the same demand."""
    demand = problem.demand[problem.demand["req_s"] > 0].merge(
        problem.workloads[["workload", "pool"]], on="workload")
    if demand.empty:
        return pd.DataFrame(columns=["pool", "period", "key"])
    demand = demand.sort_values(["pool", "period", "workload", "bucket"])
    text = (demand["workload"].astype(str) + ":" + demand["bucket"].astype(str) + "="
            + demand["req_s"].round(9).astype(str))
    keys = text.groupby([demand["pool"], demand["period"]]).agg("|".join)
    table = keys.rename("signature").reset_index()
    table["key"] = table["pool"].astype(str) + "#" + table["signature"]
    return table.drop(columns="signature")


def cover_problem(problem: Problem, blocks: pd.DataFrame) -> Problem:
    """One period per line of ``blocks`` (pool, period): that pool's demand in that period
    alone, an hour of its own, every GPU at its lowest price, no caps, and the plain cost as
    the objective (no CVaR term: the cut bounds replica cost, not risk). Its periods share no
    row but the horizon-wide simplicity rules, so each period's rows are one small MILP."""
    block = blocks[["pool", "period"]].assign(block=np.arange(len(blocks)))
    demand = problem.demand.merge(problem.workloads[["workload", "pool"]], on="workload").merge(
        block, on=["pool", "period"])
    prices = lowest_gpu_prices(problem)
    # A new Problem, not a copy: every other limit (caps, budgets, sites, APIs, today's fleet,
    # CVaR, ...) keeps its default, so a family added later cannot leak into the cut.
    return Problem(
        workloads=problem.workloads,
        periods=pd.DataFrame({"period": block["block"].to_numpy(), "month": 0, "hour": 0,
                              "hours": 1.0, "month_weight": 1.0}),
        demand=demand[[*problem.demand.columns.drop("period"), "block"]].rename(
            columns={"block": "period"}),
        configs=problem.configs, candidates=problem.candidates,
        offers=pd.DataFrame({"gpu": prices.index, "pricing_type": "on_demand",
                             "usd_per_gpu_hour": prices.to_numpy(), "max_gpus": math.nan}),
        gpus=problem.gpus.assign(gpus_per_node=1, max_gpus=math.nan),
        target_utilization=problem.target_utilization, hours_per_month=1.0, horizon_months=1.0,
        max_configs_per_workload=problem.max_configs_per_workload,
        one_quant_per_model=problem.one_quant_per_model)


def row_blocks(model) -> np.ndarray:
    """Each row's block (period) of a model of :func:`cover_problem`; -1 for a row every block
    keeps. A horizon-wide row (a simplicity rule's link of one period's routing share to its
    binary, or its cap on the binaries) goes to the block of the columns it holds, or to every
    block when it holds only the binaries, which no period's rows hold. So each block is its
    pool and hour alone: no other hour's routing shares ride along in its small MILP."""
    table = model.constraint_table()
    period = np.full(model.program.n_rows, -1, dtype=np.int64)
    period[table["row"].to_numpy()] = table["period"].to_numpy()
    matrix = model.program.matrix.tocsr()
    entry_row = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    column_block = np.full(model.program.n_cols, -1, dtype=np.int64)
    own = period[entry_row] >= 0
    column_block[matrix.indices[own]] = period[entry_row[own]]
    blocks = period.copy()
    wide = ~own
    # the highest block among a horizon-wide row's columns (-1: only binaries); a row that held
    # two blocks' columns would join one of them, its other columns free there: still a
    # relaxation of each block, so its bound stays valid
    np.maximum.at(blocks, entry_row[wide], column_block[matrix.indices[wide]])
    return blocks


def least_pool_costs(problem: Problem, build: Callable, options: SolveOptions,
                     seconds: float = math.inf) -> pd.DataFrame:
    """pool, period, usd_per_hour: the lowest cost of serving each pool in each period with
    whole replicas [USD/h], a dual bound (module docstring). The small MILPs, cut out of one
    model ``build`` makes of :func:`cover_problem`, share ``seconds``; those left when it runs
    out give no row (the others stay valid)."""
    deadline = Deadline(seconds)
    signatures = demand_signatures(problem)
    if len(signatures) <= 1:  # one pool in one period: the small MILP would be the model itself
        return pd.DataFrame(columns=["pool", "period", "usd_per_hour"])
    firsts = signatures.drop_duplicates("key").reset_index(drop=True)
    if len(firsts) > MAX_SOLVES:
        logger.debug("cost cover: %d distinct pool demands, more than %d: no cut",
                     len(firsts), MAX_SOLVES)
        return pd.DataFrame(columns=["pool", "period", "usd_per_hour"])
    bounds = {}
    if deadline.remaining() > 0:
        model = build(cover_problem(problem, firsts))
        blocks = row_blocks(model)
        for block, key in enumerate(firsts["key"]):
            left = deadline.remaining()
            if left <= 0:
                logger.debug("cost cover: out of time after %d of %d small MILPs", len(bounds),
                             len(firsts))
                break
            rows = np.flatnonzero((blocks == block) | (blocks < 0))
            if len(rows) == 0:
                continue
            part = restricted(model.program, rows)
            result = open_solver(part.program, model.cost[part.cols], options).solve(
                time_limit_s=min(SOLVE_LIMIT_S, left), mip_gap=1e-6)
            if result.outcome.status in ("optimal", "time_limit") and \
                    math.isfinite(result.outcome.bound):
                bounds[key] = result.outcome.bound
    costs = signatures.assign(usd_per_hour=signatures["key"].map(bounds))
    costs = costs.dropna(subset=["usd_per_hour"])
    return costs[costs["usd_per_hour"] > 0][["pool", "period", "usd_per_hour"]]


def cover_terms(replicas: pd.DataFrame, prices: pd.Series) -> pd.DataFrame:
    """Replica columns per (pool, period) with their lowest-price weight [USD/h per replica]."""
    return replicas.assign(coef=replicas["gpu"].map(prices).to_numpy(dtype=float)
                           * replicas["tp"].to_numpy(dtype=float))


def cover_limits(costs: pd.DataFrame) -> np.ndarray:
    """Right-hand sides with the safety margin taken off [USD/h]."""
    return costs["usd_per_hour"].to_numpy(dtype=float) * (1.0 - SAFETY)
