r"""The stochastic fleet MILP's own parts: the CVaR objective, each scenario's cost, and the
utilisation of the commitment in each scenario.

Cost of scenario :math:`s` (first stage plus that scenario's recourse, not weighted; hosted-API
shares and the fixed cost :math:`f` of each configuration deployed in a month, :math:`d_{cm}`
over :math:`w_m` horizon months, are recourse too):

.. math::

    C_s = \sum_{g,p \in R} c_{gp} n_{gp}
          + \sum_{t \in s} \frac{h_t}{p_s} \sum_{g,p \in F} c_{gp} n_{gpt}
          + \sum_{c, m \in s} f w_m d_{cm}

CVaR at level :math:`\alpha` (the mean cost of the worst :math:`1 - \alpha` of outcomes) is
linear in the Rockafellar-Uryasev form [1]: with a free :math:`\eta` and :math:`z_s \ge 0`,

.. math::

    \min \; E[C] + w \Big(\eta + \frac{1}{1 - \alpha} \sum_s p_s z_s\Big)
    \quad \text{s.t.} \quad z_s \ge C_s - \eta \quad \forall s

so the risk family adds one column per scenario, one free column and one row per scenario
(``cvar`` rows, built from arrays), and its terms join the objective through
``model.extras["objective"]``. With :math:`w = 0` nothing is added: the plain expected cost.

References:
    [1] R. T. Rockafellar and S. Uryasev, "Optimization of conditional value-at-risk",
        Journal of Risk 2 (2000) 21-41.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import LINKING_PRICING
from fleetplan.optimizer.api_supply import api_shares
from fleetplan.optimizer.config_fixed_cost import config_fixed_usd
from fleetplan.optimizer.linear_program import INF
from fleetplan.optimizer.milp_tables import add_keyed_rows

if TYPE_CHECKING:
    from fleetplan.optimizer.milp import FleetModel
    from fleetplan.optimizer.plan_checks import PlanView


def node_costs(model: FleetModel) -> pd.DataFrame:
    """Paid columns (nodes; hosted-API shares and the fixed cost of deployed configurations,
    which are recourse too) with their scenario (None for reserved), probability and cost per
    unit over the hours it is paid for, not weighted by probability [USD]."""
    p = model.problem
    nodes = model.nodes
    node_usd = nodes["gpus_per_node"] * nodes["usd_per_gpu_hour"] * nodes["hours"]
    shares = api_shares(model)
    paid = pd.concat([pd.DataFrame({"col": nodes["col"], "period": nodes["period"],
                                    "usd": node_usd}),
                      shares[["col", "period", "usd"]]], ignore_index=True)
    periods = p.periods.set_index("period")
    scenario = paid["period"].map(periods["scenario"]) if "scenario" in periods else None
    probability = paid["period"].map(periods["probability"]) if "scenario" in periods \
        else pd.Series(np.where(paid["period"] < 0, np.nan, 1.0), index=paid.index)
    costs = pd.DataFrame({"col": paid["col"].astype(np.int64), "scenario": scenario,
                          "probability": probability, "reserved": paid["period"].to_numpy() < 0,
                          "usd_per_node": (paid["usd"].astype(float)
                                           / probability.fillna(1.0)).to_numpy(float)})
    return pd.concat([costs, _fixed_costs(model)], ignore_index=True)


def _fixed_costs(model: FleetModel) -> pd.DataFrame:
    """The deployed-configuration binaries as :func:`node_costs` rows (none without them)."""
    deployed = model.extras.get("config_fixed")
    columns = ["col", "scenario", "probability", "reserved", "usd_per_node"]
    if deployed is None or deployed.empty:
        return pd.DataFrame(columns=columns).astype({"col": np.int64, "reserved": bool,
                                                     "usd_per_node": float})
    scenario = deployed["scenario"] if "scenario" in deployed else None
    probability = pd.Series(1.0, index=deployed.index) if scenario is None else scenario.map(
        model.problem.periods.drop_duplicates("scenario").set_index("scenario")["probability"])
    usd = config_fixed_usd(model.problem.config_fixed_usd_per_month, deployed["weight"])
    return pd.DataFrame({
        "col": deployed["col"].astype(np.int64), "scenario": scenario,
        "probability": probability.astype(float), "reserved": False,
        "usd_per_node": (np.asarray(usd, float) / probability.to_numpy(float))})


def scenario_names(model: FleetModel) -> pd.DataFrame:
    """scenario, probability of the model's periods (one row named ``all`` without any)."""
    periods = model.problem.periods
    if "scenario" not in periods:
        return pd.DataFrame({"scenario": ["all"], "probability": [1.0]})
    return periods[["scenario", "probability"]].drop_duplicates("scenario").reset_index(drop=True)


def scenario_costs(model: FleetModel, values: np.ndarray) -> pd.DataFrame:
    """Each scenario's cost at ``values``: scenario, probability, first_stage_usd,
    recourse_usd, usd (= first stage + recourse) [USD over the horizon]."""
    costs = node_costs(model)
    spent = costs["usd_per_node"].to_numpy() * values[costs["col"].to_numpy(dtype=np.int64)]
    first = float(spent[costs["reserved"].to_numpy()].sum())
    table = scenario_names(model)
    if "scenario" in model.problem.periods:
        recourse = pd.Series(spent[~costs["reserved"].to_numpy()]).groupby(
            costs.loc[~costs["reserved"], "scenario"].to_numpy()).sum()
        table["recourse_usd"] = table["scenario"].map(recourse).fillna(0.0).to_numpy()
    else:
        table["recourse_usd"] = float(spent[~costs["reserved"].to_numpy()].sum())
    table["first_stage_usd"] = first
    table["usd"] = first + table["recourse_usd"]
    return table[["scenario", "probability", "first_stage_usd", "recourse_usd", "usd"]]


def define_cvar(model: FleetModel) -> None:
    """z_s + eta - C_s >= 0 per scenario; the objective gains w (eta + sum p_s z_s / (1-a))."""
    p = model.problem
    if p.cvar_weight <= 0 or "scenario" not in p.periods:
        return
    scenarios = scenario_names(model)
    excess = model.new_columns(scenarios)
    eta = model.new_columns(pd.DataFrame({"scenario": ["eta"]}), lower=-INF)
    costs = node_costs(model)
    first = costs[costs["reserved"]].drop(columns="scenario").merge(
        scenarios[["scenario"]], how="cross")
    recourse = costs[~costs["reserved"]]
    terms = pd.concat([
        first[["scenario", "col"]].assign(coef=-first["usd_per_node"]),
        recourse[["scenario", "col"]].assign(coef=-recourse["usd_per_node"]),
        excess[["scenario", "col"]].assign(coef=1.0),
        scenarios[["scenario"]].assign(col=int(eta["col"].iloc[0]), coef=1.0),
    ], ignore_index=True)
    add_keyed_rows(model, "cvar", terms, ["scenario"], ">=", 0.0, unit="USD",
                   subject=lambda t: t["scenario"])
    weight, alpha = p.cvar_weight, p.cvar_alpha
    risk = pd.DataFrame({
        "col": np.concatenate([excess["col"], eta["col"]]),
        "coef": np.concatenate([weight * excess["probability"].to_numpy(float) / (1 - alpha),
                                [weight]])})
    model.extras["objective"] = pd.concat([model.extras.get("objective"), risk],
                                          ignore_index=True)


def check_cvar(view: PlanView) -> list[str]:
    """Nothing to check: CVaR shapes the objective, it limits no plan."""
    return []


def cvar_usd(costs, probabilities, alpha: float) -> float:
    r"""Conditional value-at-risk of a discrete cost distribution.

    Parameters
    ----------
    costs : array-like
        Cost in each outcome [USD].
    probabilities : array-like
        Probability of each outcome [fraction; summing to 1].
    alpha : float
        CVaR level [fraction; 0.9 = the mean of the worst 10 %].

    Returns
    -------
    float
        CVaR [USD].

    Notes
    -----
    :math:`\mathrm{CVaR}_\alpha = v + \sum_s p_s (C_s - v)^+ / (1 - \alpha)` with :math:`v`
    the value-at-risk, the ``alpha`` quantile of the costs (:func:`cost_quantile`) [1].

    Examples
    --------
    >>> cvar_usd([100.0, 200.0, 400.0], [0.3, 0.4, 0.3], 0.5)
    320.0
    """
    costs = np.asarray(costs, dtype=float)
    var = cost_quantile(costs, probabilities, alpha)
    excess = np.clip(costs - var, 0.0, None)
    return float(var + np.dot(probabilities, excess) / (1.0 - alpha))


def cost_quantile(costs, probabilities, quantile: float) -> float:
    r"""A quantile of a discrete cost distribution (the P90 cost at 0.9).

    Parameters
    ----------
    costs : array-like
        Cost in each outcome [USD].
    probabilities : array-like
        Probability of each outcome [fraction; summing to 1].
    quantile : float
        Level [fraction].

    Returns
    -------
    float
        The smallest cost whose cumulative probability reaches ``quantile`` [USD]; NaN
        without outcomes.

    Notes
    -----
    :math:`\min \{c : \sum_{s: C_s \le c} p_s \ge q\}`, the value-at-risk of [1].

    Examples
    --------
    >>> cost_quantile([400.0, 100.0, 200.0], [0.3, 0.3, 0.4], 0.9)
    400.0
    """
    costs, probabilities = np.asarray(costs, dtype=float), np.asarray(probabilities, float)
    order = np.argsort(costs, kind="stable")
    cumulative = np.cumsum(probabilities[order])
    position = min(int(np.searchsorted(cumulative, quantile - 1e-9)), len(costs) - 1)
    return float(costs[order][position]) if len(costs) else math.nan


def reserved_replicas(model: FleetModel, values: np.ndarray) -> pd.DataFrame:
    """The first stage at ``values``, reserved terms and purchases: config, gpu, tp,
    pricing_type, replicas."""
    rows = model.replicas[model.replicas["pricing_type"].isin(LINKING_PRICING)]
    return rows[["config", "gpu", "tp", "pricing_type"]].assign(
        replicas=np.round(values[rows["col"].to_numpy(dtype=np.int64)])).reset_index(drop=True)


def commitment_utilization(model: FleetModel, values: np.ndarray) -> pd.Series:
    """Per scenario, the share of committed GPU-hours carrying load [fraction]: load on a
    configuration fills its reserved replicas first (they are paid for anyway)."""
    routes = model.routes
    load = (routes["load"] * values[routes["col"].to_numpy(dtype=np.int64)]).groupby(
        [routes["config"], routes["period"]]).sum().rename("load").reset_index()
    reserved = reserved_replicas(model, values)
    held = reserved.groupby("config").agg(replicas=("replicas", "sum"), tp=("tp", "first"))
    periods = model.problem.periods
    scenario = periods.set_index("period")["scenario"] if "scenario" in periods else \
        pd.Series("all", index=periods["period"])
    hours = periods.set_index("period")["hours"]
    load = load.merge(held, left_on="config", right_index=True)
    busy = np.minimum(load["load"], load["replicas"]) * load["tp"] * load["period"].map(hours)
    busy = busy.groupby(load["period"].map(scenario).to_numpy()).sum()
    bought = float((held["replicas"] * held["tp"]).sum())
    paid = hours.groupby(scenario).sum() * bought
    return (busy.reindex(paid.index).fillna(0.0) / paid.replace(0.0, np.nan)).rename(
        "utilization")
