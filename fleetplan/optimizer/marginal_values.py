"""Binding constraints and what relaxing each would save, measured by re-solving.

A MILP's duals say little about whole replicas, so each binding limit is priced by solving the
problem again with that limit relaxed by one step, as its family's entry in
``constraint_families.FAMILIES`` says (one more node of a capped GPU, ten points more spot
share, one spare replica fewer, ten percent more budget), and a looser TPOT SLO per workload.
"""

from __future__ import annotations

import logging
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fleetplan.optimizer.constraint_families import FAMILIES, FAMILY, priced_families
from fleetplan.optimizer.decomposition import solve_fleet
from fleetplan.optimizer.dominance import prune_dominated
from fleetplan.optimizer.fleet_problem import Problem, configs_of
from fleetplan.optimizer.milp import FleetModel, build_model
from fleetplan.optimizer.period_solves import Deadline
from fleetplan.optimizer.plan_summary import usd
from fleetplan.optimizer.solver import SolveOptions

logger = logging.getLogger(__name__)

COLUMNS = ["family", "subject", "period", "value", "limit", "unit", "change",
           "saving_usd_per_month", "description"]

#: Most re-solves made for one plan (the largest binding limits first).
MAX_RESOLVES = 12

#: Least time worth a re-solve [s]; with less left in the call a limit is not priced.
MIN_RESOLVE_S = 0.05

#: Re-solves run side by side (HiGHS releases the interpreter while it solves): one per core
#: of the 2-core machines this is sized for.
PARALLEL_RESOLVES = 2


def constraint_activity(model: FleetModel, families: tuple[str, ...]) -> pd.DataFrame:
    """Left-hand side value and slack of the limits of ``families`` (rows in the family's own
    unit; rows in other units only link its variables)."""
    table = model.constraint_table()
    own_unit = table["family"].map({f.name: f.unit for f in FAMILIES})
    table = table[table["family"].isin(families) & (table["unit"] == own_unit)].copy()
    if table.empty or model.values is None:
        return table.iloc[0:0]
    table["value"] = model.program.activity(model.values)[table["row"].to_numpy()]
    table["slack"] = np.where(table["sense"] == ">=", table["value"] - table["limit"],
                              table["limit"] - table["value"])
    return table


def binding_limits(model: FleetModel) -> pd.DataFrame:
    """Binding constraints of the priced families, one row per (family, subject), worst period
    first. A row binds when its slack is less than one step of its family's limit."""
    table = constraint_activity(model, priced_families())
    if table.empty:
        return pd.DataFrame(columns=["family", "subject", "period", "value", "limit", "unit"])
    step = np.zeros(len(table))
    for name, rows in table.groupby("family", sort=False).indices.items():
        step[rows] = FAMILY[name].binding_step(model.problem, table["subject"].iloc[rows])
    tolerance = np.maximum(step - 1e-6, 1e-6 * np.maximum(1.0, table["limit"].abs()))
    limiting = table["slack"].to_numpy() < np.asarray(tolerance, dtype=float)
    for name, rows in table.groupby("family", sort=False).indices.items():
        if FAMILY[name].binding_filter is not None:
            limiting[rows] &= FAMILY[name].binding_filter(model, table.iloc[rows])
    binding = table[limiting].sort_values("slack", kind="stable")
    binding = binding.drop_duplicates(["family", "subject"])
    return binding[["family", "subject", "period", "value", "limit", "unit"]].reset_index(drop=True)


@dataclass(frozen=True)
class BasePlan:
    """What every re-solve compares with: the base plan's cost [USD/month] and gap, the
    options of each re-solve, and the deadline of the whole call."""

    usd_per_month: float
    gap: float
    options: SolveOptions
    deadline: Deadline


def _saving(base: BasePlan, problem: Problem) -> tuple[float, float]:
    """(saving, uncertainty) [USD/month] of ``problem`` against the base plan; the uncertainty
    adds both solves' gaps (a saving within it may be solver noise). NaN when the call's time
    is up."""
    seconds = min(base.options.time_limit_s, base.deadline.remaining())
    if seconds < MIN_RESOLVE_S:
        return math.nan, math.nan
    # Without the cost-cover cut: a valid cut changes no optimum, and building it takes a small
    # MILP per pool, longer than the re-solve itself on plans of the example's size.
    model = build_model(problem, cost_cover=False)
    outcome = solve_fleet(model, base.options, Deadline(seconds))
    if not outcome.has_solution:
        return math.nan, math.nan
    relaxed = outcome.objective / problem.horizon_months
    gaps = np.nan_to_num([base.gap, outcome.gap])
    return (max(0.0, base.usd_per_month - relaxed),
            gaps[0] * base.usd_per_month + gaps[1] * relaxed)


def _savings(base: BasePlan, problems: list[Problem]) -> list[tuple[float, float]]:
    """``_saving`` of every problem, :data:`PARALLEL_RESOLVES` at a time."""
    if len(problems) <= 1:
        return [_saving(base, problem) for problem in problems]
    with ThreadPoolExecutor(max_workers=PARALLEL_RESOLVES) as pool:
        return list(pool.map(lambda problem: _saving(base, problem), problems))


def _money(value: float, uncertainty: float = 0.0) -> str:
    if not math.isfinite(value):
        return "an unknown amount (not re-solved within the time limit)"
    noise = f" (±{usd(uncertainty)} solver gap)" if uncertainty >= 0.005 else ""
    return f"{usd(value)}{noise}"


def binding_relaxations(model: FleetModel) -> tuple[list[dict], list]:
    """The binding limits worth pricing (largest first) and each one's relaxation by one step."""
    limits = binding_limits(model).head(MAX_RESOLVES).to_dict("records")
    return limits, [FAMILY[row["family"]].relax(model.problem, row["subject"]) for row in limits]


def binding_rows(limits: list[dict], relaxations: list, savings: list) -> pd.DataFrame:
    """Binding limits with the monthly saving of relaxing each by one step."""
    rows = [{**row, "change": change, "saving_usd_per_month": saving,
             "description": f"{row['family']} {row['subject']}: " + template.format(saving=_money(saving, noise))}
            for row, (_, change, template), (saving, noise) in zip(limits, relaxations, savings, strict=True)]
    return pd.DataFrame(rows, columns=COLUMNS)


def slo_relaxations(problem: Problem, relaxed_candidates: pd.DataFrame) -> tuple[list[tuple], list[Problem]]:
    """Per workload with a TPOT SLO: (workload, SLO) and the problem with the looser SLO.

    The looser SLO changes the workload's pool: its SLO levels are those with the workload's
    TPOT loosened, so the pool's candidates are all replaced."""
    workloads = problem.workloads
    if relaxed_candidates.empty or "tpot_slo_ms" not in workloads:
        return [], []
    with_slo = workloads.dropna(subset=["tpot_slo_ms"])
    pool_of = workloads.set_index("workload")["pool"]
    priced, problems = [], []
    for workload, slo in zip(with_slo["workload"], with_slo["tpot_slo_ms"]):
        looser = relaxed_candidates[relaxed_candidates["relaxed_for"] == workload].drop(
            columns="relaxed_for")
        if looser.empty:
            continue
        pool = problem.candidates["workload"].map(pool_of) == pool_of[workload]
        candidates = pd.concat([problem.candidates[~pool], looser], ignore_index=True)
        relaxed = problem.with_changes(candidates=candidates, configs=configs_of(candidates))
        priced.append((workload, slo))
        problems.append(prune_dominated(relaxed)[0])
    return priced, problems


def slo_rows(priced: list[tuple], savings: list, base: BasePlan, factor: float) -> pd.DataFrame:
    """The looser SLOs that save money, with what they save."""
    rows = []
    for (workload, slo), (saving, noise) in zip(priced, savings, strict=True):
        if not saving > max(0.005 + 1e-6 * base.usd_per_month, noise):  # does not bind
            continue
        rows.append({"family": "tpot_slo", "subject": workload, "period": -1, "value": slo,
                     "limit": slo, "unit": "ms", "change": f"x{factor:g}",
                     "saving_usd_per_month": saving,
                     "description": f"tpot_slo {workload}: relaxing TPOT to {slo * factor:g} ms "
                                    f"(from {slo:g} ms) would save {_money(saving, noise)} "
                                    "per month"})
    return pd.DataFrame(rows, columns=COLUMNS)


def marginal_values(model: FleetModel, base: BasePlan, *, slo_problem: Problem | None = None,
                    relaxed_candidates: pd.DataFrame | None = None,
                    tpot_factor: float = 1.5) -> pd.DataFrame:
    """Binding limits and looser SLOs, priced by re-solving, all re-solves in one batch
    (:data:`PARALLEL_RESOLVES` at a time). ``slo_problem``: the problem before dominated
    configurations were dropped (a looser SLO can revive them)."""
    limits, relaxations = binding_relaxations(model)
    priced, slo_problems = ([], []) if relaxed_candidates is None else slo_relaxations(
        slo_problem or model.problem, relaxed_candidates)
    savings = _savings(base, [relaxed for relaxed, _, _ in relaxations] + slo_problems)
    tables = [binding_rows(limits, relaxations, savings[:len(limits)]),
              slo_rows(priced, savings[len(limits):], base, tpot_factor)]
    tables = [t for t in tables if not t.empty]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=COLUMNS)
