r"""A site's power envelope: the GPUs in one data hall draw at most its kW in every period.

A site (``fleet.sites``) has a limit :math:`P_s` [kW] and a power usage effectiveness
:math:`\mathrm{PUE}_s` (facility kW per IT kW; 1.0, the default, means the limit is IT power).
It holds the GPUs of the offers :math:`(g, p)` it covers (pricing types drawing on the site,
by default the on-premises ones, ``owned`` and ``purchase``; optionally only some GPU types).
Each GPU bought draws :math:`e_g` kW of IT power, host share included
(:func:`kw_per_gpu_from_node_power` where the ownership catalog knows the server, else
:func:`kw_per_gpu_from_board_power`). With :math:`N_{gpt}` nodes of :math:`s_g` GPUs bought
(reserved nodes count in every period):

.. math::

    \sum_{(g,p) \in s} \mathrm{PUE}_s\, e_g\, s_g\, N_{gpt} \le P_s \quad \forall s, t

Nodes, not replicas, draw power: a server bought and idle is still installed. Power is the
servers' nameplate maximum, so the envelope holds at full load.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fleetplan.optimizer.milp_tables import add_keyed_rows, per_period

if TYPE_CHECKING:
    from fleetplan.optimizer.fleet_problem import Problem
    from fleetplan.optimizer.milp import FleetModel
    from fleetplan.optimizer.plan_checks import PlanView

#: Host power (CPUs, memory, NICs, fans, power-supply losses) as a share of the GPUs' board
#: power, when the ownership catalog has no server for a GPU type. The shipped servers'
#: nameplate maxima give node_power_kw / (8 x tdp_w) - 1 = 1.03 (DGX A100: 6.5 kW, 8 x 400 W),
#: 0.82 (HGX H100: 10.2 kW, 8 x 700 W) and 0.79 (DGX B200: 14.3 kW, 8 x 1000 W); 0.8 is the
#: newer two, the A100 server's older host being the outlier.
HOST_SHARE_OF_BOARD_POWER = 0.8

#: One step of a site's limit priced by re-solving [kW].
KW_STEP = 100.0

#: Columns of the plan's power table.
POWER_COLUMNS = ["site", "month", "kw_peak", "kw_mean", "kw_limit", "mwh"]


def kw_per_gpu_from_board_power(tdp_w, host_share=HOST_SHARE_OF_BOARD_POWER):
    """IT power per GPU from its board power and a host share [kW].

    Parameters
    ----------
    tdp_w : float or array
        The GPU's board power (thermal design power) [W].
    host_share : float or array
        Host power per unit of board power [fraction].

    Returns
    -------
    float or array
        [kW per GPU].

    Notes
    -----
    :math:`e = \\mathrm{TDP} (1 + h) / 1000`; the prior :math:`h` = 0.8 comes from the shipped
    servers' nameplate power (see :data:`HOST_SHARE_OF_BOARD_POWER`, [1]).

    References
    ----------
    .. [1] NVIDIA DGX H100/H200 user guide, power specifications (10.2 kW); ownership catalog.

    Examples
    --------
    >>> print(round(kw_per_gpu_from_board_power(700.0), 3))
    1.26
    """
    return np.asarray(tdp_w, dtype=float) * (1.0 + np.asarray(host_share, dtype=float)) / 1000.0


def kw_per_gpu_from_node_power(node_power_kw, gpus_per_node):
    """IT power per GPU from the whole server's power [kW].

    Parameters
    ----------
    node_power_kw : float or array
        Maximum power of one server, host included [kW].
    gpus_per_node : int or array
        GPUs in that server.

    Returns
    -------
    float or array
        [kW per GPU].

    Notes
    -----
    :math:`e = P_{node} / s`; the ownership catalog's ``node_power_kw`` [1].

    References
    ----------
    .. [1] NVIDIA DGX H100/H200 user guide, power specifications (10.2 kW per 8-GPU server).

    Examples
    --------
    >>> print(kw_per_gpu_from_node_power(10.2, 8))
    1.275
    """
    return np.asarray(node_power_kw, dtype=float) / np.asarray(gpus_per_node, dtype=float)


def facility_kw(it_kw, pue):
    """Power the facility draws for an IT load [kW].

    Parameters
    ----------
    it_kw : float or array
        IT power [kW].
    pue : float or array
        Power usage effectiveness [facility kW per IT kW], >= 1.

    Returns
    -------
    float or array
        [kW].

    Notes
    -----
    :math:`P_{facility} = \\mathrm{PUE} \\cdot P_{IT}` [1].

    References
    ----------
    .. [1] ISO/IEC 30134-2:2016, Key performance indicators, Part 2: Power usage effectiveness.

    Examples
    --------
    >>> print(facility_kw(400.0, 1.3))
    520.0
    """
    return np.asarray(it_kw, dtype=float) * np.asarray(pue, dtype=float)


def energy_mwh(kw, hours):
    """Energy of a steady draw [MWh].

    Parameters
    ----------
    kw : float or array
        Power [kW].
    hours : float or array
        Time [h].

    Returns
    -------
    float or array
        [MWh].

    Notes
    -----
    :math:`E = P t / 1000` [1].

    References
    ----------
    .. [1] BIPM, The International System of Units (SI), 9th ed., 2019 (watt, hour).

    Examples
    --------
    >>> print(energy_mwh(400.0, 730.0))
    292.0
    """
    return np.asarray(kw, dtype=float) * np.asarray(hours, dtype=float) / 1000.0


def _site_draw(problem: Problem, gpus: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``gpus`` (gpu, pricing_type, ...) on a site, with ``kw_per_unit`` = facility kW
    per GPU."""
    drawn = gpus.merge(problem.site_gpus, on=["gpu", "pricing_type"]).merge(
        problem.sites[["site", "pue"]], on="site")
    return drawn.assign(kw_per_unit=facility_kw(drawn["kw_per_gpu"], drawn["pue"]))


def _site_kw(problem: Problem) -> pd.Series:
    return problem.sites.set_index("site")["kw"].astype(float)


def define_power(model: FleetModel) -> None:
    """Every site's facility kW stays within its envelope in every period."""
    problem = model.problem
    if problem.sites.empty:
        return
    nodes = _site_draw(problem, per_period(model.nodes, problem.periods))
    terms = nodes[["site", "period", "col"]].assign(
        coef=(nodes["gpus_per_node"] * nodes["kw_per_unit"]).to_numpy(float))
    limits = _site_kw(problem)
    add_keyed_rows(model, "power", terms, ["site", "period"], "<=",
                   lambda t: t["site"].map(limits).to_numpy(float), unit="kW",
                   subject=lambda t: t["site"])


def site_kw_by_period(problem: Problem, gpus: pd.DataFrame, column: str) -> pd.DataFrame:
    """site, period, kw: facility kW of the GPUs in ``column`` of ``gpus`` (gpu,
    pricing_type, period)."""
    drawn = _site_draw(problem, gpus)
    drawn["kw"] = drawn[column].astype(float) * drawn["kw_per_unit"]
    return drawn.groupby(["site", "period"], as_index=False)["kw"].sum()


def check_power(view: PlanView) -> list[str]:
    """The GPUs bought (whole nodes) on every site stay within its kW in every period."""
    problem = view.problem
    if problem.sites.empty or view.replicas.empty:
        return []
    draw = site_kw_by_period(problem, view.gpus_bought(), "bought")
    draw["limit"] = draw["site"].map(_site_kw(problem)).astype(float)
    over = draw[draw["kw"] > draw["limit"] * (1 + 1e-9) + 1e-6]
    return [f"power: site {s} in period {t}: {kw:,.1f} kW > {limit:,.1f} kW"
            for s, t, kw, limit in over[["site", "period", "kw", "limit"]].to_numpy()]


def relax_power(problem: Problem, site: str) -> tuple[Problem, str, str]:
    """The site's limit :data:`KW_STEP` kW higher."""
    sites = problem.sites.copy()
    sites.loc[sites["site"] == site, "kw"] += KW_STEP
    return (problem.with_changes(sites=sites), f"+{KW_STEP:g} kW",
            f"{KW_STEP:g} kW more at site {site} would save {{saving}} per month")


def power_step(problem: Problem, subjects: pd.Series) -> np.ndarray:
    """A site binds when less than one node of its largest draw is left [kW]."""
    drawn = _site_draw(problem, problem.gpus[["gpu", "gpus_per_node"]].merge(
        problem.offers[["gpu", "pricing_type"]], on="gpu"))
    node_kw = (drawn["gpus_per_node"] * drawn["kw_per_unit"]).groupby(drawn["site"]).max()
    return subjects.map(node_kw).fillna(0.0).to_numpy(float)


def lift_power(problem: Problem) -> Problem | None:
    """No site envelopes."""
    if problem.sites.empty:
        return None
    return problem.with_changes(sites=problem.sites.iloc[0:0],
                                site_gpus=problem.site_gpus.iloc[0:0])


def diagnose_power(problem: Problem, solution: dict) -> list[str]:
    """Sites whose envelope the plan without envelopes exceeds, with the kW short."""
    draw = site_kw_by_period(problem, solution["nodes"], "gpus")
    peak = draw.groupby("site")["kw"].max()
    limits = _site_kw(problem)
    return [f"site {site} needs {kw:,.0f} kW but its envelope is {limits[site]:,.0f} kW "
            f"({kw - limits[site]:,.0f} kW short)"
            for site, kw in peak.items() if kw > limits[site] + 1e-6]


def power_swaps(problem: Problem, configs: pd.DataFrame) -> np.ndarray:
    """[c', c]: c' draws no more site power than c: the same GPU type with no more GPUs per
    replica, or a GPU type no site holds."""
    gpu, tp = configs["gpu"].to_numpy(), configs["tp"].to_numpy()
    same = (gpu[:, None] == gpu[None, :]) & (tp[:, None] <= tp[None, :])
    sited = set(problem.site_gpus["gpu"]) if not problem.sites.empty else set()
    return same | ~np.isin(gpu, list(sited))[:, None]


def power_table(problem: Problem, nodes: pd.DataFrame) -> pd.DataFrame:
    """Per site and month of the horizon: kw_peak and kw_mean [facility kW], kw_limit [kW] and
    mwh [MWh], from the solved nodes (gpu, pricing_type, period, gpus)."""
    if problem.sites.empty:
        return pd.DataFrame(columns=POWER_COLUMNS)
    periods = problem.periods[["period", "month", "hours", "month_weight"]]
    grid = problem.sites[["site"]].merge(periods, how="cross")
    draw = site_kw_by_period(problem, nodes, "gpus")
    grid = grid.merge(draw, on=["site", "period"], how="left").fillna({"kw": 0.0})
    grid["mwh"] = energy_mwh(grid["kw"], grid["hours"] / grid["month_weight"])
    grid["kw_hours"] = grid["kw"] * grid["hours"]
    table = grid.groupby(["site", "month"], as_index=False).agg(
        kw_peak=("kw", "max"), kw_hours=("kw_hours", "sum"), hours=("hours", "sum"),
        mwh=("mwh", "sum"))
    table["kw_mean"] = table["kw_hours"] / table["hours"]
    table["kw_limit"] = table["site"].map(_site_kw(problem))
    if table["month"].nunique() == 1 and problem.horizon_months > 1:  # one month for all
        months = pd.DataFrame({"month": np.arange(math.ceil(problem.horizon_months))})
        table = table.drop(columns="month").merge(months, how="cross")
    return table[POWER_COLUMNS].sort_values(["site", "month"]).reset_index(drop=True)
