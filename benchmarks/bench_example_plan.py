"""The built-in example plan: how long it takes, and what the cost-cover cut does to it.

Prints, for the scenario ``fleetplan plan`` solves without arguments:

- the plan without and with the marginal values (the re-solves that price each binding limit),
  best of ``--repeat`` runs in this process (catalogs loaded once, as the CLI loads them once);
- the example's merged-period MILP built with and without the cost-cover cut
  (``fleetplan/optimizer/cost_cover.py``): its LP bound, and the time HiGHS takes to reach the
  scenario's gap from scratch.

Usage: python benchmarks/bench_example_plan.py [--repeat N] [--skip-cut]
"""

from __future__ import annotations

import argparse
import time

from fleetplan.catalogs import load_catalogs
from fleetplan.optimizer.decomposition import solve_whole
from fleetplan.optimizer.example import example_scenario
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.model_variants import CoverBuilds
from fleetplan.optimizer.period_merging import merge_identical_periods
from fleetplan.optimizer.period_solves import Deadline
from fleetplan.optimizer.scenario_planning import plan_scenario, prepare
from fleetplan.optimizer.solver import SolveOptions, open_solver


def time_plans(repeat: int) -> None:
    scenario, catalogs = example_scenario(), load_catalogs()
    for what_if in (False, True):
        best, plan = float("inf"), None
        for _ in range(repeat):
            started = time.perf_counter()
            plan = plan_scenario(scenario, catalogs, what_if=what_if)
            best = min(best, time.perf_counter() - started)
        label = "with marginal values" if what_if else "without marginal values"
        print(f"example plan {label}: {best:.2f} s (best of {repeat}), {plan.status}, "
              f"gap {plan.gap:.2%}, ${plan.usd_per_month:,.0f}/month")


def compare_cut() -> None:
    scenario = example_scenario()
    problem, _ = merge_identical_periods(prepare(scenario).problem)
    options = SolveOptions(time_limit_s=120.0, mip_gap=scenario.solver.mip_gap)
    for cut in (False, True):
        started = time.perf_counter()
        model = build_model(problem, cost_cover=cut, cover_build=CoverBuilds())  # as plans do
        built = time.perf_counter() - started
        lp = open_solver(model.program, model.cost, options).solve(
            time_limit_s=60.0, mip_gap=options.mip_gap, relax=True)
        started = time.perf_counter()
        outcome = solve_whole(model, options, Deadline(options.time_limit_s))
        label = "with the cost-cover cut" if cut else "without the cost-cover cut"
        print(f"merged example MILP {label}: built in {built:.2f} s, LP bound "
              f"${lp.outcome.objective:,.0f}, solved in {time.perf_counter() - started:.2f} s to "
              f"{outcome.status} at gap {outcome.gap:.2%}, ${outcome.objective:,.0f} over the "
              "horizon")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best is shown)")
    parser.add_argument("--skip-cut", action="store_true", help="only the plan timings")
    arguments = parser.parse_args()
    time_plans(arguments.repeat)
    if not arguments.skip_cut:
        compare_cut()


if __name__ == "__main__":
    main()
