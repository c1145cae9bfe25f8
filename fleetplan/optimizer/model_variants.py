r"""Variants of a built fleet model: the same question at other demand or other GPU prices,
answered without building the model again.

A what-if grid asks one question many times with each workload's demand scaled or a GPU
type's prices scaled. Such a change moves numbers, not structure: every column and row stays,
and only these change:

- each routing share's load, :math:`L = d / (\rho \kappa)`, with its bucket's demand :math:`d`:
  its entries in the capacity rows and in the N+k rows (``Y - L >= k u``) are multiplied by
  :math:`d' / d`;
- the pool-cover cut's right-hand sides, :math:`\lceil \sum_b \min_r L \rceil + k`, recomputed
  from the new loads (as ``milp_constraints.pool_cover_bounds`` does);
- each node column's price, so the objective, taken from the changed offers;
- the availability rows' upper bounds, from the changed GPU caps (the same GPU types capped);
- the cost-cover cut (``cost_cover.py``): its right-hand sides are the small MILPs' bounds,
  solved again for the new demand and prices (the model they are cut from itself a variant of
  the first one built, :class:`CoverBuilds`), and its entries, each GPU's lowest price per
  replica, follow the new prices. When the new problem gets cut rows for other pools or
  periods (a bound of 0, say), :meth:`ModelVariation.apply` gives None and the caller builds.

Every other family in :data:`VARIED_FAMILIES` reads neither demand nor prices. The variant's
program is the program ``build_model`` makes for the changed problem (tested entry by entry),
so it has the same plans. :class:`ModelVariation` works out once, from the built model, where
each of those numbers sits, so a variant is a handful of array operations. A model with any
other family, a hosted API, or elastic demand is not varied: :func:`variation_blocker` names
why, and the caller builds the model as usual. The caller also keeps the dominated
configurations pruned the same: prices decide dominance (``dominance.Comparison``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fleetplan.optimizer.api_supply import api_shares
from fleetplan.optimizer.cost_cover import cover_limits, lowest_gpu_prices
from fleetplan.optimizer.fleet_problem import Problem, charged_offers
from fleetplan.optimizer.milp import FleetModel, cover_costs, cover_model, define_objective
from fleetplan.optimizer.milp_constraints import pool_cover_bound
from fleetplan.optimizer.milp_tables import per_period
from fleetplan.optimizer.solution_tables import rounded

#: Families whose rows a variant keeps or changes as the module docstring says.
VARIED_FAMILIES = frozenset({"demand", "capacity", "nodes", "availability", "offer_cap",
                             "spot_share", "redundancy", "pool_cover", "cost_cover",
                             "simplicity"})
#: Tables a family keeps in ``FleetModel.extras`` that a variant may carry over unchanged.
VARIED_EXTRAS = frozenset({"redundancy"})
#: Largest violation of a row or bound a variant's solution may show [model units].
FEASIBILITY_TOLERANCE = 1e-5

_DEMAND_KEYS = ["workload", "bucket", "period"]


def variation_blocker(model: FleetModel) -> str:
    """Why ``model`` cannot be varied ('' when it can)."""
    families = set(model.constraint_table()["family"])
    if model.elastic:
        return "the elastic model tracks unmet demand"
    if families - VARIED_FAMILIES:
        return f"its {', '.join(sorted(families - VARIED_FAMILIES))} rows change otherwise"
    if set(model.extras) - VARIED_EXTRAS:
        return f"it keeps {', '.join(sorted(set(model.extras) - VARIED_EXTRAS))} tables"
    if not api_shares(model).empty:
        return "hosted APIs are paid per request"
    return ""


def _codes(table: pd.DataFrame, keys: list[str]) -> np.ndarray:
    return table.groupby(keys, sort=True).ngroup().to_numpy()


def _lookup(index: pd.MultiIndex, keys: pd.DataFrame) -> np.ndarray:
    return index.get_indexer(pd.MultiIndex.from_frame(keys))


@dataclass
class ModelVariation:
    """Where the numbers a variant changes sit in one built model (module docstring)."""

    model: FleetModel
    table: pd.DataFrame  # the model's constraint table
    demand_keys: pd.DataFrame  # the problem's demand rows' keys, in order
    route_demand: np.ndarray  # each route's row in the demand table
    route_cols: np.ndarray
    loaded: np.ndarray  # positions in the matrix's data that hold a route's load
    route_key: np.ndarray  # each route's (workload, bucket, period, route), its first route
    first_route: np.ndarray
    bucket_of_key: np.ndarray  # each route key's (workload, bucket, period)
    cover_of_bucket: np.ndarray  # each of those buckets' (pool, period), -1 if not covered
    cover_rows: np.ndarray  # pool-cover rows and, for each, its (pool, period) (-1: none)
    cover_of_row: np.ndarray
    cover_spare: np.ndarray  # largest N+k among each (pool, period)'s busy workloads
    cost_rows: np.ndarray  # cost-cover rows, their (pool, period) and their matrix entries
    cost_keys: pd.MultiIndex
    cost_entries: np.ndarray
    lowest: pd.Series  # each GPU type's lowest price, and each column's GPU type (-1: none)
    col_gpu: np.ndarray
    capped_rows: np.ndarray  # availability rows and the GPU type each one caps
    capped_gpu: np.ndarray
    node_offer: np.ndarray  # each node column's row in the problem's offers
    spread_nodes: np.ndarray  # per-period node rows (reserved repeated): node and hours
    spread_hours: np.ndarray
    spread_peak: np.ndarray  # each per-period node row's (gpu, period) and GPU type
    spread_gpu: np.ndarray
    peak_gpu: np.ndarray  # each (gpu, period)'s GPU type
    gpus: pd.Index
    demand_weight: np.ndarray  # per demand row with requests: hours, tokens per request
    demand_tokens: np.ndarray
    demand_workload: np.ndarray
    workloads: pd.Index

    @classmethod
    def of(cls, model: FleetModel) -> ModelVariation:
        """The variation of ``model``, which must have no :func:`variation_blocker`."""
        p, routes = model.problem, model.routes
        demand = p.demand.reset_index(drop=True)
        route_demand = _lookup(pd.MultiIndex.from_frame(demand[_DEMAND_KEYS]),
                               routes[_DEMAND_KEYS])

        table = model.constraint_table()
        family = table["family"].to_numpy()
        loaded_rows = np.zeros(model.program.n_rows, dtype=bool)
        loaded_rows[table["row"].to_numpy()[(family == "capacity") | (
            (family == "redundancy") & (table["unit"] == "replicas").to_numpy())]] = True
        matrix = model.program.matrix
        row_of = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
        is_route = np.zeros(model.program.n_cols, dtype=bool)
        is_route[routes["col"].to_numpy(dtype=np.int64)] = True
        loaded = np.flatnonzero(loaded_rows[row_of] & is_route[matrix.indices])

        route_key = _codes(routes, [*_DEMAND_KEYS, "route"])
        first = np.unique(route_key, return_index=True)[1]
        keyed = routes.iloc[first]
        bucket_of_key = _codes(keyed, _DEMAND_KEYS)
        buckets = keyed.drop_duplicates(_DEMAND_KEYS).sort_values(_DEMAND_KEYS)
        by_api = pd.MultiIndex.from_frame(p.api_candidates[["workload", "bucket"]])
        covered = ~pd.MultiIndex.from_frame(buckets[["workload", "bucket"]]).isin(by_api)
        busy = buckets[covered].merge(p.workloads[["workload", "redundancy_k"]], on="workload")
        spare = busy.groupby(["pool", "period"])["redundancy_k"].max()
        cover_of_bucket = np.where(covered, spare.index.get_indexer(
            pd.MultiIndex.from_frame(buckets[["pool", "period"]])), -1)
        cover = table[family == "pool_cover"]
        cover_of_row = spare.index.get_indexer(pd.MultiIndex.from_arrays(
            [cover["subject"].to_numpy(), cover["period"].to_numpy()]))

        costs = table[family == "cost_cover"]
        in_costs = np.zeros(model.program.n_rows, dtype=bool)
        in_costs[costs["row"].to_numpy()] = True
        lowest = lowest_gpu_prices(p)
        col_gpu = np.full(model.program.n_cols, -1)
        col_gpu[model.replicas["col"].to_numpy(dtype=np.int64)] = lowest.index.get_indexer(
            model.replicas["gpu"])

        nodes = model.nodes.assign(node=np.arange(len(model.nodes)))
        offers = p.offers.reset_index(drop=True)
        node_offer = _lookup(pd.MultiIndex.from_frame(offers[["gpu", "pricing_type"]]),
                             nodes[["gpu", "pricing_type"]])
        spread = per_period(nodes.drop(columns="hours"), p.periods)
        spread_peak = _codes(spread, ["gpu", "period"])
        gpus = pd.Index(sorted(set(spread["gpu"])))
        peak_gpu = gpus.get_indexer(spread.drop_duplicates(["gpu", "period"]).sort_values(
            ["gpu", "period"])["gpu"])

        served = demand["req_s"].to_numpy(float) > 0
        hours = demand["period"].map(p.periods.set_index("period")["hours"]).to_numpy(float)
        tokens = sum(demand[c].to_numpy(float) if c in demand else np.zeros(len(demand))
                     for c in ("input_len", "output_len"))
        workloads = pd.Index(p.workloads["workload"])
        return cls(model, table, demand[_DEMAND_KEYS], route_demand,
                   routes["col"].to_numpy(dtype=np.int64), loaded, route_key, first,
                   bucket_of_key,
                   cover_of_bucket, cover["row"].to_numpy(), cover_of_row, spare.to_numpy(float),
                   costs["row"].to_numpy(), pd.MultiIndex.from_arrays(
                       [costs["subject"].to_numpy(), costs["period"].to_numpy()]),
                   np.flatnonzero(in_costs[row_of]), lowest, col_gpu,
                   table.loc[family == "availability", "row"].to_numpy(),
                   table.loc[family == "availability", "subject"].to_numpy(), node_offer,
                   spread["node"].to_numpy(),
                   spread["period"].map(p.periods.set_index("period")["hours"]).to_numpy(float),
                   spread_peak, gpus.get_indexer(spread["gpu"]), peak_gpu, gpus, hours[served], tokens[served],
                   workloads.get_indexer(demand["workload"][served]), workloads)

    def fits(self, problem: Problem) -> bool:
        """Whether ``problem`` differs from the model's only in what a variant changes: its
        demand (rows with the same keys, requests in the same buckets and periods) and its
        offers' prices, and its GPU caps (the same GPU types capped). Every other field is
        compared whole."""
        base = self.model.problem
        demand = problem.demand
        if not (len(demand) == len(base.demand)
                and (demand[_DEMAND_KEYS].to_numpy() == self.demand_keys.to_numpy()).all()
                and np.array_equal(demand["req_s"].to_numpy() > 0,
                                   base.demand["req_s"].to_numpy() > 0)
                and problem.offers.drop(columns="usd_per_gpu_hour").equals(
                    base.offers.drop(columns="usd_per_gpu_hour"))
                and same_capped_gpus(problem, base)):
            return False
        return all(_same(getattr(problem, name), getattr(base, name))
                   for name in _COMPARED_FIELDS)

    def apply(self, problem: Problem, cover_build: Callable[[Problem], FleetModel] = cover_model
              ) -> FleetModel | None:
        """The model rebuilt for ``problem``, which :meth:`fits`, its cost-cover models made by
        ``cover_build``; None when its cost-cover cut has other rows. The built model is
        unchanged."""
        model = self.model
        req_s = problem.demand["req_s"].to_numpy(float)[self.route_demand]
        kappa = model.routes["req_s_per_replica"].to_numpy(float)
        load = req_s / (problem.target_utilization * kappa)
        ratio = np.ones(model.program.n_cols)
        ratio[self.route_cols] = req_s / model.routes["req_s"].to_numpy(float)
        matrix = model.program.matrix.copy()
        matrix.data[self.loaded] *= ratio[matrix.indices[self.loaded]]

        row_lower = model.program.row_lower.copy()
        table = self.table.copy()
        if len(self.cover_rows):
            limits = self.cover_limits(load)
            row_lower[self.cover_rows] = limits
            table.loc[table["family"] == "pool_cover", "limit"] = limits

        if len(self.cost_rows):
            limits = self.cost_limits(problem, cover_build)
            if limits is None:
                return None
            row_lower[self.cost_rows] = limits
            table.loc[table["family"] == "cost_cover", "limit"] = limits
            lowest = lowest_gpu_prices(problem).reindex(self.lowest.index).to_numpy(float)
            scale = np.ones(model.program.n_cols)
            priced = self.col_gpu >= 0
            scale[priced] = lowest[self.col_gpu[priced]] / self.lowest.to_numpy(float)[
                self.col_gpu[priced]]
            matrix.data[self.cost_entries] *= scale[matrix.indices[self.cost_entries]]

        row_upper = model.program.row_upper.copy()
        if len(self.capped_rows):
            caps = problem.gpus.set_index("gpu")["max_gpus"].reindex(self.capped_gpu).to_numpy()
            row_upper[self.capped_rows] = caps
            table.loc[table["family"] == "availability", "limit"] = caps

        prices = charged_offers(problem)["usd_per_gpu_hour"].to_numpy(float)[self.node_offer]
        varied = dataclasses.replace(
            model, problem=problem,
            program=model.program.with_changes(matrix=matrix, row_lower=row_lower,
                                               row_upper=row_upper),
            routes=model.routes.assign(req_s=req_s, load=load),
            nodes=model.nodes.assign(usd_per_gpu_hour=prices), constraints=[table],
            values=None, extras=dict(model.extras))
        define_objective(varied)
        return varied

    def cover_limits(self, load: np.ndarray) -> np.ndarray:
        """Pool-cover right-hand sides at the routes' ``load`` [replicas]."""
        per_key = np.bincount(self.route_key, weights=load)  # a route's stages all need replicas
        least = np.full(self.bucket_of_key.max() + 1, np.inf)
        np.minimum.at(least, self.bucket_of_key, per_key)
        covered = self.cover_of_bucket >= 0
        need = np.bincount(self.cover_of_bucket[covered], weights=least[covered],
                           minlength=len(self.cover_spare))
        bound = pool_cover_bound(need, self.cover_spare)
        return np.where(self.cover_of_row >= 0, bound[self.cover_of_row], 0.0)

    def cost_limits(self, problem: Problem, cover_build) -> np.ndarray | None:
        """Cost-cover right-hand sides for ``problem`` [USD/h], None when it gets other rows."""
        costs = cover_costs(problem, cover_build)
        keys = pd.MultiIndex.from_arrays([costs["pool"].to_numpy(), costs["period"].to_numpy()])
        position = keys.get_indexer(self.cost_keys)
        if len(keys) != len(self.cost_keys) or (position < 0).any():
            return None
        return cover_limits(costs)[position]

    def headline(self, model: FleetModel) -> dict:
        """The figures a what-if row reports from ``model`` solved (a variant of this one):
        usd_per_month, tokens_per_month and served_fraction per workload, gpus_peak per GPU
        type, and whether the solution keeps every row and bound of the program; computed as
        ``solution_tables`` does."""
        p, raw = model.problem, model.values
        nodes = model.nodes
        value = rounded(raw[nodes["col"].to_numpy(dtype=np.int64)],
                        (nodes["gpus_per_node"] > 1).to_numpy())  # whole nodes of > 1 GPU
        gpus = (value * nodes["gpus_per_node"].to_numpy(float))[self.spread_nodes]
        usd = gpus * nodes["usd_per_gpu_hour"].to_numpy(float)[self.spread_nodes] * self.spread_hours
        per_gpu_period = np.bincount(self.spread_peak, weights=gpus)
        peak = np.zeros(len(self.gpus))
        np.maximum.at(peak, self.peak_gpu, per_gpu_period)
        paid = np.bincount(self.spread_gpu, weights=usd, minlength=len(self.gpus)) > 0

        shares = rounded(raw[self.route_cols], False)
        first = self.first_route  # one share per route (its stages share it)
        served = np.bincount(self.route_demand[first], weights=shares[first],
                             minlength=len(p.demand))
        positive = p.demand["req_s"].to_numpy(float) > 0
        weight = p.demand["req_s"].to_numpy(float)[positive] * self.demand_weight
        served = np.minimum(served[positive], 1.0)
        count = len(self.workloads)
        demanded = np.bincount(self.demand_workload, weights=weight, minlength=count)
        has = np.bincount(self.demand_workload, minlength=count) > 0
        tokens = np.bincount(self.demand_workload, weights=weight * served * self.demand_tokens
                             * 3600, minlength=count)
        done = np.bincount(self.demand_workload, weights=weight * served, minlength=count)
        with np.errstate(invalid="ignore", divide="ignore"):
            fraction = np.where(has, done / demanded, np.nan)
        return {"usd_per_month": float(usd.sum()) / p.horizon_months,
                "tokens_per_month": pd.Series(np.where(has, tokens / p.horizon_months, np.nan),
                                              index=self.workloads),
                "served_fraction": pd.Series(fraction, index=self.workloads),
                "gpus_peak": pd.Series(peak[paid], index=self.gpus[paid]),
                "feasible": _keeps_program(model)}


#: Problem fields a variant keeps as they are (all but demand, offers, GPU caps and notes).
_COMPARED_FIELDS = tuple(f.name for f in dataclasses.fields(Problem)
                         if f.name not in ("demand", "offers", "gpus", "notes"))


def same_capped_gpus(a: Problem, b: Problem) -> bool:
    """Whether both problems have the same GPU types, node sizes and capped types (the caps
    themselves may differ)."""
    return bool(a.gpus.drop(columns="max_gpus").equals(b.gpus.drop(columns="max_gpus"))
                and np.array_equal(a.gpus["max_gpus"].isna().to_numpy(),
                                   b.gpus["max_gpus"].isna().to_numpy()))


def _same(a, b) -> bool:
    if isinstance(a, pd.DataFrame):
        return isinstance(b, pd.DataFrame) and a.equals(b)
    return a == b or (a != a and b != b)  # NaN equals NaN here


def _keeps_program(model: FleetModel) -> bool:
    program, values = model.program, model.values
    integer = program.integer
    fractional = np.abs(values[integer] - np.round(values[integer]))
    return bool(program.violation(values) <= FEASIBILITY_TOLERANCE
                and np.all(fractional <= FEASIBILITY_TOLERANCE))


class CoverBuilds:
    """Makes the cost-cover cut's model of its small MILPs (``cover_build`` of
    ``build_model``): a variant of the first one built for the same pools, configurations and
    demanded buckets of each period, so a what-if grid builds it once."""

    def __init__(self) -> None:
        self.variations: dict[tuple, ModelVariation] = {}

    def __call__(self, part: Problem) -> FleetModel:
        demand = part.demand[part.demand["req_s"] > 0]
        key = (tuple(part.workloads["pool"]), tuple(part.configs["config"]),
               tuple(zip(demand["workload"], demand["bucket"], demand["period"])))
        variation = self.variations.get(key)
        if variation is not None and variation.fits(part):
            varied = variation.apply(part)
            if varied is not None:
                return varied
        model = cover_model(part)
        if not variation_blocker(model):
            self.variations[key] = ModelVariation.of(model)
        return model
