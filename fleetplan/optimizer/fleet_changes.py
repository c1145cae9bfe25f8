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

Churn limit (``churn`` family, one period per month): auxiliary :math:`u, d \ge 0` with
:math:`\Delta_c = u_c - d_c` per (g, p, c, m) and :math:`b^+, b^- \ge 0` with
:math:`\sum_c (u_c - d_c) = b^+ - b^-` per (g, p, m), and per month

.. math:: \tfrac12 \textstyle\sum_{gpc} (u + d) + \tfrac12 \sum_{gp} (b^+ + b^-)
          \le L + E_m

where :math:`E_m` are the GPUs whose commitment ends in month m (released by the contract,
not by the plan). Minimum commitment (``min_committed`` family): GPUs held at committed,
owned, reserved or purchase pricing are at least ``min_committed_gpus`` in every period.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import EXISTING_PRICING, LINKING_PRICING
from fleetplan.optimizer.current_fleet import existing_cap
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.lead_times import require_monthly_periods
from fleetplan.optimizer.milp_tables import add_keyed_rows, per_period

if TYPE_CHECKING:
    from fleetplan.optimizer.milp import FleetModel

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


def held_terms(model: FleetModel) -> tuple[pd.DataFrame, pd.DataFrame]:
    """GPUs held per (gpu, pricing_type, config, month) as terms (col, coef) and constants
    (gpus): replicas on their configuration, the rest of the nodes idle (of committed and owned
    GPUs, the rest of those that exist: they are the company's until their end)."""
    p = model.problem
    month = p.periods.set_index("period")["month"]
    replicas = per_period(model.replicas, p.periods)
    replicas = replicas.assign(month=replicas["period"].map(month), coef=replicas["tp"] * 1.0)
    nodes = per_period(model.nodes, p.periods)
    nodes = nodes.assign(month=nodes["period"].map(month), config=IDLE,
                         coef=nodes["gpus_per_node"] * 1.0)
    nodes = nodes[~nodes["pricing_type"].isin(EXISTING_PRICING)]
    idle_use = replicas.assign(config=IDLE, coef=-replicas["coef"])
    columns = [*KEYS, "month", "col", "coef"]
    terms = pd.concat([replicas[columns], nodes[columns], idle_use[columns]], ignore_index=True)
    committed = p.existing if not p.existing.empty \
        else pd.DataFrame(columns=["gpu", "pricing_type"])
    held = committed[["gpu", "pricing_type"]].drop_duplicates().merge(
        pd.DataFrame({"month": np.sort(p.periods["month"].unique())}), how="cross")
    constants = held.assign(config=IDLE, gpus=existing_cap(p, held))
    return terms, constants[[*KEYS, "month", "gpus"]]


def unknown_pairs(problem: Problem) -> pd.DataFrame:
    """(gpu, pricing_type) of today's GPUs with no configuration named: whatever they run, the
    plan's first month may put them on any configuration of their type without a change."""
    today = baseline(problem)
    return today.loc[today["config"] == IDLE, ["gpu", "pricing_type"]].drop_duplicates()


def _in(table: pd.DataFrame, pairs: pd.DataFrame) -> np.ndarray:
    return pd.MultiIndex.from_frame(table[["gpu", "pricing_type"]]).isin(
        pd.MultiIndex.from_frame(pairs[["gpu", "pricing_type"]])) if len(pairs) else \
        np.zeros(len(table), dtype=bool)


def define_churn(model: FleetModel) -> None:
    """GPUs bought + released + migrated in a month stay within max_changes_per_month."""
    p = model.problem
    if p.max_changes_per_month is None:
        return
    require_monthly_periods(p, "fleet.max_changes_per_month")
    terms, constants = held_terms(model)
    months = np.sort(p.periods["month"].unique())
    period_of = p.periods.set_index("month")["period"]
    constants = pd.concat([constants, baseline(p).assign(month=-1)], ignore_index=True)
    level = constants.set_index([*KEYS, "month"])["gpus"]
    keys = pd.concat([terms[KEYS], constants[KEYS]]).drop_duplicates().merge(
        pd.DataFrame({"month": months}), how="cross")
    keys = keys.assign(period=keys["month"].map(period_of))
    free = (keys["month"] == 0).to_numpy() & _in(keys, unknown_pairs(p))
    net = keys[["gpu", "pricing_type", "month", "period"]].drop_duplicates(
        ["gpu", "pricing_type", "month"])
    first = (net["month"] == 0).to_numpy() & _in(net, unknown_pairs(p))
    keys = keys[~free]
    up, down = model.new_columns(keys), model.new_columns(keys)
    plus, minus = model.new_columns(net), model.new_columns(net)
    change = pd.concat([terms, terms.assign(month=terms["month"] + 1, coef=-terms["coef"]),
                        up.assign(coef=-1.0), down.assign(coef=1.0)], ignore_index=True)
    change = change[change["month"].isin(months)]

    def level_at(table: pd.DataFrame, shift: int = 0, keys: list[str] = KEYS) -> np.ndarray:
        at = table[keys].assign(month=table["month"] + shift)
        found = level.groupby(level=[*keys, "month"]).sum()
        return found.reindex(pd.MultiIndex.from_frame(at)).fillna(0.0).to_numpy()

    add_keyed_rows(model, "churn", change[[*KEYS, "month", "col", "coef"]], [*KEYS, "month"],
                   "=", lambda t: level_at(t, -1) - level_at(t), rows=keys, unit="change",
                   subject=lambda t: t["gpu"] + "/" + t["pricing_type"])
    pair = ["gpu", "pricing_type", "month"]
    moved = pd.concat([up.assign(coef=1.0), down.assign(coef=-1.0)])[[*pair, "col", "coef"]]
    opened = terms[terms["month"] == 0][[*pair, "col", "coef"]]
    balance = pd.concat([moved, opened[_in(opened, unknown_pairs(p))],
                         plus[[*pair, "col"]].assign(coef=-1.0),
                         minus[[*pair, "col"]].assign(coef=1.0)], ignore_index=True)
    pairs = ["gpu", "pricing_type"]
    add_keyed_rows(model, "churn", balance, pair, "=",
                   lambda t: np.where((t["month"] == 0).to_numpy() & _in(t, unknown_pairs(p)),
                                      level_at(t, -1, pairs) - level_at(t, 0, pairs), 0.0),
                   rows=net, unit="change", subject=lambda t: t["gpu"] + "/" + t["pricing_type"])
    weight = np.where(first, 1.0, 0.5)
    total = pd.concat([up[["period", "col"]].assign(coef=0.5),
                       down[["period", "col"]].assign(coef=0.5),
                       plus[["period", "col"]].assign(coef=weight),
                       minus[["period", "col"]].assign(coef=weight)], ignore_index=True)
    month = p.periods.set_index("period")["month"]
    allowance = expiring(p)
    add_keyed_rows(model, "churn", total, ["period"], "<=",
                   lambda t: p.max_changes_per_month
                   + t["period"].map(month).map(allowance).fillna(0.0).to_numpy(),
                   unit="GPUs", subject=lambda t: pd.Series(CHURN_SUBJECT, index=t.index))


def define_min_committed(model: FleetModel) -> None:
    """GPUs held under commitment in every period are at least min_committed_gpus."""
    p = model.problem
    if p.min_committed_gpus is None:
        return
    nodes = per_period(model.nodes, p.periods)
    nodes = nodes[nodes["pricing_type"].isin(COMMITTED_PRICING)
                  & ~nodes["pricing_type"].isin(EXISTING_PRICING)]
    terms = nodes[["period"]].assign(col=nodes["col"].to_numpy(),
                                     coef=nodes["gpus_per_node"].to_numpy(float))
    month = p.periods.set_index("period")["month"]
    committed = held_committed(p)

    def limit(table: pd.DataFrame) -> np.ndarray:
        there = table["period"].map(month).map(committed).fillna(0.0).to_numpy()
        return p.min_committed_gpus - there

    add_keyed_rows(model, "min_committed", terms, ["period"], ">=", limit,
                   rows=p.periods[["period"]], unit="GPUs",
                   subject=lambda t: pd.Series(MIN_COMMITTED_SUBJECT, index=t.index))


def held_committed(problem: Problem) -> pd.Series:
    """Committed and owned GPUs there per month [GPUs]."""
    existing = problem.existing
    months = np.sort(problem.periods["month"].unique())
    if existing.empty:
        return pd.Series(0.0, index=months)
    keys = existing[["gpu", "pricing_type"]]
    keys = keys.drop_duplicates().merge(pd.DataFrame({"month": months}), how="cross")
    return pd.Series(existing_cap(problem, keys), index=keys["month"]).groupby(level=0).sum() \
        .reindex(months, fill_value=0.0)


def held_from_solution(problem: Problem, solution: dict) -> pd.DataFrame:
    """GPUs held per (gpu, pricing_type, config, month) in a solved plan (the most of any
    period of the month): replicas' GPUs, and idle the rest of the nodes (or of the committed
    and owned GPUs that exist)."""
    month = problem.periods.set_index("period")["month"]
    replicas = solution["replicas"].assign(month=lambda t: t["period"].map(month))
    used = replicas.groupby([*KEYS, "month"], as_index=False)["gpus"].max()
    nodes = solution["nodes"].assign(month=lambda t: t["period"].map(month))
    held = nodes.groupby(["gpu", "pricing_type", "month"], as_index=False)["gpus"].max()
    there = held["pricing_type"].isin(EXISTING_PRICING)
    held.loc[there, "gpus"] = existing_cap(problem, held[there])
    in_use = used.groupby(["gpu", "pricing_type", "month"])["gpus"].sum()
    idle = held.assign(config=IDLE, gpus=(held["gpus"] - in_use.reindex(pd.MultiIndex.from_frame(
        held[["gpu", "pricing_type", "month"]])).fillna(0.0).to_numpy()).clip(lower=0.0))
    table = pd.concat([used, idle[[*KEYS, "month", "gpus"]]], ignore_index=True)
    return table[table["gpus"] > 1e-6].reset_index(drop=True)


def changes_table(problem: Problem, held: pd.DataFrame) -> pd.DataFrame:
    """Per month and (gpu, pricing_type, config): GPUs before (the month before; today for
    month 0) and after, added, removed and kept on the same configuration [GPUs]."""
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
    """Per month: GPUs bought, released, migrated (moved to another configuration of the same
    GPUs), kept, changes (= bought + released + migrated) and held [GPUs]."""
    columns = ["month", "bought", "released", "migrated", "kept", "changes", "gpus"]
    if changes.empty:
        return pd.DataFrame(columns=columns)
    pair = changes.assign(moved=changes["added"] + changes["removed"],
                          net=changes["gpus"] - changes["gpus_before"]).groupby(
        ["month", "gpu", "pricing_type"]).agg(moved=("moved", "sum"), net=("net", "sum"),
                                              kept=("kept", "sum"), gpus=("gpus", "sum"))
    pair["bought"] = pair["net"].clip(lower=0.0) + 0.0  # + 0.0: no negative zeros
    pair["released"] = (-pair["net"]).clip(lower=0.0) + 0.0
    pair["migrated"] = (pair["moved"] - pair["net"].abs()).clip(lower=0.0) / 2 + 0.0
    table = pair.groupby("month")[["bought", "released", "migrated", "kept", "gpus"]].sum()
    table["changes"] = table["bought"] + table["released"] + table["migrated"]
    return table.reset_index()[columns]


def churn_breaks(problem: Problem, changes: pd.DataFrame) -> list[str]:
    """Months whose changes (less GPUs released at their commitment's end) pass the limit."""
    limit = problem.max_changes_per_month
    if limit is None or changes.empty:
        return []
    diff = monthly_diff(changes).set_index("month")
    allowed = limit + expiring(problem).reindex(diff.index, fill_value=0.0)
    over = diff.index[(diff["changes"] > allowed + 1e-6).to_numpy()]
    return [f"churn: month {m} changes {diff.loc[m, 'changes']:.0f} GPUs, more than "
            f"{allowed[m]:.0f}" for m in over]


def min_committed_breaks(problem: Problem, changes: pd.DataFrame) -> list[str]:
    """Months holding fewer GPUs under commitment than min_committed_gpus."""
    least = problem.min_committed_gpus
    if least is None:
        return []
    months = np.sort(problem.periods["month"].unique())
    held = changes[changes["pricing_type"].isin(COMMITTED_PRICING)].groupby("month")["gpus"] \
        .sum().reindex(months, fill_value=0.0)
    return [f"min_committed: month {m} holds {n:.0f} committed GPUs, fewer than {least:.0f}"
            for m, n in held[held < least - 1e-6].items()]


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
