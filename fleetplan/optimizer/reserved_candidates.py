"""Reserved counts as candidates: the reserved rows of a model, the columns that fix a count
(with the nodes it needs), a plan moved to other reserved counts (a warm start for pricing
them), the configurations a quick period solve may close, and the load-duration choice.

The load-duration choice: the r-th reserved replica of a configuration is worth buying when
the periods that use at least r replicas of it (in the Lagrangian periods' plans) make up at
least the reserved-to-on-demand price ratio of the hours.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.optimizer.milp import FleetModel
from fleetplan.optimizer.period_solves import PeriodPrograms, PeriodRun, _local


def reserved_rows(model: FleetModel) -> pd.DataFrame:
    """The reserved replica rows of the model (one value for the whole horizon)."""
    return model.replicas[model.replicas["period"] < 0]


def reserved_plan(model: FleetModel, replicas: np.ndarray) -> dict[str, np.ndarray]:
    """Reserved replica counts (one per reserved replica row) with the nodes they need:
    ``{'cols', 'values'}`` for fixing them."""
    table = reserved_rows(model).assign(value=replicas)
    nodes = model.nodes[model.nodes["period"] < 0]
    gpus = (table["value"] * table["tp"]).groupby([table["gpu"], table["pricing_type"]]).sum()
    needed = gpus.reindex(nodes.set_index(["gpu", "pricing_type"]).index, fill_value=0.0)
    per_node = nodes["gpus_per_node"].to_numpy(dtype=float)
    node_values = needed.to_numpy() / per_node
    node_values = np.where(per_node > 1, np.ceil(node_values - 1e-9), node_values)
    return {"cols": np.concatenate([table["col"], nodes["col"]]).astype(np.int64),
            "values": np.concatenate([replicas, node_values]).astype(float)}


#: Flexible pricing types a replica moved off reserved capacity is rented at, first choice first.
RENTED_FIRST = ("on_demand", "spot")


def shifted_plan(model: FleetModel, values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``values`` with its reserved counts moved to ``counts`` (one per reserved replica row)
    and every period's fleet kept: a reserved replica given up is rented instead (on demand,
    else spot) in every period, one added replaces a rented replica of its configuration
    where the period has one (on-demand first). Each period keeps its replicas of every
    configuration, so its routing, N+k spares and spot share still hold, and its nodes are
    recounted (``_recount_nodes``). The result is the warm start that lets pricing ``counts``
    begin from a whole plan instead of from nothing; it may still break a cap on GPUs or
    offers, or a node pattern, and the solver then sets it aside."""
    shifted = np.array(values, dtype=float, copy=True)
    rows = reserved_rows(model)
    change = (np.asarray(counts, dtype=float) - np.round(shifted[rows["col"].to_numpy()]))
    change = pd.Series(change, index=rows["config"].to_numpy()).groupby(level=0).sum()
    change = change[change != 0]
    fixed = reserved_plan(model, np.asarray(counts, dtype=float))
    shifted[fixed["cols"]] = fixed["values"]
    if change.empty:
        return shifted
    flexible = model.replicas[(model.replicas["period"] >= 0)
                              & model.replicas["config"].isin(change.index)]
    flexible = flexible[flexible["pricing_type"].isin(RENTED_FIRST)].assign(
        rank=lambda t: t["pricing_type"].map({p: i for i, p in enumerate(RENTED_FIRST)}),
        held=lambda t: np.round(shifted[t["col"].to_numpy()]))
    if flexible.empty:  # only reserved offers: nothing to rent or return
        return shifted
    flexible = flexible.sort_values(["config", "period", "rank"], kind="stable")
    # replicas to rent (< 0: to return)
    wanted = -flexible["config"].map(change).to_numpy(dtype=float)
    first = ~flexible.duplicated(["config", "period"]).to_numpy()
    # returned replicas come off the first choices first: what the earlier ones in the
    # (config, period) group already hold is not asked of a later one
    held = flexible["held"].to_numpy()
    held_before = flexible.groupby(["config", "period"])["held"].cumsum().to_numpy() - held
    returned = np.clip(np.maximum(-wanted, 0.0) - held_before, 0.0, held)
    delta = np.where(wanted > 0, np.where(first, wanted, 0.0), -returned)
    shifted[flexible["col"].to_numpy()] += delta
    _recount_nodes(model, shifted, flexible.assign(delta=delta))
    return shifted


def _recount_nodes(model: FleetModel, values: np.ndarray, moved: pd.DataFrame) -> None:
    """Nodes of the periods' flexible pricing types after ``moved``'s replica changes
    (``delta`` [replicas]): GPUs bought one at a time are counted anew; nodes of several GPUs
    gain the nodes the added GPUs fill (rounded up: replicas whose TP degrees form a
    divisibility chain pack without waste) and keep the nodes freed."""
    keys = ["gpu", "pricing_type", "period"]
    nodes = model.nodes[model.nodes["period"] >= 0].merge(
        moved.assign(gpus=moved["delta"] * moved["tp"]).groupby(keys, as_index=False)["gpus"]
        .sum(), on=keys)
    per_node = nodes["gpus_per_node"].to_numpy(dtype=float)
    added = np.where(per_node > 1, np.ceil(np.maximum(nodes["gpus"], 0) / per_node - 1e-9),
                     nodes["gpus"])
    cols = nodes["col"].to_numpy(dtype=np.int64)
    values[cols] = np.maximum(values[cols] + added, 0.0)


def other_pools_columns(model, pools: set[str]) -> np.ndarray:
    """Routing, flexible replica and N+k spare columns of every pool but ``pools``: held at
    the best plan's values while a neighbour's pool is solved again, so each period's MILP is
    one pool's (the columns every pool shares, such as nodes, stay free)."""
    pool_of = model.replicas.drop_duplicates("config").set_index("config")["pool"]
    flexible = model.replicas[model.replicas["period"] >= 0]
    tables = [model.routes[["config", "col"]], flexible[["config", "col"]]]
    if "redundancy" in model.extras:
        tables.append(model.extras["redundancy"][["config", "col"]])
    columns = pd.concat(tables, ignore_index=True)
    others = ~columns["config"].map(pool_of).isin(pools).to_numpy()
    return np.unique(columns.loc[others, "col"].to_numpy(dtype=np.int64))


def support_closure(model: FleetModel, values: np.ndarray,
                    keep: set[str] | None = None) -> dict[int, np.ndarray]:
    """Per period, the routing and flexible replica columns of configurations the LP does not
    use in that period (nor in ``keep``): closed in quick period solves."""
    routes = model.routes.assign(share=values[model.routes["col"]])
    used = routes.loc[routes["share"] > 1e-7, ["config", "period"]].drop_duplicates()
    used = pd.MultiIndex.from_frame(used)
    keep = keep or set()
    closed = []
    for table in (model.routes, model.replicas[model.replicas["period"] >= 0]):
        key = pd.MultiIndex.from_frame(table[["config", "period"]])
        shut = ~key.isin(used) & ~table["config"].isin(keep).to_numpy()
        closed.append(table.loc[shut, ["period", "col"]])
    closed = pd.concat(closed, ignore_index=True)
    return {int(t): group["col"].to_numpy(dtype=np.int64)
            for t, group in closed.groupby("period")}


def load_duration_reserved(model: FleetModel, programs: PeriodPrograms,
                           run: PeriodRun | None) -> np.ndarray | None:
    """Reserved counts from the periods' own reserved usage: the r-th replica is reserved when
    the hours of periods using at least r of it reach the price ratio (module docstring)."""
    if run is None or not run.complete():
        return None
    rows = reserved_rows(model)
    periods = model.problem.periods
    usage = np.zeros((len(periods), len(rows)))
    for i, period in enumerate(periods["period"]):
        result, part = run.results[period], programs.parts[period]
        if result.values is None:
            return None
        where, which = _local(part, rows["col"].to_numpy())
        usage[i, which] = np.round(result.values[where])
    hours = periods["hours"].to_numpy()
    offers = model.problem.offers.set_index(["gpu", "pricing_type"])["usd_per_gpu_hour"]
    on_demand = offers.reindex(pd.MultiIndex.from_arrays(
        [rows["gpu"], pd.Series("on_demand", index=rows.index)])).to_numpy(dtype=float)
    reserved_price = offers.reindex(pd.MultiIndex.from_frame(
        rows[["gpu", "pricing_type"]])).to_numpy(dtype=float)
    ratio = np.nan_to_num(reserved_price / on_demand, nan=1.0)
    levels = np.arange(1, int(usage.max(initial=0)) + 1)
    # hours of periods using at least each level of each reserved row: [level, row]
    covered = ((usage[None, :, :] >= levels[:, None, None]) * hours[None, :, None]).sum(axis=1)
    return ((covered / hours.sum()) >= ratio[None, :]).sum(axis=0).astype(float)
