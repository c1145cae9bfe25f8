"""Chargeback and showback: every dollar of a plan charged to the workloads, teams and cost
centers that cause it, per calendar month.

Rule (``fleetplan.optimizer.cost_pools`` builds the pools):

1. Used capacity. The used part of each replica pool (period, configuration, pricing type) is
   split among the workloads routed to that configuration in proportion to the tokens each one
   has it process: prompt and output tokens on a colocated replica, prompt tokens on a prefill
   stage, output tokens on a decode stage.
   Requests sent to a hosted API are charged to the workload that sent them, at the API's
   price, with their tokens. A configuration's fixed monthly cost
   (``config_fixed_cost.py``) is split among the workloads using it that month by their
   tokens, its months without users are spare.
2. Spare capacity: N+k spares and rounding up to whole replicas (the rest of a replica pool),
   and GPUs bought with whole nodes or a reserved commitment that no replica occupies. The
   scenario's ``chargeback.spare`` chooses who pays:

   - ``usage`` (default): the workloads using the same configuration in the same period, in
     proportion to their used cost; failing that, those using the same GPU type and pricing
     type in that period; then that month's users; then the horizon's.
   - ``even``: every team an equal share of each period's spare cost (a team's workloads split
     its share equally).
   - ``owner:TEAM``: all of it to TEAM, split among its workloads by their used cost.

3. Cents. Month totals are rounded to cents so that they sum to the plan's total cost in cents,
   then each month's workload charges so that they sum to the month's (largest remainders), so
   every table here adds up to the plan's total to the cent.

This differs from ``FleetPlan.costs_by_workload`` on purpose: that table splits replica costs
by load share and leaves spare capacity as rows of its own; a chargeback leaves nothing
unassigned.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fleetplan.errors import did_you_mean
from fleetplan.optimizer.api_supply import plan_api_costs
from fleetplan.optimizer.config_fixed_cost import fixed_charges
from fleetplan.optimizer.cost_pools import (
    cents,
    idle_pools,
    part_cents,
    plan_total_usd,
    replica_pools,
    served_tokens,
    to_calendar_months,
    workload_use,
)
from fleetplan.sweeps.throughput import safe_divide

#: Team or cost center of a workload that names none.
UNASSIGNED = "(unassigned)"
#: Where the ``usage`` rule looks for users of a spare dollar, narrowest first.
USAGE_LEVELS = (("period", "config"), ("period", "gpu", "pricing_type"), ("month",), ())
#: Columns of :func:`chargeback_table` (by team and cost center).
CHARGEBACK_COLUMNS = ("month", "team", "cost_center", "usd", "used_usd", "spare_usd", "tokens",
                      "usd_per_m_tokens")


def usd_per_m_tokens(usd, tokens):
    """Unit cost: ``usd / (tokens / 1e6)`` [USD per million tokens]; NaN without tokens.

    Parameters
    ----------
    usd : float or array
        Cost [USD].
    tokens : float or array
        Tokens served in the same time [tokens].

    Returns
    -------
    float or array
        [USD/1M tokens].

    Notes
    -----
    The FinOps unit-economics metric, cost per unit of output [1].

    References
    ----------
    .. [1] FinOps Foundation, "Unit Economics" capability,
       https://www.finops.org/framework/capabilities/unit-economics/

    Examples
    --------
    >>> print(usd_per_m_tokens(1500.0, 3.0e9))
    0.5
    """
    value = np.asarray(safe_divide(usd, np.asarray(tokens, dtype=float) / 1e6))
    return float(value) if value.ndim == 0 else value


def owners(plan) -> pd.DataFrame:
    """Per workload of the plan: team and cost_center (``(unassigned)`` when not given)."""
    given = pd.DataFrame(plan.scenario.get("workloads") or [], columns=["name", "team", "cost_center"])
    names = list(plan.workloads["workload"]) if "workload" in plan.workloads else []
    names += [n for n in (plan.routing["workload"].unique() if "workload" in plan.routing else [])
              if n not in names]
    table = pd.DataFrame({"workload": pd.Series(names, dtype=object)}).merge(
        given.rename(columns={"name": "workload"}), on="workload", how="left")
    return table.fillna({"team": UNASSIGNED, "cost_center": UNASSIGNED}).astype(
        {"team": str, "cost_center": str})


def spare_rule(plan) -> str:
    """The plan's ``chargeback.spare`` rule (``usage`` when the scenario has none)."""
    return str((plan.scenario.get("chargeback") or {}).get("spare") or "usage")


def used_charges(replicas: pd.DataFrame, use: pd.DataFrame) -> pd.DataFrame:
    """The used part of each replica pool split by token share: (period, config, gpu,
    pricing_type, workload, usd). Without request sizes (plans from bare capacity tables) the
    load share stands in for the token share."""
    tokens = use.groupby(["period", "config"])["token_rate"].transform("sum")
    use = use.assign(weight=np.where(tokens > 0, use["token_rate"], use["load"]))
    use = use[use["weight"] > 0]
    share = use["weight"] / use.groupby(["period", "config"])["weight"].transform("sum")
    shares = use[["period", "config", "workload"]].assign(share=share)
    used = replicas.assign(used=replicas["usd"] * replicas["used_fraction"]).merge(
        shares, on=["period", "config"])
    used["usd"] = used["used"] * used["share"]
    return used[["period", "config", "gpu", "pricing_type", "workload", "usd"]]


def spare_pools(replicas: pd.DataFrame, idle: pd.DataFrame) -> pd.DataFrame:
    """Spare dollars: (period, config, gpu, pricing_type, usd); idle node GPUs have config ''."""
    spare = replicas.assign(usd=replicas["usd"] * (1.0 - replicas["used_fraction"]))
    pools = pd.concat([spare[["period", "config", "gpu", "pricing_type", "usd"]],
                       idle.assign(config="")[["period", "config", "gpu", "pricing_type", "usd"]]],
                      ignore_index=True)
    return pools[pools["usd"] > 0].reset_index(drop=True)


def spread_by_usage(pools: pd.DataFrame, used: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``usage`` rule: each spare dollar to the narrowest users found (:data:`USAGE_LEVELS`).

    Returns the spread dollars (period, workload, usd) and the pools no one used at any level.
    """
    parts, left = [], pools.reset_index(drop=True)
    for level in USAGE_LEVELS:
        if left.empty or used.empty:
            break
        keys = list(level)
        by_workload = used.groupby([*keys, "workload"], as_index=False)["usd"].sum()
        total = by_workload.groupby(keys)["usd"].transform("sum") if keys else by_workload["usd"].sum()
        shares = by_workload.assign(share=by_workload["usd"] / total).drop(columns="usd")
        shares = shares[shares["share"] > 0]
        if keys:
            matched = left.reset_index().merge(shares, on=keys)
            left = left[~left.index.isin(matched["index"])]
        else:
            matched, left = left.merge(shares, how="cross"), left.iloc[0:0]
        if len(matched):
            parts.append(matched.assign(usd=matched["usd"] * matched["share"])[
                ["period", "workload", "usd"]])
    empty = pd.DataFrame(columns=["period", "workload", "usd"])
    return (pd.concat(parts, ignore_index=True) if parts else empty), left


def spread_by_weights(pools: pd.DataFrame, weights: pd.Series) -> pd.DataFrame:
    """Each period's spare dollars split by fixed workload ``weights`` (summing to 1)."""
    per_period = pools.groupby("period", as_index=False)["usd"].sum()
    shares = weights[weights > 0].rename("share").rename_axis("workload").reset_index()
    spread = per_period.merge(shares, how="cross")
    return spread.assign(usd=spread["usd"] * spread["share"])[["period", "workload", "usd"]]


def rule_weights(rule: str, people: pd.DataFrame, used: pd.DataFrame) -> pd.Series:
    """Workload weights of the ``even`` and ``owner:TEAM`` rules (summing to 1)."""
    team = people.set_index("workload")["team"]
    if rule == "even":
        return (1.0 / team.map(team.value_counts())) / team.nunique()
    owner = rule.removeprefix("owner:")
    if owner not in set(team):
        raise did_you_mean(owner, sorted(set(team) - {UNASSIGNED}), kind="team (chargeback.spare)")
    mine = team[team == owner].index
    cost = used.groupby("workload")["usd"].sum().reindex(mine).fillna(0.0)
    weights = cost if cost.sum() > 0 else pd.Series(1.0, index=mine)
    return weights / weights.sum()


def spare_charges(plan, pools: pd.DataFrame, used: pd.DataFrame, people: pd.DataFrame) -> pd.DataFrame:
    """Spare dollars per (period, workload) under the plan's rule."""
    rule = spare_rule(plan)
    if rule == "usage":
        month = plan.periods.set_index("period")["month"]
        spread, left = spread_by_usage(pools.assign(month=pools["period"].map(month)),
                                       used.assign(month=used["period"].map(month)))
        # nothing used at all (every request unmet): spare capacity is shared evenly
        extra = spread_by_weights(left, rule_weights("even", people, used)) if len(left) else None
        return pd.concat([spread, extra], ignore_index=True) if extra is not None else spread
    return spread_by_weights(pools, rule_weights(rule, people, used))


def workload_charges(plan) -> pd.DataFrame:
    """Per (calendar month, workload): team, cost_center, usd (to the cent, summing to the
    plan's total), spare_usd (the part that is spare capacity) and tokens served."""
    columns = ["month", "workload", "team", "cost_center", "usd", "spare_usd", "tokens"]
    total = plan_total_usd(plan)
    people = owners(plan) if not math.isnan(total) else pd.DataFrame()
    if people.empty:
        return pd.DataFrame(columns=columns)
    use = workload_use(plan)
    replicas = replica_pools(plan, use)
    used = used_charges(replicas, use)
    fixed, unused = fixed_charges(plan, use)  # a configuration's overhead, as its replicas
    pools = spare_pools(replicas, idle_pools(plan, replicas))
    if len(unused):
        pools = pd.concat([pools, unused], ignore_index=True)
    spare = spare_charges(plan, pools, used, people)
    api = plan_api_costs(plan)  # hosted APIs: charged to the workload that sent the requests
    parts = [used.groupby(["period", "workload"], as_index=False)["usd"].sum().assign(spare_usd=0.0),
             fixed.assign(spare_usd=0.0),
             spare.assign(spare_usd=spare["usd"]), served_tokens(plan).assign(usd=0.0, spare_usd=0.0),
             api[["period", "workload", "usd", "tokens"]].assign(spare_usd=0.0)]
    parts = [p for p in parts if len(p)]
    if not parts:  # no demand, no fleet: nothing to charge
        return pd.DataFrame(columns=columns)
    rows = pd.concat(parts, ignore_index=True).fillna({"tokens": 0.0})
    rows = to_calendar_months(rows, plan.periods, ["usd", "spare_usd", "tokens"])
    table = rows.groupby(["month", "workload"], as_index=False)[["usd", "spare_usd", "tokens"]].sum()
    table["usd"], table["spare_usd"] = _to_cents(table, total)
    return table.merge(people, on="workload", how="left")[columns]


def _to_cents(table: pd.DataFrame, total_usd: float) -> tuple[np.ndarray, np.ndarray]:
    """usd in whole cents summing to the total per month and overall; spare_usd within it."""
    usd = table["usd"].to_numpy(float)
    row_cents = cents(usd, table["month"].to_numpy(), total_usd)
    spare_cents = part_cents(row_cents, table["spare_usd"].to_numpy(float), usd)
    return row_cents / 100.0, spare_cents / 100.0


def chargeback_table(plan, by: tuple[str, ...] = ("team", "cost_center")) -> pd.DataFrame:
    """Per calendar month and ``by`` (default team and cost center; also ``("workload",)``):
    usd (to the cent), used_usd, spare_usd, tokens and usd_per_m_tokens."""
    keys = ["month", *by]
    table = workload_charges(plan).groupby(keys, as_index=False)[["usd", "spare_usd", "tokens"]].sum()
    table["usd"], table["spare_usd"] = table["usd"].round(2), table["spare_usd"].round(2)
    table["used_usd"] = (table["usd"] - table["spare_usd"]).round(2)
    table["usd_per_m_tokens"] = usd_per_m_tokens(table["usd"].to_numpy(float),
                                                 table["tokens"].to_numpy(float))
    return table[[*keys, *CHARGEBACK_COLUMNS[3:]]].astype({"month": int})
