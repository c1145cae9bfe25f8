"""The fleet optimizer: the cheapest mix of GPU replicas that serves every workload within its
SLOs, as a MILP solved with HiGHS (CBC as the fallback).

Entry points (imported from their modules to keep ``import fleetplan`` light):

- ``fleetplan.optimizer.scenario_io.load_scenario(path)`` reads and validates a scenario file;
- ``fleetplan.optimizer.planner.plan_scenario(scenario)`` returns a ``FleetPlan``;
- ``fleetplan.optimizer.optimize.optimize_problem(problem)`` solves a ``Problem`` built from
  plain tables (``fleetplan.optimizer.problem``);
- ``fleetplan.optimizer.plan.FleetPlan`` holds the result (``to_json``, ``to_csv``,
  ``summary_text``).
"""
