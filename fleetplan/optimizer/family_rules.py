"""What the core constraint families relax, lift, diagnose and guard: the helpers the family
table (``constraint_families.FAMILIES``) points to, one section per family.

Each ``_relax_*`` returns the problem one step looser (priced by ``marginal_values.py``), each
``_lift_*`` the problem without the family's limits and each ``_diagnose_*`` the one-line reason
a lifted limit names (``infeasibility.py``); each ``*_swaps`` says which configurations may stand
in for which without the family noticing (``dominance.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pandas as pd

from fleetplan.optimizer import config_fixed_cost as fixed
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.plan_summary import usd


class Relaxation(NamedTuple):
    """A problem with one limit relaxed by one step, the step as text, and a description
    template with a ``{saving}`` field."""

    problem: Problem
    change: str
    template: str


def node_size(problem: Problem, gpu: str) -> int:
    return int(problem.gpus.set_index("gpu").loc[gpu, "gpus_per_node"])


def node_step(problem: Problem, subjects: pd.Series) -> np.ndarray:
    """One node of the subject's GPU type (subjects ``gpu`` or ``gpu/pricing``)."""
    node = problem.gpus.set_index("gpu")["gpus_per_node"]
    return subjects.str.split("/").str[0].map(node).fillna(1.0).to_numpy(dtype=float)


def same_or_smaller(configs: pd.DataFrame) -> np.ndarray:
    """[c', c]: c' is on c's GPU type with no more GPUs per replica."""
    gpu, tp = configs["gpu"].to_numpy(), configs["tp"].to_numpy()
    return (gpu[:, None] == gpu[None, :]) & (tp[:, None] <= tp[None, :])


def onto_gpus(configs: pd.DataFrame, free: set[str]) -> np.ndarray:
    """[c', c]: c' is on c's GPU type with no more GPUs, or on another GPU type in ``free``."""
    gpu = configs["gpu"].to_numpy()
    other = (gpu[:, None] != gpu[None, :]) & np.isin(gpu, list(free))[:, None]
    return same_or_smaller(configs) | other


# -- availability: GPUs of one type in use at any time ------------------------------------

def relax_availability(problem: Problem, gpu: str) -> Relaxation:
    gpus = problem.gpus.copy()
    step = node_size(problem, gpu)
    gpus.loc[gpus["gpu"] == gpu, "max_gpus"] += step
    amount = f"{step} more {gpu}" if step > 1 else f"one more {gpu}"
    return Relaxation(problem.with_changes(gpus=gpus), f"+{step} GPUs",
                      f"{amount} available would save {{saving}} per month")


def lift_availability(problem: Problem) -> Problem | None:
    """Every availability cap lifted, per GPU type and per offer."""
    if not (problem.gpus["max_gpus"].notna().any() or problem.offers["max_gpus"].notna().any()):
        return None
    return problem.with_changes(gpus=problem.gpus.assign(max_gpus=np.nan),
                                offers=problem.offers.assign(max_gpus=np.nan))


def diagnose_availability(problem: Problem, solution: dict) -> list[str]:
    nodes = solution["nodes"]
    reasons = []
    peak = nodes.groupby(["gpu", "period"])["gpus"].sum().groupby("gpu").max()
    caps = problem.gpus.dropna(subset=["max_gpus"])
    for gpu, cap in zip(caps["gpu"], caps["max_gpus"]):
        if peak.get(gpu, 0.0) > cap + 1e-6:
            reasons.append(f"needs {peak[gpu]:.0f} {gpu} but availability is {cap:.0f}")
    offer_peak = nodes.groupby(["gpu", "pricing_type", "period"])["gpus"].sum().groupby(
        ["gpu", "pricing_type"]).max()
    offers = problem.offers.dropna(subset=["max_gpus"])
    for gpu, pricing, cap in zip(offers["gpu"], offers["pricing_type"], offers["max_gpus"]):
        if offer_peak.get((gpu, pricing), 0.0) > cap + 1e-6:
            reasons.append(f"needs {offer_peak[(gpu, pricing)]:.0f} {gpu} {pricing} "
                           f"but availability is {cap:.0f}")
    return reasons


def uncapped_swaps(problem: Problem, configs: pd.DataFrame) -> np.ndarray:
    return onto_gpus(configs, set(problem.gpus.loc[problem.gpus["max_gpus"].isna(), "gpu"]))


# -- offer caps: GPUs of one type at one pricing type --------------------------------------

def relax_offer_cap(problem: Problem, subject: str) -> Relaxation:
    gpu, pricing = subject.split("/")
    offers = problem.offers.copy()
    row = (offers["gpu"] == gpu) & (offers["pricing_type"] == pricing)
    step = node_size(problem, gpu)
    offers.loc[row, "max_gpus"] += step
    return Relaxation(problem.with_changes(offers=offers), f"+{step} GPUs",
                      f"{step} more {gpu} at {pricing} would save {{saving}} per month")


def offer_swaps(problem: Problem, configs: pd.DataFrame) -> np.ndarray:
    capped = set(problem.offers.loc[problem.offers["max_gpus"].notna(), "gpu"])
    return onto_gpus(configs, set(configs["gpu"]) - capped)


# -- node cover: GPUs bought in whole nodes -------------------------------------------------

def node_swaps(problem: Problem, configs: pd.DataFrame) -> np.ndarray:
    return onto_gpus(configs, set(problem.gpus.loc[problem.gpus["gpus_per_node"] == 1, "gpu"]))


# -- spot share: spot GPUs as a share of all replicas' GPUs ---------------------------------

def relax_spot_share(problem: Problem, subject: str) -> Relaxation:
    share = min(1.0, problem.spot_max_share + 0.1)
    return Relaxation(problem.with_changes(spot_max_share=share), "+10 points",
                      f"allowing {share:.0%} spot instead of {problem.spot_max_share:.0%} would "
                      "save {saving} per month")


def lift_spot_share(problem: Problem) -> Problem | None:
    """The problem without its spot share cap (None without a cap below 100%, which has no
    rows to lift)."""
    share = problem.spot_max_share
    return None if share is None or share >= 1 else problem.with_changes(spot_max_share=None)


def diagnose_spot_share(problem: Problem, solution: dict) -> list[str]:
    """The spot share the plan without the cap needed, when it is above the cap (a plan
    within the cap proves nothing about it)."""
    replicas = solution["replicas"]  # the cap counts the GPUs of replicas
    spot = replicas[replicas["pricing_type"] == "spot"].groupby("period")["gpus"].sum()
    share = (spot / replicas.groupby("period")["gpus"].sum()).max()
    if not share > problem.spot_max_share + 1e-9:
        return []
    return [f"needs {share:.0%} spot GPUs but the spot share cap is {problem.spot_max_share:.0%}"]


def spot_swaps(problem: Problem, configs: pd.DataFrame) -> np.ndarray:
    """With a cap, a replica of another size would change the spot share."""
    tp = configs["tp"].to_numpy()
    capped = problem.spot_max_share is not None and problem.spot_max_share < 1
    return tp[:, None] == tp[None, :] if capped else np.ones((len(tp), len(tp)), dtype=bool)


# -- redundancy: N+k spare replicas ----------------------------------------------------------

def used_spares(model, table: pd.DataFrame) -> np.ndarray:
    """Spare rows of configurations the workload uses (unused ones hold nothing back)."""
    rows = model.extras["redundancy"]
    used = pd.Series(model.value(rows) > 0.5, index=rows["row"].to_numpy())
    return used.reindex(table["row"].to_numpy(), fill_value=False).to_numpy()


def relax_redundancy(problem: Problem, workload: str) -> Relaxation:
    workloads = problem.workloads.copy()
    row = workloads["workload"] == workload
    k = int(workloads.loc[row, "redundancy_k"].iloc[0])
    workloads.loc[row, "redundancy_k"] = k - 1
    return Relaxation(problem.with_changes(workloads=workloads), "-1 replica",
                      f"N+{k - 1} instead of N+{k} for {workload} would save {{saving}} per month")


# -- budget: the fleet's monthly cost ----------------------------------------------------------

def relax_budget(problem: Problem, subject: str) -> Relaxation:
    budget = problem.budget_usd_per_month * 1.1
    return Relaxation(problem.with_changes(budget_usd_per_month=budget), "+10 %",
                      f"a budget of {usd(budget)} per month would save {{saving}} per month")


def lift_budget(problem: Problem) -> Problem | None:
    if problem.budget_usd_per_month is None:
        return None
    return problem.with_changes(budget_usd_per_month=None)


def diagnose_budget(problem: Problem, solution: dict) -> list[str]:
    periods = problem.periods[["period", "month", "month_weight"]]
    charges = [solution["nodes"], solution.get("api_costs", pd.DataFrame(columns=["period", "usd"]))]
    monthly = pd.concat([c[["period", "usd"]] for c in charges], ignore_index=True).merge(periods, on="period")
    per_month = (monthly["usd"] / monthly["month_weight"]).groupby(monthly["month"]).sum()
    per_month = per_month.add(fixed.fixed_usd_by_month(problem, solution.get("fixed_costs", pd.DataFrame())),
                              fill_value=0.0)  # each configuration-month's overhead
    if not per_month.max() > problem.budget_usd_per_month * (1 + 1e-9):
        return []  # within the budget: it did not bind
    needed, budget = usd(per_month.max()), usd(problem.budget_usd_per_month)
    return [f"needs {needed} per month but the budget is {budget}"]


def step(value: float) -> Callable[[Problem, pd.Series], np.ndarray]:
    return lambda problem, subjects: np.full(len(subjects), value)
