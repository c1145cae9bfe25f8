"""How high a bound any decomposition by period can prove on ``bench_portfolio.py``'s cases:
the Dantzig-Wolfe bound, by column generation.

Each period's program (its own rows, a copy of the horizon-wide rows and of the reserved
columns, as ``period_solves.PeriodPrograms`` cuts it out) is a block; the master chooses, for
every period, a convex combination of that period's whole-replica plans, and reserved counts
``R`` (relaxed to fractions) that no period's copy exceeds:

.. math:: \\min\\ c_R^\\top R + \\sum_{t,q} c_{tq}\\,\\theta_{tq} \\quad \\text{s.t.}\\quad
          \\sum_q \\theta_{tq} = 1,\\quad \\sum_q r_{tq}\\,\\theta_{tq} \\le R \\ \\ \\forall t,
          \\qquad \\theta, R \\ge 0.

Its optimum is the best Lagrangian bound of the period decomposition [1]: every integrality
inside a period is kept, only the reserved counts' own integrality is lost. Each iteration
solves every period's MILP at prices :math:`\\lambda_t` for its reserved copy (two periods at a
time, one HiGHS thread each), whose bounds sum to a Lagrangian bound
:math:`L(\\lambda) = \\sum_t z_t(\\lambda) + \\sum_j \\min(0, c_j - \\sum_t \\lambda_{tj}) u_j`;
the plans found become the master's columns; the master LP's duals, smoothed towards the best
prices so far (Wentges' in-out rule [2], ``--smoothing``), are the next prices. The first
prices are the LP's (``lagrangian_prices.period_prices``), as the planner's own Lagrangian step
uses. The restricted master's optimum is an upper bound of the Dantzig-Wolfe bound, the best
Lagrangian bound a lower one: when the master falls below a plan's cost times (1 - gap target),
no bound by period can prove that plan within the target.

Usage: python benchmarks/bench_period_decomposition.py [--case day|week|year|stochastic]
[--iterations 30] [--smoothing 0.7] [--period-seconds 3] [--period-gap 1e-3]

[1] G. B. Dantzig and P. Wolfe, "Decomposition principle for linear programs", Operations
    Research 8 (1960) 101-111.
[2] P. Wentges, "Weighted Dantzig-Wolfe decomposition for linear mixed-integer programming",
    International Transactions in Operational Research 4 (1997) 151-162.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from portfolio_cases import CASES, FLEXIBLE, relaxed

from fleetplan.optimizer.lagrangian_prices import period_prices
from fleetplan.optimizer.linear_program import LinearProgram
from fleetplan.optimizer.period_solves import PeriodPrograms, _local
from fleetplan.optimizer.solver import SolveOptions, open_solver


class PeriodBlocks:
    """One HiGHS instance per period program, its reserved copy priced anew each round."""

    def __init__(self, programs: PeriodPrograms, seconds: float, gap: float) -> None:
        model = programs.model
        self.periods, self.reserved = programs.periods(), programs.reserved
        self.seconds, self.gap = seconds, gap
        self.blocks = {}
        for period in self.periods:
            part = programs.parts[period]
            where, which = _local(part, self.reserved)
            own = model.cost[part.cols].copy()
            own[where] = 0.0  # the reserved copy is paid through R in the master
            solver = open_solver(part.program, own, SolveOptions(threads=1))
            self.blocks[period] = (solver, own, where, which)

    def solve(self, period: int, prices: np.ndarray) -> tuple[float, float, np.ndarray]:
        """(MILP bound at ``prices`` [USD], the plan's own cost [USD], its reserved copy)."""
        solver, own, where, which = self.blocks[period]
        cost = own.copy()
        cost[where] = prices[which]
        solver.set_cost(cost)
        result = solver.solve(time_limit_s=self.seconds, mip_gap=self.gap)
        copy = np.zeros(len(self.reserved))
        copy[which] = result.values[where]
        return result.outcome.bound, float(own @ result.values), copy


def lagrangian_bound(bounds: list[float], reserved_cost: np.ndarray, upper: np.ndarray,
                     prices: np.ndarray) -> float:
    """L(lambda) [USD]: the periods' bounds plus each reserved count at its bound that the
    prices leave cheapest (its upper bound where they sum past its cost)."""
    slack = reserved_cost - prices.sum(axis=0)
    over = slack < -1e-9
    return float(sum(bounds) + np.sum(slack[over] * upper[over]))


def master(costs: np.ndarray, copies: np.ndarray, owners: np.ndarray, n_periods: int,
           reserved_cost: np.ndarray, lower: np.ndarray, upper: np.ndarray):
    """The restricted master LP over the plans found: (its optimum [USD], the reserved prices
    its duals give, one row per period)."""
    n_reserved, n_plans = len(reserved_cost), len(costs)
    plan_rows, plan_reserved = np.nonzero(copies)
    rows = np.concatenate([owners, n_periods + owners[plan_rows] * n_reserved + plan_reserved,
                           n_periods + np.arange(n_periods * n_reserved)])
    cols = np.concatenate([n_reserved + np.arange(n_plans), n_reserved + plan_rows,
                           np.tile(np.arange(n_reserved), n_periods)])
    coefs = np.concatenate([np.ones(n_plans), copies[plan_rows, plan_reserved],
                            -np.ones(n_periods * n_reserved)])
    program = LinearProgram()
    program.add_columns(n_reserved, lower=lower, upper=upper)
    program.add_columns(n_plans, lower=0.0)
    one = np.ones(n_periods)
    program.add_rows(n_periods * (1 + n_reserved), rows, cols, coefs,
                     lower=np.concatenate([one, np.full(n_periods * n_reserved, -np.inf)]),
                     upper=np.concatenate([one, np.zeros(n_periods * n_reserved)]))
    solved = open_solver(program, np.concatenate([reserved_cost, costs]), SolveOptions()).solve(
        time_limit_s=120.0, mip_gap=0.0, relax=True)
    prices = -solved.duals[n_periods:].reshape(n_periods, n_reserved)
    return solved.outcome.objective, np.maximum(prices, 0.0)


def run(case: str, iterations: int, smoothing: float, seconds: float, gap: float) -> None:
    started = time.perf_counter()
    hours, model, lp = relaxed(case)
    programs = PeriodPrograms.of(model)
    blocks = PeriodBlocks(programs, seconds, gap)
    reserved = blocks.reserved
    reserved_cost = model.cost[reserved]
    lower, upper = model.program.col_lower[reserved], model.program.col_upper[reserved]
    first = period_prices(model, programs, lp)
    prices = center = np.array([first[t] for t in blocks.periods])
    print(json.dumps({"case": case, "columns": model.program.n_cols, "periods": len(blocks.periods),
                      "reserved_columns": len(reserved),
                      "lp_usd_per_hour": lp.outcome.objective / hours}), flush=True)
    best, costs, copies, owners = -np.inf, [], [], []
    with ThreadPoolExecutor(2) as pool:
        for iteration in range(iterations):
            round_started = time.perf_counter()
            answers = list(pool.map(blocks.solve, blocks.periods, prices))
            bound = lagrangian_bound([a[0] for a in answers], reserved_cost, upper, prices)
            if bound > best:
                best, center = bound, prices
            costs += [a[1] for a in answers]
            copies += [a[2] for a in answers]
            owners += list(range(len(blocks.periods)))
            upper_usd, duals = master(np.array(costs), np.array(copies), np.array(owners),
                                      len(blocks.periods), reserved_cost, lower, upper)
            prices = smoothing * center + (1.0 - smoothing) * duals
            print(json.dumps({"iteration": iteration, "lagrangian_usd_per_hour": bound / hours,
                              "best_usd_per_hour": best / hours,
                              "master_usd_per_hour": upper_usd / hours,
                              "seconds": time.perf_counter() - round_started}), flush=True)
    # weak duality: a Lagrangian bound above the restricted master would be an error here
    print(json.dumps({"case": case, "dantzig_wolfe_at_least_usd_per_hour": best / hours,
                      "dantzig_wolfe_at_most_usd_per_hour": upper_usd / hours,
                      "bounds_consistent": bool(best <= upper_usd * (1 + 1e-6)),
                      "seconds": time.perf_counter() - started}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=sorted(set(CASES) - set(FLEXIBLE)),
                        default="year")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--smoothing", type=float, default=0.7)
    parser.add_argument("--period-seconds", type=float, default=3.0)
    parser.add_argument("--period-gap", type=float, default=1e-3)
    args = parser.parse_args()
    run(args.case, args.iterations, args.smoothing, args.period_seconds, args.period_gap)


if __name__ == "__main__":
    main()
