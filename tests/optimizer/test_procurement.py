"""Rent-or-buy comparison and a plan's purchases: figures checked by hand on a small case, the
capital recovery at a cost of capital, and bad input."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fleetplan.cli import main
from fleetplan.errors import InvalidValueError, ScenarioError, UnknownNameError
from fleetplan.optimizer.current_fleet import purchase_usd_per_gpu_hour
from fleetplan.optimizer.current_fleet_inputs import replan_tables
from fleetplan.optimizer.scenario_files import load_scenario, validate_scenario
from fleetplan.sweeps.rent_or_buy import (
    HOURS_PER_MONTH,
    capital_recovery_factor,
    capital_usd_per_month,
    compare,
    monthly_rate,
    rent_prices,
)
from tests.optimizer.test_replan_inputs import EXAMPLE

WORKLOAD = {"model": "llama-3.1-8b", "quant": "fp8", "input_len": 512, "output_len": 256, "tpot_slo_ms": 30.0,
            "ttft_slo_ms": 500.0, "demand_req_s": 40.0}


@pytest.fixture(scope="module")
def table(shipped):
    return compare(WORKLOAD, ["h100-sxm", "b200"], shipped, utilization=0.8, usd_per_kwh=0.1, pue=1.5,
                   power_load=0.5)


def test_sizing_and_costs_by_hand(table, shipped):
    row = table.set_index("gpu").loc["h100-sxm"]
    replicas = np.ceil(40.0 / (row["capacity_req_s"] * 0.8))
    assert row["replicas"] == replicas and row["gpus_needed"] == replicas * row["tp"]
    assert row["nodes"] == np.ceil(row["gpus_needed"] / 8)
    on_demand = shipped.prices.query("gpu == 'h100-sxm' and pricing_type == 'on_demand'")["usd_per_gpu_hour"].min()
    assert row["rent_on_demand_usd_per_month"] == pytest.approx(row["gpus_needed"] * on_demand * HOURS_PER_MONTH)
    server = shipped.ownership.set_index("gpu").loc["h100-sxm"]
    power = row["nodes"] * server["node_power_kw"] * 0.5 * 1.5 * HOURS_PER_MONTH * 0.1
    opex = power + row["nodes"] * server["hosting_usd_per_node_month"]
    assert row["buy_opex_usd_per_month"] == pytest.approx(opex)
    assert row["buy_usd_per_month"] == pytest.approx(row["nodes"] * server["usd_per_node"] / 60 + opex)
    assert row["tco_3y_buy_usd"] == pytest.approx(row["nodes"] * server["usd_per_node"] + 36 * opex)
    assert row["tco_1y_on_demand_usd"] == pytest.approx(12 * row["rent_on_demand_usd_per_month"])
    saving = row["rent_on_demand_usd_per_month"] - opex
    months = row["nodes"] * server["usd_per_node"] / saving if saving > 0 else np.inf
    assert row["break_even_months_vs_on_demand"] == pytest.approx(months)
    tokens = 40.0 * 256 * HOURS_PER_MONTH * 3600
    assert row["usd_per_m_output_tokens_on_demand"] == pytest.approx(row["rent_on_demand_usd_per_month"] / tokens * 1e6)


def test_capacity_meets_the_slos(table):
    from fleetplan.sweeps import estimate_cases

    row = table.set_index("gpu").loc["b200"]
    check = estimate_cases(pd.DataFrame([{**{k: v for k, v in WORKLOAD.items() if k != "demand_req_s"},
                                          "gpu": "b200", "tp": int(row["tp"]),
                                          "rate_req_s": row["capacity_req_s"], "mode": "rate"}]))
    assert check["tpot_ms"].iloc[0] <= 30.0 + 1e-6 and check["ttft_ms"].iloc[0] <= 500.0 + 1e-6


def test_more_demand_never_needs_fewer_gpus(shipped):
    small = compare({**WORKLOAD, "demand_req_s": 10.0}, ["h100-sxm"], shipped)
    large = compare({**WORKLOAD, "demand_req_s": 100.0}, ["h100-sxm"], shipped)
    assert large["gpus_needed"].iloc[0] >= small["gpus_needed"].iloc[0]
    assert large["tco_3y_buy_usd"].iloc[0] >= small["tco_3y_buy_usd"].iloc[0]


def test_rent_prices_keep_their_source(shipped):
    cheapest = rent_prices(shipped, ["h100-sxm"])
    row = cheapest.loc[("h100-sxm", "on_demand")]
    assert row["usd_per_gpu_hour"] == shipped.prices.query(
        "gpu == 'h100-sxm' and pricing_type == 'on_demand'")["usd_per_gpu_hour"].min()
    assert row["source"]


@pytest.mark.parametrize(("change", "error", "match"), [
    ({"demand_req_s": 0.0}, InvalidValueError, "demand_req_s must be > 0, got 0"),
    ({"tpot_slo_ms": 0.5}, InvalidValueError, "no GPU option can serve this workload"),
])
def test_bad_workloads(shipped, change, error, match):
    with pytest.raises(error, match=match):
        compare({**WORKLOAD, **change}, ["h100-sxm"], shipped)


def test_bad_options(shipped):
    with pytest.raises(InvalidValueError, match="utilization must be > 0 and <= 1, got 1.5"):
        compare(WORKLOAD, ["h100-sxm"], shipped, utilization=1.5)
    with pytest.raises(UnknownNameError, match="unknown gpu 'h300'"):
        compare(WORKLOAD, ["h300"], shipped)


def test_cli(tmp_path, capsys):
    out = tmp_path / "compare.csv"
    code = main(["compare", "--model", "llama-3.1-8b", "--quant", "fp8", "--gpus", "h100-sxm,b200",
                 "--demand-req-s", "40", "--tpot-slo-ms", "30", "-o", str(out)])
    assert code == 0 and "break-even" in capsys.readouterr().out
    assert list(pd.read_csv(out)["gpu"]) == ["h100-sxm", "b200"]
    assert main(["compare", "--model", "llama-3.1-8b", "--gpus", "h100-sxm", "--demand-req-s", "4", "-o",
                 str(tmp_path / "x.txt")]) == 2


def test_capital_recovery_known_values():
    # a $1,000 loan at 10% is repaid by 10 yearly payments of $163 (Wikipedia's example)
    assert 1000 * capital_recovery_factor(0.10, 10) == pytest.approx(162.745, abs=1e-3)
    assert capital_recovery_factor(0.0, 60) == pytest.approx(1 / 60)
    assert (1 + monthly_rate(0.08)) ** 12 == pytest.approx(1.08)
    assert capital_usd_per_month(240_000.0, 5, 0.0, 0.25) == pytest.approx(3000.0)


@given(price=st.floats(1e3, 1e7), life=st.floats(1, 10), rate=st.floats(0, 1),
       resale=st.floats(0, 1))
@example(price=1e3, life=1.0, rate=0.0, resale=1.0)
@example(price=1e7, life=10.0, rate=1.0, resale=0.0)
def test_the_payments_are_worth_the_price_less_the_resale(price, life, rate, resale):
    """Discounted at the cost of capital, the monthly payments and the resale at the end of the
    life are worth the price today."""
    months = int(round(12 * life))
    life = months / 12
    r = float(monthly_rate(rate))
    payment = float(capital_usd_per_month(price, life, rate, resale))
    discount = (1 + r) ** -np.arange(1, months + 1)
    worth = payment * discount.sum() + resale * price * (1 + r) ** -months
    assert worth == pytest.approx(price, rel=1e-9)


def test_financing_raises_the_cost_of_buying_and_resale_lowers_it(shipped, table):
    financed = compare(WORKLOAD, ["h100-sxm", "b200"], shipped, utilization=0.8, usd_per_kwh=0.1,
                       pue=1.5, power_load=0.5, cost_of_capital=0.08, residual_value=0.1)
    server = shipped.ownership.set_index("gpu").loc["h100-sxm"]
    plain, row = table.set_index("gpu").loc["h100-sxm"], financed.set_index("gpu").loc["h100-sxm"]
    capital = row["nodes"] * capital_usd_per_month(server["usd_per_node"], server["life_years"],
                                                   0.08, 0.1)
    assert row["buy_capital_usd_per_month"] == pytest.approx(capital)
    assert row["buy_usd_per_month"] == pytest.approx(capital + row["buy_opex_usd_per_month"])
    straight_line = row["nodes"] * server["usd_per_node"] / 60
    assert plain["buy_capital_usd_per_month"] == pytest.approx(straight_line)
    assert row["buy_usd_per_month"] > plain["buy_usd_per_month"]
    assert row["tco_3y_buy_usd"] == plain["tco_3y_buy_usd"]  # cash paid: undiscounted, no resale
    assert (financed["cost_of_capital"] == 0.08).all() and (financed["residual_value"] == 0.1).all()
    resold = compare(WORKLOAD, ["h100-sxm"], shipped, residual_value=0.5)
    assert resold["buy_capital_usd_per_month"].iloc[0] == pytest.approx(
        resold["nodes"].iloc[0] * server["usd_per_node"] * 0.5 / 60)


@pytest.mark.parametrize(("option", "value", "match"), [
    ("cost_of_capital", 1.5, "cost_of_capital must be >= 0 and <= 1, got 1.5"),
    ("cost_of_capital", -0.01, "cost_of_capital must be >= 0 and <= 1, got -0.01"),
    ("cost_of_capital", float("inf"), "cost_of_capital must be a finite number, got inf"),
    ("residual_value", 2.0, "residual_value must be >= 0 and <= 1, got 2"),
])
def test_bad_financing(shipped, option, value, match):
    with pytest.raises(InvalidValueError, match=match):
        compare(WORKLOAD, ["h100-sxm"], shipped, **{option: value})


def test_the_compare_command_refuses_bad_financing_and_states_the_basis(capsys):
    args = ["compare", "--model", "llama-3.1-8b", "--gpus", "h100-sxm", "--demand-req-s", "20"]
    assert main([*args, "--cost-of-capital", "1.5"]) == 2
    assert "cost_of_capital must be >= 0 and <= 1, got 1.5" in capsys.readouterr().err
    assert main([*args, "--cost-of-capital", "0.08", "--residual-value", "0.1"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert ("recovered over their life at a cost of capital of 8.0% a year, less a resale value "
            "of 10% of the price") in printed


def _replan_example(**fleet):
    data = load_scenario(EXAMPLE).model_dump(mode="json")
    data["fleet"].update(fleet)
    return validate_scenario(data, source="test")


def test_a_plans_purchases_are_priced_at_its_cost_of_capital(shipped):
    """The re-planning example buys H100 servers: their price per GPU-hour is the compare
    command's buy cost at the scenario's cost of capital and resale, and says so."""
    scenario = _replan_example(cost_of_capital=0.08, residual_value=0.1)
    tables = replan_tables(scenario, shipped, ["h100-sxm", "l40s"])
    offers = tables.offers.set_index(["gpu", "pricing_type"])["usd_per_gpu_hour"]
    server = shipped.ownership.set_index("gpu").loc["h100-sxm"]
    expected = purchase_usd_per_gpu_hour(
        server["usd_per_node"], server["life_years"], server["node_power_kw"],
        server["hosting_usd_per_node_month"], 8, 0.10, scenario.fleet.hours_per_month,
        cost_of_capital=0.08, residual_value=0.1)
    assert offers[("h100-sxm", "purchase")] == pytest.approx(expected)
    plain = replan_tables(_replan_example(), shipped, ["h100-sxm", "l40s"]).offers.set_index(
        ["gpu", "pricing_type"])["usd_per_gpu_hour"]
    assert offers[("h100-sxm", "purchase")] > plain[("h100-sxm", "purchase")]
    assert offers[("h100-sxm", "owned")] == plain[("h100-sxm", "owned")]  # sunk: no capital
    source = tables.prices.set_index(["gpu", "pricing_type"]).loc[("h100-sxm", "purchase"),
                                                                  "source"]
    assert ("price over 5 years at a cost of capital of 8.0% a year, less a resale value of 10%"
            in source)


@pytest.mark.parametrize(("fleet", "match"), [
    ({"cost_of_capital": 1.5}, "fleet.cost_of_capital: must be <= 1, got 1.5"),
    ({"cost_of_capital": float("nan")}, "fleet.cost_of_capital: must be a finite number, got nan"),
    ({"residual_value": -0.2}, "fleet.residual_value: must be >= 0, got -0.2"),
])
def test_bad_financing_in_a_scenario(fleet, match):
    with pytest.raises(ScenarioError, match=match):
        _replan_example(**fleet)


def test_compare_and_a_plan_price_a_bought_gpu_hour_alike(shipped):
    """The same server at the same cost of capital, resale and electricity costs the same per
    GPU-hour in ``fleetplan compare`` (at a plan's PUE and load) and in a plan's purchases."""
    row = compare(WORKLOAD, ["h100-sxm"], shipped, usd_per_kwh=0.1, pue=1.4, power_load=0.75,
                  cost_of_capital=0.08, residual_value=0.1).iloc[0]
    tables = replan_tables(_replan_example(cost_of_capital=0.08, residual_value=0.1), shipped,
                           ["h100-sxm", "l40s"])
    planned = tables.offers.set_index(["gpu", "pricing_type"]).loc[
        ("h100-sxm", "purchase"), "usd_per_gpu_hour"]
    assert row["buy_usd_per_month"] / (row["nodes"] * 8 * HOURS_PER_MONTH) == pytest.approx(planned)
