"""How long small plans take, and what pandas' string storage does to it.

A plan of a few configurations and periods solves in milliseconds; nearly all of its time is
pandas: thousands of operations (merges, group-bys, column picks) on frames of a few rows to a
few thousand, each with a fixed cost. Most of the test suite is such plans, and so is every
what-if variant. This script times:

- ``tiny``: one workload, 2 configurations x 2 request buckets x 2 hourly periods, on-demand and
  1-year reserved, N+1;
- ``small``: 2 workloads in one pool, 6 configurations x 3 buckets x 6 periods, on-demand, spot
  (at most 30 % of the GPUs) and 1-year reserved, N+1 on one workload;
- ``example``: the built-in example (``fleetplan plan`` without arguments), marginal values
  included, the catalogs loaded once beforehand as the CLI loads them.

Each case runs in a fresh process per string storage (``python``, which fleetplan sets when
imported, and ``pyarrow``, pandas 3's default, set by ``FLEETPLAN_STRING_STORAGE``), the two
alternating ``--rounds`` times, since this machine's speed changes from hour to hour. Printed
per case and storage: the median and best wall time of a plan, its CPU time (all threads), and
the plan's cost, which must be the same under both storages.

Usage: python benchmarks/bench_small_plans.py [--cases tiny,small,example] [--repeat N]
    [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import pandas as pd
from bench_example_plan import cpu_s

from fleetplan.catalogs import load_catalogs
from fleetplan.optimizer.example import example_scenario
from fleetplan.optimizer.fleet_problem import Problem, profile_periods
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.scenario_planning import plan_scenario

CASES = ("tiny", "small", "example")
STORAGES = ("python", "pyarrow")
HOURS_PER_MONTH = 730.0


def synthetic_problem(n_configs: int, n_buckets: int, n_periods: int, workloads: list[str],
                      pricing: dict[str, float], redundancy_k: list[int], **scalars) -> Problem:
    """A one-month horizon whose periods share its hours evenly, and workloads sharing one
    pool; configuration c runs on GPU type g{c} at TP 1 with (c + 1) * (b + 2) / 2 req/s per
    replica on bucket b; demand [req/s] rises and falls over the periods. ``pricing`` maps a
    pricing type to its multiple of the GPU's base price [USD/GPU-hour]."""
    configs = pd.DataFrame({"config": [f"c{c}" for c in range(n_configs)], "pool": "p",
                            "gpu": [f"g{c}" for c in range(n_configs)], "tp": 1})
    cells = pd.MultiIndex.from_product([workloads, range(n_buckets), range(n_configs)],
                                       names=["workload", "bucket", "c"]).to_frame(index=False)
    cells["config"] = "c" + cells["c"].astype(str)
    cells["req_s_per_replica"] = (cells["c"] + 1) * (cells["bucket"] + 2) / 2.0
    demand = pd.MultiIndex.from_product([workloads, range(n_buckets), range(n_periods)],
                                        names=["workload", "bucket", "period"]
                                        ).to_frame(index=False)
    demand["req_s"] = 2.0 + 3.0 * np.sin(np.pi * (demand["period"] + 0.5) / n_periods) + \
        demand["bucket"]
    base_usd = 0.8 + 0.9 * np.arange(n_configs) ** 1.1
    offers = pd.DataFrame([(f"g{c}", kind, base_usd[c] * factor, np.nan)
                           for c in range(n_configs) for kind, factor in pricing.items()],
                          columns=["gpu", "pricing_type", "usd_per_gpu_hour", "max_gpus"])
    return Problem(
        workloads=pd.DataFrame({"workload": workloads, "pool": "p",
                                "redundancy_k": redundancy_k}),
        periods=profile_periods(n_periods, 1, HOURS_PER_MONTH, 1.0),
        demand=demand, configs=configs,
        candidates=cells[["workload", "bucket", "config", "req_s_per_replica"]],
        offers=offers,
        gpus=pd.DataFrame({"gpu": configs["gpu"], "gpus_per_node": 1, "max_gpus": np.nan}),
        hours_per_month=HOURS_PER_MONTH, horizon_months=1.0, **scalars)


def planner(case: str):
    """A function making one plan of ``case``, returning (status, USD per month)."""
    if case == "tiny":
        problem = synthetic_problem(2, 2, 2, ["w"], {"on_demand": 1.0, "reserved_1y": 0.65},
                                    [1])
        return lambda: _summary(optimize_problem(problem))
    if case == "small":
        problem = synthetic_problem(
            6, 3, 6, ["chat", "batch"], {"on_demand": 1.0, "spot": 0.4, "reserved_1y": 0.65},
            [1, 0], spot_max_share=0.3)
        return lambda: _summary(optimize_problem(problem))
    scenario, catalogs = example_scenario(), load_catalogs()
    return lambda: _summary(plan_scenario(scenario, catalogs, what_if=True))


def _summary(plan) -> tuple[str, float]:
    return plan.status, round(float(plan.usd_per_month), 2)


def run_case(case: str, storage: str, repeat: int) -> dict:
    """Time ``repeat`` plans of ``case`` under ``storage``, after one untimed warm-up plan
    (imports and first-call caches)."""
    if pd.get_option("mode.string_storage") != storage:
        raise SystemExit(f"the plans would run on {pd.get_option('mode.string_storage')} "
                         f"strings, not {storage}")
    make_plan = planner(case)
    make_plan()
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        started, cpu = time.perf_counter(), cpu_s()
        result = make_plan()
        walls.append(time.perf_counter() - started)
        cpus.append(cpu_s() - cpu)
    return {"walls": walls, "cpus": cpus, "status": result[0], "usd_per_month": result[1]}


def measured(case: str, storage: str, repeat: int) -> dict:
    """``run_case`` in a fresh process whose import of fleetplan sets ``storage``, so every
    frame, the package's constants included, has it."""
    done = subprocess.run([sys.executable, __file__, "--child", case, storage, str(repeat)],
                          capture_output=True, text=True, check=True,
                          env={**os.environ, "FLEETPLAN_STRING_STORAGE": storage})
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated: " +
                        ", ".join(CASES))
    parser.add_argument("--repeat", type=int, default=10, help="plans timed per process")
    parser.add_argument("--rounds", type=int, default=2,
                        help="processes per case and storage, the storages alternating")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        case, storage, repeat = arguments.child
        print(json.dumps(run_case(case, storage, int(repeat))))
        return
    for case in arguments.cases.split(","):
        runs = {storage: [] for storage in STORAGES}
        for _ in range(arguments.rounds):
            for storage in STORAGES:
                runs[storage].append(measured(case, storage, arguments.repeat))
        for storage, results in runs.items():
            walls = [w for r in results for w in r["walls"]]
            cpus = [c for r in results for c in r["cpus"]]
            costs = sorted({(r["status"], r["usd_per_month"]) for r in results})
            print(f"{case} plan, {storage} strings: median {statistics.median(walls):.3f} s, "
                  f"best {min(walls):.3f} s, CPU median {statistics.median(cpus):.3f} s "
                  f"({len(walls)} plans); {', '.join(f'{s} ${u:,.2f}/month' for s, u in costs)}")


if __name__ == "__main__":
    main()
