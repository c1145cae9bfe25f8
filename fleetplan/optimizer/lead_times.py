"""Lead times and monthly availability of new GPUs (the ``lead_time`` constraint family).

``Problem.lead_times`` rows (gpu, pricing_type or ``*`` for every pricing type of new GPUs,
start_month, max_new_gpus_per_month) say from which month of the plan more GPUs of a type can
be had, and how many may be added per month. GPUs the company already has (``committed``,
``owned``) are there from the start and never wait.

- Linking capacity (reserved terms, purchases) of a GPU type with a lead time starts at its
  start month: its variable counts, and is paid, only in the periods of that month and later
  (``start_month`` column of the replica and node tables; ``milp_tables.per_period``).
- Flexible capacity (on demand, spot) of that type is held at 0 in the months before: one row
  per GPU type, ``sum of its GPUs before the start month <= 0``.
- The monthly cap: with one period per month, ``N[g, m] - N[g, m-1] <= cap`` for every month,
  where ``N`` counts the GPUs of the type at the pricing types the lead time covers (nothing
  before month 0): the net GPUs added in a month.

Without lead times none of this changes the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import EXISTING_PRICING
from fleetplan.errors import InvalidValueError
from fleetplan.optimizer.current_fleet import existing_cap
from fleetplan.optimizer.fleet_problem import (
    Problem,
    month_keys,
    month_named,
    start_months,
    with_month_keys,
)
from fleetplan.optimizer.milp_tables import add_keyed_rows, per_period

if TYPE_CHECKING:
    from fleetplan.optimizer.milp import FleetModel
    from fleetplan.optimizer.plan_checks import PlanView

#: Subject suffix of the monthly-cap rows (the start rows' subject is the GPU id).
PER_MONTH = " per month"

LEAD_COLUMNS = ["gpu", "pricing_type", "start_month", "max_new_gpus_per_month"]


def present_replicas(problem: Problem, rows: pd.DataFrame) -> pd.DataFrame:
    """Replica rows (period -1 = linking) that can exist: existing GPUs only in months they are
    there, linking rows with their ``start_month`` when the problem has lead times."""
    existing = rows["pricing_type"].isin(EXISTING_PRICING).to_numpy()
    if existing.any():
        month = rows["period"].map(problem.periods.set_index("period")["month"])
        there = existing_cap(problem, rows[existing].assign(month=month[existing])) > 0
        keep = ~existing
        keep[existing] = there
        rows = rows[keep]
    if problem.lead_times.empty:
        return rows
    return rows.assign(start_month=np.where(rows["period"] < 0, start_months(problem, rows), 0))


def linking_hours(problem: Problem, rows: pd.DataFrame) -> np.ndarray:
    """Hours of the horizon from each row's ``start_month`` on [h] (all of it without one)."""
    if "start_month" not in rows:
        return np.full(len(rows), problem.horizon_hours)
    by_month = problem.periods.groupby("month")["hours"].sum()
    covered = by_month.index.to_numpy()[None, :] >= rows["start_month"].to_numpy()[:, None]
    return covered.astype(float) @ by_month.to_numpy(dtype=float)


def covered(problem: Problem, keys: pd.DataFrame) -> np.ndarray:
    """True for (gpu, pricing_type) rows a lead time applies to."""
    lead = problem.lead_times
    if lead.empty or keys.empty:
        return np.zeros(len(keys), dtype=bool)
    every = keys["gpu"].isin(lead.loc[lead["pricing_type"] == "*", "gpu"]).to_numpy()
    own = pd.MultiIndex.from_frame(keys[["gpu", "pricing_type"]]).isin(
        pd.MultiIndex.from_frame(lead[["gpu", "pricing_type"]]))
    return (every | own) & ~keys["pricing_type"].isin(EXISTING_PRICING).to_numpy()


def monthly_caps(problem: Problem) -> pd.Series:
    """Most GPUs added per month, by GPU type (types with a cap only)."""
    lead = problem.lead_times
    if lead.empty:
        return pd.Series(dtype=float)
    return lead.dropna(subset=["max_new_gpus_per_month"]).groupby("gpu")[
        "max_new_gpus_per_month"].min()


def require_monthly_periods(problem: Problem, what: str) -> None:
    """One period per month (of each demand scenario), or an error naming ``what`` needs it."""
    if problem.periods.groupby(month_keys(problem.periods)).size().max() > 1:
        message = (f"{what} needs one period per month: drop the hourly profiles, or the limit "
                   "(changes between hours of a day are not changes of the fleet)")
        raise InvalidValueError(message)


def _node_terms(model: FleetModel) -> pd.DataFrame:
    p = model.problem
    nodes = with_month_keys(per_period(model.nodes, p.periods), p.periods)
    return nodes[covered(p, nodes)]


def define_lead_times(model: FleetModel) -> None:
    """No new GPUs of a type before its start month; at most its cap added per month."""
    p = model.problem
    if p.lead_times.empty:
        return
    nodes = _node_terms(model)
    early = nodes[nodes["month"] < start_months(p, nodes)]
    add_keyed_rows(model, "lead_time", early[["gpu"]].assign(
        col=early["col"].to_numpy(), coef=early["gpus_per_node"].to_numpy(float)), ["gpu"],
        "<=", 0.0, unit="GPUs", subject=lambda t: t["gpu"])
    caps = monthly_caps(p)
    capped = nodes[nodes["gpu"].isin(caps.index)]
    if capped.empty:
        return
    require_monthly_periods(p, "fleet.gpus[].max_new_gpus_per_month")
    months = month_keys(p.periods)  # the month after, in the same demand scenario
    period_of = p.periods.set_index(months)["period"]
    now = capped.assign(coef=capped["gpus_per_node"].astype(float))
    before = capped.assign(coef=-capped["gpus_per_node"].astype(float),
                           month=capped["month"] + 1)
    before["period"] = period_of.reindex(before.set_index(months).index).to_numpy()
    terms = pd.concat([now, before.dropna(subset=["period"])], ignore_index=True)
    terms = terms.astype({"period": int})[["gpu", "period", "col", "coef"]]
    add_keyed_rows(model, "lead_time", terms, ["gpu", "period"], "<=",
                   lambda t: t["gpu"].map(caps).to_numpy(dtype=float), unit="GPUs",
                   subject=lambda t: t["gpu"] + PER_MONTH)


def held_new_gpus(problem: Problem, held: pd.DataFrame) -> pd.DataFrame:
    """GPUs held per (gpu, month) at the pricing types lead times cover, from a table of
    gpu, pricing_type, month, gpus (and scenario, with demand scenarios: per scenario)."""
    held = held[covered(problem, held)]
    return held.groupby(["gpu", *month_keys(problem.periods)], as_index=False)["gpus"].sum()


def lead_time_breaks(problem: Problem, held: pd.DataFrame) -> list[str]:
    """Where GPUs held (gpu, pricing_type, month, gpus; and scenario, with demand scenarios)
    come before their start month or grow by more than the monthly cap."""
    if problem.lead_times.empty or held.empty:
        return []
    new = held[covered(problem, held) & (held["gpus"] > 1e-6)]
    early = new[new["month"] < start_months(problem, new)]
    problems = [f"lead_time: {g} holds {n:.0f} new GPUs in month {m}, before its start month"
                for g, m, n in early[["gpu", "month", "gpus"]].to_numpy()]
    caps = monthly_caps(problem)
    if caps.empty:
        return problems
    months = month_keys(problem.periods)
    every = problem.periods[months].drop_duplicates().sort_values(months)
    per_month = held_new_gpus(problem, held).pivot_table(
        index=months, columns="gpu", values="gpus", aggfunc="sum", fill_value=0.0)
    per_month = per_month.reindex(every.set_index(months).index, fill_value=0.0)
    outcomes = per_month.groupby(level="scenario") if len(months) > 1 else per_month
    added = outcomes.diff().fillna(per_month).reset_index()
    for gpu in caps.index.intersection(added.columns):
        over = added[added[gpu] > caps[gpu] + 1e-6]
        problems += [f"lead_time: {gpu} grows by {row[gpu]:.0f} GPUs in {month_named(row)}, "
                     f"more than {caps[gpu]:.0f}" for row in over.to_dict("records")]
    return problems


def check_lead_times(view: PlanView) -> list[str]:
    """No new GPUs before their start month; no more than the monthly cap added in a month."""
    if view.problem.lead_times.empty:
        return []
    return lead_time_breaks(view.problem, view.held_gpus())


def relax_lead_time(problem: Problem, subject: str) -> tuple[Problem, str, str]:
    """One month less of lead time, or one node more per month."""
    lead = problem.lead_times.copy()
    if subject.endswith(PER_MONTH):
        gpu = subject.removesuffix(PER_MONTH)
        step = int(problem.gpus.set_index("gpu").loc[gpu, "gpus_per_node"])
        rows = lead["gpu"] == gpu
        cap = float(lead.loc[rows, "max_new_gpus_per_month"].min())
        lead.loc[rows, "max_new_gpus_per_month"] = cap + step
        return (problem.with_changes(lead_times=lead), f"+{step} GPUs/month",
                (f"adding {cap + step:.0f} {gpu} per month instead of {cap:.0f} would save "
                 "{saving} per month"))
    rows = lead["gpu"] == subject
    start = int(lead.loc[rows, "start_month"].max())
    lead.loc[rows, "start_month"] = (lead.loc[rows, "start_month"] - 1).clip(lower=0)
    return (problem.with_changes(lead_times=lead), "-1 month",
            (f"{subject} one month sooner (a lead time of {start - 1} instead of {start} "
             "months; one more month costs as much) would save {saving} per month"))


def lift_lead_times(problem: Problem) -> Problem | None:
    """No lead times and no monthly caps."""
    return None if problem.lead_times.empty else problem.with_changes(lead_times=pd.DataFrame())


def diagnose_lead_times(problem: Problem, solution: dict) -> list[str]:
    """What the plan without lead times needed before the start months or above the caps."""
    nodes = solution["nodes"]
    held = with_month_keys(nodes, problem.periods).groupby(
        ["gpu", "pricing_type", *month_keys(problem.periods)], as_index=False)["gpus"].max()
    return [line.replace("lead_time: ", "needs: ", 1) for line in
            lead_time_breaks(problem, held)][:5]


def wanted_lead_rows(model: FleetModel, table: pd.DataFrame) -> np.ndarray:
    """Start rows bind only for GPU types the plan buys new from their start month; cap rows
    when they are tight."""
    nodes = _node_terms(model)
    bought = nodes.assign(value=model.value(nodes))
    used = set(bought.loc[bought["value"] > 1e-6, "gpu"])
    subject = table["subject"].astype(str)
    return (subject.str.endswith(PER_MONTH) | subject.isin(used)).to_numpy()


def lead_swaps(problem: Problem, configs: pd.DataFrame) -> np.ndarray:
    """[c', c]: c' may replace c when on the same GPU type or on one without a lead time."""
    gpu = configs["gpu"].to_numpy()
    free = ~np.isin(gpu, problem.lead_times.get("gpu", pd.Series(dtype=str)).unique())
    return (gpu[:, None] == gpu[None, :]) | free[:, None]
