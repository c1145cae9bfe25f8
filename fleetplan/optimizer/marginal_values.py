"""Binding constraints and what relaxing each would save, measured by re-solving.

A MILP's duals say little about whole replicas, so each binding limit is priced by solving the
problem again with that limit relaxed by one step, as its family's entry in
``constraint_families.FAMILIES`` says (one more node of a capped GPU, ten points more spot
share, one spare replica fewer, ten percent more budget), and a looser TPOT SLO per workload.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from fleetplan.optimizer.constraint_families import FAMILIES, FAMILY, priced_families
from fleetplan.optimizer.decomposition import solve_fleet
from fleetplan.optimizer.dominance import prune_dominated
from fleetplan.optimizer.fleet_problem import Problem, configs_of
from fleetplan.optimizer.milp import FleetModel, build_model
from fleetplan.optimizer.plan_summary import usd
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


def _saving(base_usd_per_month: float, base_gap: float, problem: Problem,
            options: SolveOptions) -> tuple[float, float]:
    """(saving, uncertainty) [USD/month] of ``problem`` against the base plan; the uncertainty
    adds both solves' gaps (a saving within it may be solver noise)."""
    model = build_model(problem)
    outcome = solve_fleet(model, options)
    if not outcome.has_solution:
        return math.nan, math.nan
    relaxed = outcome.objective / problem.horizon_months
    gaps = np.nan_to_num([base_gap, outcome.gap])
    return max(0.0, base_usd_per_month - relaxed), gaps[0] * base_usd_per_month + gaps[1] * relaxed


def _money(value: float, uncertainty: float = 0.0) -> str:
    if not math.isfinite(value):
        return "an unknown amount"
    noise = f" (±{usd(uncertainty)} solver gap)" if uncertainty >= 0.005 else ""
    return f"{usd(value)}{noise}"


def price_binding_limits(model: FleetModel, base_usd_per_month: float, base_gap: float,
                         options: SolveOptions) -> pd.DataFrame:
    """Binding limits with the monthly saving of relaxing each by one step."""
    binding = binding_limits(model)
    rows = []
    for row in binding.head(MAX_RESOLVES).to_dict("records"):
        relaxed, change, template = FAMILY[row["family"]].relax(model.problem, row["subject"])
        saving, noise = _saving(base_usd_per_month, base_gap, relaxed, options)
        rows.append({**row, "change": change, "saving_usd_per_month": saving,
                     "description": f"{row['family']} {row['subject']}: "
                                    + template.format(saving=_money(saving, noise))})
    return pd.DataFrame(rows, columns=COLUMNS)


def price_slo_relaxations(problem: Problem, relaxed_candidates: pd.DataFrame,
                          base_usd_per_month: float, base_gap: float, options: SolveOptions,
                          factor: float) -> pd.DataFrame:
    """Per workload with a TPOT SLO: the saving of the looser SLO (rows only where it saves)."""
    rows = []
    workloads = problem.workloads
    if relaxed_candidates.empty or "tpot_slo_ms" not in workloads:
        return pd.DataFrame(columns=COLUMNS)
    with_slo = workloads.dropna(subset=["tpot_slo_ms"])
    pool_of = workloads.set_index("workload")["pool"]
    for workload, slo in zip(with_slo["workload"], with_slo["tpot_slo_ms"]):
        looser = relaxed_candidates[relaxed_candidates["relaxed_for"] == workload].drop(
            columns="relaxed_for")
        if looser.empty:
            continue
        pool = problem.candidates["workload"].map(pool_of) == pool_of[workload]
        candidates = pd.concat([problem.candidates[~pool], looser], ignore_index=True)
        relaxed = problem.with_changes(candidates=candidates, configs=configs_of(candidates))
        saving, noise = _saving(base_usd_per_month, base_gap, prune_dominated(relaxed)[0],
                                options)
        if not saving > max(0.005 + 1e-6 * base_usd_per_month, noise):  # does not bind
            continue
        rows.append({"family": "tpot_slo", "subject": workload, "period": -1, "value": slo,
                     "limit": slo, "unit": "ms", "change": f"x{factor:g}",
                     "saving_usd_per_month": saving,
                     "description": f"tpot_slo {workload}: relaxing TPOT to {slo * factor:g} ms "
                                    f"(from {slo:g} ms) would save {_money(saving, noise)} "
                                    "per month"})
    return pd.DataFrame(rows, columns=COLUMNS)


def marginal_values(model: FleetModel, base_usd_per_month: float, base_gap: float,
                    options: SolveOptions, *, slo_problem: Problem | None = None,
                    relaxed_candidates: pd.DataFrame | None = None,
                    tpot_factor: float = 1.5) -> pd.DataFrame:
    """Binding limits and looser SLOs, priced by re-solving. ``slo_problem``: the problem
    before dominated configurations were dropped (a looser SLO can revive them)."""
    tables: list[pd.DataFrame] = [price_binding_limits(model, base_usd_per_month, base_gap,
                                                       options)]
    if relaxed_candidates is not None:
        tables.append(price_slo_relaxations(slo_problem or model.problem, relaxed_candidates,
                                            base_usd_per_month, base_gap, options, tpot_factor))
    tables = [t for t in tables if not t.empty]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=COLUMNS)
