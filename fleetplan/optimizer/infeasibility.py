"""Why a scenario cannot be served: reasons for unmet demand.

Two kinds of reasons:
- a workload bucket no configuration can serve (every candidate capacity is 0): the engine's
  reasons, condensed ("TPOT SLO 5 ms is below the best achievable 7.1 ms for llama-3.1-70b on
  any allowed GPU");
- a limit that leaves too little capacity: the elastic model is re-solved with each limit family
  that has a ``lift`` in ``constraint_families.FAMILIES`` (availability, spot share, budget)
  lifted; a lift that serves more names the limit with the amount the lifted plan needed, in
  the family's ``diagnose`` words ("needs 140 h100-sxm but availability is 64").
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from fleetplan.optimizer.constraint_families import FAMILIES, FAMILY, FAMILY_PROBLEM_FIELDS
from fleetplan.optimizer.decomposition import solve_fleet
from fleetplan.optimizer.fleet_problem import Problem, complete_routes
from fleetplan.optimizer.milp import BuildStopped, FleetModel, build_model
from fleetplan.optimizer.solution_tables import solution_tables, unmet_table
from fleetplan.optimizer.solve_results import Deadline
from fleetplan.optimizer.solver import SolveOptions, open_solver

logger = logging.getLogger(__name__)

_ACHIEVABLE = {metric: re.compile(rf"{metric} SLO [0-9.e+]+ ms is below the best achievable "
                                  r"([0-9.]+(?:e[+-]?[0-9]+)?) ms")
               for metric in ("TPOT", "TTFT")}


def _fmt(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:,.0f}"


def slo_reasons(problem: Problem) -> pd.DataFrame:
    """(workload, bucket, reason) for buckets with demand and no usable candidate."""
    candidates = problem.candidates
    demand = problem.demand[problem.demand["req_s"] > 0][["workload", "bucket"]].drop_duplicates()
    best = complete_routes(candidates).groupby(["workload", "bucket"])["req_s_per_replica"].max()
    capacity = demand.set_index(["workload", "bucket"]).index.map(best).fillna(0).to_numpy()
    by_api = pd.MultiIndex.from_frame(problem.api_candidates[["workload", "bucket"]])
    dead = demand[(capacity <= 0) & ~pd.MultiIndex.from_frame(demand).isin(by_api)]
    if dead.empty:
        return pd.DataFrame(columns=["workload", "bucket", "reason"])
    workloads = problem.workloads.set_index("workload")
    reasons = [_bucket_reason(candidates, workloads, w, b)
               for w, b in zip(dead["workload"], dead["bucket"], strict=True)]
    return dead.assign(reason=reasons).reset_index(drop=True)


def _bucket_reason(candidates: pd.DataFrame, workloads: pd.DataFrame, workload: str,
                   bucket: int) -> str:
    rows = candidates[(candidates["workload"] == workload) & (candidates["bucket"] == bucket)]
    model = workloads.loc[workload, "model"] if "model" in workloads else workload
    if rows.empty:
        return f"no allowed configuration can serve {model}"
    reasons = rows["reason"].astype(str) if "reason" in rows else pd.Series("", index=rows.index)
    missed = {metric: reasons.str.extract(pattern, expand=False).astype(float)
              for metric, pattern in _ACHIEVABLE.items()}
    missed = {metric: best for metric, best in missed.items()
              if best.notna().any() and pd.notna(_slo(workloads, workload, metric))}
    if len(missed) == 1:  # every configuration that fits misses the same SLO
        metric, best = next(iter(missed.items()))
        return (f"{metric} SLO {_fmt(_slo(workloads, workload, metric))} ms is below the best "
                f"achievable {_fmt(best.min())} ms for {model} on any allowed GPU")
    if missed:
        parts = [f"{metric} {_fmt(best.min())} ms (SLO {_fmt(_slo(workloads, workload, metric))} ms)"
                 for metric, best in missed.items()]
        return (f"no allowed configuration serves {model} within both SLOs; best achievable "
                + " and ".join(parts) + " on different configurations")
    common = reasons[reasons != ""].value_counts()
    detail = f": {common.index[0]}" if not common.empty else ""
    return f"no allowed configuration serves {model} within its SLOs{detail}"


def _slo(workloads: pd.DataFrame, workload: str, metric: str) -> float:
    column = f"{metric.lower()}_slo_ms"
    return workloads.loc[workload, column] if column in workloads else np.nan


def relaxed_unmet(model: FleetModel, options: SolveOptions, seconds: float) -> pd.DataFrame | None:
    """Unmet demand per workload bucket and period (``solution_tables.unmet_table``) of the
    elastic ``model``'s LP relaxation, solved for the least unmet share of request-hours: for
    when its MILP finds no plan in time. Whole replicas serve no more than fractional ones, so
    every plan leaves at least this share unmet in all (not bucket by bucket: a plan may leave
    a different bucket unmet). None when the LP is not solved within ``seconds`` either."""
    result = open_solver(model.program, model.unmet_share, options).solve(
        time_limit_s=seconds, mip_gap=options.mip_gap, relax=True)
    if result.values is None or result.outcome.status != "optimal":
        return None
    unmet = model.unmet.assign(value=result.values[model.unmet["col"].to_numpy(dtype=np.int64)])
    return unmet_table(model, {"unmet": unmet})


def _unmet_share(problem: Problem, options: SolveOptions,
                 seconds: float) -> tuple[float, dict | None]:
    deadline = Deadline(seconds)
    try:  # a lift is tried only within its share: the explanation must not outlast the call
        model = build_model(problem, elastic=True, time_left=deadline.remaining)
    except BuildStopped:
        return float("inf"), None
    outcome = solve_fleet(model, options, deadline)
    if not outcome.has_solution:
        return float("inf"), None
    unmet = model.unmet
    hours = unmet["period"].map(problem.periods.set_index("period")["hours"])
    values = model.value(unmet)
    share = float((values * unmet["req_s"] * hours).sum() / (unmet["req_s"] * hours).sum())
    return share, solution_tables(model)


def _lifts(problem: Problem) -> dict[str, Problem]:
    """Problems with one limit family lifted (only families the problem has)."""
    lifted = {family.name: family.lift(problem) for family in FAMILIES if family.lift}
    return {name: lift for name, lift in lifted.items() if lift is not None}


def limit_reasons(problem: Problem, options: SolveOptions, base_unmet: float,
                  seconds: float) -> list[str]:
    """One-line reasons naming the limits whose lifting serves more demand, the re-solves
    sharing ``seconds`` so the explanation stays within the call's time."""
    lifts = _lifts(problem)
    deadline = Deadline(seconds)
    reasons = []
    for done, (name, lifted) in enumerate(lifts.items()):
        share = deadline.remaining() / (len(lifts) - done + 1)  # one more for "everything"
        unmet, solution = _unmet_share(lifted, options, share)
        if solution is None or unmet >= base_unmet - 1e-6:
            continue
        reasons += FAMILY[name].diagnose(problem, solution)
    if not reasons and len(lifts) > 1:
        everything = problem.with_changes(
            **{k: v for lifted in lifts.values() for k, v in _changed(problem, lifted).items()})
        unmet, solution = _unmet_share(everything, options, deadline.remaining())
        if solution is not None and unmet < base_unmet - 1e-6:
            for name in lifts:
                reasons += FAMILY[name].diagnose(problem, solution)
    return reasons


def _changed(problem: Problem, lifted: Problem) -> dict:
    return {n: getattr(lifted, n) for n in FAMILY_PROBLEM_FIELDS
            if getattr(lifted, n) is not getattr(problem, n)}


def explain_unmet(problem: Problem, unmet: pd.DataFrame, options: SolveOptions,
                  base_unmet: float, seconds: float,
                  pruned: Problem | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Fill ``unmet.reason``; return it with the distinct reasons (one line each); the limits'
    re-solves share ``seconds`` and, given ``pruned`` (``problem`` without its dominated
    configurations), are built on it. SLO reasons read every candidate of ``problem``: a
    dominated configuration may still be the fastest."""
    slo = slo_reasons(problem)
    limits = limit_reasons(problem if pruned is None else pruned, options, base_unmet,
                           seconds) if base_unmet > 0 else []
    limit_text = "; ".join(limits) if limits else "not enough capacity within the limits"
    unmet = unmet.drop(columns="reason").merge(slo, on=["workload", "bucket"], how="left")
    unmet["reason"] = unmet["reason"].fillna(limit_text)
    pairs = unmet[["workload", "reason"]].drop_duplicates()
    messages = [f"{w}: {r}" for w, r in zip(pairs["workload"], pairs["reason"])]
    return unmet, messages
