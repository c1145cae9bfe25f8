"""The built-in example plan: how long it takes, and what the cost-cover cut does to it.

Prints, for the scenario ``fleetplan plan`` solves without arguments:

- the plan without and with the marginal values (the re-solves that price each binding limit),
  best and median of ``--repeat`` runs in this process (catalogs loaded once, as the CLI loads
  them once), and the CPU time of all the process's threads: this machine's speed varies from
  hour to hour, and the CPU time says how much work a plan is even when its wall time moves;
- the example's merged-period MILP built with and without the cost-cover cut
  (``fleetplan/optimizer/cost_cover.py``): its LP bound, and the time HiGHS takes to reach the
  scenario's gap from scratch.

With ``--scenario spot`` the plans are those of the example with a binding spot share
(:data:`SPOT_CAPPED`); ``--resolves`` chooses which binding limits are re-solved on the changed
base model (``optimizer/relaxed_variants.py``) rather than built anew; ``--side-by-side-threads``
the HiGHS threads of each solve that runs beside another (``optimization.SIDE_BY_SIDE_THREADS``).

Usage: python benchmarks/bench_example_plan.py [--repeat N] [--skip-cut] [--scenario spot]
    [--resolves varied|rebuilt|varied+spot] [--side-by-side-threads N]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

from fleetplan.catalogs import load_catalogs
from fleetplan.optimizer import optimization, relaxed_variants
from fleetplan.optimizer.decomposition import solve_whole
from fleetplan.optimizer.example import example_data, example_scenario
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.period_merging import merge_identical_periods
from fleetplan.optimizer.period_solves import Deadline
from fleetplan.optimizer.scenario_files import validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario, prepare
from fleetplan.optimizer.solver import SolveOptions, open_solver

#: ``--scenario spot``: the example with spot pricing at most 20 % of the GPUs and H100s and
#: A100s capped at 16 and 24, so the spot share binds too.
SPOT_CAPPED = {"spot_max_share": 0.2, "pricing": ["on_demand", "reserved_1y", "spot"],
               "max_gpus": {"h100-sxm": 16, "a100-80gb-sxm": 24}}


def scenario_of(name: str):
    """The example (``example``) or its spot-capped form (``spot``)."""
    if name == "example":
        return example_scenario()
    data = example_data()
    fleet = data["fleet"]
    fleet.update(spot_max_share=SPOT_CAPPED["spot_max_share"], pricing=SPOT_CAPPED["pricing"])
    for gpu in fleet["gpus"]:
        if isinstance(gpu, dict) and gpu["id"] in SPOT_CAPPED["max_gpus"]:
            gpu["max_gpus"] = SPOT_CAPPED["max_gpus"][gpu["id"]]
    return validate_scenario(data, source="bench_example_plan spot scenario")


def use_resolves(kind: str) -> None:
    """Which binding limits are re-solved on the changed base model: ``varied`` (as plans do),
    ``rebuilt`` (none: every re-solve built anew, as before ``relaxed_variants``), or
    ``varied+spot`` (the spot share too)."""
    if kind == "rebuilt":
        relaxed_variants.CHANGES.clear()
    elif kind == "varied+spot":
        relaxed_variants.CHANGES["spot_share"] = relaxed_variants.change_rows


def cpu_s() -> float:
    """CPU time of this process so far, all its threads [s]."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def time_plans(repeat: int, scenario_name: str = "example") -> None:
    scenario, catalogs = scenario_of(scenario_name), load_catalogs()
    for what_if in (False, True):
        walls, cpus, plan = [], [], None
        for _ in range(repeat):
            started, cpu = time.perf_counter(), cpu_s()
            plan = plan_scenario(scenario, catalogs, what_if=what_if)
            walls.append(time.perf_counter() - started)
            cpus.append(cpu_s() - cpu)
        label = "with marginal values" if what_if else "without marginal values"
        print(f"{scenario_name} plan {label}: {min(walls):.2f} s (best of {repeat}; median "
              f"{statistics.median(walls):.2f} s), CPU {min(cpus):.2f} s (median "
              f"{statistics.median(cpus):.2f} s), {plan.status}, gap {plan.gap:.2%}, "
              f"${plan.usd_per_month:,.0f}/month")
        for description in plan.binding_constraints["description"] if what_if else []:
            print(f"  {description}")


def compare_cut() -> None:
    scenario = example_scenario()
    problem, _ = merge_identical_periods(prepare(scenario).problem)
    options = SolveOptions(time_limit_s=120.0, mip_gap=scenario.solver.mip_gap)
    for cut in (False, True):
        started = time.perf_counter()
        model = build_model(problem, cost_cover=cut)
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
    parser.add_argument("--scenario", choices=["example", "spot"], default="example",
                        help="the example, or the example with a binding spot share (SPOT_CAPPED)")
    parser.add_argument("--side-by-side-threads", type=int, default=1,
                        help="HiGHS threads of each solve that runs beside another (0: HiGHS's "
                        "default; plans use 1)")
    parser.add_argument("--resolves", choices=["varied", "rebuilt", "varied+spot"],
                        default="varied", help="binding limits re-solved on the changed base "
                        "model (as plans do), all built anew, or the spot share varied too")
    arguments = parser.parse_args()
    use_resolves(arguments.resolves)
    optimization.SIDE_BY_SIDE_THREADS = arguments.side_by_side_threads or None
    time_plans(arguments.repeat, arguments.scenario)
    if not arguments.skip_cut:
        compare_cut()


if __name__ == "__main__":
    main()
