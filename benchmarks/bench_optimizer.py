"""Solve time and gap of the fleet MILP on two synthetic instances (one solver thread).

(a) Mélange-sized: one workload, 36 request buckets (6 input x 6 output lengths), 4 GPU types,
    one period, on-demand prices. Target: under 0.5 s.
(b) 20 GPU configurations x 10 workloads x 24 hourly periods x 3 pricing types (on-demand,
    spot, 1-year reserved), run with spot capped at 30 % of GPUs and uncapped; peak fleets of
    several hundred GPUs. Target: within 0.1 % of optimal in under 10 s.

(c) ``--case stochastic``: 3 demand scenarios x the 24-period portfolio of
    ``bench_portfolio.py`` (its ``stochastic`` case, run in its own process). Target: within
    1 % in <= 60 s.

Capacities are synthetic (a smooth function of request size, GPU speed and TP degree) so the
benchmark needs neither the performance engine nor the catalogs. Run:

    python benchmarks/bench_optimizer.py [--no-spot-cap] [--time-limit 10] [--case stochastic]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from fleetplan.optimizer.fleet_problem import Problem, profile_periods
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.solver import SolveOptions

#: GPU type: (relative speed, on-demand USD/GPU-hour)
GPUS = {"a10g": (1.0, 1.01), "l40s": (2.2, 1.25), "a100-80gb": (4.0, 1.79),
        "h100-sxm": (7.5, 2.95), "h200": (9.0, 3.50)}
TPS = (1, 2, 4, 8)


def bucket_capacity_req_s(speed, tp, input_tokens, output_tokens):
    """Synthetic requests/s per replica: decode-bound, prefill adds, TP scales sub-linearly."""
    seconds_per_request = (input_tokens / 40_000.0 + output_tokens / 1_500.0) / speed
    return tp ** 0.85 / seconds_per_request


def melange_sized(seed: int = 1) -> Problem:
    rng = np.random.default_rng(seed)
    inputs = np.array([64, 256, 1024, 2048, 4096, 8192])
    outputs = np.array([16, 64, 256, 512, 1024, 2048])
    size_in, size_out = (a.ravel() for a in np.meshgrid(inputs, outputs, indexing="ij"))
    gpus = list(GPUS)[:4]
    speed = np.array([GPUS[g][0] for g in gpus])[:, None]
    capacity = bucket_capacity_req_s(speed, 1, size_in[None, :], size_out[None, :])
    capacity *= rng.uniform(0.8, 1.2, capacity.shape)  # uneven advantages, as measured
    shares = rng.dirichlet(np.ones(36))
    from fleetplan.optimizer.fleet_problem import table_problem

    return table_problem(capacity, np.array([GPUS[g][1] for g in gpus]), 200.0 * shares)


def large(seed: int = 2, spot_cap: bool = True) -> Problem:
    rng = np.random.default_rng(seed)
    configs = pd.DataFrame([(f"{g}/tp{t}", "model", g, t) for g in GPUS for t in TPS],
                           columns=["config", "pool", "gpu", "tp"])
    workloads = pd.DataFrame({"workload": [f"w{i}" for i in range(10)], "pool": "model",
                              "redundancy_k": rng.integers(0, 2, 10)})
    sizes = pd.DataFrame({"workload": workloads["workload"], "bucket": 0,
                          "input_len": rng.choice([256, 1024, 4096], 10),
                          "output_len": rng.choice([64, 256, 1024], 10)})
    candidates = sizes.merge(configs, how="cross")
    speed = candidates["gpu"].map({g: v[0] for g, v in GPUS.items()})
    slo_penalty = rng.uniform(0.6, 1.0, len(candidates))  # tighter SLOs cut the knee batch
    candidates["req_s_per_replica"] = bucket_capacity_req_s(
        speed, candidates["tp"], candidates["input_len"], candidates["output_len"]) * slo_penalty
    periods = profile_periods(24, 1, 730.0, 12.0)
    hours = np.arange(24)
    base = rng.uniform(50, 600, 10)  # a fleet of several hundred GPUs at the peak
    phase = rng.uniform(0, 24, 10)
    profile = 1 + 0.6 * np.sin(2 * np.pi * (hours[None, :] - phase[:, None]) / 24)
    demand = pd.DataFrame({"workload": np.repeat(workloads["workload"], 24),
                           "bucket": 0, "period": np.tile(hours, 10),
                           "req_s": (base[:, None] * profile).ravel().round(3)})
    offers = pd.DataFrame([(g, p, price * factor, math.nan) for g, (_, price) in GPUS.items()
                           for p, factor in (("on_demand", 1.0), ("spot", 0.4),
                                             ("reserved_1y", 0.62))],
                          columns=["gpu", "pricing_type", "usd_per_gpu_hour", "max_gpus"])
    return Problem(workloads=workloads, periods=periods, demand=demand,
                   configs=configs, candidates=candidates[["workload", "bucket", "config",
                                                           "req_s_per_replica"]],
                   offers=offers,
                   gpus=pd.DataFrame({"gpu": list(GPUS), "gpus_per_node": 1,
                                      "max_gpus": math.nan}),
                   target_utilization=0.8, spot_max_share=0.3 if spot_cap else None)


def run(name: str, problem: Problem, options: SolveOptions, target_s: float,
        target_gap: float) -> None:
    started = time.perf_counter()
    plan = optimize_problem(problem, options)
    total = time.perf_counter() - started
    gpus = plan.fleet_by_period.groupby("period")["gpus"].sum().max()
    verdict = "meets" if total < target_s and plan.gap <= target_gap + 1e-12 else "MISSES"
    print(f"{name}: status {plan.status}, gap {plan.gap:.4%}, solve {plan.solve_seconds:.2f} s, "
          f"total {total:.2f} s (target < {target_s:g} s, gap <= {target_gap:.1%}: {verdict}); "
          f"{len(problem.configs)} configurations, {len(problem.periods)} periods, "
          f"peak {gpus:.0f} GPUs, ${plan.objective_usd / problem.horizon_hours:,.2f}/hour")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-spot-cap", action="store_true",
                        help="(b) only without the spot cap (default: with and without)")
    parser.add_argument("--time-limit", type=float, default=10.0, help="per solve [s]")
    parser.add_argument("--case", choices=["stochastic"],
                        help="only (c): bench_portfolio.py's stochastic case")
    arguments = parser.parse_args()
    if arguments.case == "stochastic":
        portfolio = Path(__file__).with_name("bench_portfolio.py")
        output = subprocess.run([sys.executable, str(portfolio), "--case", "stochastic"],
                                check=True, capture_output=True, text=True).stdout
        figures = json.loads(output.splitlines()[-1])
        verdict = "meets" if figures["seconds"] <= 60 and figures["gap"] <= 0.01 else "MISSES"
        print(f"(c) 3 demand scenarios x the 24-period portfolio: status {figures['status']}, "
              f"gap {figures['gap']:.3%}, {figures['seconds']:.1f} s (target <= 60 s within "
              f"1 %: {verdict}), peak memory {figures['peak_rss_mb']:,.0f} MB (solver child "
              f"{figures['child_peak_rss_mb']:,.0f} MB); commitments "
              f"table {figures['commitments_seconds']:.1f} s, VSS "
              f"${figures['vss_usd_per_hour']:,.2f}/h")
        return
    options = SolveOptions(time_limit_s=arguments.time_limit, mip_gap=1e-3, threads=1)
    run("(a) Mélange-sized, 36 buckets x 4 GPU types", melange_sized(), options, 0.5, 1e-3)
    for spot_cap in ((False,) if arguments.no_spot_cap else (True, False)):
        run(f"(b) 20 configurations x 10 workloads x 24 periods x 3 pricing types, spot "
            f"{'capped at 30 %' if spot_cap else 'uncapped'}", large(spot_cap=spot_cap),
            options, 10.0, 1e-3)


if __name__ == "__main__":
    main()
