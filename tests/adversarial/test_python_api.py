"""The Python entry points raise FleetplanError subclasses for bad input, never a pandas, PuLP,
JSON or OS exception."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from fleetplan.catalogs import load_catalogs
from fleetplan.errors import FleetplanError
from fleetplan.exports import read_plan_json
from fleetplan.optimizer import load_scenario, optimize_problem, validate_scenario
from fleetplan.optimizer.fleet_problem import table_problem
from fleetplan.sweeps import estimate_cases, load_measurements, sweep
from tests.adversarial.conftest import tiny_scenario


def test_load_scenario_of_binary(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(FleetplanError, match="not UTF-8|binary"):
        load_scenario(path)


def test_validate_scenario_of_non_finite_demand():
    data = tiny_scenario()
    data["workloads"][0]["requests_per_s"] = math.inf
    with pytest.raises(FleetplanError, match="requests_per_s"):
        validate_scenario(data)


def test_load_catalogs_of_latin1(tmp_path):
    path = tmp_path / "prices.csv"
    path.write_bytes("gpu,provider\ncaf\xe9,x\n".encode("latin-1"))
    with pytest.raises(FleetplanError, match="UTF-8"):
        load_catalogs(overrides=[path])


def test_estimate_cases_of_a_non_table():
    with pytest.raises(FleetplanError, match="cases must be"):
        estimate_cases([{"gpu": "h100-sxm"}])


def test_estimate_cases_of_infinite_lengths():
    cases = pd.DataFrame({"gpu": ["h100-sxm"], "model": ["llama-3.1-8b"], "quant": ["bf16"], "tp": [1],
                          "input_len": [math.inf], "output_len": [10]})
    with pytest.raises(FleetplanError, match="input_len"):
        estimate_cases(cases)


def test_sweep_of_an_empty_axis():
    with pytest.raises(FleetplanError, match="batches"):
        sweep(["h100-sxm"], ["llama-3.1-8b"], batches=[])


def test_read_plan_json_of_garbage(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text("[1, 2")
    with pytest.raises(FleetplanError, match="JSON"):
        read_plan_json(path)


def test_load_measurements_of_an_empty_file(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("")
    with pytest.raises(FleetplanError, match="empty|no columns"):
        load_measurements(path)


@pytest.mark.parametrize(("capacity", "demand", "price", "pattern"), [
    ([[math.inf]], [1.0], [1.0], "capacity"),
    ([[1e-300]], [1.0], [1.0], "capacity"),
    ([[1.0]], [math.inf], [1.0], "demand"),
    ([[1.0]], [1e30], [1.0], "demand"),
    ([[1.0]], [1.0], [math.nan], "price|usd_per_gpu_hour"),
])
def test_optimize_problem_checks_its_tables(capacity, demand, price, pattern):
    import numpy as np

    problem = table_problem(np.array(capacity), np.array(price), np.array(demand))
    with pytest.raises(FleetplanError, match=pattern):
        optimize_problem(problem)
