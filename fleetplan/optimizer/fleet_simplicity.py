r"""Fleet simplicity: few deployment variants per workload and one quantization per model.

Operators do not want six variants of one model in production: each is its own image, its own
capacity tests and its own pager. Two optional rules, both binaries in the MILP:

- ``max_configs_per_workload`` :math:`N`: a binary :math:`v_{wr}` per workload and route
  (a configuration, or a prefill/decode pair) is 1 when any of the workload's buckets is sent
  there in any period,

  .. math:: x_{wbrt} \le v_{wr}, \qquad \sum_r v_{wr} \le N;

- ``one_quant_per_model``: a binary :math:`q_{mz}` per model and quantization,

  .. math:: x_{wbrt} \le q_{m(r) z(r)}, \qquad \sum_z q_{mz} \le 1.

Both hold over the whole horizon: a plan does not switch variants from hour to hour. Routing
shares are at most 1, so the links need no big-M constants.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fleetplan.errors import ScenarioError
from fleetplan.optimizer.milp_tables import add_keyed_rows
from fleetplan.optimizer.plan_checks import TOLERANCE, PlanView

if TYPE_CHECKING:
    from fleetplan.optimizer.milp import FleetModel

#: Unit of the family's limiting rows.
UNIT = "configurations"


def _shares(model: FleetModel) -> pd.DataFrame:
    """One row per routing-share column: workload, route, period and the route's configs."""
    return model.routes.drop_duplicates(["col", "config"])


def _link(model: FleetModel, shares: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Binaries per distinct ``keys`` of ``shares``, each share <= its binary; returns the
    binaries' table (``keys`` and ``col``)."""
    flags = model.new_columns(shares[keys].drop_duplicates(), upper=1.0, integer=True)
    linked = shares[[*keys, "col"]].drop_duplicates().merge(
        flags.rename(columns={"col": "flag"}), on=keys)
    linked = linked.assign(link=np.arange(len(linked)))
    terms = pd.concat([linked.assign(coef=1.0), linked.assign(col=linked["flag"], coef=-1.0)],
                      ignore_index=True)
    add_keyed_rows(model, "simplicity", terms[["link", "col", "coef"]], ["link"], "<=", 0.0,
                   unit="share", subject=lambda t: pd.Series(["link"] * len(t)))
    return flags


def define_simplicity(model: FleetModel) -> None:
    """The rows of both rules (module docstring) when the problem asks for them."""
    problem = model.problem
    if model.routes.empty:
        return
    if problem.max_configs_per_workload is not None:
        flags = _link(model, _shares(model), ["workload", "route"])
        terms = flags.assign(coef=1.0)[["workload", "col", "coef"]]
        add_keyed_rows(model, "simplicity", terms, ["workload"], "<=",
                       float(problem.max_configs_per_workload), unit=UNIT,
                       subject=lambda t: t["workload"])
    if problem.one_quant_per_model:
        shares = _shares(model).merge(model_quants(problem), on="config")
        flags = _link(model, shares, ["model", "quant"])
        terms = flags.assign(coef=1.0)[["model", "col", "coef"]]
        add_keyed_rows(model, "simplicity", terms, ["model"], "<=", 1.0, unit=UNIT,
                       subject=lambda t: t["model"])


def workload_models(model: FleetModel) -> pd.Series:
    """The model each workload with a route runs (by workload)."""
    models = model_quants(model.problem).set_index("config")["model"]
    return model.routes.groupby("workload")["config"].first().map(models)


def serving_quants(served: pd.DataFrame, needed: pd.Series) -> pd.DataFrame:
    """model, quant of the quantizations that serve every (workload, bucket, period) a model
    needs served. ``served``: model, quant, workload, bucket, period (a triple a route in the
    quantization serves); ``needed``: how many triples each model needs served."""
    keys = ["model", "quant", "workload", "bucket", "period"]
    counts = served[keys].drop_duplicates().groupby(["model", "quant"], as_index=False).size()
    return counts.loc[counts["size"] == counts["model"].map(needed), ["model", "quant"]]


def models_no_quant_serves(model: FleetModel) -> list[str]:
    """Models none of whose quantizations can serve every bucket of their workloads in every
    period with demand, under one quantization per model: the problem then has no plan, which
    its LP relaxation (flags of 0.5 in two quantizations) does not show. Buckets a hosted API
    may serve count as served in any quantization."""
    problem = model.problem
    if not problem.one_quant_per_model or model.routes.empty:
        return []
    quants = model_quants(problem).set_index("config")["quant"]
    keys = ["workload", "bucket", "period"]
    demand = problem.demand[problem.demand["req_s"] > 0]
    api = problem.api_candidates[["workload", "bucket"]].drop_duplicates()
    demand = demand.merge(api.assign(api=True), on=["workload", "bucket"], how="left")
    of_model = workload_models(model)
    needed = demand[demand["api"].isna()]["workload"].map(of_model).dropna().value_counts()
    routes = model.routes.assign(quant=model.routes["config"].map(quants))
    per_route = routes.groupby([*keys, "route"])["quant"].agg(["first", "nunique"])
    single = per_route[per_route["nunique"] == 1].reset_index().rename(columns={"first": "quant"})
    served = single.assign(model=single["workload"].map(of_model))
    return sorted(set(needed.index) - set(serving_quants(served, needed)["model"]))


def no_quant_message(problem, models: list[str]) -> str:
    """One line naming the models no single quantization serves and their workloads."""
    configs = model_quants(problem).set_index("config")["model"]
    workloads = problem.candidates.assign(model=problem.candidates["config"].map(configs))
    named = [f"{m} ({', '.join(sorted(set(workloads.loc[workloads['model'] == m, 'workload'])))})"
             for m in models]
    return ("one_quant_per_model: no single quantization serves every workload of "
            f"{'; '.join(named)}; allow more (fleet.one_quant_per_model: false) or give the "
            "workloads a quantization in common (workloads[].quants)")


def model_quants(problem) -> pd.DataFrame:
    """config, model, quant of every configuration (ScenarioError when the problem's
    configurations do not say)."""
    missing = {"model", "quant"} - set(problem.configs.columns)
    if missing:
        message = ("one_quant_per_model needs the model and quantization of every "
                   f"configuration; the configurations lack {', '.join(sorted(missing))}")
        raise ScenarioError(message)
    return problem.configs[["config", "model", "quant"]]


def used_routes(view: PlanView) -> pd.DataFrame:
    """Routing rows that carry a share of a bucket in some period."""
    routing = view.routing
    routing = routing[routing["fraction"].astype(float) > TOLERANCE]
    if "route" not in routing or routing["route"].isna().all():
        routing = routing.assign(route=routing["config"])
    return routing


def check_simplicity(view: PlanView) -> list[str]:
    """No workload uses more routes than allowed; no model runs in two quantizations."""
    problem, routing = view.problem, used_routes(view)
    problems = []
    limit = problem.max_configs_per_workload
    if limit is not None:
        counts = routing.groupby("workload")["route"].nunique()
        problems += [f"simplicity: {w} uses {n} configurations, more than {limit}"
                     for w, n in counts[counts > limit].items()]
    if problem.one_quant_per_model:
        quants = routing.merge(model_quants(problem), on="config")
        counts = quants.groupby("model")["quant"].nunique()
        problems += [f"simplicity: {m} runs in {n} quantizations, more than one"
                     for m, n in counts[counts > 1].items()]
    return problems


def quant_swaps(problem, configs: pd.DataFrame) -> np.ndarray:
    """[c', c]: with one quantization per model, c' may replace c only in c's quantization
    (a configuration of another one could break the rule). The configuration count cannot
    grow by a swap: c' serves everything c does, so no guard is needed for it."""
    if not problem.one_quant_per_model:
        return np.ones((len(configs), len(configs)), dtype=bool)
    quant = configs[["config"]].merge(model_quants(problem), on="config", how="left")["quant"]
    quant = quant.to_numpy()
    return quant[:, None] == quant[None, :]


def relax_simplicity(problem, subject: str) -> tuple:
    """One step looser (``constraint_families.Relaxation`` fields): one more configuration for
    a workload, or any quantization for a model."""
    if subject in set(problem.workloads["workload"]):
        limit = problem.max_configs_per_workload
        return (problem.with_changes(max_configs_per_workload=limit + 1), "+1 configuration",
                f"allowing {subject} {limit + 1} configurations instead of {limit} "
                "would save {saving} per month")
    return (problem.with_changes(one_quant_per_model=False), "any quantization",
            f"running {subject} in more than one quantization would save {{saving}} per month")


def lift_simplicity(problem):
    """The problem without either rule (None when it has neither)."""
    if problem.max_configs_per_workload is None and not problem.one_quant_per_model:
        return None
    return problem.with_changes(max_configs_per_workload=None, one_quant_per_model=False)


def diagnose_simplicity(problem, solution: dict) -> list[str]:
    """The reason naming the rule, when lifting it serves more demand."""
    rules = [f"at most {problem.max_configs_per_workload} configurations per workload"
             if problem.max_configs_per_workload is not None else "",
             "one quantization per model" if problem.one_quant_per_model else ""]
    return [f"the fleet-simplicity rule ({' and '.join(r for r in rules if r)}) leaves too "
            "little capacity"]
