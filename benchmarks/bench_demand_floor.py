"""The demand floor (``optimizer/demand_floor.py``) on the hard scenarios: how long it takes,
how close it comes to the LP bound it stands in for, and that it never passes a proven bound.

For each hard scenario (``benchmarks/hard_scenarios/``), the model ``fleetplan plan`` builds
(identical periods merged, dominated configurations pruned, no cost-cover cut) gets its demand
floor timed, then its LP relaxation solved within ``--lp-limit`` and, for models under
``--mip-columns`` columns, its MILP within ``--mip-limit``. Each line prints the columns, the
floor and its seconds, the LP bound and the floor's share of it, the MILP's bound; a floor
above either bound (beyond round-off) is printed as ``ABOVE A BOUND`` and counted. The last
lines give the floor's share of the LP bound over the scenarios with an LP (median, quartiles)
and its slowest time.

Usage: python benchmarks/bench_demand_floor.py [--only 25,134] [--lp-limit 60]
[--mip-limit 10] [--mip-columns 20000] [--lp-columns 600000]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

from hard_problems import planned_problems, scenario_paths

from fleetplan.optimizer.demand_floor import demand_floor_usd
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.solver import SolveOptions, open_solver

#: Round-off forgiven when a floor is compared with a bound (relative, and absolute [USD]).
ROUND_OFF = (1e-6, 1e-6)


def proven_bound(model, time_limit_s: float, relax: bool) -> float:
    """The bound the LP (``relax``) or the MILP proves within ``time_limit_s`` [USD]; NaN
    when it proves none (an LP not solved to optimality, an infeasible model)."""
    result = open_solver(model.program, model.cost, SolveOptions(threads=1)).solve(
        time_limit_s=time_limit_s, mip_gap=1e-4, relax=relax)
    if relax and result.outcome.status != "optimal":
        return math.nan
    return result.outcome.bound if result.outcome.status in ("optimal", "time_limit") \
        else math.nan


def above(floor: float, bound: float) -> bool:
    relative, absolute = ROUND_OFF
    return math.isfinite(bound) and floor > bound * (1 + relative) + absolute


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated seeds")
    parser.add_argument("--lp-limit", type=float, default=60.0, help="[s]")
    parser.add_argument("--mip-limit", type=float, default=10.0, help="[s]")
    parser.add_argument("--mip-columns", type=int, default=20_000)
    parser.add_argument("--lp-columns", type=int, default=600_000)
    args = parser.parse_args()
    shares, slowest, broken = [], 0.0, 0
    for path, problem in planned_problems(scenario_paths(args.only)):
        model = build_model(problem, cost_cover=False)
        started = time.perf_counter()
        floor = demand_floor_usd(model)
        seconds = time.perf_counter() - started
        slowest = max(slowest, seconds)
        columns = model.program.n_cols
        lp = proven_bound(model, args.lp_limit, relax=True) \
            if columns <= args.lp_columns else math.nan
        mip = proven_bound(model, args.mip_limit, relax=False) \
            if columns <= args.mip_columns else math.nan
        share = floor / lp if math.isfinite(lp) and lp > 0 else math.nan
        if math.isfinite(share):
            shares.append(share)
        wrong = above(floor, lp) or above(floor, mip)
        broken += wrong
        print(f"{path.stem:>11} {columns:>10,} columns  floor ${floor:>15,.0f} in {seconds:5.2f} s"
              f"  LP ${lp:>15,.0f} ({share:6.1%})  MILP bound ${mip:>15,.0f}"
              f"{'  ABOVE A BOUND' if wrong else ''}", flush=True)
    if len(shares) >= 2:
        quartiles = statistics.quantiles(shares, n=4)
        print(f"floor / LP bound over {len(shares)} scenarios: median {quartiles[1]:.1%}, "
              f"quartiles {quartiles[0]:.1%}-{quartiles[2]:.1%}, "
              f"range {min(shares):.1%}-{max(shares):.1%}")
    print(f"slowest floor {slowest:.2f} s; floors above a proven bound: {broken}")


if __name__ == "__main__":
    main()
