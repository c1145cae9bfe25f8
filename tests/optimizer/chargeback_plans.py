"""Small plans for chargeback and FOCUS tests: two workloads of one model pool sharing one
configuration, solved by the real MILP."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from fleetplan.optimizer import optimize_problem
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.solver import SolveOptions

EXACT = SolveOptions(time_limit_s=30, mip_gap=0.0)


def shared_problem(demand=((6.0, 2.0),), capacity=10.0, sizes=((100, 100), (300, 100)),
                   hours=(10.0,), offers=(("g", "on_demand", 1.0),), gpus_per_node=1,
                   redundancy=(0, 0), horizon_months=1.0, month_weight=1.0) -> Problem:
    """Two workloads of one model pool on one configuration: demand[t][w] req/s, request sizes
    (prompt, output) per workload, ``capacity`` req/s per replica (at 100 %)."""
    demand = np.asarray(demand, dtype=float)
    n_periods, names = len(demand), ["w1", "w2"]
    return Problem(
        workloads=pd.DataFrame({"workload": names, "pool": "p", "redundancy_k": list(redundancy)}),
        periods=pd.DataFrame({"period": range(n_periods), "month": 0, "hour": range(n_periods),
                              "hours": list(hours), "month_weight": month_weight}),
        demand=pd.DataFrame({"workload": np.tile(names, n_periods), "bucket": 0,
                             "period": np.repeat(np.arange(n_periods), 2), "req_s": demand.ravel()}),
        configs=pd.DataFrame({"config": ["c"], "pool": ["p"], "gpu": ["g"], "tp": [1]}),
        candidates=pd.DataFrame({"workload": names, "bucket": 0, "config": "c",
                                 "req_s_per_replica": capacity,
                                 "input_len": [s[0] for s in sizes], "output_len": [s[1] for s in sizes]}),
        offers=pd.DataFrame(list(offers), columns=["gpu", "pricing_type", "usd_per_gpu_hour"]).assign(
            max_gpus=math.nan),
        gpus=pd.DataFrame({"gpu": ["g"], "gpus_per_node": [gpus_per_node], "max_gpus": [math.nan]}),
        hours_per_month=sum(hours) / horizon_months, horizon_months=horizon_months)


def solved(problem: Problem, rule: str = "usage", teams=("a", "b")):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        plan = optimize_problem(problem, EXACT)
    plan.scenario = {"workloads": [{"name": "w1", "team": teams[0], "cost_center": "cc-1"},
                                   {"name": "w2", "team": teams[1], "cost_center": "cc-2"}],
                     "chargeback": {"spare": rule}}
    return plan
