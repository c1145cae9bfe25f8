r"""Limits on how the fleet changes, as MILP rows: the churn limit and the minimum commitment.

GPUs held :math:`X_{gpcm}` and the changes they make are defined in ``fleet_changes.py``, which
also reads them back from a plan. Churn limit (``churn`` family, one period per month):
auxiliary :math:`u, d \ge 0` with :math:`\Delta_c = u_c - d_c` per (g, p, c, m) and
:math:`b^+, b^- \ge 0` with :math:`\sum_c (u_c - d_c) = b^+ - b^-` per (g, p, m), and per month

.. math:: \tfrac12 \textstyle\sum_{gpc} (u + d) + \tfrac12 \sum_{gp} (b^+ + b^-)
          \le L + E_m

where :math:`E_m` are the GPUs whose commitment ends in month m (released by the contract,
not by the plan). Minimum commitment (``min_committed`` family): GPUs held at committed,
owned, reserved or purchase pricing are at least ``min_committed_gpus`` in every period.

With demand scenarios (``stochastic_problem.py``) every month is a month of one scenario
(``fleet_problem.month_keys``): each scenario starts from today's fleet and changes it month by
month within the same limit, since the changes are recourse, decided once the outcome is known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import EXISTING_PRICING
from fleetplan.optimizer.current_fleet import existing_cap
from fleetplan.optimizer.fleet_changes import (
    CHURN_SUBJECT,
    COMMITTED_PRICING,
    IDLE,
    KEYS,
    MIN_COMMITTED_SUBJECT,
    baseline,
    expiring,
)
from fleetplan.optimizer.fleet_problem import Problem, month_keys, outcome_keys, with_month_keys
from fleetplan.optimizer.lead_times import require_monthly_periods
from fleetplan.optimizer.milp_tables import add_keyed_rows, per_period

if TYPE_CHECKING:
    from fleetplan.optimizer.milp import FleetModel


def timeline(problem: Problem) -> pd.DataFrame:
    """Every month of the plan (of each demand scenario) with its period: the month keys
    (``month_keys``) and ``period``, one period per month."""
    months = month_keys(problem.periods)
    return problem.periods[[*months, "period"]].drop_duplicates(months).sort_values(
        months, kind="stable").reset_index(drop=True)


def held_terms(model: FleetModel) -> tuple[pd.DataFrame, pd.DataFrame]:
    """GPUs held per (gpu, pricing_type, config, month) as terms (col, coef) and constants
    (gpus): replicas on their configuration, the rest of the nodes idle (of committed and owned
    GPUs, the rest of those that exist: they are the company's until their end). Per demand
    scenario too, when the problem has them."""
    p = model.problem
    months = month_keys(p.periods)
    replicas = with_month_keys(per_period(model.replicas, p.periods), p.periods)
    replicas = replicas.assign(coef=replicas["tp"] * 1.0)
    nodes = with_month_keys(per_period(model.nodes, p.periods), p.periods)
    nodes = nodes.assign(config=IDLE, coef=nodes["gpus_per_node"] * 1.0)
    nodes = nodes[~nodes["pricing_type"].isin(EXISTING_PRICING)]
    idle_use = replicas.assign(config=IDLE, coef=-replicas["coef"])
    columns = [*KEYS, *months, "col", "coef"]
    terms = pd.concat([replicas[columns], nodes[columns], idle_use[columns]], ignore_index=True)
    committed = p.existing if not p.existing.empty \
        else pd.DataFrame(columns=["gpu", "pricing_type"])
    held = committed[["gpu", "pricing_type"]].drop_duplicates().merge(
        timeline(p)[months], how="cross")
    constants = held.assign(config=IDLE, gpus=existing_cap(p, held))
    return terms, constants[[*KEYS, *months, "gpus"]]


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
    months, outcomes = month_keys(p.periods), outcome_keys(p.periods)
    terms, constants = held_terms(model)
    every = timeline(p)
    today = baseline(p).merge(every[outcomes].drop_duplicates(), how="cross") if outcomes \
        else baseline(p)
    constants = pd.concat([constants, today.assign(month=-1)], ignore_index=True)
    level = constants.groupby([*KEYS, *months])["gpus"].sum()
    keys = pd.concat([terms[KEYS], constants[KEYS]]).drop_duplicates().merge(every, how="cross")
    unknown = unknown_pairs(p)
    free = (keys["month"] == 0).to_numpy() & _in(keys, unknown)
    pair = ["gpu", "pricing_type", *months]
    net = keys[[*pair, "period"]].drop_duplicates(pair)
    first = (net["month"] == 0).to_numpy() & _in(net, unknown)
    keys = keys[~free]
    up, down = model.new_columns(keys), model.new_columns(keys)
    plus, minus = model.new_columns(net), model.new_columns(net)
    change = pd.concat([terms, terms.assign(month=terms["month"] + 1, coef=-terms["coef"]),
                        up.assign(coef=-1.0), down.assign(coef=1.0)], ignore_index=True)
    change = change[change["month"].isin(every["month"])]

    def level_at(table: pd.DataFrame, shift: int = 0, keys: list[str] = KEYS) -> np.ndarray:
        at = table[[*keys, *outcomes]].assign(month=table["month"] + shift)
        found = level.groupby(level=[*keys, *months]).sum()
        return found.reindex(pd.MultiIndex.from_frame(at)).fillna(0.0).to_numpy()

    add_keyed_rows(model, "churn", change[[*KEYS, *months, "col", "coef"]], [*KEYS, *months],
                   "=", lambda t: level_at(t, -1) - level_at(t), rows=keys, unit="change",
                   subject=lambda t: t["gpu"] + "/" + t["pricing_type"])
    moved = pd.concat([up.assign(coef=1.0), down.assign(coef=-1.0)])[[*pair, "col", "coef"]]
    opened = terms[terms["month"] == 0][[*pair, "col", "coef"]]
    balance = pd.concat([moved, opened[_in(opened, unknown)],
                         plus[[*pair, "col"]].assign(coef=-1.0),
                         minus[[*pair, "col"]].assign(coef=1.0)], ignore_index=True)
    pairs = ["gpu", "pricing_type"]
    add_keyed_rows(model, "churn", balance, pair, "=",
                   lambda t: np.where((t["month"] == 0).to_numpy() & _in(t, unknown),
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
    """Committed and owned GPUs there per month [GPUs] (the same in every demand scenario:
    they are there whatever the outcome)."""
    existing = problem.existing
    months = np.sort(problem.periods["month"].unique())
    if existing.empty:
        return pd.Series(0.0, index=months)
    keys = existing[["gpu", "pricing_type"]]
    keys = keys.drop_duplicates().merge(pd.DataFrame({"month": months}), how="cross")
    return pd.Series(existing_cap(problem, keys), index=keys["month"]).groupby(level=0).sum() \
        .reindex(months, fill_value=0.0)
