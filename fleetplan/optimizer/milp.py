r"""The fleet MILP: the cheapest mix of GPU replicas that serves every request bucket.

Sets: workloads :math:`w` with request buckets :math:`b`; periods :math:`t` (hours of a
representative day, per distinct month) standing for :math:`h_t` hours of the horizon, month
:math:`m(t)` standing for :math:`\mu_m` horizon months; configurations :math:`c` (model pool,
GPU :math:`g(c)`, quantization, :math:`\tau_c` GPUs per replica); pricing types
:math:`p \in R \cup F` with reserved :math:`R = \{reserved\_1y, reserved\_3y\}` paid for every hour
of the horizon and flexible :math:`F = \{on\_demand, spot\}` paid per period; offers
:math:`(g, p)` at :math:`\pi_{gp}` USD per GPU-hour; candidates :math:`(w,b,c)` whose replica
serves :math:`\kappa_{wbc} > 0` requests/s while meeting the workload's SLOs.

Data: demand :math:`d_{wbt}` [req/s], target utilization :math:`\rho`, node size :math:`s_g`,
availability :math:`A_g` and :math:`A_{gp}` [GPUs], redundancy :math:`k_w` [replicas], spot
share cap :math:`\sigma`, budget :math:`B` [USD/month], hours per month :math:`H`.

Variables:
    :math:`x_{wbct} \in [0,1]` share of bucket (w,b) routed to configuration c in period t;
    :math:`y_{cp} \in \mathbb{Z}_+` reserved replicas (:math:`p \in R`, whole horizon);
    :math:`y_{cpt} \in \mathbb{Z}_+` flexible replicas (:math:`p \in F`) in period t;
    :math:`n_{gp}, n_{gpt}` nodes bought (integer when :math:`s_g > 1`);
    :math:`u_{wbt} \in [0,1]` unmet share (elastic model only);
    :math:`v_{wct} \in \{0,1\}` workload w uses configuration c in period t (if :math:`k_w > 0`).
Write :math:`Y_{ct} = \sum_{p\in R} y_{cp} + \sum_{p\in F} y_{cpt}`, the load
:math:`L_{ct} = \sum_{wb} x_{wbct}\, d_{wbt} / (\rho\, \kappa_{wbc})` [replicas], and
:math:`N_{gpt}` = :math:`n_{gp}` for reserved, :math:`n_{gpt}` for flexible pricing.

.. math::

    \min \; & \sum_{g, p \in R} s_g \pi_{gp} \phi_p \textstyle\sum_t h_t \; n_{gp}
             + \sum_t h_t \sum_{g, p \in F} s_g \pi_{gp} n_{gpt} \\
    \text{demand:}\; & \textstyle\sum_c x_{wbct} + u_{wbt} = 1 \quad \forall w,b,t: d_{wbt} > 0 \\
    \text{capacity:}\; & L_{ct} \le Y_{ct} \quad \forall c,t \\
    \text{nodes:}\; & \textstyle\sum_{c: g(c)=g, \tau_c \ge \tau} \tau_c\, y_{cp(t)}
        \le \tau \lfloor s_g / \tau \rfloor\, n_{gp(t)} \quad \forall \tau
        \text{ (TP degrees of a divisibility chain; node patterns otherwise)} \\
    \text{availability:}\; & \textstyle\sum_p s_g N_{gpt} \le A_g, \quad s_g N_{gpt} \le A_{gp} \\
    \text{spot share:}\; & \textstyle\sum_c \tau_c y_{c,spot,t}
        \le \sigma \sum_{c,p} \tau_c y_{cp(t)} \\
    \text{redundancy:}\; & x_{wbct} \le v_{wct}, \quad Y_{ct} - L_{ct} \ge k_w v_{wct}
        \quad \forall w: k_w > 0 \\
    \text{budget:}\; & \textstyle\sum_{g,p\in R} s_g \pi_{gp} H n_{gp}
        + \sum_{t \in m} \frac{h_t}{\mu_m} \sum_{g,p\in F} s_g \pi_{gp} n_{gpt}
        \le B \quad \forall m

Supply beyond rented GPUs: a site's power envelope
:math:`\sum_{(g,p) \in s} \mathrm{PUE}_s e_g s_g N_{gpt} \le P_s` (``power_envelope.py``), and
hosted APIs: a share :math:`z_{wbta} \in [0,1]` joins the demand row of every bucket an API may
serve, costs :math:`3600\, d_{wbt} h_t u_{wba}` and counts against the API's rate limits in every
period (``api_supply.py``).
Linking pricing types (reserved terms and ``purchase``, servers the plan buys) hold one count
from a start month on: month 0, or a GPU type's lead time (``lead_times.py``); their variable
counts, and is paid, only in the periods of that month and later. GPUs the company already has
(``committed``, ``owned``) are flexible offers capped by what exists each month
(``current_fleet.py``).

A reserved commitment is paid for whole terms: :math:`\phi_p` = (months of the whole terms
covering the horizon) / (horizon months), 1 when the term fits the horizon. N+k is kept per
configuration: every configuration that carries load of a workload with k spares keeps k
replicas beyond its load, so losing any k replicas never leaves load on too few replicas of
its own configuration. Workloads with different SLOs share replicas only at a common SLO
level (``slo_levels.py``): each level of a configuration is a configuration of its own.

A configuration belongs to one model pool, so a replica serves one model; workloads of the
same model may share replicas, their loads adding linearly (Mélange's assumption). Routing
fractions are continuous, so demand is never sliced into whole-replica chunks.

Prefill/decode disaggregation: a bucket may be routed to a pair of configurations instead of
one, a prefill configuration (prompts) and a decode configuration (generation, possibly another
GPU type). The pair's one routing share loads both, each at its own capacity, so both pools are
sized in whole replicas: :math:`x_{wbrt}` for a route :math:`r` with stages :math:`c \in r`
adds :math:`x_{wbrt} d_{wbt} / (\rho \kappa_{wbc})` to :math:`L_{ct}` of each stage.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import LINKING_PRICING
from fleetplan.optimizer.api_supply import api_pools, api_shares, define_api_shares
from fleetplan.optimizer.config_fixed_cost import define_deployed
from fleetplan.optimizer.constraint_families import FAMILIES
from fleetplan.optimizer.cost_cover import (
    cover_limits,
    cover_terms,
    least_pool_costs,
    lowest_gpu_prices,
)
from fleetplan.optimizer.fleet_problem import Problem, charged_offers, complete_routes
from fleetplan.optimizer.lead_times import linking_hours, present_replicas
from fleetplan.optimizer.linear_program import INF, LinearProgram
from fleetplan.optimizer.milp_tables import add_keyed_rows, per_period
from fleetplan.optimizer.solver import SolveOptions, SolveOutcome

logger = logging.getLogger(__name__)

#: Largest share of the time left that the cost-cover cut's small MILPs may take when the
#: build has a deadline: the cut only tightens the relaxation, the solve needs the rest.
COVER_SHARE = 0.25


@dataclass
class FleetModel:
    """A built model: the program, its variables and constraints as tables, its solution.

    ``routes``: workload, bucket, route, config, period, req_s, load [replicas per unit share],
    col (the route's share; the stages of a route share it). ``replicas``: config, pool, gpu,
    tp, pricing_type, period (-1 = reserved), col. ``nodes``: gpu, pricing_type, period (-1 =
    reserved), gpus_per_node, usd_per_gpu_hour, hours [h paid], col. ``unmet``: workload,
    bucket, period, req_s, col. ``constraints``: family, subject, period, limit, sense, unit,
    row. ``cost`` [USD per unit of each column] and, elastic, ``unmet_share`` [share of
    request-hours per unit] are objective vectors; ``values`` is the solution (None before);
    ``extras`` holds tables a family keeps for itself (by family name).
    """

    problem: Problem
    elastic: bool
    program: LinearProgram = field(default_factory=LinearProgram)
    routes: pd.DataFrame = field(default_factory=pd.DataFrame)
    replicas: pd.DataFrame = field(default_factory=pd.DataFrame)
    nodes: pd.DataFrame = field(default_factory=pd.DataFrame)
    unmet: pd.DataFrame = field(default_factory=pd.DataFrame)
    spare_shortfall: pd.DataFrame = field(default_factory=pd.DataFrame)
    constraints: list[pd.DataFrame] = field(default_factory=list)
    cost: np.ndarray = field(default_factory=lambda: np.zeros(0))
    unmet_share: np.ndarray | None = None
    values: np.ndarray | None = None
    extras: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: Seconds the build took [s], its cost-cover cut (small MILPs solved) left out: what a
    #: model of the same problem built without the cut takes.
    build_s: float = math.nan
    #: (replica table, periods, the replicas in every period) of
    #: ``milp_constraints.replicas_per_period``
    replicas_spread: tuple = field(default=(None, None, None), repr=False)

    def constraint_table(self) -> pd.DataFrame:
        """All constraint families as one table."""
        if not self.constraints:  # typed, so its row and period numbers index arrays
            return pd.DataFrame({"family": pd.Series(dtype=object),
                                 "subject": pd.Series(dtype=object),
                                 "period": pd.Series(dtype=np.int64),
                                 "limit": pd.Series(dtype=float),
                                 "sense": pd.Series(dtype=object),
                                 "unit": pd.Series(dtype=object),
                                 "row": pd.Series(dtype=np.int64)})
        return pd.concat(self.constraints, ignore_index=True)

    def value(self, table: pd.DataFrame) -> np.ndarray:
        """Solution values of a variable table's columns (zeros without a solution)."""
        if self.values is None or table.empty:
            return np.zeros(len(table))
        return self.values[table["col"].to_numpy(dtype=np.int64)]

    def new_columns(self, table: pd.DataFrame, *, lower=0.0, upper=INF,
                    integer=False) -> pd.DataFrame:
        """``table`` with a ``col`` column: one new program column per row."""
        table = table.reset_index(drop=True)
        return table.assign(col=self.program.add_columns(len(table), lower=lower, upper=upper,
                                                         integer=integer))


class BuildStopped(Exception):
    """The model was not built by its deadline: ``after`` is the last step built, ``routes``
    the routing rows (route stage x period) and ``columns`` the columns so far."""

    def __init__(self, after: str, routes: int, columns: int) -> None:
        super().__init__(f"model build stopped after {after}")
        self.after, self.routes, self.columns = after, routes, columns

    @staticmethod
    def outcome(seconds: float) -> SolveOutcome:
        """What the solve of a model not built answers after ``seconds``: no plan, no solver."""
        return SolveOutcome("no_solution", math.nan, math.nan, "none", seconds)


def build_model(problem: Problem, *, elastic: bool = False, cost_cover: bool = True,
                cover_build: Callable[[Problem], FleetModel] | None = None,
                time_left: Callable[[], float] | None = None,
                expected_s: float = 0.0) -> FleetModel:
    """Assemble the MILP from ``problem``; ``elastic`` adds penalized unmet demand;
    ``cost_cover`` the whole-replica cost cut (``cost_cover.py``), whose small models
    ``cover_build`` makes (default: ``build_model`` without the cut). With ``time_left``
    (seconds left of the call), the build raises :class:`BuildStopped` at the first step that
    ends with no time left: a model too large to build in time is never solved anyway; one
    ``expected_s`` [s] to build (a like model's ``build_s``) is not begun with less left."""
    if time_left is not None and expected_s > 0 and expected_s > time_left():
        raise BuildStopped(f"no step: a like model took {expected_s:.1f} s to build", 0, 0)
    model = FleetModel(problem=problem, elastic=elastic)
    steps = [(step.__name__.replace("define_", "") + " columns", step) for step in VARIABLE_STEPS]
    steps += [(f"{family.name} rows", family.build) for family in FAMILIES
              if family.build is not None]
    started = time.perf_counter()
    for name, step in steps:
        step(model)
        stop_when_late(model, name, time_left)
    define_objective(model)
    model.build_s = time.perf_counter() - started  # before the cut's small solves
    if cost_cover and not elastic:  # unmet demand needs no replicas; the cut adds rows only
        define_cost_cover(model, cover_build or cover_model, time_left)
        stop_when_late(model, "cost_cover rows", time_left)
    logger.debug("built model: %d columns, %d rows", model.program.n_cols,
                 model.program.n_rows)
    return model


def stop_when_late(model: FleetModel, step: str, time_left: Callable[[], float] | None) -> None:
    """Raise :class:`BuildStopped` after ``step`` when ``time_left`` says no time is left."""
    if time_left is not None and time_left() <= 0:
        raise BuildStopped(step, len(model.routes), model.program.n_cols)


def define_routes(model: FleetModel) -> None:
    """Routing shares x for every usable route and period with demand.

    One row per (route, stage configuration): the stages of a disaggregated route share its
    routing variable, each loading its own configuration.
    """
    p = model.problem
    usable = complete_routes(p.candidates, p.configs["config"])[
        ["workload", "bucket", "route", "config", "req_s_per_replica"]]
    demand = p.demand[p.demand["req_s"] > 0][["workload", "bucket", "period", "req_s"]]
    shares = usable[["workload", "bucket", "route"]].drop_duplicates().merge(
        demand, on=["workload", "bucket"])
    shares = model.new_columns(shares, upper=1.0)
    routes = usable.merge(shares, on=["workload", "bucket", "route"]).merge(
        p.configs[["config", "pool"]], on="config")
    routes["load"] = routes["req_s"] / (p.target_utilization * routes["req_s_per_replica"])
    model.routes = routes


def define_replicas(model: FleetModel) -> None:
    """Integer replicas per configuration and offered pricing type (per period if flexible)."""
    p = model.problem
    used = p.configs[p.configs["config"].isin(model.routes["config"].unique())]
    rows = used.merge(p.offers[["gpu", "pricing_type"]], on="gpu")
    reserved = rows["pricing_type"].isin(LINKING_PRICING)
    flexible = rows[~reserved].merge(p.periods[["period"]], how="cross")
    rows = pd.concat([rows[reserved].assign(period=-1), flexible], ignore_index=True)
    model.replicas = model.new_columns(present_replicas(p, rows), integer=True)


def define_nodes(model: FleetModel) -> None:
    """Nodes bought per GPU type, pricing type and period; integer only for nodes of > 1 GPU."""
    p = model.problem
    keys = model.replicas.drop_duplicates(["gpu", "pricing_type", "period"])
    keys = keys[[c for c in ("gpu", "pricing_type", "period", "start_month") if c in keys]]
    rows = keys.merge(p.gpus[["gpu", "gpus_per_node"]], on="gpu").merge(
        charged_offers(p)[["gpu", "pricing_type", "usd_per_gpu_hour"]], on=["gpu", "pricing_type"])
    period_hours = p.periods.set_index("period")["hours"]
    rows["hours"] = np.where(rows["period"] < 0, linking_hours(p, rows),
                             rows["period"].map(period_hours).fillna(0.0))
    model.nodes = model.new_columns(rows, integer=(rows["gpus_per_node"] > 1).to_numpy())


def define_unmet(model: FleetModel) -> None:
    """Elastic model only: unmet share u of every bucket with demand in every period."""
    if not model.elastic:
        return
    demand = model.problem.demand
    model.unmet = model.new_columns(demand[demand["req_s"] > 0], upper=1.0)


#: Steps that define the variables, in order; the constraint families follow (FAMILIES).
VARIABLE_STEPS = (define_routes, define_replicas, define_nodes, define_unmet, define_api_shares,
                  define_deployed)


def define_objective(model: FleetModel) -> None:
    """Minimize total cost over the horizon; the elastic model also tracks unmet demand."""
    nodes, cost = model.nodes, np.zeros(model.program.n_cols)
    cost[nodes["col"].to_numpy(dtype=np.int64)] = (
        nodes["gpus_per_node"] * nodes["usd_per_gpu_hour"] * nodes["hours"]).to_numpy(float)
    extra = model.extras.get("objective")  # terms a family adds (CVaR: stochastic_model.py)
    if extra is not None:
        np.add.at(cost, extra["col"].to_numpy(dtype=np.int64), extra["coef"].to_numpy(float))
    shares = api_shares(model)
    cost[shares["col"].to_numpy(dtype=np.int64)] = shares["usd"].to_numpy(float)
    model.cost = cost
    if model.elastic and not model.unmet.empty:
        hours = model.problem.periods.set_index("period")["hours"]
        share = np.zeros(model.program.n_cols)
        weight = model.unmet["req_s"] * model.unmet["period"].map(hours)
        share[model.unmet["col"].to_numpy(dtype=np.int64)] = (weight / weight.sum()).to_numpy()
        short = model.spare_shortfall
        if not short.empty:  # spares count after demand: a whole missing spare weighs less
            spare_hours = short["period"].map(hours)
            share[short["col"].to_numpy(dtype=np.int64)] = (
                spare_hours / (spare_hours.sum() * short["redundancy_k"]) * 1e-3).to_numpy()
        model.unmet_share = share


def cover_model(part: Problem) -> FleetModel:
    """The small model of one pool and period that the cost-cover cut solves."""
    return build_model(part, cost_cover=False)


def define_cost_cover(model: FleetModel, build: Callable[[Problem], FleetModel],
                      time_left: Callable[[], float] | None = None) -> None:
    """Valid cut: each pool's replicas in a period, priced at their GPU's lowest price, cost at
    least the cheapest whole-replica fleet for that pool and period (``cost_cover.py``), each
    small model made by ``build``; with ``time_left``, its small MILPs get at most
    :data:`COVER_SHARE` of the time left."""
    problem = model.problem
    costs = cover_costs(problem, build,
                        math.inf if time_left is None else COVER_SHARE * time_left())
    if costs.empty:
        return
    terms = cover_terms(per_period(model.replicas, problem.periods), lowest_gpu_prices(problem))
    add_keyed_rows(model, "cost_cover", terms[["pool", "period", "col", "coef"]],
                   ["pool", "period"], ">=", lambda table: cover_limits(table),
                   rows=costs.reset_index(drop=True), unit="USD/h",
                   subject=lambda table: table["pool"])


def cover_costs(problem: Problem, build: Callable[[Problem], FleetModel],
                seconds: float = math.inf) -> pd.DataFrame:
    """pool, period, usd_per_hour of the cost-cover rows ``problem`` gets (no pool an API may
    serve: it may need no replicas at all), its small MILPs solved within ``seconds``."""
    costs = least_pool_costs(problem, build, SolveOptions(), seconds)
    return costs[~costs["pool"].isin(api_pools(problem))].reset_index(drop=True)
