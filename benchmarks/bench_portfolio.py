"""The portfolio benchmark: 5 models x 6 GPU types x 3 quantizations x 4 TP degrees = 360
configurations, 10 workloads (two per model, sharing its replicas), on-demand + spot (at most
30 % of GPUs) + 1-year reserved pricing, N+1 on half the workloads.

Three horizons, each solved in its own process (peak memory per case):

- ``day``: 24 hourly periods, a daily profile per workload (target: proven within 0.5 % in
  <= 10 s);
- ``week``: 168 hourly periods, daily profiles shaped by weekday (target: within 1 % of the
  dual bound in <= 60 s);
- ``year``: 12 monthly periods with 2-8 % monthly growth (target: within 1 % in <= 60 s);
- ``flexible``: the ``day`` portfolio with on-demand and spot pricing only: no reserved
  capacity links the hours, so each is solved on its own (the same target as ``day``);
- ``flexible_week``: the ``week`` portfolio with on-demand and spot pricing only (the same
  target as ``week``);
- ``stochastic``: the ``day`` portfolio under 3 demand scenarios (P10/P50/P90 factors 0.7, 1.0
  and 1.4 with probabilities 0.3/0.4/0.3): 72 periods, reserved capacity shared by all
  (target: within 1 % in <= 60 s); then the commitments table (7 options re-solved with their
  first stage fixed), timed apart.

Capacities are synthetic (decode-bound, a smooth function of model size, GPU speed and memory,
quantization and TP degree; configurations whose weights do not fit are unusable), so the
benchmark needs neither the performance engine nor the catalogs. Run:

    python benchmarks/bench_portfolio.py [--case day|week|year|flexible|flexible_week|stochastic]
        [--time-limit S] [--redundancy-k K] [--spot capped|uncapped|none] [--pool MODEL]
        [--fixed-reserved S | --fixed-by-period S | --lagrangian-gap G | --whole S
         | --pool-split S | --partial S]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time

import numpy as np
import pandas as pd

from fleetplan.optimizer import Problem, SolveOptions, optimize_problem
from fleetplan.optimizer.commitment_risk import add_commitments
from fleetplan.optimizer.dominance import prune_dominated
from fleetplan.optimizer.fleet_problem import profile_periods
from fleetplan.optimizer.lagrangian_periods import LagrangianPeriods
from fleetplan.optimizer.lagrangian_prices import hour_weights
from fleetplan.optimizer.milp import FleetModel, build_model
from fleetplan.optimizer.period_merging import merge_identical_periods
from fleetplan.optimizer.period_solves import PeriodPrograms, _local
from fleetplan.optimizer.pool_split import ColumnGroups, pool_bound
from fleetplan.optimizer.reserved_candidates import reserved_plan, reserved_rows
from fleetplan.optimizer.solve_results import Deadline
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


def run_case(case: str, time_limit_s: float | None, **variant) -> dict:
    """Solve one case (``variant``: :func:`portfolio`'s keywords); its figures as a dict."""
    target_s, target_gap = TARGETS[case]
    problem = portfolio(case, **variant)
    options = SolveOptions(time_limit_s=time_limit_s or target_s, mip_gap=target_gap)
    started = time.perf_counter()
    plan = optimize_problem(problem, options)
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


def _relaxed(case: str, **variant) -> tuple[float, FleetModel, Result]:
    """The case's hours, its whole MILP (periods merged, dominated configurations pruned, as
    the planner builds it) and that MILP's LP relaxation."""
    problem = portfolio(case, **variant)
    merged, _ = merge_identical_periods(problem)
    model = build_model(prune_dominated(merged)[0])
    lp = open_solver(model.program, model.cost, SolveOptions()).solve(
        time_limit_s=120.0, mip_gap=1e-4, relax=True)
    return problem.horizon_hours, model, lp


def fixed_reserved_bounds(case: str, seconds: float, **variant) -> dict:
    """Where the gap lies: the whole MILP with the reserved counts fixed at the LP's rounded up
    and rounded to nearest, each solved for ``seconds`` on one thread. Its dual bound is the
    least any plan with those reserved counts costs: when it sits well above the plan's reported
    bound, the bound, not the plan, holds the gap open (for those reserved counts)."""
    hours, model, lp = _relaxed(case, **variant)
    reserved = lp.values[reserved_rows(model)["col"].to_numpy()]
    figures = {"case": case, "lp_usd_per_hour": lp.outcome.objective / hours}
    for name, counts in (("ceil", np.ceil(reserved - 1e-6)), ("round", np.round(reserved))):
        fixed = reserved_plan(model, counts + 0.0)
        solver = open_solver(model.program, model.cost, SolveOptions(threads=1))
        solver.set_col_bounds(fixed["cols"], fixed["values"], fixed["values"])
        result = solver.solve(time_limit_s=seconds, mip_gap=1e-3)
        figures[name] = {"reserved_replicas": float(counts.sum()), "status": result.outcome.status,
                         "usd_per_hour": result.outcome.objective / hours,
                         "bound_usd_per_hour": result.outcome.bound / hours}
    return figures


def fixed_by_period(case: str, seconds: float, **variant) -> dict:
    """The LP's reserved counts rounded up and to nearest, fixed, and every period then
    solved on its own to 0.01 % for up to ``seconds`` (two HiGHS threads): with the reserved
    counts fixed the periods separate, so the summed plans and bounds bracket the best plan
    with those counts far more tightly than the whole MILP solved at once."""
    hours, model, lp = _relaxed(case, **variant)
    programs = PeriodPrograms.of(model)
    reserved = lp.values[reserved_rows(model)["col"].to_numpy()]
    figures = {"case": case, "lp_usd_per_hour": lp.outcome.objective / hours}
    for name, counts in (("ceil", np.ceil(reserved - 1e-6)), ("round", np.round(reserved))):
        fixed = reserved_plan(model, counts + 0.0)
        plan = bound = float(model.cost[fixed["cols"]] @ fixed["values"])
        statuses = []
        for period in programs.periods():
            part = programs.parts[period]
            where, which = _local(part, fixed["cols"])
            own = model.cost[part.cols].copy()
            own[where] = 0.0  # the reserved replicas' cost is counted once, above
            solver = open_solver(part.program, own, SolveOptions(threads=2))
            solver.set_col_bounds(where, fixed["values"][which], fixed["values"][which])
            result = solver.solve(time_limit_s=seconds, mip_gap=1e-4)
            plan, bound = plan + result.outcome.objective, bound + result.outcome.bound
            statuses.append(result.outcome.status)
        figures[name] = {"reserved_replicas": float(counts.sum()), "usd_per_hour": plan / hours,
                         "bound_usd_per_hour": bound / hours,
                         "periods_proven": statuses.count("optimal"), "periods": len(statuses)}
    return figures


def lagrangian_at_lp_prices(case: str, gap: float, **variant) -> dict:
    """The planner's Lagrangian pass (``lagrangian_periods.py``) at the LP's prices, its
    periods solved to a relative gap of ``gap`` without a time limit: how high a bound those
    prices can give at all, and how long it takes."""
    hours, model, lp = _relaxed(case, **variant)
    programs = PeriodPrograms.of(model)
    options = SolveOptions(mip_gap=gap)
    weights = hour_weights(model.problem.periods)
    started = time.perf_counter()
    periods, _ = LagrangianPeriods.solved(
        programs, lp, options, Deadline(3600.0), start=None,
        abs_gaps=(0.5 * gap * lp.outcome.objective * weights).to_dict(), budget_s=3600.0)
    return {"case": case, "gap": gap, "lp_usd_per_hour": lp.outcome.objective / hours,
            "bound_usd_per_hour": periods.bound() / hours,
            "seconds": time.perf_counter() - started}


def whole_milp(case: str, seconds: float, **variant) -> dict:
    """The whole MILP handed to HiGHS alone for ``seconds`` (one thread, gap 0.01 %): how far
    plain branch and bound gets, and, where it proves its plan, how far the optimum lies above
    the LP relaxation (the integrality gap any bound must close)."""
    hours, model, lp = _relaxed(case, **variant)
    solver = open_solver(model.program, model.cost, SolveOptions(threads=1))
    result = solver.solve(time_limit_s=seconds, mip_gap=1e-4)
    return {"case": case, "columns": model.program.n_cols,
            "integer_columns": int(model.program.integer.sum()), "status": result.outcome.status,
            "lp_usd_per_hour": lp.outcome.objective / hours,
            "usd_per_hour": result.outcome.objective / hours,
            "bound_usd_per_hour": result.outcome.bound / hours,
            "seconds": result.outcome.seconds}


def pool_split_bound(case: str, seconds: float, **variant) -> dict:
    """The whole horizon split by model pool (``pool_split.pool_bound``): the rows that tie two
    pools (the spot share) priced at the LP's duals, each pool's MILP, all its periods and
    reserved columns together, solved for ``seconds``. Its Lagrangian bound keeps every
    integrality inside the pools; where it stays near the LP, the pools themselves, not their
    coupling, hold the bound down."""
    hours, model, lp = _relaxed(case, **variant)
    program = model.program
    groups = ColumnGroups.of(program.n_cols, model.routes, model.replicas)
    pools = int(groups.pool.max()) + 1
    started = time.perf_counter()
    split = pool_bound(program, model.cost, program.col_lower, program.col_upper, lp.duals,
                       groups, SolveOptions(threads=1, mip_gap=1e-3), seconds * pools)
    figures = {"case": case, "pools": pools, "lp_usd_per_hour": lp.outcome.objective / hours,
               "seconds": time.perf_counter() - started}
    return {**figures, "bound_usd_per_hour": split.bound / hours if split else math.nan}


def partial_integrality(case: str, seconds: float, **variant) -> dict:
    """The whole MILP with one family of integer columns kept integer and the others relaxed,
    each solved for ``seconds`` on one thread: the reserved counts, the N+k binaries (does a
    workload use a configuration), the replicas of each period. Each is a relaxation, so its
    dual bound is a bound of the whole MILP; how far each rises above the LP shows which
    integrality the LP misses."""
    hours, model, lp = _relaxed(case, **variant)
    program = model.program
    replicas = model.replicas
    spares = model.extras.get("redundancy", pd.DataFrame({"col": []}))["col"]
    families = {"reserved": replicas.loc[replicas["period"] < 0, "col"], "spares": spares,
                "period_replicas": replicas.loc[replicas["period"] >= 0, "col"]}
    figures = {"case": case, "lp_usd_per_hour": lp.outcome.objective / hours}
    for name, cols in families.items():
        integer = np.zeros(program.n_cols, dtype=bool)
        integer[cols.to_numpy(dtype=np.int64)] = True
        part = program.with_changes(integer=integer & program.integer)
        result = open_solver(part, model.cost, SolveOptions(threads=1)).solve(
            time_limit_s=seconds, mip_gap=1e-4)
        figures[name] = {"integer_columns": int(part.integer.sum()),
                         "status": result.outcome.status,
                         "bound_usd_per_hour": result.outcome.bound / hours}
    return figures


#: ``--fixed-reserved``, ``--whole``, ``--pool-split`` and ``--partial``: where the gap lies,
#: each with its help text.
DIAGNOSTICS = {
    "fixed_reserved": (fixed_reserved_bounds, "the LP's reserved counts fixed, S seconds each"),
    "fixed_by_period": (fixed_by_period,
                        "the LP's reserved counts fixed, each period alone for S seconds"),
    "lagrangian_gap": (lagrangian_at_lp_prices,
                       "the Lagrangian pass at the LP's prices, its periods to gap S"),
    "whole": (whole_milp, "the whole MILP in HiGHS alone for S seconds"),
    "pool_split": (pool_split_bound, "the pools' Lagrangian bound, S seconds per pool"),
    "partial": (partial_integrality, "one family of integer columns at a time, S seconds each"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=list(CASES), help="one case, in this process")
    parser.add_argument("--time-limit", type=float, help="seconds (default: the case's target)")
    parser.add_argument("--redundancy-k", type=int, default=1,
                        help="spare replicas of the N+k half of the workloads (default 1)")
    parser.add_argument("--spot", choices=SPOT, default="capped",
                        help="spot pricing: capped at 30%% of GPUs (default), uncapped, or none")
    parser.add_argument("--pool", choices=list(MODELS),
                        help="with --case: that model's pool alone (portfolio)")
    diagnostics = parser.add_mutually_exclusive_group()
    for name, (function, text) in DIAGNOSTICS.items():
        diagnostics.add_argument("--" + name.replace("_", "-"), type=float, metavar="S",
                                 help=f"with --case: {text}, instead ({function.__name__})")
    arguments = parser.parse_args()
    variant = {"redundancy_k": arguments.redundancy_k, "spot": arguments.spot}
    if arguments.case:
        variant["only_pool"] = arguments.pool
        for name, (diagnostic, _) in DIAGNOSTICS.items():
            if getattr(arguments, name):
                print(json.dumps(diagnostic(arguments.case, getattr(arguments, name),
                                            **variant)))
                return
        print(json.dumps(run_case(arguments.case, arguments.time_limit, **variant)))
        return
    for case in CASES:
        command = [sys.executable, __file__, "--case", case,
                   "--redundancy-k", str(arguments.redundancy_k), "--spot", arguments.spot]
        if arguments.time_limit:
            command += ["--time-limit", str(arguments.time_limit)]
        figures = json.loads(subprocess.run(command, check=True, capture_output=True,
                                            text=True).stdout.splitlines()[-1])
        verdict = "meets" if (figures["seconds"] <= figures["target_s"]
                              and figures["gap"] <= figures["target_gap"]) else "MISSES"
        print(f"{case}: {figures['status']}, gap {figures['gap']:.3%} against the bound "
              f"${figures['bound_usd_per_hour']:,.2f}/h, ${figures['usd_per_hour']:,.2f}/h, "
              f"{figures['seconds']:.1f} s (target {figures['target_s']:g} s within "
              f"{figures['target_gap']:.1%}: {verdict}), peak {figures['gpus_peak']:.0f} GPUs, "
              f"peak memory {figures['peak_rss_mb']:,.0f} MB (solver child "
              f"{figures['child_peak_rss_mb']:,.0f} MB){_risk_text(figures)}")


def _risk_text(figures: dict) -> str:
    if "commitments_seconds" not in figures:
        return ""
    return (f"; commitments table {figures['commitments_seconds']:.1f} s, VSS "
            f"${figures['vss_usd_per_hour']:,.2f}/h")


if __name__ == "__main__":
    main()
