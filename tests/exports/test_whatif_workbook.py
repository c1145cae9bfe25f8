"""The what-if workbook's By tables: the base case stands on each axis where the base scenario
has a value of its own, numeric axes read in ascending order, and Sources lists the efficiency
rows of the engine the cases ran."""

from __future__ import annotations

import math

import numpy as np
import openpyxl
import pandas as pd
import pytest

from fleetplan.cli import main
from fleetplan.exports.whatif_workbook import inputs_first, pivots, write_grid_xlsx
from fleetplan.optimizer.example import example_data
from fleetplan.optimizer.scenario_files import validate_scenario
from fleetplan.optimizer.whatif_grid import base_axis_values
from tests.exports.samples import expanded_keys

AXES = ["demand_multiplier", "tpot_slo_ms", "pricing"]


def _results() -> pd.DataFrame:
    """A grid of named cases changing one input at a time, listed out of order, one failed."""
    nan = np.nan
    return pd.DataFrame({
        "name": ["high", "base", "low", "tight", "spot", "broken", "tight-and-high"],
        "demand_multiplier": [1.5, nan, 0.7, nan, nan, 2.0, 1.5],
        "tpot_slo_ms": [nan, nan, nan, 30.0, nan, nan, 30.0],
        "pricing": [nan, nan, nan, nan, "spot", nan, nan],
        "status": ["optimal"] * 5 + ["infeasible", "optimal"],
        "usd_per_month": [150.0, 100.0, 70.0, 130.0, 60.0, nan, 190.0],
        "usd_per_m_tokens": [1.0, 1.1, 1.2, 1.3, 0.6, nan, 1.4],
        "gpus_peak": [6.0, 4.0, 3.0, 5.0, 4.0, nan, 8.0],
    })


def test_the_base_case_is_counted_at_the_base_scenarios_own_value():
    tables = pivots(_results(), AXES, {"demand_multiplier": 1.0})
    demand = tables["demand_multiplier"]
    assert list(demand["demand_multiplier"]) == [0.7, 1.0, 1.5]  # ascending, the base between
    assert list(demand["includes_base"]) == [False, True, False]
    assert demand.set_index("demand_multiplier").loc[1.0, "usd_per_month_mean"] == 100.0
    # 1.5 holds "high" and "tight-and-high"; the failed case at 2.0 is left out
    assert demand.set_index("demand_multiplier").loc[1.5, "scenarios"] == 2
    # a case that changes another input is not at the base's TPOT, which it has none of here
    assert list(tables["tpot_slo_ms"]["tpot_slo_ms"]) == [30.0]
    assert not tables["tpot_slo_ms"]["includes_base"].any()
    assert list(tables["pricing"]["pricing"]) == ["spot"]


def test_without_base_values_the_base_case_stands_on_no_axis():
    demand = pivots(_results(), AXES)["demand_multiplier"]
    assert list(demand["demand_multiplier"]) == [0.7, 1.5] and not demand["includes_base"].any()


def test_named_axes_keep_the_order_the_grid_gives():
    results = _results().assign(pricing=["reserved", np.nan, "spot", np.nan, "on_demand", np.nan,
                                         np.nan])
    assert list(pivots(results, ["pricing"])["pricing"]["pricing"]) == ["reserved", "spot",
                                                                       "on_demand"]


def test_a_grid_with_nothing_solved_has_empty_by_tables():
    failed = _results().assign(status="infeasible")
    for table in pivots(failed, AXES, {"demand_multiplier": 1.0}).values():
        assert table.empty and "includes_base" in table


def test_the_base_scenarios_values_on_each_axis():
    """The example's workloads share no SLO and one of them has a histogram, so only the
    multipliers and a cap the base sets have a base value; a scenario whose workloads share an
    SLO has it too."""
    example = example_data()
    columns = ["demand_multiplier", "tpot_slo_ms", "input_tokens", "monthly_growth",
               "price_multiplier[l40s]", "max_gpus[h100-sxm]", "max_gpus[l40s]", "pricing"]
    assert example["fleet"]["gpus"][0] == {**example["fleet"]["gpus"][0], "id": "h100-sxm",
                                           "max_gpus": 48}
    assert base_axis_values(validate_scenario(example), columns) == {
        "demand_multiplier": 1.0, "monthly_growth": 0.0, "price_multiplier[l40s]": 1.0,
        "max_gpus[h100-sxm]": 48.0}
    for workload in example["workloads"]:
        workload["tpot_slo_ms"] = 45
    assert base_axis_values(validate_scenario(example), ["tpot_slo_ms"]) == {"tpot_slo_ms": 45.0}


def test_the_by_sheet_says_where_the_base_case_stands(tmp_path):
    path = write_grid_xlsx(_results(), tmp_path / "grid.xlsx", axes=AXES, base_fleet=None,
                           metadata={"base": "test"}, base_usd_per_month=100.0,
                           base_values={"demand_multiplier": 1.0})
    ws = openpyxl.load_workbook(path)["By demand_multiplier"]
    notes = [c.value for c in ws["A"][:4] if isinstance(c.value, str)]
    assert any("base scenario, which changes no input, is counted at 1." in n for n in notes)
    tpot = openpyxl.load_workbook(path)["By tpot_slo_ms"]
    assert not any("base scenario" in str(c.value) for c in tpot["A"][:4])


@pytest.mark.parametrize(("engine_axis", "engines", "base_plan"),
                         [(False, {"vllm", "*"}, True), (True, None, False)])
def test_the_grid_command_places_the_base_and_lists_its_engines_rows(tmp_path, engine_axis,
                                                                     engines, base_plan):
    """A grid of named cases around the example: its By sheet counts the base at demand 1, and
    Sources lists the default engine's efficiency rows, or every engine's when a case changes
    the engine; with or without the base plan, the rows of the workloads' models and
    quantizations and of every GPU a case runs, with its prices."""
    engine_case = "  - {name: trt, engine: tensorrt-llm}\n" if engine_axis else ""
    grid = tmp_path / "grid.yaml"
    grid.write_text("base: example\ncases:\n  - {name: base}\n  - {name: low, demand_multiplier: "
                    "0.5}\n" + engine_case)
    output = tmp_path / "grid.xlsx"
    flags = [] if base_plan else ["--no-base-plan"]
    assert main(["whatif", str(grid), "-o", str(output), "--workers", "1", *flags]) == 0
    book = openpyxl.load_workbook(output)
    by = pd.read_excel(output, sheet_name="By demand_multiplier", header=3)
    assert list(by["Demand multiplier"]) == [0.5, 1.0]
    scenarios = pd.read_excel(output, sheet_name="Scenarios").set_index("Name")
    assert math.isclose(by["Cost, mean (USD/month)"].iloc[1],
                        scenarios.loc["base", "Cost (USD/month)"])
    keys: dict[str, set[str]] = {}
    for row in book["Sources"].iter_rows(values_only=True):
        keys.setdefault(str(row[0]), set()).update(expanded_keys(str(row[1])))
    listed = {key.split("/")[0] for key in keys["efficiency"]}
    if engines is None:
        assert "tensorrt-llm" in listed
    else:
        assert listed <= engines and "vllm" in listed
    run = {c[len("GPUs "):] for c in scenarios.columns
           if c.startswith("GPUs ") and c != "GPUs at peak" and (scenarios[c] > 0).any()}
    assert run and keys["gpus"] == run
    assert {key.split("/")[0] for key in keys["prices"]} >= run
    workloads = validate_scenario(example_data()).workloads
    assert keys["models"] == {w.model for w in workloads}
    assert keys["quants"] == {q for w in workloads for q in w.quants}


def test_a_grid_whose_only_solved_case_is_the_base_places_it():
    results = _results()
    results.loc[results["name"] != "base", "status"] = "infeasible"
    demand = pivots(results, AXES, {"demand_multiplier": 1.0})["demand_multiplier"]
    assert list(demand["demand_multiplier"]) == [1.0] and demand["includes_base"].all()


def test_scenarios_list_each_cases_inputs_before_its_outputs(tmp_path):
    """A grid whose first case is the base has its inputs' columns after the outputs."""
    results = _results()
    results = results.assign(case_id="a1b2")[["case_id", *[c for c in results if c not in AXES],
                                              *AXES]]
    path = write_grid_xlsx(results, tmp_path / "grid.xlsx", axes=AXES, base_fleet=None,
                           metadata={"base": "test"})
    header = [c.value for c in openpyxl.load_workbook(path)["Scenarios"][1]]
    assert header[:5] == ["Name", "Demand multiplier", "TPOT target (ms)", "Pricing", "Status"]
    assert header[-1] == "Case"  # the key of the case's saved result
    assert list(inputs_first(results, AXES).columns[:4]) == ["name", *AXES]


def test_sources_lists_every_price_row_of_a_gpu_only_other_cases_run(tmp_path, shipped):
    """The base plan's price rows are kept; a GPU only another case runs has no chosen row
    there, so all its price rows are listed; a GPU no case runs is left out."""
    results = _results().assign(**{"gpus_h100-sxm": 4.0, "gpus_l4": [0.0] * 6 + [2.0],
                                   "gpus_l40s": 0.0})
    chosen = {"gpu": "h100-sxm", "provider": "aws", "region": "us-east-1",
              "pricing_type": "on_demand", "source": "a quote", "as_of": "2026-11-01"}
    path = write_grid_xlsx(results, tmp_path / "grid.xlsx", axes=AXES, base_fleet=None,
                           metadata={"base": "test"}, catalogs=shipped, prices_used=[chosen],
                           ids={"model": ["llama-3.1-8b"], "quant": ["bf16"]})
    rows = [r for r in openpyxl.load_workbook(path)["Sources"].iter_rows(values_only=True)
            if r[0] in ("gpus", "prices", "models")]
    prices = {key for r in rows if r[0] == "prices" for key in expanded_keys(str(r[1]))}
    assert "h100-sxm/aws/us-east-1/on_demand" in prices
    h100 = {key for key in prices if key.startswith("h100-sxm/")}
    assert h100 == {"h100-sxm/aws/us-east-1/on_demand"}
    l4 = {key for key in prices if key.startswith("l4/")}
    catalog = shipped.prices[["gpu", "provider", "region", "pricing_type"]].astype(str)
    assert l4 == {"/".join(k) for k in catalog.to_numpy() if k[0] == "l4"} != set()
    assert {r[1] for r in rows if r[0] == "gpus"} == {"h100-sxm", "l4"}
    assert {r[1] for r in rows if r[0] == "models"} == {"llama-3.1-8b"}
