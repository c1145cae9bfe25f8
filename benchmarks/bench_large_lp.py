"""How far past a short limit the LP relaxation of a large model runs, in the process and as
``fleetplan`` solves it (in a watched child process from ``LP_WATCHDOG_COLUMNS`` columns).

For each hard scenario (``benchmarks/hard_scenarios/``), the model ``fleetplan plan`` builds
(identical periods merged, dominated configurations pruned, no cost-cover cut) and, with
``--elastic``, the elastic model an infeasible plan builds (solved for the least unmet share,
as ``infeasibility.relaxed_unmet`` does) get their LP solved at ``--time-limit`` twice: in
this process (``HighsSolver`` as a watchdog's child runs it) and through ``open_solver`` as
the planner does. Each line prints the columns, both wall times and statuses; a watched LP
given under ``MIN_WATCHED_S`` (2 s) is not started, so limits from 2 s show the child
stopped. A last line times the distinct-column set of the largest model both ways:
``np.unique`` and ``linear_program.column_set``.

Usage: python benchmarks/bench_large_lp.py [--time-limit 3] [--only 38,141] [--elastic]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from hard_problems import planned_problems, scenario_paths

from fleetplan.optimizer.linear_program import column_set
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.solve_watchdog import CHILD_FLAG, LP_WATCHDOG_COLUMNS
from fleetplan.optimizer.solver import SolveOptions, open_solver


def timed_lp(model, objective: np.ndarray, time_limit_s: float, in_process: bool):
    """(wall seconds, status) of the model's LP at ``time_limit_s``."""
    options = SolveOptions(time_limit_s=time_limit_s, mip_gap=0.005, threads=1)
    if in_process:  # what a watchdog's child does: every solve in this process
        os.environ[CHILD_FLAG] = "1"
    try:
        solver = open_solver(model.program, objective, options)
        started = time.perf_counter()
        result = solver.solve(time_limit_s=time_limit_s, mip_gap=0.005, relax=True)
        return time.perf_counter() - started, result.outcome.status
    finally:
        os.environ.pop(CHILD_FLAG, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-limit", type=float, default=3.0, help="[s]")
    parser.add_argument("--only", default="", help="comma-separated seeds")
    parser.add_argument("--elastic", action="store_true", help="the elastic models too")
    args = parser.parse_args()
    largest = 0
    print(f"LP at a {args.time_limit:g} s limit; watched from {LP_WATCHDOG_COLUMNS:,} columns")
    for path, problem in planned_problems(scenario_paths(args.only)):
        kinds = [False, True] if args.elastic else [False]
        for elastic in kinds:
            model = build_model(problem, elastic=elastic, cost_cover=False)
            objective = model.unmet_share if elastic else model.cost
            here_s, here = timed_lp(model, objective, args.time_limit, in_process=True)
            planner_s, planner = timed_lp(model, objective, args.time_limit, in_process=False)
            largest = max(largest, model.program.n_cols)
            print(f"{path.stem:>11}{' elastic' if elastic else '        '} "
                  f"{model.program.n_cols:>10,} columns  in process {here_s:6.2f} s {here:<12}"
                  f"  as planned {planner_s:6.2f} s {planner}", flush=True)
    if largest:
        indices = np.random.default_rng(0).permutation(largest)
        started = time.perf_counter()
        np.unique(indices)
        unique_s = time.perf_counter() - started
        started = time.perf_counter()
        column_set(largest, indices)
        print(f"distinct set of {largest:,} column indices: np.unique {unique_s:.3f} s, "
              f"column_set {time.perf_counter() - started:.3f} s (numpy {np.__version__})")


if __name__ == "__main__":
    main()
