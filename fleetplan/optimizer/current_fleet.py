"""Today's fleet as supply: GPUs already committed or owned, and servers the plan may buy.

``fleet.current`` rows become the Problem's ``existing`` table and offers of two pricing types
(``catalogs.conventions.EXISTING_PRICING``):

- ``committed``: reserved capacity contracted before the plan. It is sunk: it costs nothing in
  the objective (price 0) and is held until its end month whatever the plan does, so the plan
  only decides what runs on it; its fee is reported as a constant next to the plan's cost.
- ``owned``: servers the company owns. They cost their power and hosting per GPU-hour, from the
  row's own ``usd_per_month`` when given (a user's figure beats the default), else from the
  ownership catalog (:func:`owned_usd_per_gpu_hour`).

Each (gpu, pricing type) may hold at most the GPUs that exist in a month (the ``existing``
family, :func:`define_existing_caps`): the count of the rows whose end month is later. The caps
are per GPU type, not per configuration, so the optimizer may redeploy existing GPUs to any
configuration of the same GPU type. ``purchase`` (servers the plan buys) is priced from the
ownership catalog too (:func:`purchase_usd_per_gpu_hour`) and is a linking decision like a
reserved term (``lead_times.py`` gives its start month).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import EXISTING_PRICING
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.milp_tables import add_keyed_rows, per_period
from fleetplan.optimizer.node_packing import nodes_needed_table
from fleetplan.sweeps.rent_or_buy import buy_usd_per_month, power_usd_per_month

if TYPE_CHECKING:
    from fleetplan.optimizer.milp import FleetModel
    from fleetplan.optimizer.plan_checks import PlanView

#: Cooling overhead and mean draw of owned and purchased servers: ``fleetplan compare``'s
#: defaults (power usage effectiveness [ratio]; share of the nameplate power drawn [fraction]).
SERVER_PUE = 1.4
SERVER_POWER_LOAD = 0.75

#: Today's GPUs when their limits are lifted to see whether they bind [GPUs].
LIFTED_GPUS = 1e6

EXISTING_COLUMNS = ["gpu", "pricing_type", "config", "provider", "gpus", "end_month",
                    "usd_per_month"]


def owned_usd_per_gpu_hour(node_power_kw, hosting_usd_per_node_month, gpus_per_node,
                           usd_per_kwh, hours_per_month, pue=SERVER_PUE,
                           load=SERVER_POWER_LOAD):
    """Running cost of an owned server per GPU-hour: power and hosting, no depreciation
    [USD/GPU-hour].

    Parameters
    ----------
    node_power_kw : server nameplate power [kW]
    hosting_usd_per_node_month : data-hall rent per server [USD/month]
    gpus_per_node : GPUs per server [GPUs]
    usd_per_kwh : electricity price [USD/kWh]
    hours_per_month : hours in a month [h]
    pue, load : cooling overhead [ratio] and mean draw [fraction of nameplate]

    Returns
    -------
    USD per GPU-hour.

    Notes
    -----
    ``(kW * load * PUE * H * usd_per_kwh + hosting) / (gpus_per_node * H)``, the power and
    hosting terms of the buy cost in ``sweeps/rent_or_buy.py`` [1].

    References
    ----------
    [1] seeds 003 (owning a server: depreciation, power, hosting); ownership catalog sources.

    >>> round(float(owned_usd_per_gpu_hour(10.2, 1988.49, 8, 0.10, 730.0)), 4)
    0.4744
    """
    power = power_usd_per_month(1, node_power_kw, load, pue, usd_per_kwh, hours_per_month)
    return (power + hosting_usd_per_node_month) / (np.asarray(gpus_per_node) * hours_per_month)


def purchase_usd_per_gpu_hour(usd_per_node, life_years, node_power_kw,
                              hosting_usd_per_node_month, gpus_per_node, usd_per_kwh,
                              hours_per_month, pue=SERVER_PUE, load=SERVER_POWER_LOAD,
                              cost_of_capital=0.0, residual_value=0.0):
    """A bought server per GPU-hour: its capital recovered over its life at the cost of capital,
    less its resale value, plus power and hosting [USD/GPU-hour].

    Parameters
    ----------
    usd_per_node : server price [USD]; life_years : life [years];
    cost_of_capital : annual discount rate [fraction per year]; residual_value : resale at the
    end of its life [fraction of the price]; the rest as :func:`owned_usd_per_gpu_hour`.

    Returns
    -------
    USD per GPU-hour.

    Notes
    -----
    ``buy_usd_per_month(1, price, life, power, hosting, i, s) / (gpus_per_node * H)``, the
    capital term Excel's ``PMT`` (``sweeps/rent_or_buy.py``) [1]; straight-line
    ``price / (12 life)`` at ``i = s = 0``.

    References
    ----------
    [1] seeds 003 (rent or buy); ownership catalog sources; "Capital recovery factor".

    >>> round(float(purchase_usd_per_gpu_hour(255237.04, 5, 10.2, 1988.49, 8, 0.10, 730.0)), 3)
    1.203
    >>> round(float(purchase_usd_per_gpu_hour(255237.04, 5, 10.2, 1988.49, 8, 0.10, 730.0,
    ...                                       cost_of_capital=0.08)), 3)
    1.355
    """
    power = power_usd_per_month(1, node_power_kw, load, pue, usd_per_kwh, hours_per_month)
    monthly = buy_usd_per_month(1, usd_per_node, life_years, power, hosting_usd_per_node_month,
                                cost_of_capital, residual_value)
    return monthly / (np.asarray(gpus_per_node) * hours_per_month)


def sunk_usd(usd_per_month, months_held):
    """Fee of a commitment over the months of the horizon it still runs [USD].

    Parameters
    ----------
    usd_per_month : the commitment's monthly fee [USD/month]
    months_held : months of the horizon before its end [months]

    Returns
    -------
    USD, sunk: paid whatever the plan does.

    Notes
    -----
    ``usd_per_month * months_held`` [1].

    References
    ----------
    [1] seeds 000 (reserved capacity is paid for every hour of its term).

    >>> float(sunk_usd(20000.0, 4))
    80000.0
    """
    return np.asarray(usd_per_month, dtype=float) * months_held


def months_held(existing: pd.DataFrame, horizon_months: float) -> np.ndarray:
    """Months of the horizon each existing row is there [months]."""
    end = existing["end_month"].astype(float).fillna(horizon_months).to_numpy()
    return np.clip(end, 0.0, horizon_months)


def sunk_total_usd(problem: Problem) -> float:
    """Fees of the committed rows over the horizon [USD] (0 without any; rows without a fee
    count 0)."""
    existing = problem.existing
    if existing.empty:
        return 0.0
    committed = existing[existing["pricing_type"] == "committed"]
    fees = committed["usd_per_month"].astype(float).fillna(0.0)
    return float(sunk_usd(fees, months_held(committed, problem.horizon_months)).sum())


def existing_gpus(problem: Problem) -> pd.DataFrame:
    """GPUs there per (gpu, pricing_type, month) of the problem's months: gpu, pricing_type,
    month, gpus [GPUs] (0 after every row's end)."""
    existing = problem.existing
    months = pd.DataFrame({"month": np.sort(problem.periods["month"].unique())})
    if existing.empty:
        return pd.DataFrame(columns=["gpu", "pricing_type", "month", "gpus"])
    rows = existing[["gpu", "pricing_type", "gpus", "end_month"]].merge(months, how="cross")
    there = rows["end_month"].isna() | (rows["month"] < rows["end_month"])
    rows["gpus"] = np.where(there, rows["gpus"], 0.0)
    return rows.groupby(["gpu", "pricing_type", "month"], as_index=False)["gpus"].sum()


def existing_cap(problem: Problem, keys: pd.DataFrame) -> np.ndarray:
    """GPUs there for each (gpu, pricing_type, month) row of ``keys`` [GPUs; 0 if none]."""
    caps = existing_gpus(problem).set_index(["gpu", "pricing_type", "month"])["gpus"]
    index = pd.MultiIndex.from_frame(keys[["gpu", "pricing_type", "month"]])
    return caps.reindex(index).fillna(0.0).to_numpy(dtype=float)


def define_existing_caps(model: FleetModel) -> None:
    """GPUs used at committed or owned pricing stay within those that exist in each month."""
    p = model.problem
    if p.existing.empty:
        return
    keys = ["gpu", "pricing_type", "period"]
    nodes = per_period(model.nodes, p.periods)
    nodes = nodes[nodes["pricing_type"].isin(EXISTING_PRICING)]
    terms = nodes[keys].assign(col=nodes["col"].to_numpy(), coef=nodes["gpus_per_node"])
    month = p.periods.set_index("period")["month"]
    add_keyed_rows(model, "existing", terms, keys, "<=",
                   lambda t: existing_cap(p, t.assign(month=t["period"].map(month))),
                   unit="GPUs", subject=lambda t: t["gpu"] + "/" + t["pricing_type"])


def check_existing(view: PlanView) -> list[str]:
    """GPUs used at committed or owned pricing exist in that month (none after their end)."""
    p = view.problem
    if p.existing.empty:
        return []
    gpus = view.gpus_bought()
    gpus = gpus[gpus["pricing_type"].isin(EXISTING_PRICING)]
    if gpus.empty:
        return []
    gpus = gpus.assign(month=gpus["period"].map(p.periods.set_index("period")["month"]))
    gpus["cap"] = existing_cap(p, gpus)
    over = gpus[gpus["gpus"] > gpus["cap"] + 1e-6]
    return [f"existing: {g}/{pr} in month {m}: {n:.0f} GPUs used, {c:.0f} there"
            for g, pr, m, n, c in over[["gpu", "pricing_type", "month", "gpus", "cap"]].to_numpy()]


def relax_existing(problem: Problem, subject: str) -> tuple[Problem, str, str]:
    """One node more of the subject's existing GPUs, for the whole horizon: (problem, change,
    description template)."""
    gpu, pricing = subject.split("/")
    step = int(problem.gpus.set_index("gpu").loc[gpu, "gpus_per_node"])
    extra = pd.DataFrame([{"gpu": gpu, "pricing_type": pricing, "config": "", "provider": "",
                           "gpus": float(step), "end_month": np.nan, "usd_per_month": 0.0}])
    existing = pd.concat([problem.existing, extra], ignore_index=True)
    return (problem.with_changes(existing=existing), f"+{step} GPUs",
            f"{step} more {pricing} {gpu} would save {{saving}} per month")


def lift_existing(problem: Problem) -> Problem | None:
    """Today's GPUs without their limits: as many as the plan wants, all horizon (None without
    a current fleet)."""
    if problem.existing.empty:
        return None
    return problem.with_changes(existing=problem.existing.assign(gpus=LIFTED_GPUS,
                                                                 end_month=np.nan))


def diagnose_existing(problem: Problem, solution: dict) -> list[str]:
    """Where the plan without those limits ran more of today's GPUs than exist.

    The need is counted from the replicas, packed into whole nodes (``node_packing``), not
    from the nodes held: committed GPUs cost nothing, so the plan without limits may hold any
    number of them (up to :data:`LIFTED_GPUS`) at the same cost."""
    replicas = solution["replicas"]
    replicas = replicas[replicas["pricing_type"].isin(EXISTING_PRICING)]
    if replicas.empty:
        return []
    keys = ["gpu", "pricing_type", "period"]
    node_gpus = problem.gpus.set_index("gpu")["gpus_per_node"]
    tp = replicas["config"].map(problem.configs.set_index("config")["tp"])
    counts = replicas[keys].assign(tp=tp, replicas=replicas["gpus"] / tp,
                                   node_gpus=replicas["gpu"].map(node_gpus))
    held = nodes_needed_table(counts, keys).rename("nodes").reset_index()
    held["gpus"] = held["nodes"] * held["gpu"].map(node_gpus)
    held["month"] = held["period"].map(problem.periods.set_index("period")["month"])
    held = held.groupby(["gpu", "pricing_type", "month"], as_index=False)["gpus"].max()
    held["there"] = existing_cap(problem, held)
    short = held[held["gpus"] > held["there"] + 1e-6].drop_duplicates(["gpu", "pricing_type"])
    return [f"would run {n:.0f} {pricing} {gpu} in month {m:.0f} but today's fleet has {t:.0f} "
            "there and no other pricing type may add them"
            for gpu, pricing, m, n, t in short[["gpu", "pricing_type", "month", "gpus",
                                                 "there"]].to_numpy()]


def existing_swaps(problem: Problem, configs: pd.DataFrame) -> np.ndarray:
    """[c', c]: c' may replace c unless c' is on another GPU type with existing GPUs (whose
    count is capped) or c's GPU type has some (the swap would leave them idle)."""
    gpu = configs["gpu"].to_numpy()
    held = np.isin(gpu, list(set(problem.existing.get("gpu", pd.Series(dtype=str)))))
    same = gpu[:, None] == gpu[None, :]
    return same | ~(held[:, None] | held[None, :])
