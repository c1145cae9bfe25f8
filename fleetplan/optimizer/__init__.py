"""The fleet optimizer: the cheapest mix of GPU replicas that serves every workload within its
SLOs, as a MILP solved with HiGHS (CBC as the fallback).

Entry points:

- ``load_scenario(path)`` reads and validates a scenario file (``validate_scenario`` a mapping,
  ``example_scenario()`` the built-in one);
- ``plan_scenario(scenario)`` returns a ``FleetPlan``: tidy tables of the fleet, routing, costs,
  binding limits and unmet demand;
- ``optimize_problem(problem)`` solves a ``Problem`` built from plain tables (tests, benchmarks,
  measured capacities) with ``SolveOptions``;
- ``with_demand_factors(problem, scenarios)`` gives a ``Problem`` demand scenarios, and
  ``add_commitments(plan, problem, options)`` prices its commitment options (``plan_scenario``
  does both for a scenario whose workloads have demand scenarios).
"""

from fleetplan.optimizer.commitment_risk import add_commitments
from fleetplan.optimizer.example import example_scenario
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.optimization import optimize_problem
from fleetplan.optimizer.scenario import Scenario
from fleetplan.optimizer.scenario_files import load_scenario, validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario
from fleetplan.optimizer.solver import SolveOptions
from fleetplan.optimizer.stochastic_problem import with_demand_factors

__all__ = ["FleetPlan", "Problem", "Scenario", "SolveOptions", "add_commitments",
           "example_scenario", "load_scenario", "optimize_problem", "plan_scenario",
           "validate_scenario", "with_demand_factors"]
