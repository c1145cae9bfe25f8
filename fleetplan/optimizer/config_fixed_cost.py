r"""A fixed monthly cost per deployed configuration: the overhead of running one more variant.

Every configuration in production has its own image, capacity tests and on-call runbook,
whatever its replica count. ``config_fixed_usd_per_month`` :math:`F` [USD per configuration
and month] charges that overhead for every month in which a configuration has at least one
replica in any period, at any pricing type. A disaggregated prefill/decode route runs two
configurations, so it pays :math:`2F` a month (one per stage configuration).

A binary :math:`d_{cm}` per configuration :math:`c` and month :math:`m` is 1 when the
configuration is deployed in the month:

.. math::

    \sum_p y_{cpt} \le U_c\, d_{c\,m(t)} \quad \forall c, t, \qquad
    \text{objective} \mathrel{+}= F \sum_{c,m} \mu_m\, d_{cm},

where :math:`y_{cpt}` counts reserved and purchased replicas (one count from their start
month) in every period they hold, :math:`\mu_m` is the number of horizon months month
:math:`m` stands for (``periods.month_weight``; times the scenario's probability with demand
scenarios), and :math:`U_c` is the most replicas of :math:`c` a cheapest plan holds: its peak
load over the periods with every bucket it can serve sent to it, rounded up, plus the largest
N+k spare count of the workloads it serves. A replica beyond :math:`U_c` carries no load and
no spare, so it only adds cost. (A spot share cap is the one family an idle replica could
help, by raising the base of the share; such plans are left out, and they are never the
cheapest: an idle on-demand GPU costs more than the spot share it frees saves.)

The rule never makes a problem infeasible: any plan pays its overhead, so it has no
diagnosis, and lifting it is :math:`F = 0`. Dominance pruning one replica for one needs no
guard: swapping every replica of a configuration for one of a dominating configuration never
adds a configuration-month. Splitting replicas into smaller ones is left out (``no_splits``):
m replicas for one can take a configuration past its :math:`U_c`. The cost-cover cut stays
valid: it bounds the GPU cost alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fleetplan.optimizer.fleet_problem import month_keys, period_probability
from fleetplan.optimizer.milp_tables import add_keyed_rows, per_period
from fleetplan.optimizer.plan_checks import TOLERANCE, PlanView
from fleetplan.optimizer.plan_summary import usd

if TYPE_CHECKING:
    from fleetplan.optimizer.milp import FleetModel

#: Unit of the family's rows (replica counts linked to the monthly binaries).
UNIT = "replicas"

#: Subject of every row: the rule is one price for all configurations, relaxed as one.
SUBJECT = "configurations"

#: Columns of a plan's ``config_fixed_costs`` table.
COLUMNS = ["config", "month", "month_weight", "deployed", "usd"]


def config_fixed_usd(usd_per_config_month, config_months):
    r"""Fixed operating cost of deployed configurations [USD].

    Parameters
    ----------
    usd_per_config_month : float or array
        Overhead of one configuration for one month [USD].
    config_months : float or array
        Configuration-months deployed, each month weighted by the horizon months it stands
        for [months].

    Returns
    -------
    float or array
        The fixed cost [USD].

    Notes
    -----
    :math:`C = F \sum_{c,m} \mu_m d_{cm}` [1]_.

    References
    ----------
    .. [1] fleetplan README, "Fleet simplicity": a fixed monthly cost per distinct deployed
       configuration (its operating overhead).

    Examples
    --------
    >>> print(config_fixed_usd(2000.0, 3 * 12))
    72000.0
    """
    return np.multiply(usd_per_config_month, config_months)


def wants_fixed_cost(problem) -> bool:
    """True when the problem charges a fixed cost per configuration-month."""
    return bool(problem.config_fixed_usd_per_month)


def no_splits(problem, configs: pd.DataFrame) -> np.ndarray:
    """[c', c]: with a fixed cost, no configuration replaces another by splitting its replicas
    (module docstring)."""
    allowed = not wants_fixed_cost(problem)
    return np.full((len(configs), len(configs)), allowed, dtype=bool)


def replica_bounds(model: FleetModel) -> pd.Series:
    """:math:`U_c` (module docstring) per configuration [replicas]."""
    routes = model.routes
    k = model.problem.workloads.set_index("workload")["redundancy_k"]
    most = routes.groupby(["config", "workload", "bucket", "period"])["load"].max()
    peak = most.groupby(["config", "period"]).sum().groupby("config").max()
    spares = routes["workload"].map(k).fillna(0.0).groupby(routes["config"]).max()
    return np.ceil(peak - 1e-9) + spares.reindex(peak.index).fillna(0.0)


def month_weights(problem) -> pd.DataFrame:
    """One row per month (and scenario): its keys and ``weight`` [horizon months, times the
    scenario's probability]."""
    periods = problem.periods
    keys = month_keys(periods)
    weight = periods["month_weight"].to_numpy(float) * period_probability(periods).to_numpy()
    return periods[keys].assign(weight=weight).drop_duplicates(keys).reset_index(drop=True)


def _replicas_by_month(model: FleetModel) -> pd.DataFrame:
    """Replica columns in every period they hold, with the period's month keys."""
    problem = model.problem
    return per_period(model.replicas, problem.periods).merge(
        problem.periods[["period", *month_keys(problem.periods)]], on="period")


def define_deployed(model: FleetModel) -> None:
    """The binaries :math:`d_{cm}` (``model.extras["config_fixed"]``: config, month keys,
    weight, col), when F > 0. A variable step, so every family (the budget too) sees them."""
    problem = model.problem
    if not wants_fixed_cost(problem) or model.routes.empty:
        return
    keys = month_keys(problem.periods)
    model.extras["config_fixed"] = model.new_columns(
        _replicas_by_month(model)[["config", *keys]].drop_duplicates().merge(month_weights(problem), on=keys),
        upper=1.0, integer=True)


def define_config_fixed_cost(model: FleetModel) -> None:
    """The link rows and objective terms of the module docstring, when F > 0."""
    problem = model.problem
    deployed = model.extras.get("config_fixed")
    if deployed is None:
        return
    keys = month_keys(problem.periods)
    replicas = _replicas_by_month(model)
    bound = replica_bounds(model)
    link = replicas[["config", "period", *keys, "col"]].assign(coef=1.0)
    flags = replicas[["config", "period", *keys]].drop_duplicates().merge(
        deployed[["config", *keys, "col"]], on=["config", *keys])
    flags["coef"] = -flags["config"].map(bound).to_numpy(float)
    rows = add_keyed_rows(model, "config_fixed", pd.concat([link, flags], ignore_index=True),
                          ["config", "period"], "<=", 0.0, unit=UNIT,
                          subject=lambda t: pd.Series(SUBJECT, index=t.index))
    cost = deployed[["col"]].assign(
        coef=config_fixed_usd(problem.config_fixed_usd_per_month, deployed["weight"]))
    model.extras["objective"] = pd.concat([model.extras.get("objective"), cost],
                                          ignore_index=True)
    model.extras["config_fixed_rows"] = rows.merge(
        problem.periods[["period", *keys]], on="period").merge(
        deployed[["config", *keys, "col"]], on=["config", *keys])[["row", "col"]]


def fixed_cost_table(model: FleetModel) -> pd.DataFrame:
    """The solved binaries as a plan table (:data:`COLUMNS`, scenario too with demand
    scenarios): month_weight [horizon months], deployed (0/1), usd [USD over the horizon]."""
    deployed = model.extras.get("config_fixed")
    keys = month_keys(model.problem.periods)
    if deployed is None or deployed.empty:
        return pd.DataFrame(columns=["config", *keys, *COLUMNS[2:]])
    table = deployed.assign(deployed=np.round(model.value(deployed)),
                            month_weight=deployed["weight"])
    table["usd"] = config_fixed_usd(model.problem.config_fixed_usd_per_month, table["weight"]
                                    * table["deployed"])
    table = table[table["deployed"] > 0]
    order = ["config", *keys]
    return table[[*order, "month_weight", "deployed", "usd"]].sort_values(order).reset_index(
        drop=True)


def check_config_fixed_cost(view: PlanView) -> list[str]:
    """Every configuration-month with replicas is charged, and each charge is F x weight."""
    problem, fixed = view.problem, view.config_fixed_costs
    if not wants_fixed_cost(problem):
        return []
    keys = month_keys(problem.periods)
    held = view.replicas[view.replicas["replicas"].astype(float) > TOLERANCE]
    held = held.merge(problem.periods[["period", *keys]], on="period")
    held = held[["config", *keys]].drop_duplicates()
    charged = fixed[fixed["deployed"].astype(float) > 0.5] if not fixed.empty else fixed
    missing = held.merge(charged[["config", *keys]], on=["config", *keys], how="left",
                         indicator=True)
    problems = [f"config_fixed: {c} runs in month {m} but pays no fixed cost"
                for c, m in zip(missing.loc[missing["_merge"] == "left_only", "config"],
                                missing.loc[missing["_merge"] == "left_only", "month"])]
    if not charged.empty:
        weights = charged[keys].merge(month_weights(problem), on=keys, how="left")["weight"]
        expected = config_fixed_usd(problem.config_fixed_usd_per_month, weights.to_numpy())
        wrong = np.abs(charged["usd"].to_numpy(float) - expected) > 0.005 + 1e-9 * expected
        problems += [f"config_fixed: {c} in month {m} is charged {usd(u)}, not {usd(e)}"
                     for c, m, u, e in zip(charged["config"][wrong], charged["month"][wrong],
                                           charged["usd"][wrong], expected[wrong])]
    return problems


def relax_config_fixed_cost(problem, subject: str) -> tuple:
    """A 10 % lower overhead (``constraint_families.Relaxation`` fields)."""
    fixed = problem.config_fixed_usd_per_month
    lower = 0.9 * fixed
    return (problem.with_changes(config_fixed_usd_per_month=lower), f"-{usd(fixed - lower)}",
            f"a fixed cost of {usd(lower)} instead of {usd(fixed)} per configuration and "
            "month would save {saving} per month")


def binding_step(problem, subjects: pd.Series) -> np.ndarray:
    """Every link row may bind: the overhead is paid whenever a configuration runs."""
    return np.full(len(subjects), np.inf)


def deployed_rows(model: FleetModel, table: pd.DataFrame) -> np.ndarray:
    """Link rows of configuration-months that are deployed (the others cost nothing)."""
    rows = model.extras["config_fixed_rows"]
    deployed = pd.Series(model.value(rows) > 0.5, index=rows["row"].to_numpy())
    return deployed.reindex(table["row"].to_numpy(), fill_value=False).to_numpy()


def fixed_cost_by_workload(problem, routes: pd.DataFrame, fixed: pd.DataFrame) -> pd.Series:
    """Each configuration-month's fixed cost split over the workloads it serves that month by
    their load-hours (the rule that splits its replica cost) [USD], indexed by workload; the
    cost of a month without load is left out (it shows as spare)."""
    if fixed.empty:
        return pd.Series(dtype=float)
    keys = month_keys(problem.periods)
    hours = problem.periods.set_index("period")["hours"]
    loads = routes.merge(problem.periods[["period", *keys]], on="period")
    by_workload = workload_shares(loads, loads["full_load"] * loads["period"].map(hours), keys)
    by_workload = by_workload.merge(fixed[["config", *keys, "usd"]], on=["config", *keys])
    return (by_workload["share"] * by_workload["usd"]).groupby(by_workload["workload"]).sum()


def workload_shares(table: pd.DataFrame, weight, keys: list[str]) -> pd.DataFrame:
    """(config, month keys, workload, weight, share): each workload's part of ``weight``
    within each configuration-month that has any."""
    by_workload = table.assign(weight=weight).groupby(["config", *keys, "workload"],
                                                      as_index=False)["weight"].sum()
    total = by_workload.groupby(["config", *keys])["weight"].transform("sum")
    return by_workload[total > 0].assign(share=by_workload["weight"] / total)


def fixed_usd_by_month(problem, fixed: pd.DataFrame) -> pd.Series:
    """The fixed cost of an average month of each month index, indexed by month [USD]: each
    configuration-month's cost over the horizon months its month stands for (with demand
    scenarios the table's costs are already weighted by probability, so they add up to the
    expected month)."""
    if fixed.empty:
        return pd.Series(dtype=float)
    month_weight = problem.periods.drop_duplicates("month").set_index("month")["month_weight"]
    return (fixed["usd"] / fixed["month"].map(month_weight)).groupby(fixed["month"]).sum()


def fixed_costs_by_period(plan) -> pd.DataFrame:
    """A finished plan's fixed cost of each configuration-month spread over the month's periods
    by their hours: (period, config, month keys, usd [USD])."""
    fixed = plan.config_fixed_costs
    if fixed.empty:
        return pd.DataFrame(columns=["period", "config", "month", "usd"])
    keys = month_keys(plan.periods)
    periods = plan.periods[["period", *keys, "hours"]]
    periods = periods.assign(part=periods["hours"] / periods.groupby(keys)["hours"]
                             .transform("sum"))
    spread = fixed[["config", *keys, "usd"]].merge(periods, on=keys)
    spread["usd"] = spread["usd"] * spread["part"]
    return spread[["period", "config", *keys, "usd"]]


def fixed_charges(plan, use: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A finished plan's fixed costs for chargeback: each configuration-month's cost spread
    over the month's periods by hours, then split among the workloads using the configuration
    that month by their tokens (load without request sizes), as its replica cost is.

    Returns the charges (period, workload, usd) and the spare pools of configuration-months
    no workload used (period, config, gpu, pricing_type ``config_fixed``, usd)."""
    spread = fixed_costs_by_period(plan)
    charges = pd.DataFrame(columns=["period", "workload", "usd"])
    pools = pd.DataFrame(columns=["period", "config", "gpu", "pricing_type", "usd"])
    if spread.empty:
        return charges, pools
    keys = month_keys(plan.periods)
    periods = plan.periods[["period", *keys, "hours"]]
    use = use.merge(periods[["period", *keys, "hours"]], on="period")
    tokens = (use["token_rate"] * use["hours"]).groupby([use["config"], *(use[k] for k in keys)])
    weight = np.where(tokens.transform("sum") > 0, use["token_rate"], use["load"]) * use["hours"]
    by_workload = workload_shares(use, weight, keys)
    charged = spread.merge(by_workload[["config", *keys, "workload", "share"]],
                           on=["config", *keys])
    charges = charged.assign(usd=charged["usd"] * charged["share"])[["period", "workload", "usd"]]
    unused = spread.merge(by_workload[["config", *keys]].drop_duplicates(), on=["config", *keys],
                          how="left", indicator=True)
    unused = unused[unused["_merge"] == "left_only"]
    pools = unused.assign(gpu=unused["config"].map(config_gpus(plan)).fillna(""),
                          pricing_type="config_fixed")
    return charges, pools[["period", "config", "gpu", "pricing_type", "usd"]]


def config_gpus(plan) -> pd.Series:
    """The GPU type of each configuration in a finished plan's fleet, indexed by config."""
    if plan.fleet.empty:
        return pd.Series(dtype=object)
    return plan.fleet.drop_duplicates("config").set_index("config")["gpu"]
