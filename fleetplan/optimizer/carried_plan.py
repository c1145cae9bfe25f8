"""The base plan carried onto the model of a looser SLO: a first plan for its re-solve.

Pricing a looser TPOT SLO (``marginal_values.slo_relaxation``) re-solves the problem with the
workload's candidates replaced by those at the looser SLO: the configurations keep their
hardware (``model/gpu/quant/tpN``) but may run at another SLO level of their pool
(``slo_levels.py``), with a capacity per replica no lower for any workload they serve, and
dominated ones are dropped again. Every plan of the base problem is then a plan of the looser
one once each configuration it uses is renamed to a looser counterpart: the same routing
shares, replicas and nodes, with each replica carrying no more load than before. Given as the
re-solve's first plan, it lets branch and bound prune from the start.

The counterpart of a configuration the plan routes load to is the looser model's configuration
of the same hardware and pool that serves every workload and bucket it carries at no less
capacity (the largest smallest capacity ratio first, then by name); one that only holds
replicas takes the first of the same hardware by name. Routes, replicas, nodes, the N+k
binaries (``redundancy``) and node patterns are carried; other families' columns start at
zero. The carried plan is offered only when it keeps every row and bound of the looser model
(to 1e-6), so a family it does not carry, a pair of disaggregated stages or a configuration
with no counterpart costs the re-solve nothing but this check.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from fleetplan.optimizer.milp import FleetModel

logger = logging.getLogger(__name__)

#: Largest row or bound violation a carried plan may have (the solver's own tolerance).
TOLERANCE = 1e-6
#: Smallest value of a column counted as used.
USED = 1e-9

_ROUTE_KEYS = ["workload", "bucket", "period"]


def hardware_ids(configs: pd.Series) -> pd.Series:
    """Configuration ids without their SLO level (``...@tpot40ms`` and ``...@tpot40ms#decode``
    lose ``@tpot40ms``)."""
    return configs.astype(str).str.replace(r"@[^#]*", "", regex=True)


def counterparts(base: FleetModel, looser: FleetModel, values: np.ndarray) -> pd.Series | None:
    """Each configuration ``values`` uses (routes or replicas) mapped to its counterpart in
    ``looser`` (module docstring); None when one has none."""
    routes = base.routes[values[base.routes["col"].to_numpy()] > USED]
    held = base.replicas[values[base.replicas["col"].to_numpy()] > USED]
    used = pd.Index(sorted(set(routes["config"]) | set(held["config"])))
    if used.empty:
        return pd.Series(dtype=object)
    offered = looser.routes[["workload", "bucket", "config", "req_s_per_replica"]]
    offered = offered.drop_duplicates(["workload", "bucket", "config"]).assign(
        hardware=lambda t: hardware_ids(t["config"]))
    carried = routes[["workload", "bucket", "config", "req_s_per_replica"]].drop_duplicates(
        ["workload", "bucket", "config"]).assign(hardware=lambda t: hardware_ids(t["config"]))
    pairs = carried.merge(offered, on=["workload", "bucket", "hardware"],
                          suffixes=("", "_looser"))
    pairs["ratio"] = pairs["req_s_per_replica_looser"] / pairs["req_s_per_replica"]
    pairs = pairs[pairs["ratio"] >= 1.0 - 1e-9]
    needed = carried.groupby("config").size()
    served = pairs.groupby(["config", "config_looser"]).agg(
        n=("ratio", "size"), ratio=("ratio", "min")).reset_index()
    served = served[served["n"].to_numpy() == needed.reindex(served["config"]).to_numpy()]
    served = served.sort_values(["config", "ratio", "config_looser"],
                                ascending=[True, False, True], kind="stable")
    mapping = served.drop_duplicates("config").set_index("config")["config_looser"]
    idle = used.difference(pd.Index(carried["config"]))  # replicas only, no load
    if len(idle):
        names = pd.DataFrame({"config_looser": sorted(set(looser.replicas["config"]))})
        names["hardware"] = hardware_ids(names["config_looser"])
        firsts = names.drop_duplicates("hardware").set_index("hardware")["config_looser"]
        mapping = pd.concat([mapping, pd.Series(
            firsts.reindex(hardware_ids(pd.Series(idle))).to_numpy(), index=idle)])
    mapping = mapping.reindex(used)
    return None if mapping.isna().any() else mapping


def carried_start(base: FleetModel, looser: FleetModel) -> np.ndarray | None:
    """The base model's plan as a plan of ``looser`` (all its columns), or None when it does
    not carry over (module docstring)."""
    values = base.values
    if values is None or _staged(base) or _staged(looser):
        return None
    mapping = counterparts(base, looser, values)
    if mapping is None:
        logger.debug("carried plan: a configuration of the plan has no looser counterpart")
        return None
    start = np.zeros(looser.program.n_cols)
    tables = [(base.routes, looser.routes.drop_duplicates([*_ROUTE_KEYS, "config"]),
               [*_ROUTE_KEYS, "config"], "sum"),
              (base.replicas, looser.replicas, ["config", "pricing_type", "period"], "sum"),
              (base.nodes, looser.nodes, ["gpu", "pricing_type", "period"], "sum")]
    for family, keys, how in (("redundancy", ["workload", "config", "period"], "max"),
                              ("patterns", ["gpu", "pricing_type", "period", "pattern"], "sum")):
        if family in base.extras:
            tables.append((base.extras[family].drop_duplicates("col"),
                           looser.extras.get(family, pd.DataFrame(columns=[*keys, "col"]))
                           .drop_duplicates("col"), keys, how))
    for source, target, keys, how in tables:
        if not _carry(source, target, keys, how, values, mapping, start):
            return None
    if looser.program.violation(start) > TOLERANCE:
        logger.debug("carried plan: breaks a row of the looser model by %.3g",
                     looser.program.violation(start))
        return None
    return start


def _staged(model: FleetModel) -> bool:
    return "stage" in model.replicas and bool((model.replicas["stage"] != "serve").any())


def _carry(source: pd.DataFrame, target: pd.DataFrame, keys: list[str], how: str,
           values: np.ndarray, mapping: pd.Series, start: np.ndarray) -> bool:
    """Put ``source``'s used values onto ``target``'s columns of the same keys (configurations
    renamed by ``mapping``, values combined by ``how``); False when one has no column there."""
    used = source.assign(value=values[source["col"].to_numpy(dtype=np.int64)])
    used = used[used["value"].abs() > USED]
    if used.empty:
        return True
    if "config" in keys:
        used = used.assign(config=used["config"].map(mapping))
    combined = used.groupby(keys, sort=False)["value"].agg(how).reset_index()
    placed = combined.merge(target[[*keys, "col"]], on=keys, how="inner")
    if len(placed) < len(combined):
        return False
    start[placed["col"].to_numpy(dtype=np.int64)] = placed["value"].to_numpy(float)
    return True
