r"""The plan as changes to today's fleet: what to buy, release, migrate and keep each month.

GPUs held: :math:`X_{gpcm}` GPUs of type g at pricing type p on configuration c in month m,
with c = ``(idle)`` for GPUs held but running no replica. For a configuration it is its
replicas' GPUs; idle is the nodes' GPUs less those (for ``committed`` and ``owned`` GPUs,
which are the company's until their end whatever the plan does, the GPUs that exist less those
used: an owned server running nothing is idle, costs nothing, and is not sold). Month -1 is
today: ``fleet.current`` rows on their configuration when it is known, else idle.

Per month and (g, p), with :math:`\Delta_c = X_{gpcm} - X_{gpc,m-1}`: GPUs bought
:math:`\max(0, \sum_c \Delta_c)`, released :math:`\max(0, -\sum_c \Delta_c)`, migrated (the
same GPUs moved to another configuration) :math:`(\sum_c |\Delta_c| - |\sum_c \Delta_c|)/2`,
so bought + released + migrated :math:`= (\sum_c |\Delta_c| + |\sum_c \Delta_c|) / 2`.

The churn limit and the minimum commitment that bound these changes are MILP rows in
``change_limits.py``. With demand scenarios each scenario changes today's fleet its own way:
the tables here then hold one set of months per scenario.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import EXISTING_PRICING, LINKING_PRICING
from fleetplan.optimizer.current_fleet import existing_cap
from fleetplan.optimizer.fleet_problem import (
    Problem,
    month_keys,
    month_named,
    outcome_keys,
    with_month_keys,
)

IDLE = "(idle)"
KEYS = ["gpu", "pricing_type", "config"]
#: Pricing types that count towards the minimum commitment.
COMMITTED_PRICING = (*EXISTING_PRICING, *LINKING_PRICING)
#: Subjects of the monthly limit rows: one limit for every month, priced once (at its tightest
#: month, which the row's period names).
CHURN_SUBJECT = "GPU changes per month"
MIN_COMMITTED_SUBJECT = "committed GPUs"
CHANGE_COLUMNS = ["month", "gpu", "pricing_type", "config", "gpus_before", "gpus", "added",
                  "removed", "kept"]


def wants_changes(problem: Problem) -> bool:
    """True when the plan starts from a fleet or limits how it changes."""
    return not (problem.existing.empty and problem.lead_times.empty) or \
        problem.max_changes_per_month is not None or problem.min_committed_gpus is not None


def baseline(problem: Problem) -> pd.DataFrame:
    """Today's GPUs (month -1) per (gpu, pricing_type, config): the configuration a
    ``fleet.current`` row names (the plan's configuration of that model, GPU, quantization and
    TP when there is one), idle otherwise."""
    existing = problem.existing
    if existing.empty:
        return pd.DataFrame(columns=[*KEYS, "gpus"])
    ids = problem.configs["config"].astype(str)
    own = existing["config"].fillna("").astype(str)
    named = [next((c for c in ids if c == name or c.endswith(":" + name)), name) if name else IDLE
             for name in own]
    table = existing.assign(config=named)
    return table.groupby(KEYS, as_index=False)["gpus"].sum()


def expiring(problem: Problem) -> pd.Series:
    """GPUs whose commitment or ownership ends in each month of the horizon [GPUs]."""
    months = np.sort(problem.periods["month"].unique())
    ends = problem.existing.get("end_month", pd.Series(dtype=float)).dropna()
    gpus = problem.existing.loc[ends.index, "gpus"] if len(ends) else pd.Series(dtype=float)
    return gpus.groupby(ends.astype(int).to_numpy()).sum().reindex(months, fill_value=0.0)


def held_from_solution(problem: Problem, solution: dict) -> pd.DataFrame:
    """GPUs held per (gpu, pricing_type, config, month) in a solved plan (the most of any
    period of the month; per demand scenario too when the problem has them): replicas' GPUs,
    and idle the rest of the nodes (or of the committed and owned GPUs that exist)."""
    months = month_keys(problem.periods)
    used = with_month_keys(solution["replicas"], problem.periods).groupby(
        [*KEYS, *months], as_index=False)["gpus"].max()
    pair = ["gpu", "pricing_type", *months]
    held = with_month_keys(solution["nodes"], problem.periods).groupby(
        pair, as_index=False)["gpus"].max()
    there = held["pricing_type"].isin(EXISTING_PRICING)
    held.loc[there, "gpus"] = existing_cap(problem, held[there])
    in_use = used.groupby(pair)["gpus"].sum()
    idle = held.assign(config=IDLE, gpus=(held["gpus"] - in_use.reindex(pd.MultiIndex.from_frame(
        held[pair])).fillna(0.0).to_numpy()).clip(lower=0.0))
    table = pd.concat([used, idle[[*KEYS, *months, "gpus"]]], ignore_index=True)
    return table[table["gpus"] > 1e-6].reset_index(drop=True)


def changes_table(problem: Problem, held: pd.DataFrame) -> pd.DataFrame:
    """Per month and (gpu, pricing_type, config): GPUs before (the month before; today for
    month 0) and after, added, removed and kept on the same configuration [GPUs]. With demand
    scenarios, one such table per scenario (column ``scenario`` first): each outcome changes
    today's fleet month by month in its own way."""
    if "scenario" not in problem.periods:
        return _changes_of(problem, held)
    names = problem.periods["scenario"].drop_duplicates()
    tables = [_changes_of(problem, held[held["scenario"] == name].drop(columns="scenario"))
              .assign(scenario=name) for name in names]
    return pd.concat(tables, ignore_index=True)[["scenario", *CHANGE_COLUMNS]]


def _changes_of(problem: Problem, held: pd.DataFrame) -> pd.DataFrame:
    """``changes_table`` of one outcome: ``held`` per (gpu, pricing_type, config, month)."""
    months = np.sort(problem.periods["month"].unique())
    table = pd.concat([placed_today(problem, held).assign(month=-1), held], ignore_index=True)
    wide = table.pivot_table(index=KEYS, columns="month", values="gpus", aggfunc="sum",
                             fill_value=0.0).reindex(columns=[-1, *months], fill_value=0.0)
    after = wide[list(months)].to_numpy()
    before = wide[[-1, *months[:-1]]].to_numpy()
    index = wide.index.to_frame(index=False)
    rows = pd.DataFrame({
        **{k: np.repeat(index[k].to_numpy(), len(months)) for k in KEYS},
        "month": np.tile(months, len(index)), "gpus_before": before.ravel(),
        "gpus": after.ravel()})
    rows["added"] = (rows["gpus"] - rows["gpus_before"]).clip(lower=0.0)
    rows["removed"] = (rows["gpus_before"] - rows["gpus"]).clip(lower=0.0)
    rows["kept"] = np.minimum(rows["gpus"], rows["gpus_before"])
    rows = rows[(rows["gpus"] > 1e-6) | (rows["gpus_before"] > 1e-6)]
    return rows[CHANGE_COLUMNS].sort_values(["month", "gpu", "pricing_type", "config"]) \
        .reset_index(drop=True)


def placed_today(problem: Problem, held: pd.DataFrame) -> pd.DataFrame:
    """Today's GPUs per (gpu, pricing_type, config), those with no configuration named put on
    the configurations the plan gives their type in its first month (so placing them is no
    change), the rest idle."""
    today = baseline(problem)
    unknown = today[today["config"] == IDLE]
    placed = [today[today["config"] != IDLE]]
    first = held[(held["month"] == 0) & (held["config"] != IDLE)].sort_values("config")
    for gpu, pricing, gpus in unknown[["gpu", "pricing_type", "gpus"]].to_numpy():
        mine = first[(first["gpu"] == gpu) & (first["pricing_type"] == pricing)]
        before = mine["gpus"].cumsum().to_numpy() - mine["gpus"].to_numpy()
        take = np.clip(np.minimum(mine["gpus"].to_numpy(), gpus - before), 0.0, None)
        placed.append(mine[KEYS].assign(gpus=take))
        placed.append(pd.DataFrame({"gpu": [gpu], "pricing_type": [pricing], "config": [IDLE],
                                    "gpus": [gpus - take.sum()]}))
    table = pd.concat(placed, ignore_index=True)
    return table.groupby(KEYS, as_index=False)["gpus"].sum()


def monthly_diff(changes: pd.DataFrame) -> pd.DataFrame:
    """Per month (and demand scenario, when ``changes`` has them): GPUs bought, released,
    migrated (moved to another configuration of the same GPUs), kept, changes (= bought +
    released + migrated) and held [GPUs]."""
    by = [*outcome_keys(changes), "month"]
    columns = [*by, "bought", "released", "migrated", "kept", "changes", "gpus"]
    if changes.empty:
        return pd.DataFrame(columns=columns)
    pair = changes.assign(moved=changes["added"] + changes["removed"],
                          net=changes["gpus"] - changes["gpus_before"]).groupby(
        [*by, "gpu", "pricing_type"], sort=False).agg(
        moved=("moved", "sum"), net=("net", "sum"), kept=("kept", "sum"), gpus=("gpus", "sum"))
    pair["bought"] = pair["net"].clip(lower=0.0) + 0.0  # + 0.0: no negative zeros
    pair["released"] = (-pair["net"]).clip(lower=0.0) + 0.0
    pair["migrated"] = (pair["moved"] - pair["net"].abs()).clip(lower=0.0) / 2 + 0.0
    table = pair.groupby(by, sort=False)[["bought", "released", "migrated", "kept", "gpus"]].sum()
    table["changes"] = table["bought"] + table["released"] + table["migrated"]
    return table.reset_index().sort_values(by, kind="stable").reset_index(drop=True)[columns]


def churn_breaks(problem: Problem, changes: pd.DataFrame) -> list[str]:
    """Months whose changes (less GPUs released at their commitment's end) pass the limit."""
    limit = problem.max_changes_per_month
    if limit is None or changes.empty:
        return []
    diff = monthly_diff(changes)
    diff["allowed"] = limit + diff["month"].map(expiring(problem)).fillna(0.0)
    over = diff[diff["changes"] > diff["allowed"] + 1e-6]
    return [f"churn: {month_named(row)} changes {row['changes']:.0f} GPUs, more than "
            f"{row['allowed']:.0f}" for row in over.to_dict("records")]


def min_committed_breaks(problem: Problem, changes: pd.DataFrame) -> list[str]:
    """Months holding fewer GPUs under commitment than min_committed_gpus."""
    least = problem.min_committed_gpus
    if least is None:
        return []
    months = month_keys(problem.periods)
    every = pd.MultiIndex.from_frame(problem.periods[months].drop_duplicates())
    committed = changes[changes["pricing_type"].isin(COMMITTED_PRICING)]
    held = committed.groupby(months)["gpus"].sum().reindex(every, fill_value=0.0)
    short = held[held < least - 1e-6].reset_index()
    return [f"min_committed: {month_named(row)} holds {row['gpus']:.0f} committed GPUs, fewer than "
            f"{least:.0f}" for row in short.to_dict("records")]


def largest_node(problem: Problem) -> int:
    """GPUs in the largest node: the step by which churn and commitment limits are relaxed."""
    return int(problem.gpus["gpus_per_node"].max())


def largest_node_step(problem: Problem, subjects: pd.Series) -> np.ndarray:
    """The binding step of every subject row: one largest node [GPUs]."""
    return np.full(len(subjects), float(largest_node(problem)))


def relax_churn(problem: Problem, subject: str) -> tuple[Problem, str, str]:
    """One node more of changes per month."""
    step, limit = largest_node(problem), problem.max_changes_per_month
    return (problem.with_changes(max_changes_per_month=limit + step), f"+{step} GPUs",
            (f"allowing {limit + step:.0f} GPU changes per month instead of {limit:.0f} would "
             "save {saving} per month"))


def lift_churn(problem: Problem) -> Problem | None:
    """No churn limit."""
    if problem.max_changes_per_month is None:
        return None
    return problem.with_changes(max_changes_per_month=None)


def diagnose_churn(problem: Problem, solution: dict) -> list[str]:
    """Months in which the plan without a churn limit changes more GPUs than allowed."""
    changes = changes_table(problem, held_from_solution(problem, solution))
    return [line.replace("churn: ", "needs: ", 1) for line in churn_breaks(problem, changes)][:5]


def relax_min_committed(problem: Problem, subject: str) -> tuple[Problem, str, str]:
    """One node less of committed GPUs to keep."""
    step, least = largest_node(problem), problem.min_committed_gpus
    lower = max(0.0, least - step)
    return (problem.with_changes(min_committed_gpus=lower), f"-{step} GPUs",
            (f"keeping {lower:.0f} committed GPUs instead of {least:.0f} would save {{saving}} "
             "per month"))


def lift_min_committed(problem: Problem) -> Problem | None:
    """No minimum commitment."""
    if problem.min_committed_gpus is None:
        return None
    return problem.with_changes(min_committed_gpus=None)


def diagnose_min_committed(problem: Problem, solution: dict) -> list[str]:
    """Months in which fewer GPUs than the minimum can be held under commitment."""
    changes = changes_table(problem, held_from_solution(problem, solution))
    return [line.replace("min_committed: ", "can only: ", 1)
            for line in min_committed_breaks(problem, changes)][:5]


def freeze_swaps(problem: Problem, configs: pd.DataFrame) -> np.ndarray:
    """With a churn limit or a minimum commitment, no configuration stands in for another
    (a swap changes what moves, and how many GPUs are held)."""
    if problem.max_changes_per_month is None and problem.min_committed_gpus is None:
        return np.ones((len(configs), len(configs)), dtype=bool)
    return np.eye(len(configs), dtype=bool)
