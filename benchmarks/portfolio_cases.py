"""The portfolio benchmark's cases (``bench_portfolio.py``): their problems, built from
synthetic capacities, and their solve.

5 models x 6 GPU types x 3 quantizations x 4 TP degrees = 360 configurations, 10 workloads (two
per model, sharing its replicas), on-demand + spot (at most 30 % of GPUs) + 1-year reserved
pricing, N+1 on half the workloads. Capacities are synthetic (decode-bound, a smooth function of
model size, GPU speed and memory, quantization and TP degree; configurations whose weights do
not fit are unusable), so the benchmark needs neither the performance engine nor the catalogs.
"""

from __future__ import annotations

import math
import resource
import time

import numpy as np
import pandas as pd

from fleetplan.optimizer import FleetPlan, Problem, SolveOptions, optimize_problem
from fleetplan.optimizer.commitment_risk import add_commitments
from fleetplan.optimizer.dominance import prune_dominated
from fleetplan.optimizer.fleet_problem import profile_periods
from fleetplan.optimizer.milp import FleetModel, build_model
from fleetplan.optimizer.period_merging import merge_identical_periods
from fleetplan.optimizer.solver import Result, open_solver
from fleetplan.optimizer.stochastic_problem import with_demand_factors

#: model: parameters [billions]
MODELS = {"m8b": 8.0, "m24b": 24.0, "m32b": 32.0, "m70b": 70.0, "m120b": 120.0}
#: GPU type: (memory [GB], relative speed, on-demand USD/GPU-hour)
GPUS = {"l4": (24, 1.0, 0.80), "a10g": (24, 1.1, 1.01), "l40s": (48, 2.2, 1.25),
        "a100-80gb": (80, 4.0, 1.79), "h100-sxm": (80, 7.5, 2.95), "h200": (141, 9.0, 3.50)}
#: quantization: (bytes per parameter, relative speed)
QUANTS = {"bf16": (2.0, 1.0), "fp8": (1.0, 1.6), "int4": (0.5, 1.9)}
TPS = (1, 2, 4, 8)
#: pricing type: factor on the on-demand price
PRICING = {"on_demand": 1.0, "spot": 0.4, "reserved_1y": 0.62}
CASES = {"day": (24, 1), "week": (168, 1), "year": (1, 12), "flexible": (24, 1),
         "flexible_week": (168, 1), "stochastic": (24, 1)}
TARGETS = {"day": (10.0, 0.005), "week": (60.0, 0.01), "year": (60.0, 0.01),
           "flexible": (10.0, 0.005), "flexible_week": (60.0, 0.01),
           "stochastic": (60.0, 0.01)}
#: Cases with on-demand and spot pricing only.
FLEXIBLE = ("flexible", "flexible_week")
#: The stochastic case's demand scenarios: factors on the day case's demand (Swanson's rule).
OUTCOMES = pd.DataFrame({"scenario": ["p10", "p50", "p90"], "probability": [0.3, 0.4, 0.3],
                         "factor": [0.7, 1.0, 1.4]})


def configurations() -> pd.DataFrame:
    """config, pool (model), gpu, tp, model, quant, and the replica's speed factor."""
    rows = [(f"{m}/{g}/{q}/tp{t}", m, g, t, m, q)
            for m in MODELS for g in GPUS for q in QUANTS for t in TPS]
    return pd.DataFrame(rows, columns=["config", "pool", "gpu", "tp", "model", "quant"])


def capacity_req_s(configs: pd.DataFrame, output_tokens: float, input_tokens: float,
                   slo_factor: float) -> np.ndarray:
    """Requests/s per replica: token rate of the replica's GPUs over the model's bytes, 0 when
    the weights take more than 80 % of the replica's memory."""
    memory, speed = (configs["gpu"].map({g: v[i] for g, v in GPUS.items()}) for i in (0, 1))
    size, quant_speed = (configs["quant"].map({q: v[i] for q, v in QUANTS.items()})
                         for i in (0, 1))
    params = configs["model"].map(MODELS)
    fits = params * size <= 0.8 * memory * configs["tp"]
    tokens_per_s = 2600.0 * speed * quant_speed * configs["tp"] ** 0.85 * 8.0 / params
    seconds = (output_tokens + input_tokens / 30.0) / tokens_per_s
    return np.where(fits, slo_factor / seconds, 0.0)


#: ``--spot``: spot pricing capped at 30 % of the GPUs, at any share, or not offered.
SPOT = ("capped", "uncapped", "none")


def portfolio(case: str, seed: int = 5, redundancy_k: int = 1, spot: str = "capped",
              only_pool: str | None = None) -> Problem:
    """The benchmark problem for ``case`` (day, week or year); ``redundancy_k`` spares on half
    the workloads (0 measures how much of the gap the N+k rows make); ``spot`` (:data:`SPOT`)
    measures how much the spot share, the one limit that ties the pools together, and spot
    pricing itself make; ``only_pool`` (a model of :data:`MODELS`) keeps that model's two workloads
    and configurations alone, with the same demand (how hard one pool is by itself)."""
    rng = np.random.default_rng(seed)
    n_hours, n_months = CASES[case]
    configs = configurations()
    workloads = pd.DataFrame({"workload": [f"{m}-{i}" for m in MODELS for i in (0, 1)],
                              "pool": [m for m in MODELS for _ in (0, 1)],
                              "redundancy_k": [redundancy_k, 0] * len(MODELS)})
    sizes = pd.DataFrame({"workload": workloads["workload"],
                          "input": rng.choice([500, 2000, 6000], len(workloads)),
                          "output": rng.choice([150, 300, 600], len(workloads)),
                          "slo": rng.uniform(0.55, 0.95, len(workloads))})
    candidates = []
    for workload, pool, inp, out, slo in zip(workloads["workload"], workloads["pool"],
                                              sizes["input"], sizes["output"], sizes["slo"]):
        mine = configs[configs["pool"] == pool]
        candidates.append(pd.DataFrame({
            "workload": workload, "bucket": 0, "config": mine["config"].to_numpy(),
            "req_s_per_replica": capacity_req_s(mine, out, inp, slo)}))
    candidates = pd.concat(candidates, ignore_index=True)
    periods = profile_periods(n_hours, n_months, 730.0, 12.0)
    demand = _demand(workloads["workload"], periods, n_hours, n_months, rng)
    pricing = {p: f for p, f in PRICING.items() if case not in FLEXIBLE or p != "reserved_1y"}
    if spot == "none":
        pricing.pop("spot")
    offers = pd.DataFrame([(g, p, price * factor, math.nan) for g, (_, _, price) in GPUS.items()
                           for p, factor in pricing.items()],
                          columns=["gpu", "pricing_type", "usd_per_gpu_hour", "max_gpus"])
    problem = Problem(workloads=workloads, periods=periods, demand=demand, configs=configs,
                      candidates=candidates, offers=offers,
                      gpus=pd.DataFrame({"gpu": list(GPUS), "gpus_per_node": 1,
                                         "max_gpus": math.nan}),
                      target_utilization=0.8, hours_per_month=730.0, horizon_months=12.0,
                      spot_max_share=0.3 if spot == "capped" else None)
    if only_pool is not None:
        problem = _one_pool(problem, only_pool)
    return with_demand_factors(problem, OUTCOMES) if case == "stochastic" else problem


def _one_pool(problem: Problem, pool: str) -> Problem:
    """``problem`` with only ``pool``'s workloads, candidates, configurations and demand."""
    workloads = problem.workloads[problem.workloads["pool"] == pool].reset_index(drop=True)
    mine = {name: table[table["workload"].isin(workloads["workload"])].reset_index(drop=True)
            for name, table in (("demand", problem.demand),
                                ("candidates", problem.candidates))}
    configs = problem.configs[problem.configs["pool"] == pool].reset_index(drop=True)
    return problem.with_changes(workloads=workloads, configs=configs, **mine)


def _demand(names: pd.Series, periods: pd.DataFrame, n_hours: int, n_months: int,
            rng: np.random.Generator) -> pd.DataFrame:
    """Requests/s per workload and period: a daily wave (by weekday over a week), growth."""
    count = len(names)
    base = rng.uniform(20, 120, count)
    phase = rng.uniform(0, 24, count)
    hour = np.arange(n_hours)
    wave = 1 + 0.6 * np.sin(2 * np.pi * (hour[None, :] - phase[:, None]) / 24)
    if n_hours == 168:
        weekday = np.repeat(rng.uniform(0.6, 1.15, (count, 7)), 24, axis=1)
        wave = wave * weekday * rng.uniform(0.95, 1.05, (count, 168))
    if n_hours == 1:
        wave = np.ones((count, 1))
    growth = (1 + rng.uniform(0.02, 0.08, count))[:, None] ** np.arange(n_months)[None, :]
    req_s = (base[:, None, None] * growth[:, :, None] * wave[:, None, :]).reshape(count, -1)
    return pd.DataFrame({"workload": np.repeat(names.to_numpy(), len(periods)), "bucket": 0,
                         "period": np.tile(periods["period"].to_numpy(), count),
                         "req_s": req_s.ravel().round(3)})


def planned(case: str, time_limit_s: float | None = None,
            **variant) -> tuple[Problem, FleetPlan, SolveOptions]:
    """The case's problem, the planner's plan of it within ``time_limit_s`` (default: the
    case's target) and the options it was solved with."""
    target_s, target_gap = TARGETS[case]
    problem = portfolio(case, **variant)
    options = SolveOptions(time_limit_s=time_limit_s or target_s, mip_gap=target_gap)
    return problem, optimize_problem(problem, options), options


def run_case(case: str, time_limit_s: float | None, **variant) -> dict:
    """Solve one case (``variant``: :func:`portfolio`'s keywords); its figures as a dict."""
    target_s, target_gap = TARGETS[case]
    started = time.perf_counter()
    problem, plan, options = planned(case, time_limit_s, **variant)
    seconds = time.perf_counter() - started
    bound = plan.bound_usd
    risk = {}
    if case == "stochastic":
        started = time.perf_counter()
        add_commitments(plan, problem, options)
        risk = {"commitments_seconds": time.perf_counter() - started,
                "vss_usd_per_hour": plan.assumptions.get("stochastic", {}).get(
                    "vss_usd_per_month", math.nan) / 730.0}
    return {"case": case, "status": plan.status, "gap": plan.gap, "seconds": seconds, **risk,
            "usd_per_hour": plan.objective_usd / problem.horizon_hours,
            "bound_usd_per_hour": bound / problem.horizon_hours,
            "gpus_peak": float(plan.fleet_by_period.groupby("period")["gpus"].sum().max())
            if not plan.fleet_by_period.empty else math.nan,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            # a MIP of WATCHDOG_COLUMNS or more is solved in a child process: its peak apart
            "child_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            "target_s": target_s, "target_gap": target_gap}


def relaxed(case: str, **variant) -> tuple[float, FleetModel, Result]:
    """The case's hours, its whole MILP (periods merged, dominated configurations pruned, as
    the planner builds it) and that MILP's LP relaxation."""
    problem = portfolio(case, **variant)
    merged, _ = merge_identical_periods(problem)
    model = build_model(prune_dominated(merged)[0])
    lp = open_solver(model.program, model.cost, SolveOptions()).solve(
        time_limit_s=120.0, mip_gap=1e-4, relax=True)
    return problem.horizon_hours, model, lp


