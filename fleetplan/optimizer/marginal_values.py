"""Binding constraints and what relaxing each would save, measured by re-solving.

A MILP's duals say little about whole replicas, so each binding limit is priced by solving the
problem again with that limit relaxed by one step, as its family's entry in
``constraint_families.FAMILIES`` says (one more node of a capped GPU, ten points more spot
share, one spare replica fewer, ten percent more budget), and a looser TPOT SLO per workload.
"""

from __future__ import annotations

import logging
import math
from concurrent.futures import Future
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np
import pandas as pd

from fleetplan.optimizer.constraint_families import FAMILIES, FAMILY, priced_families
from fleetplan.optimizer.dominance import prune_dominated
from fleetplan.optimizer.fleet_problem import Problem, configs_of
from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.plan_summary import usd
from fleetplan.optimizer.relaxed_variants import relaxed_variant
from fleetplan.optimizer.resolve_queue import ReSolve, ReSolves
from fleetplan.optimizer.solve_results import Deadline
from fleetplan.optimizer.solver import SolveOptions

logger = logging.getLogger(__name__)

COLUMNS = ["family", "subject", "period", "value", "limit", "unit", "change",
           "saving_usd_per_month", "description"]

#: Most re-solves made for one plan (the largest binding limits first).
MAX_RESOLVES = 12

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


def saving(base: BasePlan, relaxed: tuple[float, float]) -> tuple[float, float]:
    """(saving, uncertainty) [USD/month] of a relaxed plan (``relaxed_cost``) against the base
    plan; the uncertainty adds both solves' gaps (a saving within it may be solver noise)."""
    usd_per_month, gap = relaxed
    if not math.isfinite(usd_per_month):
        return math.nan, math.nan
    gaps = np.nan_to_num([base.gap, gap])
    return (max(0.0, base.usd_per_month - usd_per_month),
            gaps[0] * base.usd_per_month + gaps[1] * usd_per_month)


class SloPricing(NamedTuple):
    """The workloads whose looser TPOT SLO is priced, (workload, SLO [ms]), and their
    re-solves, begun (``start_slo_pricing``)."""

    subjects: list[tuple[str, float]]
    started: list[Future]


def _money(value: float, uncertainty: float = 0.0) -> str:
    if not math.isfinite(value):
        return "an unknown amount (not re-solved within the time limit)"
    noise = f" (±{usd(uncertainty)} solver gap)" if uncertainty >= 0.005 else ""
    return f"{usd(value)}{noise}"


def binding_relaxations(model: FleetModel) -> tuple[list[dict], list]:
    """The binding limits worth pricing (largest first) and each one's relaxation by one step."""
    limits = binding_limits(model).head(MAX_RESOLVES).to_dict("records")
    return limits, [FAMILY[row["family"]].relax(model.problem, row["subject"]) for row in limits]


def binding_resolves(model: FleetModel, limits: list[dict], relaxations: list) -> list[ReSolve]:
    """Each relaxation's re-solve: the solved base ``model`` changed to it where its family
    allows (``relaxed_variants``), begun from the base plan; otherwise its problem, rebuilt."""
    resolves, table = [], model.constraint_table()
    for row, (problem, _, _) in zip(limits, relaxations, strict=True):
        variant = relaxed_variant(model, row["family"], str(row["subject"]), problem, table)
        resolves.append(ReSolve(problem, variant, None if variant is None else model.values))
    return resolves


def binding_rows(limits: list[dict], relaxations: list, savings: list) -> pd.DataFrame:
    """Binding limits with the monthly saving of relaxing each by one step."""
    rows = [{**row, "change": change, "saving_usd_per_month": saving,
             "description": f"{row['family']} {row['subject']}: "
                            + template.format(saving=_money(saving, noise))}
            for row, (_, change, template), (saving, noise)
            in zip(limits, relaxations, savings, strict=True)]
    return pd.DataFrame(rows, columns=COLUMNS)


def slo_subjects(problem: Problem, relaxed_candidates: pd.DataFrame) -> list[tuple[str, float]]:
    """(workload, TPOT SLO [ms]) of every workload with a TPOT SLO and candidates at a looser
    one."""
    workloads = problem.workloads
    if relaxed_candidates.empty or "tpot_slo_ms" not in workloads:
        return []
    with_slo = workloads.dropna(subset=["tpot_slo_ms"])
    looser = set(relaxed_candidates["relaxed_for"])
    return [(workload, slo) for workload, slo in zip(with_slo["workload"], with_slo["tpot_slo_ms"])
            if workload in looser]


def slo_relaxation(problem: Problem, relaxed_candidates: pd.DataFrame, workload: str) -> Problem:
    """``problem`` with ``workload``'s TPOT SLO looser.

    The looser SLO changes the workload's pool: its SLO levels are those with the workload's
    TPOT loosened, so the pool's candidates are all replaced."""
    pool_of = problem.workloads.set_index("workload")["pool"]
    looser = relaxed_candidates[relaxed_candidates["relaxed_for"] == workload].drop(
        columns="relaxed_for")
    pool = problem.candidates["workload"].map(pool_of) == pool_of[workload]
    candidates = pd.concat([problem.candidates[~pool], looser], ignore_index=True)
    relaxed = problem.with_changes(candidates=candidates, configs=configs_of(candidates))
    return prune_dominated(relaxed)[0]


def start_slo_pricing(resolves: ReSolves, problem: Problem,
                      relaxed_candidates: pd.DataFrame) -> SloPricing:
    """The workloads whose looser SLO is priced, and their re-solves, begun on the worker
    (``ReSolves.start``). ``problem``: the problem before dominated configurations were
    dropped (a looser SLO can revive them)."""
    subjects = slo_subjects(problem, relaxed_candidates)
    return SloPricing(subjects, resolves.start([
        partial(slo_relaxation, problem, relaxed_candidates, workload)
        for workload, _ in subjects]))


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


class PendingValues(NamedTuple):
    """Marginal values whose re-solves are queued (``begin_marginal_values``): the binding
    limits, each one's relaxation and re-solve, and the looser SLOs' pricing."""

    limits: list[dict]
    relaxations: list
    binding: list[Future]
    slo_pricing: SloPricing


def begin_marginal_values(model: FleetModel, resolves: ReSolves, *,
                          slo_problem: Problem | None = None,
                          relaxed_candidates: pd.DataFrame | None = None,
                          slo_pricing: SloPricing | None = None) -> PendingValues:
    """Queue the re-solves that price the solved ``model``'s binding limits and looser SLOs.
    ``slo_pricing``: the looser SLOs' re-solves begun on ``resolves`` before the base plan was
    solved (``start_slo_pricing``); otherwise they begin here, each from the base plan carried
    onto it, from ``slo_problem`` (the problem before dominated configurations were dropped)
    and ``relaxed_candidates``."""
    resolves.base_solved(model)
    if slo_pricing is None:
        slo_pricing = SloPricing([], []) if relaxed_candidates is None else start_slo_pricing(
            resolves, slo_problem or model.problem, relaxed_candidates)
    limits, relaxations = binding_relaxations(model)
    return PendingValues(limits, relaxations,
                         resolves.queue(binding_resolves(model, limits, relaxations)),
                         slo_pricing)


def priced_values(resolves: ReSolves, pending: PendingValues, base: BasePlan,
                  tpot_factor: float = 1.5) -> pd.DataFrame:
    """The binding limits and looser SLOs of ``pending`` with what relaxing each saves against
    ``base``, once the caller and the worker have solved every re-solve queued."""
    relaxed, slo_relaxed = resolves.results(pending.binding, pending.slo_pricing.started)
    tables = [binding_rows(pending.limits, pending.relaxations,
                           [saving(base, one) for one in relaxed]),
              slo_rows(pending.slo_pricing.subjects, [saving(base, one) for one in slo_relaxed],
                       base, tpot_factor)]
    tables = [t for t in tables if not t.empty]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=COLUMNS)


def marginal_values(model: FleetModel, base: BasePlan, *, slo_problem: Problem | None = None,
                    relaxed_candidates: pd.DataFrame | None = None, tpot_factor: float = 1.5,
                    resolves: ReSolves | None = None,
                    slo_pricing: SloPricing | None = None) -> pd.DataFrame:
    """Binding limits and looser SLOs, priced by re-solving
    (``resolve_queue.PARALLEL_RESOLVES`` at a time): ``begin_marginal_values``, then
    ``priced_values``."""
    with nullcontext(resolves) if resolves else ReSolves(base.options, base.deadline) as resolves:
        pending = begin_marginal_values(model, resolves, slo_problem=slo_problem,
                                        relaxed_candidates=relaxed_candidates,
                                        slo_pricing=slo_pricing)
        return priced_values(resolves, pending, base, tpot_factor)
