"""HiGHS's root restarts on and off, over the shipped scenarios and variants of the example.

``solver.MIP_RESTARTS`` is off: this prints, for each scenario, the whole plan (marginal values
included, as ``fleetplan plan`` makes it) with restarts on and off, in one process with the
catalogs loaded once, and the size of the plan's MILP. The variants change one thing of the
built-in example each:

- ``x0.5``, ``x2``, ``x4``: every workload's demand scaled;
- ``spot30``: spot pricing at most 30 % of the GPUs; ``spot30_x2``: that at twice the demand;
- ``spot_capped``: ``bench_example_plan.py --scenario spot`` (its ``scenario_of("spot")``: spot
  at most 20 %, H100s and A100s capped at 16 and 24);
- ``nodes``, ``nodes_x2``: whole nodes;
- ``noshare``: no replicas shared between a model's workloads;
- ``k2``: N+2 for chat;
- ``flat``: no hourly profiles.

Usage: python benchmarks/bench_solver_settings.py [--cases NAME ...]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench_example_plan import scenario_of

import fleetplan
from fleetplan.catalogs import load_catalogs
from fleetplan.optimizer import optimization, solver
from fleetplan.optimizer.example import example_data
from fleetplan.optimizer.scenario_files import load_scenario, validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario

SHIPPED = Path(fleetplan.__file__).parent / "examples"


def scaled(factor: float) -> Callable[[dict], None]:
    def change(data: dict) -> None:
        for workload in data["workloads"]:
            key = "requests_per_s" if "requests_per_s" in workload else "tokens_per_month"
            workload[key] *= factor
    return change


def with_spot(share: float) -> Callable[[dict], None]:
    def change(data: dict) -> None:
        data["fleet"]["pricing"].append("spot")
        data["fleet"]["spot_max_share"] = share
    return change


def fleet_setting(**settings) -> Callable[[dict], None]:
    return lambda data: data["fleet"].update(settings)


def n_plus_2(data: dict) -> None:
    data["workloads"][0]["redundancy_k"] = 2


def flat(data: dict) -> None:
    for workload in data["workloads"]:
        workload.pop("hourly_profile", None)


def both(*changes: Callable[[dict], None]) -> Callable[[dict], None]:
    def change(data: dict) -> None:
        for one in changes:
            one(data)
    return change


VARIANTS = {"example": both(), "x0.5": scaled(0.5), "x2": scaled(2.0), "x4": scaled(4.0),
            "spot30": with_spot(0.3), "spot30_x2": both(with_spot(0.3), scaled(2.0)),
            "nodes": fleet_setting(whole_nodes=True),
            "nodes_x2": both(fleet_setting(whole_nodes=True), scaled(2.0)),
            "noshare": fleet_setting(share_replicas=False), "k2": n_plus_2, "flat": flat}


def scenarios() -> dict:
    cases = {}
    for name, change in VARIANTS.items():
        data = example_data()
        change(data)
        cases[name] = lambda data=data, name=name: validate_scenario(data, source=name)
    cases["spot_capped"] = partial(scenario_of, "spot")
    for path in sorted(SHIPPED.glob("*.yaml")):
        cases[path.stem] = lambda path=path: load_scenario(path)
    return cases


def main() -> None:
    cases = scenarios()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=list(cases), default=list(cases))
    arguments = parser.parse_args()
    catalogs, columns = load_catalogs(), {}
    solve = optimization.solve_fleet

    def sized(model, *args, **kwargs):
        columns["n"] = model.program.n_cols
        return solve(model, *args, **kwargs)

    optimization.solve_fleet = sized
    for name in arguments.cases:
        scenario, cells = cases[name](), []
        for restarts in (True, False):
            solver.MIP_RESTARTS = restarts
            started = time.perf_counter()
            plan = plan_scenario(scenario, catalogs)
            seconds, label = time.perf_counter() - started, "on " if restarts else "off"
            cells.append(f"restarts {label} {seconds:6.2f} s ({plan.status}, gap {plan.gap:.2%}, "
                         f"${plan.usd_per_month:,.0f}/month)")
        print(f"{name:12s} {columns['n']:5d} columns | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
