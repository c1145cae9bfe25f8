"""The constraint families of the fleet MILP: one entry each, naming everything done with it.

An entry names the Problem fields the family reads and the scenario fields they come from, the
``define_*`` builder that adds its rows (``milp_constraints.py``), and what the rest of the
optimizer does with it:

- ``relax``: one step looser, priced by re-solving (``marginal_values.py``), with the step below
  which a row counts as binding (``binding_step``) and, if some rows of the family do not limit
  the plan as it stands, which ones do (``binding_filter``);
- ``lift`` and ``diagnose``: the problem without the family's limits, and the one-line reason
  naming the limit when lifting it serves more demand (``infeasibility.py``);
- ``links_periods`` and ``in_period_subproblems``: whether the family ties periods together,
  and whether it is kept when one period is solved alone (``decomposition.py``);
- ``swap_guard``: which configurations may replace which without the family noticing
  (``dominance.py``), and ``split_guard`` the same for replicas split into smaller ones on the
  same GPUs (a family that only counts GPUs never notices a split, and needs none);
- ``settings``: the Problem's scalar fields from a scenario (``scenario_planning.py``);
- ``check``: the family's check on a finished plan (``plan_checks.py``; ``verify_plan``).

Adding a family: write its builder in ``milp_constraints.py`` and its check in
``plan_checks.py`` (or both in a module of its own, as ``power_envelope.py`` and
``api_supply.py``), its relax/lift/diagnose/swap helpers in ``family_rules.py`` (or its own
module), then add one entry to :data:`FAMILIES`. Entries are built in table order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import LINKING_PRICING
from fleetplan.optimizer import api_supply as api
from fleetplan.optimizer import change_limits
from fleetplan.optimizer import config_fixed_cost as fixed
from fleetplan.optimizer import current_fleet as current
from fleetplan.optimizer import family_rules as rules
from fleetplan.optimizer import fleet_changes as changes
from fleetplan.optimizer import fleet_simplicity as simplicity
from fleetplan.optimizer import lead_times as lead
from fleetplan.optimizer import milp_constraints as build
from fleetplan.optimizer import plan_checks as checks
from fleetplan.optimizer import power_envelope as power
from fleetplan.optimizer import stochastic_model as stochastic
from fleetplan.optimizer.family_rules import Relaxation
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.fleet_problem import Problem

if TYPE_CHECKING:
    from fleetplan.optimizer.scenario import Scenario


@dataclass(frozen=True)
class ConstraintFamily:
    """One constraint family (see the module docstring for what each field is used for)."""

    name: str
    unit: str
    problem_fields: tuple[str, ...]
    scenario_fields: tuple[str, ...]
    build: Callable | None
    check: Callable[[checks.PlanView], list[str]]
    settings: Callable[[Scenario], dict] | None = None
    links_periods: Callable[[Problem], bool] | None = None
    in_period_subproblems: bool = True
    relax: Callable[[Problem, str], Relaxation] | None = None
    binding_step: Callable[[Problem, pd.Series], np.ndarray] | None = None
    lift: Callable[[Problem], Problem | None] | None = None
    diagnose: Callable[[Problem, dict], list[str]] | None = None
    swap_guard: Callable[[Problem, pd.DataFrame], np.ndarray] | None = None
    split_guard: Callable[[Problem, pd.DataFrame], np.ndarray] | None = None
    binding_filter: Callable[[object, pd.DataFrame], np.ndarray] | None = None


#: Every constraint family, in the order the MILP is built.
FAMILIES: tuple[ConstraintFamily, ...] = (
    ConstraintFamily(
        "demand", "share", ("demand.req_s",),
        ("workloads[].requests_per_s", "workloads[].hourly_profile"),
        build=build.define_demand, check=checks.check_demand),
    ConstraintFamily(
        "capacity", "replicas", ("candidates.req_s_per_replica", "target_utilization"),
        ("fleet.target_utilization", "capacity_profiles"),
        build=build.define_capacity, check=checks.check_capacity),
    ConstraintFamily(
        "nodes", "GPUs", ("gpus.gpus_per_node",), ("fleet.whole_nodes",
                                                    "fleet.gpus[].gpus_per_node"),
        build=build.define_node_cover, check=checks.check_node_cover, swap_guard=rules.node_swaps),
    ConstraintFamily(
        "availability", "GPUs", ("gpus.max_gpus",), ("fleet.gpus[].max_gpus",),
        build=build.define_availability, check=checks.check_availability,
        relax=rules.relax_availability, binding_step=rules.node_step, lift=rules.lift_availability,
        diagnose=rules.diagnose_availability, swap_guard=rules.uncapped_swaps),
    ConstraintFamily(  # lifted and diagnosed together with availability
        "offer_cap", "GPUs", ("offers.max_gpus",), ("fleet.gpus[].max_gpus_by_pricing",),
        build=build.define_offer_caps, check=checks.check_offer_caps,
        relax=rules.relax_offer_cap, binding_step=rules.node_step, swap_guard=rules.offer_swaps),
    ConstraintFamily(
        "spot_share", "GPUs", ("spot_max_share",), ("fleet.spot_max_share",),
        build=build.define_spot_share, check=checks.check_spot_share,
        settings=lambda s: {"spot_max_share": s.fleet.spot_max_share},
        relax=rules.relax_spot_share, binding_step=rules.step(1.0), lift=rules.lift_spot_share,
        diagnose=rules.diagnose_spot_share, swap_guard=rules.spot_swaps),
    ConstraintFamily(
        "redundancy", "replicas", ("workloads.redundancy_k",), ("workloads[].redundancy_k",),
        build=build.define_redundancy, check=checks.check_redundancy,
        relax=rules.relax_redundancy, binding_step=rules.step(1.0), binding_filter=rules.used_spares),
    ConstraintFamily(  # a valid cut: implied by demand and capacity, so nothing to check
        "pool_cover", "replicas", ("candidates.req_s_per_replica",), (),
        build=build.define_pool_cover, check=lambda view: []),
    ConstraintFamily(  # a valid cut from whole replicas (cost_cover.py): nothing to check
        "cost_cover", "USD/h", ("candidates.req_s_per_replica", "offers.usd_per_gpu_hour"), (),
        build=None, check=lambda view: []),
    ConstraintFamily(
        "simplicity", simplicity.UNIT, ("max_configs_per_workload", "one_quant_per_model"),
        ("fleet.max_configs_per_workload", "fleet.one_quant_per_model"),
        build=simplicity.define_simplicity, check=simplicity.check_simplicity,
        settings=lambda s: {"max_configs_per_workload": s.fleet.max_configs_per_workload,
                            "one_quant_per_model": s.fleet.one_quant_per_model},
        links_periods=lambda p: p.max_configs_per_workload is not None or p.one_quant_per_model,
        in_period_subproblems=False,
        relax=lambda p, s: Relaxation(*simplicity.relax_simplicity(p, s)),
        binding_step=rules.step(1.0), lift=simplicity.lift_simplicity,
        diagnose=simplicity.diagnose_simplicity, swap_guard=simplicity.quant_swaps,
        split_guard=simplicity.quant_swaps),
    ConstraintFamily(
        "budget", "USD/month", ("budget_usd_per_month",), ("fleet.budget_usd_per_month",),
        build=build.define_budget, check=checks.check_budget,
        settings=lambda s: {"budget_usd_per_month": s.fleet.budget_usd_per_month},
        links_periods=lambda p: p.budget_usd_per_month is not None, in_period_subproblems=False,
        relax=rules.relax_budget, binding_step=rules.step(0.0), lift=rules.lift_budget,
        diagnose=rules.diagnose_budget),
    ConstraintFamily(  # kept by the variables: one reserved count for the whole horizon
        "reserved_baseline", "replicas", ("offers.pricing_type", "horizon_months"),
        ("fleet.pricing", "fleet.reserved_beyond_horizon"),
        build=None, check=checks.check_reserved_baseline,
        links_periods=lambda p: bool(p.offers["pricing_type"].isin(LINKING_PRICING).any())),
    ConstraintFamily(  # an objective term (the risk of the cost), so it limits no plan
        "cvar", "USD", ("cvar_alpha", "cvar_weight"), ("fleet.stochastic",),
        build=stochastic.define_cvar, check=stochastic.check_cvar,
        links_periods=lambda p: p.cvar_weight > 0, in_period_subproblems=False),
    ConstraintFamily(
        "power", "kW", ("sites.kw", "sites.pue", "site_gpus.kw_per_gpu"), ("fleet.sites",),
        build=power.define_power, check=power.check_power,
        relax=lambda p, s: Relaxation(*power.relax_power(p, s)), binding_step=power.power_step,
        lift=power.lift_power, diagnose=power.diagnose_power, swap_guard=power.power_swaps),
    ConstraintFamily(
        "api_rate", "per_min", ("apis.max_requests_per_min", "apis.max_tokens_per_min"),
        ("fleet.apis[].max_requests_per_min", "fleet.apis[].max_tokens_per_min"),
        build=api.define_api_rate, check=api.check_api_rate,
        relax=lambda p, s: Relaxation(*api.relax_api_rate(p, s)), binding_step=rules.step(0.0),
        lift=api.lift_api_rate, diagnose=api.diagnose_api_rate),
    ConstraintFamily(
        "existing", "GPUs", ("existing",), ("fleet.current",),
        build=current.define_existing_caps, check=current.check_existing,
        relax=lambda p, s: Relaxation(*current.relax_existing(p, s)), binding_step=rules.node_step,
        lift=current.lift_existing, diagnose=current.diagnose_existing,
        swap_guard=current.existing_swaps),
    ConstraintFamily(
        "lead_time", "GPUs", ("lead_times",),
        ("fleet.gpus[].lead_time_months", "fleet.gpus[].max_new_gpus_per_month"),
        build=lead.define_lead_times, check=lead.check_lead_times,
        links_periods=lambda p: not p.lead_times.empty, in_period_subproblems=False,
        relax=lambda p, s: Relaxation(*lead.relax_lead_time(p, s)),
        binding_step=lambda p, s: rules.node_step(p, s.str.removesuffix(lead.PER_MONTH)),
        lift=lead.lift_lead_times, diagnose=lead.diagnose_lead_times,
        swap_guard=lead.lead_swaps, binding_filter=lead.wanted_lead_rows),
    ConstraintFamily(
        "churn", "GPUs", ("max_changes_per_month",), ("fleet.max_changes_per_month",),
        build=change_limits.define_churn,
        check=lambda view: changes.churn_breaks(view.problem, view.changes),
        settings=lambda s: {"max_changes_per_month": s.fleet.max_changes_per_month},
        links_periods=lambda p: p.max_changes_per_month is not None,
        in_period_subproblems=False, relax=lambda p, s: Relaxation(*changes.relax_churn(p, s)),
        binding_step=changes.largest_node_step,
        lift=changes.lift_churn, diagnose=changes.diagnose_churn,
        swap_guard=changes.freeze_swaps, split_guard=changes.freeze_swaps),
    ConstraintFamily(
        "min_committed", "GPUs", ("min_committed_gpus",), ("fleet.min_committed_gpus",),
        build=change_limits.define_min_committed,
        check=lambda view: changes.min_committed_breaks(view.problem, view.changes),
        settings=lambda s: {"min_committed_gpus": s.fleet.min_committed_gpus},
        links_periods=lambda p: p.min_committed_gpus is not None, in_period_subproblems=False,
        relax=lambda p, s: Relaxation(*changes.relax_min_committed(p, s)),
        binding_step=changes.largest_node_step,
        lift=changes.lift_min_committed, diagnose=changes.diagnose_min_committed),
    ConstraintFamily(  # an objective term: it never makes a problem infeasible, no diagnosis
        "config_fixed", fixed.UNIT, ("config_fixed_usd_per_month",),
        ("fleet.config_fixed_usd_per_month",),
        build=fixed.define_config_fixed_cost, check=fixed.check_config_fixed_cost,
        settings=lambda s: {"config_fixed_usd_per_month": s.fleet.config_fixed_usd_per_month},
        links_periods=fixed.wants_fixed_cost, in_period_subproblems=False,
        relax=lambda p, s: Relaxation(*fixed.relax_config_fixed_cost(p, s)),
        binding_step=fixed.binding_step, binding_filter=fixed.deployed_rows,
        split_guard=fixed.no_splits),
)

#: Each family by name.
FAMILY: dict[str, ConstraintFamily] = {family.name: family for family in FAMILIES}

#: Problem fields some family reads (top-level names).
FAMILY_PROBLEM_FIELDS: tuple[str, ...] = tuple(dict.fromkeys(
    name.split(".")[0] for family in FAMILIES for name in family.problem_fields))


def priced_families() -> tuple[str, ...]:
    """Names of the families whose binding rows are priced by a re-solve, in table order."""
    return tuple(f.name for f in FAMILIES if f.relax is not None)


def scenario_settings(scenario: Scenario) -> dict:
    """The Problem's scalar fields that families take from ``scenario``."""
    settings = {}
    for family in FAMILIES:
        if family.settings is not None:
            settings.update(family.settings(scenario))
    return settings


def verify_plan(plan: FleetPlan, problem: Problem) -> list[str]:
    """Every family's check of ``plan`` against ``problem``; empty when the plan is valid."""
    view = checks.PlanView.of(plan, problem)
    return [message for family in FAMILIES for message in family.check(view)]
